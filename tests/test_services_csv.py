"""CSVReader and CSVRecordSetWriter: cases taken from NiFi's TestCSVRecordReader,
TestJacksonCSVRecordReader, TestCSVSchemaInference, TestCSVHeaderSchemaStrategy and
TestWriteCSVResult, plus streaming and the pyarrow / Python fallback (docs/records/csv.md)."""

from __future__ import annotations

import datetime
import io
import json
import re
from functools import partial

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowactors.sdk.records import MalformedRecordError, RecordError, SchemaMismatchError
from flowactors.services.records import csv as csv_service
from flowactors.services.records.csv import CSVReader, CSVRecordSetWriter
from flowactors.services.records.textual import TemporalFormats, text_type
from flowactors.testing import enable_service
from tests.records_helpers import CountingStream, read_records, service_reader

FIELDS = ["id", "name", "balance", "address", "city", "state", "zipCode", "country"]
SCHEMA = json.dumps({"type": "record", "name": "account", "fields": [
    {"name": "id", "type": "string"}, {"name": "name", "type": "string"}, {"name": "balance", "type": "double"},
    {"name": "address", "type": ["null", "string"]}, {"name": "city", "type": ["null", "string"]},
    {"name": "state", "type": ["null", "string"]}, {"name": "zipCode", "type": ["null", "string"]},
    {"name": "country", "type": ["null", "string"]}]})
GIVEN = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": SCHEMA,
         "Treat First Line as Header": "true"}
# NiFi's single-bank-account.csv and extra-white-space.csv: spaces after the commas, some values quoted
SINGLE = (b'id, name, balance, address, city, state, zipCode, country\n'
          b'1, John Doe, "4750.89", "123 My Street", My City, MS, 11111, USA\n')
EXTRA_WHITE_SPACE = (b'id, name, balance, address, city, state, zipCode, country\n'
                     b'1, John Doe, "4750.89", "123 My Street", My City, MS, 11111, USA\n\n\n\n\n'
                     b'     2, Jane Doe, 4820.09, 321 Your Street, Your City, NY, 33333, USA     \n\n\n')
JOHN = {"id": "1", "name": "John Doe", "balance": 4750.89, "address": "123 My Street", "city": "My City",
        "state": "MS", "zipCode": "11111", "country": "USA"}
JANE = {"id": "2", "name": "Jane Doe", "balance": 4820.09, "address": "321 Your Street", "city": "Your City",
        "state": "NY", "zipCode": "33333", "country": "USA"}


reader = partial(service_reader, CSVReader)
read = partial(read_records, CSVReader)


def avro(fields: list) -> str:
    return json.dumps({"type": "record", "name": "r", "fields": fields})


# ---------------------------------------------------------------------------------- reading
def test_spaces_after_commas_are_trimmed_and_quotes_taken_off():
    # NiFi's testSimpleParse: Trim Fields (default true) and Trim Double Quote (default true)
    assert read(SINGLE, GIVEN)[1] == [JOHN]


def test_without_double_quote_trimming_the_quotes_stay():
    # NiFi's testSimpleParse_withoutDoubleQuoteTrimming
    _, records = read(SINGLE, {**GIVEN, "Trim Double Quote": "false"})
    assert records[0]["address"] == '"123 My Street"' and records[0]["balance"] == 4750.89


def test_extra_white_space_and_empty_lines():
    # NiFi's testExtraWhiteSpace
    assert read(EXTRA_WHITE_SPACE, GIVEN)[1] == [JOHN, JANE]


def test_untrimmed_fields_keep_their_spaces():
    _, records = read(b"a,b\n x , y \n", {"Trim Fields": "false"})
    assert records == [{"a": " x ", "b": " y "}]


def test_utf8_text():
    # NiFi's testUTF8
    _, records = read("id,name\n1,黃凱揚\n2,Ελληνικά\n".encode())
    assert [r["name"] for r in records] == ["黃凱揚", "Ελληνικά"]


def test_another_character_set():
    # NiFi's TestJacksonCSVRecordReader.testISO8859
    _, records = read("id,name\n1,Müller\n".encode("iso-8859-1"), {"Character Set": "ISO-8859-1"})
    assert records == [{"id": 1, "name": "Müller"}]


