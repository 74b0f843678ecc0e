"""One bad FlowFile, one failing processor: the good data moves on and the run ends with a reason.

Issue 14, points 2 and 3, on both engines with real files and the durable repositories: a batch
that fails is narrowed down to the FlowFile that fails (``flowactors.engine.task``), which goes to
``failure`` where the processor has one and is penalized in its queue otherwise, named in the
error; a run until idle whose processors keep failing ends as *stalled* (exit 4 from the CLI),
``--timeout`` says it timed out, ``--fail-on-error`` applies.
"""

from __future__ import annotations

import re
import sys

import pytest
import ray.cloudpickle

from flowactors import Flow, Processor, Relationship
from flowactors.cli.main import main
from flowactors.driver.running import processor_totals, queue_totals, run_flow
from flowactors.processors import GetFile, PutFile, UpdateAttribute
from flowactors.sdk.session import CommitError
from flowactors.testing import ProcessorRunner
from repositories.flowfile import WriteAheadFlowFileRepository

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Fussy, on the Ray engine
ENGINES = ["in-process", "ray"]


class Fussy(Processor):
    """Raises on a FlowFile whose content is ``bad``; has a failure relationship."""

    relationships = [Relationship("success"), Relationship("failure")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            if session.read_bytes(flowfile) == b"bad":
                raise ValueError(f"cannot digest {flowfile.attributes['filename']}")
            session.transfer(flowfile, "success")


class Hold(Processor):
    """Takes nothing: what reaches it stays queued, attributes and all, in the log."""

    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        context.yield_()


def sources(directory, good: int, bad: list[int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(good + len(bad)):
        name = f"bad-{i:03d}.txt" if i in bad else f"ok-{i:03d}.txt"
        (directory / name).write_bytes(b"bad" if i in bad else f"line {i}\n".encode())


@pytest.fixture(params=ENGINES)
def engine(request):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


def test_one_bad_flowfile_in_16_no_longer_stops_the_queue(engine, tmp_path):
    """The issue's case: ${n:plus(3)} over n=abc. The good ones pass, each bad one is penalized in its
    queue and named in an error; the run ends as stalled, the bad ones kept in the log."""
    bad = list(range(0, 200, 16))  # 13 of 200
    sources(tmp_path / "in", 200 - len(bad), bad)
    flow = Flow("poison")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in"), "Batch Size": 200})
    mark = flow.add(UpdateAttribute, "mark", properties={"n": "${filename:startsWith('bad'):ifElse('abc', '5')}"})
    compare = flow.add(UpdateAttribute, "compare", properties={"big": "${n:plus(3)}"})
    put = flow.add(PutFile, "put", properties={"Directory": str(tmp_path / "out")}, auto_terminate=["success", "failure"])
    flow.connect(get, mark)
    flow.connect(mark, compare, name="marked")
    flow.connect(compare, put)
    final = run_flow(flow, tmp_path / "repository", engine=engine, timeout=120, stall_seconds=2)
    assert not final.get("timed_out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        f"ok-{i:03d}.txt" for i in range(200) if i not in bad]
    stalled = final["stalled"]
    assert stalled["queued"] == {"marked": len(bad)} and stalled["penalized"] == len(bad)
    compare_status = processor_totals(final)["compare"]
    penalized = [e["error"] for e in compare_status["recent_errors"] if "penalized in its queue" in e["error"]]
    assert penalized and all("plus(): subject 'abc' is not a number" in e for e in penalized)
    with WriteAheadFlowFileRepository(tmp_path / "repository" / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {"marked": len(bad)}
        kept = [f for _queue, batch in wal.recover() for f in batch]
    assert sorted(f.attributes["filename"] for f in kept) == [f"bad-{i:03d}.txt" for i in bad]
    named = {m for e in penalized for m in re.findall(r"FlowFile (\S+) penalized", e)}
    assert named and named <= {f.uuid for f in kept}


def test_a_failing_flowfile_goes_to_failure_with_the_reason(engine, tmp_path):
    bad = [3, 17, 40]
    sources(tmp_path / "in", 47, bad)
    flow = Flow("fussy")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in"), "Batch Size": 50})
    fussy = flow.add(Fussy, "fussy")
    flow.add(PutFile, "ok", properties={"Directory": str(tmp_path / "ok")}, auto_terminate=["success", "failure"])
    flow.add(Hold, "failed", auto_terminate=["success"])
    flow.connect(get, fussy)
    flow.connect(fussy, "ok", relationships=("success",))
    flow.connect(fussy, "failed", relationships=("failure",), name="failures")
    final = run_flow(flow, tmp_path / "repository", engine=engine, timeout=120,
                     until=lambda s: queue_totals(s)["failures"]["count"] == len(bad)
                     and processor_totals(s)["ok"]["flowfiles_in"] == 47)
    assert not final.get("timed_out") and "stalled" not in final
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == [
        f"ok-{i:03d}.txt" for i in range(50) if i not in bad]
    errors = [e["error"] for e in processor_totals(final)["fussy"]["recent_errors"]]
    assert sum("routed to 'failure'" in e for e in errors) == len(bad)
    with WriteAheadFlowFileRepository(tmp_path / "repository" / "flowfile", create=False) as wal:
        failed = [f for queue, batch in wal.recover() if queue == "failures" for f in batch]
    assert sorted(f.attributes["filename"] for f in failed) == [f"bad-{i:03d}.txt" for i in bad]
    for flowfile in failed:
        assert flowfile.attributes["flowactors.failure.processor"] == "fussy"
        assert flowfile.attributes["flowactors.failure.reason"] == (
            f"ValueError: cannot digest {flowfile.attributes['filename']}")


def test_the_cli_says_stalled_timed_out_and_fail_on_error(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.txt").write_bytes(b"bad")
    flow = Flow("cli-endings")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in"),
                                                "Minimum File Age": "0 sec"})  # written a moment ago, on purpose
    flow.add(UpdateAttribute, "compare", properties={"big": "${filename:plus(3)}"}, auto_terminate=["success"])
    flow.connect(get, "compare", name="q")
    flow.save(tmp_path / "stalls.json")
    run = ["run", "--engine", "in-process", "--quiet"]
    assert main([*run, str(tmp_path / "stalls.json"), "--repository", str(tmp_path / "r1"), "--stall-seconds", "1"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("flowactors: flow 'cli-endings' stopped making progress: nothing moved for ")
    assert "(1 in 'q'; 1 penalized)" in err and "compare: ExpressionError" in err

    assert main([*run, str(tmp_path / "stalls.json"), "--repository", str(tmp_path / "r1"), "--timeout", "1",
                 "--stall-seconds", "60"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("flowactors: flow 'cli-endings' timed out after 1 s before it was idle (1 FlowFiles queued")

    (tmp_path / "in2").mkdir()
    for i in range(3):
        (tmp_path / "in2" / f"f{i}").write_bytes(b"bad" if i == 1 else b"good")
    flow = Flow("cli-errors")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in2"), "Minimum File Age": "0 sec"})
    flow.add(Fussy, "fussy", auto_terminate=["success", "failure"])
    flow.connect(get, "fussy")
    flow.save(tmp_path / "errors.json")  # names test_failing_flowfiles.Fussy: tests/ is on sys.path
    assert main([*run, str(tmp_path / "errors.json"), "--repository", str(tmp_path / "r2"), "--fail-on-error"]) == 3
    for i in range(3):
        (tmp_path / "in2" / f"f{i}").write_bytes(b"bad" if i == 1 else b"good")
    assert main([*run, str(tmp_path / "errors.json"), "--repository", str(tmp_path / "r3")]) == 0
    assert not list((tmp_path / "in2").iterdir())  # all taken: the bad one went to failure


class BrokenSource(Processor):
    """A source whose every trigger raises: it never finds out whether there is work."""

    relationships = [Relationship("success")]
    input_required = False

    def on_trigger(self, context, session):
        raise OSError("the source system is down")


def test_a_log_that_refuses_commits_for_a_moment_is_not_an_idle_flow(tmp_path, monkeypatch):
    """While every commit fails (the log down for 3 s: a repository actor restarting), nothing is
    queued and no work is done, and the paced source waits a second between triggers, but no
    processor found "no work": the run goes on and delivers every file, rather than ending idle
    with files left at the source (the one-actor crash campaign met this)."""
    import time

    sources(tmp_path / "in", 60, [])
    refused = {"until": None, "count": 0}
    commit = WriteAheadFlowFileRepository.commit

    def refusing(self, *args, **kwargs):
        if refused["until"] is None and commit_calls["n"] == 4:  # get, put, get, put: then the log goes down
            refused["until"] = time.monotonic() + 3.0
        commit_calls["n"] += 1
        print("commit", round(time.monotonic(), 2), refused, flush=True)
        if refused["until"] is not None and time.monotonic() < refused["until"]:
            refused["count"] += 1
            raise OSError("the log is down for the test")
        return commit(self, *args, **kwargs)

    commit_calls = {"n": 0}
    monkeypatch.setattr(WriteAheadFlowFileRepository, "commit", refusing)
    flow = Flow("log-down")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in"), "Batch Size": 10},
                   run_schedule="1 sec")
    flow.add(PutFile, "put", properties={"Directory": str(tmp_path / "out")}, auto_terminate=["success", "failure"])
    flow.connect(get, "put")
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=120, stall_seconds=30)
    assert refused["count"] > 0 and not final.get("timed_out") and "stalled" not in final
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"ok-{i:03d}.txt" for i in range(60)]
    assert processor_totals(final)["get"]["errors"] > 0


def test_a_source_failing_on_every_trigger_ends_stalled_with_nothing_queued(tmp_path, capsys):
    flow = Flow("cli-source-down")
    flow.add(BrokenSource, "source")
    flow.add(Hold, "sink", auto_terminate=["success"])
    flow.connect("source", "sink", name="q")
    flow.save(tmp_path / "down.json")  # names test_failing_flowfiles.BrokenSource: tests/ is on sys.path
    assert main(["run", str(tmp_path / "down.json"), "--engine", "in-process", "--quiet", "--repository",
                 str(tmp_path / "r"), "--stall-seconds", "1", "--timeout", "60"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("flowactors: flow 'cli-source-down' stopped making progress: nothing moved for ")
    assert "Nothing is queued. Last errors:" in err and "source: OSError: the source system is down" in err


def test_a_commit_kept_on_failure_stays_for_the_caller_then_routes_its_inputs():
    runner = ProcessorRunner(Fussy)
    runner.enqueue(b"bad", {"filename": "b.txt"})
    session = runner.new_session()
    [flowfile] = session.get_batch()
    session.transfer(session.put_attribute(flowfile, "x", "1"), "success")
    real_commit = runner.backend.commit

    def refuse(batch):
        raise CommitError("refused for the test")

    runner.backend.commit = refuse
    with pytest.raises(CommitError):
        session.commit(keep_on_failure=True)
    assert [f.uuid for f in session.inputs] == [flowfile.uuid]  # not rolled back
    runner.backend.commit = real_commit
    session.route_inputs("failure", {"flowactors.failure.reason": "because"})
    [failed] = runner.output("failure")
    assert failed.uuid == flowfile.uuid and failed.attributes["flowactors.failure.reason"] == "because"
    assert "x" not in failed.attributes and runner.output("success") == []


def test_sigterm_stops_a_run_as_gracefully_as_ctrl_c(tmp_path):
    """The flow stops through the controller (tasks finish, final checkpoint, lock let go): the
    FlowFiles it held stay in the log and the repository opens at once."""
    import signal
    import subprocess
    import time

    (tmp_path / "in").mkdir()
    flow = Flow("terminated")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")})
    flow.add(UpdateAttribute, "never", properties={"x": "${filename:plus(3)}"}, auto_terminate=["success"])
    flow.connect(get, "never", name="q")
    flow.save(tmp_path / "flow.json")
    sources(tmp_path / "in", 5, [])
    child = subprocess.Popen([sys.executable, "-m", "flowactors.cli", "run", str(tmp_path / "flow.json"), "--engine",
                              "in-process", "--repository", str(tmp_path / "repository"), "--quiet",
                              "--stall-seconds", "600"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while list((tmp_path / "in").iterdir()) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert err.strip().splitlines()[-1] == "flowactors: interrupted by SIGTERM"
    with WriteAheadFlowFileRepository(tmp_path / "repository" / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {"q": 5}
