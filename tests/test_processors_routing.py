"""RouteOnAttribute, RouteOnContent and Funnel."""

from __future__ import annotations

import pytest

from flowactors.processors import Funnel, RouteOnAttribute, RouteOnContent
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines


def routes(runner: ProcessorRunner) -> dict[str, list[str]]:
    return {e.flowfile_uuid: e.relationship for e in runner.events() if e.event_type == T.ROUTE}


# ---------------------------------------------------------------------------------- RouteOnAttribute
def test_relationships_depend_on_the_properties():
    names = RouteOnAttribute.relationship_names({"big": "${size:gt(10)}", "red": "${color:equals('red')}"})
    assert names == ["big", "red", "unmatched"]
    names = RouteOnAttribute.relationship_names({"Routing Strategy": RouteOnAttribute.ANY_MATCH, "big": "true"})
    assert names == ["matched", "unmatched"]
    assert RouteOnAttribute.relationship_names({}) == ["unmatched"]


def test_route_to_property_name_clones_for_each_match():
    runner = ProcessorRunner(RouteOnAttribute, {"big": "${size:gt(10)}", "red": "${color:equals('red')}"})
    both = runner.enqueue(b"", {"size": "20", "color": "red"})
    big = runner.enqueue(b"", {"size": "20", "color": "blue"})
    neither = runner.enqueue(b"", {"size": "1", "color": "blue"})
    runner.run()
    big_out = runner.output("big")
    red_out = runner.output("red")
    assert sorted(f.attributes["size"] + f.attributes["color"] for f in big_out) == ["20blue", "20red"]
    assert [f.attributes["color"] for f in red_out] == ["red"]
    assert [f.uuid for f in runner.output("unmatched")] == [neither.uuid]
    assert all(f.attributes["RouteOnAttribute.Route"] == "big" for f in big_out)
    assert red_out[0].attributes["RouteOnAttribute.Route"] == "red"
    # the FlowFile matching both went on as itself to one relationship and as a clone to the other
    copies = [f for f in big_out + red_out if f.attributes["color"] == "red"]
    assert both.uuid in {f.uuid for f in copies} and len({f.uuid for f in copies}) == 2
    events = runner.events()
    [clone] = [e for e in events if e.event_type == T.CLONE]
    assert clone.flowfile_uuid == both.uuid and clone.child_uuids == [c.uuid for c in copies if c.uuid != both.uuid]
    route = routes(runner)
    assert len(route) == 4
    assert route[big.uuid] == "big" and route[neither.uuid] == "unmatched"


@pytest.mark.parametrize("strategy,expected", [
    (RouteOnAttribute.ALL_MATCH, {"matched": ["both"], "unmatched": ["one", "none"]}),
    (RouteOnAttribute.ANY_MATCH, {"matched": ["both", "one"], "unmatched": ["none"]}),
])
def test_all_and_any_strategies(strategy, expected):
    runner = ProcessorRunner(RouteOnAttribute, {"Routing Strategy": strategy, "a": "${a}", "b": "${b:equals('yes')}"})
    runner.enqueue(b"", {"id": "both", "a": "true", "b": "yes"})
    runner.enqueue(b"", {"id": "one", "a": "TRUE", "b": "no"})
    runner.enqueue(b"", {"id": "none", "a": "false"})
    runner.run()
    for relationship, ids in expected.items():
        out = runner.output(relationship)
        assert [f.attributes["id"] for f in out] == ids
        assert all(f.attributes["RouteOnAttribute.Route"] == relationship for f in out)
        assert all(routes(runner)[f.uuid] == relationship for f in out)


@pytest.mark.parametrize("properties", [{}, {"unmatched": "true"}, {"x": "${unclosed"},
                                        {"Routing Strategy": "Route somewhere", "x": "true"}])
def test_route_on_attribute_invalid_configurations(properties):
    assert RouteOnAttribute.validate_properties(properties)


# ---------------------------------------------------------------------------------- RouteOnContent
def test_route_on_content_exact_match():
    runner = ProcessorRunner(RouteOnContent, {"digits": r"\d+", "word": r"[a-z]+"})
    runner.enqueue(b"12345")
    runner.enqueue(b"abc")
    runner.enqueue(b"abc123")
    runner.run()
    assert runner.contents("digits") == [b"12345"]
    assert runner.contents("word") == [b"abc"]
    assert runner.contents("unmatched") == [b"abc123"]
    assert sorted(routes(runner).values()) == ["digits", "unmatched", "word"]


def test_route_on_content_contains_with_clones_and_expressions():
    runner = ProcessorRunner(RouteOnContent, {"Match Requirement": RouteOnContent.CONTAIN,
                                              "digits": r"\d", "named": "${wanted}"})
    runner.enqueue(b"abc123", {"wanted": "abc"})
    runner.enqueue(b"xyz", {"wanted": "abc"})
    runner.run()
    assert runner.contents("digits") == [b"abc123"]
    assert runner.contents("named") == [b"abc123"]
    assert runner.contents("unmatched") == [b"xyz"]
    assert len([e for e in runner.events() if e.event_type == T.CLONE]) == 1
    assert len(routes(runner)) == 3


def test_route_on_content_buffer_size_and_charset():
    runner = ProcessorRunner(RouteOnContent, {"Match Requirement": RouteOnContent.CONTAIN, "found": "NEEDLE",
                                              "Content Buffer Size": "10 B"})
    runner.enqueue(b"NEEDLE" + b"x" * 10)
    runner.enqueue(b"x" * 10 + b"NEEDLE")
    runner.run()
    assert [len(c) for c in runner.contents("found")] == [16]
    assert runner.contents("unmatched") == [b"x" * 10 + b"NEEDLE"]

    runner = ProcessorRunner(RouteOnContent, {"umlaut": "ä+", "Character Set": "ISO-8859-1"})
    runner.enqueue("ää".encode("latin-1"))
    runner.run()
    assert len(runner.output("umlaut")) == 1


def test_route_on_content_relationships_and_validation():
    assert RouteOnContent.relationship_names({"a": "x", "b": "y"}) == ["a", "b", "unmatched"]
    assert RouteOnContent.validate_properties({"a": "(unclosed"})
    assert RouteOnContent.validate_properties({})
    assert RouteOnContent.validate_properties({"unmatched": "x"})
    assert not RouteOnContent.validate_properties({"a": "x"})


# ---------------------------------------------------------------------------------- Funnel
def test_funnel_passes_everything_in_one_commit_without_events():
    runner = ProcessorRunner(Funnel, batch_size=50)
    sent = [runner.enqueue(b"%d" % i) for i in range(120)]
    commits = runner.backend.commits
    runner.run(3)
    assert [f.uuid for f in runner.output("success")] == [f.uuid for f in sent]
    assert runner.backend.commits - commits == 3  # 50 + 50 + 20: one commit per batch
    assert runner.events() == []


def test_route_on_content_invalid_expression_regex_is_no_match():
    runner = ProcessorRunner(RouteOnContent, {"Match Requirement": RouteOnContent.CONTAIN, "p": "${pattern}"})
    runner.enqueue(b"abc", {"pattern": "(unclosed"})
    runner.enqueue(b"abc", {"pattern": "b"})
    runner.run()
    assert [f.attributes["pattern"] for f in runner.output("unmatched")] == ["(unclosed"]
    assert [f.attributes["pattern"] for f in runner.output("p")] == ["b"]
