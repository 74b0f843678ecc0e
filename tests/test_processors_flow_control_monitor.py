"""MonitorActivity (the cases of NiFi's TestMonitorActivity), its clock replaced so that no test
waits; the cluster scope against a stand-in for the flow's cluster state."""

from __future__ import annotations

import logging
import re

import pytest

from flowactors.processors.monitor import CLUSTER_KEY, LOCAL_KEY, MonitorActivity
from flowactors.testing import ProcessorRunner
from repositories.model import StateMap
from repositories.provenance.event import ProvenanceEventType as T

START = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def monitor(properties: dict | None = None, cluster_state=None, state: dict | None = None
            ) -> tuple[ProcessorRunner, Clock]:
    """A MonitorActivity started (scheduled, and triggered once with nothing queued) at ``START``,
    with ``state`` stored beforehand."""
    runner = ProcessorRunner(MonitorActivity, {"Threshold Duration": "1 sec", **(properties or {})})
    clock = runner.processor.clock = Clock()
    runner.context.cluster_state = cluster_state
    if state is not None:
        runner.context.state.set(state)
    runner.run(stop=False)
    return runner, clock


def step(runner: ProcessorRunner, *attributes: dict) -> dict[str, list]:
    """Enqueue a FlowFile for each of ``attributes``, trigger once (the processor stays scheduled),
    and say what each relationship got in that trigger."""
    before = {name: len(runner.output(name)) for name in ("success", "inactive", "activity.restored")}
    for values in attributes:
        runner.enqueue(b"data", values)
    runner.run(stop=False)
    return {name: runner.output(name)[count:] for name, count in before.items()}


def test_inactivity_then_restored_activity_with_the_messages_attributes_and_events():
    runner, clock = monitor()
    assert len(step(runner, {})["success"]) == 1
    clock.now += 2
    sent = step(runner)
    [inactive] = sent["inactive"]
    assert inactive.attributes["inactivityStartMillis"] == str(int(START * 1000))
    assert inactive.attributes["inactivityDurationMillis"] == "2000"
    assert re.fullmatch(r"Lacking activity as of time: \S+ \S+; flow has been inactive for 0 minutes",
                        runner.read(inactive).decode())
    assert runner.context.state.get().get(LOCAL_KEY) == str(int(START * 1000))
    clock.now += 1
    sent = step(runner, {"key": "value"})
    [restored] = sent["activity.restored"]
    assert len(sent["success"]) == 1 and sent["inactive"] == []
    assert re.fullmatch(r"Activity restored at time: \S+ \S+ after being inactive for 0 minutes",
                        runner.read(restored).decode())
    assert "key" not in restored.attributes and restored.attributes["inactivityDurationMillis"] == "3000"
    assert runner.context.state.get().values == {}
    created = {e.flowfile_uuid for e in runner.events() if e.event_type == T.CREATE}
    assert created == {inactive.uuid, restored.uuid}


def test_without_input_inactivity_is_reported_once_or_every_threshold_when_continually():
    once, clock = monitor()
    for _ in range(4):
        clock.now += 1
        step(once)
    assert len(once.output("inactive")) == 1
    continually, clock = monitor({"Continually Send Messages": "true"})
    sent = []
    for seconds in (1, 0.5, 0.5, 0.25, 0.75):
        clock.now += seconds
        sent.append(len(step(continually)["inactive"]))
    assert sent == [1, 0, 1, 0, 1]


def test_wait_for_activity_reports_nothing_before_the_first_flowfile():
    runner, clock = monitor({"Wait for Activity": "true"})
    clock.now += 5
    assert step(runner)["inactive"] == []
    step(runner, {})
    clock.now += 2
    assert len(step(runner)["inactive"]) == 1


def test_copy_attributes_puts_the_restoring_flowfiles_attributes_on_the_restored_message():
    runner, clock = monitor({"Copy Attributes": "true", "Activity Restored Message": "back: ${key}"})
    clock.now += 2
    step(runner)
    [restored] = step(runner, {"key": "value", "key1": "value1"})["activity.restored"]
    assert restored.attributes["key"] == "value" and restored.attributes["key1"] == "value1"
    assert runner.read(restored) == b"back: value"
    assert restored.attributes["uuid"] != runner.output("success")[0].uuid


def test_many_flowfiles_restoring_activity_in_one_trigger_send_one_message():
    runner, clock = monitor()
    clock.now += 2
    step(runner)
    sent = step(runner, {}, {}, {})
    assert len(sent["success"]) == 3 and len(sent["activity.restored"]) == 1


def test_a_restart_resets_the_state_unless_told_to_keep_it():
    a_day_ago = str(int((START - 86400) * 1000))
    for reset, restored in (("true", 0), ("false", 1)):
        runner, _ = monitor({"Threshold Duration": "24 hours", "Reset State on Restart": reset},
                            state={LOCAL_KEY: a_day_ago})
        sent = step(runner, {})
        assert len(sent["success"]) == 1 and len(sent["activity.restored"]) == restored
        if restored:
            assert sent["activity.restored"][0].attributes["inactivityStartMillis"] == a_day_ago


class SharedState:
    """A stand-in for the flow's cluster state (``context.cluster_state``)."""

    def __init__(self, values: dict[str, str] | None = None):
        self.state = StateMap.of(0, values or {})

    def get(self) -> StateMap:
        return self.state

    def replace(self, old: StateMap, values) -> bool:
        if old.version != self.state.version:
            return False
        self.state = StateMap.of(old.version + 1, values)
        return True

    def clear(self) -> None:
        self.state = StateMap.of(self.state.version + 1, {})


def test_cluster_scope_shares_this_nodes_activity_and_stays_active_while_another_node_is():
    shared = SharedState()
    runner, clock = monitor({"Monitoring Scope": "cluster", "Copy Attributes": "true"}, shared)
    step(runner, {"key": "value"})
    assert shared.state.values == {"key": "value", "filename": runner.output("success")[0].attributes["filename"],
                                   "path": "./", CLUSTER_KEY: str(int(START * 1000))}
    clock.now += 2
    shared.state = StateMap.of(5, {CLUSTER_KEY: str(int(clock.now * 1000)), "from": "node 2"})
    assert step(runner)["inactive"] == []   # another node carried a FlowFile a moment ago
    clock.now += 2
    assert len(step(runner)["inactive"]) == 1
    shared.state = StateMap.of(6, {CLUSTER_KEY: str(int(clock.now * 1000)), "from": "node 2"})
    clock.now += 0.5
    [restored] = step(runner)["activity.restored"]   # restored by the other node
    assert restored.attributes["from"] == "node 2"
    runner.processor.on_stopped(runner.context)
    assert shared.state.values == {}


def test_cluster_scope_on_one_node_acts_as_node_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="flowactors.processors.monitor"):
        runner, clock = monitor({"Monitoring Scope": "cluster"})
        step(runner, {})
    assert "acts as node" in caplog.text
    clock.now += 2
    assert len(step(runner)["inactive"]) == 1


def test_a_threshold_that_evaluates_to_no_time_is_refused_with_one_message():
    runner = ProcessorRunner(MonitorActivity, {"Threshold Duration": "${filename}"})
    runner.enqueue(b"x")
    with pytest.raises(ValueError, match=re.escape("Threshold Duration '${filename}' evaluates to no time")):
        runner.run()
    assert runner.input_count == 1
