"""JsonTreeReader and JsonRecordSetWriter: cases taken from NiFi's TestJsonTreeRowRecordReader,
TestJsonSchemaInference, TestWriteJsonResult and TestJsonRecordSetWriter, plus the streaming and
framing behaviour of this implementation (docs/records/json.md)."""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import json
import re
from functools import partial

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowactors.sdk.records import MalformedRecordError, SchemaMismatchError, SchemaNotFoundError
from flowactors.sdk.records.schema import avro_to_arrow
from flowactors.services.records import json as json_service
from flowactors.services.records.json import JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import enable_service
from tests.records_helpers import CountingStream, read_records, service_reader

ACCOUNTS = [
    {"id": 1, "name": "John Doe", "balance": 4750.89, "address": "123 My Street", "city": "My City", "state": "MS",
     "zipCode": "11111", "country": "USA"},
    {"id": 2, "name": "Jane Doe", "balance": 4820.09, "address": "321 Your Street", "city": "Your City",
     "state": "NY", "zipCode": "33333", "country": "USA"}]
ACCOUNT_SCHEMA = json.dumps({"type": "record", "name": "account", "fields": [
    {"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "balance", "type": "double"},
    {"name": "address", "type": "string"}, {"name": "city", "type": "string"}, {"name": "state", "type": "string"},
    {"name": "zipCode", "type": "string"}, {"name": "country", "type": "string"}]})
TEXT = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": ACCOUNT_SCHEMA}


reader = partial(service_reader, JsonTreeReader)
read = partial(read_records, JsonTreeReader)


def types(schema: pa.Schema) -> dict[str, pa.DataType]:
    return dict(zip(schema.names, schema.types))


# ---------------------------------------------------------------------------------- reading
def test_an_array_is_read_with_the_schema_given_as_text():
    schema, records = read(orjson.dumps(ACCOUNTS, option=orjson.OPT_INDENT_2), TEXT)
    assert schema.names == ["id", "name", "balance", "address", "city", "state", "zipCode", "country"]
    assert types(schema)["id"] == pa.int32() and types(schema)["balance"] == pa.float64()
    assert records == ACCOUNTS


def test_one_object_a_line_is_read():
    data = b"\n".join(orjson.dumps(a) for a in ACCOUNTS)
    assert read(data, TEXT)[1] == ACCOUNTS


def test_an_array_followed_by_objects_is_read_as_nifi_reads_it():
    # NiFi's bank-account-mixed.json: an array, then an object on one line, then one over several lines
    more = [{**ACCOUNTS[0], "id": 3, "state": "ME"}, {**ACCOUNTS[1], "id": 4, "state": "NV"}]
    data = orjson.dumps(ACCOUNTS) + b"\n" + orjson.dumps(more[0]) + b"\n" + orjson.dumps(more[1], option=orjson.OPT_INDENT_2)
    assert [r["id"] for r in read(data)[1]] == [1, 2, 3, 4]


def test_a_single_object_is_one_record():
    schema, records = read(b'{"id": 1, "name": "John Doe"}')
    assert records == [{"id": 1, "name": "John Doe"}]


@pytest.mark.parametrize("data", [b"", b"  \n", b"[]", b" [ ] "])
def test_no_records(data):
    schema, records = read(data)
    assert records == [] and len(schema) == 0


def test_unicode_is_kept():
    schema, records = read('[{"name": "Pāula Gérard 名前", "emoji": "\\ud83d\\ude00"}]'.encode())
    assert records == [{"name": "Pāula Gérard 名前", "emoji": "😀"}]


def test_strings_with_brackets_commas_quotes_and_escapes():
    rows = [{"s": '},{"a":1}', "t": "\\", "u": '"\\"'}, {"s": "}{", "t": "]\\\\[", "u": "\n"}]
    assert read(orjson.dumps(rows))[1] == rows
    assert read(b"\n".join(orjson.dumps(r) for r in rows))[1] == rows


# ---------------------------------------------------------------------------------- inference
def test_inference_reads_every_record():
    # NiFi's TestJsonSchemaInference.testInferenceIncludesAllRecords: a field only the last record has
    rows = [{"id": 1}] * 3 + [{"id": 2, "late": "x"}]
    schema, records = read(orjson.dumps(rows))
    assert schema.names == ["id", "late"] and records[-1] == {"id": 2, "late": "x"}


def test_inferred_types_are_nifi_s():
    schema, records = read(orjson.dumps([
        {"i": 1, "l": 1, "d": 1.5, "b": True, "s": "x", "when": "2017-01-01 00:00:00", "empty": [], "nothing": None,
         "rec": {"a": 1}, "recs": [{"x": 1}], "mixed": 1, "deep": {"a": [1]}},
        {"i": 2, "l": 3_000_000_000, "d": 2, "b": False, "s": "y", "when": "2017-01-02 00:00:00", "empty": [],
         "nothing": None, "rec": {"b": "y"}, "recs": [{"y": "z"}], "mixed": "two", "deep": {"a": []}}]))
    t = types(schema)
    assert (t["i"], t["l"], t["d"], t["b"], t["s"]) == (pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string())
    assert t["when"] == pa.string()   # no Timestamp Format: text stays text, as in NiFi
    assert t["empty"] == pa.list_(pa.string()) and t["nothing"] == pa.string()
    assert t["rec"] == pa.struct([("a", pa.int32()), ("b", pa.string())])   # records merged field by field
    assert t["recs"] == pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())]))
    assert t["mixed"] == pa.string() and records[0]["mixed"] == "1"
    assert records[1]["rec"] == {"a": None, "b": "y"} and records[0]["when"] == "2017-01-01 00:00:00"


