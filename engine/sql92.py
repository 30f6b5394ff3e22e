"""SQL92 message filters: RocketMQ's selector grammar and its null / type rules.

Owns parsing (a ``lark`` LALR grammar, compiled once) and evaluation of filter expressions over a
message's properties. The store applies these filters, so they live in the engine.

Grammar (keywords case-insensitive, as RocketMQ's ``SelectorParser.jj``)::

    expr      := or
    or        := and (OR and)*
    and       := equality (AND equality)*
    equality  := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison:= unary ( ('>'|'>='|'<'|'<=') unary | [NOT] BETWEEN unary AND unary
                       | [NOT] IN '(' string (',' string)* ')' | [NOT] CONTAINS string
                       | [NOT] STARTSWITH string | [NOT] ENDSWITH string )*
    unary     := '+' unary | '-' unary | NOT unary | literal | identifier | '(' expr ')'
    literal   := 'string' (quote doubled to escape) | integer [L] | float | TRUE | FALSE | NULL
    identifier:= [a-zA-Z_$][a-zA-Z0-9_$]*

Evaluation follows RocketMQ (``ComparisonExpression`` with string conversion on):
- a property evaluates to its string value, or null when absent;
- a comparison with a null side is null (unknown); ``IS [NOT] NULL`` tests presence;
- AND / OR use three-valued logic; NOT of null is null;
- a string property compared with a number literal is converted to the literal's type
  (Integer, Long or Double); two strings under ``< <= > >=`` are both converted to Double;
  a conversion that fails makes the whole evaluation fail;
- a message matches only when the expression evaluates to TRUE — null, FALSE or a failed
  evaluation filter it out.
Compile-time errors (``Sql92Error``): syntax, ``NULL`` in ``=``/``<>``, a non-numeric literal
in ``< <= > >=``, null or reversed ``BETWEEN`` bounds, ``IN`` on something not a property, a
non-boolean expression where a condition is needed.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, VisitError

_GRAMMAR = r"""
start: or_expr
?or_expr: and_expr
    | or_expr OR and_expr                          -> or_
?and_expr: eq_expr
    | and_expr AND eq_expr                         -> and_
?eq_expr: cmp_expr
    | eq_expr "=" cmp_expr                         -> eq
    | eq_expr "<>" cmp_expr                        -> ne
    | eq_expr IS NULL                              -> is_null
    | eq_expr IS NOT NULL                          -> is_not_null
?cmp_expr: unary
    | cmp_expr ">" unary                           -> gt
    | cmp_expr ">=" unary                          -> ge
    | cmp_expr "<" unary                           -> lt
    | cmp_expr "<=" unary                          -> le
    | cmp_expr BETWEEN unary AND unary             -> between
    | cmp_expr NOT BETWEEN unary AND unary         -> not_between
    | cmp_expr IN "(" string ("," string)* ")"     -> in_
    | cmp_expr NOT IN "(" string ("," string)* ")" -> not_in
    | cmp_expr CONTAINS string                     -> contains
    | cmp_expr NOT CONTAINS string                 -> not_contains
    | cmp_expr STARTSWITH string                   -> startswith
    | cmp_expr NOT STARTSWITH string               -> not_startswith
    | cmp_expr ENDSWITH string                     -> endswith
    | cmp_expr NOT ENDSWITH string                 -> not_endswith
?unary: primary
    | "+" unary
    | "-" unary                                    -> neg
    | NOT unary                                    -> not_
?primary: STRING                                 -> str_lit
    | DECIMAL                                      -> decimal
    | FLOAT                                        -> float_
    | TRUE                                         -> true
    | FALSE                                        -> false
    | NULL                                         -> null
    | ID                                           -> prop
    | "(" or_expr ")"
string: STRING

OR.2: /OR\b/i
AND.2: /AND\b/i
NOT.2: /NOT\b/i
IS.2: /IS\b/i
IN.2: /IN\b/i
NULL.2: /NULL\b/i
TRUE.2: /TRUE\b/i
FALSE.2: /FALSE\b/i
BETWEEN.2: /BETWEEN\b/i
CONTAINS.2: /CONTAINS\b/i
STARTSWITH.2: /STARTSWITH\b/i
ENDSWITH.2: /ENDSWITH\b/i
FLOAT.1: /([0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)/
DECIMAL: /(0|[1-9][0-9]*)[lL]?/
STRING: /'(?:''|[^'])*'/
ID: /[a-zA-Z_$][a-zA-Z0-9_$]*/
LINE_COMMENT: /--[^\n\r]*/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
%ignore /[ \t\f\r\n]+/
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

