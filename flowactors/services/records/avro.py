"""Avro's record reader and writer (NiFi's ``AvroReader`` and ``AvroRecordSetWriter``), on fastavro.

**Reading.** With ``Use Embedded Avro Schema`` (the default) the content is an Avro object
container file: its schema comes from its header, and its blocks are read one at a time into
Arrow batches of at most ``BATCH_RECORDS`` records (about ``BATCH_BYTES`` of input), so a content
larger than memory is read in bounded memory. With a schema given by name or text, the content
is either a container file whose schema is that one, or (as NiFi reads it) bare datums, one
record after another, with no header.

**Writing.** Records are Arrow batches: each batch is cast to the writer's schema
(``schema.conform``), its columns are made what fastavro writes without converting (timestamps,
dates and times as their integers, dictionaries decoded, Avro's field names) by Arrow, then
``to_pylist`` gives the rows fastavro encodes: no per-value Python of our own. When every field
is of a flat type (numbers, booleans, strings, bytes, enums, the temporal types, each nullable or
not) numpy encodes the batch itself, column by column (``_encode``), byte for byte what fastavro
writes, and fastavro only frames and compresses the block. ``Embed Avro
Schema`` (the default) writes a container file, compressed as ``Compression Format`` says; the
other strategies write bare datums and say the schema in attributes.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
from collections import deque
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import fastavro
import fastavro.validation
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro.schema import to_parsing_canonical_form

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.records import (BATCH_BYTES, BATCH_RECORDS, MalformedRecordError, RecordError, RecordReader,
                                    RecordReaderFactory, RecordSetWriter, SchemaMismatchError, SchemaNotFoundError,
                                    WriteResult)
from flowactors.sdk.records import access
from flowactors.sdk.records.schema import (CHOICE_MEMBERS, NIFI_TYPE, arrow_to_avro, avro_field_name, avro_to_arrow,
                                           conform, printable, to_choice_storage)
from flowactors.sdk.relationships import reason
from flowactors.sdk.services import ControllerService, ServiceContext

MIME_TYPE = "application/avro-binary"
#: the 4 bytes every Avro object container file starts with
MAGIC = b"Obj\x01"

#: Compression Format's values (NiFi's) -> fastavro's codec; NiFi writes LZO as xz, and so does this
CODECS = {"BZIP2": "bzip2", "DEFLATE": "deflate", "NONE": "null", "SNAPPY": "snappy", "LZO": "xz"}

CACHE_SIZE = PropertyDescriptor("Cache Size", "How many schemas given as text are kept parsed", required=True,
                                default="1000", validator=validators.NON_NEGATIVE_INTEGER)
COMPRESSION_FORMAT = PropertyDescriptor(
    "Compression Format", "How a container file's blocks are compressed (only with 'Embed Avro Schema': the codec "
    "is named in the file's header)", required=True, default="NONE", allowable_values=tuple(CODECS))


def _cache(context: ServiceContext, strict: bool = True) -> access.SchemaCache:
    """Schemas parsed from text: given ones checked strictly, a file's own taken as written."""
    return access.SchemaCache(functools.partial(avro_to_arrow, strict=strict),
                              max(1, int(context.property("Cache Size").raw)))


def _said(err: BaseException) -> str:
    """What an error says, as a message here quotes it: on one line, cut to 300 characters
    (fastavro's messages may quote a whole schema or datum)."""
    return printable(reason(err), 300)


