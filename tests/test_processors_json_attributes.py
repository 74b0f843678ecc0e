"""AttributesToJSON and AttributesToCSV on the cases of NiFi's TestAttributesToJSON and
TestAttributesToCSV, on the in-process and the stateless engine."""

import csv
import io
import json

import pytest

from flowactors.processors import AttributesToCSV, AttributesToJSON
from flowactors.processors.json.attributes_to import escape_csv
from flowactors.sdk.relationships import REASON_ATTRIBUTE
from flowactors.testing import ProcessorRunner

BEACH = {"beach-name": "Malibu Beach", "beach-location": "California, US",
         "beach-endorsement": "This is our family's favorite beach. We highly recommend it. \n\nThanks, Jim",
         "attribute-should-be-eliminated": "This should not be in CSVData!"}


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def run(processor, properties, attributes, content=b""):
    runner = ProcessorRunner(processor, properties)
    runner.enqueue(content, attributes)
    runner.run()
    [out] = runner.output("success")
    assert runner.output("failure") == []
    return runner, out


def fields(line):
    return next(csv.reader(io.StringIO(line)))


# ----------------------------------------------------------------------------- AttributesToJSON
def test_json_of_every_attribute_into_the_attribute_by_default():
    runner, out = run(AttributesToJSON, {}, {"a": "1"}, b"content")
    written = json.loads(out.attributes["JSONAttributes"])
    assert written == {k: v for k, v in out.attributes.items() if k != "JSONAttributes"}
    assert runner.read(out) == b"content" and "mime.type" not in out.attributes


