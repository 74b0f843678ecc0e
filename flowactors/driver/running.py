"""Running a flow on an engine: start it (and Ray, if the engine needs it), watch it, stop cleanly.

The same controller runs the flow on every engine (``flowactors.engine.controller``); only where it
lives differs: an actor on Ray, so that the flow outlives nothing but its driver; an object here for
the in-process engine. The driver talks to it through a link either way, and watches it with
``flowactors.driver.watch`` as a cluster job does.

A run starts a Ray of its own (``start_local_ray``) unless it is given one to join: ``address``
(``flowactors run --address``) or ``RAY_ADDRESS``. It never joins a Ray it merely finds on the
machine (the one another user's ``ray start`` left running): a run's Ray is the one it asked for.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import ray

from flowactors.driver.errors import RunOptionError
from flowactors.driver.watch import Over, RunEnd, RunLimits, RunWatch
from flowactors.engine.actors.ray_hosting import FlowControllerActor, RayHosting
from flowactors.engine.cluster.coordinator import ClusterController
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, FlowController, cause_of
from flowactors.engine.errors import FlowStartError
from flowactors.engine.in_process import InProcessHosting
from flowactors.engine.stateless_engine import run_stateless
from flowactors.engine import ENGINES, STALL_SECONDS
from flowactors.engine.transport import ActorLink, Pending, ThreadedLink, call_now, causes, component_lost, finished, resolve
from flowactors.ops.error_log import ErrorLog
from flowactors.ops.ray_dashboard import LOCAL_DASHBOARD, open_dashboard
from flowactors.ops.status_view import LOG_LEVEL_ENV, StatusView, log_in_worker, route_logging
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import Settings, flow_settings

NAMESPACE = "flowactors"
#: seconds between two redraws of the live status view
REDRAW_INTERVAL = 0.5
#: what a Ray that flowactors starts is started with. A call argument over Ray's inline limit
#: (100 KiB by default) goes through the object store, i.e. the raylet; a commit's offer of 1,000
#: FlowFiles and its provenance batch are over it, and that detour cost 6 µs of CPU a FlowFile
#: (docs/performance.md). A cluster's head takes the same with ``ray start --system-config``.
RAY_SYSTEM_CONFIG = {"max_direct_call_object_size": 2 * 1024 * 1024}
#: the environment variable that names a Ray to join (Ray's own)
RAY_ADDRESS_ENV = "RAY_ADDRESS"

#: the link to a run's controller: an actor's on the Ray engine, a served object's otherwise
ControllerLink = ActorLink | ThreadedLink
log = logging.getLogger(__name__)


def start_local_ray(**options: Any) -> None:
    """Start a new Ray of this process's own, never connecting to another one, as flowactors
    starts one everywhere (runs, tests, the bench): ``RAY_SYSTEM_CONFIG``, flowactors' namespace,
    no dashboard; ``options`` are ``ray.init``'s and win over those."""
    ray.init(**{"address": "local", "namespace": NAMESPACE, "include_dashboard": False,
                "_system_config": RAY_SYSTEM_CONFIG, **options})


def ensure_ray(address: str | None = None, dashboard: bool = False, **init_options: Any) -> bool:
    """Connect to Ray for a run; True if this call started it.

    The Ray named by ``address``, else by ``RAY_ADDRESS``, is joined as it is: it keeps the
    configuration it was started with, its dashboard or none. Without either (or with
    ``"local"``) a Ray of this process's own is started (``start_local_ray``), with its dashboard
    on this machine only if ``dashboard``, even when another Ray runs on the machine.
    """
    if ray.is_initialized():
        return False
    address = address or os.environ.get(RAY_ADDRESS_ENV) or None
    if address is not None and address != "local":
        ray.init(address=address, **{"namespace": NAMESPACE, "log_to_driver": True, **init_options})
    else:
        start_local_ray(**{"log_to_driver": True, **(LOCAL_DASHBOARD if dashboard else {}), **init_options})
    return True


