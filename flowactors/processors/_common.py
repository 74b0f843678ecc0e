"""Small helpers the standard processors share (not part of the public API)."""

from __future__ import annotations

import codecs
import logging
import re
import stat
from typing import BinaryIO, Iterator, Mapping

from flowactors.sdk.processor import ProcessContext, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, failure_attributes
from repositories.model import FlowFile

log = logging.getLogger(__name__)

#: how NiFi writes file times (file.lastModifiedTime ...): Java's yyyy-MM-dd'T'HH:mm:ssZ
NIFI_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


def permission_text(mode: int) -> str:
    """``rwxr-x---``: a mode's nine permission bits as NiFi writes file.permissions."""
    return stat.filemode(mode & 0o777)[1:]

#: bytes read from a content stream at a time by the streaming processors.
CHUNK = 1024 * 1024

#: NiFi's Destination values of the processors that evaluate paths (EvaluateJsonPath, EvaluateXPath, AttributesToJSON...)
TO_CONTENT, TO_ATTRIBUTE = "flowfile-content", "flowfile-attribute"


def path_count_problems(paths: dict[str, str], destination: str, language: str) -> list[str]:
    """A path-evaluating processor's dynamic properties (``paths``, attribute name -> path in
    ``language``): exactly one with ``destination`` the content, at least one otherwise."""
    if destination == TO_CONTENT and len(paths) != 1:
        return [f"exactly one {language} (dynamic property) must be set with Destination {TO_CONTENT}, not {len(paths)}"]
    if not paths:
        return [f"at least one {language} must be set, as a dynamic property (attribute name -> {language})"]
    return []



def _regex_problem(value: str) -> str | None:
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError) as err:   # a repeat count past C's, groups nested too deep
        return f"invalid regular expression {value[:200]!r}: {type(err).__name__ if isinstance(err, RecursionError) else err}"
    return None


REGEX_VALIDATOR = _regex_problem


def charset_property(description: str = "The character set of the content") -> PropertyDescriptor:
    """A required ``Character Set`` property (default UTF-8) holding a name Python's codecs know."""
    return PropertyDescriptor("Character Set", description, required=True, default="UTF-8",
                              validator=validators.CHARSET)


def boolean_property(name: str, default: bool, description: str) -> PropertyDescriptor:
    return PropertyDescriptor(name, description, required=True, default="true" if default else "false",
                              allowable_values=("true", "false"), validator=validators.BOOLEAN)


def iter_chunks(stream: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    """The stream's bytes in chunks of at most ``size`` (never the whole content at once)."""
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        yield chunk


def copy_bytes(source: BinaryIO, out: BinaryIO, count: int) -> int:
    """Copy up to ``count`` bytes, a chunk at a time; returns how many (fewer only when the source ended)."""
    copied = 0
    while copied < count:
        chunk = source.read(min(count - copied, CHUNK))
        if not chunk:
            break
        out.write(chunk)
        copied += len(chunk)
    return copied


def read_prefix(stream: BinaryIO, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of the stream (a stream may return short reads)."""
    parts: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = stream.read(min(remaining, CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def decode_prefix(data: bytes, charset: str, truncated: bool) -> str:
    """Decode ``data``; when it was cut short, an incomplete last character is dropped."""
    decoder = codecs.getincrementaldecoder(charset)(errors="replace")
    return decoder.decode(data, final=not truncated)


def dynamic_regexes(values: dict[str, str]) -> list[str]:
    """One sentence per dynamic property whose value is not a valid regular expression."""
    problems = []
    for name, value in values.items():
        if "${" in value:
            continue  # evaluated per FlowFile; checked then
        problem = _regex_problem(value)
        if problem:
            problems.append(f"property '{name}': {problem}")
    return problems


def java_replacement(pattern: re.Pattern, replacement: str):
    """A ``re.sub`` replacement function for a Java-style replacement string.

    ``$1`` .. ``$99`` and ``${name}`` are group references (a reference to a group the expression
    does not have stays literal text, as does a ``$`` followed by anything else); ``\\x`` is the
    literal character ``x``. Unmatched optional groups give the empty string.
    """
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < n:
            nxt = replacement[i + 1]
            if nxt == "{":
                end = replacement.find("}", i + 2)
                name = replacement[i + 2:end] if end > 0 else None
                if name is not None and name in pattern.groupindex:
                    parts.extend(["".join(literal), pattern.groupindex[name]])
                    literal = []
                    i = end + 1
                    continue
            elif nxt.isdigit() and int(nxt) <= pattern.groups:
                group = int(nxt)
                i += 2
                while i < n and replacement[i].isdigit() and group * 10 + int(replacement[i]) <= pattern.groups:
                    group = group * 10 + int(replacement[i])
                    i += 1
                parts.extend(["".join(literal), group])
                literal = []
                continue
        literal.append(c)
        i += 1
    parts.append("".join(literal))
    parts = [p for p in parts if p != ""]
    if all(isinstance(p, str) for p in parts):
        constant = "".join(parts)  # type: ignore[arg-type]
        return lambda match: constant

    def substitute(match: re.Match) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)

    return substitute


def route_failure(context: ProcessContext, session, flowfile: FlowFile, message: str,
                  extra: Mapping[str, str] | None = None, relationship: Relationship = FAILURE) -> FlowFile:
    """Send ``flowfile`` to ``relationship`` (failure), unchanged but for
    ``flowactors.failure.reason`` (``message``, one line), ``flowactors.failure.processor`` and
    ``extra``, and log why. Returns the FlowFile as sent."""
    log.warning("%s: routing %s to %s: %s", context.name, flowfile.uuid, relationship.name, message)
    flowfile = session.put_all_attributes(flowfile, {**failure_attributes(context.name, message), **(extra or {})})
    session.transfer(flowfile, relationship)
    return flowfile
