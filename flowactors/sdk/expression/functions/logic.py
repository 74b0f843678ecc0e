"""Boolean logic: tests on a value and the operators that combine them (NiFi guide: Boolean Logic)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import orjson

from flowactors.sdk.expression.language import (
    JAVA_WHITESPACE, Value, as_number, to_boolean, Call, EvaluationContext, register_function, Node, render)


@register_function("isNull")
def _is_null(call: Call, subject: Value) -> Value:
    return subject is None


@register_function("notNull")
def _not_null(call: Call, subject: Value) -> Value:
    return subject is not None


@register_function("isEmpty")
def _is_empty(call: Call, subject: Value) -> Value:
    return subject is None or not render(subject).strip(JAVA_WHITESPACE)


@register_function("isJson")
def _is_json(call: Call, subject: Value) -> Value:
    """True when the subject is a JSON object or array (what a JSONPath queries), as NiFi."""
    text = "" if subject is None else render(subject).strip()
    if not text or text[0] not in "[{":
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


@register_function("equals", (1, 1))
def _equals(call: Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and render(subject) == render(other)


@register_function("equalsIgnoreCase", (1, 1))
def _equals_ignore_case(call: Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and render(subject).lower() == render(other).lower()


def _comparison(name: str, compare: Callable[[Any, Any], bool]) -> None:
    """gt/ge/lt/le: false when either side is missing or not a number (as NiFi)."""

    def impl(call: Call, subject: Value, other: Value) -> Value:
        a, b = as_number(subject), as_number(other)
        return a is not None and b is not None and compare(a, b)

    register_function(name, (1, 1))(impl)


_comparison("gt", lambda a, b: a > b)
_comparison("ge", lambda a, b: a >= b)
_comparison("lt", lambda a, b: a < b)
_comparison("le", lambda a, b: a <= b)


@register_function("not")
def _not(call: Call, subject: Value) -> Value:
    return not to_boolean(call, subject)


@register_function("and", (1, 1), lazy=True)
def _and(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    return to_boolean(call, subject) and to_boolean(call, args[0].eval(ctx))


@register_function("or", (1, 1), lazy=True)
def _or(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    return to_boolean(call, subject) or to_boolean(call, args[0].eval(ctx))


@register_function("ifElse", (2, 2), lazy=True)
def _if_else(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    return args[0 if to_boolean(call, subject) else 1].eval(ctx)
