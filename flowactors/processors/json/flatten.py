"""FlattenJson: a nested JSON document made one level deep (keys joined with a separator), or back,
as NiFi does with the json-flattener library."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable

from flowactors.processors._common import boolean_property, charset_property, route_failure
from flowactors.processors.json._document import DocumentError, depth_checked, parse_document, read_content
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor
from flowactors.sdk.relationships import FAILURE, SUCCESS, reason

NORMAL, KEEP_ARRAYS, DOT_NOTATION, KEEP_PRIMITIVE_ARRAYS = "normal", "keep arrays", "dot notation", \
    "keep primitive arrays"
FLATTEN, UNFLATTEN = "flatten", "unflatten"


class FlattenError(ValueError):
    """A document this mode cannot flatten or unflatten (the message says why, on one line)."""


def _separator_problem(value: str) -> str | None:
    if "${" in value:
        return None   # evaluated per FlowFile, checked then
    if len(value) != 1:
        return "the separator must be a single character"
    if value in '"[]' or value.isspace():
        return f"{value!r} cannot be the separator (a quote, a blank and the brackets [ ] are not allowed)"
    return None


# ------------------------------------------------------------------------------------ writing
_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TO_ESCAPE = re.compile(r'["\\/\b\f\n\r\t]|[^\x20-\x7f]')


def _utf16_escape(char: str) -> str:
    data = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(data[i:i + 2], 'big'):04X}" for i in range(0, len(data), 2))


def escape_json(text: str) -> str:
    """``text`` escaped as commons-text's ESCAPE_JSON does (what NiFi's FlattenJson asks for):
    quotes, backslashes and slashes, control characters and everything outside ASCII as ``\\uXXXX``."""
    return _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m.group()) or _utf16_escape(m.group()), text)


def _plain(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def dump(value: Any, pretty: bool, escape: Callable[[str], str], level: int = 0) -> str:
    """``value`` as JSON text: compact, or two spaces a level with ``"key": value`` (pretty);
    numbers as they were written in the input (kept as Decimal), texts through ``escape``."""
    if isinstance(value, (dict, list)):
        if not value:
            return "{}" if isinstance(value, dict) else "[]"
        colon = ": " if pretty else ":"
        if isinstance(value, dict):
            opening, closing = "{", "}"
            inner = [f'"{escape(str(k))}"{colon}{dump(v, pretty, escape, level + 1)}' for k, v in value.items()]
        else:
            opening, closing = "[", "]"
            inner = [dump(item, pretty, escape, level + 1) for item in value]
        if not pretty:
            return opening + ",".join(inner) + closing
        indent = "\n" + "  " * (level + 1)
        return opening + indent + ("," + indent).join(inner) + "\n" + "  " * level + closing
    if isinstance(value, str):
        return f'"{escape(value)}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------ flattening
def _primitive(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _key(prefix: str, name: str, separator: str, mode: str, keep_reserved: bool) -> str:
    if mode == DOT_NOTATION and separator in name:
        raise FlattenError(f"key {name!r} holds the separator {separator!r}, which dot notation cannot flatten")
    if not keep_reserved and any(c in name for c in (separator, "[", "]")):
        return f'{prefix}["{name}"]'
    return f"{prefix}{separator}{name}" if prefix else name


def _index(prefix: str, index: int, separator: str, mode: str) -> str:
    return f"{prefix}{separator}{index}" if mode == DOT_NOTATION else f"{prefix}[{index}]"


def flatten(document: Any, separator: str, mode: str, keep_reserved: bool) -> Any:
    """The document one level deep: a dict of joined keys (json-flattener's rules, the module
    docstring of docs/json-processors.md), or, for keep arrays and a root array, a list."""
    if mode == KEEP_ARRAYS and isinstance(document, list):
        return [_kept(item, separator, keep_reserved) for item in document]
    if _primitive(document):
        return document
    out: dict[str, Any] = {}
    _flatten_into(out, "", document, separator, mode, keep_reserved)
    return out


def _kept(value: Any, separator: str, keep_reserved: bool) -> Any:
    """An element of an array keep arrays keeps: objects flattened on their own, arrays kept."""
    if isinstance(value, dict):
        return flatten(value, separator, KEEP_ARRAYS, keep_reserved)
    if isinstance(value, list):
        return [_kept(item, separator, keep_reserved) for item in value]
    return value


def _flatten_into(out: dict[str, Any], prefix: str, value: Any, separator: str, mode: str,
                  keep_reserved: bool) -> None:
    if isinstance(value, dict) and value:
        for name, item in value.items():
            _flatten_into(out, _key(prefix, name, separator, mode, keep_reserved), item, separator, mode,
                          keep_reserved)
    elif isinstance(value, list) and value and mode != KEEP_ARRAYS and \
            not (mode == KEEP_PRIMITIVE_ARRAYS and all(map(_primitive, value))):
        for index, item in enumerate(value):
            _flatten_into(out, _index(prefix, index, separator, mode), item, separator, mode, keep_reserved)
    elif isinstance(value, list) and mode == KEEP_ARRAYS:
        out[prefix] = [_kept(item, separator, keep_reserved) for item in value]
    else:
        out[prefix] = value


# ------------------------------------------------------------------------------------ unflattening
@functools.lru_cache(maxsize=64)
def _key_pattern(separator: str) -> re.Pattern[str]:
    """A flattened key's next part: ``[index]``, ``["name"]``, a name, or the separator (compiled
    once a separator, not once a key)."""
    return re.compile(r'\[(\d+)\]|\[\\?"(.*?)\\?"\]|([^%s\[]+)|(%s)' % (re.escape(separator), re.escape(separator)))


def _segments(key: str, separator: str, mode: str) -> list[str | int]:
    """A flattened key's parts: names (text) and array indexes (int)."""
    if mode == DOT_NOTATION:
        return [int(part) if part.isdigit() else part for part in key.split(separator)]
    pattern = _key_pattern(separator)
    parts: list[str | int] = []
    position = 0
    while position < len(key):
        match = pattern.match(key, position)
        if not match:
            raise FlattenError(f"key {key!r} cannot be unflattened at character {position + 1}")
        if match.group(1) is not None:
            parts.append(int(match.group(1)))
        elif match.group(2) is not None:
            parts.append(match.group(2))
        elif match.group(3) is not None:
            parts.append(match.group(3))
        position = match.end()
    return parts


