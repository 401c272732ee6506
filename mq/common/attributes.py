"""RocketMQ 5 topic attributes: the ``+key=value,-key`` modification text (``AttributeParser``) and how a change
is applied to a topic's attributes (``AttributeUtil.alterCurrentAttributes`` over ``TopicAttributes.ALL``).

A topic stores its attributes without signs (``{"message.type": "FIFO"}`` in topics.json); a change names each
key with ``+`` (add or update) or ``-`` (delete). Creating a topic accepts only ``+``. Known attributes:

=================  ==========  =========================================================================
key                changeable  values
=================  ==========  =========================================================================
message.type       yes         NORMAL, FIFO, DELAY, TRANSACTION, MIXED, UNSPECIFIED (default NORMAL)
queue.type         no          SimpleCQ (RocketMQ's BatchCQ is not supported here)
cleanup.policy     no          DELETE (RocketMQ's COMPACTION is not supported here)
=================  ==========  =========================================================================
"""

from __future__ import annotations

from mq.errors import TopicAttributeError

MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
#: key -> (changeable after creation, accepted values)
TOPIC_ATTRIBUTES: dict[str, tuple[bool, tuple[str, ...]]] = {
    MESSAGE_TYPE: (True, MESSAGE_TYPES),
    "queue.type": (False, ("SimpleCQ",)),
    "cleanup.policy": (False, ("DELETE",)),
}
#: Longest modification text accepted.
MAX_TEXT = 4096


def parse_to_map(text: str | None) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``+a=b,+c=d,-e`` -> ``{"+a": "b", "+c": "d", "-e": ""}``."""
    if not text:
        return {}
    if len(text) > MAX_TEXT:
        raise TopicAttributeError(f"the attributes text is longer than {MAX_TEXT} characters")
    out: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if "+" not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def parse_to_string(changes: dict[str, str]) -> str:
    """``AttributeParser.parseToString``: the inverse of ``parse_to_map``."""
    return ",".join(k if not v else f"{k}={v}" for k, v in changes.items())


def alter(current: dict[str, str] | None, changes: dict[str, str], create: bool) -> dict[str, str]:
    """The attributes after ``changes`` (signed keys); TopicAttributeError for what RocketMQ refuses."""
    final = dict(current or {})
    seen: set[str] = set()
    for key, value in changes.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise TopicAttributeError(f"kv string format wrong: {key!r}")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        spec = TOPIC_ATTRIBUTES.get(real)
        if spec is None:
            raise TopicAttributeError(f"unsupported key: {real}")
        changeable, values = spec
        if key.startswith("+"):
            if not create and not changeable:
                raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {real}")
            if value not in values:
                raise TopicAttributeError(f"value is not in set: {values}; key: {real}, value: {value!r}")
            final[real] = value
        elif key.startswith("-"):
            if create:
                raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {real}")
            if real not in final:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")
            if not changeable:
                raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {real}")
            del final[real]
        else:
            raise TopicAttributeError(f"wrong format key: {real}")
    return final
