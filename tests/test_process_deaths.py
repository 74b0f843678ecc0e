"""A FlowFile whose processing ends the processor's process is found and set aside.

Issue 50, finding 3: a processor that exits its process on one FlowFile (NiFi's test extension
``ExitAfterFourInvocations`` does the like) rolled its whole batch back, the executor restarted,
took the same batch and died again, forever. Now what a trigger holds is recorded
(``flowactors.engine.process_deaths``): after a death those FlowFiles run alone, and the one alone
at two deaths is set aside: to ``failure`` with the reason, or penalized where there is none. Real
process deaths: an executor actor on Ray, whole ``flowactors run`` processes on the in-process engine.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections import deque
from pathlib import Path

import pytest
import ray.cloudpickle

from flowactors import Flow, Processor, Relationship
from flowactors.driver.running import processor_totals, run_flow
from flowactors.engine.process_deaths import DEATHS_TO_SET_ASIDE, DeathGuard, InHandRecord
from flowactors.processors import GetFile, PutFile
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import FlowFile

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Fatal, on the Ray engine
FLOWACTORS = str(Path(sys.executable).parent / "flowactors")


class Fatal(Processor):
    """Ends its own process on a FlowFile whose content is ``bad``, as a crash in native code would."""

    relationships = [Relationship("success"), Relationship("failure")]

    def on_trigger(self, context, session):
        import os

        for flowfile in session.get_batch():
            if session.read_bytes(flowfile) == b"bad":
                os._exit(3)
            session.transfer(flowfile, "success")


def sources(directory: Path, count: int, bad: int) -> None:
    directory.mkdir(parents=True)
    for i in range(count):
        (directory / f"f{i}.txt").write_bytes(b"bad" if i == bad else f"ok {i}".encode())


def flowfile(flowfile_id: int) -> FlowFile:
    return FlowFile(flowfile_id, f"uuid-{flowfile_id}", {}, None, 0, 0)


def prefetched(*ids: int) -> deque:
    return deque(("q", flowfile(i)) for i in ids)


def taken_ids(taken: list) -> list[int]:
    return [f.id for _, f in taken]


def die(guard: DeathGuard, tmp_path: Path) -> DeathGuard:
    """The process ends in the trigger (no ``end_trigger``); its next build opens the guard again."""
    guard.close()
    return DeathGuard.open(tmp_path, "flow", "fatal#0")


def test_after_a_death_each_flowfile_held_runs_alone_and_the_one_alone_at_two_deaths_is_set_aside(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="flowactors.engine.process_deaths")
    guard = DeathGuard.open(tmp_path, "flow", "fatal#0")
    assert guard.held_at_death == [] and guard.suspects == {}
    guard.begin_trigger()
    queue = prefetched(*range(1, 9))
    assert taken_ids(guard.take(queue, 8)) == list(range(1, 9))  # no suspects: the batch as asked
    guard = die(guard, tmp_path)
    assert guard.held_at_death == list(range(1, 9)) and guard.suspects == dict.fromkeys(range(1, 9), 0)
    assert caplog.messages[-1] == ("flow/fatal#0: the process ended while the task's trigger held 8 FlowFile(s) "
                                   "(ids 1, 2, 3, 4, 5, ...); each of them runs alone now, until the one that "
                                   "ends the process is found")

    queue = prefetched(*range(1, 12))
    for expected in (1, 2, 3):  # each suspect alone, and nothing more in its trigger
        guard.begin_trigger()
        assert taken_ids(guard.take(queue, 8)) == [expected]
        assert guard.take(queue, 8) == []
        guard.end_trigger()  # it went through: no suspect any more
    assert 3 not in guard.suspects
    guard.begin_trigger()
    assert taken_ids(guard.take(queue, 8)) == [4]
    guard = die(guard, tmp_path)
    assert guard.held_at_death == [4] and guard.deaths(4) == 1 and not guard.set_aside(flowfile(4))
    assert caplog.messages[-1].endswith("held 1 FlowFile(s) (ids 4); FlowFile 4 has now been alone in hand at "
                                        "1 death(s) (set aside at 2)")

    queue = prefetched(4, 5)
    guard.begin_trigger()
    assert taken_ids(guard.take(queue, 8)) == [4]
    guard = die(guard, tmp_path)
    assert guard.deaths(4) == DEATHS_TO_SET_ASIDE and guard.set_aside(flowfile(4))
    queue = prefetched(4, 5, 9, 10)
    guard.begin_trigger()
    assert guard.head_set_aside(queue) == flowfile(4)
    assert guard.take(queue, 8) == []  # never handed to the processor
    guard.release_set_aside()
    assert taken_ids(guard.take(queue, 8)) == [4]  # only to the task, to route it
    guard.cleared(4)
    guard.begin_trigger()
    assert taken_ids(guard.take(queue, 8)) == [5]
    guard.end_trigger()
    guard.begin_trigger()
    assert taken_ids(guard.take(queue, 8)) == [9, 10]  # not suspects: taken together again
    guard.end_trigger()
    guard.close()
    reopened = DeathGuard.open(tmp_path, "flow", "fatal#0")
    assert reopened.held_at_death == [] and set(reopened.suspects) == {6, 7, 8}  # kept on disk
    reopened.close()


def test_a_death_counts_against_a_flowfile_only_when_it_was_the_one_held_in_the_whole_process(tmp_path, caplog):
    """One death ends every trigger of the process: a FlowFile in hand beside another task's
    (PutFile writing a good file while another processor's poison ends the process) is a suspect,
    never counted; only the one FlowFile held anywhere in the process is."""
    caplog.set_level(logging.WARNING, logger="flowactors.engine.process_deaths")
    both = ["fatal#0", "put#0"]
    guards = DeathGuard.open_tasks(tmp_path, "flow", both, both)
    for guard, ids in zip(guards.values(), ([3], [1])):
        guard.begin_trigger()
        assert taken_ids(guard.take(prefetched(*ids), 8)) == ids
        guard.close()   # the process dies: no end_trigger
    guards = DeathGuard.open_tasks(tmp_path, "flow", both, both)
    assert guards["fatal#0"].suspects == {3: 0} and guards["put#0"].suspects == {1: 0}   # neither counted
    assert caplog.messages[-1].endswith("other triggers of the process held FlowFiles too, so the death is not "
                                        "counted against it; it runs alone in the process now")
    fatal, put = guards["fatal#0"], guards["put#0"]
    fatal.begin_trigger()
    assert taken_ids(fatal.take(prefetched(3), 8)) == [3]   # alone in the process: put holds nothing
    for guard in guards.values():
        guard.close()
    guards = DeathGuard.open_tasks(tmp_path, "flow", both, both)
    assert guards["fatal#0"].deaths(3) == 1 and guards["put#0"].suspects == {1: 0}


def test_a_suspect_runs_alone_in_its_process(tmp_path):
    """While a task has suspects, a suspect's trigger starts only when no other trigger of the
    process holds FlowFiles, and the others take none until it ends."""
    both = ["fatal#0", "put#0"]
    fatal = DeathGuard.open_tasks(tmp_path, "flow", ["fatal#0"], both)["fatal#0"]
    fatal.suspects[3] = 0
    fatal.process.suspicious("fatal#0", True)
    put = DeathGuard.open_tasks(tmp_path, "flow", ["put#0"], both)["put#0"]
    assert put.process is fatal.process   # one process, one view of its triggers
    put.begin_trigger()
    assert taken_ids(put.take(prefetched(1, 2), 8)) == [1, 2]   # nobody alone yet: a batch
    fatal.begin_trigger()
    assert fatal.take(prefetched(3), 8) == []   # put holds FlowFiles: the suspect waits
    fatal.end_trigger()
    put.end_trigger()
    put.begin_trigger()
    assert put.take(prefetched(4), 8) == []   # the suspect is waiting: no new takes meanwhile
    put.end_trigger()
    fatal.begin_trigger()
    assert taken_ids(fatal.take(prefetched(3), 8)) == [3]   # alone in the process
    put.begin_trigger()
    assert put.take(prefetched(4), 8) == []   # not beside it
    put.end_trigger()
    fatal.end_trigger()   # it went through: no suspect left, nothing watched any more
    assert fatal.suspects == {} and not fatal.process.watching()
    put.begin_trigger()
    assert taken_ids(put.take(prefetched(4, 5), 8)) == [4, 5]


def test_a_trigger_that_takes_twice_is_recorded_whole(tmp_path):
    record = InHandRecord(tmp_path / "r.inhand")
    record.add([1, 2])
    record.add([3])
    record.close()
    assert InHandRecord(tmp_path / "r.inhand").held_at_death() == [1, 2, 3]
    record = InHandRecord(tmp_path / "r.inhand")
    record.reset()
    assert record.held_at_death() == []


@pytest.mark.parametrize("name, content", [
    ("fatal%230.inhand", b"NOPE\x01\x01\x00\x00\x02\x00\x00\x00"),
    ("fatal%230.suspects", b"{not json"),
    ("fatal%230.suspects", json.dumps({"format": "flowactors process-death suspects", "version": 9,
                                       "suspects": []}).encode()),
    ("fatal%230.suspects", json.dumps({"format": "flowactors process-death suspects", "version": 1,
                                       "suspects": [[1, -1]]}).encode()),
])
def test_a_damaged_or_foreign_file_is_said_and_read_as_empty(tmp_path, caplog, name, content):
    folder = tmp_path / "process-deaths" / "flow"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="flowactors.engine.process_deaths"):
        guard = DeathGuard.open(tmp_path, "flow", "fatal#0")
    assert guard.held_at_death == [] and guard.suspects == {}
    assert str(folder / name) in caplog.text
    guard.close()


def test_on_ray_the_flowfile_that_ends_the_executor_goes_to_failure_and_the_rest_through(ray_session, tmp_path):
    """The issue's case: 10 files, one ends the process that takes it. Before, 16 deaths in 66 s,
    none delivered, then ActorUnavailableError; now the other 9 are delivered once and the one is
    routed to failure, named, after at most three deaths."""
    sources(tmp_path / "in", 10, bad=4)
    flow = Flow("fatal")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")})
    # in a process of its own: a death in a shared executor would also end GetFile's task, which may
    # have committed files it had not deleted yet, and takes them again (at least once, as NiFi's)
    fatal = flow.add(Fatal, "fatal", isolated=True)
    flow.add(PutFile, "ok", properties={"Directory": str(tmp_path / "ok")}, auto_terminate=["success", "failure"])
    flow.add(PutFile, "failed", properties={"Directory": str(tmp_path / "failed")},
             auto_terminate=["success", "failure"])
    flow.connect(get, fatal)
    flow.connect(fatal, "ok", relationships=("success",))
    flow.connect(fatal, "failed", relationships=("failure",))
    final = run_flow(flow, tmp_path / "repository", engine="ray", timeout=180, stall_seconds=10)
    assert not final.get("timed_out") and "stalled" not in final
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == [f"f{i}.txt" for i in range(10) if i != 4]
    assert [p.name for p in (tmp_path / "failed").iterdir()] == ["f4.txt"]
    errors = [e["error"] for e in processor_totals(final)["fatal"]["recent_errors"]]
    assert any("ProcessKilledByFlowFile: processing it ended the processor's process 2 times" in e
               and "routed to 'failure'" in e for e in errors), errors
    assert 1 <= final["restarts"].get("executor", 0) <= 3, (final["restarts"], errors)


def test_in_process_each_run_that_dies_narrows_it_down_until_the_flowfile_is_penalized(tmp_path):
    """Without a failure relationship, and with the whole run dying each time (the in-process
    engine): the runs that follow find the FlowFile, then keep it penalized in its queue, never
    given to the processor again, while the rest is delivered. The source makes its six FlowFiles
    once, its state committed with them (GetFile, dying with the process after its commit and
    before deleting its files, would take them again, as NiFi's does: more deaths to count)."""
    (tmp_path / "fatal_flow.py").write_text(textwrap.dedent(f"""
        import os
        from flowactors import Flow, Processor, Relationship
        from flowactors.processors import PutFile

        class SixOnce(Processor):
            input_required = False
            relationships = [Relationship("success")]

            def on_trigger(self, context, session):
                made = context.state.get()
                if made.values:
                    context.yield_()
                    return
                for i in range(6):
                    flowfile = session.write_bytes(session.create(), b"bad" if i == 2 else b"ok")
                    session.transfer(session.put_attribute(flowfile, "filename", f"f{{i}}.txt"), "success")
                context.state.replace(made, {{"made": "6"}})

        class FatalNoFailure(Processor):
            relationships = [Relationship("success")]

            def on_trigger(self, context, session):
                for flowfile in session.get_batch():
                    if session.read_bytes(flowfile) == b"bad":
                        os._exit(3)
                    session.transfer(flowfile, "success")

        flow = Flow("fatal-runs")
        flow.add(SixOnce, "make")
        flow.add(FatalNoFailure, "fatal")
        flow.add(PutFile, "ok", properties={{"Directory": {str(tmp_path / "ok")!r}}},
                 auto_terminate=["success", "failure"])
        flow.connect("make", "fatal", name="files")
        flow.connect("fatal", "ok")
        """))
    command = [FLOWACTORS, "run", str(tmp_path / "fatal_flow.py"), "--engine", "in-process", "--quiet",
               "--repository", str(tmp_path / "repository"), "--stall-seconds", "2", "--timeout", "60"]
    codes = [subprocess.run(command, capture_output=True, text=True, timeout=120) for _ in range(4)]
    # the batch, then the FlowFile alone twice: three deaths; the fourth run sets it aside
    assert [c.returncode for c in codes] == [3, 3, 3, 4], [(c.returncode, c.stderr[-500:]) for c in codes]
    # (a PutFile the death cut short leaves its hidden .partial file, as NiFi's leaves its dot file)
    placed = sorted(p.name for p in (tmp_path / "ok").iterdir() if not p.name.startswith("."))
    assert placed == [f"f{i}.txt" for i in range(6) if i != 2]
    assert "fatal: ProcessKilledByFlowFile: processing it ended the processor's process 2 times" in codes[3].stderr
    with WriteAheadFlowFileRepository(tmp_path / "repository" / "flowfile", create=False) as wal:
        kept = [(queue, f) for queue, batch in wal.recover() for f in batch]
    assert [(queue, f.attributes["filename"]) for queue, f in kept] == [("files", "f2.txt")]
    assert "(1 in 'files'; 1 penalized)" in codes[3].stderr  # stalled on it, as on any penalized FlowFile
