"""RocketMQ's ACL request signature (AclClientRPCHook / PlainAccessValidator), sans-IO.

A signed request carries three (or four) extra ``extFields``::

    AccessKey      the account's access key
    SecurityToken  only when the credentials have one
    Signature      Base64(HMAC-SHA1(secretKey, content))

where ``content`` is the UTF-8 encoding of every other extField *value* (no keys, no separator) in the order of
their keys (Java's TreeMap: UTF-16 code-unit order, which is plain ``sorted`` for the ASCII keys RocketMQ uses),
followed by the raw body bytes. ``Signature`` itself is never part of the content. The broker rebuilds the
content from the fields it received, also leaving out ``_UNIQUE_KEY_QUERY`` - which the Java client (4.9.x)
adds *before* signing, so a broker that wants to accept those clients checks both forms
(``signature_matches`` does).
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass

from mq.protocol.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: set by the Java client on QUERY_MESSAGE by unique key; the broker leaves it out of the signed content
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


@dataclass(frozen=True)
class SessionCredentials:
    access_key: str
    secret_key: str
    security_token: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def signing_content(ext_fields: dict[str, str], body: bytes | bytearray | memoryview | None,
                    exclude: frozenset[str] = frozenset((SIGNATURE,))) -> bytes:
    """The bytes the signature covers: the values sorted by key (``exclude``d keys left out), then the body."""
    data = "".join([v for k, v in sorted(ext_fields.items()) if k not in exclude and v is not None]).encode("utf-8")
    return data + body if body else data


def signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8"), content, "sha1")).decode("ascii")


def sign_request(cmd: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add AccessKey, SecurityToken (if any) and Signature to ``cmd.ext_fields``, as AclClientRPCHook does."""
    fields = cmd.ext_fields
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields.pop(SIGNATURE, None)
    fields[SIGNATURE] = signature(signing_content(fields, cmd.body), credentials.secret_key)


_BROKER_EXCLUDE = frozenset((SIGNATURE, UNIQUE_KEY_QUERY))


def signature_matches(ext_fields: dict[str, str], body: bytes | bytearray | memoryview | None,
                      secret_key: str) -> bool:
    """Whether the request's Signature is right for ``secret_key``: first as RocketMQ's broker computes it
    (without ``_UNIQUE_KEY_QUERY``), then, if that field is present, as the Java client signed it."""
    given = ext_fields.get(SIGNATURE)
    if not given:
        return False
    expected = signature(signing_content(ext_fields, body, _BROKER_EXCLUDE), secret_key)
    if hmac.compare_digest(expected, given):
        return True
    if UNIQUE_KEY_QUERY in ext_fields:
        expected = signature(signing_content(ext_fields, body), secret_key)
        return hmac.compare_digest(expected, given)
    return False
