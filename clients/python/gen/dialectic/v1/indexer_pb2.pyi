from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

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
