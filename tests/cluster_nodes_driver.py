"""The child process of tests/test_cluster_nodes.py: scenarios of a flow across a real multi-node
Ray (``ray.cluster_utils.Cluster``: a head and two more nodes on this machine, each a raylet of
its own labelled ``flowactors-node:n<i>``, each node with its own repository folder). Scenarios
named together run one after another on the same cluster, each in ``<base>/<scenario>`` (only
those that leave the cluster as they found it are run together).

It runs in a process of its own because a Ray driver connects to one Ray per process, and the
test session has its own; its Ray lives under a temp dir of its own, which the parent uses to
kill whatever is left. It prints one JSON line: ``{"results": {scenario: result}}``, what the
parent asserts on; a scenario that raised has ``{"raised": traceback}`` as its result, and the
next one runs.

``NoteNode`` (defined here, so it travels with the flow by value) appends ``filename,key`` of
every FlowFile it takes to ``<notes>/<node>.txt``: which node processed what.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import psutil
import ray
from ray.cluster_utils import Cluster

from flowactors import run_flow
from flowactors.nifi import add_python_processor
from flowactors.driver.running import NAMESPACE, RAY_SYSTEM_CONFIG
from flowactors.processors import FetchFile, ListFile, PutFile, UpdateAttribute
from flowactors.sdk.flow import Flow
from flowactors.sdk.processor import PropertyDescriptor, Processor, Relationship

NODE_CPUS = 1
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "nifi_python"
#: Ray notices a dead node after about period x threshold (default 3 s x 5)
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}
_node_name: str | None = None


def node_name() -> str:
    """The flowactors name of the Ray node this process runs on (its label resource)."""
    global _node_name
    if _node_name is None:
        me = ray.get_runtime_context().get_node_id()
        entry = next(e for e in ray.nodes() if e["NodeID"] == me)
        _node_name = next(r.split(":", 1)[1] for r in entry["Resources"] if r.startswith("flowactors-node:"))
    return _node_name


class NoteNode(Processor):
    """Notes which node took each FlowFile (``<Directory>/<node>.txt``: ``filename,key`` lines)."""

    properties = [PropertyDescriptor("Directory", required=True)]
    relationships = [Relationship("success")]

    def on_trigger(self, context, session) -> None:
        batch = session.get_batch()
        if not batch:
            return
        lines = "".join(f"{f.attributes['filename']},{f.attributes.get('key', '')}\n" for f in batch)
        path = Path(context.property("Directory").as_str()) / f"{node_name()}.txt"
        with open(path, "a") as out:
            out.write(lines)
        session.transfer_batch(batch, "success")


class Nodes:
    """A multi-node Ray on this machine: ``n0`` the head, ``n1``... the others."""

    def __init__(self, count: int, temp_dir: str, system_config: dict | None = None):
        self.temp_dir = temp_dir
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": NODE_CPUS, "resources": {"flowactors-node:n0": 1}, "temp_dir": temp_dir,
            "include_dashboard": False, "_system_config": {**RAY_SYSTEM_CONFIG, **HEALTH, **(system_config or {})}})
        self.nodes = {"n0": self.cluster.head_node}
        for i in range(1, count):
            self.add(f"n{i}")
        ray.init(address=self.cluster.address, namespace=NAMESPACE, log_to_driver=False)

    def add(self, name: str) -> None:
        self.nodes[name] = self.cluster.add_node(num_cpus=NODE_CPUS, resources={f"flowactors-node:{name}": 1},
                                                 temp_dir=self.temp_dir)

    def kill(self, name: str) -> int:
        """SIGKILL the node's raylet and every worker process it started; returns how many."""
        node = self.nodes.pop(name)
        raylets = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if any(arg == f"--raylet_socket_name={node.raylet_socket_name}" for arg in proc.info["cmdline"] or ()):
                    raylets.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        victims = [child for raylet in raylets for child in raylet.children(recursive=True)] + raylets
        for proc in victims:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.cluster.remove_node(node, allow_graceful=False)
        return len(victims)

    def close(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


def make_files(directory: Path, count: int, keys: int = 0, prefix: str = "f") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"{prefix}{i:05d}-k{i % keys:03d}.txt" if keys else f"{prefix}{i:05d}.txt"
        (directory / name).write_text(f"file {i}\n" * 20)


def notes(directory: Path) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for path in sorted(directory.glob("*.txt")):
        out[path.stem] = [tuple(line.split(",", 1)) for line in path.read_text().splitlines()]
    return out


def fetch_flow(name: str, source: Path, **connection) -> tuple[Flow, object]:
    """ListFile (primary node only) -> [load-balanced] -> FetchFile: the seed's motivating case."""
    flow = Flow(name, settings={"executors": 1})
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(source)}, primary_node_only=True)
    fetch = flow.add(FetchFile, "fetch", properties={"File to Fetch": "${absolute.path}${filename}"},
                     auto_terminate=["not.found", "permission.denied", "failure"])
    flow.connect(listing, fetch, name="listed", **connection)
    return flow, fetch


