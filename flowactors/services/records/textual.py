"""What the text record formats share (JSON, CSV, XML, free-form text): NiFi's date, time and
timestamp formats, a column of text read as a field's type, the type NiFi infers from text, and
Python values (a JSON or XML record parsed in Python) made into Arrow columns.

**Formats.** ``Date Format``, ``Time Format`` and ``Timestamp Format`` are Java
``DateTimeFormatter`` patterns (``MM/dd/yyyy``, ``HH:mm:ss``), as NiFi's. A pattern Arrow's
``strftime``/``strptime`` can express is applied to a whole column in C; any other (single
letters, fractions of a second when reading) falls back to the expression language's date code,
value by value. Without a format a value is a number of milliseconds since the epoch, as in NiFi
(text in ISO 8601 is also read). Every date and time is in UTC (NiFi uses the JVM's time zone).

**Shared pieces**: ``ForwardWindow`` (a content read through a window that only moves forward,
for the JSON and CSV readers), ``JsonText`` (columns as JSON text, Jackson's way, for the JSON
writer), ``as_text`` (values as NiFi writes them in text: CSV, XML, free-form), the ``Suppress
Null Values`` property (JSON and XML writers).

**Inference from text** is NiFi's (``SchemaInferenceUtil``): whole numbers are INT, or LONG past
an int's range; numbers with a point are DOUBLE (NiFi says FLOAT for the positive ones that fit
a float); ``true``/``false`` (any case) BOOLEAN; text matching the timestamp, date or time format
(only when one is set) TIMESTAMP, DATE or TIME; anything else STRING. A column mixing kinds gets
``merge_schemas``' type (INT and DOUBLE: DOUBLE; INT and BOOLEAN: a CHOICE).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import timezone
from decimal import Decimal
from typing import Any, BinaryIO, Callable, Iterable, Mapping, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from flowactors.sdk.expression.functions.dates import date_pattern, format_date, parse_date
from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records.api import SchemaMismatchError
from flowactors.sdk.records.schema import conform, merge_schemas, nifi_type_name, printable, to_choice_storage
from flowactors.sdk.services import ServiceContext

_MS_PER_DAY = 86_400_000
TIMESTAMP = pa.timestamp("ms", tz="UTC")


def _pattern_problem(value: str) -> str | None:
    try:
        date_pattern(value)
    except ValueError as err:
        return str(err)
    return None


def _format_property(kind: str, example: str) -> PropertyDescriptor:
    return PropertyDescriptor(
        f"{kind} Format", f"How {kind.lower()} fields are read and written: a Java DateTimeFormatter pattern "
        f"(for example {example}); when not set, a number of milliseconds since the epoch", validator=_pattern_problem)


DATE_FORMAT = _format_property("Date", "MM/dd/yyyy")
TIME_FORMAT = _format_property("Time", "HH:mm:ss")
TIMESTAMP_FORMAT = _format_property("Timestamp", "MM/dd/yyyy HH:mm:ss")
FORMAT_PROPERTIES = (DATE_FORMAT, TIME_FORMAT, TIMESTAMP_FORMAT)

#: Java pattern fields Arrow's strftime/strptime write and read the same way: (letter, count) -> code
_STRF = {("y", 4): "%Y", ("u", 4): "%Y", ("y", 2): "%y", ("u", 2): "%y", ("M", 2): "%m", ("M", 3): "%b",
         ("M", 4): "%B", ("d", 2): "%d", ("H", 2): "%H", ("h", 2): "%I", ("m", 2): "%M", ("s", 2): "%S",
         ("a", 1): "%p", ("E", 3): "%a", ("E", 4): "%A", ("Z", 1): "%z"}


def _strf(pattern: str, reading: bool) -> str | None:
    """The strftime code of a Java pattern, or None when Arrow cannot apply it exactly. Seconds
    followed by ``.SSS`` are Arrow's ``%S`` of milliseconds when writing; no fraction is read."""
    tokens = date_pattern(pattern)
    parts: list[str] = []
    for index, token in enumerate(tokens):
        if isinstance(token, str):
            if token == "." and index + 1 < len(tokens) and tokens[index + 1] == ("S", 3) and parts[-1:] == ["%S"]:
                continue
            parts.append(token.replace("%", "%%"))
        elif token == ("S", 3) and not reading and parts[-1:] == ["%S"] and tokens[index - 1] == ".":
            parts[-1] = "%S.ms"
        elif token in _STRF:
            parts.append(_STRF[token])
        else:
            return None
    text = "".join(parts)
    if "%S.ms" in text and text.count("%S") > 1:
        return None
    return text


