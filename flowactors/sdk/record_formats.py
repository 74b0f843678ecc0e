"""Record formats: FlowFile content as CSV, JSON lines or Parquet, read into Arrow and written back.

Processors that work on records (the Spark processors, NiFi Python record transforms) turn each
FlowFile's content into an Arrow table (for Spark, the form data takes through Ray's object store
and back) and turn result tables into content again. Reading
streams from the session's content stream where the format allows it: CSV and JSON lines are
parsed block by block; Parquet keeps its footer at the end, so it is read through the seekable
content stream (columns and row groups are fetched by offset, the content is not copied first).

A schema is inferred from the data, or given as text in Spark's DDL style
(``id BIGINT, name STRING, amount DECIMAL(10,2)``, see ``parse_schema``).

Results are written as one or more contents: ``write_part`` fills one content with the next
records of a ``RecordCursor`` until it holds ``max_records`` records or about ``max_bytes`` bytes,
so a large result becomes several FlowFiles of a configured size.
"""

from __future__ import annotations

import base64
import decimal
import math
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Sequence

import orjson
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

CSV, JSON_LINES, PARQUET = "CSV", "JSON Lines", "Parquet"
FORMATS = (CSV, JSON_LINES, PARQUET)
MIME_TYPES = {CSV: "text/csv", JSON_LINES: "application/x-ndjson", PARQUET: "application/vnd.apache.parquet"}
EXTENSIONS = {CSV: "csv", JSON_LINES: "jsonl", PARQUET: "parquet"}

#: pyarrow's read block size: CSV and JSON lines are parsed this many bytes at a time.
BLOCK_SIZE = 1 << 20
#: records written first when splitting by size, to measure what a record costs in the format
PROBE_RECORDS = 64


class RecordFormatError(ValueError):
    """A content could not be read as records of the expected format (or schema)."""


