"""The stateless engine: a whole flow run as one transaction (Stateless NiFi, seed 004).

A **trigger** runs every processor of the flow in the calling thread until no FlowFile is left to
work on, over repositories in memory: content in an ``InMemoryContentRepository`` made for the
trigger, connections as ``ConnectionQueue`` objects, no write-ahead log. Sessions commit as on
every engine, through the same ``ProcessSession``, ``EngineBackend`` and ``ProcessorTask.trigger``
(content, then the log, then the offers); the log is the trigger's own (``TriggerLog``), which
holds each session's state change and provenance, and the backend holds the ``commit_async``
callbacks.

A trigger **succeeds** when the flow ran out of work without a processor raising and without a
FlowFile at a failure port. Then ``TriggerResult.acknowledge`` (at once, unless the caller
acknowledges itself, as ExecuteStateless does once its own commit is durable) writes the state
changes to the state store, records provenance if kept, and runs the held ``on_success`` callbacks
in the order their sessions committed. A trigger **fails** when a processor raises (the result
names it and the error), a FlowFile reaches a failure port, the trigger's timeout passes, or
FlowFiles are left that no processor takes; then nothing of it is kept (content, queues, state)
and the held ``on_failure`` callbacks run, so a source that acknowledges its input in
``on_success`` hands the same data out again next time. A process that dies in a trigger leaves
nothing behind either: the trigger wrote nothing but what processors write outside the flow.

Order inside a trigger: each source is triggered once (input ports until they passed every
input on); then, while any queue holds a FlowFile, the processor furthest downstream that has
input is triggered, as Stateless NiFi does, so FlowFiles leave the flow before more are made.

What differs from the durable engines (docs/stateless.md): one task per processor
(``concurrent_tasks`` is ignored), no back pressure and no swapping (a trigger's FlowFiles are in
memory), a FlowFile penalized inside a trigger or left in a bin fails it as "left over", the
timeout is checked between two processor triggers (a call that never returns is not interrupted:
Python cannot stop a thread), and processors are scheduled once, at the first trigger, and stopped
by ``close``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import orjson

from flowactors.engine.errors import TriggerFailed
from flowactors.engine.session_backend import EngineBackend
from flowactors.engine.placement import flow_order, runtime_env_of, runtime_env_refusal
from flowactors.engine.queues.connection import ConnectionQueue, QueueConfig
from flowactors.engine.services import ServiceHost
from flowactors.engine.task import ProcessorTask
from flowactors.engine.transport import QueueObjectLink
from flowactors.sdk.ports import InputPort, OutputPort
from flowactors.sdk.flow import Flow
from flowactors.sdk.flow_service import service_problems
from flowactors.sdk.relationships import PROCESSOR_ATTRIBUTE, REASON_ATTRIBUTE
from flowactors.sdk.session_contract import CommitBatch, StateConflict
from flowactors.sdk.settings import flow_settings
from flowactors.sdk.state import StateStore
from flowactors.sdk.units import parse_duration
from repositories.content import InMemoryContentRepository
from repositories.model import FlowFile, StateChange, StateMap, new_flowfile_uuids, now_millis
from repositories.provenance import InMemoryProvenanceRepository
from repositories.provenance.event import EncodedBatch, encode_batch

log = logging.getLogger(__name__)

#: attributes a FlowFile routed to a failure port may carry to say why (the engine's own names)
REASON_ATTRIBUTES = (REASON_ATTRIBUTE, PROCESSOR_ATTRIBUTE)
#: what a trigger's input may be: content, or content and attributes
Input = bytes | str | tuple[bytes | str, Mapping[str, str]]


class InMemoryStateStore:
    """Processor state for the stateless engine: a dict, optionally seeded (``states``)."""

    def __init__(self, states: Mapping[str, StateMap] | None = None):
        self._states = {c: StateMap.of(s.version, s.values) for c, s in (states or {}).items()}
        self._lock = threading.Lock()

    def get_state(self, component_id: str) -> StateMap:
        with self._lock:
            return self._states.get(component_id, StateMap())

    def commit_state(self, change: StateChange) -> None:
        self.commit_states([change])

    def commit_states(self, changes: Sequence[StateChange]) -> None:
        """Write every change or none (``StateConflict``): a trigger's changes are kept together."""
        with self._lock:
            stored: dict[str, StateMap] = {}
            for change in changes:
                current = stored.get(change.component_id) or self._states.get(change.component_id, StateMap())
                new = change.applied_to(current)
                if new is None:
                    raise StateConflict(f"the state of {change.component_id} is at version {current.version}, "
                                        f"not {change.expected}; nothing changed")
                stored[change.component_id] = new
            self._states.update(stored)


