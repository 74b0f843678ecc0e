"""Searching (NiFi guide: Searching): text tests, positions, and JSONPath over a JSON subject.

JSONPath is read by ``jsonpath-ng`` (its extended parser, for filters), a maintained library
rather than a parser of our own. As NiFi's (Jayway's), a path that names one place gives that
value, a path with wildcards, filters, slices or ``..`` gives a JSON array of what it found.
"""

from __future__ import annotations

import re

import orjson
from jsonpath_ng.ext import parse as parse_json_path

from flowactors.sdk.expression.cache import text_cache
from flowactors.sdk.expression.language import (
    MANY, Value, Call, Date, register_function, literal_check, render)
from flowactors.sdk.expression.regex import check_regex, java_regex


@register_function("contains", (1, 1))
def _contains(call: Call, subject: Value, search: Value) -> Value:
    return subject is not None and render(search) in render(subject)


@register_function("startsWith", (1, 1))
def _starts_with(call: Call, subject: Value, prefix: Value) -> Value:
    return subject is not None and render(subject).startswith(render(prefix))


@register_function("endsWith", (1, 1))
def _ends_with(call: Call, subject: Value, suffix: Value) -> Value:
    return subject is not None and render(subject).endswith(render(suffix))


@register_function("in", (1, MANY))
def _in(call: Call, subject: Value, *values: Value) -> Value:
    """True when the subject's text equals one of the arguments'."""
    return subject is not None and render(subject) in {render(v) for v in values if v is not None}


@register_function("matches", (1, 1), check=check_regex)
def _matches(call: Call, subject: Value, regex: Value) -> Value:
    """The regular expression matches the whole subject; a missing one matches nothing."""
    if subject is None or regex is None:
        return False
    return java_regex(render(regex)).fullmatch(render(subject)) is not None


@register_function("find", (1, 1), check=check_regex)
def _find(call: Call, subject: Value, regex: Value) -> Value:
    """The regular expression matches somewhere in the subject; a missing one nowhere."""
    return subject is not None and regex is not None and java_regex(render(regex)).search(render(subject)) is not None


@register_function("indexOf", (1, 1))
def _index_of(call: Call, subject: Value, search: Value) -> Value:
    return -1 if subject is None else render(subject).find(render(search))


@register_function("lastIndexOf", (1, 1))
def _last_index_of(call: Call, subject: Value, search: Value) -> Value:
    return -1 if subject is None else render(subject).rfind(render(search))


# --- JSONPath ---

#: what makes a path name several places (a JSON array comes back)
_INDEFINITE = re.compile(r"\*|\.\.|\?\(|\[[^\]]*[:,][^\]]*\]")


@text_cache(256)
def _json_path(path: str):
    if not path.startswith("$"):
        raise ValueError(f"a JSONPath starts with '$', got {path!r}")
    try:
        return parse_json_path(path)
    except Exception as exc:  # jsonpath-ng raises its own errors, and plain Exception for some paths
        raise ValueError(f"invalid JSONPath {path!r}: {exc}") from None


_check_path = literal_check(_json_path)


def _document(call: Call, subject: Value):
    if subject is None or not render(subject).strip():
        call.fail("the subject is empty, not JSON")
    try:
        return orjson.loads(render(subject))
    except orjson.JSONDecodeError as exc:
        call.fail(f"the subject is not JSON: {exc}")


def _json_text(call: Call, value) -> str:
    """A JSON value as text (a string as itself). A list (what a path with wildcards found, which
    may hold the same parts of the document many times over) is written an item at a time, and
    refused once it passes ``MAX_EVALUATION_CHARS``, before it is all made."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return _dumps(call, value)
    items: list[str] = []
    size = 1
    for item in value:
        items.append(_dumps(call, item))
        size += len(items[-1]) + 1
        call.check_result_size(size)
    return "[" + ",".join(items) + "]"


def _dumps(call: Call, value) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:   # nested deeper than orjson writes
        call.fail(f"cannot write the JSON: {exc}")


def _check_growth(call: Call, subject: Value, places: int, added: str) -> None:
    """Refuse a document that writing ``added`` (JSON text) in ``places`` places would make larger
    than ``MAX_EVALUATION_CHARS``, before writing it."""
    call.check_result_size(len(render(subject)) + places * (len(added) + 1))


def _json_value(value: Value):
    """An argument as a JSON value: numbers and booleans as themselves, anything else as text."""
    if isinstance(value, Date):
        return value.millis
    return value if value is None or isinstance(value, (bool, int, float)) else render(value)


@register_function("jsonPath", (1, 1), check=_check_path)
def _json_path_get(call: Call, subject: Value, path: Value) -> Value:
    """The value at the path (text as is, objects and arrays as JSON, an array of one scalar as
    that scalar); empty when nothing is there or the subject is not JSON, as NiFi's guide says."""
    if subject is None:
        call.fail("the subject is missing, not JSON")
    try:
        document = orjson.loads(render(subject))
    except orjson.JSONDecodeError:
        return ""
    if document is None:
        return ""
    text = render(path)
    found = [match.value for match in _json_path(text).find(document)]
    result = found if _INDEFINITE.search(text) else (found[0] if found else None)
    if isinstance(result, list) and len(result) == 1 and not isinstance(result[0], (list, dict)):
        result = result[0]
    return "" if result is None else _json_text(call, result)


@register_function("jsonPathDelete", (1, 1), check=_check_path)
def _json_path_delete(call: Call, subject: Value, path: Value) -> Value:
    document = _json_path(render(path)).filter(lambda _: True, _document(call, subject))
    return _dumps(call, document)


@register_function("jsonPathSet", (2, 2), check=_check_path)
def _json_path_set(call: Call, subject: Value, path: Value, value: Value) -> Value:
    """The document with the value at an existing path replaced (a path not there: unchanged)."""
    expression = _json_path(render(path))
    document = _document(call, subject)
    found = expression.find(document)
    if found:
        _check_growth(call, subject, len(found), _dumps(call, _json_value(value)))
        document = expression.update(document, _json_value(value))
    return _dumps(call, document)


def _change_each(call: Call, subject: Value, path: Value, kind: type, added: tuple, change) -> Value:
    """The document with ``change`` applied to each ``kind`` (list or dict) the path finds, which
    writes ``added`` (the values it adds) in each."""
    document = _document(call, subject)
    found = _json_path(render(path)).find(document)
    for match in found:
        if not isinstance(match.value, kind):
            call.fail(f"{render(path)} is not an {'array' if kind is list else 'object'}")
    if found:
        _check_growth(call, subject, len(found), "".join(_dumps(call, part) for part in added))
    for match in found:
        change(match.value)
    return _dumps(call, document)


@register_function("jsonPathAdd", (2, 2), check=_check_path)
def _json_path_add(call: Call, subject: Value, path: Value, value: Value) -> Value:
    """The document with the value appended to each array at the path."""
    item = _json_value(value)
    return _change_each(call, subject, path, list, (item,), lambda found: found.append(item))


@register_function("jsonPathPut", (3, 3), check=_check_path)
def _json_path_put(call: Call, subject: Value, path: Value, key: Value, value: Value) -> Value:
    """The document with ``key`` set to the value in each object at the path."""
    name, item = render(key), _json_value(value)
    return _change_each(call, subject, path, dict, (name, item), lambda found: found.__setitem__(name, item))
