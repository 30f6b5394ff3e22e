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

from .remoting.message_codec import SYSFLAG_INNER_BATCH, decode_unit
from .remoting.subscription import SQL92, SUB_ALL, TAG, SubscriptionData

__all__ = ["SQL92", "SUB_ALL", "TAG", "SubscriptionData", "MessageFilter", "message_filter"]

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
