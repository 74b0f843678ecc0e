"""A FlowFile repository in memory: the same interface and accounting as the LMDB one, no disk.

For unit tests of the framework and for the test runner (``ProcessorRunner`` on the in-process
engine), where a restart loses the flow anyway. It implements ``FlowFileRepository``
(protocol.py) as ``WriteAheadFlowFileRepository`` does (the shared tests in
tests/test_flowfile_repository.py run against both), except that nothing survives the process,
``checkpoint()`` has nothing to sync and every commit is applied at once (no journal).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from repositories.flowfile import records as rec
from repositories.flowfile.errors import (
    FlowFileRepositoryError,
    RunReplacedError,
    StateConflictError,
    log_damaged_count,
)
from repositories.flowfile.protocol import (
    ClaimDifference,
    EventBatch,
    FlowFileRepository,
    OutboxEntry,
    QueueDifference,
    RebuildReport,
    RepositoryStats,
    SwapFileEntry,
)
from repositories.flowfile.records import Update
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

SWAP_QUEUE_PREFIX = rec.SWAP_QUEUE_PREFIX
#: a claim a commit changes: ``(resource, its entry or None, count, pending sequence, new count)``
_ClaimChange = tuple[tuple, list[int] | None, int, int, int]


class _Tally:
    """A commit's changes of claimant counts and queue sizes, as its updates and removals are followed."""

    def __init__(self) -> None:
        self.deltas: dict[tuple, int] = {}
        self.queues: dict[str, list[int]] = {}

    def claim(self, resource: tuple, change: int) -> None:
        self.deltas[resource] = self.deltas.get(resource, 0) + change

    def queue(self, queue: str, count: int, size: int) -> None:
        d = self.queues.setdefault(queue, [0, 0])
        d[0] += count
        d[1] += size


