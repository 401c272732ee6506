"""The asyncio transport of the RocketMQ remoting protocol (framing lives in ``mq.protocol.codec``).

Public API::

    RemotingServer(host, port, *, limits=None, name="server", connection_limits=None)
        .register / .register_offloaded / .offload(fn, *args) / .is_heavy(cmd) / .scan() / .budget
    RemotingClient(*, limits=None, connect_timeout=3.0, name="client", connection_limits=None, connector=None)
    Connection            the asyncio.Protocol of either side (invoke / invoke_oneway / send_response / close)
    HandlerRegistry       request code -> handler, bounded worker groups (used by server and client)
    RejectRequest         raise in a handler -> SYSTEM_BUSY "[REJECTREQUEST]..."
    RequestContext, request_context()   arrival/start time of the request a handler runs for
    new_event_loop(), install_event_loop_policy(), run(main)   uvloop when installed

Server connections are bounded per connection and per server (``ConnectionLimits``: ``flow.py``, ``budget.py``;
``gc_pause.py`` for heavy requests). ``mq.remoting.testing`` has an in-memory transport (``ConnectionPair``,
``MemoryNetwork``) for unit tests.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from mq.remoting.client import RemotingClient, split_addr
from mq.remoting.connection import Connection, format_addr
from mq.remoting.server import (
    DEFER,
    OVERLOAD_REMARK,
    REJECT_PREFIX,
    TIMEOUT_CLEAN_PREFIX,
    HandlerRegistry,
    RejectRequest,
    RemotingServer,
    RequestContext,
    WorkerGroup,
    request_context,
)

T = TypeVar("T")

__all__ = [
    "Connection",
    "DEFER",
    "HandlerRegistry",
    "OVERLOAD_REMARK",
    "REJECT_PREFIX",
    "RejectRequest",
    "RemotingClient",
    "RemotingServer",
    "RequestContext",
    "TIMEOUT_CLEAN_PREFIX",
    "WorkerGroup",
    "format_addr",
    "install_event_loop_policy",
    "new_event_loop",
    "request_context",
    "run",
    "split_addr",
    "uvloop_available",
]


def uvloop_available() -> bool:
    """True if uvloop can be imported and ``MQ_NO_UVLOOP`` is not set."""
    if os.environ.get("MQ_NO_UVLOOP"):
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop(prefer_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed and preferred, else asyncio's default."""
    if prefer_uvloop and uvloop_available():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def install_event_loop_policy(prefer_uvloop: bool = True) -> bool:
    """Make ``asyncio.run``/``new_event_loop`` use uvloop when installed; return True if it does."""
    if prefer_uvloop and uvloop_available():
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        return True
    asyncio.set_event_loop_policy(None)
    return False


def run(main: Coroutine[Any, Any, T], *, prefer_uvloop: bool = True) -> T:
    """``asyncio.run(main)`` on the loop ``new_event_loop`` picks."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(prefer_uvloop)) as runner:
        return runner.run(main)
