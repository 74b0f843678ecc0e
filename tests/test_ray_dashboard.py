"""The Ray dashboard of a run (``run_flow(dashboard=True)``, ``flowactors run --dashboard``) and
flowactors' Grafana dashboard (``flowactors/ops/grafana/flowactors.json``) placed where Ray's
Grafana provisioning loads dashboards from.

The runs are real: a child process (tests/dashboard_driver.py) starts its own Ray through
``run_flow``, under a temp dir of its own that teardown clears of any process left. The tests of a
run with the dashboard share one (``dashboard_run``), and a Prometheus scrapes it from its start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from flowactors.ops import ray_dashboard
from tests.cluster_helpers import free_ports, kill_head, scrape

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = json.loads(ray_dashboard.GRAFANA_DASHBOARD.read_text())


def _panels(dashboard: dict) -> list[dict]:
    """Every panel, those inside collapsed rows too."""
    return [p for top in dashboard["panels"] for p in (top, *top.get("panels", ()))]


def _exported_names() -> set[str]:
    """The Prometheus names of every metric flowactors/engine/metrics.py defines, as Ray exports a
    custom metric: ``ray_`` first, ``_total`` after a counter, a histogram as its three series."""
    from ray.util.metrics import Counter, Gauge, Histogram

    from flowactors.engine import metrics

    if not metrics.ENABLED:
        pytest.skip("FLOWACTORS_METRICS=off: no metric is defined")
    for make in (metrics.ProcessorMetrics, metrics.QueueMetrics, metrics.FlowFileRepositoryMetrics,
                 metrics.ContentRepositoryMetrics, metrics.ProvenanceMetrics):
        make("flow", "component")
    metrics.RestartMetrics("flow")
    names = set()
    for name, metric in metrics._metrics.items():
        if isinstance(metric, Counter):
            names.add(f"ray_{name}_total")
        elif isinstance(metric, Histogram):
            names.update(f"ray_{name}_{series}" for series in ("bucket", "sum", "count"))
        else:
            assert isinstance(metric, Gauge), metric
            names.add(f"ray_{name}")
    return names


def _queried_names(dashboard: dict) -> set[str]:
    """The metric names the panels' queries and the variables read."""
    exprs = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", ())]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return {name for expr in exprs for name in re.findall(r"\bray_flowactors_\w+", expr)}


