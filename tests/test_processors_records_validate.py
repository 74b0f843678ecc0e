"""ValidateRecord: NiFi's TestValidateRecord cases on the real record services, the record checks
themselves (strict and lenient, nested, in range), and bad input."""

from __future__ import annotations

import io
import json

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from flowactors.processors.records import ValidateRecord
from flowactors.processors.records.validate import RecordCheck
from flowactors.sdk.records.schema import avro_to_arrow
from flowactors.services import (AvroRecordSetWriter, AvroSchemaRegistry, CSVReader, CSVRecordSetWriter,
                                 JsonRecordSetWriter, JsonTreeReader, ParquetRecordSetWriter)
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

TEXT, NAME = "Use 'Schema Text' Property", "Use 'Schema Name' Property"
PERSON = {"name": "personWithNameRecord", "namespace": "nifi", "type": "record", "fields": [
    {"name": "id", "type": "int"}, {"name": "firstName", "type": "string"}, {"name": "lastName", "type": "string"}]}
# the CSV of NiFi's cases, read as text (a CSV reader's header-derived schema)
PEOPLE = [{"id": "1", "firstName": "John", "lastName": "Doe"}, {"id": "2", "firstName": "Jane", "lastName": "Doe"},
          {"id": "Three", "firstName": "Jack", "lastName": "Doe"}]
DETAILS = "Records in this FlowFile were invalid for the following reasons: "


def runner(schema=PERSON, writer=(AvroRecordSetWriter, {}), invalid_writer=(JsonRecordSetWriter, {}),
           services=None, **properties) -> ProcessorRunner:
    given = {"Schema Access Strategy": TEXT, "Schema Text": json.dumps(schema)} if schema is not None else {}
    with_invalid = {"Record Writer for Invalid Records": "invalid"} if invalid_writer else {}
    return ProcessorRunner(
        ValidateRecord, {"Record Reader": "reader", "Record Writer": "writer", **with_invalid, **given, **properties},
        services={"reader": (JsonTreeReader, {}), "writer": writer,
                  **({"invalid": invalid_writer} if invalid_writer else {}), **(services or {})})


def validate(rows, **options) -> ProcessorRunner:
    validator = runner(**options)
    validator.enqueue(json.dumps(rows).encode())
    validator.run()
    return validator


def avro_records(content: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(content)))


@pytest.mark.usefixtures("processor_engine")
def test_valid_and_invalid_records_go_to_flowfiles_of_their_own():
    # NiFi's testNonStrictTypeCheckWithAvroWriter: "1" fits an int once converted, "Three" does not
    validator = runner(**{"Strict Type Checking": "false", "Allow Extra Fields": "false"})
    original = validator.enqueue(json.dumps(PEOPLE).encode())
    validator.run()
    [valid] = validator.output("valid")
    assert valid.attributes["record.count"] == "2"
    assert valid.attributes["mime.type"] == "application/avro-binary"
    assert avro_records(validator.read(valid)) == [{"id": 1, "firstName": "John", "lastName": "Doe"},
                                                   {"id": 2, "firstName": "Jane", "lastName": "Doe"}]
    [invalid] = validator.output("invalid")   # as read, by the writer for invalid records
    assert json.loads(validator.read(invalid)) == PEOPLE[2:]
    assert invalid.attributes["record.count"] == "1"
    assert invalid.attributes["mime.type"] == "application/json"
    assert validator.output("failure") == []
    events = validator.events()
    assert [e.event_type for e in events if e.flowfile_uuid == original.uuid] == [T.FORK, T.DROP]
    routes = {e.relationship: e.details for e in events if e.event_type == T.ROUTE}
    assert routes == {"valid": None, "invalid": DETAILS + "The following 1 fields had values whose type did not "
                                                          "match the schema: [/id]"}


