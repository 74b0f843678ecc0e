"""The RecordPath language's paths: references, arrays, maps, field types, updates, relative paths,
literals' escapes, the FieldValue API, and the syntax errors (NiFi's TestRecordPath: its top-level,
ArrayReferences, MapReferences and FieldTypes cases)."""

from __future__ import annotations

import datetime
import decimal
import pickle
import uuid

import pyarrow as pa
import pytest

from flowactors.sdk.record_path import FieldValue, RecordPathError, compile_path, remove_fields
from tests.record_path_example import SCHEMA, assert_field, evaluate, example, one, reduced, value, values


@pytest.fixture
def record() -> dict:
    return example()


# --- references ---

def test_root_reference(record):
    fv = one("/", record)
    assert fv.parent is None and fv.value is record and fv.parent_record is None
    assert compile_path("/").is_absolute


def test_direct_and_nested_child(record):
    assert_field(one("/name", record), record, "name", "John Doe")
    assert_field(one("/mainAccount/balance", record), record["mainAccount"], "balance", 123.45)


def test_self_parent_and_relative_steps(record):
    assert_field(one("/name/.", record), record, "name", "John Doe")
    assert_field(one("/mainAccount/balance/..", record), record, "mainAccount", record["mainAccount"])
    assert_field(one("/mainAccount/././balance", record), record["mainAccount"], "balance", 123.45)


def test_relative_path_starts_at_the_context_node(record):
    name = one("/name", record)
    # relative paths work from the context, not the record given: an empty one shows it
    fv = one("./../mainAccount", {}, None, context=name)
    assert_field(fv, record, "mainAccount", record["mainAccount"])
    assert not compile_path("./../mainAccount").is_absolute


def test_relative_path_without_context_starts_at_the_root(record):
    assert value("./name", record) == "John Doe"
    assert evaluate("..", record) == []


def test_quoted_field_name(record):
    fv = one("/'full,name'", {"full,name": "John Doe"}, None)
    assert fv.name == "full,name" and fv.value == "John Doe"
    assert value('/"a b"/c', {"a b": {"c": 1}}, None) == 1


def test_names_with_dots_dashes_digits_and_reserved_words():
    record = {"my.field-2": 1, "contains": 2, "not": 3, "x": {"$y!": 4}}
    assert value("/my.field-2", record, None) == 1
    assert value("/contains", record, None) == 2 and value("/not", record, None) == 3
    assert value("/x/$y!", record, None) == 4


def test_wildcard_child_skips_null_fields(record):
    selected = evaluate("/mainAccount/*", record)
    assert [(fv.name, fv.value) for fv in selected] == [
        ("id", 1), ("balance", 123.45), ("address", record["mainAccount"]["address"])]
    assert all(fv.parent_record is record["mainAccount"] for fv in selected)
    record["mainAccount"]["balance"] = None
    assert [fv.name for fv in evaluate("/mainAccount/*", record)] == ["id", "address"]


def test_descendant(record):
    small, schema = reduced(record, "id", "mainAccount", "accounts")
    selected = evaluate("//id", small, schema)
    assert [fv.value for fv in selected] == [48, 1, 6, 9]
    assert selected[0].parent_record is small
    assert selected[1].parent_record is record["mainAccount"]
    assert selected[2].parent_record is record["accounts"][0]
    assert selected[3].parent_record is record["accounts"][1]


def test_child_of_descendant(record):
    small, schema = reduced(record, "id", "mainAccount", "accounts")
    selected = evaluate("//address/city", small, schema)
    assert [fv.value for fv in selected] == ["Boston", "Las Vegas", "Austin"]
    assert selected[1].parent_record is record["accounts"][0]["address"]


def test_descendant_wildcard(record):
    selected = evaluate("/mainAccount//*", record)
    address = record["mainAccount"]["address"]
    assert [(fv.name, fv.value) for fv in selected] == [
        ("id", 1), ("balance", 123.45), ("address", address), ("city", "Boston"), ("state", "Massachusetts")]
    assert selected[3].parent_record is address