# ---------------------------------------------------------------------------------- schemas
_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(), "VARCHAR": pa.string(), "CHAR": pa.string(), "TEXT": pa.string(),
    "BOOLEAN": pa.bool_(), "BOOL": pa.bool_(),
    "TINYINT": pa.int8(), "BYTE": pa.int8(), "SMALLINT": pa.int16(), "SHORT": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "LONG": pa.int64(),
    "FLOAT": pa.float32(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
    "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", tz="UTC"), "TIMESTAMP_NTZ": pa.timestamp("us"),
    "BINARY": pa.binary(),
}
_FIELD = re.compile(r"\s*`?([A-Za-z_][A-Za-z0-9_ .-]*?)`?\s+([A-Za-z_]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def parse_schema(text: str) -> pa.Schema:
    """An Arrow schema from Spark-style DDL: ``name TYPE, ...`` (types: see ``_SIMPLE_TYPES``, DECIMAL(p,s)).

    Raises ValueError naming the part it could not read.
    """
    fields = []
    parts = [p for p in re.split(r",(?![^(]*\))", text) if p.strip()]
    if not parts:
        raise ValueError("the schema is empty; write it as 'name TYPE, name TYPE', e.g. 'id BIGINT, name STRING'")
    for part in parts:
        match = _FIELD.match(part)
        if match is None:
            raise ValueError(f"cannot read {part.strip()!r} as 'name TYPE' (e.g. 'amount DOUBLE')")
        name, type_name, precision, scale = match.groups()
        type_name = type_name.upper()
        if type_name in ("DECIMAL", "NUMERIC", "DEC"):
            data_type = pa.decimal128(int(precision or 10), int(scale or 0))
        elif type_name in _SIMPLE_TYPES and precision is None:
            data_type = _SIMPLE_TYPES[type_name]
        else:
            known = ", ".join(sorted(_SIMPLE_TYPES)) + ", DECIMAL(p,s)"
            raise ValueError(f"unknown type {type_name!r} for column {name!r} (known: {known})")
        if name in {f.name for f in fields}:
            raise ValueError(f"column {name!r} appears twice in the schema")
        fields.append(pa.field(name, data_type))
    return pa.schema(fields)


def schema_problem(text: str) -> str | None:
    """A property validator: None when ``text`` is a schema ``parse_schema`` reads."""
    try:
        parse_schema(text)
    except ValueError as err:
        return str(err)
    return None


# ---------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class ReadOptions:
    """How contents are read: their format, an optional schema, and CSV's dialect."""

    format: str = CSV
    schema: pa.Schema | None = None
    delimiter: str = ","
    header: bool = True


def read_table(stream: BinaryIO, options: ReadOptions) -> pa.Table:
    """The records of one content as an Arrow table (with exactly ``options.schema`` when given).

    Raises RecordFormatError with pyarrow's explanation when the content does not parse.
    """
    try:
        if options.format == CSV:
            table = _read_csv(stream, options)
        elif options.format == JSON_LINES:
            table = _read_json_lines(stream, options)
        elif options.format == PARQUET:
            table = pq.read_table(pa.PythonFile(stream, mode="r"))
        else:
            raise RecordFormatError(f"unknown record format {options.format!r} (known: {', '.join(FORMATS)})")
        if options.schema is not None:
            table = conform(table, options.schema)
    except (pa.ArrowException, ValueError) as err:
        if isinstance(err, RecordFormatError):
            raise
        raise RecordFormatError(f"not valid {options.format}: {_first_line(err)}") from None
    return table


def _read_csv(stream: BinaryIO, options: ReadOptions) -> pa.Table:
    schema = options.schema
    read = pa_csv.ReadOptions(block_size=BLOCK_SIZE,
                              column_names=schema.names if schema is not None and not options.header else None,
                              autogenerate_column_names=schema is None and not options.header)
    # an empty field is null; an empty quoted string ("") stays an empty string, as the writer wrote it
    convert = pa_csv.ConvertOptions(strings_can_be_null=True, quoted_strings_can_be_null=False,
                                    column_types=dict(zip(schema.names, schema.types)) if schema is not None else None,
                                    include_columns=schema.names if schema is not None else None,
                                    include_missing_columns=schema is not None)
    try:
        reader = pa_csv.open_csv(stream, read_options=read,
                                 parse_options=pa_csv.ParseOptions(delimiter=options.delimiter),
                                 convert_options=convert)
    except pa.ArrowInvalid as err:
        if "Empty CSV file" in str(err):
            return _empty(schema)
        raise
    return reader.read_all()


def _json_native(data_type: pa.DataType) -> bool:
    """Whether pyarrow's JSON reader converts values to this type itself (else: infer, then cast)."""
    return (pa.types.is_integer(data_type) or pa.types.is_floating(data_type) or pa.types.is_boolean(data_type)
            or pa.types.is_string(data_type) or pa.types.is_timestamp(data_type))


def _read_json_lines(stream: BinaryIO, options: ReadOptions) -> pa.Table:
    # dates and decimals may be written as strings or numbers: they are inferred and cast by conform()
    explicit = pa.schema([f for f in options.schema if _json_native(f.type)]) if options.schema is not None else None
    parse = pa_json.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer")
    first = stream.read(1)
    if not first:
        return _empty(options.schema)
    reader = pa_json.open_json(_Prepend(first, stream), read_options=pa_json.ReadOptions(block_size=BLOCK_SIZE),
                               parse_options=parse)
    return reader.read_all()


class _Prepend:
    """A stream whose first bytes were already read (to tell an empty content from JSON)."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head = head
        self._rest = rest
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        head, self._head = self._head, b""
        if size is None or size < 0:
            return head + self._rest.read()
        return head + self._rest.read(size - len(head)) if size > len(head) else head

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _empty(schema: pa.Schema | None) -> pa.Table:
    return (schema or pa.schema([])).empty_table()


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table with exactly the schema's columns, in its order and types (missing ones are null)."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            columns.append(column if column.type == field.type else column.cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def add_attribute_columns(table: pa.Table, values: dict[str, str]) -> pa.Table:
    """The table with one string column per attribute, every row holding the attribute's value."""
    for name, value in values.items():
        column = pa.array([value] * table.num_rows, pa.string())
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, column)
        else:
            table = table.append_column(name, column)
    return table


def combine(tables: Sequence[pa.Table]) -> pa.Table:
    """One table of every table's records; columns are matched by name and types widened when needed."""
    tables = [t for t in tables if t.num_columns] or list(tables[:1])
    if not tables:
        return pa.table({})
    try:
        return pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    except pa.ArrowException as err:
        raise RecordFormatError(f"the records do not share a schema: {_first_line(err)}") from None


