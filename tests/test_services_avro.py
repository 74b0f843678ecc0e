"""AvroReader and AvroRecordSetWriter (flowactors.services.records.avro).

Cases from NiFi's TestAvroReaderWithEmbeddedSchema (logical types, data types, several types in a
union), TestWriteAvroResult* (record sets, decimals on bytes and fixed, fixed of the wrong
length), the schemaless reading of AvroReaderWithExplicitSchema, and AvroRecordSetWriter's
validation of compression without an embedded schema.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from fastavro.schema import to_parsing_canonical_form

from flowactors.sdk.records import (BATCH_RECORDS, MalformedRecordError, SchemaMismatchError, SchemaNotFoundError)
from flowactors.sdk.records.schema import NIFI_TYPE, avro_text, avro_to_arrow
from flowactors.services.records.avro import AvroReader, AvroRecordSetWriter, _Plan
from flowactors.services.records.registry import AvroSchemaRegistry
from flowactors.services.records.schema_cache import VolatileSchemaCache
from flowactors.testing import enable_service
from tests.records_helpers import LOGICAL

UTC = datetime.timezone.utc
SIMPLE = {"namespace": "nifi", "name": "test", "type": "record",
          "fields": [{"name": "id", "type": "int"}, {"name": "key", "type": ["null", "string"]}]}


def container(schema: dict, rows: list, **options) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), rows, **options)
    return out.getvalue()


def datums(schema: dict, rows: list) -> bytes:
    out = io.BytesIO()
    for row in rows:
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), row)
    return out.getvalue()


def read(data: bytes, properties: dict | None = None, attributes: dict | None = None, **kw) -> pa.Table:
    reader = enable_service(AvroReader, properties, **kw)
    return reader.create_reader(attributes or {}, io.BytesIO(data), len(data)).read_all()


def write(table: pa.Table | pa.Schema, properties: dict | None = None, attributes: dict | None = None, **kw):
    writer = enable_service(AvroRecordSetWriter, properties, **kw)
    schema = table if isinstance(table, pa.Schema) else table.schema
    out = io.BytesIO()
    records = writer.create_writer(writer.write_schema(attributes or {}, schema), out, attributes or {})
    for batch in ([] if isinstance(table, pa.Schema) else table.to_batches()):
        records.write_batch(batch)
    result = records.finish()
    return out.getvalue(), result


# ---------------------------------------------------------------------------------- reading
def test_embedded_schema_with_logical_types():
    millis = (33 + 20 * 60 + 14 * 3600) * 1000
    row = {"timeMillis": millis, "timeMicros": millis * 1000, "timestampMillis": 1491316173000,
           "timestampMicros": 1491316173000000, "date": 17260, "decimal": decimal.Decimal("123.45")}
    table = read(container(LOGICAL, [row]))
    assert table.schema.types[:2] == [pa.time32("ms"), pa.time64("us")]
    stamp = datetime.datetime(2017, 4, 4, 14, 29, 33, tzinfo=UTC)
    assert table.to_pylist() == [{"timeMillis": datetime.time(14, 20, 33), "timeMicros": datetime.time(14, 20, 33),
                                  "timestampMillis": stamp, "timestampMicros": stamp,
                                  "date": datetime.date(2017, 4, 4), "decimal": decimal.Decimal("123.45")}]


def test_embedded_schema_with_data_types():
    schema = {"namespace": "nifi", "name": "data_types", "type": "record", "fields": [
        {"name": "string", "type": "string"}, {"name": "bytes", "type": "bytes"},
        {"name": "nullOrLong", "type": ["null", "long"]}, {"name": "array", "type": {"type": "array", "items": "int"}},
        {"name": "record", "type": {"type": "record", "name": "subRecord", "fields": [{"name": "field1", "type": "string"}]}},
        {"name": "map", "type": {"type": "map", "values": "subRecord"}},
        {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}]}
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    rows = [{"string": "hello", "bytes": b"\x01\x02", "nullOrLong": None, "array": [1, 2], "record": {"field1": "f"},
             "map": {"k": {"field1": "v"}}, "uuid": ident, "kind": "B"}]
    table = read(container(schema, rows))
    assert table.schema.field("uuid").metadata[NIFI_TYPE] == b"UUID"
    assert table.to_pylist(maps_as_pydicts="strict") == [
        {"string": "hello", "bytes": b"\x01\x02", "nullOrLong": None, "array": [1, 2], "record": {"field1": "f"},
         "map": {"k": {"field1": "v"}}, "uuid": str(ident), "kind": "B"}]


def test_union_of_several_types_reads_as_choice_text():
    schema = {"namespace": "nifi", "name": "data_types", "type": "record", "fields": [
        {"name": "field", "type": ["null", "int", {"type": "array", "items": "int"}, "string"]}]}
    table = read(container(schema, [{"field": 5}, {"field": [1, 2]}, {"field": "x"}, {"field": None}]))
    assert table.column("field").to_pylist() == ["5", "[1,2]", "x", None]


def test_a_content_of_many_blocks_streams_one_batch_at_a_time():
    total = 2 * BATCH_RECORDS + 100
    data = container(SIMPLE, ({"id": i, "key": None} for i in range(total)), sync_interval=16 * 1024)
    reader = enable_service(AvroReader).create_reader({}, stream := io.BytesIO(data), len(data))
    batches = reader.batches()
    first = next(batches)
    assert first.num_rows == BATCH_RECORDS
    assert stream.tell() < len(data) * 0.6   # the rest of the content is still unread
    rest = list(batches)
    assert [b.num_rows for b in rest] == [BATCH_RECORDS, 100]
    assert rest[-1].column("id")[-1].as_py() == total - 1


def test_empty_container_file_has_the_schema_and_no_records():
    reader = enable_service(AvroReader).create_reader({}, io.BytesIO(data := container(SIMPLE, [])), len(data))
    assert reader.schema().names == ["id", "key"]
    assert list(reader.batches()) == []


@pytest.mark.parametrize("data, message", [
    (b"", "not an Avro data file"), (b"not avro at all", "not an Avro data file"),
    (b"Obj\x01\x02", "not an Avro data file")])
def test_content_that_is_not_avro_fails_when_the_reader_is_made(data, message):
    with pytest.raises(MalformedRecordError, match=message) as caught:
        enable_service(AvroReader).create_reader({}, io.BytesIO(data), len(data))
    assert caught.value.offset == 0


def test_truncated_file_fails_at_the_block_it_cuts():
    data = container(SIMPLE, [{"id": i, "key": "k" * 50} for i in range(2000)], sync_interval=4096)
    reader = enable_service(AvroReader).create_reader({}, io.BytesIO(data[:len(data) // 2]), len(data) // 2)
    with pytest.raises(MalformedRecordError, match="not valid at record") as caught:
        list(reader.batches())
    assert 0 < caught.value.record < 2000
    assert "\n" not in str(caught.value)


def test_corrupt_sync_marker_is_malformed():
    data = bytearray(container(SIMPLE, [{"id": 1, "key": None}]))
    data[-3] ^= 0xFF
    with pytest.raises(MalformedRecordError, match="not valid at record 0"):
        read(bytes(data))


def test_schema_text_reads_bare_datums():
    text = json.dumps(SIMPLE)
    data = datums(SIMPLE, [{"id": 1, "key": "a"}, {"id": 2, "key": None}])
    table = read(data, {"Schema Access Strategy": "Use 'Schema Text' Property"}, {"avro.schema": text})
    assert table.to_pylist() == [{"id": 1, "key": "a"}, {"id": 2, "key": None}]


def test_truncated_datum_names_the_record_and_offset():
    data = datums(SIMPLE, [{"id": 1, "key": "abc"}, {"id": 2, "key": "defgh"}])
    with pytest.raises(MalformedRecordError) as caught:
        read(data[:-2], {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(SIMPLE)})
    assert (caught.value.record, caught.value.offset) == (1, 6)   # id 1, union branch, length 3, "abc"
    assert "record 1 (at byte 6)" in str(caught.value)


@pytest.mark.parametrize("schema, datum, value", [
    ({"name": "id", "type": "int"}, b"\xff" * 9 + b"\x01", "-9223372036854775808"),   # a long's varint
    ({"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2}}, b"\x04\x7f\xff", "precision 5")])   # 32767
def test_a_datum_arrow_cannot_hold_as_its_schema_says_is_a_schema_mismatch(schema, datum, value):
    """fastavro checks neither an int's width nor a decimal's precision; the last batch as the others."""
    text = json.dumps({"type": "record", "name": "r", "fields": [schema]})
    data = datums(json.loads(text), [{schema["name"]: 1 if schema["type"] == "int" else decimal.Decimal(5)}])
    with pytest.raises(SchemaMismatchError, match="^records 0 to 1 do not fit the schema: ") as caught:
        read(data + datum, {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": text})
    assert value in str(caught.value)


def test_schema_text_with_a_container_file_of_that_schema_and_of_another():
    properties = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(SIMPLE)}
    assert read(container(SIMPLE, [{"id": 7, "key": None}]), properties).num_rows == 1
    other = {**SIMPLE, "fields": [{"name": "id", "type": "long"}]}
    with pytest.raises(MalformedRecordError, match="embedded schema is not the schema given"):
        read(container(other, [{"id": 7}]), properties)


def test_schema_name_from_a_registry():
    services = {"registry": (AvroSchemaRegistry, {"test": json.dumps(SIMPLE)})}
    properties = {"Schema Access Strategy": "Use 'Schema Name' Property", "Schema Registry": "registry"}
    table = read(datums(SIMPLE, [{"id": 3, "key": "x"}]), properties, {"schema.name": "test"}, services=services)
    assert table.to_pylist() == [{"id": 3, "key": "x"}]
    with pytest.raises(SchemaNotFoundError, match="lacks"):
        read(b"", properties, {}, services=services)
    with pytest.raises(SchemaNotFoundError, match="no schema named 'other' \\(it has: test\\)"):
        read(b"", properties, {"schema.name": "other"}, services=services)


def test_schema_text_that_is_not_json_is_one_clear_message():
    with pytest.raises(Exception) as caught:
        read(b"", {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": "{not json"})
    assert str(caught.value) == "the Avro schema is not JSON at line 1, column 2: Expecting property name enclosed " \
                                "in double quotes"


# ---------------------------------------------------------------------------------- writing
def test_writer_embeds_the_schema_by_default():
    table = pa.table({"id": pa.array([1, 2], pa.int32()), "key": ["a", None]})
    data, result = write(table)
    assert result.record_count == 2 and result.attributes == {"mime.type": "application/avro-binary"}
    assert list(fastavro.reader(io.BytesIO(data))) == [{"id": 1, "key": "a"}, {"id": 2, "key": None}]


def test_an_empty_record_set_is_a_file_with_its_header():
    data, result = write(pa.schema([("id", pa.int64())]))
    assert result.record_count == 0
    assert list(fastavro.reader(io.BytesIO(data))) == []


def test_writer_converts_arrow_types_nifi_reads_back():
    rows = [{"ts": datetime.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "d": datetime.date(2020, 1, 2),
             "t": datetime.time(1, 2, 3), "m": decimal.Decimal("1.50"), "tags": ["x", None],
             "props": [("a", 1)], "nested": {"bad name": "v", "n": 3}, "odd-name": 1, "big": 2 ** 63 - 1,
             "cat": "blue"}]
    schema = pa.schema([("ts", pa.timestamp("ns", tz="UTC")), ("d", pa.date32()), ("t", pa.time64("us")),
                        ("m", pa.decimal128(5, 2)), ("tags", pa.list_(pa.string())),
                        ("props", pa.map_(pa.string(), pa.int64())),
                        ("nested", pa.struct([("bad name", pa.string()), ("n", pa.uint8())])),
                        ("odd-name", pa.int64()), ("big", pa.uint64()), ("cat", pa.string())])
    table = pa.Table.from_pylist(rows, schema=schema)
    table = table.set_column(9, "cat", table.column("cat").dictionary_encode())
    data, _ = write(table)
    assert list(fastavro.reader(io.BytesIO(data))) == [
        {"ts": datetime.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "d": datetime.date(2020, 1, 2),
         "t": datetime.time(1, 2, 3), "m": decimal.Decimal("1.50"), "tags": ["x", None], "props": {"a": 1},
         "nested": {"bad_name": "v", "n": 3}, "odd_name": 1, "big": 2 ** 63 - 1, "cat": "blue"}]


def test_an_unsigned_long_past_a_signed_one_does_not_fit():
    with pytest.raises(SchemaMismatchError, match="does not fit Avro's int64"):
        write(pa.table({"big": pa.array([2 ** 64 - 1], pa.uint64())}))


def test_round_trip_through_reader_and_writer_keeps_the_schema_text():
    schema = {**SIMPLE, "fields": [{"name": "id", "type": "int"}, {"name": "key", "type": ["string", "null"]}]}
    table = read(container(schema, [{"id": 1, "key": "a"}]))
    data, _ = write(table, {"Schema Write Strategy": "Set 'avro.schema' Attribute"})
    assert fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(schema), None) == {"id": 1, "key": "a"}
    data, result = write(table, {"Schema Write Strategy": "Set 'avro.schema' Attribute"})
    assert to_parsing_canonical_form(json.loads(result.attributes["avro.schema"])) == \
        to_parsing_canonical_form(schema)
    assert json.loads(result.attributes["avro.schema"])["fields"][1]["type"] == ["string", "null"]


@pytest.mark.parametrize("compression, codec", [("DEFLATE", "deflate"), ("BZIP2", "bzip2"), ("LZO", "xz"),
                                                ("NONE", "null")])
def test_compression_format(compression, codec):
    table = pa.table({"id": list(range(100)), "text": ["same text"] * 100})
    data, _ = write(table, {"Compression Format": compression})
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.metadata["avro.codec"] == codec
    assert [r["id"] for r in reader] == list(range(100))


def test_snappy_compresses_with_fastavros_codec():
    table = pa.table({"id": list(range(1000))})
    data, _ = write(table, {"Compression Format": "SNAPPY"})
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.metadata["avro.codec"] == "snappy" and [r["id"] for r in reader] == list(range(1000))


def test_compression_needs_the_embedded_schema():
    with pytest.raises(ValueError, match="only a container file can be compressed"):
        enable_service(AvroRecordSetWriter, {"Schema Write Strategy": "Set 'avro.schema' Attribute",
                                             "Compression Format": "DEFLATE"})


def test_datums_with_the_schema_in_an_attribute_read_back_by_the_reader():
    table = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    data, result = write(table, {"Schema Write Strategy": "Set 'avro.schema' Attribute"})
    assert not data.startswith(b"Obj\x01")
    back = read(data, {"Schema Access Strategy": "Use 'Schema Text' Property"}, result.attributes)
    assert back.to_pylist() == table.to_pylist()


def test_schema_name_strategy_with_a_registry():
    services = {"registry": (AvroSchemaRegistry, {"people": json.dumps(SIMPLE)})}
    properties = {"Schema Write Strategy": "Set 'schema.name' Attribute", "Schema Registry": "registry",
                  "Schema Access Strategy": "Use 'Schema Name' Property", "Schema Name": "people"}
    data, result = write(pa.table({"id": [5], "key": ["k"], "dropped": [1.5]}), properties, services=services)
    assert result.attributes["schema.name"] == "people"
    assert fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(SIMPLE), None) == {"id": 5, "key": "k"}


def test_a_schema_cache_keeps_the_schema_the_datums_are_written_with_and_names_it():
    """NiFi's SchemaRegistryRecordSetWriter with a 'Schema Cache': the schema written is cached and
    its identifier is the FlowFile's ``schema.cache.identifier``; a container file (its header holds
    the schema) is written without it, as NiFi's AvroRecordSetWriter writes it."""
    assert AvroRecordSetWriter.NIFI_PROPERTY_NAMES["schema-cache"] in AvroRecordSetWriter.descriptor_map()
    services = {"cache": (VolatileSchemaCache, {})}
    given = {"Schema Cache": "cache", "Schema Access Strategy": "Use 'Schema Text' Property",
             "Schema Text": json.dumps(SIMPLE)}
    table = pa.table({"id": pa.array([5], pa.int64()), "key": ["k"], "dropped": [1.5]})
    writer = enable_service(AvroRecordSetWriter, {**given, "Schema Write Strategy": "Set 'avro.schema' Attribute"},
                            services=services)
    records = writer.create_writer(writer.write_schema({}, table.schema), out := io.BytesIO(), {})
    records.write_batch(table.to_batches()[0])
    attributes = records.finish().attributes
    kept = writer._context.service("Schema Cache").get_schema(attributes["schema.cache.identifier"])
    assert kept.names == ["id", "key"] and avro_text(kept) == attributes["avro.schema"]
    written = fastavro.parse_schema(json.loads(attributes["avro.schema"]))
    assert fastavro.schemaless_reader(io.BytesIO(out.getvalue()), written, None) == {"id": 5, "key": "k"}
    data, embedded = write(table, {**given, "Schema Write Strategy": "Embed Avro Schema"}, services=services)
    assert embedded.attributes == {"mime.type": "application/avro-binary"}
    assert list(fastavro.reader(io.BytesIO(data))) == [{"id": 5, "key": "k"}]


