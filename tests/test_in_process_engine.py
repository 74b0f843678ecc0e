"""The in-process engine: a whole flow in one process, through the same controller as on Ray.

What it must share with the Ray engine is checked here on real files and the durable repositories:
the same flow gives the same result, a repository left by one engine is picked up by the other,
and it refuses what it cannot do with a message naming the processor. Killing it with SIGKILL is
tests/test_crash_cluster.py's ``test_kill_the_in_process_engine_8_times_inside_checkpoints``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import ray.cloudpickle

from flowactors import Flow, Processor, Relationship
from flowactors.cli.main import main
from flowactors.engine.errors import FlowStartError
from flowactors.driver.running import processor_totals, queue_totals, run_flow
from flowactors.processors import GetFile, PutFile, RouteOnAttribute, UpdateAttribute
from repositories.flowfile import WriteAheadFlowFileRepository

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Hold, on the Ray engine
ROOT = Path(__file__).resolve().parent.parent


class Hold(Processor):
    """Takes nothing: whatever reaches it stays queued (and in the write-ahead log)."""

    relationships = [Relationship("success"), Relationship("failure")]

    def on_trigger(self, context, session):
        context.yield_()


def write_sources(directory: Path, count: int) -> dict[str, bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    files = {f"f{i:04d}.txt": f"record {i} {'x' * (i % 97)}\n".encode() for i in range(count)}
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def routing_flow(source: Path, out: Path) -> Flow:
    flow = Flow("engines-agree")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 50})
    tag = flow.add(UpdateAttribute, "tag", properties={"digit": "${filename:substring(4, 5)}"})
    route = flow.add(RouteOnAttribute, "route", properties={"low": "${digit:lt(5)}"},
                     auto_terminate=["unmatched"])
    put = flow.add(PutFile, "put", properties={"Directory": str(out / "${digit}")},
                   auto_terminate=["success", "failure"])
    flow.connect(get, tag)
    flow.connect(tag, route)
    flow.connect(route, put, relationships=("low",))
    return flow


def test_the_same_flow_gives_the_same_result_on_both_engines(ray_session, tmp_path):
    results = {}
    for engine in ("in-process", "ray"):
        source, out = tmp_path / engine / "in", tmp_path / engine / "out"
        files = write_sources(source, 400)
        final = run_flow(routing_flow(source, out), tmp_path / engine / "repository", timeout=120, engine=engine)
        assert not final.get("timed_out") and all(p["errors"] == 0 for p in final["processors"])
        placed = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.txt")}
        assert placed == {f"{name[4]}/{name}": data for name, data in files.items() if int(name[4]) < 5}
        assert list(source.iterdir()) == []
        results[engine] = ({n: (p["flowfiles_in"], p["flowfiles_out"]) for n, p in processor_totals(final).items()},
                           {q: (s["total_in"], s["count"]) for q, s in queue_totals(final).items()})
    assert results["in-process"] == results["ray"]
    assert results["ray"][0]["put"] == (200, 0)


@pytest.mark.parametrize("first, second", [("in-process", "ray"), ("ray", "in-process")])
def test_a_repository_left_by_one_engine_is_delivered_by_the_other(ray_session, tmp_path, first, second):
    source, out, repository = tmp_path / "in", tmp_path / "out", tmp_path / "repository"
    files = write_sources(source, 300)

    def flow(sink: type[Processor], **properties) -> Flow:
        flow = Flow("handover")
        get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 40})
        flow.add(sink, "sink", properties=properties, auto_terminate=["success", "failure"])
        flow.connect(get, "sink", name="waiting")
        return flow

    held = run_flow(flow(Hold), repository, engine=first, timeout=120,
                    until=lambda status: queue_totals(status)["waiting"]["count"] == 300)
    assert not held.get("timed_out") and list(source.iterdir()) == []
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {"waiting": 300}  # only the log has them now

    final = run_flow(flow(PutFile, Directory=str(out)), repository, engine=second, timeout=120)
    assert final["recovery"]["restored"] == 300
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {}


def test_the_in_process_engine_starts_no_ray(tmp_path):
    """Run in a fresh interpreter: this test session's Ray must not hide one started by the run."""
    script = f"""
import json, psutil, ray, sys
sys.path.insert(0, {str(ROOT / 'tests')!r})
from test_in_process_engine import routing_flow, write_sources
from pathlib import Path
from flowactors import run_flow
tmp = Path({str(tmp_path)!r})
write_sources(tmp / "in", 50)
final = run_flow(routing_flow(tmp / "in", tmp / "out"), tmp / "repository", engine="in-process", timeout=60)
print(json.dumps({{"ray": ray.is_initialized(), "children": [p.name() for p in psutil.Process().children(recursive=True)],
                  "put": [p["flowfiles_in"] for p in final["processors"] if p["name"] == "put"]}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"ray": False, "children": [], "put": [25]}


def test_the_cli_runs_a_flow_in_process(tmp_path, capsys):
    source, out = tmp_path / "in", tmp_path / "out"
    write_sources(source, 30)
    definition = tmp_path / "flow.json"
    routing_flow(source, out).save(definition)
    assert main(["run", str(definition), "--engine", "in-process", "--repository", str(tmp_path / "repo"),
                 "--quiet", "--json"]) == 0
    final = json.loads(capsys.readouterr().out)
    assert processor_totals(final)["put"]["flowfiles_in"] == 15
    assert len(list(out.rglob("*.txt"))) == 15


def test_the_in_process_engine_refuses_a_runtime_env_and_spark_naming_the_processor(tmp_path):
    flow = Flow("needs-ray")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path)})
    flow.add(UpdateAttribute, "pinned", runtime_env={"env_vars": {"A": "1"}}, auto_terminate=["success"])
    flow.connect(get, "pinned")
    with pytest.raises(FlowStartError, match=r"pinned ask\(s\) for a runtime_env of their own.*engine='ray'"):
        run_flow(flow, tmp_path / "repository", engine="in-process", timeout=30)

    from flowactors.services import CSVReader, ParquetRecordSetWriter
    from flowactors.spark.processors import ExecuteSparkSQL

    flow = Flow("needs-spark")
    flow.add_service(CSVReader, "csv-in")
    flow.add_service(ParquetRecordSetWriter, "parquet-out")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "empty")})
    flow.add(ExecuteSparkSQL, "sql", properties={"SQL Query": "SELECT 1", "Record Reader": "csv-in",
                                                 "Record Writer": "parquet-out"},
             auto_terminate=["success", "original", "failure"])
    flow.connect(get, "sql")
    with pytest.raises(FlowStartError, match=r"sql run\(s\) on Spark.*engine='ray'"):
        run_flow(flow, tmp_path / "repository2", engine="in-process", timeout=30)
    with pytest.raises(ValueError, match="engine must be one of 'ray', 'in-process', 'stateless', not 'threads'"):
        run_flow(flow, tmp_path / "repository3", engine="threads")


def test_the_in_process_engine_refuses_a_spark_processor_even_one_naming_a_running_service(tmp_path):
    """Spark is reached through Ray: a Spark processor naming a service someone else runs is
    refused before the flow starts, as one using the flow's own (the stateless engine, which
    runs inside Ray Data, takes the former)."""
    from flowactors.services import CSVReader, ParquetRecordSetWriter
    from flowactors.spark.processors import ExecuteSparkSQL

    flow = Flow("named-spark")
    flow.add_service(CSVReader, "csv-in")
    flow.add_service(ParquetRecordSetWriter, "parquet-out")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "empty")})
    flow.add(ExecuteSparkSQL, "sql", properties={"SQL Query": "SELECT 1", "Spark Service": "shared.spark",
                                                 "Record Reader": "csv-in", "Record Writer": "parquet-out"},
             auto_terminate=["success", "original", "failure"])
    flow.connect(get, "sql")
    with pytest.raises(FlowStartError, match=r"sql run\(s\) on Spark.*engine='ray'"):
        run_flow(flow, tmp_path / "repository", engine="in-process", timeout=30)
