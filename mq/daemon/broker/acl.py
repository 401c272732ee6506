"""Plain ACL for the broker (RocketMQ 4.9's PlainAccessValidator and PlainPermissionManager).

With ``aclEnable`` every request is checked before its processor runs, in this order:

1. the client's address matches ``globalWhiteRemoteAddresses``                      -> allowed
2. no ``AccessKey`` extField                                    -> "No accessKey is configured"
3. an access key no account has                                 -> "No acl config for <key>"
4. the address matches the account's ``whiteRemoteAddress``                          -> allowed
5. a wrong ``Signature`` (see ``mq.protocol.acl``)              -> "Check signature failed for accessKey=<key>"
6. a send to RMQ_SYS_TRACE_TOPIC                                                     -> allowed
7. an admin request code from an account without ``admin: true`` -> "Need admin permission for request code=..."
8. each resource the request needs (below) against the account's topicPerms / groupPerms, else its
   defaultTopicPerm / defaultGroupPerm                           -> "No default permission for topic:<t>"

A refusal is answered SYSTEM_ERROR with the remark ``org.apache.rocketmq.acl.common.AclException: <reason>``.

Resources a request needs: ``acl_resources.required_resources``.

Permissions are DENY, PUB, SUB and PUB|SUB; an unknown or missing one is DENY. The files are
``plain_acl.yml`` plus every ``*.yml``/``*.yaml`` in the ``acl/`` directory beside it; they are re-read when
one changes (checked at most once a second), and a file that no longer parses leaves the previous rules in
force.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from typing import Any

import yaml

from mq.common.topic import TRACE_TOPIC
from mq.daemon.broker.acl_resources import (RETRY_PREFIX, Perm, check_permission, describe, parse_perm,
                                            required_resources)
from mq.errors import ConfigError
from mq.protocol.acl import ACCESS_KEY, signature_matches
from mq.protocol.codes import RequestCode as R
from mq.protocol.command import RemotingCommand
from mq.store.config_files import write_atomically

log = logging.getLogger(__name__)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
#: RocketMQ 4.9's admin codes, plus the ACL changes themselves (4.9 lets any signed account make those; an
#: account that could grant itself every permission would make the rest pointless)
ADMIN_CODES = frozenset((R.UPDATE_AND_CREATE_TOPIC, R.UPDATE_BROKER_CONFIG, R.DELETE_TOPIC_IN_BROKER,
                         R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, R.DELETE_SUBSCRIPTIONGROUP,
                         R.UPDATE_AND_CREATE_ACL_CONFIG, R.DELETE_ACL_CONFIG, R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG))
MIN_KEY_LENGTH = 7  # "longer than 6"
RELOAD_CHECK_S = 1.0


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
        ak, sk = raw.get("accessKey"), raw.get("secretKey")
        if not isinstance(ak, str) or not isinstance(sk, str) or len(ak) < MIN_KEY_LENGTH or len(sk) < MIN_KEY_LENGTH:
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


def client_ip(remote_addr: str) -> str:
    """``ip:port`` (or ``[v6]:port``) -> ip."""
    host = remote_addr.rpartition(":")[0] if ":" in remote_addr else remote_addr
    return host.strip("[]")


# -- the validator --------------------------------------------------------------------------------------------
#: Start of each refusal reason ``check`` returns -> its kind (a bounded label for metrics).
_REFUSAL_KINDS = (("No accessKey", "no_access_key"), ("No acl config", "unknown_access_key"),
                  ("cannot read the request", "unreadable_request"), ("Check signature", "bad_signature"),
                  ("Need admin permission", "admin_required"), ("No default permission", "no_permission"))


def refusal_kind(reason: str) -> str:
    """The kind of a refusal reason returned by ``PlainAccessValidator.check``."""
    for prefix, kind in _REFUSAL_KINDS:
        if reason.startswith(prefix):
            return kind
    return "other"


class PlainAccessValidator:
    """Checks requests against plain_acl.yml; ``check`` returns None or the reason for refusing."""

    def __init__(self, main_file: Path) -> None:
        self.main_file = main_file
        self.config = load_acl(main_file)
        self._stamp = self._file_stamp()
        self._next_check = time.monotonic() + RELOAD_CHECK_S
        self._failed_stamp: tuple | None = None
        #: refusals so far by kind (``refusal_kind``), read by the metrics endpoint
        self.refusals: dict[str, int] = {}
        log.info("ACL on: %d account(s), %d global white address pattern(s) from %s",
                 len(self.config.accounts), len(self.config.global_white), main_file)

    def _file_stamp(self) -> tuple:
        stamp = []
        for path in acl_files(self.main_file):
            try:
                st = path.stat()
                stamp.append((str(path), st.st_mtime_ns, st.st_size))
            except OSError:
                stamp.append((str(path), None, None))
        return tuple(stamp)

    def reload_if_changed(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if now < self._next_check:
            return False
        self._next_check = now + RELOAD_CHECK_S
        stamp = self._file_stamp()
        if stamp == self._stamp or stamp == self._failed_stamp:
            return False
        try:
            config = load_acl(self.main_file)
        except ConfigError as exc:
            self._failed_stamp = stamp
            log.error("ACL files changed but cannot be used, the previous rules stay in force: %s", exc)
            return False
        self.config, self._stamp, self._failed_stamp = config, stamp, None
        log.info("ACL reloaded: %d account(s), %d global white address pattern(s)", len(config.accounts),
                 len(config.global_white))
        return True

    def check(self, remote_addr: str, cmd: RemotingCommand, need: dict[str, Perm] | None = None) -> str | None:
        """Why ``cmd`` is refused, or None. ``need`` (the resources it needs) when the caller decoded them
        already: a large heartbeat is checked for its account and signature first, and for its resources once
        decoded off the event loop."""
        fields = cmd.ext_fields

        def verify(secret_key: str) -> bool:
            return signature_matches(fields, cmd.body, secret_key)

        return self.check_access(remote_addr, fields.get(ACCESS_KEY), verify,
                                 need if need is not None else (lambda: required_resources(cmd)),
                                 admin_code=cmd.code in ADMIN_CODES, code=cmd.code)

    def check_access(self, remote_addr: str, access_key: str | None, verify: Callable[[str], bool],
                     need: dict[str, Perm] | Callable[[], dict[str, Perm]], *, admin_code: bool = False,
                     code: int | None = None) -> str | None:
        """The checks of ``check`` for any request: ``verify(secret_key)`` says whether the request's
        signature is right, ``need`` is what it touches (or a function computing it). The gRPC endpoint
        calls this with its own signature scheme (MQv2-HMAC-SHA1). Refusals are counted by kind
        (``refusals``, for metrics)."""
        reason = self._check_access(remote_addr, access_key, verify, need, admin_code, code)
        if reason is not None:
            kind = refusal_kind(reason)
            self.refusals[kind] = self.refusals.get(kind, 0) + 1
        return reason

    def _check_access(self, remote_addr: str, access_key: str | None, verify: Callable[[str], bool],
                      need: dict[str, Perm] | Callable[[], dict[str, Perm]], admin_code: bool,
                      code: int | None) -> str | None:
        self.reload_if_changed()
        config = self.config
        ip = client_ip(remote_addr)
        for white in config.global_white:
            if white(ip):
                return None
        if access_key is None:
            return "No accessKey is configured"
        account = config.accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        if account.white(ip):
            return None
        if callable(need):
            try:
                need = need()
            except Exception as exc:  # a body the validator cannot read is refused, as Java's parse fails
                return f"cannot read the request to check its permissions: {exc}"
        if not verify(account.secret_key):
            return f"Check signature failed for accessKey={access_key}"
        if need.get(TRACE_TOPIC) == Perm.PUB:
            return None
        if admin_code and not account.admin:
            return f"Need admin permission for request code={code}, but accessKey={access_key} is not"
        if not need or (account.perms is None and account.admin):
            return None
        owned = account.perms or {}
        for resource, perm in need.items():
            have = owned.get(resource)
            if have is None:
                have = account.default_group_perm if resource.startswith(RETRY_PREFIX) else account.default_topic_perm
            if not check_permission(perm, have):
                return f"No default permission for {describe(resource)}"
        return None

    def refusal_remark(self, reason: str) -> str:
        return f"{ACL_EXCEPTION}: {reason}"

    # -- changes from mqadmin (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
    def update_account(self, entry: dict[str, Any]) -> None:
        """Create or replace the account ``entry["accessKey"]`` in the file that holds it (a new one goes to the
        main file). ConfigError, and nothing written, if the result would not load."""
        docs = read_acl_documents(self.main_file)
        ak = entry["accessKey"]
        target = next((p for p, d in docs.items() if any(isinstance(a, dict) and a.get("accessKey") == ak
                                                         for a in _accounts_of(d))), self.main_file)
        doc = _mapping(docs[target])
        accounts = [a for a in _accounts_of(doc) if not (isinstance(a, dict) and a.get("accessKey") == ak)]
        doc["accounts"] = [*accounts, entry]
        self._write(docs, target, doc)

    def delete_account(self, access_key: str) -> bool:
        docs = read_acl_documents(self.main_file)
        for path, data in docs.items():
            accounts = _accounts_of(data)
            kept = [a for a in accounts if not (isinstance(a, dict) and a.get("accessKey") == access_key)]
            if len(kept) != len(accounts):
                doc = _mapping(data)
                doc["accounts"] = kept
                self._write(docs, path, doc)
                return True
        return False

    def update_global_white(self, patterns: list[str], file: str | None = None) -> None:
        docs = read_acl_documents(self.main_file)
        target = Path(file) if file else self.main_file
        match = next((p for p in docs if p.resolve() == target.resolve()), None)
        if match is None:
            raise ConfigError(f"{file} is not one of this broker's ACL files ({', '.join(map(str, docs))})")
        doc = _mapping(docs[match])
        doc["globalWhiteRemoteAddresses"] = patterns
        self._write(docs, match, doc)

    def versions(self) -> dict[str, dict[str, int]]:
        """File -> its dataVersion ({"counter", "timestamp"}), as RocketMQ keeps them in the files."""
        out = {}
        for path, data in read_acl_documents(self.main_file).items():
            versions = _mapping(data).get("dataVersion") or [{}]
            last = versions[-1] if isinstance(versions, list) and versions else {}
            out[str(path)] = {"counter": int(last.get("counter", 0)), "timestamp": int(last.get("timestamp", 0))}
        return out

    def _write(self, docs: dict[Path, Any], path: Path, doc: dict[str, Any]) -> None:
        versions = doc.get("dataVersion")
        last = versions[-1] if isinstance(versions, list) and versions and isinstance(versions[-1], dict) else {}
        doc["dataVersion"] = [{"counter": int(last.get("counter", 0)) + 1, "timestamp": int(time.time() * 1000)}]
        config = config_from_documents({**docs, path: doc})  # refuse a change that would not load
        write_atomically(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8"))
        self.config, self._stamp, self._failed_stamp = config, self._file_stamp(), None
        log.info("ACL file %s changed: %d account(s) in force", path, len(config.accounts))


def _mapping(data: Any) -> dict[str, Any]:
    return dict(data) if isinstance(data, dict) else {}


def _accounts_of(data: Any) -> list:
    accounts = _mapping(data).get("accounts")
    return list(accounts) if isinstance(accounts, list) else []
