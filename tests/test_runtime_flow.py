"""The runtime on real Ray with the durable repositories: data path, failure, stop and restart."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest
import ray.cloudpickle

from flowactors import Flow, Processor, PropertyDescriptor, Relationship, validators
from flowactors.driver.running import processor_totals, queue_totals, run_flow
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.provenance import WriteAheadProvenanceRepository

pytestmark = pytest.mark.ray
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

SUCCESS = Relationship("success")


class Emit(Processor):
    """Creates 'Count' FlowFiles in batches, each with a sha256 attribute of its content."""

    input_required = False
    properties = [PropertyDescriptor("Count", required=True, validator=validators.POSITIVE_INTEGER),
                  PropertyDescriptor("Batch", default="100", validator=validators.POSITIVE_INTEGER)]
    relationships = [SUCCESS]

    def on_scheduled(self, context):
        self.left = context.property("Count").as_int()
        self.made = 0

    def on_trigger(self, context, session):
        if self.left <= 0:
            context.yield_()
            return
        for _ in range(min(self.left, context.property("Batch").as_int())):
            data = f"item {self.made} of instance {context.instance}\n".encode()
            flowfile = session.write_bytes(session.create(), data)
            flowfile = session.put_all_attributes(flowfile, {"sha256": hashlib.sha256(data).hexdigest(),
                                                             "n": str(self.made)})
            session.transfer(flowfile, SUCCESS)
            self.made += 1
            self.left -= 1


class Upper(Processor):
    """Rewrites content to upper case (copy-on-write) and fails when told to."""

    properties = [PropertyDescriptor("Fail Times", default="0", validator=validators.NON_NEGATIVE_INTEGER)]
    relationships = [SUCCESS]

    def on_scheduled(self, context):
        self.failures_left = context.property("Fail Times").as_int()

    def on_trigger(self, context, session):
        batch = session.get_batch()
        if self.failures_left > 0:
            self.failures_left -= 1
            raise RuntimeError("injected failure")
        for flowfile in batch:
            flowfile = session.rewrite(flowfile, lambda src, out: out.write(src.read().upper()))
            session.transfer(flowfile, SUCCESS)


class Collect(Processor):
    """Writes each FlowFile's content to a folder named by its 'n' attribute and drops it."""

    properties = [PropertyDescriptor("Directory", required=True)]
    relationships = []

    def on_trigger(self, context, session):
        target = Path(context.property("Directory").as_str())
        target.mkdir(parents=True, exist_ok=True)
        for flowfile in session.get_batch():
            session.export_to(flowfile, target / f"{flowfile.attributes['n']}.txt")
            session.provenance.send(flowfile, f"file://{target}")
            session.remove(flowfile)


class HeldFor:
    """A run_flow ``until``: true once ``condition`` has held for ``seconds`` (without a break)."""

    def __init__(self, seconds: float, condition):
        self.seconds, self.condition, self.since = seconds, condition, None

    def __call__(self, status: dict) -> bool:
        if not self.condition(status):
            self.since = None
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since >= self.seconds


def three_step_flow(out: Path, count: int, fail_times: int = 0, **connection) -> Flow:
    flow = Flow("runtime-test", settings={"checkpoint_interval": 1.0, "administrative_yield": 0.1})
    emit = flow.add(Emit, "emit", properties={"Count": count, "Batch": 250})
    upper = flow.add(Upper, "upper", properties={"Fail Times": fail_times}, batch_size=200)
    collect = flow.add(Collect, "collect", properties={"Directory": str(out)})
    flow.connect(emit, upper, name="emitted", **connection)
    flow.connect(upper, collect, name="uppered")
    return flow


def test_flow_moves_every_flowfile_through_actors(ray_session, repository, tmp_path):
    out = tmp_path / "out"
    final = run_flow(three_step_flow(out, 1000), repository, timeout=120)
    totals = processor_totals(final)
    assert totals["emit"]["flowfiles_out"] == 1000
    assert totals["upper"]["flowfiles_in"] == 1000 and totals["upper"]["flowfiles_out"] == 1000
    assert totals["collect"]["flowfiles_in"] == 1000
    files = sorted(out.iterdir())
    assert len(files) == 1000
    assert (out / "7.txt").read_text() == "ITEM 7 OF INSTANCE 0\n"
    assert all(q["count"] == 0 for q in final["queues"])
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts() == {} or sum(wal.queue_counts().values()) == 0
    finally:
        wal.close()
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        sends = provenance.search(event_type="SEND", limit=5000)
        creates = provenance.search(event_type="CREATE", limit=5000)
        modified = provenance.search(event_type="CONTENT_MODIFIED", limit=5000)
        drops = provenance.search(event_type="DROP", limit=5000)
    finally:
        provenance.close()
    assert len(sends) == len(creates) == len(modified) == len(drops) == 1000


def test_exception_rolls_back_and_nothing_is_lost(ray_session, repository, tmp_path):
    out = tmp_path / "out"
    final = run_flow(three_step_flow(out, 500, fail_times=3), repository, timeout=120)
    totals = processor_totals(final)
    assert totals["upper"]["errors"] == 3
    assert "injected failure" in totals["upper"]["recent_errors"][-1]["error"]
    assert sorted(int(p.stem) for p in out.iterdir()) == list(range(500))


def test_stop_keeps_queued_flowfiles_for_the_next_run(ray_session, repository, tmp_path):
    out = tmp_path / "out"
    flow = three_step_flow(out, 600)
    flow.processors["upper"].run_schedule = "1000 sec"  # triggers once, then waits: the rest stays queued
    final = run_flow(flow, repository, timeout=120, until=lambda s: processor_totals(s)["upper"]["flowfiles_in"] == 200
                     and queue_totals(s)["emitted"]["count"] == 400 and queue_totals(s)["uppered"]["count"] == 0)
    assert not final.get("timed_out")
    queued = {q["id"]: q["count"] for q in final["queues"]}
    assert queued["emitted"] == 600 - 200, (final["processors"], final["queues"])
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts()["emitted"] == 400
    finally:
        wal.close()
    restarted = run_flow(three_step_flow(out, 1), repository, timeout=120)
    assert restarted["recovery"]["restored"] == 400
    # items n=0..599 from the first run; the second run's single item is n=0 again
    assert sorted(int(p.stem) for p in out.iterdir()) == list(range(600))


def test_back_pressure_holds_the_producer(ray_session, repository, tmp_path):
    out = tmp_path / "out"
    flow = three_step_flow(out, 5000, back_pressure_object_threshold=300)
    flow.processors["upper"].run_schedule = "1000 sec"
    held = HeldFor(2.0, lambda s: queue_totals(s)["emitted"]["back_pressure"])
    final = run_flow(flow, repository, timeout=120, until=held)
    assert not final.get("timed_out")
    emitted = queue_totals(final)["emitted"]
    totals = processor_totals(final)
    assert emitted["back_pressure"]
    # the threshold is soft: the producer may overshoot it by one batch (250), no more
    assert 300 <= emitted["count"] <= 300 + 250
    assert totals["emit"]["flowfiles_out"] == emitted["count"] + totals["upper"]["flowfiles_in"]
