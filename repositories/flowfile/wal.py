"""The durable FlowFile repository: a write-ahead log of FlowFile records in LMDB.

One LMDB environment at ``<repository>/flowfile`` holds the live FlowFile records, a per-queue
FIFO index, per-queue sizes, resource-claim claimant counts, the claims waiting to be released at
the next checkpoint, the swap-file registry, the journal of commits not yet applied to those
tables, and the commits' provenance events until the provenance repository takes them (the
outbox; docs/formats/flowfile-repository.md has every byte). Every public write is one LMDB write
transaction, so a session commit is all or nothing. A commit writes one journal entry; the
journal is applied to the tables a few dozen commits at a time, and before anything reads them,
so a FlowFile created and removed in between is never written to them (NiFi's journal of deltas,
in LMDB: the order index, the counts and the crash guarantees stay).

Durability (verified in tests/test_flowfile_crash.py, documented in the format doc):

* ``always_sync=False`` (NiFi's default): LMDB ``sync=False, metasync=False``. A commit writes its
  pages and the new meta page with ``pwrite`` and returns: it survives the death (SIGKILL) of every
  process because the bytes are in the OS page cache. It does not survive a power loss or kernel
  crash until the next ``checkpoint()``, which calls ``fdatasync``.
* ``always_sync=True``: LMDB ``sync=True, metasync=True``. ``fdatasync`` of the data pages and an
  ``O_DSYNC`` write of the meta page before ``commit()`` returns: survives power loss.

One instance per repository directory per process (LMDB must not be opened twice in one process:
``open_shared``); several processes may open and write the same directory (the engine's executors
commit in their own processes). Methods are safe to call from several threads.

``readonly=True`` (the read-only commands on a stopped flow's folder) writes nothing at all, not
even LMDB's lock file: see ``opening._open_readonly`` and the format doc's "Reading without writing".

``WriteAheadFlowFileRepository`` is the one public class; each concern is a module of its own,
sharing one ``LogEnvironment`` (environment.py): opening.py (opening, upgrading), journal.py and
fold.py (the journal and applying it), claims.py (claimant counts, releases), queue_table.py and
queue_reader.py (queue sizes, reading queues), swap_registry.py, state_store.py,
provenance_outbox.py, counters.py (ids, runs) and repair.py (the start-up recount).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from repositories.flowfile import records as rec
from repositories.flowfile.claims import ClaimTable
from repositories.flowfile.counters import Counters
from repositories.flowfile.environment import K_CHECKPOINT, K_NEXT_ID, K_SEQ, Txn
from repositories.flowfile.errors import FlowFileRepositoryError
from repositories.flowfile.journal import Journal
from repositories.flowfile.opening import open_environment
from repositories.flowfile.protocol import (
    EventBatch,
    FlowFileRepository,
    OutboxEntry,
    RebuildReport,
    RepositoryStats,
    SwapFileEntry,
)
from repositories.flowfile.provenance_outbox import ProvenanceOutbox
from repositories.flowfile.queue_reader import QueueReader
from repositories.flowfile.queue_table import QueueTable
from repositories.flowfile.repair import rebuild_claimant_counts
from repositories.flowfile.state_store import StateStore
from repositories.flowfile.swap_registry import SwapRegistry
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

SWAP_QUEUE_PREFIX = rec.SWAP_QUEUE_PREFIX
log = logging.getLogger(__name__)

# LMDB forbids opening one environment twice in one process (closing either breaks the other's
# POSIX locks), so instances register their directory here.
T = TypeVar("T")

_open_lock = threading.Lock()
_open_paths: dict[str, weakref.ReferenceType[WriteAheadFlowFileRepository]] = {}


class WriteAheadFlowFileRepository(FlowFileRepository):
    """FlowFile records, queue order, claimant counts and swap files in one LMDB environment
    (implements ``FlowFileRepository``, protocol.py)."""

    @property
    def applied_elsewhere(self) -> bool:
        """True where another process applies the journal once it is long (``Journal.applied_elsewhere``)."""
        return self._journal.applied_elsewhere

    @applied_elsewhere.setter
    def applied_elsewhere(self, elsewhere: bool) -> None:
        self._journal.applied_elsewhere = elsewhere

    def __init__(
        self,
        path: str | Path,
        *,
        always_sync: bool = False,
        map_size: int = 64 * 1024**3,
        create: bool = True,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.always_sync = bool(always_sync)
        self.readonly = bool(readonly)
        self._closed = True
        self._commits = 0
        self._checkpoints = 0
        self._last_checkpoint: dict[str, Any] | None = None
        self._key = os.path.realpath(self.path)
        self._register()
        try:
            environment = open_environment(self.path, always_sync=self.always_sync, map_size=map_size,
                                           create=create, readonly=self.readonly)
        except BaseException:
            self._unregister()
            raise
        self._environment = environment
        self._claims = ClaimTable(environment)
        self._queues = QueueTable(environment)
        self._journal = Journal(environment, self._claims, self._queues)
        self._reader = QueueReader(environment, self._journal)
        self._swap = SwapRegistry(environment, self._journal, self._queues)
        self._state = StateStore(environment)
        self._outbox = ProvenanceOutbox(environment)
        self._counters = Counters(environment)
        if self.readonly:
            self._refuse_writes()

    def _register(self) -> None:
        """Take this directory for this instance in the process (``FlowFileRepositoryError``
        when another open instance has it)."""
        with _open_lock:
            ref = _open_paths.get(self._key)
            other = ref() if ref is not None else None
            if other is not None and not other._closed:
                raise FlowFileRepositoryError(
                    f"FlowFile repository at {self.path} is already open in this process; "
                    "use that instance or close() it first (LMDB must not be opened twice in "
                    "one process)",
                    self.path,
                )
            _open_paths[self._key] = weakref.ref(self)
            self._closed = False

    def _unregister(self) -> None:
        self._closed = True
        with _open_lock:
            ref = _open_paths.get(self._key)
            if ref is not None and ref() in (self, None):
                del _open_paths[self._key]

    def _refuse_writes(self) -> None:
        """Read-only: bring a private copy up to date (its journal applied there), then refuse
        every write."""
        environment = self._environment
        try:
            if environment.copy is not None:
                self._journal.settle()
        except BaseException:
            self.close()
            raise
        environment.refuse_writes(f"FlowFile repository at {self.path} is open read-only"
                                  + (" (read from a private copy)" if environment.copy is not None else ""))

    @classmethod
    def open_shared(cls, path: str | Path, **options: Any) -> WriteAheadFlowFileRepository:
        """The instance open on ``path`` in this process, else a new one (``options`` as for the
        constructor). Several processes write one log (LMDB serializes their write transactions
        and frees the lock of a writer that died), but one process must share a single instance."""
        shared = cls.open_here(path)
        return shared if shared is not None else cls(path, **options)

    @classmethod
    def open_here(cls, path: str | Path) -> WriteAheadFlowFileRepository | None:
        """The instance this process has open on ``path``, if any."""
        with _open_lock:
            other = _open_paths.get(os.path.realpath(path))
            shared = other() if other is not None else None
            return shared if shared is not None and not shared._closed else None

    @classmethod
    def from_settings(cls, root_dir: str | Path, settings: Any, *,
                      shared: bool = False) -> WriteAheadFlowFileRepository:
        """The repository at ``<root_dir>/flowfile`` configured from a ``Settings``; ``shared``:
        an existing one only (``create=False``), the instance this process has open if any
        (``open_shared``)."""
        options = {"always_sync": settings.always_sync, "map_size": settings.flowfile_map_size}
        if shared:
            return cls.open_shared(Path(root_dir) / "flowfile", create=False, **options)
        return cls(Path(root_dir) / "flowfile", **options)

    # --- ids and runs ---------------------------------------------------------------------------

    def reserve_ids(self, count: int) -> int:
        """Reserve ``count`` one-up FlowFile ids durably and return the first.

        The reservation is its own transaction, committed before any FlowFile uses the ids, so
        after a restart ids continue past the highest ever reserved (ids of a crashed session are
        skipped, never reused)."""
        return self._counters.reserve_ids(count)

    def reserve_event_ids(self, count: int) -> int:
        """Reserve ``count`` provenance event ids and return the first: events registered outside
        a session commit (a queue emptied, a replay) take their ids here, as a commit's do."""
        return self._counters.reserve_event_ids(count)

    def raise_event_ids(self, at_least: int) -> int:
        """Make the next event id at least ``at_least`` (a flow's start: past every id the
        provenance repository holds) and return it."""
        return self._counters.raise_event_ids(at_least)

    def begin_run(self) -> int:
        """Number a new run of the flow over this log (``meta`` key ``run``) and return it. A
        commit made for an older run is refused from then on (``commit(run=...)``): processes of
        a run that was replaced (a controller that died, whose executors Ray has not killed yet)
        can no longer write the log a new run recovered from."""
        return self._counters.begin_run()

    # --- commit ---------------------------------------------------------------------------------

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
        """Record one session's changes in one LMDB write transaction (all or nothing).

        ``updates`` are created or changed FlowFiles with their queue; ``removals`` are uuids of
        FlowFiles that left the flow (unknown uuids are ignored, so a retried commit cannot
        decrement twice); ``new_claims`` are resource claims the session wrote, registered with a
        count of 0 (and so released after the next checkpoint) when nothing references them.
        The transaction writes the commit's journal entry, which decides it; claimant counts and
        queue sizes change when the journal is applied, by comparing each FlowFile's previous
        version with the new one (fold.py). Raises ``ValueError`` (nothing written) when a uuid
        appears twice, ``RunReplacedError`` (nothing written) when ``run`` is given and is no
        longer the log's run (``begin_run``).

        ``events``: how many provenance events the session made. Their ids are reserved in the
        same transaction and the first is returned (None without events), so event ids follow
        the order the log puts commits in: a FlowFile's events are numbered in the order they
        happened, whichever processes made them. ``event_batch``: those events, encoded (an
        ``EncodedBatch``: ``data``, ``count``, ``min_timestamp``, ``max_timestamp``; ``events``
        is then its count), kept in the same transaction in the provenance outbox under their
        first id until the provenance repository takes them (``outbox_entries``,
        ``remove_from_outbox``): a commit's events are as durable as the commit itself.

        ``state``: the session's change of its processor's state, written in the same transaction
        (``StateConflictError``, nothing written, when its ``expected`` version is not the stored one).
        """
        prepared, rkeys, columns = rec.encode_commit(updates, removals, self._environment.prefix)  # errors first
        new_ckeys = [rec.claim_key(r) for r in new_claims]
        outbox = None
        if event_batch is not None:
            events = event_batch.count
            outbox = rec.encode_outbox_entry(event_batch.count, event_batch.min_timestamp, event_batch.max_timestamp,
                                              event_batch.data)
        if not (prepared or rkeys or new_ckeys or events or state):
            self._environment.check_open()
            return None
        entry = None
        if prepared or rkeys or new_ckeys:
            entry = rec.encode_journal_entry(len(prepared), columns, rkeys, new_ckeys)
        with self._environment.lock:  # the bookkeeping in commit order: an executor's tasks commit at once
            with self._environment.write("committing") as txn:
                seq, first_event, fold = self._write_commit(txn, entry, events, outbox, run, state)
            self._commits += 1
            if seq:
                self._journal.hold(seq, (prepared, rkeys, new_ckeys))
        if fold:  # one application at a time in this process: the others' commits go on
            self._journal.apply_after_commit()
        return first_event

    def _write_commit(self, txn: Txn, entry: bytes | None, events: int, outbox: bytes | None, run: int | None,
                      state: StateChange | None) -> tuple[int, int | None, bool]:
        """Write a commit in ``txn``: its journal ``entry`` (if it changes FlowFiles or claims),
        its event ids, its ``outbox`` entry, its state change. Returns ``(its sequence or 0, the
        first event id or None, whether the journal is to be applied now)``."""
        if run is not None:
            self._counters.check_run(txn, run)
        seq, first_event, fold = 0, None, False
        if entry is not None:
            seq = self._environment.next_seq(txn)
            fold = self._journal.append(txn, seq, entry)
        if events:
            first_event = self._counters.take_event_ids(txn, events)
            if outbox is not None:
                self._outbox.put(txn, first_event, outbox)
        if state is not None:
            self._state.put(txn, state)
        return seq, first_event, fold

    def apply_if_long(self) -> bool:
        """Apply the journal's first part if the journal has reached the bounds at which a commit
        would apply it (FOLD_ENTRIES, FOLD_BYTES); whether it did (not when another process
        applied it meanwhile). For a process that applies it on behalf of the committing ones
        (``applied_elsewhere``), off their path: it holds the writer lock only to write what it
        worked out before."""
        return self._journal.apply_if_long()

    # --- processor state --------------------------------------------------------------------

    def get_state(self, component_id: str) -> StateMap:
        """The stored state of a processor (version -1 and no values when it has none)."""
        return self._state.get(component_id)

    def state_ids(self) -> list[str]:
        """The component ids that have stored state, without reading it (a damaged one included)."""
        return self._state.ids()

    # --- the provenance outbox ----------------------------------------------------------------

    def outbox_entries(self, max_bytes: int = 64 * 1024**2) -> list[OutboxEntry]:
        """Commits' provenance events the provenance repository has not taken yet (``commit``'s
        ``event_batch``), in id order, about ``max_bytes`` at most (always at least one):
        ``(first id, (count, min_timestamp, max_timestamp, batch))``, or ``(first id, problem)``
        for a damaged entry (its events cannot be read). The journal is not applied for this: the
        outbox is read as it is."""
        return self._outbox.entries(max_bytes)

    def remove_from_outbox(self, first_ids: Iterable[int]) -> int:
        """Delete the outbox entries of these first event ids (the provenance repository has
        them); returns how many were there."""
        return self._outbox.remove(first_ids)

    # --- swap files -----------------------------------------------------------------------------

    def register_swap_file(self, queue: str, location: str, count: int, size: int,
                           flowfiles: Sequence[FlowFile] | None = None) -> None:
        """Record that ``queue`` swapped ``count`` FlowFiles (``size`` bytes) out to ``location``.

        The FlowFiles' records stay in the repository, so their claimant counts stay right and a
        lost swap file loses nothing. With ``flowfiles`` given (the FlowFiles written to the swap
        file), they move in the same transaction to the queue ``swap:<location>``, which
        ``recover()`` skips, so that a restart does not count them twice; each must currently be
        in ``queue`` (else ``ValueError``, nothing written).
        """
        self._swap.register(queue, location, count, size, flowfiles)

    def unregister_swap_file(self, location: str) -> int:
        """Forget a swap file (swapped back in, or its queue was emptied).

        Records still in ``swap:<location>`` move back to the swap file's queue in the same
        transaction, keeping their FIFO position; returns how many moved. An unknown location is
        ignored (returns 0), so a retried call is harmless."""
        return self._swap.unregister(location)

    def rename_queue(self, old: str, new: str) -> int:
        """Move every FlowFile of queue ``old`` to queue ``new``, each keeping its FIFO position,
        in one transaction: how a connection whose id changed keeps what was queued under the
        former one. The swap files ``old`` registered are unregistered in the same transaction
        (as ``unregister_swap_file``: their records join ``new`` in their FIFO position), since
        each file's header names ``old``; the files are then orphans, deleted at start-up.
        Returns how many records moved, swapped ones included."""
        return self._swap.rename_queue(old, new)

    def swap_files(self) -> list[SwapFileEntry]:
        """Registered swap files, oldest first: ``{queue, location, count, size}``."""
        return self._swap.files()

    # --- checkpoint -----------------------------------------------------------------------------

    def _sync(self) -> None:
        """Flush every committed transaction to disk (``fdatasync`` of data.mdb); a seam for tests."""
        self._environment.sync()

    def checkpoint(self) -> list[ResourceClaim]:
        """Make every commit so far durable, then release the claims whose count reached 0 in a
        commit before this checkpoint started and is still 0.

        Returns the released resource claims, for the content repository to archive or delete.
        Each is returned once, except that after a power loss with ``always_sync=False`` the
        release itself may be undone and a claim returned again: deleting must tolerate a claim
        that is already gone. Claims whose count reaches 0 while the checkpoint runs wait for
        the next one.
        """
        started = time.time()
        t0 = time.perf_counter()
        self._journal.settle()
        with self._environment.read() as txn:
            boundary = self._environment.load_counter(txn, K_SEQ)
        self._sync()
        with self._environment.write("checkpointing") as txn:
            released = self._claims.release_due(txn, boundary)
            duration = time.perf_counter() - t0
            txn.put(
                K_CHECKPOINT,
                rec.pack_u64(int(started * 1000)) + rec.pack_u64(int(duration * 1e6)) + rec.pack_u64(len(released)),
                db=self._environment.meta,
            )
        self._checkpoints += 1
        self._last_checkpoint = {"time": started, "duration": time.perf_counter() - t0, "released": len(released)}
        return released

    # --- reading --------------------------------------------------------------------------------

    def recover(
        self, batch_size: int = 10_000, *, include_swapped: bool = False
    ) -> Iterator[tuple[str, list[FlowFile]]]:
        """Stream ``(queue_id, batch)`` for every queue, each queue in FIFO order
        (queue_date, queue_index, id), at most ``batch_size`` FlowFiles a batch; consecutive
        batches of one queue continue its order.

        Reads one short transaction per batch, never the whole repository at once (NIFI-7557);
        run it at start-up, before sessions commit (each batch sees the latest commits).
        FlowFiles in swap files (queues ``swap:<location>``) are skipped unless
        ``include_swapped``: their queues learn of them from ``swap_files()``."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        return self._holding(self._reader.scan(b"", None, batch_size, include_swapped))

    def iter_queue(self, queue: str, batch_size: int = 10_000) -> Iterator[list[FlowFile]]:
        """Stream one queue's FlowFiles in FIFO order (e.g. ``swap:<location>`` to swap in)."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        prefix = self._environment.prefix(queue)
        return self._holding(b for _q, b in self._reader.scan(prefix, rec.prefix_successor(prefix), batch_size, True))

    def _holding(self, stream: Iterator[T]) -> Iterator[T]:
        """``stream``, keeping this repository alive while it is read: its environment stays this
        instance's, so no other instance opens it in this process meanwhile (``open_here``)."""
        yield from stream

    def page(self, queue: str, start: bytes | None, stop: bytes | None,
             count: int) -> tuple[list[FlowFile], bytes | None]:
        """Up to ``count`` FlowFiles of ``queue`` in FIFO order whose order-index keys lie in
        ``[start, stop)`` (``None``: from the queue's first, to its last), and the key to start
        the next page at (``None``: the range is done). One short read transaction: a queue pages
        its FlowFiles in from here instead of holding them all."""
        if count < 1:
            raise ValueError("count must be at least 1")
        return self._reader.page(queue, start, stop, count)

    def last_key(self, queue: str) -> bytes | None:
        """The order-index key of ``queue``'s last FlowFile in FIFO order (None: it is empty)."""
        return self._reader.last_key(queue)

    def get(self, uuid: str) -> QueuedFlowFile | None:
        """The stored FlowFile with this uuid and its queue, or None."""
        return self._reader.get(uuid)

    def queue_counts(self) -> dict[str, int]:
        """FlowFiles per queue id (swapped-out ones under ``swap:<location>``)."""
        return {q: c for q, (c, _s) in self.queue_sizes().items()}

    def queue_sizes(self) -> dict[str, tuple[int, int]]:
        """``(FlowFile count, content bytes)`` per queue id."""
        self._journal.settle()
        return self._queues.sizes()

    def claimant_count(self, resource: ResourceClaim) -> int:
        """How many FlowFiles in the repository reference ``resource``."""
        self._journal.settle()
        v = self._claims.lookup(resource)
        return 0 if v is None else v[0]

    def is_referenced(self, resource: ResourceClaim) -> bool:
        """Whether the content repository must keep ``resource``: a FlowFile references it, or it
        waits for the next checkpoint to be released. Orphan cleanup deletes only the others."""
        self._journal.settle()
        v = self._claims.lookup(resource)
        return v is not None and (v[0] > 0 or v[1] != 0)

    def pending_release(self) -> list[ResourceClaim]:
        """Claims without claimant that the next checkpoint releases (or the one after), oldest first."""
        self._journal.settle()
        return self._claims.pending_release()

    # --- start-up repair ------------------------------------------------------------------------

    def rebuild_claimant_counts(self, max_reported: int = 1000) -> RebuildReport:
        """Recompute every claimant count (and each queue's size, the order index and the next
        id) from the FlowFile records, fix what differs, and report it (repair.py).

        Streams the records in one write transaction (memory: one counter per resource claim and
        per queue). Run at start-up, before the flow starts, against leaked or double counts
        (NIFI-8727, NIFI-6110, NIFI-1527). A count found too high drops to 0 and the claim waits
        for the next checkpoint like any other unreferenced claim."""
        return rebuild_claimant_counts(self._environment, self._journal, self._claims, self._queues,
                                       self._counters, max_reported)

    # --- statistics, closing --------------------------------------------------------------------

    def stats(self) -> RepositoryStats:
        """The repository's figures: table sizes, counters, the last checkpoint, the LMDB map."""
        environment = self._environment
        env = environment.check_open()
        self._journal.settle()
        with environment.read() as txn:
            entries = {name: txn.stat(db)["entries"] for name, db in (
                ("flowfiles", environment.flowfiles), ("claims", environment.claims),
                ("pending_release", environment.destructible), ("swap_files", environment.swap),
                ("queues", environment.queues), ("provenance_outbox", environment.outbox))}
            seq = environment.load_counter(txn, K_SEQ)
            next_id = environment.load_counter(txn, K_NEXT_ID)
            next_event_id = self._counters.next_event_id(txn)
            cp = txn.get(K_CHECKPOINT, db=environment.meta)
        info = env.info()
        last = self._last_checkpoint
        if last is None and cp is not None and len(cp) == 24:
            last = {
                "time": rec.unpack_u64(cp[:8]) / 1000,
                "duration": rec.unpack_u64(cp[8:16]) / 1e6,
                "released": rec.unpack_u64(cp[16:]),
            }
        return {
            "path": str(self.path),
            "always_sync": self.always_sync,
            "flowfiles": entries["flowfiles"],
            "queues": entries["queues"],
            "claims": entries["claims"],
            "pending_release": entries["pending_release"],
            "swap_files": entries["swap_files"],
            "provenance_outbox": entries["provenance_outbox"],
            "commit_seq": seq,
            "commits": self._commits,
            "checkpoints": self._checkpoints,
            "unknown_removals": self._journal.unknown_removals,
            "damaged_counts": environment.damaged_counts,
            "next_id": next_id,
            "next_event_id": next_event_id,
            "last_checkpoint_time": last["time"] if last else None,
            "last_checkpoint_duration": last["duration"] if last else None,
            "last_checkpoint_released": last["released"] if last else None,
            "map_size": info["map_size"],
            "map_used": (info["last_pgno"] + 1) * env.stat()["psize"],
            "file_size": (self.path / "data.mdb").stat().st_size,
            "readers": info["num_readers"],
        }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Apply the journal and close the environment (idempotent). Commits are already on disk
        (or in the page cache with ``always_sync=False``); close does not sync: call
        ``checkpoint()`` for that."""
        environment = self._environment
        with environment.lock:
            if not self._closed and not environment.closed:
                try:
                    self._journal.settle()
                except FlowFileRepositoryError as e:  # the journal stays; the next open applies it
                    log.error("%s", e)
            environment.close()
            self._closed = True
        self._unregister()

    def __enter__(self) -> WriteAheadFlowFileRepository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<WriteAheadFlowFileRepository {self.path} {state} always_sync={self.always_sync}>"