def test_descendant_in_records_inside_an_array():
    paris = {"city": "Paris", "state": "France"}
    boston = {"id": 1, "balance": 123.45, "address": {"city": "Boston", "state": "MA"}}
    record = {"array": [boston, paris]}
    schema = pa.schema([("array", pa.list_(pa.struct([("city", pa.string())])))])
    for given in (schema, None):   # known from the schema, or seen from the values
        selected = evaluate("//city", record, given)
        assert [fv.value for fv in selected] == ["Boston", "Paris"]
        assert selected[0].parent_record is boston["address"] and selected[1].parent_record is paris


def test_descendant_finds_map_entries_by_key(record):
    """A map's entries count as fields: ``//state`` finds the entry keyed 'state' (NiFi would give
    every entry of every map, whatever its key)."""
    selected = evaluate("//state", record)
    assert [fv.value for fv in selected] == ["NY", "Massachusetts", "Nevada", "Texas"]
    assert selected[0].map_key == "state"
    assert [fv.value for fv in evaluate("/attributes/..//*", {"attributes": {"a": 1}}, None)] == [{"a": 1}, 1]


def test_literals_escape_quotes_and_java_sequences(record):
    record["attributes"] = {"Joe's Lama": "cute", 'Angela "Mutti" Merkel': "powerful", " \t\r\n": "whitespace"}
    assert value("/attributes['Joe\\'s Lama']", record) == "cute"
    assert value('/attributes["Angela \\"Mutti\\" Merkel"]', record) == "powerful"
    assert value("/attributes[' \\t\\r\\n']", record) == "whitespace"
    assert value("'a\\\\b'", record) == "a\\\\b"   # \\ and any other \x stay as written (regular expressions)
    assert value("'\\d'", record) == "\\d"


def test_literal_at_the_top(record):
    assert value("'text'", record) == "text"
    assert value("-42", record) == -42
    literal = one("12", record)
    assert literal.name is None and literal.parent is None


def test_blanks_between_tokens(record):
    assert value(" / mainAccount / balance ", record) == 123.45
    assert value("/friends[ 1 .. 2 , 0 ]", record) == "Jane"


# --- arrays ---

def test_array_index(record):
    assert_field(one("/friends[0]", record), record, "friends", "John")
    assert one("/friends[0]", record).index == 0


def test_array_indexes_ranges_and_negative(record):
    friends = record["friends"]
    assert values("/friends[1, 3]", record) == [friends[1], friends[3]]
    assert values("/friends[-2]", record) == [friends[-2]]
    assert values("/friends[1..2]", record) == friends[1:3]
    assert values("/friends[*]", record) == friends
    assert values("/friends[1, 1..1, -3]", record) == [friends[1]] * 3
    assert values("/friends[1..2, 0, -1]", record) == [friends[1], friends[2], friends[0], friends[-1]]
    assert values("/friends[0..-1]", record) == friends
    assert values("/friends[-4, -5]", record) == [friends[0]]
    assert [fv.index for fv in evaluate("/friends[1..2, 0, -1]", record)] == [1, 2, 0, 3]
    assert all(fv.parent_record is record and fv.name == "friends" for fv in evaluate("/friends[*]", record))


def test_array_reference_by_relative_path(record):
    assert_field(one("/friends/.[3]", record), record, "friends", "Judy")


def test_predicates_on_array_elements(record):
    assert values("/friends[1][. = 'Jane']", record) == ["Jane"]
    assert values("/friends[0, 1, 2][. != 'Jane']", record) == ["John", "Jacob"]


def test_array_out_of_range_and_counting_down(record):
    assert evaluate("/friends[3..2]", record) == []
    assert evaluate("/friends[9001]", record) == []
    assert evaluate("/friends[-5]", record) == []
    assert evaluate("/name[0]", record) == []   # not an array


def test_update_array_element(record):
    one("/friends[0]", record).update("Theo")
    assert_field(one("/friends[0]", record), record, "friends", "Theo")
    assert record["friends"] == ["Theo", "Jane", "Jacob", "Judy"]


def test_update_every_element_of_nested_arrays(record):
    for fv in evaluate("/accounts[*]/balance", record):
        fv.update(0.0)
    assert [a["balance"] for a in record["accounts"]] == [0.0, 0.0]


# --- maps ---

def test_map_key(record):
    fv = one("/attributes['city']", record)
    assert_field(fv, record, "attributes", "New York")
    assert fv.map_key == "city"
    fv.update("Boston")
    assert_field(one("/attributes['city']", record), record, "attributes", "Boston")


