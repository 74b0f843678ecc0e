"""Every example NiFi 2 Python processor (examples/nifi_python/), unmodified, in one flow on real Ray.

Pluralize pins inflection 0.5.0 (``ProcessorDetails.dependencies``) and Titleize, in a package,
0.5.1 (its ``requirements.txt``): each runs in an actor of its own whose Ray ``runtime_env`` pip
installed its version, and says which one it saw. The flow is run from its JSON definition, so the
way a definition names these processors is exercised too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowactors.driver.loading import load_definition
from flowactors.nifi import add_python_processor
from flowactors import Flow
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GenerateFlowFile, PutFile, UpdateAttribute
from flowactors.services import JsonRecordSetWriter, JsonTreeReader
from repositories.provenance import WriteAheadProvenanceRepository

pytestmark = pytest.mark.ray
EXTENSIONS = Path(__file__).resolve().parent.parent / "examples" / "nifi_python"
RECORDS = "\n".join(json.dumps(r) for r in [
    {"id": 1, "region": "eu", "amount": 5}, {"id": 2, "region": "us", "amount": -1},
    {"id": 3, "region": "eu", "amount": 7}, {"id": 4, "region": "us", "amount": 2, "drop": True},
    {"id": 5, "region": "us", "amount": 3}]) + "\n"


def build_flow(out: Path) -> Flow:
    flow = Flow("nifi-python", settings={"checkpoint_interval": 1.0})
    greet = add_python_processor(flow, EXTENSIONS / "EmitGreetings.py", "greet",
                                      properties={"Names": "ann, bob, cy, dee"}, run_schedule="0 sec")
    number = add_python_processor(flow, "NumberLines", "number", extensions=EXTENSIONS,
                                       properties={"Prefix": "${greeting.name}#"}, auto_terminate=["failure"])
    stamp = add_python_processor(flow, "StampSequence", "stamp", extensions=EXTENSIONS, auto_terminate=["failure"])
    route = add_python_processor(flow, "RouteOnField", "route", extensions=EXTENSIONS,
                                      properties={"Attribute": "greeting.name", "Routes": "ann,bob,cy"},
                                      auto_terminate=["failure"])
    plural = add_python_processor(flow, EXTENSIONS / "Pluralize.py", "plural", auto_terminate=["failure"])
    title = add_python_processor(flow, "Titleize", "title", extensions=EXTENSIONS, auto_terminate=["failure"])
    parse = add_python_processor(flow, "ParseJson", "parse", extensions=EXTENSIONS, properties={"Indent": 1})
    document = flow.add(GenerateFlowFile, "document", properties={
        "Custom Text": '{"b": 1, "a": [true, null]}', "Max FlowFiles": 1})
    batch = flow.add(GenerateFlowFile, "batch", properties={"Custom Text": RECORDS, "Max FlowFiles": 1})
    flow.add_service(JsonTreeReader, "json-in")
    flow.add_service(JsonRecordSetWriter, "json-lines", properties={"Output Grouping": "One Line Per Object"})
    tag = add_python_processor(flow, "TagRecords", "tag", extensions=EXTENSIONS, properties={
        "Record Reader": "json-in", "Record Writer": "json-lines", "Partition Field": "region",
        "batch": "${filename}"}, auto_terminate=["failure"])
    name = flow.add(UpdateAttribute, "name", properties={"filename": "${uuid}"})
    collect = flow.add(PutFile, "collect", properties={"Directory": str(out)}, auto_terminate=["success", "failure"])
    flow.connect(greet, number)
    flow.connect(number, stamp)
    flow.connect(stamp, route)
    flow.connect(route, plural, "ann")
    flow.connect(route, title, "bob")
    flow.connect(route, parse, "cy")
    flow.connect(document, parse)
    flow.connect(batch, tag)
    flow.connect(route, name, "unmatched")
    for source in (plural, title):
        flow.connect(source, name)
    flow.connect(parse, name, ["success", "failure"])
    flow.connect(tag, name, ["success", "rejected"])
    flow.connect(name, collect)
    return flow


def test_every_example_processor_runs_unmodified_in_one_flow_on_ray(ray_session, tmp_path):
    out = tmp_path / "out"
    definition = build_flow(out).to_json()
    flow = load_definition(definition)
    assert flow.to_json() == definition
    assert json.loads(definition)["processors"][0]["type"] == f"nifi-python:EmitGreetings@{EXTENSIONS}/EmitGreetings.py"
    final = run_flow(flow, tmp_path / "repository", timeout=240)
    totals = processor_totals(final)
    assert sum(p["errors"] for p in final["processors"]) == 0, [p["recent_errors"] for p in final["processors"]]
    assert totals["greet"]["flowfiles_out"] == 4

    provenance = WriteAheadProvenanceRepository(tmp_path / "repository" / "provenance")
    try:
        sent = [e.updated_attributes for e in provenance.search(event_type="SEND", limit=None)]
    finally:
        provenance.close()
    contents = {attributes["uuid"]: (out / attributes["uuid"]).read_text() for attributes in sent}
    greeted = {a["greeting.name"]: a for a in sent if "greeting.name" in a}
    assert sorted(greeted) == ["ann", "bob", "cy", "dee"]
    # the state kept a sequence across the FlowFiles; NumberLines numbered both lines of each
    assert sorted(int(a["sequence.number"]) for a in greeted.values()) == [1, 2, 3, 4]
    assert {a["line.count"] for a in greeted.values()} == {"2"}
    assert {name: a["route"] for name, a in greeted.items()} == {"ann": "ann", "bob": "bob", "cy": "cy",
                                                                 "dee": "unmatched"}
    assert contents[greeted["dee"]["uuid"]] == "dee#1 Hello\ndee#2 dee\n"
    # each pinned processor ran with its own version of inflection, installed by Ray's runtime_env pip
    assert greeted["ann"]["inflection.version"] == "0.5.0"
    assert contents[greeted["ann"]["uuid"]] == "ann#1s Hellos ann#2s anns"
    assert greeted["bob"]["inflection.version"] == "0.5.1"
    assert contents[greeted["bob"]["uuid"]] == "Bob#1 Hello\nBob#2 Bob\n"
    # ParseJson: not JSON -> failure with the reason as an attribute, the content unchanged
    assert greeted["cy"]["json.error"].startswith("Expecting value")
    assert contents[greeted["cy"]["uuid"]] == "cy#1 Hello\ncy#2 cy\n"
    parsed = [a for a in sent if a.get("json.type") == "dict"]
    assert len(parsed) == 1
    assert contents[parsed[0]["uuid"]] == '{\n "a": [\n  true,\n  null\n ],\n "b": 1\n}'

    # TagRecords: one FlowFile per relationship and partition, the partition as attributes
    records = {(a.get("region"), a["record.count"]): [json.loads(line) for line in contents[a["uuid"]].splitlines()]
               for a in sent if "record.count" in a}
    assert set(records) == {(None, "1"), ("eu", "2"), ("us", "1")}
    assert [r["id"] for r in records[("eu", "2")]] == [1, 3]
    assert [r["id"] for r in records[("us", "1")]] == [5]
    assert [r["id"] for r in records[(None, "1")]] == [2]  # rejected: a negative amount
    batch_names = {r["batch"] for rs in records.values() for r in rs}
    assert len(batch_names) == 1 and batch_names != {"${filename}"}
