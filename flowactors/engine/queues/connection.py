"""A connection's queue: FlowFile records waiting between two processors, and its Ray actor.

The queue holds records only (content stays in claim files). A FlowFile handed to a consumer stays
counted as *in flight* until the consumer's session acknowledges it (commit) or returns it
(rollback), so back pressure and "is the flow idle" both see it, as NiFi's unacknowledged count does.
Back pressure thresholds are soft: a session may overshoot them by its batch.

Swapping (NiFi's ``nifi.queue.swap.threshold``). A queue keeps at most about ``swap_threshold``
FlowFiles in memory; past it, it writes its *lowest-priority* FlowFiles to swap files,
``swap_batch_size`` per file, registers each file with the FlowFile repository (whose same
transaction moves those records to queue ``swap:<location>``) and forgets them. Counts, sizes and
back pressure include swapped FlowFiles. Memory stays near threshold + two batches.

Ordering guarantee, swapping included (NiFi only orders what is in memory, NIFI-7583):

* FIFO (no prioritizer, or only ``FIFO``): FlowFiles leave in the order they arrived in this queue.
  Once anything is swapped out, arrivals wait behind the swapped data (the *tail*); swap files
  hold consecutive stretches of arrivals and come back oldest first.
* With prioritizers: every poll returns the highest-priority FlowFiles of all that are queued,
  in memory or swapped. Each swap file is a run sorted by priority; the queue keeps each run's
  next FlowFile and merges the runs with memory (an external merge sort), reading a run a few
  entries at a time when many runs overlap, so memory stays bounded whatever the priorities.
  Ties are broken by the time the FlowFile entered the queue (``queue_date``, ``queue_index``).
* Penalized FlowFiles are set aside when they reach the head, so they do not block the others;
  at most one batch is set aside at a time (beyond that the queue waits for penalties to end).
* After a restart: FIFO order is the log's order (``queue_date``, ``queue_index``, id); priority
  order is exact as above.

The pure logic is ``QueuePartition`` (one node's share of a connection; a connection holds one
local partition now, one per node once load balancing exists) and ``ConnectionQueue``; the I/O of
swapping is ``Swapper``; ``QueueHost`` is the queue as a process hosts it (an executor, or
``QueueActor``, an actor of its own).
"""

from __future__ import annotations

import asyncio
import os
from uuid import uuid4
from dataclasses import dataclass
from pathlib import Path
from itertools import repeat
from operator import itemgetter
from typing import Any, Iterable

import ray

from flowactors.engine import ACTOR_RESTARTS, gc_policy
from flowactors.engine.metrics import QueueMetrics
from flowactors.engine.repository_services import FlowFileRepositoryService
from flowactors.engine.transport import Link, call_now, resolve
from flowactors.sdk.units import parse_data_size, parse_duration
from flowactors.engine.queues.partition import (QueuePartition, SwapRun, check_prioritizers, fifo_key,
                                                prioritizer_key)
from flowactors.engine.queues.swapping import LinkedSwapRegistry, LocalSwapRegistry, Swapper, SwapRegistry
from repositories.flowfile import swapfile
from repositories.flowfile.records import SWAP_QUEUE_PREFIX
from repositories.model import FlowFile, now_millis, total_size

_uuid_of = itemgetter(1)

__all__ = ["LinkedSwapRegistry", "ConnectionQueue", "LocalSwapRegistry", "QueueActor", "QueueConfig",
           "QueueHost", "QueuePartition", "QueueState", "SwapRegistry", "SwapRun", "Swapper", "fifo_key",
           "prioritizer_key", "restore_queues", "unknown_queues"]


#: ``QueueState``'s room when a back pressure threshold is off
UNBOUNDED = 1 << 62


@dataclass(slots=True)   # not frozen: one is made and pickled per offer, and frozen doubles both
class QueueState:
    """What a producer needs after an offer: how full the queue is, as how many more FlowFiles
    and bytes it takes before back pressure (so a producer whose offer is still on its way can
    tell whether that offer may fill it: ``EngineBackend``). Never changed once made."""

    count: int
    size: int
    room_objects: int
    room_bytes: int

    @property
    def full(self) -> bool:
        return self.room_objects <= 0 or self.room_bytes <= 0