def unflatten(document: Any, separator: str, mode: str) -> Any:
    """The nested document a flattened one stands for (a list when its keys start with indexes)."""
    if isinstance(document, list):
        return [unflatten(item, separator, mode) if isinstance(item, dict) else item for item in document]
    if not isinstance(document, dict):
        return document
    root: list[Any] = [None]
    for key, value in document.items():
        if mode == KEEP_ARRAYS and isinstance(value, list):
            value = [unflatten(item, separator, mode) if isinstance(item, dict) else item for item in value]
        path: list[str | int] = [0, *_segments(key, separator, mode)]
        container: Any = root
        for step, following in zip(path, path[1:]):
            container = _child(container, step, following, key)
        _put(container, path[-1], value, key)
    return {} if root[0] is None else root[0]


def _child(container: Any, step: str | int, following: str | int, key: str) -> Any:
    fresh: Any = [] if isinstance(following, int) else {}
    _put(container, step, fresh, key, keep=True)
    found = container[step]
    if not isinstance(found, (dict, list)) or isinstance(found, list) != isinstance(following, int):
        wanted = "an array" if isinstance(following, int) else "an object"
        raise FlattenError(f"key {key!r} goes inside a value that is not {wanted}")
    return found


def _put(container: Any, step: str | int, value: Any, key: str, keep: bool = False) -> None:
    if isinstance(container, list):
        if not isinstance(step, int):
            raise FlattenError(f"key {key!r} names a field of an array")
        container.extend([None] * (step + 1 - len(container)))
        if not (keep and container[step] is not None):
            container[step] = value
    elif not (keep and step in container):
        container[step] = value


