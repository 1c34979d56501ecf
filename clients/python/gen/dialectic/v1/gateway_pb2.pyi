import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DependencyKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_KIND_UNSPECIFIED: _ClassVar[DependencyKind]
    DEPENDENCY_KIND_CROSS_REFERENCE: _ClassVar[DependencyKind]
    DEPENDENCY_KIND_DEFINED_TERM: _ClassVar[DependencyKind]
    DEPENDENCY_KIND_PAYMENT_SCHEDULE: _ClassVar[DependencyKind]
    DEPENDENCY_KIND_CONDITION: _ClassVar[DependencyKind]
    DEPENDENCY_KIND_EXHIBIT: _ClassVar[DependencyKind]

class ConflictKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_KIND_UNSPECIFIED: _ClassVar[ConflictKind]
    CONFLICT_KIND_CONTRADICTION: _ClassVar[ConflictKind]
    CONFLICT_KIND_STALE_REFERENCE: _ClassVar[ConflictKind]
    CONFLICT_KIND_BUDGET_MISMATCH: _ClassVar[ConflictKind]
    CONFLICT_KIND_DATE_INCONSISTENCY: _ClassVar[ConflictKind]
    CONFLICT_KIND_AMBIGUITY: _ClassVar[ConflictKind]

class ConflictSeverity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_SEVERITY_UNSPECIFIED: _ClassVar[ConflictSeverity]
    CONFLICT_SEVERITY_LOW: _ClassVar[ConflictSeverity]
    CONFLICT_SEVERITY_MEDIUM: _ClassVar[ConflictSeverity]
    CONFLICT_SEVERITY_HIGH: _ClassVar[ConflictSeverity]
    CONFLICT_SEVERITY_CRITICAL: _ClassVar[ConflictSeverity]

class CitationSourceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CITATION_SOURCE_KIND_UNSPECIFIED: _ClassVar[CitationSourceKind]
    CITATION_SOURCE_KIND_UPLOADED_DOCUMENT: _ClassVar[CitationSourceKind]
    CITATION_SOURCE_KIND_RENDERED_DOCUMENT: _ClassVar[CitationSourceKind]
    CITATION_SOURCE_KIND_CONTRIBUTION: _ClassVar[CitationSourceKind]
    CITATION_SOURCE_KIND_BLACKBOARD_ENTRY: _ClassVar[CitationSourceKind]

class UploadStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UPLOAD_STAGE_UNSPECIFIED: _ClassVar[UploadStage]
    UPLOAD_STAGE_CONVERTING: _ClassVar[UploadStage]
    UPLOAD_STAGE_INDEXING: _ClassVar[UploadStage]
    UPLOAD_STAGE_STORED: _ClassVar[UploadStage]
    UPLOAD_STAGE_FAILED: _ClassVar[UploadStage]

class DocumentRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_ROLE_UNSPECIFIED: _ClassVar[DocumentRole]
    DOCUMENT_ROLE_SOURCE: _ClassVar[DocumentRole]
    DOCUMENT_ROLE_WRITING_SAMPLE: _ClassVar[DocumentRole]
    DOCUMENT_ROLE_CONTEXT: _ClassVar[DocumentRole]
    DOCUMENT_ROLE_CONSTRAINT: _ClassVar[DocumentRole]
    DOCUMENT_ROLE_SUCCESS_CRITERIA: _ClassVar[DocumentRole]

