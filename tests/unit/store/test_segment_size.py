"""A store opened with another segment size than it was written with: the error names the setting to change."""

from __future__ import annotations

import os

import pytest

from mq.store.mapped_file import StoreError
from mq.store.message_store import MessageStore
from tests.unit.store.conftest import inner, small_config

CL_SIZE = 64 * 1024
CQ_SIZE = 20 * 64


def _write_store(root, n=200):
    store = MessageStore(small_config(root, mapped_file_size_commit_log=CL_SIZE, mapped_file_size_consume_queue=CQ_SIZE))
    store.start()
    try:
        for i in range(n):
            assert store.put_message(inner(body=b"x" * 900, keys=f"k{i}")).ok
    finally:
        store.shutdown()


def _open(root, **kw):
    store = MessageStore(small_config(root, **kw))
    try:
        store.start()
    finally:
        store.shutdown()


def test_commit_log_of_another_size_names_mapped_file_size_commit_log(tmp_path):
    _write_store(tmp_path / "s")
    assert len(os.listdir(tmp_path / "s" / "commitlog")) > 1
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", mapped_file_size_commit_log=2 * CL_SIZE, mapped_file_size_consume_queue=CQ_SIZE)
    text = str(err.value)
    assert f"mappedFileSizeCommitLog: {CL_SIZE}" in text and f"is {2 * CL_SIZE}" in text
    assert "commitlog" in text


def test_consume_queue_of_another_size_names_mapped_file_size_consume_queue(tmp_path):
    _write_store(tmp_path / "s")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", mapped_file_size_commit_log=CL_SIZE, mapped_file_size_consume_queue=2 * CQ_SIZE)
    assert f"mappedFileSizeConsumeQueue: {CQ_SIZE}" in str(err.value)


def test_the_store_opens_with_the_size_it_was_written_with(tmp_path):
    _write_store(tmp_path / "s")
    _open(tmp_path / "s", mapped_file_size_commit_log=CL_SIZE, mapped_file_size_consume_queue=CQ_SIZE)


def test_one_segment_of_another_size_is_reported_as_damaged_not_as_a_setting(tmp_path):
    _write_store(tmp_path / "s")
    seg = sorted((tmp_path / "s" / "commitlog").iterdir())[0]
    os.truncate(seg, CL_SIZE // 2)
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", mapped_file_size_commit_log=CL_SIZE, mapped_file_size_consume_queue=CQ_SIZE)
    text = str(err.value)
    assert "damaged" in text and "mappedFileSizeCommitLog" in text and f"mappedFileSizeCommitLog: " not in text
