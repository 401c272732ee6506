"""The web console in a real browser (headless Chromium through Playwright), against mq's daemons and against
a RocketMQ 4.9 name server and broker: every view, and every acceptance path of an operator's day: create a
topic, send a message, find it by key and by time and open it, follow its trace, watch a group's lag fall while
a consumer runs, reset its offsets and see the lag come back, resend a dead letter."""

from __future__ import annotations

import itertools
import re
import threading
import time
from typing import Any

import pytest

from mq.client.sync import SyncProducer, SyncPushConsumer, build_message
from mq.config import ClientConfig, ConsumerConfig, ProducerConfig

pytestmark = pytest.mark.slow
_ids = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{int(time.time() * 1000) % 10_000_000}_{next(_ids)}"


def client_config(target, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=target.namesrv, instance_name=f"{name}-{next(_ids)}", client_ip="127.0.0.1",
                        heartbeat_broker_interval=1.0, persist_consumer_offset_interval=0.5,
                        rebalance_interval=1.0, poll_name_server_interval=1.0)


def admin_call(target, fn):
    from mq.client.admin import MQAdmin
    from mq.client.sync import shared_loop

    async def main():
        async with MQAdmin([target.namesrv], timeout=5.0) as admin:
            return await fn(admin)

    return shared_loop().run(main())  # Playwright's loop runs in this thread


def create_topic(target, topic: str, queues: int = 4) -> None:
    from mq.protocol.bodies import TopicConfig

    async def make(admin):
        for addr in (await admin.master_addrs()).values():
            await admin.create_and_update_topic_config(addr, TopicConfig(topic_name=topic, read_queue_nums=queues,
                                                                         write_queue_nums=queues))
    admin_call(target, make)
    wait_until(lambda: _has_route(target, topic), 15, f"route of {topic}")


def _has_route(target, topic: str) -> bool:
    from mq.errors import MQError

    try:
        return bool(admin_call(target, lambda a: a.topic_route(topic)).queue_datas)
    except MQError:
        return False


