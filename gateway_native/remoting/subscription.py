"""Subscriptions as clients announce them (RocketMQ's ``SubscriptionData`` / ``FilterAPI``):
the TAG (``TagA || TagB``, ``*`` = all, with tag hash codes) or SQL92 expression and its JSON
shape in heartbeats. Shared by the SDK (which sends them) and the broker (which filters by
them, ``gateway_native.subscription``). A bad SQL92 expression raises ``Sql92Error``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from engine.sql92 import Sql92Filter, compile_sql92
from engine.message import PROPERTY_TAGS

from .message_codec import tags_hash

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
