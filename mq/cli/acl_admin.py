"""Plain ACL administration: `mq updateAclConfig`, `deleteAclConfig`, `updateGlobalWhiteAddr`,
`clusterAclConfigVersion`, `getAclConfig` (mqadmin's acl/ commands, same short options).

With ``-c`` the request goes to every broker of the cluster, masters and slaves (each keeps its own ACL files),
as mqadmin's does; with ``-b`` to one broker. Every broker gets one row (its result or its error), and the command
exits 1 when any of them failed. Changing ACL needs an admin account on a broker that enforces ACL: give it with
the global ``--access-key``/``--secret-key``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Awaitable, Callable

import click

from mq.cli.common import json_option, with_admin

PERMS = ("DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB")


def _require_target(cluster: str | None, broker: str | None) -> None:
    if bool(cluster) == bool(broker):
        raise click.UsageError("give exactly one of -c/--clusterName and -b/--brokerAddr")


def _check_resource_perms(text: str | None, option: str) -> None:
    """``a=PUB,b=SUB|PUB``: each entry ``name=PERM`` (checked here, so a typo never reaches a broker)."""
    for entry in (e.strip() for e in (text or "").split(",") if e.strip()):
        name, eq, perm = entry.partition("=")
        if not eq or not name.strip() or perm.strip() not in PERMS:
            raise click.BadParameter(f"{entry!r}: expected name=PERM with PERM one of {', '.join(PERMS)}",
                                     param_hint=option)


def on_brokers(obj: Any, cluster: str | None, broker: str | None,
               call: Callable[[Any, str], Awaitable[Any]]) -> list[tuple[str, Any, str | None]]:
    """Run ``call(admin, addr)`` on the target brokers: [(addr, result, error)]."""
    async def run(admin) -> list[tuple[str, Any, str | None]]:
        addrs = [broker] if broker else [addr for _, _, addr in await admin.cluster_broker_addrs(cluster)]

        async def one(addr: str) -> tuple[str, Any, str | None]:
            try:
                return addr, await call(admin, addr), None
            except Exception as exc:  # one broker's failure is its row; the others still run
                return addr, None, str(exc)
        return list(await asyncio.gather(*(one(a) for a in addrs)))

    return with_admin(obj, run, timeout=10.0)


def _report(json_mode: bool, title: str, rows: list[tuple[str, Any, str | None]], ok_text: str,
            extra: dict | None = None) -> None:
    from mq.cli.console import Console

    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({**(extra or {}), "brokers": [{"broker": a, "ok": e is None, **({"error": e} if e else {})}
                                                   for a, _, e in rows]})
    else:
        console.table(title, ["Broker", "Result"], [(a, ok_text if e is None else f"failed: {e}") for a, _, e in rows])
    if not rows or any(e is not None for _, _, e in rows):
        sys.exit(1)


@click.command("updateAclConfig")
@click.option("-b", "--brokerAddr", "broker", help="The broker (ip:port) to change.")
@click.option("-c", "--clusterName", "cluster", help="Change every broker of this cluster.")
@click.option("-a", "--accessKey", "access_key", required=True, help="The account's access key (7+ characters).")
@click.option("-s", "--secretKey", "secret_key", required=True, help="The account's secret key (7+ characters).")
@click.option("-w", "--whiteRemoteAddress", "white", default=None, help="Addresses that skip the checks, e.g. 192.168.0.*")
@click.option("-i", "--defaultTopicPerm", "default_topic_perm", type=click.Choice(PERMS), default=None,
              help="Permission on topics the account does not name (a new account: DENY).")
@click.option("-u", "--defaultGroupPerm", "default_group_perm", type=click.Choice(PERMS), default=None,
              help="Permission on groups the account does not name (a new account: DENY).")
@click.option("-t", "--topicPerms", "topic_perms", default=None, help="e.g. topicA=PUB,topicB=PUB|SUB")
@click.option("-g", "--groupPerms", "group_perms", default=None, help="e.g. groupA=SUB,groupB=DENY")
@click.option("-m", "--admin", "admin_flag", type=bool, default=False, show_default=True)
@json_option
@click.pass_obj
def update_acl_config(obj, broker, cluster, access_key, secret_key, white, default_topic_perm, default_group_perm,
                      topic_perms, group_perms, admin_flag, json_mode) -> None:
    """Create or update an account in the brokers' ACL files.

    As with mqadmin, only what is given changes: an option left out keeps the account's current value (a new
    account: no white address, DENY by default, no named resources), and nothing left out is sent."""
    from mq.protocol.headers import CreateAccessConfigRequestHeader

    _require_target(cluster, broker)
    if len(access_key) < 7 or len(secret_key) < 7:
        raise click.BadParameter("the access key and the secret key need at least 7 characters")
    _check_resource_perms(topic_perms, "-t/--topicPerms")
    _check_resource_perms(group_perms, "-g/--groupPerms")
    header = CreateAccessConfigRequestHeader(access_key, secret_key, white, admin_flag, default_topic_perm,
                                             default_group_perm, topic_perms, group_perms)
    rows = on_brokers(obj, cluster, broker, lambda admin, addr: admin.update_acl_account(addr, header))
    _report(json_mode, f"ACL account {access_key}", rows, "updated", {"accessKey": access_key})


@click.command("deleteAclConfig")
@click.option("-b", "--brokerAddr", "broker", help="The broker (ip:port) to change.")
@click.option("-c", "--clusterName", "cluster", help="Change every broker of this cluster.")
@click.option("-a", "--accessKey", "access_key", required=True, help="The account to delete.")
@json_option
@click.pass_obj
def delete_acl_config(obj, broker, cluster, access_key, json_mode) -> None:
    """Delete an account from the brokers' ACL files."""
    _require_target(cluster, broker)
    rows = on_brokers(obj, cluster, broker, lambda admin, addr: admin.delete_acl_account(addr, access_key))
    _report(json_mode, f"ACL account {access_key}", rows, "deleted", {"accessKey": access_key})


