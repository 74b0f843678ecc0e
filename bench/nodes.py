"""Scenario 12: one flow across Ray nodes (issue 17), on ``ray.cluster_utils.Cluster`` nodes of
this machine (each a raylet of its own, labelled ``flowactors-node:n<i>``; one CPU each).

* **Inter-node transfer**: GenerateFlowFile (primary node) -> round robin -> UpdateAttribute on two
  nodes, so half the FlowFiles go from n0 to n1 through a load-balance sender. The rate is the
  FlowFiles the sender moved per second it was busy (its task time: reading content, the payload,
  the receiving node's commit, its own commit with SEND + DROP events). Baseline, same run, same
  nodes: an actor on n0 ``ray.put``s the same bytes (content and attributes) in the same batches
  and an actor on n1 ``ray.get``s them (Ray's object store moving the bytes, nothing durable), and
  the same bytes as the argument of an actor call (Ray's own direct path: what a transfer uses).
  For 1 KiB FlowFiles (FlowFiles/s) and 256 KiB ones (MB/s).
* **Scenario 1's flow on 1 vs 3 nodes**: GenerateFlowFile (primary node) -> round robin ->
  UpdateAttribute -> RouteOnAttribute on the same 3-node cluster, with ``nodes=["n0"]`` and
  ``nodes="all"``. On 2 cores three nodes share the same two cores, so this shows the cost of
  spreading (transfers, three repositories), not a speed-up: reported as it is.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson

from bench import row
from bench.small_flowfiles import flow_edges
from flowactors import run_flow
from flowactors.driver.running import NAMESPACE, RAY_SYSTEM_CONFIG
from flowactors.processors import GenerateFlowFile, RouteOnAttribute, UpdateAttribute
from flowactors.sdk.flow import Flow

S12 = "12 flow across nodes"
BATCH = 1000


def start_cluster(count: int):
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"flowactors-node:n0": 1}, "include_dashboard": False,
        "object_store_memory": 300 * 1024**2, "_system_config": RAY_SYSTEM_CONFIG})
    for i in range(1, count):
        cluster.add_node(num_cpus=1, resources={f"flowactors-node:n{i}": 1}, object_store_memory=300 * 1024**2)
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
    return cluster


def transfer_flow(flowfiles: int, size: str) -> Flow:
    flow = Flow("bench-transfer", settings={"executors": 1})
    generate = flow.add(GenerateFlowFile, "generate", primary_node_only=True, properties={
        "File Size": size, "Batch Size": BATCH, "Max FlowFiles": flowfiles, "Unique FlowFiles": False})
    update = flow.add(UpdateAttribute, "update", batch_size=BATCH, auto_terminate=["success"],
                      properties={"moved": "yes"})
    flow.connect(generate, update, name="spread", load_balance="round-robin")
    return flow


def spread_small_flow(flowfiles: int) -> Flow:
    """Scenario 1's flow with its first connection round robin and its source on the primary."""
    flow = Flow("bench-spread", settings={"executors": 1})
    generate = flow.add(GenerateFlowFile, "generate", primary_node_only=True, properties={
        "File Size": "1 KB", "Batch Size": BATCH, "Max FlowFiles": flowfiles, "Unique FlowFiles": False})
    update = flow.add(UpdateAttribute, "update", batch_size=BATCH, properties={
        "size.class": "${fileSize:ge(1024):ifElse('large','small')}"})
    route = flow.add(RouteOnAttribute, "route", batch_size=BATCH, properties={"large": "${size.class:equals('large')}"},
                     auto_terminate=("large", "unmatched"))
    flow.connect(generate, update, name="generated", load_balance="round-robin")
    flow.connect(update, route, name="updated")
    return flow


def _routed(final: dict) -> int:
    return next(p["flowfiles_in"] for p in final["processors"] if p["name"] == "route")


