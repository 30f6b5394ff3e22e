"""A consumer's filter expression (TAG or SQL92) as the store and POP reads use it.

Protocol-neutral form of RocketMQ's ``ExpressionMessageFilter``: gateways build one from what
their clients send (a remoting subscription, a gRPC ``FilterExpression``) and hand it to
``MessageStore.get_message`` (``is_matched_by_consume_queue`` / ``is_matched_by_commit_log``)
and to ``engine.pop`` (``matches_properties`` for records of expanded Kafka batches).

Invariants: TAG checks the consume-queue tag hash first (a 0 hash — untagged message or Kafka
batch — is decided on the unit), then the tag string exactly; SQL92 evaluates the stored
properties and only TRUE matches; a Kafka batch unit passes the unit-level check because each
of its records is checked after expansion. A bad SQL92 expression raises ``Sql92Error``.
"""

from __future__ import annotations

import struct

from .message import INNER_BATCH_FLAG, MessageFormatError, PROPERTY_TAGS, UnitHeader
from .sql92 import Sql92Filter, compile_sql92
from .tag_filter import TagExpression, parse_tag_expression

TAG = "TAG"
SQL92 = "SQL92"
_SYSFLAG = struct.Struct(">i")


class ExpressionFilter:
    def __init__(self, expression_type: str | None, expression: str | None):
        etype = (expression_type or TAG).upper()
        if etype == "SQL":
            etype = SQL92
        if etype not in (TAG, SQL92):
            raise ValueError(f"unknown filter expression type {expression_type!r}; use TAG or SQL92")
        self.expression_type = etype
        self.expression = (expression or "").strip() or "*"
        self.sql: Sql92Filter | None = compile_sql92(self.expression) if etype == SQL92 else None
        self.tags: TagExpression = parse_tag_expression(expression) if etype == TAG else parse_tag_expression("*")

    @property
    def matches_all(self) -> bool:
        return self.expression_type == TAG and self.tags.matches_all

    def matches_properties(self, props: dict[str, str]) -> bool:
        if self.sql is not None:
            return self.sql.matches(props)
        return self.tags.matches_all or props.get(PROPERTY_TAGS) in self.tags.tags

    # -- the store's MessageFilter hooks -------------------------------------------------------
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if self.sql is not None or self.tags.matches_all:
            return True
        return tags_code is None or tags_code == 0 or tags_code in self.tags.codes

    def is_matched_by_commit_log(self, unit) -> bool:
        if self.matches_all:
            return True
        if _SYSFLAG.unpack_from(unit, 36)[0] & INNER_BATCH_FLAG:
            return True
        try:
            h = UnitHeader(unit, 0)
        except MessageFormatError:
            return False
        return self.matches_properties(h.properties(unit))

    def __repr__(self) -> str:
        return f"ExpressionFilter({self.expression_type}, {self.expression!r})"
