"""LogMessage, DuplicateFlowFile, RetryFlowFile and DistributeLoad (the cases of NiFi's TestLogMessage,
TestDuplicateFlowFile, TestRetryFlowFile and TestDistributeLoad), on the in-process engine, and on
the stateless one where it behaves differently (penalties: a retry loop through StatelessFlow)."""

from __future__ import annotations

import logging

import pytest

from flowactors import Flow
from flowactors.processors.flow_control import DistributeLoad, DuplicateFlowFile, LogMessage, RetryFlowFile
from flowactors.stateless import StatelessFlow
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T


# ---------------------------------------------------------------------------------- LogMessage
@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_log_message_logs_prefix_and_message_evaluated_against_the_flowfile(caplog, engine):
    runner = ProcessorRunner(LogMessage, {"Log Level": "warn", "Log Prefix": "[${who}] ",
                                          "Log Message": "got ${filename}"}, engine=engine)
    runner.enqueue(b"x", {"who": "ops", "filename": "a.txt"})
    with caplog.at_level(logging.DEBUG, logger="flowactors.processors.LogMessage"):
        runner.run()
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, "[ops] got a.txt")]
    [out] = runner.output("success")
    assert runner.read(out) == b"x" and out.attributes["who"] == "ops"


@pytest.mark.parametrize("level, number", [("TRACE", 5), ("Debug", logging.DEBUG), ("info", logging.INFO),
                                           ("WARN", logging.WARNING), ("error", logging.ERROR)])
def test_log_message_level_is_case_insensitive_and_may_be_an_expression(caplog, level, number):
    # a prefix that evaluates blank is left out, as NiFi's
    runner = ProcessorRunner(LogMessage, {"Log Level": "${level}", "Log Prefix": "${missing} ", "Log Message": "hello"})
    runner.enqueue(b"", {"level": level})
    with caplog.at_level(1, logger="flowactors.processors.LogMessage"):
        runner.run()
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(number, "hello")]
    assert len(runner.output("success")) == 1


def test_log_message_below_the_loggers_level_logs_nothing_and_still_passes_on(caplog):
    runner = ProcessorRunner(LogMessage, {"Log Level": "debug", "Log Prefix": "p", "Log Message": "m"})
    runner.enqueue(b"")
    with caplog.at_level(logging.INFO, logger="flowactors.processors.LogMessage"):
        runner.run()
    assert caplog.records == [] and len(runner.output("success")) == 1


def test_log_message_evaluates_prefix_and_message_only_when_the_logger_would_log(caplog, monkeypatch):
    """The docstring's claim: below the logger's level, Log Prefix and Log Message are not evaluated."""
    from flowactors.sdk.processor import PropertyValue
    evaluated = []
    evaluate = PropertyValue.evaluate
    monkeypatch.setattr(PropertyValue, "evaluate", lambda self, *a, **k: evaluated.append(self.raw) or evaluate(
        self, *a, **k))
    runner = ProcessorRunner(LogMessage, {"Log Level": "debug", "Log Prefix": "p${a}", "Log Message": "m${b}"})
    runner.enqueue(b"")
    runner.enqueue(b"")
    with caplog.at_level(logging.INFO, logger="flowactors.processors.LogMessage"):
        evaluated.clear()
        runner.run()
    assert "p${a}" not in evaluated and "m${b}" not in evaluated and len(runner.output("success")) == 2
    with caplog.at_level(logging.DEBUG, logger="flowactors.processors.LogMessage"):
        runner.enqueue(b"")
        runner.run()
    assert "p${a}" in evaluated and "m${b}" in evaluated


def test_log_message_refuses_an_unknown_level_when_validated_and_when_evaluated():
    with pytest.raises(ValueError, match="'loud' is not a log level"):
        ProcessorRunner(LogMessage, {"Log Level": "loud"})
    runner = ProcessorRunner(LogMessage, {"Log Level": "${level}", "Log Message": "m"})
    runner.enqueue(b"", {"level": "loud"})
    with pytest.raises(ValueError, match="Log Level is 'loud'"):
        runner.run()
    assert runner.input_count == 1 and runner.output("success") == []   # nothing lost


