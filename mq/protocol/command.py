"""RemotingCommand: one request or response of the RocketMQ remoting protocol (PROTOCOL.md §3).

A command is plain data. ``codec.py`` turns it into frame bytes and back; ``headers.py`` maps typed
header dataclasses onto ``ext_fields``. The opaque of a request is assigned by the connection that sends it.
"""

from __future__ import annotations

from mq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, MQ_VERSION, LanguageCode, SerializeType


class RemotingCommand:
    """A RocketMQ RemotingCommand.

    ``ext_fields`` is RocketMQ's ``HashMap<String,String>``: every value is text. ``body`` is opaque bytes
    (or a memoryview slice of stored records, for zero-copy pull responses).
    """

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
                 "serialize_type", "wire_size")

    def __init__(self, code: int, *, opaque: int = 0, flag: int = 0, remark: str | None = None,
                 ext_fields: dict[str, str] | None = None, body: bytes | bytearray | memoryview | None = None,
                 language: int = LanguageCode.JAVA, version: int = MQ_VERSION,
                 serialize_type: int = SerializeType.JSON) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.serialize_type = serialize_type
        #: bytes of the frame it was decoded from (0 for a command built here)
        self.wire_size = 0

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def request(cls, code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None, *,
                oneway: bool = False, serialize_type: int = SerializeType.JSON) -> "RemotingCommand":
        return cls(int(code), flag=FLAG_ONEWAY if oneway else 0, ext_fields=ext_fields, body=body,
                   serialize_type=serialize_type)

    def response(self, code: int = 0, remark: str | None = None, ext_fields: dict[str, str] | None = None,
                 body: bytes | bytearray | memoryview | None = None) -> "RemotingCommand":
        """A response to this request: same opaque, response bit set, same serialize type."""
        return RemotingCommand(int(code), opaque=self.opaque, flag=FLAG_RESPONSE, remark=remark,
                               ext_fields=ext_fields, body=body, serialize_type=self.serialize_type)

    # -- flags ----------------------------------------------------------------------------------
    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    # -- helpers --------------------------------------------------------------------------------
    def ext(self, name: str, default: str | None = None) -> str | None:
        return self.ext_fields.get(name, default)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (self.code == other.code and self.language == other.language and self.version == other.version
                and self.opaque == other.opaque and self.flag == other.flag and self.remark == other.remark
                and self.ext_fields == other.ext_fields and bytes(self.body or b"") == bytes(other.body or b"")
                and self.serialize_type == other.serialize_type)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        blen = len(self.body) if self.body is not None else 0
        return (f"RemotingCommand({kind} code={self.code} opaque={self.opaque} remark={self.remark!r} "
                f"ext={self.ext_fields!r} body={blen}B)")
