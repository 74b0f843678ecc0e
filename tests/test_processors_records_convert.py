"""ConvertRecord: NiFi's TestConvertRecord cases on the real record services, bad input, and streaming."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowactors.processors.records import ConvertRecord
from flowactors.services import (AvroReader, AvroRecordSetWriter, CSVReader, CSVRecordSetWriter, JsonRecordSetWriter,
                                 JsonTreeReader, ParquetReader, ParquetRecordSetWriter)
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

PERSON = {"name": "personWithNameRecord", "namespace": "nifi", "type": "record", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": {"type": "record", "name": "nameRecord", "fields": [
        {"name": "last", "type": "string"}, {"name": "first", "type": "string"}]}},
    {"name": "status", "type": ["null", {"type": "enum", "name": "statusEnum", "symbols": ["ACTIVE", "INACTIVE"]}],
     "default": None}]}
TEXT = "Use 'Schema Text' Property"


def runner(reader=(JsonTreeReader, {}), writer=(JsonRecordSetWriter, {}), **properties) -> ProcessorRunner:
    return ProcessorRunner(ConvertRecord, {"Record Reader": "reader", "Record Writer": "writer", **properties},
                           services={"reader": reader, "writer": writer})


def person_json(**changes) -> bytes:
    return json.dumps([{"id": 485, "name": {"last": "Doe", "first": "John"}, "status": "ACTIVE", **changes}]).encode()


def avro_records(content: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(content)))


@pytest.mark.usefixtures("processor_engine")
def test_converts_json_to_avro_in_place():
    convert = runner(writer=(AvroRecordSetWriter, {}))
    original = convert.enqueue(json.dumps([{"name": "John Doe", "age": 48}, {"name": "Jane Doe", "age": 47},
                                           {"name": "Jimmy Doe", "age": 14}]).encode())
    convert.run()
    [out] = convert.output("success")
    assert out.uuid == original.uuid   # the same FlowFile, its content replaced (NiFi's session.write)
    assert out.attributes["record.count"] == "3"
    assert out.attributes["mime.type"] == "application/avro-binary"
    assert avro_records(convert.read(out)) == [{"name": "John Doe", "age": 48}, {"name": "Jane Doe", "age": 47},
                                               {"name": "Jimmy Doe", "age": 14}]
    assert [e.event_type for e in convert.events()] == [T.CONTENT_MODIFIED]
    assert convert.output("failure") == []


@pytest.mark.usefixtures("processor_engine")
def test_a_malformed_record_sends_the_flowfile_to_failure_unchanged():
    convert = runner()
    bad = b'[{"name": "a"}, {"name": oops}]'
    convert.enqueue(bad, {"filename": "bad.json"})
    convert.enqueue(b'[{"name": "b"}]')
    convert.run()
    [failed] = convert.output("failure")
    assert convert.read(failed) == bad
    assert "record 1 is not valid JSON" in failed.attributes["record.error.message"]
    assert failed.attributes["record.error.index"] == "1"
    assert failed.attributes["record.error.offset"] == str(bad.index(b"oops"))
    assert failed.attributes["flowactors.failure.processor"] == "ConvertRecord"
    assert convert.contents("success") == [b'[{"name":"b"}]']   # the other FlowFile of the trigger went on


def test_zero_records_are_sent_on_unless_told_not_to():
    # NiFi's testDropEmpty
    keep = runner()
    keep.enqueue(b"[]")
    keep.run()
    [out] = keep.output("success")
    assert out.attributes["record.count"] == "0"
    assert keep.read(out) == b"[]"

    drop = runner(**{"Include Zero Record FlowFiles": "false"})
    drop.enqueue(b"[]")
    drop.enqueue(person_json())
    drop.run()
    assert [f.attributes["record.count"] for f in drop.output("success")] == ["1"]
    assert drop.output("failure") == []
    assert [e.event_type for e in drop.events()].count(T.DROP) == 1


def test_a_value_too_large_for_the_schema_fails():
    # NiFi's testJSONLongToInt: 2156760545 does not fit the int field
    convert = runner(reader=(JsonTreeReader, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(PERSON)}),
                     writer=(JsonRecordSetWriter, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(PERSON)}))
    convert.enqueue(person_json(id=2156760545))
    convert.run()
    [failed] = convert.output("failure")
    assert "2156760545" in failed.attributes["record.error.message"]
    assert "id" in failed.attributes["record.error.message"]


def test_a_record_not_fitting_the_writers_schema_fails_and_keeps_the_content():
    # NiFi's testWriteFailure, with a real reason to fail: the Avro writer's enum has no "ERROR"
    # (testEnumBadValue), where the reader's schema lets the value through as text
    reader_schema = {**PERSON, "fields": [*PERSON["fields"][:2], {"name": "status", "type": ["null", "string"]}]}
    convert = runner(reader=(JsonTreeReader, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(reader_schema)}),
                     writer=(AvroRecordSetWriter, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(PERSON)}))
    content = person_json(status="ERROR")
    convert.enqueue(content)
    convert.run()
    [failed] = convert.output("failure")
    assert convert.read(failed) == content
    assert failed.attributes["record.error.message"].startswith("record 0 does not fit the Avro schema")
    assert convert.output("success") == []


def test_an_enum_union_with_a_string_takes_any_text():
    # NiFi's testEnumUnionString
    schema = {**PERSON, "fields": [*PERSON["fields"][:2], {"name": "status", "type": [
        "null", {"type": "enum", "name": "statusEnum", "symbols": ["ACTIVE", "INACTIVE"]}, "string"]}]}
    convert = runner(reader=(JsonTreeReader, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(schema)}),
                     writer=(AvroRecordSetWriter, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(schema)}))
    convert.enqueue(person_json(status="ERROR"))
    convert.run()
    [out] = convert.output("success")
    assert avro_records(convert.read(out))[0]["status"] == "ERROR"


def test_fields_not_in_the_schema_are_left_out():
    # NiFi's testJSONDroppingUnknownFields
    schema = {**PERSON, "fields": [*PERSON["fields"], {"name": "jobs", "type": ["null", {"type": "array", "items": {
        "type": "record", "name": "jobType", "fields": [{"name": "jobId", "type": ["null", "string"]},
                                                        {"name": "jobName", "type": ["null", "string"]}]}}]}]}
    given = {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(schema)}
    convert = runner(reader=(JsonTreeReader, given), writer=(JsonRecordSetWriter, {
        **given, "Schema Write Strategy": "Set 'avro.schema' Attribute"}))
    convert.enqueue(person_json(name={"last": "Doe", "first": "John", "undefinedKeyInObject": "whatever"},
                                undefinedKey="whatever", jobs=[{"jobId": "1", "jobName": "someJob",
                                                                "undefinedKeyInObject": "whatever"}],
                                undefinedObjectArray=[{"elementId": "1"}], undefinedObject={"elementId": "2"},
                                undefinedScalarArray=[1, 2, 3]))
    convert.run()
    [out] = convert.output("success")
    assert b"undefined" not in convert.read(out)
    assert json.loads(convert.read(out))[0]["jobs"] == [{"jobId": "1", "jobName": "someJob"}]
    assert json.loads(out.attributes["avro.schema"])["name"] == "personWithNameRecord"


def test_a_date_read_with_a_format_is_written_as_avros_date():
    # NiFi's testDateConversionWithUTCMinusTimezone: 1970-01-02 is day 1
    schema = {"type": "record", "name": "DateRecord", "fields": [{"name": "date", "type": {"type": "int",
                                                                                          "logicalType": "date"}}]}
    convert = runner(reader=(JsonTreeReader, {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(schema),
                                              "Date Format": "yyyy-MM-dd"}),
                     writer=(AvroRecordSetWriter, {}))
    convert.enqueue(b'{ "date": "1970-01-02" }')
    convert.run()
    [out] = convert.output("success")
    with io.BytesIO(convert.read(out)) as stream:
        [record] = list(fastavro.reader(stream, return_record_name=False))
    assert (record["date"] - record["date"].__class__(1970, 1, 1)).days == 1


def test_csv_formats_from_the_flowfiles_attributes():
    # NiFi's testCSVFormattingWithEL
    convert = runner(reader=(CSVReader, {"Value Separator": "${csv.in.delimiter}", "Quote Character": "${csv.in.quote}",
                                         "Escape Character": "${csv.in.escape}", "Comment Marker": "${csv.in.comment}"}),
                     writer=(CSVRecordSetWriter, {"Value Separator": "${csv.out.delimiter}",
                                                  "Quote Character": "${csv.out.quote}", "Quote Mode": "Quote All Values"}))
    convert.enqueue(b"~ comment\nid|username|password\n123|'John'|^|^'^^\n", {
        "csv.in.delimiter": "|", "csv.in.quote": "'", "csv.in.escape": "^", "csv.in.comment": "~",
        "csv.out.delimiter": "\t", "csv.out.quote": "`"})
    convert.run()
    assert convert.contents("success") == [b"`id`\t`username`\t`password`\n`123`\t`John`\t`|'^`\n"]


def test_converts_to_parquet_and_back_in_batches():
    rows = 150_000   # more than one reader batch (BATCH_RECORDS)
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "text": pa.array([f"row {i}" for i in range(rows)])})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=40_000)
    to_avro = runner(reader=(ParquetReader, {}), writer=(AvroRecordSetWriter, {}))
    to_avro.enqueue(sink.getvalue())
    to_avro.run()
    [avro] = to_avro.output("success")
    assert avro.attributes["record.count"] == str(rows)

    to_parquet = runner(reader=(AvroReader, {}), writer=(ParquetRecordSetWriter, {"Row Group Size": "1 MB"}))
    to_parquet.enqueue(to_avro.read(avro))
    to_parquet.run()
    [out] = to_parquet.output("success")
    parquet = pq.ParquetFile(io.BytesIO(to_parquet.read(out)))
    assert parquet.metadata.num_row_groups > 1   # written as the batches came, not at the end
    assert parquet.read().equals(table)
    assert out.attributes["mime.type"] == "application/parquet"


def test_a_property_naming_a_service_of_the_wrong_kind_is_a_validation_problem():
    with pytest.raises(ValueError) as problem:
        ProcessorRunner(ConvertRecord, {"Record Reader": "writer", "Record Writer": "writer"},
                        services={"writer": (JsonRecordSetWriter, {})})
    assert ("property 'Record Reader' needs a RecordReaderFactory, but controller service 'writer' is a "
            "JsonRecordSetWriter") in str(problem.value)
    with pytest.raises(ValueError) as missing:
        ProcessorRunner(ConvertRecord, {"Record Reader": "nowhere", "Record Writer": "writer"},
                        services={"writer": (JsonRecordSetWriter, {})})
    assert "'nowhere', which the flow does not have in reach" in str(missing.value)
    with pytest.raises(ValueError, match="property 'Record Writer' is required"):
        ProcessorRunner(ConvertRecord, {"Record Reader": "reader"}, services={"reader": (JsonTreeReader, {})})
