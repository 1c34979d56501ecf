from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConvertRequest(_message.Message):
    __slots__ = ("file_name", "content", "max_pages", "max_unpacked_bytes")
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_UNPACKED_BYTES_FIELD_NUMBER: _ClassVar[int]
    file_name: str
    content: bytes
    max_pages: int
    max_unpacked_bytes: int
    def __init__(self, file_name: _Optional[str] = ..., content: _Optional[bytes] = ..., max_pages: _Optional[int] = ..., max_unpacked_bytes: _Optional[int] = ...) -> None: ...

class ConvertResponse(_message.Message):
    __slots__ = ("progress", "text", "done")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    progress: ConvertProgress
    text: str
    done: ConvertDone
    def __init__(self, progress: _Optional[_Union[ConvertProgress, _Mapping]] = ..., text: _Optional[str] = ..., done: _Optional[_Union[ConvertDone, _Mapping]] = ...) -> None: ...

class ConvertProgress(_message.Message):
    __slots__ = ("pages_done", "pages_total")
    PAGES_DONE_FIELD_NUMBER: _ClassVar[int]
    PAGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    pages_done: int
    pages_total: int
    def __init__(self, pages_done: _Optional[int] = ..., pages_total: _Optional[int] = ...) -> None: ...

class ConvertDone(_message.Message):
    __slots__ = ("pages",)
    PAGES_FIELD_NUMBER: _ClassVar[int]
    pages: int
    def __init__(self, pages: _Optional[int] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("tokenizer", "texts")
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    tokenizer: str
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tokenizer: _Optional[str] = ..., texts: _Optional[_Iterable[str]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ("total", "per_text")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PER_TEXT_FIELD_NUMBER: _ClassVar[int]
    total: int
    per_text: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, total: _Optional[int] = ..., per_text: _Optional[_Iterable[int]] = ...) -> None: ...

class IndexRequest(_message.Message):
    __slots__ = ("text", "embedder", "tokenizer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    text: str
    embedder: str
    tokenizer: str
    def __init__(self, text: _Optional[str] = ..., embedder: _Optional[str] = ..., tokenizer: _Optional[str] = ...) -> None: ...

class IndexResponse(_message.Message):
    __slots__ = ("content_hash", "chunks", "tokens_spent", "already_indexed")
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SPENT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_INDEXED_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    chunks: int
    tokens_spent: int
    already_indexed: bool
    def __init__(self, content_hash: _Optional[str] = ..., chunks: _Optional[int] = ..., tokens_spent: _Optional[int] = ..., already_indexed: _Optional[bool] = ...) -> None: ...

class RetrieveRequest(_message.Message):
    __slots__ = ("text", "query", "budget_tokens", "embedder", "tokenizer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    text: str
    query: str
    budget_tokens: int
    embedder: str
    tokenizer: str
    def __init__(self, text: _Optional[str] = ..., query: _Optional[str] = ..., budget_tokens: _Optional[int] = ..., embedder: _Optional[str] = ..., tokenizer: _Optional[str] = ...) -> None: ...

class RetrieveResponse(_message.Message):
    __slots__ = ("text", "tokens", "chunks_used", "chunks_total", "tokens_spent", "content_hash")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_USED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SPENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: int
    chunks_used: int
    chunks_total: int
    tokens_spent: int
    content_hash: str
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[int] = ..., chunks_used: _Optional[int] = ..., chunks_total: _Optional[int] = ..., tokens_spent: _Optional[int] = ..., content_hash: _Optional[str] = ...) -> None: ...
