from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("version", "job_dispatch", "job_outcome", "planner_command")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_DISPATCH_FIELD_NUMBER: _ClassVar[int]
    JOB_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PLANNER_COMMAND_FIELD_NUMBER: _ClassVar[int]
    version: int
    job_dispatch: JobDispatch
    job_outcome: JobOutcome
    planner_command: PlannerCommand
    def __init__(self, version: _Optional[int] = ..., job_dispatch: _Optional[_Union[JobDispatch, _Mapping]] = ..., job_outcome: _Optional[_Union[JobOutcome, _Mapping]] = ..., planner_command: _Optional[_Union[PlannerCommand, _Mapping]] = ...) -> None: ...

class JobDispatch(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class JobOutcome(_message.Message):
    __slots__ = ("job_id", "attempt", "started", "succeeded", "failed")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt: int
    started: JobStarted
    succeeded: JobSucceeded
    failed: JobFailed
    def __init__(self, job_id: _Optional[str] = ..., attempt: _Optional[int] = ..., started: _Optional[_Union[JobStarted, _Mapping]] = ..., succeeded: _Optional[_Union[JobSucceeded, _Mapping]] = ..., failed: _Optional[_Union[JobFailed, _Mapping]] = ...) -> None: ...

class JobStarted(_message.Message):
    __slots__ = ("worker",)
    WORKER_FIELD_NUMBER: _ClassVar[int]
    worker: str
    def __init__(self, worker: _Optional[str] = ...) -> None: ...

class JobSucceeded(_message.Message):
    __slots__ = ("contribution_id", "resource_id", "finish_reason", "continuation_needed", "skip_steps", "blackboard", "confidence", "clarifications")
    CONTRIBUTION_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_NEEDED_FIELD_NUMBER: _ClassVar[int]
    SKIP_STEPS_FIELD_NUMBER: _ClassVar[int]
    BLACKBOARD_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    CLARIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    contribution_id: str
    resource_id: str
    finish_reason: str
    continuation_needed: bool
    skip_steps: _containers.RepeatedCompositeFieldContainer[SkipStep]
    blackboard: _containers.RepeatedCompositeFieldContainer[BoardEntry]
    confidence: float
    clarifications: _containers.RepeatedCompositeFieldContainer[ClarificationRequest]
    def __init__(self, contribution_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., finish_reason: _Optional[str] = ..., continuation_needed: _Optional[bool] = ..., skip_steps: _Optional[_Iterable[_Union[SkipStep, _Mapping]]] = ..., blackboard: _Optional[_Iterable[_Union[BoardEntry, _Mapping]]] = ..., confidence: _Optional[float] = ..., clarifications: _Optional[_Iterable[_Union[ClarificationRequest, _Mapping]]] = ...) -> None: ...

class ClarificationRequest(_message.Message):
    __slots__ = ("step_key", "question")
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    step_key: str
    question: str
    def __init__(self, step_key: _Optional[str] = ..., question: _Optional[str] = ...) -> None: ...

class BoardEntry(_message.Message):
    __slots__ = ("entry_type", "data_json")
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    entry_type: str
    data_json: str
    def __init__(self, entry_type: _Optional[str] = ..., data_json: _Optional[str] = ...) -> None: ...

class SkipStep(_message.Message):
    __slots__ = ("step_key", "reason")
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    step_key: str
    reason: str
    def __init__(self, step_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobFailed(_message.Message):
    __slots__ = ("error_code", "message", "retryable")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    error_code: str
    message: str
    retryable: bool
    def __init__(self, error_code: _Optional[str] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...

class PlannerCommand(_message.Message):
    __slots__ = ("start_stage", "resume_session", "render_edit")
    START_STAGE_FIELD_NUMBER: _ClassVar[int]
    RESUME_SESSION_FIELD_NUMBER: _ClassVar[int]
    RENDER_EDIT_FIELD_NUMBER: _ClassVar[int]
    start_stage: StartStage
    resume_session: ResumeSession
    render_edit: RenderEdit
    def __init__(self, start_stage: _Optional[_Union[StartStage, _Mapping]] = ..., resume_session: _Optional[_Union[ResumeSession, _Mapping]] = ..., render_edit: _Optional[_Union[RenderEdit, _Mapping]] = ...) -> None: ...

class RenderEdit(_message.Message):
    __slots__ = ("edit_contribution_id",)
    EDIT_CONTRIBUTION_ID_FIELD_NUMBER: _ClassVar[int]
    edit_contribution_id: str
    def __init__(self, edit_contribution_id: _Optional[str] = ...) -> None: ...

class ResumeSession(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class StartStage(_message.Message):
    __slots__ = ("session_id", "stage_slug", "iteration")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    iteration: int
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., iteration: _Optional[int] = ...) -> None: ...
