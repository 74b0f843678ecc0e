"""FlattenJson on the cases of NiFi's TestFlattenJson, on the in-process and the stateless engine."""

import json

import pytest

from flowactors.processors import FlattenJson
from flowactors.processors.json.flatten import escape_json
from flowactors.sdk.relationships import REASON_ATTRIBUTE
from flowactors.testing import ProcessorRunner

NESTED = {"test": {"msg": "Hello, world"}, "first": {"second": {"third": ["one", "two", "three", "four", "five"]}}}
MIXED = {"first": {"second": [{"x": 1, "y": 2, "z": [3, 4, 5]}, [6, 7, 8], [[9, 10], 11, 12]],
                   "third": {"a": "b", "c": "d", "e": "f"}}}


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def convert(document, attributes=None, raw=False, **properties):
    runner = ProcessorRunner(FlattenJson, properties)
    runner.enqueue(document if raw else json.dumps(document).encode(), attributes)
    runner.run()
    [out] = runner.output("success")
    assert runner.output("failure") == []
    return json.loads(runner.read(out)), runner.read(out)


def test_flatten_keeps_arrays_by_default():
    flat, _ = convert(NESTED)
    assert flat == {"test.msg": "Hello, world", "first.second.third": ["one", "two", "three", "four", "five"]}


def test_flatten_a_root_array_of_records_keeping_arrays():
    flat, _ = convert([{"first": {"second": "Hello"}}, {"first": {"second": "World"}}])
    assert flat == [{"first.second": "Hello"}, {"first.second": "World"}]


def test_a_separator_of_its_own_and_one_from_an_expression():
    assert convert(NESTED, **{"Separator": "_"})[0]["first_second_third"][0] == "one"
    assert convert(NESTED, {"separator.char": "_"}, **{"Separator": "${separator.char}"})[0]["test_msg"] == \
        "Hello, world"


def test_flatten_modes():
    assert convert(NESTED, **{"Flatten Mode": "normal"})[0]["first.second.third[0]"] == "one"
    assert convert(NESTED, **{"Flatten Mode": "dot notation"})[0]["first.second.third.0"] == "one"
    keep = convert(MIXED, **{"Flatten Mode": "keep arrays"})[0]
    assert set(keep) == {"first.second", "first.third.a", "first.third.c", "first.third.e"}
    assert keep["first.second"][1] == [6, 7, 8]
    primitive = convert(MIXED, **{"Flatten Mode": "keep primitive arrays"})[0]
    assert len(primitive) == 10
    assert primitive["first.second[0].x"] == 1 and primitive["first.second[0].z"] == [3, 4, 5]
    assert primitive["first.second[2][0]"] == [9, 10] and primitive["first.second[2][2]"] == 12
    assert primitive["first.third.c"] == "d"


def test_objects_inside_kept_arrays_are_flattened_on_their_own():
    flat, _ = convert({"a": [{"b": {"c": 1}}, [{"d": {"e": 2}}]], "f": {}, "g": []})
    assert flat == {"a": [{"b.c": 1}, [{"d.e": 2}]], "f": {}, "g": []}


def test_texts_are_escaped_as_nifi_escapes_them_and_read_back_the_same():
    flat, raw = convert({"first": {"url": ["http://localhost/value1"], "name": "Jos\u00e9 \U0001F600"}},
                        **{"Flatten Mode": "normal"})
    assert flat == {"first.url[0]": "http://localhost/value1", "first.name": "Jos\u00e9 \U0001F600"}
    assert b'"http:\\/\\/localhost\\/value1"' in raw and b"Jos\\u00E9 \\uD83D\\uDE00" in raw
    assert escape_json('a"b\\c\n\x01\x7f') == 'a\\"b\\\\c\\n\\u0001\x7f'


def test_numbers_are_written_as_they_were_read():
    _, raw = convert(b'{"a": {"b": 2.50, "c": 1e3, "d": -0, "e": 12345678901234567890}}', raw=True)
    assert raw == b'{"a.b":2.50,"a.c":1E+3,"a.d":0,"a.e":12345678901234567890}'


def test_reserved_characters_in_keys():
    document = {"first": {"second.third": "Hello", "fourth": "World"}}
    assert convert(document)[0] == {'first["second.third"]': "Hello", "first.fourth": "World"}
    assert convert(document, **{"Ignore Reserved Characters": "true"})[0] == \
        {"first.second.third": "Hello", "first.fourth": "World"}
    records = [{"first": {"second_third": "Hello"}}, {"first": {"second_third": "World"}}]
    assert convert(records, **{"Separator": "_", "Ignore Reserved Characters": "true"})[0] == \
        [{"first_second_third": "Hello"}, {"first_second_third": "World"}]


def test_unflatten():
    flat = {"test.msg": "Hello, world", "first.second.third": ["one", "two", "three", "four", "five"]}
    assert convert(flat, **{"Return Type": "unflatten"})[0] == NESTED
    assert convert({"first_second_third": [1]}, **{"Return Type": "unflatten", "Separator": "_"})[0] == \
        {"first": {"second": {"third": [1]}}}


