"""A connection's queue: FlowFile records waiting between two processors, and its Ray actor.

The queue holds records only (content stays in claim files). A FlowFile handed to a consumer stays
counted as *in flight* until the consumer's session acknowledges it (commit) or returns it
(rollback), so back pressure and "is the flow idle" both see it, as NiFi's unacknowledged count does.
Back pressure thresholds are soft: a session may overshoot them by its batch.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence

import ray

from repositories.model import FlowFile, now_millis


class QueueState(NamedTuple):
    """What a producer needs after an offer: how full the queue is."""

    count: int
    size: int
    full: bool


@dataclass(frozen=True)
class QueueConfig:
    queue_id: str
    back_pressure_objects: int = 10_000
    back_pressure_bytes: int = 1024**3
    expiration_ms: int = 0
    prioritizers: tuple[str, ...] = ()


def _priority_value(flowfile: FlowFile) -> tuple:
    """PriorityAttribute: numbers first (ascending), then strings, then FlowFiles without one."""
    value = flowfile.attributes.get("priority")
    if value is None:
        return (2, 0, "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0, value)


_PRIORITIZER_KEYS: dict[str, Callable[[FlowFile], tuple]] = {
    "FIFO": lambda f: (f.queue_date, f.queue_index),
    "OldestFlowFileFirst": lambda f: (f.lineage_start_date, f.entry_date),
    "NewestFlowFileFirst": lambda f: (-f.lineage_start_date, -f.entry_date),
    "PriorityAttribute": lambda f: _priority_value(f),
}


def prioritizer_key(names: Sequence[str]) -> Callable[[FlowFile], tuple]:
    """The sort key for a list of prioritizers, applied in order, FIFO breaking ties."""
    keys = [_PRIORITIZER_KEYS[n] for n in names] + [_PRIORITIZER_KEYS["FIFO"], lambda f: (f.id,)]
    return lambda f: tuple(itertools.chain.from_iterable(k(f) for k in keys))


class ConnectionQueue:
    """The queue's logic, free of Ray so it can be unit-tested and reused by the stateless engine."""

    def __init__(self, config: QueueConfig):
        self.config = config
        self._key = prioritizer_key(config.prioritizers) if config.prioritizers else None
        self._fifo: deque[FlowFile] = deque()
        self._heap: list[tuple[tuple, int, FlowFile]] = []
        self._penalized: list[tuple[int, int, FlowFile]] = []
        self._counter = itertools.count()
        self._in_flight: dict[str, FlowFile] = {}
        self.count = 0
        self.size = 0
        self.total_in = 0
        self.total_out = 0

    # ------------------------------------------------------------------ state
    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def queued(self) -> int:
        return self.count - len(self._in_flight)

    def is_full(self) -> bool:
        c = self.config
        return (0 < c.back_pressure_objects <= self.count) or (0 < c.back_pressure_bytes <= self.size)

    def state(self) -> QueueState:
        return QueueState(self.count, self.size, self.is_full())

    # ------------------------------------------------------------------ producers
    def offer(self, flowfiles: Iterable[FlowFile]) -> QueueState:
        for flowfile in flowfiles:
            self._push(flowfile)
            self.count += 1
            self.size += flowfile.size
            self.total_in += 1
        return self.state()

    def _push(self, flowfile: FlowFile) -> None:
        if flowfile.penalized_until > 0 and flowfile.penalized_until > now_millis():
            heapq.heappush(self._penalized, (flowfile.penalized_until, next(self._counter), flowfile))
        elif self._key is None:
            self._fifo.append(flowfile)
        else:
            heapq.heappush(self._heap, (self._key(flowfile), next(self._counter), flowfile))

    # ------------------------------------------------------------------ consumers
    def poll(self, max_count: int) -> tuple[list[FlowFile], list[FlowFile]]:
        """Up to ``max_count`` FlowFiles in priority order, and the ones that expired meanwhile.

        Both are in flight until acknowledged; expired ones are for the caller to record as EXPIRE.
        """
        now = now_millis()
        while self._penalized and self._penalized[0][0] <= now:
            flowfile = heapq.heappop(self._penalized)[2]._replace(penalized_until=0)
            self._push(flowfile)
        taken: list[FlowFile] = []
        expired: list[FlowFile] = []
        expiry = self.config.expiration_ms
        while len(taken) < max_count:
            flowfile = self._pop()
            if flowfile is None:
                break
            self._in_flight[flowfile.uuid] = flowfile
            if expiry and now - flowfile.entry_date > expiry:
                expired.append(flowfile)
            else:
                taken.append(flowfile)
        return taken, expired

    def _pop(self) -> FlowFile | None:
        if self._key is None:
            return self._fifo.popleft() if self._fifo else None
        return heapq.heappop(self._heap)[2] if self._heap else None

    def acknowledge(self, uuids: Iterable[str]) -> QueueState:
        """The consumer committed: these FlowFiles have left the queue for good."""
        for uuid in uuids:
            flowfile = self._in_flight.pop(uuid, None)
            if flowfile is not None:
                self.count -= 1
                self.size -= flowfile.size
                self.total_out += 1
        return self.state()

    def requeue(self, flowfiles: Iterable[FlowFile]) -> QueueState:
        """The consumer rolled back: the FlowFiles go back where their priority puts them."""
        returned = []
        for flowfile in flowfiles:
            if self._in_flight.pop(flowfile.uuid, None) is not None:
                returned.append(flowfile)
        if self._key is None:
            penalized = [f for f in returned if f.penalized_until > now_millis()]
            for flowfile in penalized:
                self._push(flowfile)
            ready = [f for f in returned if f.penalized_until <= now_millis()]
            self._fifo.extendleft(reversed(ready))
        else:
            for flowfile in returned:
                self._push(flowfile)
        return self.state()

    def listing(self, limit: int) -> list[FlowFile]:
        """The first ``limit`` queued FlowFiles in the order they would be taken (not in flight)."""
        if self._key is None:
            ready = list(itertools.islice(self._fifo, limit))
        else:
            ready = [entry[2] for entry in heapq.nsmallest(limit, self._heap)]
        penalized = [entry[2] for entry in heapq.nsmallest(limit, self._penalized)]
        return (ready + penalized)[:limit]

    def drain(self) -> list[FlowFile]:
        """Take every queued FlowFile (not those in flight) out, e.g. to empty the queue."""
        drained = list(self._fifo) + [e[2] for e in self._heap] + [e[2] for e in self._penalized]
        self._fifo.clear()
        self._heap.clear()
        self._penalized.clear()
        for flowfile in drained:
            self._in_flight[flowfile.uuid] = flowfile
        return drained

    def status(self) -> dict:
        return {
            "id": self.config.queue_id, "queued": self.queued, "in_flight": self.in_flight,
            "count": self.count, "bytes": self.size, "back_pressure": self.is_full(),
            "penalized": len(self._penalized), "total_in": self.total_in, "total_out": self.total_out,
        }


