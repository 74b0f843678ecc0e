"""The binary record readers' fuzz targets (tests/fuzz_records.py says what is checked): Avro
object container files and bare datums (AvroReader), Parquet files (ParquetReader).

Avro container files are damaged byte by byte, and also given another header: the schema in it
changed as JSON (any value replaced, a key removed or added) or the codec named changed, the
blocks kept, so the reader meets blocks its schema does not describe. Parquet files are written
by pyarrow with every option that changes their bytes (codecs, dictionaries, page versions, row
groups, statistics, page indexes, page checksums, the Arrow schema kept or not) and by the
ParquetRecordSetWriter, then damaged, and read whole or in part (``record.offset``,
``record.count``, a byte range).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from typing import Any

from hypothesis import strategies as st

from tests.fuzz_formats import Finding, Format
from tests.fuzz_mutations import damaged, json_mutated, mutated
from tests.fuzz_records import read_records, record_errors

# --- Avro (AvroReader: flowactors/services/records/avro.py) -----------------------------------------

_SIMPLE = {"namespace": "nifi", "name": "test", "type": "record",
           "fields": [{"name": "id", "type": "int"}, {"name": "key", "type": ["null", "string"]}]}
LOGICAL_SCHEMA = {"namespace": "nifi", "name": "logical", "type": "record", "fields": [
    {"name": "timeMillis", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "timeMicros", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "timestampMillis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "timestampMicros", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "decimal", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
    {"name": "wide", "type": {"type": "fixed", "name": "wide", "size": 20, "logicalType": "decimal",
                              "precision": 40, "scale": 3}},
    {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}}]}
STRUCTURES_SCHEMA = {"namespace": "nifi", "name": "structures", "type": "record", "fields": [
    {"name": "string", "type": "string"}, {"name": "bytes", "type": "bytes"},
    {"name": "float", "type": "float"}, {"name": "double", "type": "double"}, {"name": "flag", "type": "boolean"},
    {"name": "array", "type": {"type": "array", "items": ["null", "int"]}},
    {"name": "record", "type": {"type": "record", "name": "sub", "fields": [{"name": "f", "type": "string"}]}},
    {"name": "map", "type": {"type": "map", "values": "sub"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "hash", "type": {"type": "fixed", "name": "MD5", "size": 4}},
    {"name": "choice", "type": ["null", "int", {"type": "array", "items": "int"}, "string", "sub"]},
    {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "long"}}}]}
RECURSIVE_SCHEMA = {"name": "node", "type": "record", "fields": [
    {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "node"]}]}
_STAMP = datetime.datetime(2017, 4, 4, 14, 29, 33, 123000, tzinfo=datetime.timezone.utc)
AVRO_DATA = [
    (_SIMPLE, [{"id": 1, "key": "a"}, {"id": -(1 << 31), "key": None}, {"id": (1 << 31) - 1, "key": "\u00e9" * 40}]),
    (LOGICAL_SCHEMA, [{"timeMillis": 51633000, "timeMicros": 51633000000, "timestampMillis": _STAMP,
                 "timestampMicros": None, "local": datetime.datetime(2017, 4, 4, 14, 29),
                 "date": datetime.date(2017, 4, 4),
                 "decimal": decimal.Decimal("123.45"), "wide": decimal.Decimal("-1" + "0" * 36 + ".125"),
                 "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678")}]),
    (STRUCTURES_SCHEMA, [{"string": "s", "bytes": b"\x00\xff", "float": 1.5, "double": float("inf"), "flag": True,
                    "array": [1, None], "record": {"f": "f"}, "map": {"k": {"f": "v"}}, "kind": "B", "hash": b"abcd",
                    "choice": [1, 2], "matrix": [[1], []]},
                   {"string": "", "bytes": b"", "float": float("nan"), "double": -0.0, "flag": False, "array": [],
                    "record": {"f": ""}, "map": {}, "kind": "A", "hash": b"\x00" * 4, "choice": {"f": "x"},
                    "matrix": []}]),
    (RECURSIVE_SCHEMA, [{"value": 1, "next": {"value": 2, "next": None}}]),
]
_CODECS = ("null", "deflate", "snappy", "bzip2", "xz")


def container_file(schema: dict, rows: list, codec: str, sync_interval: int) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), rows, codec=codec, sync_interval=sync_interval)
    return out.getvalue()


def _datums(schema: dict, rows: list) -> bytes:
    import fastavro

    out = io.BytesIO()
    parsed = fastavro.parse_schema(schema)
    for row in rows:
        fastavro.schemaless_writer(out, parsed, row)
    return out.getvalue()


def _long(data: bytes, at: int) -> tuple[int, int]:
    """The zig-zag varint at ``at``: (value, the offset after it)."""
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at


def _encode_long(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def _blocks_of(container: bytes) -> tuple[bytes, bytes]:
    """A container file (fastavro's: one block of metadata entries) split into its sync marker
    and what follows its header (the data blocks)."""
    count, at = _long(container, 4)
    for _ in range(count):
        for _part in ("key", "value"):
            length, at = _long(container, at)
            at += length
    _end, at = _long(container, at)
    return container[at:at + 16], container[at + 16:]


def with_header(container: bytes, schema_text: str, codec: str) -> bytes:
    """``container``'s blocks behind a header naming ``schema_text`` and ``codec``."""
    sync, blocks = _blocks_of(container)
    entries = [(b"avro.schema", schema_text.encode("utf-8", "surrogatepass")), (b"avro.codec", codec.encode())]
    meta = _encode_long(len(entries)) + b"".join(_encode_long(len(k)) + k + _encode_long(len(v)) + v
                                                 for k, v in entries) + _encode_long(0)
    return b"Obj\x01" + meta + sync + blocks


def _written_by_the_service(schema: dict, rows: list) -> bytes:
    """The rows read from a container file and written again by AvroRecordSetWriter (deflate)."""
    from flowactors.services.records.avro import AvroReader, AvroRecordSetWriter
    from flowactors.testing import enable_service

    data = container_file(schema, rows, "null", 16000)
    table = enable_service(AvroReader).create_reader({}, io.BytesIO(data), len(data)).read_all()
    writer = enable_service(AvroRecordSetWriter, {"Compression Format": "DEFLATE"})
    out = io.BytesIO()
    records = writer.create_writer(writer.write_schema({}, table.schema), out, {})
    for batch in table.to_batches():
        records.write_batch(batch)
    records.finish()
    return out.getvalue()


def _avro_seeds(folder) -> dict[str, Any]:
    containers, datums = [], []
    for schema, rows in AVRO_DATA:
        for number, codec in enumerate(_CODECS):
            containers.append((schema, container_file(schema, rows * (1 + number), codec, 1 if number % 2 else 16000)))
        datums.append((schema, _datums(schema, rows * 3)))
        if schema is not RECURSIVE_SCHEMA:
            containers.append((schema, _written_by_the_service(schema, rows)))
    return {"containers": containers, "datums": datums}


def _given(schema: dict) -> dict:
    return {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(schema)}


@st.composite
def _avro_example(draw: st.DrawFn, seeds: dict) -> tuple[dict, bytes, bool]:
    """(properties, content, small batches): a container file damaged (read with its own schema,
    or given one), a container under another header, or datums of a given schema damaged."""
    kind = draw(st.sampled_from(("container", "container", "header", "datums")))
    schemas = [schema for schema, _ in AVRO_DATA]
    if kind == "datums":
        schema, data = draw(st.sampled_from(seeds["datums"]))
        options = _given(draw(st.sampled_from([schema] * 3 + schemas)))
        content = draw(mutated([data, *(d for _, d in seeds["datums"])]) | st.just(data))
        return options, content, draw(st.booleans())
    schema, data = draw(st.sampled_from(seeds["containers"]))
    options = draw(st.sampled_from(({}, {}, _given(schema), _given(draw(st.sampled_from(schemas))))))
    if kind == "header":
        text = json.dumps(draw(json_mutated([schema])))
        codec = draw(st.sampled_from(_CODECS + ("zstandard", "lz4", "", "nope")))
        content = with_header(data, text, codec)
        content = draw(st.just(content) | mutated([content]))
    else:
        content = draw(mutated([d for _, d in seeds["containers"]]) | damaged([data]))
    return options, content, draw(st.booleans())


def _read_avro(folder, example) -> None:
    from flowactors.services.records.avro import AvroReader

    properties, content, small = example
    read_records(AvroReader, properties, content, small=small)


# --- Parquet (ParquetReader: flowactors/services/records/parquet.py) -------------------------------


def _parquet_table():
    """Every Arrow type a Parquet file may hold, with nulls and edge values."""
    import pyarrow as pa

    return pa.table({
        "i8": pa.array([-128, None, 127], pa.int8()), "u32": pa.array([0, 1, (1 << 32) - 1], pa.uint32()),
        "i64": pa.array([-(1 << 63), 0, (1 << 63) - 1], pa.int64()), "f32": pa.array([1.5, float("nan"), None],
                                                                                       pa.float32()),
        "f64": [float("-inf"), 0.0, 1e308], "flag": [True, None, False],
        "text": ["a", "\u00e9\u4e2d" * 20, None], "blob": pa.array([b"\x00", b"", None], pa.binary()),
        "date": pa.array([0, 19000, None], pa.date32()), "time": pa.array([0, 86399999, None], pa.time32("ms")),
        "stamp": pa.array([0, 1491316173000, None], pa.timestamp("ms", tz="UTC")),
        "nanos": pa.array([1, None, 2], pa.timestamp("ns")),
        "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-99.99")], pa.decimal128(5, 2)),
        "big": pa.array([decimal.Decimal(10 ** 40), None, decimal.Decimal(0)], pa.decimal256(45, 0)),
        "list": pa.array([[1, None], [], None], pa.list_(pa.int32())),
        "struct": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": None}],
                           pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "map": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int64())),
        "dict": pa.array(["x", "y", "x"]).dictionary_encode(), "fixed": pa.array([b"ab", b"cd", None],
                                                                                  pa.binary(2)),
        "nothing": pa.nulls(3)})


