"""UpdateRecord, with cases from NiFi's TestUpdateRecord (records in and out as Avro)."""

from __future__ import annotations

import io

import fastavro
import pytest

from flowactors.processors.records.update_record import UpdateRecord
from flowactors.services import AvroReader, AvroRecordSetWriter
from flowactors.testing import ProcessorRunner

pytestmark = pytest.mark.usefixtures("processor_engine")

SERVICES = {"reader": (AvroReader, {}), "writer": (AvroRecordSetWriter, {})}
PERSON = {"type": "record", "name": "person", "fields": [
    {"name": "id", "type": ["null", "long"], "default": None},
    {"name": "name", "type": ["null", "string"]},
    {"name": "age", "type": ["null", "int"]}]}
NAMED = {"type": "record", "name": "named", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": {"type": "record", "name": "nameRecord", "fields": [
        {"name": "first", "type": "string"}, {"name": "last", "type": "string"}]}},
    {"name": "mother", "type": ["null", "nameRecord"]}]}
ADDRESSES = {"type": "record", "name": "people", "fields": [
    {"name": "name", "type": "string"},
    {"name": "numbers", "type": {"type": "array", "items": "int"}},
    {"name": "addresses", "type": ["null", {"type": "array", "items": {"type": "record", "name": "address", "fields": [
        {"name": "street", "type": "string"}, {"name": "city", "type": "string"}, {"name": "state", "type": "string"}]}}]}]}


def avro(schema: dict, records: list[dict]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, schema, records)
    return out.getvalue()


def records_of(data: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(data)))


def run(properties: dict, content: bytes, attributes: dict | None = None, *, by_path: bool = False):
    values = {"Record Reader": "reader", "Record Writer": "writer", **properties}
    if by_path:
        values["Replacement Value Strategy"] = "Record Path Value"
    runner = ProcessorRunner(UpdateRecord, values, services=SERVICES)
    runner.enqueue(content, attributes or {})
    runner.run()
    return runner


def people(*rows: tuple) -> bytes:
    return avro(PERSON, [{"id": None, "name": name, "age": age} for name, age in rows])


def test_literal_value_with_expression_language_and_record_index():
    runner = run({"/name": "${newName}", "/id": "${record.index}"}, people(("John Doe", 35), ("Jane", 36)),
                 {"newName": "Jane Doe"})
    [out] = runner.output("success")
    assert records_of(runner.read(out)) == [{"id": 1, "name": "Jane Doe", "age": 35},
                                            {"id": 2, "name": "Jane Doe", "age": 36}]
    assert out.attributes["record.count"] == "2"
    assert out.attributes["mime.type"] == "application/avro-binary"


def test_record_path_value_copies_a_field_cast_to_its_type():
    runner = run({"/name": "/age"}, people(("John Doe", 35)), by_path=True)
    [out] = runner.output("success")
    assert records_of(runner.read(out)) == [{"id": None, "name": "35", "age": 35}]


def test_filter_function_creates_a_boolean_field():
    runner = run({"/hasAge": "not(isEmpty(/age))"}, people(("John Doe", 35), ("Ann", None)), by_path=True)
    [out] = runner.output("success")
    rows = records_of(runner.read(out))
    assert [r["hasAge"] for r in rows] == [True, False]
    assert fastavro.reader(io.BytesIO(runner.read(out))).writer_schema["fields"][-1]["name"] == "hasAge"


def test_missing_source_gives_null_and_relative_path_reads_a_sibling():
    runner = run({"/name": "/siblings[0]/name", "/age": "../id"}, people(("John Doe", 35)), by_path=True)
    [out] = runner.output("success")
    assert records_of(runner.read(out)) == [{"id": None, "name": None, "age": None}]


def test_field_value_in_expression_and_literal_into_array_elements():
    data = avro(NAMED, [{"id": 1, "name": {"first": "John", "last": "Doe"}, "mother": None}])
    runner = run({"/name/last": "${field.value:toUpper()}-${field.name}-${field.type}"}, data)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert row["name"] == {"first": "John", "last": "DOE-last-STRING"}
    data = avro(ADDRESSES, [{"name": "a", "numbers": [1, 2, 3, 4], "addresses": None}])
    runner = run({"/numbers[0,2]": "8", "/numbers[0..-1][. = 4]": "9"}, data)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert row["numbers"] == [8, 2, 8, 9] and row["addresses"] is None   # a null array: nothing to update