def wait_until(cond, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def confirm(page) -> None:
    """Answer the console's confirmation dialog with yes."""
    page.wait_for_selector("#confirm-dialog[open]")
    page.click("#confirm-dialog [data-ok]")


def producer(target, trace: bool = False) -> SyncProducer:
    return SyncProducer(ProducerConfig(group=unique("PG_")), client_config(target, "dash-p"),
                        enable_trace=trace).start()


# ---------------------------------------------------------------------------------------------------------
def test_cluster_view_shows_brokers_and_name_servers(console, target, page, shot):
    page.goto(f"{console.url}/cluster")
    row = page.locator("#brokers tbody tr").first
    assert target.broker_addr in row.inner_text()
    assert "MASTER" in row.inner_text()
    assert page.locator(f'[data-namesrv="{target.namesrv}"] .badge.up').count() == 1
    # the live part refreshes without reloading the page
    page.wait_for_function("() => window.performance.getEntriesByType('resource')"
                           ".some(e => e.name.includes('/cluster/live'))", timeout=10_000)
    shot(page, "cluster")


def test_create_topic_with_confirmation_and_the_brokers_answer(console, target, page, shot):
    topic = unique("DashTopic")
    page.goto(f"{console.url}/topics")
    page.click("text=Create a topic")
    form = page.locator("#topic-create")
    form.locator("input[name=topic]").fill("bad topic!")
    form.locator("button[type=submit]").click()
    confirm(page)
    error = page.locator('#topic-create [data-error-for="topic"]')
    error.wait_for()
    assert "illegal characters" in error.inner_text()
    # a name only the broker refuses: its own words, next to the field
    page.locator("#topic-create input[name=topic]").fill("SCHEDULE_TOPIC_XXXX")
    page.locator("#topic-create button[type=submit]").click()
    confirm(page)
    page.wait_for_function("() => (document.querySelector('#topic-create [data-error-for=topic]') || {})"
                           ".textContent?.includes('conflict with system topic')")

    page.locator("#topic-create input[name=topic]").fill(topic)
    page.locator("#topic-create input[name=read]").fill("2")
    page.locator("#topic-create input[name=write]").fill("2")
    page.locator("#topic-create button[type=submit]").click()
    confirm(page)
    result = page.locator("#topic-create [data-result]")
    result.wait_for()
    assert f"topic {topic} created" in result.inner_text()
    assert "SUCCESS" in result.inner_text()

    wait_until(lambda: _has_route(target, topic), 15, f"route of {topic}")
    page.goto(f"{console.url}/topics?kind=normal&q={topic}")
    assert page.locator(f'#topics-table tr[data-topic="{topic}"]').count() == 1
    page.goto(f"{console.url}/topics?kind=all")
    shot(page, "topics")
    # the filter narrows the list without a page load
    page.fill("#topic-q", topic)
    page.wait_for_function(f"() => document.querySelectorAll('#topics-table tbody tr').length === 1")
    page.select_option("#topic-kind", "system")
    page.wait_for_function("() => document.querySelector('[data-count]').dataset.count === '0'")


def test_send_a_message_then_find_it_by_key_and_by_time_and_open_it(console, target, page, shot):
    topic = unique("DashMsg")
    create_topic(target, topic)
    page.goto(f"{console.url}/topics/{topic}")
    page.fill("#topic-send input[name=tag]", "TagA")
    page.fill("#topic-send input[name=keys]", "order-42")
    page.fill("#topic-send textarea[name=body]", '{"order": 42, "items": ["a", "b"]}')
    page.click("#topic-send button[type=submit]")
    confirm(page)
    page.locator("#topic-send [data-result]").wait_for()
    assert "SEND_OK" in page.locator("#topic-send [data-result]").inner_text()
    msg_id = page.locator("#topic-send [data-sent-id]").get_attribute("data-sent-id")
    shot(page, "topic")

    # by key
    page.goto(f"{console.url}/messages?by=key")
    page.fill("input[name=topic]", topic)
    page.fill("input[name=key]", "order-42")
    page.click("#message-query button[type=submit]")
    wait_until(lambda: _find_row(page, msg_id), 20, "the message in the key query", interval=0.5)
    # by time range (the form's default: the last hour)
    page.goto(f"{console.url}/messages?by=topic")
    page.fill("input[name=topic]", topic)
    page.click("#message-query button[type=submit]")
    page.locator(f'#message-rows tr[data-msg="{msg_id}"]').wait_for()
    assert "order-42" in page.locator(f'#message-rows tr[data-msg="{msg_id}"]').inner_text()
    shot(page, "messages")
    page.click(f'#message-rows tr[data-msg="{msg_id}"] a')
    page.locator("[data-msg-id]").wait_for()
    assert page.locator("[data-msg-id]").get_attribute("data-msg-id") == msg_id
    fields = page.locator("#message-fields").inner_text()
    assert "order-42" in fields and "TagA" in fields and "built-in" not in fields
    props = page.locator("#properties").inner_text()
    assert "order-42" in props and "TagA" in props
    assert '"order": 42' in page.locator('[data-body-view="json"]').inner_text()  # pretty JSON first
    page.click('[data-body-tab="hex"]')
    assert "7b 22 6f 72" in page.locator('[data-body-view="hex"]').inner_text()  # {"or
    assert target.broker_addr.split(":")[1] in page.locator("#store-info").inner_text()
    page.click('[data-body-tab="json"]')
    shot(page, "message")


def _find_row(page, msg_id: str) -> bool:
    if page.locator(f'#message-rows tr[data-msg="{msg_id}"]').count():
        return True
    page.click("#message-query button[type=submit]")  # the index may lag the send by a moment
    return False


def test_a_traced_message_shows_its_timeline(console, target, page, shot):
    topic, group = unique("DashTrace"), unique("CG_Trace")
    create_topic(target, topic, 2)
    got = threading.Event()

    def listener(msgs, ctx):
        got.set()
        return "CONSUME_SUCCESS"

    from mq.client.hooks import ConsumeStatus

    consumer = SyncPushConsumer(ConsumerConfig(group=group, consume_from_where="FIRST"),
                                lambda m, c: (listener(m, c), ConsumeStatus.CONSUME_SUCCESS)[1],
                                client_config(target, "dash-c"), enable_trace=True)
    consumer.subscribe(topic).start()
    p = producer(target, trace=True)
    try:
        msg_id = p.send(build_message(topic, b"traced body", keys="trace-key")).msg_id
        assert got.wait(30), "the traced consumer did not get the message"

        def traced() -> bool:
            page.goto(f"{console.url}/trace?id={msg_id}")
            return page.locator(f'[data-trace-group="{group}"]').count() == 1
        wait_until(traced, 40, "the consumer's trace records", interval=1.0)
    finally:
        p.shutdown()
        consumer.shutdown()
    text = page.locator(f'[data-trace-group="{group}"]').inner_text()
    assert "consumed" in text
    assert page.locator('#timeline [data-event^="send"]').count() == 1
    assert page.locator(f'#timeline [data-event="{group}"][data-status="success"]').count() >= 1
    shot(page, "trace")


def _lag(page) -> int:
    return int(page.locator("#lag-total").get_attribute("data-lag-total"))


def test_lag_falls_while_a_consumer_runs_and_comes_back_after_a_reset(console, target, page, shot):
    topic, group = unique("DashLag"), unique("CG_Lag")
    create_topic(target, topic, 2)
    p = producer(target)
    consumed = []
    from mq.client.hooks import ConsumeStatus

    def slow(msgs, ctx):
        time.sleep(0.08)
        consumed.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(group=group, consume_from_where="FIRST", consume_thread_max=1, pull_batch_size=4)
    try:
        t0 = int(time.time() * 1000) - 1000
        p.send(build_message(topic, b"first"))
        first = SyncPushConsumer(cfg, slow, client_config(target, "dash-lag")).subscribe(topic).start()
        wait_until(lambda: len(consumed) >= 1, 30, "the first message")
        time.sleep(1.5)  # its offset committed
        first.shutdown()
        for i in range(120):
            p.send(build_message(topic, f"m{i}".encode()))

        page.goto(f"{console.url}/groups/{group}")
        wait_until(lambda: _lag(page) == 120, 20, "a lag of 120", interval=0.5)
        seen = [_lag(page)]
        consumer = SyncPushConsumer(cfg, slow, client_config(target, "dash-lag")).subscribe(topic).start()
        try:
            def drained() -> bool:
                seen.append(_lag(page))  # the page refreshes itself every second: no reload here
                return seen[-1] == 0
            wait_until(drained, 90, "the lag to fall to 0", interval=0.5)
        finally:
            consumer.shutdown()
        falling = [v for v in seen if 0 < v < 120]
        assert falling, f"the lag never showed a value between 120 and 0: {seen}"
        assert page.locator("#lag-chart canvas").count() >= 1
        shot(page, "group")

        # reset the (now offline) group to before the first message: the whole topic is lag again
        page.reload()
        page.select_option("#group-reset select[name=topic]", topic)
        page.fill("#group-reset input[name=time]", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0 / 1000)))
        page.click("#group-reset button[type=submit]")
        confirm(page)
        result = page.locator("#group-reset [data-result]")
        result.wait_for()
        assert f"offsets of {group} on {topic} reset" in result.inner_text()
        wait_until(lambda: _lag(page) == 121, 20, "the lag to come back to 121", interval=0.5)
    finally:
        p.shutdown()