@dataclass
class Held:
    """What a trigger's sessions committed, kept back until the trigger's outcome is known: state
    changes by processor (with the stored version each was based on), encoded provenance, and
    ``commit_async`` callbacks in commit order."""

    state: dict[str, StateChange] = field(default_factory=dict)
    views: dict[str, StateMap] = field(default_factory=dict)
    events: list[EncodedBatch] = field(default_factory=list)
    callbacks: list[tuple[Callable[[], None] | None, Callable[[BaseException], None] | None]] = field(
        default_factory=list)
    commits: int = 0


class TriggerLog:
    """The stateless engine's ``Log``: the trigger is the transaction. A session's commit is
    "written" here by holding its state change, events and callbacks (``Held``); ``take`` hands a
    finished trigger's over, ``keep`` makes them real, ``drop`` forgets them. A trigger reads the
    state through the results still waiting (``waiting``), newest first, then the store: it goes on
    from where the last trigger left it, and is kept only if that one is."""

    def __init__(self, store: StateStore, provenance: InMemoryProvenanceRepository | None = None):
        self.store = store
        self.provenance = provenance
        self._next_id = 1
        self._next_event = 0
        self._lock = threading.RLock()
        self.held = Held()
        self.waiting: list[Held] = []  # succeeded, neither kept nor dropped yet, oldest first

    def take(self, wait: bool = False) -> Held:
        """What the trigger that just ended holds; the next one starts with nothing. ``wait``: it
        succeeded and waits for ``keep`` or ``drop``; later triggers read its state."""
        held, self.held = self.held, Held()
        if wait:
            with self._lock:
                self.waiting.append(held)
        return held

    def reserve_ids(self, count: int) -> int:
        first, self._next_id = self._next_id, self._next_id + count
        return first

    def get_state(self, component_id: str) -> StateMap:
        view = self.held.views.get(component_id)
        if view is None:
            with self._lock:
                view = next((h.views[component_id] for h in reversed(self.waiting) if component_id in h.views), None)
        return view if view is not None else self.store.get_state(component_id)

    def record(self, batch: CommitBatch) -> None:
        change, held = batch.state, self.held
        if change is not None:
            component = change.component_id
            current = self.get_state(component)
            stored = change.applied_to(current)
            if stored is None:
                raise StateConflict(f"the state of {component} is at version {current.version}, not "
                                    f"{change.expected} as the session read it (another task changed it)")
            first = held.state.get(component)
            # kept at acknowledge only if the store is still at the version this trigger first read
            based_on = first.expected if first is not None else current.version
            held.state[component] = StateChange(component, stored.values, based_on)
            held.views[component] = stored
        if batch.events and self.provenance is not None:
            held.events.append(encode_batch(batch.events))
        held.commits += 1

    def hold(self, on_success: Callable[[], None] | None, on_failure: Callable[[BaseException], None] | None) -> None:
        self.held.callbacks.append((on_success, on_failure))

    def keep(self, held: Held) -> list[str]:
        """A trigger succeeded: write its state, record its provenance, run its ``on_success``
        callbacks in order; the errors of callbacks that raised (each logged). ``StateConflict``
        (nothing written, no callback run) when a state it changed is no longer at the version
        the trigger read: another trigger's result was kept first."""
        with self._lock:
            self._settled(held)
            # all or nothing: the store's own commit_states when it has one (it holds against
            # other flows sharing the store), else every version checked before any is written
            commit_states = getattr(self.store, "commit_states", None) or self._commit_one_by_one
            try:
                commit_states(list(held.state.values()))
            except StateConflict as err:
                raise StateConflict(f"{err}: it changed after this trigger read it (the trigger it went on from "
                                    f"was not kept, or another was kept first)") from None
            if self.provenance is not None and held.events:
                numbered = []
                for encoded in held.events:
                    numbered.append((self._next_event, encoded))
                    self._next_event += encoded.count
                self.provenance.register_numbered(numbered)
        return _run_callbacks([success for success, _ in held.callbacks], ())

    def _commit_one_by_one(self, changes: Sequence[StateChange]) -> None:
        moved = [c.component_id for c in changes if self.store.get_state(c.component_id).version != c.expected]
        if moved:
            raise StateConflict(f"the state of {', '.join(moved)} is not at the version read; nothing changed")
        for change in changes:
            self.store.commit_state(change)

    def drop(self, held: Held, failure: "TriggerFailed") -> list[str]:
        """A trigger failed: forget what it holds and run its ``on_failure`` callbacks."""
        with self._lock:
            self._settled(held)
        return _run_callbacks([fail for _, fail in held.callbacks], (failure,))

    def _settled(self, held: Held) -> None:
        self.waiting = [h for h in self.waiting if h is not held]

    def acknowledge(self) -> list[str]:
        """``keep`` the trigger that just ended."""
        return self.keep(self.take())

    def fail(self, failure: "TriggerFailed") -> list[str]:
        """``drop`` the trigger that just ended."""
        return self.drop(self.take(), failure)