def summary(final: dict) -> dict:
    return {"nodes": {n: {"processors": s["processors"], "queued": s["queued"], "connected": s["connected"],
                          "primary": s["primary"], "transfer_errors": s.get("transfer_errors", []),
                          "senders": s.get("senders"), "views": s.get("views"), "receivers": s.get("receivers")}
                      for n, s in final.get("nodes", {}).items()},
            "waiting_for_node": final.get("waiting_for_node"), "nodes_away": final.get("nodes_away"),
            "repairing": final.get("repairing"), "maintenance_errors": final.get("maintenance_errors"),
            "processors": {p["name"]: {k: p[k] for k in ("flowfiles_in", "flowfiles_out", "errors")}
                           for p in final["processors"]},
            "errors": [e for p in final["processors"] for e in p["recent_errors"]],
            "queues": {q["id"]: q["count"] for q in final["queues"]},
            "timed_out": final.get("timed_out", False), "stalled": final.get("stalled"),
            "cluster_events": [e["event"] for e in final.get("cluster_events", [])]}


# ---------------------------------------------------------------------------------- scenarios

def round_robin(base: Path, nodes: Nodes) -> dict:
    """ListFile (primary) -> round robin -> FetchFile -> PutFile, 3,000 files."""
    make_files(base / "in", 3000)
    flow, fetch = fetch_flow("rr", base / "in", load_balance="round-robin")
    put = flow.add(PutFile, "put", properties={"Directory": str(base / "out")}, auto_terminate=["success", "failure"])
    flow.connect(fetch, put, ["success"], name="fetched")
    final = run_flow(flow, str(base / "repo"), nodes="all", timeout=600)
    return {**summary(final), "delivered": sorted(p.name for p in (base / "out").iterdir())}


def partition(base: Path, nodes: Nodes) -> dict:
    """ListFile -> UpdateAttribute (key from the file name) -> partition by key -> NoteNode; then
    the same on two nodes (n2 left the topology) with new files of the same keys."""
    def flow_of() -> Flow:
        flow = Flow("part", settings={"executors": 1})
        listing = flow.add(ListFile, "list", properties={"Input Directory": str(base / "in")}, primary_node_only=True)
        key = flow.add(UpdateAttribute, "key", properties={"key": "${filename:substringAfter('-'):substringBefore('.')}"})
        note = flow.add(NoteNode, "note", properties={"Directory": str(base / "notes")}, auto_terminate=["success"])
        flow.connect(listing, key)
        flow.connect(key, note, name="keyed", load_balance="partition-by-attribute", partition_attribute="key")
        return flow

    (base / "notes").mkdir(parents=True)
    make_files(base / "in", 600, keys=60)
    first = run_flow(flow_of(), str(base / "repo"), nodes=["n0", "n1", "n2"], timeout=600)
    before = notes(base / "notes")
    for path in (base / "notes").glob("*.txt"):
        path.unlink()
    make_files(base / "in", 600, keys=60, prefix="g")
    second = run_flow(flow_of(), str(base / "repo"), nodes=["n0", "n1"], timeout=600)
    return {"first": summary(first), "second": summary(second), "before": before, "after": notes(base / "notes")}


def single_node(base: Path, nodes: Nodes) -> dict:
    """ListFile -> round robin -> FetchFile -> single node -> NoteNode: fetched everywhere, every
    FlowFile noted on the topology's first node (n1 here)."""
    make_files(base / "in", 300)
    (base / "notes").mkdir()
    flow, fetch = fetch_flow("single", base / "in", load_balance="round-robin")
    note = flow.add(NoteNode, "note", properties={"Directory": str(base / "notes")}, auto_terminate=["success"])
    flow.connect(fetch, note, ["success"], name="fetched", load_balance="single-node")
    final = run_flow(flow, str(base / "repo"), nodes=["n1", "n0", "n2"], timeout=600)
    return {**summary(final), "notes": notes(base / "notes")}