# ---------------------------------------------------------------------------------- DuplicateFlowFile
@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_duplicate_sends_the_original_and_copies_sharing_its_content_with_clone_events(engine):
    runner = ProcessorRunner(DuplicateFlowFile, {"Number of Copies": "3"}, engine=engine)
    original = runner.enqueue(b"payload", {"k": "v"})
    runner.run()
    out = runner.output("success")
    assert sorted(f.attributes["copy.index"] for f in out) == ["0", "1", "2", "3"]
    assert {runner.read(f) for f in out} == {b"payload"} and all(f.attributes["k"] == "v" for f in out)
    [kept] = [f for f in out if f.attributes["copy.index"] == "0"]
    assert kept.uuid == original.uuid
    assert {f.claim for f in out} == {original.claim}   # one content claim: nothing copied
    clones = [e for e in runner.events() if e.event_type == T.CLONE]
    assert len(clones) == 3 and {e.flowfile_uuid for e in clones} == {original.uuid}
    assert {u for e in clones for u in e.child_uuids} == {f.uuid for f in out} - {original.uuid}


def test_duplicate_number_of_copies_is_an_expression_and_zero_sends_only_the_original():
    runner = ProcessorRunner(DuplicateFlowFile, {"Number of Copies": "${copies}"})
    runner.enqueue(b"a", {"copies": "2"})
    runner.enqueue(b"b", {"copies": "0"})
    runner.run()
    contents = sorted((runner.read(f), f.attributes["copy.index"]) for f in runner.output("success"))
    assert contents == [(b"a", "0"), (b"a", "1"), (b"a", "2"), (b"b", "0")]


def test_duplicate_refuses_a_count_that_is_not_a_whole_number():
    with pytest.raises(ValueError, match="Number of Copies"):
        ProcessorRunner(DuplicateFlowFile, {"Number of Copies": "-1"})
    runner = ProcessorRunner(DuplicateFlowFile, {"Number of Copies": "${copies}"})
    runner.enqueue(b"a", {"copies": "many"})
    with pytest.raises(ValueError, match="Number of Copies is 'many'"):
        runner.run()
    assert runner.input_count == 1 and runner.output("success") == []


# ---------------------------------------------------------------------------------- RetryFlowFile
def retry(properties=None, attributes=None, engine=None, **kwargs) -> ProcessorRunner:
    runner = ProcessorRunner(RetryFlowFile, properties or {}, engine=engine, **kwargs)
    runner.enqueue(b"data", attributes or {})
    runner.run()
    return runner


def test_retry_without_the_attribute_starts_the_count_at_one_penalized_and_marked_with_this_processor():
    runner = retry()
    [out] = runner.output("retry")
    assert out.attributes["flowfile.retries"] == "1"
    assert out.attributes["flowfile.retries.uuid"] == runner.component_id
    assert out.penalized_until > 0


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_retry_without_penalty_is_not_penalized(engine):
    [out] = retry({"Penalize Retries": "false"}, {"flowfile.retries": "2"}, engine=engine).output("retry")
    assert out.attributes["flowfile.retries"] == "3" and out.penalized_until == 0


def test_retry_counts_up_and_past_the_maximum_goes_to_retries_exceeded_with_the_dynamic_attributes():
    runner = ProcessorRunner(RetryFlowFile, {"Maximum Retries": "2", "reason": "gave up on ${filename}",
                                             "blank": "${missing}"})
    runner.enqueue(b"x", {"filename": "f", "flowfile.retries": "1"})
    runner.run()
    [again] = runner.output("retry")
    assert again.attributes["flowfile.retries"] == "2"
    runner2 = ProcessorRunner(RetryFlowFile, {"Maximum Retries": "2", "reason": "gave up on ${filename}",
                                              "blank": "${missing}"}, name=runner.name)
    runner2.enqueue(b"x", dict(again.attributes))
    runner2.run()
    [done] = runner2.output("retries_exceeded")
    assert done.attributes["reason"] == "gave up on f" and "blank" not in done.attributes
    assert "flowfile.retries" not in done.attributes and "flowfile.retries.uuid" not in done.attributes
    assert done.penalized_until == 0