def test_group_list_shows_lag_and_clients_and_a_message_is_resent_to_the_group(console, target, page, shot):
    topic, group = unique("DashList"), unique("CG_List")
    create_topic(target, topic, 2)
    from mq.client.hooks import ConsumeStatus

    bodies: list[bytes] = []

    def listener(msgs, ctx):
        bodies.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = SyncPushConsumer(ConsumerConfig(group=group), listener,
                                client_config(target, "dash-list")).subscribe(topic).start()
    try:
        def listed() -> bool:
            page.goto(f"{console.url}/groups?q={group}")
            row = page.locator(f'#groups-table tr[data-group="{group}"]')
            return row.count() == 1 and re.search(r"\b1\b", row.locator("td").nth(1).inner_text()) is not None
        wait_until(listed, 30, f"{group} with one client", interval=1.0)
        page.goto(f"{console.url}/groups")
        shot(page, "groups")
        page.goto(f"{console.url}/groups/{group}")
        assert page.locator("#clients tbody tr").count() == 1
        assert topic in page.locator("#subscriptions").inner_text()
        assert page.locator("[data-consume-type]").inner_text() == "CONSUME_PASSIVELY"

        # the message detail's resend: a client of the group consumes the stored message again at once
        p = producer(target)
        try:
            sent = p.send(build_message(topic, b"consume me again"))
        finally:
            p.shutdown()
        wait_until(lambda: b"consume me again" in bodies, 30, "the first delivery")
        page.goto(f"{console.url}/messages/detail?id={sent.offset_msg_id}&topic={topic}")
        page.select_option("#message-resend select[name=group]", group)
        page.click("#message-resend button[type=submit]")
        confirm(page)
        result = page.locator("#message-resend [data-result]")
        result.wait_for()
        assert f"of {group} answered CR_SUCCESS" in result.inner_text()
        assert bodies.count(b"consume me again") == 2
    finally:
        consumer.shutdown()