_PARQUET_OPTIONS = [
    {}, {"compression": "snappy", "use_dictionary": False}, {"compression": "gzip", "data_page_version": "2.0"},
    {"compression": "zstd", "row_group_size": 1, "write_statistics": False},
    {"compression": "lz4", "write_page_index": True, "store_schema": False},
    {"compression": "brotli", "write_page_checksum": True, "data_page_size": 64},
    {"compression": "none", "use_byte_stream_split": ["f64"], "use_dictionary": ["text"], "row_group_size": 2},
]


def _parquet_seeds(folder) -> list[bytes]:
    import pyarrow.parquet as pq

    from flowactors.services.records.parquet import ParquetRecordSetWriter
    from flowactors.testing import enable_service

    table = _parquet_table()
    files = []
    for options in _PARQUET_OPTIONS:
        out = io.BytesIO()
        pq.write_table(table, out, **options)
        files.append(out.getvalue())
    plain = table.drop_columns(["u32", "nanos", "big", "dict", "fixed", "nothing", "f32"])
    writer = enable_service(ParquetRecordSetWriter, {"Row Group Size": "1 KB", "Compression Type": "SNAPPY"})
    out = io.BytesIO()
    records = writer.create_writer(writer.write_schema({}, plain.schema), out, {})
    for batch in plain.to_batches(max_chunksize=1):
        records.write_batch(batch)
    records.finish()
    return [*files, out.getvalue()]