_parser = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


class Sql92Error(ValueError):
    """The expression does not compile; the message says why (SUBSCRIPTION_PARSE_FAILED)."""


class _EvalError(Exception):
    """Evaluation failed (e.g. a property is not a number); the message is filtered out."""


# Java types of values: literals keep the Java type the parser would give them.
class JInt(int):
    pass


class JLong(int):
    pass


_INT_RE = re.compile(r"[+-]?[0-9]+\Z")


def _to_java(target: Any, text: str) -> Any:
    """Convert a string property to ``target``'s Java type, as ``Integer.valueOf`` etc. do."""
    if isinstance(target, bool):
        return text.lower() == "true"
    if isinstance(target, JLong):
        if not _INT_RE.match(text):
            raise _EvalError(f"{text!r} is not a long")
        v = int(text)
        if not LONG_MIN <= v <= LONG_MAX:
            raise _EvalError(f"{text!r} overflows a long")
        return JLong(v)
    if isinstance(target, int):
        if not _INT_RE.match(text):
            raise _EvalError(f"{text!r} is not an integer")
        v = int(text)
        if not INT_MIN <= v <= INT_MAX:
            raise _EvalError(f"{text!r} overflows an integer")
        return JInt(v)
    if isinstance(target, float):
        try:
            return float(text.strip().rstrip("dDfF"))
        except ValueError:
            raise _EvalError(f"{text!r} is not a number") from None
    raise _EvalError(f"cannot convert {text!r}")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(lv: Any, rv: Any) -> int | None:
    """``ComparisonExpression.__compare``: -1/0/1, or -1 for incomparable types."""
    if type(lv) is not type(rv) and not (_is_num(lv) and _is_num(rv)):
        if isinstance(lv, bool):
            # Java casts the Boolean to String here and fails.
            raise _EvalError("cannot compare a boolean with a string")
        if _is_num(lv):
            if isinstance(rv, str):
                rv = _to_java(lv, rv)
            else:
                return -1
        elif isinstance(lv, str):
            if isinstance(rv, bool) or _is_num(rv):
                lv = _to_java(rv, lv)
            else:
                return -1
        else:
            return -1
    if isinstance(lv, float) and math.isnan(lv) or isinstance(rv, float) and math.isnan(rv):
        # Double.compareTo: NaN is greater than everything and equal to itself
        ln, rn = isinstance(lv, float) and math.isnan(lv), isinstance(rv, float) and math.isnan(rv)
        return 0 if ln and rn else (1 if ln else -1)
    return (lv > rv) - (lv < rv)


Fn = Callable[[Mapping[str, str]], Any]


class _Node:
    """A compiled sub-expression: ``fn(properties)``, plus what the compile-time checks need."""

    __slots__ = ("fn", "kind", "value")

    def __init__(self, fn: Fn, kind: str, value: Any = None):
        self.fn = fn
        self.kind = kind  # "const", "prop", "bool" (a boolean expression), "value"
        self.value = value

    def __repr__(self) -> str:
        return f"<{self.kind} {self.value!r}>"


def _const(v: Any) -> _Node:
    return _Node(lambda _p, v=v: v, "const", v)


def _as_bool(node: _Node) -> _Node:
    if node.kind == "bool" or (node.kind == "const" and isinstance(node.value, bool)):
        return node
    if node.kind == "prop":
        f = node.fn

        def cast(p: Mapping[str, str]) -> Any:
            v = f(p)
            return None if v is None else (v if isinstance(v, bool) else False)
        return _Node(cast, "bool")
    raise Sql92Error(f"expression will not result in a boolean value: {node.value!r}")


def _check_less_than_operand(node: _Node) -> None:
    if node.kind == "const" and not _is_num(node.value):
        raise Sql92Error(f"value {node.value!r} cannot be compared with < <= > >=")
    if node.kind == "bool":
        raise Sql92Error("a boolean expression cannot be compared with < <= > >=")


