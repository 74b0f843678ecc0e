"""NiFi's record types on Arrow and the Avro schema mapping (flowactors.sdk.records.schema).

Cases from NiFi's TestAvroTypeUtil (primitive types, invalid field names as aliases, nested
record names, enums, logical types) and the Avro test schemas of its record serialization
services (datatypes.avsc, logical-types.avsc, multiple-types.avsc, decimals-bytes-fixed.avsc).
"""

from __future__ import annotations

import datetime
import decimal
import json

import fastavro
import pyarrow as pa
import pytest
from fastavro.schema import to_parsing_canonical_form

from flowactors.sdk.records import SCHEMA_NAME_KEY, RecordError, SchemaMismatchError
from flowactors.sdk.records.schema import (AVRO_DEFAULT, AVRO_SCHEMA_TEXT, BIGINT, CHOICE_MEMBERS, ENUM_SYMBOLS,
                                           NIFI_TYPE, arrow_to_avro, avro_field_name, avro_text, avro_to_arrow,
                                           choice_field, choice_storage, conform, merge_schemas, nifi_type_name,
                                           to_choice_storage)
from tests.records_helpers import LOGICAL

DATATYPES = {"namespace": "nifi", "name": "data_types", "type": "record", "fields": [
    {"name": "string", "type": "string"}, {"name": "int", "type": "int"}, {"name": "long", "type": "long"},
    {"name": "double", "type": "double"}, {"name": "float", "type": "float"}, {"name": "boolean", "type": "boolean"},
    {"name": "bytes", "type": "bytes"}, {"name": "nullOrLong", "type": ["null", "long"]},
    {"name": "array", "type": {"type": "array", "items": "int"}},
    {"name": "record", "type": {"type": "record", "name": "subRecord", "fields": [{"name": "field1", "type": "string"}]}},
    {"name": "map", "type": {"type": "map", "values": "subRecord"}}]}
MULTIPLE = {"namespace": "nifi", "name": "data_types", "type": "record", "fields": [
    {"name": "field", "type": ["null", "int", {"type": "array", "items": "int"}, "string"]}]}


def without_text(schema: pa.Schema) -> pa.Schema:
    """The schema as a processor that changed it would hand it on: no Avro text kept."""
    return schema.with_metadata({k: v for k, v in (schema.metadata or {}).items() if k != AVRO_SCHEMA_TEXT})


def canonical(avro: dict) -> str:
    return to_parsing_canonical_form(fastavro.parse_schema(avro))


# ---------------------------------------------------------------------------------- Avro -> Arrow
def test_avro_primitive_and_complex_types_map_to_arrow_types():
    schema = avro_to_arrow(DATATYPES)
    assert [(f.name, f.type, f.nullable) for f in schema][:8] == [
        ("string", pa.string(), False), ("int", pa.int32(), False), ("long", pa.int64(), False),
        ("double", pa.float64(), False), ("float", pa.float32(), False), ("boolean", pa.bool_(), False),
        ("bytes", pa.binary(), False), ("nullOrLong", pa.int64(), True)]
    assert schema.field("array").type == pa.list_(pa.field("item", pa.int32(), False))
    sub = pa.struct([pa.field("field1", pa.string(), False)])
    assert schema.field("record").type == sub
    assert schema.field("record").metadata[b"avro.name"] == b"nifi.subRecord"
    assert schema.field("map").type == pa.map_(pa.string(), pa.field("value", sub, False))
    assert schema.metadata[SCHEMA_NAME_KEY] == b"nifi.data_types"
    assert [nifi_type_name(f) for f in schema] == [
        "STRING", "INT", "LONG", "DOUBLE", "FLOAT", "BOOLEAN", "ARRAY[BYTE]", "LONG", "ARRAY[INT]", "RECORD",
        "MAP<RECORD>"]


def test_logical_types_map_to_arrow_temporal_and_decimal_types():
    schema = avro_to_arrow(LOGICAL)
    assert schema.types == [pa.time32("ms"), pa.time64("us"), pa.timestamp("ms", tz="UTC"),
                            pa.timestamp("us", tz="UTC"), pa.date32(), pa.decimal128(5, 2)]
    assert [nifi_type_name(f) for f in schema] == ["TIME", "TIME", "TIMESTAMP", "TIMESTAMP", "DATE", "DECIMAL[5,2]"]