def _run_callbacks(callbacks: Sequence[Callable | None], args: tuple) -> list[str]:
    errors = []
    for callback in callbacks:
        if callback is None:
            continue
        try:
            callback(*args)
        except Exception as err:  # one callback's failure does not keep the others from running
            log.exception("a commit_async callback failed")
            errors.append(f"{type(err).__name__}: {err}")
    return errors


class StatelessBackend(EngineBackend):
    """The engines' session backend over the trigger's queues and content; ``commit_async``
    callbacks are held by the ``TriggerLog`` until the trigger's outcome is known."""

    log: TriggerLog

    def __init__(self, *, log: TriggerLog, inputs: Sequence[str], destinations: Mapping[str, list[str]],
                 component: tuple[str, str, str]):
        super().__init__(content=None, queues={}, log=log, inputs=inputs, destinations=destinations,
                         component=component)
        #: the queues it reads and offers to, linked afresh for each trigger (``use``)
        self.queue_ids = list(dict.fromkeys([*inputs, *(q for ids in destinations.values() for q in ids)]))

    def after_commit(self, on_success, on_failure) -> None:
        self.log.hold(on_success, on_failure)

    def commit_state(self, change: StateChange) -> None:
        """Outside a trigger (``on_scheduled``): straight to the state store."""
        self.log.store.commit_state(change)

    def use(self, content: InMemoryContentRepository, queues: Mapping[str, ConnectionQueue]) -> None:
        """Work on a new trigger's content and queues."""
        self.content = content
        self.queues = {q: QueueObjectLink(queues[q]) for q in self.queue_ids}
        self._prefetched.clear()
        self._states.clear()
        self._delivery = None


class StatelessTask(ProcessorTask):
    """``ProcessorTask.trigger`` as on every engine, except that a failure fails the whole trigger
    instead of being narrowed down and retried, and nothing waits (yields, penalties)."""

    backend: StatelessBackend
    waits = False

    def _failed(self, session, err: Exception) -> None:
        try:
            session.rollback()
        except Exception:  # the trigger is thrown away anyway
            pass
        self._record_error("on_trigger", err)
        raise TriggerFailed(f"processor '{self.node.name}' failed: {type(err).__name__}: {err}", "exception",
                            processor=self.node.name) from err

    def _pause(self, seconds: float) -> None:
        pass