@dataclass(frozen=True)
class QueueConfig:
    queue_id: str
    back_pressure_objects: int = 10_000
    back_pressure_bytes: int = 1024**3
    expiration_ms: int = 0
    prioritizers: tuple[str, ...] = ()
    #: FlowFiles kept in memory before the lowest-priority ones go to swap files (0: never swap)
    swap_threshold: int = 20_000
    #: FlowFiles per swap file
    swap_batch_size: int = 10_000
    #: fsync each swap file before registering it (``Settings.always_sync``)
    sync_swap_files: bool = False
    #: name of the local partition (the node's share of the connection)
    partition: str = "local"
    #: the flow's name, for the queue's metrics tags (``flowactors.engine.metrics``)
    flow: str = ""

    @classmethod
    def for_connection(cls, connection: Any, settings: Any, flow: str = "") -> "QueueConfig":
        """A flow's connection (``flowactors.sdk.flow.Connection``) as its queue runs it: its own
        thresholds, expiration and prioritizers, the flow's settings for the rest."""
        s = settings
        return cls(
            queue_id=connection.id,
            back_pressure_objects=(connection.back_pressure_object_threshold
                                   if connection.back_pressure_object_threshold is not None
                                   else s.back_pressure_object_threshold),
            back_pressure_bytes=(parse_data_size(connection.back_pressure_data_size_threshold)
                                 if connection.back_pressure_data_size_threshold is not None
                                 else s.back_pressure_data_size_threshold),
            expiration_ms=int(parse_duration(connection.flowfile_expiration) * 1000),
            prioritizers=tuple(connection.prioritizers), swap_threshold=s.swap_threshold,
            swap_batch_size=s.swap_batch_size, sync_swap_files=s.always_sync, flow=flow)


# ---------------------------------------------------------------------------------- the queue


