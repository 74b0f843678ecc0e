"""Scenario 11: the stateless engine (issue 16).

* Scenario 1's flow (GenerateFlowFile 1 KiB -> UpdateAttribute -> RouteOnAttribute, batches of
  1,000) on the stateless engine in this process (``run_stateless``: one trigger a batch, each a
  transaction in memory), against the bare loop of scenario 1 without fsync measured in the same
  run. The two do not do the same work: the bare loop writes content, WAL records and provenance
  to disk; the stateless engine writes nothing (its guarantee is the trigger's all or nothing, with
  sources that re-read what was not acknowledged). The row says what the engine's own machinery
  costs per FlowFile against the cheapest durable loop.
* The Ray Data fan-out (``StatelessBatches``): the same UpdateAttribute -> RouteOnAttribute flow
  behind an input port as a ``map_batches`` step over a dataset of 1 KiB inputs, each batch one
  trigger, against Ray Data running the same transform as a plain callable class (the same input
  stage, the same output rows: port, content, attributes as JSON), both on 2 actors of half a CPU
  each. Each is run
  once untimed (Ray Data warms up), then the median of three.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path

import orjson

from bench import median_run, ray_session, row
from bench.baselines import LARGE, measure_bare_flow
from bench.small_flowfiles import small_flow
from flowactors.engine.stateless_engine import StatelessBatches, run_stateless
from flowactors.processors import RouteOnAttribute, UpdateAttribute
from flowactors.sdk.flow import Flow

S11 = "11 stateless engine"
BATCH = 1000
RUNS = 3
CONTENT = os.urandom(1024)


def transform_flow() -> Flow:
    """Scenario 1's transform behind an input port: UpdateAttribute -> RouteOnAttribute -> two
    output ports (its two routes)."""
    flow = Flow("bench-stateless-transform")
    update = flow.add(UpdateAttribute, "update", properties={
        "size.class": "${fileSize:ge(1024):ifElse('large','small')}"})
    route = flow.add(RouteOnAttribute, "route", properties={"large": "${size.class:equals('large')}"})
    flow.connect(flow.add_input_port("in"), update)
    flow.connect(update, route)
    flow.connect(route, flow.add_output_port("large"), "large")
    flow.connect(route, flow.add_output_port("unmatched"), "unmatched")
    return flow


def make_inputs(block: dict) -> dict:
    """A 1 KiB input a row, named by a uuid (the flow's inputs and the baseline's)."""
    count = len(block["id"])
    return {"content": [CONTENT] * count, "filename": [str(uuid.uuid4()) for _ in range(count)]}


class PlainTransform:
    """Ray Data doing the flow's transform by hand: the size class, the route, the same rows out."""

    def __call__(self, block: dict) -> dict:
        rows: dict[str, list] = {"port": [], "content": [], "attributes": []}
        for content, filename in zip(block["content"], block["filename"]):
            content = bytes(content)
            size_class = "large" if len(content) >= LARGE else "small"
            rows["port"].append("large" if size_class == "large" else "unmatched")
            rows["content"].append(content)
            rows["attributes"].append(orjson.dumps({"filename": str(filename), "size.class": size_class}).decode())
        return rows


def fan_out(flowfiles: int, stateless: bool) -> dict:
    """One timed run over ``flowfiles`` inputs: the stateless flow's fan-out, or the plain one."""
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = context.print_on_execution_start = False
    started = time.perf_counter()
    inputs = ray.data.range(flowfiles).map_batches(make_inputs, batch_size=BATCH, batch_format="numpy")
    # half a CPU an actor: two of them leave a CPU of this machine's two to the input stage's tasks
    # (whole-CPU actors took both and the input tasks never ran)
    actors = {"compute": ray.data.ActorPoolStrategy(size=2), "num_cpus": 0.5, "batch_size": BATCH,
              "batch_format": "numpy"}
    if stateless:
        dataset = inputs.map_batches(StatelessBatches, fn_constructor_args=(transform_flow(),), **actors)
    else:
        dataset = inputs.map_batches(PlainTransform, **actors)
    large = sum(int((block["port"] == "large").sum())
                for block in dataset.iter_batches(batch_format="numpy", batch_size=None))
    seconds = time.perf_counter() - started
    if large != flowfiles:
        raise RuntimeError(f"{'stateless' if stateless else 'plain'} fan-out routed {large} to 'large', not {flowfiles}")
    return {"seconds": seconds, "flowfiles_per_s": flowfiles / seconds}


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    flowfiles = size or (10_000 if quick else 200_000)
    final = run_stateless(small_flow(flowfiles, BATCH, name="bench-stateless"))
    routed = sum(final["outputs"].values())
    problems = [] if routed == flowfiles and "failure" not in final else [
        f"routed {routed} of {flowfiles}; failure: {final.get('failure')}"]
    stateless_rate = flowfiles / final["seconds"]
    bare = measure_bare_flow(flowfiles, BATCH, workdir / "bare", sync=False)
    rows = [row(S11, "FlowFiles/s, scenario 1's flow on the stateless engine (one process)", stateless_rate,
                bare["flowfiles_per_s"], "bare loop without fsync (scenario 1's)", "FlowFiles/s",
                "; ".join([f"{flowfiles:,} FlowFiles of 1 KiB in {final['triggers']} triggers of {BATCH:,} "
                           f"({final['seconds']:.2f} s, start to the last trigger); nothing written to disk by the "
                           f"engine, the bare loop writes content, WAL and journal",
                           *(f"PROBLEM: {p}" for p in problems)]))]
    with ray_session():
        medians = {}
        for stateless in (True, False):
            fan_out(flowfiles, stateless)  # warm-up, not timed
            medians[stateless] = median_run([fan_out(flowfiles, stateless) for _ in range(RUNS)])
    (stateless_median, stateless_rates), (plain_median, plain_rates) = medians[True], medians[False]
    rows.append(row(S11, "FlowFiles/s, Ray Data fan-out of a stateless flow (each batch a trigger)",
                    stateless_median["flowfiles_per_s"], plain_median["flowfiles_per_s"],
                    "Ray Data, the same transform as a plain callable", "FlowFiles/s",
                    f"{flowfiles:,} inputs of 1 KiB, batches of {BATCH:,}, 2 actors each; median of {RUNS} after a "
                    f"warm-up run (stateless {stateless_rates}, plain {plain_rates} FlowFiles/s)"))
    return rows
