"""String manipulation (NiFi guide: String Manipulation). A missing subject stays missing through
the functions that transform text, so ``isNull`` still sees it after them."""

from __future__ import annotations

import random
import re
from typing import Sequence

from flowactors.sdk.expression.cache import text_cache
from flowactors.sdk.expression.language import (
    JAVA_WHITESPACE, MAX_EVALUATION_CHARS, MAX_NESTED_EVALUATIONS, OMITTED, Value, to_boolean, Call, EvaluationContext,
    ExpressionLimitError, register_function, literal_check, Node, render, register_string_function, to_whole)
from flowactors.sdk.expression.parser import compile_value
from flowactors.sdk.expression.regex import check_regex, java_regex, java_replacement

register_string_function("toUpper", str.upper)
register_string_function("toLower", str.lower)
register_string_function("trim", lambda text: text.strip(JAVA_WHITESPACE))


def _search_text(search: Value) -> str:
    return "" if search is None else render(search)


def _before_after(name: str, last: bool, after: bool) -> None:
    """substringBefore/After(Last): the text before/after the first (last) ``s``; the whole
    subject when ``s`` is not in it, or is empty or missing (as NiFi)."""

    def impl(call: Call, subject: Value, search: Value) -> Value:
        if subject is None:
            return None
        text, found = render(subject), _search_text(search)
        index = text.rfind(found) if last else text.find(found)
        if not found or index < 0:
            return text
        return text[index + len(found):] if after else text[:index]

    register_function(name, (1, 1))(impl)


_before_after("substringBefore", last=False, after=False)
_before_after("substringBeforeLast", last=True, after=False)
_before_after("substringAfter", last=False, after=True)
_before_after("substringAfterLast", last=True, after=True)


@register_function("substring", (1, 2))
def _substring(call: Call, subject: Value, start: Value, end: Value = OMITTED) -> Value:
    if subject is None:
        return None
    text = render(subject)
    first = to_whole(call, start, "start")
    last = len(text) if end is OMITTED else to_whole(call, end, "end")
    if not 0 <= first <= last <= len(text):
        return ""   # as NiFi (Java's substring fails, NiFi gives the empty string)
    return text[first:last]


@register_function("getDelimitedField", (1, 5))
def _get_delimited_field(call: Call, subject: Value, index: Value, delimiter: Value = ",", quote: Value = '"',
                         escape: Value = "\\", strip: Value = False) -> Value:
    """Field ``index`` (1-based) of a delimited line; delimiters between quotes or after the escape
    character do not split; ``strip`` removes the quote and escape characters from the field.
    Beyond the last field: empty."""
    if subject is None:
        return None
    number = to_whole(call, index, "index")
    if number < 1:
        call.fail(f"the field index must be 1 or more, got {number}")
    delimiter, quote, escape = render(delimiter), render(quote), render(escape)
    for role, char in (("delimiter", delimiter), ("quote character", quote), ("escape character", escape)):
        if len(char) != 1:
            call.fail(f"the {role} must be one character, got {char!r}")
    strip = to_boolean(call, strip)
    fields: list[list[str]] = [[]]
    quoted = escaped = False
    for c in render(subject):
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


@register_function("append", (1, 1))
def _append(call: Call, subject: Value, suffix: Value) -> Value:
    text, more = render(subject), render(suffix)
    call.check_result_size(len(text) + len(more))
    return text + more


@register_function("prepend", (1, 1))
def _prepend(call: Call, subject: Value, prefix: Value) -> Value:
    text, more = render(subject), render(prefix)
    call.check_result_size(len(text) + len(more))
    return more + text


@register_function("replace", (2, 2))
def _replace(call: Call, subject: Value, search: Value, replacement: Value) -> Value:
    """Every occurrence of ``search`` replaced; an empty ``search`` occurs before every character
    and at the end (as Java's). Refused before it is made when the result would be too large."""
    if subject is None:
        return None
    text, found, put = render(subject), render(search), render(replacement)
    if len(put) > len(found):
        call.check_result_size(len(text) + text.count(found) * (len(put) - len(found)))
    return text.replace(found, put)


def _regex_replace(name: str, count: int) -> None:
    """replaceAll / replaceFirst: matches of a Java regular expression replaced; in the
    replacement, ``$1`` / ``${name}`` insert a group and ``\\$`` is a ``$``."""

    def impl(call: Call, subject: Value, regex: Value, replacement: Value) -> Value:
        if subject is None:
            return None
        text, written = render(subject), render(replacement)
        pattern = java_regex(render(regex))
        parts = java_replacement(pattern, written)

        def substitute(match: re.Match[str]) -> str:
            return "".join(p if isinstance(p, str) else match.group(p) or "" for p in parts)

        # at most a replacement at each of the n positions, each of its characters a whole subject
        n = len(text) + 1
        if n * n * (len(written) + 1) <= MAX_EVALUATION_CHARS:
            return pattern.sub(substitute, text, count=count)
        made = len(text)   # more than the bound is possible: what the replacements make, counted

        def replace(match: re.Match[str]) -> str:
            nonlocal made
            piece = substitute(match)
            made += len(piece)
            call.check_result_size(made)
            return piece

        return pattern.sub(replace, text, count=count)

    register_function(name, (2, 2), check=check_regex)(impl)


_regex_replace("replaceAll", 0)
_regex_replace("replaceFirst", 1)


