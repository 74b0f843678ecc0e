"""Evaluating multiple attributes (NiFi guide: Evaluating Multiple Attributes).

``${anyAttribute('a', 'b'):equals('x')}``: the chain after one of these functions is applied to
each of its values and the results combined: ``any...`` is true when one is true, ``all...`` when
all are (``parser._Multi``); the chain must end with a test (``parser.TESTS``), or ``join(sep)``
and ``count()`` close it instead, giving the values joined, or how many results are true (or, for
values that are not booleans, present). On a single value they give the value, and 1 or 0.
"""

from __future__ import annotations

from typing import Sequence

from flowactors.sdk.expression.language import (
    FLOWFILE_FIELDS, MANY, Value, Call, EvaluationContext, register_function, lookup_attribute, Node, render)
from flowactors.sdk.expression.regex import java_regex


def _named(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> list[Value]:
    names = [render(arg.eval(ctx)) for arg in args]
    return [lookup_attribute(name, ctx, FLOWFILE_FIELDS.get(name)) for name in names]


def _matching(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> list[Value]:
    patterns = [java_regex(render(arg.eval(ctx))) for arg in args]
    return [value for name, value in ctx.attributes.items() if any(p.fullmatch(name) for p in patterns)]


def _delineated(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> list[Value]:
    """The value split at the delimiter, a regular expression (Java's ``String.split``: trailing
    empty pieces dropped); nothing when either is missing."""
    value, delimiter = (arg.eval(ctx) for arg in args)
    if value is None or delimiter is None:
        return []
    pieces = java_regex(render(delimiter)).split(render(value))
    while pieces and not pieces[-1]:
        pieces.pop()
    return pieces


for _name, _values, _count in (("anyAttribute", _named, (1, MANY)), ("allAttributes", _named, (1, MANY)),
                               ("anyMatchingAttribute", _matching, (1, MANY)),
                               ("allMatchingAttributes", _matching, (1, MANY)),
                               ("anyDelineatedValue", _delineated, (2, 2)),
                               ("allDelineatedValues", _delineated, (2, 2))):
    register_function(_name, _count, subject=False, lazy=True, role="multi")(_values)


@register_function("join", (1, 1), role="aggregate")
def _join(call: Call, subject: Value, separator: Value) -> Value:
    """join() on one value (not after a multi-attribute function, where the parser makes it close the
    chain): the value itself, empty when it is missing, as NiFi."""
    return "" if subject is None else render(subject)


@register_function("count", role="aggregate")
def _count(call: Call, subject: Value) -> Value:
    """count() on one value: 1 when it is true (or, not a boolean, present), else 0."""
    return 1 if subject is True or (subject is not None and not isinstance(subject, bool)) else 0
