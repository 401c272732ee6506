"""Who is calling: the transport metadata of a gRPC call (docs/transport.md of apache/rocketmq-clients).

Every call carries ``x-mq-client-id`` (required: it keys the client's session; without it the answer is
CLIENT_ID_REQUIRED), ``x-mq-language`` (``PYTHON``; Node sends ``HTTP``), ``x-mq-client-version``,
``x-mq-namespace``, ``x-mq-date-time`` and, with credentials, ``authorization``::

    MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secret, date-time)>

With ``aclEnable`` the signature is checked against the broker's plain ACL (the same accounts, white lists
and topic / group permissions as remoting requests, ``mq.daemon.broker.acl``); without it the header is
ignored (the Python client sends one even with empty credentials).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from mq.daemon.proxy.proto import messages as pb
from mq.daemon.proxy.status import ProxyError
from mq.protocol.codes import LanguageCode

Code = pb.Code

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"
_WANTED = frozenset({CLIENT_ID, LANGUAGE, CLIENT_VERSION, NAMESPACE, DATE_TIME, AUTHORIZATION})
#: Longest client id accepted (a client id keys server state: bound it).
MAX_CLIENT_ID = 256

_LANGUAGES = {"JAVA": LanguageCode.JAVA, "CPP": LanguageCode.CPP, "DOTNET": LanguageCode.DOTNET,
              "DOT_NET": LanguageCode.DOTNET, "PYTHON": LanguageCode.PYTHON, "GOLANG": LanguageCode.GO,
              "GO": LanguageCode.GO, "RUST": LanguageCode.RUST, "PHP": LanguageCode.PHP, "HTTP": LanguageCode.HTTP,
              "RUBY": LanguageCode.RUBY, "NODE_JS": LanguageCode.HTTP}
_AUTH = re.compile(r"^MQv2-HMAC-SHA1\s+Credential=([^,\s]*),\s*SignedHeaders=([^,\s]*),\s*Signature=([0-9a-fA-F]*)\s*$")
#: MQVersion ordinal of V4_0_0_SNAPSHOT; a release x.y.z is 2 n + 1 past it, n = (x - 4) * 100 + y * 10 + z.
_V4_0_0_SNAPSHOT = 212


def language_code(name: str) -> LanguageCode:
    return _LANGUAGES.get(name.upper(), LanguageCode.OTHER)


def version_ordinal(text: str) -> int:
    """MQVersion ordinal of a client version ``x.y.z`` (4.0.0 to 5.9.9); other versions (the Node client's
    1.x) count as V5_0_0, the first 5.x protocol version."""
    parts = text.strip().lstrip("vV").split(".")
    try:
        x, y, z = (int(p) for p in (parts + ["0", "0"])[:3])
    except ValueError:
        x = y = z = -1
    if not (4 <= x <= 5 and 0 <= y <= 9 and 0 <= z <= 9):
        x, y, z = 5, 0, 0
    return _V4_0_0_SNAPSHOT + 2 * ((x - 4) * 100 + y * 10 + z) + 1


@dataclass(slots=True)
class CallContext:
    client_id: str
    language: str
    version: str
    namespace: str
    remote_addr: str
    date_time: str
    authorization: str

    @property
    def language_code(self) -> LanguageCode:
        return language_code(self.language)

    @property
    def peer_host(self) -> str:
        return self.remote_addr.rpartition(":")[0].strip("[]")


def peer_address(peer: str) -> str:
    """``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` -> ``127.0.0.1:5000`` / ``[::1]:5000``."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6") and rest:
        return rest
    return peer or "unknown:0"


def call_context(context: Any, *, require_client_id: bool = True) -> CallContext:
    """Read the metadata of a call; raises CLIENT_ID_REQUIRED when the client id is missing."""
    md: dict[str, str] = {}
    for item in context.invocation_metadata() or ():
        key = item[0]
        if key in _WANTED:
            value = item[1]
            md[key] = value if value.__class__ is str else value.decode("utf-8", "replace")
    cid = md.get(CLIENT_ID, "")
    if require_client_id and not cid:
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required in the request metadata")
    if len(cid) > MAX_CLIENT_ID:
        raise ProxyError(Code.BAD_REQUEST, f"x-mq-client-id is longer than {MAX_CLIENT_ID} characters")
    return CallContext(cid, md.get(LANGUAGE, ""), md.get(CLIENT_VERSION, ""), md.get(NAMESPACE, ""),
                       peer_address(context.peer() or ""), md.get(DATE_TIME, ""), md.get(AUTHORIZATION, ""))


def parse_authorization(header: str) -> tuple[str, str, str] | None:
    """(access key, signed headers, signature) of an ``MQv2-HMAC-SHA1`` header, None if malformed."""
    m = _AUTH.match(header.strip())
    return (m.group(1), m.group(2), m.group(3)) if m else None


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


class AclChecker:
    """The plain ACL applied to gRPC calls: ``check(ctx, need)`` raises UNAUTHORIZED or FORBIDDEN."""

    def __init__(self, validator: Any) -> None:
        self.validator = validator

    def check(self, ctx: CallContext, need: dict[str, Any]) -> None:
        auth = parse_authorization(ctx.authorization) if ctx.authorization else None
        access_key = auth[0] if auth else None
        date_time = ctx.date_time

        def verify(secret_key: str) -> bool:
            if auth is None or not date_time:
                return False
            return hmac.compare_digest(signature(secret_key, date_time), auth[2].lower())

        reason = self.validator.check_access(ctx.remote_addr, access_key or None, verify, need)
        if reason is None:
            return
        unauthorized = access_key is None or "signature" in reason or "No acl config" in reason
        raise ProxyError(Code.UNAUTHORIZED if unauthorized else Code.FORBIDDEN, reason)
