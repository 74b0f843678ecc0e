"""NiFi's JsonTreeReader and JsonRecordSetWriter as controller services (docs/records/json.md).

**Reading** streams: the content is cut into pieces of about ``BATCH_BYTES`` that end on a record
boundary, and each piece is parsed by pyarrow's JSON reader (C++). Finding a boundary does not
read the piece byte by byte in Python: the last ``}`` ``,`` ``{`` (array elements) or ``}`` ``{``
(objects one after another) of the piece is taken as a candidate, and the parse checks it, since a
piece that starts on a boundary and ends anywhere else (inside a string, or deeper in a record) is
never valid JSON. Only when a parse fails is the piece scanned exactly (``_scan``: the structural
characters found with numpy, strings told apart by counting unescaped quotes, depth by a running
sum) to find the true boundaries and, if the content is at fault, the record that is malformed.
Records pyarrow cannot convert to the schema (a map field, a number in a string field) are
parsed with orjson one by one and converted in Python (``textual.rows_to_batch``). With ``Infer
Schema`` the content is read twice, as NiFi reads it twice: once to infer the schema (every
record counts), once for the records.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator, Mapping

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import zstandard

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records.access import (INFER, INHERIT, NIFI_NAMES, NIFI_VALUES, SCHEMA_CACHE,
                                           SCHEMA_INFERENCE_CACHE, SCHEMA_NAME, SCHEMA_PROPERTIES, SCHEMA_TEXT,
                                           SchemaCache, SchemaWriter, access_strategy, cached_inference, given_schema,
                                           write_strategy)
from flowactors.sdk.records.api import (BATCH_BYTES, BATCH_RECORDS, MalformedRecordError, RecordReader,
                                        RecordReaderFactory, RecordSetWriter, SchemaMismatchError, WriteResult)
from flowactors.sdk.records.schema import MAX_TYPE_DEPTH, avro_to_arrow, conform, merge_schemas
from flowactors.sdk.services import ControllerService, ServiceContext
from flowactors.services.records import json_bytes
from flowactors.services.records.textual import (AUTOMATIC, EPOCH_MILLIS, EPOCH_SECONDS, FORMAT_PROPERTIES, FORMATTED,
                                                 NEVER_SUPPRESS, SUPPRESS_NULLS, SUPPRESS_VALUES, TIMESTAMP,
                                                 ForwardWindow, JsonText, TemporalFormats, bool_property, millis_as,
                                                 infer_rows, renumbered, rows_to_batch, settle)

__all__ = ["JsonRecordSetWriter", "JsonTreeReader"]

ROOT_NODE, NESTED_FIELD = "Root Node", "Nested Field"
WHOLE_JSON, SELECTED_PART = "Whole JSON", "Selected Part"

STARTING_FIELD_STRATEGY = PropertyDescriptor(
    "Starting Field Strategy", "Start from the root node, or from a nested field (an array or object) found "
    "anywhere in the document", required=True, default=ROOT_NODE, allowable_values=(ROOT_NODE, NESTED_FIELD))
STARTING_FIELD_NAME = PropertyDescriptor(
    "Starting Field Name", "With 'Nested Field': the field whose value (an array of records, or one record) is read")
SCHEMA_APPLICATION_STRATEGY = PropertyDescriptor(
    "Schema Application Strategy", "With 'Nested Field' and a given schema: whether the schema describes the whole "
    "document (its part under the starting field is used) or the selected part", required=True,
    default=SELECTED_PART, allowable_values=(WHOLE_JSON, SELECTED_PART))

_WS = b" \t\r\n"
_ARRAY_CUT = re.compile(rb"\}\s*,\s*\{")
_OBJECTS_CUT = re.compile(rb"\}\s*\{")
_CUT_TAIL = 1 << 16


# ---------------------------------------------------------------------------------- the exact scan
_STRUCTURAL = np.zeros(256, np.bool_)
_STRUCTURAL[list(b'"\\{}[],')] = True
#: every byte but quotes and brackets (``_deepest`` drops them), and a bracket's change of depth
_NOT_NESTING = bytes(c for c in range(256) if c not in b'"{}[]')
_DELTA = np.zeros(256, np.int64)
_DELTA[list(b"{[")] = 1
_DELTA[list(b"}]")] = -1
_NESTING_DELTA = _DELTA.astype(np.int8)   # the same, narrow: _deepest multiplies a whole content by it


@dataclass
class _Tokens:
    """The brackets and commas of a piece outside strings (positions, bytes, depth after each),
    the opening quotes of its strings, and the state at its end (depth, inside a string)."""

    positions: np.ndarray
    chars: np.ndarray
    depth: np.ndarray
    opening_quotes: np.ndarray
    end_depth: int
    end_in_string: bool


def _scan(data: bytes, depth: int, in_string: bool = False) -> _Tokens:
    """The exact scan of ``data``, which starts at ``depth``, inside a string or not (see the
    module docstring). ``data`` must not end inside a run of backslashes unless the content does."""
    a = np.frombuffer(data, np.uint8)
    index = np.flatnonzero(_STRUCTURAL[a])
    chars = a[index]
    backslash = chars == 92
    if backslash.any():   # a run of backslashes of odd length escapes the character after it
        runs = index[backslash]
        breaks = np.flatnonzero(np.diff(runs) != 1)
        ends = np.concatenate([runs[breaks], runs[-1:]])
        starts = np.concatenate([runs[:1], runs[breaks + 1]])
        escaped = np.zeros(len(a) + 1, np.bool_)
        escaped[ends[(ends - starts) % 2 == 0] + 1] = True
        keep = ~(escaped[index] | backslash)
        index, chars = index[keep], chars[keep]
    quote = chars == 34
    inside = (np.cumsum(quote) - quote + in_string) % 2 == 1   # an odd count of quotes before it
    opening = index[quote & ~inside]
    outside = ~inside & ~quote
    positions, chars = index[outside], chars[outside]
    depths = depth + np.cumsum(_DELTA[chars])
    return _Tokens(positions, chars, depths, opening, int(depths[-1]) if len(depths) else depth,
                   bool((int(quote.sum()) + in_string) % 2))


@dataclass
class _Chunk:
    """Whole records of the content: ``data`` is their text (array elements with the commas
    between them when ``array``, else objects one after another), ``offset`` where it starts in
    the content, ``spans`` each record's (start, end) in ``data`` when the exact scan found them."""

    data: bytes
    array: bool
    offset: int
    spans: list[tuple[int, int]] | None = None