@ray.remote(num_cpus=0)
class QueueActor:
    """The Ray actor of one connection. Async, so a consumer can wait for data without spinning."""

    def __init__(self, config: QueueConfig):
        self.queue = ConnectionQueue(config)
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def offer(self, flowfiles: list[FlowFile]) -> QueueState:
        state = self.queue.offer(flowfiles)
        self._notify()
        return state

    async def restore(self, flowfiles: list[FlowFile]) -> QueueState:
        """Recovery: FlowFiles read back from the write-ahead log, in their order."""
        return await self.offer(flowfiles)

    async def poll(self, max_count: int, wait: float = 0.0) -> tuple[list[FlowFile], list[FlowFile]]:
        taken, expired = self.queue.poll(max_count)
        if not taken and not expired and wait > 0:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass
            taken, expired = self.queue.poll(max_count)
        return taken, expired

    async def acknowledge(self, uuids: list[str]) -> QueueState:
        state = self.queue.acknowledge(uuids)
        self._notify()
        return state

    async def requeue(self, flowfiles: list[FlowFile]) -> QueueState:
        state = self.queue.requeue(flowfiles)
        self._notify()
        return state

    async def wait_not_full(self, wait: float) -> QueueState:
        """Return once the queue is below its back pressure thresholds, or after ``wait`` seconds."""
        deadline = asyncio.get_running_loop().time() + wait
        while self.queue.is_full():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=remaining)
            except asyncio.TimeoutError:
                break
        return self.queue.state()

    async def state(self) -> QueueState:
        return self.queue.state()

    async def status(self) -> dict:
        return self.queue.status()

    async def listing(self, limit: int) -> list[FlowFile]:
        return self.queue.listing(limit)

    async def drain(self) -> list[FlowFile]:
        return self.queue.drain()