def test_retry_a_non_numeric_count_is_reset_or_fails_as_configured():
    [reset] = retry({}, {"flowfile.retries": "abc"}).output("retry")
    assert reset.attributes["flowfile.retries"] == "1"
    runner = retry({"Fail on Nonnumerical Overwrite": "true"}, {"flowfile.retries": "abc"})
    [failed] = runner.output("failure")
    assert failed.attributes["flowfile.retries"] == "abc" and runner.output("retry") == []


def test_retry_by_another_processor_fails_warns_or_resets_as_the_reuse_mode_says(caplog):
    reused = {"flowfile.retries": "2", "flowfile.retries.uuid": "another-processor"}
    with caplog.at_level(logging.DEBUG, logger="flowactors.processors.RetryFlowFile"):
        assert len(retry({}, reused).output("failure")) == 1
        [warned] = retry({"Reuse Mode": "Warn on Reuse"}, reused).output("retry")
        [reset] = retry({"Reuse Mode": "Reset Reuse"}, reused).output("retry")
    assert warned.attributes["flowfile.retries"] == "1" and reset.attributes["flowfile.retries"] == "1"
    assert warned.attributes["flowfile.retries.uuid"] != "another-processor"
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.WARNING, logging.DEBUG]


def test_retry_with_another_attribute_and_a_maximum_from_an_expression():
    runner = retry({"Retry Attribute": "attempts", "Maximum Retries": "${max}"}, {"attempts": "4", "max": "5"})
    [out] = runner.output("retry")
    assert out.attributes["attempts"] == "5" and out.attributes["attempts.uuid"] == runner.component_id
    assert len(retry({"Maximum Retries": "${max}"}, {"max": "five"}).output("failure")) == 1


def test_retry_maximum_must_be_a_positive_whole_number_and_the_attribute_must_name_one():
    with pytest.raises(ValueError, match="Maximum Retries"):
        ProcessorRunner(RetryFlowFile, {"Maximum Retries": "0"})
    runner = ProcessorRunner(RetryFlowFile, {"Retry Attribute": "${filename}"})   # no FlowFile to see there
    runner.enqueue(b"x")
    with pytest.raises(ValueError, match="Retry Attribute '\\$\\{filename\\}' names no attribute"):
        runner.run()
    assert runner.input_count == 1


# ---------------------------------------------------------------------------------- DistributeLoad
def distribute(properties: dict, count: int, full: tuple[str, ...] = (), iterations: int = 1,
               engine: str = "in-process") -> ProcessorRunner:
    runner = ProcessorRunner(DistributeLoad, properties, engine=engine)
    runner.backend.full_destinations = lambda: list(full)   # those queues under back pressure
    for _ in range(count):
        runner.enqueue(b"")
    runner.run(iterations, stop=False)
    return runner


def counts(runner: ProcessorRunner) -> list[int]:
    return [len(runner.output(name)) for name in DistributeLoad.relationship_names(runner.properties)]


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_distribute_round_robin_with_weights_and_the_relationship_attribute(engine):
    runner = distribute({"Number of Relationships": "4", "2": "3"}, 12, engine=engine)
    assert counts(runner) == [2, 6, 2, 2]
    assert all(f.attributes["distribute.load.relationship"] == "2" for f in runner.output("2"))
    routes = [e for e in runner.events() if e.event_type == T.ROUTE]
    assert sorted(e.relationship for e in routes) == sorted(["1"] * 2 + ["2"] * 6 + ["3"] * 2 + ["4"] * 2)


