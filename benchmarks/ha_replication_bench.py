"""Master/slave replication throughput (mq.daemon.broker.ha), master and slave brokers as their own processes.

    python benchmarks/ha_replication_bench.py [--n 20000] [--size 1024] [--inflight 16] [--seconds 5]

Prints, for 1 KB messages sent by one client with ``--inflight`` requests in flight:

1. live replication (ASYNC_MASTER + a connected slave): the master's send rate, and how long after the last
   send answer the slave's commit log max offset equals the master's (its lag), and the replication rate;
2. catch-up: a second, empty slave started against the filled master (one 1 GiB segment, so it copies the
   whole log): time and MB/s from its listening port opening until its max offset equals the master's;
3. sends/s with ``--inflight`` in flight for ASYNC_MASTER and SYNC_MASTER (each with one slave connected).

Offsets come from GET_BROKER_RUNTIME_INFO (commitLogMaxOffset). ``--serve`` is the child mode that runs one broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemons import free_port, wait_port  # noqa: E402

from mq.protocol.bodies import KVTable  # noqa: E402
from mq.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from mq.protocol.command import RemotingCommand  # noqa: E402
from mq.protocol.headers import SendMessageRequestHeaderV2  # noqa: E402
from mq.remoting import RemotingClient, new_event_loop  # noqa: E402

TOPIC = "HaBench"


def serve(args: argparse.Namespace) -> None:
    import logging

    from mq.config import BrokerConfig, StoreConfig
    from mq.daemon.broker.controller import BrokerController

    logging.basicConfig(level=logging.WARNING)
    bcfg = BrokerConfig(host="127.0.0.1", listen_port=args.port, broker_id=args.broker_id)
    scfg = StoreConfig(store_path_root_dir=args.store, broker_role=args.role, ha_listen_port=args.ha_port,
                       ha_master_address=args.master_ha, mapped_file_size_commit_log=1024 * 1024 * 1024)

    async def run() -> None:
        ctrl = BrokerController(bcfg, store_config=scfg)
        await ctrl.start()
        try:
            await asyncio.Event().wait()
        finally:
            await ctrl.stop()

    loop = new_event_loop()
    try:
        loop.run_until_complete(run())
    except KeyboardInterrupt:
        pass


class Broker:
    def __init__(self, role: str, broker_id: int, master_ha: str = "") -> None:
        self.port = free_port()
        self.ha_port = free_port()
        self.store = tempfile.mkdtemp(prefix="mq-ha-bench-")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", "--role", role, "--broker-id", str(broker_id),
             "--port", str(self.port), "--ha-port", str(self.ha_port), "--store", self.store,
             "--master-ha", master_ha])
        wait_port(self.port)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ha_addr(self) -> str:
        return f"127.0.0.1:{self.ha_port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.store, ignore_errors=True)


async def max_offset(client: RemotingClient, addr: str) -> int:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5.0)
    return int(KVTable.from_json(r.body).table["commitLogMaxOffset"])


def send_request(size: int) -> RemotingCommand:
    h = SendMessageRequestHeaderV2(producer_group="PG", topic=TOPIC, default_topic="TBW102",
                                   default_topic_queue_nums=4, queue_id=-1, sys_flag=0,
                                   born_timestamp=int(time.time() * 1000), flag=0,
                                   properties="WAIT\x01true\x02")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_ext(), b"x" * size)


async def send_n(client: RemotingClient, addr: str, n: int, size: int, inflight: int) -> tuple[float, dict]:
    codes: dict[int, int] = {}
    left = [n]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            r = await client.invoke(addr, send_request(size), 10.0)
            codes[r.code] = codes.get(r.code, 0) + 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return time.perf_counter() - t0, codes


async def send_for(client: RemotingClient, addr: str, seconds: float, size: int, inflight: int) -> tuple[float, dict]:
    codes: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            r = await client.invoke(addr, send_request(size), 10.0)
            codes[r.code] = codes.get(r.code, 0) + 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    el = time.perf_counter() - t0
    return sum(codes.values()) / el, codes


async def wait_equal(client: RemotingClient, master: str, slave: str, timeout: float = 300.0) -> float:
    t0 = time.perf_counter()
    target = await max_offset(client, master)
    while await max_offset(client, slave) < target:
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("the slave did not catch up")
        await asyncio.sleep(0.005)
    return time.perf_counter() - t0


async def wait_connected(client: RemotingClient, slave: str) -> None:
    """The slave is connected once a first message shows up in its log."""
    for _ in range(2000):
        if await max_offset(client, slave) > 0:
            return
        await asyncio.sleep(0.01)
    raise SystemExit("the slave never received data")


def names(codes: dict) -> str:
    return ", ".join(f"{ResponseCode(c).name}={n}" for c, n in sorted(codes.items()))


async def bench(args: argparse.Namespace) -> None:
    client = RemotingClient(name="ha-bench")
    n, size, inflight = args.n, args.size, args.inflight
    master = Broker("ASYNC_MASTER", 0)
    slave = Broker("SLAVE", 1, master.ha_addr)
    brokers = [master, slave]
    try:
        await send_n(client, master.addr, 1, size, 1)
        await wait_connected(client, slave.addr)
        start_off = await max_offset(client, master.addr)
        el, codes = await send_n(client, master.addr, n, size, inflight)
        lag = await wait_equal(client, master.addr, slave.addr)
        mb = (await max_offset(client, master.addr) - start_off) / 1e6
        print(f"live ASYNC_MASTER: {n} x {size} B sent in {el:.2f} s = {n / el:,.0f} msg/s ({names(codes)}); slave "
              f"caught up {lag * 1000:.0f} ms after the last answer; replication {mb / (el + lag):.1f} MB/s")
        total = await max_offset(client, master.addr)
        fresh = Broker("SLAVE", 2, master.ha_addr)
        brokers.append(fresh)
        t0 = time.perf_counter()
        await wait_equal(client, master.addr, fresh.addr)
        cu = time.perf_counter() - t0
        print(f"catch-up: an empty slave copied {total / 1e6:.1f} MB in {cu:.2f} s (from its port opening) = "
              f"{total / 1e6 / cu:.1f} MB/s")
        rate, codes = await send_for(client, master.addr, args.seconds, size, inflight)
        print(f"ASYNC_MASTER + 2 slaves, {inflight} in flight: {rate:,.0f} sends/s ({names(codes)})")
        for b in brokers:
            b.stop()
        brokers = []
        smaster = Broker("SYNC_MASTER", 0)
        brokers.append(smaster)
        sslave = Broker("SLAVE", 1, smaster.ha_addr)
        brokers.append(sslave)
        await send_n(client, smaster.addr, 1, size, 1)
        await wait_connected(client, sslave.addr)
        rate, codes = await send_for(client, smaster.addr, args.seconds, size, inflight)
        print(f"SYNC_MASTER + 1 slave, {inflight} in flight: {rate:,.0f} sends/s ({names(codes)})")
        rate, codes = await send_for(client, smaster.addr, args.seconds, size, 1)
        print(f"SYNC_MASTER + 1 slave, 1 in flight: {rate:,.0f} sends/s ({names(codes)})")
        for b in brokers:
            b.stop()
        brokers = []
        amaster = Broker("ASYNC_MASTER", 0)
        brokers.append(amaster)
        brokers.append(Broker("SLAVE", 1, amaster.ha_addr))
        await send_n(client, amaster.addr, 1, size, 1)
        rate, codes = await send_for(client, amaster.addr, args.seconds, size, inflight)
        print(f"ASYNC_MASTER + 1 slave, {inflight} in flight: {rate:,.0f} sends/s ({names(codes)})")
        rate, codes = await send_for(client, amaster.addr, args.seconds, size, 1)
        print(f"ASYNC_MASTER + 1 slave, 1 in flight: {rate:,.0f} sends/s ({names(codes)})")
    finally:
        await client.close()
        for b in brokers:
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--role", default="ASYNC_MASTER", help=argparse.SUPPRESS)
    ap.add_argument("--broker-id", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ha-port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)
    ap.add_argument("--master-ha", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args)
        return
    loop = new_event_loop()
    try:
        loop.run_until_complete(bench(args))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