def test_a_record_and_a_number_in_one_field_make_a_choice():
    schema, records = read(b'[{"v": {"a": 1}}, {"v": 2}]')
    field = schema.field("v")
    assert field.metadata[b"nifi.type"] == b"CHOICE" and field.type == pa.string()
    assert records == [{"v": '{"a":1}'}, {"v": "2"}]


def test_dates_and_timestamps_are_inferred_in_their_formats():
    properties = {"Timestamp Format": "yyyy/MM/dd HH:mm:ss", "Date Format": "MM/dd/yyyy", "Time Format": "HH:mm:ss"}
    schema, records = read(b'[{"ts": "2017/01/02 03:04:05", "d": "01/02/2017", "t": "10:20:30", "s": "2017/01/02"}]',
                           properties)
    t = types(schema)
    assert (t["ts"], t["d"], t["t"], t["s"]) == (pa.timestamp("ms", tz="UTC"), pa.date32(), pa.time32("ms"), pa.string())
    assert records[0]["ts"] == datetime.datetime(2017, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert records[0]["d"] == datetime.date(2017, 1, 2) and records[0]["t"] == datetime.time(10, 20, 30)


def test_a_type_conflict_inside_a_piece_falls_back_to_python(monkeypatch):
    monkeypatch.setattr(json_service, "BATCH_BYTES", 64)
    rows = [{"a": i if i % 7 else f"text {i}", "n": {"x": i}} for i in range(40)]
    schema, records = read(orjson.dumps(rows))
    assert types(schema)["a"] == pa.string()
    assert [r["a"] for r in records] == [str(r["a"]) for r in rows]


# ---------------------------------------------------------------------------------- given schemas
def avro(fields: list) -> str:
    return json.dumps({"type": "record", "name": "r", "fields": fields})


def test_a_date_is_read_from_text_in_the_date_format():
    # NiFi's testDateCoercedFromString
    schema = avro([{"name": "date", "type": {"type": "int", "logicalType": "date"}}])
    _, records = read(b'{ "date": "2000-01-01" }', {**TEXT, "Schema Text": schema, "Date Format": "yyyy-MM-dd"})
    assert records == [{"date": datetime.date(2000, 1, 1)}]


DATE = avro([{"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]}])


def test_a_date_of_milliseconds_past_what_a_double_holds_is_read_exactly():
    """Days since the epoch, rounded down, counted in whole numbers (a double loses past 2**53)."""
    table = reader(b'[{"d": 9007199254740993}, {"d": -86400001}, {"d": "9007199254740993"}]',
                   {**TEXT, "Schema Text": DATE}).read_all()
    assert table.column("d").cast(pa.int32()).to_pylist() == [104249991, -2, 104249991]


@pytest.mark.parametrize("value, shown", [(b"1e300", "1e+300"), (b"9000000000000000000", "9000000000000000000"),
                                          (b'"9223372036854775808"', '"9223372036854775808"'),
                                          (b'"a\xc2\x85b"', '"a\\x85b"')])
def test_a_date_that_is_no_date_is_a_schema_mismatch_quoting_it_on_one_line(value, shown):
    with pytest.raises(SchemaMismatchError, match=re.escape(f"field 'd' of record 1 is {shown}, which is")):
        read(b'[{"d": 1}, {"d": ' + value + b"}]", {**TEXT, "Schema Text": DATE})


def test_a_timestamp_is_read_from_text_or_from_milliseconds():
    schema = avro([{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}])
    properties = {**TEXT, "Schema Text": schema, "Timestamp Format": "yyyy/MM/dd HH:mm:ss"}
    utc = datetime.timezone.utc
    assert read(b'[{"ts": "2016/11/23 15:34:12"}]', properties)[1] == [{"ts": datetime.datetime(2016, 11, 23, 15, 34, 12, tzinfo=utc)}]
    assert read(b'[{"ts": 1000}]', properties)[1] == [{"ts": datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc)}]


def test_text_is_read_as_the_number_the_schema_says():
    _, records = read(orjson.dumps([{**ACCOUNTS[0], "id": "7", "balance": "1.5"}]), TEXT)
    assert records[0]["id"] == 7 and records[0]["balance"] == 1.5


def test_a_missing_value_of_a_field_that_allows_no_null_is_a_schema_mismatch():
    with pytest.raises(SchemaMismatchError, match="field 'name' of record 0 is null"):
        read(b'[{"id": 1}]', TEXT)


def test_a_value_that_does_not_fit_the_schema_is_a_schema_mismatch():
    # NiFi's testIncorrectSchema: a boolean where a double belongs
    rows = [dict(ACCOUNTS[0]), {**ACCOUNTS[1], "balance": "lots"}]
    with pytest.raises(SchemaMismatchError, match=r"field 'balance' of record 1 is \"lots\""):
        read(orjson.dumps(rows), TEXT)
    with pytest.raises(SchemaMismatchError, match="balance"):
        read(orjson.dumps([{**ACCOUNTS[0], "balance": True}]), TEXT)


def test_a_map_field_is_read():
    schema = avro([{"name": "m", "type": {"type": "map", "values": "int"}}])
    _, records = read(b'[{"m": {"height": 48, "width": 96}}]', {**TEXT, "Schema Text": schema})
    assert records == [{"m": [("height", 48), ("width", 96)]}]


def test_the_schema_name_strategy_needs_the_attribute():
    with pytest.raises(SchemaNotFoundError, match="schema.name"):
        reader(b"[]", {"Schema Access Strategy": "Use 'Schema Name' Property"})


def test_the_schema_text_comes_from_the_avro_schema_attribute_by_default():
    records = reader(orjson.dumps(ACCOUNTS), {"Schema Access Strategy": "Use 'Schema Text' Property"},
                     {"avro.schema": ACCOUNT_SCHEMA})
    assert records.schema() == avro_to_arrow(ACCOUNT_SCHEMA)


# ---------------------------------------------------------------------------------- the starting field
NESTED = {"Starting Field Strategy": "Nested Field"}


def nested(name: str) -> dict:
    return {**NESTED, "Starting Field Name": name}


def test_a_nested_array_is_the_records():
    data = b'{"name": "x", "accounts": [{"id": 42, "balance": 4750.89}, {"id": 43, "balance": 48212.38}]}'
    assert read(data, nested("accounts"))[1] == [{"id": 42, "balance": 4750.89}, {"id": 43, "balance": 48212.38}]


def test_a_nested_object_is_one_record():
    data = b'{"id": 17, "name": "John", "account": {"id": 42, "balance": 4750.89}, "after": {"id": 1}}'
    assert read(data, nested("account"))[1] == [{"id": 42, "balance": 4750.89}]


def test_the_nested_field_is_found_at_any_depth():
    # NiFi's multiple-nested-field.json: the field is inside the first element of the top array
    data = orjson.dumps([{**ACCOUNTS[0], "accountIds": [{"id": "n312kj3", "type": "employee"},
                                                         {"id": "dl2kdff", "type": "security"}]}])
    assert read(data, nested("accountIds"))[1] == [{"id": "n312kj3", "type": "employee"},
                                                   {"id": "dl2kdff", "type": "security"}]


def test_a_field_name_inside_a_string_is_not_the_field():
    data = b'{"note": "\\"accounts\\": [{\\"id\\": 1}]", "accounts": [{"id": 2}]}'
    assert read(data, nested("accounts"))[1] == [{"id": 2}]


@pytest.mark.parametrize("name", ["name", "notfound"])
def test_a_simple_or_missing_field_gives_no_records(name):
    assert read(b'{"id": 17, "name": "John", "account": {"id": 42}}', nested(name))[1] == []


def test_a_whole_document_schema_applies_under_the_starting_field():
    account = {"type": "record", "name": "account", "fields": [{"name": "id", "type": "int"},
                                                               {"name": "balance", "type": "double"}]}
    whole = avro([{"name": "accounts", "type": {"type": "array", "items": account}}])
    properties = {**nested("accounts"), "Schema Access Strategy": "Use 'Schema Text' Property",
                  "Schema Text": whole, "Schema Application Strategy": "Whole JSON"}
    schema, records = read(b'{"accounts": [{"id": 42, "balance": 4750.89}]}', properties)
    assert schema.names == ["id", "balance"] and records == [{"id": 42, "balance": 4750.89}]


def test_nested_field_needs_its_name():
    with pytest.raises(ValueError, match="Starting Field Name"):
        enable_service(JsonTreeReader, NESTED)


# ---------------------------------------------------------------------------------- malformed content
def test_malformed_json_in_the_middle_of_an_array_names_the_record():
    data = b'[{"a": 1}, {"a": 2}, {"a": 3,, "b": 4}, {"a": 5}]'
    with pytest.raises(MalformedRecordError) as caught:
        read(data, {**TEXT, "Schema Text": avro([{"name": "a", "type": "int"}])})
    assert caught.value.record == 2 and caught.value.offset == data.index(b",,") + 1
    assert caught.value.attributes()["record.error.index"] == "2"


def test_malformed_json_is_found_while_inferring():
    data = b'{"a": 1}\n{"a": 2}\n{"a" 3}\n'
    with pytest.raises(MalformedRecordError, match="record 2") as caught:
        reader(data)
    assert caught.value.record == 2


LATIN_1 = b'[{"a": "x"}, {"a": "\xc3\xa9"}, {"a": "caf\xe9"}]'   # the last value in Latin-1, not UTF-8


@pytest.mark.parametrize("data, properties", [
    (LATIN_1, {}), (LATIN_1, {**TEXT, "Schema Text": avro([{"name": "a", "type": "string"}])}),
    (b'{"a": "x"}\n{"a": "\xc3\xa9"}\n{"caf\xe9": 1}', {}),   # a key
])
def test_text_that_is_not_utf8_names_the_record_and_byte(data, properties):
    with pytest.raises(MalformedRecordError, match="^record 2 is not UTF-8 text: invalid continuation byte") as caught:
        read(data, properties)
    assert caught.value.record == 2 and caught.value.offset == data.index(b"\xe9\"")


def nest(depth: int, kind: str = "object") -> bytes:
    """A value of ``depth`` objects (or arrays) one inside the other."""
    opening, closing = (b'{"a":', b"}") if kind == "object" else (b"[", b"]")
    return opening * depth + b"1" + closing * depth


@pytest.mark.parametrize("kind", ["object", "array"])
@pytest.mark.parametrize("properties", [{}, {"Date Format": "yyyy-MM-dd"},
                                        {**TEXT, "Schema Text": avro([{"name": "d", "type": ["null", "string"]}])}])
def test_a_record_nesting_deeper_than_a_schema_may_is_refused_naming_it(kind, properties):
    """A record is one level, each object or array in it one more: 200 in all are read (a schema
    nests as deep), more are refused (Jackson refuses past 1000; pyarrow's inference dies at some
    20000, Python's stack before 1000)."""
    before = b'[{"d": 1}, {"d": '
    assert len(read(before + nest(199, kind) + b"}]", properties)[1]) == 2
    level_201 = len(before) + 199 * len(nest(1, kind).partition(b"1")[0])   # the 200th bracket opened in the value
    for depth in (200, 100_000):
        with pytest.raises(MalformedRecordError, match="^record 1 nests objects and arrays more than 200 deep") \
                as caught:
            read(before + nest(depth, kind) + b"}]", properties)
        assert caught.value.record == 1 and caught.value.offset == level_201


@pytest.mark.parametrize("data, problem, record", [
    (b'[{"a": 1}, {"a": 2}', "the array is not closed", 2),
    (b'[{"a": 1} {"a": 2}]', "without a comma", 1),
    (b'[{"a": 1}, 2]', "where a record should be", 1),
    (b'[{"a": 1},]', "comma after the array's last element", 1),
    (b'[{"a": 1}, [{"a": 2}]]', "not an object", 1),
    (b'{"a": "unterminated}', "ends inside a record", 0),
    (b'"text"', "expected an object", 0)])
def test_broken_structure_is_malformed(data, problem, record):
    with pytest.raises(MalformedRecordError, match=problem) as caught:
        read(data)
    assert caught.value.record == record and caught.value.offset is not None


# ---------------------------------------------------------------------------------- streaming
@pytest.mark.parametrize("lines", [False, True])
def test_a_large_content_comes_out_a_batch_at_a_time(monkeypatch, lines):
    monkeypatch.setattr(json_service, "BATCH_BYTES", 4096)
    rows = [{"id": i, "name": f"name {i}", "tags": ["x", "y"]} for i in range(10000)]
    data = b"\n".join(orjson.dumps(r) for r in rows) if lines else orjson.dumps(rows, option=orjson.OPT_INDENT_2)
    stream = CountingStream(data)
    schema = avro([{"name": "id", "type": "int"}, {"name": "name", "type": "string"},
                   {"name": "tags", "type": {"type": "array", "items": "string"}}])
    service = enable_service(JsonTreeReader, {**TEXT, "Schema Text": schema})
    batches = service.create_reader({}, stream, len(data)).batches()
    first = next(batches)
    assert 0 < first.num_rows < len(rows) and stream.read_bytes < len(data) / 4
    rest = list(batches)
    assert len(rest) > 10 and pa.Table.from_batches([first, *rest]).to_pylist() == rows


def test_a_batch_holds_at_most_batch_records(monkeypatch):
    monkeypatch.setattr(json_service, "BATCH_RECORDS", 7)
    batches = list(reader(b"\n".join(b'{"a": %d}' % i for i in range(30))).batches())
    assert [b.num_rows for b in batches] == [7, 7, 7, 7, 2]


def test_a_record_longer_than_a_piece_is_read_whole(monkeypatch):
    monkeypatch.setattr(json_service, "BATCH_BYTES", 256)
    rows = [{"a": "x" * 2000, "i": 1}, {"a": "y", "i": 2}]
    assert read(orjson.dumps(rows))[1] == rows


_text = st.text(alphabet=st.sampled_from(list('ab{}[],:"\\ \n\té')), max_size=12)
_value = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text,
                      lambda inner: st.lists(inner, max_size=3), max_leaves=4)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({"k": _text, "v": _value}), min_size=1, max_size=30),
       layout=st.sampled_from(["array", "pretty", "lines"]), piece=st.integers(16, 400))