class _Framer:
    """Cuts a JSON content into ``_Chunk``s: the objects of its top-level arrays and its top-level
    objects (NiFi's 'Root Node'; several arrays or objects one after another are read in turn), or
    the records in a nested field's value ('Nested Field'). ``records``, which the reader keeps up
    to date, numbers the records in messages."""

    def __init__(self, stream: BinaryIO, field: str | None):
        self._source = ForwardWindow(stream)
        self._field = field
        self.records = 0
        self._position = 0
        self._mode: str | None = None   # "array", "objects" or "single" in a run of records
        self._base = 0                  # the depth records start at
        self._comma_due = False         # a comma comes before the next array element
        self._done = False

    def chunks(self) -> Iterator[_Chunk]:
        if self._field is not None:
            self._enter_field()
        while not self._done:
            if self._mode is None and (self._field is not None or not self._enter_top()):
                return
            chunk = (self._fast() if self._field is None else None) or self._exact()
            if chunk is not None:
                yield chunk

    def rescan(self, chunk: _Chunk) -> _Chunk | None:
        """``chunk`` framed by the exact scan (its parse failed); the framer goes on after it."""
        self._position, self._mode, self._done = chunk.offset, "array" if chunk.array else "objects", False
        self._base, self._comma_due = (1 if chunk.array else 0), False
        return self._exact()

    def _malformed(self, problem: str, offset: int, record: int | None = None) -> MalformedRecordError:
        record = self.records if record is None else record
        return MalformedRecordError(f"not valid JSON: {problem} (record {record}, byte {offset})",
                                    record=record, offset=offset)

    def _enter_top(self) -> bool:
        if self._position == 0 and self._source.window(0, 3)[0] == b"\xef\xbb\xbf":   # a UTF-8 byte order mark
            self._position = 3
        while True:
            data, eof = self._source.window(self._position, 1 << 12)
            stripped = data.lstrip(_WS)
            self._position += len(data) - len(stripped)
            if stripped or eof:
                break
        if not stripped:
            return False
        if stripped[:1] == b"[":
            self._mode, self._base, self._comma_due = "array", 1, False
            self._position += 1
        elif stripped[:1] == b"{":
            self._mode, self._base = "objects", 0
        else:
            raise self._malformed(f"expected an object or an array of objects, found "
                                  f"{stripped[:1].decode('latin-1')!r}", self._position)
        return True

    def _fast(self) -> _Chunk | None:
        """The next chunk cut at a candidate boundary (module docstring); None: scan exactly."""
        data, eof = self._source.window(self._position, BATCH_BYTES)
        if self._comma_due:   # after an exactly framed chunk: step over the comma
            stripped = data.lstrip(_WS)
            if stripped[:1] != b",":
                return None
            self._position += len(data) - len(stripped) + 1
            self._comma_due = False
            data, eof = self._source.window(self._position, BATCH_BYTES)
        start, array = self._position, self._mode == "array"
        if eof:
            body = data.rstrip(_WS)
            if array and not body.endswith(b"]"):
                return None
            self._position, self._mode = start + len(data), None
            return _Chunk(body[:-1] if array else body, array, start)
        pattern = _ARRAY_CUT if array else _OBJECTS_CUT
        found, tail = None, _CUT_TAIL
        while found is None and tail < 4 * len(data):
            for found in pattern.finditer(data, max(0, len(data) - tail)):
                pass
            tail *= 4
        if found is None:
            return None
        self._position = start + found.end() - 1
        return _Chunk(data[:found.start() + 1], array, start)

    def _exact(self) -> _Chunk | None:
        """The next chunk framed by the exact scan; None when the run of records ends first."""
        length = BATCH_BYTES
        while True:
            data, eof = self._source.window(self._position, length)
            tokens = _scan(data, self._base)
            self._check_nesting(tokens)
            spans, stop = self._spans(tokens, data)
            if spans or stop is not None or eof:
                break
            length *= 2   # a record longer than the window
        if not spans and stop is None:
            rest = data.strip(_WS)
            if self._mode == "objects" and not rest:
                self._mode = None
                return None
            raise self._malformed("the content ends inside a record" if rest.strip(b",") else
                                  "the array is not closed", self._position + len(data))
        self._check_gaps(data, spans, stop)
        start, array = self._position, self._mode == "array"
        if stop is None:
            self._position, self._comma_due = start + spans[-1][1], self._mode == "array"
        else:
            self._position = start + stop + (1 if self._mode == "array" else 0)
            self._done = self._field is not None
            self._mode = None
        if not spans:
            return None
        first = spans[0][0]
        return _Chunk(data[first:spans[-1][1]], array, start + first, [(s - first, e - first) for s, e in spans])

    def _spans(self, tokens: _Tokens, data: bytes) -> tuple[list[tuple[int, int]], int | None]:
        """(start, end) of each complete record at the base depth, and where the run of records
        stops (the array's closing bracket, an array after objects), if it does in ``data``."""
        base, chars, depth, positions = self._base, tokens.chars, tokens.depth, tokens.positions
        delta = _DELTA[chars]
        before = depth - delta
        below = np.flatnonzero(depth < base)
        arrays = np.flatnonzero((chars == ord("[")) & (before == 0)) if self._mode == "objects" else below[:0]
        limit = int(min(below[0] if len(below) else len(chars), arrays[0] if len(arrays) else len(chars)))
        opens = np.flatnonzero((before[:limit] == base) & (delta[:limit] == 1))
        closes = np.flatnonzero((depth[:limit] == base) & (delta[:limit] == -1))
        if self._mode == "single":
            opens, closes = opens[:1], closes[:1]
        spans = []
        for number, (o, c) in enumerate(zip(opens, closes)):
            if chars[o] != ord("{"):
                raise self._malformed("an element of the array is not an object", self._position + int(positions[o]),
                                      self.records + number)
            spans.append((int(positions[o]), int(positions[c]) + 1))
        if self._mode == "single" and spans:
            return spans, spans[0][1]
        if limit < len(chars) and len(below) and limit == below[0]:
            if self._mode == "array" and chars[limit] != ord("]"):
                raise self._malformed("a '}' closes the array", self._position + int(positions[limit]))
            if self._mode == "objects":
                raise self._malformed(f"an unmatched {chr(chars[limit])!r}", self._position + int(positions[limit]))
        return spans, int(positions[limit]) if limit < len(chars) and len(spans) == len(opens) else None

    def _check_nesting(self, tokens: _Tokens) -> None:
        """A record whose objects and arrays nest deeper than a schema may (``MAX_TYPE_DEPTH``)
        is refused, as Jackson refuses one past 1000 levels: its values would nest deeper than
        Python's stack lets them be read."""
        deep = np.flatnonzero(tokens.depth > self._base + MAX_TYPE_DEPTH)
        if len(deep):
            at = int(deep[0])
            ends = (tokens.depth[:at] == self._base) & (_DELTA[tokens.chars[:at]] == -1)
            record, offset = self.records + int(np.count_nonzero(ends)), self._position + int(tokens.positions[at])
            raise MalformedRecordError(f"record {record} nests objects and arrays more than {MAX_TYPE_DEPTH} deep, "
                                       f"deeper than a schema may (byte {offset})", record=record, offset=offset)

    def _check_gaps(self, data: bytes, spans: list[tuple[int, int]], stop: int | None) -> None:
        """Between records there is only whitespace, and one comma between array elements."""
        bounds = [0, *[x for span in spans for x in span], *([stop] if stop is not None else [])]
        for gap in range(0, len(bounds) - 1, 2):
            text = data[bounds[gap]:bounds[gap + 1]].strip(_WS)
            before_record = gap < 2 * len(spans)
            comma = self._mode == "array" and before_record and (gap > 0 or self._comma_due)
            if text == (b"," if comma else b""):
                continue
            where, record = self._position + bounds[gap], self.records + gap // 2
            if text == b"," and not before_record:
                raise self._malformed("a comma after the array's last element", where, record)
            if comma and not text:
                raise self._malformed("two elements without a comma between them", where, record)
            raise self._malformed(f"{text[:20].decode('utf-8', 'replace')!r} where a record should be", where, record)

    def _enter_field(self) -> None:
        """Find the first field named ``self._field``, at any depth (NiFi's 'Nested Field'), and
        start a run of records at its value: an array's objects, or one object."""
        key = re.compile(re.escape(orjson.dumps(self._field)) + rb"\s*:\s*")
        position, depth, in_string = 0, 0, False
        while True:
            data, eof = self._source.window(position, BATCH_BYTES)
            end = len(data)
            while not eof and end and data[end - 1] == 92:   # a backslash stays with what it escapes
                end -= 1
            tokens = _scan(data[:end], depth, in_string)
            opening = set(tokens.opening_quotes.tolist())
            for match in key.finditer(data):
                if match.start() >= end:
                    break
                if match.start() in opening:
                    before = int(np.searchsorted(tokens.positions, match.start()))
                    level = int(tokens.depth[before - 1]) if before else depth
                    self._start_value(position + match.end(), data[match.end():match.end() + 1], level)
                    return
            if eof:
                self._done = True
                return
            position, depth, in_string = position + end, tokens.end_depth, tokens.end_in_string

    def _start_value(self, position: int, first: bytes, depth: int) -> None:
        self._position, self._comma_due = position, False
        if first == b"[":
            self._mode, self._base, self._position = "array", depth + 1, position + 1
        elif first == b"{":
            self._mode, self._base = "single", depth
        else:
            self._done = True