def test_json_without_core_attributes():
    _, out = run(AttributesToJSON, {"Include Core Attributes": "false"}, {"a": "1", "mime.type": "x/y"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"a": "1"}


def test_json_of_a_list_with_a_missing_attribute_as_empty_text_or_null():
    _, out = run(AttributesToJSON, {"Attributes List": " a , missing "}, {"a": "1", "b": "2"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"a": "1", "missing": ""}
    _, out = run(AttributesToJSON, {"Attributes List": "a,missing", "Null Value": "true"}, {"a": "1"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"a": "1", "missing": None}


def test_json_list_names_core_attributes_even_without_them():
    _, out = run(AttributesToJSON, {"Attributes List": "filename", "Include Core Attributes": "false"},
                 {"filename": "f.txt"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"filename": "f.txt"}


def test_json_regex_names_core_attributes_even_without_them():
    # NiFi's TestAttributesToJSON testAttribute_noIncludeCoreAttributesRegex
    _, out = run(AttributesToJSON, {"Attributes Regular Expression": "path.*", "Include Core Attributes": "false"},
                 {"path": "p", "other": "o"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"path": "p"}


def test_json_regex_and_list_together():
    _, out = run(AttributesToJSON, {"Attributes List": "x", "Attributes Regular Expression": "delimited\\.header\\..*"},
                 {"x": "1", "delimited.header.column.1": "c1", "delimited.header.column.2": "c2", "other": "o",
                  "not.delimited.header.x": "n"})
    assert json.loads(out.attributes["JSONAttributes"]) == {"x": "1", "delimited.header.column.1": "c1",
                                                            "delimited.header.column.2": "c2"}


def test_json_to_content_pretty_and_compact():
    attributes = {"a": "1", "b": "two"}
    properties = {"Destination": "flowfile-content", "Attributes List": "a,b"}
    runner, out = run(AttributesToJSON, properties, attributes, b"old")
    assert runner.read(out) == b'{"a":"1","b":"two"}' and out.attributes["mime.type"] == "application/json"
    runner, out = run(AttributesToJSON, {**properties, "Pretty Print": "true"}, attributes, b"old")
    assert runner.read(out) == b'{\n  "a" : "1",\n  "b" : "two"\n}'


def test_json_pretty_print_only_applies_to_the_content():
    _, out = run(AttributesToJSON, {"Attributes List": "a", "Pretty Print": "true"}, {"a": "1"})
    assert out.attributes["JSONAttributes"] == '{"a":"1"}'


def test_json_nested_strategy_writes_json_values_as_json():
    attributes = {"obj": ' {"k": [1, 2.5, null], "s": "t"} ', "arr": "[1,2]", "text": "{not closed", "n": "5"}
    properties = {"Attributes List": "obj,arr,text,n"}
    _, out = run(AttributesToJSON, {**properties, "JSON Handling Strategy": "Nested"}, attributes)
    assert json.loads(out.attributes["JSONAttributes"]) == {"obj": {"k": [1, 2.5, None], "s": "t"}, "arr": [1, 2],
                                                            "text": "{not closed", "n": "5"}
    _, out = run(AttributesToJSON, properties, attributes)   # Escaped: every value a text
    assert json.loads(out.attributes["JSONAttributes"])["arr"] == "[1,2]"


def test_json_nested_value_that_is_not_json_goes_to_failure():
    runner = ProcessorRunner(AttributesToJSON, {"JSON Handling Strategy": "Nested", "Attributes List": "bad"})
    runner.enqueue(b"", {"bad": "{oops}"})
    runner.run()
    [out] = runner.output("failure")
    assert "attribute 'bad' cannot be written as nested JSON: the content is not valid JSON" in \
        out.attributes[REASON_ATTRIBUTE]


def test_json_refuses_a_bad_regex_and_value():
    with pytest.raises(ValueError, match="Attributes Regular Expression"):
        ProcessorRunner(AttributesToJSON, {"Attributes Regular Expression": "(unclosed"})
    with pytest.raises(ValueError, match="JSON Handling Strategy"):
        ProcessorRunner(AttributesToJSON, {"JSON Handling Strategy": "NESTED"})   # NiFi's internal value


# ----------------------------------------------------------------------------- AttributesToCSV
def test_csv_of_a_missing_listed_attribute_is_an_empty_field_or_null():
    properties = {"Include Core Attributes": "false", "Attribute List": "beach-whatever,beach-or-not"}
    _, out = run(AttributesToCSV, properties, {})
    assert out.attributes["CSVData"] == ","
    _, out = run(AttributesToCSV, {**properties, "Null Value": "true"}, {"beach-or-not": ""})
    assert out.attributes["CSVData"] == "null,null"


def test_csv_of_every_attribute_without_core_ones():
    _, out = run(AttributesToCSV, {"Include Core Attributes": "false"}, BEACH)
    assert fields(out.attributes["CSVData"]) == list(BEACH.values())


def test_csv_of_every_attribute_with_core_ones_to_content():
    runner, out = run(AttributesToCSV, {"Destination": "flowfile-content"}, BEACH, b"old content")
    values = fields(runner.read(out).decode())   # in the FlowFile's attribute order, core ones where they are
    assert sorted(values) == sorted([*BEACH.values(), *(out.attributes[k] for k in ("filename", "path", "uuid"))])
    assert out.attributes["mime.type"] == "text/csv" and "CSVData" not in out.attributes


def test_csv_list_with_and_without_core_attributes():
    listed = {"Attribute List": "beach-name,beach-location,beach-endorsement"}
    _, out = run(AttributesToCSV, {**listed, "Include Core Attributes": "false"}, BEACH)
    assert out.attributes["CSVData"] == ('Malibu Beach,"California, US","This is our family\'s favorite beach. We '
                                         'highly recommend it. \n\nThanks, Jim"')
    _, out = run(AttributesToCSV, {**listed, "Include Core Attributes": "true"}, BEACH)
    assert fields(out.attributes["CSVData"])[3:] == [out.attributes[k] for k in ("filename", "path", "uuid")]
    _, out = run(AttributesToCSV, {"Attribute List": "beach-name,uuid", "Include Core Attributes": "false"}, BEACH)
    assert fields(out.attributes["CSVData"]) == ["Malibu Beach", out.attributes["uuid"]]   # the list wins


def test_csv_list_from_an_expression_with_commas_in_names():
    attributes = {"beach,name": "Malibu Beach", "beach,location": "California, US", "x": "no",
                  "myAttribs": '"beach,name","beach,location"'}
    _, out = run(AttributesToCSV, {"Attribute List": "${myAttribs}", "Include Core Attributes": "false",
                                   "Include Schema": "true"}, attributes)
    assert out.attributes["CSVData"] == 'Malibu Beach,"California, US"'
    assert out.attributes["CSVSchema"] == '"beach,name","beach,location"'


def test_csv_regex_from_an_expression_and_with_a_list():
    attributes = {**BEACH, "myRegEx": "beach-[a-z]+", "moreInfo1": "m1", "moreInfo2": "m2"}
    _, out = run(AttributesToCSV, {"Attributes Regular Expression": "${myRegEx}",
                                   "Include Core Attributes": "false"}, attributes)
    assert len(fields(out.attributes["CSVData"])) == 3
    _, out = run(AttributesToCSV, {"Attributes Regular Expression": "${myRegEx}", "Include Core Attributes": "false",
                                   "Attribute List": "moreInfo1,moreInfo2"}, attributes)
    assert fields(out.attributes["CSVData"])[:2] == ["m1", "m2"] and len(fields(out.attributes["CSVData"])) == 5


def test_csv_schema_to_attribute_and_to_content():
    properties = {"Include Core Attributes": "false", "Include Schema": "true", "Attributes Regular Expression":
                  "beach-(name|location)"}
    _, out = run(AttributesToCSV, properties, BEACH)
    assert out.attributes["CSVSchema"] == "beach-name,beach-location"
    assert out.attributes["CSVData"] == 'Malibu Beach,"California, US"'
    runner, out = run(AttributesToCSV, {**properties, "Destination": "flowfile-content"}, BEACH)
    assert runner.read(out) == b'beach-name,beach-location\nMalibu Beach,"California, US"'


def test_csv_a_regex_that_does_not_compile_once_evaluated_goes_to_failure():
    runner = ProcessorRunner(AttributesToCSV, {"Attributes Regular Expression": "${r}"})
    runner.enqueue(b"", {"r": "(open"})
    runner.run()
    [out] = runner.output("failure")
    assert "not a regular expression" in out.attributes[REASON_ATTRIBUTE]


def test_json_a_regex_that_does_not_compile_once_evaluated_names_the_property_when_scheduled():
    runner = ProcessorRunner(AttributesToJSON, {"Attributes Regular Expression": '${literal("(")}'})
    runner.enqueue(b"", {"a": "1"})
    with pytest.raises(ValueError, match=r"^Attributes Regular Expression '\(' is not a regular expression once "
                                         r"evaluated: missing \)"):
        runner.run()


@pytest.mark.parametrize("value,escaped", [("plain", "plain"), ("a,b", '"a,b"'), ('say "hi"', '"say ""hi"""'),
                                           ("two\nlines", '"two\nlines"'), ("cr\r", '"cr\r"'), ("", "")])
def test_escape_csv_as_commons_text(value, escaped):
    assert escape_csv(value) == escaped


def test_json_nested_value_nested_too_deeply_goes_to_failure():
    runner = ProcessorRunner(AttributesToJSON, {"JSON Handling Strategy": "Nested", "Attributes List": "deep"})
    runner.enqueue(b"", {"deep": "[" * 995 + "]" * 995})
    runner.run()
    [out] = runner.output("failure")
    assert "nested too deeply" in out.attributes[REASON_ATTRIBUTE]