def test_invalid_records_past_the_spools_memory_come_from_its_temporary_file(monkeypatch):
    monkeypatch.setattr("flowactors.sdk.records.spooling.SPOOL_BYTES", 256)
    rows = [{"id": i if i % 3 else f"bad {i}", "firstName": "John", "lastName": "Doe"} for i in range(3000)]
    validator = validate(rows, **{"Strict Type Checking": "false"})
    [valid], [invalid] = validator.output("valid"), validator.output("invalid")
    assert len(avro_records(validator.read(valid))) == 2000
    assert json.loads(validator.read(invalid)) == rows[::3]
    assert invalid.attributes["record.count"] == "1000"


@pytest.mark.usefixtures("processor_engine")
def test_records_that_cannot_be_read_send_the_flowfile_to_failure():
    validator = runner()
    content = b'[{"id": 1}, {"id": ]'
    validator.enqueue(content)
    validator.run()
    [failed] = validator.output("failure")
    assert validator.read(failed) == content
    assert failed.attributes["record.error.index"] == "1"
    assert validator.output("valid") == [] and validator.output("invalid") == []


def test_csv_through_unchanged_and_checked_as_text():
    # NiFi's testColumnsOrder, testStrictTypeCheck and testNonStrictTypeCheckWithJsonWriter (a CSV
    # header's string fields)
    content = (b"fieldA,fieldB,fieldC,fieldD,fieldE,fieldF\nvalueA,valueB,valueC,valueD,valueE,valueF\n"
               b"valueA,valueB,valueC,valueD,valueE,valueF\n")
    csv = {"reader": (CSVReader, {}), "writer": (CSVRecordSetWriter, {})}
    same = ProcessorRunner(ValidateRecord, {"Record Reader": "reader", "Record Writer": "writer"}, services=csv)
    same.enqueue(content)
    same.run()
    assert same.contents("valid") == [content]
    people = b"id,firstName,lastName\n1,John,Doe\n2,Jane,Doe\nThree,Jack,Doe\n"
    header = {"reader": (CSVReader, {"Schema Access Strategy": "Use String Fields From Header"}),
              "writer": (JsonRecordSetWriter, {}), "invalid": (CSVRecordSetWriter, {})}
    for strict, valid, invalid in (("true", [], [people]), ("false", [b'[{"id":1,"firstName":"John","lastName":"Doe"},'
                                                                       b'{"id":2,"firstName":"Jane","lastName":"Doe"}]'],
                                   [b"id,firstName,lastName\nThree,Jack,Doe\n"])):
        validator = ProcessorRunner(ValidateRecord, {
            "Record Reader": "reader", "Record Writer": "writer", "Record Writer for Invalid Records": "invalid",
            "Schema Access Strategy": TEXT, "Schema Text": json.dumps(PERSON), "Allow Extra Fields": "false",
            "Strict Type Checking": strict}, services=header)
        validator.enqueue(people)
        validator.run()
        assert (validator.contents("valid"), validator.contents("invalid")) == (valid, invalid)


def test_strict_type_checking_wants_the_fields_own_type():
    # NiFi's testStrictTypeCheck: text is not an int
    validator = validate(PEOPLE, **{"Strict Type Checking": "true", "Allow Extra Fields": "false"})
    assert validator.output("valid") == []
    [invalid] = validator.output("invalid")
    assert invalid.attributes["record.count"] == "3"
    assert json.loads(validator.read(invalid)) == PEOPLE


def test_validation_details_in_an_attribute_cut_to_length():
    # NiFi's testValidationsDetailsAttributeForInvalidRecords
    details = DETAILS + "The following 1 fields had values whose type did not match the schema: [/id]"
    validator = validate(PEOPLE, **{"Strict Type Checking": "false", "Validation Details Attribute Name": "valDetails"})
    assert validator.output("invalid")[0].attributes["valDetails"] == details
    short = validate(PEOPLE, **{"Strict Type Checking": "false", "Validation Details Attribute Name": "valDetails",
                                "Maximum Validation Details Length": "20"})
    assert short.output("invalid")[0].attributes["valDetails"] == details[:20]
    assert "valDetails" not in short.output("valid")[0].attributes