def test_writing_to_a_readable_stream_at_a_later_position():
    writer = enable_service(AvroRecordSetWriter)
    table = pa.table({"id": [1]})
    out = io.BytesIO(b"previous content")
    out.seek(0, io.SEEK_END)
    records = writer.create_writer(table.schema, out, {})
    records.write_batch(table.to_batches()[0])
    records.finish()
    assert list(fastavro.reader(io.BytesIO(out.getvalue()[16:]))) == [{"id": 1}]


def test_decimals_on_bytes_and_fixed_round_trip():
    schema = {"namespace": "nifi", "name": "decimal_types", "type": "record", "fields": [
        {"name": "dec_bytes", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "dec_fixed", "type": {"type": "fixed", "name": "decfixed", "size": 4, "logicalType": "decimal",
                                       "precision": 9, "scale": 2}}]}
    row = {"dec_bytes": decimal.Decimal("1234567.89"), "dec_fixed": decimal.Decimal("-0.01")}
    table = read(container(schema, [row]))
    data, _ = write(table)
    assert list(fastavro.reader(io.BytesIO(data))) == [row]


def test_fixed_of_the_wrong_length_does_not_fit():
    schema = {"type": "record", "name": "r", "fields": [{"name": "fixed", "type": {"type": "fixed", "name": "f16",
                                                                                   "size": 16}}]}
    table = pa.table({"fixed": [bytes(range(15))]})
    with pytest.raises(SchemaMismatchError) as caught:
        write(table, {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(schema)})
    assert str(caught.value).startswith("field 'fixed' of record 0 is b'\\x00\\x01")
    assert "which does not fit ARRAY[BYTE] (Failed casting from binary to fixed_size_binary[16]: widths must match)" \
        in str(caught.value)


