"""One concurrent task of a processor and its trigger loop, the same on every engine.

The loop triggers only while no destination queue is under back pressure, waits on its input
instead of spinning (sources and ``trigger_when_empty`` processors trigger anyway), honours the run
schedule, ``context.yield_()`` and the administrative yield after an error, and keeps the last ten
errors for the status.

A poison FlowFile does not stop a queue. When ``on_trigger`` raises over a batch of several
FlowFiles, the session rolls back unpenalized and the next triggers take half as many, then half
again, so the good FlowFiles move on; once the failing batch is one FlowFile, that FlowFile goes to
the processor's ``failure`` relationship with the reason in ``flowactors.failure.reason`` if the
processor has one, or is penalized in its queue otherwise (NiFi's rollback with penalty), and
the error names it. After each success the batch doubles back to the processor's size.

Before each commit the processor's retried relationships take back what they retry
(``flowactors.engine.retry``). A CRON_DRIVEN processor (``ProcessorNode.scheduling_strategy``)
waits for each fire time of its cron expression (``flowactors.sdk.cron``) and triggers once then,
unless it needs input and has none, or a destination is full (NiFi skips that fire time too); the
task's ``clock`` (seconds since the epoch) and ``wait`` (seconds; True once stopped) are what
it reads the time with and waits with, so a test may give its own.

It runs on a thread of whatever hosts it (an executor actor, or the in-process engine); it
reaches queues and repositories only through its ``EngineBackend``.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from datetime import datetime
from typing import Callable

from flowactors.engine import STOP_TIMEOUT
from flowactors.engine.session_backend import Counters, EngineBackend
from flowactors.sdk.flow import Flow, ProcessorNode
from flowactors.engine.errors import ProcessKilledByFlowFile
from flowactors.engine.metrics import ProcessorMetrics
from flowactors.engine.process_deaths import DeathGuard
from flowactors.engine.retry import RetryPolicy
from flowactors.sdk import cron
from flowactors.sdk.processor import ProcessContext, Processor, takes_input
from flowactors.sdk.relationships import failure_attributes
from flowactors.sdk.session import ProcessSession, relationships_with_room
from flowactors.sdk.session_contract import DeliveryError, IdAllocator, StateConflict
from flowactors.sdk.settings import Settings
from flowactors.sdk.state import ProcessorState
from flowactors.sdk.units import parse_duration

POLL_WAIT = 0.2
FAILURE = "failure"
#: seconds between two metric updates of a task (a Ray metric update is not free with many tasks
#: in one process; the last counts are always sent at stop)
METRICS_INTERVAL = 0.5


def make_context(node: ProcessorNode, settings: Settings, instance: int = 0) -> ProcessContext:
    """The ``ProcessContext`` a task of ``node`` triggers with."""
    return ProcessContext(
        name=node.name, processor_type=node.type.__name__, descriptors=node.type.descriptor_map(),
        values=node.property_values, relationships=list(node.type.relationships_for(node.property_values)),
        instance=instance, concurrent_tasks=node.concurrent_tasks,
        batch_size=node.batch_size or settings.default_batch_size)


def task_key(processor: str, instance: int) -> str:
    """The name of task ``instance`` of ``processor`` (in its executor, its thread, its files)."""
    return f"{processor}#{instance}"


def flow_task_keys(flow: Flow) -> list[str]:
    """The keys of every processor task of ``flow`` (a disabled processor has none)."""
    return [task_key(name, i) for name in flow.enabled_processors() for i in range(flow.processors[name].concurrent_tasks)]


class ProcessorTask:
    """Runs one task of a processor until stopped; ``status`` may be called at any time."""

    #: whether this engine's tasks wait at all (penalties, yields): not the stateless engine's
    waits: bool = True

    def __init__(self, flow_name: str, node: ProcessorNode, instance: int, backend: EngineBackend,
                 settings: Settings):
        self.node = node
        self.instance = instance
        self.settings = settings
        self.processor: Processor = node.type()
        self.component_id = f"{flow_name}/{node.name}"
        self.context = make_context(node, settings, instance)
        self.context.state = ProcessorState(self.component_id, backend)
        self.backend = backend
        #: whether it waits for FlowFiles to be triggered (a source does not)
        self.takes_input = takes_input(node.type, bool(backend.inputs))
        self.context.has_incoming_connection = bool(backend.inputs)
        self.counters: Counters = backend.counters
        self.metrics = ProcessorMetrics(flow_name, node.name)
        self.ids = IdAllocator(backend)
        self.cron = cron.parse(node.run_schedule) if node.scheduling_strategy == "CRON_DRIVEN" else None
        self.run_schedule = 0.0 if self.cron is not None else parse_duration(node.run_schedule)
        self.yield_duration = parse_duration(node.yield_duration)
        self.penalty = parse_duration(node.penalty_duration)
        self.retry = RetryPolicy(node, self.penalty, self.yield_duration)
        self._retry_yield = 0.0   # what the last commit's retries asked the processor to yield
        self._stop = threading.Event()
        #: the time (seconds since the epoch) and the wait (True once stopped) of the CRON schedule
        self.clock: Callable[[], float] = time.time
        self.wait: Callable[[float], bool] = self._stop.wait
        self._fired: float | None = None   # the last fire time triggered (CRON_DRIVEN)
        self._thread: threading.Thread | None = None
        self.idle = False
        self.busy = False
        #: when the running trigger began (``time.monotonic``), None between triggers
        self.trigger_began: float | None = None
        self.back_pressure = False
        self.running = False
        self.errors: deque[dict] = deque(maxlen=10)
        self._published = 0.0
        self._limit: int | None = None  # a smaller batch while a failing one is narrowed down
        #: what the task's triggers may take after its process died in one (``guard_with``)
        self.guard: DeathGuard | None = None

    @property
    def key(self) -> str:
        """The task's name in its executor and its thread."""
        return task_key(self.node.name, self.instance)

    def guard_with(self, guard: DeathGuard) -> None:
        """Keep what this task's triggers hold in ``guard``'s record, and take as it says."""
        self.guard = self.backend.guard = guard

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"trigger-{self.key}", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the loop to end after its running session, without waiting (``stop`` waits)."""
        self._stop.set()

    def stop(self, timeout: float = STOP_TIMEOUT) -> dict:
        """Finish the running session, give back what was fetched, call ``on_stopped``."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status()

    def status(self) -> dict:
        c = self.counters
        return {
            "name": self.node.name, "instance": self.instance, "running": self.running,
            "idle": self.idle and not self.busy and not self.backend.delivering,
            "back_pressure": self.back_pressure, "tasks": c.tasks, "task_seconds": round(c.task_seconds, 4),
            "flowfiles_in": c.flowfiles_in, "flowfiles_out": c.flowfiles_out, "bytes_read": c.bytes_read,
            "bytes_written": c.bytes_written, "commits": c.commits, "errors": c.errors, "expired": c.expired,
            "state_conflicts": c.state_conflicts,
            "trigger_seconds": self.trigger_seconds(),
            "recent_errors": list(self.errors),
        }

    def trigger_seconds(self) -> float:
        """How long the running ``on_trigger`` has taken so far; 0 between triggers."""
        began = self.trigger_began
        return 0.0 if began is None else round(time.monotonic() - began, 1)

    # ------------------------------------------------------------------ the trigger loop
    def _run(self) -> None:
        self.running = True
        try:
            self.processor.on_scheduled(self.context)
        except Exception as err:
            self._record_error("on_scheduled", err)
            self.running = False
            return
        try:
            while not self._stop.is_set():
                self.cycle()
        finally:
            self._settle()
            try:
                self.backend.return_prefetched()
            except Exception as err:
                self._record_error("stop", err)
            try:
                self.processor.on_stopped(self.context)
            except Exception as err:
                self._record_error("on_stopped", err)
            self.metrics.publish(self.counters)
            self.running = False

    def cycle(self) -> None:
        """One turn of the loop: wait for the fire time (CRON_DRIVEN), for room and for input,
        trigger once, then pause as told."""
        if self.cron is not None and not self._await_fire_time():
            return
        try:
            node_type = self.node.type
            full = self.backend.full_destinations()
            if full and not (node_type.trigger_when_any_destination_available
                             and relationships_with_room(self.context.relationships, self.backend, full)):
                self.back_pressure = True
                if not self.backend.wait_for_space(POLL_WAIT):
                    return
            self.back_pressure = False
            if self.takes_input and not self.backend.prefetch(self.context.batch_size, POLL_WAIT):
                self.idle = True
                if not node_type.trigger_when_empty:
                    return
        except Exception as err:  # a queue out of reach: said in the status, tried again later
            self.idle = False  # not "no work": the work could not be looked at
            self._record_error("poll", err)
            self._pause(self.settings.administrative_yield)
            return
        self.trigger()
        retry_yield, self._retry_yield = self._retry_yield, 0.0
        requested = self.context.take_yield_request()
        if requested or retry_yield:
            self._pause(max(self.yield_duration if requested else 0.0, retry_yield))
        elif self.run_schedule > 0:
            self._pause(self.run_schedule)
        elif self.idle and not self.takes_input:
            self._pause(0.01)

    def _await_fire_time(self) -> bool:
        """Wait for the CRON schedule's next fire time after the last one triggered (or now):
        True when it came, False when stopped meanwhile or when the expression has no fire time
        left (said once in the errors; looked at again after the administrative yield)."""
        assert self.cron is not None
        now = self.clock()
        after = now if self._fired is None else max(now, self._fired)
        moment = self.cron.next_after(datetime.fromtimestamp(after))
        if moment is None:
            if not any(e["where"] == "schedule" for e in self.errors):
                self._record_error("schedule", ValueError(f"the cron expression '{self.cron.text}' has no fire "
                                                          f"time after {datetime.fromtimestamp(after):%Y-%m-%d %H:%M:%S}"
                                                          f"; the processor never triggers"))
            self.idle = True
            self.wait(self.settings.administrative_yield)
            return False
        fire = moment.timestamp()
        self._settle()   # nothing overlaps a wait: the delivery under way finishes first
        if fire > now and self.wait(fire - now):
            return False
        self._fired = fire
        return True

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` or until stopped, the delivery under way finished first (a task that
        waits has nothing to overlap it with: ``EngineBackend``)."""
        self._settle()
        self._stop.wait(seconds)

    def _settle(self) -> None:
        try:
            self.backend.finish_delivery()
        except DeliveryError as err:  # decided, and the backend says a repair is due
            self._record_error("commit", err)

    def trigger(self) -> None:
        """One ``on_trigger`` over a new session, then commit; an exception rolls it back (a commit
        the log already accepted is never rolled back: ``ProcessSession.commit``)."""
        commits_before = self.counters.commits
        failed = True
        guard = self.guard
        if guard is not None:
            guard.begin_trigger()
            poison = self.backend.head_set_aside()
            if poison is not None:
                self._set_aside_killer(poison)
                return
        session = ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self.ids,
                                 penalty_duration=self.penalty)
        started = self.trigger_began = time.monotonic()
        self.busy = True
        batch_size = self.context.batch_size
        if self._limit is not None:
            self.context.batch_size = self._limit
        try:
            with self.context.state.bound_to(session):
                self.processor.on_trigger(self.context, session)
            self._retry_yield = self.retry.apply(session, self.waits)   # before the log: nothing committed returns
            session.commit(keep_on_failure=True)
            failed = False
            if self._limit is not None:  # it worked: back towards the processor's batch size
                self._limit = None if self._limit * 2 >= batch_size else self._limit * 2
        except DeliveryError as err:  # in the log already: nothing to roll back or narrow down
            self._record_error("commit", err)
            self._pause(self.settings.administrative_yield)
        except StateConflict:  # another task changed the state first: not an error, just run again
            self.counters.state_conflicts += 1
            try:
                session.rollback()
            except Exception as rollback_error:
                self._record_error("rollback", rollback_error)
        except Exception as err:
            self._failed(session, err)
        finally:
            if guard is not None:
                guard.end_trigger()
            self.context.batch_size = batch_size
            self.counters.tasks += 1
            self.counters.task_seconds += time.monotonic() - started
            # idle: the processor found no work. A trigger that failed did not look (a repository
            # may be down for a moment): a flow is never called done on the strength of a failure
            self.idle = not failed and self.counters.commits == commits_before
            self.busy = False
            self.trigger_began = None
            if started - self._published >= METRICS_INTERVAL:  # deltas since the last update
                self._published = started
                self.metrics.publish(self.counters)

    def _failed(self, session: ProcessSession, err: Exception) -> None:
        """``on_trigger`` or the commit before the log raised: roll back, narrowing a failing batch
        down to the FlowFile that fails (see the module docstring)."""
        inputs = session.inputs
        try:
            if len(inputs) > 1:
                self._limit = len(inputs) // 2
                self._record_error("on_trigger", err, f"; {len(inputs)} FlowFiles rolled back, retrying "
                                                      f"{self._limit} at a time to find the one that fails")
                session.rollback()
            elif inputs:  # the processor works on the others at once, as NiFi would after the penalty
                self._limit = 1
                self._set_aside(session, inputs[0], err)
            else:
                self._record_error("on_trigger", err)
                session.rollback()
                self._pause(self.settings.administrative_yield)
        except Exception as rollback_error:
            self._record_error("rollback", rollback_error)
            self._pause(self.settings.administrative_yield)

    def _set_aside_killer(self, flowfile) -> None:
        """Route a FlowFile that ended the process (``DeathGuard.set_aside``) as ``_set_aside``
        does, without calling the processor; routed, it is no suspect any more."""
        assert self.guard is not None
        session = ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self.ids,
                                 penalty_duration=self.penalty)
        self.guard.release_set_aside()
        taken = session.get()
        if taken is None:
            return
        deaths = self.guard.deaths(flowfile.id)
        error = ProcessKilledByFlowFile(f"processing it ended the processor's process {deaths} times "
                                        f"(an exit, a crash or the kernel's OOM killer); set aside")
        if self._set_aside(session, taken, error):
            self.guard.cleared(flowfile.id)

    def _set_aside(self, session: ProcessSession, flowfile, err: Exception) -> bool:
        """The one FlowFile the processor fails on: to ``failure`` if it has one, else (or if even
        that commit is refused) penalized in its queue. True if routed."""
        routed = False
        if FAILURE in {r.name for r in self.context.relationships}:
            try:
                session.route_inputs(FAILURE, failure_attributes(self.node.name, err))
                routed = True
            except DeliveryError:  # in the log: routed; the flow is repaired from the log
                routed = True
            except Exception:  # the routing commit was refused: the session is as it was
                pass
        if not routed:
            session.rollback(penalize=True)
        outcome = f"routed to '{FAILURE}'" if routed else f"penalized in its queue for {self.penalty:g} s"
        self._record_error("on_trigger", err, f"; FlowFile {flowfile.uuid} {outcome}")
        return routed

    def _record_error(self, where: str, err: BaseException, outcome: str = "") -> None:
        # listed before it is counted: a status read meanwhile (on another thread) that counts an
        # error also shows it, so whoever keeps errors (the error log) finds it there
        self.errors.append({"at": time.time(), "where": where, "error": f"{type(err).__name__}: {err}{outcome}",
                            "traceback": traceback.format_exc(limit=5)})
        self.counters.errors += 1

