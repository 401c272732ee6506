"""RocketMQ 4.9.7's wording of refusal remarks, for the pieces several processors share.

Operators grep their logs and client errors for these texts, so a remark keeps RocketMQ's words; where ``mq``
knows more, it adds to the end (after a space) and never changes what comes before. Sans-IO.

- ``suggest_todo``: FAQUrl.suggestTodo, the "\\nSee <url> for further details." RocketMQ appends to
  "topic not exist", "subscription group not exist" and route refusals.
- ``perm_string``: PermName.perm2String ("RW-" for 6).
- ``topic_config_string``: TopicConfig.toString, which a send to an illegal queue id quotes.
"""

from __future__ import annotations

from typing import Any

#: every FAQUrl constant of RocketMQ 4.9.7
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


def suggest_todo(url: str = FAQ_URL) -> str:
    return f"\nSee {url} for further details."


def perm_string(perm: int) -> str:
    """``R``/``W``/``X`` (inherit) or ``-`` for each of the three bits, as PermName.perm2String."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_string(tc: Any) -> str:
    """Java's ``TopicConfig.toString()`` of a topic config (anything with the TopicConfig fields)."""
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={perm_string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={'true' if tc.order else 'false'}]")


def topic_not_exist(topic: str, *, pulling: bool = False) -> str:
    """The TOPIC_NOT_EXIST remark of a send (``pulling``: of a pull, which has one more space before the tip)."""
    return f"topic[{topic}] not exist, apply first please!{' ' if pulling else ''}{suggest_todo()}"


def subscription_group_not_exist(group: str) -> str:
    """SUBSCRIPTION_GROUP_NOT_EXIST of a send to ``%RETRY%<group>`` or a send-back."""
    return f"subscription group not exist, {group} {suggest_todo()}"
