"""Default, Remove, Cardinality, Sort and Chain cases written for flowactors (orders / customers).

Each case exercises a feature that one of Jolt's own fixtures exercises (named in its comment:
``jolt-core/src/test/resources/json/<operation>/<name>.json``); the documents, specs and expected
outputs are ours, worked out by hand from the javadoc of Defaultr, Removr, CardinalityTransform,
Sortr and Chainr. docs/jolt.md gives the measurement of Jolt's fixtures on this implementation.
Results are compared strictly: an integer and a float differ, lists keep their order.
"""

from __future__ import annotations

import copy
import json

import pytest

from flowactors.processors.jolt.cardinality import Cardinality
from flowactors.processors.jolt.chain import Chain
from flowactors.processors.jolt.default import Default
from flowactors.processors.jolt.paths import JoltSpecError
from flowactors.processors.jolt.remove import Remove
from flowactors.processors.jolt.sort import Sort


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def params(rows):
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


DEFAULT_CASES = [
    # firstSample: nested defaults fill the keys the input lacks and leave the ones it has
    ("fills_missing_keys", {"order": {"id": 1, "customer": {"name": "Ruth"}}},
     {"order": {"id": 0, "currency": "NOK", "customer": {"name": "?", "tier": "basic"}}},
     {"order": {"id": 1, "currency": "NOK", "customer": {"name": "Ruth", "tier": "basic"}}}),
    # defaultNulls: a null in the input is replaced, an empty string or false is not
    ("replaces_nulls", {"order": {"note": None, "coupon": "", "gift": False}},
     {"order": {"note": "-", "coupon": "NONE", "gift": True}},
     {"order": {"note": "-", "coupon": "", "gift": False}}),
    # expansionOnly: an empty input gets the whole default tree, lists included
    ("expands_into_empty_input", {},
     {"order": {"status": "new", "lines": [], "meta": {"source": "web"}}},
     {"order": {"status": "new", "lines": [], "meta": {"source": "web"}}}),
    # identity: a spec whose keys the input all has changes nothing
    ("identity", {"order": {"id": 1, "lines": [{"sku": "a"}]}},
     {"order": {"id": 2, "lines": []}},
     {"order": {"id": 1, "lines": [{"sku": "a"}]}}),
    # starsOfStars: * applies to every key the input has at that level (and only those)
    ("star_over_existing_keys", {"orders": {"o1": {}, "o2": {"status": "paid"}}},
     {"orders": {"*": {"status": "new"}}},
     {"orders": {"o1": {"status": "new"}, "o2": {"status": "paid"}}}),
    # orOrdering: a literal key applies before a|b, and a|b before *
    ("literal_before_pipe_before_star", {"shipping": {}, "billing": {}, "pickup": {}},
     {"billing": {"country": "SE"}, "shipping|billing": {"country": "NO"}, "*": {"country": "DK", "kind": "addr"}},
     {"shipping": {"country": "NO", "kind": "addr"}, "billing": {"country": "SE", "kind": "addr"},
      "pickup": {"country": "DK", "kind": "addr"}}),
    # photosArray, nestedArrays1: key[] walks a list, its keys the positions (or * for every element)
    ("list_elements", {"lines": [{"sku": "a"}, {"sku": "b", "qty": 3}]},
     {"lines[]": {"*": {"qty": 1}, "0": {"note": "first"}}},
     {"lines": [{"sku": "a", "qty": 1, "note": "first"}, {"sku": "b", "qty": 3}]}),
    # nestedArrays2: key[] where the input has no list makes one, positions padded with nulls
    ("list_made_where_missing", {},
     {"tags[]": {"1": "second"}},
     {"tags": [None, "second"]}),
    # topLevelIsArray: a list as the input, the spec's top-level keys its positions
    ("top_level_list", [{"sku": "a"}, {"sku": "b", "qty": 2}],
     {"*": {"qty": 1}},
     [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]),
    # arrayMismatch1, arrayMismatch2: a map where the spec says list, or a list where it says map: left as is
    ("shape_mismatch_left_alone", {"lines": {"sku": "a"}, "customer": [1, 2]},
     {"lines[]": {"0": {"qty": 1}}, "customer": {"name": "?"}},
     {"lines": {"sku": "a"}, "customer": [1, 2]}),
]


@pytest.mark.parametrize("document, spec, expected", params(DEFAULT_CASES))
def test_default_case(document, spec, expected):
    assert canonical(Default(spec).apply(copy.deepcopy(document))) == canonical(expected)


def test_default_gives_each_document_its_own_copy():
    # __deepCopyTest: changing one output does not change the defaults written into the next
    defaults = Default({"order": {"lines": [{"sku": "none"}]}})
    first = defaults.apply({})
    first["order"]["lines"][0]["sku"] = "changed"
    assert defaults.apply({}) == {"order": {"lines": [{"sku": "none"}]}}


