"""Modify's three modes and its function library (more cases: tests/test_jolt_cases_modify.py)."""

from __future__ import annotations

import json
import re

import pytest

from flowactors.processors.jolt.modify import DEFAULT, DEFINE, OVERWRITE, Modify
from flowactors.processors.jolt.paths import JoltSpecError

DOCUMENT = {"text": " Hello World ", "csv": "a,b,,c,,", "ints": [3, 1, 2], "mixed": [1, 2.5, "4"],
            "big": 3000000000, "half": 2.5, "neg": -4, "flag": "TRUE", "nulls": [1, None, {"x": None}],
            "dups": [1, 1, "1", 2], "word": "tea", "empty": []}


def result(expression):
    """The value ``expression`` writes, with DOCUMENT beside it (absent: nothing written)."""
    document = json.loads(json.dumps(DOCUMENT))
    return Modify({"out": expression}, OVERWRITE).apply(document).get("out", "ABSENT")


@pytest.mark.parametrize("expression, expected", [
    # conversions: numbers keep Java's kinds (an int fits 32 bits; toInteger wraps as Java does)
    ("=toInteger(@(1,half))", 2), ("=toInteger('42')", 42), ("=toInteger(@(1,big))", -1294967296),
    ("=toLong(@(1,big))", 3000000000), ("=toLong('7.9')", 7), ("=toDouble(@(1,neg))", -4.0),
    ("=toDouble('x')", "ABSENT"), ("=toBoolean(@(1,flag))", True), ("=toBoolean('yes')", "ABSENT"),
    ("=toString(@(1,half))", "2.5"), ("=toString(@(1,ints))", ["3", "1", "2"]),
    ("=toInteger(@(1,mixed))", [1, 2, 4]),
    # strings
    ("=concat(@(1,word), ' ', 1, '-', true)", "tea 1-true"), ("=concat(@(1,word))", "ABSENT"),
    ("=join('-', @(1,ints))", "3-1-2"), ("=join(',', 'a', '', 'b')", "a,b"),
    ("=split(',', @(1,csv))", ["a", "b", "", "c"]), ("=split('[lo]', 'hello')", ["he"]),
    ("=substring(@(1,word), 0, 2)", "te"), ("=substring(@(1,word), 2, 2)", "ABSENT"),
    ("=substring(@(1,word), 0, 4)", "ABSENT"),
    ("=toLower(@(1,text))", " hello world "), ("=toUpper(@(1,word))", "TEA"), ("=trim(@(1,text))", "Hello World"),
    ("=leftPad(@(1,word), 5, '*')", "**tea"), ("=rightPad(@(1,word), 5, '.')", "tea.."),
    ("=leftPad(@(1,word), 2, '*')", "tea"), ("=leftPad(@(1,word), 5, '**')", "ABSENT"),
    # lists
    ("=size(@(1,ints))", 3), ("=size(@(1,word))", 3), ("=size(@(1,neg))", "ABSENT"),
    ("=firstElement(@(1,ints))", 3), ("=lastElement(@(1,ints))", 2), ("=firstElement(@(1,empty))", "ABSENT"),
    ("=elementAt(1, @(1,ints))", 1), ("=elementAt(5, @(1,ints))", "ABSENT"),
    ("=indexOf(@(1,ints), 2)", 2), ("=indexOf(@(1,word), 'a')", 2), ("=indexOf(@(1,ints), 9)", -1),
    # math
    ("=min(@(1,ints))", 1), ("=max(@(1,mixed))", 4), ("=max(@(1,half), 1)", 2.5), ("=abs(@(1,neg))", 4),
    ("=avg(@(1,ints))", 2.0), ("=intSum(@(1,mixed))", 7), ("=longSum(@(1,big), 1)", 3000000001),
    ("=doubleSum(@(1,ints))", 6.0), ("=divide(@(1,neg), 8)", -0.5), ("=divide(1, 0)", "ABSENT"),
    ("=divideAndRound(2, 10, 3)", 3.33), ("=divideAndRound(0, @(1,half), 1)", 3.0),
    # nulls and the rest
    ("=squashNulls(@(1,nulls))", [1, {"x": None}]), ("=recursivelySquashNulls(@(1,nulls))", [1, {}]),
    ("=squashDuplicates(@(1,dups))", [1, "1", 2]), ("=noop", "ABSENT"), ("=notNull(@(1,word))", "tea"),
    ("=isNull(@(1,word))", "ABSENT"), ("=toList(@(1,word))", ["tea"]), ("=sort(@(1,ints))", [1, 2, 3]),
    ("=sort(@(1,mixed))", "ABSENT"),
])
def test_functions(expression, expected):
    assert json.dumps(result(expression)) == json.dumps(expected)


