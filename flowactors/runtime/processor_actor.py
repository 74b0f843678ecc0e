"""One concurrent task of a processor: a Ray actor that runs ``on_trigger`` in its own loop.

Each actor pulls batches from its input queue actors, runs sessions and commits them itself:
content goes straight to the node's claim files, one call makes the batch durable in the FlowFile
repository, and the records are then offered downstream. It triggers only while no destination
queue is under back pressure, waits on its input queue instead of spinning, and reports counters
that the controller turns into status and metrics.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import ray

from flowactors.flow import ProcessorNode
from flowactors.metrics import ProcessorMetrics
from flowactors.processor import ProcessContext, Processor
from flowactors.runtime.connection_queue import QueueState
from flowactors.session import CommitBatch, CommitError, ProcessSession, _Ids
from flowactors.settings import Settings
from flowactors.units import parse_duration
from repositories.content import ContentRepository
from repositories.model import FlowFile, now_millis
from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType, encode_event

POLL_WAIT = 0.2


@dataclass
class Wiring:
    """How one processor is connected: its inputs, and the queues behind each relationship."""

    inputs: list[str]
    destinations: dict[str, list[str]]
    queues: dict[str, Any] = field(default_factory=dict)  # queue id -> QueueActor handle
    flowfile_repository: Any = None
    provenance_repository: Any = None


@dataclass
class Counters:
    tasks: int = 0
    task_seconds: float = 0.0
    flowfiles_in: int = 0
    flowfiles_out: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    commits: int = 0
    errors: int = 0
    expired: int = 0


class RayBackend:
    """The session backend over Ray actors (see ``flowactors.session.SessionBackend``)."""

    def __init__(self, wiring: Wiring, content: ContentRepository, always_sync: bool,
                 component: tuple[str, str, str], counters: Counters):
        self.wiring = wiring
        self.content = content
        self.always_sync = always_sync
        self.component = component
        self.counters = counters
        self._prefetched: deque[tuple[str, FlowFile]] = deque()
        self._next_input = 0
        self._states: dict[str, QueueState] = {}

    # ------------------------------------------------------------------ input
    def prefetch(self, max_count: int, wait: float) -> bool:
        """Fill the local buffer from the inputs (waiting up to ``wait``); True if anything is there."""
        if self._prefetched:
            return True
        inputs = self.wiring.inputs
        for attempt in range(len(inputs)):
            queue_id = inputs[(self._next_input + attempt) % len(inputs)]
            last = attempt == len(inputs) - 1
            taken, expired = ray.get(self.wiring.queues[queue_id].poll.remote(max_count, wait if last else 0.0))
            if expired:
                self._expire(queue_id, expired)
            if taken:
                self._next_input = (self._next_input + attempt + 1) % len(inputs)
                self._prefetched.extend((queue_id, f) for f in taken)
                return True
        return False

    def poll(self, max_count: int) -> list[tuple[str, FlowFile]]:
        if not self._prefetched and self.wiring.inputs:
            self.prefetch(max_count, 0.0)
        count = min(max_count, len(self._prefetched))
        return [self._prefetched.popleft() for _ in range(count)]

    def return_prefetched(self) -> None:
        """Give back FlowFiles fetched but never handed to a session (on stop)."""
        returned: dict[str, list[FlowFile]] = {}
        while self._prefetched:
            queue_id, flowfile = self._prefetched.popleft()
            returned.setdefault(queue_id, []).append(flowfile)
        if returned:
            self.requeue(returned)

    def _expire(self, queue_id: str, expired: list[FlowFile]) -> None:
        component_id, name, type_name = self.component
        events = [ProvenanceEvent(event_type=ProvenanceEventType.EXPIRE, timestamp=now_millis(),
                                  flowfile_uuid=f.uuid, component_id=component_id, component_name=name,
                                  component_type=type_name, lineage_start_date=f.lineage_start_date,
                                  previous_attributes=dict(f.attributes), updated_attributes=dict(f.attributes),
                                  previous_claim=f.claim, updated_claim=f.claim, previous_size=f.size,
                                  updated_size=f.size, source_queue_id=queue_id,
                                  details="Expiration threshold met")
                  for f in expired]
        batch = CommitBatch(removals=[f.uuid for f in expired], events=events,
                            acknowledgements={queue_id: [f.uuid for f in expired]})
        self.commit(batch)
        self.counters.expired += len(expired)

    # ------------------------------------------------------------------ output
    def destinations(self, relationship: str) -> list[str]:
        return self.wiring.destinations.get(relationship, [])

    def next_ids(self, count: int) -> int:
        return ray.get(self.wiring.flowfile_repository.reserve_ids.remote(count))

    def commit(self, batch: CommitBatch) -> None:
        try:
            ray.get(self.wiring.flowfile_repository.commit.remote(batch.updates, batch.removals, batch.new_claims))
        except Exception as err:
            raise CommitError(f"the FlowFile repository refused the commit: {err}") from err
        queues = self.wiring.queues
        provenance = None
        if batch.events and self.wiring.provenance_repository is not None:
            # encoded here, once: shipping bytes is ~8x cheaper than pickling event objects
            provenance = self.wiring.provenance_repository.register_encoded.remote(
                [encode_event(e) for e in batch.events], [e.timestamp for e in batch.events])
        offer_ids = list(batch.offers)
        # offered downstream before acknowledged upstream: a FlowFile is always counted in some
        # queue, so nobody can see the flow idle while records are between two queues
        states = ray.get([queues[q].offer.remote(batch.offers[q]) for q in offer_ids])
        self._states.update(zip(offer_ids, states))
        ray.get([queues[q].acknowledge.remote(u) for q, u in batch.acknowledgements.items()]
                + ([provenance] if provenance is not None else []))
        c = self.counters
        c.commits += 1
        c.flowfiles_in += sum(len(u) for u in batch.acknowledgements.values())
        c.flowfiles_out += len(batch.updates)
        c.bytes_read += batch.bytes_read
        c.bytes_written += batch.bytes_written

    def requeue(self, returned: dict[str, list[FlowFile]]) -> None:
        ray.get([self.wiring.queues[q].requeue.remote(f) for q, f in returned.items()])

    # ------------------------------------------------------------------ back pressure
    def full_destinations(self) -> list[str]:
        return [q for q, state in self._states.items() if state.full]

    def wait_for_space(self, wait: float) -> bool:
        """Wait until no destination is full; True when there is room again."""
        for queue_id in self.full_destinations():
            self._states[queue_id] = ray.get(self.wiring.queues[queue_id].wait_not_full.remote(wait))
        return not self.full_destinations()


@ray.remote(num_cpus=0)
class ProcessorActor:
    """Runs one task of a processor until stopped; ``status`` may be called at any time."""

    def __init__(self, flow_name: str, node: ProcessorNode, instance: int, wiring: Wiring,
                 root: str, settings: Settings):
        self.node = node
        self.instance = instance
        self.settings = settings
        self.processor: Processor = node.type()
        self.component_id = f"{flow_name}/{node.name}"
        relationships = list(node.type.relationships_for(node.properties))
        self.context = ProcessContext(
            name=node.name, processor_type=node.type.__name__, descriptors=node.type.descriptor_map(),
            values=node.properties, relationships=relationships, instance=instance,
            concurrent_tasks=node.concurrent_tasks, batch_size=node.batch_size or settings.default_batch_size)
        self.counters = Counters()
        self.metrics = ProcessorMetrics(flow_name, node.name)
        content = ContentRepository.from_settings(root, settings)
        self.backend = RayBackend(wiring, content, settings.always_sync,
                                  (self.component_id, node.name, node.type.__name__), self.counters)
        self.ids = _Ids(self.backend)
        self.run_schedule = parse_duration(node.run_schedule)
        self.yield_duration = parse_duration(node.yield_duration)
        self.penalty = parse_duration(node.penalty_duration)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.idle = False
        self.busy = False
        self.back_pressure = False
        self.running = False
        self.errors: deque[dict] = deque(maxlen=10)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"trigger-{self.node.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> dict:
        """Finish the running session, give back what was fetched, call ``on_stopped``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status()

    def status(self) -> dict:
        c = self.counters
        return {
            "name": self.node.name, "instance": self.instance, "running": self.running,
            "idle": self.idle and not self.busy,
            "back_pressure": self.back_pressure, "tasks": c.tasks, "task_seconds": round(c.task_seconds, 4),
            "flowfiles_in": c.flowfiles_in, "flowfiles_out": c.flowfiles_out, "bytes_read": c.bytes_read,
            "bytes_written": c.bytes_written, "commits": c.commits, "errors": c.errors, "expired": c.expired,
            "recent_errors": list(self.errors),
        }

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
                self._cycle()
        finally:
            self.backend.return_prefetched()
            try:
                self.processor.on_stopped(self.context)
            except Exception as err:
                self._record_error("on_stopped", err)
            self.metrics.publish(self.counters)
            self.running = False

    def _cycle(self) -> None:
        if self.backend.full_destinations():
            self.back_pressure = True
            if not self.backend.wait_for_space(POLL_WAIT):
                return
        self.back_pressure = False
        node_type = self.node.type
        if node_type.input_required and not self.backend.prefetch(self.context.batch_size, POLL_WAIT):
            self.idle = True
            if not node_type.trigger_when_empty:
                return
        commits_before = self.counters.commits
        session = ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self.ids,
                                 penalty_duration=self.penalty)
        started = time.monotonic()
        self.busy = True
        try:
            self.processor.on_trigger(self.context, session)
            session.commit()
        except Exception as err:
            self._record_error("on_trigger", err)
            try:
                session.rollback()
            except Exception as rollback_error:
                self._record_error("rollback", rollback_error)
            self._stop.wait(self.settings.administrative_yield)
        finally:
            self.counters.tasks += 1
            self.counters.task_seconds += time.monotonic() - started
            self.idle = self.counters.commits == commits_before
            self.busy = False
            self.metrics.publish(self.counters)  # deltas since the last trigger: a few local calls
        if self.context._yield_requested:
            self.context._yield_requested = False
            self._stop.wait(self.yield_duration)
        elif self.run_schedule > 0:
            self._stop.wait(self.run_schedule)
        elif self.idle and not self.node.type.input_required:
            self._stop.wait(0.01)

    def _record_error(self, where: str, err: BaseException) -> None:
        self.counters.errors += 1
        self.errors.append({"at": time.time(), "where": where, "error": f"{type(err).__name__}: {err}",
                            "traceback": traceback.format_exc(limit=5)})