def run_flow(flow: Flow, repository: str | Path = "repository", *, until_idle: bool = True,
             duration: float | None = None, show_status: bool = False, settings: dict[str, Any] | None = None,
             address: str | None = None, timeout: float | None = None,
             on_started: Callable[[ControllerLink], None] | None = None, until: Callable[[dict], bool] | None = None,
             engine: str = "ray", stall_seconds: float = STALL_SECONDS, on_status: Callable[[dict], None] | None = None,
             failure_ports: Sequence[str] = (), trigger_timeout: float | None = None, nodes: Any = None,
             dashboard: bool = False, log_level: str | None = None,
             on_warning: Callable[[str], None] | None = None) -> dict:
    """Run ``flow`` on ``engine`` until it is idle or ``duration`` seconds passed; return its final status.

    Idle means every queue is empty (nothing queued or in flight) and no processor found work, in
    ``IDLE_CHECKS`` consecutive looks. ``until(status)`` returning true also stops the run (a
    condition on the live status, e.g. a queue's count, rather than a guess at how long it takes).
    ``timeout`` bounds a run that never gets there (``final["timed_out"]``). A run until idle also
    ends when the flow is stalled for ``stall_seconds`` (``final["stalled"]``: ``IdleWatch``;
    the looks: ``flowactors.driver.watch.RunWatch``). ``engine``: "ray" (an actor per component
    or executor, on a Ray this run starts, or the one ``address`` or ``RAY_ADDRESS`` names:
    ``ensure_ray``) or "in-process" (this process, no Ray); ``on_started`` gets the controller's
    link; ``on_status`` every status looked at.
    ``engine="stateless"`` triggers the flow as one transaction after another, in memory, until a
    trigger finds no work or one fails (``flowactors.engine.stateless_engine.run_stateless``: the
    repository is not used; ``failure_ports`` and ``trigger_timeout`` are its own).
    ``nodes`` (``"all"``, a count or a list of node names; the Ray engine) runs the flow on
    several nodes of the Ray cluster, each over ``<repository>/nodes/<name>`` on its own disk,
    with load-balanced connections between them (``flowactors.engine.cluster``, docs/cluster.md).
    ``dashboard`` (the Ray engine): a Ray started for the run starts its dashboard; the run prints
    the dashboard's address and installs flowactors' Grafana dashboard beside Ray's
    (``flowactors.ops.ray_dashboard.open_dashboard``: ``final["dashboard"]``).
    Options that do not go together are ``RunOptionError``, before anything starts.
    ``show_status`` shows the live view (``flowactors.ops.status_view``) and the final table;
    ``on_warning`` gets each problem the start found and the run goes on with (damaged provenance
    named, with what repairs it), once, as soon as the flow runs (default: this module's logger).
    ``log_level`` (a logging level's name) shows the processors' Python logging at that level,
    those in Ray's actors too when this call starts Ray or connects to it. Every processor error
    the run sees is kept in full in the repository's error log (``flowactors.ops.error_log``).
    """
    _check_options(engine, dashboard, nodes)
    flow.validate()
    if engine == "stateless":  # no live view: its log lines go to stderr as they come
        release_logging = route_logging(log_level, None) if log_level is not None else (lambda: None)
        try:
            return run_stateless(flow, settings=settings, duration=duration, timeout=timeout,
                                 failure_ports=failure_ports, trigger_timeout=trigger_timeout)
        finally:
            release_logging()
    limits = RunLimits(duration=duration, timeout=timeout, until=until, until_idle=until_idle,
                       stall_seconds=stall_seconds)
    controller, started_ray = _start_controller(flow, repository, flow_settings(flow, settings), engine,
                                                nodes=nodes, address=address, dashboard=dashboard, log_level=log_level)
    began = time.monotonic()
    view = StatusView(live=show_status, log_level=log_level,
                      errors_command=f"flowactors errors --repository {shlex.quote(str(repository))}")
    errors = ErrorLog(repository)
    final: dict = {}
    try:
        if dashboard:
            final["dashboard"] = open_dashboard(started_ray)
        final["recovery"] = _start_flow(flow.name, controller, view, show_status)
        for problem in final["recovery"].get("provenance_problems", []):
            (on_warning or log.warning)(f"provenance recovery: {problem}")
        if on_started is not None:
            on_started(controller)
        watch = RunWatch(controller, began, limits, on_status=_on_each_status(view, errors, on_status),
                         restarts_controller=isinstance(controller, ActorLink))
        _note_end(watch.until_over(), final)
        if watch.recovery is not None:  # the controller was started again: its recovery's report
            final["recovery"] = watch.recovery
    finally:
        _stop(controller, started_ray, view, final)
    final["seconds"] = time.monotonic() - began
    errors.record(final)
    if show_status:
        view.close(final, final["seconds"])
    return final


def _check_options(engine: str, dashboard: bool, nodes: Any) -> None:
    """``RunOptionError`` for ``run_flow`` options that do not go together."""
    if engine not in ENGINES:
        raise RunOptionError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    if dashboard and engine != "ray":
        raise RunOptionError(f"the Ray dashboard shows flows on the Ray engine only, not engine={engine!r}")
    if nodes is not None and engine != "ray":
        raise RunOptionError(f"a flow runs on several nodes on the Ray engine only, not engine={engine!r}")


