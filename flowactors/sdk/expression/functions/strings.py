"""String manipulation (NiFi guide: String Manipulation). A missing subject stays missing through
the functions that transform text, so ``isNull`` still sees it after them."""

from __future__ import annotations

import random
import re
from typing import Sequence

from flowactors.sdk.expression.language import (
    _JAVA_WHITESPACE, _OMITTED, Value, _boolean, _Call, _Context, _function, _literal_check, _Node, _render,
    _string_function, _whole, compile_value)
from flowactors.sdk.expression.regex import _check_regex, _regex, _replacement

_string_function("toUpper", str.upper)
_string_function("toLower", str.lower)
_string_function("trim", lambda text: text.strip(_JAVA_WHITESPACE))


def _search_text(search: Value) -> str:
    return "" if search is None else _render(search)


def _before_after(name: str, last: bool, after: bool) -> None:
    """substringBefore/After(Last): the text before/after the first (last) ``s``; the whole
    subject when ``s`` is not in it, or is empty or missing (as NiFi)."""

    def impl(call: _Call, subject: Value, search: Value) -> Value:
        if subject is None:
            return None
        text, found = _render(subject), _search_text(search)
        index = text.rfind(found) if last else text.find(found)
        if not found or index < 0:
            return text
        return text[index + len(found):] if after else text[:index]

    _function(name, (1, 1))(impl)


_before_after("substringBefore", last=False, after=False)
_before_after("substringBeforeLast", last=True, after=False)
_before_after("substringAfter", last=False, after=True)
_before_after("substringAfterLast", last=True, after=True)


@_function("substring", (1, 2))
def _substring(call: _Call, subject: Value, start: Value, end: Value = _OMITTED) -> Value:
    if subject is None:
        return None
    text = _render(subject)
    first = _whole(call, start, "start")
    last = len(text) if end is _OMITTED else _whole(call, end, "end")
    if not 0 <= first <= last <= len(text):
        call.fail(f"range {first}..{last} is outside {text!r} (length {len(text)})")
    return text[first:last]


@_function("getDelimitedField", (1, 5))
def _get_delimited_field(call: _Call, subject: Value, index: Value, delimiter: Value = ",", quote: Value = '"',
                         escape: Value = "\\", strip: Value = False) -> Value:
    """Field ``index`` (1-based) of a delimited line; delimiters between quotes or after the escape
    character do not split; ``strip`` removes the quote and escape characters from the field.
    Beyond the last field: empty."""
    if subject is None:
        return None
    number = _whole(call, index, "index")
    if number < 1:
        call.fail(f"the field index must be 1 or more, got {number}")
    delimiter, quote, escape = _render(delimiter), _render(quote), _render(escape)
    for role, char in (("delimiter", delimiter), ("quote character", quote), ("escape character", escape)):
        if len(char) != 1:
            call.fail(f"the {role} must be one character, got {char!r}")
    strip = _boolean(call, strip)
    fields: list[list[str]] = [[]]
    quoted = escaped = False
    for c in _render(subject):
        if escaped:
            fields[-1].append(c)
            escaped = False
        elif c == escape:
            escaped = True
            if not strip:
                fields[-1].append(c)
        elif c == quote:
            quoted = not quoted
            if not strip:
                fields[-1].append(c)
        elif c == delimiter and not quoted:
            fields.append([])
        else:
            fields[-1].append(c)
    return "".join(fields[number - 1]) if number <= len(fields) else ""


@_function("append", (1, 1))
def _append(call: _Call, subject: Value, suffix: Value) -> Value:
    return _render(subject) + _render(suffix)


@_function("prepend", (1, 1))
def _prepend(call: _Call, subject: Value, prefix: Value) -> Value:
    return _render(prefix) + _render(subject)


@_function("replace", (2, 2))
def _replace(call: _Call, subject: Value, search: Value, replacement: Value) -> Value:
    return None if subject is None else _render(subject).replace(_render(search), _render(replacement))


def _regex_replace(name: str, count: int) -> None:
    """replaceAll / replaceFirst: matches of a Java regular expression replaced; in the
    replacement, ``$1`` / ``${name}`` insert a group and ``\\$`` is a ``$``."""

    def impl(call: _Call, subject: Value, regex: Value, replacement: Value) -> Value:
        if subject is None:
            return None
        pattern = _regex(_render(regex))
        parts = _replacement(pattern, _render(replacement))
        return pattern.sub(lambda match: "".join(p if isinstance(p, str) else match.group(p) or "" for p in parts),
                           _render(subject), count=count)

    _function(name, (2, 2), check=_check_regex)(impl)


