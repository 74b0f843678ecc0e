"""A flow as a Ray job: what runs on the cluster (``python -m flowactors.driver.cluster_job run|status|stop``).

``flowactors submit`` (``flowactors.cli.cluster``) submits ``python -m flowactors.driver.cluster_job run FLOW``
through the Ray Jobs API. That driver starts the flow's controller as a *detached*, named actor
(``<flow>.controller``) in a namespace of the flow's own (``flowactors-<flow>``), pinned to one node
(the repository folder is that node's disk), so later commands find it by name: ``flowactors
status`` and ``flowactors stop`` submit the short control jobs ``python -m flowactors.driver.cluster_job status|stop
FLOW``. The driver watches the flow until it is idle, a duration has passed, or it is stopped, and
then stops it gracefully: running sessions finish, queued FlowFiles stay in the write-ahead log.

Every command ends by printing one ``FLOWACTORS-RESULT <json>`` line; the client reads it back from
the job's logs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
import time
from typing import Any, Sequence

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from flowactors.engine.actors.ray_hosting import RayHosting
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, FlowController
from flowactors.engine.errors import FlowStartError
from flowactors.engine.transport import ActorLink
from flowactors.driver.errors import FlowLoadError
from flowactors.driver.loading import load_flow
from flowactors.driver.running import IdleWatch, stall_message
from flowactors.ops.error_log import ErrorLog
from flowactors.ops.status_view import status_text
from flowactors.sdk.flow import FlowValidationError
from flowactors.sdk.settings import SettingsError, flow_settings

RESULT_PREFIX = "FLOWACTORS-RESULT "
POLL_INTERVAL = 0.5
PROGRESS_INTERVAL = 60.0


def namespace(flow_name: str) -> str:
    """The Ray namespace a submitted flow's actors live in: one per flow, so names never clash."""
    return f"flowactors-{flow_name}"


def controller_name(flow_name: str) -> str:
    return f"{flow_name}.controller"


class ClusterFlowController(FlowController):
    """The controller of a submitted flow. Whoever asks first (the job's driver, ``flowactors stop``,
    a SIGTERM) stops it; the others wait for that same stop and get its final status.

    Every status it gives (the driver looks at one each ``POLL_INTERVAL``) and the final one go to
    the repository's error log (``flowactors.ops.error_log``), as a local run's do: it is written
    here, on the flow's node, where the repository is, and ``flowactors errors`` reads it there."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._stop_once_lock = threading.Lock()
        self.stop_requested_by: str | None = None
        self.final: dict | None = None
        self._errors, self._errors_lock = ErrorLog(self.root), threading.Lock()

    def status(self) -> dict:
        found = super().status()
        self._record(found)
        return found

    def _record(self, status: dict) -> None:
        with self._errors_lock:  # the actor answers calls on several threads
            self._errors.record(status)

    def stopping(self) -> str | None:
        """Who asked for the stop, once someone has (answered even while the stop runs)."""
        return self.stop_requested_by

    def stop_once(self, requested_by: str) -> dict:
        self.stop_requested_by = self.stop_requested_by or requested_by
        with self._stop_once_lock:
            if self.final is None:
                self.final = self.stop() if self.started else {}
                self._record(self.final)
        return self.final

    def where(self) -> dict:
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "repository": self.root, "pid": os.getpid()}


ClusterFlowControllerActor = ray.remote(num_cpus=0, max_concurrency=CONTROLLER_CONCURRENCY)(ClusterFlowController)


class JobError(Exception):
    """A problem the job reports in one line (and in its result) instead of a traceback."""


class _Stopped(Exception):
    """SIGTERM/SIGINT reached the driver: ``ray job stop`` or ``flowactors stop`` gave up waiting."""


def result(payload: dict) -> None:
    print(RESULT_PREFIX + json.dumps(payload, default=str), flush=True)


def _node(spec: str | None) -> dict:
    """The alive node named by ``spec`` (its IP address, host name or node id), or the driver's own."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if not spec:
        spec = ray.get_runtime_context().get_node_id()
    for node in alive:
        if spec in (node["NodeID"], node.get("NodeManagerAddress"), node.get("NodeManagerHostname")):
            return node
    listing = ", ".join(f"{n.get('NodeManagerAddress')} ({n['NodeID'][:8]})" for n in alive)
    raise JobError(f"no alive node '{spec}' in this cluster; its nodes: {listing}")


