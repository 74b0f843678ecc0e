"""PartitionRecord, with cases from NiFi's TestPartitionRecord (records in and out as Avro)."""

from __future__ import annotations

import io

import fastavro
import pytest

from flowactors.processors.records.partition_record import PartitionRecord
from flowactors.services import AvroReader, AvroRecordSetWriter
from flowactors.testing import ProcessorRunner

pytestmark = pytest.mark.usefixtures("processor_engine")

SERVICES = {"reader": (AvroReader, {}), "writer": (AvroRecordSetWriter, {})}
PERSON = {"type": "record", "name": "person", "fields": [
    {"name": "name", "type": ["null", "string"]},
    {"name": "age", "type": ["null", "int"]},
    {"name": "sports", "type": ["null", {"type": "array", "items": "string"}]}]}


def people(*rows: tuple) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, PERSON, [{"name": n, "age": a, "sports": s} for n, a, s in rows])
    return out.getvalue()


def records_of(data: bytes) -> list[tuple]:
    return [(r["name"], r["age"], r["sports"]) for r in fastavro.reader(io.BytesIO(data))]


def run(properties: dict, content: bytes, attributes: dict | None = None):
    runner = ProcessorRunner(PartitionRecord, {"Record Reader": "reader", "Record Writer": "writer", **properties},
                             services=SERVICES)
    runner.enqueue(content, {"filename": "people.avro", **(attributes or {})})
    runner.run()
    return runner


FIVE = people(("John", 28, None), ("Jake", 49, None), ("Mark", None, None), ("Jane", 20, None), ("Jake", 14, None))


def test_group_by_a_string_field_with_fragments_in_first_appearance_order():
    runner = run({"person-name": "/name"}, FIVE)
    out = runner.output("success")
    assert [f.attributes["person-name"] for f in out] == ["John", "Jake", "Mark", "Jane"]
    assert [f.attributes["record.count"] for f in out] == ["1", "2", "1", "1"]
    assert records_of(runner.read(out[1])) == [("Jake", 49, None), ("Jake", 14, None)]
    assert {f.attributes["fragment.identifier"] for f in out} == {out[0].attributes["fragment.identifier"]}
    assert [f.attributes["fragment.index"] for f in out] == ["0", "1", "2", "3"]
    assert {f.attributes["fragment.count"] for f in out} == {"4"}
    assert {f.attributes["segment.original.filename"] for f in out} == {"people.avro"}
    [original] = runner.output("original")
    assert runner.read(original) == FIVE and not runner.output("failure")


def test_group_by_filter_functions_and_comparisons_per_record():
    runner = run({"unknown-age": "isEmpty( /age )", "another-unknown": "isEmpty( /nonExistentField )"}, FIVE)
    out = runner.output("success")
    assert [(f.attributes["unknown-age"], f.attributes["record.count"]) for f in out] == [("false", "4"), ("true", "1")]
    assert {f.attributes["another-unknown"] for f in out} == {"true"}
    runner = run({"adult": "/age >= 18"}, FIVE)
    assert sorted((f.attributes["adult"], f.attributes["record.count"]) for f in runner.output("success")) == [
        ("false", "2"), ("true", "3")]


def test_group_by_several_fields_and_a_null_value_has_no_attribute():
    runner = run({"age": "/age", "name": "/name"},
                 people(("John", 30, None), ("Jane", 30, None), ("John", 30, None), ("John", 31, None), ("Al", None, None)))
    out = runner.output("success")
    assert [records_of(runner.read(f)) for f in out] == [
        [("John", 30, None), ("John", 30, None)], [("Jane", 30, None)], [("John", 31, None)], [("Al", None, None)]]
    assert [(f.attributes.get("age"), f.attributes["name"]) for f in out] == [
        ("30", "John"), ("30", "Jane"), ("31", "John"), (None, "Al")]


def test_group_by_an_array_field_gives_no_attribute():
    runner = run({"sports": "/sports"}, people(("John", 30, ["baseball"]), ("Jane", 30, ["baseball"]),
                                               ("John", 30, ["basketball"]), ("John", 31, ["football"])))
    out = runner.output("success")
    assert [records_of(runner.read(f)) for f in out] == [
        [("John", 30, ["baseball"]), ("Jane", 30, ["baseball"])], [("John", 30, ["basketball"])],
        [("John", 31, ["football"])]]
    assert not any("sports" in f.attributes for f in out)


def test_path_from_an_attribute_and_no_records_gives_no_group():
    runner = run({"by": "${field}"}, FIVE, {"field": "/age"})
    assert [f.attributes.get("by") for f in runner.output("success")] == ["28", "49", None, "20", "14"]
    runner = run({"age": "/age"}, people())
    assert not runner.output("success") and len(runner.output("original")) == 1


def test_malformed_content_and_bad_path_from_an_attribute_go_to_failure():
    runner = run({"age": "/age"}, b"Obj\x01not avro")
    [failed] = runner.output("failure")
    assert failed.attributes["record.error.message"] and not runner.output("success")
    assert runner.read(failed) == b"Obj\x01not avro"
    runner = run({"by": "${field}"}, FIVE, {"field": "/age["})
    [failed] = runner.output("failure")
    assert "position" in failed.attributes["record.error.message"] and not runner.output("original")


def test_invalid_record_path_is_a_validation_problem_naming_property_and_position():
    problems = PartitionRecord.validate_properties({"Record Reader": "r", "Record Writer": "w", "age": "/age[="})
    assert len(problems) == 1 and "'age': its value" in problems[0] and "position" in problems[0]
    assert PartitionRecord.validate_properties({"Record Reader": "r", "Record Writer": "w"})


def test_arrow_grouping_agrees_with_grouping_record_by_record():
    import pyarrow as pa

    from flowactors.processors.records.partition_record import _arrow_groups, _record_groups
    from flowactors.sdk.record_path import compile_path

    table = pa.table({"name": ["a", "b", None, "a", None], "n": [1, 2, 3, 1, 3]})
    paths = {"name": compile_path("/name"), "n": compile_path("/n")}
    fast = _arrow_groups(table, {"name": "name", "n": "n"})
    slow = _record_groups(table, paths)
    assert [(g.to_pylist(), a) for g, a in fast] == [(g.to_pylist(), a) for g, a in slow] == [
        ([0, 3], {"name": "a", "n": "1"}), ([1], {"name": "b", "n": "2"}), ([2, 4], {"n": "3"})]