class ConnectionQueue:
    """The queue's logic, free of Ray and of I/O, so it can be unit-tested and reused by the
    stateless engine. Without ``swapping`` it never swaps (in-process runners)."""

    def __init__(self, config: QueueConfig, *, swapping: bool = False):
        self.config = config
        check_prioritizers(config.prioritizers)
        ordered = any(n != "FIFO" for n in config.prioritizers)
        key = prioritizer_key(config.prioritizers) if ordered else None
        threshold = config.swap_threshold if swapping and config.swap_threshold > 0 else None
        self.local = QueuePartition(config.partition, key, threshold, config.swap_batch_size)
        self.partitions: dict[str, QueuePartition] = {self.local.name: self.local}
        self._in_flight: dict[str, FlowFile] = {}
        self._in_flight_bytes = 0
        self.total_in = 0
        self.total_out = 0
        self.total_bytes_in = 0  # content bytes taken in so far: the live view's bytes/s

    # ------------------------------------------------------------------ state
    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def queued(self) -> int:
        return sum(p.count for p in self.partitions.values())

    @property
    def count(self) -> int:
        return self.queued + len(self._in_flight)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions.values()) + self._in_flight_bytes

    def is_full(self) -> bool:
        return self.state().full

    def state(self) -> QueueState:
        c = self.config
        count, size = self.count, self.size
        return QueueState(count, size, c.back_pressure_objects - count if c.back_pressure_objects > 0 else UNBOUNDED,
                          c.back_pressure_bytes - size if c.back_pressure_bytes > 0 else UNBOUNDED)

    # ------------------------------------------------------------------ producers
    def offer(self, flowfiles: Iterable[FlowFile]) -> QueueState:
        before = self.local.size
        self.total_in += self.local.add_all(flowfiles)
        self.total_bytes_in += self.local.size - before
        return self.state()

    def restore(self, flowfiles: Iterable[FlowFile]) -> QueueState:
        """Recovery: FlowFiles read back from the write-ahead log, in its order."""
        self.local.restore(flowfiles)
        return self.state()

    # ------------------------------------------------------------------ consumers
    def _mark(self, flowfiles: list[FlowFile]) -> None:
        self._in_flight.update(zip(map(_uuid_of, flowfiles), flowfiles))
        self._in_flight_bytes += total_size(flowfiles)

    def poll(self, max_count: int) -> tuple[list[FlowFile], list[FlowFile]]:
        """Up to ``max_count`` FlowFiles in priority order, and the ones that expired meanwhile
        (together at most ``max_count``), from memory.

        Both are in flight until acknowledged; expired ones are for the caller to record as EXPIRE.
        """
        taken, expired = self.local.take(max_count, now_millis(), self.config.expiration_ms)
        self._mark(taken)
        self._mark(expired)
        return taken, expired

    def acknowledge(self, uuids: Iterable[str]) -> QueueState:
        """The consumer committed: these FlowFiles have left the queue for good."""
        gone = [f for f in map(self._in_flight.pop, uuids, repeat(None)) if f is not None]
        self._in_flight_bytes -= total_size(gone)
        self.total_out += len(gone)
        return self.state()

    def requeue(self, flowfiles: Iterable[FlowFile]) -> QueueState:
        """The consumer rolled back: the FlowFiles go back where their priority puts them."""
        returned = []
        for flowfile in flowfiles:
            previous = self._in_flight.pop(flowfile.uuid, None)
            if previous is not None:
                self._in_flight_bytes -= previous.size
                returned.append(flowfile)
        if returned:
            self.local.requeue(returned)
        return self.state()

    def take_for_drop(self, max_count: int) -> list[FlowFile]:
        """Up to ``max_count`` queued FlowFiles from memory, in flight from now on (to be dropped)."""
        out = self.local.take_any(max_count)
        self._mark(out)
        return out

    def listing(self, limit: int) -> list[FlowFile]:
        """The first ``limit`` queued FlowFiles in memory in the order they would be taken, then
        the penalized ones set aside (swapped ones: ``QueueActor.list_flowfiles``)."""
        head, tail, penalized = self.local.memory_listing(limit)
        return (head + tail + penalized)[:limit]

    def status(self) -> dict:
        p = self.local
        return {
            "id": self.config.queue_id, "queued": self.queued, "in_flight": self.in_flight,
            "count": self.count, "bytes": self.size, "back_pressure": self.is_full(),
            "penalized": p.penalized_count(now_millis()), "total_in": self.total_in, "total_out": self.total_out,
            "bytes_in": self.total_bytes_in, "in_memory": p.memory, "swapped": p.swapped, "swapped_bytes": p.swapped_bytes,
            "swap_files": p.run_count,
        }


# ---------------------------------------------------------------------------------- the actor


