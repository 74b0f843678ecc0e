"""A stateless flow fanned out over a Ray cluster with Ray Data: each batch its own transaction.

A flow run on the stateless engine is a pure function of its input batch: nothing on disk,
nothing shared. So Ray Data can run it as a ``map_batches`` step over a dataset of inputs, on as
many workers as the cluster has, and each batch succeeds or fails as a whole.

The flow: an input port -> UpdateAttribute (the record's length class) -> RouteOnContent (a record
that mentions "refund" goes to the ``review`` output port) -> ReplaceText (appends a mark) -> the
``accepted`` output port. A batch with a record containing "corrupt" reaches the ``broken`` output
port, declared a failure port: that whole batch comes back as ``failure`` rows, with the reason.

Run it with `python examples/stateless_ray_data.py [RECORDS]` (a local Ray is started).
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import ray

from flowactors import Flow
from flowactors.processors import ReplaceText, RouteOnContent, UpdateAttribute
from flowactors.stateless import StatelessBatches


def review_flow() -> Flow:
    flow = Flow("review")
    classify = flow.add(UpdateAttribute, "classify",
                        properties={"length.class": "${fileSize:gt(20):ifElse('long','short')}"})
    route = flow.add(RouteOnContent, "route", properties={"Match Requirement": "content must contain match",
                                                          "refund": "refund", "corrupt": "corrupt"})
    mark = flow.add(ReplaceText, "mark", properties={"Replacement Strategy": "Append",
                                                     "Replacement Value": " [accepted]"}, auto_terminate=["failure"])
    flow.connect(flow.add_input_port("in"), classify)
    flow.connect(classify, route)
    flow.connect(route, mark, "unmatched")
    flow.connect(mark, flow.add_output_port("accepted"))
    flow.connect(route, flow.add_output_port("review"), "refund")
    flow.connect(route, flow.add_output_port("broken"), "corrupt")
    return flow


def records(count: int) -> list[dict]:
    """Order lines; every 7th asks for a refund; record 4242 (if there) is corrupt."""
    return [{"content": f"order {i}: {'refund requested' if i % 7 == 0 else 'ok'}"
             + (" corrupt" if i == 4242 else ""), "order": i} for i in range(count)]


def main(count: int = 10_000) -> dict:
    ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = context.print_on_execution_start = False
    dataset = ray.data.from_items(records(count)).map_batches(
        StatelessBatches, fn_constructor_args=(review_flow(),), fn_constructor_kwargs={"failure_ports": ["broken"]},
        batch_size=500, compute=ray.data.ActorPoolStrategy(size=2), num_cpus=0.5, batch_format="numpy")
    ports: Counter = Counter()
    failed_orders = []
    for row in dataset.iter_rows():
        ports[row["port"]] += 1
        if row["port"] == "failure":
            failed_orders.append(int(json.loads(row["attributes"])["order"]))
    summary = {"ports": dict(ports), "failed_batch": [min(failed_orders), max(failed_orders)] if failed_orders else None}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