# ---------------------------------------------------------------------------------- reading
class AvroReader(ControllerService, RecordReaderFactory):
    """Reads Avro: container files with their own schema, or datums of a schema given by name or text."""

    description = "Reads Avro data: object container files with their embedded schema, or datums of a given schema"
    properties = (access.access_strategy((access.EMBEDDED_AVRO, access.SCHEMA_NAME, access.SCHEMA_TEXT),
                                         access.EMBEDDED_AVRO),
                  *access.SCHEMA_PROPERTIES, CACHE_SIZE)
    NIFI_PROPERTY_NAMES = {**access.NIFI_NAMES, "cache-size": "Cache Size"}
    NIFI_VALUES = access.NIFI_VALUES
    #: NiFi properties that tune Java's Avro decoder, with nothing to tune here: the import leaves them out
    NIFI_IGNORED = ("Fast Reader Enabled",)

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = _cache(context)
        self._embedded = _cache(context, strict=False)
        self._given: dict[bytes, _Given] = {}

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        schema = access.given_schema(self._context, attributes, self._schemas)
        given = None if schema is None else _kept(self._given, schema, _Given)
        head = stream.read(len(MAGIC))
        stream.seek(-len(head), io.SEEK_CUR)
        if given is None or head == MAGIC:
            reader = _ContainerReader(stream, size, self._embedded)
            if given is not None:
                _check_embedded(reader, given)
            return reader
        return _DatumReader(stream, size, given)


def _kept(kept: dict[bytes, Any], schema: pa.Schema, make: Callable[[pa.Schema], Any]) -> Any:
    """``make(schema)``, made once for a schema (its metadata too) and kept in ``kept``, the 64
    most recently made."""
    key = schema.serialize().to_pybytes()
    found = kept.get(key)
    if found is None:
        found = make(schema)
        if len(kept) >= 64:
            kept.pop(next(iter(kept)))
        kept[key] = found
    return found


class _Given:
    """What reading with a given schema needs of it, worked out once a schema (``_kept``): the
    schema fastavro parsed (bare datums), its canonical form (a container file must embed it),
    and its rows' conversion (``_Rows``)."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.rows = _Rows(schema)

    @functools.cached_property
    def parsed(self) -> Any:
        try:
            return fastavro.parse_schema(arrow_to_avro(self.schema))
        except Exception as err:
            raise SchemaNotFoundError(f"the schema given cannot be read as Avro: {_said(err)}") from None

    @functools.cached_property
    def canonical(self) -> str:
        return to_parsing_canonical_form(arrow_to_avro(self.schema))


def _check_embedded(reader: "_ContainerReader", given: _Given) -> None:
    """NiFi's rule: a container file read with a given schema must embed that schema."""
    embedded = to_parsing_canonical_form(json.loads(reader.schema_text))
    if embedded != given.canonical:
        raise MalformedRecordError(f"the content is an Avro file whose embedded schema is not the schema given "
                                   f"(embedded: {printable(embedded, 200)})", record=0, offset=0)


