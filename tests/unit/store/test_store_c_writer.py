"""The C record encoder and writer (mq/store/_append.c) give the same records, bytes, queue offsets and dispatch
requests as the commit log's Python code, and leave to it every case they do not handle."""

from __future__ import annotations

import gc
import os
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common import properties as P
from mq.common import sysflag as SF
from mq.common.hosts import pack_host
from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.common.record import crc32, decode_records
from mq.store import native
from mq.store.commit_log import C_WRITER, CommitLog, DispatchRequest, Prepared
from mq.store.status import PutMessageStatus

needs_c = pytest.mark.skipif(not C_WRITER, reason="the C writer is not built (no C compiler at install) or "
                             "MQ_PURE_PYTHON is set")

DELAYS = [1000, 5000, 10000]
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)
tags = st.one_of(st.none(), st.just(""), text, st.sampled_from(["TagA", "标签", "𝄞x", "é"]))
TOPICS = ["T", "TopicTest", "%RETRY%g", "t" * 127]
hosts = st.sampled_from([("10.0.0.9", 4321), ("127.0.0.1", 0), ("10.1.2.3", 65535), ("2001:db8::5", 65535)])


@st.composite
def messages(draw, topic=None):
    props: dict[str, str] = {}
    tg = draw(tags)
    if tg is not None:
        props[P.TAGS] = tg
    if draw(st.booleans()):
        props[P.KEYS] = draw(text)
    if draw(st.booleans()):
        props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = draw(st.text("0123456789ABCDEF", min_size=32, max_size=32))
    if draw(st.booleans()):
        props[P.WAIT_STORE_MSG_OK] = draw(st.sampled_from(["true", "false", ""]))
    if draw(st.integers(0, 5)) == 5:
        props[P.DELAY_TIME_LEVEL] = draw(st.sampled_from(["0", "1", "3", "9", "x", ""]))
    for k, v in draw(st.dictionaries(st.sampled_from(["a", "b", "long"]), text, max_size=2)).items():
        props[k] = v
    host = draw(hosts)
    born = host if draw(st.integers(0, 4)) == 4 else pack_host(*host)  # the broker hands packed hosts over
    given_string = draw(st.integers(0, 4)) < 4
    return MessageExtBrokerInner(
        topic=topic or draw(st.sampled_from(TOPICS)),
        body=None if draw(st.integers(0, 5)) == 5 else draw(st.binary(max_size=300)),
        queue_id=draw(st.integers(0, 7)), flag=draw(st.integers(-2**31, 2**31 - 1)),
        properties=props if props or draw(st.booleans()) else None,
        properties_string=encode_properties(props) if given_string else None,
        sys_flag=draw(st.sampled_from([0, SF.TRANSACTION_PREPARED_TYPE, SF.TRANSACTION_COMMIT_TYPE,
                                       SF.TRANSACTION_ROLLBACK_TYPE, SF.COMPRESSED, SF.BORNHOST_V6 | SF.COMPRESSED])),
        born_host=born, born_timestamp=draw(st.integers(0, 2**63 - 1)),
        reconsume_times=draw(st.integers(0, 16)), prepared_transaction_offset=draw(st.integers(0, 2**62)),
        tags_code=draw(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))),
    )


def _logs(tmp_path, name: str, store_host=("192.168.0.7", 10911), max_message_size=256):
    c = CommitLog(tmp_path / f"{name}-c", 1 << 20, store_host, max_message_size=max_message_size,
                  delay_levels_ms=DELAYS)
    py = CommitLog(tmp_path / f"{name}-py", 1 << 20, store_host, max_message_size=max_message_size,
                   delay_levels_ms=DELAYS)
    py._c_prepare = py._c_append = py._c_put = None
    for log in (c, py):  # a topic's first put checks its name and caches its prefix (Python): done once here
        for topic in TOPICS:
            log.prepare(MessageExtBrokerInner(topic=topic, body=b"", born_host=pack_host("10.0.0.1", 1)))
    return c, py


def _segment(log: CommitLog) -> bytes:
    mf = log.queue.files[-1]
    return bytes(mf.mm[:mf.wrote_position])


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(messages(), min_size=1, max_size=4), min_size=1, max_size=6),
       st.sampled_from([("192.168.0.7", 10911)] * 3 + [("fe80::1", 10911)]), st.booleans(), st.booleans(),
       st.sets(st.integers(0, 5)))
