"""A NiFi flow of the JSON processors, as NiFi's "Download flow definition" writes it (internal
property names and values, defaults included), imported and run on the in-process engine:
GetFile -> ValidateJson -> SplitJson -> FlattenJson -> EvaluateJsonPath -> AttributesToJSON ->
AttributesToCSV -> UpdateAttribute -> PutFile, every failure and the invalid FlowFiles into a second folder."""

import json

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import (AttributesToCSV, AttributesToJSON, EvaluateJsonPath, FlattenJson, SplitJson,
                                   ValidateJson)
from nifi_flows import STANDARD, connection, group, processor, snapshot

SCHEMA = {"type": "object", "required": ["people"],
          "properties": {"people": {"type": "array", "items": {"type": "object", "required": ["name"]}}}}


def definition(source, out, refused) -> dict:
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    validate = processor(root, "validate", STANDARD + "ValidateJson", {
        "Schema Access Strategy": "SCHEMA_CONTENT_PROPERTY", "Schema Name": "${schema.name}",
        "JSON Schema Registry": None, "JSON Schema": json.dumps(SCHEMA), "JSON Schema Version": "DRAFT_7",
        "Input Format": "FLOW_FILE", "Max String Length": "20 MB"})
    split = processor(root, "split", STANDARD + "SplitJson", {
        "JsonPath Expression": "$.people[*]", "Null Value Representation": "empty string",
        "Max String Length": "20 MB"}, auto_terminate=("original",))
    flatten = processor(root, "flatten", STANDARD + "FlattenJson", {
        "flatten-json-separator": "_", "flatten-mode": "keep arrays", "ignore-reserved-characters": "false",
        "flatten-json-return-type": "flatten", "flatten-json-character-set": "UTF-8",
        "flatten-json-pretty-print-json": "false"})
    evaluate = processor(root, "evaluate", STANDARD + "EvaluateJsonPath", {
        "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
        "Null Value Representation": "the string 'null'", "Max String Length": "20 MB",
        "person.name": "$.name", "person.city": "$.address_city", "person.tags": "$.tags.length()"})
    to_json = processor(root, "to json", STANDARD + "AttributesToJSON", {
        "Attributes List": None, "attributes-to-json-regex": "person\\..*", "Destination": "flowfile-attribute",
        "Include Core Attributes": "false", "Null Value": "false", "JSON Handling Strategy": "ESCAPED",
        "Pretty Print": "false"})
    to_csv = processor(root, "to csv", STANDARD + "AttributesToCSV", {
        "attribute-list": "person.name,person.city,person.tags,JSONAttributes", "attributes-regex": None,
        "destination": "flowfile-content", "include-core-attributes": "false", "null-value": "false",
        "include-schema": "true"})
    rename = processor(root, "rename", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Delete Attributes Expression": None, "Store State": "Do not store state",
        "Stateful Variables Initial Value": None, "Cache Value Lookup Cache Size": "100",
        "filename": "${segment.original.filename}.${fragment.index}.csv"})
    store = processor(root, "store", STANDARD + "PutFile", {"Directory": str(out)},
                      auto_terminate=("success", "failure"))
    fail = processor(root, "refused", STANDARD + "PutFile", {"Directory": str(refused)},
                     auto_terminate=("success", "failure"))
    steps = [(get, validate, "success"), (validate, split, "valid"), (split, flatten, "split"),
             (flatten, evaluate, "success"), (evaluate, to_json, "matched"), (to_json, to_csv, "success"),
             (to_csv, rename, "success"), (rename, store, "success")]
    links = [connection(root, a, b, (r,)) for a, b, r in steps]
    links += [connection(root, validate, fail, ("invalid", "failure")),
              connection(root, evaluate, fail, ("unmatched",))]
    links += [connection(root, step, fail, ("failure",)) for step in (split, flatten, evaluate, to_json, to_csv)]
    return snapshot(group(root, "json", None, None, processors=[get, validate, split, flatten, evaluate, to_json,
                                                                 to_csv, rename, store, fail],
                                connections=links), {})


def test_a_nifi_json_flow_imports_with_nifi_names_and_runs(tmp_path):
    source, out, refused = (tmp_path / name for name in ("in", "out", "refused"))
    for folder in (source, out, refused):
        folder.mkdir()
    people = {"people": [{"name": "Ann", "address": {"city": "Oslo"}, "tags": ["a", "b"]},
                         {"name": "Bob", "address": {"city": None}, "tags": []}]}
    (source / "people.json").write_text(json.dumps(people))
    (source / "invalid.json").write_text(json.dumps({"persons": []}))
    (source / "broken.json").write_text("{not json")
    flow = flow_from_nifi(definition(source, out, refused))
    kinds = {name: node.type for name, node in flow.processors.items()}
    assert [kinds[n] for n in ("validate", "split", "flatten", "evaluate", "to json", "to csv")] == \
        [ValidateJson, SplitJson, FlattenJson, EvaluateJsonPath, AttributesToJSON, AttributesToCSV]
    assert flow.processors["flatten"].properties["Separator"] == "_"
    assert flow.processors["validate"].properties["JSON Schema Version"] == "Draft 7"
    assert flow.processors["to json"].properties["JSON Handling Strategy"] == "Escaped"
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"] in ("store", "refused")) >= 4
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=120, until=stored)
    assert not final.get("timed_out"), final
    assert sorted(path.name for path in out.iterdir()) == ["people.json.0.csv", "people.json.1.csv"]
    rows = [(out / name).read_text() for name in ("people.json.0.csv", "people.json.1.csv")]
    assert rows == [
        'person.name,person.city,person.tags,JSONAttributes\n'
        'Ann,Oslo,2,"{""person.name"":""Ann"",""person.city"":""Oslo"",""person.tags"":""2""}"',
        'person.name,person.city,person.tags,JSONAttributes\n'
        'Bob,null,0,"{""person.name"":""Bob"",""person.city"":""null"",""person.tags"":""0""}"']
    assert sorted(path.name for path in refused.iterdir()) == ["broken.json", "invalid.json"]
    assert (refused / "broken.json").read_text() == "{not json"     # unchanged, nothing lost
