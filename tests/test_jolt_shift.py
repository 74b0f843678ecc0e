"""Shift, feature by feature (tests/test_jolt_cases_shift.py holds the cases by Jolt fixture feature)."""

from __future__ import annotations

import re

import pytest

from flowactors.processors.jolt.paths import JoltSpecError, JoltTransformError, split_path
from flowactors.processors.jolt.shift import Shift


def shift(spec, document):
    return Shift(spec).apply(document)


def test_literal_keys_move_values_and_nothing_unmatched_is_kept():
    assert shift({"a": "x.y", "b": {"c": "z"}}, {"a": 1, "b": {"c": 2, "d": 3}, "e": 4}) == {"x": {"y": 1}, "z": 2}
    assert shift({"missing": "x"}, {"a": 1}) is None   # nothing written: Jolt's null output


def test_star_and_prefix_star_suffix_with_ampersand_references():
    document = {"rating-primary": {"value": 5}, "rating-quality": {"value": 3}, "other": {"value": 1}}
    spec = {"rating-*": {"value": "ratings.&(1,1).&0"}, "*": {"value": "rest.&1"}}
    assert shift(spec, document) == {"ratings": {"primary": {"value": 5}, "quality": {"value": 3}},
                                     "rest": {"other": 1}}
    # several stars: each captures, reluctantly, and &(0,n) picks them
    assert shift({"*-*-*": "&(0,3).&(0,1)"}, {"a-b-c-d": 1}) == {"c-d": {"a": 1}}
    # a star must capture at least one character
    assert shift({"a*": "x"}, {"a": 1}) is None


def test_literal_keys_win_over_wildcards_and_more_specific_wildcards_win():
    spec = {"tag-pro": "literal", "tag-*": "prefixed.&(0,1)", "*": "any.&"}
    assert shift(spec, {"tag-pro": 1, "tag-con": 2, "x": 3}) == {
        "literal": 1, "prefixed": {"con": 2}, "any": {"x": 3}}


def test_dollar_writes_the_matched_key_and_dollar_n_an_ancestor_key():
    spec = {"*": {"*": {"$": "keys[]", "$1": "parents[]", "$(1,0)": "same[]"}}}
    assert shift(spec, {"p": {"a": {}, "b": 1}}) == {
        "keys": ["a", "b"], "parents": ["p", "p"], "same": ["p", "p"]}


def test_hash_writes_a_literal_and_hash_n_indexes_an_output_array():
    spec = {"photos": {"*": {"#photo": "items[#2].kind", "url": "items[#2].url"}}}
    document = {"photos": [{"url": "a"}, {"url": "b"}]}
    assert shift(spec, document) == {"items": [{"kind": "photo", "url": "a"}, {"kind": "photo", "url": "b"}]}


def test_a_scalar_value_is_matched_as_a_key():
    spec = {"flag": {"true": {"#yes": "answer"}, "false": {"#no": "answer"}}}
    assert shift(spec, {"flag": True}) == {"answer": "yes"}
    assert shift(spec, {"flag": "false"}) == {"answer": "no"}


def test_at_copies_the_current_value_and_at_n_path_reads_elsewhere():
    document = {"id": 7, "items": {"a": {"price": 1}, "b": {"price": 2}}}
    spec = {"items": {"*": {"@": "byKey.&1", "price": "prices.@(3,id).&1"}}}
    assert shift(spec, document) == {"byKey": {"a": {"price": 1}, "b": {"price": 2}},
                                     "prices": {"7": {"a": 1, "b": 2}}}
    # an @(n,path) key reads a value and walks into it
    assert shift({"@(0,ref)": {"name": "out"}, "ref": None}, {"ref": {"name": "n"}}) == {"out": "n"}


def test_the_value_found_by_at_becomes_a_key_numbers_truncated():
    spec = {"items": {"*": {"value": "byId.@(1,id)"}}}
    document = {"items": [{"id": "x", "value": 1}, {"id": 2.9, "value": 2}, {"id": True, "value": 3},
                          {"id": None, "value": 4}]}
    assert shift(spec, document) == {"byId": {"x": 1, "2": 2, "true": 3}}   # a null key writes nothing


def test_pipe_alternatives_match_either_key():
    assert shift({"a|b": "out"}, {"a": 1, "b": 2, "c": 3}) == {"out": [1, 2]}


def test_output_arrays_append_explicit_index_and_reference_index():
    document = {"list": [{"v": "a"}, {"v": "b"}]}
    assert shift({"list": {"*": {"v": "appended[]"}}}, document) == {"appended": ["a", "b"]}
    assert shift({"list": {"*": {"v": "reversed[&1]"}}}, document) == {"reversed": ["a", "b"]}
    assert shift({"list": {"1": {"v": "at[3]"}}}, document) == {"at": [None, None, None, "b"]}
    assert shift({"list": {"*": {"v": "[]"}}}, document) == ["a", "b"]   # the output itself a list


def test_a_list_of_output_paths_writes_the_value_to_each():
    assert shift({"a": ["x", "y.z", "w[]"]}, {"a": 1}) == {"x": 1, "y": {"z": 1}, "w": [1]}


def test_values_written_to_the_same_place_become_a_list_in_order():
    document = {"a": 1, "b": [2, 3], "c": {"d": 4}}
    assert shift({"a": "out", "b": "out", "c": "out"}, document) == {"out": [1, [2, 3], {"d": 4}]}
    assert shift({"b": "out", "a": "out"}, {"a": 1, "b": [2, 3]}) == {"out": [2, 3, 1]}   # appended to the list


def test_escapes_and_dots_inside_references():
    assert shift({"\\@a": "b\\.c"}, {"@a": 1}) == {"b.c": 1}
    assert split_path("a.@(1,b.c).d[2].e[&1]") == ["a", "@(1,b.c)", "d", "[2]", "e", "[&1]"]


def test_a_null_output_path_drops_the_value():
    assert shift({"a": None, "b": "b"}, {"a": 1, "b": 2}) == {"b": 2}


@pytest.mark.parametrize("spec, message", [
    ([], "a Shift spec is a JSON object"),
    ({"a": {}}, "an empty {} is not a valid Shift spec value"),
    ({"a": 5}, "the value must be a map, an output path"),
    ({"a": "x.*"}, "can not contain * or $"),
    ({"@": {"a": "b"}}, "can not have children"),
    ({"a": "b", "a|c": "d"}, "appears twice"),
    ({"x@y": "b"}, "can not have an @ other than at the front"),
    ({"x@(1,y)": "b"}, "an @ reference must start the key"),
    ({"a": "&(1,x)"}, "bad reference"),
    ({"a": "b[x]"}, "an array position is"),
    ({}, "the Shift spec: an empty {}"),
    ({"a": "photos[&(0,1)]-sub[&1]"}, "a ] must end the key"),
])
def test_bad_specs_are_refused_with_the_key_at_fault(spec, message):
    with pytest.raises(JoltSpecError, match=re.escape(message)):
        Shift(spec)


def test_a_reference_past_the_captures_fails_the_document():
    with pytest.raises(JoltTransformError, match="capture 2"):
        shift({"a*": "x.&(0,2)"}, {"ab": 1})
