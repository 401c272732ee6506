"""Codec micro-benchmark: encode + decode of a SEND_MESSAGE_V2-shaped frame, JSON vs ROCKETMQ header.

The request carries a V2 header of realistic values (a..m, a Java-style properties string: 333 bytes in JSON,
the size PERFORMANCE.md measured) and a 1 KB body; the response is a SendMessageResponseHeader without body.
Prints µs per frame, best of ``--rounds`` (the machine is shared and noisy: compare rows of one run).

    /work/venv/bin/python benchmarks/codec_bench.py [--rounds 5] [--number 20000]
"""

from __future__ import annotations

import argparse
import time

import orjson

from mq.protocol import codec
from mq.protocol.codes import RequestCode, SerializeType
from mq.protocol.command import RemotingCommand
from mq.protocol.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader

PROPERTIES = "UNIQ_KEY\x01C0A8010A1F4C18B4AAC25C1D6D0000\x02WAIT\x01true\x02TAGS\x01A\x02"
BODY = bytes(range(256)) * 4


def send_request(serialize_type: int) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        producer_group="pg_bench", topic="TopicTest", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=3, sys_flag=0, born_timestamp=1_690_000_000_123, flag=0,
        properties=PROPERTIES, reconsume_times=0, unit_mode=False, batch=False)
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext(), BODY, serialize_type=serialize_type)
    cmd.opaque = 1234
    return cmd


def response_header() -> SendMessageResponseHeader:
    return SendMessageResponseHeader("C0A8010A00002A9F000000000012D687", 3, 987654, None, "DefaultRegion", True)


def best(fn, number: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append(time.perf_counter() - t0)
    return min(times) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=20000)
    args = ap.parse_args()
    n, r = args.number, args.rounds
    req_json = codec.encode_header(send_request(SerializeType.JSON))
    print(f"reference: orjson.loads of the {len(req_json)}-byte JSON request header: "
          f"{best(lambda: orjson.loads(req_json), n, r):.2f} µs")
    print(f"{'frame':34} {'header B':>8} {'encode':>8} {'decode':>8} {'enc+dec':>8} {'+typed':>8}  (µs/frame)")
    for name, st in (("JSON", SerializeType.JSON), ("ROCKETMQ", SerializeType.ROCKETMQ)):
        req = send_request(st)
        frame = codec.encode(req)
        dec = codec.FrameDecoder()
        assert dec.feed(frame) == [req]
        enc = best(lambda: codec.encode(req), n, r)
        de = best(lambda: dec.feed(frame), n, r)
        both = best(lambda: dec.feed(codec.encode(req)), n, r)
        # decode + typed header: what the broker does per SEND_MESSAGE_V2
        typed = best(lambda: SendMessageRequestHeaderV2.from_ext(dec.feed(frame)[0].ext_fields), n, r)
        print(f"{'SEND_MESSAGE_V2 request ' + name:34} {len(codec.encode_header(req)):8d} {enc:8.2f} {de:8.2f} "
              f"{both:8.2f} {typed:8.2f}")
        resp = req.response(0, ext_fields=response_header().to_ext())
        rframe = codec.encode(resp)
        assert dec.feed(rframe) == [resp]
        enc = best(lambda: codec.encode(resp), n, r)
        de = best(lambda: dec.feed(rframe), n, r)
        both = best(lambda: dec.feed(codec.encode(resp)), n, r)
        # typed header + response + encode: what the broker does per stored message
        typed = best(lambda: codec.encode(req.response(0, ext_fields=response_header().to_ext())), n, r)
        print(f"{'send response ' + name:34} {len(codec.encode_header(resp)):8d} {enc:8.2f} {de:8.2f} "
              f"{both:8.2f} {typed:8.2f}")
    burst = codec.encode(send_request(SerializeType.JSON)) * 64
    dec = codec.FrameDecoder()
    per = best(lambda: dec.feed(burst), max(1, n // 64), r) / 64
    print(f"decode of 64 pipelined JSON requests in one feed: {per:.2f} µs/frame")
    print("+typed: request rows = decode + SendMessageRequestHeaderV2.from_ext; "
          "response rows = SendMessageResponseHeader(...).to_ext() + response() + encode")


if __name__ == "__main__":
    main()
