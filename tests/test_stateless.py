"""The stateless engine: a whole flow as one transaction (seed 004), on real files.

The seed's example first: a source that moves its offset in ``commit_async``'s callback, a
transform and a sink that fails on a chosen record; a failed trigger moves no offset, the next
one after the fault is cleared delivers every record, and a process SIGKILLed mid-trigger is
rerun without skipping an offset. Then the engine's contract: outputs, failure ports, exceptions,
timeouts, left-over FlowFiles, held callbacks, state kept only by a trigger that succeeded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowactors import run_flow
from flowactors import Flow, Processor, Relationship
from flowactors.processors import GenerateFlowFile, ListFile, RouteOnAttribute, UpdateAttribute
from flowactors.stateless import InMemoryStateStore, StatelessFlow, TriggerFailed
from repositories.model import StateChange, StateMap
from stateless_flows import offsets_flow, read_offset, write_records

ROOT = Path(__file__).resolve().parent.parent


def delivered(root: Path) -> dict[int, bytes]:
    return {int(p.name): p.read_bytes() for p in (root / "out").iterdir()}


def expected(count: int) -> dict[int, bytes]:
    return {i: f"record-{i} transformed-{i}".encode() for i in range(count)}


# ------------------------------------------------------------------------- the seed's example
def test_a_failed_trigger_commits_no_offset_and_the_next_delivers_every_record(tmp_path):
    write_records(tmp_path / "records.txt", 35)
    (tmp_path / "fault").write_text("17")
    with StatelessFlow(offsets_flow(tmp_path, per_trigger=10)) as flow:
        assert flow.trigger().success and read_offset(tmp_path / "offset") == 10
        failed = flow.trigger()  # records 10..19: the sink refuses 17
        assert not failed.success and failed.failure.kind == "exception"
        assert failed.failure.processor == "sink" and "the sink refuses record 17" in failed.reason
        assert read_offset(tmp_path / "offset") == 10  # the callback never ran
        assert flow.trigger().success is False  # the same records again, the same fault
        assert read_offset(tmp_path / "offset") == 10
        (tmp_path / "fault").unlink()
        while (result := flow.trigger()).commits:
            assert result.success
    assert read_offset(tmp_path / "offset") == 35
    assert delivered(tmp_path) == expected(35)  # each record once (the sink is idempotent)


def test_a_process_killed_mid_trigger_skips_no_offset(tmp_path):
    count = 60
    write_records(tmp_path / "records.txt", count)
    script = [sys.executable, str(ROOT / "tests" / "stateless_flows.py"), str(tmp_path), "8"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    child = subprocess.Popen([*script, "0.05"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill once a trigger is half way through its records
            offset = read_offset(tmp_path / "offset")
            if offset >= 16 and len(list((tmp_path / "out").iterdir())) >= offset + 4:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the child never got into the middle of a trigger")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(10)
    at_kill = read_offset(tmp_path / "offset")
    assert 16 <= at_kill < count
    assert set(range(at_kill)) <= set(delivered(tmp_path))  # no offset moved past an undelivered record
    rerun = subprocess.run([*script, "0"], capture_output=True, text=True, env=env, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    lines = [json.loads(line) for line in rerun.stdout.splitlines()]
    assert all(line["success"] for line in lines) and lines[-1]["commits"] == 0
    assert read_offset(tmp_path / "offset") == count
    assert delivered(tmp_path) == expected(count)


# ------------------------------------------------------------------------- the engine's contract
def ports_flow() -> Flow:
    flow = Flow("ports")
    tag = flow.add(UpdateAttribute, "tag", properties={"length": "${filename:length()}"})
    route = flow.add(RouteOnAttribute, "route", properties={"long": "${length:gt(3)}"})
    flow.connect(flow.add_input_port("in"), tag)
    flow.connect(tag, route)
    flow.connect(route, flow.add_output_port("out"), "unmatched")
    flow.connect(route, flow.add_output_port("rejected"), "long")
    return flow


def test_outputs_are_what_reached_each_output_port():
    with StatelessFlow(ports_flow()) as flow:
        result = flow.trigger([("alpha", {"filename": "a"}), (b"beta", {"filename": "long-name"}), "gamma"])
    assert result.success and result.commits == 3
    assert [(o.attributes["filename"], o.content) for o in result.outputs["out"]] == [("a", b"alpha")]
    assert [o.content for o in result.outputs["rejected"]] == [b"beta", b"gamma"]  # a uuid is a long name
    assert result.outputs["out"][0].attributes["length"] == "1"


def test_a_flowfile_at_a_failure_port_fails_the_trigger():
    with StatelessFlow(ports_flow(), failure_ports=["rejected"]) as flow:
        assert flow.trigger([("x", {"filename": "ok"})]).success
        failed = flow.trigger([("x", {"filename": "ok"}), ("y", {"filename": "too-long"})])
    assert not failed.success and failed.failure.kind == "failure port" and failed.failure.port == "rejected"
    assert failed.outputs == {} and "failure port 'rejected' (from 'route')" in failed.reason
    with pytest.raises(ValueError, match="'nope' are not output ports"):
        StatelessFlow(ports_flow(), failure_ports=["nope"])


class Slow(Processor):
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            time.sleep(0.2)
            session.transfer(flowfile, "success")


def test_a_trigger_over_its_timeout_fails_and_keeps_nothing():
    flow = Flow("slow")
    slow = flow.add(Slow, "slow", batch_size=1)
    flow.connect(flow.add_input_port("in"), slow)
    flow.connect(slow, flow.add_output_port("out"))
    with StatelessFlow(flow, timeout="0.5 sec") as stateless:
        result = stateless.trigger([b"1", b"2", b"3", b"4", b"5"])
        assert not result.success and result.failure.kind == "timeout" and "timeout of 0.5 s" in result.reason
        assert stateless.trigger([b"1"]).success  # the next trigger starts clean


class Counting(Processor):
    """A source that counts in its state and says so in commit_async's callbacks."""

    input_required = False
    relationships = [Relationship("success")]
    calls: list[str] = []

    def on_trigger(self, context, session):
        state = context.state.get()
        n = int(state.get("n", "0"))
        session.transfer(session.put_attribute(session.create(), "n", str(n)), "success")
        context.state.replace(state, {"n": str(n + 1)})
        session.commit_async(on_success=lambda: Counting.calls.append(f"ok {n}"),
                             on_failure=lambda err: Counting.calls.append(f"failed {n}: {err.kind}"))


