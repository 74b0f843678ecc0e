"""Flows on a real Ray cluster: ``flowactors submit|status|stop|logs`` against a head started with
``ray start --head`` (loopback, dashboard on, metrics export on), the metrics it exports, and a
stop that leaves queued FlowFiles durable for the next start.

The head is this module's own (its own temp dir and ports) and every CLI call is a subprocess, so an
in-process Ray of another test never gets in the way; teardown kills exactly the head's processes.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from flowactors.driver.running import RAY_SYSTEM_CONFIG
from tests.cluster_helpers import free_ports, kill_head, scrape

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLOWACTORS = str(BIN / "flowactors")
TERMINAL_STATES = ("succeeded", "failed", "stopped")


class Head:
    def __init__(self, temp_dir: str, env: dict, dashboard: int, metrics: int):
        self.temp_dir = temp_dir
        self.env = env
        self.address = f"http://127.0.0.1:{dashboard}"
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"

    def cli(self, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([FLOWACTORS, *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def status(self, flow: str, cwd: Path) -> dict:
        done = self.cli("status", flow, "--address", self.address, "--json", cwd=cwd)
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)

    def follow(self, flow: str, cwd: Path, until=None, timeout: float = 400) -> list[dict]:
        """``flowactors status`` until the flow's job ends (or ``until(info)`` holds); every look."""
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.status(flow, cwd)
            seen.append(info)
            if info["state"] in TERMINAL_STATES or (until is not None and until(info)):
                return seen
            time.sleep(2)
        raise AssertionError(f"flow {flow} did not get there in {timeout} s; last: {seen[-1:]}")


@pytest.fixture(scope="module")
def head():
    temp_dir = tempfile.mkdtemp(prefix="fa-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    gcs, dashboard, metrics, client, agent, agent_grpc, runtime_env, node_manager = free_ports(8)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # the head runs flowactors from this virtualenv: `python` of the job entrypoints is this one
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    # a throwaway loopback head: no token (one left by any local ray.init would switch tokens on)
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_metrics_report_interval_ms"] = "2000"  # exports every 2 s (default 10 s): a short flow is seen running
    command = [str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
               "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
               f"--metrics-export-port={metrics}", f"--ray-client-server-port={client}",
               f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
               f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node_manager}",
               f"--temp-dir={temp_dir}", "--num-cpus=2", "--disable-usage-stats",
               f"--system-config={json.dumps(RAY_SYSTEM_CONFIG)}"]  # as docs/cluster.md says
    try:
        started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        assert started.returncode == 0, started.stdout + started.stderr
        head = Head(temp_dir, env, dashboard, metrics)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{head.address}/api/version", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(1)
        yield head
    finally:
        kill_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def metrics_watch(head):
    with MetricsWatch(head.metrics_url) as watch:
        yield watch


def _job_id(submitted: subprocess.CompletedProcess) -> str:
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    found = re.search(r"as Ray job (\S+)", submitted.stdout)
    assert found, submitted.stdout
    return found.group(1)


