"""LookupRecord: NiFi's TestLookupRecord cases (JSON in and out instead of its mock reader and
writer, the standard lookup services instead of its map lookups), then what it adds: the
schema found ahead of the first match, the cache, a failing lookup service, provenance and the
configuration checks."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowactors.processors.records.lookup_record import LookupRecord
from flowactors.sdk.services import ControllerService, StringLookupService
from flowactors.services import (CSVRecordLookupService, JsonRecordSetWriter, JsonTreeReader, ParquetReader,
                                 SimpleCsvFileLookupService, SimpleKeyValueLookupService)
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on every engine

TO_MATCHED, TO_SUCCESS = "Route to 'matched' or 'unmatched'", "Route to 'success'"
PERSON = json.dumps({"type": "record", "name": "person", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "sport", "type": ["null", "string"], "default": None}]})
PEOPLE = json.dumps([{"name": "John Doe", "age": 48, "sport": None}, {"name": "Jane Doe", "age": 47, "sport": None},
                     {"name": "Jimmy Doe", "age": 14, "sport": None}]).encode()
SPORTS = {"John Doe": "Soccer", "Jane Doe": "Basketball", "Jimmy Doe": "Football"}


class Counting(ControllerService, StringLookupService):
    """A key-value lookup (dynamic properties) that counts the lookups it answered."""

    dynamic_properties = True

    def on_enabled(self, context):
        self.values = dict(context.dynamic_properties)
        self.asked = 0

    def lookup(self, coordinates):
        self.asked += 1
        return self.values.get(coordinates["key"])


class TwoKeys(ControllerService, StringLookupService):
    """A lookup whose coordinates are 'first' and 'last'."""

    def required_keys(self):
        return {"first", "last"}

    def lookup(self, coordinates):
        return f"{coordinates['last']}, {coordinates['first']}"


def looking(values: dict | None = None, *, service=SimpleKeyValueLookupService, reader: dict | None = None,
            writer: dict | None = None, reader_type=JsonTreeReader, **properties) -> ProcessorRunner:
    """A LookupRecord on people (the 'key' coordinate their name, results into /sport, routed to
    matched or unmatched) unless ``properties`` say otherwise."""
    settings = {"Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "lookup",
                "Routing Strategy": TO_MATCHED, "key": "/name", "Result RecordPath": "/sport", **properties}
    return ProcessorRunner(LookupRecord, {k: v for k, v in settings.items() if v is not None}, services={
        "reader": (reader_type, {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": PERSON}
                   if reader is None else reader),
        "writer": (JsonRecordSetWriter, writer or {}),
        "lookup": (service, SPORTS if values is None else values)})


def records(runner: ProcessorRunner, relationship: str) -> list[list[dict]]:
    return [json.loads(runner.read(f)) for f in runner.output(relationship)]


def person(name: str, age: int, sport: str | None) -> dict:
    return {"name": name, "age": age, "sport": sport}


# ---------------------------------------------------------------------------------- NiFi's cases
def test_all_match():
    runner = looking()
    runner.enqueue(PEOPLE)
    runner.run()
    [matched] = runner.output("matched")
    assert runner.output("unmatched") == [] and runner.input_count == 0
    assert matched.attributes["record.count"] == "3"
    assert matched.attributes["mime.type"] == "application/json"
    assert records(runner, "matched") == [[person("John Doe", 48, "Soccer"), person("Jane Doe", 47, "Basketball"),
                                           person("Jimmy Doe", 14, "Football")]]


def test_all_unmatched():
    runner = looking({})
    runner.enqueue(PEOPLE)
    runner.run()
    assert runner.output("matched") == []
    [unmatched] = runner.output("unmatched")
    assert unmatched.attributes["record.count"] == "3"
    assert records(runner, "unmatched") == [[person("John Doe", 48, None), person("Jane Doe", 47, None),
                                             person("Jimmy Doe", 14, None)]]


def test_mixture_of_match():
    runner = looking({"John Doe": "Soccer", "Jimmy Doe": "Football"})
    runner.enqueue(PEOPLE)
    runner.run()
    assert runner.output("failure") == []
    assert [f.attributes["record.count"] for f in runner.output("matched")] == ["2"]
    assert records(runner, "matched") == [[person("John Doe", 48, "Soccer"), person("Jimmy Doe", 14, "Football")]]
    assert [f.attributes["record.count"] for f in runner.output("unmatched")] == ["1"]
    assert records(runner, "unmatched") == [[person("Jane Doe", 47, None)]]


def test_all_match_but_first_route_to_success():
    runner = looking({"Jane Doe": "Soccer", "Jimmy Doe": "Football"}, **{"Routing Strategy": TO_SUCCESS})
    runner.enqueue(PEOPLE)
    runner.run()
    assert [f.attributes["record.count"] for f in runner.output("success")] == ["3"]
    assert records(runner, "success") == [[person("John Doe", 48, None), person("Jane Doe", 47, "Soccer"),
                                           person("Jimmy Doe", 14, "Football")]]


def test_a_result_path_to_a_missing_field_adds_it():
    runner = looking(**{"Result RecordPath": "/other"})
    runner.enqueue(PEOPLE)
    runner.run()
    assert records(runner, "matched") == [[{**person("John Doe", 48, None), "other": "Soccer"},
                                           {**person("Jane Doe", 47, None), "other": "Basketball"},
                                           {**person("Jimmy Doe", 14, None), "other": "Football"}]]


@pytest.mark.parametrize("key", ["/other", "/*"], ids=["finds-nothing", "selects-several-values"])
def test_a_coordinate_path_that_finds_no_single_value_is_unmatched(key):
    runner = looking(key=key)
    runner.enqueue(PEOPLE)
    runner.run()
    assert runner.output("matched") == []
    assert [f.attributes["record.count"] for f in runner.output("unmatched")] == ["3"]


def test_unreadable_records_go_to_failure_unchanged():
    runner = looking()
    content = b'[{"name": "John Doe", "age": 48}, {"name": "Jane'
    runner.enqueue(content)
    runner.run()
    [failed] = runner.output("failure")
    assert runner.read(failed) == content
    assert "record.count" not in failed.attributes
    assert failed.attributes["record.error.message"].startswith("not valid JSON")
    assert "record.error.index" in failed.attributes
    assert runner.output("matched") == [] and runner.output("unmatched") == []


def test_no_result_path_only_routes():
    runner = looking(**{"Result RecordPath": None})
    runner.enqueue(PEOPLE)
    runner.run()
    assert records(runner, "matched") == [[person("John Doe", 48, None), person("Jane Doe", 47, None),
                                           person("Jimmy Doe", 14, None)]]


def test_a_literal_coordinate():
    runner = looking({"lookupKey": "lookupValue"}, key="toString('lookupKey', 'UTF-8')")
    runner.enqueue(PEOPLE)
    runner.run()
    assert [f.attributes["record.count"] for f in runner.output("matched")] == ["3"]
    assert {r["sport"] for r in records(runner, "matched")[0]} == {"lookupValue"}


# ------------------------------------------------------------------ record results
FAVORITES = b"key,favorite,least\nJohn Doe,basketball,soccer\n"


@pytest.fixture
def favorites(tmp_path):
    path = tmp_path / "favorites.csv"
    path.write_bytes(FAVORITES)
    return {"CSV File": str(path), "Lookup Key Column": "key"}


def schema_text(*fields: tuple[str, object]) -> dict:
    return {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(
        {"type": "record", "name": "r", "fields": [{"name": n, "type": t} for n, t in fields]})}


def test_add_fields_to_an_existing_record(favorites):
    runner = looking(favorites, service=CSVRecordLookupService, **{
        "Result RecordPath": "/", "Record Result Contents": "Insert Record Fields"},
        reader=schema_text(("name", "string"), ("age", "int"), ("favorite", ["null", "string"]),
                           ("least", ["null", "string"])))
    runner.enqueue(json.dumps([{"name": "John Doe", "age": 48, "favorite": None, "least": "baseball"}]).encode())
    runner.run()
    assert records(runner, "matched") == [[{"name": "John Doe", "age": 48, "favorite": "basketball",
                                            "least": "soccer"}]]


def test_add_fields_to_a_record_field_that_is_null(favorites):
    runner = looking(favorites, service=CSVRecordLookupService, **{"Record Result Contents": "Insert Record Fields"},
                     reader=schema_text(("name", "string"), ("age", "int"), ("sport", ["null", {
                         "type": "record", "name": "sports", "fields": [{"name": "other", "type": "string"}]}])))
    runner.enqueue(json.dumps([{"name": "John Doe", "age": 48, "sport": None}]).encode())
    runner.run()
    [[record]] = records(runner, "matched")
    assert record["sport"]["favorite"] == "basketball" and record["sport"]["least"] == "soccer"


def test_a_record_put_into_a_text_field_is_its_json_text(favorites):
    # NiFi makes the field a choice of text and record; here it stays text, the record's JSON
    runner = looking(favorites, service=CSVRecordLookupService, **{"Record Result Contents": "Insert Record Fields"})
    runner.enqueue(json.dumps([{"name": "John Doe", "age": 48, "sport": None}]).encode())
    runner.run()
    [[record]] = records(runner, "matched")
    assert json.loads(record["sport"]) == {"favorite": "basketball", "least": "soccer"}


def test_add_fields_to_existing_records_routed_to_success(favorites):
    runner = looking(favorites, service=CSVRecordLookupService, **{
        "Routing Strategy": TO_SUCCESS, "Result RecordPath": "/", "Record Result Contents": "Insert Record Fields"},
        reader=schema_text(("name", "string"), ("age", "int")))
    runner.enqueue(json.dumps([{"name": "John Doe", "age": 48}, {"name": "Jane Doe", "age": 47}]).encode())
    runner.run()
    assert records(runner, "success") == [[
        {"name": "John Doe", "age": 48, "favorite": "basketball", "least": "soccer"},
        {"name": "Jane Doe", "age": 47, "favorite": None, "least": None}]]


def test_insert_entire_record(favorites):
    runner = looking(favorites, service=CSVRecordLookupService, **{"Result RecordPath": "/likes"})
    runner.enqueue(PEOPLE)
    runner.run()
    assert records(runner, "matched") == [[{**person("John Doe", 48, None),
                                            "likes": {"favorite": "basketball", "least": "soccer"}}]]
    assert [r["name"] for r in records(runner, "unmatched")[0]] == ["Jane Doe", "Jimmy Doe"]


def test_insert_entire_record_into_a_text_field(favorites):
    runner = looking(favorites, service=CSVRecordLookupService, **{"Routing Strategy": TO_SUCCESS})
    runner.enqueue(PEOPLE)
    runner.run()
    assert [r["sport"] for r in records(runner, "success")[0]] == [
        json.dumps({"favorite": "basketball", "least": "soccer"}, separators=(",", ":")), None, None]


# ------------------------------------------------------------------ Replace Existing Values
INFER = {"Schema Access Strategy": "Infer Schema"}


def replacing(values: dict, routing: str = TO_SUCCESS, writer: dict | None = None, **paths) -> ProcessorRunner:
    return looking(values, reader=INFER, writer=writer, **{"Record Update Strategy": "Replace Existing Values",
                                                           "Routing Strategy": routing, "key": None,
                                                           "Result RecordPath": None, **paths})


ARRAY_INPUT = [{"foo": {"foo": "key"}, "locales": [{"language": "fr", "region": "CA"},
                                                   {"language": "fr", "region": "FR"}]}] * 2


def test_replace_existing_values_in_arrays():
    runner = replacing({"FR": "France", "CA": "Canada", "fr": "French", "key": "value"},
                       lookupLanguage="/locales[*]/language", lookupRegion="/locales[*]/region", lookupFoo="/foo/foo")
    runner.enqueue(json.dumps(ARRAY_INPUT).encode())
    runner.run()
    expected = {"foo": {"foo": "value"}, "locales": [{"language": "French", "region": "Canada"},
                                                     {"language": "French", "region": "France"}]}
    assert records(runner, "success") == [[expected, expected]]


def test_replace_existing_values_where_an_array_is_empty():
    values = {"CA": "Canada", "CAD": "Canadian dollar", "en": "English", "EUR": "Euro", "ja": "Japanese",
              "JP": "Japan", "JPY": "Japanese yen", "US": "United States", "USD": "United States Dollar",
              "fr": "French", "FR": "France", "original": "updated", "orgValue": "newValue", "orgValue2": "newValue2"}
    runner = replacing(values, lookupLanguage="/locales[*]/language", lookupRegion="/locales[*]/region",
                       lookupCurrency="/currencies[*]/currency", lookupFoo="/foo/foo", lookupBar="/bar")
    runner.enqueue(json.dumps([
        {"bar": "orgValue", "foo": {"foo": "original"}, "locales": [{"language": "fr", "region": "FR"},
                                                                    {"language": "en", "region": "US"}],
         "currencies": []},
        {"bar": "orgValue2", "foo": {"foo": "original"}, "locales": [{"language": "fr", "region": "CA"},
                                                                     {"language": "ja", "region": "JP"}],
         "currencies": [{"currency": "CAD"}, {"currency": "JPY"}]}]).encode())
    runner.run()
    assert records(runner, "success") == [[
        {"bar": "newValue", "foo": {"foo": "updated"}, "locales": [{"language": "French", "region": "France"},
                                                                   {"language": "English", "region": "United States"}],
         "currencies": []},
        {"bar": "newValue2", "foo": {"foo": "updated"}, "locales": [{"language": "French", "region": "Canada"},
                                                                    {"language": "Japanese", "region": "Japan"}],
         "currencies": [{"currency": "Canadian dollar"}, {"currency": "Japanese yen"}]}]]


def test_replace_existing_values_of_a_missing_field_is_unmatched():
    runner = replacing({"original": "updated"}, TO_MATCHED, {"Suppress Null Values": "Always Suppress"},
                       lookupFoo="/foo/foo")
    runner.enqueue(json.dumps([{"foo": {"foo": "original"}, "unmentioned": {"foo": "original"}},
                               {"unmentioned": {"foo": "original"}}]).encode())
    runner.run()
    assert records(runner, "matched") == [[{"foo": {"foo": "updated"}, "unmentioned": {"foo": "original"}}]]
    assert records(runner, "unmatched") == [[{"unmentioned": {"foo": "original"}}]]


def test_replace_existing_values_some_of_which_are_unknown_is_unmatched():
    runner = replacing({"FR": "France", "fr": "French", "badkey": "value"}, TO_MATCHED,
                       lookupLanguage="/locales[*]/language", lookupRegion="/locales[*]/region", lookupFoo="/foo/foo")
    runner.enqueue(json.dumps([{"foo": {"foo": "key"}, "locales": [{"language": "en", "region": "CA"},
                                                                   {"language": "fr", "region": "FR"}]},
                               ARRAY_INPUT[0]]).encode())
    runner.run()
    assert runner.output("matched") == []
    assert records(runner, "unmatched") == [[
        {"foo": {"foo": "key"}, "locales": [{"language": "en", "region": "CA"},
                                            {"language": "French", "region": "France"}]},
        {"foo": {"foo": "key"}, "locales": [{"language": "French", "region": "CA"},
                                            {"language": "French", "region": "France"}]}]]


# ------------------------------------------------------------------ Root Record Path
MIME_TYPES = {"file1.txt": "text/plain", "file2.pdf": "application/pdf", "file3.jpg": "image/jpeg"}


def file_set(*names: str) -> bytes:
    return json.dumps({"fileSet": {"id": "11223344", "source": "external",
                                   "files": [{"filename": n, "size": 10 * i} for i, n in enumerate(names)]}}).encode()


def files_of(runner: ProcessorRunner, relationship: str) -> list[dict]:
    [[record]] = records(runner, relationship)
    assert record["fileSet"]["id"] == "11223344"
    return record["fileSet"]["files"]


def by_files(routing: str = TO_SUCCESS, root: str = "/fileSet/files[*]") -> ProcessorRunner:
    return looking(MIME_TYPES, reader=INFER, key="/filename", **{
        "Root Record Path": root, "Result RecordPath": "/mimeType", "Routing Strategy": routing})


def test_root_record_path_some_match():
    runner = by_files()
    runner.enqueue(file_set("file1.txt", "file2.pdf", "unknown-file.unk"))
    runner.run()
    assert [f.get("mimeType") for f in files_of(runner, "success")] == ["text/plain", "application/pdf", None]


def test_root_record_path_all_match_and_pointing_at_the_array():
    for root in ("/fileSet/files[*]", "/fileSet/files"):
        runner = by_files(root=root)
        runner.enqueue(file_set("file1.txt", "file2.pdf"))
        runner.run()
        assert files_of(runner, "success") == [{"filename": "file1.txt", "size": 0, "mimeType": "text/plain"},
                                               {"filename": "file2.pdf", "size": 10, "mimeType": "application/pdf"}]


def test_root_record_path_none_match_leaves_the_schema_as_read():
    runner = by_files()
    runner.enqueue(file_set("abc.abc", "xyz.xyz"))
    runner.run()
    assert files_of(runner, "success") == [{"filename": "abc.abc", "size": 0}, {"filename": "xyz.xyz", "size": 10}]


def test_root_record_path_routes_a_record_by_all_its_sub_records():
    runner = by_files(TO_MATCHED)
    runner.enqueue(file_set("file1.txt", "file2.pdf"))
    runner.enqueue(file_set("file1.txt", "xyz.xyz"))
    runner.run()
    assert [f["mimeType"] for f in files_of(runner, "matched")] == ["text/plain", "application/pdf"]
    assert [f["mimeType"] for f in files_of(runner, "unmatched")] == ["text/plain", None]


# ---------------------------------------------------------------------------------- beyond NiFi's tests
def test_the_schema_comes_from_the_first_match_even_after_the_first_batch(monkeypatch):
    monkeypatch.setattr("flowactors.services.records.parquet.BATCH_RECORDS", 2)
    table = pa.table({"name": ["Nobody", "Noone", "John Doe", "Jane Doe", "Nemo"]})
    content = io.BytesIO()
    pq.write_table(table, content)
    runner = looking(reader_type=ParquetReader, reader={}, **{"Routing Strategy": TO_SUCCESS})
    runner.enqueue(content.getvalue())
    runner.run()
    assert records(runner, "success") == [[{"name": "Nobody", "sport": None}, {"name": "Noone", "sport": None},
                                           {"name": "John Doe", "sport": "Soccer"},
                                           {"name": "Jane Doe", "sport": "Basketball"},
                                           {"name": "Nemo", "sport": None}]]


@pytest.mark.parametrize("key, asked", [
    ("toString(/name, 'UTF-8')", {"0": 4, "10": 2}),   # record by record: each record asks, but for the cache
    ("/name", {"0": 2, "10": 2}),                      # a column at a time: each distinct key of a batch asks once
])
def test_the_cache_keeps_a_flowfiles_results(key, asked):
    for size in ("0", "10"):
        runner = looking(service=Counting, key=key, **{"Cache Size": size})
        runner.enqueue(json.dumps([person("John Doe", 1, None), person("Jane Doe", 2, None),
                                   person("John Doe", 3, None), person("Jane Doe", 4, None)]).encode())
        runner.run()
        assert runner.services.instances["lookup"].asked == asked[size]
        assert [r["sport"] for r in records(runner, "matched")[0]] == ["Soccer", "Basketball", "Soccer", "Basketball"]


@pytest.mark.parametrize("result", ["/sport", "/other", "/age", None])
def test_a_column_at_a_time_gives_what_record_by_record_gives(result):
    outputs = []
    for key in ("/name", "toString(/name, 'UTF-8')"):
        runner = looking({"John Doe": "Soccer", "Jimmy Doe": "Football"}, key=key,
                         **{"Routing Strategy": TO_SUCCESS, "Result RecordPath": result})
        runner.enqueue(PEOPLE)
        runner.run()
        outputs.append(records(runner, "success"))
    assert outputs[0] == outputs[1]
    if result == "/age":   # the field widened to text, as the record by record way does
        assert [r["age"] for r in outputs[0][0]] == ["Soccer", "47", "Football"]


def test_a_lookup_service_that_fails_sends_the_flowfile_to_failure(tmp_path):
    table = tmp_path / "sports.csv"
    table.write_bytes(b"key,value\nJohn Doe,Soccer\n")
    runner = looking({"CSV File": str(table), "Lookup Key Column": "key", "Lookup Value Column": "value"},
                     service=SimpleCsvFileLookupService)
    service = runner.services.instances["lookup"]
    service.RELOAD_CHECK_SECONDS = 0.0
    table.write_bytes(b"key,value\nJohn Doe,Soccer\n,Football\n")
    runner.enqueue(PEOPLE)
    runner.run()
    [failed] = runner.output("failure")
    assert runner.read(failed) == PEOPLE
    message = failed.attributes["record.error.message"]
    assert message.startswith("the lookup of {key=John Doe} failed: LookupFailureError: the CSV File changed")
    assert "line 3: the lookup key (column 'key') is empty" in message
    assert runner.output("matched") == [] and runner.output("unmatched") == []


def test_coordinate_paths_take_expressions():
    runner = looking({"48": "Golf"}, key="/${field}")
    runner.enqueue(PEOPLE, {"field": "age"})
    runner.run()
    assert records(runner, "matched") == [[person("John Doe", 48, "Golf")]]


def test_several_coordinates():
    runner = looking(service=TwoKeys, values={}, key=None, first="/name", last="/sport", **{
        "Result RecordPath": "/full"})
    runner.enqueue(json.dumps([person("John", 1, "Doe"), person("Jane", 2, None)]).encode())
    runner.run()
    assert records(runner, "matched") == [[{**person("John", 1, "Doe"), "full": "Doe, John"}]]
    assert [r["name"] for r in records(runner, "unmatched")[0]] == ["Jane"]


def test_no_records_send_nothing():
    runner = looking()
    runner.enqueue(b"[]")
    runner.run()
    assert all(runner.output(r) == [] for r in ("matched", "unmatched", "failure"))
    assert runner.input_count == 0


def test_provenance_routes_the_children_and_drops_the_original():
    runner = looking({"John Doe": "Soccer"})
    original = runner.enqueue(PEOPLE)
    runner.run()
    events = runner.events()
    routes = {e.flowfile_uuid: e.relationship for e in events if e.event_type == T.ROUTE}
    assert routes == {runner.output("matched")[0].uuid: "matched", runner.output("unmatched")[0].uuid: "unmatched"}
    assert any(e.event_type == T.DROP and e.flowfile_uuid == original.uuid for e in events)


def test_a_required_coordinate_must_be_given():
    runner = looking(service=TwoKeys, values={}, key=None, first="/name")
    runner.enqueue(PEOPLE)
    with pytest.raises(ValueError, match=r"lookup service 'lookup' requires the coordinate\(s\) last: add a dynamic "
                                         r"property of that name"):
        runner.run()


def test_replace_existing_values_needs_a_service_of_one_key():
    runner = looking(service=TwoKeys, values={}, key=None, name="/name",
                     **{"Record Update Strategy": "Replace Existing Values", "Result RecordPath": None})
    with pytest.raises(ValueError, match="Replace Existing Values needs a lookup service of one key, but 'lookup' "
                                         "requires 2: first, last"):
        runner.run()


def test_validation():
    base = {"Record Reader": "r", "Record Writer": "w", "Lookup Service": "l"}
    assert LookupRecord.validate_properties(base) == [
        "at least one coordinate must be given, as a dynamic property (its name the coordinate's key, its value a "
        "RecordPath)"]
    [problem] = LookupRecord.validate_properties({**base, "key": "xx"})
    assert problem.startswith("dynamic property 'key': its value is not a valid RecordPath: unexpected name 'xx'")
    [problem] = LookupRecord.validate_properties({**base, "key": "/name", "Result RecordPath": "/a["})
    assert problem.startswith("property 'Result RecordPath' is not a valid RecordPath")
    assert LookupRecord.validate_properties({**base, "key": "/name", "Result RecordPath": "/${where}"}) == []
    assert [r.name for r in LookupRecord.relationships_for(base)] == ["success", "failure"]
    assert [r.name for r in LookupRecord.relationships_for({"Routing Strategy": TO_MATCHED})] == [
        "matched", "unmatched", "failure"]
