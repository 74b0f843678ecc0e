"""Boolean logic: tests on a value and the operators that combine them (NiFi guide: Boolean Logic)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import orjson

from flowactors.sdk.expression.language import (
    _JAVA_WHITESPACE, Value, _as_number, _boolean, _Call, _Context, _function, _Node, _render)


@_function("isNull")
def _is_null(call: _Call, subject: Value) -> Value:
    return subject is None


@_function("notNull")
def _not_null(call: _Call, subject: Value) -> Value:
    return subject is not None


@_function("isEmpty")
def _is_empty(call: _Call, subject: Value) -> Value:
    return subject is None or not _render(subject).strip(_JAVA_WHITESPACE)


@_function("isJson")
def _is_json(call: _Call, subject: Value) -> Value:
    """True when the subject is a JSON object or array (what a JSONPath queries), as NiFi."""
    text = "" if subject is None else _render(subject).strip()
    if not text or text[0] not in "[{":
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


@_function("equals", (1, 1))
def _equals(call: _Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and _render(subject) == _render(other)


@_function("equalsIgnoreCase", (1, 1))
def _equals_ignore_case(call: _Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and _render(subject).lower() == _render(other).lower()


def _comparison(name: str, compare: Callable[[Any, Any], bool]) -> None:
    """gt/ge/lt/le: false when either side is missing or not a number (as NiFi)."""

    def impl(call: _Call, subject: Value, other: Value) -> Value:
        a, b = _as_number(subject), _as_number(other)
        return a is not None and b is not None and compare(a, b)

    _function(name, (1, 1))(impl)


_comparison("gt", lambda a, b: a > b)
_comparison("ge", lambda a, b: a >= b)
_comparison("lt", lambda a, b: a < b)
_comparison("le", lambda a, b: a <= b)


@_function("not")
def _not(call: _Call, subject: Value) -> Value:
    return not _boolean(call, subject)


@_function("and", (1, 1), lazy=True)
def _and(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return _boolean(call, subject) and _boolean(call, args[0].eval(ctx))


@_function("or", (1, 1), lazy=True)
def _or(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return _boolean(call, subject) or _boolean(call, args[0].eval(ctx))


@_function("ifElse", (2, 2), lazy=True)
def _if_else(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return args[0 if _boolean(call, subject) else 1].eval(ctx)