def _lookup(flow_name: str):
    try:
        return ray.get_actor(controller_name(flow_name), namespace=namespace(flow_name))
    except ValueError:
        return None


def _summary(status: dict) -> str:
    processors, queues = status.get("processors", []), status.get("queues", [])
    return (f"flow {status.get('flow')}: {sum(p['flowfiles_in'] for p in processors)} FlowFiles in, "
            f"{sum(p['flowfiles_out'] for p in processors)} out, {sum(q['count'] for q in queues)} queued, "
            f"{sum(p['errors'] for p in processors)} errors"
            + "".join(f", {n} {kind} restart(s)" for kind, n in sorted(status.get("restarts", {}).items())))


# ---------------------------------------------------------------------------------- run
def run(flow_path: str, repository: str, *, duration: float | None = None, keep_running: bool = False,
        timeout: float | None = None, settings: dict | None = None, node: str | None = None) -> int:
    flow = load_flow(flow_path)
    flow.validate()
    resolved = flow_settings(flow, settings)
    repository = os.path.expanduser(repository)
    if not os.path.isabs(repository):
        raise JobError(f"the repository must be an absolute path on the node, not {repository!r}")
    ray.init(namespace=namespace(flow.name), log_to_driver=True)
    if _lookup(flow.name) is not None:
        raise JobError(f"flow '{flow.name}' is already running on this cluster (actor "
                       f"{controller_name(flow.name)} in namespace {namespace(flow.name)}); stop it first "
                       f"with flowactors stop {flow.name}")
    target = _node(node)
    controller = ClusterFlowControllerActor.options(
        name=controller_name(flow.name), lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(target["NodeID"], soft=False),
    ).remote(flow, repository, resolved, RayHosting())

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the graceful stop finish
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise _Stopped(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    began = time.monotonic()
    outcome: dict[str, Any] = {"flow": flow.name, "repository": repository,
                               "node_ip": target.get("NodeManagerAddress"), "node_id": target["NodeID"]}
    print(f"flow '{flow.name}' starting on node {outcome['node_ip']}, repository {repository}", flush=True)
    stopper = "the job (idle)"
    try:
        try:
            outcome["recovery"] = ray.get(controller.start.remote())
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, FlowStartError):
                raise JobError(str(cause)) from None
            raise
        recovery = outcome["recovery"]
        print(f"flow '{flow.name}' started: {recovery.get('restored', 0)} FlowFiles restored from the "
              f"write-ahead log", flush=True)
        idle_watch, last_progress = IdleWatch(ActorLink(controller)), time.monotonic()
        while True:
            requested = ray.get(controller.stopping.remote())
            if requested:
                stopper = requested
                break
            try:
                status = ray.get(controller.status.remote())
            except ray.exceptions.RayError:
                if ray.get(controller.stopping.remote()):  # a stop began between the two calls
                    continue
                raise
            elapsed = time.monotonic() - began
            if time.monotonic() - last_progress >= PROGRESS_INTERVAL:
                print(_summary(status), flush=True)
                last_progress = time.monotonic()
            if duration is not None and elapsed >= duration:
                stopper = f"the job (after {duration:g} s)"
                break
            if not keep_running and duration is None:
                done, stalled = idle_watch.done(status)
                if stalled:
                    outcome["stalled"] = stalled
                    stopper = f"the job (stalled: nothing moved for {stalled['seconds']:g} s while processors failed)"
                if done:
                    break
            if timeout is not None and elapsed >= timeout:
                outcome["timed_out"] = True
                stopper = f"the job (timed out after {timeout:g} s)"
                break
            time.sleep(POLL_INTERVAL)
    except _Stopped as signalled:
        stopper = f"the job ({signalled})"
    except ray.exceptions.RayActorError:
        stopper = "someone else (the controller is gone)"
    finally:
        outcome["stopped_by"] = stopper
        try:
            outcome["final"] = ray.get(controller.stop_once.remote(stopper))
        except ray.exceptions.RayActorError:  # flowactors stop stopped and removed it meanwhile
            outcome["final"] = None
        finally:
            ray.kill(controller)
    outcome["seconds"] = round(time.monotonic() - began, 3)
    final = outcome["final"]
    if final:
        where = f"flowactors errors --repository {shlex.quote(repository)} on node {outcome['node_ip']}"
        print(status_text(final, outcome["seconds"], errors_command=where), flush=True)
        print(_summary(final), flush=True)
    print(f"flow '{flow.name}' stopped by {stopper} after {outcome['seconds']:.1f} s", flush=True)
    if outcome.get("stalled"):
        print(stall_message(flow.name, outcome["stalled"]), flush=True)
    result(outcome)
    return 1 if outcome.get("timed_out") else 4 if outcome.get("stalled") else 0