@dataclass(frozen=True)
class TemporalFormats:
    """A service's ``Date Format``, ``Time Format`` and ``Timestamp Format`` (None: not set)."""

    date: str | None = None
    time: str | None = None
    timestamp: str | None = None

    @classmethod
    def of(cls, context: ServiceContext) -> "TemporalFormats":
        return cls(*(context.property(d.name).raw or None for d in FORMAT_PROPERTIES))

    def pattern(self, data_type: pa.DataType) -> str | None:
        if pa.types.is_date(data_type):
            return self.date
        if pa.types.is_time(data_type):
            return self.time
        return self.timestamp

    # ------------------------------------------------------------------ reading
    def parse(self, text: pa.Array, data_type: pa.DataType, path: str) -> pa.Array:
        """``text`` (strings) as ``data_type`` (a date, time or timestamp type); a value that is
        not such a date raises ``SchemaMismatchError`` naming ``path`` and the record."""
        pattern = self.pattern(data_type)
        millis = self._millis(text, pattern) if pattern else _epoch_or_iso(text, data_type)
        bad = pc.and_(pc.is_null(millis), pc.is_valid(text))
        if pc.any(bad).as_py():
            row = int(np.argmax(np.asarray(bad)))
            shown = f"format '{pattern}'" if pattern else "a number of milliseconds or ISO 8601"
            raise SchemaMismatchError(f"field '{path}' of record {row} is {shown_value(text[row].as_py())}, "
                                      f"which is not a {nifi_type_name(pa.field(path, data_type))} in {shown}")
        return millis_as(millis, data_type, path, text)

    def matches(self, text: pa.Array, data_type: pa.DataType) -> bool:
        """Whether every value of ``text`` (no nulls) reads as ``data_type`` in its format (set)."""
        pattern = self.pattern(data_type)
        return pattern is not None and len(text) > 0 and self._millis(text, pattern).null_count == 0

    @staticmethod
    def _millis(text: pa.Array, pattern: str) -> pa.Array:
        """Milliseconds since the epoch (int64) of each value read with ``pattern``; null where
        one does not match."""
        code = _strf(pattern, reading=True)
        if code is not None:
            stamps = pc.strptime(pc.utf8_trim_whitespace(text), format=code, unit="ms", error_is_null=True)
            return stamps.cast(pa.int64())
        return pa.array([_read_one(v, pattern) for v in text.to_pylist()], pa.int64())

    # ------------------------------------------------------------------ writing
    def format(self, values: pa.Array) -> pa.Array:
        """A date, time or timestamp column as text in its format; without one, the number of
        milliseconds since the epoch (of the day, for a time), as NiFi writes them."""
        millis = to_millis(values)
        pattern = self.pattern(values.type)
        if pattern is None:
            return millis.cast(pa.string())
        code = _strf(pattern, reading=False)
        if code is None:
            tokens = date_pattern(pattern)
            return pa.array([None if m is None else format_date(tokens, m, timezone.utc) for m in millis.to_pylist()],
                            pa.string())
        stamps = millis.cast(pa.timestamp("ms", tz="UTC"))
        if "%S.ms" not in code:
            return pc.strftime(stamps.cast(pa.timestamp("s", tz="UTC"), safe=False), format=code, locale="C")
        return pc.strftime(stamps, format=code.replace("%S.ms", "%S"), locale="C")