REMOVE_CASES = [
    # firstSample: "" removes a key, a map walks down
    ("removes_keys", {"order": {"id": 1, "internal": "x", "audit": {"by": "ops", "at": 5}}},
     {"order": {"internal": "", "audit": {"by": ""}}},
     {"order": {"id": 1, "audit": {"at": 5}}}),
    # removrWithWildcardSupport: * removes every key at its level
    ("star_removes_all", {"customer": {"name": "Ana", "email": "a@x"}, "id": 3},
     {"customer": {"*": ""}},
     {"customer": {}, "id": 3}),
    # multiStarSupport, starDoublePathElementBoundaryConditions: prefix*, *-* patterns (a * is at least one character)
    ("star_patterns", {"tmp-a": 1, "tmp-": 2, "x-y-z": 3, "keep": 4},
     {"tmp-*": "", "*-*-*": ""},
     {"tmp-": 2, "keep": 4}),
    # array_removeAnArrayIndex: a number removes that position of a list
    ("list_position", {"lines": ["a", "b", "c"]},
     {"lines": {"1": ""}},
     {"lines": ["a", "c"]}),
    # array_removeJsonArrayFields: * over a list's elements, removing a key in each
    ("key_in_each_element", {"lines": [{"sku": "a", "cost": 1}, {"sku": "b", "cost": 2}]},
     {"lines": {"*": {"cost": ""}}},
     {"lines": [{"sku": "a"}, {"sku": "b"}]}),
    # array_canHandleTopLevelArray: the input itself a list
    ("top_level_list", [{"sku": "a", "cost": 1}, {"sku": "b"}],
     {"*": {"cost": ""}},
     [{"sku": "a"}, {"sku": "b"}]),
    # array_nonStarInArrayDoesNotDie: a key that is no number meets a list: nothing happens
    ("name_key_on_a_list", {"lines": [{"sku": "a"}]},
     {"lines": {"sku": ""}},
     {"lines": [{"sku": "a"}]}),
    # array_canPassThruNestedArrays: positions in lists within lists
    ("nested_lists", {"grid": [[1, 2, 3], [4, 5]]},
     {"grid": {"*": {"0": ""}}},
     {"grid": [[2, 3], [5]]}),
    # boundaryConditions: keys the input does not have, or a map where the input has a scalar: no error
    ("absent_keys", {"order": 5, "customer": {"name": "Ana"}},
     {"order": {"id": ""}, "customer": {"email": "", "name": {"first": ""}}, "missing": ""},
     {"order": 5, "customer": {"name": "Ana"}}),
    # removrWithWildcardSupport (a|b form): either key
    ("pipe_alternatives", {"phone": 1, "fax": 2, "email": 3},
     {"phone|fax": ""},
     {"email": 3}),
    # several list positions are all read before any is removed
    ("several_positions", {"lines": ["a", "b", "c", "d"]},
     {"lines": {"0": "", "2": ""}},
     {"lines": ["b", "d"]}),
]


@pytest.mark.parametrize("document, spec, expected", params(REMOVE_CASES))
def test_remove_case(document, spec, expected):
    assert canonical(Remove(spec).apply(copy.deepcopy(document))) == canonical(expected)


CARDINALITY_CASES = [
    # oneLiteralTestData: ONE makes a list its first element, an empty list null; maps and scalars stay
    ("one", {"sku": ["a", "b"], "tags": [], "customer": {"id": 1}, "qty": 2},
     {"sku": "ONE", "tags": "ONE", "customer": "ONE", "qty": "ONE"},
     {"sku": "a", "tags": None, "customer": {"id": 1}, "qty": 2}),
    # manyLiteralTestData: MANY wraps a scalar or a map in a list, keeps a list, makes null []
    ("many", {"sku": "a", "customer": {"id": 1}, "tags": ["x"], "note": None},
     {"sku": "MANY", "customer": "MANY", "tags": "MANY", "note": "MANY"},
     {"sku": ["a"], "customer": [{"id": 1}], "tags": ["x"], "note": []}),
    # starTestData: a wildcard, a more specific literal winning over it
    ("star_and_literal", {"price-net": [10, 12], "price-gross": [12, 15], "price-list": 9},
     {"price-*": "ONE", "price-list": "MANY"},
     {"price-net": 10, "price-gross": 12, "price-list": [9]}),
    # atTestData: @ changes its own level first, its siblings then walk the changed value
    ("at_then_siblings", {"order": {"lines": {"sku": ["a", "b"]}}},
     {"order": {"lines": {"@": "MANY", "*": {"sku": "ONE"}}}},
     {"order": {"lines": [{"sku": "a"}]}}),
    # keys the input does not have are left out
    ("absent_keys", {"a": 1},
     {"b": "MANY", "c": {"d": "ONE"}},
     {"a": 1}),
]


@pytest.mark.parametrize("document, spec, expected", params(CARDINALITY_CASES))
def test_cardinality_case(document, spec, expected):
    assert canonical(Cardinality(spec).apply(copy.deepcopy(document))) == canonical(expected)


