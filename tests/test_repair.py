"""A flow repairs itself from the write-ahead log, without a restart (issue 14).

What the log decided but did not reach a queue (a delivery that failed after the commit) comes
back from the log while the flow runs, exactly once; on Ray, an executor killed with SIGKILL comes
back (Ray restarts its actor) and the flow goes on, counting the restart in its status. The
campaign of 30 kills over every kind of component is tests/test_crash_actors.py.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ray

from flowactors.engine.controller import FlowController
from flowactors import Flow
from flowactors.engine.queues.connection import QueueHost
from flowactors.driver.running import processor_totals, run_flow
from flowactors.engine.transport import call_now
from flowactors.processors import GetFile, PutFile, UpdateAttribute
from repositories.flowfile import WriteAheadFlowFileRepository


def write_sources(directory: Path, count: int) -> dict[str, bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    files = {f"f{i:04d}.txt": f"record {i}\n".encode() * (1 + i % 5) for i in range(count)}
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def moving_flow(source: Path, out: Path, name: str) -> Flow:
    flow = Flow(name, settings={"checkpoint_interval": 1.0})
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 20},
                   run_schedule="0.05 sec")
    tag = flow.add(UpdateAttribute, "tag", properties={"tagged": "yes"}, batch_size=20)
    put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success", "failure"],
                   batch_size=20)
    flow.connect(get, tag, name="got")
    flow.connect(tag, put, name="tagged")
    return flow


def placed(out: Path, kills: int = 0) -> dict[str, bytes]:
    """The files PutFile placed in ``out``. A process killed while PutFile wrote leaves that write's
    hidden temporary file (``.<name>.<random>.partial``, never renamed into place, never a
    delivery): at most one a kill, as the whole-cluster crash campaign counts them."""
    temporaries = [p for p in out.iterdir() if p.name.startswith(".") and p.name.endswith(".partial")]
    assert len(temporaries) <= kills, temporaries
    return {p.name: p.read_bytes() for p in out.iterdir() if p not in temporaries}


def assert_all_delivered_once(files: dict[str, bytes], out: Path, repository: Path, final: dict) -> None:
    assert placed(out) == files
    assert processor_totals(final)["put"]["flowfiles_in"] == len(files)  # each FlowFile placed once
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts() == {}
    finally:
        wal.close()


def test_a_delivery_that_failed_after_the_log_is_repaired_from_the_log_while_the_flow_runs(tmp_path, monkeypatch):
    """A queue refuses one offer after the log accepted the commit: the session rolls nothing back
    (the FlowFiles are in the log, in that queue), the task says a repair is due, and the controller
    gives the queue its FlowFiles from the log; every file arrives exactly once, no restart."""
    files = write_sources(tmp_path / "source", 200)
    out, repository = tmp_path / "out", tmp_path / "repository"
    failed = threading.Event()
    offer = QueueHost.offer

    @functools.wraps(offer)  # links call a method by its name: the stand-in keeps the name "offer"
    async def offer_failing_once(self, flowfiles):
        if self.queue.config.queue_id == "tagged" and not failed.is_set():
            failed.set()
            raise RuntimeError("the queue refused this offer")
        return await offer(self, flowfiles)

    monkeypatch.setattr(QueueHost, "offer", offer_failing_once)
    final = run_flow(moving_flow(tmp_path / "source", out, "repaired"), repository, engine="in-process",
                     timeout=120)
    assert failed.is_set() and not final.get("timed_out")
    assert final["repairs"] and any("delivering a commit failed" in r for r in final["repairs"][0]["reasons"])
    assert final["restarts"] == {}  # nothing died: repaired without a restart
    assert_all_delivered_once(files, out, repository, final)


@pytest.mark.timeout(300)
def test_an_executor_killed_with_sigkill_comes_back_and_the_flow_finishes(ray_session, tmp_path):
    files = write_sources(tmp_path / "source", 2000)
    out, repository = tmp_path / "out", tmp_path / "repository"
    killed: list[int] = []

    def kill_the_queue_host(controller) -> None:
        handle = ray.get_actor("healing.executor.1")
        pid, hosted = ray.get(handle.__ray_call__.remote(lambda self: (os.getpid(), repr(self))))
        assert "queues: got" in hosted, hosted
        while call_now(controller, FlowController.status)["queues"][0]["total_in"] < 100:  # files are moving
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    flow = moving_flow(tmp_path / "source", out, "healing")
    final = run_flow(flow, repository, settings={"executors": 3}, timeout=240, on_started=kill_the_queue_host)
    assert killed and not final.get("timed_out") and not final.get("stalled")
    assert final["restarts"] == {"executor": 1}
    assert final["repairs"] and final["repairs"][0]["restarted"] == ["executor.1"]
    assert_all_delivered_once(files, out, repository, final)


@pytest.mark.timeout(300)
def test_a_controller_killed_with_sigkill_is_started_again_by_the_run(ray_session, tmp_path):
    """The controller's death takes its components with it; Ray restarts its actor, new and not
    started, and ``run_flow`` starts the flow on it again (whether its next status call fails or
    already reaches the new one): every file arrives, the log ends empty."""
    files = write_sources(tmp_path / "source", 2000)
    out, repository = tmp_path / "out", tmp_path / "repository"
    killed: list[int] = []

    def kill_the_controller(controller) -> None:
        pid = ray.get(controller.handle.__ray_call__.remote(lambda self: os.getpid()))
        while call_now(controller, FlowController.status)["queues"][0]["total_in"] < 100:  # files are moving
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    final = run_flow(moving_flow(tmp_path / "source", out, "headless"), repository, timeout=240,
                     on_started=kill_the_controller)
    assert killed and not final.get("timed_out") and final["started"]
    assert final["restarts"].get("controller") == 1
    assert placed(out, kills=1) == files  # a file placed twice is refused, once
    wal = WriteAheadFlowFileRepository(repository / "flowfile", create=False)
    try:
        assert wal.queue_counts() == {}
    finally:
        wal.close()


@pytest.mark.timeout(300)
def test_a_controller_killed_between_its_status_and_the_idle_check_is_started_again(ray_session, tmp_path):
    """A run looks at the controller twice a poll (its status, then whether it is idle); the kill
    lands right after a status, so the idle check is the call that meets the dead controller (a
    CI run once ended there with ActorUnavailableError). The run starts the flow again all the same."""
    files = write_sources(tmp_path / "source", 2000)
    out, repository = tmp_path / "out", tmp_path / "repository"
    link: list = []
    killed: list[int] = []

    def kill_after_a_status(status: dict) -> None:
        if not killed and status["queues"][0]["total_in"] >= 100:   # files are moving
            pid = ray.get(link[0].handle.__ray_call__.remote(lambda self: os.getpid()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    final = run_flow(moving_flow(tmp_path / "source", out, "headless"), repository, timeout=240,
                     on_started=link.append, on_status=kill_after_a_status)
    assert killed and not final.get("timed_out") and final["started"]
    assert final["restarts"].get("controller") == 1
    assert placed(out, kills=1) == files