class _Rows:
    """Turns fastavro's rows into Arrow batches of one schema. The columns whose values fastavro
    gives in a form Arrow does not take (UUID objects, a choice's members) are fixed first."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.fixes = {f.name: f for f in schema if _needs_fixing(f)}
        self.plain = pa.schema([f for f in schema if f.name not in self.fixes])

    def batch(self, rows: list[dict], first: int) -> pa.RecordBatch:
        """``rows`` (records ``first`` on) as a batch; ``SchemaMismatchError`` when Arrow cannot
        hold a value as the schema says (an int's varint past 32 bits, a decimal wider than its
        precision: fastavro checks neither)."""
        try:
            if not self.fixes:
                return pa.RecordBatch.from_pylist(rows, schema=self.schema)
            plain = pa.RecordBatch.from_pylist(rows, schema=self.plain)
            fixed = {name: pa.array(_fix([r.get(name) for r in rows], field), field.type)
                     for name, field in self.fixes.items()}
            columns = [fixed[f.name] if f.name in fixed else plain.column(f.name) for f in self.schema]
            return pa.RecordBatch.from_arrays(columns, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:
            raise SchemaMismatchError(f"records {first} to {first + len(rows) - 1} do not fit the schema: "
                                      f"{_said(err)}") from None


def _needs_fixing(field: pa.Field) -> bool:
    meta = field.metadata or {}
    if meta.get(NIFI_TYPE) in (b"UUID", b"CHOICE"):
        return True
    t = field.type
    if pa.types.is_struct(t):
        return any(_needs_fixing(f) for f in t)
    if pa.types.is_list(t):
        return _needs_fixing(t.value_field)
    if pa.types.is_map(t):
        return _needs_fixing(t.item_field)
    return False


def _fix(values: list, field: pa.Field) -> list:
    meta, t = field.metadata or {}, field.type
    if meta.get(NIFI_TYPE) == b"UUID":
        return [None if v is None else str(v) for v in values]
    if meta.get(NIFI_TYPE) == b"CHOICE":
        return to_choice_storage(values, t)
    if not _needs_fixing(field):
        return values
    if pa.types.is_struct(t):
        columns = {f.name: _fix([None if v is None else v.get(f.name) for v in values], f) for f in t}
        return [None if v is None else {n: c[i] for n, c in columns.items()} for i, v in enumerate(values)]
    if pa.types.is_list(t):
        return [None if v is None else _fix(v, t.value_field) for v in values]
    return [None if v is None else dict(zip(v, _fix(list(v.values()), t.item_field))) for v in values]


class _ContainerReader(RecordReader):
    """An Avro object container file, block by block."""

    def __init__(self, stream: BinaryIO, size: int, schemas: access.SchemaCache):
        self._stream = stream
        self._size = size
        try:
            self._blocks = fastavro.block_reader(stream)
        except Exception as err:   # fastavro raises what its decoder meets: ValueError, EOFError, KeyError...
            raise MalformedRecordError(f"the content is not an Avro data file: {_said(err)}", record=0,
                                       offset=0) from None
        text = self._blocks.metadata.get("avro.schema")
        if text is None:
            raise MalformedRecordError("the Avro data file has no schema in its header", record=0, offset=0)
        self.schema_text = text
        try:
            self._schema = schemas.get(text)
        except RecordError as err:
            raise MalformedRecordError(f"the Avro data file's schema: {err}", record=0, offset=0) from None
        self._rows = _Rows(self._schema)

    def schema(self) -> pa.Schema:
        return self._schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        rows: list[dict] = []
        done = 0
        start = self._stream.tell()
        blocks = iter(self._blocks)
        while True:
            try:
                block = next(blocks, None)
                if block is None:
                    break
                records = iter(block)
                while True:   # a block of more than a batch's records is cut into batches
                    rows.extend(itertools.islice(records, BATCH_RECORDS - len(rows)))
                    if len(rows) < BATCH_RECORDS:
                        break
                    yield self._rows.batch(rows, done)
                    done, rows = done + len(rows), []
            except (MalformedRecordError, SchemaMismatchError):
                raise
            except Exception as err:   # fastavro raises what its decoder meets: ValueError, EOFError, KeyError...
                raise MalformedRecordError(f"the Avro data is not valid at record {done + len(rows)}: "
                                           f"{_said(err)}", record=done + len(rows)) from None
            if rows and self._stream.tell() - start >= BATCH_BYTES:
                yield self._rows.batch(rows, done)
                done, rows, start = done + len(rows), [], self._stream.tell()
        if rows:
            yield self._rows.batch(rows, done)


class _DatumReader(RecordReader):
    """Bare Avro datums of a given schema, one after another (no header), as NiFi reads them."""

    def __init__(self, stream: BinaryIO, size: int, given: _Given):
        self._stream = stream
        self._end = stream.tell() + size
        self._schema = given.schema
        self._parsed = given.parsed
        self._rows = given.rows

    def schema(self) -> pa.Schema:
        return self._schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        stream, parsed, end = self._stream, self._parsed, self._end
        rows: list[dict] = []
        done = 0
        start = offset = stream.tell()
        read = fastavro.schemaless_reader
        try:
            while offset < end:
                rows.append(read(stream, parsed, None))
                offset = stream.tell()
                if len(rows) >= BATCH_RECORDS or offset - start >= BATCH_BYTES:
                    yield self._rows.batch(rows, done)
                    done, rows, start = done + len(rows), [], offset
        except SchemaMismatchError:
            raise
        except Exception as err:
            raise MalformedRecordError(f"the Avro datum of record {done + len(rows)} (at byte {offset}) is not "
                                       f"valid for the schema: {_said(err) if str(err) else 'the content ends early'}",
                                       record=done + len(rows), offset=offset) from None
        if offset > end:
            raise MalformedRecordError(f"the Avro datum of record {done + len(rows) - 1} runs past the content's end",
                                       record=done + len(rows) - 1, offset=offset)
        if rows:
            yield self._rows.batch(rows, done)


# ---------------------------------------------------------------------------------- writing
class AvroRecordSetWriter(ControllerService, access.SchemaWriter):
    """Writes Avro: a container file with the schema embedded (the default), or bare datums."""

    description = "Writes records as Avro: an object container file, or datums with the schema in attributes"
    properties = (access.write_strategy((access.EMBED_AVRO_SCHEMA, access.NO_SCHEMA, access.WRITE_SCHEMA_NAME,
                                         access.WRITE_AVRO_SCHEMA), access.EMBED_AVRO_SCHEMA),
                  access.access_strategy((access.INHERIT, access.SCHEMA_NAME, access.SCHEMA_TEXT), access.INHERIT),
                  *access.SCHEMA_PROPERTIES, access.SCHEMA_CACHE, COMPRESSION_FORMAT, CACHE_SIZE)
    NIFI_PROPERTY_NAMES = {**access.NIFI_NAMES, "compression-format": "Compression Format",
                           "cache-size": "Cache Size"}
    NIFI_VALUES = access.NIFI_VALUES
    #: NiFi properties that tune Java's Avro encoders, with nothing to tune here: the import leaves them out
    NIFI_IGNORED = ("Encoder Pool Size", "encoder-pool-size")
    MIME_TYPE = MIME_TYPE

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        codec = values.get("Compression Format", "NONE")
        if values.get("Schema Write Strategy", access.EMBED_AVRO_SCHEMA) != access.EMBED_AVRO_SCHEMA \
                and codec != "NONE":
            problems.append(f"property 'Compression Format' is {codec}, but only a container file can be compressed "
                            f"(its header names the codec): choose 'Schema Write Strategy' "
                            f"'{access.EMBED_AVRO_SCHEMA}' or compression NONE")
        return problems

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = _cache(context)
        self._plans: dict[bytes, _Plan] = {}

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        """A container file's writer says only its mime type (its header holds the schema: NiFi's
        writer then names no schema in attributes, nor one its Schema Cache keeps); a writer of
        bare datums says the schema as the Schema Write Strategy and Schema Cache say."""
        plan = _kept(self._plans, schema, _Plan)
        if self._context.property("Schema Write Strategy").raw == access.EMBED_AVRO_SCHEMA:
            codec = CODECS[self._context.property("Compression Format").raw]
            return _ContainerWriter(plan, out, codec, {"mime.type": MIME_TYPE})
        return _DatumWriter(plan, out, self.result_attributes(schema))


class _Plan:
    """What one schema's records need to be written: the Avro schema (parsed by fastavro), for
    each column fastavro would otherwise convert value by value the Arrow conversion, and, when
    every field is of a flat type, how numpy encodes a batch itself (``encode``)."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.avro = arrow_to_avro(schema)
        try:
            self.parsed = fastavro.parse_schema(self.avro)
        except Exception as err:
            raise RecordError(f"the schema cannot be written as Avro: {_said(err)}") from None
        self.wire = pa.schema([pa.field(avro_field_name(f.name), _wire_type(f), f.nullable) for f in schema])
        self.maps = any(_has_map(f.type) for f in schema)
        specs = [_flat_spec(f["type"], w.type) for f, w in zip(self.avro["fields"], self.wire)]
        self.flat = specs if all(s is not None for s in specs) else None

    def wire_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch cast to the schema, its columns as fastavro writes them (``_wire_type``)."""
        if not batch.schema.equals(self.schema):
            batch = conform(batch, self.schema)
        return pa.RecordBatch.from_arrays([_to_wire(c, w.type) for c, w in zip(batch.columns, self.wire)],
                                          schema=self.wire)

    def rows(self, wire: pa.RecordBatch) -> list[dict]:
        """The records as fastavro's rows (dicts by Avro field name)."""
        return wire.to_pylist(maps_as_pydicts="lossy") if self.maps else wire.to_pylist()

    def encode(self, wire: pa.RecordBatch) -> bytes | None:
        """The records' Avro binary encoding, one datum after another, made by numpy; None when a
        value needs fastavro (the schema is not flat, an enum value outside its symbols)."""
        if not self.flat or wire.num_rows == 0:
            return None
        return _encode(wire.columns, self.flat)

    def mismatch(self, rows: list[dict], first: int, err: Exception) -> SchemaMismatchError:
        """The error naming the first of ``rows`` that fastavro refused (found again by validating)."""
        for index, row in enumerate(rows):
            try:
                fastavro.validation.validate(row, self.parsed, raise_errors=True)
            except Exception as invalid:
                return SchemaMismatchError(f"record {first + index} does not fit the Avro schema: {_said(invalid)}")
        return SchemaMismatchError(f"records from {first} could not be written as Avro: {_said(err)}")