def test_sort_orders_keys_recursively():
    # sortr/simple: keys starting ~ first, then in string order, recursively (inside lists too); lists keep order
    document = {"status": "new", "customer": {"name": "Ana", "id": 4, "~rev": 2}, "~id": "A-17", "": 0,
                "Zone": 1, "lines": [{"sku": "b", "qty": 1}, {"sku": "a", "qty": 2}], "10": "x", "9": "y"}
    expected = ('{"~id": "A-17", "": 0, "10": "x", "9": "y", "Zone": 1, '
                '"customer": {"~rev": 2, "id": 4, "name": "Ana"}, '
                '"lines": [{"qty": 1, "sku": "b"}, {"qty": 2, "sku": "a"}], "status": "new"}')
    assert json.dumps(Sort().apply(document)) == expected


CHAIN_CASES = [
    # chainr/integration/firstSample: shift then default
    ("shift_then_default", {"order": {"id": "A-1", "amount": 40}},
     [{"operation": "shift", "spec": {"order": {"id": "orderId", "amount": "total.value"}}},
      {"operation": "default", "spec": {"total": {"currency": "NOK"}, "status": "new"}}],
     {"orderId": "A-1", "total": {"value": 40, "currency": "NOK"}, "status": "new"}),
    # chainr/integration/firstSample (shift, default, remove, sort), wolfermann2 (one operation on the output of
    # the one before): every operation, named by its short name or by Jolt's Java class name
    ("every_operation", {"customers": [{"id": "c1", "name": " ana ", "orders": 3, "secret": "x"},
                                       {"id": "c2", "name": "bo", "orders": "7", "secret": "y"}]},
     [{"operation": "shift", "spec": {"customers": {"*": {"id": "byId.@(1,name)", "*": "rows[&1].&"}}}},
      {"operation": "com.bazaarvoice.jolt.Removr", "spec": {"rows": {"*": {"secret": ""}}}},
      {"operation": "modify-overwrite-beta", "spec": {"rows": {"*": {"name": "=trim", "orders": "=toInteger"}}}},
      {"operation": "modify-default-beta", "spec": {"rows": {"*": {"vip": False}}}},
      {"operation": "modify-define-beta", "spec": {"rows": {"*": {"vip": True, "tier": "basic"}}}},
      {"operation": "default", "spec": {"source": "crm"}},
      {"operation": "cardinality", "spec": {"byId": "MANY"}},
      {"operation": "sort"}],
     {"byId": [{" ana ": "c1", "bo": "c2"}],   # the literal "id" takes the ids, so the * leaves them out of rows
      "rows": [{"name": "ana", "orders": 3, "tier": "basic", "vip": False},
               {"name": "bo", "orders": 7, "tier": "basic", "vip": False}],
      "source": "crm"}),
    # chainr/integration/ismith: a default puts true and false in the document, a shift then writes them with @
    ("booleans_by_default_then_shift", {"flags": {"gift": "Y", "rush": "N"}},
     [{"operation": "default", "spec": {"consts": {"yes": True, "no": False}}},
      {"operation": "shift",
       "spec": {"flags": {"*": {"Y": {"@(3,consts.yes)": "&2"}, "N": {"@(3,consts.no)": "&2"}}}}}],
     {"gift": True, "rush": False}),
    # (Chainr's javadoc: each operation gets the output of the one before) a shift that writes nothing gives
    # null to the next operation; Defaultr takes a null input as an empty map
    ("null_between_operations", {"a": 1},
     [{"operation": "shift", "spec": {"missing": "x"}}, {"operation": "default", "spec": {"status": "empty"}}],
     {"status": "empty"}),
    ("shift_output_null", {"a": 1},
     [{"operation": "shift", "spec": {"missing": "x"}}, {"operation": "sort"}],
     None),
]


@pytest.mark.parametrize("document, spec, expected", params(CHAIN_CASES))
def test_chain_case(document, spec, expected):
    assert canonical(Chain(spec).apply(copy.deepcopy(document))) == canonical(expected)


REFUSED = [
    # removr/negativeTestCases: a value other than "" or a map
    (Remove, {"order": "yes"}, "remove_text_value"),
    # cardinality/failCardinalityType: neither ONE nor MANY
    (Cardinality, {"order": "SEVERAL"}, "cardinality_unknown"),
    (Cardinality, {"order": 1}, "cardinality_number"),
    # DefaultrTest's bad spec: a * with more than the star
    (Default, {"order*": {"id": 1}}, "default_star_pattern"),
    # chainr/specformat: an empty chain, an unknown operation, an operation that is a list, not a list at all
    (Chain, [], "chain_empty"),
    (Chain, [{"operation": "com.example.NoSuchTransform", "spec": {}}], "chain_unknown_class"),
    (Chain, [{"operation": ["shift"], "spec": {}}], "chain_operation_a_list"),
    (Chain, {"operation": "shift", "spec": {}}, "chain_not_a_list"),
    (Chain, [{"operation": "shift"}], "chain_shift_without_spec"),
    (Chain, [{"operation": "shift", "spec": {"a": 5}}], "chain_bad_entry_spec"),
]


@pytest.mark.parametrize("make, spec", [pytest.param(row[0], row[1], id=row[2]) for row in REFUSED])
def test_refused(make, spec):
    with pytest.raises(JoltSpecError):
        make(spec)