class FailOn(Processor):
    relationships = [Relationship("success")]
    dynamic_properties = True

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            if flowfile.attributes["n"] == context.property("n").raw:
                raise ValueError(f"no {flowfile.attributes['n']}")
            session.transfer(flowfile, "success")


def test_state_and_callbacks_are_kept_only_when_the_trigger_succeeds():
    Counting.calls = []
    flow = Flow("counting")
    source = flow.add(Counting, "source")
    check = flow.add(FailOn, "check", properties={"n": "1"}, auto_terminate=["success"])
    flow.connect(source, check)
    store = InMemoryStateStore()
    with StatelessFlow(flow, state=store) as stateless:
        first = stateless.trigger()
        assert [o.attributes["n"] for o in first.outputs["check.success"]] == ["0"]  # no ports: the flow's ends
        assert store.get_state("counting/source") == StateMap(0, {"n": "1"})
        for _ in range(2):
            failed = stateless.trigger()
            assert not failed.success and failed.failure.processor == "check"
        assert store.get_state("counting/source") == StateMap(0, {"n": "1"})  # nothing of the failures
    assert Counting.calls == ["ok 0", "failed 1: exception", "failed 1: exception"]


def test_a_result_waits_for_acknowledge_or_abandon():
    Counting.calls = []
    flow = Flow("acks")
    flow.connect(flow.add(Counting, "source"), flow.add_output_port("out"))
    with StatelessFlow(flow) as stateless:
        result = stateless.trigger(acknowledge=False)
        assert result.success and result.pending and Counting.calls == []
        assert stateless.store.get_state("acks/source") == StateMap()  # nothing kept yet
        later = stateless.trigger(acknowledge=False)  # goes on from the waiting result's state
        assert [o.attributes["n"] for o in later.outputs["out"]] == ["1"]
        result.acknowledge()
        assert Counting.calls == ["ok 0"] and not result.pending
        later.abandon()
        assert Counting.calls == ["ok 0", "failed 1: abandoned"]
        assert stateless.store.get_state("acks/source").values == {"n": "1"}
        stateless.trigger(acknowledge=False)  # left pending: close abandons it
    assert Counting.calls == ["ok 0", "failed 1: abandoned", "failed 1: abandoned"]