def test_same_records_as_the_python_writer(tmp_path_factory, batches, store_host, c_staging, py_staging, commits):
    """Also with either log staging its records (SYNC_FLUSH) instead of storing them through the mapping, and
    committing them after some of the batches."""
    tmp = tmp_path_factory.mktemp("cw")
    c, py = _logs(tmp, "x", store_host)
    c.staging, py.staging = c_staging, py_staging
    try:
        for i, batch in enumerate(batches):
            pc = [c.prepare(m) for m in batch]
            pp = [py.prepare(m) for m in batch]
            assert pc == pp
            if any(p.__class__ is PutMessageStatus for p in pc):
                continue
            rc = c.append(pc, 1_700_000_000_000 + i)
            rp = py.append(pp, 1_700_000_000_000 + i)
            assert rc == rp
            assert all(r.__class__ is DispatchRequest for r in rc)
            assert c.topic_queue_table == py.topic_queue_table
            if i in commits:
                c.commit()
                py.commit()
        c.commit()
        py.commit()
        assert c.staged_bytes == py.staged_bytes == 0
        assert _segment(c) == _segment(py)
        for rec in decode_records(_segment(c)):
            assert rec.store_timestamp >= 1_700_000_000_000
    finally:
        c.close()
        py.close()


@needs_c
def test_common_message_is_encoded_in_c(tmp_path):
    c, _ = _logs(tmp_path, "fast")
    m = MessageExtBrokerInner(topic="Fresh", body=b"x" * 100, queue_id=3, properties={P.TAGS: "TagA", P.KEYS: "k1 k2"},
                              properties_string=encode_properties({P.TAGS: "TagA", P.KEYS: "k1 k2"}),
                              born_host=pack_host("10.0.0.1", 5), born_timestamp=1)
    assert c._c_prepare is not None
    assert c._c_prepare(m, c._topic_prefix, 256, 256 + 65536, Prepared, crc32) is None  # a topic not seen yet
    first = c.prepare(m)  # the Python path checks the name and caches its prefix
    fast = c._c_prepare(m, c._topic_prefix, 256, 256 + 65536, Prepared, crc32)
    assert fast == first and fast.__class__ is Prepared
    assert fast.tags_code == 2598919 and fast.keys == "k1 k2" and fast.wait is True
    c.close()


@needs_c
@pytest.mark.parametrize("change", [
    {"born_host": ("10.0.0.1", 5)},  # not packed
    {"born_host": pack_host("::2", 5)},  # IPv6
    {"body": b"x" * 300},  # over the maximum size: the Python path answers MESSAGE_ILLEGAL
    {"properties": {P.DELAY_TIME_LEVEL: "2"}},  # rerouted to the schedule topic
    {"properties_string": None},  # encoded from the dict
    {"body": bytearray(b"abc")},
])
def test_cases_left_to_python(tmp_path, change):
    c, py = _logs(tmp_path, "fb")
    kw = dict(topic="T", body=b"abc", queue_id=1, properties={P.TAGS: "A"}, properties_string="TAGS\x01A\x02",
              born_host=pack_host("10.0.0.1", 5), born_timestamp=1)
    kw.update(change)
    if "properties" in change and "properties_string" not in change:
        kw["properties_string"] = encode_properties(kw["properties"])
    m = MessageExtBrokerInner(**kw)
    assert c._c_prepare(m, c._topic_prefix, 256, 256 + 65536, Prepared, crc32) is None
    assert c.prepare(m) == py.prepare(m)
    c.close()
    py.close()


@needs_c
def test_append_leaves_ipv6_born_hosts_to_python(tmp_path):
    c, py = _logs(tmp_path, "v6")
    msgs = [MessageExtBrokerInner(topic="T", body=b"a", born_host=pack_host("10.0.0.1", 5)),
            MessageExtBrokerInner(topic="T", body=b"b", born_host=pack_host("::5", 5))]
    prepared = [c.prepare(m) for m in msgs]
    assert c._c_append(c.queue.get_last_file(0).mm, 0, 0, prepared, 7, c.store_host, {}, DispatchRequest) is None
    assert c.append(prepared, 7) == py.append([py.prepare(m) for m in msgs], 7)
    assert _segment(c) == _segment(py)
    c.close()
    py.close()