def _ordering(op: Callable[[int], bool], a: _Node, b: _Node) -> _Node:
    _check_less_than_operand(a)
    _check_less_than_operand(b)
    fa, fb = a.fn, b.fn

    def ev(p: Mapping[str, str]) -> Any:
        lv = fa(p)
        if lv is None:
            return None
        rv = fb(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = _to_java(0.0, lv), _to_java(0.0, rv)
        return op(_compare(lv, rv))
    return _Node(ev, "bool")


def _equal_node(a: _Node, b: _Node) -> _Node:
    fa, fb = a.fn, b.fn

    def ev(p: Mapping[str, str]) -> Any:
        lv, rv = fa(p), fb(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None:
            return True
        if type(lv) is type(rv) or (_is_num(lv) and _is_num(rv)):
            if lv == rv and isinstance(lv, bool) == isinstance(rv, bool):
                return True
        return _compare(lv, rv) == 0
    return _Node(ev, "bool")


def _not(node: _Node) -> _Node:
    f = _as_bool(node).fn

    def ev(p: Mapping[str, str]) -> Any:
        v = f(p)
        return None if v is None else not v
    return _Node(ev, "bool")


def _string_op(a: _Node, search: str, test: Callable[[str, str], bool], negate: bool) -> _Node:
    fa = a.fn

    def ev(p: Mapping[str, str]) -> Any:
        if not search:
            return False
        v = fa(p)
        if v is None or not isinstance(v, str):
            return False
        return test(v, search) != negate
    return _Node(ev, "bool")


def _in(a: _Node, items: list[str], negate: bool) -> _Node:
    if a.kind != "prop":
        raise Sql92Error(f"expected a property for IN, got {a.value!r}")
    fa, members = a.fn, frozenset(items)

    def ev(p: Mapping[str, str]) -> Any:
        v = fa(p)
        if v is None or not isinstance(v, str):
            return None
        return (v in members) != negate
    return _Node(ev, "bool")


@v_args(inline=True)
class _Compiler(Transformer):
    def start(self, e: _Node) -> _Node:
        return _as_bool(e)

    def or_(self, a: _Node, _kw: Token, b: _Node) -> _Node:
        fa, fb = _as_bool(a).fn, _as_bool(b).fn

        def ev(p: Mapping[str, str]) -> Any:
            lv = fa(p)
            if lv:
                return True
            rv = fb(p)
            if rv:
                return True
            return None if lv is None or rv is None else False
        return _Node(ev, "bool")

    def and_(self, a: _Node, _kw: Token, b: _Node) -> _Node:
        fa, fb = _as_bool(a).fn, _as_bool(b).fn

        def ev(p: Mapping[str, str]) -> Any:
            lv = fa(p)
            if lv is False:
                return False
            rv = fb(p)
            if rv is False:
                return False
            return None if lv is None or rv is None else True
        return _Node(ev, "bool")

    def eq(self, a: _Node, b: _Node) -> _Node:
        for n in (a, b):
            if n.kind == "const" and n.value is None:
                raise Sql92Error("NULL cannot be compared with = or <>; use IS NULL")
        if a.kind == "const" and b.kind == "const" and isinstance(a.value, bool) != isinstance(b.value, bool):
            raise Sql92Error(f"{a.value!r} cannot be compared with {b.value!r}")
        return _equal_node(a, b)

    def ne(self, a: _Node, b: _Node) -> _Node:
        return _not(self.eq(a, b))

    def is_null(self, a: _Node, _is: Token, _null: Token) -> _Node:
        return _equal_node(a, _const(None))

    def is_not_null(self, a: _Node, _is: Token, _not_kw: Token, _null: Token) -> _Node:
        return _not(_equal_node(a, _const(None)))

    def gt(self, a, b):
        return _ordering(lambda c: c > 0, a, b)

    def ge(self, a, b):
        return _ordering(lambda c: c >= 0, a, b)

    def lt(self, a, b):
        return _ordering(lambda c: c < 0, a, b)

    def le(self, a, b):
        return _ordering(lambda c: c <= 0, a, b)

    def between(self, v: _Node, _kw: Token, low: _Node, _and: Token, high: _Node) -> _Node:
        if low.kind == "const" and high.kind == "const":
            if low.value is None or high.value is None:
                raise Sql92Error("BETWEEN bounds cannot be NULL")
            try:
                if _compare(high.value, low.value) < 0:
                    raise Sql92Error(f"BETWEEN lower bound {low.value!r} must not exceed upper bound {high.value!r}")
            except _EvalError as exc:
                raise Sql92Error(f"BETWEEN bounds are not comparable: {exc}") from None
        ge, le = self.ge(v, low), self.le(v, high)
        return self.and_(ge, None, le)

    def not_between(self, v: _Node, _not_kw: Token, _kw: Token, low: _Node, _and: Token, high: _Node) -> _Node:
        return self.or_(self.lt(v, low), None, self.gt(v, high))

    def in_(self, v: _Node, _kw: Token, *items: str) -> _Node:
        return _in(v, list(items), False)

    def not_in(self, v: _Node, _not_kw: Token, _kw: Token, *items: str) -> _Node:
        return _in(v, list(items), True)

    def contains(self, v, _kw, s):
        return _string_op(v, s, lambda a, b: b in a, False)

    def not_contains(self, v, _n, _kw, s):
        return _string_op(v, s, lambda a, b: b in a, True)

    def startswith(self, v, _kw, s):
        return _string_op(v, s, str.startswith, False)

    def not_startswith(self, v, _n, _kw, s):
        return _string_op(v, s, str.startswith, True)

    def endswith(self, v, _kw, s):
        return _string_op(v, s, str.endswith, False)

    def not_endswith(self, v, _n, _kw, s):
        return _string_op(v, s, str.endswith, True)

    def neg(self, a: _Node) -> _Node:
        if a.kind == "const":
            if not _is_num(a.value):
                raise Sql92Error(f"cannot negate {a.value!r}")
            v = a.value
            return _const(type(v)(-v) if isinstance(v, (JInt, JLong)) else -v)
        fa = a.fn

        def ev(p: Mapping[str, str]) -> Any:
            v = fa(p)
            return -v if _is_num(v) else None
        return _Node(ev, "value")

    def not_(self, _kw: Token, a: _Node) -> _Node:
        return _not(a)

    def string(self, tok: Token) -> str:
        return tok[1:-1].replace("''", "'")

    def str_lit(self, tok: Token) -> _Node:
        return _const(tok[1:-1].replace("''", "'"))

    def decimal(self, tok: Token) -> _Node:
        text = str(tok).rstrip("lL")
        v = int(text)
        if v > LONG_MAX:
            raise Sql92Error(f"integer literal {tok} is out of the long range")
        return _const(JInt(v) if v <= INT_MAX else JLong(v))

    def float_(self, tok: Token) -> _Node:
        v = float(tok)
        if math.isinf(v):
            raise Sql92Error(f"{tok} is greater than the largest double")
        return _const(v)

    def true(self, _t: Token) -> _Node:
        return _const(True)

    def false(self, _t: Token) -> _Node:
        return _const(False)

    def null(self, _t: Token) -> _Node:
        return _const(None)

    def prop(self, tok: Token) -> _Node:
        name = str(tok)
        return _Node(lambda p, n=name: p.get(n), "prop", name)

    def __default_token__(self, token: Token) -> Any:
        return token


class Sql92Filter:
    """A compiled expression. ``matches(properties)`` is True only for a TRUE evaluation."""

    def __init__(self, expression: str, fn: Fn):
        self.expression = expression
        self._fn = fn

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """TRUE/FALSE/None (unknown); raises ``Sql92EvaluationError`` when evaluation fails."""
        try:
            return self._fn(properties)
        except _EvalError as exc:
            raise Sql92EvaluationError(str(exc)) from None

    def matches(self, properties: Mapping[str, str]) -> bool:
        try:
            return self._fn(properties) is True
        except (_EvalError, TypeError, ValueError, OverflowError):
            return False

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


class Sql92EvaluationError(ValueError):
    pass


@lru_cache(maxsize=256)
def compile_sql92(expression: str) -> Sql92Filter:
    """Compile ``expression``; raises ``Sql92Error`` with the reason when it is not valid."""
    if expression is None or not expression.strip():
        raise Sql92Error("the SQL92 expression is empty")
    try:
        tree = _parser.parse(expression)
        node = _Compiler().transform(tree)
    except VisitError as exc:
        cause = exc.orig_exc
        if isinstance(cause, Sql92Error):
            raise Sql92Error(str(cause)) from None
        raise Sql92Error(f"invalid SQL92 expression {expression!r}: {cause}") from None
    except Sql92Error:
        raise
    except LarkError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Sql92Error(f"invalid SQL92 expression {expression!r}: {first}") from None
    return Sql92Filter(expression, node.fn)
