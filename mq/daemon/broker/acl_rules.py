"""plain_acl.yml as RocketMQ 4.9's PlainPermissionManager reads it: permissions, remote-address patterns and the
accounts of ``plain_acl.yml`` and the ``acl/*.yml`` files beside it (``mq.daemon.broker.acl`` checks requests
against them).

A value RocketMQ reads into a String field is read as text, a YAML number included (``secretKey: 12345678`` in
RocketMQ's own plain_acl.yml); a missing or malformed file or entry is a ``ConfigError`` naming the file and
the entry.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mq.daemon.broker.acl_resources import RETRY_PREFIX, Perm, parse_perm
from mq.errors import ConfigError

MIN_KEY_LENGTH = 7  # "longer than 6"


# -- remote address patterns ---------------------------------------------------------------------------------
AddressMatcher = Callable[[str], bool]


def _never(_addr: str) -> bool:
    return False


def _always(_addr: str) -> bool:
    return True


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def _exact(pattern: str, where: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = _ip(pattern)
    if ip is None:
        raise ConfigError(f"{where}: {pattern!r} is not an IP address")
    return ip


def _range_matcher(pattern: str, where: str) -> AddressMatcher:
    """``a.b.c.*``, ``a.b.*.*``, ``a.b.c.10-20`` (IPv4) or the same over the eight groups of IPv6: fixed leading
    parts, one ranged part, then only ``*``."""
    v6 = ":" in pattern
    parts = pattern.split(":" if v6 else ".")
    size, top, base = (8, 0xFFFF, 16) if v6 else (4, 255, 10)
    if len(parts) != size:
        raise ConfigError(f"{where}: {pattern!r} must have {size} parts")
    head: list[int] = []
    lo = hi = -1
    for i, part in enumerate(parts):
        part = part.strip()
        if lo < 0:
            if part == "*" or "-" in part:
                if i == 0:
                    raise ConfigError(f"{where}: {pattern!r}: the first part cannot be a range")
                if part == "*":
                    lo, hi = 0, top
                else:
                    a, _, b = part.partition("-")
                    try:
                        lo, hi = int(a, base), int(b, base)
                    except ValueError:
                        raise ConfigError(f"{where}: {pattern!r}: bad range {part!r}") from None
                    if not 0 <= lo <= hi <= top:
                        raise ConfigError(f"{where}: {pattern!r}: range {part!r} outside 0-{top} or reversed")
                continue
            try:
                value = int(part, base)
            except ValueError:
                raise ConfigError(f"{where}: {pattern!r}: bad part {part!r}") from None
            if not 0 <= value <= top:
                raise ConfigError(f"{where}: {pattern!r}: part {part!r} outside 0-{top}")
            head.append(value)
        elif part != "*":
            raise ConfigError(f"{where}: {pattern!r}: only '*' may follow a range")
    position = len(head)

    def match(addr: str) -> bool:
        ip = _ip(addr)
        if ip is None or (ip.version == 6) != v6:
            return False
        if v6:
            groups = [int(g, 16) for g in ip.exploded.split(":")]
        else:
            groups = [int(g) for g in str(ip).split(".")]
        return groups[:position] == head and lo <= groups[position] <= hi

    return match


def address_matcher(pattern: object, where: str = "acl") -> AddressMatcher:
    """A predicate on the client's IP for one of RocketMQ's address patterns; ConfigError if malformed."""
    text = str(pattern).strip() if pattern is not None else ""
    if not text:
        return _never
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if text.endswith("}"):
        prefix, brace, rest = text.partition("{")
        if not brace:
            raise ConfigError(f"{where}: {text!r}: '}}' without '{{'")
        members = {_exact(prefix + item.strip(), where) for item in rest[:-1].split(",") if item.strip()}
        return lambda addr: _ip(addr) in members
    if "," in text:
        members = {_exact(item, where) for item in text.split(",") if item.strip()}
        return lambda addr: _ip(addr) in members
    if "*" in text or "-" in text:
        return _range_matcher(text, where)
    one = _exact(text, where)
    return lambda addr: _ip(addr) == one


# -- configuration -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    admin: bool
    white: AddressMatcher
    default_topic_perm: Perm
    default_group_perm: Perm
    #: topic -> perm, and ``%RETRY%<group>`` -> perm; None when the account lists neither
    perms: dict[str, Perm] | None
    source: str


@dataclass(frozen=True)
class PlainAclConfig:
    global_white: tuple[AddressMatcher, ...] = ()
    accounts: dict[str, Account] = field(default_factory=dict)


def _resource_perms(items: object, group: bool, where: str) -> dict[str, Perm]:
    out: dict[str, Perm] = {}
    if items in (None, ""):
        return out
    if not isinstance(items, list):
        raise ConfigError(f"{where}: {'groupPerms' if group else 'topicPerms'} must be a list of 'name=PERM'")
    for item in items:
        name, eq, perm = str(item).partition("=")
        if not eq or not name.strip() or "=" in perm:
            raise ConfigError(f"{where}: {item!r} is not 'name=PERM' (e.g. topicA=PUB|SUB)")
        text = perm.strip()
        if text != "DENY" and parse_perm(text) is Perm.DENY:
            raise ConfigError(f"{where}: {item!r}: the permission must be DENY, PUB, SUB, PUB|SUB or SUB|PUB")
        out[(RETRY_PREFIX + name.strip()) if group else name.strip()] = parse_perm(text)
    return out


def as_text(value: object) -> str | None:
    """A scalar as RocketMQ reads it into a String field (fastjson's castToString): ``secretKey: 12345678``, a
    YAML integer in RocketMQ's own plain_acl.yml, is the text "12345678"; None for a missing value or a list or
    mapping."""
    if value is None or isinstance(value, (list, dict)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_acl_document(data: object, source: str) -> PlainAclConfig:
    """One plain_acl.yml document -> rules; ConfigError naming the file and the entry that is wrong."""
    if data is None:
        return PlainAclConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'accounts' and 'globalWhiteRemoteAddresses'")
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise ConfigError(f"{source}: globalWhiteRemoteAddresses must be a list")
    global_white = tuple(address_matcher(p, f"{source}: globalWhiteRemoteAddresses") for p in white)
    accounts: dict[str, Account] = {}
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise ConfigError(f"{source}: accounts must be a list")
    for i, raw in enumerate(raw_accounts):
        where = f"{source}: accounts[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping")
        ak, sk = as_text(raw.get("accessKey")), as_text(raw.get("secretKey"))
        if ak is None or sk is None or len(ak) < MIN_KEY_LENGTH or len(sk) < MIN_KEY_LENGTH:
            raise ConfigError(f"{where}: accessKey and secretKey are required and must be longer than "
                              f"{MIN_KEY_LENGTH - 1} characters")
        if ak in accounts:
            raise ConfigError(f"{where}: accessKey {ak!r} appears twice")
        perms = {**_resource_perms(raw.get("groupPerms"), True, where),
                 **_resource_perms(raw.get("topicPerms"), False, where)}
        accounts[ak] = Account(
            access_key=ak, secret_key=sk, admin=raw.get("admin") in (True, "true", "True"),
            white=address_matcher(raw.get("whiteRemoteAddress"), f"{where}: whiteRemoteAddress"),
            default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
            default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
            perms=perms or None, source=source)
    return PlainAclConfig(global_white, accounts)


def acl_files(main: Path) -> list[Path]:
    """``main`` plus the ``*.yml``/``*.yaml`` files of the ``acl/`` directory beside it, in name order."""
    extra_dir = main.parent / "acl"
    extra = sorted(p for p in extra_dir.glob("*") if p.suffix in (".yml", ".yaml") and p.is_file()) \
        if extra_dir.is_dir() else []
    return [main, *[p for p in extra if p.resolve() != main.resolve()]]


def read_acl_documents(main: Path) -> dict[Path, Any]:
    """The parsed YAML of ``main`` and of the ``acl/`` files beside it, in order."""
    if not main.is_file():
        raise ConfigError(f"aclEnable is on but the ACL file {main} does not exist (set aclFile, or "
                          "$ROCKETMQ_HOME/conf/plain_acl.yml)")
    docs: dict[Path, Any] = {}
    for path in acl_files(main):
        try:
            docs[path] = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read ACL rules: {exc}") from None
    return docs


def load_acl(main: Path) -> PlainAclConfig:
    return config_from_documents(read_acl_documents(main))


def config_from_documents(docs: dict[Path, Any]) -> PlainAclConfig:
    global_white: list[AddressMatcher] = []
    accounts: dict[str, Account] = {}
    for path, data in docs.items():
        doc = parse_acl_document(data, str(path))
        global_white.extend(doc.global_white)
        for ak, account in doc.accounts.items():
            if ak in accounts:
                raise ConfigError(f"{path}: accessKey {ak!r} is also defined in {accounts[ak].source}")
            accounts[ak] = account
    return PlainAclConfig(tuple(global_white), accounts)


def default_acl_file(store_root: str) -> Path:
    """$ROCKETMQ_HOME/conf/plain_acl.yml when ROCKETMQ_HOME is set, else <store root>/conf/plain_acl.yml."""
    home = os.environ.get("ROCKETMQ_HOME")
    return Path(home) / "conf" / "plain_acl.yml" if home else Path(store_root) / "conf" / "plain_acl.yml"