@pytest.mark.parametrize("charset, codec", [("UTF-16", "utf-16"), ("UTF-16", "utf-16-be"), ("UTF-16", "utf-16-le"),
                                            ("UTF-32", "utf-32"), ("UTF-32", "utf-32-be")])
def test_utf16_and_utf32_without_a_byte_order_mark_are_big_endian(charset, codec):
    """As Java's UTF-16 and UTF-32 read them: the byte order mark says the order, big-endian without one
    (Python's codecs refuse a content without one); little-endian without one is then other characters."""
    data = "id,name\n1,Müller\n".encode(codec)
    _, records = read(data, {"Character Set": charset, "Schema Access Strategy": "Use String Fields From Header"})
    assert records == ([] if codec.endswith("-le") else [{"id": "1", "name": "Müller"}])


@pytest.mark.parametrize("charset", ["nope", "hex", "a\x00b"])
def test_a_character_set_from_an_attribute_python_does_not_know_is_a_record_error(charset):
    with pytest.raises(RecordError, match="^'Character Set' is '.*', not a character set Python knows$"):
        reader(b"a\n1\n", {"Character Set": "${charset}"}, {"charset": charset})


def test_a_byte_order_mark_is_skipped():
    assert read(b"\xef\xbb\xbfid,name\n1,a\n")[0].names == ["id", "name"]


def test_the_excel_format():
    # NiFi's testExcelFormat: quotes doubled inside a quoted value
    properties = {**GIVEN, "CSV Format": "Microsoft Excel",
                  "Schema Text": avro([{"name": "fieldA", "type": "string"}, {"name": "fieldB", "type": "string"}])}
    assert read(b'fieldA,fieldB\n"0,""9,42",123\n', properties)[1] == [{"fieldA": '0,"9,42', "fieldB": "123"}]


def test_quotes_doubled_inside_quotes():
    # NiFi's testQuote: eight quotes are a quoted value of three quotes, then Trim Double Quote leaves one
    text = b'"name"\n""""""""\n'
    schema = avro([{"name": "name", "type": "string"}])
    assert read(text, {**GIVEN, "Schema Text": schema})[1] == [{"name": '"'}]
    assert read(text, {**GIVEN, "Schema Text": schema, "Trim Double Quote": "false"})[1] == [{"name": '"""'}]


def test_a_special_value_separator():
    # NiFi's testMultipleRecordsDelimitedWithSpecialChar
    data = b"id\x01name\x01balance\n1\x01John Doe\x014750.89\n2\x01Jane Doe\x014820.09\n"
    _, records = read(data, {"Value Separator": "\\u0001"})
    assert records == [{"id": 1, "name": "John Doe", "balance": 4750.89}, {"id": 2, "name": "Jane Doe", "balance": 4820.09}]


def test_the_value_separator_may_come_from_an_attribute():
    _, records = read(b"id|name\n1|a\n", {"Value Separator": "${separator}"}, {"separator": "|"})
    assert records == [{"id": 1, "name": "a"}]


def test_without_an_escape_character_a_backslash_is_text():
    # NiFi's testMultipleRecordsEscapedWithNull
    data = (b'id, name, balance, address, city, state, zipCode, country\n'
            b'1, John Doe\\, "4750.89", "123 My Street", My City, MS, 11111, USA\n'
            b'2, Jane Doe, 4820.09, 321 Your Street, Your City, NY, 33333, USA\n')
    assert read(data, {**GIVEN, "Escape Character": ""})[1] == [{**JOHN, "name": "John Doe\\"}, JANE]


def test_an_escaped_separator_shifts_the_values_and_the_balance_does_not_fit():
    # NiFi's testMultipleRecordsEscapedWithChar: 'John Doe\,' keeps the comma, so balance gets an address
    data = (b'id, name, balance, address, city, state, zipCode, country\n'
            b'1, John Doe\\, "4750.89", "123 My Street", My City, MS, 11111, USA\n')
    with pytest.raises(SchemaMismatchError, match="field 'balance' of record 0"):
        read(data, GIVEN)


