"""Who is connected: producer and consumer groups by channel (RocketMQ ``ProducerManager``/``ConsumerManager``).

A channel is a remoting ``Connection``; its ``ClientChannelInfo`` carries the client id, language and version
of the last heartbeat. Consumer groups keep their subscriptions (with tag hash codes recomputed here: the C++
client sends wrong ones) and the consume type / model / from-where of the last heartbeat.

``ConsumerManager`` calls ``on_ids_changed(group)`` when a group's member set or subscriptions change through a
heartbeat, an unregister or a closed connection; the controller turns that into NOTIFY_CONSUMER_IDS_CHANGED.
The expiry scan drops channels silent for ``channel_expired_timeout`` without notifying (as RocketMQ does).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from mq.common.sql_filter import Sql92Filter
from mq.common.tags import SubscriptionData as TagFilter
from mq.common.tags import parse_subscription
from mq.daemon.broker.property_filter import SQL92, Sql92Cache
from mq.protocol.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from mq.protocol.codes import LanguageCode

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    conn: Any
    client_id: str
    language: LanguageCode
    version: int
    last_update: int
    addr: str


@dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[Any, ClientChannelInfo] = field(default_factory=dict)
    #: topic -> parsed TAG filter (tags hash codes recomputed by the broker)
    filters: dict[str, TagFilter] = field(default_factory=dict)
    #: topic -> compiled SQL92 selector; a selector that does not compile is absent (pulls answer
    #: FILTER_DATA_NOT_EXIST, as RocketMQ's ConsumerFilterManager never registers it)
    sql_filters: dict[str, Sql92Filter] = field(default_factory=dict)
    last_update: int = 0

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]


def normalize_subscription(sd: SubscriptionData) -> SubscriptionData:
    """The broker's copy of a heartbeat subscription: tags and hash codes rebuilt from ``sub_string``."""
    expr_type = (sd.expression_type or "TAG").upper()
    if expr_type != "TAG":
        return SubscriptionData(topic=sd.topic, sub_string=sd.sub_string, sub_version=sd.sub_version,
                                expression_type=expr_type, class_filter_mode=sd.class_filter_mode)
    parsed = parse_subscription(sd.topic, sd.sub_string)
    return SubscriptionData(topic=sd.topic, sub_string=parsed.sub_string, tags_set=set(parsed.tags_set),
                            code_set=set(parsed.code_set), sub_version=sd.sub_version, expression_type="TAG",
                            class_filter_mode=sd.class_filter_mode)


@dataclass(slots=True)
class PreparedSubscriptions:
    """A heartbeat's subscriptions normalized, with their TAG filters parsed, and compared with what the group
    had: the pure part of a consumer's registration, which a large heartbeat computes off the event loop
    (``prepare_subscriptions``). ``register`` uses the comparison only if the group's subscriptions are still
    the ``base`` it was made against; otherwise it compares again."""

    #: topic -> normalized subscription (the last one of a topic wins, as in the heartbeat)
    by_topic: dict[str, SubscriptionData]
    #: topic -> parsed TAG filter of ``by_topic[topic]``
    filters: dict[str, TagFilter]
    #: the group's subscriptions compared with (None: not compared) and the outcome of ``_merge``
    base: dict[str, SubscriptionData] | None = None
    merged: tuple | None = None


def prepare_subscriptions(subs: list[SubscriptionData], base: dict[str, SubscriptionData] | None = None,
                          base_filters: dict[str, TagFilter] | None = None) -> PreparedSubscriptions:
    """Normalize ``subs`` and parse their filters; with ``base`` (the group's current subscriptions, which are
    replaced, never changed in place) also compare them. Pure: safe in a worker thread."""
    by_topic = {sd.topic: normalize_subscription(sd) for sd in subs if sd.topic}
    filters = {t: parse_subscription(t, n.sub_string) for t, n in by_topic.items() if n.expression_type == "TAG"}
    prepared = PreparedSubscriptions(by_topic, filters)
    if base is not None:
        prepared.base = base
        prepared.merged = _merge(base, base_filters or {}, prepared)
    return prepared


def _merge(old: dict[str, SubscriptionData], old_filters: dict[str, TagFilter],
           prepared: PreparedSubscriptions) -> tuple[dict[str, SubscriptionData], bool, dict[str, TagFilter], list]:
    """(new subscriptions, changed?, their TAG filters, their SQL92 ones as (topic, selector))."""
    changed = False
    new: dict[str, SubscriptionData] = {}
    for topic, norm in prepared.by_topic.items():
        new[topic] = norm
        was = old.get(topic)
        if was is None or was.sub_string != norm.sub_string or was.expression_type != norm.expression_type:
            changed = True
        elif was.sub_version > norm.sub_version:  # keep the newest version (Java ignores older ones)
            new[topic] = was
    if len(new) != len(old) or not changed and new.keys() != old.keys():
        changed = True
    filters = {t: (prepared.filters[t] if s is prepared.by_topic.get(t) else old_filters.get(t))
               or parse_subscription(t, s.sub_string) for t, s in new.items() if s.expression_type == "TAG"}
    sql = [(t, s.sub_string) for t, s in new.items() if s.expression_type == SQL92 and s.sub_string]
    return new, changed, filters, sql


