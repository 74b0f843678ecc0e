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
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from flowactors.engine.actors.ray_hosting import RayHosting
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, FlowController
from flowactors.engine.errors import FlowStartError
from flowactors.engine.transport import ActorLink, call_now
from flowactors.driver.errors import FlowLoadError
from flowactors.driver.job_result import result
from flowactors.driver.loading import load_flow
from flowactors.driver.watch import Over, RunEnd, RunLimits, RunWatch, stall_message
from flowactors.ops.error_log import ErrorLog
from flowactors.ops.status_view import status_text
from flowactors.sdk.flow import Flow, FlowValidationError
from flowactors.sdk.settings import Settings, SettingsError, flow_settings

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


ClusterFlowControllerActor = ray.remote(  # type: ignore[call-overload]  # Ray's stubs: no actor options
    num_cpus=0, max_concurrency=CONTROLLER_CONCURRENCY)(ClusterFlowController)


class JobError(Exception):
    """A problem the job reports in one line (and in its result) instead of a traceback."""


class _Stopped(Exception):
    """SIGTERM/SIGINT reached the driver: ``ray job stop`` or ``flowactors stop`` gave up waiting."""


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
    """Run the flow of ``flow_path`` over ``repository`` (an absolute path on ``node``, by default
    the driver's own) until it is idle, ``duration`` passed, it timed out or someone stops it,
    then stop it gracefully and print the result. Exit status: 0, 1 timed out, 4 stalled."""
    flow = load_flow(flow_path)
    flow.validate()
    resolved = flow_settings(flow, settings)
    repository = os.path.expanduser(repository)
    if not os.path.isabs(repository):
        raise JobError(f"the repository must be an absolute path on the node, not {repository!r}")
    ray.init(namespace=namespace(flow.name), log_to_driver=True)
    handle, target = _create_controller(flow, repository, resolved, node)
    controller = ActorLink(handle, controller_name(flow.name))
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    began = time.monotonic()
    outcome: dict[str, Any] = {"flow": flow.name, "repository": repository,
                               "node_ip": target.get("NodeManagerAddress"), "node_id": target["NodeID"]}
    print(f"flow '{flow.name}' starting on node {outcome['node_ip']}, repository {repository}", flush=True)
    stopper = "the job (idle)"
    try:
        limits = RunLimits(duration=duration, timeout=timeout, until_idle=not keep_running)
        stopper = _start_and_watch(flow.name, controller, began, limits, outcome)
    except _Stopped as signalled:
        stopper = f"the job ({signalled})"
    except ray.exceptions.RayActorError:
        stopper = "someone else (the controller is gone)"
    finally:
        outcome["stopped_by"] = stopper
        try:
            outcome["final"] = call_now(controller, ClusterFlowController.stop_once, stopper)
        except ray.exceptions.RayActorError:  # flowactors stop stopped and removed it meanwhile
            outcome["final"] = None
        finally:
            ray.kill(handle)
    outcome["seconds"] = round(time.monotonic() - began, 3)
    _report(flow.name, repository, outcome)
    return 1 if outcome.get("timed_out") else 4 if outcome.get("stalled") else 0


def _create_controller(flow: Flow, repository: str, settings: Settings, node: str | None) -> tuple[Any, dict]:
    """The flow's controller, a detached named actor pinned to ``node`` (``_node``), and that node;
    ``JobError`` if the flow already runs on this cluster."""
    if _lookup(flow.name) is not None:
        raise JobError(f"flow '{flow.name}' is already running on this cluster (actor "
                       f"{controller_name(flow.name)} in namespace {namespace(flow.name)}); stop it first "
                       f"with flowactors stop {flow.name}")
    target = _node(node)
    handle = ClusterFlowControllerActor.options(
        name=controller_name(flow.name), lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(target["NodeID"], soft=False),
    ).remote(flow, repository, settings, RayHosting())
    return handle, target


def _on_signal(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the graceful stop finish
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise _Stopped(signal.Signals(signum).name)


def _start_and_watch(flow_name: str, controller: ActorLink, began: float, limits: RunLimits, outcome: dict) -> str:
    """Start the flow (its recovery's report in ``outcome``) and watch it until the run is over
    (``RunWatch``: a look every ``POLL_INTERVAL``, a stop asked for by ``flowactors stop``); who
    or what ended it."""
    try:
        outcome["recovery"] = call_now(controller, ClusterFlowController.start)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, FlowStartError):
            raise JobError(str(cause)) from None
        raise
    print(f"flow '{flow_name}' started: {outcome['recovery'].get('restored', 0)} FlowFiles restored from the "
          f"write-ahead log", flush=True)
    watch = RunWatch(controller, began, limits, on_status=_progress_lines(),
                     stop_requested=lambda: call_now(controller, ClusterFlowController.stopping),
                     quick_look=POLL_INTERVAL, busy_look=POLL_INTERVAL)
    return _stopper(watch.until_over(), limits, outcome)


def _progress_lines() -> Callable[[dict, float], None]:
    """What the job's driver does with each status: a summary line every ``PROGRESS_INTERVAL``."""
    printed = time.monotonic()

    def seen(status: dict, elapsed: float) -> None:
        nonlocal printed
        if time.monotonic() - printed >= PROGRESS_INTERVAL:
            print(_summary(status), flush=True)
            printed = time.monotonic()

    return seen


def _stopper(end: RunEnd, limits: RunLimits, outcome: dict) -> str:
    """Who or what ended the run, as the job's log and result name it; a stalled or timed-out
    run says so in ``outcome`` too."""
    if end.reason is Over.STOP_REQUESTED and end.requested_by is not None:
        return end.requested_by
    if end.reason is Over.DURATION:
        return f"the job (after {limits.duration:g} s)"
    if end.reason is Over.STALLED and end.stalled is not None:
        outcome["stalled"] = end.stalled
        return f"the job (stalled: nothing moved for {end.stalled['seconds']:g} s while processors failed)"
    if end.reason is Over.TIMED_OUT:
        outcome["timed_out"] = True
        return f"the job (timed out after {limits.timeout:g} s)"
    return "the job (idle)"


def _report(flow_name: str, repository: str, outcome: dict) -> None:
    """Print how the run ended (the final status's tables and summary, who stopped it, what
    holds a stalled flow up) and the job's result line."""
    final = outcome["final"]
    if final:
        where = f"flowactors errors --repository {shlex.quote(repository)} on node {outcome['node_ip']}"
        print(status_text(final, outcome["seconds"], errors_command=where), flush=True)
        print(_summary(final), flush=True)
    print(f"flow '{flow_name}' stopped by {outcome['stopped_by']} after {outcome['seconds']:.1f} s", flush=True)
    if outcome.get("stalled"):
        print(stall_message(flow_name, outcome["stalled"]), flush=True)
    result(outcome)


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