# ---------------------------------------------------------------------------------- parsing chunks
def _arrow_parse(chunk: _Chunk, schema: pa.Schema | None, infer_others: bool = False) -> pa.Table:
    """The chunk's records parsed by pyarrow (with ``schema``'s types when given; fields it lacks
    inferred when ``infer_others``, else dropped). Raises pyarrow's error when it cannot, and
    ``ArrowInvalid`` for text that is not UTF-8, which pyarrow's parser keeps as it is, and for
    records nesting deeper than ``MAX_TYPE_DEPTH`` when inferring, which pyarrow cannot do past
    some 20000 levels (its C++ stack overflows: the process dies); the exact scan and orjson,
    record by record, then name the record."""
    _check_utf8(chunk.data)
    if chunk.array:
        data = b'{"_":[' + chunk.data + b"]}"
        explicit = pa.schema([("_", pa.list_(pa.struct(list(schema))))]) if schema is not None else None
    else:
        data, explicit = chunk.data, schema
    behaviour = "infer" if schema is None or infer_others else "ignore"
    if behaviour == "infer" and _deepest(chunk.data) > MAX_TYPE_DEPTH:   # the exact scan names the record
        raise pa.ArrowInvalid("records nest too deeply for pyarrow's inference")
    table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=len(data) + 64,
                                                                                 use_threads=False),
                              parse_options=pa_json.ParseOptions(explicit_schema=explicit, newlines_in_values=True,
                                                                 unexpected_field_behavior=behaviour))
    if not chunk.array:
        return table
    column = table.column("_").chunk(0) if table.num_rows else pa.array([[]], pa.list_(pa.struct([])))
    values = column.values
    if pa.types.is_null(values.type) and len(values) == 0:
        return pa.table({})
    if not pa.types.is_struct(values.type):
        raise pa.ArrowInvalid("an element of the array is not an object")
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(values)])