@needs_c
def test_append_checks_before_writing(tmp_path):
    """A record whose fields do not fit, or that does not fit the buffer, changes nothing."""
    c, _ = _logs(tmp_path, "bad")
    m = MessageExtBrokerInner(topic="T", body=b"abc", born_host=pack_host("10.0.0.1", 5))
    good = c.prepare(m)
    mm = c.queue.get_last_file(0).mm
    table = {("T", 0): 5}
    with pytest.raises(OverflowError):
        c._c_append(mm, 0, 0, [good, good._replace(flag=2**31)], 7, c.store_host, table, DispatchRequest)
    with pytest.raises(ValueError, match="do not fit"):
        c._c_append(mm, len(mm) - 10, 0, [good], 7, c.store_host, table, DispatchRequest)
    with pytest.raises(ValueError, match="total size"):
        c._c_append(mm, 0, 0, [good._replace(total=good.total + 1)], 7, c.store_host, table, DispatchRequest)
    with pytest.raises(TypeError):
        c._c_append(mm, 0, 0, [good._replace(body="text")], 7, c.store_host, table, DispatchRequest)
    assert table == {("T", 0): 5} and bytes(mm[:64]) == bytes(64)
    reqs = c._c_append(mm, 0, 1000, [good, good], 7, c.store_host, table, DispatchRequest)
    assert [(r.queue_offset, r.phy_offset) for r in reqs] == [(5, 1000), (6, 1000 + good.total)]
    assert table == {("T", 0): 7}
    c.close()


@needs_c
@pytest.mark.parametrize("at, value, error, match", [
    (None, None, TypeError, r"takes exactly 8 arguments \(0 given\)"),
    (1, "0", TypeError, "cannot be interpreted as an integer"),
    (2, 2**64, OverflowError, "too big to convert"),
    (3, (), TypeError, "argument 4 must be list, not tuple"),
    (5, "host", TypeError, "bytes-like object is required"),
    (6, [], TypeError, "argument 7 must be dict, not list"),
    (7, "DispatchRequest", TypeError, "argument 8 must be type, not str"),
])
def test_append_argument_errors_change_nothing(tmp_path, at, value, error, match):
    """The writer's argument checks (METH_FASTCALL, by hand) raise what PyArg_ParseTuple would, before any
    byte or queue offset changes. ``at``: the argument replaced by ``value`` (None: no arguments at all)."""
    c, _ = _logs(tmp_path, "args")
    good = c.prepare(MessageExtBrokerInner(topic="T", body=b"abc", born_host=pack_host("10.0.0.1", 5)))
    mm = c.queue.get_last_file(0).mm
    table = {("T", 0): 5}
    call = [mm, 0, 0, [good], 7, c.store_host, table, DispatchRequest]
    if at is None:
        call = []
    else:
        call[at] = value
    with pytest.raises(error, match=match):
        c._c_append(*call)
    assert table == {("T", 0): 5} and bytes(mm[:64]) == bytes(64)
    c.close()


@needs_c
def test_prepare_argument_errors(tmp_path):
    c, _ = _logs(tmp_path, "prep")
    msg = MessageExtBrokerInner(topic="T", body=b"abc", born_host=pack_host("10.0.0.1", 5))
    with pytest.raises(TypeError, match=r"takes exactly 6 arguments \(1 given\)"):
        c._c_prepare(msg)
    with pytest.raises(TypeError, match="argument 2 must be dict"):
        c._c_prepare(msg, [], 1, 2, Prepared, None)
    with pytest.raises(OverflowError):
        c._c_prepare(msg, {}, 2**70, 2, Prepared, None)
    with pytest.raises(TypeError, match="argument 5 must be type"):
        c._c_prepare(msg, {}, 1, 2, "Prepared", None)
    with pytest.raises(TypeError, match="argument 6 must be callable or None, not int"):
        c._c_prepare(msg, {}, 1, 2, Prepared, 7)
    c.close()


@needs_c
@pytest.mark.parametrize("body", [b"", b"abc", bytes(range(256)) * 8, b"\xff" * 4093])
def test_prepare_body_crc_is_rocketmqs_whichever_crc32_computes_it(tmp_path, body):
    """The C encoder takes the body CRC from the crc32 it is given (zlib-ng's where installed) or from zlib
    (None): the same value, with the top bit cleared, and a failing crc32 fails the prepare."""
    c, _ = _logs(tmp_path, "crc", max_message_size=8192)
    msg = MessageExtBrokerInner(topic="T", body=body, properties_string="", born_host=pack_host("10.0.0.1", 5))
    assert c.prepare(msg).__class__ is Prepared  # caches the topic's prefix for the C path
    args = (msg, c._topic_prefix, c.max_message_size, c._max_total, Prepared)
    want = zlib.crc32(body) & 0x7FFFFFFF
    assert c._c_prepare(*args, None).crc == want
    assert c._c_prepare(*args, crc32).crc == want
    assert c._c_prepare(*args, lambda b: 0xFFFFFFFF).crc == 0x7FFFFFFF
    assert c._c_prepare(*args, lambda b: -1).crc == 0x7FFFFFFF  # masked like Java's int

    def broken(b):
        raise RuntimeError("no crc today")

    with pytest.raises(RuntimeError, match="no crc today"):
        c._c_prepare(*args, broken)
    c.close()


