"""The child process of tests/test_ray_dashboard.py: ``run_flow`` with or without the Ray dashboard.

It runs in a process of its own because a Ray driver connects to one Ray per process and the test
session has its own (started without a dashboard), and ``run_flow`` must start the Ray here. Its
Ray lives under ``RAY_TMPDIR``, which the parent uses to kill whatever is left. The flow generates
FlowFiles and hashes them, beside a processor that fails, until the file ``--stop`` exists. On
stdout, one JSON line when the flow has started (``{"started": ...}``: what Ray says about its
dashboard, and the flow's live actors as the dashboard's state API lists them) and one at the end
(``{"final": ...}``); what ``run_flow`` prints goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import ray

from flowactors.driver.running import run_flow
from flowactors.ops.ray_dashboard import session_dir
from flowactors.processors import GenerateFlowFile, HashContent
from flowactors.sdk.flow import Flow
from flowactors.sdk.processor import Processor


class Fails(Processor):
    """Fails every trigger: the errors the dashboard's panel counts."""

    input_required = False

    def on_trigger(self, context, session) -> None:
        raise RuntimeError("a failure for the dashboard's errors panel")


def started(dashboard: bool) -> None:
    report = {"webui_url": ray.init(ignore_reinit_error=True).dashboard_url, "session_dir": session_dir()}
    if dashboard:
        from ray.util.state import list_actors

        # this Ray's own address: other Rays on the machine (the test session's) must not be asked
        alive = list_actors(address=ray.get_runtime_context().gcs_address, filters=[("state", "=", "ALIVE")])
        report["actors"] = sorted(a.name for a in alive if a.name)
    print(json.dumps({"started": report}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repository", required=True)
    parser.add_argument("--stop", required=True, type=Path)
    parser.add_argument("--dashboard", action="store_true")
    args = parser.parse_args()

    flow = Flow("dashboard-demo", settings={"checkpoint_interval": 1.0})
    generate = flow.add(GenerateFlowFile, "generate", properties={"File Size": "1 KB", "Batch Size": 10},
                        run_schedule="50 ms")
    hash_ = flow.add(HashContent, "hash", auto_terminate=["success", "failure"])  # reads the content
    flow.connect(generate, hash_)
    flow.add(Fails, "fails", run_schedule="1 sec")
    final = run_flow(flow, args.repository, dashboard=args.dashboard, timeout=240,
                     until=lambda status: args.stop.exists(), on_started=lambda _: started(args.dashboard))
    print(json.dumps({"final": {"dashboard": final.get("dashboard"), "timed_out": final.get("timed_out", False)}}),
          flush=True)


if __name__ == "__main__":
    main()