# ---------------------------------------------------------------------------------- writing
class RecordCursor:
    """The records still to be written, and what writing them has cost so far (bytes per record)."""

    def __init__(self, table: pa.Table):
        self.table = table
        self.offset = 0
        self.bytes_written = 0
        self.records_written = 0
        self._estimate = max(1.0, table.nbytes / table.num_rows) if table.num_rows else 1.0

    @property
    def remaining(self) -> int:
        return self.table.num_rows - self.offset

    @property
    def bytes_per_record(self) -> float:
        if self.records_written:
            return max(1.0, self.bytes_written / self.records_written)
        return self._estimate

    def take(self, count: int) -> pa.Table:
        part = self.table.slice(self.offset, count)
        self.offset += part.num_rows
        return part


def write_part(out: BinaryIO, cursor: RecordCursor, fmt: str, *, max_records: int | None = None,
               max_bytes: int | None = None) -> int:
    """Write the cursor's next records as one complete content; returns how many were written.

    Stops at ``max_records`` records, or once the content reaches ``max_bytes`` - or would by the
    bytes per record seen so far - so a CSV or JSON lines content ends up at most about one record
    over the size; a Parquet content, whose size after compression is only estimated, about it.
    At least one record is written when any is left (a single larger record gets a content of
    its own). With no records left, writes an empty content (CSV: the header only).
    """
    writer = _writer(fmt, out, cursor.table.schema)
    start = out.tell()
    written = 0
    try:
        while cursor.remaining:
            limit = cursor.remaining if max_records is None else min(cursor.remaining, max_records - written)
            if limit <= 0:
                break
            if max_bytes is not None:
                room = max_bytes - (out.tell() - start)
                fits = math.floor(room / cursor.bytes_per_record)
                if fits < 1:
                    if written:
                        break
                    fits = 1
                # records differ in size: text formats fill half the room left at a time, so the
                # estimate is corrected as the content fills; Parquet would pay a row group per
                # step, so it takes the room left in one go (its size is an estimate anyway)
                limit = min(limit, fits if fmt == PARQUET else max(1, fits // 2))
                if not cursor.records_written:
                    limit = min(limit, PROBE_RECORDS)  # learn the real size per record first
            before = out.tell()
            writer.write(cursor.take(limit))
            cursor.bytes_written += out.tell() - before
            cursor.records_written += limit
            written += limit
    finally:
        writer.close()
    return written


class _CsvWriter:
    def __init__(self, out: BinaryIO, schema: pa.Schema):
        self._writer = pa_csv.CSVWriter(out, schema)

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()


class _JsonLinesWriter:
    def __init__(self, out: BinaryIO, schema: pa.Schema):
        self._out = out

    def write(self, table: pa.Table) -> None:
        for batch in table.to_batches():
            lines = [orjson.dumps(row, default=json_default, option=orjson.OPT_APPEND_NEWLINE)
                     for row in batch.to_pylist()]
            self._out.write(b"".join(lines))

    def close(self) -> None:
        pass


def json_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of records after a JSON round trip (``json_default``): the columns whose values
    JSON writes as text (dates, times, timestamps, decimals, binary) become strings."""
    as_text = (pa.types.is_temporal, pa.types.is_decimal, pa.types.is_binary, pa.types.is_large_binary,
               pa.types.is_fixed_size_binary)
    return pa.schema([pa.field(f.name, pa.string(), f.nullable) if any(t(f.type) for t in as_text) else f
                      for f in schema])


def json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


class _ParquetWriter:
    def __init__(self, out: BinaryIO, schema: pa.Schema):
        self._writer = pq.ParquetWriter(out, schema)

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()


def _writer(fmt: str, out: BinaryIO, schema: pa.Schema):
    if fmt == CSV:
        return _CsvWriter(out, schema)
    if fmt == JSON_LINES:
        return _JsonLinesWriter(out, schema)
    if fmt == PARQUET:
        return _ParquetWriter(out, schema)
    raise ValueError(f"unknown record format {fmt!r} (known: {', '.join(FORMATS)})")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