def test_any_layout_and_piece_size_reads_the_records(rows, layout, piece):
    """Candidate cuts that land inside strings or deeper in records are found out and fixed."""
    data = orjson.dumps(rows) if layout == "array" else orjson.dumps(rows, option=orjson.OPT_INDENT_2) \
        if layout == "pretty" else b"\n".join(orjson.dumps(r) for r in rows)
    schema = avro([{"name": "k", "type": "string"}, {"name": "v", "type": ["null", "string"]}])
    with pytest.MonkeyPatch.context() as patch:   # hypothesis runs examples without function fixtures
        patch.setattr(json_service, "BATCH_BYTES", piece)
        _, records = read(data, {**TEXT, "Schema Text": schema})
    expected = [{"k": r["k"], "v": None if r["v"] is None else r["v"] if isinstance(r["v"], str)
                 else orjson.dumps(r["v"]).decode() if not isinstance(r["v"], bool) else str(r["v"]).lower()}
                for r in rows]
    assert records == expected


# ---------------------------------------------------------------------------------- writing
def write(batches: list[pa.RecordBatch], properties: dict | None = None, schema: pa.Schema | None = None,
          attributes: dict | None = None) -> tuple[str, object]:
    service = enable_service(JsonRecordSetWriter, properties or {})
    out = io.BytesIO()
    writer = service.create_writer(service.write_schema(attributes or {}, schema or batches[0].schema), out,
                                   attributes or {})
    for batch in batches:
        writer.write_batch(batch)
    result = writer.finish()
    return out.getvalue().decode(), result