def test_a_missing_value_is_null_and_an_extra_one_is_dropped():
    # NiFi's testMissingField and testExtraFieldNotInHeader
    data = b"id, name, balance, address, city, state, zipCode, country\n1, John, 40.80, 123 My Street\n" \
           b"2, Jane, 1.5, x, y, z, 1, USA, extra\n"
    _, records = read(data, GIVEN)
    assert records[0] == {"id": "1", "name": "John", "balance": 40.8, "address": "123 My Street", "city": None,
                          "state": None, "zipCode": None, "country": None}
    assert records[1]["country"] == "USA" and "extra" not in records[1]


def test_a_field_in_the_schema_but_not_in_the_header_is_null():
    # NiFi's testFieldInSchemaButNotHeader
    _, records = read(b"id,name,balance\n1,John,40.80\n", GIVEN)
    assert records == [{"id": "1", "name": "John", "balance": 40.8, "address": None, "city": None, "state": None,
                        "zipCode": None, "country": None}]


def test_header_columns_are_matched_by_name():
    schema = avro([{"name": "b", "type": "int"}, {"name": "a", "type": "string"}])
    assert read(b"a,b\nx,1\n", {**GIVEN, "Schema Text": schema})[1] == [{"b": 1, "a": "x"}]


def test_ignoring_the_header_names_takes_the_columns_by_position():
    schema = avro([{"name": "first", "type": "string"}, {"name": "second", "type": "int"}])
    properties = {**GIVEN, "Schema Text": schema, "Ignore CSV Header Column Names": "true"}
    assert read(b"a,b\nx,1\n", properties)[1] == [{"first": "x", "second": 1}]


def test_without_a_header_the_first_line_is_a_record():
    schema = avro([{"name": "a", "type": "string"}, {"name": "b", "type": "int"}])
    properties = {**GIVEN, "Schema Text": schema, "Treat First Line as Header": "false"}
    assert read(b"x,1\ny,2\n", properties)[1] == [{"a": "x", "b": 1}, {"a": "y", "b": 2}]


def test_duplicate_header_names():
    # NiFi's testDuplicateHeaderNames: allowed by default (the first column of a name is read), refused when not
    assert read(b"id,id,name\n1,2,John\n")[1] == [{"id": 1, "name": "John"}]
    with pytest.raises(MalformedRecordError, match="names column 'id' twice"):
        read(b"id,id,name\n1,2,John\n", {"Allow Duplicate Header Names": "false"})


def test_comment_lines_are_skipped():
    _, records = read(b"# exported today\nid,name\n1,a\n# a note\n2,b\n", {"Comment Marker": "#"})
    assert records == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_the_null_string_is_null():
    _, records = read(b"id,name\n1,NULL\n2,\n", {"Null String": "NULL"})
    assert records == [{"id": 1, "name": None}, {"id": 2, "name": None}]


def test_a_quoted_value_may_hold_a_line_break():
    assert read(b'id,text\n1,"two\nlines"\n2,x\n')[1] == [{"id": 1, "text": "two\nlines"}, {"id": 2, "text": "x"}]


def test_predefined_formats():
    assert read(b"a\tb\n1\t2\n", {"CSV Format": "Tab-Delimited"})[1] == [{"a": 1, "b": 2}]
    assert read(b"a|b\n1|x\\|y\n", {"CSV Format": "Informix Unload"})[1] == [{"a": 1, "b": "x|y"}]


# ---------------------------------------------------------------------------------- schemas
def test_inference_reads_every_record():
    # NiFi's TestCSVSchemaInference.testInferenceIncludesAllRecords
    data = b"name,age,amount,flag,when\nJohn,1,1.5,true,x\nJane,3000000000,2,FALSE,y\nJoe,,3,,\n"
    schema, records = read(data)
    assert dict(zip(schema.names, schema.types)) == {"name": pa.string(), "age": pa.int64(), "amount": pa.float64(),
                                                      "flag": pa.bool_(), "when": pa.string()}
    assert records[2] == {"name": "Joe", "age": None, "amount": 3.0, "flag": None, "when": None}


@pytest.mark.parametrize("data", [b"name, age\n", b"name, age", b"name, age\r\n\r\n", "name, \u00e2ge\n".encode()])
def test_inference_from_a_header_and_no_record_makes_each_column_a_string_field(data):
    # NiFi's CSVSchemaInference: with no record, each of the header's names is a STRING field
    schema, records = read(data)
    names = [n.strip() for n in data.decode().splitlines()[0].split(",")]
    assert schema.names == names and schema.types == [pa.string()] * 2 and records == []
    assert read(data, {"Comment Marker": "#"})[0] == schema    # the Python parser's path too
    assert read(b"") == (pa.schema([]), [])                    # no header: no field, as NiFi's