_regex_replace("replaceAll", 0)
_regex_replace("replaceFirst", 1)


@_function("replaceNull", (1, 1))
def _replace_null(call: _Call, subject: Value, replacement: Value) -> Value:
    return replacement if subject is None else subject


@_function("replaceEmpty", (1, 1))
def _replace_empty(call: _Call, subject: Value, replacement: Value) -> Value:
    """The replacement when the subject is missing, empty or only whitespace."""
    return replacement if subject is None or not _render(subject).strip(_JAVA_WHITESPACE) else subject


@_function("length")
def _length(call: _Call, subject: Value) -> Value:
    return len(_render(subject))


@_function("evaluateELString", lazy=True, volatile=True)
def _evaluate_el_string(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    """The subject's text read as a property value: its expressions evaluated on the same FlowFile."""
    if subject is None:
        return None
    return compile_value(_render(subject)).evaluate(ctx.attributes, flowfile=ctx.flowfile, state=ctx.state)


@_function("repeat", (1, 2), volatile=True)
def _repeat(call: _Call, subject: Value, times: Value, most: Value = _OMITTED) -> Value:
    """The subject ``times`` times; with two arguments a random count between them (inclusive)."""
    if subject is None:
        return None
    low = _whole(call, times, "count")
    high = low if most is _OMITTED else _whole(call, most, "maximum count")
    if low < 0 or high < low:
        call.fail(f"the counts must be 0 or more and the maximum not below the minimum, got {low}, {high}")
    return _render(subject) * (low if high == low else random.randint(low, high))


def _pad(name: str, left: bool) -> None:
    """padLeft / padRight: to ``length`` characters with the pad text repeated (default ``_``);
    a subject that long already is unchanged."""

    def impl(call: _Call, subject: Value, length: Value, pad: Value = "_") -> Value:
        if subject is None:
            return None
        text, size, fill = _render(subject), _whole(call, length, "length"), _render(pad) or " "
        missing = size - len(text)
        if missing <= 0:
            return text
        padding = (fill * (missing // len(fill) + 1))[:missing]
        return padding + text if left else text + padding

    _function(name, (1, 2))(impl)


_pad("padLeft", left=True)
_pad("padRight", left=False)


def _list_function(name: str, tidy) -> None:
    """compactDelimitedList / trimDelimitedList / unique: the subject split at the (literal)
    delimiter, its pieces tidied, joined again with the same delimiter."""

    def impl(call: _Call, subject: Value, delimiter: Value) -> Value:
        if subject is None:
            return None
        separator = _render(delimiter)
        if not separator:
            call.fail("the delimiter is empty")
        return separator.join(tidy(_render(subject).split(separator)))

    _function(name, (1, 1))(impl)


def _trim_ends(pieces: list[str]) -> list[str]:
    first = next((i for i, p in enumerate(pieces) if p), len(pieces))
    last = next((i for i in range(len(pieces) - 1, -1, -1) if pieces[i]), -1)
    return pieces[first:last + 1]


_list_function("compactDelimitedList", lambda pieces: [p for p in pieces if p])
_list_function("trimDelimitedList", _trim_ends)
_list_function("unique", lambda pieces: list(dict.fromkeys(pieces)))


def _mapping_rule(rule: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """``'regex:value,regex2:value2'``: each pair splits at its last ':' (a pattern may hold one)."""
    pairs = []
    for entry in rule.split(","):
        pattern, colon, value = entry.rpartition(":")
        if not colon:
            raise ValueError(f"the mapping rule {rule!r} needs 'pattern:value' pairs separated by ','")
        pairs.append((_regex(pattern), value))
    return tuple(pairs)


@_function("replaceByPattern", (1, 1), check=_literal_check(_mapping_rule))
def _replace_by_pattern(call: _Call, subject: Value, rule: Value) -> Value:
    """The value of the first pattern of the rule that matches the whole subject; else the subject."""
    if subject is None:
        return None
    text = _render(subject)
    return next((value for pattern, value in _mapping_rule(_render(rule)) if pattern.fullmatch(text)), text)
