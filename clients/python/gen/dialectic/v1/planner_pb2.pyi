from dialectic.v1 import gateway_pb2 as _gateway_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SweepNowRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SweepNowResponse(_message.Message):
    __slots__ = ("expired_leases", "retries_dispatched")
    EXPIRED_LEASES_FIELD_NUMBER: _ClassVar[int]
    RETRIES_DISPATCHED_FIELD_NUMBER: _ClassVar[int]
    expired_leases: int
    retries_dispatched: int
    def __init__(self, expired_leases: _Optional[int] = ..., retries_dispatched: _Optional[int] = ...) -> None: ...

class SessionCommand(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionCommandResult(_message.Message):
    __slots__ = ("session_id", "status")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    status: str
    def __init__(self, session_id: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class SubmitStageResponsesCommand(_message.Message):
    __slots__ = ("session_id", "user_id", "stage_slug", "feedback")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    user_id: str
    stage_slug: str
    feedback: str
    def __init__(self, session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., feedback: _Optional[str] = ...) -> None: ...

class RevisitStageCommand(_message.Message):
    __slots__ = ("session_id", "stage_slug", "impact", "reason", "dry_run")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    IMPACT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    impact: str
    reason: str
    dry_run: bool
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., impact: _Optional[str] = ..., reason: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RevisitStageResult(_message.Message):
    __slots__ = ("needs_review", "archived", "revision", "previews", "diffs")
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    PREVIEWS_FIELD_NUMBER: _ClassVar[int]
    DIFFS_FIELD_NUMBER: _ClassVar[int]
    needs_review: _containers.RepeatedScalarFieldContainer[str]
    archived: _containers.RepeatedScalarFieldContainer[str]
    revision: int
    previews: _containers.RepeatedCompositeFieldContainer[_gateway_pb2.RevisitPreview]
    diffs: _containers.RepeatedCompositeFieldContainer[_gateway_pb2.RevisionDiff]
    def __init__(self, needs_review: _Optional[_Iterable[str]] = ..., archived: _Optional[_Iterable[str]] = ..., revision: _Optional[int] = ..., previews: _Optional[_Iterable[_Union[_gateway_pb2.RevisitPreview, _Mapping]]] = ..., diffs: _Optional[_Iterable[_Union[_gateway_pb2.RevisionDiff, _Mapping]]] = ...) -> None: ...

class RegenerateDocumentCommand(_message.Message):
    __slots__ = ("session_id", "user_id", "stage_slug", "model_id", "document_key", "resource_id", "document_identity", "template_job_id", "client_request_id", "model_name")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    user_id: str
    stage_slug: str
    model_id: str
    document_key: str
    resource_id: str
    document_identity: str
    template_job_id: str
    client_request_id: str
    model_name: str
    def __init__(self, session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., model_id: _Optional[str] = ..., document_key: _Optional[str] = ..., resource_id: _Optional[str] = ..., document_identity: _Optional[str] = ..., template_job_id: _Optional[str] = ..., client_request_id: _Optional[str] = ..., model_name: _Optional[str] = ...) -> None: ...

class RegenerateDocumentResult(_message.Message):
    __slots__ = ("created", "regeneration_id", "job_id", "superseded_job_ids")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REGENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    created: bool
    regeneration_id: str
    job_id: str
    superseded_job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, created: _Optional[bool] = ..., regeneration_id: _Optional[str] = ..., job_id: _Optional[str] = ..., superseded_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteProjectCommand(_message.Message):
    __slots__ = ("project_id", "user_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    user_id: str
    def __init__(self, project_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class DeleteProjectResult(_message.Message):
    __slots__ = ("project_id",)
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    def __init__(self, project_id: _Optional[str] = ...) -> None: ...

class RetryStageCommand(_message.Message):
    __slots__ = ("session_id", "stage_slug", "user_id", "model")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    user_id: str
    model: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., user_id: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class RetryStageResult(_message.Message):
    __slots__ = ("session_id", "status", "retried_job_ids", "reopened_jobs", "stage_slug")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RETRIED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REOPENED_JOBS_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    status: str
    retried_job_ids: _containers.RepeatedScalarFieldContainer[str]
    reopened_jobs: int
    stage_slug: str
    def __init__(self, session_id: _Optional[str] = ..., status: _Optional[str] = ..., retried_job_ids: _Optional[_Iterable[str]] = ..., reopened_jobs: _Optional[int] = ..., stage_slug: _Optional[str] = ...) -> None: ...