def lineage(base: Path, nodes: Nodes) -> dict:
    """A FlowFile listed on n0 and fetched on n1: its lineage, asked on either side."""
    from flowactors.ops.cluster_lineage import cluster_lineage
    from flowactors.ops.provenance_tools import StoppedRepository
    from flowactors.ops.lineage_view import condense, to_text
    from flowactors.engine.cluster.topology import node_repository

    make_files(base / "in", 30)
    flow, fetch = fetch_flow("lin", base / "in", load_balance="round-robin", load_balance_compression="attributes")
    fetch.auto_terminate = fetch.auto_terminate + ("success",)
    final = run_flow(flow, str(base / "repo"), nodes="all", timeout=600)
    with StoppedRepository(node_repository(base / "repo", "n1")) as repo:
        fetched = repo.provenance.search(event_type="FETCH", limit=1)[0]
    received_uuid = fetched.flowfile_uuid
    lineage = cluster_lineage(base / "repo", received_uuid)
    with StoppedRepository(node_repository(base / "repo", "n0")) as repo:
        listed = repo.provenance.search(event_type="SEND", limit=1)[0]
    from_sender = cluster_lineage(base / "repo", listed.flowfile_uuid)
    import subprocess

    cli = subprocess.run([str(Path(sys.executable).parent / "flowactors"), "lineage", received_uuid,
                          "--repository", str(base / "repo")], capture_output=True, text=True, timeout=120)
    return {**summary(final), "received_uuid": received_uuid, "sent_uuid": listed.flowfile_uuid,
            "lineage": [n.label for n in lineage.nodes], "edges": len(lineage.edges),
            "from_sender": [n.label for n in from_sender.nodes], "text": to_text(condense(lineage, received_uuid)),
            "view_relatives": [n.label for n in condense(lineage, received_uuid).nodes if n.relation == "relative"],
            "cli": {"exit": cli.returncode, "stdout": cli.stdout, "stderr": cli.stderr[-2000:]}}


def node_killed(base: Path, nodes: Nodes) -> dict:
    """ListFile (n0) -> round robin -> FetchFile -> UpdateAttribute -> partition by key ->
    NoteNode; n2 is killed (SIGKILL of its raylet and workers) once a fifth is noted, and comes
    back 15 s later."""
    make_files(base / "in", 3000, keys=90)
    (base / "notes").mkdir()
    flow, fetch = fetch_flow("kill", base / "in", load_balance="round-robin", back_pressure_object_threshold=50)
    fetch.run_schedule, fetch.batch_size = "50 ms", 5  # about 100 files/s a node: mid-flow when n2 dies
    key = flow.add(UpdateAttribute, "key", properties={"key": "${filename:substringAfter('-'):substringBefore('.')}"})
    note = flow.add(NoteNode, "note", properties={"Directory": str(base / "notes")}, auto_terminate=["success"],
                    batch_size=50)
    flow.connect(fetch, key, ["success"], name="fetched")
    flow.connect(key, note, name="keyed", load_balance="partition-by-attribute", partition_attribute="key",
                 back_pressure_object_threshold=100)
    killed: dict = {}
    waited: dict = {}

    def watch(status: dict) -> None:
        """Runs in the main thread (Ray starts a node's processes only from there)."""
        if not killed:
            if sum(len(v) for v in notes(base / "notes").values()) >= 600:
                killed.update(at=time.monotonic(), processes=nodes.kill("n2"))
            return
        if "back" not in killed:
            waited["max"] = max(waited.get("max", 0), status.get("waiting_for_node", {}).get("n2", 0))
            if time.monotonic() - killed["at"] >= 15:
                nodes.add("n2")
                killed["back"] = time.monotonic() - killed["at"]

    final = run_flow(flow, str(base / "repo"), nodes="all", timeout=900, on_status=watch)
    return {**summary(final), "killed": killed, "waited_for_n2": waited.get("max", 0),
            "notes": notes(base / "notes")}


