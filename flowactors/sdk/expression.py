"""The attribute expression language: a documented subset of NiFi Expression Language.

A property value mixes literal text and ``${...}`` expressions, e.g. ``out/${filename:toUpper()}``.
``compile_value`` parses it once (cached) into a tree of small node objects, so every error in the
text is reported before any FlowFile is processed, and ``CompiledValue.evaluate`` only walks the
tree. docs/expression-language.md is the user documentation; this module follows it.

Values inside an expression are typed: ``None`` (a missing attribute, NiFi's null), ``str``,
``bool``, ``int``/``float`` (NiFi's whole and decimal numbers) and ``_Date`` (milliseconds since
the epoch, as ``now()`` and ``${entryDate}`` give). Only the final result is rendered to text.
"""

from __future__ import annotations

import difflib
import functools
import operator
import re
import socket
import time
import uuid
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, NoReturn, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from repositories.model import FlowFile

__all__ = ["CompiledValue", "ExpressionError", "compile_value"]


class ExpressionError(ValueError):
    """A syntax or evaluation error, pointing at the character of the property value at fault.

    ``position`` is the 0-based index in ``text`` (the whole property value); ``message`` is the
    description without the position. All three are the exception's ``args``, so it pickles (Ray
    sends exceptions between processes).
    """

    def __init__(self, message: str, position: int, text: str) -> None:
        super().__init__(message, position, text)
        self.message = message
        self.position = position
        self.text = text

    def __str__(self) -> str:
        return f"{self.message} at position {self.position} in '{self.text}'"


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


class _Date(NamedTuple):
    """A point in time, kept apart from numbers so that ``format`` knows what it has."""

    millis: int


Value = Any  # None | str | bool | int | float | _Date

#: What Java's String.trim removes: every code point up to and including the space.
_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _render(value: Value) -> str:
    """The text of a value, as it appears in the evaluated property."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, _Date):
        return str(value.millis)
    return str(value)


def _describe(value: Value) -> str:
    """A value as an error message shows it: quoted when it is text, so blanks are visible."""
    if value is None:
        return "(missing)"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, _Date):
        return f"date {value.millis}"
    return _render(value)


def _parse_number(text: str) -> int | float | None:
    """A whole or decimal number written in ``text`` (surrounding blanks allowed), else None."""
    text = text.strip(_JAVA_WHITESPACE)
    if _WHOLE.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return None


# --------------------------------------------------------------------------------------------
# Tree
# --------------------------------------------------------------------------------------------


class _Context:
    """What one evaluation sees. ``now()`` is read once, so all its uses in a value agree."""

    __slots__ = ("attributes", "flowfile", "_now")

    def __init__(self, attributes: Mapping[str, str], flowfile: FlowFile | None) -> None:
        self.attributes = attributes
        self.flowfile = flowfile
        self._now: int | None = None

    def now(self) -> int:
        if self._now is None:
            self._now = time.time_ns() // 1_000_000
        return self._now


class _Node:
    __slots__ = ()

    def eval(self, ctx: _Context) -> Value:
        raise NotImplementedError


class _Const(_Node):
    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value

    def eval(self, ctx: _Context) -> Value:
        return self.value


class _Concat(_Node):
    """Literal text and expressions side by side: the result is always text."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[str | _Node, ...]) -> None:
        self.parts = parts

    def eval(self, ctx: _Context) -> Value:
        return "".join(p if isinstance(p, str) else _render(p.eval(ctx)) for p in self.parts)


#: FlowFile fields that stand in for an attribute of the same name when the attribute is missing.
_FLOWFILE_FIELDS: dict[str, Callable[["FlowFile"], Value]] = {
    "fileSize": lambda ff: ff.size,
    "entryDate": lambda ff: _Date(ff.entry_date),
    "lineageStartDate": lambda ff: _Date(ff.lineage_start_date),
    "uuid": lambda ff: ff.uuid,
}


class _Attr(_Node):
    __slots__ = ("name", "fallback")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fallback = _FLOWFILE_FIELDS.get(name)

    def eval(self, ctx: _Context) -> Value:
        value = ctx.attributes.get(self.name)
        if value is None and self.fallback is not None and ctx.flowfile is not None:
            return self.fallback(ctx.flowfile)
        return value