@needs_c
def test_requests_are_hidden_from_the_cyclic_collector_only_when_they_hold_no_containers(tmp_path):
    """The requests wait for the index thread; untracked, they cost no full collections (they hold no cycles)."""
    c, _ = _logs(tmp_path, "gc")
    m = MessageExtBrokerInner(topic="T", body=b"abc", properties={P.KEYS: "k"}, properties_string="KEYS\x01k\x02",
                              born_host=pack_host("10.0.0.1", 5))
    good = c.prepare(m)
    mm = c.queue.get_last_file(0).mm
    reqs = c._c_append(mm, 0, 0, [good, good], 7, c.store_host, {}, DispatchRequest)
    assert not gc.is_tracked(reqs) and not any(gc.is_tracked(r) for r in reqs)
    odd = good._replace(keys=["a container"])  # not what prepare makes, but handled safely
    reqs = c._c_append(mm, 2 * good.total, 0, [good, odd], 7, c.store_host, {}, DispatchRequest)
    assert gc.is_tracked(reqs) and [gc.is_tracked(r) for r in reqs] == [False, True]
    assert reqs[1].keys == ["a container"]
    c.close()

@pytest.mark.skipif(bool(os.environ.get(native.PURE_PYTHON_ENV)), reason=f"{native.PURE_PYTHON_ENV} is set")
def test_the_c_writer_is_built_where_a_compiler_is():
    """An install on a machine with a C compiler builds the writer (setup.py marks it optional, so a broken build
    would otherwise go unnoticed and leave the store on its slower Python path)."""
    import shutil
    import sysconfig

    if not shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]):
        pytest.skip("no C compiler on this machine")
    assert C_WRITER


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(messages(), min_size=1, max_size=40), st.sampled_from([("192.168.0.7", 10911), ("fe80::1", 10911)]),
       st.booleans(), st.sets(st.integers(0, 39)))
def test_put_one_writes_what_prepare_and_append_write(tmp_path_factory, msgs, store_host, staging, commits):
    """CommitLog.put_one (the fused C call where it applies, both steps elsewhere: new topics, delays, IPv6 hosts,
    the first segment, rolls into the next of these 4 KiB segments) against the Python prepare + append, through
    the mapping or staged (SYNC_FLUSH) and committed after some of the messages."""
    tmp = tmp_path_factory.mktemp("po")
    c = CommitLog(tmp / "c", 4096, store_host, max_message_size=1024, delay_levels_ms=DELAYS)
    py = CommitLog(tmp / "py", 4096, store_host, max_message_size=1024, delay_levels_ms=DELAYS)
    py._c_prepare = py._c_append = py._c_put = None
    c.staging = py.staging = staging
    try:
        for i, m in enumerate(msgs):
            ts = 1_700_000_000_000 + i
            rc = c.put_one(m, ts)
            p = py.prepare(m)
            rp = p if p.__class__ is PutMessageStatus else py.append([p], ts)
            assert rc == rp
            assert c.topic_queue_table == py.topic_queue_table
            assert c.staged_bytes == py.staged_bytes and c.last_store_timestamp == py.last_store_timestamp
            if i in commits:
                c.commit()
                py.commit()
            assert c.max_offset == py.max_offset
        c.commit()
        py.commit()
        assert [bytes(f.mm[:f.wrote_position]) for f in c.queue.files] == \
            [bytes(f.mm[:f.wrote_position]) for f in py.queue.files]
    finally:
        c.close()
        py.close()


def _put_one_args(c: CommitLog, msg: MessageExtBrokerInner, ts: int = 7, stage=None, staged: int = 0) -> tuple:
    return msg, c.queue.files[-1], ts, c.topic_queue_table, c._c_put_config, stage, staged


@needs_c
def test_put_one_v4_writes_at_the_write_position_and_moves_it(tmp_path):
    c, _ = _logs(tmp_path, "one")
    m = MessageExtBrokerInner(topic="T", body=b"abc", queue_id=2, properties={P.TAGS: "TagA"},
                              properties_string="TAGS\x01TagA\x02", born_host=pack_host("10.0.0.1", 5))
    first = c.append([c.prepare(m)], 5)  # maps the first segment
    mf = c.queue.files[-1]
    (r,) = c._c_put(*_put_one_args(c, m))
    assert (r.phy_offset, r.queue_offset, r.size, r.store_timestamp) == (first[0].size, 1, first[0].size, 7)
    assert mf.wrote_position == 2 * r.size
    assert [x.queue_offset for x in decode_records(bytes(mf.mm[:mf.wrote_position]))] == [0, 1]
    c.close()