class QueueHost:
    """One connection's queue as a process hosts it: in an executor beside its consumer, or in an
    actor of its own (``QueueActor``). Async, so a consumer can wait for data without spinning, and
    so swap files are written and registered while producers and consumers carry on.

    Swapping is on when ``repository`` (the flow's repository folder; swap files go to
    ``<repository>/flowfile/swap``) and ``flowfile_repository`` (a link to the flow's
    ``FlowFileRepositoryService``, which keeps the registry) are given."""

    def __init__(self, config: QueueConfig, repository: str | None = None, flowfile_repository: Any = None):
        gc_policy.tune_own_process()
        self.config = config
        self.repository = repository
        self.flowfile_repository = flowfile_repository
        self.incarnation = uuid4().hex  # a new one each time the process builds it (``health``)
        self._empty()

    def _empty(self) -> None:
        """The queue with nothing in it (at construction, and again at a repair's ``reset``)."""
        repository = self.repository if self.flowfile_repository is not None else None  # swapping needs both
        self.queue = ConnectionQueue(self.config, swapping=repository is not None)
        self.swapper = (Swapper(self.queue, swapfile.swap_directory(repository),
                                LinkedSwapRegistry(self.flowfile_repository)) if repository is not None else None)
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.metrics = QueueMetrics(self.config.flow, self.config.queue_id)
        self.metrics.publish(self.queue.status())

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        self.metrics.changed(self.queue.status)  # throttled gauges, always ending on the latest state

    # ------------------------------------------------------------------ swapping in the background
    def _kick(self) -> None:
        if self.swapper is None or (self._task is not None and not self._task.done()):
            return
        if self.swapper.has_work():
            self._task = asyncio.get_running_loop().create_task(self._maintain())

    async def _maintain(self) -> None:
        assert self.swapper is not None  # ``_kick`` starts this only with a swapper
        await self.swapper.maintain()
        self._notify()

    # ------------------------------------------------------------------ producers
    async def offer(self, flowfiles: list[FlowFile]) -> QueueState:
        self.queue.offer(flowfiles)
        self._notify()
        if self.swapper is not None:
            await self.swapper.hold_memory()
        self._kick()
        return self.queue.state()

    async def restore(self, flowfiles: list[FlowFile]) -> QueueState:
        """Recovery: FlowFiles read back from the write-ahead log, in its order."""
        self.queue.restore(flowfiles)
        self._notify()
        if self.swapper is not None:
            await self.swapper.hold_memory()
        self._kick()
        return self.queue.state()

    async def restore_from_log(self, count: int, size: int) -> bool:
        """Recovery without reading the log through (``Swapper.adopt_log``): this queue's ``count``
        FlowFiles in the log stay there and are paged in when their turn comes. False when they
        must be streamed in instead (``restore``): a queue with prioritizers (the log's order is
        not its order), without swapping, or with swap files."""
        if self.swapper is None or self.queue.local.key is not None or self.queue.local.threshold is None:
            return False
        if not await self.swapper.adopt_log(self.queue.local, count, size):
            return False
        self._notify()
        self._kick()  # reads the first batch ahead, in the background
        return True

    async def add_swap_files(self, entries: list[dict]) -> dict:
        """Recovery: this queue's registered swap files (see ``Swapper.adopt``), before ``restore``."""
        if self.swapper is None:
            raise RuntimeError(f"queue {self.queue.config.queue_id} was started without swapping "
                               f"but the FlowFile repository lists swap files for it")
        return await self.swapper.adopt(self.queue.local, entries)

    # ------------------------------------------------------------------ consumers
    async def _take(self, max_count: int) -> tuple[list[FlowFile], list[FlowFile]]:
        if self.swapper is None:
            return self.queue.poll(max_count)
        return await self.swapper.poll(max_count)

    async def poll(self, max_count: int, wait: float = 0.0) -> tuple[list[FlowFile], list[FlowFile]]:
        taken, expired = await self._take(max_count)
        if not taken and not expired and wait > 0:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass
            taken, expired = await self._take(max_count)
        self._kick()
        return taken, expired   # FlowFileBatches (``QueuePartition.take``): columns when the caller is elsewhere

    async def acknowledge(self, uuids: list[str]) -> QueueState:
        state = self.queue.acknowledge(uuids)
        self._notify()
        return state

    async def requeue(self, flowfiles: list[FlowFile]) -> QueueState:
        state = self.queue.requeue(flowfiles)
        self._notify()
        self._kick()
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

    # ------------------------------------------------------------------ operations
    async def take_for_drop(self, max_count: int) -> list[FlowFile]:
        """Up to ``max_count`` queued FlowFiles (swapped ones read back), now in flight, for the
        caller to remove from the log and record as dropped, then ``acknowledge``."""
        if self.swapper is None:
            return self.queue.take_for_drop(max_count)
        return await self.swapper.take_for_drop(max_count)

    async def list_flowfiles(self, limit: int) -> list[tuple[FlowFile, bool]]:
        """The first ``limit`` queued FlowFiles in the order they would leave, and whether swapped."""
        if self.swapper is None:
            return [(f, False) for f in self.queue.listing(limit)]
        return await self.swapper.listing(self.queue.local, limit)

    async def listing(self, limit: int) -> list[FlowFile]:
        return [f for f, _swapped in await self.list_flowfiles(limit)]

    async def settle(self) -> dict:
        """Wait for background swapping to finish (tests, benchmarks); returns the status."""
        while self._task is not None and not self._task.done():
            await self._task
            self._kick()
        return await self.status()

    async def state(self) -> QueueState:
        return self.queue.state()

    async def status(self) -> dict:
        status = {**self.queue.status(), "incarnation": self.incarnation}
        if self.swapper is not None:
            status.update(self.swapper.status())
        return status

    async def pid(self) -> int:
        """The actor's process id (for memory measurements)."""
        return os.getpid()

    async def health(self) -> dict:
        """As ``Executor.health``, for a queue in an actor of its own."""
        return {"incarnation": self.incarnation, "lost": []}

    async def reset(self) -> None:
        """A repair: swapping in flight finishes (a swap file registered later would be one nobody
        adopts), then the queue is emptied, to be refilled from the log (``FlowController.repair``)."""
        try:
            await asyncio.wait_for(self.settle(), 30)
        except Exception:  # the log is out of reach: its records stay where they were
            pass
        self._empty()


