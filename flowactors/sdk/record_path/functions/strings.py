"""The text functions: substring, substringAfter, substringAfterLast, substringBefore,
substringBeforeLast, replace, replaceRegex, replaceNull, concat, join, padLeft, padRight, trim,
toUpperCase, toLowerCase.

A function that changes a value keeps its field's name and parent (as NiFi) and says its type is
text; a value it leaves unchanged (no search text, nothing found) is the value itself. Each value is read as text as
NiFi's records write it (``conversions.java_text``).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from flowactors.sdk.expression.language import JAVA_WHITESPACE
from flowactors.sdk.expression.regex import java_replacement
from flowactors.sdk.record_path.conversions import java_pattern, java_text, whole_argument
from flowactors.sdk.record_path.functions.base import Call, EachValue, text_argument
from flowactors.sdk.record_path.functions.registry import check_literal, register
from flowactors.sdk.record_path.nodes import Context, Node, first, first_value
from flowactors.sdk.record_path.shapes import STRING
from flowactors.sdk.record_path.values import FieldValue, computed


class _Substring(EachValue):
    """``substring(value, start, end)``: characters start (included) to end (excluded), a negative
    index counting from the end (-1: the end itself); "" when either is not a whole number, when
    start is past the end, or end is not after start."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        text = java_text(fv.value) or ""
        start = whole_argument(first_value(self.args[1], ctx))
        end = whole_argument(first_value(self.args[2], ctx))
        if start is None or end is None:
            return computed("", fv, STRING)
        start = len(text) + 1 + start if start < 0 else start
        end = len(text) + 1 + end if end < 0 else end
        if end <= start or start < 0 or start > len(text):
            return computed("", fv, STRING)
        return computed(text[start:min(end, len(text))], fv, STRING)


register("substring", 3)(lambda args, position: _Substring("substring", args, position))


class _Around(EachValue):
    """``substringAfter``, ``substringAfterLast``, ``substringBefore``, ``substringBeforeLast``: the
    text after (before) the first (last) occurrence of the search text; the value unchanged when
    the search text is empty or not found."""

    __slots__ = ("last", "after")

    def __init__(self, name: str, args: Sequence[Node], position: int, last: bool, after: bool) -> None:
        super().__init__(name, args, position)
        self.last = last
        self.after = after

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        search = self.text_of(1, ctx)
        if not search:
            return fv
        text = java_text(fv.value) or ""
        index = text.rfind(search) if self.last else text.find(search)
        if index < 0:
            return fv
        return computed(text[index + len(search):] if self.after else text[:index], fv, STRING)


def _around(name: str, last: bool, after: bool) -> None:
    register(name, 2)(lambda args, position: _Around(name, args, position, last, after))


_around("substringAfter", last=False, after=True)
_around("substringAfterLast", last=True, after=True)
_around("substringBefore", last=False, after=False)
_around("substringBeforeLast", last=True, after=False)