UTC = datetime.timezone.utc
TYPES = pa.record_batch({
    "boolean": [True], "byte": pa.array([1], pa.int8()), "short": pa.array([8], pa.int16()),
    "int": pa.array([9], pa.int32()), "long": pa.array([8], pa.int64()), "float": pa.array([8.0], pa.float32()),
    "double": [8.0], "decimal": pa.array([decimal.Decimal("8.1")], pa.decimal128(5, 1)),
    "timestamp": pa.array([datetime.datetime(2017, 1, 1, 17, tzinfo=UTC)], pa.timestamp("ms", tz="UTC")),
    "date": pa.array([datetime.date(2017, 1, 1)]), "time": pa.array([datetime.time(17)], pa.time32("ms")),
    "string": ["string"], "record": pa.array([None], pa.struct([("a", pa.int32())])),
    "array": pa.array([None], pa.list_(pa.string())),
    "map": pa.array([[("height", 48), ("width", 96)]], pa.map_(pa.string(), pa.int32()))})
FORMATS = {"Timestamp Format": "yyyy-MM-dd HH:mm:ss", "Date Format": "yyyy-MM-dd", "Time Format": "HH:mm:ss"}


def test_pretty_printed_as_jackson_does():
    # NiFi's TestWriteJsonResult.testDataTypes and its output/dataTypes.json
    text, result = write([TYPES], {**FORMATS, "Pretty Print JSON": "true"})
    assert text == """[ {
  "boolean" : true,
  "byte" : 1,
  "short" : 8,
  "int" : 9,
  "long" : 8,
  "float" : 8.0,
  "double" : 8.0,
  "decimal" : 8.1,
  "timestamp" : "2017-01-01 17:00:00",
  "date" : "2017-01-01",
  "time" : "17:00:00",
  "string" : "string",
  "record" : null,
  "array" : null,
  "map" : {
    "height" : 48,
    "width" : 96
  }
} ]"""
    assert result.record_count == 1 and result.attributes["mime.type"] == "application/json"