# ---------------------------------------------------------------------------------- numpy's encoding
#: the Arrow type (of ``_wire_type``) each flat Avro type is written from
_FLAT_TYPES = {"int": (pa.int8(), pa.int16(), pa.int32()), "long": (pa.int64(),), "float": (pa.float32(),),
               "double": (pa.float64(),), "boolean": (pa.bool_(),), "string": (pa.string(),), "bytes": (pa.binary(),),
               "null": (pa.null(),), "enum": (pa.string(),)}
#: logical types whose values are their base type's, as ``_wire_type`` gives them
_PLAIN_LOGICAL = (None, "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
                  "local-timestamp-millis", "local-timestamp-micros", "uuid")


@dataclass(frozen=True)
class _Flat:
    """How a field of a flat type is encoded: its union's branches (``None``: not a union)."""

    kind: str
    null_branch: int | None = None
    value_branch: int = 0
    symbols: pa.Array | None = None


def _flat_spec(avro: Any, wire: pa.DataType) -> _Flat | None:
    members = avro if isinstance(avro, list) else [avro]
    others = [m for m in members if m != "null"]
    if len(others) > 1:
        return None
    null_branch = members.index("null") if isinstance(avro, list) and "null" in members else None
    value = others[0] if others else "null"
    value_branch = members.index(value) if isinstance(avro, list) else 0
    symbols = None
    if isinstance(value, dict) and value.get("type") == "enum":
        kind, symbols = "enum", pa.array(value["symbols"], pa.string())
    elif isinstance(value, dict) and value.get("logicalType") in _PLAIN_LOGICAL:
        kind = value.get("type")
    else:
        kind = value
    if not isinstance(kind, str) or wire not in _FLAT_TYPES.get(kind, ()):
        return None
    return _Flat(kind, null_branch, value_branch, symbols)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Avro's zig-zag varints of int64 ``values``: (the bytes each takes, all their bytes)."""
    zigzag = ((values << 1) ^ (values >> 63)).view(np.uint64)
    sizes = np.ones(len(zigzag), np.int64)
    for k in range(1, 10):
        sizes += zigzag >= np.uint64(1 << (7 * k))
    width = int(sizes.max()) if len(sizes) else 1
    groups = [((zigzag >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) for k in range(width)]
    matrix = np.stack(groups, axis=1)
    matrix[:, :-1] |= np.where(np.arange(width - 1) < (sizes - 1)[:, None], 0x80, 0).astype(np.uint8)
    return sizes, matrix[np.arange(width) < sizes[:, None]]


def _values(array: pa.Array, spec: _Flat) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The parts of the non-null values' encoding: (bytes per value, bytes)."""
    valid = pc.drop_null(array) if array.null_count else array
    kind = spec.kind
    if kind in ("int", "long", "enum"):
        if kind == "enum":
            valid = pc.index_in(valid, value_set=spec.symbols)
            if valid.null_count:
                return None   # a value outside the symbols: fastavro names it
        return [_varints(valid.to_numpy(zero_copy_only=False).astype(np.int64))]
    if kind in ("float", "double"):
        numbers = valid.to_numpy(zero_copy_only=False).astype("<f4" if kind == "float" else "<f8")
        return [(np.full(len(numbers), numbers.itemsize, np.int64), numbers.view(np.uint8))]
    if kind == "boolean":
        return [(np.ones(len(valid), np.int64), valid.to_numpy(zero_copy_only=False).astype(np.uint8))]
    buffers = valid.buffers()
    offsets = np.frombuffer(buffers[1], np.int32)[valid.offset:valid.offset + len(valid) + 1].astype(np.int64)
    data = buffers[2]
    content = np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]] if data is not None else np.empty(0, np.uint8)
    sizes = np.diff(offsets)
    return [_varints(sizes), (sizes, content)]


