"""Whatever a message carries, the store either refuses it or writes a record that reads back whole (issue 28,
defect 2): hostile values for every field that reaches the record layout, through the C writer and the Python
one. After each example the log verifies clean (``mq store verify``) and no file lies outside the store."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common import sysflag as SF
from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.common.record import decode_record
from mq.config import StoreConfig
from mq.store import tools
from mq.store.commit_log import C_WRITER
from mq.store.log_scan import check_record
from mq.store.message_store import MessageStore
from mq.store.status import PutMessageStatus

INT = st.one_of(st.integers(-2**31, 2**31 - 1), st.sampled_from([-1, 2**31, 2**31 - 1, -2**31 - 1, 2**63,
                                                                  -2**63 - 1, 2**64, 10**30]))
TOPICS = st.one_of(st.sampled_from(["T", "%RETRY%g", "t" * 127]),
                   st.sampled_from(["../../../x", "x/../Victim", "a/b", "x\n", "", " ", "t" * 128, "标签", "..",
                                    "x\x00y", "\ud800"]),
                   st.text(max_size=8))
SYS_FLAGS = st.one_of(st.sampled_from([0, SF.BORNHOST_V6, SF.STOREHOST_V6, SF.BORNHOST_V6 | SF.STOREHOST_V6,
                                       SF.NEED_UNWRAP, SF.INNER_BATCH, SF.COMPRESSED, 0x7FFFFFFF, -1,
                                       SF.TRANSACTION_PREPARED_TYPE]),
                      st.integers(-2**31, 2**31 - 1))
PROP_TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["x\x00", "\ud800", "\x00", "a" * 40_000]))


@st.composite
def hostile(draw) -> MessageExtBrokerInner:
    props = draw(st.dictionaries(st.sampled_from(["TAGS", "KEYS", "a", "DELAY", "UNIQ_KEY", "WAIT"]), PROP_TEXT,
                                 max_size=3))
    host = draw(st.sampled_from([("10.0.0.9", 4321), ("2001:db8::5", 65535)]))
    return MessageExtBrokerInner(
        topic=draw(TOPICS), body=draw(st.one_of(st.none(), st.binary(max_size=64))), queue_id=draw(INT),
        flag=draw(INT), properties=props, properties_string=encode_properties(props) if draw(st.booleans()) else None,
        sys_flag=draw(SYS_FLAGS), born_host=pack_host(*host) if draw(st.booleans()) else host,
        born_timestamp=draw(INT), reconsume_times=draw(INT), prepared_transaction_offset=draw(INT),
        tags_code=draw(st.one_of(st.none(), INT)))


@pytest.mark.parametrize("writer", ["c", "python"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(hostile(), min_size=1, max_size=6))
def test_a_stored_record_always_reads_back_whole(writer, msgs):
    if writer == "c" and not C_WRITER:
        pytest.skip("the C writer is not built")
    work = Path(tempfile.mkdtemp(prefix="mq-hostile-"))
    root = work / "store"
    try:
        s = MessageStore(StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                                     mapped_file_size_consume_queue=20 * 64, max_hash_slot_num=64,
                                     max_index_num=256, max_message_size=1024),
                         store_host=("192.168.0.7", 10911))
        if writer == "python":
            cl = s.commit_log
            cl._c_prepare = cl._c_append = cl._c_put = None
        s.start()
        try:
            for m in msgs:
                # a warm-up message of a valid topic first, so that the C encoder knows the topic
                s.put_message(MessageExtBrokerInner(topic="T", body=b"w", born_host=pack_host("10.0.0.1", 1)))
                res = s.put_message(m)
                if res.status is not PutMessageStatus.PUT_OK:
                    assert res.status in (PutMessageStatus.MESSAGE_ILLEGAL,
                                          PutMessageStatus.PROPERTIES_SIZE_EXCEEDED), res
                    assert res.remark
                    continue
                raw = s.select_one_message_by_offset(res.wrote_offset)
                size, req = check_record(memoryview(raw), 0, check_crc=True, delay_levels_ms=[],
                                         expect_phy=res.wrote_offset)
                assert size == len(raw) == res.wrote_bytes
                rec = decode_record(raw, check_crc=True)
                born_v6 = len(pack_host(*rec.born_host)) == 20
                assert bool(rec.sys_flag & SF.BORNHOST_V6) == born_v6
                assert not rec.sys_flag & (SF.STOREHOST_V6 | SF.NEED_UNWRAP | SF.INNER_BATCH)
                assert rec.sys_flag & ~(SF.PRODUCER_BITS | SF.BORNHOST_V6) == 0
                assert 0 <= rec.queue_id and rec.topic == req.topic  # type: ignore[union-attr]
        finally:
            s.shutdown()
        rep = tools.verify_store(root)
        assert rep.ok, rep.problems
        assert sorted(os.listdir(work)) == ["store"], "a file was made outside the store"
    finally:
        shutil.rmtree(work, ignore_errors=True)
