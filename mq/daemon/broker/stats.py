"""Broker statistics for GET_BROKER_RUNTIME_INFO (PROTOCOL.md §6.9): every value a string.

Message totals come from the store's counters; "today morning" / "yesterday morning" snapshots are taken
when the local date changes (checked on each call and by ``tick``).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING

from mq.protocol.codes import MQ_VERSION

if TYPE_CHECKING:
    from mq.daemon.broker.controller import BrokerController

VERSION_DESC = "V4_9_4"


def _tps(window: dict[str, float], key: str) -> float:
    return float(window.get(key, 0.0))


class BrokerStats:
    def __init__(self, controller: "BrokerController") -> None:
        self.c = controller
        self.boot_ms = int(time.time() * 1000)
        self.msg_put_total = 0
        self.msg_get_total = 0
        self._day = dt.date.today()
        self._put_today_morning = 0
        self._put_yesterday_morning = 0
        self._get_today_morning = 0
        self._get_yesterday_morning = 0

    def on_put(self, n: int) -> None:
        self.msg_put_total += n

    def on_get(self, n: int) -> None:
        self.msg_get_total += n

    def tick(self) -> None:
        today = dt.date.today()
        if today != self._day:
            self._day = today
            self._put_yesterday_morning, self._put_today_morning = self._put_today_morning, self.msg_put_total
            self._get_yesterday_morning, self._get_today_morning = self._get_today_morning, self.msg_get_total

    def runtime_info(self) -> dict[str, str]:
        self.tick()
        c = self.c
        store = c.store
        info = store.runtime_info() if store is not None else {}
        w10, w60, w600 = (info.get("tps_10s") or {}), (info.get("tps_60s") or {}), (info.get("tps_600s") or {})
        groups = c.server.registry.groups
        send = groups.get("send")
        query = groups.get("query")
        earliest = -1
        if store is not None:
            try:
                earliest = c.earliest_message_time()
            except Exception:  # a damaged or rolling file must not break the stats call
                earliest = -1
        now = int(time.time() * 1000)
        out = {
            "brokerVersion": str(MQ_VERSION),
            "brokerVersionDesc": VERSION_DESC,
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {(now - self.boot_ms) // 86_400_000} days, "
                       f"{(now - self.boot_ms) // 3_600_000 % 24} hours, "
                       f"{(now - self.boot_ms) // 60_000 % 60} minutes, {(now - self.boot_ms) // 1000 % 60} seconds ]",
            "msgPutTotalYesterdayMorning": str(self._put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self._put_today_morning),
            "msgPutTotalTodayNow": str(self.msg_put_total),
            "msgGetTotalYesterdayMorning": str(self._get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self._get_today_morning),
            "msgGetTotalTodayNow": str(self.msg_get_total),
            "putTps": f"{_tps(w10, 'put'):.4f} {_tps(w60, 'put'):.4f} {_tps(w600, 'put'):.4f}",
            "getFoundTps": f"{_tps(w10, 'get_found'):.4f} {_tps(w60, 'get_found'):.4f} "
                           f"{_tps(w600, 'get_found'):.4f}",
            "getTransferedTps": f"{_tps(w10, 'get_transferred'):.4f} {_tps(w60, 'get_transferred'):.4f} "
                                f"{_tps(w600, 'get_transferred'):.4f}",
            "getMissTps": "0.0000 0.0000 0.0000",
            "getTotalTps": f"{_tps(w10, 'get_found'):.4f} {_tps(w60, 'get_found'):.4f} "
                           f"{_tps(w600, 'get_found'):.4f}",
            "putMessageTimesTotal": str(info.get("put_count", 0)),
            "putMessageSizeTotal": str(info.get("put_bytes", 0)),
            "sendThreadPoolQueueSize": str(send.queued if send else 0),
            "sendThreadPoolQueueCapacity": str(c.config.send_thread_pool_queue_capacity),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": str(query.queued if query else 0),
            "queryThreadPoolQueueCapacity": str(c.config.query_thread_pool_queue_capacity),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": str(info.get("dispatch_behind_bytes", 0)),
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(earliest),
            "startAcceptSendRequestTimeStamp": "0",
            "commitLogDiskRatio": f"{float(info.get('disk_ratio', 0.0) or 0.0):.4f}",
            "consumeQueueDiskRatio": f"{float(info.get('disk_ratio', 0.0) or 0.0):.4f}",
            "commitLogMinOffset": str(info.get("commit_log_min_offset", 0)),
            "commitLogMaxOffset": str(info.get("commit_log_max_offset", 0)),
            "remainHowManyDataToFlush": str(max(0, int(info.get("commit_log_max_offset", 0))
                                                - int(info.get("commit_log_flushed_offset", 0)))),
            "commitLogDirCapacity": f"Total : {c.disk_total_text()}",
            "heldPullRequests": str(c.hold_service.held_count if c.hold_service else 0),
        }
        return out
