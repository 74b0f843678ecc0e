"""Running a flow on an engine: start it (and Ray, if the engine needs it), wait, stop cleanly.

The same controller runs the flow on every engine (``flowactors.engine.controller``); only where it
lives differs: an actor on Ray, so that the flow outlives nothing but its driver; an object here for
the in-process engine. The driver talks to it through a link either way.
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import ray

from flowactors.driver.errors import RunOptionError
from flowactors.engine.actors.ray_hosting import FlowControllerActor, RayHosting
from flowactors.engine.cluster.coordinator import ClusterController
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, FlowController
from flowactors.engine.in_process import InProcessHosting
from flowactors.engine.stateless_engine import run_stateless
from flowactors.engine import ENGINES, STALL_SECONDS
from flowactors.engine.transport import ActorLink, Link, ThreadedLink, call_now, component_lost, finished, resolve
from flowactors.ops.error_log import ErrorLog
from flowactors.ops.ray_dashboard import LOCAL_DASHBOARD, open_dashboard
from flowactors.ops.status_view import LOG_LEVEL_ENV, StatusView, log_in_worker, route_logging
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import flow_settings

NAMESPACE = "flowactors"
IDLE_CHECKS = 3
#: seconds between two looks at the running flow's status (idle takes ``IDLE_CHECKS`` looks)
POLL_INTERVAL = 0.1
#: seconds between two looks while the flow works (it did work since the look before) and no
#: ``until`` waits for a moment of it: a look is three or four Ray calls (the controller asks
#: every executor), 1.5-2 ms of CPU each while the flow keeps the machine busy (docs/performance.md)
BUSY_POLL_INTERVAL = 0.5
#: seconds between two redraws of the live status view
REDRAW_INTERVAL = 0.5
#: seconds to wait for a controller that died to be back (Ray restarts its actor)
CONTROLLER_WAIT = 120.0
#: what a Ray that flowactors starts is started with. A call argument over Ray's inline limit
#: (100 KiB by default) goes through the object store, i.e. the raylet; a commit's offer of 1,000
#: FlowFiles and its provenance batch are over it, and that detour cost 6 µs of CPU a FlowFile
#: (docs/performance.md). A cluster's head takes the same with ``ray start --system-config``.
RAY_SYSTEM_CONFIG = {"max_direct_call_object_size": 2 * 1024 * 1024}


def start_local_ray(**options: Any) -> None:
    """Start a new Ray of this process's own, never connecting to another one, as flowactors
    starts one everywhere (runs, tests, the bench): ``RAY_SYSTEM_CONFIG``, flowactors' namespace,
    no dashboard; ``options`` are ``ray.init``'s and win over those."""
    ray.init(**{"address": "local", "namespace": NAMESPACE, "include_dashboard": False,
                "_system_config": RAY_SYSTEM_CONFIG, **options})


def ensure_ray(address: str | None = None, dashboard: bool = False, **init_options: Any) -> bool:
    """Connect to Ray (an embedded local one unless ``address``); True if this call started it.

    A running Ray (``address``, ``RAY_ADDRESS`` or the cluster ``ray start`` left on this machine)
    keeps the configuration it was started with, its dashboard or none; otherwise one is started
    (``start_local_ray``), with its dashboard on this machine only if ``dashboard``.
    """
    if ray.is_initialized():
        return False
    if address or _running_ray_address():
        ray.init(address=address, **{"namespace": NAMESPACE, "log_to_driver": True, **init_options})
    else:
        start_local_ray(**{"log_to_driver": True, **(LOCAL_DASHBOARD if dashboard else {}), **init_options})
    return True


def _running_ray_address() -> str | None:
    """The Ray ``ray.init()`` would connect to rather than start, as Ray itself finds it."""
    from ray._private.services import canonicalize_bootstrap_address

    return canonicalize_bootstrap_address(None)