def object_store_baseline(flowfiles: int, content_size: int) -> dict:
    """The same bytes from n0 to n1 in batches of a transfer's size: through the object store
    (put, then get on n1), and as an actor call's argument."""
    import ray

    @ray.remote(num_cpus=0)
    class Sink:
        def take(self, payload) -> int:
            return len(payload[1])

        def take_ref(self, refs) -> int:
            return len(ray.get(refs[0])[1])

    @ray.remote(num_cpus=0)
    class Source:
        def __init__(self, sink):
            self.sink = sink

        def run(self, batches: int, per_batch: int, by_ref: bool) -> float:
            attributes = orjson.dumps([{"filename": f"f{i}", "path": "./", "uuid": "x" * 36} for i in range(per_batch)])
            content = os.urandom(content_size) * per_batch
            started = time.perf_counter()
            for _ in range(batches):
                payload = (attributes, content)
                if by_ref:
                    ray.get(self.sink.take_ref.remote([ray.put(payload)]))
                else:
                    ray.get(self.sink.take.remote(payload))
            return time.perf_counter() - started

    sink = Sink.options(resources={"flowactors-node:n1": 0.001}).remote()
    source = Source.options(resources={"flowactors-node:n0": 0.001}).remote(sink)
    per_batch = max(1, min(BATCH, (8 * 1024 * 1024) // content_size))
    batches = max(1, flowfiles // per_batch)
    out = {}
    for by_ref in (True, False):
        ray.get(source.run.remote(1, per_batch, by_ref))  # warm-up
        seconds = ray.get(source.run.remote(batches, per_batch, by_ref))
        out["object_store" if by_ref else "actor_call"] = batches * per_batch / seconds
    for actor in (source, sink):
        ray.kill(actor)
    return out


def measure_transfer(workdir: Path, flowfiles: int, size: str, content_size: int) -> dict:
    final = run_flow(transfer_flow(flowfiles, size), str(workdir / f"transfer-{content_size}"), nodes=["n0", "n1"],
                                               timeout=1200)
    sent = sum(count for n in final["nodes"].values() for count in n["sent"].values())
    busy = sum(n["sending_seconds"] for n in final["nodes"].values())
    updated = next(p["flowfiles_in"] for p in final["processors"] if p["name"] == "update")
    return {"sent": sent, "busy": busy, "updated": updated, "rate": sent / busy if busy else 0.0}


def flow_seconds(repository: Path) -> float:
    """The flow's own time across its nodes' provenance: first FlowFile created to the newest event."""
    edges = [flow_edges(folder) for folder in sorted((repository / "nodes").iterdir())
             if (folder / "provenance").is_dir()]
    return max(1, max(e[1] for e in edges) - min(e[0] for e in edges)) / 1000.0


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    import ray

    rows = []
    cluster = start_cluster(3)
    try:
        for content_size, label, count in ((1024, "1 KB", size or (4_000 if quick else 40_000)),
                                           (256 * 1024, "256 KB", max(64, (size or (400 if quick else 2_000))))):
            moved = measure_transfer(workdir, count, label, content_size)
            base = object_store_baseline(moved["sent"] or count // 2, content_size)
            problems = [] if moved["updated"] == count else [f"PROBLEM: {moved['updated']} of {count} updated"]
            unit, scale = ("FlowFiles/s", 1.0) if content_size == 1024 else ("MB/s", content_size / 1e6)
            notes = "; ".join([f"{moved['sent']:,} of {count:,} FlowFiles of {label} sent n0 -> n1 in "
                               f"{moved['busy']:.2f} s of sender task time (read content, payload, the receiver's "
                               f"commit, SEND + DROP); Ray's actor call with the same bytes: "
                               f"{base['actor_call'] * scale:,.1f} {unit}", *problems])
            rows.append(row(S12, f"inter-node transfer, {label} FlowFiles", moved["rate"] * scale,
                            base["object_store"] * scale, "Ray's object store, same bytes, same nodes (put/get)",
                            unit, notes))
        flowfiles = size or (10_000 if quick else 50_000)
        rates = {}
        for nodes in (["n0"], "all"):
            repository = workdir / f"spread-{len(nodes)}"
            final = run_flow(spread_small_flow(flowfiles), str(repository), nodes=nodes, timeout=1800)
            rates[str(nodes)] = (flowfiles / flow_seconds(repository), _routed(final))
        three, one = rates["all"], rates["['n0']"]
        rows.append(row(S12, "FlowFiles/s, scenario 1's flow spread over 3 nodes (round robin after the source)",
                        three[0], one[0], "the same flow on 1 of the nodes", "FlowFiles/s",
                        f"{flowfiles:,} FlowFiles of 1 KiB; three ray.cluster_utils nodes of one CPU each on this "
                        f"2-core machine: overhead, not speed-up; routed {three[1]:,} / {one[1]:,}"))
    finally:
        ray.shutdown()
        cluster.shutdown()
    return rows
