"""A processor stuck in ``on_trigger`` is named, and a run stops on time anyway.

Issue 50, finding 7: nothing named a processor hung in ``on_trigger``; ``--duration 15`` returned
after 45 s (the stop waited 30 s for the trigger), Ctrl-C took 30 s more. Now a trigger running
past ``long_trigger_seconds`` is in the status (``stuck_seconds``), the live view and the page
(tests/test_web_ui.py); the stop waits ``stop_grace_seconds`` for it, then leaves it behind and
says so, its FlowFiles still queued in the log.
"""

from __future__ import annotations

import threading
import time

from flowactors import Flow, Processor, Relationship
from flowactors.cli.main import main
from flowactors.driver.running import processor_totals, run_flow
from flowactors.engine import STOP_TIMEOUT
from flowactors.ops.status_view import status_text
from flowactors.processors import GenerateFlowFile
from repositories.flowfile import WriteAheadFlowFileRepository

RELEASE = threading.Event()  # set at the end of a test: the abandoned thread ends


class Hang(Processor):
    """Takes one FlowFile and waits, as a call to a remote system with no timeout would."""

    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        flowfile = session.get()
        if flowfile is not None:
            RELEASE.wait(3600)
            session.transfer(flowfile, "success")


def hung_flow() -> Flow:
    flow = Flow("hung")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 3})
    flow.add(Hang, "hang", auto_terminate=["success"])
    flow.connect(generate, "hang", name="q")
    return flow


def test_a_stuck_trigger_is_named_and_the_run_stops_on_time_leaving_it_behind(tmp_path):
    RELEASE.clear()
    seen: list[dict] = []
    began = time.monotonic()
    try:
        final = run_flow(hung_flow(), tmp_path / "repository", engine="in-process", duration=3,
                         settings={"long_trigger_seconds": 1, "stop_grace_seconds": 0.5}, on_status=seen.append)
        took = time.monotonic() - began
    finally:
        RELEASE.set()
    assert took < 3 + STOP_TIMEOUT  # the stop no longer waits out STOP_TIMEOUT for a trigger that never returns
    stuck = [s for s in seen if processor_totals(s)["hang"]["stuck_seconds"] >= 1]
    assert stuck and all(processor_totals(s)["generate"]["stuck_seconds"] == 0 for s in seen)
    assert "in on_trigger" in status_text(stuck[-1])  # the live view's state column names it
    [left] = final["left_running"]
    assert left["processor"] == "hang" and left["instance"] == 0 and left["trigger_seconds"] >= 1
    with WriteAheadFlowFileRepository(tmp_path / "repository" / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {"q": 3}  # the one it held was never committed: still queued


def test_the_cli_says_which_processor_it_left_behind(tmp_path, capsys):
    RELEASE.clear()
    hung_flow().save(tmp_path / "hung.json")  # names test_stuck_triggers.Hang: tests/ is on sys.path
    try:
        code = main(["run", str(tmp_path / "hung.json"), "--engine", "in-process", "--quiet", "--duration", "2",
                     "--repository", str(tmp_path / "repository"), "--setting", "stop_grace_seconds=0.5"])
    finally:
        RELEASE.set()
    assert code == 0
    err = capsys.readouterr().err
    assert "flowactors: warning: processor 'hang' was still in on_trigger when the run stopped (" in err
    assert "left behind; the FlowFiles it holds stay queued for the next run" in err