def test_decimal_on_bytes_and_fixed_and_past_38_digits():
    schema = avro_to_arrow({"type": "record", "name": "decimal_types", "fields": [
        {"name": "dec_bytes", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "dec_fixed", "type": {"type": "fixed", "name": "decfixed", "size": 4, "logicalType": "decimal",
                                       "precision": 9, "scale": 2}},
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 0}}]})
    assert schema.types == [pa.decimal128(9, 2), pa.decimal128(9, 2), pa.decimal256(50, 0)]
    back = arrow_to_avro(without_text(schema))
    assert back["fields"][1]["type"] == {"type": "fixed", "name": "decfixed", "size": 4, "logicalType": "decimal",
                                         "precision": 9, "scale": 2}


def test_uuid_enum_and_fixed_keep_nifi_types_in_field_metadata():
    schema = avro_to_arrow({"type": "record", "name": "r", "namespace": "ex", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "answer", "type": {"type": "enum", "name": "Answer", "symbols": ["YES", "NO"]}},
        {"name": "md5", "type": {"type": "fixed", "name": "MD5", "size": 16}}]})
    assert schema.types == [pa.string(), pa.string(), pa.binary(16)]
    assert schema.field("id").metadata[NIFI_TYPE] == b"UUID"
    assert json.loads(schema.field("answer").metadata[ENUM_SYMBOLS]) == ["YES", "NO"]
    assert [nifi_type_name(f) for f in schema] == ["UUID", "ENUM[YES, NO]", "ARRAY[BYTE]"]
    fields = arrow_to_avro(without_text(schema))["fields"]
    assert fields[0]["type"] == {"type": "string", "logicalType": "uuid"}
    assert fields[1]["type"] == {"type": "enum", "name": "Answer", "namespace": "ex", "symbols": ["YES", "NO"]}
    assert fields[2]["type"] == {"type": "fixed", "name": "MD5", "namespace": "ex", "size": 16}


def test_union_of_several_types_is_a_choice_held_as_string():
    schema = avro_to_arrow(MULTIPLE)
    field = schema.field("field")
    assert field.type == pa.string() and field.nullable
    assert field.metadata[NIFI_TYPE] == b"CHOICE"
    assert nifi_type_name(field) == "CHOICE[INT, ARRAY[INT], STRING]"
    assert arrow_to_avro(without_text(schema))["fields"][0]["type"] == [
        "null", "int", {"type": "array", "items": "int"}, "string"]


def test_choice_storage_is_the_widest_member_arrow_can_hold():
    assert choice_storage([pa.int32(), pa.int64()]) == pa.int64()
    assert choice_storage([pa.int32(), pa.float64()]) == pa.float64()
    assert choice_storage([pa.decimal128(5, 2), pa.decimal128(10, 0)]) == pa.decimal128(12, 2)
    assert choice_storage([pa.int32(), pa.string()]) == pa.string()
    assert choice_storage([pa.struct([("a", pa.int32())]), pa.struct([("b", pa.string())])]) == \
        pa.struct([("a", pa.int32()), ("b", pa.string())])
    assert to_choice_storage([5, "x", [1, 2], None, True], pa.string()) == ["5", "x", "[1,2]", None, "true"]
    field = choice_field("c", [pa.int32(), pa.string()])
    assert json.loads(field.metadata[CHOICE_MEMBERS]) == ["int", "string"]


def test_record_full_name_goes_into_schema_metadata_and_back():
    schema = avro_to_arrow('{"type": "record", "name": "User", "namespace": "example.avro", "fields": []}')
    assert schema.metadata[SCHEMA_NAME_KEY] == b"example.avro.User"
    avro = arrow_to_avro(without_text(schema))
    assert (avro["name"], avro["namespace"]) == ("User", "example.avro")
    assert arrow_to_avro(pa.schema([]), name="com.acme.Order")["namespace"] == "com.acme"


def test_avro_text_round_trip_keeps_the_original_text_while_the_schema_is_unchanged():
    text = json.dumps(MULTIPLE | {"fields": [{"name": "n", "type": ["int", "null"]}] + MULTIPLE["fields"]})
    schema = avro_to_arrow(text)
    assert schema.metadata[AVRO_SCHEMA_TEXT] == text.encode()
    assert arrow_to_avro(schema) == json.loads(text)   # the union order ["int", "null"] survives
    changed = schema.append(pa.field("extra", pa.int32()))
    fields = arrow_to_avro(changed)["fields"]
    assert [f["name"] for f in fields] == ["n", "field", "extra"]
    assert fields[0]["type"] == ["null", "int"]


