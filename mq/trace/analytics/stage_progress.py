"""The job's progress lines: ``MQTRACE stage=<name> elapsed=<seconds> [k=v ...]`` on stderr, parsed by
``mq.trace.spark_submit`` (the CLI shows them), and the time each stage took, which the report keeps."""

from __future__ import annotations

import sys
import time

from mq.trace.spark_submit import PROGRESS_PREFIX


class Progress:
    """Prints ``MQTRACE stage=... elapsed=...`` lines to stderr and keeps the stage timings."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.last = self.t0
        self.timings: dict[str, float] = {}

    def __call__(self, stage: str, detail: str = "") -> None:
        now = time.monotonic()
        self.timings[stage] = round(now - self.last, 3)
        self.last = now
        extra = f" {detail}" if detail else ""
        print(f"{PROGRESS_PREFIX}stage={stage} elapsed={now - self.t0:.2f}{extra}", file=sys.stderr, flush=True)
