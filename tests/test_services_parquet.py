"""ParquetReader and ParquetRecordSetWriter (flowactors.services.records.parquet).

Cases from NiFi's TestParquetReader (all users; a part by record.offset and record.count, within
a file range) and TestParquetRecordSetWriter (users written, the schema attributes), plus bad
input and streaming.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowactors.sdk.records import BATCH_RECORDS, MalformedRecordError, SchemaMismatchError
from flowactors.sdk.records.schema import ENUM_SYMBOLS, NIFI_TYPE, avro_to_arrow, nifi_type_name
from flowactors.services.records.parquet import ParquetReader, ParquetRecordSetWriter
from flowactors.services.records.schema_cache import VolatileSchemaCache
from flowactors.testing import enable_service
from tests.records_helpers import CountingStream

USER = {"type": "record", "name": "User", "namespace": "nifi", "fields": [
    {"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"]},
    {"name": "favorite_color", "type": ["null", "string"]}]}


def users(count: int, start: int = 0) -> pa.Table:
    return pa.table({"name": [f"Bob{i}" for i in range(start, start + count)],
                     "favorite_number": pa.array(range(start, start + count), pa.int32()),
                     "favorite_color": [f"blue{i}" for i in range(start, start + count)]})


def write(table: pa.Table, properties: dict | None = None, attributes: dict | None = None, chunk: int = 1000):
    writer = enable_service(ParquetRecordSetWriter, properties)
    out = io.BytesIO()
    records = writer.create_writer(writer.write_schema(attributes or {}, table.schema), out, attributes or {})
    for batch in table.to_batches(max_chunksize=chunk):
        records.write_batch(batch)
    result = records.finish()
    return out.getvalue(), result


def reader(data: bytes, attributes: dict | None = None):
    return enable_service(ParquetReader).create_reader(attributes or {}, io.BytesIO(data), len(data))


def test_read_users_written_by_the_writer():
    data, result = write(users(1000))
    assert result.record_count == 1000 and result.attributes == {"mime.type": "application/parquet"}
    assert reader(data).read_all().equals(users(1000))


def test_part_by_record_offset_and_count():
    data, _ = write(users(5000), {"Row Group Size": "16 KB"})
    assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups > 3
    part = reader(data, {"record.offset": "4020", "record.count": "2"}).read_all()
    assert part.equals(users(2, 4020))
    assert reader(data, {"record.offset": "4990"}).read_all().equals(users(10, 4990))
    assert reader(data, {"record.offset": "1", "record.count": "0"}).read_all().num_rows == 0


def test_part_by_file_range_then_offset():
    data, _ = write(users(1000), {"Row Group Size": "4 KB"}, chunk=100)
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
    assert len(groups) >= 3
    first_rows = groups[0].num_rows
    second = groups[1].column(0)
    start = second.dictionary_page_offset or second.data_page_offset
    end_group = groups[2].column(0)
    end = end_group.dictionary_page_offset or end_group.data_page_offset
    attributes = {"parquet.file.range.startOffset": str(start), "parquet.file.range.endOffset": str(end),
                  "record.offset": "3"}
    assert reader(data, attributes).read_all().equals(users(groups[1].num_rows - 3, first_rows + 3))


def test_projected_batches_read_only_the_named_columns_chunks():
    data, _ = write(users(20_000), {"Row Group Size": "64 KB"}, chunk=5000)
    every, some = CountingStream(data), CountingStream(data)
    assert pa.Table.from_batches(list(enable_service(ParquetReader).create_reader({}, every, len(data)).batches())) \
        .equals(users(20_000))
    numbers = pa.Table.from_batches(list(enable_service(ParquetReader).create_reader({}, some, len(data))
                                         .projected_batches(["favorite_number"])))
    assert numbers.schema.names == ["favorite_number"] and numbers.num_rows == 20_000
    assert some.read_bytes < every.read_bytes / 3   # the two text columns' chunks are not read
    part = reader(data, {"record.offset": "10", "record.count": "5"}).projected_batches(["favorite_number", "name"])
    assert pa.Table.from_batches(list(part)).to_pydict() == {"favorite_number": list(range(10, 15)),
                                                             "name": [f"Bob{i}" for i in range(10, 15)]}


def test_bad_part_attribute_is_one_clear_message():
    data, _ = write(users(10))
    with pytest.raises(MalformedRecordError, match="attribute 'record.offset' is 'ten', not a whole number"):
        reader(data, {"record.offset": "ten"})


def test_row_groups_are_read_one_batch_at_a_time():
    table = pa.table({"id": pa.array(range(3 * BATCH_RECORDS), pa.int64())})
    data, _ = write(table, {"Row Group Size": "512 KB"}, chunk=BATCH_RECORDS)
    stream = CountingStream(data)
    batches = enable_service(ParquetReader).create_reader({}, stream, len(data)).batches()
    first = next(batches)
    assert first.num_rows <= BATCH_RECORDS
    assert stream.read_bytes < len(data) * 0.6
    assert sum(b.num_rows for b in batches) + first.num_rows == 3 * BATCH_RECORDS


def test_nifi_types_survive_a_parquet_round_trip():
    schema = avro_to_arrow({"type": "record", "name": "r", "namespace": "ex", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "address", "type": ["null", {"type": "record", "name": "Address",
                                               "fields": [{"name": "city", "type": "string"}]}]}]})
    row = {"id": "6f1c2f0e-8a4b-4c1d-9a7e-0b1f2c3d4e5f", "kind": "B",
           "at": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc),
           "amount": decimal.Decimal("12.34"), "tags": ["a", "b"], "attrs": [("k", 1)], "address": {"city": "Lyon"}}
    table = pa.Table.from_pylist([row], schema=schema)
    data, _ = write(table)
    back = reader(data)
    assert back.schema().field("kind").metadata[NIFI_TYPE] == b"ENUM"
    assert json.loads(back.schema().field("kind").metadata[ENUM_SYMBOLS]) == ["A", "B"]
    # the same types and metadata (Parquet names a list's item 'element' and a map's entries 'key_value')
    assert [(nifi_type_name(f), f.metadata, f.nullable) for f in back.schema()] == \
        [(nifi_type_name(f), f.metadata, f.nullable) for f in schema]
    assert back.schema().metadata == schema.metadata
    assert back.read_all().to_pylist() == table.to_pylist()


@pytest.mark.parametrize("compression, codec", [("SNAPPY", "SNAPPY"), ("GZIP", "GZIP"), ("ZSTD", "ZSTD"),
                                                ("UNCOMPRESSED", "UNCOMPRESSED"), ("BROTLI", "BROTLI")])
def test_compression_type(compression, codec):
    data, _ = write(users(100), {"Compression Type": compression})
    assert pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0).compression == codec
    assert reader(data).read_all().equals(users(100))


def test_lzo_cannot_be_written():
    with pytest.raises(ValueError, match="'Compression Type' is LZO, which pyarrow cannot write"):
        enable_service(ParquetRecordSetWriter, {"Compression Type": "LZO"})


def test_writer_options():
    data, _ = write(users(100), {"Writer Version": "PARQUET_2_0", "Enable Dictionary Encoding": "false",
                                 "Page Size": "1 KB"})
    column = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0)
    assert "PLAIN_DICTIONARY" not in column.encodings and "RLE_DICTIONARY" not in column.encodings
    assert reader(data).read_all().equals(users(100))


def encodings(data: bytes) -> dict[str, bool]:
    """Whether each column of the first row group is dictionary-encoded."""
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    return {group.column(i).path_in_schema: "RLE_DICTIONARY" in group.column(i).encodings
            for i in range(group.num_columns)}


def test_without_a_dictionary_setting_only_columns_whose_values_repeat_get_one():
    table = users(3000).append_column("team", pa.array(["red", "blue", "green"] * 1000))
    data, _ = write(table)
    assert encodings(data) == {"name": False, "favorite_number": False, "favorite_color": False, "team": True}
    assert reader(data).read_all().equals(table)


@pytest.mark.parametrize("setting", ["true", "false"])
def test_a_dictionary_setting_is_every_column_s(setting):
    data, _ = write(users(100).append_column("team", pa.array(["red"] * 100)), {"Enable Dictionary Encoding": setting})
    assert set(encodings(data).values()) == {setting == "true"}


def test_no_records_make_a_file_of_the_schema():
    data, result = write(users(0))
    assert result.record_count == 0 and reader(data).schema() == users(0).schema
    assert reader(data).read_all().num_rows == 0


def test_schema_write_strategy_and_a_schema_given_as_text():
    properties = {"Schema Write Strategy": "Set 'avro.schema' Attribute",
                  "Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(USER)}
    table = pa.table({"favorite_color": ["red"], "name": ["Ann"], "extra": [1]})
    data, result = write(table, properties)
    assert json.loads(result.attributes["avro.schema"]) == USER
    assert reader(data).read_all().to_pylist() == [{"name": "Ann", "favorite_number": None, "favorite_color": "red"}]


def test_a_record_that_does_not_fit_the_schema():
    properties = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(USER)}
    with pytest.raises(SchemaMismatchError, match="field 'name' of record 1 is null"):
        write(pa.table({"name": ["Ann", None]}), properties)
    with pytest.raises(SchemaMismatchError, match="field 'favorite_number' of record 0 is \"many\""):
        write(pa.table({"name": ["Ann"], "favorite_number": ["many"]}), properties)


def test_writing_from_a_later_position_of_the_output():
    writer = enable_service(ParquetRecordSetWriter)
    out = io.BytesIO(b"previous")
    out.seek(0, io.SEEK_END)
    records = writer.create_writer(users(3).schema, out, {})
    records.write_batch(users(3).to_batches()[0])
    records.finish()
    assert pq.read_table(io.BytesIO(out.getvalue()[8:])).equals(users(3))


@pytest.mark.parametrize("data, message", [
    (b"", "too short to be a Parquet file"), (b"PAR1 this is not parquet PAR1", "not a Parquet file")])
def test_content_that_is_not_parquet(data, message):
    with pytest.raises(MalformedRecordError, match=message):
        reader(data)


def test_truncated_parquet_file():
    data, _ = write(users(1000))
    with pytest.raises(MalformedRecordError, match="not a Parquet file"):
        reader(data[:-100])


def test_corrupt_column_chunk():
    data, _ = write(users(1000), {"Compression Type": "SNAPPY"})
    broken = bytearray(data)
    for position in range(100, 400):
        broken[position] ^= 0x5A
    with pytest.raises(MalformedRecordError, match="cannot be read after record 0"):
        list(reader(bytes(broken)).batches())


def plain(table: pa.Table) -> bytes:
    """``table`` as a Parquet file whose values and names are stored as they are (no compression,
    dictionary, statistics or Arrow schema), so that a byte of one can be changed in place."""
    out = io.BytesIO()
    pq.write_table(table, out, compression="none", use_dictionary=False, write_statistics=False, store_schema=False)
    return out.getvalue()


@pytest.mark.parametrize("column", [pa.array(["ok", "ok", "caf\u00e9"]), pa.array([["ok"], [], ["ok", "caf\u00e9"]]),
                                    pa.array([{"s": "ok"}, {"s": "ok"}, {"s": "caf\u00e9"}])])
def test_text_that_is_not_utf8_is_malformed_naming_the_record_and_field(column):
    data = plain(pa.table({"n": [1, 2, 3], "text": column})).replace("caf\u00e9".encode(), b"caf\xe9\x00")
    with pytest.raises(MalformedRecordError, match="^record 2's field 'text' holds text that is not UTF-8") as caught:
        list(reader(data).batches())
    assert caught.value.record == 2


def test_text_in_ascii_and_beyond_reads_as_it_is():
    table = pa.table({"ascii": ["ok", "fine", ""], "other": ["caf\u00e9", "\u2603", None]})
    assert reader(plain(table)).read_all().equals(table)


def test_the_records_before_text_that_is_not_utf8_are_read():
    data = plain(pa.table({"text": ["ok", "fine", "caf\u00e9"]})).replace("caf\u00e9".encode(), b"caf\xe9\x00")
    assert reader(data, {"record.offset": "0", "record.count": "2"}).read_all().to_pydict() == {"text": ["ok", "fine"]}


def test_a_column_name_that_is_not_utf8_is_malformed():
    data = plain(pa.table({"colname": [1]})).replace(b"colname", b"col\xffame")
    with pytest.raises(MalformedRecordError, match="schema has a name that is not UTF-8"):
        reader(data)


def test_a_record_count_past_the_records_reads_them_all():
    data, _ = write(users(10))
    assert reader(data, {"record.offset": "3", "record.count": "9" * 23}).read_all().equals(users(7, 3))


def test_empty_record_set_is_a_file_with_its_schema():
    data, result = write(users(0))
    assert result.record_count == 0
    back = reader(data)
    assert back.schema().names == ["name", "favorite_number", "favorite_color"]
    assert list(back.batches()) == []


def test_a_schema_cache_keeps_the_schema_written_and_names_it():
    """NiFi's SchemaRegistryRecordSetWriter with a 'Schema Cache': the schema the file is written
    with (here a given one, narrower than the records') is cached, its identifier the FlowFile's
    ``schema.cache.identifier``."""
    assert ParquetRecordSetWriter.NIFI_PROPERTY_NAMES["schema-cache"] in ParquetRecordSetWriter.descriptor_map()
    given = json.dumps({"type": "record", "name": "user", "fields": [{"name": "name", "type": "string"},
                                                                     {"name": "favorite_number", "type": "long"}]})
    writer = enable_service(ParquetRecordSetWriter, {"Schema Cache": "cache", "Schema Text": given,
                                                     "Schema Access Strategy": "Use 'Schema Text' Property"},
                            services={"cache": (VolatileSchemaCache, {})})
    table = users(3)
    records = writer.create_writer(writer.write_schema({}, table.schema), out := io.BytesIO(), {})
    records.write_batch(table.to_batches()[0])
    attributes = records.finish().attributes
    kept = writer._context.service("Schema Cache").get_schema(attributes["schema.cache.identifier"])
    written = pq.read_table(io.BytesIO(out.getvalue()))
    assert kept.names == ["name", "favorite_number"] and kept.field("favorite_number").type == pa.int64()
    assert written.schema.equals(kept, check_metadata=False)


def test_nifi_names_map_onto_declared_properties():
    declared = set(ParquetRecordSetWriter.descriptor_map())
    renamed = {k: v for k, v in ParquetRecordSetWriter.NIFI_PROPERTY_NAMES.items() if not k.startswith("schema")}
    assert set(renamed.values()) - {"Schema Write Strategy"} <= declared
    assert ParquetRecordSetWriter.NIFI_PROPERTY_NAMES["row-group-size"] == "Row Group Size"
    assert not set(ParquetRecordSetWriter.NIFI_IGNORED) & declared
    assert "Avro Read Compatibility" in ParquetReader.NIFI_IGNORED