class _Function(NamedTuple):
    """A function of the language. A lazy one gets its argument nodes, to evaluate only some."""

    name: str
    min_args: int
    max_args: int
    needs_subject: bool
    lazy: bool
    impl: Callable[..., Value]
    check: Callable[[tuple[Value, ...]], None] | None


class _Call(_Node):
    __slots__ = ("function", "subject", "args", "position", "text")

    def __init__(
        self, function: _Function, subject: _Node | None, args: tuple[_Node, ...], position: int, text: str
    ) -> None:
        self.function = function
        self.subject = subject
        self.args = args
        self.position = position
        self.text = text

    def eval(self, ctx: _Context) -> Value:
        subject = self.subject.eval(ctx) if self.subject is not None else None
        try:
            if self.function.lazy:
                return self.function.impl(self, ctx, subject, self.args)
            return self.function.impl(self, subject, *[arg.eval(ctx) for arg in self.args])
        except ExpressionError:
            raise
        except (ValueError, ArithmeticError) as exc:  # a safety net: report it where it happened
            self.fail(str(exc))

    def fail(self, message: str) -> NoReturn:
        raise ExpressionError(f"{self.function.name}(): {message}", self.position, self.text)


# --------------------------------------------------------------------------------------------
# Coercions used by the functions
# --------------------------------------------------------------------------------------------


def _number(call: _Call, value: Value, role: str) -> int | float:
    if isinstance(value, bool):
        call.fail(f"{role} {_describe(value)} is not a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, _Date):
        return value.millis
    number = _parse_number(_render(value))
    if number is None:
        call.fail(f"{role} {_describe(value)} is not a number")
    return number


def _whole(call: _Call, value: Value, role: str) -> int:
    number = _number(call, value, role)
    if isinstance(number, float):
        if not number.is_integer():
            call.fail(f"{role} {_describe(value)} is not a whole number")
        number = int(number)
    return number


def _boolean(call: _Call, value: Value) -> bool:
    """NiFi's reading of a boolean: text is true only when it is 'true' in any case; null is false."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str):
        return value.lower() == "true"
    call.fail(f"expected true or false, got {_describe(value)}")


def _millis(call: _Call, value: Value) -> int:
    if isinstance(value, _Date):
        return value.millis
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        number = value if not isinstance(value, str) else _parse_number(value)
        if number is not None and float(number).is_integer():
            return int(number)
    call.fail(f"{_describe(value)} is not a date or a whole number of milliseconds")


# --------------------------------------------------------------------------------------------
# Regular expressions (Java syntax where it differs in a way people use)
# --------------------------------------------------------------------------------------------


def _python_regex(pattern: str) -> str:
    """Accept Java's named groups ``(?<name>...)`` and ``\\k<name>`` as well as Python's."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\k<", i) and (end := pattern.find(">", i)) > 0:
                out.append(f"(?P={pattern[i + 3:end]})")
                i = end + 1
            else:
                out.append(pattern[i : i + 2])
                i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(_python_regex(pattern))
    except re.error as exc:
        where = f" (pattern index {exc.pos})" if exc.pos is not None else ""
        raise ValueError(f"invalid regular expression {pattern!r}: {exc.msg}{where}") from None


@functools.lru_cache(maxsize=512)
def _replacement(pattern: re.Pattern[str], replacement: str) -> tuple[str | int, ...]:
    """Parse a Java replacement string: ``$1``, ``${name}`` are groups, ``\\x`` is a literal x."""
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 == n:
                raise ValueError("the replacement ends with a lone '\\'")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        i += 1
        if i < n and replacement[i] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 1 : end] if end > 0 else ""
            if end < 0 or name not in pattern.groupindex:
                raise ValueError(f"no group named {name!r} in the regular expression")
            group = pattern.groupindex[name]
            i = end + 1
        elif i < n and "0" <= replacement[i] <= "9":
            group = int(replacement[i])
            if group > pattern.groups:
                raise ValueError(f"no group {group} in the regular expression")
            i += 1
            # As Java: further digits belong to the reference while it still names a group.
            while i < n and "0" <= replacement[i] <= "9" and group * 10 + int(replacement[i]) <= pattern.groups:
                group = group * 10 + int(replacement[i])
                i += 1
        else:
            raise ValueError("'$' in the replacement must be followed by a group number or {name}; "
                             "write \\$ for a literal '$'")
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(group)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