class StatelessOutput:
    """A FlowFile that reached an output: its attributes, and its content read on demand."""

    __slots__ = ("flowfile", "_content")

    def __init__(self, flowfile: FlowFile, content: InMemoryContentRepository):
        self.flowfile = flowfile
        self._content = content

    @property
    def attributes(self) -> Mapping[str, str]:
        return self.flowfile.attributes

    @property
    def size(self) -> int:
        return self.flowfile.size

    @property
    def content(self) -> bytes:
        return self._content.read_bytes(self.flowfile.claim)  # b"" without a claim

    def __repr__(self) -> str:
        return f"StatelessOutput({self.attributes.get('filename')!r}, {self.size} bytes)"


@dataclass
class TriggerResult:
    """What one trigger did. ``outputs``: output port (or, in a flow without output ports,
    ``processor.relationship`` of each auto-terminated relationship) -> the FlowFiles that reached it.
    ``commits``: sessions committed in the trigger (0 in a success: the flow found no work; in a
    failure, none of them kept)."""

    success: bool
    outputs: dict[str, list[StatelessOutput]] = field(default_factory=dict)
    failure: TriggerFailed | None = None
    commits: int = 0
    seconds: float = 0.0
    #: errors of callbacks that raised (they do not change the outcome)
    callback_errors: list[str] = field(default_factory=list)
    _held: Held | None = field(default=None, repr=False)
    _log: TriggerLog | None = field(default=None, repr=False)

    @property
    def reason(self) -> str | None:
        return self.failure.reason if self.failure is not None else None

    @property
    def pending(self) -> bool:
        """Whether this result still waits for ``acknowledge`` (or ``abandon``)."""
        return self._held is not None

    def acknowledge(self) -> None:
        """Keep the trigger: state, provenance, then the held ``on_success`` callbacks. Raises
        ``TriggerFailed`` (kind "state conflict") when another trigger's result changed a state
        this one read and was kept first: then nothing of this one is kept, its ``on_failure``
        callbacks ran, and the result says failure."""
        held, self._held = self._held, None
        if held is None:
            return
        assert self._log is not None  # a result that holds a trigger's commits has their log
        try:
            self.callback_errors += self._log.keep(held)
        except StateConflict as err:
            failure = TriggerFailed(str(err), "state conflict")
            self.callback_errors += self._log.drop(held, failure)
            self.success, self.failure = False, failure
            raise failure from err

    def abandon(self, reason: str = "the trigger's result was abandoned") -> None:
        """Throw a successful trigger away after all (the caller could not keep its outputs):
        the held ``on_failure`` callbacks run, as for a failure."""
        held, self._held = self._held, None
        if held is not None:
            assert self._log is not None  # a result that holds a trigger's commits has their log
            self.callback_errors += self._log.drop(held, TriggerFailed(reason, "abandoned"))