@ray.remote(num_cpus=0, max_restarts=ACTOR_RESTARTS)
class QueueActor(QueueHost):
    """A connection's queue in an actor of its own (the isolated placement, tests, benchmarks)."""


# ---------------------------------------------------------------------------------- start-up


def restore_queues(flowfile_repository: Link, queues: dict[str, Link], repository: str | Path,
                   batch_size: int = 10_000) -> dict:
    """Refill the queues from the log at start-up (or after a restart), in this order: delete swap
    files the log does not list (NIFI-5997), hand each queue its registered swap files (kept on
    disk, counted), then give each queue the FlowFiles the log holds for it: a FIFO queue takes
    them over where they are, paging them in when their turn comes (``QueueHost.restore_from_log``:
    a queue of a million is back in service without reading a million records); a prioritized
    one is streamed its records in log order. ``flowfile_repository`` and ``queues`` are links
    (``flowactors.engine.transport``), wherever they were placed."""
    swap_files, sizes = resolve([flowfile_repository.call(FlowFileRepositoryService.swap_files), flowfile_repository.call(FlowFileRepositoryService.queue_sizes)])
    removed = swapfile.remove_orphans(swapfile.swap_directory(repository), {e["location"] for e in swap_files})
    by_queue: dict[str, list[dict]] = {}
    for entry in swap_files:
        count, size = sizes.get(SWAP_QUEUE_PREFIX + entry["location"], (0, 0))
        by_queue.setdefault(entry["queue"], []).append({**entry, "remaining": count, "remaining_size": size})
    missing = sorted(set(by_queue) - set(queues))
    if missing:
        raise ValueError(f"the FlowFile repository lists swap files for queues this flow does not have: {missing}")
    adopted = resolve([queues[q].call(QueueHost.add_swap_files, entries) for q, entries in by_queue.items()])
    restored = paged = 0
    for queue_id, link in queues.items():
        count, size = sizes.get(queue_id, (0, 0))
        if count == 0:
            continue
        if call_now(link, QueueHost.restore_from_log, count, size):
            restored += count
            paged += count
            continue
        cursor = None
        while True:
            flowfiles, cursor = call_now(flowfile_repository, FlowFileRepositoryService.page, queue_id, cursor, None, batch_size)
            call_now(link, QueueHost.restore, flowfiles)
            restored += len(flowfiles)
            if cursor is None:
                break
    return {
        "restored": restored,
        "paged": paged,
        "swap_files": sum(a["swap_files"] for a in adopted),
        "swapped": sum(e["remaining"] for entries in by_queue.values() for e in entries),
        "swap_files_from_log": sum(a["from_log"] for a in adopted),
        "orphan_swap_files_removed": removed,
    }


def unknown_queues(recovery: dict, connections: set[str]) -> dict[str, int]:
    """Queue ids the log holds FlowFiles for (swapped ones counted for the queue that swapped
    them) that are not among ``connections``, with their counts; from ``FlowFileRepositoryService.open``."""
    unknown: dict[str, int] = {}
    for queue, count in recovery.get("queues", {}).items():
        if not queue.startswith(SWAP_QUEUE_PREFIX) and queue not in connections:
            unknown[queue] = unknown.get(queue, 0) + count
    for entry in recovery.get("swap_files", []):
        if entry["queue"] not in connections:
            unknown[entry["queue"]] = unknown.get(entry["queue"], 0) + entry["count"]
    return unknown