def test_pretty_nested_records_and_arrays():
    batch = pa.record_batch({"a": pa.array([{"b": [{"c": 1}, {"c": 2}], "e": []}]), "f": pa.array([[1, 2]])})
    assert write([batch], {"Pretty Print JSON": "true"})[0] == """[ {
  "a" : {
    "b" : [ {
      "c" : 1
    }, {
      "c" : 2
    } ],
    "e" : [ ]
  },
  "f" : [ 1, 2 ]
} ]"""


def test_compact_array_across_batches():
    batch = pa.record_batch({"id": ["1", "2"], "n": [1, None]})
    assert write([batch.slice(0, 1), batch.slice(1, 1)])[0] == '[{"id":"1","n":1},{"id":"2","n":null}]'


def test_no_records_is_an_empty_array():
    empty = pa.record_batch({"id": pa.array([], pa.string())})
    assert write([empty])[0] == "[]"
    assert write([empty], {"Pretty Print JSON": "true"})[0] == "[ ]"
    assert write([empty], {"Output Grouping": "One Line Per Object"})[0] == ""


def test_one_line_per_object():
    # NiFi's testOnelineOutput: timestamps, times and dates without formats are milliseconds
    batch = pa.record_batch({
        "timestamp": pa.array([37293723, 37293999], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "time": pa.array([37293723, 37293999], pa.int32()).cast(pa.time32("ms")),
        "date": pa.array([datetime.date(1970, 1, 1)] * 2)})
    text, _ = write([batch], {"Output Grouping": "One Line Per Object"})
    assert text == ('{"timestamp":37293723,"time":37293723,"date":0}\n'
                    '{"timestamp":37293999,"time":37293999,"date":0}')


def test_null_suppression():
    # NiFi's testNullSuppression: a record missing 'name', then one whose 'name' is null
    schema = pa.schema([("id", pa.string()), ("name", pa.string())])
    missing = pa.record_batch({"id": ["1"]})
    null = pa.record_batch({"id": ["1"], "name": pa.array([None], pa.string())})
    expected = {("Never Suppress", 0): '[{"id":"1","name":null}]', ("Always Suppress", 0): '[{"id":"1"}]',
                ("Suppress Missing Values", 0): '[{"id":"1"}]', ("Never Suppress", 1): '[{"id":"1","name":null}]',
                ("Always Suppress", 1): '[{"id":"1"}]', ("Suppress Missing Values", 1): '[{"id":"1","name":null}]'}
    for (mode, which), text in expected.items():
        batch = [missing, null][which]
        assert write([batch], {"Suppress Null Values": mode}, schema=schema)[0] == text, (mode, which)


def test_scientific_notation():
    # NiFi's testScientificNotationUsage
    batch = pa.record_batch({"float": pa.array([-4.291032244], pa.float32()), "double": [0.000000451],
                             "decimal": pa.array([decimal.Decimal("0.000000080")], pa.decimal128(10, 9))})
    assert write([batch])[0] == '[{"float":-4.2910323,"double":0.000000451,"decimal":0.000000080}]'
    allowed = write([batch], {"Allow Scientific Notation": "true"})[0]
    assert '"double":4.51E-7' in allowed and '"float":-4.2910323' in allowed


def test_timestamp_representations():
    # NiFi's testTimestampRepresentations and testEpochSecondsValues
    def one(millis: int, properties: dict) -> str:
        batch = pa.record_batch({"timestamp": pa.array([millis], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))})
        return write([batch], properties)[0]
    assert one(1623926285001, {"Timestamp Format": "'formatted-'SSS",
                               "Timestamp Representation": "Formatted String"}) == '[{"timestamp":"formatted-001"}]'
    assert one(1623926285001, {"Timestamp Representation": "Epoch Milliseconds"}) == '[{"timestamp":1623926285001}]'
    for millis, seconds in [(1623926285000, "1623926285.000"), (1623926285001, "1623926285.001"), (0, "0.000"),
                            (-1, "-0.001"), (253402300799999, "253402300799.999")]:
        assert one(millis, {"Timestamp Representation": "Epoch Seconds"}) == '[{"timestamp":%s}]' % seconds