def _read_one(value: str | None, pattern: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_date(value, pattern, timezone.utc)
    except ValueError:
        return None


def _epoch_or_iso(text: pa.Array, data_type: pa.DataType) -> pa.Array:
    """Milliseconds of values written as a number of milliseconds, or as ISO 8601 text."""
    trimmed = pc.utf8_trim_whitespace(text)
    numeric = pc.match_substring_regex(trimmed, r"^-?\d+$")
    digits = pc.if_else(numeric, trimmed, None)
    try:
        numbers = digits.cast(pa.int64())
    except pa.ArrowInvalid:   # digits past a long: not a number of milliseconds (null)
        numbers = pa.array([None if v is None or not -2**63 <= int(v) < 2**63 else int(v) for v in digits.to_pylist()],
                           pa.int64())
    iso = pc.if_else(numeric, None, trimmed)
    if iso.null_count == len(iso):
        return numbers
    if pa.types.is_time(data_type):
        parsed = pc.strptime(iso, format="%H:%M:%S", unit="ms", error_is_null=True).cast(pa.int64())
    else:
        parsed = pa.array([_iso_millis(v) for v in iso.to_pylist()], pa.int64())
    return pc.coalesce(numbers, parsed)


def _iso_millis(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        stamp = pa.scalar(value).cast(pa.timestamp("ms"))
    except pa.ArrowInvalid:
        try:
            stamp = pa.scalar(value).cast(TIMESTAMP)
        except pa.ArrowInvalid:
            return None
    return stamp.cast(pa.int64()).as_py()


def to_millis(values: pa.Array) -> pa.Array:
    """Milliseconds since the epoch (of the day, for a time) of a temporal column, as int64."""
    t = values.type
    if pa.types.is_date(t):
        return pc.multiply(values.cast(pa.date32()).cast(pa.int32()).cast(pa.int64()), _MS_PER_DAY)
    if pa.types.is_time(t):
        return values.cast(pa.time32("ms"), safe=False).cast(pa.int32()).cast(pa.int64())
    return values.cast(pa.timestamp("ms", tz=t.tz), safe=False).cast(pa.int64())


def from_millis(millis: pa.Array, data_type: pa.DataType) -> pa.Array:
    """Milliseconds since the epoch (int64) as a date, time (of that day) or timestamp column;
    null where the moment is outside the type's range (``millis_as`` names it)."""
    if pa.types.is_date(data_type):   # whole days, rounded down, in whole numbers (a double loses past 2**53)
        days = pc.divide(millis, _MS_PER_DAY)
        days = pc.subtract(days, pc.and_(pc.less(millis, 0), pc.not_equal(pc.multiply(days, _MS_PER_DAY), millis))
                           .cast(pa.int64()))
        days = pc.if_else(pc.and_(pc.greater_equal(days, -2**31), pc.less(days, 2**31)), days, None)
        return days.cast(pa.int32()).cast(pa.date32()).cast(data_type)
    if pa.types.is_time(data_type):   # the time of day of a moment (a time read alone is on 1900-01-01)
        of_day = np.mod(millis.to_numpy(zero_copy_only=False), _MS_PER_DAY)
        mask = np.asarray(millis.is_null()) if millis.null_count else None
        return pa.array(np.nan_to_num(of_day).astype(np.int32), mask=mask).cast(pa.time32("ms")).cast(data_type)
    finer = {"us": 1_000, "ns": 1_000_000}.get(getattr(data_type, "unit", "ms"), 1)
    if finer > 1:   # as many units as a long holds
        most = (2**63 - 1) // finer
        millis = pc.if_else(pc.and_(pc.greater_equal(millis, -most), pc.less_equal(millis, most)), millis, None)
    return millis.cast(pa.timestamp("ms", tz=getattr(data_type, "tz", None))).cast(data_type)


def millis_as(millis: pa.Array, data_type: pa.DataType, path: str, shown: pa.Array | None = None) -> pa.Array:
    """``from_millis``, and ``SchemaMismatchError`` naming ``path`` and the record (of this column)
    whose moment is outside ``data_type``'s range, showing its value (``shown``'s, when given)."""
    values = from_millis(millis, data_type)
    outside = pc.and_(pc.is_null(values), pc.is_valid(millis))
    if pc.any(outside).as_py():
        row = int(np.argmax(np.asarray(outside)))
        value = (millis if shown is None else shown)[row].as_py()
        raise SchemaMismatchError(f"field '{path}' of record {row} is {shown_value(value)}, which is outside the range "
                                  f"of a {nifi_type_name(pa.field(path, data_type))}")
    return values


def shown_value(value: Any) -> str:
    """A value as a message quotes it: JSON, on one line, cut to 200 characters."""
    return printable(orjson.dumps(value, default=str).decode(), 200)


# ---------------------------------------------------------------------------------- reading
class ForwardWindow:
    """A content read through a window that only moves forward: what a reader holds of it is one
    window (bounded memory), whatever its size."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._buffer = b""
        self._at = 0          # the content offset of _buffer[0]
        self._eof = False

    def window(self, position: int, length: int) -> tuple[bytes, bool]:
        """Up to ``length`` bytes of the content from ``position`` (never before the last window's
        start), and whether they reach its end."""
        if position > self._at:
            self._buffer = self._buffer[position - self._at:]
            self._at = position
        while len(self._buffer) < length and not self._eof:
            more = self._stream.read(max(length - len(self._buffer), 1 << 16))
            self._eof = not more
            self._buffer += more
        return self._buffer[:length], self._eof and len(self._buffer) <= length


# ---------------------------------------------------------------------------------- text as a type
def text_as(text: pa.Array, field: pa.Field, formats: TemporalFormats, path: str | None = None) -> pa.Array:
    """A column of text as ``field``'s type: empty text is null, numbers and booleans are read as
    NiFi reads them (``true``/``false`` in any case), dates and times in ``formats``. A value
    that does not fit raises ``SchemaMismatchError`` naming the field and the record."""
    path = path or field.name
    target = field.type
    text = pc.if_else(pc.equal(text, ""), None, text) if len(text) else text
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return text.cast(target)
    if pa.types.is_temporal(target):
        return formats.parse(text, target, path)
    if pa.types.is_boolean(target):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(text))
        ok = pc.or_kleene(pc.is_null(lowered), pc.is_in(lowered, pa.array(["true", "false"])))
        if not pc.all(ok).as_py():
            return _mismatch_of(text, field, path)
        return pc.equal(lowered, "true")
    if pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target):
        text = pc.utf8_trim_whitespace(text)
    batch = pa.record_batch([text], names=[path])
    return conform(batch, pa.schema([field.with_name(path)])).column(0)


def _mismatch_of(text: pa.Array, field: pa.Field, path: str) -> pa.Array:
    batch = pa.record_batch([text], names=[path])
    conform(batch, pa.schema([field.with_name(path)]))   # raises, naming the record and value
    raise SchemaMismatchError(f"field '{path}' holds a value that is not a {nifi_type_name(field)}")


_INT32_DIGITS = 9


def text_type(text: pa.Array, formats: TemporalFormats, name: str = "value") -> pa.Field:
    """The field NiFi infers for a column of text (see the module docstring); empty text and
    nulls say nothing (a column of only those is STRING)."""
    if text.null_count:
        text = pc.drop_null(text)
    if len(text) and pc.min(pc.binary_length(text)).as_py() == 0:
        text = pc.filter(text, pc.greater(pc.binary_length(text), 0))
    kinds: list[pa.DataType] = []
    rest = text
    for kind, test in ((None, _whole), (pa.float64(), _decimal), (pa.bool_(), _boolean)):
        if not len(rest):
            break
        found = test(rest)
        if found is None or not pc.any(found).as_py():
            continue
        every = pc.all(found).as_py()
        kinds.append(kind or _int_type(rest if every else pc.filter(rest, found)))
        rest = rest.slice(0, 0) if every else pc.filter(rest, pc.invert(found))
    if len(rest):
        kinds.append(next((t for t in (TIMESTAMP, pa.date32(), pa.time32("ms")) if formats.matches(rest, t)),
                          pa.string()))
    merged = pa.schema([pa.field(name, pa.null())])
    for kind in kinds or [pa.string()]:
        merged = merge_schemas(merged, pa.schema([pa.field(name, kind)]))
    return merged.field(0).with_nullable(True)


def _unsigned(text: pa.Array) -> pa.Array:
    """The text without a leading minus sign."""
    negative = pc.starts_with(text, "-")
    return pc.if_else(negative, pc.utf8_slice_codeunits(text, 1), text) if pc.any(negative).as_py() else text


def _whole(text: pa.Array) -> pa.Array:
    """Whether each value is a whole number as NiFi infers one: ``^-?\\d+$`` (ASCII digits)."""
    return pc.ascii_is_decimal(_unsigned(text))


def _decimal(text: pa.Array) -> pa.Array | None:
    """Whether each value is a decimal number as NiFi infers one: ``^-?\\d*\\.\\d+$``; None
    when no value holds a point."""
    points = pc.count_substring(text, ".")
    if not pc.any(pc.equal(points, 1)).as_py():
        return None
    unsigned = _unsigned(text)
    digits = pc.ascii_is_decimal(pc.replace_substring(unsigned, ".", "", max_replacements=1))
    return pc.and_(pc.and_(pc.equal(points, 1), digits), pc.invert(pc.ends_with(unsigned, ".")))


#: true and false in every casing
_BOOLEANS = pa.array(["".join(c) for word in ("true", "false") for c in itertools.product(*zip(word, word.upper()))])


def _boolean(text: pa.Array) -> pa.Array:
    """Whether each value is true or false, in any case."""
    return pc.is_in(text, _BOOLEANS)


def _int_type(digits: pa.Array) -> pa.DataType:
    """INT when every value fits an int, LONG when one does not but all fit a long, else STRING."""
    lengths = pc.binary_length(_unsigned(digits))
    if pc.max(lengths).as_py() <= _INT32_DIGITS:
        return pa.int32()
    try:
        numbers = digits.cast(pa.int64())
    except pa.ArrowInvalid:
        return pa.string()
    low, high = pc.min_max(numbers).values()
    return pa.int32() if -2**31 <= low.as_py() and high.as_py() < 2**31 else pa.int64()


# ---------------------------------------------------------------------------------- values as text
def as_text(values: pa.Array, formats: TemporalFormats) -> pa.Array:
    """Each value as NiFi writes it in text (CSV, XML, free-form): numbers in Java's way for
    whole doubles (``1.0``), booleans ``true``/``false``, dates and times in ``formats``,
    records, arrays and maps as JSON, bytes as UTF-8."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return values
    if pa.types.is_dictionary(t):
        return as_text(values.dictionary_decode(), formats)
    if pa.types.is_temporal(t):
        return formats.format(values)
    if pa.types.is_floating(t):
        return java_double_text(values)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values.to_pylist()], pa.string())
    if pa.types.is_nested(t):
        return pa.array(to_choice_storage(values.to_pylist(), pa.string()), pa.string())
    return values.cast(pa.string())


