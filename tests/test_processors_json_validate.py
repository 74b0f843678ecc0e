"""ValidateJson on the cases of NiFi's TestValidateJson, on the in-process and the stateless
engine: every draft, schemas from text and files, JSON Lines, and what is refused."""

import io
import json

import pytest

from flowactors.processors import ValidateJson
from flowactors.processors.json.validate import _lines
from flowactors.sdk.relationships import REASON_ATTRIBUTE
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

DOCUMENT = json.dumps({"FieldOne": "stringValue", "FieldTwo": 1234, "FieldThree": [{"arrayField": "arrayValue"}]})
SCHEMA = json.dumps({"type": "object", "properties": {
    "FieldOne": {"type": "string"}, "FieldTwo": {"type": "integer"},
    "FieldThree": {"type": "array", "items": {"type": "object", "properties": {"arrayField": {"type": "string"}}}}},
    "required": ["FieldOne"]})
DRAFTS = ["Draft 4", "Draft 6", "Draft 7", "Draft 2019-09", "Draft 2020-12"]


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def validate(content, schema=SCHEMA, **properties):
    runner = ProcessorRunner(ValidateJson, {"JSON Schema": schema, **properties})
    runner.enqueue(content.encode() if isinstance(content, str) else content)
    runner.run()
    return runner


def routed(runner, relationship):
    outputs = {name: runner.output(name) for name in ("valid", "invalid", "failure")}
    assert sum(map(len, outputs.values())) == 1 and len(outputs[relationship]) == 1, outputs
    routes = [e for e in runner.events() if e.event_type == T.ROUTE]
    assert len(routes) == 1
    return outputs[relationship][0]


@pytest.mark.parametrize("draft", DRAFTS)
def test_a_matching_document_is_valid_in_every_draft(draft):
    out = routed(validate(DOCUMENT, **{"JSON Schema Version": draft}), "valid")
    assert "json.validation.errors" not in out.attributes


@pytest.mark.parametrize("schema", ["{}", '{"fruit": "apple", "vegetable": "carrot"}', "true"])
def test_empty_and_unknown_keyword_schemas_accept_everything(schema):
    routed(validate(DOCUMENT, schema), "valid")


def test_the_default_draft_is_2020_12():
    schema = json.dumps({"prefixItems": [{"type": "string"}], "items": False})   # 2020-12 keywords
    routed(validate('["a"]', schema), "valid")
    routed(validate('["a", 1]', schema), "invalid")


def test_pattern_mismatch_is_invalid_with_the_errors():
    schema = json.dumps({"properties": {"FieldOne": {"type": "string", "pattern": "^unmatched$"}}})
    out = routed(validate(DOCUMENT, schema, **{"JSON Schema Version": "Draft 7"}), "invalid")
    errors = out.attributes["json.validation.errors"]
    assert errors.startswith("[$.FieldOne: ") and "does not match '^unmatched$'" in errors


def test_missing_required_value_and_every_error_listed():
    schema = json.dumps({"required": ["FieldFour"], "properties": {"FieldTwo": {"type": "string"}}})
    out = routed(validate(DOCUMENT, schema), "invalid")
    assert out.attributes["json.validation.errors"] == \
        "[$: 'FieldFour' is a required property, $.FieldTwo: 1234 is not of type 'string']"


def test_integers_follow_each_draft():
    schema = json.dumps({"type": "integer"})
    routed(validate("1.0", schema, **{"JSON Schema Version": "Draft 4"}), "invalid")   # draft 4: no fraction at all
    routed(validate("1.0", schema, **{"JSON Schema Version": "Draft 6"}), "valid")


def test_a_schema_from_a_file(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(SCHEMA)
    routed(validate(DOCUMENT, str(path)), "valid")
    routed(validate('{"FieldTwo": "x"}', str(path)), "invalid")


@pytest.mark.parametrize("content,why", [("Not JSON", "not valid JSON"), ('{"a": NaN}', "NaN"), ("", "empty")])
def test_content_that_is_not_json_goes_to_failure(content, why):
    out = routed(validate(content), "failure")
    assert why in out.attributes[REASON_ATTRIBUTE] and "json.validation.errors" not in out.attributes


def test_a_json_null_document_is_validated():
    routed(validate("null", '{"type": "null"}'), "valid")
    routed(validate("null"), "invalid")


def test_max_string_length():
    out = routed(validate('{"FieldOne": "0123456789"}', **{"Max String Length": "5 B"}), "failure")
    assert "Max String Length" in out.attributes[REASON_ATTRIBUTE]


def test_json_lines_each_line_validated_the_first_bad_one_reported():
    lines = f"{DOCUMENT}\n\n{DOCUMENT}\r\n"
    routed(validate(lines, **{"Input Format": "JSON Lines"}), "valid")
    out = routed(validate(f'{DOCUMENT}\n{{"FieldTwo": 1}}\n{{"FieldTwo": 2}}', **{"Input Format": "JSON Lines"}),
                 "invalid")
    assert out.attributes["json.validation.errors"] == \
        "JSON at line 2 is invalid: [$: 'FieldOne' is a required property]"
    out = routed(validate(f"{DOCUMENT}\nnot json\n", **{"Input Format": "JSON Lines"}), "failure")
    assert "line 2" in out.attributes[REASON_ATTRIBUTE]


@pytest.mark.parametrize("schema,draft,why", [
    ("Not JSON", "Draft 7", "neither JSON nor a file path"),
    ("not-found.json", "Draft 7", "neither JSON nor a file path"),
    ('{"type": 5}', "Draft 7", "not valid for Draft 7"),
    ('{"minimum": "zero"}', "Draft 2020-12", "not valid for Draft 2020-12"),
    ("   ", "Draft 7", "must not be empty"),
    (SCHEMA, "DRAFT_7", "JSON Schema Version"),     # NiFi's internal value: only the display name here
])
def test_a_schema_that_is_not_a_schema_makes_the_processor_not_valid(schema, draft, why):
    with pytest.raises(ValueError, match=why):
        ProcessorRunner(ValidateJson, {"JSON Schema": schema, "JSON Schema Version": draft})


def test_a_reference_to_another_document_is_not_fetched_and_fails_the_flowfile():
    schema = json.dumps({"$ref": "https://example.com/other.json"})
    out = routed(validate(DOCUMENT, schema), "failure")
    assert "$ref cannot be resolved" in out.attributes[REASON_ATTRIBUTE]
    routed(validate('{"a": "x"}', json.dumps({"$defs": {"s": {"type": "string"}},
                                                "properties": {"a": {"$ref": "#/$defs/s"}}})), "valid")


def test_a_document_nested_too_deeply_goes_to_failure():
    deep = '{"a":' * 400 + "1" + "}" * 400    # read, but too deep for jsonschema's recursive validation
    schema = json.dumps({"$defs": {"n": {"type": ["object", "integer"], "properties": {"a": {"$ref": "#/$defs/n"}}}},
                         "$ref": "#/$defs/n"})
    out = routed(validate(deep, schema), "failure")
    assert "nested too deeply" in out.attributes[REASON_ATTRIBUTE]


def test_json_lines_are_split_the_same_whatever_the_chunks():
    data = b'{"a": 1}\n\n{"b": "' + b"x" * 50 + b'"}\n{"c": 3}'
    expected = data.split(b"\n")
    for size in (1, 3, 7, 64, len(data), 1 << 20):
        assert list(_lines(io.BytesIO(data), size)) == expected, size
        assert list(_lines(io.BytesIO(data + b"\n"), size)) == expected, size
    assert list(_lines(io.BytesIO(b""), 4)) == []