def test_formatted_string_needs_a_timestamp_format():
    with pytest.raises(ValueError, match="Timestamp Format"):
        enable_service(JsonRecordSetWriter, {"Timestamp Representation": "Formatted String"})


def test_pretty_print_with_one_line_per_object_is_not_valid():
    with pytest.raises(ValueError, match="Pretty Print JSON"):
        enable_service(JsonRecordSetWriter, {"Pretty Print JSON": "true", "Output Grouping": "One Line Per Object"})


def test_text_is_escaped_as_json():
    batch = pa.record_batch({"s": ['quote " backslash \\ newline \n tab \t bell \x07 é 名']})
    text = write([batch])[0]
    assert orjson.loads(text) == [{"s": 'quote " backslash \\ newline \n tab \t bell \x07 é 名'}]
    assert "\\u0007" in text and "é 名" in text


def test_bytes_are_arrays_of_java_s_signed_bytes():
    # NiFi's WriteJsonResult writes an ARRAY[BYTE] element by element as Java's byte (-128 to 127)
    raw = [b"\x00\x7f\x80\xff", None, b""]
    batch = pa.record_batch({"b": pa.array(raw, pa.binary()), "l": pa.array(raw, pa.large_binary()),
                             "f": pa.array([b"\x01\xfe", None, b"\x80\x7f"], pa.binary(2)),
                             "n": pa.array([[b"\xc3\xa9"], [], None], pa.list_(pa.binary()))})
    assert write([batch.slice(0, 1), batch.slice(1)])[0] == (
        '[{"b":[0,127,-128,-1],"l":[0,127,-128,-1],"f":[1,-2],"n":[[-61,-87]]},'
        '{"b":null,"l":null,"f":null,"n":[]},{"b":[],"l":[],"f":[-128,127],"n":null}]')
    assert write([batch.slice(0, 1).select(["b"])], {"Pretty Print JSON": "true"})[0] == \
        '[ {\n  "b" : [ 0, 127, -128, -1 ]\n} ]'


