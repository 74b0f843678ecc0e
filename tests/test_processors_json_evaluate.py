"""EvaluateJsonPath and SplitJson, on the cases of NiFi's TestEvaluateJsonPath and TestSplitJson,
on the in-process and the stateless engine."""

import json

import pytest

from flowactors.processors import EvaluateJsonPath, SplitJson
from flowactors.processors.json.split import SPLIT_PARENTS_PER_TRIGGER
from flowactors.sdk.relationships import REASON_ATTRIBUTE
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

SAMPLE = json.dumps([
    {"_id": "54df94072d5dbf7dc6340cc5", "index": 0, "isActive": True, "balance": "$3,200.07", "age": 20,
     "latitude": -50.359159, "name": {"first": "Shaffer", "last": "Pearson"}, "tags": ["ea", "enim"],
     "friends": [{"id": 0, "name": "Holloway Kim"}, {"id": 1, "name": "Clark Burch"}, {"id": 2, "name": "Carver"},
                 {"id": 3, "name": "Teresa"}]},
    {"_id": "54df94073ab1fd5c5c0a2fda", "index": 1, "isActive": False, "name": {"first": "Bonnie", "last": "Bond"}},
], indent=2).encode()
ATTRIBUTE = {"Destination": "flowfile-attribute"}


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def run(processor, properties, *contents, attributes=None):
    runner = ProcessorRunner(processor, properties)
    for content in contents:
        runner.enqueue(content, attributes)
    runner.run()
    return runner


def only(runner, relationship, total=1):
    outputs = {name: runner.output(name) for name in runner.processor_type.relationship_names(runner.properties)}
    assert sum(len(found) for found in outputs.values()) == total, {k: len(v) for k, v in outputs.items()}
    return outputs[relationship]


# ----------------------------------------------------------------------------- EvaluateJsonPath
@pytest.mark.parametrize("properties,why", [
    ({**ATTRIBUTE, "invalid.jsonPath": "$.."}, "property name is missing"),
    ({"Destination": "flowfile-content", "JsonPath1": "$[0]._id", "JsonPath2": "$[0].name"}, "exactly one JsonPath"),
    ({"Destination": "flowfile-content", "JsonPath1": "$[0]. _id"}, "property name is missing"),
    ({"Destination": "flowfile-content"}, "exactly one JsonPath"),
    (ATTRIBUTE, "at least one JsonPath"),
    ({**ATTRIBUTE, "Return Type": "text", "a": "$"}, "Return Type"),
])
def test_configurations_nifi_refuses_are_not_valid(properties, why):
    with pytest.raises(ValueError, match=why):
        ProcessorRunner(EvaluateJsonPath, properties)


def test_extract_to_attributes_scalar_and_json():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "Return Type": "json", "id": "$[0]._id", "name": "$[0].name",
                                    "age": "$[0].age", "active": "$[0].isActive", "lat": "$[0].latitude"}, SAMPLE)
    [out] = only(runner, "matched")
    assert out.attributes["id"] == "54df94072d5dbf7dc6340cc5"
    assert out.attributes["name"] == '{"first":"Shaffer","last":"Pearson"}'
    assert (out.attributes["age"], out.attributes["active"], out.attributes["lat"]) == ("20", "true", "-50.359159")
    assert runner.read(out) == SAMPLE


def test_a_result_that_is_not_a_scalar_sends_the_flowfile_to_failure_with_attributes_as_destination():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "id": "$[0]._id", "name": "$[0].name"}, SAMPLE)
    [out] = only(runner, "failure")
    assert "found an object, not a scalar" in out.attributes[REASON_ATTRIBUTE]
    assert "id" not in out.attributes and runner.read(out) == SAMPLE


@pytest.mark.parametrize("behaviour,expected", [("warn", {"id": "", "name": ""}), ("ignore", {"id": "", "name": ""}),
                                                ("skip", {})])
def test_path_not_found_behaviour(behaviour, expected, caplog):
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "Path Not Found Behavior": behaviour,
                                    "id": "$[0]._id.nonexistent", "name": "$[0].name.nonexistent"}, SAMPLE)
    [out] = only(runner, "matched")
    assert {k: out.attributes[k] for k in ("id", "name") if k in out.attributes} == expected
    assert ("found nothing" in caplog.text) == (behaviour == "warn")


def test_one_path_found_one_not():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "id": "$[0]._id", "name": "$[0].name.nonexistent"}, SAMPLE)
    [out] = only(runner, "matched")
    assert (out.attributes["id"], out.attributes["name"]) == ("54df94072d5dbf7dc6340cc5", "")