def test_details_length_from_an_attribute_must_be_a_positive_whole_number():
    validator = runner(**{"Strict Type Checking": "false", "Validation Details Attribute Name": "valDetails",
                          "Maximum Validation Details Length": "${length}"})
    validator.enqueue(json.dumps(PEOPLE).encode(), {"length": "12"})
    validator.enqueue(json.dumps(PEOPLE).encode(), {"length": "-3"})
    validator.run()
    assert validator.output("invalid")[0].attributes["valDetails"] == DETAILS[:12]
    [failed] = validator.output("failure")
    assert failed.attributes["record.error.message"] == ("'Maximum Validation Details Length' is '-3' for this "
                                                         "FlowFile, not a positive whole number")
    assert validator.read(failed) == json.dumps(PEOPLE).encode()


def test_missing_and_extra_fields():
    rows = [{"id": 1, "firstName": "A", "lastName": "B"}, {"id": 2, "firstName": "C"},
            {"id": 3, "firstName": "D", "lastName": "E", "nickname": "F"}]
    strict = validate(rows, **{"Allow Extra Fields": "false"})
    assert avro_records(strict.contents("valid")[0]) == rows[:1]
    assert [r["id"] for r in json.loads(strict.contents("invalid")[0])] == [2, 3]
    [route] = [e.details for e in strict.events() if e.relationship == "invalid"]
    assert route == DETAILS + ("The following 1 fields were missing: [/lastName]; The following 1 fields were "
                               "present in the Record but not in the schema: [/nickname]")
    extra_allowed = validate(rows)
    assert avro_records(extra_allowed.contents("valid")[0]) == [
        rows[0], {"id": 3, "firstName": "D", "lastName": "E"}]   # the extra field is not written


def test_a_missing_required_array_is_invalid_unless_it_has_a_default():
    # NiFi's testValidateMissingRequiredArray and testValidateMissingRequiredArrayWithDefault
    records = {"type": "array", "items": {"name": "Records_record", "type": "record",
                                          "fields": [{"name": "id", "type": "string"}]}}
    schema = {"name": "Test", "type": "record", "fields": [{"name": "Records", "type": records}]}
    row = {"NotRecords": [{"id": "1"}]}
    without = validate([row], schema=schema, **{"Strict Type Checking": "false"})
    assert without.output("valid") == [] and len(without.output("invalid")) == 1
    defaulted = {**schema, "fields": [{"name": "Records", "type": records, "default": []}]}
    with_default = validate([row], schema=defaulted, **{"Strict Type Checking": "false"})
    assert avro_records(with_default.contents("valid")[0]) == [{"Records": []}]
    assert with_default.output("invalid") == []


