"""Watching a started flow until its run is over: the one loop ``run_flow`` and a cluster job share.

``RunWatch`` looks at the flow's controller, through its link, until the run is over and says why
(``RunEnd``): its duration passed, its ``until`` held, the flow is idle or stalled (``IdleWatch``),
the run timed out, or someone asked for a stop. A controller whose process died, or that answers
as a new one (Ray restarted its actor), is started again when the caller says Ray restarts it: the
same recovery as any start. The caller supplies what differs: the link, what it does with each
status (the live view and the error log of a local run; a cluster job's progress lines), who may
ask for a stop (a submitted flow's controller answers ``stopping``), and how often it looks.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from flowactors.engine import STALL_SECONDS
from flowactors.engine.controller import FlowController
from flowactors.engine.transport import Link, call_now, component_lost

IDLE_CHECKS = 3
#: seconds between two looks at the running flow's status (idle takes ``IDLE_CHECKS`` looks)
POLL_INTERVAL = 0.1
#: seconds between two looks while the flow works (it did work since the look before) and no
#: ``until`` waits for a moment of it: a look is three or four Ray calls (the controller asks
#: every executor), 1.5-2 ms of CPU each while the flow keeps the machine busy (docs/performance.md)
BUSY_POLL_INTERVAL = 0.5
#: seconds to wait for a controller that died to be back (Ray restarts its actor)
CONTROLLER_WAIT = 120.0


class Over(enum.Enum):
    """Why a run is over."""

    DURATION = "its duration passed"
    UNTIL = "its until condition held"
    IDLE = "the flow is idle"
    STALLED = "the flow is stalled"
    TIMED_OUT = "it timed out"
    STOP_REQUESTED = "a stop was asked for"


@dataclass(frozen=True)
class RunEnd:
    """Why a watched run is over; what holds a ``STALLED`` flow up (``IdleWatch.stalled``); who
    asked for a ``STOP_REQUESTED``."""

    reason: Over
    stalled: dict | None = None
    requested_by: str | None = None


@dataclass(frozen=True)
class RunLimits:
    """When a run is over, besides a stop someone asks for. ``duration`` and ``timeout`` are
    seconds since the run began; ``until(status)`` true ends it; a run until idle (``until_idle``
    with neither ``duration`` nor ``until``) ends idle, or stalled after ``stall_seconds``."""

    duration: float | None = None
    timeout: float | None = None
    until: Callable[[dict], bool] | None = None
    until_idle: bool = True
    stall_seconds: float = STALL_SECONDS

    def waits_for_idle(self) -> bool:
        """Whether the run ends once the flow is idle (or stalled)."""
        return self.until_idle and self.duration is None and self.until is None

    def end(self) -> float:
        """Seconds after the run began when it ends anyway (infinite if never)."""
        return min(t for t in (self.duration, self.timeout, math.inf) if t is not None)


class ControllerRestarted(Exception):
    """The controller answered as not started: a new one, which Ray restarted."""


class RunWatch:
    """Looks at a started flow's controller until the run is over (``until_over``).

    ``began`` is when the run began (``time.monotonic()``: its duration and timeout count from
    there); ``on_status(status, elapsed)`` gets every status looked at, before the run's limits
    are checked; ``stop_requested()``, if given, is asked first at each look and after a look that
    failed: a name ends the run. With ``restarts_controller`` a controller Ray restarted is started
    again (``restart_controller``; its recovery report in ``recovery``); otherwise a lost
    controller's error is raised. The looks come every ``quick_look`` seconds, every ``busy_look``
    while the flow works (``next_look_in``).
    """

    def __init__(self, controller: Link, began: float, limits: RunLimits, *,
                 on_status: Callable[[dict, float], None] | None = None,
                 stop_requested: Callable[[], str | None] | None = None, restarts_controller: bool = False,
                 quick_look: float = POLL_INTERVAL, busy_look: float = BUSY_POLL_INTERVAL) -> None:
        self.controller = controller
        self.began = began
        self.limits = limits
        self.recovery: dict | None = None
        self._on_status = on_status
        self._stop_requested = stop_requested
        self._restarts_controller = restarts_controller
        self._quick_look, self._busy_look = quick_look, busy_look
        self._idle_watch = IdleWatch(controller, limits.stall_seconds)
        self._restarts: dict = {}  # the components' restarts so far (a restarted controller starts at 0)

    def until_over(self) -> RunEnd:
        """Look at the controller until the run is over; why it is."""
        last_work = None
        while True:
            requested = self._requested()
            if requested is not None:
                return RunEnd(Over.STOP_REQUESTED, requested_by=requested)
            try:  # every call to the controller in one look: its process can die at any of them
                status = call_now(self.controller, FlowController.status)
                if not status["started"]:
                    raise ControllerRestarted(f"the controller of flow '{status.get('flow')}' is not started")
                ended = self._over(status)
            except Exception as err:
                stopped = self._after_failed_look(err)
                if stopped is not None:
                    return stopped
                continue
            if ended is not None:
                return ended
            previous, last_work = last_work, work_done(status)
            working = self.limits.until is None and previous not in (None, last_work) and not status.get("repairing")
            left = self.limits.end() - (time.monotonic() - self.began)
            time.sleep(next_look_in(working, left, self._quick_look, self._busy_look))

    def _requested(self) -> str | None:
        return self._stop_requested() if self._stop_requested is not None else None

    def _over(self, status: dict) -> RunEnd | None:
        """One look at a started controller's status: why the run is over, if it is."""
        self._restarts = status.get("restarts", {})
        elapsed = time.monotonic() - self.began
        if self._on_status is not None:
            self._on_status(status, elapsed)
        limits = self.limits
        if limits.duration is not None and elapsed >= limits.duration:
            return RunEnd(Over.DURATION)
        if limits.until is not None and limits.until(status):
            return RunEnd(Over.UNTIL)
        if limits.waits_for_idle():
            done, stalled = self._idle_watch.done(status)   # asks the controller too
            if done:
                return RunEnd(Over.STALLED, stalled=stalled) if stalled else RunEnd(Over.IDLE)
        if limits.timeout is not None and elapsed >= limits.timeout:
            return RunEnd(Over.TIMED_OUT)
        return None

    def _after_failed_look(self, err: Exception) -> RunEnd | None:
        """A look failed with ``err``: the run ends if a stop was asked for meanwhile; a
        controller Ray restarted is started again (None: look again); any other error is raised."""
        requested = self._requested()
        if requested is not None:
            return RunEnd(Over.STOP_REQUESTED, requested_by=requested)
        if not (self._restarts_controller and (isinstance(err, ControllerRestarted) or component_lost(err))):
            raise err
        self.recovery = restart_controller(self.controller, self._restarts)
        return None


def next_look_in(working: bool, left: float, quick: float = POLL_INTERVAL, busy: float = BUSY_POLL_INTERVAL) -> float:
    """Seconds until the next look: ``busy`` while the flow works, never past the run's end
    (``left`` seconds away); ``quick`` otherwise."""
    return max(quick, min(busy, left)) if working else quick


def restart_controller(controller: Link, restarts: dict) -> dict:
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


def work_done(status: dict) -> tuple[int, int]:
    """Counters that move whenever anything happens: idle means they stood still between looks."""
    return (sum(p["commits"] for p in status["processors"]),
            sum(q["total_in"] + q["total_out"] for q in status["queues"]))


def errors_of(status: dict) -> int:
    """Errors every processor recorded so far."""
    return sum(p["errors"] for p in status["processors"])


class IdleWatch:
    """Tells when a running flow is done, for ``RunWatch``.

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