@register_function("replaceNull", (1, 1))
def _replace_null(call: Call, subject: Value, replacement: Value) -> Value:
    return replacement if subject is None else subject


@register_function("replaceEmpty", (1, 1))
def _replace_empty(call: Call, subject: Value, replacement: Value) -> Value:
    """The replacement when the subject is missing, empty or only whitespace."""
    return replacement if subject is None or not render(subject).strip(JAVA_WHITESPACE) else subject


@register_function("length")
def _length(call: Call, subject: Value) -> Value:
    return len(render(subject))


@register_function("evaluateELString", lazy=True, volatile=True)
def _evaluate_el_string(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    """The subject's text read as a property value: its expressions evaluated on the same FlowFile."""
    if subject is None:
        return None
    if ctx.nesting >= MAX_NESTED_EVALUATIONS:
        raise ExpressionLimitError(f"evaluateELString(): more than {MAX_NESTED_EVALUATIONS} evaluations inside one "
                                   f"another (MAX_NESTED_EVALUATIONS); does a value evaluate itself?",
                                   call.position, call.text)
    text = render(subject)
    ctx.charge(len(text), call.refuse)   # what it parses, as large as what it reads
    ctx.nesting += 1
    try:
        return compile_value(text).evaluate_within(ctx)
    finally:
        ctx.nesting -= 1


@register_function("repeat", (1, 2), volatile=True)
def _repeat(call: Call, subject: Value, times: Value, most: Value = OMITTED) -> Value:
    """The subject ``times`` times; with two arguments a random count between them (inclusive)."""
    if subject is None:
        return None
    low = to_whole(call, times, "count")
    high = low if most is OMITTED else to_whole(call, most, "maximum count")
    if low <= 0 or high < low:
        call.fail(f"the counts must be 1 or more and the maximum not below the minimum, got {low}, {high}")
    text = render(subject)
    count = low if high == low else random.randint(low, high)
    call.check_result_size(len(text) * count)
    return text * count


#: the largest length NiFi pads to (Java's largest int); beyond it the subject is left as it is
_JAVA_INT_MAX = 2**31 - 1


def _pad(name: str, left: bool) -> None:
    """padLeft / padRight: to ``length`` characters with the pad text repeated (default ``_``);
    a subject that long already is unchanged, and so is one asked for more than Java's largest
    int (as NiFi); a length between ``MAX_EVALUATION_CHARS`` and that is refused."""

    def impl(call: Call, subject: Value, length: Value, pad: Value = "_") -> Value:
        if subject is None:
            return None
        text, size, fill = render(subject), to_whole(call, length, "length"), render(pad) or "_"
        missing = size - len(text)
        if missing <= 0 or size > _JAVA_INT_MAX:
            return text
        call.check_result_size(size)
        padding = (fill * (missing // len(fill) + 1))[:missing]
        return padding + text if left else text + padding

    register_function(name, (1, 2))(impl)


_pad("padLeft", left=True)
_pad("padRight", left=False)


def _list_function(name: str, tidy) -> None:
    """compactDelimitedList / trimDelimitedList / unique: the subject split at the (literal)
    delimiter, its pieces tidied, joined again with the same delimiter; an empty delimiter leaves
    the subject as it is (as NiFi)."""

    def impl(call: Call, subject: Value, delimiter: Value) -> Value:
        if subject is None:
            return None
        separator = render(delimiter)
        if not separator:
            return render(subject)
        return separator.join(tidy(render(subject).split(separator)))

    register_function(name, (1, 1))(impl)


def _trim_ends(pieces: list[str]) -> list[str]:
    first = next((i for i, p in enumerate(pieces) if p), len(pieces))
    last = next((i for i in range(len(pieces) - 1, -1, -1) if pieces[i]), -1)
    return pieces[first:last + 1]


_list_function("compactDelimitedList", lambda pieces: [p for p in pieces if p])
_list_function("trimDelimitedList", _trim_ends)
_list_function("unique", lambda pieces: list(dict.fromkeys(pieces)))


@text_cache(256)   # a rule in the expression is read once, not for every FlowFile
def _mapping_rule(rule: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """``'regex:value, regex2:value2'``, read as NiFi: the pairs split at ',' and trimmed, each at
    its first ':' (a value ends at a second one); a pair with a blank pattern or value is skipped,
    and a blank rule has none."""
    pairs = []
    for entry in rule.split(",") if rule.strip(JAVA_WHITESPACE) else ():
        parts = entry.strip(JAVA_WHITESPACE).split(":")
        if len(parts) < 2:
            raise ValueError(f"the mapping rule {rule!r} needs 'pattern:value' pairs separated by ','")
        pattern, value = parts[0], parts[1]
        if pattern.strip(JAVA_WHITESPACE) and value.strip(JAVA_WHITESPACE):
            pairs.append((java_regex(pattern), value))
    return tuple(pairs)


@register_function("replaceByPattern", (1, 1), check=literal_check(_mapping_rule))
def _replace_by_pattern(call: Call, subject: Value, rule: Value) -> Value:
    """The value of the first pattern of the rule that matches the whole subject; else (and for a
    missing rule) the subject."""
    if subject is None:
        return None
    text = render(subject)
    if rule is None:
        return text
    return next((value for pattern, value in _mapping_rule(render(rule)) if pattern.fullmatch(text)), text)