def _deepest(data: bytes) -> int:
    """How deep objects and arrays nest in ``data`` (whole records), brackets in strings left out:
    the exact scan's depth at a third of its cost (8 ms for 4 MB), where no position is needed.
    Only the quotes and brackets are kept; an escaped quote is dropped first (escaped backslashes
    before it, left to right as JSON reads them), when there is one."""
    if b'\\"' in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    chars = np.frombuffer(data.translate(None, _NOT_NESTING), np.uint8)
    outside = 1 - (np.cumsum(chars == 34, dtype=np.int32) & 1).astype(np.int8)   # an even count of quotes so far
    depths = np.cumsum(_NESTING_DELTA[chars] * outside, dtype=np.int32)
    return int(depths.max()) if len(depths) else 0


def _check_utf8(data: bytes) -> None:
    """``ArrowInvalid`` unless ``data`` is UTF-8: Arrow's check of the bytes as one string, about
    4 GB/s (8 ms for 33 MB of records of non-ASCII text that take 200 ms to read), where Python's
    decode, making a str, takes five times that."""
    offsets = pa.py_buffer(np.array([0, len(data)], np.int64))
    pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)]).validate(full=True)


def _python_rows(chunk: _Chunk, framer: _Framer, first: int) -> list[dict]:
    """The chunk's records parsed one by one by orjson (after the exact scan, when the chunk was
    cut at a candidate); a record that is not JSON raises ``MalformedRecordError`` naming it."""
    if chunk.spans is None:
        raise AssertionError("a chunk parsed record by record has been framed exactly")
    rows = []
    for number, (start, end) in enumerate(chunk.spans):
        try:
            rows.append(orjson.loads(chunk.data[start:end]))
        except orjson.JSONDecodeError as err:
            offset, problem = chunk.offset + start + (err.pos or 0), f"not valid JSON: {err.msg}"
            try:
                chunk.data[start:end].decode()
            except UnicodeDecodeError as text:   # orjson's message says "surrogates not allowed"
                offset, problem = chunk.offset + start + text.start, f"not UTF-8 text: {text.reason}"
            raise MalformedRecordError(f"record {first + number} is {problem} (byte {offset})",
                                       record=first + number, offset=offset) from None
    return rows


