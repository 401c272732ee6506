"""rocketmq_rpc_latency and the flow-control refusals: the remoting server's ``RequestObserver``.

The server calls ``answered`` on the loop thread for every request it answers (RemotingServer's module
docstring), with the time of the read that delivered it. A request answered later (a held pull, a SYNC_FLUSH
send) is noted by ``deferred`` in its connection's ``attrs`` and timed when ``sent_later`` sees its answer.

Per request this is one clock read, one dict lookup keyed by (request code, response code, kind) and two list
increments, kept in plain lists::

    cell = [count of bucket 0, ..., count of bucket 9 (+Inf), sum of milliseconds]

with RocketMQ's bounds (``RPC_LATENCY_BOUNDS_MS``). The collector (scrape thread) copies each cell and turns it
into a cumulative histogram; a scrape racing an increment at worst sees the sum of one request more or less.

Labels follow NettyRemotingAbstract.writeResponse: ``protocol_type=remoting``, ``request_code`` and
``response_code`` by their RocketMQ constant names, ``is_long_polling`` (a pull or pop answered later),
``result`` (``oneway`` for oneway requests, else ``success``).

Flow control: an answer SYSTEM_BUSY (``[OVERLOAD]``, ``[REJECTREQUEST]``, ``[TIMEOUT_CLEAN_QUEUE]``...) or
SYSTEM_ERROR ``[PC_SYNCHRONIZED]`` (the page cache is busy) counts one refusal under its reason.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any, Callable, Iterator

from mq.daemon.metrics import names as N
from mq.daemon.metrics.families import Families
from mq.protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode

#: Request codes whose answer-later means a held (long-polling) request; the pop codes join when defined.
LONG_POLLING_CODES = frozenset(int(getattr(RequestCode, name)) for name in ("PULL_MESSAGE", "POP_MESSAGE",
                                                                            "NOTIFICATION")
                               if hasattr(RequestCode, name))
#: Requests kept per connection for a later answer; beyond it new ones are not timed.
MAX_DEFERRED_PER_CONNECTION = 65_536
_DEFERRED = "_mq_metrics_deferred"

_BOUNDS = N.RPC_LATENCY_BOUNDS_MS
_CELL = len(_BOUNDS) + 2  # buckets, +Inf, sum
_LES = [N.bucket_bound(b) for b in _BOUNDS] + ["+Inf"]
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_SYSTEM_BUSY = int(ResponseCode.SYSTEM_BUSY)
#: remark prefix -> reason label of mq_broker_busy_refusals_total
BUSY_REASONS = {"[OVERLOAD]": "overload", "[REJECTREQUEST]": "reject_request",
                "[TIMEOUT_CLEAN_QUEUE]": "timeout_clean_queue", "[PC_SYNCHRONIZED]": "pc_synchronized",
                "[PCBUSY_CLEAN_QUEUE]": "pagecache_busy_clean_queue"}
_ANSWERED, _ONEWAY, _LATER = 0, 1, 2


class RpcMetrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: (request code, response code, kind) -> cell
        self._cells: dict[tuple[int, int, int], list[float]] = {}
        #: reason -> refusals
        self.busy: dict[str, int] = {}

    # -- RequestObserver (loop thread) -------------------------------------------------------------------
    def answered(self, request: Any, response: Any, arrived: float) -> None:
        # _record written out: this runs once per request
        ms = (self._clock() - arrived) * 1000.0
        code = response.code
        key = (request.code, code, _ONEWAY if request.flag & FLAG_ONEWAY else _ANSWERED)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = [0] * _CELL
        cell[bisect_left(_BOUNDS, ms)] += 1
        cell[-1] += ms
        if code == _SYSTEM_BUSY or code == _SYSTEM_ERROR:
            self._refusal(response.remark)

    def deferred(self, conn: Any, request: Any, arrived: float) -> None:
        table = conn.attrs.get(_DEFERRED)
        if table is None:
            table = conn.attrs[_DEFERRED] = {}
        if len(table) < MAX_DEFERRED_PER_CONNECTION:
            table[request.opaque] = (request.code, arrived)

    def sent_later(self, conn: Any, response: Any) -> None:
        table = conn.attrs.get(_DEFERRED)
        entry = table.pop(response.opaque, None) if table else None
        if entry is None:
            return
        code = response.code
        self._record(entry[0], code, _LATER, entry[1])
        if code == _SYSTEM_BUSY or code == _SYSTEM_ERROR:
            self._refusal(response.remark)

    def _record(self, request_code: int, response_code: int, kind: int, arrived: float) -> None:
        ms = (self._clock() - arrived) * 1000.0
        key = (request_code, response_code, kind)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = [0] * _CELL
        cell[bisect_left(_BOUNDS, ms)] += 1
        cell[-1] += ms

    def _refusal(self, remark: str | None) -> None:
        if not remark or remark[0] != "[":
            return
        reason = BUSY_REASONS.get(remark[:remark.find("]") + 1])
        if reason is None:
            return
        self.busy[reason] = self.busy.get(reason, 0) + 1

    # -- collection (scrape thread) ------------------------------------------------------------------------
    def collect(self, families: Families) -> Iterator[Any]:
        hist = families.family(N.RPC_LATENCY, (N.PROTOCOL_TYPE, N.REQUEST_CODE, N.RESPONSE_CODE,
                                               N.IS_LONG_POLLING, N.RESULT))
        for (req, resp, kind), cell in sorted(list(self._cells.items())):
            counts = list(cell)
            long_polling = "true" if kind == _LATER and req in LONG_POLLING_CODES else "false"
            result = N.RESULT_ONEWAY if kind == _ONEWAY else N.RESULT_SUCCESS
            hist.add_histogram((N.PROTOCOL_REMOTING, N.request_code_name(req), N.response_code_name(resp),
                                long_polling, result), _LES, [int(n) for n in counts[:-1]], counts[-1])
        yield hist

    def collect_busy(self, families: Families) -> Iterator[Any]:
        busy = families.family(N.BUSY_REFUSALS, ("reason",))
        for reason, n in sorted(list(self.busy.items())):
            busy.add((reason,), n)
        yield busy


__all__ = ["BUSY_REASONS", "LONG_POLLING_CODES", "RpcMetrics"]