class _Replace(EachValue):
    """``replace(value, search, replacement)``: every occurrence of the search text replaced (the
    value unchanged when either is missing)."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        search, replacement = self.text_of(1, ctx), self.text_of(2, ctx)
        if search is None or replacement is None:
            return fv
        text = java_text(fv.value) or ""
        count = text.count(search) if search else len(text) + 1
        self.check_size(len(text) + count * max(0, len(replacement) - len(search)))
        return computed(text.replace(search, replacement), fv, STRING)


register("replace", 3)(lambda args, position: _Replace("replace", args, position))


class _ReplaceRegex(EachValue):
    """``replaceRegex(value, regex, replacement)``: every match of a Java regular expression
    replaced; the replacement may name groups, ``$1`` or ``${name}``, and escapes ``\\$``."""

    __slots__ = ("compiled",)

    def __init__(self, args: Sequence[Node], position: int) -> None:
        super().__init__("replaceRegex", args, position)
        self.compiled: re.Pattern[str] | None = check_literal(
            args[1], lambda v: java_pattern(text_argument(v)))
        if self.compiled is not None:
            check_literal(args[2], lambda v: java_replacement(self.compiled, text_argument(v)), "replacement")

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        replacement = self.text_of(2, ctx)
        if replacement is None:
            return fv
        pattern = self.compiled
        try:
            if pattern is None:
                written = self.text_of(1, ctx)
                if written is None:
                    return fv
                pattern = java_pattern(written)
            parts = java_replacement(pattern, replacement)
        except ValueError as exc:
            raise self.error(f"replaceRegex: {exc}") from None
        text = java_text(fv.value) or ""
        replaced = pattern.sub(lambda match: "".join(p if isinstance(p, str) else match.group(p) or "" for p in parts),
                               text)
        self.check_size(len(replaced))
        return computed(replaced, fv, STRING)


register("replaceRegex", 3)(lambda args, position: _ReplaceRegex(args, position))


class _ReplaceNull(EachValue):
    """``replaceNull(value, replacement)``: each value that is None becomes the replacement's first
    value (when that is not None too); the others stay."""

    __slots__ = ()
    keeps_none = True

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        if fv.value is not None:
            return fv
        replacement = first(self.args[1], ctx)
        if replacement is None or replacement.value is None:
            return fv
        return computed(replacement.value, fv, replacement.shape or fv.shape)


register("replaceNull", 2)(lambda args, position: _ReplaceNull("replaceNull", args, position))


def _texts(values: list[Any], out: list[str], flatten: bool) -> None:
    """Each value's text (``null`` for None) appended to ``out``; an array's elements one by one
    when ``flatten``."""
    for value in values:
        if flatten and isinstance(value, (list, tuple)):
            _texts(list(value), out, flatten)
        else:
            text = java_text(value)
            out.append("null" if text is None else text)


class _Concat(Call):
    """``concat(a, b, ...)``: the text of every value of every argument, joined (``null`` for
    None)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        texts: list[str] = []
        for arg in self.args:
            _texts([fv.value for fv in arg.evaluate(ctx)], texts, flatten=False)
        self.check_size(sum(map(len, texts)))
        return [computed("".join(texts), None, STRING, "concat")]


register("concat", 0, None)(lambda args, position: _Concat("concat", args, position))


class _Join(Call):
    """``join(separator, a, b, ...)``: the text of every value of every argument (an array's
    elements each), joined by the separator."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        separator = self.text_of(0, ctx) or ""
        texts: list[str] = []
        for arg in self.args[1:]:
            _texts([fv.value for fv in arg.evaluate(ctx)], texts, flatten=True)
        self.check_size(sum(map(len, texts)) + len(separator) * len(texts))
        return [computed(separator.join(texts), None, STRING, "join")]


register("join", 2, None)(lambda args, position: _Join("join", args, position))


class _Pad(EachValue):
    """``padLeft``/``padRight(value, length, pad)``: the text made ``length`` long with the pad text
    (``_`` when not given or empty), repeated and cut; a text that long already is unchanged; ""
    when the length is not a whole number; None stays None."""

    __slots__ = ("left",)
    keeps_none = True

    def __init__(self, name: str, args: Sequence[Node], position: int, left: bool) -> None:
        super().__init__(name, args, position)
        self.left = left

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        pad = self.text_of(2, ctx) or "_"
        length = whole_argument(first_value(self.args[1], ctx))
        if length is None:
            return computed("", fv, STRING)
        text = java_text(fv.value)
        if text is None or len(text) >= length:
            return computed(text, fv, STRING)
        self.check_size(length)
        missing = length - len(text)
        padding = (pad * (missing // len(pad) + 1))[:missing]
        return computed(padding + text if self.left else text + padding, fv, STRING)


register("padLeft", 2, 3)(lambda args, position: _Pad("padLeft", args, position, True))
register("padRight", 2, 3)(lambda args, position: _Pad("padRight", args, position, False))


class _TextChange(EachValue):
    """``trim``, ``toUpperCase``, ``toLowerCase``: the text changed (None is read as "")."""

    __slots__ = ("change",)
    keeps_none = True

    def __init__(self, name: str, args: Sequence[Node], position: int, change: Callable[[str], str]) -> None:
        super().__init__(name, args, position)
        self.change = change

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        return computed(self.change(java_text(fv.value) or ""), fv, STRING)


def _text_change(name: str, change: Callable[[str], str]) -> None:
    register(name, 1)(lambda args, position: _TextChange(name, args, position, change))


_text_change("trim", lambda text: text.strip(JAVA_WHITESPACE))
_text_change("toUpperCase", str.upper)
_text_change("toLowerCase", str.lower)