# ------------------------------------------------------------------------------ the dashboard file
def test_the_grafana_dashboard_is_a_grafana_dashboard():
    assert DASHBOARD["uid"] == "flowactors" and DASHBOARD["title"] == "flowactors"
    assert isinstance(DASHBOARD["schemaVersion"], int) and DASHBOARD["schemaVersion"] >= 27
    panels = _panels(DASHBOARD)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    variables = {v["name"] for v in DASHBOARD["templating"]["list"]}
    assert variables == {"datasource", "SessionName", "flow"}
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 15
    for panel in graphs:
        assert panel["title"] and panel["description"], panel
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
            assert 'flow=~"$flow"' in expr and 'SessionName=~"$SessionName"' in expr, expr
            used = set(re.findall(r"\$(\w+)", expr)) - {"__rate_interval"}
            assert used <= variables, (expr, used)
    # no two panels overlap on the grid
    cells = set()
    for panel in panels:
        g = panel["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_every_metric_the_dashboard_reads_is_one_flowactors_exports_and_each_is_shown():
    exported = _exported_names()
    queried = _queried_names(DASHBOARD)
    assert queried - exported == set(), "the dashboard reads metrics flowactors does not export"
    shown = {re.sub(r"_(bucket|sum|count)$", "", n) for n in queried}
    missing = {n for n in exported if re.sub(r"_(bucket|sum|count)$", "", n) not in shown}
    assert missing == set(), "metrics flowactors exports with no panel"


def test_no_grafana_provisioning_here_places_nothing(tmp_path):
    """A node where no Ray dashboard wrote Grafana's provisioning (a worker, a Ray without its
    dashboard) gets no copy; a provisioning file that names no folder neither."""
    assert ray_dashboard.install_grafana_dashboard(tmp_path) is None
    provisioning = tmp_path / "metrics" / "grafana" / "provisioning" / "dashboards"
    provisioning.mkdir(parents=True)
    (provisioning / "default.yml").write_text("apiVersion: 1\nproviders: []\n")
    assert ray_dashboard.install_grafana_dashboard(tmp_path) is None
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json")) == []


def test_the_dashboard_needs_the_ray_engine(tmp_path):
    from flowactors.driver.running import run_flow
    from flowactors.processors import GenerateFlowFile
    from flowactors.sdk.flow import Flow

    flow = Flow("no-ray")
    flow.add(GenerateFlowFile, "generate", auto_terminate=["success"])
    for engine in ("in-process", "stateless"):
        with pytest.raises(ValueError, match=f"the Ray dashboard shows flows on the Ray engine only, not engine='{engine}'"):
            run_flow(flow, tmp_path / "repository", engine=engine, dashboard=True)


# ------------------------------------------------------------------------------ real runs on Ray
@pytest.mark.ray
def test_a_ray_without_its_dashboard_is_said_in_one_line_and_the_run_goes_on(ray_session, tmp_path, capsys):
    """The test session's Ray runs without a dashboard, as a Ray started elsewhere may: the run
    says so and runs the flow anyway."""
    from flowactors.driver.running import run_flow
    from flowactors.processors import GenerateFlowFile, HashContent
    from flowactors.sdk.flow import Flow

    flow = Flow("no-dashboard")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 5})
    flow.connect(generate, flow.add(HashContent, "hash", auto_terminate=["success", "failure"]))
    final = run_flow(flow, tmp_path / "repository", dashboard=True, timeout=120)
    assert final["dashboard"] == {}
    assert not final.get("timed_out")
    assert {p["name"]: p["flowfiles_in"] for p in final["processors"]}["hash"] == 5
    assert capsys.readouterr().err.splitlines() == [
        "flowactors: this Ray runs without its dashboard; let flowactors start Ray (no --address), "
        "or start one with `ray start --head --include-dashboard=true`"]


class Driver:
    """tests/dashboard_driver.py in a child process with a Ray temp dir of its own."""

    def __init__(self, tmp_path: Path, dashboard: bool):
        self.temp_dir = tempfile.mkdtemp(prefix="fa-dash-", dir="/tmp")  # short: Ray's socket paths live under it
        self.tmp_path = tmp_path
        self.stop = tmp_path / "stop"
        self.stderr_path = tmp_path / "driver.stderr"
        self.final: dict | None = None
        self.started: dict = {}  # the driver's "started" line, once read
        self.printed = ""  # what the run printed when it started
        self.prometheus: subprocess.Popen | None = None
        self.prometheus_port: int | None = None
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["RAY_TMPDIR"] = self.temp_dir
        env["RAY_metrics_report_interval_ms"] = str(REPORT_INTERVAL_MS)
        command = [sys.executable, str(ROOT / "tests" / "dashboard_driver.py"), "--repository",
                   str(tmp_path / "repository"), "--stop", str(self.stop)] + (["--dashboard"] if dashboard else [])
        self._stderr = self.stderr_path.open("w")
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self._stderr,
                                        text=True)

    def line(self, key: str) -> dict:
        """The next JSON line of the child's stdout that has ``key``."""
        for line in self.process.stdout:
            if line.startswith("{"):
                found = json.loads(line)
                if key in found:
                    return found[key]
        raise AssertionError(f"the driver ended without {key!r}: {self.stderr()[-3000:]}")

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def start_prometheus(self, session: Path) -> int:
        """A real Prometheus on the configuration Ray's dashboard wrote for the session: its port."""
        port = free_ports(1)[0]
        self.prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={session}/metrics/prometheus/prometheus.yml",
             f"--storage.tsdb.path={self.tmp_path}/prometheus", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=(self.tmp_path / "prometheus.log").open("w"))
        return port

    def running(self) -> None:
        assert self.final is None, "this test reads the run while it runs: run it before the run is finished"

    def finish(self) -> dict:
        """Stops the flow (once) and returns the driver's final line."""
        if self.final is None:
            self.stop.touch()
            self.final = self.line("final")
            assert self.process.wait(timeout=120) == 0, self.stderr()[-3000:]
        return self.final

    def close(self) -> None:
        if self.prometheus is not None:
            self.prometheus.terminate()
            self.prometheus.wait(timeout=30)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._stderr.close()
        kill_head(self.temp_dir)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


