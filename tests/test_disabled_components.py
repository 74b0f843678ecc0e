"""Disabled components: a disabled processor, port or controller service is loaded and kept, validated
loosely, never started; FlowFiles queue up before it; the status says so."""

from __future__ import annotations

import pytest

from flowactors import Flow, FlowValidationError, run_flow
from flowactors.engine.placement import plan
from flowactors.ops.status_view import status_text
from flowactors.processors import GenerateFlowFile, LookupRecord, UpdateAttribute
from flowactors.services import CSVReader, JsonRecordSetWriter, SimpleKeyValueLookupService


def disabled_flow() -> Flow:
    flow = Flow("waiting")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Batch Size": 1, "Max FlowFiles": 3})
    # misconfigured and unwired: a disabled processor is not validated (as NiFi)
    update = flow.add(UpdateAttribute, "update", properties={"bad": "${a:nope()}"}, disabled=True)
    flow.connect(generate, update)
    return flow


def test_a_disabled_processor_is_validated_loosely_and_round_trips():
    flow = disabled_flow().validate()
    again = Flow.from_json(flow.to_json())
    assert again.processors["update"].disabled is True and again.processors["generate"].disabled is False
    assert again.to_dict() == flow.to_dict()
    again.validate()
    flow.processors["update"].disabled = False   # enabled, its problems count
    problems = flow.problems()
    assert any(p.startswith("processor 'update': ") and "relationship 'success'" in p for p in problems)
    assert any(p.startswith("processor 'update': property 'bad'") for p in problems)


def test_a_disabled_processor_still_gets_structural_problems():
    flow = disabled_flow()
    flow.processors["update"].disabled = "yes"
    flow.processors["update"].auto_terminate = ("nothing",)
    problems = flow.problems()
    assert "processor 'update': disabled must be true or false, not 'yes'" in problems
    assert "processor 'update': cannot auto-terminate unknown relationship 'nothing'" in problems


def test_disabled_ports_round_trip():
    flow = Flow("ports")
    port = flow.add_input_port("in", disabled=True)
    out = flow.add_output_port("out")
    flow.connect(port, out)
    again = Flow.from_json(flow.validate().to_json())
    assert again.processors["in"].disabled and not again.processors["out"].disabled


def lookup_flow(*, service_disabled: bool, processor_disabled: bool = False) -> Flow:
    flow = Flow("lookups")
    flow.add_service(CSVReader, "reader")
    flow.add_service(JsonRecordSetWriter, "writer")
    flow.add_service(SimpleKeyValueLookupService, "colours", properties={"red": "#f00"}, disabled=service_disabled)
    generate = flow.add(GenerateFlowFile, "generate")
    lookup = flow.add(LookupRecord, "lookup", properties={
        "Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "colours", "key": "/colour"},
        auto_terminate=["success", "failure"], disabled=processor_disabled)
    flow.connect(generate, lookup)
    return flow


def test_a_disabled_service_round_trips_and_refuses_the_processors_using_it():
    flow = lookup_flow(service_disabled=False)
    assert flow.problems() == [] and flow.disabled_services == set()
    flow = lookup_flow(service_disabled=True)
    again = Flow.from_json(flow.to_json())
    assert again.disabled_services == {"colours"}
    assert [s["disabled"] for s in again.to_dict()["controller_services"]] == [False, False, True]
    with pytest.raises(FlowValidationError) as caught:
        again.validate()
    assert caught.value.problems == ["processor 'lookup' uses controller service 'colours', which is disabled: "
                                     "enable the service, or disable the processor too"]
    lookup_flow(service_disabled=True, processor_disabled=True).validate()


# ---------------------------------------------------------------------------------- running
def test_placement_gives_a_disabled_processor_no_task_and_keeps_its_queue():
    flow = disabled_flow()
    placement = plan(flow, "shared", executors=2)
    assert [task for p in placement.executors for task in p.tasks] == [("generate", 0)]
    assert placement.queue_home() == {"generate.success.update": 0}
    everything_disabled = disabled_flow()
    everything_disabled.processors["generate"].disabled = True
    assert plan(everything_disabled, "shared", 2).queue_home() == {"generate.success.update": 0}


def test_flowfiles_queue_before_a_disabled_processor_and_the_status_says_disabled(tmp_path):
    final = run_flow(disabled_flow(), tmp_path / "repository", engine="in-process", timeout=60)
    by_name = {p["name"]: p for p in final["processors"]}
    assert by_name["update"]["disabled"] is True and by_name["update"]["tasks"] == 0
    assert by_name["generate"]["disabled"] is False and by_name["generate"]["flowfiles_out"] == 3
    [queue] = final["queues"]
    assert queue["destination"] == "update" and queue["count"] == 3   # the run ended idle, not by its timeout
    rows = {cells[0]: cells[-1] for line in status_text(final).splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) > 2}
    assert rows["update"] == "disabled" and rows["generate"] == "idle"


def test_a_flow_whose_processor_uses_a_disabled_service_is_refused_at_start(tmp_path):
    with pytest.raises(FlowValidationError) as caught:
        run_flow(lookup_flow(service_disabled=True), tmp_path / "repository", engine="in-process", timeout=30)
    assert caught.value.problems == ["processor 'lookup' uses controller service 'colours', which is disabled: "
                                     "enable the service, or disable the processor too"]
    assert not (tmp_path / "repository" / "flowfile").exists()   # refused before anything started


def test_a_disabled_service_is_never_among_those_to_enable():
    flow = lookup_flow(service_disabled=True, processor_disabled=True)
    assert [s.path for s in flow.services_used_by(["lookup"])] == ["reader", "writer"]
    assert [s.path for s in lookup_flow(service_disabled=False).services_used_by(["lookup"])] == [
        "reader", "writer", "colours"]


def test_the_stateless_engine_never_runs_a_disabled_processor():
    from flowactors.stateless import StatelessFlow, TriggerFailed
    with StatelessFlow(disabled_flow()) as flow:   # its bad expression would fail a trigger that ran it
        result = flow.trigger()
    assert not result.success and isinstance(result.failure, TriggerFailed)
    assert "1 in 'generate.success.update'" in str(result.failure) and "waiting for a disabled one" in str(result.failure)
    assert result.commits == 1   # GenerateFlowFile's: the disabled processor never ran
