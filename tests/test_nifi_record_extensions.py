"""NiFi's own Python test extensions' record and lookup cases, through controller services.

NiFi tests its Python bridge with test extensions driven by Java integration tests:
``PythonControllerInteractionIT`` (SetRecordField on JSON arrays and a nested record through
JsonTreeReader and JsonRecordSetWriter, HashRecordField on nested paths, LookupAddress through a
StringLookupService) and ``PythonProcessorIT`` (SetRecordField on CSV with a header and spaces
after the commas, and partitioned by a 'group' field, through CSV services). The same inputs,
configuration and expected outputs run here with processors of our own that behave as those do
(examples/nifi_python: TagRecords sets fields from dynamic properties and partitions by a field,
HashField hashes a field by a dotted path and hands the reader's schema back, FillFromLookup looks
a field up), through the services a NiFi user configures: JsonTreeReader, JsonRecordSetWriter,
CSVReader, CSVRecordSetWriter (NiFi's system test used mock CSV services that trim each value)
and SimpleKeyValueLookupService. Expected outputs are NiFi's, asserted as NiFi's tests assert them.

With ``NIFI_PYTHON_TEST_EXTENSIONS`` naming a folder holding NiFi's extensions, unmodified (they
are not part of this repository; docs/nifi-python-processors.md says how to get them, and
HashRecordField needs ``glom`` importable), every case also runs with NiFi's own processors.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowactors.nifi import python_processor_type
from flowactors.services import CSVReader, CSVRecordSetWriter, JsonRecordSetWriter, JsonTreeReader
from flowactors.services.lookup import SimpleKeyValueLookupService
from flowactors.testing import ProcessorRunner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "nifi_python"
RECORDS = {"Record Reader": "reader", "Record Writer": "writer"}
JSON_SERVICES = {"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {})}
CSV_SERVICES = {"reader": (CSVReader, {}), "writer": (CSVRecordSetWriter, {})}


@dataclass(frozen=True)
class Processors:
    """Which processors play NiFi's SetRecordField, HashRecordField and LookupAddress, and the
    properties that configure them as NiFi's tests configure those."""
    folder: Path
    set_fields: str
    set_properties: dict
    hash_field: str
    hash_path: str
    lookup: str
    lookup_properties: dict


OURS = Processors(EXAMPLES, "TagRecords", {"Partition Field": "group"}, "HashField", "Field Path",
                  "FillFromLookup", {"Lookup Service": "lookup", "Key Field": "name"})
NIFI_FOLDER = os.environ.get("NIFI_PYTHON_TEST_EXTENSIONS")
SIDES = [pytest.param(OURS, id="ours")] + ([pytest.param(Processors(
    Path(NIFI_FOLDER), "SetRecordField", {}, "HashRecordField", "Record Path", "LookupAddress",
    {"Lookup": "lookup"}), id="nifi")] if NIFI_FOLDER else [])


@pytest.fixture(params=SIDES)
def side(request) -> Processors:
    return request.param


def run(side: Processors, processor: str, properties: dict, services: dict, content: str,
        attributes: dict | None = None):
    runner = ProcessorRunner(python_processor_type(processor, extensions=str(side.folder)), properties,
                             services=services)
    runner.enqueue(content.encode(), attributes or {})
    runner.run()
    return runner


def transfers(runner: ProcessorRunner) -> dict[str, int]:
    return {name: len(runner.output(name)) for name in ("success", "original", "failure")}


def csv_rows(text: str) -> list[dict[str, str]]:
    """The rows of CSV text as NiFi's system test reads them: split at commas, each part trimmed."""
    header, *lines = text.split("\n")
    names = [name.strip() for name in header.split(",")]
    return [dict(zip(names, (value.strip() for value in line.split(",")))) for line in lines if line.strip()]


# ---------------------------------------------------------------------------------- SetRecordField's cases
def test_dynamic_properties_set_fields_of_each_record_of_a_json_array(side):
    """PythonControllerInteractionIT.testRecordTransformWithDynamicProperties."""
    runner = run(side, side.set_fields, {**RECORDS, **side.set_properties, "name": "Jane Doe", "number": "8"},
                 JSON_SERVICES,
                 '[{ "name": "John Doe" }]')
    assert transfers(runner) == {"success": 1, "original": 1, "failure": 0}
    assert runner.contents("success") == [b'[{"name":"Jane Doe","number":"8"}]']