def _inferred_type(array: pa.Array, formats: TemporalFormats) -> pa.DataType:
    """The NiFi type of a column pyarrow inferred: whole numbers INT unless one needs a LONG,
    text a date, time or timestamp when it all reads in the format set for it."""
    t = array.type
    if pa.types.is_integer(t):
        low, high = pc.min_max(array).values()
        fits = low.as_py() is None or (-2**31 <= low.as_py() and high.as_py() < 2**31)
        return pa.int32() if fits else pa.int64()
    if pa.types.is_string(t):
        values = pc.drop_null(array)
        return next((k for k in (TIMESTAMP, pa.date32(), pa.time32("ms")) if formats.matches(values, k)), t)
    if pa.types.is_struct(t):
        children = array.flatten() if array.null_count == 0 else [array.field(i) for i in range(t.num_fields)]
        return pa.struct([f.with_type(_inferred_type(c, formats)) for f, c in zip(t, children)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_inferred_type(array.values, formats)))
    return t


def _has_stamp(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(_has_stamp(f.type) for f in t)
    return pa.types.is_timestamp(t) or (pa.types.is_list(t) and _has_stamp(t.value_type))


def _texts_for_stamps(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every timestamp pyarrow inferred (from ISO text) made a string: NiFi infers
    a timestamp only from text in the configured format."""
    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t):
            return pa.string()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(fix(f.type)) for f in t])
        if pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(fix(t.value_type)))
        return t
    return pa.schema([f.with_type(fix(f.type)) for f in schema])


@dataclass(frozen=True)
class _Plan:
    """How records are parsed for a schema: by pyarrow with ``explicit`` (top-level dates and
    times inferred by pyarrow and converted after, top-level bytes parsed as arrays of numbers and
    made bytes after), or in Python when pyarrow cannot hold a type."""

    schema: pa.Schema
    explicit: pa.Schema
    temporal: tuple[pa.Field, ...]
    binary: tuple[str, ...]
    python: bool

    @classmethod
    def of(cls, schema: pa.Schema) -> "_Plan":
        temporal = tuple(f for f in schema if pa.types.is_temporal(f.type))
        binary = tuple(f.name for f in schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)
                       or pa.types.is_fixed_size_binary(f.type))
        explicit = pa.schema([f.with_nullable(True).with_type(json_bytes.NUMBERS if f.name in binary else f.type)
                              for f in schema if not pa.types.is_temporal(f.type)])
        return cls(schema, explicit, temporal, binary, any(_python_only(f.type, f.metadata, True) for f in explicit))


def _python_only(t: pa.DataType, metadata: Mapping | None, top: bool) -> bool:
    if (metadata or {}).get(b"nifi.type") == b"CHOICE" or pa.types.is_map(t) or pa.types.is_binary(t) \
            or pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t) or pa.types.is_dictionary(t):
        return True
    if pa.types.is_temporal(t):
        return not top
    if pa.types.is_struct(t):
        return any(_python_only(f.type, f.metadata, False) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _python_only(t.value_type, t.value_field.metadata, False)
    return False


# ---------------------------------------------------------------------------------- the reader
class _JsonReader(RecordReader):
    """One content's records (see the module docstring)."""

    def __init__(self, stream: BinaryIO, schema: pa.Schema | None, formats: TemporalFormats, field: str | None):
        self._stream, self._start = stream, stream.tell()
        self._formats, self._field = formats, field
        self._schema = schema if schema is not None else self._infer()

    def schema(self) -> pa.Schema:
        return self._schema

    def _infer(self) -> pa.Schema:
        inferred = pa.schema([])
        framer = _Framer(self._stream, self._field)
        for chunk in framer.chunks():
            try:
                table = _arrow_parse(chunk, None)
                if _has_stamp(pa.struct(list(table.schema))):
                    table = _arrow_parse(chunk, _texts_for_stamps(table.schema))
                part = pa.schema([f.with_type(_inferred_type(c.combine_chunks() if c.num_chunks != 1 else c.chunk(0),
                                                             self._formats))
                                  for f, c in zip(table.schema, table.columns)])
                count = table.num_rows
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                exact = framer.rescan(chunk) if chunk.spans is None else chunk
                if exact is None:
                    continue
                rows = _python_rows(exact, framer, framer.records)
                part, count = infer_rows(rows, self._formats, False), len(rows)
            inferred = merge_schemas(inferred, part)
            framer.records += count
        self._stream.seek(self._start)
        return settle(inferred)

    def batches(self) -> Iterator[pa.RecordBatch]:
        self._stream.seek(self._start)
        plan = _Plan.of(self._schema)
        framer = _Framer(self._stream, self._field)
        for chunk in framer.chunks():
            batch = self._read(chunk, plan, framer)
            if batch is None:
                continue
            framer.records += batch.num_rows
            for start in range(0, batch.num_rows, BATCH_RECORDS):
                yield batch.slice(start, BATCH_RECORDS)

    def _read(self, chunk: _Chunk, plan: _Plan, framer: _Framer) -> pa.RecordBatch | None:
        if not plan.python:
            try:
                return self._arrow_batch(chunk, plan, framer.records)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, _NotArrow):
                if chunk.spans is None:
                    exact = framer.rescan(chunk)
                    if exact is None:
                        return None
                    return self._read(exact, plan, framer)
        if chunk.spans is None:
            chunk = framer.rescan(chunk)
            if chunk is None:
                return None
        return rows_to_batch(_python_rows(chunk, framer, framer.records), plan.schema, self._formats, framer.records,
                             json_bytes.from_values)

    def _arrow_batch(self, chunk: _Chunk, plan: _Plan, first: int) -> pa.RecordBatch:
        table = _arrow_parse(chunk, plan.explicit, infer_others=bool(plan.temporal))
        if not table.num_rows:
            return pa.RecordBatch.from_pylist([], schema=plan.schema)
        batch = table.combine_chunks().to_batches()[0]
        names = set(batch.schema.names)
        columns = {f.name: batch.column(f.name) for f in plan.explicit if f.name in names}
        for field in plan.temporal:
            if field.name in names:
                columns[field.name] = self._temporal(batch.column(field.name), field, first)
        for name in plan.binary:
            if name in names:
                columns[name] = json_bytes.from_numbers(columns[name], name, first)
        present = [f for f in plan.schema if f.name in columns]
        try:
            return conform(pa.RecordBatch.from_arrays([columns[f.name] for f in present],
                                                      schema=pa.schema([f.with_type(columns[f.name].type)
                                                                        for f in present])), plan.schema)
        except SchemaMismatchError as err:
            raise SchemaMismatchError(renumbered(str(err), first)) from None

    def _temporal(self, column: pa.Array, field: pa.Field, first: int) -> pa.Array:
        """A date, time or timestamp field as pyarrow inferred it, read as NiFi reads it."""
        t = column.type
        if pa.types.is_null(t):
            return pa.nulls(len(column), field.type)
        try:
            if pa.types.is_integer(t):
                return millis_as(column.cast(pa.int64()), field.type, field.name)
            if pa.types.is_string(t):
                return self._formats.parse(column, field.type, field.name)
        except SchemaMismatchError as err:
            raise SchemaMismatchError(renumbered(str(err), first)) from None
        pattern = self._formats.pattern(field.type)
        if pa.types.is_timestamp(t) and (pattern is None or pattern.startswith("yyyy-MM-dd")):
            return column.cast(pa.timestamp(t.unit, tz="UTC")).cast(field.type, safe=False)
        raise _NotArrow()


class _NotArrow(Exception):
    """A chunk pyarrow parsed in a way that must be done again in Python."""


def _selected_schema(schema: pa.Schema, name: str) -> pa.Schema:
    """The part of a whole document's schema under the field ``name`` (the first found, breadth
    first): its record type, or its array's element record type."""
    level = [schema]
    while level:
        following = []
        for fields in level:
            for field in fields:
                t = field.type
                inner = t.value_type if pa.types.is_list(t) else t
                if field.name == name:
                    if not pa.types.is_struct(inner):
                        raise SchemaMismatchError(f"the schema's field '{name}' is not a record or an array of records")
                    return pa.schema(list(inner))
                if pa.types.is_struct(inner):
                    following.append(list(inner))
        level = following
    raise SchemaMismatchError(f"the schema has no field '{name}' (Schema Application Strategy 'Whole JSON')")


class JsonTreeReader(ControllerService, RecordReaderFactory):
    """Reads JSON: an array of objects, one object, or objects one after another (one a line, as
    JSON Lines, or not), as records; NiFi's JsonTreeReader (docs/records/json.md)."""

    description = "Reads JSON objects (an array of them, or one after another) as records"
    properties = (access_strategy((INFER, SCHEMA_NAME, SCHEMA_TEXT), INFER), *SCHEMA_PROPERTIES,
                  SCHEMA_INFERENCE_CACHE, STARTING_FIELD_STRATEGY, STARTING_FIELD_NAME, SCHEMA_APPLICATION_STRATEGY,
                  *FORMAT_PROPERTIES)
    #: NiFi's internal property names and values -> the names here (the NiFi import's table)
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "starting-field-strategy": STARTING_FIELD_STRATEGY.name,
                           "starting-field-name": STARTING_FIELD_NAME.name,
                           "schema-application-strategy": SCHEMA_APPLICATION_STRATEGY.name}
    NIFI_VALUES = {**NIFI_VALUES, STARTING_FIELD_STRATEGY.name: {"ROOT_NODE": ROOT_NODE, "NESTED_FIELD": NESTED_FIELD},
                   SCHEMA_APPLICATION_STRATEGY.name: {"WHOLE_JSON": WHOLE_JSON, "SELECTED_PART": SELECTED_PART}}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get(STARTING_FIELD_STRATEGY.name) == NESTED_FIELD and not values.get(STARTING_FIELD_NAME.name):
            return [f"'{STARTING_FIELD_NAME.name}' is required with the '{NESTED_FIELD}' starting field strategy"]
        return []

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._cache = SchemaCache(avro_to_arrow)
        self._formats = TemporalFormats.of(context)
        nested = context.property(STARTING_FIELD_STRATEGY.name).raw == NESTED_FIELD
        self._field = context.property(STARTING_FIELD_NAME.name).raw if nested else None
        self._whole = nested and context.property(SCHEMA_APPLICATION_STRATEGY.name).raw == WHOLE_JSON

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        schema = given_schema(self._context, attributes, self._cache) or cached_inference(self._context, attributes)
        if schema is not None and self._whole:
            schema = _selected_schema(schema, self._field or "")
        return _JsonReader(stream, schema, self._formats, self._field)


