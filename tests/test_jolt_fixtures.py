"""Jolt's own test cases (tests/jolt_cases, taken from bazaarvoice/jolt's fixtures) on our Jolt.

Results are compared strictly: key order aside, an integer and a float are different values (as
Java's Integer and Double are), and lists keep their order.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from flowactors.processors.jolt.cardinality import Cardinality
from flowactors.processors.jolt.chain import Chain
from flowactors.processors.jolt.default import Default
from flowactors.processors.jolt.modify import Modify
from flowactors.processors.jolt.paths import JoltSpecError
from flowactors.processors.jolt.remove import Remove
from flowactors.processors.jolt.shift import Shift
from flowactors.processors.jolt.sort import Sort

CASES = Path(__file__).parent / "jolt_cases"
COMPILE = {"shift": Shift, "default": Default, "remove": Remove, "cardinality": Cardinality}


def cases(name: str) -> list:
    rows = [json.loads(line) for line in (CASES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [pytest.param(row, id=f"{row['case']}:{row.get('mode', '')}".rstrip(":")) for row in rows]


def canonical(value) -> str:
    """Equal for equal JSON documents; 1 and 1.0 differ."""
    return json.dumps(value, sort_keys=True)


def check(row: dict, compile_spec, run) -> None:
    if row.get("spec_error"):
        with pytest.raises(JoltSpecError):
            compile_spec(row["spec"])
        return
    transform = compile_spec(row["spec"])
    assert canonical(run(transform, copy.deepcopy(row["input"]))) == canonical(row["expected"])


@pytest.mark.parametrize("row", cases("shift"))
def test_shift(row):
    check(row, Shift, lambda t, doc: t.apply(doc))


@pytest.mark.parametrize("row", cases("default"))
def test_default(row):
    check(row, Default, lambda t, doc: t.apply(doc))


@pytest.mark.parametrize("row", cases("remove"))
def test_remove(row):
    check(row, Remove, lambda t, doc: t.apply(doc))


@pytest.mark.parametrize("row", cases("cardinality"))
def test_cardinality(row):
    check(row, Cardinality, lambda t, doc: t.apply(doc))


@pytest.mark.parametrize("row", cases("modify"))
def test_modify(row):
    check(row, lambda spec: Modify(spec, row.get("mode", "overwrite")),
          lambda t, doc: t.apply(doc, row.get("context")))


@pytest.mark.parametrize("row", cases("chain_sort"))
def test_chain_and_sort(row):
    if row.get("operation") == "sort":
        sorted_document = Sort().apply(row["input"])
        assert json.dumps(sorted_document) == json.dumps(row["expected"])   # key order is the point
        return
    check(row, Chain, lambda t, doc: t.apply(doc))


def test_the_case_files_hold_every_operation():
    counts = {name: len(cases(name)) for name in ("shift", "default", "remove", "cardinality", "modify", "chain_sort")}
    assert counts == {"shift": 62, "default": 13, "remove": 11, "cardinality": 5, "modify": 85, "chain_sort": 12}