def test_records_read_where_maps_are_wanted():
    # NiFi's testValidateNestedMap (lenient) and testValidateMaps: a JSON object is read as a record
    schema = {"type": "record", "name": "example", "fields": [{"name": "images", "type": {"type": "array", "items": {
        "type": "record", "name": "images", "fields": [{"name": "id", "type": ["string", "null"]},
                                                       {"name": "headers", "type": {"type": "map", "values": "string"}}]}}}]}
    rows = [{"images": [{"headers": {"Accept-Ranges": "bytes", "Server": "Apache"}, "id": "205f"}]},
            {"images": [{"headers": {"Accept-Ranges": 4, "Server": 10}, "id": "205f"}]}]
    validator = validate(rows, schema=schema, **{"Strict Type Checking": "false", "Allow Extra Fields": "false"})
    assert [r["images"][0]["headers"] for r in avro_records(validator.contents("valid")[0])] == [
        {"Accept-Ranges": "bytes", "Server": "Apache"}, {"Accept-Ranges": "4", "Server": "10"}]
    assert validator.output("invalid") == []

    points = {"type": "map", "values": "int"}
    schema = {"name": "statistic", "type": "record", "fields": [
        {"name": "id", "type": "string"}, {"name": "points", "type": points},
        {"name": "data", "type": {"type": "array", "items": {"name": "data", "type": "record", "fields": [
            {"name": "version", "type": ["null", "string"], "default": None}, {"name": "points", "type": points}]}}}]}
    row = {"id": "uuid", "points": {"1": 0, "2": 0}, "data": [{"points": {"3": 0, "4": 0}}, {"points": {"5": 0}}]}
    validator = validate([row], schema=schema, **{"Allow Extra Fields": "false"})
    [written] = avro_records(validator.contents("valid")[0])
    assert written["points"] == {"1": 0, "2": 0}
    assert [d["points"] for d in written["data"]] == [{"3": 0, "4": 0}, {"5": 0}]
    wrong = validate([{**row, "points": {"1": "zero"}}], schema=schema)
    assert wrong.output("valid") == [] and len(wrong.output("invalid")) == 1


def test_the_schema_from_a_registry():
    # NiFi's testSchemaNameAccess
    registry = {"registry": (AvroSchemaRegistry, {"person": json.dumps(PERSON)})}
    validator = runner(schema=None, services=registry, **{"Schema Access Strategy": NAME, "Schema Registry": "registry",
                                                          "Schema Name": "person", "Strict Type Checking": "false"})
    validator.enqueue(json.dumps(PEOPLE).encode())
    validator.enqueue(json.dumps(PEOPLE).encode(), {"schema.name": "nobody"})
    validator.run()
    assert [v.attributes["record.count"] for v in validator.output("valid")] == ["2", "2"]
    by_attribute = runner(schema=None, services=registry, **{"Schema Access Strategy": NAME,
                                                             "Schema Registry": "registry"})
    by_attribute.enqueue(json.dumps(PEOPLE).encode(), {"schema.name": "nobody"})
    by_attribute.run()
    [failed] = by_attribute.output("failure")
    assert failed.attributes["record.error.message"] == ("the schema registry has no schema named 'nobody' (it "
                                                         "has: person)")
    with pytest.raises(ValueError, match="property 'Schema Registry' must name a schema registry"):
        runner(schema=None, **{"Schema Access Strategy": NAME})


def test_the_readers_schema_takes_every_record_it_read():
    validator = validate(PEOPLE, schema=None, writer=(JsonRecordSetWriter, {}), invalid_writer=None)
    assert json.loads(validator.contents("valid")[0]) == PEOPLE
    assert validator.output("invalid") == []


def test_no_record_sends_nothing():
    validator = validate([])
    assert validator.output("valid") == [] and validator.output("invalid") == []
    assert validator.output("failure") == []
    assert [e.event_type for e in validator.events()] == [T.DROP]


def test_a_schema_text_attribute_the_flowfile_lacks_is_a_failure():
    validator = runner(schema=None, **{"Schema Access Strategy": TEXT})   # Schema Text: ${avro.schema}
    validator.enqueue(json.dumps(PEOPLE).encode())
    validator.run()
    [failed] = validator.output("failure")
    assert "the schema text is empty" in failed.attributes["record.error.message"]


def test_records_the_writer_cannot_write_send_the_flowfile_to_failure():
    # NiFi's testWriteFailureRoutesToFailure: Parquet cannot write a record without fields
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "string"}, {"name": "empty", "type": ["null", {"type": "record", "name": "e",
                                                                              "fields": []}]}]}
    validator = validate([{"id": "1"}], schema=schema, writer=(ParquetRecordSetWriter, {}))
    [failed] = validator.output("failure")
    assert "Parquet" in failed.attributes["record.error.message"]
    assert validator.output("valid") == [] and validator.output("invalid") == []


