"""ControlRate (the cases of NiFi's TestControlRate), its clock replaced so that no test waits."""

from __future__ import annotations

import logging

import pytest

from flowactors import Flow
from flowactors.processors.rate import ControlRate
from flowactors.stateless import StatelessFlow
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T


class Clock:
    """A clock a test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def rate(properties: dict, contents: list[bytes] | None = None, attributes: list[dict] | None = None,
         engine: str | None = None, **kwargs) -> tuple[ProcessorRunner, Clock]:
    runner = ProcessorRunner(ControlRate, {"Time Duration": "1 sec", **properties}, engine=engine, **kwargs)
    clock = runner.processor.clock = Clock()
    contents = contents if contents is not None else [b"x"] * len(attributes or [])
    for index, content in enumerate(contents):
        runner.enqueue(content, (attributes or [{}] * len(contents))[index])
    return runner, clock


def held(runner: ProcessorRunner) -> int:
    """FlowFiles waiting in the input queue; none of them may be in flight (taken)."""
    assert runner.queues["input"].in_flight == 0
    return runner.queues["input"].queued


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_flowfile_count_holds_the_rest_in_the_queue_until_the_window_allows(engine):
    runner, clock = rate({"Rate Control Criteria": "flowfile count", "Maximum Rate": "3"}, [b"1", b"2", b"3", b"4"],
                         engine=engine)
    runner.run(4, stop=False)
    assert runner.contents("success") == [b"1", b"2", b"3"] and held(runner) == 1
    runner.run(50, stop=False)
    assert len(runner.output("success")) == 3 and runner.output("failure") == [] and held(runner) == 1
    clock.now += 1
    runner.run(5)
    assert runner.contents("success") == [b"1", b"2", b"3", b"4"] and held(runner) == 0


def test_grouping_gives_each_value_a_rate_of_its_own_and_a_held_group_does_not_hold_others():
    groups = ["a", "a", "a", "b", None, "b", "b"]
    runner, clock = rate({"Rate Control Criteria": "flowfile count", "Maximum Rate": "2", "Grouping Attribute": "g"},
                         attributes=[{} if g is None else {"g": g} for g in groups])
    runner.run(3, stop=False)
    passed = [f.attributes.get("g") for f in runner.output("success")]
    assert passed == ["a", "a", "b", None, "b"] and held(runner) == 2   # no attribute: a group of its own
    clock.now += 1
    runner.run()
    assert sorted(f.attributes.get("g", "-") for f in runner.output("success")) == ["-", "a", "a", "a", "b", "b", "b"]


def test_data_rate_lets_the_flowfile_past_the_maximum_through_then_waits_out_the_excess():
    runner, clock = rate({"Rate Control Criteria": "data rate", "Maximum Rate": "10 B"}, [b"x" * 15, b"y", b"z"])
    runner.run(stop=False)
    assert runner.contents("success") == [b"x" * 15] and held(runner) == 2
    clock.now += 1   # the window is empty again, but 5 bytes too many went: half a period more
    runner.run(stop=False)
    assert len(runner.output("success")) == 1
    clock.now += 0.25
    runner.run(stop=False)
    assert len(runner.output("success")) == 1
    clock.now += 0.25
    runner.run()
    assert runner.contents("success") == [b"x" * 15, b"y", b"z"]


def test_data_or_flowfile_count_is_held_by_whichever_is_reached_first():
    by_bytes, clock = rate({"Rate Control Criteria": "data rate or flowfile count", "Maximum Data Rate": "22 B",
                            "Maximum FlowFile Rate": "3"}, [b"test data 1", b"test data 2", b"test data 3"])
    by_bytes.run(4, stop=False)
    assert len(by_bytes.output("success")) == 2 and held(by_bytes) == 1
    clock.now += 1.5
    by_bytes.run()
    assert len(by_bytes.output("success")) == 3
    by_count, _ = rate({"Rate Control Criteria": "data rate or flowfile count", "Maximum Data Rate": "1 MB",
                        "Maximum FlowFile Rate": "2"}, [b"a", b"b", b"c"])
    by_count.run(3)
    assert by_count.contents("success") == [b"a", b"b"] and held(by_count) == 1


def test_attribute_value_counts_the_attribute_and_a_bad_value_goes_to_failure():
    runner, clock = rate({"Rate Control Criteria": "attribute value", "Maximum Rate": "10",
                          "Rate Controlled Attribute": "cost"},
                         attributes=[{"cost": "4", "n": "1"}, {"cost": "007", "n": "2"}, {"cost": "1", "n": "3"}])
    runner.run(2, stop=False)
    assert [f.attributes["n"] for f in runner.output("success")] == ["1", "2"] and held(runner) == 1
    for bad in ({}, {"cost": "-3"}, {"cost": "0"}, {"cost": "ten"}):
        runner.enqueue(b"", bad)
    clock.now += 2   # 1 too many went (11 of 10): the next attempt starts a wait of a tenth of a period
    runner.run(stop=False)
    assert len(runner.output("success")) == 2 and held(runner) == 5
    clock.now += 0.125
    runner.run(6)   # each FlowFile with a bad value ends its batch, as NiFi's filter
    assert [f.attributes["n"] for f in runner.output("success")] == ["1", "2", "3"]
    assert [f.attributes.get("cost") for f in runner.output("failure")] == [None, "-3", "0", "ten"]


def test_route_to_rate_exceeded_adds_the_relationship_and_routes_the_excess_at_once():
    assert ControlRate.relationship_names({"Rate Exceeded Strategy": "Route to 'rate exceeded'"}) == [
        "success", "failure", "rate exceeded"]
    runner, _ = rate({"Rate Control Criteria": "flowfile count", "Maximum Rate": "3",
                      "Rate Exceeded Strategy": "Route to 'rate exceeded'"}, [b"1", b"2", b"3", b"4", b"5"])
    runner.run()
    assert runner.contents("success") == [b"1", b"2", b"3"] and runner.contents("rate exceeded") == [b"4", b"5"]
    routes = [e.relationship for e in runner.events() if e.event_type == T.ROUTE]
    assert routes == ["success"] * 3 + ["rate exceeded"] * 2


def test_a_bad_attribute_value_is_logged_with_either_strategy(caplog):
    """A FlowFile going to failure gets one error line naming the attribute and its value, whether
    the excess is held or routed (the routing path used to send it there silently)."""
    for strategy in ("Hold FlowFile", "Route to 'rate exceeded'"):
        caplog.clear()
        runner, _ = rate({"Rate Control Criteria": "attribute value", "Maximum Rate": "10",
                          "Rate Controlled Attribute": "cost", "Rate Exceeded Strategy": strategy},
                         attributes=[{"cost": "ten"}])
        with caplog.at_level(logging.ERROR, logger="flowactors.processors.rate"):
            runner.run()
        assert [f.attributes["cost"] for f in runner.output("failure")] == ["ten"]
        [record] = caplog.records
        assert "attribute 'cost' is 'ten', not a positive whole number" in record.getMessage()


def test_one_trigger_takes_at_most_the_batch_size():
    runner, _ = rate({"Rate Control Criteria": "flowfile count", "Maximum Rate": "5555"}, [b"x"] * 25, batch_size=10)
    runner.run(stop=False)
    assert len(runner.output("success")) == 10 and held(runner) == 15
    runner.run(2)
    assert len(runner.output("success")) == 25


@pytest.mark.parametrize("properties, problem", [
    ({}, "'Maximum Rate': must be set with Rate Control Criteria 'data rate'"),
    ({"Maximum Rate": "many"}, "'Maximum Rate'"),
    ({"Rate Control Criteria": "flowfile count", "Maximum Rate": "1 MB"}, "must be a positive whole number"),
    ({"Rate Control Criteria": "attribute value", "Maximum Rate": "5"}, "'Rate Controlled Attribute' must be set"),
    ({"Rate Control Criteria": "data rate or flowfile count", "Maximum Data Rate": "1 MB"},
     "'Maximum FlowFile Rate': must be set"),
    ({"Maximum Rate": "1 MB", "Time Duration": "500 ms"}, "less than the least Time Duration, 1 sec"),
])
def test_a_configuration_missing_what_its_criteria_needs_is_refused(properties, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        ProcessorRunner(ControlRate, {"Time Duration": "1 sec", **properties})


def stateless_rate(strategy: str) -> Flow:
    """in -> ControlRate (one FlowFile a minute) -> out; the excess, when routed, to exceeded."""
    flow = Flow(f"rate-{strategy[:4].lower()}")
    rate = flow.add(ControlRate, "rate", properties={"Rate Control Criteria": "flowfile count", "Maximum Rate": "1",
                                                     "Rate Exceeded Strategy": strategy},
                    auto_terminate=["failure"])
    flow.connect(flow.add_input_port("in"), rate)
    flow.connect(rate, flow.add_output_port("out"), relationships=["success"])
    if strategy != "Hold FlowFile":
        flow.connect(rate, flow.add_output_port("exceeded"), relationships=["rate exceeded"])
    return flow


def test_on_the_stateless_engine_a_held_flowfile_fails_the_trigger_and_routing_the_excess_does_not():
    with StatelessFlow(stateless_rate("Hold FlowFile")) as flow:
        held_back = flow.trigger([b"1", b"2"])
    assert not held_back.success and "no processor took" in held_back.reason
    with StatelessFlow(stateless_rate("Route to 'rate exceeded'")) as flow:
        routed = flow.trigger([b"1", b"2"])
    assert routed.success
    assert [o.content for o in routed.outputs["out"]] == [b"1"]
    assert [o.content for o in routed.outputs["exceeded"]] == [b"2"]