def test_relative_concat_adds_a_field_inside_array_records():
    data = avro(ADDRESSES, [{"name": "a", "numbers": [], "addresses": [
        {"street": "1 Main", "city": "Town", "state": "NY"}, {"street": "2 Side", "city": "City", "state": "CA"}]}])
    runner = run({"/addresses[*]/full": "concat(../street, ' ', ../city, ' ', ../state)"}, data, by_path=True)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert [a["full"] for a in row["addresses"]] == ["1 Main Town NY", "2 Side City CA"]
    assert row["addresses"][0]["city"] == "Town"


def test_changing_a_record_field_to_a_string_and_adding_fields():
    data = avro(NAMED, [{"id": 1, "name": {"first": "John", "last": "Doe"}, "mother": None}])
    runner = run({"/firstName": "/name/first", "/lastName": "/name/last"}, data, by_path=True)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert row["firstName"] == "John" and row["lastName"] == "Doe" and row["name"]["first"] == "John"
    runner = run({"/name": "/name/first"}, data, by_path=True)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert row["name"] == "John"


def test_root_replaced_by_a_record_or_by_several_fields():
    data = avro(NAMED, [{"id": 1, "name": {"first": "John", "last": "Doe"}, "mother": None}])
    for path in ("/name", "/name/*"):
        runner = run({"/": path}, data, by_path=True)
        assert records_of(runner.read(runner.output("success")[0])) == [{"first": "John", "last": "Doe"}]
    runner = run({"/name/..": "/name"}, data, by_path=True)
    assert records_of(runner.read(runner.output("success")[0])) == [{"first": "John", "last": "Doe"}]


def test_record_copied_is_a_copy():
    data = avro(NAMED, [{"id": 1, "name": {"first": "John", "last": "Doe"},
                         "mother": {"first": "Jane", "last": "Smith"}}])
    runner = run({"/name": "/mother"}, data, by_path=True)
    [row] = records_of(runner.read(runner.output("success")[0]))
    assert row["name"] == row["mother"] == {"first": "Jane", "last": "Smith"}


def test_replacement_path_from_an_attribute_that_does_not_compile_is_a_failure():
    runner = run({"/name": "${recordPath}"}, people(("John Doe", 35)), {"recordPath": "hello"}, by_path=True)
    [failed] = runner.output("failure")
    assert not runner.output("success")
    assert "hello" in failed.attributes["record.error.message"]
    assert records_of(runner.read(failed)) == [{"id": None, "name": "John Doe", "age": 35}]   # unchanged


def test_malformed_content_is_a_failure_with_record_error_attributes():
    runner = run({"/name": "x"}, b"Obj\x01not really avro")
    [failed] = runner.output("failure")
    assert failed.attributes["record.error.message"]
    assert failed.attributes["flowactors.failure.processor"]


def test_invalid_record_paths_are_validation_problems_naming_property_and_position():
    problems = UpdateRecord.validate_properties({"Record Reader": "r", "Record Writer": "w", "/name[": "x"})
    assert len(problems) == 1 and "'/name['" in problems[0] and "its name" in problems[0] and "position" in problems[0]
    problems = UpdateRecord.validate_properties({"Record Reader": "r", "Record Writer": "w", "/name": "/a[",
                                                 "Replacement Value Strategy": "Record Path Value"})
    assert len(problems) == 1 and "'/name'" in problems[0] and "value" in problems[0]
    assert UpdateRecord.validate_properties({"Record Reader": "r", "Record Writer": "w"}) == [
        "at least one RecordPath must be given, as a dynamic property's name"]


def test_literal_for_the_root_record_is_a_failure():
    runner = run({"/": "x"}, people(("John Doe", 35)))
    [failed] = runner.output("failure")
    assert "root record" in failed.attributes["record.error.message"]