def _encode(columns: list[pa.Array], specs: list[_Flat]) -> bytes | None:
    count = len(columns[0])
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for array, spec in zip(columns, specs):
        present = np.asarray(array.is_valid()) if array.null_count else None
        if spec.null_branch is None and present is not None:
            return None   # a null where the field allows none: fastavro names it
        if spec.null_branch is not None:
            branch = np.full(count, spec.value_branch * 2, np.uint8)
            if present is not None:
                branch[~present] = spec.null_branch * 2
            parts.append((np.ones(count, np.int64), branch))
        if spec.kind == "null":
            continue
        values = _values(array, spec)
        if values is None:
            return None
        for sizes, data in values:
            if present is not None:
                sizes, all_sizes = np.zeros(count, np.int64), sizes
                sizes[present] = all_sizes
            parts.append((sizes, data))
    return _interleave(count, parts)


def _interleave(count: int, parts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """Each row's bytes of every part, in order, row after row."""
    row_sizes = np.zeros(count, np.int64)
    for sizes, _ in parts:
        row_sizes += sizes
    ends = np.cumsum(row_sizes)
    out = np.empty(int(ends[-1]) if count else 0, np.uint8)
    position = ends - row_sizes
    for sizes, data in parts:
        if len(data):
            starts = np.cumsum(sizes) - sizes
            out[np.repeat(position - starts, sizes) + np.arange(len(data))] = data
        position += sizes
    return out.tobytes()


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_map(f.type) for f in t)
    if hasattr(t, "value_field"):
        return _has_map(t.value_type)
    return False