def check(schema: dict, rows: list[dict] | pa.RecordBatch, strict=True, allow_extra=True) -> tuple[list[bool], RecordCheck]:
    checker = RecordCheck(avro_to_arrow(json.dumps(schema)), allow_extra, strict)
    batch = rows if isinstance(rows, pa.RecordBatch) else pa.RecordBatch.from_pylist(rows)
    return checker.invalid_rows(batch).tolist(), checker


def record(*fields) -> dict:
    return {"type": "record", "name": "r", "fields": [{"name": n, "type": t} for n, t in fields]}


def test_strict_numbers_fit_by_kind_and_range():
    longs = pa.RecordBatch.from_pydict({"n": pa.array([1, 2 ** 40, None], pa.int64())})
    assert check(record(("n", ["null", "int"])), longs)[0] == [False, True, False]
    assert check(record(("n", ["null", "long"])), longs)[0] == [False, False, False]
    assert check(record(("n", ["null", "double"])), longs)[0] == [False, False, False]
    doubles = pa.RecordBatch.from_pydict({"n": pa.array([1.0, 2.5])})
    assert check(record(("n", "int")), doubles)[0] == [True, True]      # a double is no int, strictly
    assert check(record(("n", "int")), doubles, strict=False)[0] == [False, True]   # 1.0 converts, 2.5 does not
    texts = pa.RecordBatch.from_pydict({"n": ["1", " 2", "x", "9999999999", None]})
    assert check(record(("n", ["null", "int"])), texts)[0] == [True, True, True, True, False]
    assert check(record(("n", ["null", "int"])), texts, strict=False)[0] == [False, False, True, True, False]
    assert check(record(("n", ["null", "string"])), longs, strict=False)[0] == [False, False, False]


def test_text_kinds_dates_and_enums():
    schema = record(("day", {"type": "int", "logicalType": "date"}),
                    ("kind", {"type": "enum", "name": "K", "symbols": ["A", "B"]}),
                    ("id", {"type": "string", "logicalType": "uuid"}))
    rows = [{"day": "2024-05-01", "kind": "A", "id": "3e0fd2a6-0f4b-4b8e-8d41-4b2f2f0f7a11"},
            {"day": "May 1st", "kind": "C", "id": "not-a-uuid"}]
    bad, checker = check(schema, rows, strict=False)
    assert bad == [False, True]
    assert checker.problems.invalid == {"/day", "/kind", "/id"}
    assert check(schema, rows[:1])[0] == [True]   # strictly, the text of a date is not a date


def test_nested_records_and_lists_are_checked_inside():
    schema = record(("tags", {"type": "array", "items": "int"}),
                    ("address", {"type": "record", "name": "a", "fields": [{"name": "city", "type": "string"},
                                                                           {"name": "zip", "type": ["null", "int"]}]}))
    rows = [{"tags": [1, 2], "address": {"city": "x", "zip": 1}},
            {"tags": [1, None], "address": {"city": "y", "zip": None}},
            {"tags": [], "address": {"city": None, "zip": 2}},
            {"tags": None, "address": None}]
    bad, checker = check(schema, rows)
    assert bad == [False, True, True, True]
    assert checker.problems.invalid == {"/tags"} and checker.problems.missing == {"/address/city", "/tags",
                                                                                  "/address"}


def test_bad_values_are_found_wherever_they_are():
    rng = np.random.default_rng(7)
    values = [str(v) for v in rng.integers(0, 1000, 5_000)]
    wrong = set(rng.choice(5_000, 300, replace=False).tolist())
    for index in wrong:
        values[index] = f"x{index}"
    batch = pa.RecordBatch.from_pydict({"n": values}).slice(1_000)   # a slice: offsets into its column
    bad, _ = check(record(("n", "int")), batch, strict=False)
    assert [i + 1_000 for i, b in enumerate(bad) if b] == sorted(i for i in wrong if i >= 1_000)