# --------------------------------------------------------------------------------------------
# Dates (a subset of Java's SimpleDateFormat)
# --------------------------------------------------------------------------------------------

_DATE_LETTERS = "yMdHhmsSaEZX"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_DateToken = str | tuple[str, int]  # literal text, or (pattern letter, repeat count)


@functools.lru_cache(maxsize=256)
def _date_pattern(pattern: str) -> tuple[_DateToken, ...]:
    """Split a SimpleDateFormat pattern into literal text and (letter, count) fields."""
    tokens: list[_DateToken] = []
    literal: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if pattern.startswith("''", i):
                literal.append("'")
                i += 2
                continue
            i += 1
            while True:  # quoted text, where '' is one quote
                end = pattern.find("'", i)
                if end < 0:
                    raise ValueError(f"unclosed quote in date pattern {pattern!r}")
                literal.append(pattern[i:end])
                if pattern.startswith("''", end):
                    literal.append("'")
                    i = end + 2
                    continue
                i = end + 1
                break
        elif "a" <= c <= "z" or "A" <= c <= "Z":
            if c not in _DATE_LETTERS:
                raise ValueError(f"unsupported letter {c!r} in date pattern {pattern!r} (supported: "
                                 f"{' '.join(_DATE_LETTERS)}; quote literal text, as in 'T')")
            end = i
            while end < n and pattern[end] == c:
                end += 1
            if c == "X" and end - i > 3:
                raise ValueError(f"at most 3 X in date pattern {pattern!r}")
            if literal:
                tokens.append("".join(literal))
                literal = []
            tokens.append((c, end - i))
            i = end
        else:
            literal.append(c)
            i += 1
    if literal:
        tokens.append("".join(literal))
    return tuple(tokens)