class Pushback(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PUSHBACK_UNSPECIFIED: _ClassVar[Pushback]
    PUSHBACK_FULL: _ClassVar[Pushback]
    PUSHBACK_LIGHT: _ClassVar[Pushback]
    PUSHBACK_MINIMAL: _ClassVar[Pushback]

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_PENDING: _ClassVar[SessionState]
    SESSION_STATE_RUNNING: _ClassVar[SessionState]
    SESSION_STATE_REVIEW: _ClassVar[SessionState]
    SESSION_STATE_PAUSED: _ClassVar[SessionState]
    SESSION_STATE_ABANDONED: _ClassVar[SessionState]
    SESSION_STATE_FAILED: _ClassVar[SessionState]
    SESSION_STATE_COMPLETED: _ClassVar[SessionState]

class JobType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_TYPE_UNSPECIFIED: _ClassVar[JobType]
    JOB_TYPE_PLAN: _ClassVar[JobType]
    JOB_TYPE_EXECUTE: _ClassVar[JobType]
    JOB_TYPE_RENDER: _ClassVar[JobType]

class TransactionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_KIND_UNSPECIFIED: _ClassVar[TransactionKind]
    TRANSACTION_KIND_CREDIT: _ClassVar[TransactionKind]
    TRANSACTION_KIND_HOLD: _ClassVar[TransactionKind]
    TRANSACTION_KIND_CAPTURE: _ClassVar[TransactionKind]
    TRANSACTION_KIND_RELEASE: _ClassVar[TransactionKind]
    TRANSACTION_KIND_DEBIT: _ClassVar[TransactionKind]

class SessionEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_EVENT_KIND_UNSPECIFIED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SNAPSHOT: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_STATUS: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_PAUSED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_RESUMED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_CANCELLED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_ABANDONED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_IDLE_WARNING: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_STAGE_STARTED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_STAGE_COMPLETED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_STAGE_FAILED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_JOB_STARTED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_JOB_STATUS: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_CONTINUATION_QUEUED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_RENDER_COMPLETED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_CONTEXT_COMPRESSED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_WALLET_INSUFFICIENT: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_DOCUMENT_REGENERATION_STARTED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_STEP_SKIPPED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SKIP_IGNORED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_BLACKBOARD_ENTRY: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_CONFIDENCE_RERUN: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_LOW_CONFIDENCE: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_CLARIFICATION_REQUESTED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_CLARIFICATION_IGNORED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_STAGE_RETRIED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_SESSION_COMPLETED: _ClassVar[SessionEventKind]
    SESSION_EVENT_KIND_HEARTBEAT: _ClassVar[SessionEventKind]

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_PENDING: _ClassVar[JobStatus]
    JOB_STATUS_PROCESSING: _ClassVar[JobStatus]
    JOB_STATUS_WAITING_FOR_PREREQUISITE: _ClassVar[JobStatus]
    JOB_STATUS_WAITING_FOR_CHILDREN: _ClassVar[JobStatus]
    JOB_STATUS_PENDING_NEXT_STEP: _ClassVar[JobStatus]
    JOB_STATUS_PENDING_CONTINUATION: _ClassVar[JobStatus]
    JOB_STATUS_RETRYING: _ClassVar[JobStatus]
    JOB_STATUS_COMPLETED: _ClassVar[JobStatus]
    JOB_STATUS_FAILED: _ClassVar[JobStatus]
    JOB_STATUS_RETRY_LOOP_FAILED: _ClassVar[JobStatus]
    JOB_STATUS_PAUSED_NSF: _ClassVar[JobStatus]
    JOB_STATUS_SUPERSEDED: _ClassVar[JobStatus]

class RevisitImpact(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVISIT_IMPACT_UNSPECIFIED: _ClassVar[RevisitImpact]
    REVISIT_IMPACT_MINOR: _ClassVar[RevisitImpact]
    REVISIT_IMPACT_MODERATE: _ClassVar[RevisitImpact]
    REVISIT_IMPACT_MAJOR: _ClassVar[RevisitImpact]
DEPENDENCY_KIND_UNSPECIFIED: DependencyKind
DEPENDENCY_KIND_CROSS_REFERENCE: DependencyKind
DEPENDENCY_KIND_DEFINED_TERM: DependencyKind
DEPENDENCY_KIND_PAYMENT_SCHEDULE: DependencyKind
DEPENDENCY_KIND_CONDITION: DependencyKind
DEPENDENCY_KIND_EXHIBIT: DependencyKind
CONFLICT_KIND_UNSPECIFIED: ConflictKind
CONFLICT_KIND_CONTRADICTION: ConflictKind
CONFLICT_KIND_STALE_REFERENCE: ConflictKind
CONFLICT_KIND_BUDGET_MISMATCH: ConflictKind
CONFLICT_KIND_DATE_INCONSISTENCY: ConflictKind
CONFLICT_KIND_AMBIGUITY: ConflictKind
CONFLICT_SEVERITY_UNSPECIFIED: ConflictSeverity
CONFLICT_SEVERITY_LOW: ConflictSeverity
CONFLICT_SEVERITY_MEDIUM: ConflictSeverity
CONFLICT_SEVERITY_HIGH: ConflictSeverity
CONFLICT_SEVERITY_CRITICAL: ConflictSeverity
CITATION_SOURCE_KIND_UNSPECIFIED: CitationSourceKind
CITATION_SOURCE_KIND_UPLOADED_DOCUMENT: CitationSourceKind
CITATION_SOURCE_KIND_RENDERED_DOCUMENT: CitationSourceKind
CITATION_SOURCE_KIND_CONTRIBUTION: CitationSourceKind
CITATION_SOURCE_KIND_BLACKBOARD_ENTRY: CitationSourceKind
UPLOAD_STAGE_UNSPECIFIED: UploadStage
UPLOAD_STAGE_CONVERTING: UploadStage
UPLOAD_STAGE_INDEXING: UploadStage
UPLOAD_STAGE_STORED: UploadStage
UPLOAD_STAGE_FAILED: UploadStage
DOCUMENT_ROLE_UNSPECIFIED: DocumentRole
DOCUMENT_ROLE_SOURCE: DocumentRole
DOCUMENT_ROLE_WRITING_SAMPLE: DocumentRole
DOCUMENT_ROLE_CONTEXT: DocumentRole
DOCUMENT_ROLE_CONSTRAINT: DocumentRole
DOCUMENT_ROLE_SUCCESS_CRITERIA: DocumentRole
PUSHBACK_UNSPECIFIED: Pushback
PUSHBACK_FULL: Pushback
PUSHBACK_LIGHT: Pushback
PUSHBACK_MINIMAL: Pushback
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_PENDING: SessionState
SESSION_STATE_RUNNING: SessionState
SESSION_STATE_REVIEW: SessionState
SESSION_STATE_PAUSED: SessionState
SESSION_STATE_ABANDONED: SessionState
SESSION_STATE_FAILED: SessionState
SESSION_STATE_COMPLETED: SessionState
JOB_TYPE_UNSPECIFIED: JobType
JOB_TYPE_PLAN: JobType
JOB_TYPE_EXECUTE: JobType
JOB_TYPE_RENDER: JobType
TRANSACTION_KIND_UNSPECIFIED: TransactionKind
TRANSACTION_KIND_CREDIT: TransactionKind
TRANSACTION_KIND_HOLD: TransactionKind
TRANSACTION_KIND_CAPTURE: TransactionKind
TRANSACTION_KIND_RELEASE: TransactionKind
TRANSACTION_KIND_DEBIT: TransactionKind
SESSION_EVENT_KIND_UNSPECIFIED: SessionEventKind
SESSION_EVENT_KIND_SNAPSHOT: SessionEventKind
SESSION_EVENT_KIND_SESSION_STATUS: SessionEventKind
SESSION_EVENT_KIND_SESSION_PAUSED: SessionEventKind
SESSION_EVENT_KIND_SESSION_RESUMED: SessionEventKind
SESSION_EVENT_KIND_SESSION_CANCELLED: SessionEventKind
SESSION_EVENT_KIND_SESSION_ABANDONED: SessionEventKind
SESSION_EVENT_KIND_IDLE_WARNING: SessionEventKind
SESSION_EVENT_KIND_STAGE_STARTED: SessionEventKind
SESSION_EVENT_KIND_STAGE_COMPLETED: SessionEventKind
SESSION_EVENT_KIND_STAGE_FAILED: SessionEventKind
SESSION_EVENT_KIND_JOB_STARTED: SessionEventKind
SESSION_EVENT_KIND_JOB_STATUS: SessionEventKind
SESSION_EVENT_KIND_CONTINUATION_QUEUED: SessionEventKind
SESSION_EVENT_KIND_RENDER_COMPLETED: SessionEventKind
SESSION_EVENT_KIND_CONTEXT_COMPRESSED: SessionEventKind
SESSION_EVENT_KIND_WALLET_INSUFFICIENT: SessionEventKind
SESSION_EVENT_KIND_DOCUMENT_REGENERATION_STARTED: SessionEventKind
SESSION_EVENT_KIND_STEP_SKIPPED: SessionEventKind
SESSION_EVENT_KIND_SKIP_IGNORED: SessionEventKind
SESSION_EVENT_KIND_BLACKBOARD_ENTRY: SessionEventKind
SESSION_EVENT_KIND_CONFIDENCE_RERUN: SessionEventKind
SESSION_EVENT_KIND_LOW_CONFIDENCE: SessionEventKind
SESSION_EVENT_KIND_CLARIFICATION_REQUESTED: SessionEventKind
SESSION_EVENT_KIND_CLARIFICATION_IGNORED: SessionEventKind
SESSION_EVENT_KIND_STAGE_RETRIED: SessionEventKind
SESSION_EVENT_KIND_SESSION_COMPLETED: SessionEventKind
SESSION_EVENT_KIND_HEARTBEAT: SessionEventKind
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_PENDING: JobStatus
JOB_STATUS_PROCESSING: JobStatus
JOB_STATUS_WAITING_FOR_PREREQUISITE: JobStatus
JOB_STATUS_WAITING_FOR_CHILDREN: JobStatus
JOB_STATUS_PENDING_NEXT_STEP: JobStatus
JOB_STATUS_PENDING_CONTINUATION: JobStatus
JOB_STATUS_RETRYING: JobStatus
JOB_STATUS_COMPLETED: JobStatus
JOB_STATUS_FAILED: JobStatus
JOB_STATUS_RETRY_LOOP_FAILED: JobStatus
JOB_STATUS_PAUSED_NSF: JobStatus
JOB_STATUS_SUPERSEDED: JobStatus
REVISIT_IMPACT_UNSPECIFIED: RevisitImpact
REVISIT_IMPACT_MINOR: RevisitImpact
REVISIT_IMPACT_MODERATE: RevisitImpact
REVISIT_IMPACT_MAJOR: RevisitImpact

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("version", "build", "api", "features", "limits")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BUILD_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    version: str
    build: str
    api: str
    features: _containers.RepeatedScalarFieldContainer[str]
    limits: ServerLimits
    def __init__(self, version: _Optional[str] = ..., build: _Optional[str] = ..., api: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., limits: _Optional[_Union[ServerLimits, _Mapping]] = ...) -> None: ...

class ServerLimits(_message.Message):
    __slots__ = ("max_message_bytes", "max_prompt_bytes", "max_documents_per_project", "max_document_bytes_per_project", "max_projects_per_user", "max_document_bytes_per_user", "max_upload_pages", "max_upload_unpacked_bytes", "max_watches_per_user", "max_exports_per_user", "max_export_bytes", "max_page_size", "default_page_size")
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PROMPT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_DOCUMENTS_PER_PROJECT_FIELD_NUMBER: _ClassVar[int]
    MAX_DOCUMENT_BYTES_PER_PROJECT_FIELD_NUMBER: _ClassVar[int]
    MAX_PROJECTS_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_DOCUMENT_BYTES_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_UPLOAD_PAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_UPLOAD_UNPACKED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WATCHES_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_EXPORTS_PER_USER_FIELD_NUMBER: _ClassVar[int]
    MAX_EXPORT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    max_message_bytes: int
    max_prompt_bytes: int
    max_documents_per_project: int
    max_document_bytes_per_project: int
    max_projects_per_user: int
    max_document_bytes_per_user: int
    max_upload_pages: int
    max_upload_unpacked_bytes: int
    max_watches_per_user: int
    max_exports_per_user: int
    max_export_bytes: int
    max_page_size: int
    default_page_size: int
    def __init__(self, max_message_bytes: _Optional[int] = ..., max_prompt_bytes: _Optional[int] = ..., max_documents_per_project: _Optional[int] = ..., max_document_bytes_per_project: _Optional[int] = ..., max_projects_per_user: _Optional[int] = ..., max_document_bytes_per_user: _Optional[int] = ..., max_upload_pages: _Optional[int] = ..., max_upload_unpacked_bytes: _Optional[int] = ..., max_watches_per_user: _Optional[int] = ..., max_exports_per_user: _Optional[int] = ..., max_export_bytes: _Optional[int] = ..., max_page_size: _Optional[int] = ..., default_page_size: _Optional[int] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("project_id", "text", "model", "client_request_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    text: str
    model: str
    client_request_id: str
    def __init__(self, project_id: _Optional[str] = ..., text: _Optional[str] = ..., model: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class ListQueryHistoryRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class QueryHistoryEntry(_message.Message):
    __slots__ = ("query_id", "text", "response", "latency_ms", "model", "user_id", "asked_at")
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ASKED_AT_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    text: str
    response: QueryResponse
    latency_ms: int
    model: str
    user_id: str
    asked_at: _timestamp_pb2.Timestamp
    def __init__(self, query_id: _Optional[str] = ..., text: _Optional[str] = ..., response: _Optional[_Union[QueryResponse, _Mapping]] = ..., latency_ms: _Optional[int] = ..., model: _Optional[str] = ..., user_id: _Optional[str] = ..., asked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListQueryHistoryResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[QueryHistoryEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[QueryHistoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetContractAnalysisRequest(_message.Message):
    __slots__ = ("project_id", "session_id", "section")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    session_id: str
    section: str
    def __init__(self, project_id: _Optional[str] = ..., session_id: _Optional[str] = ..., section: _Optional[str] = ...) -> None: ...

class ContractAnalysis(_message.Message):
    __slots__ = ("project_id", "session_id", "iteration", "clauses", "edges", "conflicts")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    CLAUSES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    session_id: str
    iteration: int
    clauses: _containers.RepeatedCompositeFieldContainer[ResolvedClause]
    edges: _containers.RepeatedCompositeFieldContainer[DependencyEdge]
    conflicts: _containers.RepeatedCompositeFieldContainer[ContractConflict]
    def __init__(self, project_id: _Optional[str] = ..., session_id: _Optional[str] = ..., iteration: _Optional[int] = ..., clauses: _Optional[_Iterable[_Union[ResolvedClause, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[DependencyEdge, _Mapping]]] = ..., conflicts: _Optional[_Iterable[_Union[ContractConflict, _Mapping]]] = ...) -> None: ...

class ResolvedClause(_message.Message):
    __slots__ = ("section_number", "section_title", "category", "effective_date", "effective_date_text", "last_changed_by", "content", "confidence", "resource_id")
    SECTION_NUMBER_FIELD_NUMBER: _ClassVar[int]
    SECTION_TITLE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_DATE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_DATE_TEXT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGED_BY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    section_number: str
    section_title: str
    category: str
    effective_date: str
    effective_date_text: str
    last_changed_by: str
    content: str
    confidence: float
    resource_id: str
    def __init__(self, section_number: _Optional[str] = ..., section_title: _Optional[str] = ..., category: _Optional[str] = ..., effective_date: _Optional[str] = ..., effective_date_text: _Optional[str] = ..., last_changed_by: _Optional[str] = ..., content: _Optional[str] = ..., confidence: _Optional[float] = ..., resource_id: _Optional[str] = ...) -> None: ...

class DependencyEdge(_message.Message):
    __slots__ = ("from_section", "to_section", "kind", "kind_text")
    FROM_SECTION_FIELD_NUMBER: _ClassVar[int]
    TO_SECTION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_TEXT_FIELD_NUMBER: _ClassVar[int]
    from_section: str
    to_section: str
    kind: DependencyKind
    kind_text: str
    def __init__(self, from_section: _Optional[str] = ..., to_section: _Optional[str] = ..., kind: _Optional[_Union[DependencyKind, str]] = ..., kind_text: _Optional[str] = ...) -> None: ...

class ContractConflict(_message.Message):
    __slots__ = ("kind", "kind_text", "sections", "documents", "severity", "severity_text", "explanation")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_TEXT_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_TEXT_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    kind: ConflictKind
    kind_text: str
    sections: _containers.RepeatedScalarFieldContainer[str]
    documents: _containers.RepeatedScalarFieldContainer[str]
    severity: ConflictSeverity
    severity_text: str
    explanation: str
    def __init__(self, kind: _Optional[_Union[ConflictKind, str]] = ..., kind_text: _Optional[str] = ..., sections: _Optional[_Iterable[str]] = ..., documents: _Optional[_Iterable[str]] = ..., severity: _Optional[_Union[ConflictSeverity, str]] = ..., severity_text: _Optional[str] = ..., explanation: _Optional[str] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("source_id", "source_name", "chunk_id", "start", "end", "quote", "source_kind", "model_written", "document", "section", "section_title", "effective_date", "page")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KIND_FIELD_NUMBER: _ClassVar[int]
    MODEL_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SECTION_FIELD_NUMBER: _ClassVar[int]
    SECTION_TITLE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_DATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    source_name: str
    chunk_id: str
    start: int
    end: int
    quote: str
    source_kind: CitationSourceKind
    model_written: bool
    document: str
    section: str
    section_title: str
    effective_date: str
    page: int
    def __init__(self, source_id: _Optional[str] = ..., source_name: _Optional[str] = ..., chunk_id: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., quote: _Optional[str] = ..., source_kind: _Optional[_Union[CitationSourceKind, str]] = ..., model_written: _Optional[bool] = ..., document: _Optional[str] = ..., section: _Optional[str] = ..., section_title: _Optional[str] = ..., effective_date: _Optional[str] = ..., page: _Optional[int] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("answer", "citations", "caveats", "confidence", "query_type", "sub_queries", "cached", "cost", "analysis_session_id")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CAVEATS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    QUERY_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_QUERIES_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    caveats: _containers.RepeatedScalarFieldContainer[str]
    confidence: float
    query_type: str
    sub_queries: _containers.RepeatedScalarFieldContainer[str]
    cached: bool
    cost: int
    analysis_session_id: str
    def __init__(self, answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., caveats: _Optional[_Iterable[str]] = ..., confidence: _Optional[float] = ..., query_type: _Optional[str] = ..., sub_queries: _Optional[_Iterable[str]] = ..., cached: _Optional[bool] = ..., cost: _Optional[int] = ..., analysis_session_id: _Optional[str] = ...) -> None: ...

class GetBlackboardRequest(_message.Message):
    __slots__ = ("session_id", "entry_type")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    entry_type: str
    def __init__(self, session_id: _Optional[str] = ..., entry_type: _Optional[str] = ...) -> None: ...

class GetBlackboardResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[BlackboardEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[BlackboardEntry, _Mapping]]] = ...) -> None: ...

class BlackboardEntry(_message.Message):
    __slots__ = ("id", "entry_type", "seq", "iteration", "stage_slug", "step_key", "model", "job_id", "data_json", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_TYPE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    entry_type: str
    seq: int
    iteration: int
    stage_slug: str
    step_key: str
    model: str
    job_id: str
    data_json: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., entry_type: _Optional[str] = ..., seq: _Optional[int] = ..., iteration: _Optional[int] = ..., stage_slug: _Optional[str] = ..., step_key: _Optional[str] = ..., model: _Optional[str] = ..., job_id: _Optional[str] = ..., data_json: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Project(_message.Message):
    __slots__ = ("id", "name", "slug", "initial_user_prompt", "process_template_id", "created_at", "pipeline")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    INITIAL_USER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PROCESS_TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    slug: str
    initial_user_prompt: str
    process_template_id: str
    created_at: _timestamp_pb2.Timestamp
    pipeline: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., slug: _Optional[str] = ..., initial_user_prompt: _Optional[str] = ..., process_template_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pipeline: _Optional[str] = ...) -> None: ...

class CreateProjectRequest(_message.Message):
    __slots__ = ("name", "initial_user_prompt", "client_request_id", "prompt_file", "pipeline")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INITIAL_USER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FILE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    name: str
    initial_user_prompt: str
    client_request_id: str
    prompt_file: PromptFile
    pipeline: str
    def __init__(self, name: _Optional[str] = ..., initial_user_prompt: _Optional[str] = ..., client_request_id: _Optional[str] = ..., prompt_file: _Optional[_Union[PromptFile, _Mapping]] = ..., pipeline: _Optional[str] = ...) -> None: ...

class AddProjectDocumentRequest(_message.Message):
    __slots__ = ("project_id", "file_name", "content", "client_request_id", "role")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    file_name: str
    content: bytes
    client_request_id: str
    role: DocumentRole
    def __init__(self, project_id: _Optional[str] = ..., file_name: _Optional[str] = ..., content: _Optional[bytes] = ..., client_request_id: _Optional[str] = ..., role: _Optional[_Union[DocumentRole, str]] = ...) -> None: ...

class GetUploadProgressRequest(_message.Message):
    __slots__ = ("project_id", "client_request_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    client_request_id: str
    def __init__(self, project_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class UploadProgress(_message.Message):
    __slots__ = ("file_name", "stage", "pages_done", "pages_total", "failure")
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PAGES_DONE_FIELD_NUMBER: _ClassVar[int]
    PAGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    file_name: str
    stage: UploadStage
    pages_done: int
    pages_total: int
    failure: str
    def __init__(self, file_name: _Optional[str] = ..., stage: _Optional[_Union[UploadStage, str]] = ..., pages_done: _Optional[int] = ..., pages_total: _Optional[int] = ..., failure: _Optional[str] = ...) -> None: ...

class ProjectDocument(_message.Message):
    __slots__ = ("resource_id", "project_id", "file_name", "size_bytes", "position", "content_hash", "chunks", "storage_key", "created_at", "role")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    project_id: str
    file_name: str
    size_bytes: int
    position: int
    content_hash: str
    chunks: int
    storage_key: str
    created_at: _timestamp_pb2.Timestamp
    role: DocumentRole
    def __init__(self, resource_id: _Optional[str] = ..., project_id: _Optional[str] = ..., file_name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., position: _Optional[int] = ..., content_hash: _Optional[str] = ..., chunks: _Optional[int] = ..., storage_key: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., role: _Optional[_Union[DocumentRole, str]] = ...) -> None: ...

class ListProjectDocumentsRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProjectDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[ProjectDocument]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[ProjectDocument, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PromptFile(_message.Message):
    __slots__ = ("file_name", "content")
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    file_name: str
    content: bytes
    def __init__(self, file_name: _Optional[str] = ..., content: _Optional[bytes] = ...) -> None: ...

class GetProjectRequest(_message.Message):
    __slots__ = ("project_id",)
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    def __init__(self, project_id: _Optional[str] = ...) -> None: ...

class StartSessionRequest(_message.Message):
    __slots__ = ("project_id", "models", "description", "client_request_id", "auto_advance", "pushback", "model_roles")
    class ModelRolesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AUTO_ADVANCE_FIELD_NUMBER: _ClassVar[int]
    PUSHBACK_FIELD_NUMBER: _ClassVar[int]
    MODEL_ROLES_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    models: _containers.RepeatedScalarFieldContainer[str]
    description: str
    client_request_id: str
    auto_advance: bool
    pushback: Pushback
    model_roles: _containers.ScalarMap[str, str]
    def __init__(self, project_id: _Optional[str] = ..., models: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., client_request_id: _Optional[str] = ..., auto_advance: _Optional[bool] = ..., pushback: _Optional[_Union[Pushback, str]] = ..., model_roles: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StageResponse(_message.Message):
    __slots__ = ("resource_id", "document_key", "feedback")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    document_key: str
    feedback: str
    def __init__(self, resource_id: _Optional[str] = ..., document_key: _Optional[str] = ..., feedback: _Optional[str] = ...) -> None: ...

class SubmitStageResponsesRequest(_message.Message):
    __slots__ = ("session_id", "stage_slug", "responses", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    responses: _containers.RepeatedCompositeFieldContainer[StageResponse]
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[StageResponse, _Mapping]]] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class PauseSessionRequest(_message.Message):
    __slots__ = ("session_id", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class ResumeSessionRequest(_message.Message):
    __slots__ = ("session_id", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class StageJobCounts(_message.Message):
    __slots__ = ("stage_slug", "plan", "execute", "render", "completed", "failed", "in_flight", "cost", "superseded")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_FIELD_NUMBER: _ClassVar[int]
    RENDER_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    plan: int
    execute: int
    render: int
    completed: int
    failed: int
    in_flight: int
    cost: int
    superseded: int
    def __init__(self, stage_slug: _Optional[str] = ..., plan: _Optional[int] = ..., execute: _Optional[int] = ..., render: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., in_flight: _Optional[int] = ..., cost: _Optional[int] = ..., superseded: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("id", "project_id", "status", "iteration", "current_stage", "models", "jobs", "created_at", "updated_at", "auto_advance", "cost", "notice", "pipeline_version", "skipped_steps", "position", "state", "needs_review_stages", "pushback", "spent", "output", "model_roles")
    class ModelRolesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STAGE_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    AUTO_ADVANCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_VERSION_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_STEPS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_STAGES_FIELD_NUMBER: _ClassVar[int]
    PUSHBACK_FIELD_NUMBER: _ClassVar[int]
    SPENT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    MODEL_ROLES_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    status: str
    iteration: int
    current_stage: str
    models: _containers.RepeatedScalarFieldContainer[str]
    jobs: _containers.RepeatedCompositeFieldContainer[StageJobCounts]
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    auto_advance: bool
    cost: int
    notice: str
    pipeline_version: int
    skipped_steps: _containers.RepeatedCompositeFieldContainer[SkippedStep]
    position: SessionPosition
    state: SessionState
    needs_review_stages: _containers.RepeatedScalarFieldContainer[str]
    pushback: Pushback
    spent: Money
    output: SessionOutput
    model_roles: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ..., status: _Optional[str] = ..., iteration: _Optional[int] = ..., current_stage: _Optional[str] = ..., models: _Optional[_Iterable[str]] = ..., jobs: _Optional[_Iterable[_Union[StageJobCounts, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., auto_advance: _Optional[bool] = ..., cost: _Optional[int] = ..., notice: _Optional[str] = ..., pipeline_version: _Optional[int] = ..., skipped_steps: _Optional[_Iterable[_Union[SkippedStep, _Mapping]]] = ..., position: _Optional[_Union[SessionPosition, _Mapping]] = ..., state: _Optional[_Union[SessionState, str]] = ..., needs_review_stages: _Optional[_Iterable[str]] = ..., pushback: _Optional[_Union[Pushback, str]] = ..., spent: _Optional[_Union[Money, _Mapping]] = ..., output: _Optional[_Union[SessionOutput, _Mapping]] = ..., model_roles: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SessionOutput(_message.Message):
    __slots__ = ("document", "word_count", "figures", "completed_at")
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    WORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    document: StageDocument
    word_count: int
    figures: _containers.ScalarMap[str, float]
    completed_at: _timestamp_pb2.Timestamp
    def __init__(self, document: _Optional[_Union[StageDocument, _Mapping]] = ..., word_count: _Optional[int] = ..., figures: _Optional[_Mapping[str, float]] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SessionPosition(_message.Message):
    __slots__ = ("stage_number", "stage_count", "stage_name", "step_key", "step_name", "unit", "index", "count", "stage_percent", "summary", "within_unit", "within_index", "within_count")
    STAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    STAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    STAGE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    WITHIN_UNIT_FIELD_NUMBER: _ClassVar[int]
    WITHIN_INDEX_FIELD_NUMBER: _ClassVar[int]
    WITHIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    stage_number: int
    stage_count: int
    stage_name: str
    step_key: str
    step_name: str
    unit: str
    index: int
    count: int
    stage_percent: int
    summary: str
    within_unit: str
    within_index: int
    within_count: int
    def __init__(self, stage_number: _Optional[int] = ..., stage_count: _Optional[int] = ..., stage_name: _Optional[str] = ..., step_key: _Optional[str] = ..., step_name: _Optional[str] = ..., unit: _Optional[str] = ..., index: _Optional[int] = ..., count: _Optional[int] = ..., stage_percent: _Optional[int] = ..., summary: _Optional[str] = ..., within_unit: _Optional[str] = ..., within_index: _Optional[int] = ..., within_count: _Optional[int] = ...) -> None: ...

class SkippedStep(_message.Message):
    __slots__ = ("iteration", "step_key", "reason")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    step_key: str
    reason: str
    def __init__(self, iteration: _Optional[int] = ..., step_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListStageDocumentsRequest(_message.Message):
    __slots__ = ("session_id", "stage_slug", "iteration", "page_size", "page_token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    iteration: int
    page_size: int
    page_token: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., iteration: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class StageDocument(_message.Message):
    __slots__ = ("resource_id", "stage_slug", "iteration", "document_key", "model", "storage_key", "size_bytes", "source_contribution_id", "updated_at", "incomplete", "needs_review")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CONTRIBUTION_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    stage_slug: str
    iteration: int
    document_key: str
    model: str
    storage_key: str
    size_bytes: int
    source_contribution_id: str
    updated_at: _timestamp_pb2.Timestamp
    incomplete: bool
    needs_review: bool
    def __init__(self, resource_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., iteration: _Optional[int] = ..., document_key: _Optional[str] = ..., model: _Optional[str] = ..., storage_key: _Optional[str] = ..., size_bytes: _Optional[int] = ..., source_contribution_id: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., incomplete: _Optional[bool] = ..., needs_review: _Optional[bool] = ...) -> None: ...

class ListStageDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[StageDocument]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[StageDocument, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetDocumentContentRequest(_message.Message):
    __slots__ = ("resource_id",)
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    def __init__(self, resource_id: _Optional[str] = ...) -> None: ...

class DocumentContent(_message.Message):
    __slots__ = ("document", "content", "mime_type")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    document: StageDocument
    content: str
    mime_type: str
    def __init__(self, document: _Optional[_Union[StageDocument, _Mapping]] = ..., content: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class OverrideClaimRequest(_message.Message):
    __slots__ = ("resource_id", "claim", "rationale", "client_request_id")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    claim: int
    rationale: str
    client_request_id: str
    def __init__(self, resource_id: _Optional[str] = ..., claim: _Optional[int] = ..., rationale: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class SaveDocumentEditRequest(_message.Message):
    __slots__ = ("resource_id", "content", "client_request_id")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    content: str
    client_request_id: str
    def __init__(self, resource_id: _Optional[str] = ..., content: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class GetWalletRequest(_message.Message):
    __slots__ = ("history",)
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    history: int
    def __init__(self, history: _Optional[int] = ...) -> None: ...

class WalletTransaction(_message.Message):
    __slots__ = ("id", "kind", "amount", "balance_after", "reason", "session_id", "job_id", "created_at", "transaction_kind", "money", "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    BALANCE_AFTER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_KIND_FIELD_NUMBER: _ClassVar[int]
    MONEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    amount: int
    balance_after: int
    reason: str
    session_id: str
    job_id: str
    created_at: _timestamp_pb2.Timestamp
    transaction_kind: TransactionKind
    money: Money
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., amount: _Optional[int] = ..., balance_after: _Optional[int] = ..., reason: _Optional[str] = ..., session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., transaction_kind: _Optional[_Union[TransactionKind, str]] = ..., money: _Optional[_Union[Money, _Mapping]] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ...) -> None: ...

class CreditWalletRequest(_message.Message):
    __slots__ = ("user_id", "amount", "idempotency_key", "reason")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    amount: int
    idempotency_key: str
    reason: str
    def __init__(self, user_id: _Optional[str] = ..., amount: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Wallet(_message.Message):
    __slots__ = ("wallet_id", "total", "held", "available", "history")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    total: int
    held: int
    available: int
    history: _containers.RepeatedCompositeFieldContainer[WalletTransaction]
    def __init__(self, wallet_id: _Optional[str] = ..., total: _Optional[int] = ..., held: _Optional[int] = ..., available: _Optional[int] = ..., history: _Optional[_Iterable[_Union[WalletTransaction, _Mapping]]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("id", "api_identifier", "name", "provider", "context_window_tokens", "max_output_tokens", "structured_output", "fallback_model", "max_concurrency", "requests_per_minute", "tokens_per_minute", "prices")
    ID_FIELD_NUMBER: _ClassVar[int]
    API_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    PRICES_FIELD_NUMBER: _ClassVar[int]
    id: str
    api_identifier: str
    name: str
    provider: str
    context_window_tokens: int
    max_output_tokens: int
    structured_output: str
    fallback_model: str
    max_concurrency: int
    requests_per_minute: int
    tokens_per_minute: int
    prices: ModelPrices
    def __init__(self, id: _Optional[str] = ..., api_identifier: _Optional[str] = ..., name: _Optional[str] = ..., provider: _Optional[str] = ..., context_window_tokens: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., structured_output: _Optional[str] = ..., fallback_model: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., prices: _Optional[_Union[ModelPrices, _Mapping]] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models", "next_page_token")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[Model]
    next_page_token: str
    def __init__(self, models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ("session_id", "after_sequence")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    after_sequence: int
    def __init__(self, session_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class ListSessionEventsRequest(_message.Message):
    __slots__ = ("session_id", "page_size", "page_token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    page_size: int
    page_token: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[SessionEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[SessionEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ("session_id", "kind", "session_status", "stage_slug", "job_id", "job_type", "document_key", "model", "message", "stage_percent", "at", "event_kind", "state", "job_kind", "job_status", "sequence", "history_truncated")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATUS_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STAGE_PERCENT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    EVENT_KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    JOB_KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_STATUS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    kind: str
    session_status: str
    stage_slug: str
    job_id: str
    job_type: str
    document_key: str
    model: str
    message: str
    stage_percent: int
    at: _timestamp_pb2.Timestamp
    event_kind: SessionEventKind
    state: SessionState
    job_kind: JobType
    job_status: JobStatus
    sequence: int
    history_truncated: bool
    def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[str] = ..., session_status: _Optional[str] = ..., stage_slug: _Optional[str] = ..., job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., document_key: _Optional[str] = ..., model: _Optional[str] = ..., message: _Optional[str] = ..., stage_percent: _Optional[int] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., event_kind: _Optional[_Union[SessionEventKind, str]] = ..., state: _Optional[_Union[SessionState, str]] = ..., job_kind: _Optional[_Union[JobType, str]] = ..., job_status: _Optional[_Union[JobStatus, str]] = ..., sequence: _Optional[int] = ..., history_truncated: _Optional[bool] = ...) -> None: ...

class ListProjectsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "filter", "order_by")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    filter: str
    order_by: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[str] = ..., order_by: _Optional[str] = ...) -> None: ...

class ListProjectsResponse(_message.Message):
    __slots__ = ("projects", "next_page_token")
    PROJECTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    projects: _containers.RepeatedCompositeFieldContainer[Project]
    next_page_token: str
    def __init__(self, projects: _Optional[_Iterable[_Union[Project, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteProjectRequest(_message.Message):
    __slots__ = ("project_id", "client_request_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    client_request_id: str
    def __init__(self, project_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class DeleteProjectResponse(_message.Message):
    __slots__ = ("objects_deleted",)
    OBJECTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    objects_deleted: int
    def __init__(self, objects_deleted: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token", "filter", "order_by")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    filter: str
    order_by: str
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[str] = ..., order_by: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWalletTransactionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWalletTransactionsResponse(_message.Message):
    __slots__ = ("transactions", "next_page_token")
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[WalletTransaction]
    next_page_token: str
    def __init__(self, transactions: _Optional[_Iterable[_Union[WalletTransaction, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Pipeline(_message.Message):
    __slots__ = ("slug", "name", "version", "stages", "created_at", "current")
    SLUG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    slug: str
    name: str
    version: int
    stages: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    current: bool
    def __init__(self, slug: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[int] = ..., stages: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., current: _Optional[bool] = ...) -> None: ...

class ListPipelinesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPipelinesResponse(_message.Message):
    __slots__ = ("pipelines", "next_page_token")
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pipelines: _containers.RepeatedCompositeFieldContainer[Pipeline]
    next_page_token: str
    def __init__(self, pipelines: _Optional[_Iterable[_Union[Pipeline, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class InstallPipelineRequest(_message.Message):
    __slots__ = ("content", "client_request_id", "validate_only")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    content: str
    client_request_id: str
    validate_only: bool
    def __init__(self, content: _Optional[str] = ..., client_request_id: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class InstallPipelineResponse(_message.Message):
    __slots__ = ("pipeline", "created")
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    pipeline: Pipeline
    created: bool
    def __init__(self, pipeline: _Optional[_Union[Pipeline, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ListRecipesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class RecipeSummary(_message.Message):
    __slots__ = ("stage_slug", "display_name", "is_cloned", "steps")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    IS_CLONED_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    display_name: str
    is_cloned: bool
    steps: int
    def __init__(self, stage_slug: _Optional[str] = ..., display_name: _Optional[str] = ..., is_cloned: _Optional[bool] = ..., steps: _Optional[int] = ...) -> None: ...

class ListRecipesResponse(_message.Message):
    __slots__ = ("recipes", "next_page_token")
    RECIPES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    recipes: _containers.RepeatedCompositeFieldContainer[RecipeSummary]
    next_page_token: str
    def __init__(self, recipes: _Optional[_Iterable[_Union[RecipeSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetStageRecipeRequest(_message.Message):
    __slots__ = ("stage_slug",)
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    def __init__(self, stage_slug: _Optional[str] = ...) -> None: ...

class RecipeStep(_message.Message):
    __slots__ = ("id", "step_key", "name", "job_type", "granularity_strategy", "output_type", "skipped", "after", "job_kind")
    ID_FIELD_NUMBER: _ClassVar[int]
    STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    GRANULARITY_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    JOB_KIND_FIELD_NUMBER: _ClassVar[int]
    id: str
    step_key: str
    name: str
    job_type: str
    granularity_strategy: str
    output_type: str
    skipped: bool
    after: _containers.RepeatedScalarFieldContainer[str]
    job_kind: JobType
    def __init__(self, id: _Optional[str] = ..., step_key: _Optional[str] = ..., name: _Optional[str] = ..., job_type: _Optional[str] = ..., granularity_strategy: _Optional[str] = ..., output_type: _Optional[str] = ..., skipped: _Optional[bool] = ..., after: _Optional[_Iterable[str]] = ..., job_kind: _Optional[_Union[JobType, str]] = ...) -> None: ...

class StageRecipe(_message.Message):
    __slots__ = ("stage_slug", "is_cloned", "steps")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    IS_CLONED_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    is_cloned: bool
    steps: _containers.RepeatedCompositeFieldContainer[RecipeStep]
    def __init__(self, stage_slug: _Optional[str] = ..., is_cloned: _Optional[bool] = ..., steps: _Optional[_Iterable[_Union[RecipeStep, _Mapping]]] = ...) -> None: ...

class ExportProjectRequest(_message.Message):
    __slots__ = ("project_id",)
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    def __init__(self, project_id: _Optional[str] = ...) -> None: ...

class ExportChunk(_message.Message):
    __slots__ = ("file_name", "data")
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    file_name: str
    data: bytes
    def __init__(self, file_name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ExportUrl(_message.Message):
    __slots__ = ("url", "storage_key", "size_bytes", "expires_at")
    URL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    url: str
    storage_key: str
    size_bytes: int
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, url: _Optional[str] = ..., storage_key: _Optional[str] = ..., size_bytes: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RevisitStageRequest(_message.Message):
    __slots__ = ("session_id", "stage_slug", "impact", "reason", "impact_level", "dry_run", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    IMPACT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IMPACT_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    impact: str
    reason: str
    impact_level: RevisitImpact
    dry_run: bool
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., impact: _Optional[str] = ..., reason: _Optional[str] = ..., impact_level: _Optional[_Union[RevisitImpact, str]] = ..., dry_run: _Optional[bool] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class RevisitStageResponse(_message.Message):
    __slots__ = ("session", "needs_review", "archived", "revision", "previews", "diffs")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    PREVIEWS_FIELD_NUMBER: _ClassVar[int]
    DIFFS_FIELD_NUMBER: _ClassVar[int]
    session: Session
    needs_review: _containers.RepeatedScalarFieldContainer[str]
    archived: _containers.RepeatedScalarFieldContainer[str]
    revision: int
    previews: _containers.RepeatedCompositeFieldContainer[RevisitPreview]
    diffs: _containers.RepeatedCompositeFieldContainer[RevisionDiff]
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., needs_review: _Optional[_Iterable[str]] = ..., archived: _Optional[_Iterable[str]] = ..., revision: _Optional[int] = ..., previews: _Optional[_Iterable[_Union[RevisitPreview, _Mapping]]] = ..., diffs: _Optional[_Iterable[_Union[RevisionDiff, _Mapping]]] = ...) -> None: ...

class RevisitPreview(_message.Message):
    __slots__ = ("impact_level", "refused", "needs_review", "archived", "reruns", "session_status", "revision")
    IMPACT_LEVEL_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    RERUNS_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATUS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    impact_level: RevisitImpact
    refused: str
    needs_review: _containers.RepeatedScalarFieldContainer[str]
    archived: _containers.RepeatedCompositeFieldContainer[RevisitDocument]
    reruns: _containers.RepeatedScalarFieldContainer[str]
    session_status: str
    revision: int
    def __init__(self, impact_level: _Optional[_Union[RevisitImpact, str]] = ..., refused: _Optional[str] = ..., needs_review: _Optional[_Iterable[str]] = ..., archived: _Optional[_Iterable[_Union[RevisitDocument, _Mapping]]] = ..., reruns: _Optional[_Iterable[str]] = ..., session_status: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class RevisitDocument(_message.Message):
    __slots__ = ("stage_slug", "document_key", "model_id", "model", "resource_id", "storage_key", "archived_key")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_KEY_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    document_key: str
    model_id: str
    model: str
    resource_id: str
    storage_key: str
    archived_key: str
    def __init__(self, stage_slug: _Optional[str] = ..., document_key: _Optional[str] = ..., model_id: _Optional[str] = ..., model: _Optional[str] = ..., resource_id: _Optional[str] = ..., storage_key: _Optional[str] = ..., archived_key: _Optional[str] = ...) -> None: ...

class RevisionDiff(_message.Message):
    __slots__ = ("stage_slug", "document_key", "model", "storage_key", "unified_diff")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIFIED_DIFF_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    document_key: str
    model: str
    storage_key: str
    unified_diff: str
    def __init__(self, stage_slug: _Optional[str] = ..., document_key: _Optional[str] = ..., model: _Optional[str] = ..., storage_key: _Optional[str] = ..., unified_diff: _Optional[str] = ...) -> None: ...

class ListSessionRevisionsRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionRevision(_message.Message):
    __slots__ = ("revision", "stage_slug", "iteration", "impact", "reason", "needs_review", "downstream_archived", "created_at")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    IMPACT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    DOWNSTREAM_ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    revision: int
    stage_slug: str
    iteration: int
    impact: str
    reason: str
    needs_review: _containers.RepeatedScalarFieldContainer[str]
    downstream_archived: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, revision: _Optional[int] = ..., stage_slug: _Optional[str] = ..., iteration: _Optional[int] = ..., impact: _Optional[str] = ..., reason: _Optional[str] = ..., needs_review: _Optional[_Iterable[str]] = ..., downstream_archived: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSessionRevisionsResponse(_message.Message):
    __slots__ = ("revisions",)
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[SessionRevision]
    def __init__(self, revisions: _Optional[_Iterable[_Union[SessionRevision, _Mapping]]] = ...) -> None: ...

class CancelSessionRequest(_message.Message):
    __slots__ = ("session_id", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class CompleteSessionRequest(_message.Message):
    __slots__ = ("session_id", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class DocumentChunk(_message.Message):
    __slots__ = ("contribution_id", "contribution_type", "storage_key", "finish_reason", "edit_version", "incomplete", "raw")
    CONTRIBUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    EDIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    contribution_id: str
    contribution_type: str
    storage_key: str
    finish_reason: str
    edit_version: int
    incomplete: bool
    raw: str
    def __init__(self, contribution_id: _Optional[str] = ..., contribution_type: _Optional[str] = ..., storage_key: _Optional[str] = ..., finish_reason: _Optional[str] = ..., edit_version: _Optional[int] = ..., incomplete: _Optional[bool] = ..., raw: _Optional[str] = ...) -> None: ...

class DocumentChunks(_message.Message):
    __slots__ = ("document", "chunks")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    document: StageDocument
    chunks: _containers.RepeatedCompositeFieldContainer[DocumentChunk]
    def __init__(self, document: _Optional[_Union[StageDocument, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[DocumentChunk, _Mapping]]] = ...) -> None: ...

class RecipeEdge(_message.Message):
    __slots__ = ("from_step_key", "to_step_key")
    FROM_STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    TO_STEP_KEY_FIELD_NUMBER: _ClassVar[int]
    from_step_key: str
    to_step_key: str
    def __init__(self, from_step_key: _Optional[str] = ..., to_step_key: _Optional[str] = ...) -> None: ...

class EditStageRecipeRequest(_message.Message):
    __slots__ = ("stage_slug", "skip", "unskip", "add_edges", "client_request_id", "validate_only")
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UNSKIP_FIELD_NUMBER: _ClassVar[int]
    ADD_EDGES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    stage_slug: str
    skip: _containers.RepeatedScalarFieldContainer[str]
    unskip: _containers.RepeatedScalarFieldContainer[str]
    add_edges: _containers.RepeatedCompositeFieldContainer[RecipeEdge]
    client_request_id: str
    validate_only: bool
    def __init__(self, stage_slug: _Optional[str] = ..., skip: _Optional[_Iterable[str]] = ..., unskip: _Optional[_Iterable[str]] = ..., add_edges: _Optional[_Iterable[_Union[RecipeEdge, _Mapping]]] = ..., client_request_id: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class RegenerateDocumentRequest(_message.Message):
    __slots__ = ("session_id", "stage_slug", "model", "document_key", "resource_id", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEY_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    model: str
    document_key: str
    resource_id: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., model: _Optional[str] = ..., document_key: _Optional[str] = ..., resource_id: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class RegenerateDocumentResponse(_message.Message):
    __slots__ = ("regeneration_id", "job_id", "superseded_job_ids", "session", "created")
    REGENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    regeneration_id: str
    job_id: str
    superseded_job_ids: _containers.RepeatedScalarFieldContainer[str]
    session: Session
    created: bool
    def __init__(self, regeneration_id: _Optional[str] = ..., job_id: _Optional[str] = ..., superseded_job_ids: _Optional[_Iterable[str]] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class RetryStageRequest(_message.Message):
    __slots__ = ("session_id", "stage_slug", "model", "client_request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    stage_slug: str
    model: str
    client_request_id: str
    def __init__(self, session_id: _Optional[str] = ..., stage_slug: _Optional[str] = ..., model: _Optional[str] = ..., client_request_id: _Optional[str] = ...) -> None: ...

class RetryStageResponse(_message.Message):
    __slots__ = ("session", "stage_slug", "retried_job_ids", "reopened_jobs")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STAGE_SLUG_FIELD_NUMBER: _ClassVar[int]
    RETRIED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REOPENED_JOBS_FIELD_NUMBER: _ClassVar[int]
    session: Session
    stage_slug: str
    retried_job_ids: _containers.RepeatedScalarFieldContainer[str]
    reopened_jobs: int
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., stage_slug: _Optional[str] = ..., retried_job_ids: _Optional[_Iterable[str]] = ..., reopened_jobs: _Optional[int] = ...) -> None: ...

class Money(_message.Message):
    __slots__ = ("currency_code", "units", "nanos")
    CURRENCY_CODE_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    NANOS_FIELD_NUMBER: _ClassVar[int]
    currency_code: str
    units: int
    nanos: int
    def __init__(self, currency_code: _Optional[str] = ..., units: _Optional[int] = ..., nanos: _Optional[int] = ...) -> None: ...

class ModelPrices(_message.Message):
    __slots__ = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "cache_write_per_mtok")
    INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_PER_MTOK_FIELD_NUMBER: _ClassVar[int]
    input_per_mtok: Money
    output_per_mtok: Money
    cached_input_per_mtok: Money
    cache_write_per_mtok: Money
    def __init__(self, input_per_mtok: _Optional[_Union[Money, _Mapping]] = ..., output_per_mtok: _Optional[_Union[Money, _Mapping]] = ..., cached_input_per_mtok: _Optional[_Union[Money, _Mapping]] = ..., cache_write_per_mtok: _Optional[_Union[Money, _Mapping]] = ...) -> None: ...
