from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AnswerRequest(_message.Message):
    __slots__ = ("project_id", "user_id", "text", "model", "query_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    user_id: str
    text: str
    model: str
    query_id: str
    def __init__(self, project_id: _Optional[str] = ..., user_id: _Optional[str] = ..., text: _Optional[str] = ..., model: _Optional[str] = ..., query_id: _Optional[str] = ...) -> None: ...

class AnswerCitation(_message.Message):
    __slots__ = ("source_id", "source_name", "chunk_id", "start", "end", "quote", "source_kind")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KIND_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    source_name: str
    chunk_id: str
    start: int
    end: int
    quote: str
    source_kind: str
    def __init__(self, source_id: _Optional[str] = ..., source_name: _Optional[str] = ..., chunk_id: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., quote: _Optional[str] = ..., source_kind: _Optional[str] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("answer", "citations", "caveats", "confidence", "query_type", "sub_queries", "cost", "analysis_session_id")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CAVEATS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    QUERY_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUB_QUERIES_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[AnswerCitation]
    caveats: _containers.RepeatedScalarFieldContainer[str]
    confidence: float
    query_type: str
    sub_queries: _containers.RepeatedScalarFieldContainer[str]
    cost: int
    analysis_session_id: str
    def __init__(self, answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[AnswerCitation, _Mapping]]] = ..., caveats: _Optional[_Iterable[str]] = ..., confidence: _Optional[float] = ..., query_type: _Optional[str] = ..., sub_queries: _Optional[_Iterable[str]] = ..., cost: _Optional[int] = ..., analysis_session_id: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("slots", "busy", "jobs_completed")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    JOBS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    slots: int
    busy: int
    jobs_completed: int
    def __init__(self, slots: _Optional[int] = ..., busy: _Optional[int] = ..., jobs_completed: _Optional[int] = ...) -> None: ...
