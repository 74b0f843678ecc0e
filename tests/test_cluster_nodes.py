"""A flow across a real multi-node Ray (seed 002): ``ray.cluster_utils.Cluster`` with three
raylets on this machine (``n0`` the head, ``n1``, ``n2``), each node with its own repository
folder. Each test asserts on what one scenario of tests/cluster_nodes_driver.py reports; the
driver runs in a process of its own (a process drives one Ray; the test session has its own), and
whatever its Ray left behind is killed by its temp dir. A scenario that kills or adds a node has a
cluster of its own; the others (``SHARED``) run one after another on one cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import psutil
import pytest

DRIVER = Path(__file__).with_name("cluster_nodes_driver.py")


def _kill_leftovers(temp_dir: str) -> None:
    marker = temp_dir.rstrip("/")
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and any(marker in arg for arg in proc.info["cmdline"] or ()):
                os.kill(proc.pid, signal.SIGKILL)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            continue


def run_scenarios(names: list[str], base: Path, timeout: float = 900, env: dict | None = None) -> dict:
    """Runs the scenarios ``names`` one after another on one three-node cluster, in a driver
    process; returns each one's result (``{"raised": traceback}`` for one that raised)."""
    temp_dir = tempfile.mkdtemp(prefix="fa-mn-", dir="/tmp")  # short: Ray's socket paths have a limit
    try:
        done = subprocess.run([sys.executable, str(DRIVER), *names, "--base", str(base), "--temp-dir", temp_dir],
                              capture_output=True, text=True, timeout=timeout, cwd=DRIVER.parents[1],
                              env={**os.environ, **(env or {})})
    finally:
        _kill_leftovers(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"results"')]
    assert done.returncode == 0 and lines, f"scenarios {names} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return json.loads(lines[-1])["results"]


def run_scenario(name: str, base: Path, timeout: float = 900, env: dict | None = None) -> dict:
    """Runs the scenario ``name`` on a three-node cluster of its own; returns its result."""
    return _result(run_scenarios([name], base, timeout, env), name)


def _result(results: dict, name: str) -> dict:
    result = results[name]
    assert "raised" not in result, f"scenario {name} raised:\n{result['raised']}"
    return result


#: the scenarios that leave the cluster as they found it (no node killed or added): they share one
SHARED = ["round_robin", "single_node", "lineage", "cluster_state"]


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory) -> dict:
    """The results of the ``SHARED`` scenarios, run one after another on one cluster (one
    cluster's start and stop, instead of one for each)."""
    return run_scenarios(SHARED, tmp_path_factory.mktemp("shared-cluster"), timeout=800)


