"""The RecordPath language's standalone and math functions (NiFi's TestRecordPath,
StandaloneFunctions and MathFunctions, and the tables of NiFi's RecordPath guide)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import time
import uuid

import pyarrow as pa
import pytest

from flowactors.sdk.record_path import RecordPathError, compile_path
from tests.record_path_example import SCHEMA, evaluate, example, one, reduced, value, values

UTC = datetime.timezone.utc


@pytest.fixture
def record() -> dict:
    return example()


@pytest.fixture
def phoenix(monkeypatch):
    """The machine's time zone is America/Phoenix (UTC-7, no daylight saving), as in NiFi's tests."""
    monkeypatch.setenv("TZ", "America/Phoenix")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def error_of(path: str, record: dict) -> str:
    with pytest.raises(RecordPathError) as caught:
        evaluate(path, record)
    return caught.value.message


# --- functions as paths ---

def test_functions_as_paths_chained_and_in_predicates(record):
    assert value("substringBefore(/name, ' ')", record) == "John"
    assert value("substringAfter(substringBefore(/name, 'n'), 'J')", record) == "oh"
    fv = one("/name[substring(., 1, 2) = 'o']", record)
    assert fv.value == "John Doe" and fv.parent_record is record


def test_functions_take_the_root_record(record):
    small, schema = reduced(record, "id", "name", "missing")
    assert value("escapeJson(/)", small, schema) == '{"id":48,"name":"John Doe","missing":null}'
    assert value('mapOf("copy",/)', small, schema) == {"copy": "{id=48, name=John Doe, missing=null}"}


def test_array_of(record):
    assert value("arrayOf( 'a', 'b', 'c' )", record) == ["a", "b", "c"]
    assert value("arrayOf( /friends[*], 'Junior' )", record) == ["John", "Jane", "Jacob", "Judy", "Junior"]
    appended = value("arrayOf( /accounts[*], recordOf('id', '5555', 'balance', '123.45') )", record)
    assert len(appended) == 3 and appended[2] == {"id": "5555", "balance": "123.45"}
    prepended = value("arrayOf( recordOf('id', '5555', 'balance', '123.45'), /accounts[*] )", record)
    assert len(prepended) == 3 and prepended[0] == {"id": "5555", "balance": "123.45"}
    several = value("arrayOf( /accounts[*], recordOf('id', '5555', 'balance', '123.45'), /accounts[0] )", record)
    assert len(several) == 4 and several[0] is several[3] is record["accounts"][0]
    parsed = value("arrayOf( /accounts[*], unescapeJson('{\"id\": 5555, \"balance\": 123.45}', 'true') )", record)
    assert parsed[2] == {"id": 5555, "balance": 123.45}
    assert evaluate("arrayOf(/nothing[*])", record) == []


def test_array_of_type(record):
    assert one("arrayOf(/friends[*], 'Junior')", record).type == pa.list_(pa.string())
    assert one("arrayOf(/accounts[*])", record).type == pa.list_(SCHEMA.field("accounts").type.value_type)
    assert one("arrayOf(/id, 'x')", record).type is None   # no type they share


def test_anchored(record):
    assert value("anchored(/mainAccount, concat(/id, '->', /balance))", record) == "1->123.45"
    assert values("anchored(/accounts, concat(/id, '->', /balance))", record) == ["6->10000.0", "9->48.02"]
    inner = one("anchored(/mainAccount, /address/city)", record)
    assert inner.type == pa.string() and inner.parent_record is record["mainAccount"]["address"]
    assert evaluate("anchored(/name, /x)", record) == []


def test_base64(record):
    record["bytes"] = base64.b64encode(b"My bytes")
    assert value("base64Decode(/bytes)", record) == b"My bytes"
    record["name"] = base64.b64encode("My string".encode()).decode()
    assert value("base64Decode(/name)", record) == "My string"
    record["bytes"] = b"My bytes"
    assert value("base64Encode(/bytes)", record) == base64.b64encode(b"My bytes")
    record["name"] = "My string"
    assert value("base64Encode(/name)", record) == base64.b64encode(b"My string").decode()
    record["name"] = "Sm9obg"   # padding is optional, as Java's decoder takes it
    assert value("base64Decode(/name)", record) == "John"
    assert error_of("base64Encode(/id)", record).startswith("Argument supplied to base64Encode must be a String or byte[]")
    record["name"] = "not base64!"
    assert "is not Base64" in error_of("base64Decode(/name)", record)


def test_coalesce(record):
    record.update(name=None, firstName=None, lastName="Eve")
    assert value("coalesce(/name, /firstName, /lastName)", record) == "Eve"
    record.update(name="Alice", firstName="Bob")
    assert value("coalesce(/name, /firstName, /lastName)", record) == "Alice"
    record.update(name=None, firstName=None, lastName=None)
    assert evaluate("coalesce(/name, /firstName, /lastName)", record) == []
    record["firstName"] = "other"
    assert value("coalesce(/name, 'default', /firstName)", record) == "default"
    assert value("coalesce('single')", record) == "single"
    assert value("coalesce(" + "/missing, " * 1000 + "'multiple')", record) == "multiple"


def test_concat(record):
    assert value("concat(/firstName, /attributes['state'])", record) == "JohnNY"
    assert value("concat(/id, /mainAccount/balance)", record) == "48123.45"
    assert value("concat(/firstName, /missing)", record) == "Johnnull"
    assert value("concat('Hello NiFi', ' ', 2)", record) == "Hello NiFi 2"
    assert value("concat(/friends[*])", record) == "JohnJaneJacobJudy"
    assert value("concat(/friends)", record) == "[John, Jane, Jacob, Judy]"
    concatenated = one("concat(/name)", record)
    assert concatenated.name == "concat" and concatenated.type == pa.string() and concatenated.parent is None


def test_count(record):
    assert value("count(/attributes[*])", record) == 2
    assert value("count(/friends[0, 1, 3])", record) == 3
    assert value("count(/*[fieldName(.) = 'bytes'])", record) == 1
    for name in ("id", "name", "missing", "attributes", "friends", "mainAccount"):
        assert value(f"count(/{name})", record) == 1
    assert value("count('hello')", record) == 1 and value("count(56)", record) == 1
    assert one("count(/id)", record).type == pa.int64()
    assert values("/id[count(/friends[*]) = 4]", record) == [48]


def test_escape_json(record):
    assert value("escapeJson(/name)", record) == '"John Doe"'
    assert value("escapeJson(/id)", record) == "48"
    assert value("escapeJson(/mainAccount/balance)", record) == "123.45"
    assert value("escapeJson(/numbers)", record) == "[0,1,2,3,4,5,6,7,8,9]"
    assert value("escapeJson(/friends)", record) == '["John","Jane","Jacob","Judy"]'
    assert value("escapeJson(/attributes)", record) == '{"city":"New York","state":"NY"}'
    assert value("escapeJson(/mainAccount)", record) == \
        '{"id":1,"balance":123.45,"address":{"city":"Boston","state":"Massachusetts"}}'
    small, schema = reduced(record, "id", "attributes", "mainAccount", "numbers")
    assert value("escapeJson(/)", small, schema) == (
        '{"id":48,"attributes":{"city":"New York","state":"NY"},'
        '"mainAccount":{"id":1,"balance":123.45,"address":{"city":"Boston","state":"Massachusetts"}},'
        '"numbers":[0,1,2,3,4,5,6,7,8,9]}')
    record["date"] = {"at": datetime.date(2026, 1, 2), "raw": b"\x00", "id": uuid.UUID(int=1)}
    assert value("escapeJson(/date)", record, None) == \
        '{"at":"2026-01-02","raw":"AA==","id":"00000000-0000-0000-0000-000000000001"}'
    record["date"] = float("nan")
    assert "Unable to serialise Record Path value as JSON String" in error_of("escapeJson(/date)", record)


def test_field_name(record):
    assert value("fieldName(/id)", record) == "id"
    assert value("fieldName(/missing)", record) == "missing"
    assert evaluate("fieldName(/name[/id != /id])", record) == []
    assert values("fieldName(/mainAccount/*)", record) == ["id", "balance", "address"]
    assert value("fieldName(concat('enate'))", record) == "concat"
    assert error_of("fieldName('whoops')", record) == "fieldName: the literal 'whoops' has no field name"


def test_format(record, phoenix):
    at = datetime.datetime(2017, 10, 20, 12, 30, 45, tzinfo=UTC)
    for stored in (int(at.timestamp() * 1000), at, at.replace(tzinfo=None)):
        record["id"] = stored
        formatted = one("format(/id, 'yyyy-MM-dd')", record, None)
        assert formatted.value == "2017-10-20" and formatted.type == pa.string()
        assert value("format(/id, \"yyyy-MM-dd'T'HH:mm:ss'Z'\", 'GMT')", record, None) == "2017-10-20T12:30:45Z"
        assert value("format(/id, 'HH:mm')", record, None) == "05:30"   # the machine's zone
    record["name"] = "GMT"
    assert value("format(/id, \"yyyy-MM-dd'T'HH:mm:ss'Z'\", /name)", record, None) == "2017-10-20T12:30:45Z"
    record["id"], record["name"] = datetime.date(2024, 8, 18), "yyyy-MM-dd"
    assert value("format(/id, /name)", record, None) == "2024-08-18"
    assert value("format(/id, 'yyyy-MM-dd HH:mm', 'Asia/Tokyo')", record, None) == "2024-08-18 00:00"
    assert value("format(0, 'yyyy-MM-dd', 'GMT')", record) == "1970-01-01"


def test_format_leaves_what_it_cannot_format(record):
    record["id"] = datetime.date(2024, 8, 18)
    unchanged = one("format(/id, 'INVALID')", record)
    assert unchanged.value == datetime.date(2024, 8, 18) and unchanged.type == pa.int32()
    for name in ("date", "attributes", "mainAccount", "numbers", "bytes"):
        fv = one(f"format(/{name}, 'yyyy-MM-dd')", record)
        assert fv.value == record[name] and fv.type == SCHEMA.field(name).type
    assert value("format(/id, 'yyyy', '')", record) == datetime.date(2024, 8, 18)


@pytest.mark.parametrize("algorithm, digest", [
    ("SHA-512", "1fcb45d41a91df3139cb682a7895cf39636bab30d7f464943ca4f2287f72c06f4c34b10d203b26ccca06e9051c02425265730"
                "2dd8ad3b2086c6bfd9bd34fa407"),
    ("MD5", "4c2a904bafba06591225113ad17b5cec"),
    ("SHA-384", "d0e24ff9f82e2a6b35409aec172e64b363f2dd26d8881d19f63214d5552357a40e32ac874a587d3fcf43ec86299eb001"),
    ("SHA-224", "20b058bc065abdbbd674123ed539286fa2765589424c38cd9e27b748"),
    ("SHA-256", "6cea57c2fb6cbc2a40411135005760f241fffc3e5e67ab99882726431037f908"),
    ("SHA", "ae6e4d1209f17b460503904fad297b31e9cf6362"),
])
def test_hash(record, algorithm, digest):
    assert value(f"hash(/name, '{algorithm}')", record) == digest


def test_hash_algorithm_by_reference_and_unknown(record):
    record["name"] = "MD5"
    assert value("hash(/name, /name)", record) == "7f138a09169b250e9dcb378140907378"
    record["firstName"] = "MD2"   # not offered (NiFi has it)
    assert "hash: unknown hash algorithm 'MD2'" in error_of("hash(/name, /firstName)", record)
    with pytest.raises(RecordPathError, match="unknown hash algorithm 'NOT_A_ALGO'"):
        compile_path("hash(/name, 'NOT_A_ALGO')")
    assert value("hash(/name, /missing)", record) == "MD5"   # no algorithm: unchanged


def test_join(record):
    assert value("join(', ', /firstName, /lastName, /name)", record) == "John, Doe, John Doe"
    assert value("join('---', /name)", record) == "John Doe"
    assert value("join(' ', 'Nyan', 'Cat')", record) == "Nyan Cat"
    assert value("join(' ', /firstName, /friends[1..2], /lastName)", record) == "John Jane Jacob Doe"
    assert value("join('-', /friends)", record) == "John-Jane-Jacob-Judy"   # an array's elements each
    assert value("join(/missing, /firstName, /missing)", record) == "Johnnull"


def test_map_of(record):
    fv = one("mapOf('id', /id, 'fullName', /name, 'money', /mainAccount/balance, 'nullStringLiteral', /missing)", record)
    assert fv.value == {"id": "48", "fullName": "John Doe", "money": "123.45", "nullStringLiteral": "null"}
    assert fv.type == pa.map_(pa.string(), pa.string())
    assert error_of("mapOf('a', /friends[9])", record) == "mapOf: argument 2 selects no value"


@pytest.mark.parametrize("function, left", [("padLeft", True), ("padRight", False)])
def test_padding(record, function, left):
    def padded(pad: str, text: str = "John Doe") -> str:
        return pad + text if left else text + pad

    assert value(f"{function}(/name, 11)", record) == padded("___")
    assert value(f"{function}(/name, 10, '@')", record) == padded("@@")
    assert value(f"{function}(/name, 11, 'abc')", record) == padded("abc")
    assert value(f"{function}(/name, 9, 'abc')", record) == padded("a")
    assert value(f"{function}(/name, 13, 'abc')", record) == padded("abcab")
    assert value(f"{function}(/lastName, 7, /firstName)", record) == padded("John", "Doe")
    assert value(f"{function}(/name, 11, '')", record) == padded("___")
    assert value(f"{function}(/name, 8)", record) == "John Doe"
    assert value(f"{function}(/name, 3)", record) == "John Doe"
    assert value(f"{function}(/missing, 10)", record) is None
    assert value(f"{function}(/name, 'x')", record) == ""
    assert "would make 100,000,000 characters" in error_of(f"{function}(/name, 100000000)", record)


def test_record_of(record):
    made = one("recordOf('mappedLong', /id, 'mappedString', /name)", record)
    assert made.value == {"mappedLong": 48, "mappedString": "John Doe"}
    assert made.type == pa.struct([("mappedLong", pa.int32()), ("mappedString", pa.string())])
    for source in ("attributes", "bytes", "mainAccount"):
        fv = one(f"recordOf('mapped', /{source})", record)
        assert fv.value == {"mapped": record[source]} and fv.type.field("mapped").type == SCHEMA.field(source).type
    missing = one("recordOf('missingValue', /missing, 'nonExisting', /nonExistingField)", record)
    assert missing.value == {"missingValue": None, "nonExisting": None}
    assert missing.type == pa.struct([("missingValue", pa.string()), ("nonExisting", pa.null())])
    named = one("recordOf(/firstName, /lastName)", record)
    assert named.value == {"John": "Doe"} and named.type == pa.struct([("John", pa.string())])
    literal = one("recordOf('aNumber', 2012, 'aString', 'aValue')", record)
    assert literal.value == {"aNumber": 2012, "aString": "aValue"}
    assert literal.type == pa.struct([("aNumber", pa.int64()), ("aString", pa.string())])


def test_replace(record):
    assert value("replace(/name, 'ohn', 'ane')", record) == "Jane Doe"
    assert value("replace(/name, 'o', 'X')", record) == "JXhn DXe"
    assert value("replace(/name, 'nomatch', 'X')", record) == "John Doe"
    assert value("replace(/name, 'o', /missing)", record) == "John Doe"


def test_replace_null(record):
    assert value("replaceNull(/missing, 14)", record) == 14
    assert value("replaceNull(/firstName, 17)", record) == "John"
    replaced = one("replaceNull(/missing, /id)", record)
    assert replaced.value == 48 and replaced.type == pa.int32() and replaced.name == "missing"
    assert value("replaceNull(/missing, /nothing)", record) is None


@pytest.mark.parametrize("path, expected", [
    ("replaceRegex(/name, 'ohn', 'ane')", "Jane Doe"), ("replaceRegex(/name, 'o', 'X')", "JXhn DXe"),
    ("replaceRegex(/name, 'nomatch', 'X')", "John Doe"), ("replaceRegex(/name, '[aeiou]', 'x')", "Jxhn Dxx"),
    ("replaceRegex(/name, '\\w', 'x')", "xxxx xxx"), ("replaceRegex(/name, 'J|D', 'X')", "Xohn Xoe"),
    ("replaceRegex(/name, '([JD])', '$1x')", "Jxohn Dxoe"),
    ("replaceRegex(/name, '(?<hello>[JD])', '${hello}x')", "Jxohn Dxoe"),
    ("replaceRegex(/name, '(J)|(D)', '[$2]')", "[]ohn [D]oe"),
    ("replaceRegex(/name, 'o', '\\$')", "J$hn D$e"),
    ("replaceRegex('John Doe', 'John', 'Jane')", "Jane Doe"), ("replaceRegex(/name, 'oh', /id)", "J48n Doe"),
])
def test_replace_regex(record, path, expected):
    assert value(path, record) == expected


def test_replace_regex_anchors_dots_and_references(record):
    record["name"] = "Joe"
    assert value("replaceRegex(/name, '.', 'X')", record) == "XXX"
    record["name"] = " \n\r\t"
    assert value("replaceRegex(/name, '.', 'W')", record) == "W\n\rW"
    record["name"] = "Bob Bobby"
    assert value("replaceRegex(/name, '^Bob', 'Hello')", record) == "Hello Bobby"
    record["name"] = "Bobby Bob"
    assert value("replaceRegex(/name, 'Bob$', 'Bobson')", record) == "Bobby Bobson"
    record["name"], record["firstName"] = "John Doe", "ohn"
    assert value("replaceRegex(/name, /firstName, 'ane')", record) == "Jane Doe"
    record["firstName"] = "(o"
    assert "replaceRegex: invalid regular expression '(o'" in error_of("replaceRegex(/name, /firstName, 'x')", record)


def test_replace_regex_escaped_characters(record):
    record["name"] = ".^$*+?()[{\\|"
    for escaped, expected in ((".", "x^$*+?()[{\\|"), ("^", ".x$*+?()[{\\|"), ("$", ".^x*+?()[{\\|"),
                              ("*", ".^$x+?()[{\\|"), ("+", ".^$*x?()[{\\|"), ("?", ".^$*+x()[{\\|"),
                              ("(", ".^$*+?x)[{\\|"), (")", ".^$*+?(x[{\\|"), ("[", ".^$*+?()x{\\|"),
                              ("{", ".^$*+?()[x\\|"), ("\\", ".^$*+?()[{x|"), ("|", ".^$*+?()[{\\x")):
        assert value(f"replaceRegex(/name, '\\{escaped}', 'x')", record) == expected, escaped


def test_substring(record):
    assert value("substring(/name, 2, 6)", record) == "hn D"
    assert value("substring(/name, 4, 10000)", record) == " Doe"
    assert value("substring(/name, -7, -3)", record) == "hn D"
    assert value("substring(/name, 8, 10)", record) == ""
    assert value("substring(/name, 3, 3)", record) == ""
    assert evaluate("substring(/missing, 1, 2)", record) == []
    assert value("substring('Bob Bobby Bobson', 4, 9)", record) == "Bobby"
    assert value("substring(/name, 'x', 2)", record) == ""
    record["id"], record["mainAccount"]["id"] = 2, 6
    assert value("substring(/name, /id, /mainAccount/id)", record) == "hn D"
    assert value("substring(/name, '2', '6')", record) == "hn D"


@pytest.mark.parametrize("function, cases", [
    ("substringAfter", [("'o'", "hn Doe"), ("'x'", "John Doe"), ("''", "John Doe"), ("'e'", ""), ("'oh'", "n Doe"),
                        ("/firstName", " Doe")]),
    ("substringAfterLast", [("'o'", "e"), ("'x'", "John Doe"), ("''", "John Doe"), ("'e'", ""), ("'oh'", "n Doe"),
                            ("/firstName", " Doe")]),
    ("substringBefore", [("' '", "John"), ("'x'", "John Doe"), ("''", "John Doe"), ("'J'", ""), ("'Do'", "John "),
                         ("/lastName", "John ")]),
    ("substringBeforeLast", [("'o'", "John D"), ("'x'", "John Doe"), ("''", "John Doe"), ("'J'", ""),
                             ("'Do'", "John "), ("/lastName", "John ")]),
])
def test_substring_around(record, function, cases):
    for search, expected in cases:
        assert value(f"{function}(/name, {search})", record) == expected, search
    literal = {"substringAfter": " Bobson", "substringAfterLast": " Bobson", "substringBefore": "Bob Bobb",
               "substringBeforeLast": "Bob Bobb"}[function]
    assert value(f"{function}('Bob Bobby Bobson', 'y')", record) == literal


def test_unchanged_value_is_the_field_itself(record):
    fv = one("substringAfter(/name, 'x')", record)
    assert fv.update("changed") and record["name"] == "changed"


def test_to_bytes_and_to_string(record):
    record["name"] = "Hello World!"
    encoded = one("toBytes(/name, 'UTF-16LE')", record)
    assert encoded.value == "Hello World!".encode("utf-16-le") and encoded.type == pa.binary()
    record["firstName"] = "UTF-8"
    assert value("toBytes(/name, /firstName)", record) == b"Hello World!"
    assert value("toBytes('Hello', 'UTF-8')", record) == b"Hello"
    assert value("toBytes('A', 'UTF-16')", record) == b"\xfe\xff\x00A"   # Java: big-endian with a mark
    assert "Argument supplied to toBytes must be a String" in error_of("toBytes(/id, 'UTF-8')", record)
    record["bytes"] = b"\xfe\xff" + "Hello World!".encode("utf-16-be")
    decoded = one("toString(/bytes, 'UTF-16')", record)
    assert decoded.value == "Hello World!" and decoded.type == pa.string()
    record["bytes"], record["name"] = b"Hello World!", "UTF-8"
    assert value("toString(/bytes, /name)", record) == "Hello World!"
    assert value("toString('literalValue', 'UTF-8')", record) == "literalValue"
    assert value("toString(/mainAccount/balance, 'UTF-8')", record) == "123.45"
    record["bytes"] = list(b"Hi")
    assert value("toString(/bytes, 'US-ASCII')", record) == "Hi"   # an array of bytes
    with pytest.raises(RecordPathError, match="unknown character set 'NOT A REAL CHARSET'"):
        compile_path("toString(/bytes, 'NOT A REAL CHARSET')")
    record["name"] = "NOPE"
    assert "toBytes: unknown character set 'NOPE'" in error_of("toBytes('x', /name)", record)


def test_to_date(record, phoenix):
    record["date"] = "2017-10-20T12:30:45"
    parsed = one("toDate(/date, \"yyyy-MM-dd'T'HH:mm:ss\")", record)
    assert parsed.value == datetime.datetime(2017, 10, 20, 19, 30, 45, tzinfo=UTC)
    assert parsed.type == pa.timestamp("ms", tz="UTC") and parsed.name == "date"
    assert value("toDate(/date, \"yyyy-MM-dd'T'HH:mm:ss\", 'GMT+8:00')", record) == \
        datetime.datetime(2017, 10, 20, 4, 30, 45, tzinfo=UTC)
    record["name"] = "yyyy-MM-dd'T'HH:mm:ss"
    assert value("toDate(/date, /name)", record) == datetime.datetime(2017, 10, 20, 19, 30, 45, tzinfo=UTC)
    record["name"] = "GMT+8:00"
    assert value("toDate(/date, \"yyyy-MM-dd'T'HH:mm:ss\", /name)", record) == \
        datetime.datetime(2017, 10, 20, 4, 30, 45, tzinfo=UTC)
    assert value("toDate('2017-10-20', 'yyyy-MM-dd')", record) == datetime.datetime(2017, 10, 20, 7, tzinfo=UTC)
    assert value("toDate('2017-10-20 01:02:03.456', 'yyyy-MM-dd HH:mm:ss.SSS', 'UTC')", record) == \
        datetime.datetime(2017, 10, 20, 1, 2, 3, 456000, tzinfo=UTC)
    record["name"] = "Nowhere/Land"
    assert "toDate: unknown time zone 'Nowhere/Land'" in error_of("toDate(/date, 'yyyy', /name)", record)


def test_to_date_leaves_what_it_cannot_read(record):
    assert value("toDate(/date, 'yyyy-MM-dd')", record) == "2017-10-20T11:00:00Z"
    assert value("toDate(/date, 'INVALID')", record) == "2017-10-20T11:00:00Z"
    for name in ("id", "attributes", "mainAccount", "numbers", "bytes"):
        assert value(f"toDate(/{name}, 'yyyy-MM-dd')", record) == record[name]


def test_format_of_to_date(record):
    record["date"] = "2017-10-20T00:00:00Z"
    assert value("format( toDate(/date, \"yyyy-MM-dd'T'HH:mm:ss'Z'\", 'UTC'), 'yyyy-MM-dd', 'UTC')", record) == \
        "2017-10-20"


@pytest.mark.parametrize("function, change", [("toLowerCase", str.lower), ("toUpperCase", str.upper)])
def test_case(record, function, change):
    assert value(f"{function}(/name)", record) == change("John Doe")
    record["name"] = change("already")
    assert value(f"{function}(/name)", record) == change("already")
    assert value(f"{function}(/missing)", record) == ""
    assert value(f"{function}('UPPER lower')", record) == change("UPPER lower")
    record["friends"] = ["John Doe", "Jane Smith"]
    assert values(f"{function}(/friends[*])", record) == [change("John Doe"), change("Jane Smith")]


def test_trim(record):
    for written in (" \n\r\tJohn", "John \n\r\t"):
        record["name"] = written
        assert value("trim(/name)", record) == "John"
    record["name"] = " \n\r\tJohn Smith \n\r\t"
    assert value("trim(/name)", record) == "John Smith"
    assert value("trim(/missing)", record) == ""
    assert value("trim(' Bonjour  ')", record) == "Bonjour"
    record["friends"] = ["   John Smith     ", "   Jane Smith     "]
    assert values("trim(/friends[*])", record) == ["John Smith", "Jane Smith"]


def test_unescape_json(record):
    record["name"] = '"John Doe"'
    assert value("unescapeJson(/name)", record) == "John Doe"
    record["id"] = "48"
    assert value("unescapeJson(/id)", record, None) == 48
    record["id"] = "123.45"
    assert value("unescapeJson(/id)", record, None) == 123.45
    record["numbers"] = "[0,1,2,3,4,5,6,7,8,9]"
    assert value("unescapeJson(/numbers)", record, None) == list(range(10))
    account = '{"id":1,"balance":2.3,"address":{"city":"New York","state":"NY"}}'
    record["name"] = account
    expected = {"id": 1, "balance": 2.3, "address": {"city": "New York", "state": "NY"}}
    for path in ("unescapeJson(/name, 'false')", "unescapeJson(/name)", "unescapeJson(/name, 'true')",
                 "unescapeJson(/name, 'true', 'true')"):
        assert value(path, record) == expected
    record["name"] = '{"id":1,"balance":2.3,"nested":[{"city":"New York","state":"NY"}]}'
    assert value("unescapeJson(/name, 'true', 'false')", record)["nested"] == [{"city": "New York", "state": "NY"}]


def test_unescape_json_refuses(record):
    for name in ("id", "attributes", "mainAccount", "numbers", "bytes"):
        assert error_of(f"unescapeJson(/{name})", record) == "Argument supplied to unescapeJson must be a String"
    record["name"] = "<xml>value</xml>"
    assert error_of("unescapeJson(/name)", record).startswith(
        "Unable to deserialize JSON String into Record Path value: Expecting value")


def _uuid5(name: str, namespace: uuid.UUID) -> str:
    """Version 5 UUID as RFC 4122 makes it: SHA-1 of the namespace's bytes and the name's."""
    digest = bytearray(hashlib.sha1(namespace.bytes + name.encode()).digest()[:16])
    digest[6] = digest[6] & 0x0F | 0x50
    digest[8] = digest[8] & 0x3F | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


def test_uuid5(record):
    record["firstName"] = "testing NiFi functionality"
    assert value("uuid5(/firstName)", record) == _uuid5("testing NiFi functionality", uuid.UUID(int=0))
    namespace = uuid.UUID("67eb2232-f06e-406a-b934-e17f5fa31ae4")
    record["lastName"] = str(namespace)
    assert value("uuid5(/firstName, /lastName)", record) == _uuid5("testing NiFi functionality", namespace)
    assert value("uuid5(/missing)", record) == _uuid5("", uuid.UUID(int=0))
    assert "uuid5: the namespace 'John Doe' is not a UUID" in error_of("uuid5(/firstName, /name)", record)


# --- math ---

@pytest.mark.parametrize("path, arrow_type, result", [
    ("multiply(2, /bytes[0])", pa.int64(), 144), ("multiply('2.0', /bytes[0])", pa.float64(), 144.0),
    ("multiply(2, /shortNumber)", pa.int64(), 246), ("multiply('2.0', /shortNumber)", pa.float64(), 246.0),
    ("multiply(2, /longNumber)", pa.int64(), 2469135780246913578),
    ("multiply(2, /mainAccount/balance)", pa.float64(), 246.9),
    ("multiply('2.0', /longNumber)", pa.float64(), 2.4691357802469135e18),
    ("multiply('2.0', /floatNumber)", pa.float64(), 246.89999389648438),
    ("multiply(2, 2)", pa.int64(), 4), ("multiply(/id, 2)", pa.int64(), 96), ("multiply(2, /id)", pa.int64(), 96),
    ("multiply(/id, /id)", pa.int64(), 2304), ("multiply(/longNumber, /longNumber)", pa.int64(), -8736265215553819719),
    ("multiply('-1.0e308', /mainAccount/balance)", pa.float64(), float("-inf")),
    ("divide(3, 2)", pa.int64(), 1), ("divide(/id, 2)", pa.int64(), 24), ("divide(2, /id)", pa.int64(), 0),
    ("divide(/id, /id)", pa.int64(), 1), ("divide(-7, 2)", pa.int64(), -3),
    ("divide(-9223372036854775808, -1)", pa.int64(), -9223372036854775808),
    ("divide('1.0e300', '1.0e-300')", pa.float64(), float("inf")),
    ("add(3, 2)", pa.int64(), 5), ("add(/id, 2)", pa.int64(), 50), ("add(2, /id)", pa.int64(), 50),
    ("add(/id, /id)", pa.int64(), 96), ("add(9223372036854775807, 1)", pa.int64(), -9223372036854775808),
    ("add('1.7976931348623157E308', '1e292')", pa.float64(), float("inf")),
    ("subtract(3, 2)", pa.int64(), 1), ("subtract(/id, 2)", pa.int64(), 46), ("subtract(2, /id)", pa.int64(), -46),
    ("subtract(/id, /id)", pa.int64(), 0), ("subtract(9223372036854775807, -1)", pa.int64(), -9223372036854775808),
    ("subtract(-9223372036854775808, 1)", pa.int64(), 9223372036854775807),
    ("subtract('1.7976931348623157E308', '-1.0E308')", pa.float64(), float("inf")),
    ("subtract('-1.7976931348623157E308', '1e308')", pa.float64(), float("-inf")),
])
def test_arithmetic(record, path, arrow_type, result):
    fv = one(path, record)
    assert fv.type == arrow_type and fv.value == result and type(fv.value) is type(result)
    assert fv.name == path[:path.index("(")]


@pytest.mark.parametrize("function", ["add", "subtract", "multiply", "divide"])
def test_arithmetic_missing_operands(record, function):
    assert evaluate(f"{function}(/notAField, 0)", record) == []
    assert evaluate(f"{function}(0, /notAField)", record) == []
    assert error_of(f"{function}({function}(/notAField, 0), {function}(/notAField, 0))", record) == \
        f"{function} function requires a left-hand operand"
    assert error_of(f"{function}(0, {function}(/notAField, 0))", record) == \
        f"{function} function requires a right-hand operand"


def test_arithmetic_refuses_what_is_no_number(record):
    assert error_of("multiply(/numbers, 2)", record) == "Cannot coerce field 'numbers' to number"
    assert error_of("multiply(2, /firstName)", record) == "Cannot coerce field 'firstName' to number"
    assert error_of("multiply(2, 'hello')", record) == "Cannot coerce field '<Anonymous Inner Field>' to number"
    assert error_of("divide(2, 0)", record) == "Division by zero in RecordPath divide function"
    assert error_of("divide('2.0', 0)", record) == "Division by zero in RecordPath divide function"


def test_to_number(record):
    literal = one("toNumber('1e1')", record)
    assert literal.name == "toNumber" and literal.type == pa.float64() and literal.value == 10.0
    record["id"] = datetime.datetime(1970, 1, 1, tzinfo=UTC)
    epoch = one("toNumber(/id)", record)
    assert epoch.type == pa.int64() and epoch.value == 0
    record["id"] = 48
    number = one("toNumber(/id)", record)
    assert number.type == pa.int32() and number.value == 48 and number.name == "id"   # unchanged
    assert value("toNumber(/notAField)", record) is None
    assert error_of("toNumber(/firstName)", record) == "Cannot coerce field 'firstName' to number"
    assert error_of("toNumber(multiply(/notAField, 0))", record) == "toNumber function requires an operand"
    assert error_of("toNumber(/mainAccount)", record) == "Cannot coerce field 'mainAccount' to number"


# --- the guide's tables ---

GUIDE = {
    "name": "John Doe",
    "workAddress": {"number": "123", "street": "5th Avenue", "city": "New York", "state": "NY", "zip": "10020"},
    "homeAddress": {"number": "456", "street": "Grand St", "city": "Jersey City", "state": "NJ", "zip": "07304"},
    "details": {"position": "Dataflow Engineer", "preferredState": "NY", "employer": "", "vehicle": None,
                "phrase": "   "},
}


@pytest.mark.parametrize("path, expected", [
    ("substring( /name, 0, -1 )", "John Doe"), ("substring( /name, 0, -5 )", "John"),
    ("substring( /name, 1000, 1005 )", ""), ("substring( /name, 0, 1005)", "John Doe"),
    ("substring( /name, -50, -1)", ""),
    ("substringAfter( /name, ' ' )", "Doe"), ("substringAfter( /name, 'o' )", "hn Doe"),
    ("substringAfter( /name, '' )", "John Doe"), ("substringAfter( /name, 'xyz' )", "John Doe"),
    ("substringAfterLast( /name, ' ' )", "Doe"), ("substringAfterLast( /name, 'o' )", "e"),
    ("substringBefore( /name, ' ' )", "John"), ("substringBefore( /name, 'o' )", "J"),
    ("substringBeforeLast( /name, ' ' )", "John"), ("substringBeforeLast( /name, 'o' )", "John D"),
    ("replace( /name, 'o', 'x' )", "Jxhn Dxe"), ("replace( /name, 'o', 'xyz' )", "Jxyzhn Dxyze"),
    ("replace( /name, 'xyz', 'zyx' )", "John Doe"), ("replace( /name, 'Doe', /workAddress/city )", "John New York"),
    ("replaceRegex( /name, 'o', 'x' )", "Jxhn Dxe"), ("replaceRegex( /name, 'o', 'xyz' )", "Jxyzhn Dxyze"),
    ("replaceRegex( /name, 'xyz', 'zyx' )", "John Doe"),
    ("replaceRegex( /name, '\\s+.*', /workAddress/city )", "JohnNew York"),
    ("replaceRegex(/name, '([JD])', '$1x')", "Jxohn Dxoe"),
    ("replaceRegex(/name, '(?<hello>[JD])', '${hello}x')", "Jxohn Dxoe"),
    ("replaceNull( /details/vehicle, 'no vehicle' )", "no vehicle"), ("replaceNull( /name, 'default' )", "John Doe"),
    ("replaceNull( /details/vehicle, /name )", "John Doe"),
    ("concat( /name, ' lives in ',  /homeAddress/city )", "John Doe lives in Jersey City"),
    ("join(', ', /workAddress/* )", "123, 5th Avenue, New York, NY, 10020"),
    ("anchored(/homeAddress, /city)", "Jersey City"),
])
def test_guide_standalone_functions(path, expected):
    assert value(path, GUIDE, None) == expected


def test_guide_field_name_and_coalesce():
    assert values("fieldName(//city/..)", GUIDE, None) == ["workAddress", "homeAddress"]
    for record, expected in (({"id": None, "name": "John Doe"}, ["John Doe"]), ({"id": "1234", "name": None}, ["1234"]),
                             ({"id": None, "name": None}, []), ({"id": "null", "name": "John Doe"}, ["null"]),
                             ({"name": None}, []), ({"id": "1234", "name": "John Doe"}, ["1234"])):
        assert values("coalesce(/id, /name)", record, None) == expected
    assert values("coalesce(/name, /id)", {"id": "1234", "name": "John Doe"}, None) == ["John Doe"]


def test_guide_dates_and_encodings():
    event = {"name": "My Event", "eventDate": 1508457600000}
    assert value("format( /eventDate, \"yyyy-MM-dd'T'HH:mm:ss'Z'\", 'UTC')", event, None) == "2017-10-20T00:00:00Z"
    assert value("format( /eventDate, \"yyyy-MM-dd HH:mm:ss Z\", \"GMT+8:00\")", event, None) == \
        "2017-10-20 08:00:00 +0800"
    assert value("format( /eventDate, \"yyyy-MM-dd\", \"GMT+8:00\")", event, None) == "2017-10-20"
    person = {"name": "John"}
    assert value("base64Encode(/name)", person, None) == "Sm9obg=="
    assert value("base64Decode(/name)", {"name": "Sm9obg=="}, None) == "John"
    # the guide's digest is that of "john" (its record says "John")
    assert value("hash(/name, 'MD5')", {"name": "john"}, None) == "527bd5b5d689e2c32ae974c6229ff785"
    assert value("padLeft(/name, 15, '@')", {"name": "john smith"}, None) == "@@@@@john smith"
    assert value("padRight(/name, 15, '@')", {"name": "john smith"}, None) == "john smith@@@@@"
    assert value("trim(/name)", {"name": "    John Smith    "}, None) == "John Smith"
    assert value("toUpperCase(/name)", {"name": "john smith"}, None) == "JOHN SMITH"
    assert value("toLowerCase(/message)", {"message": "hEllO wORLd"}, None) == "hello world"


def test_guide_structures():
    elements = {"id": "1234", "elements": [{"name": "book", "color": "red"}, {"name": "computer", "color": "black"}]}
    assert value("count(/elements[*])", elements, None) == 2
    assert values("/id[ count(/elements[*]) = 2 ]", elements, None) == ["1234"]
    assert values("anchored(/elements, /name)", elements, None) == ["book", "computer"]
    assert values("anchored(/elements, concat(/name, ': ', /color))", elements, None) == ["book: red", "computer: black"]
    assert value("arrayOf(/elements[*], unescapeJson('{\"name\":\"phone\",\"color\":\"blue\"}'))", elements, None)[2] == \
        {"name": "phone", "color": "blue"}
    friends = {"name": "John Doe", "friends": ["Jane", "Jack", "Jill"]}
    assert value("arrayOf(/friends[*], 'Joe', 'Jim', 'Jeremy')", friends, None) == \
        ["Jane", "Jack", "Jill", "Joe", "Jim", "Jeremy"]
    assert value("arrayOf('good-bye', 'adios', 'au revoir')", friends, None) == ["good-bye", "adios", "au revoir"]
    snow = {"firstName": "John", "lastName": "Snow"}
    assert value('mapOf("firstName", /firstName, "lastName", /lastName)', snow, None) == snow
    alice = {"firstName": "Alice", "lastName": "Koopa", "age": 30, "hobbies": ["reading", "hiking", "coding"],
             "address": {"street": "123 Main St", "city": "Anytown", "state": "CA"}}
    assert value('recordOf("name", /firstName, "location", /address/city, "hobbies", /hobbies, /age, "years old")',
                 alice, None) == {"name": "Alice", "location": "Anytown", "hobbies": ["reading", "hiking", "coding"],
                                  "30": "years old"}
    assert value("escapeJson(/person)", {"person": {"name": "John", "age": 30}}, None) == '{"name":"John","age":30}'
    assert value("escapeJson(/person/age)", {"person": {"name": "John", "age": 30}}, None) == "30"


def test_guide_math():
    logs = {"flags": 7, "seq": 1024, "txns": 125000, "timestamp": 1768967368, "temp": 55.0, "load": 5.67,
            "timestampMillis": "1768967368000", "date": datetime.date(2026, 1, 21)}
    schema = pa.schema([("flags", pa.int8()), ("seq", pa.int16()), ("txns", pa.int32()), ("timestamp", pa.int64()),
                        ("temp", pa.float32()), ("load", pa.float64()), ("timestampMillis", pa.string()),
                        ("date", pa.date32())])
    for path, expected in (("toNumber(456)", 456), ("toNumber(/flags)", 7), ("toNumber(/load)", 5.67),
                           ("toNumber('7.89')", 7.89), ("toNumber(/timestampMillis)", 1768967368000),
                           ("toNumber(/date)", 1768953600000), ("add(2, 2)", 4), ("add('2.0', 2)", 4.0),
                           ("add(/flags, 2)", 9), ("add(2, /temp)", 57.0), ("subtract(2, /temp)", -53.0),
                           ("multiply(/flags, 2)", 14), ("multiply(2, /temp)", 110.0), ("divide(3, 2)", 1),
                           ("divide(3, '2.0')", 1.5), ("divide(/txns, /temp)", 2272.7272727272725),
                           ("divide(/timestampMillis, 300000)", 5896557)):
        assert value(path, logs, schema) == expected, path
    assert value("add(/load, /temp)", logs, schema) == pytest.approx(60.67)
    assert value("subtract(/load, /temp)", logs, schema) == pytest.approx(-49.33)
    assert value("multiply(/load, /temp)", logs, schema) == pytest.approx(311.85)
