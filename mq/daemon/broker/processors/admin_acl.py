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
    +------+----------------------------------+---------------------------------------------+----------------+

Changes are written to the ACL files (atomically, with the file's ``dataVersion`` counter bumped) and are in
force for the next request. A change that would not load (a short key, a bad permission or address pattern) is
refused with the reason and changes nothing. On a broker without ``aclEnable`` every code fails with a remark
that says so (RocketMQ answers with an empty remark there). 50, 51 and 53 need an admin account (see
``mq.daemon.broker.acl.ADMIN_CODES``).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

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

    def update_account(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.CreateAccessConfigRequestHeader.from_ext(cmd.ext_fields)
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self.c.acl is None:
            return cmd.response(failed, NOT_ENABLED)
        entry: dict[str, Any] = {"accessKey": hd.access_key, "secretKey": hd.secret_key,
                                 "whiteRemoteAddress": hd.white_remote_address or "", "admin": hd.admin,
                                 "defaultTopicPerm": hd.default_topic_perm or "DENY",
                                 "defaultGroupPerm": hd.default_group_perm or "DENY",
                                 "topicPerms": _split(hd.topic_perms), "groupPerms": _split(hd.group_perms)}
        try:
            self.c.acl.update_account(entry)
        except (ConfigError, OSError) as exc:
            log.warning("ACL account %s not updated (request from %s): %s", hd.access_key, conn.remote_addr, exc)
            return cmd.response(failed, f"The accesskey[{hd.access_key}] corresponding to accessConfig has been "
                                f"updated failed: {exc}")
        log.info("ACL account %s created/updated by %s", hd.access_key, conn.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

    def delete_account(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.DeleteAccessConfigRequestHeader.from_ext(cmd.ext_fields)
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if self.c.acl is None:
            return cmd.response(failed, NOT_ENABLED)
        try:
            found = self.c.acl.delete_account(hd.access_key)
        except (ConfigError, OSError) as exc:
            return cmd.response(failed, f"The accesskey[{hd.access_key}] corresponding to accessConfig has been "
                                f"deleted failed: {exc}")
        if not found:
            return cmd.response(failed, f"The accesskey[{hd.access_key}] corresponding to accessConfig has been "
                                "deleted failed: no such account")
        log.info("ACL account %s deleted by %s", hd.access_key, conn.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

    def update_global_white(self, conn: "Connection", cmd: RemotingCommand) -> RemotingCommand:
        hd = h.UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext(cmd.ext_fields)
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self.c.acl is None:
            return cmd.response(failed, NOT_ENABLED)
        try:
            self.c.acl.update_global_white(_split(hd.global_white_addrs), hd.acl_file_full_path)
        except (ConfigError, OSError) as exc:
            return cmd.response(failed, f"The globalWhiteAddresses[{hd.global_white_addrs}] has been updated "
                                f"failed: {exc}")
        log.info("ACL global white addresses set to %s by %s", hd.global_white_addrs, conn.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

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


__all__ = ["AclAdminProcessor", "register"]