def _by_file(notes: dict[str, list]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for node, lines in notes.items():
        for filename, _key in lines:
            seen.setdefault(filename, []).append(node)
    return seen


def _by_key(notes: dict[str, list]) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for node, lines in notes.items():
        for _filename, key in lines:
            keys.setdefault(key, set()).add(node)
    return keys


def _clean(result: dict) -> None:
    assert not result["timed_out"] and not result["stalled"], result
    assert not result["errors"], result["errors"]
    assert all(count == 0 for count in result["queues"].values()), result["queues"]


@pytest.mark.timeout(900)  # the first to run starts shared_cluster
def test_list_on_the_primary_fetch_everywhere_round_robin(shared_cluster):
    result = _result(shared_cluster, "round_robin")
    _clean(result)
    assert len(result["delivered"]) == 3000 and len(set(result["delivered"])) == 3000
    assert result["processors"]["put"]["flowfiles_in"] == 3000  # each delivered once
    listed = {n: s["processors"]["list"]["flowfiles_out"] for n, s in result["nodes"].items()}
    assert listed == {"n0": 3000, "n1": 0, "n2": 0}  # primary node only
    fetched = {n: s["processors"]["fetch"]["flowfiles_in"] for n, s in result["nodes"].items()}
    assert sum(fetched.values()) == 3000
    for node, count in fetched.items():
        assert abs(count - 1000) <= 100, fetched  # every node's share within 10 %


def test_partition_by_attribute_keeps_a_key_on_one_node_and_moves_only_a_leaving_nodes_keys(tmp_path):
    result = run_scenario("partition", tmp_path)
    _clean(result["first"])
    _clean(result["second"])
    before, after = _by_key(result["before"]), _by_key(result["after"])
    assert len(before) == 60 and len(after) == 60
    assert all(len(nodes) == 1 for nodes in before.values()), before
    assert all(len(nodes) == 1 for nodes in after.values()), after
    assert {n for nodes in before.values() for n in nodes} == {"n0", "n1", "n2"}
    moved = [k for k in before if before[k] != after[k]]
    assert moved and all(before[k] == {"n2"} for k in moved)  # only n2's keys moved
    assert all(after[k] <= {"n0", "n1"} for k in after)
    assert sum(len(v) for v in result["before"].values()) == 600 == sum(len(v) for v in result["after"].values())


@pytest.mark.timeout(900)  # the first to run starts shared_cluster
def test_single_node_sends_everything_to_the_topologys_first_node(shared_cluster):
    result = _result(shared_cluster, "single_node")
    _clean(result)
    assert result["nodes"]["n1"]["primary"]
    fetched = {n: s["processors"]["fetch"]["flowfiles_in"] for n, s in result["nodes"].items()}
    assert all(count > 0 for count in fetched.values()), fetched  # fetched everywhere (round robin)
    assert set(result["notes"]) == {"n1"} and len(result["notes"]["n1"]) == 300


@pytest.mark.timeout(900)  # the first to run starts shared_cluster
def test_lineage_follows_a_flowfile_across_nodes(shared_cluster):
    result = _result(shared_cluster, "lineage")
    _clean(result)
    labels = result["lineage"]
    assert labels[0] == f"FlowFile {result['received_uuid']}"  # starts at the FlowFile asked for
    assert any("RECEIVE by load-balance:listed @ n1" in label for label in labels)
    assert any("FETCH by fetch @ n1" in label for label in labels)
    assert any(label.endswith("@ n0") and "CREATE by list" in label for label in labels)
    assert any("SEND by load-balance:listed@n1 @ n0" in label for label in labels)
    # the text view starts at the FlowFile asked for and follows it on n1; the sender's side (n0)
    # is in the view as its relatives (drawn in the picture, counted in the text)
    text = result["text"].splitlines()
    assert text[0] == f"FlowFile {result['received_uuid']}"
    assert text[text.index("descendants:") + 1].endswith("RECEIVE by load-balance:listed @ n1")
    assert any(label.endswith("@ n0") and "SEND" in label for label in result["view_relatives"])
    assert result["cli"]["exit"] == 0, result["cli"]  # flowactors lineage on the cluster's repository
    assert result["cli"]["stdout"].strip() == result["text"].strip()
    sender_side = result["from_sender"]
    assert any("SEND" in label and label.endswith("@ n0") for label in sender_side)
    assert any("RECEIVE" in label and not label.endswith("@ n0") for label in sender_side)


@pytest.mark.timeout(1200)
def test_a_node_killed_mid_flow_loses_nothing(tmp_path):
    result = run_scenario("node_killed", tmp_path, timeout=1100)
    _clean(result)
    killed = result["killed"]
    assert killed["processes"] >= 2 and "back" in killed  # its raylet and workers, then it came back
    assert any("node n2 lost" in e for e in result["cluster_events"])
    seen = _by_file(result["notes"])
    assert len(seen) == 3000  # every file noted: nothing lost
    duplicates = sum(len(nodes) - 1 for nodes in seen.values())
    # only what was in flight when n2 died can come twice: a NoteNode batch (50), a transfer
    # (at most the room of the connection over there: 50 and 100), a FetchFile batch (5)
    assert duplicates <= 300, duplicates
    keys = _by_key(result["notes"])
    assert all(len(nodes) == 1 for nodes in keys.values()), keys  # a key waits for its node
    assert "n2" in {n for nodes in keys.values() for n in nodes}  # n2's keys delivered after it returned
    assert result["waited_for_n2"] > 0  # partitioned data waited while n2 was away
    fetched = Counter({n: s["processors"]["fetch"]["flowfiles_in"] for n, s in result["nodes"].items()})
    assert fetched["n0"] + fetched["n1"] > 2000  # round robin failed over to the others


def test_the_primary_node_moves_when_it_is_lost(tmp_path):
    result = run_scenario("primary_moves", tmp_path)
    assert not result["timed_out"], result
    steps = result["steps"]
    assert steps["primary_before"] == "n1" and steps["killed"] >= 2 and result["primary_after"] == "n0"
    assert any("primary node is now n0" in e for e in result["cluster_events"])
    assert result["noted_g"] == 100  # files written after the move were listed by the new primary
    assert "n1" not in {n for n, lines in result["notes"].items() if any(f.startswith("g") for f, _ in lines)}
    listed = {n: s["processors"]["list"]["flowfiles_out"] for n, s in result["nodes"].items()}
    assert listed["n0"] >= 100 and listed["n2"] == 0


@pytest.mark.timeout(900)  # the first to run starts shared_cluster
def test_cluster_scoped_state_is_shared_by_every_node(shared_cluster):
    """A NiFi Python processor keeping a sequence in Scope.CLUSTER, running on three nodes at once:
    every number is taken exactly once across the nodes, and the keeper's file holds the next."""
    result = _result(shared_cluster, "cluster_state")
    _clean(result)
    numbers = [int(key) for lines in result["notes"].values() for _filename, key in lines]
    assert sorted(numbers) == list(range(1, 301))
    assert len([node for node, lines in result["notes"].items() if lines]) >= 2   # more than one node stamped
    (component, state), = result["state"]["components"].items()
    assert component == "cs/stamp" and state["values"] == {"next": "301"} and state["version"] == 299


def test_a_transfer_with_rays_tls_on(tmp_path):
    """docs/cluster.md, "Security": Ray's TLS on every process of the cluster (its gRPC: GCS,
    raylets, workers, so the actor calls that carry transfers), with a certificate of this
    machine's addresses made here."""
    from ray.util import get_node_ip_address

    certs = tmp_path / "certs"
    certs.mkdir()
    address = get_node_ip_address()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=flowactors-test", "-keyout", str(certs / "node.key"), "-out", str(certs / "node.crt"),
                    "-addext", f"subjectAltName=IP:127.0.0.1,IP:{address},DNS:localhost"],
                   check=True, capture_output=True)
    tls = {"RAY_USE_TLS": "1", "RAY_TLS_SERVER_CERT": str(certs / "node.crt"),
           "RAY_TLS_SERVER_KEY": str(certs / "node.key"), "RAY_TLS_CA_CERT": str(certs / "node.crt")}
    result = run_scenario("tls", tmp_path / "run", env=tls)
    _clean(result)
    assert result["delivered"] == 300
    fetched = {n: s["processors"]["fetch"]["flowfiles_in"] for n, s in result["nodes"].items()}
    assert all(count == 100 for count in fetched.values()), fetched  # transfers to both other nodes
    assert result["gcs_tls"]["version"].startswith("TLS")
