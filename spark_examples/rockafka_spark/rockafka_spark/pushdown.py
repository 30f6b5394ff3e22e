"""Spark filters -> what the broker can do: a ``ScanPlan``.

Owns the translation of the filters Spark offers a Python data source (``pyspark.sql.datasource``
``EqualTo``, ``In``, comparisons, ``IsNull``, ``Not``, ``String*``) into broker-side work:

    tags = 'A' / tags IN ('A','B')        -> TAG subscription "A||B" (consume-queue tag hash)
    props.<name> <op> literal             -> SQL92 subscription on the stored properties
    key = 'k' / key IN (...)              -> QUERY_MESSAGE by key (the index file), no scan
    store_timestamp >, >=, <, <= t        -> SEARCH_OFFSET_BY_TIMESTAMP narrows each queue's range
    queue = n / queue IN (...)            -> only those queues are planned

Invariants:
- a filter is accepted (not handed back to Spark) only when the rows the reader returns are
  exactly the rows Spark's own evaluation would keep: tags and SQL92 are exact at the broker (plus
  the SDK's exact tag check), key and time lookups are narrowed at the broker and re-checked
  exactly by the reader, queue selection is exact by construction;
- SQL92 is emitted only where its null and type rules agree with Spark's: string equality,
  IN, LIKE prefixes/suffixes/infixes on string fields, comparisons on fields declared numeric;
- pure: no I/O, no Spark session; the plan is a picklable value handed to every partition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

# Spark's filter classes exist from PySpark 4.1; imported lazily so the module stays importable.
NUMERIC_TYPES = ("long", "double")


@dataclass
class ScanPlan:
    tags: frozenset[str] | None = None          # None: every tag
    sql: list[str] = field(default_factory=list)  # SQL92 terms, ANDed
    keys: frozenset[str] | None = None          # None: no key lookup (scan the queues)
    queues: frozenset[int] | None = None        # None: every queue
    time_bounds: list[tuple[str, int]] = field(default_factory=list)  # (op, epoch microseconds)
    pushed: list[str] = field(default_factory=list)  # what was pushed, for describe()

    # -- the broker subscription ------------------------------------------------------------
    def subscription(self) -> tuple[str, str]:
        """(expression type, expression) for the pull: TAG when only tags are filtered."""
        if not self.sql:
            if self.tags is None:
                return "TAG", "*"
            return "TAG", "||".join(sorted(self.tags))  # an empty set plans no partition
        terms = list(self.sql)
        if self.tags is not None:
            terms.insert(0, f"TAGS IN ({', '.join(sql_string(t) for t in sorted(self.tags))})"
                         if self.tags else "FALSE")
        return "SQL92", " AND ".join(f"({t})" for t in terms)

    def matches_nothing(self) -> bool:
        return (self.tags is not None and not self.tags) or (self.keys is not None and not self.keys) or \
            (self.queues is not None and not self.queues)

    # -- store time ---------------------------------------------------------------------------
    def time_window_ms(self) -> tuple[int | None, int | None]:
        """[lower, upper) in ms, conservative (never excludes a row the exact check keeps)."""
        lo: int | None = None
        hi: int | None = None
        for op, us in self.time_bounds:
            if op in (">", ">="):
                ms = us // 1000
                lo = ms if lo is None else max(lo, ms)
            else:
                ms = -(-us // 1000) + 1  # ceil, then exclusive
                hi = ms if hi is None else min(hi, ms)
        return lo, hi

    def time_matches(self, store_ms: int) -> bool:
        us = store_ms * 1000
        for op, bound in self.time_bounds:
            if not ((op == ">" and us > bound) or (op == ">=" and us >= bound)
                    or (op == "<" and us < bound) or (op == "<=" and us <= bound)):
                return False
        return True

    def describe(self) -> str:
        return "; ".join(self.pushed) if self.pushed else "nothing pushed"


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_literal(value: Any, kind: str) -> str | None:
    if kind == "string":
        return sql_string(value) if isinstance(value, str) else None
    if isinstance(value, bool):
        return None
    if kind == "long" and isinstance(value, int):
        return f"{value}L" if not -2**31 <= value < 2**31 else str(value)
    if kind == "double" and isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return repr(float(value))
    return None


def _epoch_us(value: Any) -> int | None:
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:  # Spark hands session-local naive datetimes
        value = value.astimezone()
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds


_OPS = {"GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<", "LessThanOrEqual": "<="}


def _prop_sql(f: Any, fields: dict[str, str]) -> str | None:
    """SQL92 text for one filter on ``props.<name>``, or None when it cannot be exact."""
    name = type(f).__name__
    if name == "Not":
        inner = _prop_sql(f.child, fields)
        return None if inner is None else f"NOT ({inner})"
    attr = getattr(f, "attribute", None)
    if not attr or len(attr) != 2 or attr[0] != "props" or attr[1] not in fields:
        return None
    prop, kind = attr[1], fields[attr[1]]
    if not prop.replace("_", "a").replace("$", "a").isalnum() or prop[0].isdigit():
        return None  # not an SQL92 identifier
    if name == "IsNull":
        return f"{prop} IS NULL"
    if name == "IsNotNull":
        return f"{prop} IS NOT NULL"
    if name == "EqualTo":
        lit = _sql_literal(f.value, kind)
        return None if lit is None else f"{prop} = {lit}"
    if name in _OPS and kind in NUMERIC_TYPES:
        lit = _sql_literal(f.value, kind)
        return None if lit is None else f"{prop} {_OPS[name]} {lit}"
    if name == "In":
        lits = [_sql_literal(v, kind) for v in f.value]
        if not lits or None in lits:
            return None
        if kind == "string":
            return f"{prop} IN ({', '.join(lits)})"  # type: ignore[arg-type]
        return "(" + " OR ".join(f"{prop} = {lit}" for lit in lits) + ")"
    if kind == "string" and name in ("StringStartsWith", "StringEndsWith", "StringContains"):
        op = {"StringStartsWith": "STARTSWITH", "StringEndsWith": "ENDSWITH", "StringContains": "CONTAINS"}[name]
        return f"{prop} {op} {sql_string(f.value)}" if isinstance(f.value, str) else None
    return None


def _strings(f: Any) -> frozenset[str] | None:
    name = type(f).__name__
    if name == "EqualTo" and isinstance(f.value, str):
        return frozenset([f.value])
    if name == "In" and f.value and all(isinstance(v, str) for v in f.value):
        return frozenset(f.value)
    return None


def _ints(f: Any) -> frozenset[int] | None:
    name = type(f).__name__
    if name == "EqualTo" and isinstance(f.value, int) and not isinstance(f.value, bool):
        return frozenset([f.value])
    if name == "In" and f.value and all(isinstance(v, int) and not isinstance(v, bool) for v in f.value):
        return frozenset(f.value)
    return None


def push(plan: ScanPlan, filters: Iterable[Any], prop_fields: dict[str, str]) -> list[Any]:
    """Fold what the broker can do into ``plan``; return the filters Spark must still apply."""
    rest = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        column = attr[0] if attr and len(attr) == 1 else None
        if column == "tags" and (vals := _strings(f)) is not None:
            plan.tags = vals if plan.tags is None else plan.tags & vals
            plan.pushed.append(f"tags IN {sorted(vals)} (broker tag filter)")
        elif column == "key" and (vals := _strings(f)) is not None:
            plan.keys = vals if plan.keys is None else plan.keys & vals
            plan.pushed.append(f"key IN {sorted(vals)} (index lookup by key)")
        elif column == "queue" and (ints := _ints(f)) is not None:
            plan.queues = ints if plan.queues is None else plan.queues & ints
            plan.pushed.append(f"queue IN {sorted(ints)}")
        elif column == "store_timestamp" and type(f).__name__ in _OPS and (us := _epoch_us(f.value)) is not None:
            plan.time_bounds.append((_OPS[type(f).__name__], us))
            plan.pushed.append(f"store_timestamp {_OPS[type(f).__name__]} {f.value.isoformat()} (offset by time)")
        elif (sql := _prop_sql(f, prop_fields)) is not None:
            plan.sql.append(sql)
            plan.pushed.append(f"SQL92 {sql}")
        else:
            rest.append(f)
    return rest
