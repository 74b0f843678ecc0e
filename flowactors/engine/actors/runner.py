"""Running a flow on Ray: start Ray if needed, start the controller actor, wait, stop cleanly."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import ray

from flowactors.sdk.flow import Flow
from flowactors.engine.actors.controller import FlowControllerActor
from flowactors.sdk.settings import Settings
from flowactors.ops.status_table import render

NAMESPACE = "flowactors"
IDLE_CHECKS = 3
#: seconds between two looks at the running flow's status (idle takes ``IDLE_CHECKS`` looks)
POLL_INTERVAL = 0.1
#: seconds between two redraws of the live status table
REDRAW_INTERVAL = 0.5


def ensure_ray(address: str | None = None, **init_options: Any) -> bool:
    """Connect to Ray (an embedded local one unless ``address``); True if this call started it."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": True,
                               "include_dashboard": False, **init_options}
    if address:
        options["address"] = address
        options.pop("include_dashboard", None)
    ray.init(**options)
    return True


def flow_settings(flow: Flow, overrides: dict[str, Any] | None = None) -> Settings:
    return Settings.from_dict({**flow.settings, **(overrides or {})})


def run_flow(flow: Flow, repository: str | Path, *, until_idle: bool = True, duration: float | None = None,
             show_status: bool = False, settings: dict[str, Any] | None = None, address: str | None = None,
             timeout: float | None = None, on_started=None, until: Callable[[dict], bool] | None = None) -> dict:
    """Run ``flow`` until it is idle or ``duration`` seconds passed; return its final status.

    Idle means every queue is empty (nothing queued or in flight) and no processor found work, in
    ``IDLE_CHECKS`` consecutive looks. ``until(status)`` returning true also stops the run (a
    condition on the live status, e.g. a queue's count, rather than a guess at how long it takes).
    ``timeout`` bounds a run that never gets there (``final["timed_out"]``).
    """
    flow.validate()
    resolved = flow_settings(flow, settings)
    started_ray = ensure_ray(address)
    controller = FlowControllerActor.options(name=f"{flow.name}.controller").remote(flow, str(repository), resolved)
    began = time.monotonic()
    live = show_status and sys.stdout.isatty()
    final: dict = {}
    try:
        starting = controller.start.remote()
        if show_status:
            show_start(flow.name, controller, starting)
        final["recovery"] = ray.get(starting)
        if on_started is not None:
            on_started(controller)
        idle_watch = IdleWatch(controller)
        drawn = 0.0
        while True:
            status = ray.get(controller.status.remote())
            elapsed = time.monotonic() - began
            if live and elapsed - drawn >= REDRAW_INTERVAL:
                drawn = elapsed
                sys.stdout.write("\x1b[H\x1b[2J" + render(status, elapsed) + "\n")
                sys.stdout.flush()
            if duration is not None and elapsed >= duration:
                break
            if until is not None and until(status):
                break
            if until_idle and duration is None and until is None and idle_watch.is_idle(status):
                break
            if timeout is not None and elapsed >= timeout:
                final["timed_out"] = True
                break
            time.sleep(POLL_INTERVAL)
    finally:
        try:
            final.update(ray.get(controller.stop.remote()))
        finally:
            ray.kill(controller)
            if started_ray:
                ray.shutdown()
    final["seconds"] = time.monotonic() - began
    if show_status:
        print(render(final, final["seconds"]))
    return final


def show_start(flow_name: str, controller, starting, interval: float = 0.2) -> None:
    """Say each step the controller takes to start the flow, how many of how many, until
    ``starting`` is done (on stderr: in place on a terminal, a line a step otherwise)."""
    tty = sys.stderr.isatty()
    shown = 0
    while True:
        done, _ = ray.wait([starting], timeout=interval)
        steps = ray.get(controller.starting.remote(shown))
        if done:
            steps.append({"step": "started", "done": 0, "total": 0})
        for progress in steps:
            counts = f" {progress['done']:,}/{progress['total']:,}" if progress["total"] else ""
            line = f"starting flow '{flow_name}': {progress['step']}{counts}"
            sys.stderr.write(("\r\x1b[K" + line) if tty else line + "\n")
        shown += len(steps)
        sys.stderr.flush()
        if done:
            if tty:
                sys.stderr.write("\n")
            return


def work_done(status: dict) -> tuple[int, int]:
    """Counters that move whenever anything happens: idle means they stood still between looks."""
    return (sum(p["commits"] for p in status["processors"]),
            sum(q["total_in"] + q["total_out"] for q in status["queues"]))


class IdleWatch:
    """Tells when a running flow is idle, the same way for ``run_flow`` and a cluster job's driver.

    Idle means the controller finds every queue empty and ``work_done`` stood still, in
    ``IDLE_CHECKS`` consecutive looks.
    """

    def __init__(self, controller) -> None:
        self._controller = controller
        self._streak = 0
        self._last_work: tuple[int, int] | None = None

    def is_idle(self, status: dict) -> bool:
        """One more look, at the controller's latest ``status``: idle for ``IDLE_CHECKS`` looks now?"""
        work = work_done(status)
        idle = ray.get(self._controller.is_idle.remote(status)) and work == self._last_work
        self._streak, self._last_work = (self._streak + 1 if idle else 0), work
        return self._streak >= IDLE_CHECKS


def processor_totals(status: dict) -> dict[str, dict]:
    """The final status's processors by name (a convenience for summaries and tests)."""
    return {p["name"]: p for p in status["processors"]}


def queue_totals(status: dict) -> dict[str, dict]:
    """A status's queues (connections) by id, as ``processor_totals`` for processors."""
    return {q["id"]: q for q in status["queues"]}
