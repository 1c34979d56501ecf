from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RenderPreviewRequest(_message.Message):
    __slots__ = ("session_id", "document_identity")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    document_identity: str
    def __init__(self, session_id: _Optional[str] = ..., document_identity: _Optional[str] = ...) -> None: ...

class RenderPreviewResponse(_message.Message):
    __slots__ = ("markdown",)
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    markdown: str
    def __init__(self, markdown: _Optional[str] = ...) -> None: ...