def java_double_text(values: pa.Array) -> pa.Array:
    """Floating-point values as text with Java's ``.0`` on whole numbers and ``E`` exponents."""
    text = values.cast(pa.string())
    text = pc.replace_substring_regex(text, r"^(-?\d+)$", r"\1.0")
    text = pc.replace_substring_regex(text, r"^(-?\d+)e", r"\1.0e")
    text = pc.replace_substring(text, "e+", "E")
    text = pc.replace_substring(text, "e-", "E-")
    for arrow, java in (("nan", "NaN"), ("inf", "Infinity")):
        text = pc.replace_substring(text, arrow, java)
    return text


# ---------------------------------------------------------------------------------- Python values
def rows_to_batch(rows: Sequence[Mapping[str, Any] | None], schema: pa.Schema, formats: TemporalFormats,
                  first: int = 0, bytes_of: Callable[[list, pa.Field, int], pa.Array] | None = None) -> pa.RecordBatch:
    """Records parsed in Python (dicts of JSON values, or of XML text) as a batch of ``schema``,
    values converted as NiFi converts them: text read as numbers, booleans and dates, numbers
    written as text for a string field, one value where an array is expected made an array of one,
    bytes from text (UTF-8), or by ``bytes_of(values, field, first)``; ``first`` numbers the rows."""
    columns = [values_as(_column(rows, f.name), f, formats, f.name, first, bytes_of) for f in schema]
    return conform(pa.RecordBatch.from_arrays(columns, schema=schema), schema)