# ---------------------------------------------------------------------------------- writing
ARRAY, ONE_LINE = "Array", "One Line Per Object"
COMPRESSIONS = ("none", "gzip", "bzip2", "xz-lzma2", "zstd")

PRETTY_PRINT = PropertyDescriptor("Pretty Print JSON", "Whether the JSON is indented as Jackson's pretty printer does",
                                  required=True, default="false", allowable_values=("true", "false"))
SCIENTIFIC = PropertyDescriptor("Allow Scientific Notation", "Whether numbers may be written with an exponent "
                                "(1.0E-7); when not, they are written in full", required=True, default="false",
                                allowable_values=("true", "false"))
OUTPUT_GROUPING = PropertyDescriptor(
    "Output Grouping", "A JSON array of the records, or one object a line", required=True, default=ARRAY,
    allowable_values=(ARRAY, ONE_LINE))
COMPRESSION = PropertyDescriptor("Compression Format", "How the JSON written is compressed", required=True,
                                 default="none", allowable_values=COMPRESSIONS)
COMPRESSION_LEVEL = PropertyDescriptor("Compression Level", "The gzip compression level", required=True, default="1",
                                       allowable_values=tuple("0123456789"))
TIMESTAMP_REPRESENTATION = PropertyDescriptor(
    "Timestamp Representation", "How timestamps are written: in the Timestamp Format when one is set, else as "
    "milliseconds (Automatic); always formatted; epoch milliseconds; epoch seconds with a fraction", required=True,
    default=AUTOMATIC, allowable_values=(AUTOMATIC, FORMATTED, EPOCH_MILLIS, EPOCH_SECONDS))