TOP_BYTES = [{"name": "b", "type": ["null", "bytes"]},
             {"name": "f", "type": ["null", {"type": "fixed", "name": "two", "size": 2}]}]
#: top-level bytes only: read by Arrow; with bytes in an array and a record: read in Python
TOP, BYTES = ({**TEXT, "Schema Text": avro(fields)} for fields in (TOP_BYTES, [
    *TOP_BYTES, {"name": "n", "type": ["null", {"type": "array", "items": "bytes"}]},
    {"name": "r", "type": ["null", {"type": "record", "name": "in", "fields": [{"name": "x", "type": ["null", "bytes"]}]}]}]))


@pytest.mark.parametrize("pretty", ["false", "true"])
@pytest.mark.parametrize("nested", [False, True])
def test_bytes_written_read_back_as_they_were(monkeypatch, pretty, nested):
    # the writer's arrays of Java's signed bytes read back: nulls, empty, every byte, nested
    monkeypatch.setattr(json_service, "BATCH_BYTES", 256)   # several pieces, each converted by Arrow
    every = bytes(range(256))
    b = [every, None, b"", b"\x00", b"\xff\x80\x7f", *(every[i:i + 5] for i in range(0, 256, 5))]
    rows = [{"b": v, "f": None if v is None else (v + b"\x00\x00")[:2], "n": None if v is None else [v, b""],
             "r": {"x": v}} for v in b]
    schema = pa.schema([("b", pa.binary()), ("f", pa.binary(2)), ("n", pa.list_(pa.binary())),
                        ("r", pa.struct([("x", pa.binary())]))])
    if not nested:
        schema, rows = pa.schema(list(schema)[:2]), [{"b": r["b"], "f": r["f"]} for r in rows]
    written = write([pa.RecordBatch.from_pylist(rows, schema)], {"Pretty Print JSON": pretty})[0]
    assert read(written.encode(), BYTES if nested else TOP)[1] == rows


def test_a_bytes_field_reads_whole_numbers_from_minus_128_to_255():
    # NiFi's JsonTreeReader makes each number of the array a Java byte: -1 and 255 are both FF
    data = b'[{"b": [-128, -1, 0, 127, 128, 255]}, {"b": []}, {"b": null}, {}]'
    assert [r["b"] for r in read(data, BYTES)[1]] == [b"\x80\xff\x00\x7f\x80\xff", b"", None, None]


def test_top_level_bytes_are_converted_by_arrow_not_record_by_record(monkeypatch):
    def python(*args, **kwargs):
        raise AssertionError("parsed in Python")
    monkeypatch.setattr(json_service, "rows_to_batch", python)
    assert read(b'[{"b": [1, 255], "f": [-1, 0]}, {"b": null}]', TOP)[1] == [{"b": b"\x01\xff", "f": b"\xff\x00"},
                                                                           {"b": None, "f": None}]
    with pytest.raises(SchemaMismatchError, match="field 'b' of record 1 holds 300"):
        read(b'[{"b": [1]}, {"b": [300]}]', TOP)


@pytest.mark.parametrize("value, shown", [
    (b'"AQI="', '"AQI="'),            # text: NiFi's reader fails on it too (it casts the value to an array)
    (b"[1, 256]", "256"), (b"[-129]", "-129"), (b"[1.5]", "1.5"), (b"[true]", "true"), (b"[null]", "null"),
    (b'["1"]', '"1"'), (b"7", "7"), (b'{"a": 1}', '{"a":1}')])
