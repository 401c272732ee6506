"""A put's result as the answer to a send: its response code and RocketMQ's remark for each refusal.

Shared by the send processors (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE), END_TRANSACTION and the gRPC
endpoint's SendMessage.
"""

from __future__ import annotations

import time
from pathlib import Path

from mq.config import StoreConfig
from mq.protocol.codes import ResponseCode
from mq.protocol.command import RemotingCommand
from mq.store.cleaner import disk_used_ratio
from mq.store.status import PutMessageResult, PutMessageStatus

RC = ResponseCode
_S = PutMessageStatus

#: the put statuses of a stored message, and the response code each answers with
STATUS_CODES = {
    _S.PUT_OK: RC.SUCCESS,
    _S.FLUSH_DISK_TIMEOUT: RC.FLUSH_DISK_TIMEOUT,
    _S.FLUSH_SLAVE_TIMEOUT: RC.FLUSH_SLAVE_TIMEOUT,
    _S.SLAVE_NOT_AVAILABLE: RC.SLAVE_NOT_AVAILABLE,
}


#: store root -> (monotonic time, ``disk_util`` text): a full disk refuses every send, each naming the usage
_DISK_UTIL: dict[str, tuple[float, str]] = {}
DISK_UTIL_TTL_S = 1.0


def disk_util(store_config: StoreConfig) -> str:
    """RocketMQ's ``diskUtil()``: the used fraction of the commit log's, consume queues' and index's partitions.

    Measured at most once per ``DISK_UTIL_TTL_S`` per store: a client sending fast to a broker whose disk is full
    gets a refusal per send, and half a dozen ``stat`` calls each would make a refusal dearer than a put."""
    key = store_config.store_path_root_dir
    now = time.monotonic()
    hit = _DISK_UTIL.get(key)
    if hit is not None and now - hit[0] < DISK_UTIL_TTL_S:
        return hit[1]
    text = _disk_util(store_config)
    if len(_DISK_UTIL) >= 64:
        _DISK_UTIL.clear()
    _DISK_UTIL[key] = (now, text)
    return text


def _disk_util(store_config: StoreConfig) -> str:
    root = Path(store_config.store_path_root_dir)
    logs = [p for p in (store_config.store_path_commit_log or "").split(",") if p.strip()] or [root / "commitlog"]
    cl = min(100.0, *(disk_used_ratio(Path(p.strip()) if isinstance(p, str) else p) for p in logs))
    return (f"CL: {cl:5.2f} CQ: {disk_used_ratio(root / 'consumequeue'):5.2f} "
            f"INDEX: {disk_used_ratio(root / 'index'):5.2f}")


def put_status_response(cmd: RemotingCommand, res: PutMessageResult,
                        store_config: StoreConfig) -> RemotingCommand | None:
    """The error response for a put that did not store; None when the message is stored. The remarks are
    RocketMQ's, with the store's own reason added at the end."""
    max_size = store_config.max_message_size
    st = res.status
    if st in STATUS_CODES:
        return None
    if st is _S.MESSAGE_ILLEGAL or st is _S.PROPERTIES_SIZE_EXCEEDED:
        return cmd.response(RC.MESSAGE_ILLEGAL,
                            f"the message is illegal, maybe msg body or properties length not matched. msg body "
                            f"length limit {max_size}B, msg properties length limit 32KB. "
                            f"({res.remark or st.name})")
    if st is _S.SERVICE_NOT_AVAILABLE:
        return cmd.response(RC.SERVICE_NOT_AVAILABLE,
                            f"service not available now. It may be caused by one of the following reasons: the "
                            f"broker's disk is full [{disk_util(store_config)}], messages are put to the slave, "
                            f"message store has been shut down, etc. ({res.remark})")
    if st is _S.OS_PAGECACHE_BUSY:
        return cmd.response(RC.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while")
    if st is _S.CREATE_MAPPED_FILE_FAILED:
        return cmd.response(RC.SYSTEM_ERROR, f"create mapped file failed, server is busy or broken. ({res.remark})")
    return cmd.response(RC.SYSTEM_ERROR, st.name)
