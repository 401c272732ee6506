"""What an operator reads of a broker's GET_BROKER_RUNTIME_INFO table (version, TPS, today's and yesterday's
counts, disk use), and the cluster overview built from it: shared by ``mq clusterList``, ``exportMetrics`` and
the web console."""

from __future__ import annotations

from typing import Any

from mq.errors import MQError


def first_number(text: str | None) -> float:
    """First token of a ``"x y z"`` TPS value as a float (mqadmin clusterList reads it this way); 0 if absent."""
    if not text:
        return 0.0
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


def _count(kv: dict[str, str], key: str) -> int:
    try:
        return int(kv.get(key) or 0)
    except ValueError:
        return 0


def today_counts(kv: dict[str, str]) -> tuple[int, int]:
    """(messages put today, messages got today) from the msgPutTotal*/msgGetTotal* keys."""
    return (_count(kv, "msgPutTotalTodayNow") - _count(kv, "msgPutTotalTodayMorning"),
            _count(kv, "msgGetTotalTodayNow") - _count(kv, "msgGetTotalTodayMorning"))


def yesterday_counts(kv: dict[str, str]) -> tuple[int, int]:
    """(messages put yesterday, messages got yesterday), as mqadmin's ``clusterList -m`` computes them."""
    return (_count(kv, "msgPutTotalTodayMorning") - _count(kv, "msgPutTotalYesterdayMorning"),
            _count(kv, "msgGetTotalTodayMorning") - _count(kv, "msgGetTotalYesterdayMorning"))


def runtime_summary(kv: dict[str, str]) -> dict[str, object]:
    """What clusterList shows of one broker's GET_BROKER_RUNTIME_INFO table."""
    put_today, get_today = today_counts(kv)
    return {"version": kv.get("brokerVersionDesc", ""), "inTps": first_number(kv.get("putTps")),
            "outTps": first_number(kv.get("getTransferedTps")), "putToday": put_today, "getToday": get_today,
            "commitLogDiskRatio": kv.get("commitLogDiskRatio", "")}


def broker_rows(info: Any, runtime: dict[str, dict[str, str] | str]) -> list[tuple[dict[str, Any], Any]]:
    """One (row, runtime table or error text) per broker address of a cluster overview, sorted by cluster,
    broker name and id; the row holds ``cluster``, ``brokerName``, ``brokerId`` and ``address``."""
    out = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                out.append(({"cluster": cluster, "brokerName": name, "brokerId": bid, "address": addr},
                            runtime.get(addr)))
    return out


async def cluster_overview(admin: Any) -> tuple[Any, dict[str, dict[str, str] | str]]:
    """The name server's ClusterInfo and, per broker address (masters and slaves), its runtime table or the
    error that broker answered (a broker that is down is a text, not an exception)."""
    from mq.client.bounded import gather_bounded

    info = await admin.cluster_info()
    addrs = [addr for bd in info.broker_addr_table.values() for addr in bd.broker_addrs.values()]

    async def one(addr: str) -> dict[str, str] | str:
        try:
            return await admin.fetch_broker_runtime_stats(addr)
        except MQError as exc:
            return str(exc)

    return info, dict(zip(addrs, await gather_bounded(one, addrs, 16)))
