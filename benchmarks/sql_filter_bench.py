"""What SQL92 property filtering costs: compiling a selector, evaluating it on a property map, and matching a
stored 1 KB record (properties read from the record, body skipped), as the broker's pull path does.

    python benchmarks/sql_filter_bench.py [--n 100000]
"""

from __future__ import annotations

import argparse
import timeit

from mq.common import properties as P
from mq.common.message import MessageExtBrokerInner
from mq.common.record import encode_record
from mq.common.sql_filter import compile_sql92
from mq.daemon.broker.property_filter import commit_log_filter

SELECTORS = ("color = 'red'", "a BETWEEN 1 AND 3 AND TAGS IN ('TagA')",
             "(price > 100.5 OR region IN ('eu', 'us')) AND NOT (flag IS NULL)")
PROPS = {P.TAGS: "TagA", "a": "2", "color": "red", "price": "99.5", "region": "us", "flag": "1",
         P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "7F0000010001"}


def per_call(fn, n: int) -> float:
    """µs per call of ``fn`` over ``n`` calls."""
    return timeit.timeit(fn, number=n) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    n = ap.parse_args().n
    msg = MessageExtBrokerInner(topic="BenchTopic", body=b"x" * 1024, properties=dict(PROPS))
    record = bytes(encode_record(msg))
    print(f"evaluations: {n}; record {len(record)} bytes with {len(PROPS)} properties")
    for text in SELECTORS:
        compile_us = per_call(lambda: compile_sql92(text), max(1, n // 100))
        flt = compile_sql92(text)
        eval_us = per_call(lambda: flt.matches(PROPS), n)
        match = commit_log_filter(flt)
        record_us = per_call(lambda: match(record), n // 4)
        print(f"{text!r:70}  compile {compile_us:6.1f} us  evaluate {eval_us:5.2f} us  "
              f"record {record_us:5.2f} us  (matches: {flt.matches(PROPS)})")


if __name__ == "__main__":
    main()