@pytest.mark.parametrize("path,content", [
    ("$[0]._id", b"54df94072d5dbf7dc6340cc5"),
    ("$[0].friends.[*].id", b"[0,1,2,3]"),
    ("$[0].friends[?(@.id < 3)].id", b"[0,1,2]"),
    ("$[1].name", b'{"first":"Bonnie","last":"Bond"}'),
    ("$[*].name.first", b'["Shaffer","Bonnie"]'),
    ("$[0].friends.length()", b"4"),
    ("$..id.sum()", b"6.0"),
    ("$[5]..x", b"[]"),                           # indefinite, nothing found: an empty list is a match
])
def test_extract_to_content(path, content):
    runner = run(EvaluateJsonPath, {"Destination": "flowfile-content", "jsonPath": path}, SAMPLE)
    [out] = only(runner, "matched")
    assert runner.read(out) == content
    assert T.CONTENT_MODIFIED in [e.event_type for e in runner.events()]


def test_content_destination_with_nothing_found_is_unmatched_and_unchanged():
    runner = run(EvaluateJsonPath, {"Destination": "flowfile-content", "jsonPath": "$[0].nonexistent.key"}, SAMPLE)
    [out] = only(runner, "unmatched")
    assert runner.read(out) == SAMPLE


def test_scalar_return_type_with_an_array_result_fails_and_keeps_the_content():
    runner = run(EvaluateJsonPath, {"Destination": "flowfile-content", "Return Type": "scalar",
                                    "jsonPath": "$[0].friends[?(@.id < 3)].id"}, SAMPLE)
    [out] = only(runner, "failure")
    assert runner.read(out) == SAMPLE and "found an array" in out.attributes[REASON_ATTRIBUTE]


@pytest.mark.parametrize("representation,null_text", [("empty string", ""), ("the string 'null'", "null")])
def test_null_value_representation(representation, null_text):
    document = b'{"stringField": "String Value", "nullField": null}'
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "Return Type": "json", "Null Value Representation": representation,
                                    "stringField": "$.stringField", "missingField": "$.missingField",
                                    "nullField": "$.nullField"}, document)
    [out] = only(runner, "matched")
    assert out.attributes["stringField"] == "String Value"
    assert out.attributes["missingField"] == ""
    assert out.attributes["nullField"] == null_text


def test_control_characters_and_non_ascii_text_are_kept():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "Return Type": "json", "p": "$.object.property", "o": "$.object"},
                 json.dumps({"object": {"property": "a\u0001b\tc é"}}).encode())
    [out] = only(runner, "matched")
    assert out.attributes["p"] == "a\u0001b\tc é"
    assert json.loads(out.attributes["o"]) == {"property": "a\u0001b\tc é"}


@pytest.mark.parametrize("content,why", [
    (b"<xml>not json</xml>", "not valid JSON"), (b"", "empty"), (b"null", "JSON null"), (b'{"a": NaN}', "NaN"),
    (b'{"a": 1', "not valid JSON"), (b"\xff\xfe\x00", "not valid JSON"),
])
def test_content_that_is_not_a_json_document_goes_to_failure_with_one_line(content, why):
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "a": "$.a"}, content)
    [out] = only(runner, "failure")
    reason = out.attributes[REASON_ATTRIBUTE]
    assert why in reason and "\n" not in reason
    if content:
        assert runner.read(out) == content    # unchanged


def test_max_string_length_sends_a_longer_text_to_failure():
    properties = {**ATTRIBUTE, "Max String Length": "10 B", "a": "$.a"}
    runner = run(EvaluateJsonPath, properties, b'{"a": "0123456789"}', b'{"a": "0123456789x"}')
    assert [f.attributes["a"] for f in runner.output("matched")] == ["0123456789"]
    [failed] = runner.output("failure")
    assert "longer than the Max String Length (10)" in failed.attributes[REASON_ATTRIBUTE]


def test_a_function_given_what_it_cannot_take_goes_to_failure():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "a": "$[0].name.sum()"}, SAMPLE)
    [out] = only(runner, "failure")
    assert "sum() needs an array" in out.attributes[REASON_ATTRIBUTE]


def test_keys_are_written_as_nifi_writes_a_java_set():
    runner = run(EvaluateJsonPath, {**ATTRIBUTE, "keys": "$[0].name.keys()"}, SAMPLE)
    [out] = only(runner, "matched")
    assert out.attributes["keys"] == "[first, last]"


# ----------------------------------------------------------------------------- SplitJson
def test_split_an_array_of_objects():
    runner = run(SplitJson, {"JsonPath Expression": "$"}, SAMPLE, attributes={"filename": "sample.json"})
    splits, [original] = runner.output("split"), runner.output("original")
    assert [json.loads(runner.read(f)) for f in splits] == json.loads(SAMPLE)
    assert runner.read(splits[1]) == json.dumps(json.loads(SAMPLE)[1], separators=(",", ":")).encode()
    identifier = original.attributes["fragment.identifier"]
    assert original.attributes["fragment.count"] == "2"
    assert original.attributes["segment.original.filename"] == "sample.json"
    for index, split in enumerate(splits):
        assert split.attributes["fragment.index"] == str(index)       # 0-based, as NiFi's SplitJson
        assert split.attributes["fragment.identifier"] == identifier and split.attributes["fragment.count"] == "2"
        assert split.attributes["segment.original.filename"] == "sample.json"
    [fork] = [e for e in runner.events() if e.event_type == T.FORK]
    assert fork.flowfile_uuid == original.uuid and fork.child_uuids == [f.uuid for f in splits]


