"""Page load of each view of the web console (`mq dashboard`), measured in headless Chromium with the browser's
navigation timing, on a cluster with many topics and consumer groups.

    python benchmarks/dashboard_page_load_bench.py [--topics 1000] [--groups 200] [--rounds 10] [--broker mq]

It starts a name server and a broker (``--broker rocketmq``: RocketMQ 4.9's own, from
``$MQ_JAVA_BROKER_CLASSPATH``), creates the topics (4 queues each) and the subscription groups (each with a
committed offset on one topic, so it has a lag), sends a few hundred messages, one of them traced through a traced
consumer, then runs ``mq dashboard`` in its own process and loads every view ``--rounds`` times in one browser
page (after one unmeasured warm-up load). Per view it prints the median and the 90th percentile of:

* ``response``: navigation start to the last byte of the HTML (the console's work: its calls to the cluster and
  the rendering), and
* ``load``: navigation start to the load event (HTML, the vendored CSS and JavaScript, the page's scripts).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_daemons import BROKER_KINDS, brokers, free_port, percentile, wait_port  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def populate(namesrv: str, topics: int, groups: int) -> dict[str, str]:
    """Create the topics and groups, send messages, trace one; returns names the views are loaded with."""
    from mq.client.bounded import gather_bounded
    from mq.client.sync import SyncProducer, SyncPushConsumer, build_message, shared_loop
    from mq.client.admin import MQAdmin
    from mq.client.hooks import ConsumeStatus
    from mq.config import ClientConfig, ConsumerConfig, ProducerConfig
    from mq.protocol import headers as h
    from mq.protocol.bodies import SubscriptionGroupConfig, TopicConfig
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand

    names = [f"BenchTopic{i:04d}" for i in range(topics)]
    group_names = [f"BenchGroup{i:03d}" for i in range(groups)]

    async def create() -> None:
        async with MQAdmin([namesrv], timeout=30.0) as admin:
            addr = next(iter((await admin.master_addrs()).values()))
            await gather_bounded(lambda t: admin.create_and_update_topic_config(
                addr, TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4)), names, 8)
            await gather_bounded(lambda g: admin.create_and_update_subscription_group_config(
                addr, SubscriptionGroupConfig(group_name=g)), group_names, 8)

            async def commit(i: int) -> None:
                hd = h.UpdateConsumerOffsetRequestHeader(consumer_group=group_names[i], topic=names[i % topics],
                                                         queue_id=0, commit_offset=0)
                await admin.call_broker(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, hd.to_ext()))
            await gather_bounded(commit, range(groups), 8)

    t0 = time.monotonic()
    shared_loop().run(create(), timeout=1800)
    print(f"created {topics} topics and {groups} groups in {time.monotonic() - t0:.1f} s", flush=True)
    time.sleep(3)  # the name server learns the topics from the broker's registration
    cc = lambda name: ClientConfig(namesrv_addr=namesrv, instance_name=name, client_ip="127.0.0.1")  # noqa: E731
    with SyncProducer(ProducerConfig(group="BenchDashProducer"), cc("bench-dash-p"), enable_trace=True) as p:
        for i in range(300):
            p.send(build_message(names[i % 10], f"body {i}".encode(), keys=f"k{i}"))
        traced = p.send(build_message(names[0], b'{"traced": true}', keys="traced-key"))
        consumer = SyncPushConsumer(ConsumerConfig(group=group_names[0], consume_from_where="FIRST"),
                                    lambda m, c: ConsumeStatus.CONSUME_SUCCESS, cc("bench-dash-c"),
                                    enable_trace=True)
        consumer.subscribe(names[0]).start()
        time.sleep(8)  # consumed, and the trace records flushed
        consumer.shutdown()
    return {"topic": names[0], "group": group_names[0], "msg_id": traced.msg_id,
            "offset_msg_id": traced.offset_msg_id}


def views(n: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, kind: list / detail / trace, path) of every view measured."""
    return [
        ("cluster", "list", "/cluster"),
        ("topics (all)", "list", "/topics?kind=all"),
        ("topics (normal)", "list", "/topics"),
        ("topic detail", "detail", f"/topics/{n['topic']}"),
        ("consumer groups", "list", "/groups"),
        ("group detail", "detail", f"/groups/{n['group']}"),
        ("messages by time", "list", f"/messages?by=topic&topic={n['topic']}&go=1"),
        ("messages by key", "list", f"/messages?by=key&topic={n['topic']}&key=traced-key&go=1"),
        ("message detail", "detail", f"/messages/detail?id={n['offset_msg_id']}&topic={n['topic']}"),
        ("trace", "trace", f"/trace?id={n['msg_id']}"),
        ("producers", "list", "/producers"),
    ]


def measure(url: str, paths: list[tuple[str, str, str]], rounds: int) -> list[tuple[str, str, list, list]]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=os.environ.get("MQ_CHROMIUM", "/usr/bin/chromium"),
                                     args=CHROMIUM_ARGS)
        page = browser.new_page()
        for name, kind, path in paths:
            response, load = [], []
            for i in range(rounds + 1):
                page.goto(url + path, wait_until="load")
                t = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                                  " return [n.responseEnd - n.startTime, n.loadEventEnd - n.startTime]; }")
                if i:  # the first load warms the console's connections and the browser's cache
                    response.append(t[0])
                    load.append(t[1])
            out.append((name, kind, response, load))
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--broker", choices=BROKER_KINDS, default="mq")
    args = ap.parse_args()
    with brokers(args.broker) as (namesrv, _proc):
        names = populate(namesrv, args.topics, args.groups)
        port = free_port()
        repo = Path(__file__).resolve().parents[1]
        console = subprocess.Popen([sys.executable, "-m", "mq.cli.main", "-n", namesrv, "dashboard", "--port",
                                    str(port)], cwd=str(repo), stderr=subprocess.DEVNULL,
                                   env=dict(os.environ, PYTHONPATH=str(repo)))
        try:
            wait_port(port)
            results = measure(f"http://127.0.0.1:{port}", views(names), args.rounds)
        finally:
            console.terminate()
            console.wait(30)
    target = {"list": 300, "detail": 300, "trace": 1000}
    print(f"\nmq dashboard page load, {args.broker} broker, {args.topics} topics, {args.groups} groups, "
          f"{args.rounds} loads per view (ms)")
    print(f"{'view':<20} {'response p50':>13} {'p90':>8} {'load p50':>10} {'p90':>8} {'target':>8}")
    for name, kind, response, load in results:
        print(f"{name:<20} {statistics.median(response):>13.1f} {percentile(response, 90):>8.1f} "
              f"{statistics.median(load):>10.1f} {percentile(load, 90):>8.1f} {'< ' + str(target[kind]):>8}")


if __name__ == "__main__":
    main()