class StatelessFlow:
    """A flow on the stateless engine (see the module docstring).

    ``failure_ports``: output ports whose FlowFiles fail the trigger. ``timeout``: seconds (or a
    duration such as "30 sec") a trigger may take. ``state``: where processor state lives
    (``StateStore``; default in memory). ``provenance``: keep the events of acknowledged triggers
    in memory (``self.provenance``).
    """

    def __init__(self, flow: Flow, *, failure_ports: Iterable[str] = (), timeout: float | str | None = None,
                 state: StateStore | None = None, provenance: bool = False,
                 settings: Mapping[str, Any] | None = None):
        flow.validate()
        _check_runnable(flow)
        self.flow = flow
        self.settings = flow_settings(flow, settings)
        self.timeout = parse_duration(timeout) if isinstance(timeout, str) else timeout
        self.store = state if state is not None else InMemoryStateStore()
        self.provenance = InMemoryProvenanceRepository() if provenance else None
        self.log = TriggerLog(self.store, self.provenance)
        nodes = flow.processors
        self.input_ports = [n for n, node in nodes.items() if issubclass(node.type, InputPort)]
        self.output_ports = {n: [c.id for c in flow.connections_to(n)]
                             for n, node in nodes.items() if issubclass(node.type, OutputPort)}
        self.failure_ports = list(failure_ports)
        unknown = [p for p in self.failure_ports if p not in self.output_ports]
        if unknown:
            raise ValueError(f"flow '{flow.name}': failure port(s) {', '.join(map(repr, unknown))} are not output "
                             f"ports of the flow (it has: {', '.join(map(repr, self.output_ports)) or 'none'})")
        # as the durable engines run them, but without back pressure: a trigger's FlowFiles are in memory
        self._configs: dict[str, QueueConfig] = {
            c.id: replace(QueueConfig.for_connection(c, self.settings, flow.name), back_pressure_objects=0,
                          back_pressure_bytes=0) for c in flow.connections}
        destinations = {name: flow.destinations(name) for name in nodes}
        if not self.output_ports:  # the ends of the flow are its results: what auto-terminated relationships get
            for name, node in nodes.items():
                for relationship in node.auto_terminate:
                    queue_id = f"{name}.{relationship}"
                    self._configs[queue_id] = QueueConfig(queue_id, 0, 0)
                    destinations[name][relationship] = [queue_id]
                    self.output_ports[queue_id] = [queue_id]
        for port in self.input_ports:
            self._configs[self._input_queue(port)] = QueueConfig(self._input_queue(port), 0, 0)
        self.tasks: dict[str, StatelessTask] = {}
        #: the controller services the processors use: enabled now, disabled by ``close``
        self.services = ServiceHost(flow.services_used_by(nodes), flow.services.values())
        self.services.enable()
        for name, node in nodes.items():
            if name in self.output_ports or node.disabled:   # a disabled processor is loaded, never run
                continue
            inputs = [c.id for c in flow.connections_to(name)] + (
                [self._input_queue(name)] if name in self.input_ports else [])
            backend = StatelessBackend(log=self.log, inputs=inputs, destinations=destinations[name],
                                       component=(f"{flow.name}/{name}", name, node.type.__name__))
            self.tasks[name] = StatelessTask(flow.name, node, 0, backend, self.settings)
            self.tasks[name].context.stateless_engine = STATELESS_ENGINE
            self.services.give_to(self.tasks[name].context)
        #: the processors it triggers, each after the ones feeding it (the placement's flow order)
        self._order = [name for name in flow_order(flow) if name in self.tasks]
        self._scheduled: set[str] = set()  # the processors whose on_scheduled ran (and on_stopped not since)
        self._unsettled: list[TriggerResult] = []  # results not acknowledged yet (abandoned by ``close``)
        self._lock = threading.Lock()
        self.triggers = 0

    @staticmethod
    def _input_queue(port: str) -> str:
        return f"{port}.input"

    # ------------------------------------------------------------------ running
    def trigger(self, inputs: Sequence[Input] | Mapping[str, Sequence[Input]] | None = None, *,
                acknowledge: bool = True) -> TriggerResult:
        """Run the flow once over ``inputs`` (for its one input port, or by port name) and return
        the result; with ``acknowledge=False`` a successful result waits for the caller's
        ``acknowledge()`` or ``abandon()`` (a later trigger reads the state as acknowledged so far)."""
        with self._lock:
            self._unsettled = [r for r in self._unsettled if r.pending]
            self._schedule()
            self.triggers += 1
            started = time.monotonic()
            deadline = started + self.timeout if self.timeout is not None else None
            content = InMemoryContentRepository()
            queues = {q: ConnectionQueue(config) for q, config in self._configs.items()}
            for task in self.tasks.values():
                task.backend.use(content, queues)
            self.log.take()  # nothing from before (an input refused half way) leaks in
            self._feed(inputs, content, queues)
            try:
                self._run(queues, deadline)
            except TriggerFailed as failure:
                self._release_held(queues)
                commits = self.log.held.commits
                errors = self.log.fail(failure)
                return TriggerResult(False, failure=failure, commits=commits, seconds=time.monotonic() - started,
                                     callback_errors=errors)
            outputs = {port: [StatelessOutput(f, content) for q in ids for f in queues[q].listing(queues[q].count)]
                       for port, ids in self.output_ports.items()}
            held = self.log.take(wait=True)
            result = TriggerResult(True, outputs, commits=held.commits, seconds=time.monotonic() - started,
                                   _held=held, _log=self.log)
            self._unsettled.append(result)
        if acknowledge:
            try:
                result.acknowledge()
            except TriggerFailed:  # said in the result, whose outputs were not kept
                result.outputs = {}
        return result

    def _release_held(self, queues: Mapping[str, ConnectionQueue]) -> None:
        """After a failed trigger: a processor still holding FlowFiles of it in a session of its
        own (MergeContent's bins) is stopped and scheduled again, which lets them go, so none
        reaches a later trigger."""
        for name, task in self.tasks.items():
            if any(queues[q].in_flight for q in task.backend.inputs):
                self._stop(name)  # scheduled again by the next trigger, which says if that fails
                try:
                    self._schedule_one(name)
                except ValueError:
                    log.exception("processor '%s' could not be scheduled again after a failed trigger", name)

    def _schedule(self) -> None:
        for name in self.tasks:
            self._schedule_one(name)

    def _schedule_one(self, name: str) -> None:
        if name in self._scheduled:
            return
        task = self.tasks[name]
        try:
            task.processor.on_scheduled(task.context)
        except Exception as err:
            raise ValueError(f"processor '{name}' could not be scheduled: {type(err).__name__}: {err}") from err
        self._scheduled.add(name)

    def _stop(self, name: str) -> None:
        if name not in self._scheduled:
            return
        self._scheduled.discard(name)
        task = self.tasks[name]
        try:
            task.processor.on_stopped(task.context)
        except Exception:
            log.exception("processor '%s' failed in on_stopped", name)

    def _feed(self, inputs, content: InMemoryContentRepository, queues: Mapping[str, ConnectionQueue]) -> None:
        if inputs is None:
            return
        if not isinstance(inputs, Mapping):
            if len(self.input_ports) != 1:
                raise ValueError(f"inputs without a port name, but flow '{self.flow.name}' has "
                                 f"{len(self.input_ports)} input ports; pass {{port: inputs}}")
            inputs = {self.input_ports[0]: inputs}
        for port, items in inputs.items():
            if port not in self.input_ports:
                raise ValueError(f"flow '{self.flow.name}' has no input port '{port}' "
                                 f"(it has: {', '.join(map(repr, self.input_ports)) or 'none'})")
            pairs = [item if isinstance(item, tuple) else (item, {}) for item in items]
            datas = [d.encode() if isinstance(d, str) else d for d, _ in pairs]
            writer = content.writer()
            written = iter(writer.write_many([d for d in datas if len(d)]))  # one append, not one a FlowFile
            writer.close()
            now = now_millis()
            first = self.log.reserve_ids(len(pairs))
            flowfiles = [FlowFile(first + i, uuid, {"filename": uuid, "path": "./", **attributes, "uuid": uuid},
                                  next(written) if len(data) else None, now, now, queue_date=now)
                         for i, (uuid, data, (_, attributes)) in enumerate(zip(new_flowfile_uuids(len(pairs)), datas,
                                                                               pairs))]
            queues[self._input_queue(port)].offer(flowfiles)

    def _run(self, queues: Mapping[str, ConnectionQueue], deadline: float | None) -> None:
        for name in self._order:
            task = self.tasks[name]
            if name in self.input_ports:
                while any(queues[q].queued for q in task.backend.inputs):
                    if not self._step(name, queues, deadline):
                        break
            elif not task.takes_input:
                self._step(name, queues, deadline)
        stuck: set[str] = set()
        while True:
            ready = [n for n in reversed(self._order) if n not in stuck and n not in self.input_ports
                     and self.tasks[n].takes_input
                     and any(queues[q].queued for q in self.tasks[n].backend.inputs)]
            if not ready:
                break
            if self._step(ready[0], queues, deadline):
                stuck.clear()
            else:  # took nothing it could commit (penalized input, a processor that waits): others first
                stuck.add(ready[0])
        outputs = {q for ids in self.output_ports.values() for q in ids}
        left = {q: queue.count for q, queue in queues.items() if q not in outputs and queue.count}
        if left:
            where = ", ".join(f"{count} in '{q}'" for q, count in left.items())
            raise TriggerFailed(f"the flow stopped with FlowFiles no processor took ({where}): penalized, "
                                f"held in a bin, refused by their processor, or waiting for a disabled one",
                                "left over")

    def _step(self, name: str, queues: Mapping[str, ConnectionQueue], deadline: float | None) -> bool:
        """Trigger ``name`` once; whether it committed anything. Raises ``TriggerFailed`` if a
        failure port received a FlowFile or the deadline passed."""
        task = self.tasks[name]
        before = task.counters.commits
        task.trigger()
        for port in self.failure_ports:
            arrived = [f for q in self.output_ports[port] for f in queues[q].listing(1)]
            if arrived:
                why = "; ".join(f"{a}={arrived[0].attributes[a]!r}" for a in REASON_ATTRIBUTES
                                if a in arrived[0].attributes)
                raise TriggerFailed(f"a FlowFile reached failure port '{port}' (from '{name}')"
                                    + (f": {why}" if why else ""), "failure port", processor=name, port=port)
        if deadline is not None and time.monotonic() > deadline:
            raise TriggerFailed(f"the trigger took longer than its timeout of {self.timeout:g} s "
                                f"(last: processor '{name}')", "timeout", processor=name)
        return task.counters.commits > before

    def close(self) -> None:
        """Stop the processors (``on_stopped``); results not acknowledged yet are abandoned."""
        for result in self._unsettled:
            result.abandon("the stateless flow was closed")
        self._unsettled = []
        for name in self.tasks:
            self._stop(name)
        self.services.disable()

    def status(self) -> dict:
        """The processors' counters over every trigger so far (as the other engines report them)."""
        return {"engine": "stateless", "flow": self.flow.name, "triggers": self.triggers,
                "processors": [task.status() for task in self.tasks.values()]}

    def __enter__(self) -> "StatelessFlow":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StatelessEngineProvider:
    """The stateless engine as a processor reaches it (``flowactors.sdk.stateless_api``): every
    engine hands ``STATELESS_ENGINE`` to its processors' contexts."""

    def dataflow(self, flow: Flow, *, failure_ports: Sequence[str] = (), timeout: float | None = None) -> StatelessFlow:
        return StatelessFlow(flow, failure_ports=failure_ports, timeout=timeout)


