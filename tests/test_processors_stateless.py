"""ExecuteStateless, through ProcessorRunner on every engine: success, failure, timeout, batches."""

from __future__ import annotations

import pytest

from flowactors.processors import ExecuteStateless
from flowactors.testing import ProcessorRunner
from stateless_flows import checking_flow

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on every engine

FLOW = "stateless_flows:checking_flow"


def test_outputs_become_children_and_the_original_goes_on():
    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": FLOW, "Failure Ports": "bad"})
    original = runner.enqueue(b"fine data", {"filename": "a.txt", "team": "blue"})
    runner.run()
    [output] = runner.output("output")
    assert runner.read(output) == b"fine data [checked]"
    assert output.attributes["checked"] == "yes" and output.attributes["team"] == "blue"
    assert output.attributes["flowactors.stateless.port"] == "out" and output.uuid != original.uuid
    assert [f.uuid for f in runner.output("original")] == [original.uuid]
    assert runner.output("failure") == [] and runner.output("timeout") == []


def test_a_failed_trigger_sends_the_input_to_failure_with_the_reason():
    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": FLOW, "Failure Ports": "bad"})
    runner.enqueue(b"please reject me", {"filename": "b.txt"})
    runner.run()
    [failed] = runner.output("failure")
    assert runner.read(failed) == b"please reject me"
    assert "failure port 'bad' (from 'route')" in failed.attributes["flowactors.failure.reason"]
    assert failed.attributes["flowactors.failure.processor"] == "route"
    assert runner.output("output") == [] and runner.output("original") == []


def test_a_trigger_over_the_timeout_goes_to_timeout(tmp_path):
    definition = tmp_path / "flow.json"
    checking_flow().save(definition)  # a JSON definition this time
    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": str(definition), "Dataflow Timeout": "0 sec"})
    runner.enqueue(b"slow enough", {})
    runner.run()
    [late] = runner.output("timeout")
    assert "longer than its timeout" in late.attributes["flowactors.failure.reason"]
    assert runner.output("output") == [] and runner.output("failure") == []


def test_a_batch_is_one_trigger():
    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": FLOW, "Failure Ports": "bad",
                                                "Trigger Per": "Batch"})
    for text in (b"one", b"two", b"reject three"):
        runner.enqueue(text, {})
    runner.run()
    assert len(runner.output("failure")) == 3 and runner.output("output") == []  # all or nothing
    for text in (b"four", b"five"):
        runner.enqueue(text, {})
    runner.run()
    assert sorted(runner.contents("output")) == [b"five [checked]", b"four [checked]"]
    assert len(runner.output("original")) == 2


def test_a_bad_definition_is_refused_before_it_runs():
    with pytest.raises(ValueError, match="JSON flow definition"):
        ProcessorRunner(ExecuteStateless, {"Flow Definition": "flow.yaml"})
    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": "stateless_flows:nothing_here"})
    runner.enqueue(b"x", {})
    with pytest.raises(ValueError, match="cannot load flow 'stateless_flows:nothing_here'"):
        runner.run()


def test_a_refused_outer_commit_is_an_error_and_keeps_nothing_of_the_inner_trigger(monkeypatch):
    from flowactors.sdk.session import CommitError

    import stateless_flows

    runner = ProcessorRunner(ExecuteStateless, {"Flow Definition": "stateless_flows:recording_flow"})
    runner.enqueue(b"fine data", {})

    def refuse(batch):
        raise CommitError("refused for the test")

    stateless_flows.CALLS.clear()
    monkeypatch.setattr(runner.backend, "commit", refuse)
    runner.run(raise_errors=False)
    assert [type(e) for e in runner.errors] == [CommitError]  # said, not swallowed
    assert runner.input_count == 1 and runner.output("output") == [] and runner.output("original") == []
    assert stateless_flows.CALLS == ["dropped 1: abandoned"]  # the inner trigger was not kept
    monkeypatch.undo()
    runner.run()
    assert stateless_flows.CALLS == ["dropped 1: abandoned", "kept 1"] and len(runner.output("output")) == 1
