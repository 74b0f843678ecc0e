"""A FlowFile repository in memory: the same interface and accounting as the LMDB one, no disk.

For unit tests of the framework and for the stateless engine, where a restart loses the flow
anyway. Every method behaves as in ``WriteAheadFlowFileRepository`` (the shared tests in
tests/test_flowfile_repository.py run against both), except that nothing survives the process
and ``checkpoint()`` has nothing to sync.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from repositories.flowfile import records as rec
from repositories.flowfile.errors import FlowFileRepositoryError, StateConflictError, log_damaged_count
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

SWAP_QUEUE_PREFIX = rec.SWAP_QUEUE_PREFIX


class InMemoryFlowFileRepository:
    """Volatile FlowFile repository with the interface of ``WriteAheadFlowFileRepository``."""

    FORMAT_VERSION = 1

    def __init__(self, path: str | Path | None = None, **_ignored: Any) -> None:
        self.path = Path(path) if path is not None else Path("<memory>")
        self.always_sync = False
        self._lock = threading.RLock()
        self._closed = False
        self._next_id = 1
        self._next_event_id = 0
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

    @classmethod
    def from_settings(cls, root_dir: str | Path, settings: Any) -> "InMemoryFlowFileRepository":
        return cls(Path(root_dir) / "flowfile")

    def _check_open(self) -> None:
        if self._closed:
            raise FlowFileRepositoryError(f"FlowFile repository at {self.path} is closed", self.path)

    # --- ids ----------------------------------------------------------------------------------

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
        with self._lock:
            self._next_event_id = max(self._next_event_id, at_least)
            return self._next_event_id

    # --- commit -------------------------------------------------------------------------------

    def commit(
        self,
        updates: Sequence[QueuedFlowFile],
        removals: Sequence[str],
        new_claims: Sequence[ResourceClaim] = (),
        events: int = 0,
        state: StateChange | None = None,
    ) -> int | None:
        prepared, rkeys, _columns = rec.encode_commit(updates, removals)
        with self._lock:
            self._check_open()
            stored = self._checked_state(state) if state is not None else None
            self._apply(prepared, rkeys, new_claims)
            if stored is not None:
                self._state[state.component_id] = stored
            self._commits += 1
            return self._reserve("_next_event_id", events) if events else None

    def get_state(self, component_id: str) -> StateMap:
        with self._lock:
            return self._state.get(component_id, StateMap())

    def state_ids(self) -> list[str]:
        with self._lock:
            return list(self._state)

    def _checked_state(self, change: StateChange) -> StateMap:
        """The state ``change`` stores, checked as the LMDB log checks it (nothing changed yet)."""
        current = self._state.get(change.component_id, StateMap())
        stored = change.applied_to(current)
        if stored is None:
            raise StateConflictError(self.path, change.component_id, change.expected, current.version)
        rec.encode_state(stored.version, stored.values)  # the same limits
        return stored

    def _apply(self, prepared: list, rkeys: list, new_claims: Iterable = (), expect_queue: str | None = None) -> int:
        """Compute every change first, then apply them all (so an error changes nothing)."""
        records = self._records
        seq = self._seq + 1
        deltas: dict[tuple, int] = {}
        queues: dict[str, list[int]] = {}

        def qadd(q: str, c: int, s: int) -> None:
            d = queues.setdefault(q, [0, 0])
            d[0] += c
            d[1] += s

        puts = []
        dels = []
        for ukey, ff, queue, prefix, _ckey, _size in prepared:
            okey = rec.order_key(ff, prefix, ukey)
            res = tuple(ff.claim.resource) if ff.claim is not None else None
            old = records.get(ukey)
            if old is None:
                if expect_queue is not None:
                    raise ValueError(f"FlowFile {rec.key_uuid(ukey)} is not in the repository")
                if res is not None:
                    deltas[res] = deltas.get(res, 0) + 1
            else:
                off, oq, _ = old
                if expect_queue is not None and oq != expect_queue:
                    raise ValueError(f"FlowFile {rec.key_uuid(ukey)} is in queue {oq!r}, not {expect_queue!r}")
                ores = tuple(off.claim.resource) if off.claim is not None else None
                if ores != res:
                    if ores is not None:
                        deltas[ores] = deltas.get(ores, 0) - 1
                    if res is not None:
                        deltas[res] = deltas.get(res, 0) + 1
                qadd(oq, -1, -off.size)
            qadd(queue, 1, ff.size)
            puts.append((ukey, (ff, queue, okey)))
        for ukey in rkeys:
            old = records.get(ukey)
            if old is None:
                self._unknown_removals += 1
                continue
            off, oq, _ = old
            if off.claim is not None:
                ores = tuple(off.claim.resource)
                deltas[ores] = deltas.get(ores, 0) - 1
            qadd(oq, -1, -off.size)
            dels.append(ukey)
        news = {(r[0], r[1], r[2]) for r in new_claims}
        for r in news:
            rec.claim_key(r)  # same validation as the durable repository
        for r in news:
            deltas.setdefault(r, 0)
        claim_changes = []
        for res, d in deltas.items():
            if d == 0 and res not in news:
                continue
            cur = self._claims.get(res)
            count, pending = (0, 0) if cur is None else cur
            n = count + d
            if n < 0:  # as in the durable repository: kept referenced until counts are rebuilt
                self._damaged(f"the claimant count of resource claim {'/'.join(res)} would become {n} "
                              f"(stored {count}, change {d}); the claim is kept")
                n = 1
            claim_changes.append((res, cur, count, pending, n))
        queue_changes = []
        for q, (dc, ds) in queues.items():
            cur = self._queues.get(q, [0, 0])
            c = cur[0] + dc
            if c < 0:
                self._damaged(f"the FlowFile count of queue {q!r} would become {c}; it is set to 0")
                c = 0
            queue_changes.append((q, c, cur[1] + ds))
        # apply
        for ukey, value in puts:
            records[ukey] = value
        for ukey in dels:
            del records[ukey]
        for res, cur, count, pending, n in claim_changes:
            if n == 0:
                if cur is None or count != 0 or not pending:
                    self._claims[res] = [0, seq]
                    self._destructible[(seq, res)] = None
            else:
                if pending:
                    self._destructible.pop((pending, res), None)
                self._claims[res] = [n, 0]
        for q, c, s in queue_changes:
            if c == 0:
                self._queues.pop(q, None)
            else:
                self._queues[q] = [c, s]
        self._seq = seq
        return seq

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
            swap_queue = SWAP_QUEUE_PREFIX + location
            queue = entry["queue"]
            sprefix = rec.queue_prefix(swap_queue)
            prefix = rec.queue_prefix(queue)
            moved = 0
            size = 0
            for ukey, (ff, q, okey) in list(self._records.items()):
                if q == swap_queue:
                    self._records[ukey] = (ff, queue, prefix + okey[len(sprefix) :])
                    moved += 1
                    size += ff.size
            if moved:
                s = self._queues.pop(swap_queue, [0, 0])
                t = self._queues.setdefault(queue, [0, 0])
                t[0] += moved
                t[1] += size
                if s[0] != moved:
                    self._queues[swap_queue] = [s[0] - moved, s[1] - size]
            self._seq += 1
            return moved

    def swap_files(self) -> list[dict]:
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
    def _batches(items: list, batch_size: int) -> Iterator[tuple[str, list[FlowFile]]]:
        batch: list[FlowFile] = []
        queue = None
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

    def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int) -> tuple[list[FlowFile], bytes | None]:
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

    def rebuild_claimant_counts(self, max_reported: int = 1000) -> dict:
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
            differences = []
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
            stale = [k for k in self._destructible if self._claims.get(k[1]) != [0, k[0]]]
            for k in stale:
                del self._destructible[k]
            queues_fixed = {}
            for q in set(self._queues) | set(sizes):
                want = tuple(sizes.get(q, (0, 0)))
                have = tuple(self._queues.get(q, (0, 0)))
                if want != have:
                    queues_fixed[q] = {"recorded": have, "actual": want}
                    if want[0] == 0:
                        self._queues.pop(q, None)
                    else:
                        self._queues[q] = list(want)
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

    # --- statistics, closing ------------------------------------------------------------------

    def stats(self) -> dict:
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
