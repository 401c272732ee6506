"""Transactional send + commit round trips per second (Python TransactionProducer against an in-process broker
on one event loop: both sides share one core, so this is a floor for the broker alone).

Each round trip: the half message is sent (SEND_MESSAGE_V2, TRAN_MSG=true), the local transaction commits,
END_TRANSACTION goes oneway and the broker puts the real message plus the op record. Measured with 1 and 16
transactions in flight; the committed messages are counted in the real topic at the end.

    python benchmarks/delivery_transaction_bench.py [--count 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mq.client.transaction import LocalTransactionState, TransactionProducer  # noqa: E402
from mq.common.message import Message  # noqa: E402
from mq.config import BrokerConfig, ClientConfig, NamesrvConfig, ProducerConfig, StoreConfig  # noqa: E402


async def run(count: int) -> None:
    from mq.daemon.broker.controller import BrokerController
    from mq.daemon.namesrv.server import NamesrvServer
    from mq.protocol.bodies import TopicConfig

    root = tempfile.mkdtemp(prefix="mq-bench-tx-")
    ns = NamesrvServer(NamesrvConfig(listen_port=0, kv_config_path=f"{root}/kv.json"))
    await ns.start()
    broker = BrokerController(BrokerConfig(listen_port=0, namesrv_addr=ns.address),
                              store_config=StoreConfig(store_path_root_dir=f"{root}/store",
                                                       mapped_file_size_commit_log=128 * 2**20))
    await broker.start()
    broker.topic_config.put(TopicConfig(topic_name="TxBench", read_queue_nums=4, write_queue_nums=4))
    await broker.register_all(force=True)
    p = TransactionProducer(ProducerConfig(group="PG_TX_BENCH"),
                            ClientConfig(namesrv_addr=ns.address, instance_name="txbench", client_ip="127.0.0.1"),
                            executor=lambda m, a: LocalTransactionState.COMMIT_MESSAGE,
                            checker=lambda m: LocalTransactionState.COMMIT_MESSAGE)
    await p.start()
    try:
        await p.send_in_transaction(Message("TxBench", b"warm-up"))
        for inflight in (1, 16):
            n = count
            it = iter(range(n))

            async def worker() -> None:
                for _ in it:
                    await p.send_in_transaction(Message("TxBench", b"x" * 100))

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(inflight)))
            dt = time.perf_counter() - t0
            print(f"transactional send + commit, {inflight:2d} in flight: {n / dt:8,.0f} round trips/s "
                  f"(mean latency {dt / n * inflight * 1e3:.2f} ms)", flush=True)
        await asyncio.sleep(0.5)
        committed = sum(broker.store.get_max_offset("TxBench", q) for q in range(4))
        print(f"committed messages in the real topic: {committed:,} (expected {2 * count + 1:,}); "
              f"op records {broker.store.get_max_offset('RMQ_SYS_TRANS_OP_HALF_TOPIC', 0):,}")
    finally:
        await p.shutdown()
        await broker.stop()
        await ns.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000)
    args = ap.parse_args()
    from mq.remoting import run as run_loop

    run_loop(run(args.count))


if __name__ == "__main__":
    main()
