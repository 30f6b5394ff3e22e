"""Tag filtering (RocketMQ's ``SubscriptionData`` + ``ExpressionMessageFilter`` for TAG type).

An expression is ``*`` (everything), or tags joined by ``||`` (``TagA || TagB``; blanks around
tags are ignored). The broker filters by tag hash at the consume-queue level
(``is_matched_by_consume_queue``: the unit's tagsCode is in the set of hashes), which can let
through a different tag with the same hash; ``is_matched_by_commit_log`` and ``tags_match``
check the tag string exactly, as RocketMQ clients do after a pull.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .message import PROPERTY_TAGS, MessageFormatError, UnitHeader, tags_code

SUB_ALL = "*"
TAG_SEPARATOR = "||"


@dataclass(frozen=True)
class TagExpression:
    sub_string: str
    tags: frozenset[str] = field(default_factory=frozenset)
    codes: frozenset[int] = field(default_factory=frozenset)

    @property
    def matches_all(self) -> bool:
        return not self.tags


def parse_tag_expression(expr: str | None) -> TagExpression:
    """``None``, empty or ``*`` match all; otherwise the ``||``-separated tags."""
    if expr is None or not expr.strip() or expr.strip() == SUB_ALL:
        return TagExpression(SUB_ALL)
    tags = frozenset(t.strip() for t in expr.split(TAG_SEPARATOR) if t.strip())
    if not tags or SUB_ALL in tags:
        return TagExpression(SUB_ALL)
    return TagExpression(expr, tags, frozenset(tags_code(t) for t in tags))


def tags_match(expr: TagExpression | str | None, tag: str | None) -> bool:
    """Exact check of one message's tag against an expression."""
    e = expr if isinstance(expr, TagExpression) else parse_tag_expression(expr)
    return e.matches_all or (tag is not None and tag in e.tags)


class TagMessageFilter:
    """The ``message_filter`` MessageStore.get_message takes, for a tag expression."""

    def __init__(self, expr: TagExpression | str | None):
        self.expression = expr if isinstance(expr, TagExpression) else parse_tag_expression(expr)

    def is_matched_by_consume_queue(self, tags_code_value: int) -> bool:
        e = self.expression
        return e.matches_all or tags_code_value in e.codes

    def is_matched_by_commit_log(self, unit: bytes) -> bool:
        e = self.expression
        if e.matches_all:
            return True
        try:
            h = UnitHeader(unit, 0)
        except MessageFormatError:
            return False
        return h.properties(unit).get(PROPERTY_TAGS) in e.tags
