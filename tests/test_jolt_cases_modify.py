"""Modify cases written for flowactors (orders / customers): the three modes and the function library.

Each case exercises a feature that one of Jolt's own Modify fixtures exercises (named in its
comment: ``jolt-core/src/test/resources/json/modifier/<name>.json``); the documents, specs and
expected outputs are ours, worked out by hand from Modifier's javadoc and its function library.
docs/jolt.md gives the measurement of Jolt's fixtures on this implementation. Results are compared
strictly: an integer and a float differ, lists keep their order.
"""

from __future__ import annotations

import copy
import json

import pytest

from flowactors.processors.jolt.modify import DEFAULT, DEFINE, OVERWRITE, Modify
from flowactors.processors.jolt.paths import JoltSpecError


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def modes(overwrite, default, define):
    return {OVERWRITE: overwrite, DEFAULT: default, DEFINE: define}


# (name, input, spec, expected per mode)
CASES = [
    # simple, mapLiteral: a literal written where the key is present, null or missing, per mode
    ("modes_on_present_null_missing", {"order": {"status": "paid", "note": None}},
     {"order": {"status": "new", "note": "-", "channel": "web"}},
     modes({"order": {"status": "new", "note": "-", "channel": "web"}},
           {"order": {"status": "paid", "note": "-", "channel": "web"}},
           {"order": {"status": "paid", "note": None, "channel": "web"}})),
    # mapLiteralWithMissingInput: a map the input lacks is made, in every mode
    ("map_made_where_missing", {"id": 1},
     {"shipping": {"method": "post", "days": 3}},
     modes(*[{"id": 1, "shipping": {"method": "post", "days": 3}}] * 3)),
    # mapLiteralWithNullInput: a null where the spec walks down: Overwrite and Default make the map, Define (the
    # key is there) leaves the null; literal keys are written before the * walks the keys
    ("map_over_null_literals_then_star", {"prices": None},
     {"prices": {"*": 0, "tea": 3, "cake": None}},
     modes({"prices": {"tea": 0, "cake": 0}},
           {"prices": {"tea": 3, "cake": 0}},
           {"prices": None})),
    # mapLiteralWithEmptyInput: the same over an empty map, which Define may write into
    ("map_over_empty_map", {"prices": {}},
     {"prices": {"*": 0, "tea": 3}},
     modes({"prices": {"tea": 0}}, {"prices": {"tea": 3}}, {"prices": {"tea": 3}})),
    # simpleMapRuntimeNull: a * under a null has no keys to walk, and makes nothing
    ("star_under_null", {"prices": None},
     {"prices": {"*": 0}},
     modes(*[{"prices": None}] * 3)),
    # arrayLiteral, arrayLiteralWithEmptyInput: [n] positions pad the list with nulls, then * walks every element
    ("list_positions_and_star", {"slots": ["a", None]},
     {"slots": {"[3]": "d", "*": "-"}},
     modes({"slots": ["-", "-", "-", "-"]},
           {"slots": ["a", "-", "-", "d"]},
           {"slots": ["a", None, "-", "d"]})),
    # arrayLiteralWithMissingInput, simpleMapNullToArray: [n] positions where there is no list make one
    ("list_made_where_missing", {},
     {"slots": {"[1]": "b"}},
     modes(*[{"slots": [None, "b"]}] * 3)),
    # simpleArray, arrayObject: * over a list of maps, a function of each element's value
    ("star_over_list_of_maps", {"lines": [{"sku": "tea", "qty": "2"}, {"sku": "cake"}]},
     {"lines": {"*": {"sku": "=toUpper", "qty": "=toInteger"}}},
     modes({"lines": [{"sku": "TEA", "qty": 2}, {"sku": "CAKE"}]},
           {"lines": [{"sku": "tea", "qty": "2"}, {"sku": "cake"}]},
           {"lines": [{"sku": "tea", "qty": "2"}, {"sku": "cake"}]})),
    # simpleLookup, complexLookup: @(n,path) copies a value of the input, counted from the key written
    ("lookups", {"order": {"subtotal": 40, "customer": {"id": "c1", "tier": "gold"}}},
     {"order": {"total": "@(1,subtotal)", "customerId": "@(1,customer.id)",
                "customer": {"label": "=concat(@(1,id), ':', @(2,subtotal))"}}},
     modes(*[{"order": {"subtotal": 40, "total": 40, "customerId": "c1",
                        "customer": {"id": "c1", "tier": "gold", "label": "c1:40"}}}] * 3)),
    # simpleArrayLookup, complexArrayLookup: @(1,[n]) reads another position of the same list
    ("list_lookups", {"steps": ["pack", "ship"]},
     {"steps": {"[2]": "=concat(@(1,[0]), '+', @(1,[1]))"}},
     modes(*[{"steps": ["pack", "ship", "pack+ship"]}] * 3)),
    # valueCheckSimpleMap, valueCheckSimpleMapNullInput: a key ending ? is written only where the input has it
    ("question_mark_keys", {"order": {"coupon": "x", "note": None}},
     {"order": {"coupon?": "=toUpper", "note?": "none", "gift?": False}},
     modes({"order": {"coupon": "X", "note": "none"}},
           {"order": {"coupon": "x", "note": "none"}},
           {"order": {"coupon": "x", "note": None}})),
    # valueCheckSimpleArray: ? on list positions
    ("question_mark_positions", {"slots": ["a"]},
     {"slots": {"[0]?": "A", "[2]?": "C"}},
     modes({"slots": ["A"]}, {"slots": ["a"]}, {"slots": ["a"]})),
    # simpleMapOpOverride: + ~ _ prefixes switch the mode for that key, whatever the Modify's own mode
    ("key_prefixes", {"a": "old", "b": None, "c": "old"},
     {"+a": "new", "~b": "new", "_c": "new", "_d": "new"},
     modes(*[{"a": "new", "b": "new", "c": "old", "d": "new"}] * 3)),
    # simpleArrayOpOverride: prefixes on list positions, inside and past the input list
    ("position_prefixes", {"slots": ["a", None, "c"]},
     {"slots": {"+[0]": "A", "~[1]": "B", "_[2]": "C", "_[4]": "E"}},
     modes(*[{"slots": ["A", "B", "c", None, "E"]}] * 3)),
    # testListOfFunction: a list of choices, the first with a result written
    ("list_of_choices", {"qty": "two", "ref": "ab-1", "gift": None},
     {"qty": ["=toInteger", 0], "ref": ["=toInteger", "=toUpper"], "gift": ["=notNull", False]},
     modes({"qty": 0, "ref": "AB-1", "gift": False},
           {"qty": "two", "ref": "ab-1", "gift": False},
           {"qty": "two", "ref": "ab-1", "gift": None})),
    # arrayElementAt: a function reading a list element, a null element written as null
    ("element_at", {"picks": ["tea", None, "cake"]},
     {"first": "=elementAt(0, @(1,picks))", "second": "=elementAt(1, @(1,picks))",
      "ninth": "=elementAt(9, @(1,picks))"},
     modes(*[{"picks": ["tea", None, "cake"], "first": "tea", "second": None}] * 3)),
    # star patterns (prefix*) as Modify keys
    ("star_pattern_keys", {"price-net": "10", "price-gross": "12", "name": "tea"},
     {"price-*": "=toInteger"},
     modes({"price-net": 10, "price-gross": 12, "name": "tea"},
           {"price-net": "10", "price-gross": "12", "name": "tea"},
           {"price-net": "10", "price-gross": "12", "name": "tea"})),
]