def test_waiting_results_go_on_from_one_another_and_are_kept_only_in_order():
    """Triggers that run while earlier results wait (ExecuteStateless inside a stateless flow)
    read the state those left, so no two hand out the same records; one whose predecessor was
    not kept (yet) cannot be kept either: its acknowledge fails and runs its on_failure."""
    Counting.calls = []
    flow = Flow("chain")
    flow.connect(flow.add(Counting, "source"), flow.add_output_port("out"))
    with StatelessFlow(flow) as stateless:
        results = [stateless.trigger(acknowledge=False) for _ in range(3)]
        assert [o.attributes["n"] for r in results for o in r.outputs["out"]] == ["0", "1", "2"]
        results[0].acknowledge()
        with pytest.raises(TriggerFailed, match="changed after this trigger read it") as lost:
            results[2].acknowledge()  # before the one it went on from
        assert lost.value.kind == "state conflict" and not results[2].success and results[2].failure is lost.value
        results[1].acknowledge()
        assert stateless.store.get_state("chain/source") == StateMap(1, {"n": "2"})
        assert Counting.calls == ["ok 0", "failed 2: state conflict", "ok 1"]
        assert [o.attributes["n"] for o in stateless.trigger().outputs["out"]] == ["2"]  # the lost one again


def test_a_trigger_keeps_its_changes_together_in_a_shared_store():
    """Two flows over one store: a trigger whose changes cannot all be written writes none."""
    store = InMemoryStateStore()
    flow = Flow("pair")
    for name in ("a", "b"):
        flow.connect(flow.add(Counting, name), flow.add_output_port(f"out-{name}"))
    with StatelessFlow(flow, state=store) as one, StatelessFlow(flow, state=store) as other:
        waiting = one.trigger(acknowledge=False)
        store.commit_state(StateChange("pair/b", {"n": "7"}))  # the other flow moved b meanwhile
        with pytest.raises(TriggerFailed, match="pair/b"):
            waiting.acknowledge()
        assert store.get_state("pair/a") == StateMap()  # a was not written without b
        assert other.trigger().success and store.get_state("pair/a") == StateMap(0, {"n": "1"})


class Penalize(Processor):
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            session.transfer(session.penalize(flowfile), "success")


def test_flowfiles_no_processor_takes_fail_the_trigger_with_where_they_are():
    flow = Flow("loop")
    penalize, again = flow.add(Penalize, "penalize"), flow.add(Penalize, "again")
    flow.connect(flow.add_input_port("in"), penalize)
    flow.connect(penalize, again)
    flow.connect(again, flow.add_output_port("out"))
    with StatelessFlow(flow) as stateless:
        result = stateless.trigger([b"x"])
    assert not result.success and result.failure.kind == "left over"
    assert "1 in 'penalize.success.again'" in result.reason


#: files opened for writing while ``WATCHING`` is set (an audit hook cannot be removed, so it is
#: installed once and switched on only inside the test)
OPENED: list[str] = []
WATCHING = False


def _audit(event: str, args: tuple) -> None:
    if WATCHING and event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writing:
            OPENED.append(str(path))


sys.addaudithook(_audit)


def test_sessions_never_touch_disk(tmp_path):
    """GenerateFlowFile -> UpdateAttribute on the stateless engine opens no file for writing
    (open(), os.open and io all raise the "open" audit event; the hook is checked to see PutFile)."""
    global WATCHING
    from flowactors.processors import PutFile

    flow = Flow("memory")
    gen = flow.add(GenerateFlowFile, "gen", properties={"File Size": "1 KB", "Batch Size": 100})
    flow.connect(gen, flow.add(UpdateAttribute, "tag", properties={"k": "v"}, auto_terminate=["success"]))
    written = Flow("written")
    flow_in = written.add(GenerateFlowFile, "gen", properties={"File Size": "1 KB", "Batch Size": 2})
    written.connect(flow_in, written.add(PutFile, "put", properties={"Directory": str(tmp_path / "out")},
                                         auto_terminate=["success", "failure"]))
    with StatelessFlow(flow) as stateless, StatelessFlow(written) as writing:
        OPENED.clear()
        WATCHING = True
        try:
            result = stateless.trigger()
            quiet = list(OPENED)
            writing.trigger()  # PutFile writes outside the flow: the hook sees it
        finally:
            WATCHING = False
    assert result.success and len(result.outputs["tag.success"]) == 100
    assert all(len(o.content) == 1024 for o in result.outputs["tag.success"])
    assert quiet == []
    put = sorted(p.name for p in (tmp_path / "out").iterdir())  # PutFile opens by name in the directory
    assert len(put) == 2 and all(any(name in path for path in OPENED) for name in put)


