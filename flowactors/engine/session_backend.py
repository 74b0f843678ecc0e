"""The session backend every engine shares: input buffer, the commit order, back pressure.

This is the one place the commit order is written (DESIGN.md, "The data path"):

1. the session has flushed its claim files (``ProcessSession.commit``);
2. one write-ahead-log transaction, written by the task itself in its own process (``Log``:
   ``LogWriter`` on the durable engines and in the test runner, the trigger's log on the
   stateless engine). A refusal here raises ``CommitError`` and the session rolls back: nothing
   happened. The transaction cannot outlive the process writing it, so there is no commit in
   doubt: either the task learns the outcome or it dies with it;
3. then offers downstream and acknowledgements upstream, and provenance: its events' ids were
   reserved in step 2's transaction, so they follow the order of commits whenever the events
   reach the provenance repository, and a task does not wait for them (``LogWriter``). **The
   commit was decided at step 2**: a failure from here on raises ``DeliveryError``; the session does not roll back, no
   claim is deleted and nothing is requeued. The task's backend says it needs a repair
   (``lost``), and the controller repairs the flow from the log, which is the truth.

An executor's tasks *overlap* a delivery with their next trigger (``overlap_delivery``): the
offers go out and the task goes on at once; it waits for them, then acknowledges its input, at
its next commit, or before it waits for anything (input, room, a yield, a stop), or when the
offers still on their way may fill a destination (the room the queue last reported, less what is
on its way), so a producer overshoots a back pressure threshold by one commit at most, as
before. A task is never idle while its delivery is under way, and it acknowledges only after
the offers arrived, so every FlowFile is always counted in some queue. In the steady state a
commit waits on nothing across actors but its log transaction (docs/performance.md).

Engines differ only in the links they hand in (``flowactors.engine.transport``): a queue in the
same executor is a local call, one elsewhere an actor call, one in a test runner a plain object.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from flowactors.engine.cluster.partitioning import partition_batch
from flowactors.engine.queues.connection import QueueHost
from flowactors.engine.process_deaths import DeathGuard
from flowactors.engine.transport import Link, call_now, component_lost, resolve
from flowactors.sdk.session_contract import CommitBatch, DeliveryError
from repositories.model import FlowFile, FlowFileBatch, StateChange, StateMap, now_millis, total_size
from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType, event_fields


class Log(Protocol):
    """Step 2 and provenance: where a session's commit becomes durable."""

    def reserve_ids(self, count: int) -> int:
        """The first of ``count`` fresh FlowFile ids, reserved durably in the log."""

    def record(self, batch: CommitBatch) -> None:
        """Write the batch's FlowFile changes to the log (``CommitError`` if refused: nothing was
        written), its events' ids reserved and its state change made in the same transaction, and
        see its provenance recorded (``LogWriter`` without making the task wait)."""

    def get_state(self, component_id: str) -> StateMap:
        """A processor's state as the log holds it."""


@dataclass
class Delivery:
    """A decided commit's delivery: its offers (queue -> FlowFiles), the pending answer to each
    in the same order, and the acknowledgements sent once they arrived."""

    offers: dict[str, FlowFileBatch]
    pending: list[Any]
    acknowledgements: dict[str, list[str]]


@dataclass
class Counters:
    """What one processor task did; the status and the metrics are read from here."""

    tasks: int = 0
    task_seconds: float = 0.0
    flowfiles_in: int = 0
    flowfiles_out: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    commits: int = 0
    errors: int = 0
    expired: int = 0
    #: commits refused because another task of the processor changed its state first (retried)
    state_conflicts: int = 0


