"""The RecordPath language's predicates: comparisons and filter functions (NiFi's TestRecordPath,
FilterFunctions), and the examples of NiFi's RecordPath guide (Predicates, Filter Functions)."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pyarrow as pa
import pytest

from flowactors.sdk.record_path import RecordPathError
from tests.record_path_example import FLOAT32_123_45, evaluate, example, matches, one, reduced, value, values


@pytest.fixture
def record() -> dict:
    return example()


def test_single_and_multiple_results_filtered(record):
    assert matches("/name[contains(., 'John')]", record)
    assert not matches("/name[contains(., 'Jane')]", record)
    small, schema = reduced(record, "firstName", "lastName", "name")
    assert values("/*[contains(., 'John')]", small, schema) == ["John", "John Doe"]
    assert values("/*[contains(., 'Friedrich')]", small, schema) == []


def test_filter_on_relative_and_absolute_paths(record):
    assert matches("/mainAccount[./balance > 100]", record)
    assert not matches("/mainAccount[./balance <= 100]", record)
    assert matches("/lastName[contains(/firstName, 'Jo')]", record)
    assert not matches("/lastName[contains(/firstName, 'Do')]", record)


def test_filter_sees_none_for_a_missing_relative_field(record):
    assert matches("/name[isBlank(./nonExisting)]", record)
    assert matches("/mainAccount[isBlank(./nonExisting)]", record)
    assert not matches("/mainAccount[isBlank(./balance)]", record)


def test_path_goes_on_after_a_filter(record):
    fv = one("/mainAccount[./balance > 100]/id", record)
    assert fv.value == 1 and fv.parent_record is record["mainAccount"]
    assert not matches("/mainAccount[./balance < 100]/id", record)


def test_filters_as_values(record):
    record["name"] = None
    assert value("isEmpty(/name)", record) is True
    assert value("isEmpty(/id)", record) is False
    assert value("/id = 48", record) is True
    assert value("/id > 48", record) is False
    assert value("not(/id = 48)", record) is False
    assert values("/friends[*] = 'Jane'", record) == [False, True, False, False]
    assert values("/id = /missing", record) == []   # no right-hand value: nothing to compare


def test_filter_functions_chain(record):
    assert matches("/name[startsWith(contains(., 'John'), 't')]", record)
    assert not matches("/name[startsWith(contains(., 'Jane'), 't')]", record)


def test_contains(record):
    assert matches("/name[contains(., 'o')]", record) and not matches("/name[contains(., 'x')]", record)
    assert matches("/name[contains(., /friends[0])]", record)
    assert not matches("/name[contains(., /friends[1])]", record)
    record["friends"][2] = record["name"]
    assert matches("/name[contains(., /friends[2])]", record)
    assert not matches("/name[contains(., /nothing)]", record)


def test_contains_regex(record):
    assert matches("/name[containsRegex(., 'o[gh]n')]", record)
    assert not matches("/name[containsRegex(., 'o[xy]n')]", record)
    record["friends"] = ["o[gh]n", "o[xy]n", record["name"]]
    assert matches("/name[containsRegex(., /friends[0])]", record)
    assert not matches("/name[containsRegex(., /friends[1])]", record)
    assert matches("/name[containsRegex(., /friends[2])]", record)


def test_starts_with_and_ends_with(record):
    assert matches("/name[startsWith(., 'John D')]", record) and not matches("/name[startsWith(., 'Jonn N')]", record)
    assert matches("/name[endsWith(., 'n Doe')]", record) and not matches("/name[endsWith(., 'n Dont')]", record)
    assert matches("/name[startsWith(., '')]", record) and matches("/name[endsWith(., '')]", record)
    record["friends"] = ["John D", "John N", "n Doe", "n Dont", record["name"]]
    assert matches("/name[startsWith(., /friends[0])]", record)
    assert not matches("/name[startsWith(., /friends[1])]", record)
    assert matches("/name[endsWith(., /friends[2])]", record)
    assert not matches("/name[endsWith(., /friends[3])]", record)
    assert matches("/name[startsWith(., /friends[4])]", record) and matches("/name[endsWith(., /friends[4])]", record)


@pytest.mark.parametrize("first, second", [
    (42, 43), (True, False), ("k", "o"), (datetime.date(1998, 4, 29), datetime.date(2001, 12, 6)),
    (datetime.time(22, 56, 37), datetime.time(20, 53, 14)),
    (datetime.datetime(1998, 4, 29, 22, 56, 37), datetime.datetime(2001, 12, 6, 20, 53, 14)),
    (uuid.UUID("d0fb6ab5-20e6-4823-8190-1ab9f6173d12"), uuid.UUID("01234567-9012-3456-7890-123456789012")),
    (decimal.Decimal("1.5"), decimal.Decimal("2.5")), ("ENUM", "BOOLEAN"),
])
def test_equality_of_each_kind_of_value(record, first, second):
    record["firstName"], record["lastName"] = first, second
    assert matches("/firstName[. = /firstName]", record, None)
    assert not matches("/firstName[. = /lastName]", record, None)
    assert not matches("/firstName[. != /firstName]", record, None)
    assert matches("/firstName[. != /lastName]", record, None)
    assert matches("/lastName[. = /lastName]", record, None)


def test_equality_of_arrays_maps_records_and_elements(record):
    assert matches("/friends[. = /friends]", record) and not matches("/friends[. = /bytes]", record)
    assert not matches("/friends[. != /friends]", record) and matches("/friends[. != /bytes]", record)
    record["friends"] = {"different": "entries"}
    assert matches("/attributes[. = /attributes]", record, None) and not matches("/attributes[. = /friends]", record, None)
    assert matches("/mainAccount[. = /mainAccount]", record) and not matches("/mainAccount[. = /accounts[1]]", record)
    assert matches("/mainAccount[. != /accounts[1]]", record)
    assert matches("/bytes[0][. = /bytes[0]]", record) and not matches("/bytes[0][. = /bytes[1]]", record)
    assert matches("/bytes[0][. != /bytes[1]]", record)


def test_equality_of_a_union_field():
    schema = pa.schema([("firstChoice", pa.dense_union([pa.field("i", pa.int32()), pa.field("s", pa.string())])),
                        ("secondChoice", pa.dense_union([pa.field("i", pa.int32()), pa.field("s", pa.string())]))])
    record = {"firstChoice": "text", "secondChoice": 4911}
    assert matches("/firstChoice[. = /firstChoice]", record, schema)
    assert not matches("/firstChoice[. = /secondChoice]", record, schema)


def test_equality_of_numbers_and_text(record):
    assert matches("/id[. = 48]", record) and not matches("/id[. = 49]", record)
    assert matches("/mainAccount/balance[. = '123.45']", record)   # a number and text: as text
    assert not matches("/mainAccount/balance[. = '123.46']", record)
    assert matches("/mainAccount/balance[. != '123.46']", record)
    assert matches("/accounts[0]/balance[. = '10000.0']", record)   # as Java writes a double
    assert not matches("/id[. = '048']", record)
    record["numbers"] = [48, 49]
    assert matches("/id[. = /numbers[0]]", record) and not matches("/id[. = /numbers[1]]", record)
    assert matches("/id[. != /numbers[1]]", record)
    record["numbers"] = [123.45, 123.46]
    assert matches("/mainAccount/balance[. = /numbers[0]]", record, None)
    assert not matches("/mainAccount/balance[. = /numbers[1]]", record, None)
    assert not matches("/mainAccount/balance[. != /numbers[0]]", record, None)


def test_equality_of_strings(record):
    assert matches("/name[. = 'John Doe']", record) and not matches("/name[. = 'Jane Doe']", record)
    assert not matches("/name[. != 'John Doe']", record) and matches("/name[. != 'Jane Doe']", record)
    record["name"] = record["friends"][0]
    assert matches("/name[. = /friends[0]]", record) and not matches("/name[. = /friends[1]]", record)
    assert not matches("/missing[. = /missing]", record) and not matches("/missing[. != 'x']", record)


@pytest.mark.parametrize("operator, passing, failing", [
    (">", [47, "47", "47.5"], [48, 49, "48.0"]), (">=", [47, 48, "48.0"], [49, "48.5"]),
    ("<", [49, "48.5"], [48, 47]), ("<=", [48, 49, "48.0"], [47, "47.99"]),
])
def test_order_comparisons_with_whole_numbers(record, operator, passing, failing):
    for other in passing:
        assert matches(f"/id[. {operator} {other!r}]".replace('"', "'"), record), other
    for other in failing:
        assert not matches(f"/id[. {operator} {other!r}]".replace('"', "'"), record), other


def test_order_comparisons_with_longs_and_doubles(record):
    assert matches("/longNumber[. > 1000000000000000000]", record)
    assert matches("/longNumber[. > 1234567890123456788]", record)
    assert not matches("/longNumber[. > 1234567890123456789]", record)
    assert matches("/longNumber[. >= 1234567890123456789]", record)
    assert not matches("/longNumber[. >= 1234567890123456790]", record)
    assert matches("/longNumber[. < 1234567890123456790]", record)
    assert not matches("/longNumber[. <= 1234567890123456788]", record)
    assert matches("/mainAccount/balance[. > '122.99']", record)
    assert not matches("/mainAccount/balance[. > '123.45']", record)
    assert matches("/mainAccount/balance[. >= '123.45']", record)
    assert matches("/mainAccount/balance[. < '123.46']", record)
    assert not matches("/mainAccount/balance[. <= '122.99']", record)
    record["numbers"] = [122.99, 123.45, 124.0]
    assert matches("/mainAccount/balance[. > /numbers[0]]", record, None)
    assert not matches("/mainAccount/balance[. > /numbers[1]]", record, None)
    assert matches("/mainAccount/balance[. >= /numbers[1]]", record, None)
    assert not matches("/mainAccount/balance[. >= /numbers[2]]", record, None)
    assert matches("/mainAccount/balance[. < /numbers[2]]", record, None)
    assert matches("/mainAccount/balance[. <= /numbers[1]]", record, None)
    record["numbers"] = [123.2]
    assert matches("/mainAccount/balance[. > /numbers[0]]", record, None)   # no truncation to whole numbers


def test_order_comparisons_need_numbers(record):
    for operator in (">", ">=", "<", "<="):
        assert not matches(f"/name[. {operator} 'Jane']", record)
        assert not matches(f"/name['Jane' {operator} .]", record)
    assert not matches("/mainAccount[. > 1]", record)


def test_order_comparisons_of_dates(record):
    record["date"] = datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc)
    assert matches("/date[. = /date]", record, None) and matches("/date[. > 999]", record, None)
    assert not matches("/date[. > 1000]", record, None)
    record["date"] = datetime.date(1970, 1, 2)
    assert matches("/date[. >= 86400000]", record, None) and not matches("/date[. > 86400000]", record, None)


def test_is_blank_and_is_empty(record):
    assert matches("/name[isBlank('')]", record) and matches("/name[isEmpty('')]", record)
    assert matches("/name[isBlank(/missing)]", record) and matches("/name[isEmpty(/missing)]", record)
    for text, blank, empty in (("", True, True), (" \r\n\t", True, False), (" u ", False, False), ("u", False, False)):
        record["firstName"] = text
        assert matches("/name[isBlank(/firstName)]", record) is blank, text
        assert matches("/name[isEmpty(/firstName)]", record) is empty, text


def test_matches_regex(record):
    assert matches("/name[matchesRegex(., 'John Doe')]", record)
    assert not matches("/name[matchesRegex(., 'Jon Doe')]", record)
    assert matches("/name[matchesRegex(., 'John D[aeiou]{2}')]", record)
    assert matches("/name[matchesRegex(., '\\w+ \\w+')]", record)
    assert matches("/name[matchesRegex(., '(J|D)ohn (J|D)oe')]", record)
    assert matches("/name[matchesRegex(., 'J.*n Doe')]", record)
    assert not matches("/name[matchesRegex(., 'John')]", record)
    record["firstName"] = ".+"
    assert matches("/name[matchesRegex(., /firstName)]", record)


def test_regex_dot_and_word_characters_as_java(record):
    record["name"] = " \t"
    assert matches("/name[matchesRegex(., '.+')]", record)
    record["name"] = "\n\r"
    assert not matches("/name[matchesRegex(., '.+')]", record)
    assert matches("/name[matchesRegex(., '(?s).+')]", record)
    record["name"] = "é"
    assert not matches("/name[matchesRegex(., '\\w')]", record)   # Java's \w is ASCII
    assert matches("/name[matchesRegex(., '(?U)\\w')]", record)
    assert matches("/name[matchesRegex(., '[.]|.')]", record)


def test_matches_regex_escapes(record):
    record["name"] = ".^$*+?()[{\\|"
    assert matches("/name[matchesRegex(., '\\.\\^\\$\\*\\+\\?\\(\\)\\[\\{\\\\\\|')]", record)


def test_dynamic_regex_errors_name_the_function(record):
    record["firstName"] = "("
    with pytest.raises(RecordPathError, match="matchesRegex: invalid regular expression"):
        matches("/name[matchesRegex(., /firstName)]", record)


def test_not(record):
    assert matches("/name[not(. = 'other')]", record) and not matches("/name[not(. = /name)]", record)
    assert matches("/name[not(contains(., 'other'))]", record)
    assert not matches("/name[not(contains(., /name))]", record)
    assert matches("/name[not(not(contains(., 'John')))]", record)
    assert not matches("/name[not(. = /missing)]", record)   # no right-hand value: nothing passes


# --- the guide's examples ---

GUIDE = {
    "name": "John Doe",
    "workAddress": {"number": "123", "street": "5th Avenue", "city": "New York", "state": "NY", "zip": "10020"},
    "homeAddress": {"number": "456", "street": "Grand St", "city": "Jersey City", "state": "NJ", "zip": "07304"},
    "details": {"position": "Dataflow Engineer", "preferredState": "NY", "employer": "", "vehicle": None,
                "phrase": "   "},
}


def test_guide_predicates():
    assert [fv.name for fv in one_all("/*[./state != 'NY']")] == ["homeAddress"]
    assert values("/*[./state != 'NY']/zip", GUIDE, None) == ["07304"]
    assert [fv.name for fv in one_all("/*[./state = /details/preferredState]")] == ["workAddress"]
    assert values("/*/city[../state = 'NJ']", GUIDE, None) == ["Jersey City"]
    assert values("//zip", GUIDE, None) == ["10020", "07304"]


def one_all(path: str) -> list:
    return evaluate(path, GUIDE, None)


@pytest.mark.parametrize("path, selects", [
    ("/name[contains(., 'o')]", True), ("/name[contains(., 'x')]", False),
    ("/name[contains( ../workAddress/state, /details/preferredState )]", True),
    ("/name[containsRegex(., 'o[gh]n')]", True), ("/name[containsRegex(., 'John')]", True),
    ("/name[containsRegex(., 'o[xy]n')]", False),
    ("/name[matchesRegex(., 'John Doe')]", True), ("/name[matchesRegex(., 'John')]", False),
    ("/name[matchesRegex(., '.* Doe' )]", True),
    ("/name[startsWith(., 'J')]", True), ("/name[startsWith(., 'x')]", False), ("/name[startsWith(., '')]", True),
    ("/name[endsWith(., 'e')]", True), ("/name[endsWith(., 'xyz')]", False), ("/name[endsWith(., '')]", True),
    ("/name[not(endsWith(., 'x'))]", True), ("/name[not(contains(., 'x'))]", True),
    ("/name[not(endsWith(., 'e'))]", False),
    ("/name[isEmpty(/details/employer)]", True), ("/name[isEmpty(/details/vehicle)]", True),
    ("/name[isEmpty(/details/phrase)]", False), ("/name[isEmpty(.)]", False),
    ("/name[isBlank(/details/employer)]", True), ("/name[isBlank(/details/vehicle)]", True),
    ("/name[isBlank(/details/phrase)]", True), ("/name[isBlank(.)]", False),
    ("/name[ isEmpty(/details/employer) ]", True),
    ("//city[not(startsWith(fieldName(..), 'work'))]", True),
])
def test_guide_filter_functions(path, selects):
    assert values(path, GUIDE, None) == (["Jersey City"] if path.startswith("//city") else ["John Doe"] if selects else [])


def test_float32_field_compares_as_its_value(record):
    assert record["floatNumber"] == FLOAT32_123_45
    assert matches("/floatNumber[. > '123.4']", record) and matches("/floatNumber[. < '123.45']", record)
