"""The adversarial suite's settings and daemons (see docs/testing.md, "Adversarial tests").

Hypothesis profiles, chosen with ``MQ_ADVERSARIAL_PROFILE``:

    adversarial-ci    (default) each test runs its base number of examples, derandomized (the same examples on
                      every run, so a CI failure reproduces), a few thousand in all
    adversarial-long  20 times as many, random each run, failures saved in hypothesis's example database

``adv_settings(n)`` gives a test ``n`` examples under the active profile. The settings are applied per test, never
loaded globally, so the rest of the test suite keeps its own hypothesis settings.

``rig`` (one per test module) runs a name server and a broker as processes under the module's tmp dir and checks
the invariants after every example (``rig.Rig.check``); it is stopped at the end of the module, and both daemons
must then exit cleanly and leave a store that verifies.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.adversarial.rig import Rig

PROFILE = os.environ.get("MQ_ADVERSARIAL_PROFILE", "adversarial-ci")
_SCALE = {"adversarial-ci": 1, "adversarial-long": 20}
if PROFILE not in _SCALE:
    raise pytest.UsageError(f"MQ_ADVERSARIAL_PROFILE={PROFILE!r}: use one of {', '.join(_SCALE)}")

settings.register_profile("adversarial-ci", deadline=None, derandomize=True, database=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("adversarial-long", deadline=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))


def adv_settings(n: int) -> settings:
    """Settings for a test of ``n`` examples under the active profile."""
    return settings(settings.get_profile(PROFILE), max_examples=max(1, n * _SCALE[PROFILE]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/adversarial/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.adversarial)


#: module -> (examples checked, examples that broke an invariant, daemon restarts), for the terminal summary
_TALLY: dict[str, tuple[int, int, int]] = {}


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _TALLY:
        return
    terminalreporter.section(f"adversarial ({PROFILE})")
    for module, (examples, failed, restarts) in sorted(_TALLY.items()):
        terminalreporter.line(f"{module}: {examples} examples checked, {failed} broke an invariant, "
                              f"{restarts} daemon restart(s)")
    total = sum(t[0] for t in _TALLY.values())
    terminalreporter.line(f"total: {total} examples checked")


@pytest.fixture(scope="module")
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    from mq.store.tools import verify_store

    r = Rig(tmp_path_factory.mktemp("adv"))
    r.start()
    try:
        yield r
    finally:
        _TALLY[request.module.__name__.rsplit(".", 1)[-1]] = (
            r.examples, r.failures, r.broker.restarts + r.namesrv.restarts)
        codes = r.stop()
    assert codes == {"broker": 0, "namesrv": 0}, (codes, r.broker.tail(), r.namesrv.tail())
    rep = verify_store(r.store)
    assert rep.ok, rep.problems[:5]
