"""Plain ACL administration (RocketMQ 4.9 ``AdminBrokerProcessor``), what mqadmin's ACL commands send.

    +------+----------------------------------+---------------------------------------------+----------------+
    | code | request                          | header (ext fields)                         | failure code   |
    +------+----------------------------------+---------------------------------------------+----------------+
    |   50 | UPDATE_AND_CREATE_ACL_CONFIG     | accessKey, secretKey, whiteRemoteAddress,   | 209            |
    |      |                                  | admin, defaultTopicPerm, defaultGroupPerm,  |                |
    |      |                                  | topicPerms, groupPerms (comma-separated)    |                |
    |   51 | DELETE_ACL_CONFIG                | accessKey                                   | 210            |
    |   52 | GET_BROKER_CLUSTER_ACL_INFO      | -> version, allAclFileVersion, brokerName,  | -              |
    |      |                                  |    brokerAddr, clusterName                  |                |
    |   53 | UPDATE_GLOBAL_WHITE_ADDRS_CONFIG | globalWhiteAddrs (comma-separated),         | 211            |
    |      |                                  | aclFileFullPath                             |                |
    |   54 | GET_BROKER_CLUSTER_ACL_CONFIG    | -> body {"globalWhiteAddrs", "plainAccessConfigs": [account]}         |
    +------+----------------------------------+---------------------------------------------+----------------+

Changes are written to the ACL files (atomically, with the file's ``dataVersion`` counter bumped) and are in
force for the next request. A change that would not load (a short key, a bad permission or address pattern) is
refused with the reason and changes nothing. On a broker without ``aclEnable`` every code fails with a remark
that says so (RocketMQ answers with an empty remark there, and leaves 54 unanswered). 50, 51, 53 and 54 need an
admin account (see ``mq.daemon.broker.acl.ADMIN_CODES``). 50 changes only the keys the request carries, as
RocketMQ's does: a left-out option of mqadmin's updateAclConfig keeps the account's value.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable

from mq.daemon.broker.acl import PlainAccessValidator
from mq.daemon.broker.processors.admin import GROUP
from mq.errors import ConfigError
from mq.protocol import headers as h
from mq.protocol.codes import RequestCode, ResponseCode
from mq.protocol.command import RemotingCommand

if TYPE_CHECKING:  # pragma: no cover
    from mq.daemon.broker.controller import BrokerController
    from mq.remoting import Connection

log = logging.getLogger(__name__)
NOT_ENABLED = "ACL is not enabled on this broker (set aclEnable: true in its config)"


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


class AclAdminProcessor:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller

    def _change(self, conn: "Connection", cmd: RemotingCommand, failed: int, what: str,
                change: Callable[[PlainAccessValidator], str | None]) -> RemotingCommand:
        """Run ``change`` on the ACL files; it returns None, or why nothing changed. ``what`` starts RocketMQ's
        failure remark ("The accesskey[...] corresponding to accessConfig has been updated failed")."""
        if self.c.acl is None:
            return cmd.response(failed, NOT_ENABLED)
        try:
            reason = change(self.c.acl)
        except (ConfigError, OSError) as exc:
            reason = str(exc)
        if reason is not None:
            log.warning("%s (request from %s): %s", what, conn.remote_addr, reason)
            return cmd.response(failed, f"{what}: {reason}")
        log.info("ACL changed by %s: code %d", conn.remote_addr, cmd.code)
        return cmd.response(ResponseCode.SUCCESS)

    def update_account(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.CreateAccessConfigRequestHeader.from_ext(cmd.ext_fields)
        # RocketMQ's createAclAccessConfigMap: what the request carries replaces the account's value, the rest
        # stays (an empty secret key or default permission counts as not given)
        entry: dict[str, Any] = {"accessKey": hd.access_key, "admin": hd.admin}
        if hd.secret_key:
            entry["secretKey"] = hd.secret_key
        if hd.white_remote_address is not None:
            entry["whiteRemoteAddress"] = hd.white_remote_address
        if hd.default_topic_perm:
            entry["defaultTopicPerm"] = hd.default_topic_perm
        if hd.default_group_perm:
            entry["defaultGroupPerm"] = hd.default_group_perm
        if hd.topic_perms is not None:
            entry["topicPerms"] = _split(hd.topic_perms)
        if hd.group_perms is not None:
            entry["groupPerms"] = _split(hd.group_perms)
        return self._change(conn, cmd, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                            f"The accesskey[{hd.access_key}] corresponding to accessConfig has been updated failed",
                            lambda acl: acl.update_account(entry))

    def delete_account(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.DeleteAccessConfigRequestHeader.from_ext(cmd.ext_fields)
        return self._change(conn, cmd, ResponseCode.DELETE_ACL_CONFIG_FAILED,
                            f"The accesskey[{hd.access_key}] corresponding to accessConfig has been deleted failed",
                            lambda acl: None if acl.delete_account(hd.access_key) else "no such account")

    def update_global_white(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext(cmd.ext_fields)
        return self._change(conn, cmd, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                            f"The globalWhiteAddresses[{hd.global_white_addrs}] has been updated failed",
                            lambda acl: acl.update_global_white(_split(hd.global_white_addrs),
                                                                hd.acl_file_full_path))

    def all_config(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): mqadmin getAclConfig."""
        if self.c.acl is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        try:
            # fastjson's order: a bean's properties sorted by name
            body = json.dumps(self.c.acl.all_acl_config(), sort_keys=True, separators=(",", ":")).encode()
        except (ConfigError, OSError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"cannot read the ACL files: {exc}")
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def versions(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        if self.c.acl is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        try:
            versions = self.c.acl.versions()
        except (ConfigError, OSError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"cannot read the ACL files: {exc}")
        main = versions.get(str(self.c.acl.main_file), {"counter": 0, "timestamp": 0})
        out = h.GetBrokerAclConfigResponseHeader(
            version=json.dumps(main, separators=(",", ":")), broker_name=self.c.broker_name,
            broker_addr=self.c.address, cluster_name=self.c.cluster,
            all_acl_file_version=json.dumps(versions, separators=(",", ":")))
        return cmd.response(ResponseCode.SUCCESS, ext_fields=out.to_ext())


def register(controller: "BrokerController") -> None:
    p = AclAdminProcessor(controller)
    server = controller.server
    server.register(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, p.update_account, group=GROUP)
    server.register(RequestCode.DELETE_ACL_CONFIG, p.delete_account, group=GROUP)
    server.register(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, p.update_global_white, group=GROUP)
    server.register(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, p.versions, group=GROUP)
    server.register(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, p.all_config, group=GROUP)


__all__ = ["AclAdminProcessor", "register"]