def _start_controller(flow: Flow, repository: str | Path, settings: Settings, engine: str, *, nodes: Any,
                      address: str | None, dashboard: bool, log_level: str | None) -> tuple[ControllerLink, bool]:
    """The flow's controller on ``engine`` (one a node with ``nodes``), not started yet, and
    whether Ray was started for it (``ensure_ray``)."""
    if engine != "ray":
        return ThreadedLink(FlowController(flow, str(repository), settings, InProcessHosting()),
                            CONTROLLER_CONCURRENCY, name=f"{flow.name}.controller"), False
    ray_options: dict[str, Any] = {}
    if log_level is not None:  # the actors log at that level too, in lines Ray forwards to this driver
        ray_options["runtime_env"] = {"worker_process_setup_hook": f"{log_in_worker.__module__}.log_in_worker",
                                      "env_vars": {LOG_LEVEL_ENV: log_level}}
    started_ray = ensure_ray(address, dashboard, **ray_options)
    if nodes is not None:
        return ThreadedLink(ClusterController(flow, str(Path(repository).resolve()), settings, nodes),
                            CONTROLLER_CONCURRENCY, name=f"{flow.name}.cluster"), started_ray
    name = f"{flow.name}.controller"
    return ActorLink(FlowControllerActor.options(name=name).remote(flow, str(repository), settings, RayHosting()),
                     name), started_ray


def _start_flow(flow_name: str, controller: ControllerLink, view: StatusView, show_status: bool) -> dict:
    """Start the flow, its steps shown as they come with ``show_status``; the recovery's report."""
    try:
        starting = controller.call(FlowController.start)
        view.start()
        if show_status:
            show_start(flow_name, controller, starting, view)
        return resolve([starting])[0]
    except FlowStartError as err:   # the controller's own error, not Ray's wrapping of it (traceback included)
        raise next((e for e in causes(err) if type(e) is FlowStartError), err) from None
    except Exception as err:
        if not component_lost(err):
            raise
        raise FlowStartError(f"flow '{flow_name}' could not start: its controller's process ended as it started: "
                             f"{cause_of(err)}{_start_hint(cause_of(err))}") from None


def _start_hint(cause: str) -> str:
    """What to do about a component that could not start on Ray, where the cause says enough."""
    if cause.startswith("ModuleNotFoundError"):
        return (" (Ray's worker processes import each processor's class by its module: install that module, "
                "put its folder on PYTHONPATH for the workers too, or ship it with the flow: "
                "ray.cloudpickle.register_pickle_by_value(module))")
    return ""


def _on_each_status(view: StatusView, errors: ErrorLog,
                    on_status: Callable[[dict], None] | None) -> Callable[[dict, float], None]:
    """What a local run does with each status it looks at: the caller's ``on_status``, the
    error log, the live view (redrawn every ``REDRAW_INTERVAL``)."""
    drawn = 0.0

    def seen(status: dict, elapsed: float) -> None:
        nonlocal drawn
        if on_status is not None:
            on_status(status)
        errors.record(status)
        if elapsed - drawn >= REDRAW_INTERVAL:
            drawn = elapsed
            view.show(status, elapsed)

    return seen


def _note_end(end: RunEnd, final: dict) -> None:
    """What a run's final status says of how it ended: ``stalled`` (what holds it up), ``timed_out``."""
    if end.reason is Over.STALLED:
        final["stalled"] = end.stalled
    elif end.reason is Over.TIMED_OUT:
        final["timed_out"] = True


def _stop(controller: ControllerLink, started_ray: bool, view: StatusView, final: dict) -> None:
    """Stop the flow (its final status into ``final``), end its controller, and Ray if the run
    started it; give logging back."""
    view.stop()
    try:
        final.update(call_now(controller, FlowController.stop))
    except Exception as err:
        if "recovery" in final or not component_lost(err):  # a controller that died starting has nothing to stop
            raise
    finally:
        if isinstance(controller, ActorLink):
            ray.kill(controller.handle)
        else:
            controller.close()
        if started_ray:
            ray.shutdown()
        view.release_logging()


def show_start(flow_name: str, controller: ControllerLink, starting: Pending, view: StatusView,
               interval: float = 0.2) -> None:
    """Say each step the controller takes to start the flow, how many of how many, until
    ``starting`` is done: in the live ``view`` on a terminal, else a line a step on stderr."""
    shown = 0
    while True:
        done = finished(starting, interval)
        steps = call_now(controller, FlowController.starting, shown)
        if done:
            steps.append({"step": "started", "done": 0, "total": 0})
        for progress in steps:
            counts = f" {progress['done']:,}/{progress['total']:,}" if progress["total"] else ""
            line = f"starting flow '{flow_name}': {progress['step']}{counts}"
            if view.live:
                view.note(line)
            else:
                print(line, file=sys.stderr, flush=True)
        shown += len(steps)
        if done:
            return


def processor_totals(status: dict) -> dict[str, dict]:
    """The final status's processors by name (a convenience for summaries and tests)."""
    return {p["name"]: p for p in status["processors"]}


def queue_totals(status: dict) -> dict[str, dict]:
    """A status's queues (connections) by id, as ``processor_totals`` for processors."""
    return {q["id"]: q for q in status["queues"]}
