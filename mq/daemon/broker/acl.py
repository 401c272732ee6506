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

A refusal is answered SYSTEM_ERROR with RocketMQ's remark, ``org.apache.rocketmq.acl.common.AclException:
<reason>, <the Java frame that threw it>`` (RocketMQ's ``RemotingHelper.exceptionSimpleDesc``), e.g.
``...: Check signature failed for accessKey=RocketMQ,
org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:683)``.

Resources a request needs: ``acl_resources.required_resources``.

Permissions are DENY, PUB, SUB and PUB|SUB; an unknown or missing one is DENY. The files are
``plain_acl.yml`` plus every ``*.yml``/``*.yaml`` in the ``acl/`` directory beside it; they are re-read when
one changes (checked at most once a second), and a file that no longer parses leaves the previous rules in
force.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from typing import Any

import yaml

from mq.common.topic import TRACE_TOPIC
from mq.daemon.broker.acl_resources import (RETRY_PREFIX, Perm, check_permission, describe, parse_perm,
                                            required_resources)
from mq.daemon.broker.acl_rules import (as_text, acl_files, address_matcher, config_from_documents, default_acl_file,
                                        load_acl, parse_acl_document, read_acl_documents)
from mq.errors import ConfigError
from mq.protocol.acl import ACCESS_KEY, signature_matches
from mq.protocol.codes import RequestCode as R
from mq.protocol.command import RemotingCommand
from mq.store.config_files import write_atomically

log = logging.getLogger(__name__)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
#: RocketMQ 4.9's admin codes, plus the ACL changes themselves and the reading of every account (4.9 lets any signed
#: account make or read those; an account that could grant itself every permission, or read an admin's secret
#: key, would make the rest pointless)
ADMIN_CODES = frozenset((R.UPDATE_AND_CREATE_TOPIC, R.UPDATE_BROKER_CONFIG, R.DELETE_TOPIC_IN_BROKER,
                         R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, R.DELETE_SUBSCRIPTIONGROUP,
                         R.UPDATE_AND_CREATE_ACL_CONFIG, R.DELETE_ACL_CONFIG, R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                         R.GET_BROKER_CLUSTER_ACL_CONFIG))  # 54 answers every secret key
_PPM = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
#: where RocketMQ 4.9.7 throws each refusal: the frame its remark names after the message
_VALIDATE = _PPM + ".validate(PlainPermissionManager.java:{})"
_CHECK_PERM = _PPM + ".checkPerm(PlainPermissionManager.java:{})"
_PARSE = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"
RELOAD_CHECK_S = 1.0


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


class Refusal(str):
    """Why a request is refused (RocketMQ's AclException message), with the Java frame RocketMQ's remark names."""

    frame: str

    def __new__(cls, reason: str, frame: str) -> "Refusal":
        obj = super().__new__(cls, reason)
        obj.frame = frame
        return obj


class PlainAccessValidator:
    """Checks requests against plain_acl.yml; ``check`` returns None or the ``Refusal``."""

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

    def check(self, remote_addr: str, cmd: RemotingCommand, need: dict[str, Perm] | None = None) -> Refusal | None:
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
                     code: int | None = None) -> Refusal | None:
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
                      code: int | None) -> Refusal | None:
        self.reload_if_changed()
        config = self.config
        ip = client_ip(remote_addr)
        for white in config.global_white:
            if white(ip):
                return None
        if access_key is None:
            return Refusal("No accessKey is configured", _VALIDATE.format(663))
        account = config.accounts.get(access_key)
        if account is None:
            return Refusal(f"No acl config for {access_key}", _VALIDATE.format(667))
        if account.white(ip):
            return None
        if callable(need):
            try:
                need = need()
            except Exception as exc:  # a body the validator cannot read is refused, as Java's parse fails
                return Refusal(f"cannot read the request to check its permissions: {exc}", _PARSE)
        if not verify(account.secret_key):
            return Refusal(f"Check signature failed for accessKey={access_key}", _VALIDATE.format(683))
        if need.get(TRACE_TOPIC) == Perm.PUB:
            return None
        if admin_code and not account.admin:
            return Refusal(f"Need admin permission for request code={code}, but accessKey={access_key} is not",
                           _CHECK_PERM.format(580))
        if not need or (account.perms is None and account.admin):
            return None
        owned = account.perms or {}
        for resource, perm in need.items():
            have = owned.get(resource)
            line = 610  # the account names the resource
            if have is None:
                have = account.default_group_perm if resource.startswith(RETRY_PREFIX) else account.default_topic_perm
                line = 605
            if not check_permission(perm, have):
                return Refusal(f"No default permission for {describe(resource)}", _CHECK_PERM.format(line))
        return None

    def refusal_remark(self, reason: str) -> str:
        """RocketMQ's remark: the exception, its message and the frame that threw it."""
        frame = getattr(reason, "frame", None)
        return f"{ACL_EXCEPTION}: {reason}, {frame}" if frame else f"{ACL_EXCEPTION}: {reason}"

    # -- changes from mqadmin (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
    def update_account(self, entry: dict[str, Any]) -> None:
        """Create the account ``entry["accessKey"]``, or change the keys ``entry`` holds in the file that holds it
        (RocketMQ's createAclAccessConfigMap; a new one goes to the main file). ConfigError, and nothing written,
        if the result would not load."""
        docs = read_acl_documents(self.main_file)
        ak = entry["accessKey"]
        target = next((p for p, d in docs.items() if any(isinstance(a, dict) and a.get("accessKey") == ak
                                                         for a in _accounts_of(d))), self.main_file)
        doc = _mapping(docs[target])
        accounts = _accounts_of(doc)
        at = next((i for i, a in enumerate(accounts) if isinstance(a, dict) and a.get("accessKey") == ak), None)
        if at is None:
            accounts.append(dict(entry))
        else:
            accounts[at] = {**accounts[at], **entry}
        doc["accounts"] = accounts
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

    def all_acl_config(self) -> dict[str, Any]:
        """RocketMQ's getAllAclConfig over every ACL file: ``{"globalWhiteAddrs": [...], "plainAccessConfigs":
        [{accessKey, secretKey, whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms,
        groupPerms}]}``, the first definition of an access key kept; values as the files hold them (as text)."""
        white: list[str] = []
        accounts: list[dict[str, Any]] = []
        seen: set[str] = set()
        for data in read_acl_documents(self.main_file).values():
            doc = _mapping(data)
            patterns = doc.get("globalWhiteRemoteAddresses")
            if isinstance(patterns, list):
                white += [t for t in map(as_text, patterns) if t is not None]
            for raw in _accounts_of(doc):
                ak = as_text(raw.get("accessKey")) if isinstance(raw, dict) else None
                if ak is None or ak in seen:
                    continue
                seen.add(ak)
                entry: dict[str, Any] = {"accessKey": ak, "admin": raw.get("admin") in (True, "true", "True")}
                for key in ("secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm"):
                    if as_text(raw.get(key)) is not None:
                        entry[key] = as_text(raw.get(key))
                for key in ("topicPerms", "groupPerms"):
                    if isinstance(raw.get(key), list):
                        entry[key] = [t for t in map(as_text, raw[key]) if t is not None]
                accounts.append(entry)
        return {"globalWhiteAddrs": white, "plainAccessConfigs": accounts}

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


#: the rules' names, for the callers that import them from here
__all__ = ["ACL_EXCEPTION", "ADMIN_CODES", "Perm", "PlainAccessValidator", "Refusal", "address_matcher",
           "check_permission", "client_ip", "default_acl_file", "parse_acl_document", "parse_perm",
           "required_resources"]