def test_distribute_relationships_follow_the_number_of_relationships_and_weights_are_checked():
    assert DistributeLoad.relationship_names({"Number of Relationships": "3"}) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="dynamic property '5' must be named after a relationship"):
        ProcessorRunner(DistributeLoad, {"Number of Relationships": "3", "5": "1"})
    with pytest.raises(ValueError, match="the weight of relationship 2 is 'x'"):
        ProcessorRunner(DistributeLoad, {"Number of Relationships": "3", "2": "x"})


def test_distribute_round_robin_waits_while_any_relationship_is_unavailable():
    runner = distribute({"Number of Relationships": "3"}, 3, full=("2",))
    assert counts(runner) == [0, 0, 0] and runner.input_count == 3   # nothing taken


def test_distribute_next_available_skips_an_unavailable_relationship():
    runner = distribute({"Number of Relationships": "10", "Distribution Strategy": "next available"}, 9,
                        full=("5",))
    assert counts(runner) == [1, 1, 1, 1, 0, 1, 1, 1, 1, 1]


def test_distribute_overflow_fills_the_first_available_relationship():
    runner = distribute({"Number of Relationships": "3", "Distribution Strategy": "overflow"}, 2)
    assert counts(runner) == [2, 0, 0]
    runner.backend.full_destinations = lambda: ["1"]
    runner.enqueue(b"")
    runner.enqueue(b"")
    runner.run(stop=False)
    assert counts(runner) == [2, 2, 0]
    runner.backend.full_destinations = lambda: ["1", "2", "3"]
    runner.enqueue(b"")
    runner.run()
    assert counts(runner) == [2, 2, 0] and runner.input_count == 1   # none available: nothing taken


@pytest.mark.parametrize("penalize", [True, False])
def test_a_retry_loop_on_the_stateless_engine_needs_retries_unpenalized(penalize):
    flow = Flow(f"retry-{penalize}")
    retry = flow.add(RetryFlowFile, "retry", properties={"Maximum Retries": "2", "Penalize Retries": penalize},
                     auto_terminate=["failure"])
    flow.connect(flow.add_input_port("in"), retry)
    flow.connect(retry, retry, relationships=["retry"])
    flow.connect(retry, flow.add_output_port("out"), relationships=["retries_exceeded"])
    with StatelessFlow(flow) as stateless:
        result = stateless.trigger([b"x"])
    if penalize:   # the penalized FlowFile waits in the loop: left over, the trigger fails
        assert not result.success and "no processor took" in result.reason
    else:
        assert result.success and [o.content for o in result.outputs["out"]] == [b"x"]


def test_distribute_keeps_routing_while_one_destination_is_really_full(tmp_path):
    """NiFi's @TriggerWhenAnyDestinationAvailable in a running flow: relationship 1's queue (back
    pressure at 5, before a disabled processor, so it never drains) fills, and next available sends
    the rest to 2; a processor triggered only while no destination is full would stall there."""
    from flowactors import Flow, run_flow
    from flowactors.driver.running import queue_totals
    from flowactors.processors import GenerateFlowFile, UpdateAttribute
    flow = Flow("spread")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Batch Size": 1, "Max FlowFiles": 40})
    spread = flow.add(DistributeLoad, "spread", batch_size=1, properties={
        "Number of Relationships": "2", "Distribution Strategy": "next available"})
    held = flow.add(UpdateAttribute, "held", disabled=True)
    passed = flow.add(UpdateAttribute, "passed", auto_terminate=("success",))
    flow.connect(generate, spread)
    flow.connect(spread, held, "1", name="one", back_pressure_object_threshold=5)
    flow.connect(spread, passed, "2", name="two")
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60)
    one = queue_totals(final)["one"]["count"]
    assert 5 <= one < 10   # filled to its threshold (a delivery can be on its way as it fills), then skipped
    totals = {p["name"]: p for p in final["processors"]}
    assert totals["spread"]["flowfiles_in"] == 40 and totals["passed"]["flowfiles_in"] == 40 - one
