"""Reading a FlowFile's JSON document and writing JSON as NiFi's Jackson does (shared by the JSON
processors; not public API)."""

from __future__ import annotations

import contextlib
import json
from decimal import Decimal
from typing import Any, Iterator

from flowactors.processors.json.jsonpath import KeySet
from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.expression.language import java_double
from flowactors.sdk.relationships import reason

#: Null Value Representation's choices, and the text each writes for a JSON null
NULL_TEXTS = {"empty string": "", "the string 'null'": "null"}
NULL_REPRESENTATION = PropertyDescriptor(
    "Null Value Representation", "What a JsonPath result that is null becomes", required=True,
    default="empty string", allowable_values=tuple(NULL_TEXTS))
MAX_STRING_LENGTH = PropertyDescriptor(
    "Max String Length", "The longest text value a document may hold (longer: the FlowFile goes to failure)",
    required=True, default="20 MB", validator=validators.DATA_SIZE)


class DocumentError(ValueError):
    """Content that is not one JSON document, or cannot be read (the message is one line saying why)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


#: why a document nested deeper than Python's recursion limit lets it be read or walked fails
TOO_DEEP = "the document is nested too deeply to be processed (deeper than Python's recursion limit)"


@contextlib.contextmanager
def depth_checked() -> Iterator[None]:
    """Turns the RecursionError of a document nested deeper than Python's recursion limit lets the
    processors walk into a ``DocumentError`` saying so (Jackson refuses more than 1000 levels)."""
    try:
        yield
    except RecursionError:
        raise DocumentError(TOO_DEEP) from None


@contextlib.contextmanager
def reading_content() -> Iterator[None]:
    """Turns a FlowFile's content that cannot be read (a missing or unreadable claim) into a
    ``DocumentError`` saying so; a full content repository is raised as it is (the trigger rolls
    back: nothing is wrong with the FlowFile)."""
    try:
        yield
    except ContentRepositoryFullError:
        raise
    except (ContentRepositoryError, OSError) as err:
        raise DocumentError(f"the content cannot be read: {reason(err)}") from None


def read_content(session, flowfile: FlowFile) -> bytes:
    """A FlowFile's whole content; ``DocumentError`` when it cannot be read (``reading_content``)."""
    with reading_content():
        return session.read_bytes(flowfile)


def read_contents(session, flowfiles: list[FlowFile]) -> list[bytes | DocumentError]:
    """Each FlowFile's whole content, read as one batch; when the batch cannot be read, each on its
    own, a ``DocumentError`` in place of a content that cannot be read (the others still read)."""
    try:
        with reading_content():
            return session.read_bytes_batch(flowfiles)
    except DocumentError:
        pass
    contents: list[bytes | DocumentError] = []
    for flowfile in flowfiles:
        try:
            contents.append(read_content(session, flowfile))
        except DocumentError as err:
            contents.append(err)
    return contents


def read_document(session, flowfile: FlowFile, max_string_length: int | None = None, *,
                  allow_null: bool = False) -> Any:
    """The JSON document of a FlowFile's whole content (``parse_document``); ``DocumentError``
    also when the content cannot be read (``read_content``)."""
    return parse_document(read_content(session, flowfile), max_string_length, allow_null=allow_null)


def parse_document(data: bytes | str, max_string_length: int | None = None, *, exact_numbers: bool = False,
                   allow_null: bool = False) -> Any:
    """The JSON document ``data`` holds (bytes: UTF-8, -16 or -32, as Jackson detects them).

    ``DocumentError`` when it is not JSON (NaN and Infinity are not, as in Jackson), when it is JSON
    ``null`` unless ``allow_null`` (Jayway has no document then), or when a text value is longer than
    ``max_string_length`` characters (Jackson's StreamReadConstraints). With ``exact_numbers``
    numbers with a fraction or an exponent are Decimals, written back as they were read."""
    if not data or data.isspace():   # not data.strip(): that copies the whole content
        raise DocumentError("the content is empty, not a JSON document")
    try:
        document = json.loads(data, parse_constant=_no_constant, parse_float=Decimal if exact_numbers else None)
    except RecursionError:
        raise DocumentError(TOO_DEEP) from None
    except ValueError as err:   # UnicodeDecodeError is a ValueError
        raise DocumentError(f"the content is not valid JSON: {str(err).splitlines()[0]}") from None
    if document is None and not allow_null:
        raise DocumentError("the content is the JSON null, not a document")
    if max_string_length is not None:
        longest = _longest_text(document)
        if longest > max_string_length:
            raise DocumentError(f"a text value of {longest} characters is longer than the Max String Length "
                              f"({max_string_length}): raise Max String Length to read this document")
    return document


def _longest_text(value: Any) -> int:
    longest, pending = 0, [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            longest = max(longest, len(node))
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return longest


def _scalar(value: Any) -> str:
    return java_double(value) if isinstance(value, float) else json.dumps(value, ensure_ascii=False)


def to_json(value: Any, pretty: bool = False) -> str:
    """``value`` as Jackson writes it: compact (``{"a":1}``), or with Jackson's default pretty
    printer (two spaces an object level, ``"key" : value``, arrays on one line ``[ 1, 2 ]``);
    floating-point numbers as Java writes doubles (``1.0E10``)."""
    parts: list[str] = []
    _write(value, parts, pretty, 0)
    return "".join(parts)


def _write(value: Any, out: list[str], pretty: bool, level: int) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{ }" if pretty else "{}")
            return
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(",")
            if pretty:
                out.append("\n" + "  " * (level + 1))
            out.append(json.dumps(str(key), ensure_ascii=False) + (" : " if pretty else ":"))
            _write(item, out, pretty, level + 1)
        out.append(("\n" + "  " * level if pretty else "") + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[ ]" if pretty else "[]")
            return
        out.append("[ " if pretty else "[")
        for index, item in enumerate(value):
            if index:
                out.append(", " if pretty else ",")
            _write(item, out, pretty, level)   # an array is no level of its own (Jackson's inline arrays)
        out.append(" ]" if pretty else "]")
    else:
        out.append(_scalar(value))


def result_text(value: Any, null_text: str) -> str:
    """A JsonPath result as NiFi writes it: an object or an array as JSON, a text as it is, a
    number or a boolean as Java prints it, null as ``null_text``, keys() as Java prints a set;
    texts ``writable``."""
    if isinstance(value, KeySet):
        return writable("[" + ", ".join(value) + "]")
    if isinstance(value, (dict, list)):
        return writable(to_json(value))
    if value is None:
        return null_text
    if isinstance(value, str):
        return writable(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def writable(text: str) -> str:
    """``text`` with each unpaired surrogate (what a JSON escape such as ``\\ud800`` alone reads
    as: no character, so no UTF-8 and no attribute) as ``?``, as Java's UTF-8 encoder writes it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def is_scalar(value: Any) -> bool:
    """Whether NiFi treats a JsonPath result as a scalar: anything but an object or an array."""
    return not isinstance(value, (dict, list))