@click.command("updateGlobalWhiteAddr")
@click.option("-b", "--brokerAddr", "broker", help="The broker (ip:port) to change.")
@click.option("-c", "--clusterName", "cluster", help="Change every broker of this cluster.")
@click.option("-g", "--globalWhiteRemoteAddresses", "addrs", required=True,
              help="Comma-separated address patterns, e.g. 10.10.103.*,192.168.0.*")
@click.option("-p", "--aclFileFullPath", "acl_file", default=None, help="Which ACL file (default: plain_acl.yml).")
@json_option
@click.pass_obj
def update_global_white_addr(obj, broker, cluster, addrs, acl_file, json_mode) -> None:
    """Set the addresses that skip every ACL check."""
    _require_target(cluster, broker)
    rows = on_brokers(obj, cluster, broker, lambda admin, addr: admin.update_global_white_addrs(addr, addrs, acl_file))
    _report(json_mode, "Global white addresses", rows, f"set to {addrs}", {"globalWhiteRemoteAddresses": addrs})


@click.command("clusterAclConfigVersion")
@click.option("-b", "--brokerAddr", "broker", help="One broker (ip:port).")
@click.option("-c", "--clusterName", "cluster", help="Every broker of this cluster.")
@json_option
@click.pass_obj
def cluster_acl_config_version(obj, broker, cluster, json_mode) -> None:
    """Show the version of each broker's ACL files."""
    import json

    from mq.cli.console import Console

    _require_target(cluster, broker)
    rows = on_brokers(obj, cluster, broker, lambda admin, addr: admin.acl_config_version(addr))
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"brokers": [{"broker": a, **({"error": e} if e else {
            "brokerName": r.broker_name, "clusterName": r.cluster_name, "version": json.loads(r.version),
            "files": json.loads(r.all_acl_file_version or "{}")})} for a, r, e in rows]})
    else:
        table = []
        for addr, r, err in rows:
            if err:
                table.append((addr, "", "", f"failed: {err}"))
                continue
            for path, v in json.loads(r.all_acl_file_version or "{}").items():
                table.append((addr, r.broker_name, path, f"counter {v.get('counter')}, timestamp {v.get('timestamp')}"))
        console.table("ACL config versions", ["Broker", "Name", "File", "Version"], table)
    if not rows or any(e is not None for _, _, e in rows):
        sys.exit(1)


#: PlainAccessConfig's fields, in the order mqadmin getAclConfig prints them
ACCOUNT_FIELDS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                  "topicPerms", "groupPerms")


@click.command("getAclConfig")
@click.option("-b", "--brokerAddr", "broker", help="One broker (ip:port).")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@json_option
@click.pass_obj
def get_acl_config(obj, broker, cluster, json_mode) -> None:
    """Show every account (secret keys included) and global white address of the brokers' ACL files. With -c the
    cluster's masters are asked, as mqadmin's getAclConfig does; reading them needs an admin account."""
    from mq.cli.console import Console

    _require_target(cluster, broker)

    async def run(admin) -> list[tuple[str, Any, str | None]]:
        addrs = [broker] if broker else sorted((await admin.master_addrs(cluster)).values())
        out = []
        for addr in addrs:
            try:
                out.append((addr, await admin.acl_config(addr), None))
            except Exception as exc:  # one broker's failure is its row
                out.append((addr, None, str(exc)))
        return out

    rows = with_admin(obj, run, timeout=10.0)
    console = Console(json_mode=json_mode)
    if json_mode:
        console.json({"brokers": [{"broker": a, **(c or {}), **({"error": e} if e else {})} for a, c, e in rows]})
    for addr, config, err in [] if json_mode else rows:
        if err:
            console.error(f"{addr}: {err}")
            continue
        console.table(f"ACL of {addr}: globalWhiteRemoteAddresses {config['globalWhiteAddrs']}",
                      ["#", *ACCOUNT_FIELDS],
                      [(i + 1, *(_field_text(acc.get(f)) for f in ACCOUNT_FIELDS))
                       for i, acc in enumerate(config["plainAccessConfigs"])])
    if not rows or any(e is not None for _, _, e in rows):
        sys.exit(1)


def _field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)