def test_map_keys_wildcard_and_repeats(record):
    record["attributes"] = {"key1": "value1", "key2": "value2", "key3": "value3"}
    assert values("/attributes['key1', 'key3']", record) == ["value1", "value3"]
    assert values("/attributes[*]", record) == ["value1", "value2", "value3"]
    assert values("/attributes['key1', 'key3', 'key1']", record) == ["value1", "value3", "value1"]
    assert values("/attributes/.['key3']", record) == ["value3"]
    assert values("/attributes['key2'][. = 'value2']", record) == ["value2"]
    assert values("/attributes['key1', 'key2', 'key3'][. != 'value2']", record) == ["value1", "value3"]


def test_missing_map_key_is_none_and_can_be_set(record):
    fv = one("/attributes['nope']", record)
    assert_field(fv, record, "attributes", None)
    fv.update("yes")
    assert record["attributes"]["nope"] == "yes"


def test_schema_tells_records_from_maps(record):
    """With the schema, a map is no record (no /child) and a record no map (no ['key']); without
    it, a dict is both."""
    assert one("/attributes/city", record).value is None
    assert evaluate("/mainAccount['id']", record) == []
    assert value("/attributes/city", record, None) == "New York"
    assert value("/mainAccount['id']", record, None) == 1
    assert evaluate("/attributes/*", record) == []


# --- field types: each type's field can be set, and keeps its type ---

_TYPES = [
    (pa.bool_(), [False, True]), (pa.int8(), [0, -128, 127]), (pa.int16(), [2412, -32768]),
    (pa.int32(), [0, 2**31 - 1]), (pa.int64(), [2**63 - 1, -2**63]), (pa.float32(), [1.5, float("inf")]),
    (pa.float64(), [0.0, 1.1, -1.1, 5e-324]), (pa.decimal128(20, 18), [decimal.Decimal("1.234567890123456789")]),
    (pa.string(), ["Test", "", " \n\r\t"]), (pa.date32(), [datetime.date(2024, 8, 18)]),
    (pa.time64("us"), [datetime.time(9, 45, 27)]), (pa.timestamp("ms"), [datetime.datetime(2024, 8, 18, 9, 45, 27)]),
    (pa.binary(), [b"", b"\x00\xff"]), (pa.list_(pa.string()), [[], ["CAT"], list("abcxyz")]),
    (pa.map_(pa.string(), pa.int32()), [{}, {"first": 1}, {"a": 1, "b": 2, "c": 3}]),
    (pa.struct([("id", pa.int32())]), [{"id": 7}]), (pa.dictionary(pa.int32(), pa.string()), ["alice", "EVE"]),
    (pa.dense_union([pa.field("i", pa.int32()), pa.field("s", pa.string())]), [25, "Alice"]),
    (pa.uuid(), [uuid.UUID("cca14e57-c79e-4fb9-8235-afeb503380df")]),
]


@pytest.mark.parametrize("arrow_type, samples", _TYPES, ids=[str(t) for t, _ in _TYPES])
def test_each_field_type_can_be_set(arrow_type, samples):
    schema = pa.schema([("field", arrow_type)])
    expected_type = None if pa.types.is_union(arrow_type) else \
        arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    for sample in [None, *samples]:
        record: dict = {}
        assert one("/field", record, schema).update(sample) is True
        fv = one("/field", record, schema)
        assert fv.parent_record is record and fv.name == "field" and fv.type == expected_type
        assert fv.value == sample and record == {"field": sample}


# --- updates, removals, the FieldValue API ---

def test_update_creates_a_missing_field(record):
    fv = one("/missing", record)
    assert fv.value is None and fv.type == pa.string()
    assert fv.update("here") is True
    assert record["missing"] == "here" and fv.value == "here"
    one("/mainAccount/opened", record).update(2026)
    assert record["mainAccount"]["opened"] == 2026


def test_update_without_a_record_to_hold_the_field(record):
    """A field of a missing record, or of a value that is no record, has nowhere to go (NiFi does
    nothing there too)."""
    assert one("/nothing/x", record).update(1) is False
    assert one("/name/x", record).update(1) is False
    assert one("/attributes/x", record).update(1) is False   # a map: set entries with ['x']
    assert "nothing" not in record and "x" not in record and "x" not in record["attributes"]