def _column(rows: Sequence[Mapping[str, Any] | None], name: str) -> list:
    return [None if r is None else r.get(name) for r in rows]


def values_as(values: list, field: pa.Field, formats: TemporalFormats, path: str, first: int = 0,
              bytes_of: Callable[[list, pa.Field, int], pa.Array] | None = None) -> pa.Array:
    """A list of Python values as an Arrow array of ``field``'s type (see ``rows_to_batch``)."""
    t = field.type
    if bytes_of is not None and (t in (pa.binary(), pa.large_binary()) or isinstance(t, pa.FixedSizeBinaryType)):
        return bytes_of(values, field.with_name(path), first)
    if pa.types.is_struct(t):
        _check_kind(values, dict, field, path, first)
        mask = pa.array([v is None for v in values], pa.bool_())
        children = [values_as(_column(values, f.name), f, formats, f"{path}.{f.name}", first, bytes_of) for f in t]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        lists = [v if v is None or isinstance(v, list) else [v] for v in values]
        lengths = np.fromiter((0 if v is None else len(v) for v in lists), np.int64, len(lists))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        items = values_as([x for v in lists if v for x in v], t.value_field, formats, f"{path}[]", first, bytes_of)
        mask = pa.array([v is None for v in lists], pa.bool_())
        return pa.ListArray.from_arrays(offsets, items, type=t, mask=mask)
    if pa.types.is_map(t):
        _check_kind(values, dict, field, path, first)
        lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        keys = pa.array([k for v in values if v is not None for k in v], t.key_type)
        items = values_as([x for v in values if v is not None for x in v.values()], t.item_field, formats,
                          f"{path}[]", first, bytes_of)
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=pa.array([v is None for v in values],
                                                                                      pa.bool_()))
    return _scalars_as(values, field, formats, path, first)


def _check_kind(values: list, kind: type, field: pa.Field, path: str, first: int) -> None:
    for index, value in enumerate(values):
        if value is not None and not isinstance(value, kind):
            raise SchemaMismatchError(f"field '{path}' of record {first + index} is {shown_value(value)}, which does "
                                      f"not fit {nifi_type_name(field)}")


def _scalars_as(values: list, field: pa.Field, formats: TemporalFormats, path: str, first: int) -> pa.Array:
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):   # text as it is, any other value as JSON
        return pa.array(to_choice_storage(values, pa.string()), t)
    flags = any(isinstance(v, bool) for v in values)
    if not any(isinstance(v, str) for v in values) and not pa.types.is_temporal(t) \
            and (pa.types.is_boolean(t) or not flags):
        try:
            return pa.array(values, t)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            pass
    if pa.types.is_temporal(t) and all(v is None or isinstance(v, (int, float)) and not isinstance(v, bool)
                                       for v in values):
        millis = [None if v is None or not -2**63 <= v < 2**63 else int(v) for v in values]   # not NaN either
        try:
            row = next((i for i, (v, m) in enumerate(zip(values, millis)) if v is not None and m is None), None)
            if row is not None:
                raise SchemaMismatchError(f"field '{path}' of record {row} is {shown_value(values[row])}, which is "
                                          f"outside the range of a {nifi_type_name(field)}")
            return millis_as(pa.array(millis, pa.int64()), t, path)
        except SchemaMismatchError as err:
            raise SchemaMismatchError(renumbered(str(err), first)) from None
    text = pa.array(to_choice_storage([_as_text(v) for v in values], pa.string()), pa.string())
    try:
        return text_as(text, field.with_name(path), formats)
    except SchemaMismatchError as err:
        raise SchemaMismatchError(renumbered(str(err), first)) from None