@functools.lru_cache(maxsize=64)
def _zone(name: str) -> tzinfo:
    if name in ("UTC", "GMT", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _offset(moment: datetime, count: int, iso: bool) -> str:
    offset = moment.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    if iso and minutes == 0:
        return "Z"
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    if not iso:
        return f"{sign}{hours:02d}{minutes:02d}"
    return (f"{sign}{hours:02d}", f"{sign}{hours:02d}{minutes:02d}", f"{sign}{hours:02d}:{minutes:02d}")[count - 1]


def _format_date(tokens: tuple[_DateToken, ...], millis: int, zone: tzinfo | None) -> str:
    seconds, ms = divmod(millis, 1000)
    moment = datetime.fromtimestamp(seconds, timezone.utc).astimezone(zone)
    out: list[str] = []
    for token in tokens:
        if isinstance(token, str):
            out.append(token)
            continue
        letter, count = token
        if letter == "y":
            out.append(f"{moment.year % 100:02d}" if count == 2 else str(moment.year).zfill(count))
        elif letter == "M":
            name = _MONTHS[moment.month - 1]
            out.append(str(moment.month).zfill(count) if count < 3 else name[:3] if count == 3 else name)
        elif letter == "E":
            name = _WEEKDAYS[moment.weekday()]
            out.append(name[:3] if count < 4 else name)
        elif letter == "a":
            out.append("AM" if moment.hour < 12 else "PM")
        elif letter in "ZX":
            out.append(_offset(moment, count, iso=letter == "X"))
        else:
            number = {"d": moment.day, "H": moment.hour, "h": moment.hour % 12 or 12, "m": moment.minute,
                      "s": moment.second, "S": ms}[letter]
            out.append(str(number).zfill(count))
    return "".join(out)


# --------------------------------------------------------------------------------------------
# URL encoding (as Java's URLEncoder/URLDecoder with UTF-8, which NiFi uses)
# --------------------------------------------------------------------------------------------

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")
_HEX = frozenset("0123456789abcdefABCDEF")


def _url_encode(text: str) -> str:
    out: list[str] = []
    for byte in text.encode("utf-8", "replace"):
        if byte in _URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _url_decode(call: _Call, text: str) -> str:
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "%":
            digits = text[i + 1 : i + 3]
            if len(digits) != 2 or not set(digits) <= _HEX:
                call.fail(f"invalid escape {text[i:i + 3]!r} at index {i} of {text!r}")
            out.append(int(digits, 16))
            i += 3
        else:
            out += b" " if c == "+" else c.encode("utf-8", "replace")
            i += 1
    return out.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------

_FUNCTIONS: dict[str, _Function] = {}
_DYNAMIC = object()  # stands for an argument whose value is only known at evaluation
_OMITTED = object()  # the default of an optional argument: unlike None, it was not written


class _ArgumentError(Exception):
    """Raised by a parse-time check: argument ``index`` is invalid."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def _function(
    name: str,
    args: tuple[int, int] = (0, 0),
    *,
    subject: bool = True,
    lazy: bool = False,
    check: Callable[[tuple[Value, ...]], None] | None = None,
) -> Callable[[Callable[..., Value]], Callable[..., Value]]:
    def register(impl: Callable[..., Value]) -> Callable[..., Value]:
        _FUNCTIONS[name] = _Function(name, args[0], args[1], subject, lazy, impl, check)
        return impl

    return register


def _string_function(name: str, transform: Callable[[str], str]) -> None:
    """A text-to-text function; a missing value stays missing (so isNull still sees it)."""
    _function(name)(lambda call, subject: None if subject is None else transform(_render(subject)))


def _check_regex(values: tuple[Value, ...]) -> None:
    if values[0] is not _DYNAMIC:
        try:
            pattern = _regex(_render(values[0]))
        except ValueError as exc:
            raise _ArgumentError(0, str(exc)) from None
        if len(values) > 1 and values[1] is not _DYNAMIC:
            try:
                _replacement(pattern, _render(values[1]))
            except ValueError as exc:
                raise _ArgumentError(1, str(exc)) from None


def _check_format(values: tuple[Value, ...]) -> None:
    for index, parse in enumerate((_date_pattern, _zone)[: len(values)]):
        if values[index] is not _DYNAMIC:
            try:
                parse(_render(values[index]))
            except ValueError as exc:
                raise _ArgumentError(index, str(exc)) from None


# --- subject-less ---


@_function("now", subject=False, lazy=True)
def _now(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return _Date(ctx.now())


@_function("UUID", subject=False)
def _uuid(call: _Call, subject: Value) -> Value:
    return str(uuid.uuid4())


@functools.cache
def _fully_qualified_hostname() -> str:
    return socket.getfqdn()  # may ask DNS: once per process is enough


@_function("hostname", (0, 1), subject=False)
def _hostname(call: _Call, subject: Value, qualified: Value = False) -> Value:
    """The host name; hostname(true) asks for the fully qualified one, as NiFi."""
    return _fully_qualified_hostname() if _boolean(call, qualified) else socket.gethostname()


@_function("literal", (1, 1), subject=False)
def _literal(call: _Call, subject: Value, value: Value) -> Value:
    return value


# --- text ---

_string_function("toUpper", str.upper)
_string_function("toLower", str.lower)
_string_function("trim", lambda text: text.strip(_JAVA_WHITESPACE))
_string_function("urlEncode", _url_encode)


@_function("urlDecode")
def _url_decode_function(call: _Call, subject: Value) -> Value:
    return None if subject is None else _url_decode(call, _render(subject))


@_function("substringBefore", (1, 1))
def _substring_before(call: _Call, subject: Value, search: Value) -> Value:
    if subject is None:
        return None
    text = _render(subject)
    index = text.find(_render(search))
    return text if index < 0 else text[:index]


@_function("substringAfter", (1, 1))
def _substring_after(call: _Call, subject: Value, search: Value) -> Value:
    if subject is None:
        return None
    text, search = _render(subject), _render(search)
    index = text.find(search)
    return text if index < 0 else text[index + len(search) :]


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


@_function("replace", (2, 2))
def _replace(call: _Call, subject: Value, search: Value, replacement: Value) -> Value:
    return None if subject is None else _render(subject).replace(_render(search), _render(replacement))


@_function("replaceAll", (2, 2), check=_check_regex)
def _replace_all(call: _Call, subject: Value, regex: Value, replacement: Value) -> Value:
    if subject is None:
        return None
    pattern = _regex(_render(regex))
    parts = _replacement(pattern, _render(replacement))
    return pattern.sub(
        lambda match: "".join(p if isinstance(p, str) else match.group(p) or "" for p in parts), _render(subject)
    )


@_function("append", (1, 1))
def _append(call: _Call, subject: Value, suffix: Value) -> Value:
    return _render(subject) + _render(suffix)


@_function("prepend", (1, 1))
def _prepend(call: _Call, subject: Value, prefix: Value) -> Value:
    return _render(prefix) + _render(subject)


@_function("length")
def _length(call: _Call, subject: Value) -> Value:
    return len(_render(subject))


# --- tests on text ---


@_function("equals", (1, 1))
def _equals(call: _Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and _render(subject) == _render(other)


@_function("equalsIgnoreCase", (1, 1))
def _equals_ignore_case(call: _Call, subject: Value, other: Value) -> Value:
    return subject is not None and other is not None and _render(subject).lower() == _render(other).lower()


@_function("contains", (1, 1))
def _contains(call: _Call, subject: Value, search: Value) -> Value:
    return subject is not None and _render(search) in _render(subject)


@_function("startsWith", (1, 1))
def _starts_with(call: _Call, subject: Value, prefix: Value) -> Value:
    return subject is not None and _render(subject).startswith(_render(prefix))


@_function("endsWith", (1, 1))
def _ends_with(call: _Call, subject: Value, suffix: Value) -> Value:
    return subject is not None and _render(subject).endswith(_render(suffix))


@_function("matches", (1, 1), check=_check_regex)
def _matches(call: _Call, subject: Value, regex: Value) -> Value:
    return subject is not None and _regex(_render(regex)).fullmatch(_render(subject)) is not None


@_function("find", (1, 1), check=_check_regex)
def _find(call: _Call, subject: Value, regex: Value) -> Value:
    return subject is not None and _regex(_render(regex)).search(_render(subject)) is not None


@_function("isEmpty")
def _is_empty(call: _Call, subject: Value) -> Value:
    return subject is None or not _render(subject).strip(_JAVA_WHITESPACE)


@_function("isNull")
def _is_null(call: _Call, subject: Value) -> Value:
    return subject is None


@_function("notNull")
def _not_null(call: _Call, subject: Value) -> Value:
    return subject is not None


# --- numbers ---


def _comparison(name: str, compare: Callable[[Any, Any], bool]) -> None:
    """gt/ge/lt/le: false when either side is missing, an error when either is not a number."""

    def impl(call: _Call, subject: Value, other: Value) -> Value:
        if subject is None or other is None:
            return False
        return compare(_number(call, subject, "subject"), _number(call, other, "argument"))

    _function(name, (1, 1))(impl)


_comparison("gt", lambda a, b: a > b)
_comparison("ge", lambda a, b: a >= b)
_comparison("lt", lambda a, b: a < b)
_comparison("le", lambda a, b: a <= b)


@_function("plus", (1, 1))
def _plus(call: _Call, subject: Value, other: Value) -> Value:
    if subject is None or other is None:
        return None
    return _number(call, subject, "subject") + _number(call, other, "argument")


@_function("minus", (1, 1))
def _minus(call: _Call, subject: Value, other: Value) -> Value:
    if subject is None or other is None:
        return None
    return _number(call, subject, "subject") - _number(call, other, "argument")


@_function("toNumber")
def _to_number(call: _Call, subject: Value) -> Value:
    return None if subject is None else _number(call, subject, "subject")


@_function("format", (1, 2), check=_check_format)
def _format(call: _Call, subject: Value, pattern: Value, zone: Value = _OMITTED) -> Value:
    if subject is None:
        return None
    millis = _millis(call, subject)
    tokens = _date_pattern(_render(pattern))
    where = None if zone is _OMITTED else _zone(_render(zone))
    try:
        return _format_date(tokens, millis, where)
    except (OverflowError, OSError, ValueError):
        call.fail(f"{millis} is outside the supported range of dates")


# --- booleans ---


@_function("not")
def _not(call: _Call, subject: Value) -> Value:
    return not _boolean(call, subject)


@_function("and", (1, 1), lazy=True)
def _and(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return _boolean(call, subject) and _boolean(call, args[0].eval(ctx))


@_function("or", (1, 1), lazy=True)
def _or(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return _boolean(call, subject) or _boolean(call, args[0].eval(ctx))


@_function("ifElse", (2, 2), lazy=True)
def _if_else(call: _Call, ctx: _Context, subject: Value, args: Sequence[_Node]) -> Value:
    return args[0 if _boolean(call, subject) else 1].eval(ctx)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

_WHITESPACE = " \t\r\n"
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_NUMBER_TOKEN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_DEPTH = 64


def _is_name_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "_.-")


def _arity(function: _Function) -> str:
    low, high = function.min_args, function.max_args
    if high == 0:
        return "no arguments"
    if low == high:
        return f"exactly {low} argument{'s' if low > 1 else ''}"
    return f"{low} or {high} arguments" if high == low + 1 else f"{low} to {high} arguments"


def _unknown_function(name: str) -> str:
    known = sorted(_FUNCTIONS)
    guesses = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    same_letters = [k for k in known if k.lower() == name.lower() and k not in guesses]
    guesses = same_letters + guesses
    hint = f" (did you mean {' or '.join(g + '()' for g in guesses)}?)" if guesses else ""
    return f"unknown function {name!r}{hint}"


class _Parser:
    """Recursive descent over ``source``, which is the property value or the unescaped content of
    a string literal inside it; ``origin`` then maps each index back into the property value, so
    that every error points at the character the user wrote."""

    def __init__(self, source: str, text: str, origin: Sequence[int] | None = None, depth: int = 0) -> None:
        self.source = source
        self.text = text
        self.origin = origin
        self.depth = depth
        self.i = 0

    def error(self, message: str, index: int) -> NoReturn:
        raise ExpressionError(message, self.origin[index] if self.origin is not None else index, self.text)

    # value := (text | '$${' | expression)*
    def template(self) -> _Node:
        source, n = self.source, len(self.source)
        parts: list[str | _Node] = []
        literal: list[str] = []
        i = 0
        while i < n:
            dollar = source.find("$", i)
            if dollar < 0:
                literal.append(source[i:])
                break
            literal.append(source[i:dollar])
            end = dollar
            while end < n and source[end] == "$":
                end += 1
            if end == n or source[end] != "{":
                literal.append(source[dollar:end])  # a '$' not before '{' is plain text
                i = end
                continue
            # Before '{', '$$' stands for '$'; an odd '$' left over opens an expression.
            literal.append("$" * ((end - dollar) // 2))
            i = end
            if (end - dollar) % 2:
                if literal:
                    parts.append("".join(literal))
                    literal = []
                self.i = end - 1
                parts.append(self.expression())
                i = self.i
        if literal:
            parts.append("".join(literal))
        parts = [p for p in parts if p != ""]
        if not parts:
            return _Const("")
        if len(parts) == 1:
            return _Const(parts[0]) if isinstance(parts[0], str) else parts[0]
        return _Concat(tuple(parts))

    def peek(self, start: int) -> str:
        """The next character after blanks; inside an expression the text must not end here."""
        while self.i < len(self.source) and self.source[self.i] in _WHITESPACE:
            self.i += 1
        if self.i == len(self.source):
            self.error("unclosed '${' (no matching '}')", start)
        return self.source[self.i]

    def name(self) -> str:
        begin = self.i
        while self.i < len(self.source) and _is_name_char(self.source[self.i]):
            self.i += 1
        return self.source[begin : self.i]

    # expression := '${' subject (':' call)* '}'
    def expression(self) -> _Node:
        start = self.i
        if self.depth >= _MAX_DEPTH:
            self.error(f"expressions nested more than {_MAX_DEPTH} deep", start)
        self.depth += 1
        self.i += 2
        node = self.subject(start)
        while True:
            c = self.peek(start)
            if c == "}":
                self.i += 1
                break
            if c == ":":
                self.i += 1
                node = self.call(start, node)
                continue
            hint = ""
            if isinstance(node, _Attr) and _is_name_char(c):
                hint = " (quote attribute names that contain blanks, as in ${'my attr'})"
            self.error(f"expected ':' or '}}'{hint}", self.i)
        self.depth -= 1
        return node

    # subject := name | quoted-name | function-call
    def subject(self, start: int) -> _Node:
        c = self.peek(start)
        if c in "'\"":
            name, _ = self.string()
            return _Attr(name)
        if not _is_name_char(c):
            self.error("expected an attribute name or a function call", self.i)
        name_at = self.i
        name = self.name()
        after_name = self.i
        if self.peek(start) == "(":
            return self.function(start, name, name_at, None)
        self.i = after_name
        return _Attr(name)

    def call(self, start: int, subject: _Node) -> _Node:
        if not _is_name_char(self.peek(start)):
            self.error("expected a function name after ':'", self.i)
        name_at = self.i
        return self.function(start, self.name(), name_at, subject)

    # function-call := name '(' [argument (',' argument)*] ')'
    def function(self, start: int, name: str, name_at: int, subject: _Node | None) -> _Node:
        function = _FUNCTIONS.get(name)
        if function is None:
            self.error(_unknown_function(name), name_at)
        if subject is None and function.needs_subject:
            self.error(f"{name}() needs a subject, as in ${{attribute:{name}()}}", name_at)
        if subject is not None and not function.needs_subject:
            self.error(f"{name}() takes no subject; write ${{{name}()}}", name_at)
        if self.peek(start) != "(":
            self.error(f"expected '(' after {name}: every function needs parentheses, as in {name}()", self.i)
        self.i += 1
        args: list[_Node] = []
        args_at: list[int] = []
        if self.peek(start) == ")":
            self.i += 1
        else:
            while True:
                if len(args) == function.max_args:
                    self.error(f"{name}() takes {_arity(function)}", self.i)
                args_at.append(self.i)
                args.append(self.argument(start))
                c = self.peek(start)
                if c == ")":
                    self.i += 1
                    break
                if c != ",":
                    self.error("expected ')'" if len(args) == function.max_args else "expected ',' or ')'", self.i)
                self.i += 1
                self.peek(start)
        if len(args) < function.min_args:
            self.error(f"{name}() takes {_arity(function)}, got {len(args)}", self.i - 1)
        if function.check is not None:
            values = tuple(arg.value if isinstance(arg, _Const) else _DYNAMIC for arg in args)
            try:
                function.check(values)
            except _ArgumentError as exc:
                self.error(f"{name}(): {exc}", args_at[exc.index])
        position = self.origin[name_at] if self.origin is not None else name_at
        return _Call(function, subject, tuple(args), position, self.text)

    # argument := string | number | true | false | expression
    def argument(self, start: int) -> _Node:
        c = self.source[self.i]
        if c in "'\"":
            content, origin = self.string()
            return _Parser(content, self.text, origin, self.depth).template()
        if self.source.startswith("${", self.i):
            return self.expression()
        number = _NUMBER_TOKEN.match(self.source, self.i)
        if number is not None:
            self.i = number.end()
            token = number.group()
            return _Const(int(token) if token.lstrip("-").isdigit() else float(token))
        if _is_name_char(c):
            word_at = self.i
            word = self.name()
            if word in ("true", "false"):
                return _Const(word == "true")
            self.error(f"unquoted text {word!r}; quote text arguments, as in '{word}'", word_at)
        self.error("expected an argument: a quoted string, a number, true, false or ${...}", self.i)

    def string(self) -> tuple[str, list[int]]:
        """A quoted string: its unescaped content, and where each character came from (plus one
        entry for the closing quote, where an error at the end of the content points)."""
        quote, opened = self.source[self.i], self.i
        source, n = self.source, len(self.source)
        chars: list[str] = []
        origin: list[int] = []
        self.i += 1
        while True:
            if self.i >= n:
                self.error("unclosed string (missing closing quote)", opened)
            c = source[self.i]
            at = self.origin[self.i] if self.origin is not None else self.i
            if c == quote:
                origin.append(at)
                self.i += 1
                return "".join(chars), origin
            if c == "\\" and self.i + 1 < n and source[self.i + 1] in _ESCAPES:
                chars.append(_ESCAPES[source[self.i + 1]])
                self.i += 2
            else:  # any other backslash stays, so that regular expressions like '\d+' work
                chars.append(c)
                self.i += 1
            origin.append(at)


# --------------------------------------------------------------------------------------------
# Public interface
# --------------------------------------------------------------------------------------------


class CompiledValue:
    """A parsed property value, ready to evaluate against any number of FlowFiles.

    ``is_literal`` is True when the value holds no expression; ``evaluate`` then returns the same
    constant every time (``text`` with each ``$${`` unescaped), so callers may evaluate it once.
    """

    __slots__ = ("text", "is_literal", "_root", "_constant", "_inputs")

    def __init__(self, text: str, root: _Node) -> None:
        self.text = text
        self._root = root
        self.is_literal = isinstance(root, _Const)
        self._constant = _render(root.value) if isinstance(root, _Const) else None
        self._inputs = _inputs(root)

    def evaluate_each(self, flowfiles: Sequence[FlowFile]) -> list[str]:
        """``evaluate(flowfile=f)`` for each FlowFile, evaluated once per distinct input: a value
        that reads only attributes (and the FlowFile fields standing in for them) gives the same
        result for FlowFiles that agree on those; one that reads the clock or draws a ``UUID()``
        is evaluated for every FlowFile."""
        if self._constant is not None:
            return [self._constant] * len(flowfiles)
        inputs = self._inputs
        if inputs is None:
            return [self.evaluate(flowfile=f) for f in flowfiles]
        # the inputs as columns (no Python call a FlowFile unless a field stands in for an
        # attribute it lacks), then one evaluation a distinct key, by its first FlowFile
        maps = [f[2] for f in flowfiles]
        columns = []
        for name, fallback in inputs:
            column = [a.get(name) for a in maps]
            if fallback is not None and None in column:
                column = [(fallback(f),) if v is None else v for v, f in zip(column, flowfiles)]
            columns.append(column)
        keys = columns[0] if len(columns) == 1 else list(zip(*columns)) if columns else [()] * len(maps)
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))   # each key's first position
        results: dict = {}
        for key, position in sorted(first.items(), key=_second):   # in FlowFile order, as one at a time
            results[key] = self.evaluate(maps[position], flowfile=flowfiles[position])
        return list(map(results.__getitem__, keys))

    def evaluate(self, attributes: Mapping[str, str] | None = None, *, flowfile: FlowFile | None = None) -> str:
        """The value with every expression replaced by its result.

        ``attributes`` defaults to the FlowFile's; the FlowFile also supplies ``fileSize``,
        ``entryDate``, ``lineageStartDate`` and ``uuid`` when no attribute has that name.
        """
        if self._constant is not None:
            return self._constant
        if attributes is None:
            attributes = flowfile.attributes if flowfile is not None else {}
        return _render(self._root.eval(_Context(attributes, flowfile)))

    def __reduce__(self) -> tuple[Any, ...]:
        return compile_value, (self.text,)  # the tree is rebuilt (and cached) on the other side

    def __repr__(self) -> str:
        return f"compile_value({self.text!r})"


_second = operator.itemgetter(1)

#: functions whose result is not decided by their arguments and the attributes
_VOLATILE_FUNCTIONS = frozenset({"now", "UUID"})


def _inputs(root: _Node) -> tuple[tuple[str, Callable | None], ...] | None:
    """What an evaluation of ``root`` reads: each attribute name (with the FlowFile field that
    stands in for it), or None when it reads something else (the clock, a random uuid)."""
    names: dict[str, Callable | None] = {}
    pending: list[Any] = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, _Attr):
            names[node.name] = node.fallback
        elif isinstance(node, _Concat):
            pending.extend(p for p in node.parts if isinstance(p, _Node))
        elif isinstance(node, _Call):
            if node.function.name in _VOLATILE_FUNCTIONS:
                return None
            if node.subject is not None:
                pending.append(node.subject)
            pending.extend(node.args)
    return tuple(names.items())


@functools.lru_cache(maxsize=4096)
def compile_value(text: str) -> CompiledValue:
    """Parse a property value; raises ExpressionError for any syntax error, unknown function, wrong
    number of arguments or invalid literal regular expression / date pattern."""
    return CompiledValue(text, _Parser(text, text).template())
