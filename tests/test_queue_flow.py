"""Queues inside real flows on Ray: expiration (EXPIRE events, records and content gone), listing and
emptying a running flow's queue through the FlowController, the same offline and with the CLI on a
stopped flow's repository, and a restart that brings swapped FlowFiles back."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import ray
import ray.cloudpickle

from flowactors.engine.repository_services import FlowFileRepositoryService
from flowactors.engine.queues.connection import QueueHost
from flowactors import Flow, Processor, PropertyDescriptor, Relationship, validators
from flowactors.cli.main import main as cli_main
from flowactors.ops.queue_admin import empty_queue, list_queue
from repositories.lock import RepositoryInUseError
from flowactors.driver.running import queue_totals, run_flow
from flowactors.sdk.settings import flow_settings
from flowactors.engine.actors.ray_hosting import RayHosting
from flowactors.engine.controller import FlowController
from flowactors.engine.transport import call_now
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.flowfile.swapfile import swap_directory
from repositories.provenance import WriteAheadProvenanceRepository

pytestmark = pytest.mark.ray
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUCCESS = Relationship("success")


class Emit(Processor):
    """Creates 'Count' FlowFiles (content and a 'priority' attribute), 100 per trigger."""

    input_required = False
    properties = [PropertyDescriptor("Count", required=True, validator=validators.POSITIVE_INTEGER)]
    relationships = [SUCCESS]

    def on_scheduled(self, context):
        self.left = context.property("Count").as_int()
        self.made = 0

    def on_trigger(self, context, session):
        if self.left <= 0:
            context.yield_()
            return
        for _ in range(min(self.left, 100)):
            flowfile = session.write_bytes(session.create(), f"item {self.made}\n".encode())
            session.transfer(session.put_all_attributes(
                flowfile, {"n": str(self.made), "priority": str((self.made * 7) % 11)}), SUCCESS)
            self.made += 1
            self.left -= 1


class Gate(Processor):
    """Passes FlowFiles on only once the file 'Open When' exists (until then they wait queued)."""

    properties = [PropertyDescriptor("Open When", required=True)]
    relationships = [SUCCESS]

    def on_trigger(self, context, session):
        if not Path(context.property("Open When").as_str()).exists():
            context.yield_()
            return
        for flowfile in session.get_batch():
            session.transfer(flowfile, SUCCESS)


class SlowStart(Processor):
    """Starts taking FlowFiles only after a second (so that they expire in the connection)."""

    relationships = [SUCCESS]

    def on_scheduled(self, context):
        time.sleep(1.0)

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            session.transfer(flowfile, SUCCESS)


def gated_flow(count: int, gate: Path, **connection) -> Flow:
    flow = Flow("queue-test", settings={"swap_threshold": 100, "swap_batch_size": 50, "checkpoint_interval": 3600})
    emit = flow.add(Emit, "emit", properties={"Count": count})
    held = flow.add(Gate, "gate", properties={"Open When": str(gate)}, batch_size=1, auto_terminate=("success",),
                    yield_duration="50 ms")
    flow.connect(emit, held, name="waiting", **connection)
    return flow


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_expired_flowfiles_get_expire_events_and_leave_the_log_and_content(ray_session, repository):
    flow = Flow("expiry-test", settings={"checkpoint_interval": 3600})
    emit = flow.add(Emit, "emit", properties={"Count": 60})
    slow = flow.add(SlowStart, "slow", auto_terminate=("success",))
    flow.connect(emit, slow, name="short-lived", flowfile_expiration="200 ms")
    final = run_flow(flow, repository, timeout=60)
    assert sum(p["expired"] for p in final["processors"]) == 60
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        expired = provenance.search(event_type="EXPIRE", limit=1000)
        created = provenance.search(event_type="CREATE", limit=1000)
    finally:
        provenance.close()
    assert {e.flowfile_uuid for e in expired} == {e.flowfile_uuid for e in created} and len(expired) == 60
    assert all(e.source_queue_id == "short-lived" for e in expired)
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts() == {}
        claims = {e.updated_claim.resource for e in created}
        assert claims and all(wal.claimant_count(r) == 0 for r in claims)
        assert wal.pending_release() == []  # the stop's checkpoint released them
    finally:
        wal.close()
    content = FileSystemContentRepository(repository / "content")
    assert not any(content.path_of(r).exists() for r in claims)


def test_list_and_empty_a_running_flows_queue_with_swapped_flowfiles(ray_session, repository, tmp_path):
    flow = gated_flow(400, tmp_path / "never", prioritizers=("PriorityAttribute",))
    controller = FlowController(flow, str(repository), flow_settings(flow), RayHosting())
    controller.start()
    try:
        status = wait_for(lambda: next((q for q in controller.status()["queues"] if q["count"] == 400), None))
        wait_for(lambda: call_now(controller.queue("waiting"), QueueHost.settle)["swapped"] > 0)
        rows = controller.list_queue("waiting", 150)
        assert [r["position"] for r in rows] == list(range(1, 151))
        priorities = [int(r["attributes"]["priority"]) for r in rows]
        assert priorities == sorted(priorities)
        assert {"uuid", "size", "attributes", "age_ms", "penalized", "swapped"} <= rows[0].keys()
        assert rows[0]["size"] > 0 and not rows[0]["penalized"]
        assert any(r["swapped"] for r in rows)
        with pytest.raises(RepositoryInUseError, match="queue-test"):  # offline tools refuse while it runs
            list_queue(repository, "waiting")

        in_flight = call_now(controller.queue("waiting"), QueueHost.status)["in_flight"]
        result = controller.empty_queue("waiting", requested_by="tester")
        assert result["dropped"] == 400 - in_flight and in_flight <= 1
        after = call_now(controller.queue("waiting"), QueueHost.status)
        assert after["queued"] == 0 and after["swapped"] == 0 and after["count"] == in_flight
        assert call_now(controller.flowfile_repository, FlowFileRepositoryService.queue_counts) == ({"waiting": in_flight} if in_flight else {})
        assert call_now(controller.flowfile_repository, FlowFileRepositoryService.swap_files) == []
        drops = ray.get(controller.provenance_repository.handle.search_with.remote({"event_type": "DROP"}, 1000))
        assert len(drops) == result["dropped"] and all(d.details == "FlowFile Queue emptied by tester" for d in drops)
        assert {d.component_id for d in drops} == {"waiting"}
        assert controller.checkpoint() >= 1  # claims of dropped FlowFiles are released by the checkpoint
        with pytest.raises(LookupError, match="has no connection 'nope'"):
            controller.list_queue("nope")
    finally:
        controller.stop()
    assert list(swap_directory(repository).glob("*.swap")) == []
    assert status["count"] == 400


def test_offline_list_and_empty_with_the_cli_after_a_restart_with_swapped_flowfiles(ray_session, repository, tmp_path,
                                                                                    capsys):
    flow = gated_flow(300, tmp_path / "never")
    final = run_flow(flow, repository, until=lambda s: (w := queue_totals(s)["waiting"])["count"] == 300
                     and w["swapped"] > 0, timeout=120)
    assert not final.get("timed_out") and queue_totals(final)["waiting"]["count"] == 300
    swap_files = sorted(p.name for p in swap_directory(repository).glob("*.swap"))
    assert swap_files  # the stop left FlowFiles swapped out: still in their files, registered

    again = run_flow(gated_flow(1, tmp_path / "never"), repository,
                     until=lambda s: queue_totals(s)["waiting"]["count"] == 301, timeout=120)
    assert not again.get("timed_out")
    recovery = again["recovery"]
    assert recovery["swap_files"] >= 1 and recovery["restored"] + recovery["swapped"] == 300
    assert queue_totals(again)["waiting"]["count"] == 301

    assert cli_main(["queue", "list", "waiting", "--repository", str(repository), "--limit", "400", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 301 and len({r["uuid"] for r in rows}) == 301
    assert [r["swapped"] for r in rows] == sorted(r["swapped"] for r in rows)  # in memory first, then swapped
    assert any(r["swapped"] for r in rows)

    assert cli_main(["queue", "list", "nope", "--repository", str(repository)]) == 2
    assert "queues with FlowFiles: waiting" in capsys.readouterr().err

    assert cli_main(["queue", "empty", "waiting", "--repository", str(repository)]) == 0
    assert "dropped 301 FlowFile(s)" in capsys.readouterr().out
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts() == {} and wal.swap_files() == [] and wal.pending_release() == []
    finally:
        wal.close()
    assert list(swap_directory(repository).iterdir()) == []
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        drops = provenance.search(event_type="DROP", limit=1000)
    finally:
        provenance.close()
    assert len({d.flowfile_uuid for d in drops}) == 301
    content = FileSystemContentRepository(repository / "content")
    assert not any(content.path_of(d.updated_claim.resource).exists() for d in drops)
    with pytest.raises(LookupError, match="holds no FlowFiles"):
        empty_queue(repository, "waiting")
