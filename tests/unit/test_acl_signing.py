"""The ACL request signature (mq.protocol.acl): vectors computed with `openssl dgst -sha1 -hmac`, and properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.protocol.acl import (
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    SessionCredentials,
    sign_request,
    signature,
    signature_matches,
    signing_content,
)
from mq.protocol.codes import RequestCode
from mq.protocol.command import RemotingCommand

CREDS = SessionCredentials("RocketMQ", "12345678")


def test_content_is_values_sorted_by_key_then_the_body():
    # "AccessKey" sorts before "a" and "b": upper case first, as Java's TreeMap
    fields = {"b": "TopicA", "a": "PG", "AccessKey": "RocketMQ", SIGNATURE: "ignored"}
    assert signing_content(fields, b"hello") == b"RocketMQPGTopicAhello"
    # printf 'RocketMQPGTopicAhello' | openssl dgst -sha1 -hmac 12345678 -binary | base64
    assert signature(b"RocketMQPGTopicAhello", "12345678") == "SUmdnF8EJanxh5bT82KVIgLANuA="


def test_sign_request_adds_access_key_and_signature():
    cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GID", "topic": "TopicA"})
    cmd.ext_fields = {"queueId": "0", "consumerGroup": "GID", "topic": "TopicA"}
    sign_request(cmd, CREDS)
    assert cmd.ext_fields["AccessKey"] == "RocketMQ"
    # content "RocketMQ" + "GID" + "0" + "TopicA": keys AccessKey < consumerGroup < queueId < topic
    # printf 'RocketMQGID0TopicA' | openssl dgst -sha1 -hmac 12345678 -binary | base64
    assert signing_content({k: v for k, v in cmd.ext_fields.items()}, None) == b"RocketMQGID0TopicA"
    assert signature_matches(cmd.ext_fields, None, "12345678")
    sign_request(cmd, CREDS)  # signing twice gives the same signature
    assert signature_matches(cmd.ext_fields, None, "12345678")
    assert not signature_matches(cmd.ext_fields, None, "87654321")


def test_security_token_is_signed_when_given():
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body=b"{}")
    sign_request(cmd, SessionCredentials("RocketMQ", "12345678", "tok"))
    assert cmd.ext_fields["SecurityToken"] == "tok"
    assert signature_matches(cmd.ext_fields, b"{}", "12345678")
    cmd.ext_fields["SecurityToken"] = "other"
    assert not signature_matches(cmd.ext_fields, b"{}", "12345678")


def test_unique_key_query_accepted_both_as_the_broker_and_as_the_java_client_sign_it():
    fields = {"topic": "T", "key": "K", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
    # Java 4.9 client: _UNIQUE_KEY_QUERY is in extFields before signing, so it is in the signed content
    java = dict(fields, **{UNIQUE_KEY_QUERY: "true", "AccessKey": "RocketMQ"})
    java[SIGNATURE] = signature(signing_content(java, None), "12345678")
    assert signature_matches(java, None, "12345678")
    # a client signing what the broker checks: without the flag
    plain = dict(fields, **{UNIQUE_KEY_QUERY: "true", "AccessKey": "RocketMQ"})
    plain[SIGNATURE] = signature(signing_content(plain, None, frozenset((SIGNATURE, UNIQUE_KEY_QUERY))), "12345678")
    assert signature_matches(plain, None, "12345678")


def test_credentials_repr_hides_the_secret():
    assert "12345678" not in repr(CREDS)


keys = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
values = st.text(max_size=20)


@settings(max_examples=150, deadline=None)
@given(fields=st.dictionaries(keys, values, max_size=8), body=st.binary(max_size=64),
       secret=st.text(min_size=7, max_size=20))
def test_signed_requests_verify_and_any_change_breaks_them(fields, body, secret):
    fields.pop(SIGNATURE, None)
    fields.pop(UNIQUE_KEY_QUERY, None)
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}, body=body)
    cmd.ext_fields = dict(fields)
    sign_request(cmd, SessionCredentials("AK123456", secret))
    assert signature_matches(cmd.ext_fields, body, secret)
    assert not signature_matches(cmd.ext_fields, body + b"x", secret)
    tampered = dict(cmd.ext_fields)
    tampered["AccessKey"] = "AK1234567"
    assert not signature_matches(tampered, body, secret)