def _wire_type(field: pa.Field) -> pa.DataType:
    """The Arrow type whose Python values fastavro writes as ``field``'s Avro type as they are."""
    t, meta = field.type, field.metadata or {}
    if pa.types.is_dictionary(t):
        return _wire_type(field.with_type(t.value_type))
    if meta.get(NIFI_TYPE) == b"BIGINT":
        return pa.string()
    if meta.get(NIFI_TYPE) == b"CHOICE" and CHOICE_MEMBERS in meta:
        return t
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_unsigned_integer(t):
        return pa.int64() if t.bit_width >= 32 else pa.int32()
    if t == pa.float16():
        return pa.float32()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(avro_field_name(f.name), _wire_type(f), f.nullable) for f in t])
    if hasattr(t, "value_field") and not pa.types.is_map(t):
        return pa.list_(pa.field("item", _wire_type(t.value_field), t.value_field.nullable))
    if pa.types.is_map(t):
        return pa.map_(pa.string(), pa.field("value", _wire_type(t.item_field), t.item_field.nullable))
    return t


#: each temporal type's unit as Avro writes it (seconds become millis, nanos micros)
_AVRO_UNITS = {"s": "ms", "ms": "ms", "us": "us", "ns": "us"}


def _to_wire(array: pa.Array, wire: pa.DataType) -> pa.Array:
    """``array`` as ``wire`` (``_wire_type``), by Arrow; the same array when nothing changes."""
    t = array.type
    if t == wire:
        return array
    if pa.types.is_dictionary(t):
        return _to_wire(array.dictionary_decode(), wire)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t):
        children = [_to_wire(array.field(i), w.type) for i, w in enumerate(wire)]
        return pa.StructArray.from_arrays(children, fields=list(wire), mask=mask)
    if pa.types.is_map(t):
        keys = _to_wire(array.keys, pa.string()) if array.keys.type != pa.string() else array.keys
        return pa.MapArray.from_arrays(array.offsets, keys, _to_wire(array.items, wire.item_type), type=wire,
                                       mask=mask)
    if hasattr(t, "value_field"):
        flat = array.flatten() if pa.types.is_fixed_size_list(t) else None
        if flat is not None:
            offsets = pa.array(range(0, (len(array) + 1) * t.list_size, t.list_size), pa.int32())
            return pa.ListArray.from_arrays(offsets, _to_wire(flat, wire.value_type), type=wire, mask=mask)
        return pa.ListArray.from_arrays(array.offsets, _to_wire(array.values, wire.value_type), type=wire, mask=mask)
    if pa.types.is_timestamp(t):
        array = array.cast(pa.timestamp(_AVRO_UNITS[t.unit], t.tz), safe=False)
    elif pa.types.is_time(t):
        unit = _AVRO_UNITS[t.unit]
        array = array.cast(pa.time32(unit) if unit == "ms" else pa.time64(unit), safe=False)
    elif pa.types.is_date64(t):
        array = array.cast(pa.date32())
    try:
        return array.cast(wire)
    except pa.ArrowInvalid as err:   # an unsigned long past a signed one
        raise SchemaMismatchError(f"a value of Arrow type {t} does not fit Avro's {wire}: {_said(err)}") from None