_NUMBERS = st.sampled_from(("0", "1", "2", "-1", "x", "", " 1", "99999999999999999999999", "1e3"))
_RANGES = st.dictionaries(st.sampled_from(("record.offset", "record.count", "parquet.file.range.startOffset",
                                           "parquet.file.range.endOffset")), _NUMBERS, max_size=3)


def _parquet_examples(seeds: list[bytes]) -> st.SearchStrategy:
    return st.tuples(_RANGES, st.one_of(mutated(seeds), mutated(seeds, most=1), damaged(seeds)), st.booleans())


def _read_parquet(folder, example) -> None:
    from flowactors.services.records.parquet import ParquetReader

    attributes, content, small = example
    read_records(ParquetReader, {}, content, attributes, small=small)


#: the Parquet target read in this process (by the worker of ``_read_parquet_apart``)
_PARQUET_HERE = Format("parquet-records", _parquet_seeds, _parquet_examples, _read_parquet, record_errors(),
                       names_place=False)
#: seconds the worker may take for one example before it counts as hung (its own CPU limit comes first)
_WORKER_SECONDS = 120.0


class _Worker:
    """A process of its own that checks Parquet examples (``check`` with ``_PARQUET_HERE``): a
    damaged footer can make pyarrow's C++ throw where nothing catches it, and the process aborts
    (std::terminate), which must be a finding, not the end of the run. Started when first needed,
    again after it died."""

    process: Any = None
    connection: Any = None

    def check(self, workdir, example) -> None:
        import multiprocessing

        if self.process is None or not self.process.is_alive():
            context = multiprocessing.get_context("spawn")
            self.connection, theirs = context.Pipe()
            self.process = context.Process(target=_serve, args=(theirs,), daemon=True)
            self.process.start()
            theirs.close()   # the worker's end is the worker's alone: its death is then an end of file here
        self.connection.send((workdir, example))
        if not self.connection.poll(_WORKER_SECONDS):
            self.process.kill()
            raise Finding(f"parquet-records: no answer in {_WORKER_SECONDS} s", "worker hang")
        try:
            found = self.connection.recv()
        except EOFError:
            self.process.join()
            raise Finding(f"parquet-records: the process reading it died (exit code {self.process.exitcode}: "
                          f"{_signal_name(self.process.exitcode)})",
                          f"process died ({_signal_name(self.process.exitcode)})") from None
        if found is not None:
            raise Finding(*found)


def _signal_name(exitcode: int | None) -> str:
    import signal

    if exitcode is not None and exitcode < 0:
        return signal.Signals(-exitcode).name   # SIGABRT: C++'s std::terminate
    return f"exit {exitcode}"


def _serve(connection) -> None:
    """The worker: check each (workdir, example) received; send None or the finding's (message, signature)."""
    from tests.fuzz_formats import check

    while True:
        workdir, example = connection.recv()
        try:
            check(_PARQUET_HERE, workdir, example)
            connection.send(None)
        except Finding as finding:
            connection.send((str(finding), finding.signature))


_WORKER = _Worker()


def _read_parquet_apart(folder, example) -> None:
    """``_read_parquet`` in the worker process (``_Worker``)."""
    _WORKER.check(folder.parent / "apart", example)


def binary_formats() -> list[Format]:
    return [
        Format("avro-records", _avro_seeds, lambda seeds: _avro_example(seeds), _read_avro, record_errors(),
               names_place=False),
        Format("parquet-records", _parquet_seeds, _parquet_examples, _read_parquet_apart, record_errors(),
               names_place=False),
    ]