def test_a_function_without_arguments_takes_the_current_value_and_a_list_of_choices_takes_the_first_result():
    document = {"a": " x ", "b": "y", "c": 5}
    spec = {"a": "=trim", "b": ["=toInteger", "=toUpper", "fallback"], "c": ["=toUpper", "fallback"]}
    assert Modify(spec, OVERWRITE).apply(document) == {"a": "x", "b": "Y", "c": "fallback"}


def test_literal_and_lookup_values_and_argument_forms():
    document = {"first": "Ada", "last": "Lovelace", "n": {"deep": [10, 20]}}
    spec = {"full": "=concat(@(1,first), ' ', @(1,last))", "literal": "just text", "copy": "@(1,n.deep)",
            "second": "=elementAt(1, @(1,n.deep))", "quoted": "=concat('a, b', ')(')", "number": 3}
    assert Modify(spec, OVERWRITE).apply(document) == {
        **document, "full": "Ada Lovelace", "literal": "just text", "copy": [10, 20], "second": 20,
        "quoted": "a, b)(", "number": 3}


def test_the_three_modes_differ_on_missing_null_and_present_keys():
    spec = {"missing": "new", "null": "new", "present": "new"}
    for mode, expected in ((OVERWRITE, {"missing": "new", "null": "new", "present": "new"}),
                           (DEFAULT, {"missing": "new", "null": "new", "present": "old"}),
                           (DEFINE, {"missing": "new", "null": None, "present": "old"})):
        assert Modify(spec, mode).apply({"null": None, "present": "old"}) == expected, mode


def test_key_prefixes_switch_the_mode_and_a_question_mark_needs_the_key():
    spec = {"~a": "default", "+b": "overwrite", "+c?": "only if there", "+d?": "only if there"}
    assert Modify(spec, DEFINE).apply({"a": None, "b": 1, "c": 0}) == {
        "a": "default", "b": "overwrite", "c": "only if there"}


def test_wildcards_list_positions_and_made_containers():
    document = {"items": [{"price": "3"}, {"price": "x"}], "tags": ["a"]}
    spec = {"items": {"*": {"price": "=toInteger"}}, "tags": {"[2]": "c"}, "made": {"inner": 1}}
    assert Modify(spec, OVERWRITE).apply(document) == {
        "items": [{"price": 3}, {"price": "x"}], "tags": ["a", None, "c"], "made": {"inner": 1}}


@pytest.mark.parametrize("spec, message", [
    ({"a": "=unknown(@(1,b))"}, "unknown Modify function 'unknown'"),
    ({"a": "=concat(@(1,b)"}, "needs its closing )"),
    ({"x": {"[1]": 1, "y": 2}}, "can not mix list positions ([1]) and map keys (y)"),
    ({"x": {"[#1]": 1}}, "a list position must be an explicit index"),
    ({"&1": 1}, "only literal keys, * patterns and [n] positions are allowed"),
])
def test_bad_modify_specs(spec, message):
    with pytest.raises(JoltSpecError, match=re.escape(message)):
        Modify(spec, OVERWRITE)