def _as_text(value: Any) -> Any:
    """A JSON scalar as the text NiFi reads it from (``True`` -> ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return value


def renumbered(message: str, first: int) -> str:
    """A message naming ``record N`` of a batch, made to name the record in its content (the
    batch's first record is record ``first`` there)."""
    if not first:
        return message
    return re.sub(r"record (\d+)", lambda m: f"record {first + int(m.group(1))}", message, count=1)


# ---------------------------------------------------------------------------------- inference from Python
def infer_rows(rows: Iterable[Mapping[str, Any]], formats: TemporalFormats, text_numbers: bool,
               schema: pa.Schema | None = None) -> pa.Schema:
    """The schema NiFi infers for records parsed in Python, merged into ``schema`` when given:
    for each field, in the order fields first appear, the type of its values (JSON's own types;
    text read as numbers and booleans too when ``text_numbers``, as XML's inference does),
    records merged field by field, arrays by their elements."""
    rows = list(rows)
    names = list(dict.fromkeys(k for r in rows for k in r))
    inferred = pa.schema([_values_type(_column(rows, n), n, formats, text_numbers) for n in names])
    return inferred if schema is None else merge_schemas(schema, inferred)


def _values_type(values: list, name: str, formats: TemporalFormats, text_numbers: bool) -> pa.Field:
    merged = pa.schema([pa.field(name, pa.null())])

    def add(data_type: pa.DataType | pa.Field) -> None:
        nonlocal merged
        field = data_type if isinstance(data_type, pa.Field) else pa.field(name, data_type)
        merged = merge_schemas(merged, pa.schema([field.with_name(name)]))

    groups: dict[type, list] = {}
    for value in values:
        if value is not None:
            groups.setdefault(bool if isinstance(value, bool) else type(value), []).append(value)
    for kind, group in groups.items():
        if kind is str:
            text = pa.array(group, pa.string())
            if text_numbers:
                add(text_type(text, formats, name))
            else:
                add(next((t for t in (TIMESTAMP, pa.date32(), pa.time32("ms")) if formats.matches(text, t)),
                         pa.string()))
        elif kind is bool:
            add(pa.bool_())
        elif kind is int:
            add(_python_int_type(group))
        elif kind is float:
            add(pa.float64())
        elif kind is dict:
            add(pa.struct(list(infer_rows(group, formats, text_numbers))))
        elif kind is list:
            add(pa.list_(_values_type([x for v in group for x in v], "item", formats, text_numbers)))
    return merged.field(0).with_nullable(True)


def _python_int_type(values: list[int]) -> pa.DataType:
    low, high = min(values), max(values)
    if -2**31 <= low and high < 2**31:
        return pa.int32()
    if -2**63 <= low and high < 2**63:
        return pa.int64()
    return pa.decimal128(38, 0)


def settle(schema: pa.Schema) -> pa.Schema:
    """An inferred schema made final, as NiFi ends its inference: a field only ever null, and the
    elements of arrays only ever empty, are STRING."""
    return pa.schema([_settle(f) for f in schema], metadata=schema.metadata)


def _settle(field: pa.Field) -> pa.Field:
    t = field.type
    if pa.types.is_null(t):
        return field.with_type(pa.string()).with_nullable(True)
    if pa.types.is_struct(t):
        return field.with_type(pa.struct([_settle(f) for f in t]))
    if pa.types.is_list(t):
        return field.with_type(pa.list_(_settle(t.value_field)))
    if pa.types.is_map(t):
        return field.with_type(pa.map_(t.key_type, _settle(t.item_field)))
    return field


def bool_property(context: ServiceContext, name: str) -> bool:
    return (context.property(name).raw or "").strip().lower() == "true"


def char_property(raw: str | None) -> str | None:
    """A one-character property as NiFi reads it: Java escapes (``\\t``) unescaped; None when empty."""
    if not raw:
        return None
    return unescape(raw)


def unescape(text: str) -> str:
    """Java escapes in a property value (``\\t``, ``\\n``, ``\\r``, ``\\\\``, ``\\uXXXX``) made the characters."""
    if "\\" not in text or len(text) < 2:
        return text
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", _unescaped, text)


def _unescaped(match: re.Match) -> str:
    code = match.group(1)
    if code[0] == "u" and len(code) == 5:
        return chr(int(code[1:], 16))
    return {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}.get(code, code)


def single_char_problem(value: str) -> str | None:
    """A validator: None when ``value`` is one character once Java escapes are read."""
    if len(unescape(value)) == 1:
        return None
    return f"must be a single character (or an escape such as \\t), not {value!r}"


# ---------------------------------------------------------------------------------- values as JSON
NEVER_SUPPRESS, ALWAYS_SUPPRESS, SUPPRESS_MISSING = "Never Suppress", "Always Suppress", "Suppress Missing Values"
AUTOMATIC, FORMATTED, EPOCH_MILLIS, EPOCH_SECONDS = "Automatic", "Formatted String", "Epoch Milliseconds", \
    "Epoch Seconds"

SUPPRESS_NULLS = PropertyDescriptor(
    "Suppress Null Values", "Whether a null field is written (as null) or left out; 'Suppress Missing Values' leaves "
    "out only the fields the records do not have", required=True, default=NEVER_SUPPRESS,
    allowable_values=(NEVER_SUPPRESS, ALWAYS_SUPPRESS, SUPPRESS_MISSING))
#: NiFi's internal values of 'Suppress Null Values' -> the names here
SUPPRESS_VALUES = {"never-suppress": NEVER_SUPPRESS, "always-suppress": ALWAYS_SUPPRESS,
                   "suppress-missing": SUPPRESS_MISSING}
_CONTROL = r"[\x00-\x1f]"


@dataclass(frozen=True)
class JsonText:
    """Columns as JSON text, a value a row, the way NiFi's writer (Jackson) writes them."""

    formats: TemporalFormats
    pretty: bool
    suppress: str
    scientific: bool
    timestamps: str

    def records(self, batch: pa.RecordBatch, given: pa.Schema) -> pa.Array:
        """Each record of ``batch`` as a JSON object; ``given`` is the schema the records came
        with (a field it lacks is 'missing', for 'Suppress Missing Values')."""
        struct = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema)) if batch.num_columns else \
            pa.array([{}] * batch.num_rows, pa.struct([]))
        return self.value(struct, 1, pa.struct(list(given)))

    def value(self, array: pa.Array, level: int, given: pa.DataType | None) -> pa.Array:
        """The JSON text of each value (null for null); ``level`` is the nesting an object opens."""
        t = array.type
        if pa.types.is_struct(t):
            return self._object(array, level, given)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            items = self.value(array.flatten(), level, getattr(given, "value_type", None))
            return self._wrap_list(array, pc.fill_null(items, "null"), "[", "]", ", ")
        if pa.types.is_map(t):
            keys = quoted(array.keys.cast(pa.string()))
            items = pc.fill_null(self.value(array.items, level + 1, None), "null")
            colon = " : " if self.pretty else ":"
            entries = pc.binary_join_element_wise(keys, items, colon)
            return self._wrap_object(array, entries, level)
        if pa.types.is_dictionary(t):
            return self.value(array.dictionary_decode(), level, given)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            return self.value(_java_bytes(array), level, None)
        return self._scalar(array)

    def _object(self, array: pa.Array, level: int, given: pa.DataType | None) -> pa.Array:
        colon = " : " if self.pretty else ":"
        present = {f.name for f in given} if given is not None and pa.types.is_struct(given) else None
        entries = []
        for index, field in enumerate(array.type):
            if self.suppress == SUPPRESS_MISSING and present is not None and field.name not in present:
                continue
            child = array.field(index)
            inner = given.field(field.name).type if present and field.name in present else None
            text = self.value(child, level + 1, inner)
            if self.suppress != ALWAYS_SUPPRESS:
                text = pc.fill_null(text, "null")
            entries.append(pc.binary_join_element_wise(quoted(pa.array([field.name] * len(array), pa.string())), text, colon))
        indent = "\n" + "  " * level
        if not entries:
            body = pa.array([""] * len(array), pa.string())
        else:
            body = pc.binary_join_element_wise(*entries, ("," + indent) if self.pretty else ",", null_handling="skip")
        if self.pretty:
            closing = "\n" + "  " * (level - 1) + "}"
            text = pc.if_else(pc.equal(body, ""), "{ }", pc.binary_join_element_wise("{" + indent, body, closing, ""))
        else:
            text = pc.binary_join_element_wise("{", body, "}", "")
        return pc.if_else(array.is_null(), pa.scalar(None, pa.string()), text) if array.null_count else text

    def _wrap_object(self, array: pa.Array, entries: pa.Array, level: int) -> pa.Array:
        """Map entries (``"key":value``) joined into one object a row."""
        if not self.pretty:
            return self._wrap_list(array, entries, "{", "}", ",")
        indent = "\n" + "  " * level
        joined = _joined(array, entries, "," + indent)
        return pc.if_else(pc.equal(joined, ""), "{ }", pc.binary_join_element_wise(
            "{" + indent, joined, "\n" + "  " * (level - 1) + "}", ""))

    def _wrap_list(self, array: pa.Array, items: pa.Array, opening: str, closing: str, pretty_separator: str
                   ) -> pa.Array:
        if self.pretty:
            joined = _joined(array, items, pretty_separator)
            return pc.if_else(pc.equal(joined, ""), f"{opening} {closing}",
                              pc.binary_join_element_wise(opening + " ", joined, " " + closing, ""))
        return pc.binary_join_element_wise(opening, _joined(array, items, ","), closing, "")

    def _scalar(self, array: pa.Array) -> pa.Array:
        t = array.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return quoted(array)
        if pa.types.is_floating(t):
            return self._double(array)
        if pa.types.is_decimal(t):
            return self._decimal(array)
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            return array.cast(pa.string())
        if pa.types.is_timestamp(t):
            return self._timestamp(array)
        if pa.types.is_temporal(t):
            text = self.formats.format(array)
            return text if self.formats.pattern(t) is None else quoted(text)
        if pa.types.is_null(t):
            return pa.nulls(len(array), pa.string())
        return quoted(array.cast(pa.string()))

    def _double(self, array: pa.Array) -> pa.Array:
        text = java_double_text(array)
        special = pc.match_substring_regex(text, "^-?(NaN|Infinity)$")
        if not self.scientific:
            exponent = pc.match_substring(text, "E")
            if pc.any(exponent).as_py():
                plain = [None if v is None else _plain(v) for v in pc.if_else(exponent, text, None).to_pylist()]
                text = pc.coalesce(pa.array(plain, pa.string()), text)
        return pc.if_else(special, quoted(text), text) if pc.any(special).as_py() else text

    def _decimal(self, array: pa.Array) -> pa.Array:
        text = array.cast(pa.string())
        exponent = pc.match_substring(text, "E")
        if self.scientific or not pc.any(exponent).as_py():
            return text
        plain = [None if v is None else _plain(v) for v in pc.if_else(exponent, text, None).to_pylist()]
        return pc.coalesce(pa.array(plain, pa.string()), text)

    def _timestamp(self, array: pa.Array) -> pa.Array:
        millis = to_millis(array)
        mode = self.timestamps
        if mode == EPOCH_MILLIS or (mode == AUTOMATIC and self.formats.timestamp is None):
            return millis.cast(pa.string())
        if mode == EPOCH_SECONDS:   # seconds with three decimals, as Java's BigDecimal.valueOf(millis, 3)
            size = pc.abs(millis)
            seconds = pc.divide(size, 1000)
            fraction = pc.utf8_lpad(pc.subtract(size, pc.multiply(seconds, 1000)).cast(pa.string()), 3, "0")
            sign = pc.if_else(pc.less(millis, 0), "-", "")
            return pc.binary_join_element_wise(sign, seconds.cast(pa.string()), ".", fraction, "")
        return quoted(self.formats.format(array))