REPORT_INTERVAL_MS = 2000  # the metrics agent gets values every 2 s (default 10 s) and keeps a gauge 2 intervals


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.read().decode()


@pytest.fixture(scope="module")
def dashboard_run(tmp_path_factory):
    """One run with the dashboard for this module's tests (they read it while it runs, the last one
    stops it), with a Prometheus scraping it from its start where one is installed."""
    run = Driver(tmp_path_factory.mktemp("dashboard-run"), dashboard=True)
    try:
        run.started = run.line("started")
        run.printed = run.stderr()  # what the run said when it started
        run.prometheus_port = (run.start_prometheus(Path(run.started["session_dir"]))
                               if shutil.which("prometheus") else None)
        yield run
    finally:
        run.close()


@pytest.fixture
def driver(tmp_path):
    made = []

    def start(dashboard: bool) -> Driver:
        made.append(Driver(tmp_path, dashboard))
        return made[-1]

    yield start
    for each in made:
        each.close()


def _dashboard_url(run: Driver) -> str:
    found = re.search(r"^Ray dashboard: (http://127\.0\.0\.1:\d+)  \(", run.printed, re.MULTILINE)
    assert found, run.printed
    return found.group(1)


def _placed_grafana_dashboard(run: Driver) -> Path:
    session = Path(run.started["session_dir"])
    provisioning = yaml.safe_load((session / "metrics/grafana/provisioning/dashboards/default.yml").read_text())
    return Path(provisioning["providers"][0]["options"]["path"]) / "flowactors_grafana_dashboard.json"


def _agent_series(run: Driver) -> list[set[str]]:
    """The flow's series names each metrics agent of the run's Ray serves now (one set a reachable agent)."""
    session = Path(run.started["session_dir"])
    targets = json.loads((session / "prom_metrics_service_discovery.json").read_text())[0]["targets"]
    found = []
    for target in targets:
        try:
            series = scrape(f"http://{target}/metrics")
        except OSError:
            continue
        found.append({name for name, flow, _ in series if flow == "dashboard-demo"})
    return found


@pytest.mark.ray
def test_a_run_with_the_dashboard_prints_its_address_and_places_the_grafana_dashboard(dashboard_run):
    run, started, printed = dashboard_run, dashboard_run.started, dashboard_run.printed
    run.running()
    url = _dashboard_url(run)
    assert started["webui_url"] == url.removeprefix("http://")

    # while the flow runs: the address answers with Ray's dashboard page, its API lists the flow's actors
    status, page = _get(url)
    assert status == 200 and "<title>Ray Dashboard</title>" in page
    assert ray_dashboard.authentication_mode(url) in ("token", "disabled")
    assert "dashboard-demo.controller" in started["actors"]
    assert any(name.startswith("dashboard-demo.executor.") for name in started["actors"]), started["actors"]

    # flowactors' Grafana dashboard is in the folder Ray's provisioning names, beside Ray's own
    placed = _placed_grafana_dashboard(run)
    folder = placed.parent
    assert f"flowactors' Grafana dashboard: {placed} " in printed
    assert placed.read_bytes() == ray_dashboard.GRAFANA_DASHBOARD.read_bytes()
    assert (folder / "default_grafana_dashboard.json").exists()  # Ray's, in the same folder
    assert ".json" not in "".join(p.name for p in folder.iterdir() if p.name.startswith("."))

    # the metrics its panels read are exported under those names by this Ray's metrics agent
    wanted = _queried_names(DASHBOARD) - {
        "ray_flowactors_component_restarts_total"}  # nothing restarts in a healthy run
    seen: set[str] = set()
    deadline = time.monotonic() + 90
    while not wanted <= seen and time.monotonic() < deadline:
        for names in _agent_series(run):
            # scrape leaves out a histogram's buckets: its _sum stands for them
            seen |= {re.sub(r"_sum$", "_bucket", name) for name in names}
        time.sleep(1)
    assert wanted - seen == set()


