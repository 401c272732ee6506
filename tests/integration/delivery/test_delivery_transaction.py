"""Transactions against a real broker: commit, rollback, unknown -> check -> commit, a check answered by another
producer of the group after the first died, the check limit, and rejectTransactionMessage."""

from __future__ import annotations

import asyncio

import pytest
from .delivery_helpers import make_topic, wait_for

from mq.client.transaction import LocalTransactionState as S
from mq.client.transaction import TransactionProducer
from mq.common import properties as P
from mq.common.message import Message
from mq.common.record import decode_record
from mq.config import ProducerConfig
from mq.errors import BrokerError
from mq.protocol.codes import ResponseCode

FAST = dict(transaction_check_interval=300, transaction_time_out=200)


def _bodies(broker, topic: str, queues: int = 4) -> list[bytes]:
    out = []
    for q in range(queues):
        r = broker.store.get_message("t", topic, q, 0, 64)
        out += [decode_record(b).body for b in r.buffers]
    return sorted(out)


def _never(msg):
    raise AssertionError("no check expected")


def test_commit_and_rollback(namesrv, broker_factory, run, client_config):
    broker = broker_factory(**FAST)

    async def go():
        await make_topic(broker, "TopicT1")
        states = {b"c": S.COMMIT_MESSAGE, b"r": S.ROLLBACK_MESSAGE}
        p = TransactionProducer(ProducerConfig(group="PG_T1"), client_config(),
                                executor=lambda m, arg: states[m.body], checker=_never)
        async with p:
            rc = await p.send_in_transaction(Message("TopicT1", b"c"))
            rr = await p.send_in_transaction(Message("TopicT1", b"r"))
            assert rc.state is S.COMMIT_MESSAGE and rr.state is S.ROLLBACK_MESSAGE
            await wait_for(lambda: _bodies(broker, "TopicT1") == [b"c"], 5)
            await wait_for(lambda: broker.store.get_max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 2, 5)
            await asyncio.sleep(1.0)  # several check passes: nothing unresolved, nothing re-committed
        return rc

    rc = run(go(), 30)
    assert _bodies(broker, "TopicT1") == [b"c"]
    committed = [decode_record(b) for q in range(4)
                 for b in broker.store.get_message("t", "TopicT1", q, 0, 8).buffers][0]
    assert committed.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == rc.msg_id
    assert P.TRANSACTION_PREPARED not in committed.properties and P.REAL_TOPIC not in committed.properties
    half = decode_record(broker.store.get_message("t", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 1).buffers[0])
    assert committed.sys_flag & 0xC == 0x8 and committed.prepared_transaction_offset == half.commit_log_offset
    assert half.sys_flag & 0xC == 0 and half.properties[P.REAL_TOPIC] == "TopicT1"
    # the half and op offsets of CID_RMQ_SYS_TRANS moved past both
    assert broker.offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 2
    assert broker.offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 2


def test_unknown_then_check_commits(namesrv, broker_factory, run, client_config):
    broker = broker_factory(**FAST)
    checked = []

    def checker(msg):
        checked.append(msg)
        return S.COMMIT_MESSAGE

    async def go():
        await make_topic(broker, "TopicT2")
        p = TransactionProducer(ProducerConfig(group="PG_T2"), client_config(),
                                executor=lambda m, arg: S.UNKNOW, checker=checker)
        async with p:
            r = await p.send_in_transaction(Message("TopicT2", b"u", properties={P.TAGS: "tx"}))
            assert r.state is S.UNKNOW
            await wait_for(lambda: _bodies(broker, "TopicT2") == [b"u"], 10)
            await asyncio.sleep(1.0)
        return r

    r = run(go(), 30)
    assert _bodies(broker, "TopicT2") == [b"u"]  # committed exactly once
    assert len(checked) == 1
    m = checked[0]
    assert m.topic == "TopicT2" and m.properties[P.TRANSACTION_CHECK_TIMES] == "1"
    assert m.transaction_id == r.msg_id


def test_other_producer_of_group_answers_check(namesrv, broker_factory, run, client_config):
    broker = broker_factory(transaction_check_interval=300, transaction_time_out=1500)
    answered_by = []

    async def go():
        await make_topic(broker, "TopicT3")
        first = TransactionProducer(ProducerConfig(group="PG_T3"), client_config(),
                                    executor=lambda m, arg: S.UNKNOW, checker=_never)
        second = TransactionProducer(ProducerConfig(group="PG_T3"), client_config(),
                                     executor=lambda m, arg: S.UNKNOW,
                                     checker=lambda m: (answered_by.append("second"), S.COMMIT_MESSAGE)[1])
        await first.start()
        await second.start()
        try:
            await first.send_in_transaction(Message("TopicT3", b"orphan"))
            await first.shutdown()  # the instance dies before any check (immunity 1.5 s)
            await wait_for(lambda: _bodies(broker, "TopicT3") == [b"orphan"], 15)
        finally:
            await second.shutdown()

    run(go(), 40)
    assert answered_by == ["second"]


