"""SQL92 filters: RocketMQ's grammar, null rules and type conversions on string properties."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from engine.sql92 import Sql92Error, compile_sql92


@pytest.mark.parametrize("expr, props, expected", [
    ("a > 5", {"a": "10"}, True),
    ("a > 5", {"a": "3"}, False),
    ("a >= 5 AND a <= 5", {"a": "5"}, True),
    ("a > 5", {"a": "ten"}, False),            # conversion fails: filtered out
    ("a > 5", {}, False),                      # null comparison is unknown
    ("a < 1.5", {"a": "1.25"}, True),
    ("a > 3000000000", {"a": "3000000001"}, True),
    ("a > 5", {"a": "3000000001"}, False),     # does not fit the Integer literal's type
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a BETWEEN 1 AND 3", {"a": "4"}, False),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
    ("a NOT BETWEEN 1 AND 3", {}, False),
    ("a IN ('x', 'y')", {"a": "y"}, True),
    ("a IN ('x', 'y')", {"a": "z"}, False),
    ("a NOT IN ('x', 'y')", {"a": "z"}, True),
    ("a NOT IN ('x', 'y')", {}, False),
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": "1"}, True),
    ("a = 'abc'", {"a": "abc"}, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("a <> 'abc'", {"a": "abd"}, True),
    ("a <> 'abc'", {}, False),
    ("a = 1 OR b = 2", {"b": "2"}, True),      # unknown OR true is true
    ("a = 1 AND b = 2", {"b": "2"}, False),    # unknown AND true is unknown
    ("NOT (a = 1)", {}, False),                # NOT unknown is unknown
    ("NOT (a = 1)", {"a": "2"}, True),
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "no"}, False),
    ("TRUE", {}, True),
    ("FALSE OR TRUE", {}, True),
    ("a CONTAINS 'bc'", {"a": "abcd"}, True),
    ("a NOT CONTAINS 'bc'", {"a": "abcd"}, False),
    ("a STARTSWITH 'ab'", {"a": "abcd"}, True),
    ("a ENDSWITH 'cd'", {"a": "abcd"}, True),
    ("a NOT ENDSWITH 'cd'", {}, False),
    ("region = 'hz' and price > 10 -- a comment\n", {"region": "hz", "price": "11"}, True),
    ("x > -2", {"x": "-1"}, True),
    ("(a > 1 OR b > 1) AND c = 'z'", {"b": "5", "c": "z"}, True),
    ("order = 1", {"order": "1"}, True),       # identifiers may start with a keyword
    ("A > 1", {"a": "2"}, False),              # property names are case-sensitive
    ("a between 1 and 3 and b in ('q')", {"a": "2", "b": "q"}, True),  # keywords any case
])
def test_evaluation(expr, props, expected):
    assert compile_sql92(expr).matches(props) is expected


@pytest.mark.parametrize("expr", [
    "", "   ", "a >", "a = NULL", "NULL <> a", "a > 'x'", "a BETWEEN 3 AND 1", "a BETWEEN NULL AND 1",
    "5", "'x'", "'x' IN ('a')", "a @ b", "a IN ()", "a = 1 AND", "(a = 1", "a > TRUE", "a = 1 b = 2",
])
def test_compile_errors_are_reported(expr):
    with pytest.raises(Sql92Error) as info:
        compile_sql92(expr)
    assert str(info.value)


@given(st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(-(2 ** 31), 2 ** 31 - 1))
def test_integer_comparisons_agree_with_arithmetic(prop, literal):
    props = {"n": str(prop)}
    assert compile_sql92(f"n > {literal}").matches(props) is (prop > literal)
    assert compile_sql92(f"n <= {literal}").matches(props) is (prop <= literal)
    assert compile_sql92(f"n = {literal}").matches(props) is (prop == literal)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20))
def test_any_string_property_never_raises(value):
    f = compile_sql92("a > 1 OR a = 'x' OR a IN ('y') OR a CONTAINS 'z' OR a BETWEEN 1.5 AND 2")
    assert f.matches({"a": value}) in (True, False)
