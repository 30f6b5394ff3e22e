"""What the ``rockafka`` source accepts from Spark's filters, and the broker expression it makes
(pure: Spark's filter values, no session, no node). The end-to-end proof that the broker then
sends only matching messages is in test_rockafka_source.py."""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql.datasource import (
    EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNull, LessThan, Not, StringContains, StringStartsWith,
)

from rockafka_spark.pushdown import ScanPlan, push

FIELDS = {"color": "string", "amount": "long", "price": "double"}


def plan_for(*filters):
    plan = ScanPlan()
    rest = push(plan, list(filters), FIELDS)
    return plan, rest


def test_tags_alone_are_a_tag_subscription_and_intersect():
    plan, rest = plan_for(In(("tags",), ("A", "B", "C")), EqualTo(("tags",), "B"))
    assert rest == [] and plan.subscription() == ("TAG", "B")


def test_property_predicates_become_one_sql92_with_the_tags():
    plan, rest = plan_for(In(("tags",), ("A",)), EqualTo(("props", "color"), "it's"),
                          GreaterThanOrEqual(("props", "amount"), 5), StringStartsWith(("props", "color"), "r"),
                          Not(In(("props", "price"), (1.5,))), IsNull(("props", "amount")))
    assert rest == []
    etype, expr = plan.subscription()
    assert etype == "SQL92"
    assert expr == ("(TAGS IN ('A')) AND (color = 'it''s') AND (amount >= 5) AND (color STARTSWITH 'r') "
                    "AND (NOT ((price = 1.5))) AND (amount IS NULL)")


def test_what_sql92_would_evaluate_differently_is_left_to_spark():
    lexical = GreaterThan(("props", "color"), "m")        # SQL92 compares strings as numbers
    typed = EqualTo(("props", "amount"), "5")              # a string literal on a long field
    unknown = EqualTo(("props", "size"), "L")              # not a declared field
    contains_num = StringContains(("props", "amount"), "1")
    other = EqualTo(("body",), b"x")
    plan, rest = plan_for(lexical, typed, unknown, contains_num, other)
    assert rest == [lexical, typed, unknown, contains_num, other]
    assert plan.subscription() == ("TAG", "*") and plan.pushed == []


def test_key_queue_and_time_bounds():
    t1 = datetime(2026, 1, 1, 0, 0, 0, 500, tzinfo=timezone.utc)  # 0.5 ms past a ms boundary
    t2 = datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    plan, rest = plan_for(EqualTo(("key",), "k1"), In(("queue",), (0, 3)), GreaterThan(("store_timestamp",), t1),
                          LessThan(("store_timestamp",), t2))
    assert rest == []
    assert plan.keys == {"k1"} and plan.queues == {0, 3}
    lo, hi = plan.time_window_ms()
    ms1 = int(t1.timestamp() * 1000)
    assert lo == ms1 and hi == int(t2.timestamp() * 1000) + 1  # widened outwards, never inwards
    assert not plan.time_matches(ms1)            # the row is at t1's ms, before t1 itself
    assert plan.time_matches(ms1 + 1)
    assert not plan.time_matches(int(t2.timestamp() * 1000))


def test_contradictions_plan_nothing():
    plan, _ = plan_for(EqualTo(("tags",), "A"), EqualTo(("tags",), "B"))
    assert plan.matches_nothing()
