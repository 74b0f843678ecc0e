"""JoltTransformJSON: NiFi's processor on our Jolt (tests/test_jolt_*.py test the language)."""

from __future__ import annotations

import json

import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import JoltTransformJSON
from flowactors.processors.jolt import processor as jolt_processor
from flowactors.testing import ProcessorRunner
from nifi_flows import STANDARD, connection, group, processor, snapshot

CHAIN = json.dumps([
    {"operation": "shift", "spec": {"rating": {"primary": {"value": "Rating"}, "*": {"value": "Secondary.&1"}}}},
    {"operation": "default", "spec": {"Range": 5}},
])
DOCUMENT = {"rating": {"primary": {"value": 3}, "quality": {"value": 4}}}
EXPECTED = {"Rating": 3, "Secondary": {"quality": 4}, "Range": 5}




def transform(contents: list[bytes], attributes: list[dict] | None = None, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(JoltTransformJSON, {"Jolt Specification": CHAIN, **properties})
    for i, content in enumerate(contents):
        runner.enqueue(content, (attributes or [{}] * len(contents))[i])
    runner.run()
    return runner


@pytest.mark.usefixtures("engine")
def test_a_chain_rewrites_the_content_compactly_and_sets_the_mime_type():
    runner = transform([json.dumps(DOCUMENT).encode()])
    [out] = runner.output("success")
    assert runner.read(out) == json.dumps(EXPECTED, separators=(",", ":")).encode()
    assert out.attributes["mime.type"] == "application/json"
    assert runner.output("failure") == []


@pytest.mark.usefixtures("engine")
def test_content_that_is_not_json_goes_to_failure_unchanged_and_the_rest_of_the_batch_succeeds():
    runner = transform([b'{"rating": ', json.dumps(DOCUMENT).encode(), b"", b"\xff\xfe\x00",
                        b"\xef\xbb\xbf" + json.dumps(DOCUMENT).encode()])   # a byte order mark is skipped
    assert [json.loads(c) for c in runner.contents("success")] == [EXPECTED, EXPECTED]
    assert runner.contents("failure") == [b'{"rating": ', b"", b"\xff\xfe\x00"]
    assert all("mime.type" not in f.attributes for f in runner.output("failure"))


@pytest.mark.usefixtures("engine")
def test_a_failed_flowfile_says_why_in_its_attributes_and_nan_is_not_json():
    # NaN and Infinity are not JSON (Jackson refuses them): written back they would make invalid JSON
    runner = transform([b'{"rating": ', b"", b'{"rating": NaN}'])
    assert runner.output("success") == []
    reasons = [f.attributes["flowactors.failure.reason"] for f in runner.output("failure")]
    assert reasons == ["the content is not valid JSON: Expecting value: line 1 column 12 (char 11)",
                       "the content is empty, not a JSON document",
                       "the content is not valid JSON: NaN is not a JSON value"]
    assert {f.attributes["flowactors.failure.processor"] for f in runner.output("failure")} == {runner.name}
    failed = transform([b"[1, 2]"], **{"Jolt Transform": "Default", "Jolt Specification": '{"a": 1}'})
    [why] = [f.attributes["flowactors.failure.reason"] for f in failed.output("failure")]
    assert why.startswith("the Jolt transform failed: ") and "\n" not in why


@pytest.mark.usefixtures("engine")
def test_a_transform_that_fails_on_a_document_sends_it_to_failure():
    # Default can not take a top-level array when its spec's keys are not indexes
    runner = transform([b"[1, 2]", b"{}"], **{"Jolt Transform": "Default", "Jolt Specification": '{"a": 1}'})
    assert runner.contents("failure") == [b"[1, 2]"]
    assert runner.contents("success") == [b'{"a":1}']


@pytest.mark.usefixtures("engine")
def test_the_spec_is_evaluated_per_flowfile_and_each_distinct_text_compiled_once(monkeypatch):
    compiled = []
    real = jolt_processor.compile_spec
    monkeypatch.setattr(jolt_processor, "compile_spec", lambda kind, text: compiled.append(text) or real(kind, text))
    spec = '{"value": "${target}"}'
    attributes = [{"target": "a"}, {"target": "b"}, {"target": "a"}, {"target": "a.b"}, {"target": "["}]
    runner = transform([b'{"value": 1}'] * 5, attributes, **{
        "Jolt Transform": "Shift", "Jolt Specification": spec, "Transform Cache Size": "4"})
    assert [json.loads(c) for c in runner.contents("success")] == [{"a": 1}, {"b": 1}, {"a": 1}, {"a": {"b": 1}}]
    assert len(runner.output("failure")) == 1   # "[" is not a valid output path
    assert sorted(compiled) == sorted({'{"value": "a"}', '{"value": "b"}', '{"value": "a.b"}', '{"value": "["}'})
    compiled.clear()   # a cache of one keeps only the last text: alternating texts compile every time
    transform([b'{"value": 1}'] * 3, [{"target": "a"}, {"target": "b"}, {"target": "a"}],
              **{"Jolt Transform": "Shift", "Jolt Specification": spec})
    assert compiled == ['{"value": "a"}', '{"value": "b"}', '{"value": "a"}']


@pytest.mark.usefixtures("engine")
def test_pretty_print_indents_as_nifi_does_and_sort_needs_no_spec():
    # Sort ignores a specification, even one that is no JSON (as NiFi)
    runner = ProcessorRunner(JoltTransformJSON, {"Jolt Transform": "Sort", "Pretty Print": "true",
                                                 "Jolt Specification": "abcd"})
    runner.enqueue(b'{"b": {"d": 1, "c": [true, null]}, "~a": 0, "a": "x"}')
    runner.run()
    assert runner.contents("success") == [
        b'{\n  "~a" : 0,\n  "a" : "x",\n  "b" : {\n    "c" : [\n      true,\n      null\n    ],\n    "d" : 1\n  }\n}']


@pytest.mark.usefixtures("engine")
def test_a_spec_may_be_the_path_of_a_file_holding_it_named_by_an_expression(tmp_path):
    (tmp_path / "spec.json").write_text(CHAIN, encoding="utf-8")
    runner = transform([json.dumps(DOCUMENT).encode()], **{"Jolt Specification": str(tmp_path / "spec.json")})
    assert [json.loads(c) for c in runner.contents("success")] == [EXPECTED]
    runner = transform([json.dumps(DOCUMENT).encode()] * 2, [{"spec": "spec.json"}, {"spec": "gone.json"}],
                       **{"Jolt Specification": str(tmp_path / "${spec}")})
    assert [json.loads(c) for c in runner.contents("success")] == [EXPECTED]
    assert len(runner.output("failure")) == 1
    assert JoltTransformJSON.validate_properties({"Jolt Specification": str(tmp_path / "gone.json")}) == [
        f"property 'Jolt Specification': the specification is neither JSON nor the path of a file: "
        f"{str(tmp_path / 'gone.json')!r}"]


def test_every_modify_mode_and_cardinality_run_through_the_processor():
    document = b'{"a": null, "b": [1, 2]}'
    cases = {
        "Modify - Overwrite": ('{"a": "x", "c": "=size(@(1,b))"}', {"a": "x", "b": [1, 2], "c": 2}),
        "Modify - Default": ('{"a": "x", "b": "y"}', {"a": "x", "b": [1, 2]}),
        "Modify - Define": ('{"a": "x", "d": "y"}', {"a": None, "b": [1, 2], "d": "y"}),
        "Cardinality": ('{"b": "ONE"}', {"a": None, "b": 1}),
        "Remove": ('{"a": ""}', {"b": [1, 2]}),
    }
    for kind, (spec, expected) in cases.items():
        runner = transform([document], **{"Jolt Transform": kind, "Jolt Specification": spec})
        assert [json.loads(c) for c in runner.contents("success")] == [expected], kind


def test_validation_says_what_is_wrong_in_one_line():
    validate = JoltTransformJSON.validate_properties
    assert validate({"Jolt Specification": CHAIN}) == []
    assert validate({"Jolt Transform": "Sort"}) == []
    assert validate({}) == ["property 'Jolt Specification' must be set, or 'Jolt Transform' must be 'Sort'"]
    assert validate({"Jolt Transform": "Custom", "Jolt Specification": "{}"}) == [
        "property 'Jolt Transform': Custom runs a Java transformation class, which flowactors can not load; "
        "write the transformation as a Chain of Jolt's operations instead"]
    assert validate({"Jolt Specification": '[{"operation": "shift", "spec": {"a": '}) == [
        "property 'Jolt Specification': the specification is not valid JSON: Expecting value at line 1, column 39"]
    assert validate({"Jolt Specification": '[{"operation": "shiftr", "spec": {}}]'}) == [
        "property 'Jolt Specification': chain entry 0: unknown operation 'shiftr' (custom Java transforms can not "
        "run here; use one of shift, default, remove, cardinality, sort, modify-overwrite-beta, modify-default-beta, "
        "modify-define-beta)"]
    [problem] = validate({"Jolt Transform": "Modify - Overwrite", "Jolt Specification": '{"a": "=toUpperCase"}'})
    assert problem.startswith("property 'Jolt Specification': unknown Modify function 'toUpperCase' in '=toUpperCase'")
    assert "\n" not in problem
    assert validate({"Jolt Specification": '{"a": "${spec}"}', "Jolt Transform": "Shift"}) == []   # known per FlowFile
    assert validate({"Jolt Specification": '${spec', "Jolt Transform": "Shift"}) != []
    assert validate({"Jolt Specification": CHAIN, "Transform Cache Size": "0"}) != []
    assert validate({"Jolt Transform": "Shift", "Jolt Specification": '{"a":' * 5000 + '"b"' + "}" * 5000}) == [
        "property 'Jolt Specification': the specification is nested too deeply"]


def _jolt_flow(out: str, properties: dict, java_type: str = "org.apache.nifi.processors.jolt.JoltTransformJSON") -> dict:
    root_id = "root"
    generate = processor(root_id, "documents", STANDARD + "GenerateFlowFile", {
        "File Size": "0 B", "Batch Size": "1", "Data Format": "Text", "Unique FlowFiles": "false",
        "Custom Text": json.dumps(DOCUMENT), "Character Set": "UTF-8", "Mime Type": None}, schedule="10 min")
    jolt = processor(root_id, "reshape", java_type, properties,
                     auto_terminate=("failure",),
                     bundle={"group": "org.apache.nifi", "artifact": "nifi-jolt-nar", "version": "2.6.0"})
    put = processor(root_id, "store", STANDARD + "PutFile", {"Directory": out}, auto_terminate=("success", "failure"))
    root = group(root_id, "jolt", None, None, processors=[generate, jolt, put],
                 connections=[connection(root_id, generate, jolt, ("success",)),
                              connection(root_id, jolt, put, ("success",))])
    return snapshot(root, {})


NIFI_2 = {"Jolt Transform": "jolt-transform-chain", "Jolt Specification": CHAIN, "Custom Transformation Class Name": None,
          "Custom Module Directory": None, "Transform Cache Size": "1", "JSON Source": "FLOW_FILE",
          "JSON Source Attribute": None, "Pretty Print": "false", "Max String Length": "20 MB",
          "Retain Unicode Escape Sequences": "false"}
NIFI_1 = {"jolt-transform": "jolt-transform-shift", "jolt-spec": '{"rating": {"primary": {"value": "Rating"}}}',
          "jolt-custom-class": None, "jolt-custom-modules": None, "Transform Cache Size": "1", "pretty_print": "true"}


def test_nifi_1_property_names_and_values_map():
    """NiFi 1's class (in the standard bundle), internal names (jolt-transform, jolt-spec,
    pretty_print) and values (jolt-transform-shift)."""
    flow = flow_from_nifi(_jolt_flow("/unused", NIFI_1, STANDARD + "JoltTransformJSON"))
    properties = flow.processors["reshape"].properties
    assert flow.processors["reshape"].type is JoltTransformJSON
    assert {key: properties.get(key) for key in ("Jolt Transform", "Jolt Specification", "Pretty Print")} == {
        "Jolt Transform": "Shift", "Jolt Specification": NIFI_1["jolt-spec"], "Pretty Print": "true"}
    flow.validate()


def test_a_nifi_2_flow_with_jolt_imports_and_runs_in_process(tmp_path):
    flow = flow_from_nifi(_jolt_flow(str(tmp_path / "out"), NIFI_2))
    assert flow.processors["reshape"].properties["Jolt Transform"] == "Chain"
    run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
             until=lambda s: any(p["name"] == "store" and p["flowfiles_in"] for p in s["processors"]))
    [written] = list((tmp_path / "out").iterdir())
    assert json.loads(written.read_bytes()) == EXPECTED


def test_non_ascii_keys_and_escaped_values_are_written_as_characters():
    # NiFi's TestJoltTransformJSON testTransformInputWithShiftrAccentedChars and testWithUnicodeEscaping
    # (Retain Unicode Escape Sequences false, the only value here)
    runner = transform([b'{"rating": {"primary\xc3\x84\xc3\x96\xc3\x9c": {"value": "\\u011f\\u00fc"}}}'],
                       **{"Jolt Transform": "Shift", "Jolt Specification": '{"rating": {"*": {"value": "&1"}}}'})
    assert runner.contents("success") == ['{"primaryÄÖÜ":"ğü"}'.encode()]
