"""Evaluating multiple attributes (NiFi guide: Evaluating Multiple Attributes).

``${anyAttribute('a', 'b'):equals('x')}``: the chain after one of these functions is applied to
each of its values and the results combined: ``any...`` is true when one is true, ``all...`` when
all are (``language._Multi``). ``join(sep)`` and ``count()`` close the chain instead, giving the
values joined, or how many results are true (or, for values that are not booleans, present).
"""

from __future__ import annotations

from typing import Sequence

from flowactors.sdk.expression.language import (
    _FLOWFILE_FIELDS, _MANY, Value, _Call, _Context, _function, _lookup, _Node, _render)
from flowactors.sdk.expression.regex import _regex


def _named(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> list[Value]:
    names = [_render(arg.eval(ctx)) for arg in args]
    return [_lookup(name, ctx, _FLOWFILE_FIELDS.get(name)) for name in names]


def _matching(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> list[Value]:
    patterns = [_regex(_render(arg.eval(ctx))) for arg in args]
    return [value for name, value in ctx.attributes.items() if any(p.fullmatch(name) for p in patterns)]


def _delineated(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> list[Value]:
    """The value split at the delimiter, a regular expression (Java's ``String.split``: trailing
    empty pieces dropped); nothing when either is missing."""
    value, delimiter = (arg.eval(ctx) for arg in args)
    if value is None or delimiter is None:
        return []
    pieces = _regex(_render(delimiter)).split(_render(value))
    while pieces and not pieces[-1]:
        pieces.pop()
    return pieces


for _name, _values, _count in (("anyAttribute", _named, (1, _MANY)), ("allAttributes", _named, (1, _MANY)),
                               ("anyMatchingAttribute", _matching, (1, _MANY)),
                               ("allMatchingAttributes", _matching, (1, _MANY)),
                               ("anyDelineatedValue", _delineated, (2, 2)),
                               ("allDelineatedValues", _delineated, (2, 2))):
    _function(_name, _count, subject=False, lazy=True, role="multi")(_values)


def _closes_chain(call: _Call, subject: Value, *args: Value) -> Value:
    raise AssertionError("the parser turns join() and count() into the end of a multi-attribute chain")


_function("join", (1, 1), role="aggregate")(_closes_chain)
_function("count", role="aggregate")(_closes_chain)