def _java_bytes(array: pa.Array) -> pa.Array:
    """Bytes as lists of Java's signed bytes (-128 to 127), as NiFi holds ARRAY[BYTE] values."""
    if not len(array):   # no offsets to read (a buffer an empty array may lack)
        return pa.array([], pa.list_(pa.int8()))
    large, nulls = pa.types.is_large_binary(array.type), array.is_null() if array.null_count else None
    if nulls is not None or pa.types.is_fixed_size_binary(array.type):
        # variable-size, a null's bytes left out (a fixed-size null holds some; the lists' text skips them)
        array = pc.fill_null(array.cast(pa.large_binary() if large else pa.binary()), b"")
    _, offsets, data = array.buffers()
    bounds = np.frombuffer(offsets, np.int64 if large else np.int32)[array.offset:array.offset + len(array) + 1]
    signed = np.frombuffer(data, np.int8) if data is not None else np.zeros(0, np.int8)
    return (pa.LargeListArray if large else pa.ListArray).from_arrays(pa.array(bounds), pa.array(signed), mask=nulls)


def _plain(text: str) -> str:
    """A number written with an exponent (Java's ``4.51E-7``) written in full (``0.000000451``)."""
    return format(Decimal(text), "f")


def _joined(array: pa.Array, items: pa.Array, separator: str) -> pa.Array:
    """The items of each list (or map) of ``array`` joined with ``separator``; null for a null list."""
    offsets = array.offsets
    if offsets[0].as_py():
        offsets = pc.subtract(offsets, offsets[0])
    lists = pa.ListArray.from_arrays(offsets, items, mask=array.is_null() if array.null_count else None)
    return pc.binary_join(lists, separator)


def quoted(text: pa.Array) -> pa.Array:
    """Text as JSON strings: quoted, with backslashes, quotes and control characters escaped."""
    escaped = pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), '"', '\\"')
    control = pc.match_substring_regex(text, _CONTROL)
    if pc.any(control).as_py():
        exact = [None if v is None else orjson.dumps(v).decode()[1:-1]
                 for v in pc.if_else(control, text, None).to_pylist()]
        escaped = pc.if_else(control, pa.array(exact, pa.string()), escaped)
    return pc.binary_join_element_wise('"', escaped, '"', "")