class MetricsWatch:
    """Scrapes the head's Prometheus endpoint every ``interval`` s in a thread: the latest value of
    every flowactors series ever exported. Ray drops the gauges of actors that ended, so gauges are
    looked for while the flow runs, as a dashboard would show them, not only after it stopped."""

    def __init__(self, url: str, interval: float = 1.0):
        self.url, self.interval = url, interval
        self.seen: dict[tuple[str, str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.seen = {**self.seen, **scrape(self.url)}  # rebound whole: readers never see it change
            except OSError:
                pass  # the metrics agent is not up yet, or busy
            self._stop.wait(self.interval)

    def __enter__(self) -> "MetricsWatch":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# ---------------------------------------------------------------------------------- no cluster
def test_an_address_where_nothing_listens_is_one_line(tmp_path):
    port = free_ports(1)[0]
    done = subprocess.run([FLOWACTORS, "submit", str(ROOT / "examples" / "demo.py"), "--address",
                           f"http://127.0.0.1:{port}", "--repository", str(tmp_path / "repo")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"flowactors: no Ray dashboard answers at http://127.0.0.1:{port}: is the head running "
        f"(ray start --head) and is this its dashboard address (default port 8265)?"]


def test_run_starts_a_ray_of_its_own_beside_one_a_ray_start_left_on_the_machine(head, tmp_path):
    """Issue 50, finding 5: with no --address (and no RAY_ADDRESS), `flowactors run` connected to
    whatever Ray a `ray start` had left on the machine (another user's), then failed there. Ray
    finds such a Ray through ``<RAY_TMPDIR>/ray/ray_current_cluster``; here that file names this
    module's head, so `--address auto` does join it (Ray's meaning of auto), and a plain run does not."""
    discover = Path(tempfile.mkdtemp(prefix="fa-tmp-", dir="/tmp"))  # short: Ray's socket paths live under it
    try:
        (discover / "ray").mkdir()
        (discover / "ray" / "ray_current_cluster").symlink_to(Path(head.temp_dir) / "ray_current_cluster")
        assert (discover / "ray" / "ray_current_cluster").read_text().strip()  # `ray start` wrote it
        env = {**head.env, "RAY_TMPDIR": str(discover)}
        # a flow of its own name: the demo's metrics on the head are another test's to count
        (tmp_path / "which_ray.py").write_text(textwrap.dedent("""
            from flowactors import Flow
            from flowactors.processors import GenerateFlowFile
            flow = Flow("which-ray")
            flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1}, auto_terminate=["success"])
            """))
        run = [FLOWACTORS, "run", str(tmp_path / "which_ray.py"), "--quiet"]
        own = subprocess.run([*run, "--repository", str(tmp_path / "own")], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert own.returncode == 0, own.stderr[-2000:]
        assert "Started a local Ray instance" in own.stderr and "Connecting to existing Ray" not in own.stderr
        joined = subprocess.run([*run, "--repository", str(tmp_path / "joined"), "--address", "auto"], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=300)
        assert joined.returncode == 0, joined.stderr[-2000:]
        assert "Connecting to existing Ray cluster" in joined.stderr
    finally:
        kill_head(str(discover))  # the run's own Ray, had it outlived the run
        shutil.rmtree(discover, ignore_errors=True)


def test_submit_refuses_a_relative_repository_and_a_client_address(tmp_path):
    demo = str(ROOT / "examples" / "demo.py")
    relative = subprocess.run([FLOWACTORS, "submit", demo, "--address", "http://127.0.0.1:1", "--repository",
                               "repo"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert relative.returncode == 2 and "must be an absolute path" in relative.stderr
    client = subprocess.run([FLOWACTORS, "stop", "demo", "--address", "ray://127.0.0.1:10001"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert client.returncode == 2 and "Ray Client address" in client.stderr and "Traceback" not in client.stderr


def test_queue_gauges_are_throttled_and_end_on_the_latest_state(monkeypatch):
    """A burst of changes sends a few updates, and the last one carries the final state."""
    import flowactors.engine.metrics as metrics_module

    monkeypatch.setattr(metrics_module, "ENABLED", False)  # no Ray metric objects in this process
    sent = []

    class Recording(metrics_module.QueueMetrics):
        def publish(self, status):
            self._last = time.monotonic()
            sent.append(status["count"])

    async def burst():
        metrics = Recording("flow", "a->b", min_interval=0.1)
        metrics._gauges = {"count": None}  # as if enabled: what would be sent is recorded instead
        for i in range(1, 501):
            metrics.changed(lambda i=i: {"count": i})
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.3)

    asyncio.run(burst())
    assert 2 <= len(sent) <= 20 and sent[-1] == 500


def test_a_submitted_flows_controller_keeps_its_errors_in_the_repositorys_error_log(tmp_path):
    """The controller a submitted flow runs under (the job's driver only looks at its statuses)
    records each status's errors, and the final one's, where ``flowactors errors`` reads them."""
    from flowactors.driver.cluster_job import ClusterFlowController
    from flowactors.engine.in_process import InProcessHosting
    from flowactors.ops.error_log import read_errors
    from flowactors.processors import GenerateFlowFile
    from flowactors.sdk.flow import Flow
    from flowactors.sdk.processor import Processor, Relationship
    from flowactors.sdk.settings import flow_settings

    class Explode(Processor):
        relationships = [Relationship("success")]

        def on_trigger(self, context, session):
            if session.get() is not None:
                raise ValueError("boom in a submitted flow")

    flow = Flow("submitted-errors")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
    flow.connect(generate, flow.add(Explode, "explode", auto_terminate=["success"]))
    controller = ClusterFlowController(flow, str(tmp_path), flow_settings(flow, {}), InProcessHosting())
    controller.start()
    try:
        deadline = time.monotonic() + 60
        while not any(p["errors"] for p in controller.status()["processors"]):
            assert time.monotonic() < deadline, "the processor never failed"
            time.sleep(0.05)
        seen, unreadable = read_errors(tmp_path)
        assert unreadable == [] and seen and {e["processor"] for e in seen} == {"explode"}
        assert "ValueError: boom in a submitted flow" in seen[0]["error"]
    finally:   # a failed check must not leave the flow running in this process for the next tests
        final = controller.stop_once("the test")
    assert final["processors"] and read_errors(tmp_path)[0][:len(seen)] == seen


# ---------------------------------------------------------------------------------- on a cluster
@pytest.mark.ray
@pytest.mark.timeout(600)
def test_submit_the_demo_follow_it_and_read_its_metrics(head, metrics_watch, tmp_path):
    out, repository = tmp_path / "out", tmp_path / "repository"
    job_id = _job_id(head.cli("submit", str(ROOT / "examples" / "demo.py"), "--address", head.address,
                              "--repository", str(repository), "--env", f"FLOWACTORS_DEMO_OUT={out}",
                              cwd=tmp_path))
    looks = head.follow("demo", tmp_path)
    final = looks[-1]
    assert final["job_id"] == job_id and final["state"] == "succeeded", final
    assert final["stopped_by"] == "the job (idle)"
    assert {look["state"] for look in looks} <= {"pending", "starting", "running", "stopping", "succeeded"}
    processors = {p["name"]: p for p in final["status"]["processors"]}
    assert processors["split lines"]["flowfiles_out"] == 4500
    assert all(q["count"] == 0 for q in final["status"]["queues"])

    lines = {severity: sum(len(gzip.decompress(f.read_bytes()).splitlines()) for f in (out / severity).glob("*.gz"))
             for severity in ("error", "warn", "info")}
    assert lines == {"error": 185, "warn": 501, "info": 3814}

    logs = head.cli("logs", "demo", "--address", head.address, cwd=tmp_path)
    assert logs.returncode == 0 and "flow 'demo' stopped by the job (idle)" in logs.stdout

    listing = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import json
            from ray.util.state import list_actors
            actors = list_actors(address={head.address!r}, filters=[("ray_namespace", "=", "flowactors-demo")],
                                 detail=True, limit=1000, raise_on_missing_output=False)
            print(json.dumps([[a.name, a.class_name, a.required_resources, a.repr_name] for a in actors]))
        """)], env=head.env, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    actors = {name: (cls, resources, shown) for name, cls, resources, shown in json.loads(listing.stdout)}
    assert actors["demo.controller"][0] == "ClusterFlowController"
    # the shared placement: a few executors host every processor task and queue (none has an actor
    # of its own), ask Ray for no CPU, and say in the dashboard what they host
    executors = {name: a for name, a in actors.items() if ".executor." in name}
    assert executors and {cls for cls, _, _ in executors.values()} == {"Executor"}
    assert not any(".processor." in name or ".queue." in name for name in actors)
    assert not any((resources or {}).get("CPU") for _, resources, _ in executors.values())
    shown = " ".join(text for _, _, text in executors.values())
    assert all(f"{p}," in shown or f"{p};" in shown for p in ("list logs", "fetch", "split lines", "route by level",
                                                          "merge by severity", "gzip", "write"))
    assert {"demo.flowfile-repository", "demo.content-repository", "demo.provenance-repository"} <= set(actors)

    wanted = {
        ("ray_flowactors_processor_flowfiles_out_total", "split lines"),
        ("ray_flowactors_processor_flowfiles_in_total", "route by level"),
        ("ray_flowactors_processor_bytes_written_total", "fetch"),
        ("ray_flowactors_processor_tasks_total", "write"),
        ("ray_flowactors_processor_task_seconds_total", "merge by severity"),
        ("ray_flowactors_queue_flowfiles", "split-lines.splits.route-by-level"),
        ("ray_flowactors_queue_back_pressure", "gzip.success.write"),
        ("ray_flowactors_flowfile_repository_commits_total", "flowfile-repository"),
        ("ray_flowactors_flowfile_repository_checkpoint_seconds_count", "flowfile-repository"),
        ("ray_flowactors_content_archive_bytes", "content-repository"),
        ("ray_flowactors_provenance_events_total", "provenance-repository"),
        ("ray_flowactors_provenance_index_lag", "provenance-repository"),
    }
    deadline = time.monotonic() + 60  # counters stay exported after the flow; give the last export time
    while True:
        metrics = metrics_watch.seen
        missing = {w for w in wanted if (w[0], "demo", w[1]) not in metrics}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert not missing, f"not exported: {sorted(missing)}"
    assert 0 < metrics[("ray_flowactors_processor_flowfiles_out_total", "demo", "split lines")] <= 4500
    assert metrics[("ray_flowactors_flowfile_repository_commits_total", "demo", "flowfile-repository")] > 0
    assert metrics[("ray_flowactors_provenance_events_total", "demo", "provenance-repository")] >= 4500


SLOW_FLOW = '''
import os
import time

from flowactors import Flow, Processor, Relationship
from flowactors.processors import GetFile, PutFile


class Slow(Processor):
    """A consumer much slower than its producer while the file SLOW exists, so FlowFiles wait in
    its queue (the test removes it before the next start, which then drains them at once)."""
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            if os.path.exists(SLOW):
                time.sleep(0.5)
            session.transfer(flowfile, "success")


flow = Flow("slow-drain")
get = flow.add(GetFile, "get", properties={"Input Directory": IN})
slow = flow.add(Slow, "slow", batch_size=1)
put = flow.add(PutFile, "put", properties={"Directory": OUT}, auto_terminate=["success", "failure"])
flow.connect(get, slow)
flow.connect(slow, put)
'''


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_stop_leaves_queued_flowfiles_durable_for_the_next_start(head, tmp_path):
    incoming, out, repository = tmp_path / "in", tmp_path / "out", tmp_path / "repository"
    incoming.mkdir()
    total = 60
    for i in range(total):
        (incoming / f"file-{i:03}.txt").write_text(f"payload {i}\n")
    flow_dir = tmp_path / "flow"
    flow_dir.mkdir()
    flow_file = flow_dir / "slow.py"
    slow = tmp_path / "slow"
    slow.touch()
    flow_file.write_text(SLOW_FLOW.replace("IN", repr(str(incoming))).replace("OUT", repr(str(out)))
                         .replace("SLOW)", repr(str(slow)) + ")"))
    submit = ("submit", str(flow_file), "--address", head.address, "--repository", str(repository))
    _job_id(head.cli(*submit, cwd=tmp_path))

    def all_taken_and_draining(info):
        procs = {p["name"]: p for p in (info["status"] or {}).get("processors", [])}
        return bool(procs) and procs["get"]["flowfiles_out"] == total and procs["slow"]["flowfiles_in"] >= 2

    looks = head.follow("slow-drain", tmp_path, until=all_taken_and_draining)
    assert looks[-1]["state"] == "running", looks[-1]

    stopped = head.cli("stop", "slow-drain", "--address", head.address, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    queued = int(re.search(r"stopped: (\d+) FlowFiles stay queued", stopped.stdout).group(1))
    per_queue = {q: int(n) for q, n in re.findall(r"^  (.+): (\d+)$", stopped.stdout, re.MULTILINE)}
    assert sum(per_queue.values()) == queued and per_queue.get("get.success.slow", 0) > 0, stopped.stdout
    after_stop = head.status("slow-drain", tmp_path)
    assert after_stop["state"] == "succeeded" and after_stop["stopped_by"] == "flowactors stop", after_stop

    offline = head.cli("status", "--repository", str(repository), "--json", cwd=tmp_path)
    assert offline.returncode == 0, offline.stderr
    counts = json.loads(offline.stdout)["queued"]
    written = len(list(out.iterdir()))
    assert counts == per_queue  # what the stop reported is what the write-ahead log holds
    assert written + queued == total and not list(incoming.iterdir())

    slow.unlink()   # the next start drains at full speed: what it shows is what was kept, not its pace
    _job_id(head.cli(*submit, cwd=tmp_path))  # the next start, on the same node and repository
    final = head.follow("slow-drain", tmp_path)[-1]
    assert final["state"] == "succeeded", final
    assert final["recovery"]["restored"] == queued
    assert sorted(p.name for p in out.iterdir()) == [f"file-{i:03}.txt" for i in range(total)]
    drained = head.cli("status", "--repository", str(repository), "--json", cwd=tmp_path)
    assert json.loads(drained.stdout)["queued"] == {}