def test_update_the_root_record(record):
    root = one("/", record)
    root.update({"only": 1})
    assert record == {"only": 1}
    with pytest.raises(RecordPathError, match="root record can only be replaced by a record"):
        root.update("text")


def test_literals_and_function_values_cannot_be_updated(record):
    with pytest.raises(RecordPathError, match="cannot update the literal 'x': it is not in the record"):
        one("'x'", record).update(1)
    with pytest.raises(RecordPathError, match="cannot update the value 'JOHN DOE' computed by name"):
        one("toUpperCase(/name)", record).update(1)


def test_update_an_element_no_longer_there(record):
    fv = one("/friends[3]", record)
    record["friends"].clear()
    with pytest.raises(RecordPathError, match="element 3 of field 'friends'.*no longer in a list"):
        fv.update("x")


def test_remove_fields_elements_and_entries(record):
    assert one("/name", record).remove() is True and "name" not in record
    assert one("/name", record).remove() is False
    assert one("/attributes['city']", record).remove() is True and record["attributes"] == {"state": "NY"}
    assert remove_fields(evaluate("/friends[0, 2, -1]", record)) == 3
    assert record["friends"] == ["Jane"]
    assert remove_fields(evaluate("/numbers[1, 1, 5..6]", record)) == 3   # a repeat removes once
    assert record["numbers"] == [0, 2, 3, 4, 7, 8, 9]
    with pytest.raises(RecordPathError, match="cannot remove the root record"):
        one("/", record).remove()


def test_field_value_knows_its_type_parent_and_path(record):
    balance = one("/accounts[1]/balance", record)
    assert balance.type == pa.float64() and balance.parent.index == 1
    assert balance.parent.parent.name == "accounts" and balance.parent.parent.type == SCHEMA.field("accounts").type
    assert balance.logical_path() == "/accounts[1]/balance"
    assert one("/attributes['state']", record).logical_path() == "/attributes['state']"
    assert one("/'a b'", {"a b": 1}, None).logical_path() == "/'a b'"
    assert one("/", record).logical_path() == ""
    assert one("/name", record, None).type is None
    with pytest.raises(RecordPathError, match="not in the record, so it has no path"):
        one("concat(/name)", record).logical_path()


def test_tuples_are_read_but_not_written():
    record = {"t": (1, 2, 3)}
    assert values("/t[*]", record, None) == [1, 2, 3]
    with pytest.raises(RecordPathError, match="tuple is read only"):
        one("/t[0]", record, None).update(5)


def test_schema_shapes_are_kept_per_schema_object(record):
    first = one("/mainAccount/address", record).shape
    assert one("/mainAccount/address", record).shape is first


# --- compiling ---

def test_compile_is_cached_and_reports_absolute():
    assert compile_path("/a/b") is compile_path("/a/b")
    assert compile_path("/a").is_absolute and compile_path("//a").is_absolute and compile_path("[0]").is_absolute
    assert not compile_path("concat(/a)").is_absolute and not compile_path("/a = 1").is_absolute
    assert not compile_path("'x'").is_absolute and repr(compile_path("/a")) == "RecordPath('/a')"


