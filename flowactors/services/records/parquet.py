"""Parquet's record reader and writer (NiFi's ``ParquetReader`` and ``ParquetRecordSetWriter``), on pyarrow.

**Reading.** A Parquet file keeps its footer (schema, row groups) at its end, so it is read through
the session's seekable content stream: the footer first, then each row group's column chunks by
offset, ``BATCH_RECORDS`` records at a time (``ParquetFile.iter_batches``): memory is bounded by a
row group, never the whole content. The schema is the file's (an Arrow schema stored by an Arrow
writer comes back with its field metadata, so NiFi's types survive). As NiFi's reader, the
FlowFile's ``record.offset`` and ``record.count`` attributes select a range of records, and
``parquet.file.range.startOffset`` / ``parquet.file.range.endOffset`` the row groups whose middle
falls in that byte range.

**Writing.** Batches are cast to the writer's schema and buffered until they reach ``Row Group
Size`` (of Arrow memory, as parquet-mr counts its buffered bytes), then written as one row group;
the footer is written by ``finish``. With ``Enable Dictionary Encoding`` unset, a column is
dictionary-encoded when its first values repeat (``_dictionary_columns``), where parquet-mr tries
a dictionary for every column and gives it up when it outgrows a page: the same values either way,
without the cost of a dictionary of unique values.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.records import (BATCH_RECORDS, MalformedRecordError, RecordReader, RecordReaderFactory,
                                    RecordSetWriter, SchemaMismatchError, WriteResult)
from flowactors.sdk.records import access
from flowactors.sdk.records.schema import avro_to_arrow, conform
from flowactors.sdk.relationships import reason
from flowactors.sdk.services import ControllerService, ServiceContext
from flowactors.sdk.units import parse_data_size
from flowactors.services.records.parquet_footer import row_group_spans

MIME_TYPE = "application/parquet"

#: the attributes NiFi's reader takes a part of the file from
RECORD_OFFSET, RECORD_COUNT = "record.offset", "record.count"
RANGE_START, RANGE_END = "parquet.file.range.startOffset", "parquet.file.range.endOffset"

#: Compression Type's values (parquet-mr's codec names) -> pyarrow's; LZO has no pyarrow codec
COMPRESSIONS = {"UNCOMPRESSED": "none", "SNAPPY": "snappy", "GZIP": "gzip", "LZO": None, "BROTLI": "brotli",
                "LZ4": "lz4", "ZSTD": "zstd", "LZ4_RAW": "lz4_raw"}
#: the read buffer of a column chunk
READ_BUFFER = 1 << 20
#: parquet-mr's default row group size (NiFi's when the property is not set)
DEFAULT_ROW_GROUP_SIZE = 128 << 20


# ---------------------------------------------------------------------------------- reading
class ParquetReader(ControllerService, RecordReaderFactory):
    """Reads Parquet files, with the schema they hold."""

    description = "Reads Parquet files, row group by row group, with the schema they hold"
    properties = ()
    NIFI_PROPERTY_NAMES: dict[str, str] = {}
    NIFI_VALUES: dict[str, dict[str, str]] = {}
    #: NiFi properties of parquet-mr's Avro bridge, with nothing to tune here: the import leaves them out
    NIFI_IGNORED = ("Avro Read Compatibility", "avro-read-compatibility", "Avro Add List Element Records",
                    "avro-add-list-element-records")

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        return _ParquetRecordReader(stream, size, attributes)


def _number(attributes: Mapping[str, str], name: str) -> int | None:
    value = attributes.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise MalformedRecordError(f"attribute '{name}' is {value!r}, not a whole number of zero or more")
    return number


def _row_groups(stream: BinaryIO, size: int, start: int, end: int) -> list[int]:
    """The row groups whose middle is in [start, end) (parquet-mr's file range), placed by the
    footer as ``parquet_footer`` reads it: pyarrow's column chunk metadata would abort the process
    on a chunk it cannot check (that module's docstring)."""
    try:
        spans = row_group_spans(stream, size)
    except (ValueError, OSError) as err:
        raise MalformedRecordError(f"the Parquet file cannot be read: {reason(err)}", offset=0) from None
    return [index for index, (first, length) in enumerate(spans) if start <= first + length // 2 < end]


class _ParquetRecordReader(RecordReader):
    def __init__(self, stream: BinaryIO, size: int, attributes: Mapping[str, str]):
        if size < 12:   # "PAR1", a footer length, "PAR1"
            raise MalformedRecordError(f"the content ({size} bytes) is too short to be a Parquet file", offset=0)
        try:
            # buffered column reads: pyarrow then fetches a row group at a time (unbuffered, all at once)
            self._file = pq.ParquetFile(stream, buffer_size=READ_BUFFER, pre_buffer=False)
            self._schema = self._file.schema_arrow
        except (pa.ArrowException, OSError) as err:
            raise MalformedRecordError(f"the content is not a Parquet file: {reason(err)}", offset=0) from None
        except UnicodeDecodeError as err:
            raise MalformedRecordError(f"the Parquet file's schema has a name that is not UTF-8: {reason(err)}",
                                       offset=0) from None
        self._offset = _number(attributes, RECORD_OFFSET)
        count = _number(attributes, RECORD_COUNT)
        self._count = count if self._offset is not None else None
        start, end = _number(attributes, RANGE_START), _number(attributes, RANGE_END)
        if start is None and end is None:
            self._groups = list(range(self._file.metadata.num_row_groups))
        else:
            self._groups = _row_groups(stream, size, start or 0, end if end is not None else size)

    def schema(self) -> pa.Schema:
        return self._schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        return self._read(None)

    def projected_batches(self, names: Sequence[str]) -> Iterator[pa.RecordBatch]:
        return self._read(list(names))   # only these columns' chunks are read and decoded

    def _read(self, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        skip, left = self._offset or 0, self._count
        groups = list(self._groups)
        metadata = self._file.metadata
        while groups and skip >= metadata.row_group(groups[0]).num_rows:   # whole row groups before the offset
            skip -= metadata.row_group(groups.pop(0)).num_rows
        if not groups or left == 0:
            return
        done = 0
        texts: list[int] | None = None   # the fields holding text, found once (every batch has one schema)
        try:
            for batch in self._file.iter_batches(batch_size=BATCH_RECORDS, row_groups=groups, columns=columns,
                                                    use_threads=True):
                if skip:
                    cut = min(skip, batch.num_rows)
                    batch, skip = batch.slice(cut), skip - cut
                if left is not None:
                    batch = batch.slice(0, min(left, batch.num_rows))
                    left -= batch.num_rows
                if batch.num_rows:
                    if texts is None:
                        texts = [i for i, field in enumerate(batch.schema) if _holds_text(field.type)]
                    _check_text(batch, texts, done)
                    done += batch.num_rows
                    yield batch
                if left == 0:
                    return
        except (pa.ArrowException, OSError) as err:
            raise MalformedRecordError(f"the Parquet file cannot be read after record {done}: {reason(err)}",
                                       record=done) from None


def _check_text(batch: pa.RecordBatch, texts: list[int], first: int) -> None:
    """``MalformedRecordError`` naming the record (``first`` is the batch's first) and the field
    when a text value of ``batch``'s fields at ``texts`` (those holding text) is not UTF-8: pyarrow keeps a Parquet string's bytes as they
    are. A text column whose bytes are all ASCII is valid (``_ascii``, some 60 GB/s); any other
    column holding text gets Arrow's check, about 1 GB/s of text (43 ms of a 160 ms read of 8
    million short strings of non-ASCII text). The record is not named when the bytes at fault are
    outside the batch's values (list items past a slice of it, a dictionary entry none uses)."""
    for index in texts:
        field, column = batch.schema.field(index), batch.column(index)
        if _ascii(column):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as err:
            row = next((r for r in range(len(column)) if not _decodes(column, r)), None)
            where = f"record {first + row}'s field" if row is not None else "field"
            raise MalformedRecordError(f"{where} '{field.name}' holds text that is not UTF-8 ({reason(err)})",
                                       record=None if row is None else first + row) from None


def _ascii(column: pa.Array) -> bool:
    """Whether ``column`` is a plain text column whose bytes (the whole data buffer, slice or
    not) are all ASCII, and so valid UTF-8."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return False
    data = column.buffers()[2]
    return data is None or data.size == 0 or int(np.frombuffer(data, np.uint8).max()) < 0x80


def _holds_text(data_type: pa.DataType) -> bool:
    types = [data_type]
    while types:
        t = types.pop()
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return True
        if pa.types.is_dictionary(t):
            types.append(t.value_type)
        elif pa.types.is_nested(t):
            types.extend(t.field(i).type for i in range(t.num_fields))
    return False


def _decodes(column: pa.Array, row: int) -> bool:
    try:
        column[row].as_py()
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------------- writing
COMPRESSION_TYPE = PropertyDescriptor("Compression Type", "The compression of the file's column chunks", required=True,
                                      default="UNCOMPRESSED", allowable_values=tuple(COMPRESSIONS))
ROW_GROUP_SIZE = PropertyDescriptor("Row Group Size", "How much data (as Arrow holds it in memory) a row group holds; "
                                    "parquet-mr's 128 MB when unset", validator=validators.DATA_SIZE)
PAGE_SIZE = PropertyDescriptor("Page Size", "The size of a data page (pyarrow's 1 MB when unset)", validator=validators.DATA_SIZE)
DICTIONARY_PAGE_SIZE = PropertyDescriptor("Dictionary Page Size", "The most a column chunk's dictionary page holds "
                                          "before the column falls back to plain encoding", validator=validators.DATA_SIZE)
ENABLE_DICTIONARY_ENCODING = PropertyDescriptor("Enable Dictionary Encoding", "Whether columns are dictionary encoded "
                                                "(true when unset)", allowable_values=("true", "false"))
WRITER_VERSION = PropertyDescriptor("Writer Version", "The data page version: PARQUET_1_0 (v1 pages, the default) or "
                                    "PARQUET_2_0 (v2 pages)", allowable_values=("PARQUET_1_0", "PARQUET_2_0"))
INT96_FIELDS = PropertyDescriptor("INT96 Fields", "Timestamp fields to write as INT96 (any set: every timestamp field "
                                  "is, as pyarrow writes INT96 for all or none)", validator=validators.NON_EMPTY)
CACHE_SIZE = PropertyDescriptor("Cache Size", "How many schemas given as text are kept parsed", required=True,
                                default="1000", validator=validators.NON_NEGATIVE_INTEGER)


class ParquetRecordSetWriter(ControllerService, access.SchemaWriter):
    """Writes records as one Parquet file."""

    description = "Writes records as a Parquet file, a row group per 'Row Group Size' of records"
    properties = (access.write_strategy(), access.access_strategy((access.INHERIT, access.SCHEMA_NAME,
                                                                   access.SCHEMA_TEXT), access.INHERIT),
                  *access.SCHEMA_PROPERTIES, access.SCHEMA_CACHE, CACHE_SIZE, COMPRESSION_TYPE, ROW_GROUP_SIZE,
                  PAGE_SIZE, DICTIONARY_PAGE_SIZE, ENABLE_DICTIONARY_ENCODING, WRITER_VERSION, INT96_FIELDS)
    NIFI_PROPERTY_NAMES = {**access.NIFI_NAMES, "cache-size": "Cache Size", "compression-type": "Compression Type",
                           "row-group-size": "Row Group Size", "page-size": "Page Size",
                           "dictionary-page-size": "Dictionary Page Size",
                           "enable-dictionary-encoding": "Enable Dictionary Encoding",
                           "writer-version": "Writer Version", "int96-fields": "INT96 Fields"}
    NIFI_VALUES = access.NIFI_VALUES
    #: NiFi properties of parquet-mr's Avro bridge and HDFS, with nothing to tune here: the import leaves them out
    NIFI_IGNORED = ("Avro Write Old List Structure", "avro-write-old-list-structure", "Avro Add List Element Records",
                    "avro-add-list-element-records", "Max Padding Size", "max-padding-size", "Enable Validation",
                    "enable-validation")
    MIME_TYPE = MIME_TYPE

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        codec = values.get("Compression Type", "UNCOMPRESSED")
        if not _writable(codec):
            usable = ", ".join(name for name in COMPRESSIONS if _writable(name))
            return [f"property 'Compression Type' is {codec}, which pyarrow cannot write (it can: {usable})"]
        return []

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = access.SchemaCache(avro_to_arrow, max(1, int(context.property("Cache Size").raw)))
        size = context.property("Row Group Size").raw
        self._row_group_bytes = int(parse_data_size(size)) if size else DEFAULT_ROW_GROUP_SIZE
        options = {"compression": COMPRESSIONS[context.property("Compression Type").raw]}
        for name, option in (("Page Size", "data_page_size"), ("Dictionary Page Size", "dictionary_pagesize_limit")):
            if context.property(name).raw:
                options[option] = int(parse_data_size(context.property(name).raw))
        if context.property("Enable Dictionary Encoding").raw:
            options["use_dictionary"] = context.property("Enable Dictionary Encoding").raw == "true"
        if context.property("Writer Version").raw == "PARQUET_2_0":
            options["data_page_version"] = "2.0"
        if context.property("INT96 Fields").raw:
            options["use_deprecated_int96_timestamps"] = True
        self._options = options

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        return _ParquetWriter(schema, out, self._options, self._row_group_bytes, self.result_attributes(schema))


def _writable(codec: str) -> bool:
    name = COMPRESSIONS.get(codec)
    return name == "none" or name is not None and pa.Codec.is_available(name)


class _Sink:
    """``out`` as the Parquet writer sees it: its position counted from where the file starts (the
    footer's offsets are the file's own), never closed by it."""

    closed = False

    def __init__(self, out: BinaryIO):
        self._out = out
        self._written = 0

    def write(self, data: bytes) -> int:
        self._out.write(data)
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False


class _ParquetWriter(RecordSetWriter):
    """One Parquet file. pyarrow's writer is made at the first row group (``_flush``), so that with
    ``Enable Dictionary Encoding`` unset the columns to dictionary-encode are chosen from the
    records (``_dictionary_columns``)."""

    def __init__(self, schema: pa.Schema, out: BinaryIO, options: dict, row_group_bytes: int,
                 attributes: dict[str, str]):
        self._schema = schema
        self._out = out
        self._options = options
        self._row_group_bytes = row_group_bytes
        self._attributes = attributes
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._count = 0
        self._writer: pq.ParquetWriter | None = None

    def write_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.schema.equals(self._schema):
            batch = conform(batch, self._schema)
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        self._count += batch.num_rows
        if self._pending_bytes >= self._row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        self._pending, self._pending_bytes = [], 0
        try:
            if self._writer is None:
                options = self._options
                if "use_dictionary" not in options:
                    options = {**options, "use_dictionary": _dictionary_columns(table)}
                self._writer = pq.ParquetWriter(pa.PythonFile(_Sink(self._out), mode="w"), self._schema, **options)
            if table.num_rows:
                self._writer.write_table(table, row_group_size=table.num_rows)
        except (pa.ArrowException, ValueError) as err:
            what = "schema" if self._writer is None else "records"
            raise SchemaMismatchError(f"the {what} cannot be written as Parquet: {reason(err)}") from None

    def finish(self) -> WriteResult:
        if self._pending or self._writer is None:
            self._flush()
        if self._writer is not None:
            self._writer.close()
        return WriteResult(self._count, dict(self._attributes))


#: how many of a column's first values are looked at to choose its encoding, and the share of
#: them that must repeat for a dictionary to be worth making
DICTIONARY_SAMPLE, DICTIONARY_REPEATS = 1024, 0.5


def _dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The columns worth dictionary-encoding: those whose first values repeat (at most half
    distinct). A dictionary of values that do not repeat costs pyarrow time and makes the file
    larger (docs/performance.md); parquet-mr tries one for every column and gives it up when it
    outgrows a page. With a nested field, every column (pyarrow's default, as parquet-mr's)."""
    if any(pa.types.is_nested(f.type) for f in table.schema):
        return True
    sample = table.slice(0, DICTIONARY_SAMPLE)
    chosen = []
    for name, column in zip(table.schema.names, sample.columns):
        values = column.drop_null()
        if len(values) == 0 or len(values.unique()) <= DICTIONARY_REPEATS * len(values):
            chosen.append(name)
    return chosen