def test_inference_of_dates_in_their_formats():
    properties = {"Date Format": "MM/dd/yyyy", "Timestamp Format": "yyyy-MM-dd HH:mm:ss"}
    schema, records = read(b"d,ts,t\n01/02/2017,2017-01-02 03:04:05,10:00\n", properties)
    assert schema.types == [pa.date32(), pa.timestamp("ms", tz="UTC"), pa.string()]
    assert records[0]["d"] == datetime.date(2017, 1, 2)


def test_a_column_of_numbers_and_words_is_text():
    schema, records = read(b"v\n1\nword\n")
    assert schema.types == [pa.string()] and [r["v"] for r in records] == ["1", "word"]


def nifi_kind(value: str) -> str:
    """The type NiFi's inference gives one value (SchemaInferenceUtil's patterns)."""
    if re.fullmatch(r"-?[0-9]+", value):
        return "int32" if -2**31 <= int(value) < 2**31 else "int64" if -2**63 <= int(value) < 2**63 else "string"
    if re.fullmatch(r"-?[0-9]*\.[0-9]+", value):
        return "double"
    return "bool" if value.lower() in ("true", "false") else "string"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0129-.+eExtrueTRUEfalsFLS \u0663", min_size=1, max_size=12))
def test_each_value_is_inferred_as_nifi_infers_it(value):
    # the inference's tests are Arrow kernels, not regular expressions: NiFi's patterns are the oracle
    assert str(text_type(pa.array([value]), TemporalFormats()).type) == nifi_kind(value)


def test_string_fields_from_the_header():
    # NiFi's TestCSVHeaderSchemaStrategy.testSimple
    schema, records = read(b"id, name, balance\n1, John, 4750.89\n",
                           {"Schema Access Strategy": "Use String Fields From Header"})
    assert schema.names == ["id", "name", "balance"] and schema.types == [pa.string()] * 3
    assert records == [{"id": "1", "name": "John", "balance": "4750.89"}]


def test_dates_and_times_read_in_their_formats():
    # NiFi's testDate and testTime...Format cases
    schema = avro([{"name": "d", "type": {"type": "int", "logicalType": "date"}},
                   {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}}])
    properties = {**GIVEN, "Schema Text": schema, "Date Format": "MM/dd/yyyy", "Time Format": "HH:mm:ss"}
    assert read(b"d,t\n11/30/1983,12:34:56\n", properties)[1] == [{"d": datetime.date(1983, 11, 30),
                                                                  "t": datetime.time(12, 34, 56)}]
    with pytest.raises(SchemaMismatchError, match="format 'MM/dd/yyyy'"):
        read(b"d,t\n1983-11-30,12:34:56\n", properties)


def test_a_date_without_a_format_is_milliseconds():
    # NiFi's testDateNullFormat
    schema = avro([{"name": "d", "type": {"type": "int", "logicalType": "date"}}])
    assert read(b"d\n86400000\n", {**GIVEN, "Schema Text": schema})[1] == [{"d": datetime.date(1970, 1, 2)}]


def test_a_value_that_does_not_fit_names_the_field_and_record():
    with pytest.raises(SchemaMismatchError, match=r"field 'balance' of record 1 is \"lots\""):
        read(b"id,name,balance\n1,a,1.5\n2,b,lots\n", GIVEN)


def test_projected_batches_convert_only_the_named_fields():
    content = b"id,name,balance\n1,a,1.5\n2,b,lots\n3,c,\n"
    names = reader(content, GIVEN).projected_batches(["name", "id"])
    assert pa.Table.from_batches(list(names)).to_pylist() == [{"name": "a", "id": "1"}, {"name": "b", "id": "2"},
                                                               {"name": "c", "id": "3"}]
    # a field not read is not converted: its bad value is not an error (docs/records/query-record.md)
    balances = reader(content, GIVEN).projected_batches(["balance"])
    with pytest.raises(SchemaMismatchError, match=r"field 'balance' of record 1 is \"lots\""):
        list(balances)
    # through Python's csv (a comment marker) as through pyarrow
    commented = reader(b"# note\n" + content, {**GIVEN, "Comment Marker": "#"}).projected_batches(["name"])
    assert pa.Table.from_batches(list(commented)).column("name").to_pylist() == ["a", "b", "c"]


