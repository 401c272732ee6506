"""Every request code the broker and the name server register, attacked with hostile headers and bodies.

The codes are read from the daemons' own registries (``registry.broker_codes`` / ``namesrv_codes``): a code
added later is attacked too. Each example sends one hostile request (``hostile.hostile_request``) on a new
connection, waits briefly for its answer (none may come: long polling, oneway, a connection the daemon closes
are all fine) and then checks the rig's invariants: both daemons alive and answering, the store verifies, no
file outside the store (``rig.Rig.check``).

Targeted tests of the defects these attacks first found are in test_defect_regressions.py.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from mq.protocol.codes import RequestCode
from tests.adversarial import registry
from tests.adversarial.conftest import adv_settings
from tests.adversarial.hostile import TIMING_SETTLE, HostileRequest, hostile_request
from tests.adversarial.rig import Rig
from tests.adversarial.wire import Peer, json_frame

#: Examples per request code under the CI profile (about 80 codes).
EXAMPLES_PER_CODE = 25
#: How long to wait for the answer to a hostile request before checking the daemons.
ANSWER_WAIT = 1.0
#: After a oneway request (nothing answers it), how long to let the daemon finish it.
ONEWAY_SETTLE = 0.2


def send(rig: Rig, address: str, req: HostileRequest) -> None:
    """Send ``req`` and wait for its answer; after a oneway request, wait for the answer to a normal request
    sent behind it on the same connection and a moment more, so that what the oneway request did is done
    before the checks (else it would be blamed on the next example)."""
    opaque = rig.next_opaque()
    with Peer(address) as peer:
        if not peer.send(req.frame(opaque)):
            return
        if not req.oneway:
            peer.response(opaque, ANSWER_WAIT)
            return
        barrier = rig.next_opaque()
        if peer.send(json_frame(RequestCode.GET_BROKER_RUNTIME_INFO, {}, opaque=barrier)):
            peer.response(barrier, ANSWER_WAIT)
    time.sleep(ONEWAY_SETTLE)


def attack(rig: Rig, address: str, code: int) -> None:
    @adv_settings(EXAMPLES_PER_CODE)
    @given(req=hostile_request(code, rig.broker.address, str(rig.abs_target)))
    def one(req: HostileRequest) -> None:
        send(rig, address, req)
        rig.check(settle=TIMING_SETTLE if req.timed else 0.0)

    one()


@pytest.mark.parametrize("code", registry.broker_codes(), ids=registry.code_name)
def test_broker_request_code(rig: Rig, code: int) -> None:
    attack(rig, rig.broker.address, code)


@pytest.mark.parametrize("code", registry.namesrv_codes(), ids=registry.code_name)
def test_namesrv_request_code(rig: Rig, code: int) -> None:
    attack(rig, rig.namesrv.address, code)