@pytest.mark.parametrize("avro", [DATATYPES, LOGICAL, MULTIPLE])
def test_avro_arrow_avro_round_trip_is_the_same_schema(avro):
    assert canonical(arrow_to_avro(without_text(avro_to_arrow(avro)))) == canonical(avro)


def test_named_type_used_twice_is_defined_once_then_referenced():
    avro = arrow_to_avro(without_text(avro_to_arrow(DATATYPES)))
    assert avro["fields"][9]["type"]["name"] == "subRecord"
    assert avro["fields"][10]["type"] == {"type": "map", "values": "nifi.subRecord"}


def test_recursive_record_is_a_clear_error():
    text = '{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}'
    with pytest.raises(RecordError, match="'Node' contains itself.*recursive"):
        avro_to_arrow(text)


@pytest.mark.parametrize("text, message", [
    ('{"type": "record", "name": "x", "fields": [{"name": "a" "type": "int"}]}',
     "not JSON at line 1, column 57: Expecting ',' delimiter"),
    ('{"type": "record", "name": "x", "fields": [{"name": "a", "type": "strin"}]}', "at a: unknown type 'strin'"),
    ('{"type": "record", "name": "x", "fields": [{"name": "r", "type": {"type": "record", "name": "y", "fields": '
     '[{"name": "b", "type": {"type": "array"}}]}}]}', "at r.b: an Avro array needs 'items'"),
    ('"string"', "must be a record, not \"string\""),
    ('{"type": "record", "name": "x", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
     "the field name 'a' is used twice"),
    ('{"type": "record", "name": "x", "fields": [{"name": "a", "type": "int", "default": "NAN"}]}',
     "Default value <NAN> must match schema type: int"),
    ('{"type": "record", "name": "x", "fields": [{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", '
     '"precision": 2, "scale": 5}}]}', "at d: a decimal needs 0 <= scale <= precision"),
])
def test_bad_schema_text_gives_one_line_saying_where(text, message):
    with pytest.raises(RecordError) as caught:
        avro_to_arrow(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_strict_names_and_the_lenient_mode():
    text = '{"type": "record", "name": "User", "namespace": "example-avro", "fields": [{"name": "@name", "type": "string"}]}'
    with pytest.raises(RecordError, match="namespace"):
        avro_to_arrow(text)
    assert avro_to_arrow(text, strict=False).names == ["@name"]


# ---------------------------------------------------------------------------------- Arrow -> Avro
def test_nifi_primitive_types_become_nullable_avro_unions_and_come_back():
    person = pa.struct([("name", pa.string()), ("dob", pa.date32())])
    schema = pa.schema([
        ("int", pa.int32()), ("long", pa.int64()),
        pa.field("string", pa.string(), metadata={AVRO_DEFAULT: b'"hola"'}), ("byte", pa.int8()),
        pa.field("char", pa.string(), metadata={NIFI_TYPE: b"CHAR"}), ("short", pa.int16()),
        ("decimal", pa.decimal128(30, 10)), ("double", pa.float64()), ("float", pa.float32()),
        ("time", pa.time32("ms")), ("date", pa.date32()), ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("strings", pa.list_(pa.string())), ("map", pa.map_(pa.string(), pa.int64())), ("person", person)])
    avro = arrow_to_avro(schema)
    assert (avro["name"], avro["namespace"]) == ("nifiRecord", "org.apache.nifi")
    for field in avro["fields"]:
        assert isinstance(field["type"], list) and "null" in field["type"], field["name"]
    assert avro["fields"][2] == {"name": "string", "type": ["string", "null"], "default": "hola"}
    after = avro_to_arrow(avro)
    assert [nifi_type_name(f) for f in after] == [
        "INT", "LONG", "STRING", "INT", "STRING", "INT", "DECIMAL[30,10]", "DOUBLE", "FLOAT", "TIME", "DATE",
        "TIMESTAMP", "ARRAY[STRING]", "MAP<LONG>", "RECORD"]
    assert after.field("string").metadata[AVRO_DEFAULT] == b'"hola"'
    assert after.field("person").type == pa.struct([("name", pa.string()), ("dob", pa.date32())])


def test_invalid_field_names_become_valid_with_the_original_as_alias():
    schema = pa.schema([(n, pa.string()) for n in ("valid", "$invalid2", "3invalid3", "  __ Another ONE!!")])
    fields = arrow_to_avro(schema)["fields"]
    assert [f["name"] for f in fields] == ["valid", "_invalid2", "_invalid3", "_____Another_ONE__"]
    assert [f.get("aliases") for f in fields] == [None, ["$invalid2"], ["3invalid3"], ["  __ Another ONE!!"]]
    assert avro_field_name("") == "UNNAMED_FIELD"
    fastavro.parse_schema(arrow_to_avro(schema))


def test_nested_records_are_named_after_their_path_as_nifi_names_them():
    level3 = pa.struct([("stringField", pa.string())])
    schema = pa.schema([("multiLevelRecord", pa.struct([("level2Record", pa.struct([("level3Record", level3)]))]))])
    level1 = arrow_to_avro(schema)["fields"][0]["type"][1]
    level2 = level1["fields"][0]["type"][1]
    assert [level1["name"], level2["name"], level2["fields"][0]["type"][1]["name"]] == [
        "multiLevelRecordType", "multiLevelRecord_level2RecordType", "multiLevelRecord_level2Record_level3RecordType"]


def test_same_field_name_in_different_records_gives_different_record_names():
    child1, child2 = pa.struct([("childRecordField1", pa.string())]), pa.struct([("childRecordField2", pa.string())])
    schema = pa.schema([("record1", pa.struct([("again", child1)])), ("record2", pa.struct([("again", child2)]))])
    avro = arrow_to_avro(schema)
    names = [f["type"][1]["fields"][0]["type"][1]["name"] for f in avro["fields"]]
    assert names == ["record1_againType", "record2_againType"]
    fastavro.parse_schema(avro)


def test_enum_bigint_and_naive_timestamps():
    schema = pa.schema([
        pa.field("answer", pa.string(), False, {NIFI_TYPE: b"ENUM", ENUM_SYMBOLS: b'["YES", "NO"]'}),
        pa.field("big", BIGINT, False, {NIFI_TYPE: b"BIGINT"}), pa.field("local", pa.timestamp("us"), False),
        pa.field("seconds", pa.timestamp("s", tz="UTC"), False)])
    fields = arrow_to_avro(schema)["fields"]
    assert fields[0]["type"] == {"type": "enum", "name": "answer", "namespace": "org.apache.nifi",
                                 "symbols": ["YES", "NO"]}
    assert fields[1]["type"] == "string"
    assert fields[2]["type"] == {"type": "long", "logicalType": "local-timestamp-micros"}
    assert fields[3]["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert [nifi_type_name(f) for f in schema] == ["ENUM[YES, NO]", "BIGINT", "TIMESTAMP", "TIMESTAMP"]
    assert avro_to_arrow(arrow_to_avro(schema)).field("local").type == pa.timestamp("us")


def test_avro_text_is_compact_json_fastavro_parses():
    text = avro_text(pa.schema([("a", pa.int64())]))
    assert text == ('{"type":"record","name":"nifiRecord","namespace":"org.apache.nifi",'
                    '"fields":[{"name":"a","type":["null","long"]}]}')
    fastavro.parse_schema(json.loads(text))


def test_a_type_avro_cannot_hold_names_the_field():
    with pytest.raises(RecordError, match="field 'took' is of Arrow type duration"):
        arrow_to_avro(pa.schema([("took", pa.duration("s"))]))


# ---------------------------------------------------------------------------------- conform
def test_conform_orders_casts_fills_and_drops():
    target = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()),
                        ("n", pa.struct([pa.field("a", pa.int32(), False), ("b", pa.string())]))])
    batch = pa.RecordBatch.from_pylist([{"extra": 1, "n": {"a": "3", "c": 1}, "id": "1"},
                                        {"extra": 2, "n": {"a": "4", "c": 2}, "id": "2"}])
    result = conform(batch, target)
    assert result.schema == target
    assert result.to_pylist() == [{"id": 1, "name": None, "n": {"a": 3, "b": None}},
                                  {"id": 2, "name": None, "n": {"a": 4, "b": None}}]
    table = conform(pa.Table.from_batches([batch, batch]), target)
    assert isinstance(table, pa.Table) and table.num_rows == 4


