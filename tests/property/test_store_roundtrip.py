"""Random messages appended, store reopened, everything read back identical; units and tag codes agree."""

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.common.message import MessageExtBrokerInner
from mq.common.properties import encode_properties
from mq.common.record import decode_record
from mq.common.tags import java_hash_code
from mq.config import StoreConfig
from mq.store.message_store import MessageStore

MAX = 70_000
topics = st.text(alphabet="abcXYZ019_-%|", min_size=1, max_size=20)
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
               min_size=1, max_size=12)
messages = st.lists(st.fixed_dictionaries({
    "topic": topics, "queue_id": st.integers(0, 3), "tags": st.none() | text,
    "keys": st.none() | st.lists(st.text(alphabet="abc123", min_size=1, max_size=6), min_size=1, max_size=3),
    "props": st.dictionaries(st.text(alphabet="pqrs", min_size=1, max_size=5), text, max_size=3),
    "body": st.one_of(st.binary(max_size=300), st.integers(0, 255).map(lambda b: bytes([b]) * MAX)),
    "flag": st.integers(-2**31, 2**31 - 1),
}), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(messages)
def test_append_reopen_read_back(msgs):
    root = Path(tempfile.mkdtemp())
    try:
        cfg = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=256 * 1024,
                          mapped_file_size_consume_queue=20 * 8, max_message_size=MAX,
                          max_hash_slot_num=512, max_index_num=2048)
        s = MessageStore(cfg)
        s.start()
        stored = []
        for m in msgs:
            p = dict(m["props"])
            if m["tags"] is not None:
                p["TAGS"] = m["tags"]
            if m["keys"]:
                p["KEYS"] = " ".join(m["keys"])
            r = s.put_message(MessageExtBrokerInner(
                topic=m["topic"], body=m["body"], queue_id=m["queue_id"], flag=m["flag"], properties=p,
                properties_string=encode_properties(p), born_host=("1.2.3.4", 5), born_timestamp=7))
            assert r.ok, r
            stored.append((m, p, r))
        s.shutdown()
        s = MessageStore(cfg)
        s.start()
        try:
            for m, p, r in stored:
                g = s.get_message("g", m["topic"], m["queue_id"], r.queue_offset, 1)
                assert g.message_count == 1
                got = decode_record(g.buffers[0], check_crc=True)
                assert (got.topic, got.queue_id, got.body, got.flag, got.properties) == \
                    (m["topic"], m["queue_id"], m["body"], m["flag"], p)
                assert got.commit_log_offset == r.wrote_offset and got.queue_offset == r.queue_offset
                unit = s.cq_table.find(m["topic"], m["queue_id"]).get_unit(r.queue_offset)
                assert unit == (r.wrote_offset, r.wrote_bytes, java_hash_code(m["tags"]) if m["tags"] else 0)
                for k in m["keys"] or []:
                    assert r.wrote_offset in s.query_message(m["topic"], k, 64).phy_offsets
        finally:
            s.shutdown()
    finally:
        shutil.rmtree(root)