# ---------------------------------------------------------------------------------- control jobs
def status(flow_name: str) -> int:
    ray.init(namespace=namespace(flow_name), log_to_driver=False)
    controller = _lookup(flow_name)
    if controller is None:
        result({"flow": flow_name, "running": False})
        return 0
    try:
        stopping = ray.get(controller.stopping.remote())
        where = ray.get(controller.where.remote())
        live = None if stopping else ray.get(controller.status.remote())
    except ray.exceptions.RayError as err:  # stopped and removed while we asked
        result({"flow": flow_name, "running": False, "note": f"{type(err).__name__}"})
        return 0
    result({"flow": flow_name, "running": True, "stopping": stopping, "status": live, **where})
    return 0


def stop(flow_name: str, requested_by: str = "flowactors stop") -> int:
    ray.init(namespace=namespace(flow_name), log_to_driver=False)
    controller = _lookup(flow_name)
    if controller is None:
        result({"flow": flow_name, "stopped": False, "reason": "not running"})
        return 0
    try:
        where = ray.get(controller.where.remote())
        final = ray.get(controller.stop_once.remote(requested_by))
    except ray.exceptions.RayActorError:
        result({"flow": flow_name, "stopped": True, "final": None, "note": "stopped by its job meanwhile"})
        return 0
    deadline = time.monotonic() + 10.0  # the flow's own job, if alive, takes the final status and removes it
    while _lookup(flow_name) is not None and time.monotonic() < deadline:
        time.sleep(0.25)
    ray.kill(controller)
    result({"flow": flow_name, "stopped": True, "final": final, **where})
    return 0


# ---------------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flowactors.driver.cluster_job",
                                     description="flowactors' Ray job entrypoints (submitted by the flowactors CLI)")
    sub = parser.add_subparsers(dest="command", required=True)
    run_ = sub.add_parser("run", help="run a flow in this job's driver")
    run_.add_argument("flow", help="flow.py or flow.json, relative to the job's working directory")
    run_.add_argument("--repository", required=True, help="absolute path of the repository folder on the node")
    mode = run_.add_mutually_exclusive_group()
    mode.add_argument("--duration", type=float)
    mode.add_argument("--keep-running", action="store_true", help="run until stopped")
    run_.add_argument("--timeout", type=float)
    run_.add_argument("--settings-json", default="{}", help="settings overrides as a JSON object")
    run_.add_argument("--node", help="the node (IP address, host name or node id) to run on")
    for name in ("status", "stop"):
        control = sub.add_parser(name)
        control.add_argument("flow", help="the flow's name")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return run(args.flow, args.repository, duration=args.duration, keep_running=args.keep_running,
                       timeout=args.timeout, settings=json.loads(args.settings_json), node=args.node)
        return status(args.flow) if args.command == "status" else stop(args.flow)
    except (JobError, FlowLoadError, FlowValidationError, SettingsError) as err:
        print(f"flowactors: {err}", file=sys.stderr, flush=True)
        result({"error": str(err)})
        return 2


if __name__ == "__main__":
    sys.exit(main())