class InMemoryFlowFileRepository(FlowFileRepository):
    """Volatile FlowFile repository with the interface of ``WriteAheadFlowFileRepository``."""

    FORMAT_VERSION = 1

    def __init__(self, path: str | Path | None = None, **_ignored: Any) -> None:
        self.path = Path(path) if path is not None else Path("<memory>")
        self.always_sync = False
        self._lock = threading.RLock()
        self._closed = False
        self._next_id = 1
        self._next_event_id = 0
        self._run = 0
        self._seq = 0
        self._commits = 0
        self._checkpoints = 0
        self._unknown_removals = 0
        self._damaged_counts = 0
        self._last_checkpoint: dict | None = None
        # uuid key -> (FlowFile, queue, order key)
        self._records: dict[bytes, tuple[FlowFile, str, bytes]] = {}
        # resource (container, section, id) -> [count, pending seq]
        self._claims: dict[tuple, list[int]] = {}
        # (seq, resource) -> None, insertion ordered (seqs only grow)
        self._destructible: dict[tuple[int, tuple], None] = {}
        self._queues: dict[str, list[int]] = {}
        self._swap: dict[str, dict] = {}
        self._state: dict[str, StateMap] = {}
        # first event id -> (count, min_timestamp, max_timestamp, encoded batch), ids only grow
        self._outbox: dict[int, tuple[int, int, int, bytes]] = {}

    @classmethod
    def from_settings(cls, root_dir: str | Path, settings: Any) -> "InMemoryFlowFileRepository":
        return cls(Path(root_dir) / "flowfile")

    def _check_open(self) -> None:
        if self._closed:
            raise FlowFileRepositoryError(f"FlowFile repository at {self.path} is closed", self.path)

    # --- ids and runs ---------------------------------------------------------------------------

    def reserve_ids(self, count: int) -> int:
        return self._reserve("_next_id", count)

    def reserve_event_ids(self, count: int) -> int:
        return self._reserve("_next_event_id", count)

    def _reserve(self, counter: str, count: int) -> int:
        if type(count) is not int or count < 0:
            raise ValueError(f"count must be a non-negative int, not {count!r}")
        with self._lock:
            self._check_open()
            first = getattr(self, counter)
            setattr(self, counter, first + count)
            return first

    def raise_event_ids(self, at_least: int) -> int:
        self._check_open()
        with self._lock:
            self._next_event_id = max(self._next_event_id, at_least)
            return self._next_event_id

    def begin_run(self) -> int:
        with self._lock:
            self._check_open()
            self._run += 1
            return self._run

    # --- commit -------------------------------------------------------------------------------

    def commit(
        self,
        updates: Sequence[QueuedFlowFile],
        removals: Sequence[str],
        new_claims: Sequence[ResourceClaim] = (),
        events: int = 0,
        state: StateChange | None = None,
        *,
        run: int | None = None,
        event_batch: EventBatch | None = None,
    ) -> int | None:
        prepared, rkeys, _columns = rec.encode_commit(updates, removals)
        if event_batch is not None:
            events = event_batch.count
        with self._lock:
            self._check_open()
            if run is not None and run != self._run:
                raise RunReplacedError(self.path, run, self._run)
            stored = self._checked_state(state) if state is not None else None
            self._apply(prepared, rkeys, new_claims)
            if state is not None and stored is not None:
                self._state[state.component_id] = stored
            self._commits += 1
            if not events:
                return None
            first = self._reserve("_next_event_id", events)
            if event_batch is not None:
                self._outbox[first] = (events, event_batch.min_timestamp, event_batch.max_timestamp,
                                       bytes(event_batch.data))
            return first

    def apply_if_long(self) -> bool:
        """Nothing waits to be applied in memory: every commit is applied at once."""
        self._check_open()
        return False

    def get_state(self, component_id: str) -> StateMap:
        self._check_open()
        with self._lock:
            return self._state.get(component_id, StateMap())

    def state_ids(self) -> list[str]:
        self._check_open()
        with self._lock:
            return list(self._state)

    def _checked_state(self, change: StateChange) -> StateMap:
        """The state ``change`` stores, checked as the LMDB log checks it (nothing changed yet)."""
        current = self._state.get(change.component_id, StateMap())
        stored = change.applied_to(current)
        if stored is None:
            assert change.expected is not None  # only a change that expects a version is refused
            raise StateConflictError(self.path, change.component_id, change.expected, current.version)
        rec.encode_state(stored.version, stored.values)  # the same limits
        return stored

    # --- the provenance outbox ----------------------------------------------------------------

    def outbox_entries(self, max_bytes: int = 64 * 1024**2) -> list[OutboxEntry]:
        with self._lock:
            self._check_open()
            found: list[OutboxEntry] = []
            size = 0
            for first in sorted(self._outbox):
                found.append((first, self._outbox[first]))
                size += len(self._outbox[first][3])
                if size >= max_bytes:
                    break
            return found

    def remove_from_outbox(self, first_ids: Iterable[int]) -> int:
        with self._lock:
            self._check_open()
            return sum(self._outbox.pop(first, None) is not None for first in first_ids)

    def _apply(self, prepared: Sequence[Update], rkeys: Sequence[bytes], new_claims: Iterable[ResourceClaim] = (),
               expect_queue: str | None = None) -> int:
        """Apply one commit's updates and removals and the claims it wrote under the next
        sequence, and return it. Every change is worked out first, then made, so an error
        (``ValueError`` with ``expect_queue``: an update whose FlowFile is not stored in that
        queue) changes nothing."""
        seq = self._seq + 1
        tally = _Tally()
        puts = self._follow_updates(prepared, tally, expect_queue)
        dels = self._follow_removals(rkeys, tally)
        news = {(r[0], r[1], r[2]) for r in new_claims}
        for r in news:
            rec.claim_key(r)  # same validation as the durable repository
        for r in news:
            tally.deltas.setdefault(r, 0)
        claim_changes = self._claim_changes(tally.deltas, news)
        queue_changes = self._queue_changes(tally.queues)
        for ukey, value in puts:
            self._records[ukey] = value
        for ukey in dels:
            del self._records[ukey]
        self._set_claims(claim_changes, seq)
        self._set_queues(queue_changes)
        self._seq = seq
        return seq

    def _follow_updates(self, prepared: Sequence[Update], tally: _Tally,
                        expect_queue: str | None) -> list[tuple[bytes, tuple[FlowFile, str, bytes]]]:
        """The records the updates put, their claim and queue changes counted in ``tally``."""
        puts = []
        for ukey, ff, queue, prefix, _ckey, _size in prepared:
            okey = rec.order_key(ff, prefix, ukey)
            res = tuple(ff.claim.resource) if ff.claim is not None else None
            old = self._records.get(ukey)
            if old is None:
                if expect_queue is not None:
                    raise ValueError(f"FlowFile {rec.key_uuid(ukey)} is not in the repository")
                if res is not None:
                    tally.claim(res, 1)
            else:
                off, oq, _ = old
                if expect_queue is not None and oq != expect_queue:
                    raise ValueError(f"FlowFile {rec.key_uuid(ukey)} is in queue {oq!r}, not {expect_queue!r}")
                ores = tuple(off.claim.resource) if off.claim is not None else None
                if ores != res:
                    if ores is not None:
                        tally.claim(ores, -1)
                    if res is not None:
                        tally.claim(res, 1)
                tally.queue(oq, -1, -off.size)
            tally.queue(queue, 1, ff.size)
            puts.append((ukey, (ff, queue, okey)))
        return puts

    def _follow_removals(self, rkeys: Sequence[bytes], tally: _Tally) -> list[bytes]:
        """The records the removals delete (unknown ones counted), their changes counted in ``tally``."""
        dels = []
        for ukey in rkeys:
            old = self._records.get(ukey)
            if old is None:
                self._unknown_removals += 1
                continue
            off, oq, _ = old
            if off.claim is not None:
                tally.claim(tuple(off.claim.resource), -1)
            tally.queue(oq, -1, -off.size)
            dels.append(ukey)
        return dels

    def _claim_changes(self, deltas: dict[tuple, int], news: set[tuple]) -> list[_ClaimChange]:
        """``(claim, its entry, count, pending sequence, new count)`` of each claim that changes;
        a count that would go below 0 is kept at 1, as in the durable repository, until counts
        are rebuilt."""
        changes = []
        for res, d in deltas.items():
            if d == 0 and res not in news:
                continue
            cur = self._claims.get(res)
            count, pending = (0, 0) if cur is None else cur
            n = count + d
            if n < 0:
                self._damaged(f"the claimant count of resource claim {'/'.join(res)} would become {n} "
                              f"(stored {count}, change {d}); the claim is kept")
                n = 1
            changes.append((res, cur, count, pending, n))
        return changes

    def _set_claims(self, changes: list[_ClaimChange], seq: int) -> None:
        """Make the ``_claim_changes``; a claim at 0 waits on the destructible list under ``seq``."""
        for res, cur, count, pending, n in changes:
            if n == 0:
                if cur is None or count != 0 or not pending:
                    self._claims[res] = [0, seq]
                    self._destructible[(seq, res)] = None
            else:
                if pending:
                    self._destructible.pop((pending, res), None)
                self._claims[res] = [n, 0]

    def _queue_changes(self, queues: dict[str, list[int]]) -> list[tuple[str, int, int]]:
        """``(queue, new count, new size)`` of each queue the changes touch (a count that would go
        below 0 is set to 0, as in the durable repository)."""
        changes = []
        for q, (dc, ds) in queues.items():
            cur = self._queues.get(q, [0, 0])
            c = cur[0] + dc
            if c < 0:
                self._damaged(f"the FlowFile count of queue {q!r} would become {c}; it is set to 0")
                c = 0
            changes.append((q, c, cur[1] + ds))
        return changes

    def _set_queues(self, changes: list[tuple[str, int, int]]) -> None:
        for q, c, s in changes:
            if c == 0:
                self._queues.pop(q, None)
            else:
                self._queues[q] = [c, s]

    def _damaged(self, problem: str) -> None:
        self._damaged_counts += 1
        log_damaged_count(self.path, problem)

    # --- swap files ---------------------------------------------------------------------------

    def register_swap_file(
        self, queue: str, location: str, count: int, size: int, flowfiles: Sequence[FlowFile] | None = None
    ) -> None:
        prepared = rec.encode_swap_registration(location, count, flowfiles)
        with self._lock:
            self._check_open()
            if location in self._swap:
                raise ValueError(f"swap file {location} is already registered")
            seq = self._apply(prepared, [], expect_queue=queue if flowfiles is not None else None)
            self._swap[location] = {"queue": queue, "count": count, "size": size, "seq": seq}

    def unregister_swap_file(self, location: str) -> int:
        with self._lock:
            self._check_open()
            entry = self._swap.pop(location, None)
            if entry is None:
                return 0
            moved = self._move_records(SWAP_QUEUE_PREFIX + location, entry["queue"])
            self._seq += 1
            return moved

    def rename_queue(self, old: str, new: str) -> int:
        with self._lock:
            self._check_open()
            moved = self._move_records(old, new)
            for location, entry in list(self._swap.items()):
                if entry["queue"] == old:
                    del self._swap[location]
                    moved += self._move_records(SWAP_QUEUE_PREFIX + location, new)
            self._seq += 1
            return moved

    def _move_records(self, source: str, target: str) -> int:
        """Move the records of queue ``source`` to queue ``target`` in their FIFO position (counts
        and sizes with them); how many moved."""
        sprefix, tprefix = rec.queue_prefix(source), rec.queue_prefix(target)
        moved = size = 0
        for ukey, (ff, q, okey) in list(self._records.items()):
            if q == source:
                self._records[ukey] = (ff, target, tprefix + okey[len(sprefix):])
                moved += 1
                size += ff.size
        if moved:
            self._set_queues(self._queue_changes({source: [-moved, -size], target: [moved, size]}))
        return moved

    def swap_files(self) -> list[SwapFileEntry]:
        with self._lock:
            self._check_open()
            items = sorted(self._swap.items(), key=lambda kv: kv[1]["seq"])
            return [
                {"queue": e["queue"], "location": loc, "count": e["count"], "size": e["size"]} for loc, e in items
            ]

    # --- checkpoint ---------------------------------------------------------------------------

    def _sync(self) -> None:
        """Nothing to make durable in memory; a seam for tests (as in the LMDB repository)."""

    def checkpoint(self) -> list[ResourceClaim]:
        started = time.time()
        t0 = time.perf_counter()
        with self._lock:
            self._check_open()
            boundary = self._seq
        self._sync()
        released = []
        with self._lock:
            for key in list(self._destructible):
                seq, res = key
                if seq > boundary:
                    break
                del self._destructible[key]
                cur = self._claims.get(res)
                if cur is not None and cur[0] == 0 and cur[1] == seq:
                    del self._claims[res]
                    released.append(ResourceClaim(*res))
            self._checkpoints += 1
            self._last_checkpoint = {"time": started, "duration": time.perf_counter() - t0, "released": len(released)}
        return released

    # --- recovery -----------------------------------------------------------------------------

    def _ordered(self, include_swapped: bool, queue: str | None = None) -> list[tuple[bytes, FlowFile, str]]:
        with self._lock:
            self._check_open()
            items = [
                (okey, ff, q)
                for ff, q, okey in self._records.values()
                if (queue is None or q == queue) and (include_swapped or not q.startswith(SWAP_QUEUE_PREFIX))
            ]
        items.sort(key=lambda t: t[0])
        return items

    def recover(
        self, batch_size: int = 10_000, *, include_swapped: bool = False
    ) -> Iterator[tuple[str, list[FlowFile]]]:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        items = self._ordered(include_swapped)
        return self._batches(items, batch_size)

    @staticmethod
    def _batches(items: list[tuple[bytes, FlowFile, str]], batch_size: int) -> Iterator[tuple[str, list[FlowFile]]]:
        batch: list[FlowFile] = []
        queue = ""
        for _okey, ff, q in items:
            if batch and (q != queue or len(batch) >= batch_size):
                yield queue, batch
                batch = []
            queue = q
            batch.append(ff)
        if batch:
            yield queue, batch

    def iter_queue(self, queue: str, batch_size: int = 10_000) -> Iterator[list[FlowFile]]:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for _q, batch in self._batches(self._ordered(True, queue), batch_size):
            yield batch

    def page(self, queue: str, start: bytes | None, stop: bytes | None,
             count: int) -> tuple[list[FlowFile], bytes | None]:
        """As ``WriteAheadFlowFileRepository.page``."""
        if count < 1:
            raise ValueError("count must be at least 1")
        items = [(k, ff) for k, ff, _q in self._ordered(True, queue)
                 if (start is None or k >= start) and (stop is None or k < stop)]
        return [ff for _k, ff in items[:count]], (items[count][0] if len(items) > count else None)

    def last_key(self, queue: str) -> bytes | None:
        items = self._ordered(True, queue)
        return items[-1][0] if items else None

    # --- queries ------------------------------------------------------------------------------

    def queue_counts(self) -> dict[str, int]:
        return {q: c for q, (c, _s) in self.queue_sizes().items()}

    def queue_sizes(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            self._check_open()
            return {q: (c, s) for q, (c, s) in self._queues.items()}

    def claimant_count(self, resource: ResourceClaim) -> int:
        with self._lock:
            self._check_open()
            cur = self._claims.get(tuple(resource))
            return 0 if cur is None else cur[0]

    def is_referenced(self, resource: ResourceClaim) -> bool:
        with self._lock:
            self._check_open()
            cur = self._claims.get(tuple(resource))
            return cur is not None and (cur[0] > 0 or cur[1] != 0)

    def pending_release(self) -> list[ResourceClaim]:
        with self._lock:
            self._check_open()
            return [ResourceClaim(*res) for _seq, res in self._destructible]

    def get(self, uuid: str) -> QueuedFlowFile | None:
        with self._lock:
            self._check_open()
            v = self._records.get(rec.uuid_key(uuid))
            return None if v is None else QueuedFlowFile(v[0], v[1])

    # --- start-up repair ----------------------------------------------------------------------

    def rebuild_claimant_counts(self, max_reported: int = 1000) -> RebuildReport:
        t0 = time.perf_counter()
        with self._lock:
            self._check_open()
            counts: dict[tuple, int] = {}
            sizes: dict[str, list[int]] = {}
            max_id = 0
            for ff, q, _okey in self._records.values():
                if ff.claim is not None:
                    r = tuple(ff.claim.resource)
                    counts[r] = counts.get(r, 0) + 1
                s = sizes.setdefault(q, [0, 0])
                s[0] += 1
                s[1] += ff.size
                max_id = max(max_id, ff.id)
            seq = self._seq + 1
            fixed, differences = self._reconcile_claims(counts, seq, max_reported)
            stale = [k for k in self._destructible if self._claims.get(k[1]) != [0, k[0]]]
            for k in stale:
                del self._destructible[k]
            queues_fixed = self._reconcile_queues(sizes)
            next_id_raised = max_id >= self._next_id
            if next_id_raised:
                self._next_id = max_id + 1
            self._seq = seq
            return {
                "flowfiles": len(self._records),
                "claims": len(self._claims),
                "fixed": fixed,
                "differences": differences,
                "stale_destructible": len(stale),
                "queues_fixed": queues_fixed,
                "index_rebuilt": False,
                "next_id_raised": next_id_raised,
                "duration": time.perf_counter() - t0,
            }

    def _reconcile_claims(self, counts: dict[tuple, int], seq: int,
                          max_reported: int) -> tuple[int, list[ClaimDifference]]:
        """Make every claimant count ``counts``' (a claim at 0 waits for a checkpoint under
        ``seq``); how many differed, and the first ``max_reported`` of them."""
        differences: list[ClaimDifference] = []
        fixed = 0
        for res in set(self._claims) | set(counts):
            count, pending = self._claims.get(res, (0, 0))
            actual = counts.get(res, 0)
            consistent = (
                (actual > 0 and count == actual and not pending)
                or (actual == 0 and count == 0 and pending and (pending, res) in self._destructible)
            )
            if consistent:
                continue
            if pending:
                self._destructible.pop((pending, res), None)
            if actual > 0:
                self._claims[res] = [actual, 0]
            else:
                self._claims[res] = [0, seq]
                self._destructible[(seq, res)] = None
            if count != actual:
                fixed += 1
                if len(differences) < max_reported:
                    differences.append({"claim": ResourceClaim(*res), "recorded": count, "actual": actual})
        return fixed, differences

    def _reconcile_queues(self, sizes: dict[str, list[int]]) -> dict[str, QueueDifference]:
        """Make every queue's count and size ``sizes``'; the queues that differed."""
        fixed: dict[str, QueueDifference] = {}
        for q in set(self._queues) | set(sizes):
            c, s = sizes.get(q, (0, 0))
            hc, hs = self._queues.get(q, (0, 0))
            if (c, s) != (hc, hs):
                fixed[q] = {"recorded": (hc, hs), "actual": (c, s)}
                if c == 0:
                    self._queues.pop(q, None)
                else:
                    self._queues[q] = [c, s]
        return fixed

    # --- statistics, closing ------------------------------------------------------------------

    def stats(self) -> RepositoryStats:
        with self._lock:
            self._check_open()
            last = self._last_checkpoint
            return {
                "path": str(self.path),
                "always_sync": False,
                "flowfiles": len(self._records),
                "queues": len(self._queues),
                "claims": len(self._claims),
                "pending_release": len(self._destructible),
                "swap_files": len(self._swap),
                "provenance_outbox": len(self._outbox),
                "commit_seq": self._seq,
                "commits": self._commits,
                "checkpoints": self._checkpoints,
                "unknown_removals": self._unknown_removals,
                "damaged_counts": self._damaged_counts,
                "next_id": self._next_id,
                "next_event_id": self._next_event_id,
                "last_checkpoint_time": last["time"] if last else None,
                "last_checkpoint_duration": last["duration"] if last else None,
                "last_checkpoint_released": last["released"] if last else None,
                "map_size": 0,
                "map_used": 0,
                "file_size": 0,
                "readers": 0,
            }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> "InMemoryFlowFileRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