def run_flow(flow: Flow, repository: str | Path = "repository", *, until_idle: bool = True, duration: float | None = None,
             show_status: bool = False, settings: dict[str, Any] | None = None, address: str | None = None,
             timeout: float | None = None, on_started=None, until: Callable[[dict], bool] | None = None,
             engine: str = "ray", stall_seconds: float = STALL_SECONDS,
             on_status: Callable[[dict], None] | None = None, failure_ports: Sequence[str] = (),
             trigger_timeout: float | None = None, nodes: Any = None, dashboard: bool = False,
             log_level: str | None = None) -> dict:
    """Run ``flow`` on ``engine`` until it is idle or ``duration`` seconds passed; return its final status.

    Idle means every queue is empty (nothing queued or in flight) and no processor found work, in
    ``IDLE_CHECKS`` consecutive looks. ``until(status)`` returning true also stops the run (a
    condition on the live status, e.g. a queue's count, rather than a guess at how long it takes).
    ``timeout`` bounds a run that never gets there (``final["timed_out"]``). A run until idle also
    ends when the flow is stalled for ``stall_seconds`` (``final["stalled"]``: ``IdleWatch``). ``engine``: "ray" (an
    actor per component or executor, on a running Ray or an embedded one) or "in-process" (this
    process, no Ray); ``on_started`` gets the controller's link; ``on_status`` every status looked at.
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
    ``log_level`` (a logging level's name) shows the processors' Python logging at that level,
    those in Ray's actors too when this call starts Ray or connects to it. Every processor error
    the run sees is kept in full in the repository's error log (``flowactors.ops.error_log``).
    """
    if engine not in ENGINES:
        raise RunOptionError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    if dashboard and engine != "ray":
        raise RunOptionError(f"the Ray dashboard shows flows on the Ray engine only, not engine={engine!r}")
    if nodes is not None and engine != "ray":
        raise RunOptionError(f"a flow runs on several nodes on the Ray engine only, not engine={engine!r}")
    flow.validate()
    if engine == "stateless":  # no live view: its log lines go to stderr as they come
        release_logging = route_logging(log_level, None) if log_level is not None else (lambda: None)
        try:
            return run_stateless(flow, settings=settings, duration=duration, timeout=timeout,
                                 failure_ports=failure_ports, trigger_timeout=trigger_timeout)
        finally:
            release_logging()
    resolved = flow_settings(flow, settings)
    started_ray = False
    ray_options = {}
    if log_level is not None:  # the actors log at that level too, in lines Ray forwards to this driver
        ray_options["runtime_env"] = {"worker_process_setup_hook": f"{log_in_worker.__module__}.log_in_worker",
                                      "env_vars": {LOG_LEVEL_ENV: log_level}}
    if nodes is not None:
        started_ray = ensure_ray(address, dashboard, **ray_options)
        controller: Link = ThreadedLink(ClusterController(flow, str(Path(repository).resolve()), resolved, nodes),
                                        CONTROLLER_CONCURRENCY, name=f"{flow.name}.cluster")
    elif engine == "ray":
        started_ray = ensure_ray(address, dashboard, **ray_options)
        controller = ActorLink(FlowControllerActor.options(name=f"{flow.name}.controller").remote(
            flow, str(repository), resolved, RayHosting()))
    else:
        controller = ThreadedLink(FlowController(flow, str(repository), resolved, InProcessHosting()),
                                  CONTROLLER_CONCURRENCY, name=f"{flow.name}.controller")
    began = time.monotonic()
    view = StatusView(live=show_status, log_level=log_level,
                      errors_command=f"flowactors errors --repository {shlex.quote(str(repository))}")
    errors = ErrorLog(repository)
    final: dict = {}
    try:
        if dashboard:
            final["dashboard"] = open_dashboard(started_ray)
        starting = controller.call(FlowController.start)
        view.start()
        if show_status:
            show_start(flow.name, controller, starting, view)
        final["recovery"] = resolve([starting])[0]
        if on_started is not None:
            on_started(controller)
        idle_watch = IdleWatch(controller, stall_seconds)
        drawn = 0.0
        restarts: dict = {}  # the components' restarts so far (a restarted controller starts at 0)

        def over(status: dict) -> bool:
            """One look at a started controller's status: whether the run is over."""
            nonlocal drawn, restarts
            restarts = status.get("restarts", {})
            if on_status is not None:
                on_status(status)
            errors.record(status)
            elapsed = time.monotonic() - began
            if elapsed - drawn >= REDRAW_INTERVAL:
                drawn = elapsed
                view.show(status, elapsed)
            if duration is not None and elapsed >= duration:
                return True
            if until is not None and until(status):
                return True
            if until_idle and duration is None and until is None:
                done, stalled = idle_watch.done(status)   # asks the controller too
                if stalled:
                    final["stalled"] = stalled
                if done:
                    return True
            if timeout is not None and elapsed >= timeout:
                final["timed_out"] = True
                return True
            return False

        end = min(t for t in (duration, timeout, math.inf) if t is not None)
        last_work = None
        while True:
            # every call to the controller in one look: its process can die at any of them
            try:
                status = call_now(controller, FlowController.status)
                ended = status["started"] and over(status)
            except Exception as err:
                if not (isinstance(controller, ActorLink) and component_lost(err)):
                    raise
                status, ended = None, False  # the controller died: Ray restarts it
            if status is None or not status["started"]:  # a restarted controller is a new one
                final["recovery"] = restart_controller(controller, restarts)
                continue
            if ended:
                break
            previous, last_work = last_work, work_done(status)
            working = until is None and previous not in (None, last_work) and not status.get("repairing")
            time.sleep(next_look_in(working, end - (time.monotonic() - began)))
    finally:
        view.stop()
        try:
            final.update(call_now(controller, FlowController.stop))
        finally:
            if isinstance(controller, ActorLink):
                ray.kill(controller.handle)
            else:
                controller.close()
            if started_ray:
                ray.shutdown()
            view.release_logging()
    final["seconds"] = time.monotonic() - began
    errors.record(final)
    if show_status:
        view.close(final, final["seconds"])
    return final


