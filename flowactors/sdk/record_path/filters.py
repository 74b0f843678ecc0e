"""Conditions: comparisons (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) and the filter functions
(``contains``, ``containsRegex``, ``endsWith``, ``startsWith``, ``isBlank``, ``isEmpty``,
``matchesRegex``, ``not``), as NiFi's filters decide them.

A comparison takes the first value of its right side that is not None (no such value: nothing
passes) and keeps each value of its left side that compares so. ``=`` compares two numbers as
numbers, a number and anything else as their text, other values as Python's ``==`` does (records,
arrays and maps by content); ``!=`` is its negation, for a left value that is not None. The order
comparisons hold between numbers only: numbers, text holding one, dates (milliseconds since the
epoch); anything else never passes.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Callable, Sequence

from flowactors.sdk.record_path.conversions import is_number, java_pattern, java_text, numeric
from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.functions.registry import check_literal, register
from flowactors.sdk.record_path.nodes import Context, Filter, Node, first_value
from flowactors.sdk.record_path.shapes import BOOLEAN
from flowactors.sdk.record_path.values import FieldValue, computed


def _equal(left: Any, right: Any) -> bool:
    if left is None:
        return False
    left_number, right_number = is_number(left), is_number(right)
    if left_number and right_number:
        return bool(left == right)
    if left_number or right_number:
        return java_text(left) == java_text(right)
    return bool(left == right)


def _not_equal(left: Any, right: Any) -> bool:
    return left is not None and not _equal(left, right)


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def test(left: Any, right: Any) -> bool:
        left_number, right_number = numeric(left), numeric(right)
        return left_number is not None and right_number is not None and compare(left_number, right_number)
    return test


#: the comparison operators, by their symbol
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": _equal, "!=": _not_equal, "<": _ordered(operator.lt), "<=": _ordered(operator.le),
    ">": _ordered(operator.gt), ">=": _ordered(operator.ge),
}


class Comparison(Filter):
    """``left <operator> right``."""

    __slots__ = ("symbol", "test", "left", "right")

    def __init__(self, symbol: str, left: Node, right: Node, position: int) -> None:
        super().__init__(position)
        self.symbol = symbol
        self.test = COMPARISONS[symbol]
        self.left = left
        self.right = right

    def _right_value(self, ctx: Context) -> Any:
        return next((fv.value for fv in self.right.evaluate(ctx) if fv.value is not None), None)

    def select(self, ctx: Context, invert: bool) -> list[FieldValue]:
        right = self._right_value(ctx)
        if right is None:
            return []
        test = self.test
        return [fv for fv in self.left.evaluate(ctx) if test(fv.value, right) != invert]

    def booleans(self, ctx: Context) -> list[FieldValue]:
        right = self._right_value(ctx)
        if right is None:
            return []
        return [computed(self.test(fv.value, right), None, BOOLEAN, self.symbol) for fv in self.left.evaluate(ctx)]


class FunctionFilter(Filter):
    """A filter function: ``test`` decides each value of its subject (its first argument)."""

    __slots__ = ("name", "subject")

    def __init__(self, name: str, subject: Node, position: int) -> None:
        super().__init__(position)
        self.name = name
        self.subject = subject

    def test(self, value: Any, ctx: Context) -> bool:
        raise NotImplementedError

    def select(self, ctx: Context, invert: bool) -> list[FieldValue]:
        return [fv for fv in self.subject.evaluate(ctx) if self.test(fv.value, ctx) != invert]

    def booleans(self, ctx: Context) -> list[FieldValue]:
        return [computed(self.test(fv.value, ctx), None, BOOLEAN, self.name) for fv in self.subject.evaluate(ctx)]


class _TextComparison(FunctionFilter):
    """``contains``, ``startsWith``, ``endsWith``: the subject's text against the first value of the
    second argument (no such value, or None: no match)."""

    __slots__ = ("other", "match")

    def __init__(self, name: str, subject: Node, other: Node, match: Callable[[str, str], bool], position: int):
        super().__init__(name, subject, position)
        self.other = other
        self.match = match

    def test(self, value: Any, ctx: Context) -> bool:
        text = java_text(value)
        if text is None:
            return False
        other = java_text(first_value(self.other, ctx))
        return other is not None and self.match(text, other)


def _text_filter(name: str, match: Callable[[str, str], bool]) -> None:
    @register(name, 2, filter=True)
    def build(args: Sequence[Node], position: int) -> Filter:
        return _TextComparison(name, args[0], args[1], match, position)


_text_filter("contains", lambda text, other: other in text)
_text_filter("startsWith", str.startswith)
_text_filter("endsWith", str.endswith)


class _RegexFilter(FunctionFilter):
    """``matchesRegex`` (the whole text), ``containsRegex`` (a part of it): the subject's text
    against a Java regular expression, compiled once when written in the path."""

    __slots__ = ("regex", "compiled", "whole")

    def __init__(self, name: str, subject: Node, regex: Node, whole: bool, position: int) -> None:
        super().__init__(name, subject, position)
        self.regex = regex
        self.whole = whole
        self.compiled: re.Pattern[str] | None = check_literal(regex, lambda v: java_pattern(java_text(v) or ""))

    def test(self, value: Any, ctx: Context) -> bool:
        pattern = self.compiled
        if pattern is None:
            written = java_text(first_value(self.regex, ctx))
            if written is None:
                return False
            try:
                pattern = java_pattern(written)
            except ValueError as exc:
                raise RecordPathError(f"{self.name}: invalid regular expression: {exc}", self.position) from None
        text = java_text(value)
        if text is None:
            return False
        return (pattern.fullmatch(text) if self.whole else pattern.search(text)) is not None


@register("matchesRegex", 2, filter=True)
def _matches_regex(args: Sequence[Node], position: int) -> Filter:
    return _RegexFilter("matchesRegex", args[0], args[1], True, position)


@register("containsRegex", 2, filter=True)
def _contains_regex(args: Sequence[Node], position: int) -> Filter:
    return _RegexFilter("containsRegex", args[0], args[1], False, position)


class _Blank(FunctionFilter):
    """``isEmpty`` (None or ""), ``isBlank`` (None, "" or only blanks)."""

    __slots__ = ("blank",)

    def __init__(self, name: str, subject: Node, blank: bool, position: int) -> None:
        super().__init__(name, subject, position)
        self.blank = blank

    def test(self, value: Any, ctx: Context) -> bool:
        text = java_text(value)
        return text is None or not (text.strip() if self.blank else text)


@register("isEmpty", 1, filter=True)
def _is_empty(args: Sequence[Node], position: int) -> Filter:
    return _Blank("isEmpty", args[0], False, position)


@register("isBlank", 1, filter=True)
def _is_blank(args: Sequence[Node], position: int) -> Filter:
    return _Blank("isBlank", args[0], True, position)


class Not(Filter):
    """``not(condition)``: the values the condition rejects; as a value, the opposite of each."""

    __slots__ = ("condition",)

    def __init__(self, condition: Filter, position: int) -> None:
        super().__init__(position)
        self.condition = condition

    def select(self, ctx: Context, invert: bool) -> list[FieldValue]:
        return self.condition.select(ctx, not invert)

    def booleans(self, ctx: Context) -> list[FieldValue]:
        return [computed(fv.value is not True, None, BOOLEAN, "not") for fv in self.condition.booleans(ctx)]


@register("not", 1, filter=True, conditions=True)
def _not(args: Sequence[Any], position: int) -> Filter:
    return Not(args[0], position)