STATELESS_ENGINE = StatelessEngineProvider()


class StatelessBatches:
    """A stateless flow as a Ray Data ``map_batches`` class: every batch is one trigger, so one
    transaction, on whichever worker Ray Data runs it (``ds.map_batches(StatelessBatches,
    fn_constructor_args=(flow,), concurrency=N)``). A stateless flow is a pure function of its
    input batch, so the batches fan out over the cluster with nothing to share.

    The batch's ``content`` column (bytes or str) is each input's content; every other column
    becomes an attribute (as text). The result has a row per FlowFile that reached an output:
    ``port``, ``content`` (bytes) and ``attributes`` (a JSON object). A batch whose trigger failed
    gives its inputs back instead, as rows with ``port`` "failure" and the reason in the
    ``flowactors.failure.reason`` attribute (nothing of the trigger kept); ``on_failure="raise"``
    raises ``TriggerFailed`` instead, which fails the dataset.
    """

    def __init__(self, flow: Flow | Callable[[], Flow], *, content: str = "content", failure_ports: Iterable[str] = (),
                 timeout: float | None = None, on_failure: str = "rows"):
        if on_failure not in ("rows", "raise"):
            raise ValueError(f"on_failure is 'rows' or 'raise', not {on_failure!r}")
        self.stateless = StatelessFlow(flow if isinstance(flow, Flow) else flow(), failure_ports=failure_ports,
                                       timeout=timeout)
        self.content = content
        self.on_failure = on_failure

    def __call__(self, batch: Mapping[str, Sequence]) -> dict[str, list]:
        contents = [c if isinstance(c, (bytes, str)) else bytes(c) for c in _values(batch[self.content])]
        columns = [k for k in batch if k != self.content]
        values = [[v if isinstance(v, str) else str(v) for v in _values(batch[k])] for k in columns]
        attributes = [dict(zip(columns, row)) for row in zip(*values)] if columns else [{}] * len(contents)
        result = self.stateless.trigger(list(zip(contents, attributes)))
        if not result.success:
            assert result.failure is not None  # a trigger that failed says why
            if self.on_failure == "raise":
                raise result.failure
            reason = {REASON_ATTRIBUTE: result.reason}
            return {"port": ["failure"] * len(contents),
                    "content": [c.encode() if isinstance(c, str) else c for c in contents],
                    "attributes": [orjson.dumps({**a, **reason}).decode() for a in attributes]}
        rows: dict[str, list] = {"port": [], "content": [], "attributes": []}
        for port, outputs in result.outputs.items():
            rows["port"] += [port] * len(outputs)
            rows["content"] += [o.content for o in outputs]
            rows["attributes"] += [orjson.dumps(o.flowfile.attributes).decode() for o in outputs]
        return rows


