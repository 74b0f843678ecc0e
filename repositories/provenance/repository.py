"""The durable provenance repository, ``WriteAheadProvenanceRepository``: journals on the commit
path, merged event files and an index behind; it implements ``ProvenanceRepository`` (protocol.py).

``register_batches`` (once per group of session commits) gives the events one-up ids and appends
them, encoded as batches (event.py), as one framed record to one journal (round-robin over
``journal_count`` journals per container). Nothing is compressed or indexed there. ``rollover``
(from a timer: ``maybe_rollover``) seals the current journals, then, while ``register`` carries on
into new ones, merges them in id order into one event file of compressed blocks with a table of
contents, indexes it, commits the file by renaming it, and deletes the journals. ``get``, ``events``
and ``search`` read the event files and index and *also* the journals not yet merged, so every
registered event is visible at once.

The parts, each a module: ``unmerged`` (the journals not merged yet, the order ids become visible
in), ``file_set`` (the committed event files), ``merge`` (rollover's merge), ``recovery`` (opening
what an earlier run left), ``index`` (LMDB index shards) and ``filters`` (a search's filters).

On-disk layout under ``root`` (``<repository>/provenance``)::

    <container>/journals/<generation>-<n>.journal   journals (generation = first id it could hold)
    <container>/<first id>.prov, <first id>.toc     merged event files (.part while being written)
    index/<created ms>-<first id>/data.mdb          LMDB index shards
    next-event-id                                   the id high-water mark (JSON), see merge.py

Durability: ``register`` returns once the record is in the OS page cache (no fsync), which survives
the death of every process but not a power loss. Rollover fsyncs the event file, its table of
contents and the index (``fsync_rollover``) before it deletes the journals.

Crash recovery (``__init__``, recovery.py; docs/formats/provenance-repository.md lists every crash
point): partial event files (``.part``) are deleted with their index entries; journals whose events
are in a committed event file are deleted; the other journals have any torn tail cut and are merged
again; the id generator continues one past the largest id found anywhere.

Damaged event files (damage.py, repair.py): a damaged block costs only its own events; the reads
step over it and note it (``damaged_blocks``, ``damage_warning``), ``repair_event_files`` drops it.

Read-only (``readonly=True``: the read-only commands on a stopped flow's folder): nothing is
created, cut, merged, deleted or written, LMDB index shards are opened ``readonly`` without their
lock file, and the journals recovery would merge are searched where they lie (as a running
repository searches its unmerged journals); a torn journal tail is stepped over, not cut. Safe
only while no process writes the folder, which the caller ensures by holding the repository lock
shared (``repositories.lock``). Writes raise ``ProvenanceReadOnlyError``.

Threads: every method is thread-safe. ``register`` only waits for the short seal and commit steps
of a rollover, never for the merge itself, so an actor may run ``rollover`` in a background thread.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from repositories.provenance.event import (
    EncodedBatch,
    ProvenanceEvent,
    ProvenanceEventType,
    ProvenanceFormatError,
    check_batches,
    encode_batch,
    event_fields,
    matches,
)
from repositories.provenance.damage import DamagedBlock, DamageLog, repair_advice
from repositories.provenance.eventfile import BlockCache, DamagedBlockError
from repositories.provenance.file_set import EventFileSet
from repositories.provenance.filters import Filters, contains_any, index_query, needles, search_filters
from repositories.provenance.index import Hit, ProvenanceIndex
from repositories.provenance.index_query import IndexQuery, LiveFiles
from repositories.provenance.lineage import Lineage, build_lineage, collect_family, named_uuids
from repositories.provenance.merge import JournalMerger
from repositories.provenance.protocol import ProvenanceRepository
from repositories.provenance.recovery import RepositoryRecovery
from repositories.provenance.repair import FileRepair, repair_event_files
from repositories.provenance.unmerged import UnmergedJournals


class ProvenanceReadOnlyError(RuntimeError):
    """A write to a repository opened with ``readonly=True``."""


class WriteAheadProvenanceRepository(ProvenanceRepository):
    """A node's durable provenance repository (see the module docstring); NiFi's name, and its
    design: events journaled first, merged into compressed, indexed event files behind."""

    def __init__(
        self,
        root: str | Path,
        *,
        containers: Sequence[str] = ("default",),
        journal_count: int = 4,
        rollover_interval: float = 30.0,
        block_size: int = 1 << 20,
        index_shard_size: int = 500 << 20,
        max_storage_time: float = 86400.0,
        max_storage_size: int = 10 << 30,
        indexed_attributes: Sequence[str] = (),
        rollover_bytes: int | None = 100 << 20,
        fsync_rollover: bool = True,
        index_chunk: int = 20_000,
        compression_level: int = 3,
        fault_hook: Callable[[str], None] | None = None,
        gap_timeout: float = 10.0,
        readonly: bool = False,
    ):
        if journal_count < 1:
            raise ValueError("journal_count must be at least 1")
        if not containers:
            raise ValueError("at least one container is needed")
        self.root = Path(root)
        self.readonly = readonly
        self.containers = [Path(c) if Path(c).is_absolute() else self.root / c for c in containers]
        self._make_folders()
        self.journal_count = journal_count
        self.rollover_interval = rollover_interval
        self.max_storage_time = max_storage_time
        self.max_storage_size = max_storage_size
        self.indexed_attributes = tuple(indexed_attributes)
        self.rollover_bytes = rollover_bytes
        self.gap_timeout = gap_timeout
        self._lock = threading.RLock()          # state; held briefly by register and readers
        self._merge_lock = threading.Lock()      # one rollover / age-off at a time
        self._closed = False
        self._cache = BlockCache(32)
        #: damaged event file blocks met (at open or by a read); a read-only repository's caller says so
        self._damage = DamageLog(self.root, warn=not readonly)
        self._files = EventFileSet(self._lock, self._cache, self._damage)
        self._journals = UnmergedJournals(self.containers, journal_count, gap_timeout, self._lock)
        self._index = ProvenanceIndex(self.root / "index", shard_size=index_shard_size,
                                      indexed_attributes=self.indexed_attributes, sync=fsync_rollover,
                                      readonly=readonly)
        self._searchable = set(self._index.attributes)
        self.recovery: dict[str, Any] = {}
        self._merger = JournalMerger(self.root, self.containers, self._index, self._files, self._journals,
                                     self._lock, self.recovery, block_size=block_size,
                                     compression_level=compression_level, fsync=fsync_rollover,
                                     index_chunk=index_chunk, hook=fault_hook or _no_fault)
        try:
            RepositoryRecovery(self.root, self.containers, readonly=readonly, files=self._files,
                               journals=self._journals, index=self._index, merger=self._merger,
                               report=self.recovery).run()
        except BaseException:
            self._closed = True
            self._close_handles()
            raise
        self._last_rollover = time.monotonic()

    def _make_folders(self) -> None:
        if self.readonly:
            if not self.root.is_dir():
                raise FileNotFoundError(f"no provenance repository at {self.root}")
            return
        self.root.mkdir(parents=True, exist_ok=True)
        for container in self.containers:
            (container / "journals").mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_settings(cls, repository_dir: str | Path, settings: Any,
                      **overrides: Any) -> "WriteAheadProvenanceRepository":
        """The repository at ``<repository_dir>/provenance`` configured by a ``Settings``
        (``overrides``: constructor arguments, e.g. ``readonly=True``)."""
        values: dict[str, Any] = dict(
            containers=tuple(settings.provenance_containers),
            rollover_bytes=settings.provenance_rollover_bytes,
            journal_count=settings.provenance_journal_count,
            rollover_interval=settings.provenance_rollover_interval,
            block_size=settings.provenance_block_size,
            index_shard_size=settings.provenance_index_shard_size,
            max_storage_time=settings.provenance_max_storage_time,
            max_storage_size=settings.provenance_max_storage_size,
            indexed_attributes=settings.provenance_indexed_attributes,
        )
        values.update(overrides)
        return cls(Path(repository_dir) / "provenance", **values)

    # ------------------------------------------------------------------ the merge's settings

    @property
    def block_size(self) -> int:
        """Uncompressed bytes of an event file's block."""
        return self._merger.block_size

    @property
    def index_chunk(self) -> int:
        """Events indexed in one index transaction of a merge (read at each merge)."""
        return self._merger.index_chunk

    @index_chunk.setter
    def index_chunk(self, events: int) -> None:
        self._merger.index_chunk = events

    # ------------------------------------------------------------------ commit path

    def register(self, events: Sequence[ProvenanceEvent]) -> tuple[int, int]:
        """Give the events one-up ids (set on them) and append them to one journal.

        Returns ``(first_id, last_id)`` (``(n, n - 1)`` for no events). On return the events are in
        the OS page cache (flushed, not fsynced) and visible to ``get``/``events``/``search``.
        """
        if not events:
            return self.register_batches(())
        batch = encode_batch([event_fields(event) for event in events])
        with self._lock:
            self._check_writable()
            first, last = self._journals.append((batch,), time.monotonic())
        for offset, event in enumerate(events):
            event.event_id = first + offset
        return first, last

    def register_batches(self, batches: Sequence[EncodedBatch]) -> tuple[int, int]:
        """``register`` for events the caller encoded (``encode_batch``): the batches go to the
        journal as they are, in one record, their ids following one another; nothing is decoded
        here. Returns ``(first_id, last_id)``. A running flow registers ``register_numbered``."""
        check_batches(batches)
        with self._lock:
            self._check_writable()
            return self._journals.append(batches, time.monotonic())

    def register_numbered(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> list[int]:
        """Append batches whose ids the FlowFile repository reserved in their commit's transaction
        (``commit(events=...)``), so ids follow the order commits were made in across every
        process; a flow's commit path does not wait for this call.

        Each batch is in the journal (page cache) on return. It becomes visible, and ``events``
        moves past it, once every id below it is visible too: a batch whose lower ids are still
        on their way from another process waits for them, so a reader walking ids never sees an
        id appear behind one it has read. Ids that do not arrive within ``gap_timeout`` seconds
        (their commit's process died between the log and this call) are given up. A batch
        sent again (its first id already here) is dropped. Returns the positions of batches
        that came after their ids were given up: the caller reserves new ids and sends them
        again (they are not written)."""
        check_batches([batch for _, batch in numbered])
        late: list[int] = []
        journals = self._journals
        with self._lock:
            self._check_writable()
            now = time.monotonic()
            for position, (first, batch) in enumerate(numbered):
                if batch.count == 0:
                    continue
                if journals.arrived(first):
                    if first not in journals.held and not self._written(first):
                        late.append(position)
                    continue    # else: sent again after a lost answer, written already
                journals.write_numbered(first, batch, now)
            journals.skip_gaps(now)
        return late

    def _written(self, event_id: int) -> bool:
        """Whether the event was written: it reads, or it lies in a damaged block (noted)."""
        try:
            return self.get(event_id) is not None
        except ProvenanceFormatError:
            return True

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``event_id`` is visible (or was given up)."""
        return self._journals.wait_visible(event_id, timeout)

    def continue_from(self, next_id: int) -> None:
        """Ids below ``next_id`` will never be registered here (a flow starts numbering at the
        FlowFile repository's next event id, which may be past this repository's)."""
        with self._lock:
            self._check_open()
            self._journals.continue_from(next_id)

    def settle(self) -> None:
        """Give up every id still awaited: nothing more is on its way (the flow stopped)."""
        with self._lock:
            self._journals.skip_gaps(time.monotonic(), force=True)

    def sync_journals(self) -> None:
        """fsync every journal not merged yet: what ``register`` wrote survives a power loss
        (a caller that must keep that promise before it forgets the events: ``always_sync``)."""
        with self._lock:
            self._check_open()
            self._journals.sync()

    # ------------------------------------------------------------------ rollover

    def maybe_rollover(self, now: float | None = None) -> dict | None:
        """Roll over if ``rollover_interval`` seconds (monotonic) passed or the journals grew past
        ``rollover_bytes``; returns what ``rollover`` returned, or None."""
        now = time.monotonic() if now is None else now
        due = now - self._last_rollover >= self.rollover_interval
        with self._lock:
            journals = self._journals
            journals.skip_gaps(now)
            if not due and self.rollover_bytes is not None:
                due = journals.active.bytes >= self.rollover_bytes
            # a sealed generation whose last ids came since: merged now, not at the next rollover
            due = due or any(not g.attempted for g in journals.complete())
        return self.rollover() if due else None

    def rollover(self) -> dict:
        """Merge the journals written so far into one event file, index it, delete the journals.

        Returns ``{"events", "file", "blocks", "bytes", "seconds"}``; with no events it does nothing
        and writes no file (``file`` is None). A generation whose numbered ids have not all
        arrived is sealed at the highest id written so far and merged by a later rollover, once
        the ids below that are visible or given up: no event file's ids overlap another's.
        """
        with self._merge_lock:
            with self._lock:
                self._check_writable()
                self._journals.seal()
                todo = self._journals.complete()
            self._last_rollover = time.monotonic()
            if not todo:
                return {"events": 0, "file": None, "blocks": 0, "bytes": 0, "seconds": 0.0}
            return self._merger.merge(todo)

    # ------------------------------------------------------------------ reads

    def get(self, event_id: int) -> ProvenanceEvent | None:
        """The event with this id, from the journals or an event file; None if unknown or aged off."""
        with self._lock:
            self._check_open()
            if self._journals.holds(event_id):
                return self._journals.get(event_id)
            info = self._files.holding(event_id)
        if info is None:
            return None
        try:
            return self._files.reader(info).get(event_id)
        except FileNotFoundError:
            return None
        except DamagedBlockError as err:
            self._damage.note(err, info.toc, [event_id])
            raise ProvenanceFormatError(
                f"provenance event {event_id} cannot be read: {err}; {repair_advice(self.root)}") from None

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        """Up to ``count`` events with id >= ``start_id``, in id order (gaps where events aged off,
        and where event file blocks are damaged: those are noted, ``damaged_blocks``)."""
        out: list[ProvenanceEvent] = []
        position = max(start_id, 0)
        while len(out) < count:
            with self._lock:
                self._check_open()
                pending = self._files.from_position(position)
                if not pending:
                    out.extend(self._journals.events_from(position, count - len(out)))
                    return out
            for info in pending:
                try:
                    for event in self._files.reader(info).iter_from(position, self._files.note_damage(info)):
                        out.append(event)
                        if len(out) >= count:
                            return out
                except FileNotFoundError:
                    pass
                except DamagedBlockError as err:   # its header: every block of it
                    self._damage.note(err, info.toc)
                position = max(position, info.toc.last_id + 1)
        return out

    def search(
        self,
        *,
        flowfile_uuid: str | None = None,
        event_type: ProvenanceEventType | str | None = None,
        component_id: str | None = None,
        component_name: str | None = None,
        relationship: str | None = None,
        filename: str | None = None,
        attributes: Mapping[str, str] | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        limit: int | None = 1000,
    ) -> list[ProvenanceEvent]:
        """Events meeting every given filter, newest (highest id) first, at most ``limit``.

        ``flowfile_uuid`` also matches events that name the uuid as a parent or child;
        ``filename`` and ``attributes`` match the value after the event (else before it) and only
        for indexed attributes (``filename`` plus ``indexed_attributes``); times (ms) and sizes
        (``updated_size``) are inclusive ranges. ``limit=None`` returns every match.
        """
        filters = search_filters(self._searchable, flowfile_uuid, event_type, component_id,
                                 component_name, relationship, filename, attributes, start_time,
                                 end_time, min_size, max_size)
        if limit is not None and limit <= 0:
            return []
        with self._lock:
            self._check_open()
            live = self._files.live()
            out = self._scan_journals(filters, limit)
        if limit is None or len(out) < limit:
            out.extend(self._search_index(index_query(filters), None if limit is None else limit - len(out), live))
        return out

    def _search_index(self, query: IndexQuery, limit: int | None, live: LiveFiles) -> list[ProvenanceEvent]:
        """The events of the index's hits, newest first, at most ``limit``: hits in damaged blocks
        cannot be read, so more hits are asked for (twice as many, or as many more as were lost)
        until ``limit`` events were read or the index has no more."""
        if limit is None:
            return self._files.fetch(self._index.search(query, None, live))
        asked = limit
        while True:
            hits = self._index.search(query, asked, live)
            lost: list[int] = []
            found = self._files.fetch(hits, lost)
            if len(found) >= limit or len(hits) < asked:
                return found[:limit]
            asked = max(2 * asked, limit + len(lost))

    def _scan_journals(self, filters: Filters, limit: int | None) -> list[ProvenanceEvent]:
        """Matching events of the unmerged journals, newest first (called with the lock held)."""
        out: list[ProvenanceEvent] = []
        wanted = needles(filters)
        contains_all = (lambda data: all(needle in data for needle in wanted)) if wanted else None
        for event in self._journals.newest_first(contains_all, filters["start_time"], filters["end_time"]):
            if matches(event, **filters):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def _find_many(self, uuids: Collection[str], lost: list[int]) -> list[ProvenanceEvent]:
        """Every event naming any of these uuids (as ``search(flowfile_uuid=...)`` finds them),
        each once, in no particular order: one scan of the unmerged journals (decoding only the
        entries holding one of the uuids), one read transaction per index shard for all the uuids'
        postings, and one ``fetch`` of all the hits (each event block decompressed once); the ids
        of hits in damaged blocks go to ``lost``."""
        wanted = set(uuids)
        filters = [search_filters(self._searchable, uuid) for uuid in wanted]
        test = contains_any([needle for f in filters for needle in needles(f)])
        with self._lock:
            self._check_open()
            live = self._files.live()
            out = [event for event in self._journals.newest_first(test)
                   if not wanted.isdisjoint(named_uuids(event))]
        hits: dict[int, Hit] = {}
        for found in self._index.search_many([index_query(f) for f in filters], live):
            for hit in found:
                hits[hit.event_id] = hit
        out.extend(self._files.fetch(list(hits.values()), lost))
        return out

    def lineage(self, flowfile_uuid: str, *, max_events: int = 100_000) -> Lineage:
        """The lineage graph of a FlowFile's whole family (see lineage.py for its shape), read a
        BFS level at a time (``_find_many``); at most about ``max_events`` events (see
        ``collect_family``: the FlowFile whose events reach it is kept whole), ``truncated`` if cut.
        Events of the family in damaged event file blocks are left out and listed in ``unreadable``
        (the blocks are in ``damaged_blocks``)."""
        lost: list[int] = []
        events, truncated = collect_family(flowfile_uuid, lambda uuids: self._find_many(uuids, lost), max_events)
        lineage = build_lineage(flowfile_uuid, events, truncated)
        lineage.unreadable = sorted(set(lost))
        return lineage

    # ------------------------------------------------------------------ damaged event files

    def damaged_blocks(self) -> list[DamagedBlock]:
        """The damaged event file blocks met so far, at open (``check_structure``: a file cut
        short, a damaged block length or header) or by a read (a block failing its checksum):
        their events cannot be read; the other blocks' can."""
        return self._damage.blocks()

    def damage_warning(self) -> str | None:
        """``damaged_blocks`` in one line: the files and blocks, the ids reads asked for in them,
        and the command that repairs them; None when none was met."""
        return self._damage.warning()

    def repair_event_files(self) -> list[FileRepair]:
        """Read every block of every event file and repair the damaged files: their damaged
        blocks dropped, the intact ones kept where they are, the index no longer pointing into
        the dropped ones (repair.py); one ``FileRepair`` a file that needed one."""
        with self._merge_lock:
            self._check_writable()
            return repair_event_files(self._files, self._index, fsync=self._merger.fsync)

    # ------------------------------------------------------------------ age-off and stats

    def age_off(self, now: float | None = None) -> dict:
        """Delete event files, oldest first: while usage is over ``max_storage_size`` (down to 90 %
        of it), then every file whose newest event is older than ``max_storage_time``; then drop the
        index shards whose event files are all gone. ``now`` is wall-clock seconds."""
        now = time.time() if now is None else now
        deleted: list[int] = []
        dropped: list[str] = []
        freed = 0
        with self._merge_lock:
            self._check_writable()
            usage = self._usage()
            if usage > self.max_storage_size:
                target = 0.9 * self.max_storage_size
                for file_id in self._files:
                    if usage <= target:
                        break
                    freed += self._files.delete(file_id)
                    deleted.append(file_id)
                    dropped += self._index.drop_unreferenced(self._files)
                    usage = self._usage()
            cutoff = (now - self.max_storage_time) * 1000.0
            for file_id in self._files:
                if self._files[file_id].toc.max_timestamp < cutoff:
                    freed += self._files.delete(file_id)
                    deleted.append(file_id)
            dropped += self._index.drop_unreferenced(self._files)
        return {"deleted_files": deleted, "dropped_shards": dropped, "bytes_freed": freed}

    def _usage(self) -> int:
        """Bytes on disk: event files, index shards and journals."""
        with self._lock:
            files = self._files.in_order()
            journal_bytes = sum(j.size for j in self._journals.journal_files())
        return sum(f.size() for f in files) + self._index.size_bytes() + journal_bytes

    def stats(self) -> dict:
        """Counts and sizes: ids, event files, journals, the index, and what waits to be merged."""
        with self._lock:
            files = self._files.in_order()
            journals = self._journals.journal_files()
            unmerged = self._journals.unmerged_events()
            next_id = self._journals.next_id
            waiting = len(self._journals.held)
        index = self._index.stats()
        file_bytes = sum(f.size() for f in files)
        journal_bytes = sum(j.size for j in journals)
        return {
            "max_event_id": next_id - 1,
            "next_event_id": next_id,
            "oldest_event_id": files[0].file_id if files else None,
            "event_files": len(files),
            "event_file_bytes": file_bytes,
            "events_in_files": sum(f.toc.event_count for f in files),
            "journal_files": len(journals),
            "journal_bytes": journal_bytes,
            "index_shards": index.shards,
            "index_bytes": index.bytes,
            "max_indexed_id": index.max_indexed_id,
            "bytes_on_disk": file_bytes + journal_bytes + index.bytes,
            "index_lag": unmerged,
            "waiting_batches": waiting,
            "ids_given_up": self._journals.ids_given_up,
            "damaged_blocks": len(self._damage.blocks()),
        }

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close every file (no rollover: the next open merges what the journals hold)."""
        with self._merge_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_handles()

    def _close_handles(self) -> None:
        self._journals.close()
        self._files.close()
        self._index.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the provenance repository is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise ProvenanceReadOnlyError(f"the provenance repository at {self.root} is open read-only")

    def __enter__(self) -> "WriteAheadProvenanceRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_fault(step: str) -> None:
    """The fault hook when none is given: every merge step goes on."""