class ConsumerManager:
    def __init__(self, on_ids_changed: Callable[[str], None] | None = None,
                 filter_cache: Sql92Cache | None = None) -> None:
        self._groups: dict[str, ConsumerGroupInfo] = {}
        self.on_ids_changed = on_ids_changed
        #: compiled SQL92 selectors by (topic, expression), shared with the pull processor
        self.filter_cache = filter_cache if filter_cache is not None else Sql92Cache()

    # -- contract ----------------------------------------------------------------------------------------
    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self._groups.get(group)

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def groups_subscribing(self, topic: str) -> set[str]:
        return {g for g, info in self._groups.items() if topic in info.subscriptions}

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self._groups.get(group)
        if info is None:
            return None
        for ch in info.channels.values():
            if ch.client_id == client_id:
                return ch
        return None

    # -- membership --------------------------------------------------------------------------------------
    def register(self, group: str, channel: ClientChannelInfo, consume_type: ConsumeType | None,
                 message_model: MessageModel | None, consume_from_where: ConsumeFromWhere | None,
                 subscriptions: list[SubscriptionData], notify: bool = True,
                 prepared: PreparedSubscriptions | None = None) -> bool:
        """Record a consumer heartbeat; returns True (and notifies) if members or subscriptions changed.
        ``prepared`` is ``prepare_subscriptions(subscriptions)`` when the caller computed it already."""
        info = self._groups.get(group)
        if info is None:
            info = self._groups[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        info.last_update = channel.last_update
        old = info.channels.get(channel.conn)
        new_member = old is None
        if old is not None and old.client_id != channel.client_id:
            log.info("consumer group %s: channel %s changed client id %s -> %s", group, channel.addr,
                     old.client_id, channel.client_id)
            new_member = True
        info.channels[channel.conn] = channel
        changed_subs = self._update_subscriptions(info, subscriptions, prepared)
        changed = new_member or changed_subs
        if new_member:
            log.info("consumer group %s: new member %s (%s)", group, channel.client_id, channel.addr)
        if changed and notify and self.on_ids_changed is not None:
            self.on_ids_changed(group)
        return changed

    def _update_subscriptions(self, info: ConsumerGroupInfo, subs: list[SubscriptionData],
                              prepared: PreparedSubscriptions | None = None) -> bool:
        if prepared is None:
            prepared = prepare_subscriptions(subs)
        current = info.subscriptions
        if prepared.merged is not None and (prepared.base is current or not prepared.base and not current):
            new, changed, filters, sql_exprs = prepared.merged
        else:
            new, changed, filters, sql_exprs = _merge(current, info.filters, prepared)
        if subs or not current:
            info.subscriptions = new
            info.filters = filters
            sql = {}
            for t, expression in sql_exprs:
                flt = self.filter_cache.try_compile(t, expression)
                if flt is not None:
                    sql[t] = flt
            info.sql_filters = sql
        return changed

    def unregister(self, group: str, conn: Any, notify: bool = True) -> bool:
        info = self._groups.get(group)
        if info is None or info.channels.pop(conn, None) is None:
            return False
        if not info.channels:
            del self._groups[group]
            log.info("consumer group %s: last member left", group)
        elif notify and self.on_ids_changed is not None:
            self.on_ids_changed(group)
        return True

    def connection_closed(self, conn: Any) -> list[str]:
        """Drop ``conn`` from every group; notify the groups that still have members."""
        affected = []
        for group in [g for g, info in self._groups.items() if conn in info.channels]:
            self.unregister(group, conn, notify=True)
            affected.append(group)
        return affected

    def scan_expired(self, expire_ms: int, now_ms: int | None = None) -> list[tuple[str, str]]:
        now = _now_ms() if now_ms is None else now_ms
        dropped = []
        for group, info in list(self._groups.items()):
            for conn, ch in list(info.channels.items()):
                if now - ch.last_update > expire_ms:
                    log.warning("consumer %s of group %s expired: no heartbeat for %d ms", ch.client_id, group,
                                now - ch.last_update)
                    del info.channels[conn]
                    dropped.append((group, ch.client_id))
            if not info.channels:
                del self._groups[group]
        return dropped

    def touch(self, conn: Any, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for info in self._groups.values():
            ch = info.channels.get(conn)
            if ch is not None:
                ch.last_update = now


class ProducerManager:
    def __init__(self) -> None:
        self._groups: dict[str, dict[Any, ClientChannelInfo]] = {}

    def channels(self, group: str) -> dict[Any, ClientChannelInfo]:
        return dict(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def find_channel(self, client_id: str) -> Any:
        """The open connection of producer ``client_id`` in any group (Java ``ProducerManager.findChannel``),
        or None: where the broker pushes a request-reply answer."""
        for chans in self._groups.values():
            for conn, info in chans.items():
                if info.client_id == client_id and not getattr(conn, "closed", False):
                    return conn
        return None

    def any_channel(self, group: str) -> ClientChannelInfo | None:
        chans = self._groups.get(group)
        if not chans:
            return None
        for ch in chans.values():
            if not getattr(ch.conn, "closed", False):
                return ch
        return None

    def register(self, group: str, channel: ClientChannelInfo) -> bool:
        chans = self._groups.setdefault(group, {})
        new = channel.conn not in chans
        chans[channel.conn] = channel
        return new

    def unregister(self, group: str, conn: Any) -> bool:
        chans = self._groups.get(group)
        if not chans or chans.pop(conn, None) is None:
            return False
        if not chans:
            del self._groups[group]
        return True

    def connection_closed(self, conn: Any) -> None:
        for group in [g for g, chans in self._groups.items() if conn in chans]:
            self.unregister(group, conn)

    def scan_expired(self, expire_ms: int, now_ms: int | None = None) -> list[tuple[str, str]]:
        now = _now_ms() if now_ms is None else now_ms
        dropped = []
        for group, chans in list(self._groups.items()):
            for conn, ch in list(chans.items()):
                if now - ch.last_update > expire_ms:
                    log.warning("producer %s of group %s expired: no heartbeat for %d ms", ch.client_id, group,
                                now - ch.last_update)
                    del chans[conn]
                    dropped.append((group, ch.client_id))
            if not chans:
                del self._groups[group]
        return dropped