def test_listfile_state_on_the_stateless_engine_lists_new_files_only(tmp_path):
    (tmp_path / "a").write_text("a")
    flow = Flow("list")
    flow.add(ListFile, "list", properties={"Input Directory": str(tmp_path)}, auto_terminate=["success"])
    store = InMemoryStateStore()
    with StatelessFlow(flow, state=store) as stateless:
        assert [o.attributes["filename"] for o in stateless.trigger().outputs["list.success"]] == ["a"]
    (tmp_path / "b").write_text("b")
    with StatelessFlow(flow, state=store) as stateless:  # a new engine over the same (caller's) store
        assert [o.attributes["filename"] for o in stateless.trigger().outputs["list.success"]] == ["b"]
        assert stateless.trigger().commits == 0


# ------------------------------------------------------------------------- inside a flow on Ray
@pytest.mark.ray
def test_execute_stateless_in_a_flow_on_ray(ray_session, tmp_path):
    from flowactors.driver.running import processor_totals, run_flow
    from flowactors.processors import ExecuteStateless, GetFile, PutFile
    from stateless_flows import checking_flow

    source = tmp_path / "in"
    source.mkdir()
    for i in range(6):
        (source / f"good-{i}.txt").write_text(f"record {i}")
    (source / "bad.txt").write_text("reject this one")
    (source / "slow.txt").write_text("takes too long")
    definition = tmp_path / "checking.json"
    checking_flow().save(definition)

    flow = Flow("outer")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source)})
    pick = flow.add(RouteOnAttribute, "pick", properties={"slow": "${filename:startsWith('slow')}"})
    check = flow.add(ExecuteStateless, "check", properties={"Flow Definition": str(definition), "Failure Ports": "bad"})
    late = flow.add(ExecuteStateless, "late", properties={"Flow Definition": str(definition),
                                                          "Dataflow Timeout": "0 sec"})
    flow.connect(get, pick)
    flow.connect(pick, check, "unmatched")
    flow.connect(pick, late, "slow")
    for relationship in ("output", "original", "failure", "timeout"):
        put = flow.add(PutFile, f"put-{relationship}", properties={"Directory": str(tmp_path / relationship)},
                       auto_terminate=["success", "failure"])
        flow.connect(check, put, relationship, name=f"check-{relationship}")
        flow.connect(late, put, relationship, name=f"late-{relationship}")
    final = run_flow(flow, tmp_path / "repository", timeout=120)
    assert not final.get("timed_out") and all(p["errors"] == 0 for p in final["processors"])

    def files(folder: str) -> dict[str, str]:
        return {p.name: p.read_text() for p in (tmp_path / folder).iterdir()} if (tmp_path / folder).exists() else {}

    assert files("output") == {f"good-{i}.txt": f"record {i} [checked]" for i in range(6)}
    assert files("original") == {f"good-{i}.txt": f"record {i}" for i in range(6)}
    assert files("failure") == {"bad.txt": "reject this one"}
    assert files("timeout") == {"slow.txt": "takes too long"}
    assert processor_totals(final)["check"]["flowfiles_in"] == 7


# ------------------------------------------------------------------------- Flow.run and the CLI
def test_flow_run_and_the_cli_trigger_until_the_sources_have_nothing_left(tmp_path, capsys):
    from flowactors.cli.main import main

    write_records(tmp_path / "records.txt", 25)
    final = run_flow(offsets_flow(tmp_path, per_trigger=10), engine="stateless")
    assert final["engine"] == "stateless" and final["triggers"] == 4  # 10, 10, 5, then nothing
    assert final["outputs"] == {"sink.success": 25}  # no output ports: the flow's ends
    assert read_offset(tmp_path / "offset") == 25 and delivered(tmp_path) == expected(25)

    definition = tmp_path / "ports.json"
    ports_flow().save(definition)
    assert main(["run", str(definition), "--stateless"]) == 0  # no source: one trigger with no work
    assert "1 stateless triggers" in capsys.readouterr().out

    counting = tmp_path / "counting.py"
    counting.write_text(
        "from flowactors import Flow\n"
        "from flowactors.processors import GenerateFlowFile, RouteOnAttribute\n"
        "flow = Flow('gen')\n"
        "gen = flow.add(GenerateFlowFile, 'gen', properties={'Max FlowFiles': 30, 'Batch Size': 10})\n"
        "route = flow.add(RouteOnAttribute, 'route', properties={'stop': '${uuid:isEmpty():not()}'})\n"
        "flow.connect(gen, route)\n"
        "flow.connect(route, flow.add_output_port('out'), 'unmatched')\n"
        "flow.connect(route, flow.add_output_port('stop'), 'stop')\n")
    assert main(["run", str(counting), "--stateless", "--json"]) == 0
    final = json.loads(capsys.readouterr().out)
    assert final["outputs"] == {"out": 0, "stop": 30} and final["triggers"] == 4
    assert main(["run", str(counting), "--stateless", "--failure-port", "stop", "--quiet"]) == 5
    err = capsys.readouterr().err
    assert "stateless trigger 1 failed: a FlowFile reached failure port 'stop'" in err
    assert "nothing of it was kept" in err