@needs_c
@pytest.mark.parametrize("squeeze", ["reserved_to", "zeroing_from", "file_size"])
def test_put_one_v4_leaves_an_unusual_room_to_the_general_path(tmp_path, squeeze):
    """Past the reserved blocks, into a chunk being zeroed, or without room for the BLANK end: None back and
    nothing written or changed, so CommitLog.append decides."""
    c, _ = _logs(tmp_path, "room")
    m = MessageExtBrokerInner(topic="T", body=b"abc", properties_string="", born_host=pack_host("10.0.0.1", 5))
    c.append([c.prepare(m)], 5)
    mf = c.queue.files[-1]
    pos, table = mf.wrote_position, dict(c.topic_queue_table)
    size = c.prepare(m).total
    before = bytes(mf.mm[:pos + size + 8])
    limit = pos + size - 1 if squeeze != "file_size" else pos + size + 7
    if squeeze == "file_size":
        mf.file_size, saved = limit, mf.file_size
    else:
        saved = getattr(mf, squeeze)
        setattr(mf, squeeze, limit)
    assert c._c_put(*_put_one_args(c, m)) is None
    assert (mf.wrote_position, c.topic_queue_table, bytes(mf.mm[:pos + size + 8])) == (pos, table, before)
    setattr(mf, squeeze, saved)
    assert c._c_put(*_put_one_args(c, m)) is not None
    c.close()


@needs_c
def test_put_one_v4_argument_errors_change_nothing(tmp_path):
    c, _ = _logs(tmp_path, "oneargs")
    m = MessageExtBrokerInner(topic="T", body=b"abc", properties_string="", born_host=pack_host("10.0.0.1", 5))
    c.append([c.prepare(m)], 5)
    mf = c.queue.files[-1]
    pos, table = mf.wrote_position, dict(c.topic_queue_table)
    msg, _mf, ts, tab, config, _stage, _staged = _put_one_args(c, m)
    with pytest.raises(TypeError, match=r"takes exactly 7 arguments \(4 given\)"):
        c._c_put(msg, mf, ts, tab)
    with pytest.raises(TypeError, match="argument 4 must be dict"):
        c._c_put(msg, mf, ts, [], config, None, 0)
    with pytest.raises(TypeError, match="config must have 8 items, not 7"):
        c._c_put(msg, mf, ts, tab, config[:7], None, 0)
    with pytest.raises(TypeError, match="argument 5 must be callable or None, not int"):
        c._c_put(msg, mf, ts, tab, config[:4] + (3,) + config[5:], None, 0)
    with pytest.raises(TypeError, match="argument 6 must be bytearray or None, not bytes"):
        c._c_put(msg, mf, ts, tab, config, b"", 0)
    with pytest.raises(OverflowError):
        c._c_put(msg, mf, 2**64, tab, config, None, 0)
    with pytest.raises(AttributeError):
        c._c_put(msg, object(), ts, tab, config, None, 0)
    assert (mf.wrote_position, c.topic_queue_table) == (pos, table)
    c.close()


@needs_c
def test_put_one_v4_stages_after_the_staged_bytes_within_the_buffer_and_its_limit(tmp_path):
    """SYNC_FLUSH: the record goes after the staged bytes (its physical offset counts them, the write position
    stays); a buffer or stage limit without room for it gives None with nothing changed."""
    c, _ = _logs(tmp_path, "stage")
    m = MessageExtBrokerInner(topic="T", body=b"abc", properties_string="", born_host=pack_host("10.0.0.1", 5))
    c.append([c.prepare(m)], 5)
    mf = c.queue.files[-1]
    wrote, size = mf.wrote_position, c.prepare(m).total
    stage = bytearray(3 * size)
    (r,) = c._c_put(*_put_one_args(c, m, stage=stage, staged=size))
    assert (r.phy_offset, mf.wrote_position) == (mf.start_offset + wrote + size, wrote)
    assert not any(stage[:size]) and not any(stage[2 * size:])  # only the record's own bytes are written
    (rec,) = decode_records(bytes(stage[size:2 * size]))
    assert (rec.commit_log_offset, rec.queue_offset) == (r.phy_offset, 1)
    table = dict(c.topic_queue_table)
    assert c._c_put(*_put_one_args(c, m, stage=stage, staged=2 * size + 1)) is None  # the buffer is full
    config = c._c_put_config[:7] + (2 * size - 1,)
    assert c._c_put(m, mf, 7, c.topic_queue_table, config, stage, size) is None  # past the stage limit
    assert c.topic_queue_table == table and mf.wrote_position == wrote
    c.close()
