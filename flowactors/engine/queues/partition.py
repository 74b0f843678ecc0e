"""One node's share of a connection's queue: FlowFiles in memory, in swap files, set aside penalized.

``QueuePartition`` is pure bookkeeping, without I/O or Ray, so every ordering rule can be tested
directly: which FlowFiles leave next, which go to a swap file, which swap file must be read before
the next FlowFile may leave. ``flowactors.engine.queues.swapping.Swapper`` does the I/O it asks for.
The ordering guarantee is described in ``flowactors.engine.queues.connection``.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from operator import itemgetter
from typing import Callable, Iterable, Sequence

from repositories.model import FlowFile, FlowFileBatch, total_size

_entry_date, _penalized_until = itemgetter(4), itemgetter(6)


# ---------------------------------------------------------------------------------- prioritizers


def _priority_value(flowfile: FlowFile) -> tuple:
    """PriorityAttribute: numbers first (ascending), then strings, then FlowFiles without one.

    "nan" and "inf" count as strings: a NaN would make the order (and the heaps) inconsistent."""
    value = flowfile.attributes.get("priority")
    if value is None:
        return (2, 0.0, "")
    try:
        number = float(value)
    except ValueError:
        return (1, 0.0, value)
    return (0, number, "") if math.isfinite(number) else (1, 0.0, value)


_PRIORITIZER_KEYS: dict[str, Callable[[FlowFile], tuple]] = {
    "FIFO": lambda f: (f.queue_date, f.queue_index),
    "OldestFlowFileFirst": lambda f: (f.lineage_start_date, f.entry_date),
    "NewestFlowFileFirst": lambda f: (-f.lineage_start_date, -f.entry_date),
    "PriorityAttribute": _priority_value,
}


def fifo_key(flowfile: FlowFile) -> tuple:
    """The log's order of a queue: when the FlowFile entered it, then its id."""
    return (flowfile.queue_date, flowfile.queue_index, flowfile.id)


def check_prioritizers(names: Sequence[str]) -> None:
    """Refuse unknown prioritizer names, listing the known ones."""
    unknown = [n for n in names if n not in _PRIORITIZER_KEYS]
    if unknown:
        raise ValueError(f"unknown prioritizer(s) {unknown}; known: {sorted(_PRIORITIZER_KEYS)}")


def prioritizer_key(names: Sequence[str]) -> Callable[[FlowFile], tuple]:
    """The sort key for a list of prioritizers, applied in order, FIFO and the id breaking ties."""
    check_prioritizers(names)
    keys = [_PRIORITIZER_KEYS[n] for n in names]

    def key(f: FlowFile) -> tuple:
        out: tuple = ()
        for k in keys:
            out += k(f)
        return out + (f.queue_date, f.queue_index, f.id)

    return key


def order_tag(prioritizers: Sequence[str]) -> str:
    """How a queue orders its swap files' entries: ``FIFO`` (arrival) or the prioritizers."""
    return "FIFO" if all(n == "FIFO" for n in prioritizers) else ",".join(prioritizers)


# ---------------------------------------------------------------------------------- partition


class SwapRun:
    """One swap file of a partition, as the queue keeps it in memory: where it is, how much of it
    is left, and the key of its next FlowFile (what the merge with memory needs)."""

    __slots__ = ("location", "remaining", "size", "offset", "index", "key", "registered",
                 "from_log", "ordered", "in_log", "start", "stop")

    def __init__(self, location: str, count: int, size: int, *, key: tuple = (),
                 registered: bool = True, from_log: bool = False, ordered: bool = True,
                 log_range: tuple[bytes | None, bytes] | None = None):
        self.location = location
        self.remaining = count
        self.size = size
        self.offset: int | None = None  # byte offset of the next unread entry (None: the first)
        self.index = 0                  # entries read so far
        self.key = key                  # key of the next unread FlowFile; () sorts before all
        self.registered = registered    # still in the FlowFile repository's swap registry
        self.from_log = from_log        # file unusable: read the records from the log instead
        self.ordered = ordered          # entries sorted by this queue's current order
        # a *log run*: no file; the FlowFiles are still the queue's own in the log, between these
        # order-index keys, paged in a batch at a time (restored at start-up or after a restart)
        self.in_log = log_range is not None
        self.start, self.stop = log_range or (None, b"")

    def __repr__(self) -> str:
        return f"SwapRun({self.location}, remaining={self.remaining})"