def test_split_scalars_and_nulls():
    content = b'{"a": [1, "text", true, 2.5, null, [1, 2]]}'
    runner = run(SplitJson, {"JsonPath Expression": "$.a"}, content)
    assert runner.contents("split") == [b"1", b"text", b"true", b"2.5", b"", b"[1,2]"]
    runner = run(SplitJson, {"JsonPath Expression": "$.a", "Null Value Representation": "the string 'null'"}, content)
    assert runner.contents("split")[4] == b"null"


def test_split_an_indefinite_path_splits_what_it_found():
    runner = run(SplitJson, {"JsonPath Expression": "$[*].name.first"}, SAMPLE)
    assert runner.contents("split") == [b"Shaffer", b"Bonnie"]


def test_split_an_empty_array_gives_no_split_and_no_fork():
    runner = run(SplitJson, {"JsonPath Expression": "$.a"}, b'{"a": []}')
    assert runner.output("split") == [] and runner.output("original")[0].attributes["fragment.count"] == "0"
    assert T.FORK not in [e.event_type for e in runner.events()]


def test_split_takes_at_most_100_parents_a_trigger():
    # each parent may fan out to very many children in one session (docs/json-processors.md)
    runner = ProcessorRunner(SplitJson, {"JsonPath Expression": "$"})
    for _ in range(SPLIT_PARENTS_PER_TRIGGER + 1):
        runner.enqueue(b"[1, 2]")
    runner.run(1)
    assert SPLIT_PARENTS_PER_TRIGGER == 100
    assert len(runner.output("original")) == 100 and len(runner.output("split")) == 200
    assert runner.input_count == 1


@pytest.mark.parametrize("path,content,why", [
    ("$[0].name", SAMPLE, "found an object, not an array"),
    ("$[0]._id", SAMPLE, "found a single value, not an array"),
    ("$[0].nothing", SAMPLE, "found nothing to split"),
    ("$", b"not json", "not valid JSON"),
    # NiFi's TestSplitJson testSplit_pathToNullValue and testSplit_pathToInputStringNullValue
    ("$.nullField", b'{"stringField": "String Value", "nullField": null}', "found a single value, not an array"),
    ("$.*", b"null", "the content is the JSON null"),
])
def test_what_cannot_be_split_goes_to_failure_and_nothing_to_original(path, content, why):
    runner = run(SplitJson, {"JsonPath Expression": path}, content)
    [out] = only(runner, "failure")
    assert why in out.attributes[REASON_ATTRIBUTE] and runner.read(out) == content


@pytest.mark.parametrize("path", ["$..", "", "$.a["])
def test_split_refuses_a_path_that_does_not_compile(path):
    with pytest.raises(ValueError, match="JsonPath Expression"):
        ProcessorRunner(SplitJson, {"JsonPath Expression": path})


DEEP = b'{"a":' * 995 + b"1" + b"}" * 995     # JSON Python reads, nested deeper than the processors can walk


@pytest.mark.parametrize("processor,properties", [
    (EvaluateJsonPath, {"Destination": "flowfile-content", "p": "$..a"}),
    (SplitJson, {"JsonPath Expression": "$..a"}),
])
def test_a_document_nested_too_deeply_goes_to_failure_unchanged(processor, properties):
    runner = run(processor, properties, DEEP)
    [out] = only(runner, "failure")
    assert "nested too deeply" in out.attributes[REASON_ATTRIBUTE] and runner.read(out) == DEEP


@pytest.mark.parametrize("processor,properties,relationship", [
    (EvaluateJsonPath, {"x": "$.a"}, "matched"),
    (EvaluateJsonPath, {**ATTRIBUTE, "x": "$.a"}, "matched"),
    (SplitJson, {"JsonPath Expression": "$.b"}, "split"),
])
def test_an_unpaired_surrogate_escape_is_written_as_java_writes_it(processor, properties, relationship):
    # "\ud800" alone is no character: UTF-8 and the attributes cannot hold it; Java's encoder writes '?'
    runner = run(processor, properties, b'{"a": "x\\ud800y", "b": ["\\ud800", {"c": "\\udfff"}]}')
    out = runner.output(relationship)
    texts = [f.attributes["x"] for f in out] if properties.get("Destination") else runner.contents(relationship)
    expected = {"matched": ["x?y"], "split": ["?", '{"c":"?"}']}[relationship]
    assert [t if isinstance(t, str) else t.decode() for t in texts] == expected