def test_a_value_that_does_not_fit_the_writers_schema_names_field_record_and_value():
    properties = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(SIMPLE)}
    with pytest.raises(SchemaMismatchError, match="field 'id' of record 1 is \"two\", which does not fit INT"):
        write(pa.table({"id": ["1", "two"], "key": ["a", "b"]}), properties)
    with pytest.raises(SchemaMismatchError, match="field 'id' of record 0 is null"):
        write(pa.table({"key": ["a"]}), properties)


def test_an_enum_value_outside_its_symbols():
    schema = {"type": "record", "name": "r", "fields": [{"name": "k", "type": {"type": "enum", "name": "K",
                                                                               "symbols": ["A", "B"]}}]}
    properties = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(schema)}
    with pytest.raises(SchemaMismatchError, match="record 2 does not fit the Avro schema"):
        write(pa.table({"k": ["A", "B", "C"]}), properties)
    assert avro_to_arrow(schema).field("k").metadata[NIFI_TYPE] == b"ENUM"


def test_nifi_names_map_onto_declared_properties():
    for service in (AvroReader, AvroRecordSetWriter):
        declared = set(service.descriptor_map())
        assert {"Cache Size"} <= declared
        assert service.NIFI_PROPERTY_NAMES["cache-size"] == "Cache Size"
    assert AvroRecordSetWriter.NIFI_PROPERTY_NAMES["compression-format"] == "Compression Format"
    assert AvroRecordSetWriter.NIFI_VALUES["Schema Write Strategy"]["avro-embedded"] == "Embed Avro Schema"
    assert AvroReader.NIFI_VALUES["Schema Access Strategy"]["embedded-avro-schema"] == "Use Embedded Avro Schema"