@pytest.mark.parametrize("text, message, position", [
    ("", "the path is empty", 0),
    ("/a[", "expected a path, a string, a number or a function, found the end of the path", 3),
    ("/a]", "expected the end of the path (or an operator), found ']'", 2),
    ("/a/", "expected a field name, '*', '.' or '..' after '/', found the end of the path", 3),
    ("//", "expected a field name or '*' after '//', found the end of the path", 2),
    ("/a/'b", "the string opened here has no closing '", 3),
    ("/a#b[1 2]", "expected an operator or ']', found '2'", 7),
    ("/a[-]", "unexpected character '-'", 3),
    ("name", "unexpected name 'name': a field is written /name", 0),
    ("/a = ", "expected a path, a string, a number or a function, found the end of the path", 5),
    ("/a[./b]", "a predicate [...] must be a comparison", 3),
    ("/name[substring(., 1, 2)]", "a predicate [...] must be a comparison", 6),
    ("foo(/a)", "unknown function 'foo'", 0),
    ("/a[substrng(., 1, 2) = 'x']", "unknown function 'substrng': did you mean 'substring'?", 3),
    ("substring(/a, 1)", "substring takes 3 arguments, but 2 were given", 0),
    ("concat(/a, toUpperCase())", "toUpperCase takes 1 argument, but 0 were given", 11),
    ("padLeft(/a)", "padLeft takes 2 to 3 arguments, but 1 was given", 0),
    ("join(',')", "join takes at least 2 arguments, but 1 was given", 0),
    ("mapOf('firstName', /firstName, 'lastName')", "mapOf takes pairs of arguments", 0),
    ("recordOf('a')", "recordOf takes pairs of arguments", 0),
    ("not(/a)", "not takes a condition", 4),
    ("/a[matchesRegex(., '(')]", "invalid regular expression '(': missing ), unterminated subpattern "
                                 "(pattern index 0)", 19),
    ("replaceRegex(/a, '(x)', '$2')", "invalid replacement: no group 2", 24),
    ("hash(/a, 'NOT_A_ALGO')", "unknown hash algorithm 'NOT_A_ALGO' (one of MD5, SHA, SHA-1", 9),
    ("toString(/a, 'NOT A REAL CHARSET')", "unknown character set 'NOT A REAL CHARSET'", 13),
    ("format(/a, 'yyyy', 'Mars/Olympus')", "unknown time zone 'Mars/Olympus'", 19),
    ("/a[99999999999999999999]", "the number 99999999999999999999 is out of range", 3),
    ("/a\t'b\tc'", "a line break or tab inside a string must be written", 5),
])
def test_bad_paths_name_the_mistake_and_its_position(text, message, position):
    with pytest.raises(RecordPathError) as caught:
        compile_path(text)
    error = caught.value
    assert message in error.message and error.position == position and error.text == text
    assert str(error) == (f"{error.message} at position {position} in '{text}'" if text else error.message)


def test_error_quotes_a_long_path_around_the_mistake_and_pickles():
    text = "concat(" + ", ".join(["/a"] * 200) + ", unknown(1))"
    with pytest.raises(RecordPathError) as caught:
        compile_path(text)
    shown = str(caught.value)
    assert shown.endswith(", /a, unknown(1))'") and "in '..." in shown and len(shown) < len(caught.value.message) + 200
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.message, again.position, again.text) == (caught.value.message, caught.value.position, text)


def test_evaluation_errors_name_the_path_and_the_function(record):
    with pytest.raises(RecordPathError) as caught:
        compile_path("concat('x', divide(2, 0))").evaluate(record)
    assert str(caught.value) == ("Division by zero in RecordPath divide function at position 12 in "
                                 "'concat('x', divide(2, 0))'")


def test_compiled_paths_pickle_as_their_text(record):
    path = compile_path("/name[startsWith(., 'J')][not(. = 'x')]/.")
    again = pickle.loads(pickle.dumps(path))
    assert again.text == path.text and [fv.value for fv in again.evaluate(record)] == ["John Doe"]
    trimmed = pickle.loads(pickle.dumps(compile_path("trim(/name)")))
    assert trimmed.evaluate({"name": " x "})[0].value == "x"


def test_logical_paths_of_selected_elements():
    """NiFi's TestFieldValueLogicalPathBuilder: the path of each element a path selected."""
    record = {"mapRecord": {"intArray": [1, 2, 3]},
              "mapRecordArray": [{"intArray": [2, 1]}, {"intArray": [3]}, {"intArray": [4]}, {"intArray": [5, 0]}]}
    assert [fv.logical_path() for fv in evaluate("//intArray[0..-1][. = 1]", record, None)] == \
        ["/mapRecord/intArray[0]", "/mapRecordArray[0]/intArray[1]"]
    assert [fv.logical_path() for fv in evaluate("/mapRecordArray[0..-1]/intArray[0..-1][. > 1]", record, None)] == \
        ["/mapRecordArray[0]/intArray[0]", "/mapRecordArray[1]/intArray[0]", "/mapRecordArray[2]/intArray[0]",
         "/mapRecordArray[3]/intArray[0]"]


def test_field_value_repr():
    assert repr(FieldValue(1, "a", None, None, 1, "a")) == "FieldValue('a', 1)"