class QueuePartition:
    """The FlowFiles of one connection on one node: in memory, in swap files, set aside penalized.

    Pure bookkeeping without I/O: ``Swapper`` asks it what to swap out or in (``spill_plan``,
    ``urgent_run``/``prefetch_run``) and reports back (``spill_done``, ``loaded``). Counts here
    are of *queued* FlowFiles; in-flight ones belong to ``ConnectionQueue``. Each partition has
    its own swap threshold, so a connection can later hold one per node (load balancing)."""

    def __init__(self, name: str, key: Callable[[FlowFile], tuple] | None, threshold: int | None,
                 batch: int):
        self.name = name
        self.key = key                # None: arrival (FIFO) order
        self.threshold = threshold    # None: never swap
        self.batch = max(1, batch)
        self._active: deque[FlowFile] = deque()    # FIFO: in memory, oldest first
        self._tail: deque[FlowFile] = deque()      # FIFO: arrivals behind swapped data
        self._heap: list[tuple[tuple, int, FlowFile]] = []    # prioritized: in memory
        self._penalized: list[tuple[int, int, FlowFile]] = []  # reached the head while penalized
        self._fifo_runs: deque[SwapRun] = deque()               # FIFO: oldest first
        self._run_heap: list[tuple[tuple, int, SwapRun]] = []   # prioritized: by next key
        self._pending: dict[int, tuple[int, int, tuple | None]] = {}  # spills being written
        self._seq = itertools.count()
        self.memory = 0
        self.memory_bytes = 0
        self.swapped = 0
        self.swapped_bytes = 0
        # while log runs are paged in: the FIFO position of the last FlowFile they hold, and the
        # arrivals at or before it (only a wall clock stepped back makes any), which a page skips
        self.fence: tuple | None = None
        self.early: set[str] = set()

    # ------------------------------------------------------------------ counts
    @property
    def count(self) -> int:
        return self.memory + self.swapped

    @property
    def size(self) -> int:
        return self.memory_bytes + self.swapped_bytes

    def penalized_count(self, now: int) -> int:
        """Penalized FlowFiles in memory: set aside, or still waiting for their turn (a scan of
        memory, bounded by the threshold; swapped ones are not counted)."""
        waiting = sum(1 for f in itertools.chain(self._active, self._tail) if f.penalized_until > now)
        waiting += sum(1 for e in self._heap if e[2].penalized_until > now)
        return len(self._penalized) + waiting

    def runs(self) -> list[SwapRun]:
        """Swap runs in the order they come back (FIFO), or by their next key."""
        if self.key is None:
            return list(self._fifo_runs)
        return [entry[2] for entry in sorted(self._run_heap, key=lambda e: (e[0], e[1]))]

    @property
    def run_count(self) -> int:
        return len(self._fifo_runs) + len(self._run_heap)

    def _has_swapped(self) -> bool:
        return bool(self._fifo_runs or self._run_heap or self._pending)

    # ------------------------------------------------------------------ adding
    def add_all(self, flowfiles: Iterable[FlowFile]) -> int:
        """New arrivals; returns how many. FIFO: they join the active list while it is below the
        swap threshold and nothing waits behind it, the tail after that."""
        if type(flowfiles) is not list and not isinstance(flowfiles, FlowFileBatch):
            flowfiles = list(flowfiles)
        if self.fence is not None:
            fence = self.fence
            self.early.update(f.uuid for f in flowfiles if (f.queue_date, f.queue_index, f.id) <= fence)
        if self.key is None:
            active, tail, limit = self._active, self._tail, self.threshold
            if tail or (limit is not None and self._has_swapped()):
                tail.extend(flowfiles)
            elif limit is None:
                active.extend(flowfiles)
            else:
                room = max(limit - len(active), 0)
                active.extend(flowfiles[:room])
                tail.extend(flowfiles[room:])
        else:
            heap, key, seq = self._heap, self.key, self._seq
            for ff in flowfiles:
                heapq.heappush(heap, (key(ff), next(seq), ff))
        n = len(flowfiles)
        self.memory += n
        self.memory_bytes += total_size(flowfiles)
        return n

    def restore(self, flowfiles: Iterable[FlowFile]) -> int:
        """FlowFiles read back from the log at start-up. FIFO: those older than the swapped runs go
        before them, the rest behind them."""
        if self.key is not None or not self._fifo_runs:
            return self.add_all(flowfiles)
        bounds = [r.key for r in self._fifo_runs if r.key]
        bound = min(bounds) if bounds else None
        n = size = 0
        for ff in flowfiles:
            if bound is not None and fifo_key(ff) < bound:
                self._active.append(ff)
            else:
                self._tail.append(ff)
            n += 1
            size += ff.size
        self.memory += n
        self.memory_bytes += size
        return n

    def requeue(self, flowfiles: Sequence[FlowFile]) -> None:
        """FlowFiles a consumer gave back: they go back where their priority puts them (FIFO: first)."""
        if self.key is None:
            self._active.extendleft(reversed(flowfiles))
        else:
            for ff in flowfiles:
                heapq.heappush(self._heap, (self.key(ff), next(self._seq), ff))
        self.memory += len(flowfiles)
        self.memory_bytes += total_size(flowfiles)

    def add_run(self, run: SwapRun) -> None:
        """A swap file found at start-up (registered in the log), kept on disk until its turn, or
        a log run (FIFO only: it comes after the swap files, being newer)."""
        if self.key is None:
            self._fifo_runs.append(run)
        else:
            heapq.heappush(self._run_heap, (run.key, next(self._seq), run))
        self.swapped += run.remaining
        self.swapped_bytes += run.size

    # ------------------------------------------------------------------ taking
    def _release_penalties(self, now: int) -> None:
        pen = self._penalized
        if not pen or pen[0][0] > now:
            return
        back = []
        while pen and pen[0][0] <= now:
            back.append(heapq.heappop(pen)[2]._replace(penalized_until=0))
        if self.key is None:
            self._active.extendleft(reversed(back))  # they had reached the head
        else:
            for ff in back:
                heapq.heappush(self._heap, (self.key(ff), next(self._seq), ff))

    def _refill(self) -> None:
        """FIFO: move arrivals from the tail into memory once nothing swapped is ahead of them."""
        if self._tail and not self._has_swapped():
            active, tail, limit = self._active, self._tail, self.threshold
            while tail and (limit is None or len(active) < limit):
                active.append(tail.popleft())

    def _barrier(self) -> tuple | None:
        """Prioritized: no FlowFile in memory with a key above this may leave before a swap-in."""
        barrier = self._run_heap[0][0] if self._run_heap else None
        for _n, _s, low in self._pending.values():
            if low is not None and (barrier is None or low < barrier):
                barrier = low
        return barrier

    def take(self, max_count: int, now: int, expiry_ms: int) -> tuple[list[FlowFile], list[FlowFile]]:
        """Up to ``max_count`` FlowFiles from memory in order, split into (ready, expired).

        Stops early where a swap-in must come first (see ``blocked``). Both are ``FlowFileBatch``es:
        a poll's answer pickles as columns when the caller is in another process."""
        self._release_penalties(now)
        taken: list[FlowFile] = FlowFileBatch()
        expired: list[FlowFile] = FlowFileBatch()
        if self.key is None:
            self._refill()
            active = self._active
            blocked = False
            while not blocked and len(taken) + len(expired) < max_count:
                if not active:
                    self._refill()
                    if not active:
                        break
                count = min(max_count - len(taken) - len(expired), len(active))
                chunk = list(itertools.islice(active, count))
                if max(map(_penalized_until, chunk)) <= now and not (
                        expiry_ms and now - min(map(_entry_date, chunk)) > expiry_ms):
                    taken += chunk   # the usual case, none penalized or expired: no call a FlowFile
                    if count == len(active):
                        active.clear()
                    else:
                        for _ in range(count):
                            active.popleft()
                    continue
                for ff in chunk:
                    active.popleft()
                    if not self._sort_out(ff, now, expiry_ms, taken, expired):
                        active.appendleft(ff)
                        blocked = True
                        break
        else:
            heap = self._heap
            barrier = self._barrier()
            while heap and len(taken) + len(expired) < max_count:
                if barrier is not None and heap[0][0] > barrier:
                    break
                entry = heapq.heappop(heap)
                if not self._sort_out(entry[2], now, expiry_ms, taken, expired):
                    heapq.heappush(heap, entry)
                    break
        self.memory -= len(taken) + len(expired)
        self.memory_bytes -= total_size(taken) + total_size(expired)
        return taken, expired

    def _sort_out(self, ff: FlowFile, now: int, expiry_ms: int, taken: list[FlowFile],
                  expired: list[FlowFile]) -> bool:
        """Where a FlowFile ``take`` got from memory goes, in FIFO and prioritized order alike: the
        penalty heap while penalized, else ``expired`` or ``taken``. False when the penalty heap is
        full: the caller puts it back where it was and stops."""
        if ff.penalized_until > now:
            if len(self._penalized) >= self.batch:
                return False
            heapq.heappush(self._penalized, (ff.penalized_until, next(self._seq), ff))
        elif expiry_ms and now - ff.entry_date > expiry_ms:
            expired.append(ff)
        else:
            taken.append(ff)
        return True

    def take_any(self, max_count: int) -> list[FlowFile]:
        """Up to ``max_count`` FlowFiles from memory in any order, penalized ones too (emptying)."""
        out: list[FlowFile] = []
        for source in (self._active, self._tail):
            while source and len(out) < max_count:
                out.append(source.popleft())
        while self._heap and len(out) < max_count:
            out.append(self._heap.pop()[2])
        while self._penalized and len(out) < max_count:
            out.append(self._penalized.pop()[2])
        heapq.heapify(self._penalized)
        self.memory -= len(out)
        self.memory_bytes -= total_size(out)
        return out

    def blocked(self) -> bool:
        """Whether a swap-in (or a swap-out being written) stands between the consumer and data."""
        if self.key is None:
            return not self._active and self._has_swapped()
        if self._run_heap and (not self._heap or self._run_heap[0][0] < self._heap[0][0]):
            return True
        barrier = self._barrier()
        return barrier is not None and bool(self._pending) and (not self._heap or self._heap[0][0] > barrier)

    # ------------------------------------------------------------------ swapping out
    def needs_spill(self) -> bool:
        if self.threshold is None:
            return False
        if self.key is None:
            return len(self._tail) >= self.batch
        return bool(self._heap) and self.memory >= self.threshold + self.batch

    def spill_plan(self) -> tuple[int, list[FlowFile]] | None:
        """Take the lowest-priority batch out of memory to be written; None if not needed.

        Until ``spill_done``/``spill_failed`` the batch counts as swapped and, for prioritized
        queues, nothing after its first key leaves memory."""
        if not self.needs_spill():
            return None
        if self.key is None:
            tail = self._tail
            batch = [tail.popleft() for _ in range(self.batch)]
            low = None
        else:
            n = min(self.batch, len(self._heap))
            entries = sorted(self._heap, key=lambda e: (e[0], e[1]))
            self._heap = entries[: len(entries) - n]  # a sorted list is a valid heap
            out = entries[len(entries) - n:]
            batch = [e[2] for e in out]
            low = out[0][0]
        size = total_size(batch)
        self.memory -= len(batch)
        self.memory_bytes -= size
        self.swapped += len(batch)
        self.swapped_bytes += size
        sid = next(self._seq)
        self._pending[sid] = (len(batch), size, low)
        return sid, batch

    def spill_done(self, sid: int, location: str, batch: list[FlowFile]) -> SwapRun:
        n, size, low = self._pending.pop(sid)
        run = SwapRun(location, n, size, key=fifo_key(batch[0]) if low is None else low)
        if self.key is None:
            self._fifo_runs.append(run)
        else:
            heapq.heappush(self._run_heap, (run.key, next(self._seq), run))
        return run

    def spill_failed(self, sid: int, batch: list[FlowFile]) -> None:
        n, size, _low = self._pending.pop(sid)
        self.swapped -= n
        self.swapped_bytes -= size
        self.memory += n
        self.memory_bytes += size
        if self.key is None:
            self._tail.extendleft(reversed(batch))
        else:
            for ff in batch:
                heapq.heappush(self._heap, (self.key(ff), next(self._seq), ff))

    # ------------------------------------------------------------------ swapping in
    def urgent_run(self) -> SwapRun | None:
        """The run that must be read before the next FlowFile can leave, if any."""
        if self.key is None:
            return self._fifo_runs[0] if self._fifo_runs and not self._active else None
        if self._run_heap and (not self._heap or self._run_heap[0][0] < self._heap[0][0]):
            return self._run_heap[0][2]
        return None

    def prefetch_run(self) -> SwapRun | None:
        """The run to read ahead of need, while memory is a batch or more below the threshold."""
        if self.threshold is None:
            return None
        low_water = self.threshold - self.batch
        if self.key is None:
            if self._fifo_runs and len(self._active) <= low_water:
                return self._fifo_runs[0]
            return None
        if self._run_heap and self.memory <= low_water:
            return self._run_heap[0][2]
        return None

    def any_run(self) -> SwapRun | None:
        if self._fifo_runs:
            return self._fifo_runs[0]
        return self._run_heap[0][2] if self._run_heap else None

    def load_size(self, run: SwapRun, whole: bool = False) -> int:
        """How many entries of ``run`` to read now: a log run a batch at a time; other FIFO runs
        whole; a prioritized run whole when memory has room, else a chunk small enough that every
        overlapping run can have one."""
        if run.in_log:
            return min(run.remaining, self.batch)
        if whole or self.key is None or run.from_log or not run.ordered or self.threshold is None:
            return run.remaining
        room = self.threshold + self.batch - self.memory
        if room >= run.remaining:
            return run.remaining
        return min(run.remaining, max(1, min(self.batch, self.threshold // (self.run_count + 1))))

    def loaded(self, run: SwapRun, flowfiles: list[FlowFile], next_key: tuple | None,
               offset: int | None, index: int) -> None:
        """``flowfiles`` were read from ``run`` (its next one has ``next_key``; None: run done)."""
        n = len(flowfiles)
        size = total_size(flowfiles)
        if next_key is None:  # the run is finished: what it still counted is gone with it
            n_gone, size_gone = run.remaining, run.size
            run.remaining = 0
            run.size = 0
        else:
            n_gone, size_gone = n, size
            run.remaining -= n
            run.size -= size
            run.offset, run.index = offset, index
        self.swapped -= n_gone
        self.swapped_bytes -= size_gone
        self.memory += n
        self.memory_bytes += size
        if self.key is None:
            if not run.ordered:
                flowfiles = sorted(flowfiles, key=fifo_key)
            self._active.extend(flowfiles)
            if next_key is None:
                self._fifo_runs.remove(run)
                if not any(r.in_log for r in self._fifo_runs):
                    self.fence, self.early = None, set()
            else:
                run.key = next_key
        else:
            heap, key, seq = self._heap, self.key, self._seq
            for ff in flowfiles:
                heapq.heappush(heap, (key(ff), next(seq), ff))
            self._run_heap = [e for e in self._run_heap if e[2] is not run]
            heapq.heapify(self._run_heap)
            if next_key is not None:
                run.key = next_key
                heapq.heappush(self._run_heap, (next_key, next(seq), run))

    # ------------------------------------------------------------------ looking
    def memory_listing(self, limit: int) -> tuple[list[FlowFile], list[FlowFile], list[FlowFile]]:
        """(first in order, FIFO tail, set aside penalized), each at most ``limit``, from memory."""
        if self.key is None:
            head = list(itertools.islice(self._active, limit))
            tail = list(itertools.islice(self._tail, limit))
        else:
            head = [e[2] for e in heapq.nsmallest(limit, self._heap, key=lambda e: (e[0], e[1]))]
            tail = []
        penalized = [e[2] for e in heapq.nsmallest(limit, self._penalized, key=lambda e: (e[0], e[1]))]
        return head, tail, penalized
