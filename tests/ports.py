"""Loopback ports for daemons that tests and benchmarks start.

``free_port`` picks a port below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``), so that no
outgoing connection of another test can be given it as its source port between the pick and the daemon's bind,
and never hands out the same port twice in one process: two picks in a row used to come back equal now and then
(``bind(("127.0.0.1", 0))`` twice), and the second daemon then failed to bind while its caller talked to the
first one."""

from __future__ import annotations

import random
import socket

_handed_out: set[int] = set()


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_LOW = 20000
_HIGH = max(_LOW + 1000, min(_ephemeral_floor(), 65535))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing listens on and this process has not handed out before."""
    for _ in range(2000):
        port = random.randrange(_LOW, _HIGH)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise OSError(f"no free loopback port in {_LOW}-{_HIGH}")