@pytest.mark.parametrize("where", ["b", "r"])
def test_a_bytes_value_that_is_not_an_array_of_bytes_is_a_schema_mismatch(monkeypatch, value, shown, where):
    monkeypatch.setattr(json_service, "BATCH_BYTES", 64)
    good = (b'{"b": [1, 2]}, ' if where == "b" else b'{"b": [1, 2], "r": {"x": [3]}}, ') * 5
    bad = b'{"b": ' + value + b'}' if where == "b" else b'{"r": {"x": ' + value + b'}}'
    path = "b" if where == "b" else "r.x"
    message = (f"field '{path}' of record 5 holds {shown}, where bytes are read from an array of whole numbers "
               f"-128 to 255")
    with pytest.raises(SchemaMismatchError, match=f"^{re.escape(message)}$"):
        read(b"[" + good + bad + b"]", TOP if where == "b" else BYTES)


@pytest.mark.parametrize("schema", [TOP, BYTES])
def test_a_fixed_field_of_another_length_is_a_schema_mismatch(schema):
    with pytest.raises(SchemaMismatchError, match=r"^field 'f' of record 1 is .*, which does not fit ARRAY\[BYTE\]"):
        read(b'[{"f": [1, 2]}, {"f": [1, 2, 3]}]', schema)


def test_choice_array_and_nested_values():
    # NiFi's testChoiceArray: a one-element array of strings
    batch = pa.record_batch({"path": pa.array([["10.2.1.3"]])})
    assert write([batch])[0] == '[{"path":["10.2.1.3"]}]'


def test_schema_write_strategies():
    batch = pa.record_batch({"id": pa.array([1], pa.int32())})
    _, result = write([batch], {"Schema Write Strategy": "Set 'avro.schema' Attribute"})
    assert json.loads(result.attributes["avro.schema"])["fields"] == [{"name": "id", "type": ["null", "int"]}]
    properties = {"Schema Write Strategy": "Set 'schema.name' Attribute",
                  "Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": avro([{"name": "id", "type": "int"}])}
    _, result = write([batch], properties)
    assert result.attributes["schema.name"] == "r"


def test_writer_schema_from_text_casts_the_records():
    properties = {"Schema Access Strategy": "Use 'Schema Text' Property",
                  "Schema Text": avro([{"name": "id", "type": "long"}, {"name": "extra", "type": ["null", "string"]}])}
    batch = pa.record_batch({"id": pa.array([1], pa.int32()), "dropped": ["x"]})
    assert write([batch], properties)[0] == '[{"id":1,"extra":null}]'


def test_gzip_compression():
    batch = pa.record_batch({"id": [1, 2]})
    service = enable_service(JsonRecordSetWriter, {"Compression Format": "gzip"})
    out = io.BytesIO()
    writer = service.create_writer(batch.schema, out, {})
    writer.write_batch(batch)
    writer.finish()
    assert gzip.decompress(out.getvalue()) == b'[{"id":1},{"id":2}]'


def test_what_the_writer_writes_the_reader_reads_back():
    rows = [{"id": i, "name": f"n{i}", "tags": ["a"] * (i % 3), "rec": {"x": float(i)}} for i in range(50)]
    text, _ = write([pa.RecordBatch.from_pylist(rows)], {"Pretty Print JSON": "true"})
    assert read(text.encode())[1] == rows


def test_nifi_names_for_the_import():
    assert JsonRecordSetWriter.NIFI_PROPERTY_NAMES["output-grouping"] == "Output Grouping"
    assert JsonRecordSetWriter.NIFI_VALUES["Output Grouping"]["output-array"] == "Array"
    assert JsonRecordSetWriter.NIFI_VALUES["Suppress Null Values"]["suppress-missing"] == "Suppress Missing Values"
    assert JsonTreeReader.NIFI_VALUES["Starting Field Strategy"]["NESTED_FIELD"] == "Nested Field"
    assert JsonTreeReader.NIFI_VALUES["Schema Access Strategy"]["infer-schema"] == "Infer Schema"


def test_a_byte_order_mark_is_skipped():
    assert read(b'\xef\xbb\xbf[{"a": 1}]')[1] == [{"a": 1}]


def test_an_empty_list_of_records_is_written_as_an_empty_array():
    schema = pa.schema([("Records", pa.list_(pa.struct([("a", pa.int64())])))])
    writer = enable_service(JsonRecordSetWriter, {})
    out = io.BytesIO()
    written = writer.create_writer(schema, out, {})
    written.write_batch(pa.record_batch([pa.array([[], [{"a": 1}]], schema.field(0).type)], schema=schema))
    assert written.finish().record_count == 2
    assert out.getvalue() == b'[{"Records":[]},{"Records":[{"a":1}]}]'