# ---------------------------------------------------------------------------------- malformed content
def test_an_unterminated_quote_is_malformed():
    with pytest.raises(MalformedRecordError, match="quoted value is not closed") as caught:
        read(b'id,name\n1,"unterminated\n2,b\n')
    assert caught.value.record == 0


def test_an_unterminated_quote_found_by_python_names_the_line():
    with pytest.raises(MalformedRecordError, match="line 3") as caught:
        read(b'# c\nid,name\n1,"open\n', {"Comment Marker": "#"})
    assert caught.value.record is not None


def test_text_not_in_the_character_set_is_malformed():
    with pytest.raises(MalformedRecordError, match="UTF-8"):
        read(b"id,name\n1,\xff\xfe\n")


# ---------------------------------------------------------------------------------- streaming
@pytest.mark.parametrize("comment", [None, "#"])
def test_a_large_content_comes_out_a_batch_at_a_time(monkeypatch, comment):
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 8192)
    monkeypatch.setattr(csv_service, "BATCH_RECORDS", 500)
    data = b"id,name\n" + b"".join(b"%d,name %d\n" % (i, i) for i in range(20000))
    stream = CountingStream(data)
    schema = avro([{"name": "id", "type": "int"}, {"name": "name", "type": "string"}])
    properties = {**GIVEN, "Schema Text": schema, **({"Comment Marker": comment} if comment else {})}
    service = enable_service(CSVReader, properties)
    batches = service.create_reader({}, stream, len(data)).batches()
    first = next(batches)
    assert 0 < first.num_rows <= 500 and stream.read_bytes < len(data) / 2
    rest = list(batches)
    table = pa.Table.from_batches([first, *rest])
    assert len(rest) > 10 and table.num_rows == 20000 and table.column("id").to_pylist() == list(range(20000))


def test_python_goes_on_where_pyarrow_stopped(monkeypatch):
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 4096)
    lines = [b"%d,x" % i for i in range(3000)]
    lines[2500] += b",extra"   # pyarrow stops at this record; Python reads it and the rest
    data = b"id,v\n" + b"\n".join(lines) + b"\n"
    records = reader(data).read_all().to_pylist()
    assert [r["id"] for r in records] == list(range(3000))


TYPED = avro([{"name": "id", "type": "long"}, {"name": "flag", "type": ["null", "boolean"]},
              {"name": "amount", "type": ["null", "double"]}])


def test_a_value_pyarrow_does_not_read_as_its_type_is_read_by_nifis_rules(monkeypatch):
    # pyarrow converts numbers and booleans; from a value it refuses on (a boolean in an unusual
    # casing, spaces around it), the rest is text read as NiFi reads it
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 4096)
    lines = [b"%d,true,%d.5" % (i, i) for i in range(3000)]
    lines[2500] = b"2500, tRuE ,  "
    data = b"id,flag,amount\n" + b"\n".join(lines) + b"\n"
    records = reader(data, {**GIVEN, "Schema Text": TYPED}).read_all().to_pylist()
    assert [r["id"] for r in records] == list(range(3000))
    assert records[2500] == {"id": 2500, "flag": True, "amount": None}
    assert records[2999] == {"id": 2999, "flag": True, "amount": 2999.5}


def test_a_value_that_does_not_fit_names_its_record_in_the_content(monkeypatch):
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 4096)
    lines = [b"%d,false,1" % i for i in range(3000)]
    lines[2600] = b"2600,false,lots"
    data = b"id,flag,amount\n" + b"\n".join(lines) + b"\n"
    with pytest.raises(SchemaMismatchError, match=r"field 'amount' of record 2600 is \"lots\""):
        reader(data, {**GIVEN, "Schema Text": TYPED}).read_all()


def test_a_null_string_that_is_a_number_is_null_with_spaces_around_it():
    # NiFi compares the trimmed value with the Null String
    data = b"id,flag,amount\n1,true,-1\n2,false, -1 \n3,, 7\n"
    records = reader(data, {**GIVEN, "Schema Text": TYPED, "Null String": "-1"}).read_all().to_pylist()
    assert [r["amount"] for r in records] == [None, None, 7.0] and records[2]["flag"] is None


