"""Scenario 6: recovery. Restart time with 1 million FlowFiles in the write-ahead log.

The log is filled with the library itself (``WriteAheadFlowFileRepository.commit``, 10,000
FlowFiles a commit, 100 FlowFiles a resource claim as the content repository packs them), then:

* library recovery: open the repository, ``rebuild_claimant_counts`` and read the whole
  ``recover()`` stream - what the FlowFile repository actor does at start-up;
* controller start: ``FlowController.start`` through ``run_flow`` on that repository - actors
  created, the log opened, the queue handed its million FlowFiles (a FIFO queue takes them over
  where they are in the log and pages them in a batch at a time: ``QueueHost.restore_from_log``),
  processors started - timed from the call to its ``on_started`` callback (also on an empty
  repository, for the fixed cost);

* queue restart: with the flow running and its queue holding the million, SIGKILL the executor
  that hosts the queue; timed from the kill until the flow is repaired (Ray restarted the actor,
  the controller stopped every task and gave the queue its FlowFiles again) and the queue counts
  them all again;

all against a raw LMDB cursor scan over the same records (median of 3), the floor of reading
the log back. Every step runs on a warm page cache, the baseline included.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import ray

from bench import ray_session, row
from bench.baselines import lmdb_scan
from bench.small_flowfiles import small_flow
from flowactors.engine.controller import FlowController
from flowactors.driver.running import queue_totals, run_flow
from flowactors.engine.transport import call_now
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, new_flowfile_uuid, now_millis

S6 = "6 recovery"
COMMIT = 10_000
PER_CLAIM = 100
QUEUE = "updated"  # RouteOnAttribute's input in scenario 1's flow


def fill(root: Path, flowfiles: int) -> float:
    """Commit ``flowfiles`` 1 KiB FlowFiles into ``root/flowfile``, queued in ``QUEUE``; seconds taken."""
    started = time.perf_counter()
    repo = WriteAheadFlowFileRepository(root / "flowfile")
    try:
        next_id = repo.reserve_ids(flowfiles)
        for first in range(0, flowfiles, COMMIT):
            updates, claims = [], []
            now = now_millis()
            for i in range(first, min(first + COMMIT, flowfiles)):
                if i % PER_CLAIM == 0:
                    claims.append(ResourceClaim("default", str(i % 1024), f"{now}-{i}"))
                uuid = new_flowfile_uuid()
                attributes = {"filename": uuid, "path": "./", "uuid": uuid, "size.class": "large"}
                claim = ContentClaim(claims[-1], (i % PER_CLAIM) * 1024, 1024)
                updates.append(QueuedFlowFile(FlowFile(next_id + i, uuid, attributes, claim, now, now,
                                                       queue_date=now, queue_index=i), QUEUE))
            repo.commit(updates, [], claims)
        repo.checkpoint()
    finally:
        repo.close()
    return time.perf_counter() - started


def library_recovery(root: Path) -> dict:
    t0 = time.perf_counter()
    repo = WriteAheadFlowFileRepository(root / "flowfile", create=False)
    try:
        t1 = time.perf_counter()
        rebuilt = repo.rebuild_claimant_counts()
        t2 = time.perf_counter()
        recovered = sum(len(batch) for _queue, batch in repo.recover(10_000))
        t3 = time.perf_counter()
    finally:
        repo.close()
    return {"open": t1 - t0, "rebuild": t2 - t1, "recover": t3 - t2, "seconds": t3 - t0,
            "recovered": recovered, "fixed": rebuilt["fixed"]}


def controller_start(root: Path) -> dict:
    """Seconds from ``run_flow`` to its processors running (the controller's start), and what it restored."""
    flow = small_flow(1, 1000, name="bench-recovery")
    flow.processors["route"].run_schedule = "1000 sec"  # one trigger at most: the queue stays as restored
    started_at: list[float] = []
    began = time.monotonic()
    final = run_flow(flow, root, until_idle=False, duration=0,
                     on_started=lambda controller: started_at.append(time.monotonic()))
    return {"seconds": started_at[0] - began, "restored": final["recovery"].get("restored", 0),
            "paged": final["recovery"].get("paged", 0)}


def queue_restart(root: Path, flowfiles: int) -> dict:
    """Seconds from SIGKILL of the executor hosting ``QUEUE`` (holding ``flowfiles``) until the
    flow is repaired and the queue counts them all again."""
    flow = small_flow(1, 1000, name="bench-restart")
    flow.processors["route"].run_schedule = "1000 sec"  # no trigger after the first: the queue stays full
    measured: dict = {}

    def kill_the_queue_host(controller) -> None:
        for name in ray.util.list_named_actors():
            if name.startswith("bench-restart.executor"):
                pid, hosted = ray.get(ray.get_actor(name).__ray_call__.remote(lambda self: (os.getpid(), repr(self))))
                if f"queues: {QUEUE}" in hosted or f", {QUEUE}" in hosted:
                    break
        else:
            raise RuntimeError(f"no executor hosts queue {QUEUE}")
        before = queue_totals(call_now(controller, FlowController.status))[QUEUE]["count"]
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        while time.monotonic() - killed < 300:
            status = call_now(controller, FlowController.status)
            # the route's one trigger after the restart may take a batch of 1000 at once
            if (status["repairs"] and not status.get("repairing")
                    and queue_totals(status)[QUEUE]["count"] >= before - 1000):
                measured.update(seconds=time.monotonic() - killed, count=queue_totals(status)[QUEUE]["count"],
                                repair=status["repairs"][-1]["seconds"])
                return
            time.sleep(0.05)
        raise RuntimeError("the flow was not repaired within 300 s of the kill")

    run_flow(flow, root, until_idle=False, duration=0, on_started=kill_the_queue_host)
    return measured


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """``size``: FlowFiles in the log (default 1,000,000, quick 50,000)."""
    flowfiles = size or (50_000 if quick else 1_000_000)
    root = workdir / "repository"
    filled = fill(root, flowfiles)
    scans = sorted(lmdb_scan(root / "flowfile", b"flowfiles")["seconds"] for _ in range(3))
    scan = scans[1]
    library = library_recovery(root)
    with ray_session():
        empty = controller_start(workdir / "empty")
        start = controller_start(root)
        restart = queue_restart(root, flowfiles)
    shutil.rmtree(workdir / "empty", ignore_errors=True)
    problems = [f"PROBLEM: {what} {got:,} of {flowfiles:,} FlowFiles"
                for what, got in (("recovered", library["recovered"]), ("restored", start["restored"]))
                if got != flowfiles]
    breakdown = (f"open {library['open']:.2f} s + rebuild claimant counts {library['rebuild']:.2f} s + "
                 f"recover stream {library['recover']:.2f} s")
    return [
        row(S6, f"library recovery of {flowfiles:,} FlowFiles", library["seconds"], scan,
            "raw LMDB cursor scan of the same records", "s",
            "; ".join([f"{breakdown}; filling the log took {filled:.1f} s", *problems])),
        row(S6, f"controller start with {flowfiles:,} FlowFiles", start["seconds"], scan,
            "raw LMDB cursor scan of the same records", "s",
            f"actors created, log opened, {start['restored']:,} FlowFiles back in their queue "
            f"({start['paged']:,} of them left in the log, paged in as the queue drains), processors "
            f"started; the same start on an empty repository: {empty['seconds']:.2f} s"),
        row(S6, f"queue of {flowfiles:,} FlowFiles back after its executor's SIGKILL", restart["seconds"],
            scan, "raw LMDB cursor scan of the same records", "s",
            f"from the kill until the flow is repaired and the queue counts them all: Ray restarts the actor, "
            f"the controller notices (it looks every 0.5 s), stops every task, deletes orphan claim files and "
            f"gives the queue its FlowFiles again (from the log, paged); the repair itself took "
            f"{restart['repair']:.2f} s"),
    ]