def test_unflatten_keep_arrays_unflattens_the_objects_in_arrays():
    flat = {"a.b": 1, "a.c": [False, {"i.j": [False, True, "xy"]}]}
    assert convert(flat, **{"Flatten Mode": "keep arrays", "Return Type": "unflatten"})[0] == \
        {"a": {"b": 1, "c": [False, {"i": {"j": [False, True, "xy"]}}]}}


def test_unflatten_keep_primitive_arrays_and_dot_notation():
    primitive = convert(MIXED, **{"Flatten Mode": "keep primitive arrays"})[0]
    assert convert(primitive, **{"Flatten Mode": "keep primitive arrays", "Return Type": "unflatten"})[0] == MIXED
    unflat = convert({"first.second.third.0": ["one", "two"]}, **{"Flatten Mode": "dot notation",
                                                                  "Return Type": "unflatten"})[0]
    assert unflat == {"first": {"second": {"third": [["one", "two"]]}}}


@pytest.mark.parametrize("mode", ["normal", "keep arrays", "keep primitive arrays"])
def test_flatten_then_unflatten_gives_the_document_back(mode):
    document = {**MIXED, "k[1]": {"x.y": None}, "empty": {}, "none": []}
    flat = convert(document, **{"Flatten Mode": mode})[0]
    assert convert(flat, **{"Flatten Mode": mode, "Return Type": "unflatten"})[0] == document


def test_pretty_print_and_character_set():
    runner = ProcessorRunner(FlattenJson, {"Pretty Print JSON": "true", "Character Set": "UTF-16"})
    runner.enqueue(json.dumps({"a": {"b": 1, "c": [1]}}).encode("utf-16"))
    runner.run()
    [out] = runner.output("success")
    assert runner.read(out).decode("utf-16") == '{\n  "a.b": 1,\n  "a.c": [\n    1\n  ]\n}'


@pytest.mark.parametrize("content,properties,why", [
    (b"not json", {}, "not valid JSON"),
    (b'{"a.b": {"c": 1}}', {"Flatten Mode": "dot notation"}, "dot notation cannot flatten"),
    (b'{"a": 1, "a.b": 2}', {"Return Type": "unflatten"}, "goes inside a value that is not an object"),
    (b'{"a": 1}', {"Separator": "${sep}"}, "must be a single character"),
    (b"\xff\xfe{", {"Character Set": "UTF-8"}, "is not UTF-8 text"),
    # unflattened texts are written as they are: one the Character Set lacks would be lost ('?' in NiFi)
    (b'{"a.b": "caf\\u00e9"}', {"Return Type": "unflatten", "Character Set": "US-ASCII"},
     "the result cannot be written in US-ASCII: ordinal not in range(128) ('\xe9' at character 14)"),
])
def test_what_cannot_be_converted_goes_to_failure_unchanged(content, properties, why):
    runner = ProcessorRunner(FlattenJson, properties)
    runner.enqueue(content, {"sep": "::"})
    runner.run()
    [out] = runner.output("failure")
    assert why in out.attributes[REASON_ATTRIBUTE] and runner.read(out) == content


@pytest.mark.parametrize("separator", ["", "ab", '"', " ", "["])
def test_separators_nifi_refuses(separator):
    with pytest.raises(ValueError, match="Separator"):
        ProcessorRunner(FlattenJson, {"Separator": separator})


def test_normal_mode_indexes_a_root_array_and_joins_with_the_separator():
    records = [{"first": {"second_third": "Hello"}}, {"first": {"second_third": "World"}}]
    flat = convert(records, **{"Separator": "_", "Ignore Reserved Characters": "true", "Flatten Mode": "normal"})[0]
    assert flat == {"[0]_first_second_third": "Hello", "[1]_first_second_third": "World"}


def test_nifi_internal_property_names_are_mapped():
    assert FlattenJson.NIFI_PROPERTY_NAMES == {
        "flatten-json-separator": "Separator", "flatten-mode": "Flatten Mode",
        "ignore-reserved-characters": "Ignore Reserved Characters", "flatten-json-return-type": "Return Type",
        "flatten-json-character-set": "Character Set", "flatten-json-pretty-print-json": "Pretty Print JSON"}
    assert set(FlattenJson.NIFI_PROPERTY_NAMES.values()) <= set(FlattenJson.descriptor_map())


def test_a_document_nested_too_deeply_goes_to_failure_unchanged():
    deep = b'{"a":' * 995 + b"1" + b"}" * 995
    runner = ProcessorRunner(FlattenJson, {"Flatten Mode": "normal"})
    runner.enqueue(deep)
    runner.run()
    [out] = runner.output("failure")
    assert "nested too deeply" in out.attributes[REASON_ATTRIBUTE] and runner.read(out) == deep
