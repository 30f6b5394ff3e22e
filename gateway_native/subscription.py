"""Subscriptions (RocketMQ's ``SubscriptionData`` / ``FilterAPI``) and the broker-side filter.

Owns: parsing a subscription expression into tags + tag hash codes (TAG type, ``TagA || TagB``,
``*`` = all) or a compiled SQL92 filter (SQL92 type), their JSON shape in heartbeats, and
``MessageFilter`` — the object the store calls as RocketMQ's ``ExpressionMessageFilter``:
``is_matched_by_consume_queue(tags_code)`` and ``is_matched_by_commit_log(unit)``.

Invariants: a bad SQL92 expression raises ``Sql92Error`` (SUBSCRIPTION_PARSE_FAILED at the
broker); a subscription to all tags needs no filter at all (``message_filter`` returns None);
a Kafka batch unit (INNER_BATCH) always passes the store's checks, because each record inside
is filtered after expansion with ``matches_properties``.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any

from engine.sql92 import Sql92Filter, compile_sql92

from .remoting.message_codec import PROPERTY_TAGS, SYSFLAG_INNER_BATCH, decode_unit, tags_hash

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    expression_type: str = TAG
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    sql: Sql92Filter | None = None

    @classmethod
    def build(cls, topic: str, sub_string: str | None, expression_type: str | None = None,
              sub_version: int | None = None) -> "SubscriptionData":
        etype = (expression_type or TAG).upper()
        if etype not in (TAG, SQL92):
            raise ValueError(f"unknown expression type {expression_type!r}; use TAG or SQL92")
        sd = cls(topic=topic, expression_type=etype)
        if sub_version is not None:
            sd.sub_version = sub_version
        if etype == SQL92:
            sd.sub_string = (sub_string or "").strip()
            sd.sql = compile_sql92(sd.sub_string)
            return sd
        text = (sub_string or "").strip()
        if not text or text == SUB_ALL:
            sd.sub_string = SUB_ALL
            return sd
        sd.sub_string = text
        for tag in text.split("||"):
            tag = tag.strip()
            if tag and tag not in sd.tags_set:
                sd.tags_set.append(tag)
                sd.code_set.append(tags_hash(tag))
        if not sd.tags_set:
            sd.sub_string = SUB_ALL
        return sd

    @property
    def is_all(self) -> bool:
        return self.expression_type == TAG and self.sub_string == SUB_ALL

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": False, "codeSet": list(self.code_set), "expressionType": self.expression_type,
                "subString": self.sub_string, "subVersion": self.sub_version, "tagsSet": list(self.tags_set),
                "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "SubscriptionData":
        return cls.build(str(obj.get("topic", "")), obj.get("subString"), obj.get("expressionType"),
                         int(obj.get("subVersion") or 0))

    def matches_properties(self, props: dict[str, str]) -> bool:
        """Exact match of one message (client side, and Kafka records after expansion)."""
        if self.expression_type == SQL92:
            return self.sql is not None and self.sql.matches(props)
        if self.is_all:
            return True
        return props.get(PROPERTY_TAGS) in self.tags_set


_SYSFLAG = struct.Struct(">i")


class MessageFilter:
    """The store's filter hook for one pull (RocketMQ's ``ExpressionMessageFilter``)."""

    def __init__(self, sub: SubscriptionData):
        self.sub = sub
        self._codes = frozenset(sub.code_set)

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if self.sub.expression_type != TAG:
            return True
        # 0 is also what a message without tags (and a Kafka batch) stores: decide on the unit.
        return tags_code is None or tags_code == 0 or tags_code in self._codes

    def is_matched_by_commit_log(self, unit: bytes | memoryview) -> bool:
        if _SYSFLAG.unpack_from(unit, 36)[0] & SYSFLAG_INNER_BATCH:
            return True
        try:
            props = decode_unit(unit, decompress=False).properties
        except ValueError:
            return False
        return self.sub.matches_properties(props)


def message_filter(sub: SubscriptionData | None) -> MessageFilter | None:
    if sub is None or sub.is_all:
        return None
    return MessageFilter(sub)
