"""Default, Remove, Cardinality, Sort and Chain (more cases: tests/test_jolt_cases_operations.py)."""

from __future__ import annotations

import json
import re

import pytest

from flowactors.processors.jolt.cardinality import Cardinality
from flowactors.processors.jolt.chain import Chain
from flowactors.processors.jolt.default import Default
from flowactors.processors.jolt.paths import JoltSpecError
from flowactors.processors.jolt.remove import Remove
from flowactors.processors.jolt.sort import Sort


def test_default_fills_missing_and_null_keys_and_literals_win_over_wildcards():
    spec = {"a": 1, "b": {"c": [1]}, "*": {"seen": True}, "x|y": "either", "list[]": {"1": "second"}}
    document = {"a": None, "keep": {}, "y": None, "list": ["first"]}
    assert Default(spec).apply(document) == {
        "a": 1, "keep": {"seen": True}, "y": "either", "list": ["first", "second"],
        "b": {"c": [1], "seen": True}}   # the literal made b before the * walked the keys
    defaults = Default({"d": {"e": [1]}})
    first, second = defaults.apply({}), defaults.apply({})
    first["d"]["e"].append(2)
    assert second == {"d": {"e": [1]}}   # each document gets its own copy of a default


def test_remove_drops_keys_patterns_and_list_positions():
    spec = {"drop": "", "tmp-*": "", "rows": {"*": {"secret": ""}}, "list": {"0": "", "2": ""}}
    document = {"drop": 1, "tmp-a": 2, "keep": 3, "rows": [{"secret": 1, "v": 1}], "list": ["a", "b", "c"]}
    assert Remove(spec).apply(document) == {"keep": 3, "rows": [{"v": 1}], "list": ["b"]}


def test_cardinality_one_and_many():
    # the @ makes nested a list first; its siblings then walk that list
    spec = {"one": "ONE", "many": "MANY", "none": "MANY", "nested": {"@": "MANY", "*": {"x": {"v": "ONE"}}}}
    document = {"one": [1, 2], "many": {"k": 1}, "none": None, "nested": {"x": {"v": []}}}
    assert Cardinality(spec).apply(document) == {
        "one": 1, "many": [{"k": 1}], "none": [], "nested": [{"x": {"v": None}}]}


def test_sort_orders_keys_recursively_with_tilde_keys_first_and_keeps_list_order():
    document = {"b": [{"z": 1, "a": 2}], "~id": 0, "a": {"d": 1, "c": 2}, "": 3}
    assert json.dumps(Sort().apply(document)) == json.dumps(
        {"~id": 0, "": 3, "a": {"c": 2, "d": 1}, "b": [{"a": 2, "z": 1}]})


def test_chain_applies_each_operation_to_the_result_of_the_one_before():
    chain = Chain([
        {"operation": "shift", "spec": {"name": "person.name", "age": "person.age"}},
        {"operation": "default", "spec": {"person": {"country": "NZ"}}},
        {"operation": "modify-overwrite-beta", "spec": {"person": {"age": "=toInteger"}}},
        {"operation": "com.bazaarvoice.jolt.Removr", "spec": {"person": {"name": ""}}},
        {"operation": "cardinality", "spec": {"person": "MANY"}},
        {"operation": "sort"},
    ])
    assert chain.apply({"name": "Kiri", "age": "41"}) == {"person": [{"age": 41, "country": "NZ"}]}


@pytest.mark.parametrize("make, spec, message", [
    (Chain, {}, "a Chain spec is a JSON array"),
    (Chain, [], "needs at least one"),
    (Chain, [{"operation": "shift"}], "chain entry 0: operation 'shift' needs a \"spec\""),
    (Chain, [{"operation": "sort"}, {"operation": "shift", "spec": {"a": 1}}], "chain entry 1 (shift): key 'a'"),
    (Default, {"a*": 1}, "a * key can hold nothing but the *"),
    (Remove, {"a": "x"}, "the value must be \"\" (remove it) or a map"),
    (Cardinality, {"a": "SOME"}, "must be \"ONE\" or \"MANY\""),
])
def test_bad_specs(make, spec, message):
    with pytest.raises(JoltSpecError, match=re.escape(message)):
        make(spec)