@pytest.mark.parametrize("late", [
    b'"quoted, with a comma"', b'"two\nlines"', b'esc\\\naped', b'"unclosed'])
def test_windows_cut_by_line_ends_then_pyarrow_s_streaming_from_a_quote_on(monkeypatch, late):
    # windows without quotes are cut at their last line end; from one with a quote (or an escaped
    # line end) on, pyarrow's streaming reader finds the records
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 256)
    lines = [b"%d,name %d" % (i, i) for i in range(400)]
    lines[300] = b"300," + late
    data = b"id,name\n" + b"\n\n".join(lines) + b"\n"
    schema = {**GIVEN, "Schema Text": avro([{"name": "id", "type": "int"}, {"name": "name", "type": "string"}])}
    if late == b'"unclosed':   # a value that takes the rest of the content, past pyarrow's blocks: Python's csv
        with pytest.raises(MalformedRecordError, match="unexpected end of data"):
            reader(data, schema).read_all()
        return
    records = reader(data, schema).read_all().to_pylist()
    assert [r["id"] for r in records] == list(range(400))
    assert records[300]["name"] == late.strip(b'"').replace(b"\\\n", b"\n").decode()
    assert records[299]["name"] == "name 299" and records[399]["name"] == "name 399"


def test_a_record_longer_than_the_blocks_read_ahead(monkeypatch):
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 4096)
    long = "line\n" * 10_000   # 50 KB in one quoted value: a dozen blocks
    data = f'id,name\n1,a\n2,"{long}"\n3,c\n'.encode()
    records = reader(data, {**GIVEN, "Schema Text": avro([{"name": "id", "type": "int"},
                                                          {"name": "name", "type": "string"}])}).read_all()
    assert records.column("id").to_pylist() == [1, 2, 3] and records.column("name")[1].as_py() == long.strip()


def test_a_reader_left_before_its_end_stops_reading(monkeypatch):
    monkeypatch.setattr(csv_service, "BATCH_BYTES", 4096)
    data = b"id,v\n" + b"".join(b"%d,x\n" % i for i in range(50_000))
    stream = CountingStream(data)
    service = enable_service(CSVReader, {**GIVEN, "Schema Text": avro([{"name": "id", "type": "int"}])})
    batches = service.create_reader({}, stream, len(data)).batches()
    next(batches)
    batches.close()   # pyarrow's reads waiting for the next batch end at once
    assert stream.read_bytes < len(data) / 10


# ---------------------------------------------------------------------------------- writing
def write(batches: list[pa.RecordBatch], properties: dict | None = None, schema: pa.Schema | None = None):
    service = enable_service(CSVRecordSetWriter, properties or {})
    out = io.BytesIO()
    writer = service.create_writer(schema or batches[0].schema, out, {})
    for batch in batches:
        writer.write_batch(batch)
    result = writer.finish()
    return out.getvalue().decode(), result


PERSON = pa.record_batch({"name": ["John Doe"], "age": pa.array([30], pa.int32())})


def test_numbers_are_not_quoted():
    # NiFi's testNumbersNotQuoted
    assert write([PERSON], {"Quote Mode": "Quote Non-Numeric Values"})[0] == '"name","age"\n"John Doe",30\n'
    text, result = write([PERSON])
    assert text == "name,age\nJohn Doe,30\n" and result.attributes["mime.type"] == "text/csv"


def test_quote_all_values_leaves_nulls_empty():
    # NiFi's testDataTypes (Quote All Values: every value quoted, nulls empty)
    utc = datetime.timezone.utc
    batch = pa.record_batch({
        "boolean": [True], "byte": pa.array([1], pa.int8()), "int": pa.array([9], pa.int32()), "float": [8.0],
        "decimal": pa.array([__import__("decimal").Decimal("8.1")], pa.decimal128(3, 1)),
        "timestamp": pa.array([datetime.datetime(2017, 1, 1, 17, tzinfo=utc)], pa.timestamp("ms", tz="UTC")),
        "date": pa.array([datetime.date(2017, 1, 1)]), "time": pa.array([datetime.time(17)], pa.time32("ms")),
        "string": ["a孟bc李12儒3"], "record": pa.array([None], pa.struct([("a", pa.int32())]))})
    properties = {"Quote Mode": "Quote All Values", "Date Format": "yyyy-MM-dd", "Time Format": "HH:mm:ss",
                  "Timestamp Format": "yyyy-MM-dd HH:mm:ss"}
    header, values = write([batch], properties)[0].splitlines()
    assert header == '"boolean","byte","int","float","decimal","timestamp","date","time","string","record"'
    assert values == '"true","1","9","8.0","8.1","2017-01-01 17:00:00","2017-01-01","17:00:00","a孟bc李12儒3",'


