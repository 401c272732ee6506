"""What ACL costs per request: client signing and broker checking of a SEND_MESSAGE_V2 with a 1 KB body.

    python benchmarks/acl_bench.py [--n 50000]

Prints µs per request for signing (mq.protocol.acl.sign_request) and for the broker's full check
(mq.daemon.broker.acl.PlainAccessValidator.check: resources, HMAC-SHA1 over the fields and body, permissions),
next to a HEART_BEAT check (which also parses the heartbeat body).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import timeit
from pathlib import Path

from mq.daemon.broker.acl import PlainAccessValidator
from mq.protocol.acl import SessionCredentials, sign_request
from mq.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand

ACL = """\
accounts:
  - accessKey: benchkey01
    secretKey: benchsecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [BenchTopic=PUB|SUB]
"""
CREDS = SessionCredentials("benchkey01", "benchsecret01")


def send_cmd() -> RemotingCommand:
    fields = {"a": "PG_BENCH", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": "TAGS\x01TagA\x02UNIQ_KEY\x017F0000010001\x02",
              "j": "0", "k": "false", "m": "false"}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, body=b"x" * 1024)


def per_call(fn, n: int) -> float:
    """µs per call of ``fn`` over ``n`` calls."""
    return timeit.timeit(fn, number=n) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50_000)
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "plain_acl.yml"
        path.write_text(ACL)
        validator = PlainAccessValidator(path)
        cmd = send_cmd()
        sign_us = per_call(lambda: sign_request(cmd, CREDS), n)
        assert validator.check("127.0.0.1:1", cmd) is None
        check_us = per_call(lambda: validator.check("127.0.0.1:1", cmd), n)
        hb = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body=HeartbeatData(
            client_id="c", consumer_data_set=[ConsumerData(group_name="G", subscription_data_set=[
                SubscriptionData(topic="BenchTopic", sub_string="*")])]).to_json())
        sign_request(hb, CREDS)
        assert validator.check("127.0.0.1:1", hb) is None
        hb_us = per_call(lambda: validator.check("127.0.0.1:1", hb), n // 10)
    print(f"requests: {n}, SEND_MESSAGE_V2 with a 1024-byte body")
    print(f"client sign            : {sign_us:6.2f} us/request")
    print(f"broker check (send)    : {check_us:6.2f} us/request")
    print(f"broker check (heartbeat): {hb_us:6.2f} us/request")


if __name__ == "__main__":
    main()