def test_conform_names_the_field_record_and_value_that_do_not_fit():
    target = pa.schema([("id", pa.int64())])
    batch = pa.RecordBatch.from_pylist([{"id": "1"}, {"id": "2"}, {"id": "three"}, {"id": "4"}])
    with pytest.raises(SchemaMismatchError) as caught:
        conform(batch, target)
    assert str(caught.value).startswith("field 'id' of record 2 is \"three\", which does not fit LONG")


def test_conform_refuses_null_where_the_schema_allows_none():
    target = pa.schema([pa.field("id", pa.int64(), False),
                        ("items", pa.list_(pa.struct([pa.field("sku", pa.string(), False)])))])
    with pytest.raises(SchemaMismatchError, match="field 'id' of record 1 is null"):
        conform(pa.RecordBatch.from_pylist([{"id": 1}, {"id": None}]), target)
    rows = [{"id": 1, "items": [{"sku": "a"}]}, {"id": 2, "items": None}, {"id": 3, "items": [{"sku": "b"}, {}]}]
    with pytest.raises(SchemaMismatchError, match=r"field 'items\[\].sku' of record 2 is null, .*\(STRING\)"):
        conform(pa.RecordBatch.from_pylist(rows), target)


def test_conform_writes_structures_into_a_string_as_json_and_truncates_finer_timestamps():
    batch = pa.RecordBatch.from_pylist([{"a": {"x": 1}, "t": datetime.datetime(2020, 1, 1, 0, 0, 0, 1500)}])
    result = conform(batch, pa.schema([("a", pa.string()), ("t", pa.timestamp("ms"))]))
    assert result.to_pylist() == [{"a": '{"x":1}', "t": datetime.datetime(2020, 1, 1, 0, 0, 0, 1000)}]