@pytest.mark.ray
def test_the_ray_data_example_runs_each_batch_as_a_transaction(ray_session):
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from stateless_ray_data import main
    finally:
        sys.path.remove(str(ROOT / "examples"))
    summary = main(4_600)
    ports = summary["ports"]
    low, high = summary["failed_batch"]
    assert low <= 4242 <= high and ports["failure"] == high - low + 1  # the whole batch, nothing of it kept
    kept = [i for i in range(4_600) if not low <= i <= high]
    assert ports["review"] == sum(1 for i in kept if i % 7 == 0)
    assert ports["accepted"] == sum(1 for i in kept if i % 7)


def test_what_needs_the_ray_engine_is_refused_by_name():
    from flowactors.spark.processors import ExecuteSparkSQL

    flow = Flow("needs-ray")
    gen = flow.add(GenerateFlowFile, "gen", runtime_env={"env_vars": {"A": "1"}})
    flow.connect(gen, flow.add_output_port("out"))
    with pytest.raises(ValueError, match="gen ask\\(s\\) for a runtime_env"):
        StatelessFlow(flow)
    from flowactors.services import CSVReader, ParquetRecordSetWriter

    flow = Flow("spark")
    flow.add_service(CSVReader, "csv-in")
    flow.add_service(ParquetRecordSetWriter, "parquet-out")
    sql = flow.add(ExecuteSparkSQL, "sql", properties={"SQL Query": "select 1", "Record Reader": "csv-in",
                                                       "Record Writer": "parquet-out"},
                   auto_terminate=["success", "failure", "original"])
    flow.connect(flow.add_input_port("in"), sql)
    with pytest.raises(ValueError, match="sql run\\(s\\) on Spark.*'Spark Service' property.*engine='ray'"):
        StatelessFlow(flow)


def test_a_failed_trigger_leaves_nothing_in_a_processors_bins():
    """MergeContent holds a bin across its triggers; a trigger that fails with a bin not full
    must not hand its FlowFiles (whose content is gone with it) to the next trigger."""
    from flowactors.processors import MergeContent

    flow = Flow("bins")
    merge = flow.add(MergeContent, "merge", properties={"Minimum Number of Entries": 3,
                                                        "Maximum Number of Entries": 3},
                     auto_terminate=["original", "failure"])
    flow.connect(flow.add_input_port("in"), merge)
    flow.connect(merge, flow.add_output_port("out"), "merged")
    with StatelessFlow(flow) as stateless:
        failed = stateless.trigger([b"a", b"b"])
        assert not failed.success and failed.failure.kind == "left over" and "'in.success.merge'" in failed.reason
        result = stateless.trigger([b"c", b"d", b"e"])
    assert result.success and [o.content for o in result.outputs["out"]] == [b"cde"]


class Holder(Processor):
    """Holds FlowFiles in a session of its own until it has two, then passes them on; its
    on_stopped lets them go and then raises."""

    relationships = [Relationship("success")]
    scheduled = 0

    def on_scheduled(self, context):
        Holder.scheduled += 1
        self.holding, self.held = None, []

    def on_trigger(self, context, session):
        flowfiles = session.get_batch()
        if self.holding is None:
            self.holding = session.new_session()
        session.migrate(self.holding, flowfiles)
        self.held += flowfiles
        if len(self.held) >= 2:
            self.holding.migrate(session, self.held)
            session.transfer_batch(self.held, "success")
            self.held = []

    def on_stopped(self, context):
        if self.holding is not None:
            self.holding.rollback()
        raise RuntimeError("on_stopped failed")


def test_a_processor_that_fails_to_stop_is_still_scheduled_again_after_a_failed_trigger():
    Holder.scheduled = 0
    flow = Flow("holding")
    holder = flow.add(Holder, "holder")
    flow.connect(flow.add_input_port("in"), holder)
    flow.connect(holder, flow.add_output_port("out"))
    with StatelessFlow(flow) as stateless:
        assert stateless.trigger([b"a"]).failure.kind == "left over"
        result = stateless.trigger([b"b", b"c"])
        assert Holder.scheduled == 2
    assert result.success and [o.content for o in result.outputs["out"]] == [b"b", b"c"]