@pytest.mark.parametrize("mode", [OVERWRITE, DEFAULT, DEFINE])
@pytest.mark.parametrize("document, spec, expected", [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_modify_case(document, spec, expected, mode):
    assert canonical(Modify(spec, mode).apply(copy.deepcopy(document))) == canonical(expected[mode])


def test_context_values():
    # mapLiteralWithNullInput: ^path reads the transform's context (NiFi gives none: then nothing is written)
    spec = {"currency": "^shop.currency", "region": "^shop.region"}
    assert Modify(spec, OVERWRITE).apply({}, {"shop": {"currency": "NOK"}}) == {"currency": "NOK"}
    assert Modify(spec, OVERWRITE).apply({}) == {}


DOC = {"customer": " Ruth Berg ", "sku": "TEA-01", "qtys": [3, 1, 2], "prices": [2.5, "4", 1], "total": 3000000000,
       "discount": -4, "rate": 2.5, "paid": "true", "gift": None, "codes": "a;b;;c;;",
       "tags": ["x", None, {"y": None}], "repeat": ["x", "x", "X", 2, 2.0, 2], "empty": [], "city": "oslo"}

# (expression, the value written next to DOC; ABSENT: nothing written)
FUNCTIONS = [
    # functions/valueTests: conversions, keeping Java's number kinds
    ("=toInteger(@(1,rate))", 2), ("=toInteger('17')", 17), ("=toInteger(@(1,prices))", [2, 4, 1]),
    ("=toLong(@(1,total))", 3000000000), ("=toLong('12')", 12),
    ("=toDouble(@(1,discount))", -4.0), ("=toDouble('abc')", "ABSENT"), ("=toDouble('1.5')", 1.5),
    ("=toBoolean(@(1,paid))", True), ("=toBoolean('maybe')", "ABSENT"),
    ("=toString(@(1,rate))", "2.5"), ("=toString(@(1,qtys))", ["3", "1", "2"]),
    ("=toString(@(1,tags))", ["x", "null", "{y=null}"]),   # element by element, as Java's String.valueOf
    # functions/stringsTests
    ("=toLower(@(1,sku))", "tea-01"), ("=toUpper(@(1,city))", "OSLO"), ("=trim(@(1,customer))", "Ruth Berg"),
    ("=concat(@(1,sku), '/', 7)", "TEA-01/7"), ("=concat(@(1,sku), @(1,gift))", "TEA-01"),
    ("=join('+', @(1,qtys))", "3+1+2"), ("=join(' ', 'a', @(1,city))", "a oslo"),
    ("=substring(@(1,sku), 0, 3)", "TEA"), ("=substring(@(1,sku), 4, 99)", "ABSENT"),
    # functions/stringsSplitTest: a regular expression, trailing empty parts dropped
    ("=split(';', @(1,codes))", ["a", "b", "", "c"]), ("=split('[-0]', @(1,sku))", ["TEA", "", "1"]),
    # functions/padStringsTest
    ("=leftPad('7', 3, '0')", "007"), ("=rightPad(@(1,city), 6, '.')", "oslo.."),
    ("=leftPad(@(1,sku), 2, '0')", "TEA-01"),
    # functions/sizeTests
    ("=size(@(1,qtys))", 3), ("=size(@(1,sku))", 6), ("=size(@(1,empty))", 0), ("=size(@(1,rate))", "ABSENT"),
    # functions/arrayTests
    ("=firstElement(@(1,qtys))", 3), ("=lastElement(@(1,qtys))", 2), ("=lastElement(@(1,empty))", "ABSENT"),
    ("=elementAt(2, @(1,qtys))", 2), ("=toList(@(1,sku))", ["TEA-01"]), ("=sort(@(1,qtys))", [1, 2, 3]),
    ("=sort(@(1,prices))", "ABSENT"),
    # functions/mathTests
    ("=min(@(1,qtys))", 1), ("=max(@(1,qtys))", 3), ("=max(@(1,rate), 1)", 2.5), ("=abs(@(1,discount))", 4),
    # Math.max compares the best int, long and double by their long values: 2.5 and 2 tie, and the int wins
    ("=max(@(1,rate), 2)", 2), ("=max(7)", 7), ("=max('x')", "ABSENT"),
    ("=avg(@(1,qtys))", 2.0), ("=intSum(@(1,qtys))", 6), ("=longSum(@(1,total), 5)", 3000000005),
    ("=doubleSum(1, @(1,rate))", 3.5), ("=intSubtract(10, 3)", 7), ("=intSubtract(@(1,total), 3)", "ABSENT"),
    # the subtractions take two values of exactly their kind (Java's instanceof): the literal 1 is an int
    ("=longSubtract(@(1,total), 2000000000000)", -1997000000000), ("=longSubtract(@(1,total), 1)", "ABSENT"),
    ("=doubleSubtract(@(1,rate), 0.5)", 2.0), ("=doubleSubtract(@(1,rate), 1)", "ABSENT"),
    ("=divide(@(1,discount), 8)", -0.5), ("=divide(1, 0)", "ABSENT"),
    ("=divideAndRound(2, 10, 3)", 3.33),
    # functions/squashNullsTests, deleteDuplicatesTests (Java: the Integer 2 and the Double 2.0 differ)
    ("=squashNulls(@(1,tags))", ["x", {"y": None}]), ("=recursivelySquashNulls(@(1,tags))", ["x", {}]),
    ("=squashDuplicates(@(1,repeat))", ["x", "X", 2, 2.0]),
    # functions/valueTests: presence and nulls
    ("=noop", "ABSENT"), ("=isPresent(@(1,sku))", "TEA-01"), ("=notNull(@(1,gift))", "ABSENT"),
    ("=notNull(@(1,city))", "oslo"), ("=isNull(@(1,city))", "ABSENT"),
    # indexOf: a flowactors addition (Jolt has no such function)
    ("=indexOf(@(1,qtys), 1)", 1), ("=indexOf(@(1,city), 'lo')", 2),
]


@pytest.mark.parametrize("expression, expected", [pytest.param(*row, id=row[0]) for row in FUNCTIONS])
def test_function(expression, expected):
    document = copy.deepcopy(DOC)
    assert canonical(Modify({"out": expression}, OVERWRITE).apply(document).get("out", "ABSENT")) == canonical(expected)


REFUSED = [
    # validation/specThatShouldFail: list positions mixed with star patterns (or a * besides them, and a pattern)
    ({"lines": {"[1]": {"sku": "x"}, "*a": {"sku": "y"}}}, "positions_and_suffix_star"),
    ({"lines": {"tea*": {"sku": "y"}, "[0]": {"sku": "x"}, "*": {"sku": "z"}}}, "prefix_star_then_positions"),
    ({"lines": {"[1]": "x", "qty": 1}}, "positions_and_keys"),
    # function calls Modify can not read
    ({"a": "=concat(@(1,b)"}, "call_without_closing_parenthesis"),
    ({"a": "=toUpperCase"}, "unknown_function"),   # Jolt skips it silently; flowactors refuses it (docs/jolt.md)
]


@pytest.mark.parametrize("mode", [OVERWRITE, DEFAULT, DEFINE])
@pytest.mark.parametrize("spec", [pytest.param(row[0], id=row[1]) for row in REFUSED])
def test_modify_refuses(spec, mode):
    with pytest.raises(JoltSpecError):
        Modify(spec, mode)