def test_conform_decimal_and_dates_from_text():
    result = conform(pa.RecordBatch.from_pylist([{"d": "2020-01-02", "m": "12.50"}]),
                     pa.schema([("d", pa.date32()), ("m", pa.decimal128(5, 2))]))
    assert result.to_pylist() == [{"d": datetime.date(2020, 1, 2), "m": decimal.Decimal("12.50")}]


# ---------------------------------------------------------------------------------- merging
def test_merge_widens_numbers_and_falls_back_to_string():
    a = pa.schema([("i", pa.int32()), ("l", pa.int32()), ("s", pa.string()), ("f", pa.float32()),
                   ("u", pa.uint32())])
    b = pa.schema([("i", pa.int64()), ("l", pa.float64()), ("s", pa.int64()), ("f", pa.float32()),
                   ("u", pa.int8())])
    assert merge_schemas(a, b).types == [pa.int64(), pa.float64(), pa.string(), pa.float32(), pa.int64()]


def test_merge_adds_new_fields_nullable_and_merges_structs_lists_and_maps():
    a = pa.schema([pa.field("id", pa.int32(), False), ("s", pa.struct([("x", pa.int8())])),
                   ("l", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32()))])
    b = pa.schema([pa.field("id", pa.int32(), False), ("s", pa.struct([("y", pa.string()), ("x", pa.int64())])),
                   ("l", pa.list_(pa.float64())), ("m", pa.map_(pa.string(), pa.string())),
                   pa.field("new", pa.bool_(), False)])
    merged = merge_schemas(a, b)
    assert merged.names == ["id", "s", "l", "m", "new"]
    assert not merged.field("id").nullable and merged.field("new").nullable
    assert merged.field("s").type == pa.struct([("x", pa.int64()), ("y", pa.string())])
    assert merged.field("l").type == pa.list_(pa.float64())
    assert merged.field("m").type == pa.map_(pa.string(), pa.string())


def test_merge_of_types_that_do_not_widen_is_a_choice():
    merged = merge_schemas(pa.schema([("a", pa.int32())]), pa.schema([("a", pa.bool_())]))
    assert merged.field("a").type == pa.string()
    assert nifi_type_name(merged.field("a")) == "CHOICE[INT, BOOLEAN]"
    merged = merge_schemas(merged, pa.schema([("a", pa.float32())]))
    assert nifi_type_name(merged.field("a")) == "CHOICE[INT, BOOLEAN, FLOAT]"


def test_merge_of_null_and_temporal_types():
    merged = merge_schemas(pa.schema([pa.field("a", pa.null()), ("t", pa.timestamp("ms")), ("d", pa.date32())]),
                           pa.schema([pa.field("a", pa.int64(), False), ("t", pa.timestamp("us")),
                                      ("d", pa.timestamp("ms"))]))
    assert merged.types == [pa.int64(), pa.timestamp("us"), pa.timestamp("ms")]
    assert merged.field("a").nullable