class FlattenJson(Processor):
    """Flattens the JSON content into one level, its keys the nested keys joined with Separator, or
    unflattens such a document again (Return Type), as NiFi's FlattenJson does.

    Flatten Mode normal indexes arrays (``a[0].b``); keep arrays keeps arrays (objects in them are
    flattened on their own; a root array stays an array of flattened objects); dot notation
    indexes with the separator (``a.0.b``, MongoDB's notation; a key holding the separator fails);
    keep primitive arrays keeps arrays holding only texts, numbers, booleans and nulls and indexes
    the others. A key holding the separator or a bracket is written ``prefix["key"]`` unless
    Ignore Reserved Characters is true. Empty objects and arrays stay as values. Numbers are
    written as they were in the input; flattened texts are escaped as NiFi's (``\\/``, ``\\uXXXX``
    outside ASCII). The content is read and written whole in Character Set. Content that is not
    JSON, or that the mode cannot (un)flatten, goes to failure unchanged with
    ``flowactors.failure.reason``. Provenance: CONTENT_MODIFIED (session).
    """

    description = "Flattens nested JSON into one level of joined keys, or unflattens it"
    properties = (
        PropertyDescriptor("Separator", "The one character joining the keys", default=".", expression_language=True,
                           validator=_separator_problem),
        PropertyDescriptor("Flatten Mode", "How arrays are flattened (and unflattened)", required=True,
                           default=KEEP_ARRAYS, allowable_values=(NORMAL, KEEP_ARRAYS, DOT_NOTATION,
                                                                  KEEP_PRIMITIVE_ARRAYS)),
        boolean_property("Ignore Reserved Characters", False, "Whether a key holding the separator or a bracket "
                         "is joined as it is, instead of written [\"key\"]"),
        PropertyDescriptor("Return Type", "Flatten, or unflatten a flattened document", required=True,
                           default=FLATTEN, allowable_values=(FLATTEN, UNFLATTEN)),
        charset_property("The character set the content is read and written in"),
        boolean_property("Pretty Print JSON", False, "Whether the result is indented"),
    )
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.FlattenJson"
    NIFI_PROPERTY_NAMES = {"flatten-json-separator": "Separator", "flatten-mode": "Flatten Mode",
                           "ignore-reserved-characters": "Ignore Reserved Characters",
                           "flatten-json-return-type": "Return Type", "flatten-json-character-set": "Character Set",
                           "flatten-json-pretty-print-json": "Pretty Print JSON"}

    def on_scheduled(self, context: ProcessContext) -> None:
        self._mode = context.property("Flatten Mode").raw
        self._keep_reserved = context.property("Ignore Reserved Characters").as_bool()
        self._flatten = context.property("Return Type").raw == FLATTEN
        self._charset = context.property("Character Set").raw
        self._pretty = context.property("Pretty Print JSON").as_bool()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            try:
                with depth_checked():
                    output = self._convert(context.property("Separator").evaluate(flowfile) or ".",
                                           read_content(session, flowfile))
            except (FlattenError, DocumentError) as err:
                route_failure(context, session, flowfile, reason(err))
                continue
            session.transfer(session.write_bytes(flowfile, output), SUCCESS)

    def _convert(self, separator: str, data: bytes) -> bytes:
        problem = _separator_problem(separator)
        if problem:
            raise FlattenError(f"Separator {separator!r}: {problem}")
        try:
            document = parse_document(data.decode(self._charset), exact_numbers=True)
        except UnicodeDecodeError as err:
            raise FlattenError(f"the content is not {self._charset} text: {err}") from None
        if self._flatten:
            text = dump(flatten(document, separator, self._mode, self._keep_reserved), self._pretty, escape_json)
        else:
            text = dump(unflatten(document, separator, self._mode), self._pretty, _plain)
        try:
            return text.encode(self._charset)
        except UnicodeEncodeError as err:   # NiFi writes '?' instead: the text would be lost
            raise FlattenError(f"the result cannot be written in {self._charset}: {err.reason} "
                               f"({text[err.start:err.end]!r} at character {err.start})") from None