def test_check_limit_discards(namesrv, broker_factory, run, client_config):
    broker = broker_factory(transaction_check_interval=200, transaction_time_out=100, transaction_check_max=2)
    checks = []

    async def go():
        await make_topic(broker, "TopicT4")
        p = TransactionProducer(ProducerConfig(group="PG_T4"), client_config(),
                                executor=lambda m, arg: S.UNKNOW,
                                checker=lambda m: (checks.append(1), S.UNKNOW)[1])
        async with p:
            await p.send_in_transaction(Message("TopicT4", b"undecided"))
            await wait_for(lambda: broker.store.get_max_offset("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1, 15)
            await asyncio.sleep(0.8)

    run(go(), 30)
    assert len(checks) == 2
    assert _bodies(broker, "TopicT4") == []
    assert broker.store.get_max_offset("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1


def test_reject_transaction_message(namesrv, broker_factory, run, client_config):
    broker = broker_factory(reject_transaction_message=True)

    async def go():
        await make_topic(broker, "TopicT5")
        p = TransactionProducer(ProducerConfig(group="PG_T5"), client_config(),
                                executor=lambda m, arg: S.COMMIT_MESSAGE, checker=_never)
        async with p:
            with pytest.raises(BrokerError) as ei:
                await p.send_in_transaction(Message("TopicT5", b"x"))
            return ei.value

    err = run(go(), 20)
    assert err.code == ResponseCode.NO_PERMISSION


def test_late_end_for_an_older_copy_does_not_commit_twice(namesrv, broker_factory, run, client_config, client):
    """unknown -> check (re-appends a copy) -> commit; then a late END_TRANSACTION commit arrives for the
    ORIGINAL half message: SUCCESS, an op record, and still exactly one committed message. Also the header
    checks: a wrong producer group and a wrong queue offset are refused."""
    from mq.common.msg_id import decode_offset_msg_id
    from mq.protocol.codes import RequestCode
    from mq.protocol.command import RemotingCommand
    from mq.protocol.headers import EndTransactionRequestHeader

    broker = broker_factory(**FAST)

    async def go():
        await make_topic(broker, "TopicT6")
        p = TransactionProducer(ProducerConfig(group="PG_T6"), client_config(),
                                executor=lambda m, arg: S.UNKNOW, checker=lambda m: S.COMMIT_MESSAGE)
        async with p:
            r = await p.send_in_transaction(Message("TopicT6", b"once"))
            await wait_for(lambda: _bodies(broker, "TopicT6") == [b"once"], 10)
        _host, phy = decode_offset_msg_id(r.send.offset_msg_id)

        async def end(group: str, qoff: int) -> RemotingCommand:
            hdr = EndTransactionRequestHeader(producer_group=group, tran_state_table_offset=qoff,
                                              commit_log_offset=phy, commit_or_rollback=8, msg_id=r.msg_id)
            return await client.invoke(broker.address, RemotingCommand.request(RequestCode.END_TRANSACTION,
                                                                                hdr.to_ext()))

        wrong_group = await end("PG_OTHER", r.send.queue_offset)
        wrong_offset = await end("PG_T6", r.send.queue_offset + 5)
        late = await end("PG_T6", r.send.queue_offset)
        return wrong_group, wrong_offset, late

    wrong_group, wrong_offset, late = run(go(), 30)
    assert wrong_group.code == ResponseCode.SYSTEM_ERROR and "producer group" in wrong_group.remark
    assert wrong_offset.code == ResponseCode.SYSTEM_ERROR
    assert late.code == ResponseCode.SUCCESS
    assert _bodies(broker, "TopicT6") == [b"once"]


def test_resume_check_of_a_discarded_half_message(namesrv, broker_factory, run, client_config):
    """`mq resumeCheckHalfMessage` (RESUME_CHECK_HALF_MESSAGE 323): a half message discarded after its last check
    goes back to the check queue with its count at 0, the producer is asked again and its commit is delivered."""
    import json

    from click.testing import CliRunner

    from mq.cli.main import cli
    from mq.common.msg_id import create_offset_msg_id

    broker = broker_factory(transaction_check_interval=200, transaction_time_out=100, transaction_check_max=1)
    answer = {"state": S.UNKNOW}
    checks: list[str] = []

    def checker(m):
        checks.append(m.properties[P.TRANSACTION_CHECK_TIMES])
        return answer["state"]

    def mq(*args: str):
        return asyncio.to_thread(CliRunner().invoke, cli, ["-n", namesrv.address, *args])

    async def go():
        await make_topic(broker, "TopicT7")
        p = TransactionProducer(ProducerConfig(group="PG_T7"), client_config(),
                                executor=lambda m, arg: S.UNKNOW, checker=checker)
        async with p:
            sent = await p.send_in_transaction(Message("TopicT7", b"resumed"))
            await wait_for(lambda: broker.store.get_max_offset("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1, 15)
            await asyncio.sleep(0.6)  # no more checks of a discarded message
            assert checks == ["1"]
            [raw] = broker.store.get_message("t", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 1).buffers
            parked = decode_record(raw)
            offset_id = create_offset_msg_id(parked.store_host, parked.commit_log_offset)
            # where an operator finds it, once the broker has registered the new topic
            await wait_for(lambda: namesrv.table.pickup_route("TRANS_CHECK_MAX_TIME_TOPIC") is not None, 10)
            listed = await mq("pull", "-t", "TRANS_CHECK_MAX_TIME_TOPIC", "--json")
            assert listed.exit_code == 0 and offset_id in listed.output, listed.output

            # refused: an ordinary message, a mistyped id, a UNIQ_KEY without its topic
            await make_topic(broker, "TopicT7b")
            plain = await p.send(Message("TopicT7b", b"plain"))
            refused = await mq("resumeCheckHalfMessage", "-i", plain.offset_msg_id)
            assert refused.exit_code == 1 and "not a half message" in str(refused.exception)
            assert (await mq("resumeCheckHalfMessage", "-i", "xyz")).exit_code == 2
            assert (await mq("resumeCheckHalfMessage", "-i", sent.msg_id)).exit_code == 2

            answer["state"] = S.COMMIT_MESSAGE
            ok = await mq("resumeCheckHalfMessage", "-i", offset_id, "--json")
            assert ok.exit_code == 0, ok.output
            assert json.loads(ok.output) == {"msgId": offset_id, "offsetMsgId": offset_id,
                                             "brokerAddr": broker.address, "resumed": True}
            await wait_for(lambda: _bodies(broker, "TopicT7") == [b"resumed"], 15)
            return sent

    sent = run(go(), 60)
    assert checks == ["1", "1"]  # the count started again from 0
    committed = [decode_record(b) for q in range(4) for b in broker.store.get_message("t", "TopicT7", q, 0, 8).buffers]
    assert [m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in committed] == [sent.msg_id]
    assert broker.resume_half_processor.resumed == 1


def test_resume_check_by_transaction_id(namesrv, broker_factory, run, client_config):
    """The UNIQ_KEY form: `-i TRANSACTION_ID -t TRANS_CHECK_MAX_TIME_TOPIC` finds the parked copy by its key."""
    from click.testing import CliRunner

    from mq.cli.main import cli

    broker = broker_factory(transaction_check_interval=200, transaction_time_out=100, transaction_check_max=1)
    answer = {"state": S.UNKNOW}

    async def go():
        await make_topic(broker, "TopicT8")
        p = TransactionProducer(ProducerConfig(group="PG_T8"), client_config(),
                                executor=lambda m, arg: S.UNKNOW, checker=lambda m: answer["state"])
        async with p:
            sent = await p.send_in_transaction(Message("TopicT8", b"by-key"))
            await wait_for(lambda: broker.store.get_max_offset("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1, 15)
            await wait_for(lambda: namesrv.table.pickup_route("TRANS_CHECK_MAX_TIME_TOPIC") is not None, 10)
            answer["state"] = S.COMMIT_MESSAGE
            res = await asyncio.to_thread(CliRunner().invoke, cli, [
                "-n", namesrv.address, "resumeCheckHalfMessage", "-i", sent.msg_id, "-t", "TRANS_CHECK_MAX_TIME_TOPIC"])
            assert res.exit_code == 0, res.output
            assert "put back in the check queue" in res.output
            await wait_for(lambda: _bodies(broker, "TopicT8") == [b"by-key"], 15)

    run(go(), 60)
