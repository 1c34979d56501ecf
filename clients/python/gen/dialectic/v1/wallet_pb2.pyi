import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetBalanceRequest(_message.Message):
    __slots__ = ("wallet_id", "user_id")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    user_id: str
    def __init__(self, wallet_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class Balance(_message.Message):
    __slots__ = ("wallet_id", "total", "held", "available")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    total: int
    held: int
    available: int
    def __init__(self, wallet_id: _Optional[str] = ..., total: _Optional[int] = ..., held: _Optional[int] = ..., available: _Optional[int] = ...) -> None: ...

class HoldRequest(_message.Message):
    __slots__ = ("wallet_id", "amount", "idempotency_key", "session_id", "job_id", "attempt", "purpose", "expires_in_secs")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_SECS_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    amount: int
    idempotency_key: str
    session_id: str
    job_id: str
    attempt: int
    purpose: str
    expires_in_secs: int
    def __init__(self, wallet_id: _Optional[str] = ..., amount: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., attempt: _Optional[int] = ..., purpose: _Optional[str] = ..., expires_in_secs: _Optional[int] = ...) -> None: ...

class CaptureRequest(_message.Message):
    __slots__ = ("wallet_id", "hold_id", "amount", "idempotency_key", "usage")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    hold_id: str
    amount: int
    idempotency_key: str
    usage: CallUsage
    def __init__(self, wallet_id: _Optional[str] = ..., hold_id: _Optional[str] = ..., amount: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., usage: _Optional[_Union[CallUsage, _Mapping]] = ...) -> None: ...

class CallUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cached_input_tokens", "currency_code", "money_nanos", "cache_write_input_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_CODE_FIELD_NUMBER: _ClassVar[int]
    MONEY_NANOS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    currency_code: str
    money_nanos: int
    cache_write_input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., currency_code: _Optional[str] = ..., money_nanos: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("wallet_id", "hold_id", "idempotency_key", "reason")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    hold_id: str
    idempotency_key: str
    reason: str
    def __init__(self, wallet_id: _Optional[str] = ..., hold_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CreditRequest(_message.Message):
    __slots__ = ("wallet_id", "amount", "idempotency_key", "reason")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    amount: int
    idempotency_key: str
    reason: str
    def __init__(self, wallet_id: _Optional[str] = ..., amount: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("id", "wallet_id", "kind", "amount", "balance_after", "held_after", "idempotency_key", "reason", "hold_id", "session_id", "job_id", "attempt", "purpose", "expires_at", "created_at", "usage")
    ID_FIELD_NUMBER: _ClassVar[int]
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    BALANCE_AFTER_FIELD_NUMBER: _ClassVar[int]
    HELD_AFTER_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HOLD_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    wallet_id: str
    kind: str
    amount: int
    balance_after: int
    held_after: int
    idempotency_key: str
    reason: str
    hold_id: str
    session_id: str
    job_id: str
    attempt: int
    purpose: str
    expires_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    usage: CallUsage
    def __init__(self, id: _Optional[str] = ..., wallet_id: _Optional[str] = ..., kind: _Optional[str] = ..., amount: _Optional[int] = ..., balance_after: _Optional[int] = ..., held_after: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., reason: _Optional[str] = ..., hold_id: _Optional[str] = ..., session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., attempt: _Optional[int] = ..., purpose: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., usage: _Optional[_Union[CallUsage, _Mapping]] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("wallet_id", "page_size", "page_token")
    WALLET_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    wallet_id: str
    page_size: int
    page_token: str
    def __init__(self, wallet_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LedgerEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[LedgerEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
