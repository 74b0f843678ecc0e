"""Shift cases written for flowactors (an orders / customers domain), one a feature.

Each case exercises a feature that one of Jolt's own Shift fixtures exercises (named in its
comment: ``jolt-core/src/test/resources/json/shiftr/<name>.json``); the documents, specs and
expected outputs are ours, the expected output worked out by hand from Shiftr's javadoc.
docs/jolt.md gives the measurement of Jolt's fixtures themselves on this implementation.
Results are compared strictly: an integer and a float differ, lists keep their order.
"""

from __future__ import annotations

import copy
import json

import pytest

from flowactors.processors.jolt.paths import JoltSpecError
from flowactors.processors.jolt.shift import Shift


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


ORDER = {"order": {"id": "A-17", "customer": {"name": "Ruth", "tier": "gold"}, "total": 42.5, "lines": 3}}

CASES = [
    # firstSample, singlePlacement: nested literal keys, dot paths out; keys the spec does not name are dropped
    ("nested_literals", ORDER,
     {"order": {"id": "orderId", "customer": {"name": "buyer.name", "tier": "buyer.level"}}},
     {"orderId": "A-17", "buyer": {"name": "Ruth", "level": "gold"}}),
    # wildcards: * with & (this key) and &1 (the parent's key), mixed with text in one output key
    ("star_and_ampersands", {"prices": {"tea": 3, "cake": 4.5}},
     {"prices": {"*": ["menu.&0.price", "flat.&1-&"]}},
     {"menu": {"tea": {"price": 3}, "cake": {"price": 4.5}}, "flat": {"prices-tea": 3, "prices-cake": 4.5}}),
    # prefixSoupToBuckets, prefixedData: a two-star key and &(0,n) picking its captures, each star as short as
    # it can be (the first star of "*-*" stops at the first "-")
    ("two_star_captures", {"ship-street": "Main St", "ship-city": "Oslo", "bill-city": "Bergen",
                           "gift-wrap-colour": "red", "note": "x"},
     {"*-*": "&(0,1).&(0,2)"},
     {"ship": {"street": "Main St", "city": "Oslo"}, "bill": {"city": "Bergen"}, "gift": {"wrap-colour": "red"}}),
    # bucketToPrefixSoup, transposeLHS: a capture of the parent's key, &(1,1)
    ("capture_of_the_parent_key", {"addr-home": {"city": "Oslo"}, "addr-work": {"city": "Bergen"}},
     {"addr-*": {"city": "cities.&(1,1)"}},
     {"cities": {"home": "Oslo", "work": "Bergen"}}),
    # wildcards: a literal key wins over the wildcards, a prefix* wildcard over the bare *
    ("literal_then_prefix_then_star", {"sku-special": 1, "sku-9": 2, "colour": "red"},
     {"sku-special": "special", "sku-*": "skus.&(0,1)", "*": "other.&"},
     {"special": 1, "skus": {"9": 2}, "other": {"colour": "red"}}),
    # specialKeys, keyref: $ writes the key matched (not the value); $1 the key one level up
    ("dollar_keys", {"customers": {"c1": {"name": "Ana"}, "c2": {"name": "Bo"}}},
     {"customers": {"*": {"$": "ids[]", "name": {"$1": "owners[]"}}}},
     {"ids": ["c1", "c2"], "owners": ["c1", "c2"]}),
    # hashDefault: #text writes the text itself
    ("hash_literal", {"order": {"id": 5}},
     {"order": {"id": "orderId", "#web": "channel"}},
     {"orderId": 5, "channel": "web"}),
    # filterParallelArrays, mergeParallelArrays1: [#2] indexes an output list parallel to the input list
    ("hash_count_index", {"orders": [{"sku": "p1", "qty": 2}, {"sku": "p2", "qty": 1}]},
     {"orders": {"*": {"sku": "lines[#2].product", "qty": "lines[#2].count", "#pending": "lines[#2].state"}}},
     {"lines": [{"product": "p1", "count": 2, "state": "pending"}, {"product": "p2", "count": 1, "state": "pending"}]}),
    # mapToList: $ and @ under a * over a map's keys, the output list indexed by [#2]
    ("map_to_list", {"stock": {"tea": 3, "cake": 0}},
     {"stock": {"*": {"$": "products[#2].name", "@": "products[#2].count"}}},
     {"products": [{"name": "tea", "count": 3}, {"name": "cake", "count": 0}]}),
    # transposeSimple1, transposeComplex6: @ copies the current value; @name a sibling's value; @(n,path) in an
    # output path makes the value found there a key
    ("at_values_and_keys", ORDER,
     {"order": {"@": "copy.whole", "@total": "totals.@(1,customer.name)", "customer": {"@tier": "tiers"}}},
     {"copy": {"whole": ORDER["order"]}, "totals": {"Ruth": 42.5}, "tiers": "gold"}),
    # transposeComplex7, transposeComplex8: numbers found by @ become integer keys, booleans true/false
    ("at_key_coercion", {"lines": [{"qty": 2.0, "sku": "a"}, {"qty": 5, "sku": "b"}, {"gift": True, "sku": "c"}]},
     {"lines": {"*": {"sku": ["byQty.@(1,qty)", "byGift.@(1,gift)"]}}},
     {"byQty": {"2": "a", "5": "b"}, "byGift": {"true": "c"}}),
    # filterParents1, filterParents2: a scalar is matched as a key; @(2,id) reads up from below it
    ("filter_on_a_value", {"orders": [{"id": 1, "status": "open"}, {"id": 2, "status": "closed"},
                                      {"id": 3, "status": "open"}]},
     {"orders": {"*": {"status": {"open": {"@(2,id)": "openIds[]"}}}}},
     {"openIds": [1, 3]}),
    # wildcardsWithOr: a|b matches either key
    ("pipe_alternatives", {"customer": {"email": "r@x.no", "phone": "123", "fax": "9"}},
     {"customer": {"email|phone": "contact.&"}},
     {"contact": {"email": "r@x.no", "phone": "123"}}),
    # declaredOutputArray, explicitArrayKey: [] appends, [n] writes at n (padded with nulls)
    ("output_list_positions", {"order": {"sku": "p1", "gift": True}},
     {"order": {"sku": "skus[]", "gift": "flags[2]"}},
     {"skus": ["p1"], "flags": [None, None, True]}),
    # arrayExample: [&1] keeps each element at its input position
    ("ampersand_index", {"items": [{"sku": "a", "price": 1}, {"sku": "b", "price": 2}]},
     {"items": {"*": {"sku": "lines[&1].code", "price": "lines[&1].amount"}}},
     {"lines": [{"code": "a", "amount": 1}, {"code": "b", "amount": 2}]}),
    # transposeArrayContents1: the output itself a list ([&1] at the root), elements reordered by the spec
    ("root_list", {"items": [{"sku": "a"}, {"sku": "b"}]},
     {"items": {"1": {"sku": "[0]"}, "0": {"sku": "[1]"}}},
     ["b", "a"]),
    # multiPlacement: a list of output paths writes the value to each
    ("several_output_paths", {"order": {"id": 7}},
     {"order": {"id": ["id", "meta.orderId", "ids[]"]}},
     {"id": 7, "meta": {"orderId": 7}, "ids": [7]}),
    # queryMappingXform, pollaxman_218: values written to one place become a list, in the order written
    ("collisions_make_a_list", {"shipping": {"email": "a@x"}, "billing": {"email": "b@x"}, "other": {"email": ["c@x"]}},
     {"shipping": {"email": "emails"}, "billing": {"email": "emails"}},
     {"emails": ["a@x", "b@x"]}),
    # Shiftr's collision rule (ShiftrTraversr): a null already there is replaced; a list there gets the value
    # appended (the value itself, even a list)
    ("collision_with_null_and_lists", {"home": {"phone": None, "tags": ["a"]}, "work": {"phone": "555", "tags": ["b"]}},
     {"*": {"phone": "phone", "tags": "tags"}},
     {"phone": "555", "tags": ["a", ["b"]]}),
    # wildcards, keyref (ExecutionStrategy): literal keys in the spec's order, then the wildcards over the input;
    # when a wildcard could also take a literal's key, every key in the input's order instead
    ("literals_first_in_spec_order", {"a": 1, "b": 2, "x1": 3},
     {"b": "o", "a": "o", "x*": "o"},
     {"o": [2, 1, 3]}),
    ("input_order_when_a_wildcard_overlaps", {"a": 1, "b": 2, "x1": 3},
     {"b": "o", "a": "o", "*": "o"},
     {"o": [1, 2, 3]}),
    # shiftToTrash: a null output path drops the value (the literal key keeps it from the *)
    ("null_output_path", {"id": 1, "secret": "s", "name": "n"},
     {"secret": None, "*": "&"},
     {"id": 1, "name": "n"}),
    # passNullThru: a null input value is written as null
    ("null_value_passes", {"note": None, "id": 2},
     {"note": "comment", "id": "id"},
     {"comment": None, "id": 2}),
    # simpleLHSEscape, simpleRHSEscape, escapeAllTheThings: \\$ \\@ in keys, \\. in an output path
    ("escapes", {"$price": 4, "@type": "Order"},
     {"\\$price": "cost\\.usd", "\\@type": "kind"},
     {"cost.usd": 4, "kind": "Order"}),
    # inputArrayToPrefix: a top-level list, its index used in an output key
    ("top_level_list", [{"sku": "a"}, {"sku": "b"}],
     {"*": {"sku": "sku-&1"}},
     {"sku-0": "a", "sku-1": "b"}),
    # identity, passThru: @ at the top with an empty output path copies the whole input
    ("identity", {"a": [1, {"b": None}]},
     {"@": ""},
     {"a": [1, {"b": None}]}),
    # lhsAmpMatch: an & key matches the input key equal to the referenced key; on the left, &0 is the key
    # of the level the spec sits in (here the warehouse-* key), &(0,1) its capture
    ("ampersand_key", {"warehouse-oslo": {"oslo": 12, "bergen": 3}, "warehouse-rome": {"oslo": 1}},
     {"warehouse-*": {"&(0,1)": "local.&(1,1)"}},
     {"local": {"oslo": 12}}),
    # arrayMismatch: a spec expecting a map meets a list (or the reverse): nothing matches there
    ("shape_mismatch", {"customer": [{"name": "x"}], "tags": {"name": "y"}},
     {"customer": {"name": "name"}, "tags": {"0": "first"}},
     None),
    # listKeys: $ over a list writes the index
    ("dollar_of_a_list_index", {"skus": ["a", "b"]},
     {"skus": {"*": {"$": "positions[]"}}},
     {"positions": ["0", "1"]}),
    # transposeComplex9, transposeComplex5: [@(1,path)] as an output list position; a [n] inside an @() path
    ("at_index_lookups", {"lines": [{"sku": "a", "pos": 1}, {"sku": "b", "pos": 0}], "names": ["Apple", "Banana"]},
     {"lines": {"*": {"sku": "bySlot[@(1,pos)]"}}, "@(0,names[1])": "second"},
     {"bySlot": ["b", "a"], "second": "Banana"}),
    # transposeNestedLookup: an @(n,path) key walks on into the value it found
    ("at_key_walks_on", {"vip": True, "customers": {"c1": {"name": "Ana"}, "c2": {"name": "Bo"}}},
     {"vip": {"true": {"@(2,customers)": {"*": {"name": "vipNames[]"}}}}},
     {"vipNames": ["Ana", "Bo"]}),
    # transposeInverseMap1: the value becomes the key, the key the value
    ("invert_a_map", {"codes": {"NO": "Norway", "SE": "Sweden"}},
     {"codes": {"*": {"$": "byName.@(0)"}}},
     {"byName": {"Norway": "NO", "Sweden": "SE"}}),
]


@pytest.mark.parametrize("document, spec, expected", [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_shift_case(document, spec, expected):
    assert canonical(Shift(spec).apply(copy.deepcopy(document))) == canonical(expected)


REFUSED = [
    ([{"a": "b"}], "a spec that is not a map"),
    ({}, "an empty spec"),
    ({"order": {}}, "an empty map as a value"),
    ({"order": 5}, "a number as a value"),
    ({"order": "out.*"}, "a * in an output path"),
    ({"order": "out.$"}, "a $ in an output path"),
    ({"@": {"id": "x"}}, "@ with children"),
    ({"order": "out[x]"}, "a list position that is not a number or reference"),
    ({"id": "a", "id|x": "b"}, "a key given twice"),
    ({"order": "&(1,a)"}, "a reference that is not numeric"),
    ({"order": "lines[&1]-x[&2]"}, "text after a list position"),
]


@pytest.mark.parametrize("spec", [pytest.param(row[0], id=row[1]) for row in REFUSED])
def test_shift_refuses(spec):
    # ShiftrUnitTest's bad specs (and SpecParsingTest): each refused when compiled
    with pytest.raises(JoltSpecError):
        Shift(spec)