class _Sink:
    """``out`` as fastavro's writer sees it: written only. (fastavro appends to a readable,
    seekable stream that is not at its start; a writer writes from the stream's position.)"""

    def __init__(self, out: BinaryIO):
        self.write = out.write
        self.flush = getattr(out, "flush", lambda: None)

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False


@dataclass
class _Block:
    """Records already encoded, as fastavro's ``Writer.write_block`` takes them (one block)."""

    num_records: int
    bytes_: io.BytesIO


class _ContainerWriter(RecordSetWriter):
    """An Avro object container file: the header (schema, codec) at once, then blocks of records."""

    def __init__(self, plan: _Plan, out: BinaryIO, codec: str, attributes: dict[str, str]):
        self._plan = plan
        self._attributes = attributes
        self._count = 0
        try:
            self._writer = fastavro.write.Writer(_Sink(out), plan.parsed, codec=codec)
        except ValueError as err:   # a codec whose library is missing
            raise RecordError(f"cannot write Avro with codec '{codec}': {_said(err)}") from None

    def write_batch(self, batch: pa.RecordBatch) -> None:
        wire = self._plan.wire_batch(batch)
        encoded = self._plan.encode(wire)
        if encoded is not None:
            self._writer.write_block(_Block(wire.num_rows, io.BytesIO(encoded)))
        else:
            rows = self._plan.rows(wire)
            try:
                deque(map(self._writer.write, rows), maxlen=0)
            except Exception as err:   # fastavro: ValueError, TypeError, AttributeError for a value of the wrong kind
                raise self._plan.mismatch(rows, self._count, err) from None
        self._count += wire.num_rows

    def finish(self) -> WriteResult:
        self._writer.flush()
        return WriteResult(self._count, dict(self._attributes))


class _DatumWriter(RecordSetWriter):
    """Bare datums, one after another (NiFi's writer when the schema is not embedded)."""

    def __init__(self, plan: _Plan, out: BinaryIO, attributes: dict[str, str]):
        self._plan = plan
        self._out = out
        self._attributes = attributes
        self._count = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        wire = self._plan.wire_batch(batch)
        encoded = self._plan.encode(wire)
        if encoded is None:
            rows = self._plan.rows(wire)
            buffer = io.BytesIO()
            write: Callable[[Any], None] = lambda row: fastavro.schemaless_writer(buffer, self._plan.parsed, row)
            try:
                deque(map(write, rows), maxlen=0)
            except Exception as err:
                raise self._plan.mismatch(rows, self._count, err) from None
            encoded = buffer.getvalue()
        self._out.write(encoded)
        self._count += wire.num_rows

    def finish(self) -> WriteResult:
        return WriteResult(self._count, dict(self._attributes))
