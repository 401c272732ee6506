"""How long this machine takes to wake an idle process: one-byte ping-pongs between two processes over a socket
pair, back to back and after idle gaps. Latency figures of the daemons (C++ sync sends, end-to-end) include
several such wake-ups per message, so this is the floor they stand on; on the project's VM the p99 after 5 ms
idle reaches milliseconds.

    python benchmarks/vm_wakeup_probe.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import os
import socket
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    a = ap.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    left, right = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the echoing child
        left.close()
        while True:
            data = right.recv(64)
            if not data:
                os._exit(0)
            right.send(data)
    right.close()
    try:
        for gap in (0.0, 0.001, 0.005, 0.02):
            times = []
            for _ in range(a.rounds):
                if gap:
                    time.sleep(gap)
                t = time.perf_counter()
                left.send(b"x")
                left.recv(64)
                times.append((time.perf_counter() - t) * 1e6)
            times.sort()
            n = len(times)
            print(f"round trip after {gap * 1000:4.0f} ms idle: p50 {times[n // 2]:7.1f} us   p90 "
                  f"{times[n * 9 // 10]:7.1f} us   p99 {times[n * 99 // 100]:8.1f} us   max {times[-1]:8.1f} us",
                  flush=True)
    finally:
        left.close()
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
