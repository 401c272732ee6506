"""Every request code the broker and the name server register, attacked with hostile headers and bodies.

The codes are read from the daemons' own registries (``registry.broker_codes`` / ``namesrv_codes``): a code
added later is attacked too. Each example sends one hostile request (``hostile.hostile_request``) on a new
connection, waits briefly for its answer (none may come: long polling, oneway, a connection the daemon closes
are all fine) and then checks the rig's invariants: both daemons alive and answering, the store verifies, no
file outside the store (``rig.Rig.check``).

Examples that would only show a defect already known and being fixed elsewhere are left out by ``known``
(each entry names its issue 28 defect); the targeted tests of those defects are in test_known_defects.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.adversarial import registry
from tests.adversarial.conftest import adv_settings
from tests.adversarial.hostile import TIMING_SETTLE, HostileRequest, hostile_request
from tests.adversarial.known import known_defect
from tests.adversarial.rig import Rig
from tests.adversarial.wire import Peer

#: Examples per request code under the CI profile (about 80 codes).
EXAMPLES_PER_CODE = 25
#: How long to wait for the answer to a hostile request before checking the daemons.
ANSWER_WAIT = 1.0


def send(rig: Rig, address: str, req: HostileRequest) -> None:
    opaque = rig.next_opaque()
    with Peer(address) as peer:
        if peer.send(req.frame(opaque)) and not req.oneway:
            peer.response(opaque, ANSWER_WAIT)


def attack(rig: Rig, address: str, code: int) -> None:
    @adv_settings(EXAMPLES_PER_CODE)
    @given(req=hostile_request(code, rig.broker.address, str(rig.abs_target), exclude=known_defect))
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