def test_resend_a_dead_letter(console, target, page, shot):
    topic, group = unique("DashDlq"), unique("CG_Dlq")
    create_topic(target, topic, 1)
    from mq.client.hooks import ConsumeStatus

    failed, redelivered = threading.Event(), []
    cfg = ConsumerConfig(group=group, consume_from_where="FIRST", max_reconsume_times=0)

    def fail(msgs, ctx):
        failed.set()
        return ConsumeStatus.RECONSUME_LATER

    p = producer(target)
    try:
        msg_id = p.send(build_message(topic, b"doomed", keys="dlq-key")).msg_id
        c = SyncPushConsumer(cfg, fail, client_config(target, "dash-dlq")).subscribe(topic).start()
        try:
            assert failed.wait(30)

            def in_dlq() -> bool:
                page.goto(f"{console.url}/groups/{group}")
                return page.locator(f'#dead-letters tr[data-dead="{msg_id}"]').count() == 1
            wait_until(in_dlq, 40, "the dead letter", interval=1.0)
        finally:
            c.shutdown()
        shot(page, "group-dlq")
        page.check(f'#dead-letters tr[data-dead="{msg_id}"] input[type=checkbox]')
        page.click("#group-dlq button[type=submit]")
        confirm(page)
        result = page.locator("#group-dlq [data-result]")
        result.wait_for()
        assert "1 dead letter(s) of" in result.inner_text()
        assert f"%RETRY%{group}" in result.inner_text() and "SEND_OK" in result.inner_text()

        def ok(msgs, ctx):
            redelivered.extend(m.msg_id for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        again = SyncPushConsumer(cfg, ok, client_config(target, "dash-dlq2")).subscribe(topic).start()
        try:
            wait_until(lambda: msg_id in redelivered, 60, "the resent dead letter to be consumed again")
        finally:
            again.shutdown()
    finally:
        p.shutdown()


def test_producer_connections(console, target, page, shot):
    topic = unique("DashProd")
    create_topic(target, topic, 1)
    group = unique("PG_Dash")
    p = SyncProducer(ProducerConfig(group=group), client_config(target, "dash-prod")).start()
    try:
        p.send(build_message(topic, b"x"))

        def shown() -> bool:
            page.goto(f"{console.url}/producers?group={group}&topic={topic}")
            return page.locator("#producer-connections tbody tr").count() == 1
        wait_until(shown, 30, "the producer's connection", interval=1.0)
        shot(page, "producers")
    finally:
        p.shutdown()


def test_update_and_delete_a_topic(console, target, page):
    topic = unique("DashUpd")
    create_topic(target, topic, 4)
    page.goto(f"{console.url}/topics/{topic}")
    page.fill("#topic-update input[name=read]", "2")
    page.fill("#topic-update input[name=write]", "2")
    page.select_option("#topic-update select[name=perm]", "4")
    page.click("#topic-update button[type=submit]")
    confirm(page)
    page.locator("#topic-update [data-result]").wait_for()
    assert f"topic {topic} updated" in page.locator("#topic-update [data-result]").inner_text()

    def route_updated() -> bool:
        page.goto(f"{console.url}/topics/{topic}")
        cells = page.locator("#route tbody tr").first.locator("td")
        return cells.nth(3).inner_text() == "2" and cells.nth(5).inner_text() == "R-"
    wait_until(route_updated, 20, "the new route", interval=1.0)

    page.click("#topic-delete button[type=submit]")
    confirm(page)
    page.wait_for_selector("#topic-delete [data-result], #topic-delete [role=alert]")
    assert page.locator("#topic-delete [role=alert]").count() == 0, page.locator("#topic-delete").inner_text()
    assert f"topic {topic} deleted" in page.locator("#topic-delete [data-result]").inner_text()
    page.goto(f"{console.url}/topics?kind=all&q={topic}")
    assert page.locator(f'#topics-table tr[data-topic="{topic}"]').count() == 0


def test_create_configure_skip_and_delete_a_group(console, target, page):
    topic, group = unique("DashSkip"), unique("CG_Skip")
    create_topic(target, topic, 2)
    page.goto(f"{console.url}/groups")
    page.click("text=Create a subscription group")
    page.fill("#group-create input[name=group]", group)
    page.fill("#group-create input[name=retryMaxTimes]", "3")
    page.click("#group-create button[type=submit]")
    confirm(page)
    page.locator("#group-create [data-result]").wait_for()
    assert f"subscription group {group} written" in page.locator("#group-create [data-result]").inner_text()

    p = producer(target)
    try:
        for i in range(5):
            p.send(build_message(topic, f"s{i}".encode()))
    finally:
        p.shutdown()

    async def commit(admin):  # the group has consumed nothing of the topic yet
        from mq.protocol import headers as h
        from mq.protocol.codes import RequestCode
        from mq.protocol.command import RemotingCommand

        for addr in (await admin.master_addrs()).values():
            for q in range(2):
                await admin.call_broker(addr, RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, h.UpdateConsumerOffsetRequestHeader(
                        consumer_group=group, topic=topic, queue_id=q, commit_offset=0).to_ext()))
    admin_call(target, commit)

    page.goto(f"{console.url}/groups/{group}")
    assert "3" in page.locator("#group-config tbody").inner_text()
    wait_until(lambda: _lag(page) == 5, 20, "a lag of 5", interval=0.5)
    page.select_option("#group-skip select[name=topic]", topic)
    page.click("#group-skip button[type=submit]")
    confirm(page)
    page.locator("#group-skip [data-result]").wait_for()
    assert "backlog skipped" in page.locator("#group-skip [data-result]").inner_text()
    wait_until(lambda: _lag(page) == 0, 20, "no lag after the skip", interval=0.5)

    page.click("#group-delete button[type=submit]")
    confirm(page)
    page.locator("#group-delete [data-result]").wait_for()
    assert f"subscription group {group} deleted" in page.locator("#group-delete [data-result]").inner_text()