def test_minimal_quoting():
    batch = pa.record_batch({"v": ["plain", "a,b", 'say "hi"', "two\nlines", " lead", "#hash", ""],
                             "w": ["x"] * 7})
    text, _ = write([batch], {"Trim Fields": "false"})
    assert text.split("\n")[1:] == ["plain,x", '"a,b",x', '"say ""hi""",x', '"two', 'lines",x', '" lead",x',
                                    '"#hash",x', '"",x', ""]


def test_the_escape_character_in_a_value():
    # NiFi's testEscapeCharInValueWriteRecord and testEmptyEscapeCharWriteRecord
    batch = pa.record_batch({"id": ["1\\"], "name": ["John Doe"]})
    assert write([batch])[0] == 'id,name\n"1\\\\",John Doe\n'
    assert write([batch], {"Escape Character": ""})[0] == "id,name\n1\\,John Doe\n"


def test_the_header_is_written_without_records():
    # NiFi's testWriteHeaderWithNoRecords (quote mode NONE, ',' as the record separator)
    empty = pa.record_batch({"id": pa.array([], pa.string()), "name": pa.array([], pa.string())})
    assert write([empty], {"Quote Mode": "Do Not Quote Values", "Record Separator": ","})[0] == "id,name,"
    assert write([empty], {"Include Header Line": "false"})[0] == ""


def test_do_not_quote_escapes():
    batch = pa.record_batch({"v": ['a,b"c\nd\\']})
    assert write([batch], {"Quote Mode": "Do Not Quote Values"})[0] == 'v\na\\,b\\"c\\nd\\\\\n'


def test_do_not_quote_needs_an_escape_character():
    with pytest.raises(ValueError, match="Escape Character"):
        enable_service(CSVRecordSetWriter, {"Quote Mode": "Do Not Quote Values", "Escape Character": ""})


def test_missing_field_is_empty_and_null_string_written():
    # NiFi's testMissingFieldWriteRecord
    schema = pa.schema([("id", pa.string()), ("name", pa.string())])
    assert write([pa.record_batch({"id": ["1"]})], schema=schema)[0] == "id,name\n1,\n"
    assert write([pa.record_batch({"id": ["1"]})], {"Null String": "NULL"}, schema=schema)[0] == "id,name\n1,NULL\n"


def test_separators_trailing_delimiter_and_record_separator():
    batch = pa.record_batch({"a": ["1", "2"], "b": ["x", "y"]})
    properties = {"Value Separator": ";", "Record Separator": "\\r\\n", "Include Trailing Delimiter": "true"}
    assert write([batch], properties)[0] == "a;b;\r\n1;x;\r\n2;y;\r\n"


def test_doubles_are_written_as_java_writes_them():
    batch = pa.record_batch({"d": [1.0, 2.5, 1e10, None]})
    assert write([batch])[0] == "d\n1.0\n2.5\n1.0E10\n\n"


def test_written_csv_reads_back():
    rows = [{"id": i, "name": f'n "{i}", x', "amount": i / 4} for i in range(100)]
    text, _ = write([pa.RecordBatch.from_pylist(rows)])
    assert read(text.encode())[1] == rows


def test_nifi_names_for_the_import():
    assert CSVReader.NIFI_VALUES["CSV Format"]["rfc-4180"] == "RFC 4180"
    assert CSVReader.NIFI_VALUES["Schema Access Strategy"]["csv-header-derived"] == "Use String Fields From Header"
    assert CSVRecordSetWriter.NIFI_VALUES["Quote Mode"]["MINIMAL"] == "Quote Minimal"
    assert CSVReader.NIFI_PROPERTY_NAMES["Skip Header Line"] == "Treat First Line as Header"