MIME_TYPE = "application/json"


class _Compressed:
    """A binary stream that compresses what is written into ``out`` (which stays open)."""

    def __init__(self, out: BinaryIO, codec: str, level: int):
        if codec == "gzip":
            self._stream: Any = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=level)
        elif codec == "bzip2":
            self._stream = bz2.BZ2File(out, "wb")
        elif codec == "xz-lzma2":
            self._stream = lzma.LZMAFile(out, "wb", format=lzma.FORMAT_XZ)
        else:
            self._stream = zstandard.ZstdCompressor().stream_writer(out, closefd=False)

    def write(self, data: Any) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        self._stream.close()


class _JsonWriter(RecordSetWriter):
    """One content's JSON: an array of the records, or one record a line."""

    def __init__(self, out: BinaryIO, schema: pa.Schema, text: JsonText, array: bool, compression: tuple[str, int],
                 attributes: dict[str, str]):
        codec, level = compression
        self._out: Any = out if codec == "none" else _Compressed(out, codec, level)
        self._schema, self._text, self._array = schema, text, array
        self._attributes = attributes
        self._count = 0
        pretty = text.pretty
        self._separator = (", " if pretty else ",") if array else "\n"

    def write_batch(self, batch: pa.RecordBatch) -> None:
        given = batch.schema
        if given != self._schema:
            batch = conform(batch, self._schema)
        if not batch.num_rows:
            return
        texts = self._text.records(batch, given)
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(texts)], pa.int32()), texts),
                                self._separator)[0]
        if self._count:
            self._out.write(self._separator.encode())
        elif self._array:
            self._out.write(b"[ " if self._text.pretty else b"[")
        self._out.write(joined.as_buffer())
        self._count += batch.num_rows

    def finish(self) -> WriteResult:
        if self._array:
            pretty = self._text.pretty
            self._out.write((b" ]" if pretty else b"]") if self._count else (b"[ ]" if pretty else b"[]"))
        if isinstance(self._out, _Compressed):
            self._out.close()
        return WriteResult(self._count, dict(self._attributes))


