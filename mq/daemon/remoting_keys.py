"""The NettyServerConfig keys RocketMQ's daemons answer in getBrokerConfig and getNamesrvConfig, with what a
``RemotingServer`` of ours does (docs/operations.md, "What mq does differently").

One event loop thread reads, decodes and answers requests and runs callbacks: the selector, worker and callback
thread counts are 1. No semaphore limits the requests a daemon sends to its peers: the two semaphore keys show
Java's largest int, a limit never reached. Socket buffers are the operating system's (0, as RocketMQ's default
says); there is no pooled buffer allocator; the write-buffer marks and the idle time are the connection limits
the server runs with; ``useEpollNativeSelector`` is true when the loop is uvloop (libuv's epoll), the counterpart
of netty's native epoll transport.
"""

from __future__ import annotations

import asyncio
from typing import Any

INT_MAX = str(2**31 - 1)
#: the ``backlog`` every RemotingServer listens with (RocketMQ's serverSocketBacklog default)
BACKLOG = 1024


def uvloop_running() -> bool:
    try:
        return type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    except RuntimeError:
        return False


def server_keys(server: Any) -> dict[str, str]:
    """``key -> value`` of NettyServerConfig for a started ``RemotingServer``."""
    limits = server.connection_limits
    return {
        "listenPort": str(server.port),
        "serverWorkerThreads": "1", "serverSelectorThreads": "1", "serverCallbackExecutorThreads": "1",
        "serverOnewaySemaphoreValue": INT_MAX, "serverAsyncSemaphoreValue": INT_MAX,
        "serverChannelMaxIdleTimeSeconds": str(int(limits.idle_timeout)),
        "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0",
        "writeBufferHighWaterMark": str(limits.write_high_water),
        "writeBufferLowWaterMark": str(limits.write_low_water),
        "serverSocketBacklog": str(BACKLOG),
        "serverPooledByteBufAllocatorEnable": "false",
        "useEpollNativeSelector": "true" if uvloop_running() else "false",
    }