@pytest.mark.ray
def test_the_content_gauges_stay_exported_between_their_measurements(dashboard_run):
    """The content repository measures its disk use every 10 s, and the metrics agent drops a gauge
    not sent again within two report intervals (4 s here): the gauges are sent again meanwhile, so
    every scrape over more than a measurement interval has them."""
    dashboard_run.running()
    gauges = {"ray_flowactors_content_live_bytes", "ray_flowactors_content_archive_bytes",
              "ray_flowactors_content_disk_used_percent"}
    deadline = time.monotonic() + 60
    while not any(gauges <= names for names in _agent_series(dashboard_run)):  # the first measurement
        assert time.monotonic() < deadline, "the content gauges were never exported"
        time.sleep(1)
    missing = []
    for _ in range(15):  # 15 s: more than the 10 s between measurements plus the 4 s a gauge is kept
        time.sleep(1)
        exported = set().union(*_agent_series(dashboard_run))
        missing.append(sorted(gauges - exported))
    assert missing == [[]] * 15


@pytest.mark.ray
@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no Prometheus here (apt-get install prometheus, which `make test` does as root)")
def test_every_panel_query_runs_on_a_prometheus_that_scrapes_the_run(dashboard_run):
    """A real Prometheus, started on the configuration Ray's dashboard wrote for the session, answers
    every query of the dashboard (its variables as Grafana fills them for the flow), with data for
    each but the restarts panel (nothing restarts in a healthy run)."""
    dashboard_run.running()
    port = dashboard_run.prometheus_port
    variables = {"$flow": "dashboard-demo", "$SessionName": ".+", "$__rate_interval": "1m"}
    queries = {}
    for panel in _panels(DASHBOARD):
        for target in panel.get("targets", ()):
            expr = target["expr"]
            for name, value in variables.items():
                expr = expr.replace(name, value)
            queries[f"{panel['title']} {target['refId']}"] = expr
    empty = set(queries)
    deadline = time.monotonic() + 120
    while empty - {"Component restarts (5 min) A"} and time.monotonic() < deadline:
        for key in sorted(empty):
            try:
                _, text = _get(f"http://127.0.0.1:{port}/api/v1/query?query={urllib.parse.quote(queries[key])}")
            except urllib.error.HTTPError as err:  # 400: Prometheus refuses the query
                raise AssertionError(f"{key}: {queries[key]}: {err.read().decode()}") from err
            except OSError:
                break  # Prometheus is starting
            answer = json.loads(text)
            assert answer["status"] == "success", (key, answer)
            if answer["data"]["result"]:
                empty.discard(key)
        time.sleep(2)
    assert empty == {"Component restarts (5 min) A"}


@pytest.mark.ray
def test_the_run_ends_with_its_dashboard(dashboard_run):
    """Last of the shared run's tests: stopping the flow reports the dashboard, and the dashboard
    stopped with the Ray the run started."""
    url = _dashboard_url(dashboard_run)
    final = dashboard_run.finish()
    assert final["dashboard"]["url"] == url
    assert final["dashboard"]["grafana_dashboard"] == str(_placed_grafana_dashboard(dashboard_run))
    assert not final["timed_out"]
    with pytest.raises(OSError):  # the dashboard stopped with the Ray the run started
        _get(url)


@pytest.mark.ray
def test_without_the_dashboard_a_run_starts_none(driver):
    run = driver(dashboard=False)
    started = run.line("started")
    assert not started["webui_url"]
    assert not (Path(started["session_dir"]) / "metrics" / "grafana").exists()
    final = run.finish()
    assert final["dashboard"] is None and "Ray dashboard" not in run.stderr()