class JsonRecordSetWriter(ControllerService, SchemaWriter):
    """Writes records as JSON: an array (the default) or one object a line; NiFi's JsonRecordSetWriter
    (docs/records/json.md)."""

    description = "Writes records as JSON: an array of objects, or one object a line"
    properties = (write_strategy(), access_strategy((INHERIT, SCHEMA_NAME, SCHEMA_TEXT), INHERIT), *SCHEMA_PROPERTIES,
                  SCHEMA_CACHE, *FORMAT_PROPERTIES, PRETTY_PRINT, SUPPRESS_NULLS, SCIENTIFIC, OUTPUT_GROUPING,
                  COMPRESSION, COMPRESSION_LEVEL, TIMESTAMP_REPRESENTATION)
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "suppress-nulls": SUPPRESS_NULLS.name, "output-grouping": OUTPUT_GROUPING.name,
                           "compression-format": COMPRESSION.name, "compression-level": COMPRESSION_LEVEL.name}
    NIFI_VALUES = {**NIFI_VALUES, SUPPRESS_NULLS.name: SUPPRESS_VALUES,
                   OUTPUT_GROUPING.name: {"output-array": ARRAY, "output-oneline": ONE_LINE},
                   TIMESTAMP_REPRESENTATION.name: {"AUTO": AUTOMATIC, "FORMATTED_STRING": FORMATTED,
                                                   "EPOCH_MILLISECONDS": EPOCH_MILLIS, "EPOCH_SECONDS": EPOCH_SECONDS},
                   COMPRESSION.name: {"xz-lzma2": "xz-lzma2"}}
    MIME_TYPE = MIME_TYPE

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        if values.get(PRETTY_PRINT.name, "false") == "true" and values.get(OUTPUT_GROUPING.name) == ONE_LINE:
            problems.append(f"'{PRETTY_PRINT.name}' must be false when '{OUTPUT_GROUPING.name}' is '{ONE_LINE}'")
        if values.get(TIMESTAMP_REPRESENTATION.name) == FORMATTED and not values.get("Timestamp Format"):
            problems.append(f"'Timestamp Format' must be set when '{TIMESTAMP_REPRESENTATION.name}' is '{FORMATTED}'")
        return problems

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = SchemaCache(avro_to_arrow)
        self._text = JsonText(TemporalFormats.of(context), bool_property(context, PRETTY_PRINT.name),
                              context.property(SUPPRESS_NULLS.name).raw or NEVER_SUPPRESS,
                              bool_property(context, SCIENTIFIC.name),
                              context.property(TIMESTAMP_REPRESENTATION.name).raw or AUTOMATIC)
        self._array = context.property(OUTPUT_GROUPING.name).raw != ONE_LINE
        self._compression = (context.property(COMPRESSION.name).raw or "none",
                             int(context.property(COMPRESSION_LEVEL.name).raw or 1))

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        return _JsonWriter(out, schema, self._text, self._array, self._compression, self.result_attributes(schema))