class EngineBackend:
    """A processor task's ``SessionBackend`` over links to its queues and the repositories."""

    def __init__(self, *, content: Any, queues: Mapping[str, Link], log: "Log", inputs: Sequence[str],
                 destinations: Mapping[str, list[str]], always_sync: bool = False,
                 component: tuple[str, str, str] = ("", "", ""), overlap_delivery: bool = False,
                 partitioners: Mapping[str, Any] | None = None, back_pressure: bool = True):
        self.content = content
        self.queues = dict(queues)
        self.log = log
        self.inputs = list(inputs)
        self._destinations = dict(destinations)
        self.always_sync = always_sync
        self.component = component
        self.counters = Counters()
        self._prefetched: deque[tuple[str, FlowFile]] = deque()
        self._next_input = 0
        #: destination -> what it last said of its back pressure (an offer's answer, a wait's)
        self._states: dict[str, Any] = {}
        self.overlap_delivery = overlap_delivery
        self._delivery: Delivery | None = None
        #: why the flow needs a repair from the log, once something this task did was decided
        #: but not carried out (a delivery that failed, a requeue lost)
        self.lost: str | None = None
        #: load-balanced destination -> its ``Partitioner`` (a flow on several nodes)
        self.partitioners = dict(partitioners or {})
        #: whether the task waits while a destination is full (a load-balance sender does not: its
        #: only destination is where data that cannot reach its node falls back to, and waiting on it
        #: would stop the sender that drains the very partition it would fall back into)
        self.back_pressure = back_pressure
        #: what the task's trigger may take after a process death, and the record of what it holds
        #: (``flowactors.engine.process_deaths``; set by the executor that hosts the task)
        self.guard: DeathGuard | None = None

    @property
    def commits(self) -> int:
        return self.counters.commits

    # ------------------------------------------------------------------ input
    def prefetch(self, max_count: int, wait: float) -> bool:
        """Fill the local buffer from the inputs (waiting up to ``wait`` on the last one looked
        at; inputs are taken in turn); True if anything is there. A delivery under way is
        finished before waiting."""
        if self._prefetched:
            return True
        if self._delivery is not None and wait > 0:
            if self._poll_inputs(max_count, 0.0):
                return True
            self.finish_delivery()
        return self._poll_inputs(max_count, wait)

    def _poll_inputs(self, max_count: int, wait: float) -> bool:
        inputs = self.inputs
        for attempt in range(len(inputs)):
            queue_id = inputs[(self._next_input + attempt) % len(inputs)]
            last = attempt == len(inputs) - 1
            taken, expired = call_now(self.queues[queue_id], QueueHost.poll, max_count, wait if last else 0.0)
            if expired:
                self._expire(queue_id, expired)
            if taken:
                self._next_input = (self._next_input + attempt + 1) % len(inputs)
                self._prefetched.extend((queue_id, f) for f in taken)
                return True
        return False

    def poll(self, max_count: int) -> list[tuple[str, FlowFile]]:
        if not self._prefetched and self.inputs:
            self.prefetch(max_count, 0.0)
        if self.guard is not None:
            return self.guard.take(self._prefetched, max_count)
        count = min(max_count, len(self._prefetched))
        return [self._prefetched.popleft() for _ in range(count)]

    def head_set_aside(self) -> FlowFile | None:
        """The next FlowFile to take if the guard says it is to be set aside, else None."""
        return self.guard.head_set_aside(self._prefetched) if self.guard is not None else None

    def return_prefetched(self) -> None:
        """Give back FlowFiles fetched but never handed to a session (on stop)."""
        returned: dict[str, list[FlowFile]] = {}
        while self._prefetched:
            queue_id, flowfile = self._prefetched.popleft()
            returned.setdefault(queue_id, FlowFileBatch()).append(flowfile)
        if returned:
            self.requeue(returned)

    def _expire(self, queue_id: str, expired: list[FlowFile]) -> None:
        component_id, name, type_name = self.component
        events = [event_fields(ProvenanceEvent(
            event_type=ProvenanceEventType.EXPIRE, timestamp=now_millis(), flowfile_uuid=f.uuid,
            component_id=component_id, component_name=name, component_type=type_name,
            lineage_start_date=f.lineage_start_date, previous_attributes=f.attributes, updated_attributes=f.attributes,
            previous_claim=f.claim, updated_claim=f.claim, previous_size=f.size, updated_size=f.size,
            source_queue_id=queue_id, details="Expiration threshold met")) for f in expired]
        self.commit(CommitBatch(removals=[f.uuid for f in expired], events=events,
                                acknowledgements={queue_id: [f.uuid for f in expired]}))
        self.counters.expired += len(expired)

    # ------------------------------------------------------------------ output
    def destinations(self, relationship: str) -> list[str]:
        return self._destinations.get(relationship, [])

    def next_ids(self, count: int) -> int:
        return self.log.reserve_ids(count)

    # ------------------------------------------------------------------ processor state
    def get_state(self, component_id: str) -> StateMap:
        return self.log.get_state(component_id)

    def commit_state(self, change: StateChange) -> None:
        """A state change outside a session (``on_scheduled``, ``on_stopped``): a commit of its own."""
        self.log.record(CommitBatch(state=change))

    def commit(self, batch: CommitBatch) -> None:
        if self.partitioners:  # each FlowFile to its node's partition, before the log records it
            partition_batch(batch, self.partitioners)
        self.log.record(batch)  # CommitError: nothing happened
        # decided: from here on nothing is rolled back (see the module's docstring)
        try:
            self.finish_delivery()  # the commit before this one's, if still under way
            self._deliver(batch)
        except DeliveryError:
            raise
        except Exception as err:
            raise self._delivery_failed(err) from err
        finally:
            c = self.counters
            c.commits += 1
            c.flowfiles_in += sum(len(u) for u in batch.acknowledgements.values())
            c.flowfiles_out += len(batch.updates)
            c.bytes_read += batch.bytes_read
            c.bytes_written += batch.bytes_written

    def _deliver(self, batch: CommitBatch) -> None:
        offers = batch.offers
        delivery = Delivery(offers, [self.queues[q].call(QueueHost.offer, flowfiles) for q, flowfiles in offers.items()],
                            batch.acknowledgements)
        if self.overlap_delivery and (offers or batch.acknowledgements):
            self._delivery = delivery
        else:
            self._complete(delivery)

    def _complete(self, delivery: Delivery) -> None:
        # offered downstream before acknowledged upstream: a FlowFile is always counted in some
        # queue, so nobody can see the flow idle while records are between two queues
        self._states.update(zip(delivery.offers, resolve(delivery.pending)))
        resolve([self.queues[q].call(QueueHost.acknowledge, u) for q, u in delivery.acknowledgements.items()])

    @property
    def delivering(self) -> bool:
        """Whether a decided commit's offers or acknowledgements are still on their way."""
        return self._delivery is not None

    def finish_delivery(self) -> None:
        """Wait for the delivery under way, if any, and acknowledge its input; ``DeliveryError``
        (a repair is due) if that fails."""
        delivery = self._delivery
        if delivery is None:
            return
        try:
            self._complete(delivery)
        except Exception as err:
            raise self._delivery_failed(err) from err
        finally:
            self._delivery = None

    def _delivery_failed(self, err: Exception) -> DeliveryError:
        self.lost = f"delivering a commit failed: {type(err).__name__}: {err}"
        return DeliveryError(
            f"the commit is in the write-ahead log, but delivering it failed ({type(err).__name__}: "
            f"{err}); nothing was rolled back, and the flow is repaired from the log")

    def _may_fill(self, delivery: Delivery) -> bool:
        """Whether the offers on their way may put a destination under back pressure (from the
        room it last reported; content sizes are added up only where the count leaves room)."""
        for queue_id, flowfiles in delivery.offers.items():
            state = self._states.get(queue_id)
            if (state is None or len(flowfiles) >= state.room_objects
                    or total_size(flowfiles) >= state.room_bytes):
                return True
        return False

    def after_commit(self, on_success: Callable[[], None] | None,
                     on_failure: Callable[[BaseException], None] | None) -> None:
        """The log has the commit: it is durable, so ``on_success`` runs now."""
        if on_success is not None:
            on_success()

    def requeue(self, returned: dict[str, list[FlowFile]]) -> None:
        try:
            resolve([self.queues[q].call(QueueHost.requeue, f) for q, f in returned.items()])
        except Exception as err:
            if component_lost(err):  # the queue is gone; the log still has them where they were
                self.lost = f"giving FlowFiles back to their queue failed: {type(err).__name__}: {err}"
            raise

    # ------------------------------------------------------------------ back pressure
    def full_destinations(self) -> list[str]:
        """The destinations under back pressure; a delivery under way that may fill one is
        finished first, so the answer is never more than one commit behind."""
        if self._delivery is not None and self._may_fill(self._delivery):
            self.finish_delivery()
        if not self.back_pressure:
            return []
        return [q for q, state in self._states.items() if state.full]

    def wait_for_space(self, wait: float) -> bool:
        """Wait until no destination is full; True when there is room again."""
        self.finish_delivery()
        for queue_id in self.full_destinations():
            self._states[queue_id] = call_now(self.queues[queue_id], QueueHost.wait_not_full, wait)
        return not self.full_destinations()