def _values(column: Any) -> list:
    """A batch column as a list (a numpy array's ``tolist``: Python objects, not numpy scalars)."""
    return column.tolist() if hasattr(column, "tolist") else list(column)


def run_stateless(flow: Flow, *, settings: Mapping[str, Any] | None = None, duration: float | None = None,
                  timeout: float | None = None, failure_ports: Iterable[str] = (),
                  trigger_timeout: float | None = None, on_result: Callable[[TriggerResult], None] | None = None
                  ) -> dict:
    """Trigger ``flow`` until a trigger finds no work (its sources have nothing left), one fails,
    ``duration`` passed (triggers go on while it lasts) or ``timeout`` did (``final["timed_out"]``);
    the final status, with ``failure`` for a trigger that failed (``run_flow(flow, engine="stateless")``,
    ``flowactors run --stateless``)."""
    began = time.monotonic()
    outputs: dict[str, int] = {}
    final: dict[str, Any] = {}
    with StatelessFlow(flow, failure_ports=failure_ports, timeout=trigger_timeout, settings=settings) as stateless:
        while True:
            result = stateless.trigger()
            if on_result is not None:
                on_result(result)
            for port, flowfiles in result.outputs.items():
                outputs[port] = outputs.get(port, 0) + len(flowfiles)
            elapsed = time.monotonic() - began
            if not result.success:
                f = result.failure
                assert f is not None  # a trigger that failed says why
                final["failure"] = {"trigger": stateless.triggers, "reason": f.reason, "kind": f.kind,
                                    "processor": f.processor, "port": f.port}
                break
            if duration is not None:
                if elapsed >= duration:
                    break
            elif result.commits == 0:
                break
            if timeout is not None and elapsed >= timeout:
                final["timed_out"] = True
                break
        final.update(stateless.status())
    final.update({"outputs": outputs, "queues": [], "seconds": round(time.monotonic() - began, 3)})
    return final


def _check_runnable(flow: Flow) -> None:
    """Refuse what needs the Ray engine's actors or a flow service it cannot host (``ValueError``,
    naming the processors)."""
    own_env = [name for name, node in flow.processors.items() if runtime_env_of(node)]
    if own_env:
        raise ValueError(runtime_env_refusal(own_env))
    problems = service_problems(flow, "stateless")
    if problems:
        raise ValueError("; ".join(problems))
