"""A run's Ray dashboard: where it is, and flowactors' Grafana dashboard placed beside Ray's own.

Ray's dashboard embeds Grafana panels; it does not run Grafana. When it starts, its metrics module
empties ``<session>/metrics/grafana`` and writes there a Grafana configuration (``grafana.ini``), a
Prometheus data source and a dashboard provider (``provisioning/dashboards/default.yml``) that
points Grafana at a folder of dashboard JSON files (``<session>/metrics/grafana/dashboards``
unless ``RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR``), filled with Ray's own dashboards. Grafana's
file provider loads every ``*.json`` file of that folder and looks again every few seconds, so
flowactors' dashboard (``grafana/flowactors.json``, package data) copied into it shows up in the
same Grafana, in Ray's folder, next to Ray's dashboards. docs/cluster.md, section 9.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO

import yaml

#: flowactors' Grafana dashboard, as shipped with the package
GRAFANA_DASHBOARD = Path(__file__).resolve().parent / "grafana" / "flowactors.json"
#: its name in Ray's dashboards folder (Ray's own are ``<name>_grafana_dashboard.json``)
INSTALLED_NAME = "flowactors_grafana_dashboard.json"
#: what a Ray that flowactors starts for a run with its dashboard is started with: bound to this
#: machine only (the dashboard's Jobs API runs code), on the first free port from 8265
LOCAL_DASHBOARD = {"include_dashboard": True, "dashboard_host": "127.0.0.1"}
#: seconds to wait for a dashboard that was just started to write its Grafana configuration
PROVISIONING_WAIT = 30.0


def provisioned_folder(session_dir: str | Path) -> Path | None:
    """The folder Ray's dashboard tells Grafana to load dashboards from, as its provisioning file
    on this machine names it; None where no Ray dashboard wrote one (a node without the head, a
    Ray without its dashboard)."""
    root = Path(os.environ.get("RAY_METRICS_OUTPUT_ROOT") or Path(session_dir) / "metrics")
    try:
        provisioning = yaml.safe_load((root / "grafana" / "provisioning" / "dashboards" / "default.yml").read_text())
        return Path(provisioning["providers"][0]["options"]["path"])
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return None


def install_grafana_dashboard(session_dir: str | Path, wait: float = 0.0) -> Path | None:
    """Copy flowactors' Grafana dashboard into the folder Ray's Grafana provisioning loads; its path,
    or None if this machine has none. ``wait``: seconds to wait for a dashboard that is starting
    (it empties the folder first, so a copy made before would be lost). The copy is atomic: a
    Grafana scanning the folder never reads half a file."""
    deadline = time.monotonic() + wait
    folder = provisioned_folder(session_dir)
    while folder is None and time.monotonic() < deadline:
        time.sleep(0.1)
        folder = provisioned_folder(session_dir)
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / INSTALLED_NAME
    partial = folder / f".{INSTALLED_NAME}.{os.getpid()}"  # a dot file: Grafana skips it
    shutil.copyfile(GRAFANA_DASHBOARD, partial)
    os.replace(partial, target)
    return target


def authentication_mode(url: str) -> str | None:
    """What the dashboard at ``url`` asks of a browser: ``"token"`` (Ray's token authentication:
    the page asks for the token) or ``"disabled"``; None if it does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/api/authentication_mode", timeout=10) as answer:
            return json.loads(answer.read()).get("authentication_mode")
    except (OSError, ValueError, urllib.error.URLError):
        return None


def session_dir() -> str:
    """The connected Ray's session folder (its logs, and the Grafana provisioning its dashboard writes)."""
    import ray  # heavy: the operations tools that do not run a flow never import it

    context = ray.get_runtime_context()
    return os.path.join(context.get_temp_dir(), context.get_session_name())


def open_dashboard(started: bool, out: TextIO | None = None) -> dict:
    """After connecting to Ray for a run: say where its dashboard is and install flowactors'
    Grafana dashboard beside Ray's (waiting for it if this run ``started`` that Ray). Returns
    ``{"url", "grafana_dashboard"}`` (the latter None off the dashboard's machine), or ``{}`` if
    this Ray runs without a dashboard, which is said too."""
    import ray  # heavy: the operations tools that do not run a flow never import it

    if not ray.is_initialized():
        raise RuntimeError("open_dashboard needs a connected Ray (run_flow connects first)")
    out = out or sys.stderr
    address = ray.init(ignore_reinit_error=True).dashboard_url  # the connected Ray's: none without a dashboard
    if not address:
        out.write("flowactors: this Ray runs without its dashboard; let flowactors start Ray (no --address), "
                  "or start one with `ray start --head --include-dashboard=true`\n")
        return {}
    url = address if "://" in address else f"http://{address}"
    lines = [f"Ray dashboard: {url}  (Jobs, Actors, Metrics; it stops with the Ray this run started)"
             if started else f"Ray dashboard: {url}"]
    if authentication_mode(url) == "token":
        lines.append("  it asks for Ray's token: `ray get-auth-token` prints it")
    try:
        grafana = install_grafana_dashboard(session_dir(), PROVISIONING_WAIT if started else 0.0)
    except OSError as err:  # e.g. the folder belongs to the user who started the cluster: the run goes on
        grafana = None
        lines.append(f"  flowactors' Grafana dashboard was not placed beside Ray's: {err}")
    if grafana is not None:
        lines.append(f"  flowactors' Grafana dashboard: {grafana} (docs/cluster.md, section 9)")
    out.write("\n".join(lines) + "\n")
    out.flush()
    return {"url": url, "grafana_dashboard": str(grafana) if grafana else None}