def test_a_nested_record_is_written_back_as_it_came(side):
    """PythonControllerInteractionIT.testRecordTransformWithInnerRecord."""
    runner = run(side, side.set_fields, {**RECORDS, **side.set_properties, "name": "Jane Doe"}, JSON_SERVICES,
                 '[{"name": "Jake Doe", "father": { "name": "John Doe" }}]')
    assert transfers(runner) == {"success": 1, "original": 1, "failure": 0}
    assert runner.contents("success") == [b'[{"name":"Jane Doe","father":{"name":"John Doe"}}]']


def test_csv_with_a_header_and_spaces_after_commas_takes_fields_from_expressions(side):
    """PythonProcessorIT.testRecordTransform: the values trimmed, empty ones replaced, fields set
    from attributes and an expression function."""
    runner = run(side, side.set_fields, {**RECORDS, **side.set_properties, "age": "3", "color": "yellow",
                                         "sport": "${sport}", "greeting": "${greeting:toUpper()}"}, CSV_SERVICES,
                 "name, age, color, sport, greeting\nJane Doe, 7, red,,\nJake Doe, 14, blue,,",
                 {"sport": "Ball", "greeting": "hello"})
    assert transfers(runner) == {"success": 1, "original": 1, "failure": 0}
    [content] = runner.contents("success")
    fields = {"age": "3", "color": "yellow", "sport": "Ball", "greeting": "HELLO"}
    assert csv_rows(content.decode()) == [{"name": "Jane Doe", **fields}, {"name": "Jake Doe", **fields}]


def test_records_are_partitioned_by_their_group_one_flowfile_each(side):
    """PythonProcessorIT.testRecordTransformPartitioning: one FlowFile a group, in the order the
    groups came, each with its group as an attribute."""
    runner = run(side, side.set_fields, {**RECORDS, **side.set_properties}, CSV_SERVICES,
                 "name, group\nJane Doe, default\nJake Doe, other")
    assert transfers(runner) == {"success": 2, "original": 1, "failure": 0}
    assert [csv_rows(content.decode()) for content in runner.contents("success")] == [
        [{"name": "Jane Doe", "group": "default"}], [{"name": "Jake Doe", "group": "other"}]]
    assert [flowfile.attributes["group"] for flowfile in runner.output("success")] == ["default", "other"]


# ---------------------------------------------------------------------------------- HashRecordField's cases
NESTED = '[{"foo":"foo","my":{"example":"value"}}]'


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("path, content, expected", [
    pytest.param("my.example", NESTED, '[{"foo":"foo","my":{"example":"%s"}}]' % sha256("value"), id="happy-path"),
    pytest.param("does.not.exist", NESTED, NESTED, id="missing-field"),
    pytest.param("my", NESTED, NESTED, id="non-scalar"),
    pytest.param("count", '[{"count":7}]', '[{"count":"%s"}]' % sha256("7"), id="long-value"),
])
def test_a_field_found_by_its_path_is_hashed(side, path, content, expected):
    """PythonControllerInteractionIT.testHashRecordField*: the transform hands the reader's schema
    back; a hash put into the INT field 'count' is written as text (NiFi's JSON writer writes the
    record as the transform made it)."""
    runner = run(side, side.hash_field, {**RECORDS, side.hash_path: path}, JSON_SERVICES, content)
    assert transfers(runner) == {"success": 1, "original": 1, "failure": 0}
    assert runner.contents("success") == [expected.encode()]


# ---------------------------------------------------------------------------------- LookupAddress's case
def test_a_lookup_service_fills_in_the_address(side):
    """PythonControllerInteractionIT.testControllerService: the name looked up in a
    StringLookupService (NiFi's test service maps 'John Doe' to '123 My Street')."""
    runner = run(side, side.lookup, side.lookup_properties,
                 {"lookup": (SimpleKeyValueLookupService, {"John Doe": "123 My Street"})}, '{"name":"John Doe"}')
    assert transfers(runner) == {"success": 1, "original": 1, "failure": 0}
    assert "123 My Street" in runner.contents("success")[0].decode()