def tls(base: Path, nodes: Nodes) -> dict:
    """A transfer with Ray's TLS on (the parent sets RAY_USE_TLS and the certificates): round
    robin, content and attributes compressed, 300 files; then a TLS handshake with the GCS, with
    the cluster's CA, shows the cluster speaks TLS."""
    import socket
    import ssl

    make_files(base / "in", 300)
    flow, fetch = fetch_flow("tls", base / "in", load_balance="round-robin",
                             load_balance_compression="attributes-and-content")
    put = flow.add(PutFile, "put", properties={"Directory": str(base / "out")}, auto_terminate=["success", "failure"])
    flow.connect(fetch, put, ["success"], name="fetched")
    final = run_flow(flow, str(base / "repo"), nodes="all", timeout=600)
    host, port = nodes.cluster.address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=os.environ["RAY_TLS_CA_CERT"])
    context.load_cert_chain(os.environ["RAY_TLS_SERVER_CERT"], os.environ["RAY_TLS_SERVER_KEY"])
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as secure:
            handshake = {"version": secure.version(), "cipher": secure.cipher()[0]}
    return {**summary(final), "delivered": len(list((base / "out").iterdir())), "gcs_tls": handshake}


def primary_moves(base: Path, nodes: Nodes) -> dict:
    """Topology n1, n0, n2: ListFile runs on n1 (primary). n1 is killed once the first 100 files
    are noted; n0 becomes primary and lists the 100 files written after that."""
    make_files(base / "in", 100)
    (base / "notes").mkdir()
    flow, fetch = fetch_flow("primary", base / "in", load_balance="round-robin")
    note = flow.add(NoteNode, "note", properties={"Directory": str(base / "notes")}, auto_terminate=["success"])
    flow.connect(fetch, note, ["success"], name="fetched")
    steps: dict = {}

    def noted(prefix: str) -> set[str]:
        return {f for lines in notes(base / "notes").values() for f, _key in lines if f.startswith(prefix)}

    def watch(status: dict) -> None:
        if "killed" not in steps and len(noted("f")) == 100:
            steps["primary_before"] = status["primary"]
            steps["killed"] = nodes.kill("n1")
        elif "killed" in steps and "written" not in steps and status["primary"] == "n0":
            make_files(base / "in", 100, prefix="g")
            steps["written"] = time.monotonic()

    final = run_flow(flow, str(base / "repo"), nodes=["n1", "n0", "n2"], timeout=300, on_status=watch,
                     until=lambda status: "written" in steps and len(noted("g")) == 100)
    return {**summary(final), "steps": steps, "primary_after": final.get("primary"),
            "noted_g": len(noted("g")), "notes": notes(base / "notes")}


def cluster_state(base: Path, nodes: Nodes) -> dict:
    """ListFile (primary) -> round robin -> StampSequence, the example NiFi Python processor, with
    its sequence in cluster scope on every node -> NoteNode (key: the number it took)."""
    make_files(base / "in", 300)
    (base / "notes").mkdir()
    flow, fetch = fetch_flow("cs", base / "in", load_balance="round-robin")
    stamp = add_python_processor(flow, EXAMPLES / "StampSequence.py", "stamp", properties={"State Scope": "CLUSTER"},
                                      auto_terminate=["failure"])
    key = flow.add(UpdateAttribute, "key", properties={"key": "${sequence.number}"})
    note = flow.add(NoteNode, "note", properties={"Directory": str(base / "notes")}, auto_terminate=["success"])
    flow.connect(fetch, stamp, ["success"], name="fetched")
    flow.connect(stamp, key, name="stamped")
    flow.connect(key, note, name="keyed")
    final = run_flow(flow, str(base / "repo"), nodes="all", timeout=600)
    state = json.loads((base / "repo" / "cluster-state.json").read_text())
    return {**summary(final), "notes": notes(base / "notes"), "state": state}


SCENARIOS = {f.__name__: f for f in (round_robin, partition, single_node, lineage, node_killed, tls, primary_moves,
                                     cluster_state)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--base", required=True)
    parser.add_argument("--temp-dir", required=True)
    args = parser.parse_args()
    results = {}
    nodes = Nodes(3, args.temp_dir)
    try:
        for name in args.scenarios:
            try:
                results[name] = SCENARIOS[name](Path(args.base) / name, nodes)
            except Exception:
                results[name] = {"raised": traceback.format_exc()}
    finally:
        nodes.close()
    print(json.dumps({"results": results}, default=str), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    tempfile.tempdir = None
    main()