def next_look_in(working: bool, left: float) -> float:
    """Seconds until ``run_flow``'s next look: ``BUSY_POLL_INTERVAL`` while the flow works, never
    past the run's end (``left`` seconds away); ``POLL_INTERVAL`` otherwise."""
    return max(POLL_INTERVAL, min(BUSY_POLL_INTERVAL, left)) if working else POLL_INTERVAL


def restart_controller(controller: ActorLink, restarts: dict) -> dict:
    """The controller's process died; Ray restarted its actor (``max_restarts``), which took the
    flow's components with it (they are its children). Start the flow again: the same recovery
    as any start, from the log; the new controller goes on counting ``restarts`` (the last
    status's). Returns the recovery report."""
    deadline = time.monotonic() + CONTROLLER_WAIT
    while True:
        try:
            call_now(controller, FlowController.starting, 0)
            break
        except Exception as err:
            if not component_lost(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    recovery = call_now(controller, FlowController.start)
    for kind, count in {**restarts, "controller": restarts.get("controller", 0) + 1}.items():
        call_now(controller, FlowController.note_restart, kind, count)
    return recovery


def show_start(flow_name: str, controller: Link, starting: Any, view: StatusView, interval: float = 0.2) -> None:
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


def work_done(status: dict) -> tuple[int, int]:
    """Counters that move whenever anything happens: idle means they stood still between looks."""
    return (sum(p["commits"] for p in status["processors"]),
            sum(q["total_in"] + q["total_out"] for q in status["queues"]))


def errors_of(status: dict) -> int:
    """Errors every processor recorded so far."""
    return sum(p["errors"] for p in status["processors"])


class IdleWatch:
    """Tells when a running flow is done, the same way for ``run_flow`` and a cluster job's driver.

    *Idle*: the controller finds every queue empty and ``work_done`` stood still, in
    ``IDLE_CHECKS`` consecutive looks; a processor whose last trigger failed did not find "no work",
    so a failing flow is never idle. *Stalled*: no work was done for ``stall_seconds`` while
    processors kept failing (a source failing on every trigger, nothing queued, is stalled too), or
    FlowFiles are queued and every one is penalized (a FlowFile set aside as failing comes back
    after its penalty and fails again: a run until idle would never end). A stalled flow keeps
    its FlowFiles in the log for the next run.
    """

    def __init__(self, controller: Link, stall_seconds: float = STALL_SECONDS) -> None:
        self._controller = controller
        self._streak = 0
        self._last_work: tuple[int, int] | None = None
        self._stall_seconds = stall_seconds
        self._since = time.monotonic()  # when work was last done
        self._errors_then = 0

    def done(self, status: dict) -> tuple[bool, dict | None]:
        """One more look, at the controller's latest ``status``: whether a run until idle is over,
        and what holds the flow up if it ended stalled."""
        if self.is_idle(status):
            return True, None
        stalled = self.stalled(status)
        return stalled is not None, stalled

    def is_idle(self, status: dict) -> bool:
        """Idle for ``IDLE_CHECKS`` looks now, counting this one?"""
        work = work_done(status)
        if work != self._last_work or status.get("repairing"):  # a repair is progress
            self._since, self._errors_then = time.monotonic(), errors_of(status)
        idle = work == self._last_work and call_now(self._controller, FlowController.is_idle, status)
        self._streak, self._last_work = (self._streak + 1 if idle else 0), work
        return self._streak >= IDLE_CHECKS

    def stalled(self, status: dict) -> dict | None:
        """After ``is_idle`` on the same status: what holds the flow up, if it is stalled."""
        if time.monotonic() - self._since < self._stall_seconds:
            return None
        queued = {q["id"]: q for q in status["queues"] if q["count"]}
        errors = errors_of(status)
        all_penalized = queued and all(q["count"] == q.get("penalized", 0) for q in queued.values())
        if not (errors > self._errors_then or (all_penalized and errors)):
            return None
        return {"seconds": round(time.monotonic() - self._since, 1),
                "queued": {q: s["count"] for q, s in queued.items()},
                "penalized": sum(s.get("penalized", 0) for s in queued.values()),
                "errors": [f"{p['name']}: {e['error']}" for p in status["processors"] for e in p["recent_errors"]][-5:]}


def stall_message(flow_name: str, stalled: dict) -> str:
    """What a user reads when a run ends stalled."""
    queued = ", ".join(f"{count} in '{queue}'" for queue, count in stalled["queued"].items())
    kept = (f"FlowFiles stay queued in the repository for the next run ({queued}; {stalled['penalized']} penalized)"
            if queued else "Nothing is queued")
    lines = [f"flow '{flow_name}' stopped making progress: nothing moved for {stalled['seconds']:g} s while "
             f"processors kept failing. {kept}. Last errors:"]
    return "\n".join(lines + [f"  {e}" for e in stalled["errors"]])


def processor_totals(status: dict) -> dict[str, dict]:
    """The final status's processors by name (a convenience for summaries and tests)."""
    return {p["name"]: p for p in status["processors"]}


def queue_totals(status: dict) -> dict[str, dict]:
    """A status's queues (connections) by id, as ``processor_totals`` for processors."""
    return {q["id"]: q for q in status["queues"]}
