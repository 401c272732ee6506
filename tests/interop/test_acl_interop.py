"""ACL against the official C++ and Go clients and ali-ons: each signs requests its own way, and our broker
(aclEnable) must accept exactly the correctly signed ones and enforce the account's permissions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop import drivers
from tests.interop.build_cache import ClientUnavailable
from tests.interop.conftest import Daemons
from tests.interop.helpers import mq_cli, npm_package
from tests.interop.node_client import install_ali_ons

pytestmark = pytest.mark.interop
HERE = Path(__file__).parent
ACL = """\
accounts:
  - accessKey: interopapp
    secretKey: interopsecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclInterop=PUB|SUB
      - AclReadOnly=SUB
  - accessKey: interopadmin
    secretKey: adminsecret
    admin: true
"""
APP = {"MQ_ACCESS_KEY": "interopapp", "MQ_SECRET_KEY": "interopsecret"}


@pytest.fixture
def acl_daemons(tmp_path):
    (tmp_path / "plain_acl.yml").write_text(ACL)
    d = Daemons(str(tmp_path), broker_options={"acl_enable": True, "acl_file": str(tmp_path / "plain_acl.yml")})
    d.start()
    try:
        for topic in ("AclInterop", "AclReadOnly"):
            mq_cli(d.namesrv.address, "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", "4", "-w", "4",
                   creds={"MQ_ACCESS_KEY": "interopadmin", "MQ_SECRET_KEY": "adminsecret"})
        yield d
    finally:
        d.stop()


def cpp(ns: str, creds: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MQ_ACCESS_KEY", "MQ_SECRET_KEY")}
    return subprocess.run([sys.executable, str(HERE / "cpp_driver.py"), args[0], ns, *args[1:]],
                          capture_output=True, text=True, timeout=timeout, env={**env, **creds})


def stored(d: Daemons, topic: str) -> int:
    return sum(d.broker.store.get_max_offset(topic, q) for q in range(4))


def test_cpp_client_with_session_credentials(acl_daemons):
    pytest.importorskip("rocketmq.client")
    ns = acl_daemons.namesrv.address
    ok = cpp(ns, APP, "produce", "AclInterop", "sync", "4", "TagA")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert [r["status"] for r in json.loads(ok.stdout.strip().splitlines()[-1])["results"]] == [0] * 4
    assert stored(acl_daemons, "AclInterop") == 4

    for creds in ({}, {**APP, "MQ_SECRET_KEY": "wrongsecret"}):  # unsigned, then signed with a wrong secret
        bad = cpp(ns, creds, "produce", "AclInterop", "sync", "1", "TagA")
        assert bad.returncode != 0
    readonly = cpp(ns, APP, "produce", "AclReadOnly", "sync", "1", "TagA")
    assert readonly.returncode != 0
    assert stored(acl_daemons, "AclInterop") == 4 and stored(acl_daemons, "AclReadOnly") == 0

    got = cpp(ns, APP, "push", "AclInterop", "GID_ACL_CPP", "*", "4", "30")
    assert got.returncode == 0, got.stderr[-2000:]
    received = json.loads([ln for ln in got.stdout.splitlines() if ln.startswith('{"received"')][-1])["received"]
    assert sorted(m["body"] for m in received) == [f"sync-{i}-TagA" for i in range(4)]


def test_ali_ons_signs_as_the_broker_expects(acl_daemons):
    root = npm_package(install_ali_ons, "ali-ons")
    ns = acl_daemons.namesrv.address
    env = {**os.environ, "MQ_ALI_ONS": str(root)}

    def ons(creds: dict, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["node", str(HERE / "ons_driver.js"), *args], capture_output=True, text=True,
                              timeout=60, env={**env, **creds}, stdin=subprocess.DEVNULL)

    ok = ons(APP, "produce", ns, "AclInterop", "3", "TagA")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert [json.loads(ln)["sendStatus"] for ln in ok.stdout.splitlines() if ln.startswith("{")] == ["SEND_OK"] * 3
    bad = ons({**APP, "MQ_SECRET_KEY": "wrongsecret"}, "produce", ns, "AclInterop", "1", "TagA")
    assert bad.returncode != 0 and "still failed" in bad.stderr  # ali-ons does not show the broker's remark
    denied = ons(APP, "produce", ns, "AclReadOnly", "1", "TagA")
    assert denied.returncode != 0 and "still failed" in denied.stderr
    assert stored(acl_daemons, "AclInterop") == 3 and stored(acl_daemons, "AclReadOnly") == 0


@pytest.mark.parametrize("name", ["go", "java"])
def test_go_and_java_clients_sign_as_the_broker_expects(acl_daemons, name):
    try:
        driver = drivers.build(name)
    except ClientUnavailable as exc:
        pytest.skip(f"cannot build the {name} client driver here: {exc}")
    ns = acl_daemons.namesrv.address
    group = f"GID_ACL_{name.upper()}"

    ok = driver.lines("produce", ns, "AclInterop", group, "3", "TagA", "sync", creds=APP)
    assert [r["status"] for r in ok] == ["SEND_OK"] * 3
    bad = driver.run("produce", ns, "AclInterop", group, "1", "TagA", "sync",
                     creds={**APP, "MQ_SECRET_KEY": "wrongsecret"})
    assert bad.returncode != 0 and "Check signature failed" in bad.stderr, bad.stderr[-2000:]
    denied = driver.run("produce", ns, "AclReadOnly", group, "1", "TagA", "sync", creds=APP)
    assert denied.returncode != 0 and "AclReadOnly" in denied.stderr, denied.stderr[-2000:]
    assert stored(acl_daemons, "AclInterop") == 3 and stored(acl_daemons, "AclReadOnly") == 0

    got = driver.run("consume", ns, "AclInterop", group, "*", "3", "40", "tag", creds=APP)
    assert got.returncode == 0, got.stderr[-2000:]
    received = json.loads([ln for ln in got.stdout.splitlines() if ln.startswith('{"received"')][-1])["received"]
    assert sorted(m["body"] for m in received) == [driver.body(i, "TagA") for i in range(3)]