# ---------------------------------------------------------------------------------- numpy's encoding
FLAT = {"type": "record", "name": "flat", "fields": [
    {"name": "i", "type": ["null", "int"]}, {"name": "l", "type": "long"}, {"name": "f", "type": ["float", "null"]},
    {"name": "d", "type": ["null", "double"]}, {"name": "b", "type": ["null", "boolean"]},
    {"name": "s", "type": ["null", "string"]}, {"name": "y", "type": ["bytes", "null"]},
    {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}]},
    {"name": "t", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "n", "type": "null"}]}
flat_rows = st.lists(st.fixed_dictionaries({
    "i": st.none() | st.integers(-2 ** 31, 2 ** 31 - 1), "l": st.integers(-2 ** 63, 2 ** 63 - 1),
    "f": st.none() | st.floats(width=32, allow_nan=False), "d": st.none() | st.floats(allow_nan=False),
    "b": st.none() | st.booleans(), "s": st.none() | st.text(), "y": st.none() | st.binary(),
    "e": st.none() | st.sampled_from(["A", "B", "C"]),
    "t": st.none() | st.integers(-2 ** 60, 2 ** 60), "n": st.none()}), max_size=40)


def test_a_flat_schema_is_encoded_by_numpy():
    assert _Plan(avro_to_arrow(FLAT)).flat is not None
    assert _Plan(avro_to_arrow(LOGICAL)).flat is None   # a decimal: fastavro writes it


@settings(max_examples=60, deadline=None)
@given(rows=flat_rows, cut=st.integers(0, 5))
def test_numpy_encoding_is_fastavros_byte_for_byte(rows, cut):
    schema = avro_to_arrow(FLAT)
    table = pa.Table.from_pylist(rows, schema=schema).slice(min(cut, len(rows)))   # sliced arrays too
    data, result = write(table, {"Schema Access Strategy": "Use 'Schema Text' Property",
                                 "Schema Text": json.dumps(FLAT), "Schema Write Strategy": "Do Not Write Schema"})
    expected = io.BytesIO()
    for row in rows[min(cut, len(rows)):]:
        fastavro.schemaless_writer(expected, fastavro.parse_schema(FLAT), row)
    assert data == expected.getvalue()
    assert result.record_count == table.num_rows


def test_an_enum_value_outside_its_symbols_leaves_numpy_for_fastavros_message():
    table = pa.table({"e": ["A", "Z"]})
    with pytest.raises(SchemaMismatchError, match="record 1 does not fit the Avro schema"):
        write(table, {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(
            {"type": "record", "name": "r", "fields": [{"name": "e", "type": {"type": "enum", "name": "E",
                                                                              "symbols": ["A"]}}]})})
