"""The provenance repository: journals on the commit path, merged event files and an index behind.

``register_batches`` (once per group of session commits) gives the events one-up ids and appends
them, encoded as batches (event.py), as one framed record to one journal (round-robin over
``journal_count`` journals per container). Nothing is compressed or indexed there. ``rollover``
(from a timer: ``maybe_rollover``) seals the current journals, then, while ``register`` carries on
into new ones, merges them in id order into one event file of compressed blocks with a table of
contents, indexes it, commits the file by renaming it, and deletes the journals. ``get``, ``events``
and ``search`` read the event files and index and *also* the journals not yet merged, so every
registered event is visible at once.

On-disk layout under ``root`` (``<repository>/provenance``)::

    <container>/journals/<generation>-<n>.journal   journals (generation = first id it could hold)
    <container>/<first id>.prov, <first id>.toc     merged event files (.part while being written)
    index/<created ms>-<first id>/data.mdb          LMDB index shards
    next-event-id                                   the id high-water mark (JSON), see _write_next_id

Durability: ``register`` returns once the record is in the OS page cache (no fsync), which survives
the death of every process but not a power loss. Rollover fsyncs the event file, its table of
contents and the index (``fsync_rollover``) before it deletes the journals.

Crash recovery (``__init__``; docs/formats/provenance-repository.md lists every crash point):
partial event files (``.part``) are deleted with their index entries; journals whose events are in a
committed event file are deleted; the other journals have any torn tail cut and are merged again;
the id generator continues one past the largest id found anywhere.

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

import bisect
import heapq
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

import orjson

from repositories.fsutil import fsync_dir, write_atomically
from repositories.provenance.event import (
    FIELD_INDEX,
    EncodedBatch,
    ProvenanceEvent,
    ProvenanceEventType,
    ProvenanceFormatError,
    check_batches,
    decode_entry,
    decode_event,
    encode_batch,
    encode_fields,
    event_fields,
    event_from_fields,
    matches,
)
from repositories.provenance.eventfile import (
    EVENT_SUFFIX,
    PART_SUFFIX,
    TOC_SUFFIX,
    BlockCache,
    EventFileReader,
    EventFileWriter,
    TableOfContents,
    event_file_name,
    rebuild_toc,
    toc_file_name,
)
from repositories.provenance.index import (
    FileSpan,
    Hit,
    IndexQuery,
    LiveFiles,
    ProvenanceIndex,
    attribute_key,
    term_key,
)
from repositories.provenance.journal import (
    JournalFile,
    JournalRecord,
    journal_name,
    pack_count,
    pack_entry_header,
    parse_journal_name,
)
from repositories.provenance.lineage import Lineage, build_lineage, collect_family, named_uuids

log = logging.getLogger(__name__)


NEXT_ID_FILE = "next-event-id"
_TIMESTAMP = FIELD_INDEX["timestamp"]


class ProvenanceReadOnlyError(RuntimeError):
    """A write to a repository opened with ``readonly=True``."""


#: Steps of a merge at which a fault hook is called (tests stop there to simulate a crash).
MERGE_STEPS = (
    "merge-started",        # the .part files exist, nothing written yet
    "merge-indexed-chunk",  # after each chunk of index entries is committed
    "merge-written",        # event file and TOC complete and fsynced, still .part
    "merge-toc-renamed",    # .toc final, .prov still .part
    "merge-committed",      # .prov renamed: the merge is committed, journals not yet deleted
    "merge-journal-deleted",  # after each journal is deleted
)


@dataclass(eq=False)
class _Generation:
    """The journals written between two rollovers; ids in it start at ``first_id``."""

    first_id: int
    #: one past the last id it takes, set when rollover seals it (ids below that may still come:
    #: it is merged once every id below ``end_id`` is visible or given up)
    end_id: int | None = None
    journals: dict[int, JournalFile] = field(default_factory=dict)
    record_first_ids: list[int] = field(default_factory=list)
    records: list[tuple[JournalFile, JournalRecord]] = field(default_factory=list)
    last_id: int = -1
    count: int = 0
    bytes: int = 0
    attempted: bool = False   # a merge of it was started (and failed): redo with cleanup

    def add_record(self, journal: JournalFile, record: JournalRecord) -> None:
        self.record_first_ids.append(record.first_id)
        self.records.append((journal, record))
        self.last_id = max(self.last_id, record.last_id)
        self.count += record.count

    def holds(self, event_id: int) -> bool:
        return self.count > 0 and self.record_first_ids[0] <= event_id <= self.last_id

    def payload_for(self, event_id: int) -> tuple[JournalFile, JournalRecord] | None:
        index = bisect.bisect_right(self.record_first_ids, event_id) - 1
        if index < 0:
            return None
        journal, record = self.records[index]
        return (journal, record) if record.first_id <= event_id <= record.last_id else None


@dataclass
class _EventFile:
    file_id: int
    path: Path
    toc_path: Path
    toc: TableOfContents

    @property
    def span(self) -> FileSpan:
        return FileSpan(self.file_id, self.toc.last_id, self.toc.min_timestamp, self.toc.max_timestamp)

    def size(self) -> int:
        total = 0
        for path in (self.path, self.toc_path):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                pass
        return total


class ProvenanceRepository:
    """A node's durable provenance repository (see the module docstring)."""

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
        if readonly:
            if not self.root.is_dir():
                raise FileNotFoundError(f"no provenance repository at {self.root}")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            for container in self.containers:
                (container / "journals").mkdir(parents=True, exist_ok=True)
        self.journal_count = journal_count
        self.rollover_interval = rollover_interval
        self.block_size = block_size
        self.max_storage_time = max_storage_time
        self.max_storage_size = max_storage_size
        self.indexed_attributes = tuple(indexed_attributes)
        self.rollover_bytes = rollover_bytes
        self.fsync_rollover = fsync_rollover
        self.index_chunk = index_chunk
        self.compression_level = compression_level
        self.gap_timeout = gap_timeout
        self._hook = fault_hook or (lambda step: None)
        self._lock = threading.RLock()          # state; held briefly by register and readers
        self._visible = threading.Condition(self._lock)   # notified as ids become visible
        self._merge_lock = threading.Lock()      # one rollover / age-off at a time
        self._cache = BlockCache(32)
        self._readers: dict[int, EventFileReader] = {}
        self._files: dict[int, _EventFile] = {}
        self._file_ids: list[int] = []
        self._sealed: list[_Generation] = []
        self._journal_turn = 0
        self._container_turn = 0
        self._closed = False
        self._index = ProvenanceIndex(self.root / "index", shard_size=index_shard_size,
                                      indexed_attributes=self.indexed_attributes, sync=fsync_rollover,
                                      readonly=readonly)
        self._searchable = set(self._index.attributes)
        self.recovery: dict[str, Any] = {}
        self._next_id = 0   # every id below is visible, or was given up
        #: numbered records written whose lower ids have not arrived: first id -> (journal, record, since)
        self._held: dict[int, tuple[_Generation, JournalFile, JournalRecord, float]] = {}
        self.ids_given_up = 0
        self._active = _Generation(0)
        try:
            self._recover()
        except BaseException:
            self._closed = True
            self._close_handles()
            raise
        self._last_rollover = time.monotonic()

    @classmethod
    def from_settings(cls, repository_dir: str | Path, settings: Any, **overrides: Any) -> "ProvenanceRepository":
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
            first, last = self._append_locked((batch,))
        for offset, event in enumerate(events):
            event.event_id = first + offset
        return first, last

    def register_batches(self, batches: Sequence[EncodedBatch]) -> tuple[int, int]:
        """``register`` for events the caller encoded (``encode_batch``): the batches go to the
        journal as they are, in one record, their ids following one another; nothing is decoded
        here. Returns ``(first_id, last_id)``. A running flow registers ``register_numbered``."""
        check_batches(batches)
        with self._lock:
            return self._append_locked(batches)

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
        with self._lock:
            self._check_writable()
            now = time.monotonic()
            for position, (first, batch) in enumerate(numbered):
                if batch.count == 0:
                    continue
                if first in self._held or first < self._next_id:
                    if first not in self._held and self.get(first) is None:
                        late.append(position)
                    continue    # else: sent again after a lost answer, written already
                generation, journal, record = self._write_locked([(first, batch)])
                if first == self._next_id:
                    self._sequence(generation, journal, record)
                else:
                    self._held[first] = (generation, journal, record, now)
            self._skip_gaps(now)
        return late

    def _append_locked(self, batches: Sequence[EncodedBatch]) -> tuple[int, int]:
        """Append encoded batches, their ids the next ones, to one journal in one record."""
        self._check_writable()
        self._skip_gaps(time.monotonic(), force=True)  # not mixed with a flow's numbered ids
        first = next_id = self._next_id
        if not batches:
            return first, first - 1
        numbered = []
        for batch in batches:
            numbered.append((next_id, batch))
            next_id += batch.count
        self._sequence(*self._write_locked(numbered))
        return first, next_id - 1

    def _write_locked(self, numbered: Sequence[tuple[int, EncodedBatch]]
                      ) -> tuple[_Generation, JournalFile, JournalRecord]:
        """Write batches with consecutive ids as one record of the next journal in turn, in the
        generation their ids belong to (a sealed one still waiting for them, or the active one)."""
        parts: list[bytes] = [pack_count(len(numbered))]
        count = 0
        for first, batch in numbered:
            parts.append(pack_entry_header(first, batch.count, len(batch.data)))
            parts.append(batch.data)
            count += batch.count
        min_ts = min(b.min_timestamp for _, b in numbered)
        max_ts = max(b.max_timestamp for _, b in numbered)
        payload = b"".join(parts)
        first = numbered[0][0]
        generation = self._active
        if first < generation.first_id:
            generation = next(g for g in reversed(self._sealed) if g.first_id <= first)
        turn = self._journal_turn
        self._journal_turn = (turn + 1) % (self.journal_count * len(self.containers))
        journal = generation.journals.get(turn)
        if journal is None:
            container = self.containers[turn % len(self.containers)]
            path = container / "journals" / journal_name(generation.first_id, turn)
            journal = generation.journals[turn] = JournalFile.create(path, generation.first_id)
        journal.append(payload, first, first + count - 1, count, min_ts, max_ts)
        generation.bytes += len(payload) + 8
        return generation, journal, journal.records[-1]

    def _sequence(self, generation: _Generation, journal: JournalFile, record: JournalRecord) -> None:
        """Make a written record visible (its ids are next), then any held ones that follow it."""
        while True:
            generation.add_record(journal, record)
            self._next_id = record.last_id + 1
            held = self._held.pop(self._next_id, None)
            if held is None:
                self._visible.notify_all()
                return
            generation, journal, record, _ = held

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``event_id`` is visible (or was given up)."""
        with self._visible:
            return self._visible.wait_for(lambda: self._next_id > event_id, timeout)

    def _skip_gaps(self, now: float, force: bool = False) -> None:
        """Give up ids that a held batch has waited ``gap_timeout`` seconds for (all, with
        ``force``), oldest first, so the batches after them become visible."""
        while self._held:
            lowest = min(self._held)
            generation, journal, record, since = self._held[lowest]
            if not force and now - since < self.gap_timeout:
                return
            gap = lowest - self._next_id
            self.ids_given_up += gap
            log.warning("provenance: event ids %d-%d never arrived within %g s (their commit's process "
                        "died between the write-ahead log and provenance); %d event ids given up",
                        self._next_id, lowest - 1, self.gap_timeout, gap)
            del self._held[lowest]
            self._sequence(generation, journal, record)

    # ------------------------------------------------------------------ rollover

    def maybe_rollover(self, now: float | None = None) -> dict | None:
        """Roll over if ``rollover_interval`` seconds (monotonic) passed or the journals grew past
        ``rollover_bytes``; returns what ``rollover`` returned, or None."""
        now = time.monotonic() if now is None else now
        due = now - self._last_rollover >= self.rollover_interval
        with self._lock:
            self._skip_gaps(now)
            if not due and self.rollover_bytes is not None:
                due = self._active.bytes >= self.rollover_bytes
            # a sealed generation whose last ids came since: merged now, not at the next rollover
            due = due or any(not g.attempted for g in self._complete())
        return self.rollover() if due else None

    def _complete(self) -> list[_Generation]:
        """The sealed generations every id of which is visible or given up, oldest first."""
        return [g for g in self._sealed if g.end_id is None or g.end_id <= self._next_id]

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
                active = self._active
                if active.journals:   # it holds records, visible or waiting for lower ids
                    end = max([active.first_id, self._next_id,
                               *(r.last_id + 1 for g, _, r, _ in self._held.values() if g is active)])
                    self._active.end_id = end
                    self._sealed.append(self._active)
                    self._active = _Generation(end)
                todo = self._complete()
            self._last_rollover = time.monotonic()
            if not todo:
                return {"events": 0, "file": None, "blocks": 0, "bytes": 0, "seconds": 0.0}
            return self._merge(todo)

    def _merge(self, generations: list[_Generation], *, redo: bool | None = None) -> dict:
        """Merge these sealed generations into one event file (the caller holds the merge lock)."""
        started = time.perf_counter()
        redo = any(g.attempted for g in generations) if redo is None else redo
        for generation in generations:
            generation.attempted = True
        journals = [j for g in generations for j in g.journals.values() if j.records]
        first_id = min(r.first_id for j in journals for r in j.records)
        if redo:
            self._discard_partial_merge(journals, first_id)
        container = self.containers[self._container_turn % len(self.containers)]
        self._container_turn += 1
        writer = EventFileWriter(container, first_id, block_size=self.block_size, level=self.compression_level)
        try:
            self._hook("merge-started")
            batch = self._index.batch(first_id)
            last = -1
            chunk = self.index_chunk
            merged = heapq.merge(*(_tagged(j) for j in journals), key=itemgetter(0))
            for entry_id, count, data, journal in merged:
                if entry_id <= last:
                    log.warning("provenance merge: events %d-%d seen twice in the journals; kept once",
                                entry_id, entry_id + count - 1)
                    continue
                last = entry_id + count - 1
                columns, filenames = batch.decode(data, entry_id, count, f"{journal.path} entry {entry_id}")
                times = columns[_TIMESTAMP]
                batch.add_columns(columns, writer.add(entry_id, count, data, min(times), max(times)), filenames)
                if len(batch) >= chunk:
                    self._index.add(batch)
                    batch = self._index.batch(first_id)
                    self._hook("merge-indexed-chunk")
            if len(batch):
                self._index.add(batch)
                self._hook("merge-indexed-chunk")
            toc = writer.finish(fsync=self.fsync_rollover)
            self._hook("merge-written")
        except BaseException:
            writer.close()   # leave the .part files: the next rollover or the next open undoes them
            raise
        final_toc = container / toc_file_name(first_id)
        final_prov = container / event_file_name(first_id)
        os.replace(writer.toc_path, final_toc)
        self._hook("merge-toc-renamed")
        os.replace(writer.path, final_prov)          # the commit point of the merge
        if self.fsync_rollover:
            fsync_dir(container)
        self._hook("merge-committed")
        info = _EventFile(first_id, final_prov, final_toc, toc)
        with self._lock:
            self._add_file(info)
            merged_ids = {id(g) for g in generations}
            self._sealed = [g for g in self._sealed if id(g) not in merged_ids]
            for journal in journals:
                journal.close()
                _unlink(journal.path)
                self._hook("merge-journal-deleted")
            next_id = self._next_id
        self._write_next_id(next_id)
        return {
            "events": toc.event_count,
            "file": str(final_prov),
            "first_id": toc.first_id,
            "last_id": toc.last_id,
            "blocks": len(toc.block_offsets),
            "bytes": info.size(),
            "seconds": time.perf_counter() - started,
        }

    def _discard_partial_merge(self, journals: list[JournalFile], first_id: int) -> None:
        """Undo what an interrupted merge of these journals left: .part files and index entries."""
        partial_ids: set[int] = set()
        for container in self.containers:
            for path in list(container.iterdir()):
                name = path.name
                if name.endswith(PART_SUFFIX):
                    stem = name.split(".", 1)[0]
                    if stem.isdigit():
                        partial_ids.add(int(stem))
                    _unlink(path)
                elif name.endswith((TOC_SUFFIX, EVENT_SUFFIX)) and name.split(".", 1)[0].isdigit():
                    # renamed but not taken in (the merge failed after its renames, in this
                    # process): the journals still hold every event, so it is redone too
                    file_id = int(name.split(".", 1)[0])
                    if file_id not in self._files:
                        partial_ids.add(file_id)
                        _unlink(path)
        batch = self._index.batch(first_id)
        removed = 0
        if first_id >= 0 and self._index.max_indexed_id() >= first_id:
            partial_ids.add(first_id)
        else:
            journals = []   # nothing of theirs reached the index: no need to read them twice
        for journal in journals:
            for entry_id, count, data in journal.iter_entries():
                columns, filenames = batch.decode(data, entry_id, count, f"{journal.path} entry {entry_id}")
                batch.add_columns(columns, 0, filenames)
                if len(batch) >= self.index_chunk:
                    removed += self._index.remove(batch, ())
                    batch = self._index.batch(first_id)
        removed += self._index.remove(batch, partial_ids)
        self.recovery["partial_index_entries_removed"] = self.recovery.get("partial_index_entries_removed", 0) + removed
        self.recovery.setdefault("partial_files_removed", []).extend(sorted(partial_ids))

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> None:
        report = self.recovery
        report.update(journals_merged=0, events_recovered=0, journals_deleted=0, torn_bytes_cut=0,
                      tocs_rebuilt=[], problems=[], events_lost=0)
        partial_found = False
        # 1. committed event files (a .prov with its .toc); partial ones are noted
        for container in self.containers:
            if not container.is_dir():   # read-only: a container never written
                continue
            for path in sorted(container.iterdir()):
                name = path.name
                if name.endswith(PART_SUFFIX):
                    partial_found = True
                    continue
                if not name.endswith(EVENT_SUFFIX) or not name[: -len(EVENT_SUFFIX)].isdigit():
                    continue
                file_id = int(name[: -len(EVENT_SUFFIX)])
                toc_path = container / toc_file_name(file_id)
                try:
                    toc = TableOfContents.read(toc_path)
                except (FileNotFoundError, ProvenanceFormatError) as err:
                    log.warning("provenance: rebuilding the table of contents of %s (%s)", path, err)
                    toc = rebuild_toc(path)
                    if not self.readonly:   # read-only: rebuilt in memory for this reader
                        write_atomically(toc_path, toc.encode())
                    report["tocs_rebuilt"].append(str(path))
                self._add_file(_EventFile(file_id, path, toc_path, toc))
        # 2. journals: cut torn tails; delete the empty and the already merged
        leftovers: dict[int, _Generation] = {}
        damaged: set[int] = set()   # generations with a journal that lost records
        max_id = -1
        for container in self.containers:
            journals = container / "journals"
            for path in sorted(journals.iterdir()) if journals.is_dir() else ():
                parsed = parse_journal_name(path.name)
                if parsed is None:
                    continue
                journal, scan = JournalFile.open_existing(path, readonly=self.readonly)
                if scan.problem:
                    report["torn_bytes_cut"] += 0 if self.readonly else scan.torn_bytes
                    cut = "stepped over (read-only)" if self.readonly else "cut"
                    problem = f"{path}: {scan.problem}; {scan.torn_bytes} bytes {cut} at the end"
                    report["problems"].append(problem)
                    log.warning("provenance: damaged journal: %s", problem)
                first = min(r.first_id for r in journal.records) if journal is not None else -1
                if journal is None or self._file_holding(first) is not None:  # empty, or merged before a crash
                    if journal is not None:
                        journal.close()
                    if not self.readonly:
                        _unlink(path)
                        report["journals_deleted"] += 1
                    continue
                generation = leftovers.setdefault(journal.generation, _Generation(journal.generation))
                generation.journals[parsed[1]] = journal
                max_id = max(max_id, *(r.last_id for r in journal.records))
                if scan.problem:
                    damaged.add(journal.generation)
        # 3. the id generator: one past the largest id anywhere
        max_id = max([max_id, self._index.max_indexed_id()]
                     + [f.toc.last_id for f in self._files.values()])
        self._next_id = max(max_id + 1, self._read_next_id())
        self._active = _Generation(self._next_id)
        # 4. redo the unfinished merge(s): all leftover journals into one event file
        if leftovers:
            generations = []
            for first in sorted(leftovers):
                generation = leftovers[first]
                records = sorted((r.first_id, id(j), j, r) for j in generation.journals.values() for r in j.records)
                for _, _, journal, record in records:
                    generation.add_record(journal, record)
                generations.append(generation)
                self._count_lost(generation, records, report, first in damaged)
            self._sealed = generations
            if self.readonly:   # searched where they lie, as a running repository's unmerged journals
                report["events_recovered"] = sum(g.count for g in generations)
            else:
                result = self._merge(generations, redo=True)
                report["journals_merged"] = sum(len(g.journals) for g in generations)
                report["events_recovered"] = result["events"]
        elif partial_found and not self.readonly:
            self._discard_partial_merge([], -1)
        # 5. index files that are committed but missing from the index (e.g. index deleted)
        indexed = set().union(*(s.files for s in self._index.shards)) if self._index.shards else set()
        unindexed = sorted(set(self._files) - indexed)
        if self.readonly:
            if unindexed:
                raise ProvenanceFormatError(
                    f"{self.root}: event files {', '.join(map(str, unindexed[:10]))} are not in the index (it was "
                    f"deleted or damaged), so a search would miss their events; reading without writing cannot "
                    f"rebuild it: run 'flowactors provenance repair' with write access, or start the flow")
            return
        for file_id in unindexed:
            self._reindex(self._files[file_id])
            report.setdefault("files_reindexed", []).append(file_id)
        self._index.drop_unreferenced(self._files)
        self._write_next_id(self._next_id)

    def _count_lost(self, generation: _Generation, records: list, report: dict, damaged: bool) -> None:
        """Ids missing between the readable records of a generation's journals. With a damaged
        journal among them they are events it lost: warned, and counted in
        ``recovery["events_lost"]`` (the ids after the last readable record cannot be counted).
        Otherwise they are ids a flow reserved whose events never arrived (a process died between
        the write-ahead log and provenance, or the ids were given up): ``ids_without_events``."""
        expected, lost = generation.first_id, []
        for first, _, _journal, record in records:
            if first > expected:
                lost.append((expected, first - 1))
            expected = max(expected, record.last_id + 1)
        count = sum(b - a + 1 for a, b in lost)
        if count and not damaged:
            report["ids_without_events"] = report.get("ids_without_events", 0) + count
        elif count:
            ranges = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in lost[:10])
            message = (f"{count} provenance events of journals {generation.first_id}-* could not be read "
                       f"(ids {ranges}{', ...' if len(lost) > 10 else ''}); the events after them were kept")
            report["events_lost"] += count
            report["problems"].append(message)
            log.warning("provenance: %s", message)

    def _reindex(self, info: _EventFile) -> None:
        reader = self._reader(info)
        batch = self._index.batch(info.file_id)
        for offset, entry_id, count, data in reader.iter_entries_all():
            columns, filenames = batch.decode(data, entry_id, count, f"{info.path} entry {entry_id}")
            batch.add_columns(columns, offset, filenames)
            if len(batch) >= self.index_chunk:
                self._index.add(batch)
                batch = self._index.batch(info.file_id)
        self._index.add(batch)

    def _read_next_id(self) -> int:
        path = self.root / NEXT_ID_FILE
        try:
            data = orjson.loads(path.read_bytes())
            return int(data["next_event_id"]) if data.get("version") == 1 else 0
        except FileNotFoundError:
            return 0
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            log.warning("provenance: ignoring unreadable %s (%s)", path, err)
            return 0

    def _write_next_id(self, next_id: int) -> None:
        """Keep the id high-water mark, so ids never repeat even after every file aged off."""
        write_atomically(self.root / NEXT_ID_FILE,
                         orjson.dumps({"version": 1, "next_event_id": next_id}), fsync=self.fsync_rollover)

    # ------------------------------------------------------------------ file bookkeeping

    def _add_file(self, info: _EventFile) -> None:
        self._files[info.file_id] = info
        bisect.insort(self._file_ids, info.file_id)

    def _file_holding(self, event_id: int) -> _EventFile | None:
        index = bisect.bisect_right(self._file_ids, event_id) - 1
        if index < 0:
            return None
        info = self._files[self._file_ids[index]]
        return info if info.toc.first_id <= event_id <= info.toc.last_id else None

    def _reader(self, info: _EventFile) -> EventFileReader:
        reader = self._readers.get(info.file_id)
        if reader is None:
            reader = EventFileReader(info.path, info.toc, self._cache)
            with self._lock:
                existing = self._readers.setdefault(info.file_id, reader)
            if existing is not reader:
                reader.close()
                reader = existing
        return reader

    def _unmerged(self) -> list[_Generation]:
        return [*self._sealed, self._active]

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the provenance repository is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise ProvenanceReadOnlyError(f"the provenance repository at {self.root} is open read-only")

    # ------------------------------------------------------------------ reads

    def get(self, event_id: int) -> ProvenanceEvent | None:
        """The event with this id, from the journals or an event file; None if unknown or aged off."""
        with self._lock:
            self._check_open()
            for generation in self._unmerged():
                if generation.holds(event_id):
                    found = generation.payload_for(event_id)
                    if found is None:
                        return None
                    journal, record = found
                    for entry_id, count, data in journal.record_entries(record):
                        if entry_id <= event_id < entry_id + count:
                            fields = decode_entry(data, entry_id, count, f"{journal.path} entry {entry_id}")
                            return event_from_fields(fields[event_id - entry_id], f"{journal.path} event {event_id}")
                    return None
            info = self._file_holding(event_id)
        if info is None:
            return None
        try:
            return self._reader(info).get(event_id)
        except FileNotFoundError:
            return None

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        """Up to ``count`` events with id >= ``start_id``, in id order (gaps where events aged off)."""
        out: list[ProvenanceEvent] = []
        position = max(start_id, 0)
        while len(out) < count:
            with self._lock:
                self._check_open()
                pending = [self._files[i] for i in self._file_ids if self._files[i].toc.last_id >= position]
                if not pending:
                    out.extend(self._journal_events_from(position, count - len(out)))
                    return out
            for info in pending:
                try:
                    for event in self._reader(info).iter_from(position):
                        out.append(event)
                        if len(out) >= count:
                            return out
                except FileNotFoundError:
                    pass
                position = max(position, info.toc.last_id + 1)
        return out

    def _journal_events_from(self, position: int, count: int) -> list[ProvenanceEvent]:
        out: list[ProvenanceEvent] = []
        for generation in self._unmerged():
            if generation.count == 0 or generation.last_id < position:
                continue
            start = max(bisect.bisect_right(generation.record_first_ids, position) - 1, 0)
            for journal, record in generation.records[start:]:
                if record.last_id < position:
                    continue
                for entry_id, events, data in journal.record_entries(record):
                    if entry_id + events <= position:
                        continue
                    fields = decode_entry(data, entry_id, events, f"{journal.path} entry {entry_id}")
                    for one in fields[max(position - entry_id, 0):]:
                        out.append(event_from_fields(one, f"{journal.path} event {one[0]}"))
                        if len(out) >= count:
                            return out
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
        filters = _search_filters(self._searchable, flowfile_uuid, event_type, component_id,
                                  component_name, relationship, filename, attributes, start_time,
                                  end_time, min_size, max_size)
        if limit is not None and limit <= 0:
            return []
        with self._lock:
            self._check_open()
            live = self._live_files()
            out = self._scan_journals(filters, limit)
        if limit is None or len(out) < limit:
            query = _index_query(filters)
            hits = self._index.search(query, None if limit is None else limit - len(out), live)
            out.extend(self._fetch(hits))
        return out

    def _live_files(self) -> LiveFiles:
        return LiveFiles(self._files[i].span for i in self._file_ids)

    def _scan_journals(self, filters: dict, limit: int | None) -> list[ProvenanceEvent]:
        """Matching events of the unmerged journals, newest first (called with the lock held)."""
        out: list[ProvenanceEvent] = []
        needles = _needles(filters)
        contains_all = (lambda data: all(needle in data for needle in needles)) if needles else None
        for event in self._journal_events(contains_all, filters["start_time"], filters["end_time"]):
            if matches(event, **filters):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def _journal_events(self, test: Callable[[bytes], bool] | None, start: int | None = None,
                        end: int | None = None) -> Iterator[ProvenanceEvent]:
        """Events of the unmerged journals, newest first (iterate with the lock held), from the
        records whose time span meets ``[start, end]``, and only those whose encoding passes
        ``test``: a prefilter on bytes (a value searched for must be in them), tried on a whole
        record payload first, then on each entry (a batch of events); only the entries passing it
        are decoded."""
        for generation in reversed(self._unmerged()):
            for journal, record in reversed(generation.records):
                if (start is not None and record.max_ts < start) or (end is not None and record.min_ts > end):
                    continue   # the record's events are all outside the time range
                payload = journal.read_payload(record)
                if test is not None and not test(payload):
                    continue   # a value searched for is not in the record: nothing to decode
                for entry_id, count, data in reversed(list(journal.record_entries(record))):
                    if test is not None and not test(bytes(data)):
                        continue
                    for one in reversed(decode_entry(data, entry_id, count, f"{journal.path} entry {entry_id}")):
                        yield event_from_fields(one, f"{journal.path} event {one[0]}")

    def _find_many(self, uuids: Collection[str]) -> list[ProvenanceEvent]:
        """Every event naming any of these uuids (as ``search(flowfile_uuid=...)`` finds them),
        each once, in no particular order: one scan of the unmerged journals (decoding only the
        entries holding one of the uuids), one read transaction per index shard for all the uuids'
        postings, and one ``_fetch`` of all the hits (each event block decompressed once)."""
        wanted = set(uuids)
        filters = [_search_filters(self._searchable, uuid) for uuid in wanted]
        contains_any = _contains_any([needle for f in filters for needle in _needles(f)])
        with self._lock:
            self._check_open()
            live = self._live_files()
            out = [event for event in self._journal_events(contains_any)
                   if not wanted.isdisjoint(named_uuids(event))]
        hits: dict[int, Hit] = {}
        for found in self._index.search_many([_index_query(f) for f in filters], live):
            for hit in found:
                hits[hit.event_id] = hit
        out.extend(self._fetch(list(hits.values())))
        return out

    def _fetch(self, hits: list[Hit]) -> list[ProvenanceEvent]:
        """The events the index hits point at, in hit order; dangling hits are skipped."""
        wanted: dict[int, dict[int, list[int]]] = {}
        for hit in hits:
            wanted.setdefault(hit.file_id, {}).setdefault(hit.block_offset, []).append(hit.event_id)
        found: dict[int, ProvenanceEvent] = {}
        for file_id, blocks in wanted.items():
            info = self._files.get(file_id)
            if info is None:
                continue
            try:
                found.update(self._reader(info).get_many(blocks))
            except FileNotFoundError:
                continue
        return [found[h.event_id] for h in hits if h.event_id in found]

    def lineage(self, flowfile_uuid: str, *, max_events: int = 100_000) -> Lineage:
        """The lineage graph of a FlowFile's whole family (see lineage.py for its shape), read a
        BFS level at a time (``_find_many``); at most about ``max_events`` events (see
        ``collect_family``: the FlowFile whose events reach it is kept whole), ``truncated`` if cut."""
        events, truncated = collect_family(flowfile_uuid, self._find_many, max_events)
        return build_lineage(flowfile_uuid, events, truncated)

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
                for file_id in list(self._file_ids):
                    if usage <= target:
                        break
                    size = self._delete_file(file_id)
                    freed += size
                    deleted.append(file_id)
                    dropped += self._index.drop_unreferenced(self._files)
                    usage = self._usage()
            cutoff = (now - self.max_storage_time) * 1000.0
            for file_id in list(self._file_ids):
                if self._files[file_id].toc.max_timestamp < cutoff:
                    freed += self._delete_file(file_id)
                    deleted.append(file_id)
            dropped += self._index.drop_unreferenced(self._files)
        return {"deleted_files": deleted, "dropped_shards": dropped, "bytes_freed": freed}

    def _delete_file(self, file_id: int) -> int:
        with self._lock:
            info = self._files.pop(file_id)
            self._file_ids.remove(file_id)
            self._readers.pop(file_id, None)    # closed when no search holds it any more
        size = info.size()
        self._cache.forget(str(info.path))
        _unlink(info.path)
        _unlink(info.toc_path)
        return size

    def _usage(self) -> int:
        with self._lock:
            files = list(self._files.values())
            journal_bytes = sum(j.size for g in self._unmerged() for j in g.journals.values())
        return sum(f.size() for f in files) + self._index.size_bytes() + journal_bytes

    def stats(self) -> dict:
        with self._lock:
            files = [self._files[i] for i in self._file_ids]
            journals = [j for g in self._unmerged() for j in g.journals.values()]
            unmerged = sum(g.count for g in self._unmerged())
            next_id = self._next_id
            waiting = len(self._held)
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
            "ids_given_up": self.ids_given_up,
        }

    def continue_from(self, next_id: int) -> None:
        """Ids below ``next_id`` will never be registered here (a flow starts numbering at the
        FlowFile repository's next event id, which may be past this repository's)."""
        with self._lock:
            self._check_open()
            if next_id > self._next_id and not self._held:
                self._next_id = next_id
                if not self._active.count:
                    self._active = _Generation(next_id)

    def settle(self) -> None:
        """Give up every id still awaited: nothing more is on its way (the flow stopped)."""
        with self._lock:
            self._skip_gaps(time.monotonic(), force=True)

    def sync_journals(self) -> None:
        """fsync every journal not merged yet: what ``register`` wrote survives a power loss
        (a caller that must keep that promise before it forgets the events: ``always_sync``)."""
        with self._lock:
            self._check_open()
            for generation in self._unmerged():
                for journal in generation.journals.values():
                    journal.fsync()

    def close(self) -> None:
        """Close every file (no rollover: the next open merges what the journals hold)."""
        with self._merge_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_handles()

    def _close_handles(self) -> None:
        for generation in self._unmerged():
            for journal in generation.journals.values():
                journal.close()
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        self._index.close()

    def __enter__(self) -> "ProvenanceRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- shared search helpers


def _search_filters(searchable: set[str], flowfile_uuid=None, event_type=None, component_id=None,
                    component_name=None, relationship=None, filename=None, attributes=None,
                    start_time=None, end_time=None, min_size=None, max_size=None) -> dict:
    attrs = dict(attributes or {})
    if filename is not None:
        attrs["filename"] = filename
    unknown = sorted(set(attrs) - searchable)
    if unknown:
        raise ValueError(
            f"attributes {unknown} are not indexed; searchable attributes are {sorted(searchable)} "
            "(add names to provenance_indexed_attributes)"
        )
    return {
        "flowfile_uuid": flowfile_uuid,
        "event_type": None if event_type is None else ProvenanceEventType(event_type),
        "component_id": component_id,
        "component_name": component_name,
        "relationship": relationship,
        "attributes": attrs or None,
        "start_time": start_time,
        "end_time": end_time,
        "min_size": min_size,
        "max_size": max_size,
    }


def _needles(filters: dict) -> list[bytes]:
    """Byte strings an encoded event must contain to match (orjson encodes a string one way)."""
    values = [filters[name] for name in ("flowfile_uuid", "component_id", "component_name", "relationship")
              if filters[name] is not None]
    if filters["event_type"] is not None:
        values.append(filters["event_type"].value)
    values.extend((filters["attributes"] or {}).values())
    return [orjson.dumps(value) for value in values]


#: Up to this many needles, ``_contains_any`` searches for each in turn (a fast substring search
#: each, about 0.1 us per 500-byte event); past it, one split of the bytes on '"' is cheaper.
_FEW_NEEDLES = 16


def _contains_any(needles: Collection[bytes]) -> Callable[[bytes], bool]:
    """A test of whether bytes contain any of these needles (``_needles``: encoded JSON strings).

    With many needles (a lineage level's uuids), a needle ``"x"`` with no '"' inside occurs in the
    bytes exactly when ``x`` is one of the pieces between two '"' of the bytes, so one split and a
    set lookup test them all at once; any other needle is searched for by itself.
    """
    needles = list(dict.fromkeys(needles))
    if len(needles) <= _FEW_NEEDLES:
        return lambda data: any(needle in data for needle in needles)
    quoted: set[bytes] = set()
    others: list[bytes] = []
    for needle in needles:
        inner = needle[1:-1]
        if len(needle) >= 2 and needle[:1] == needle[-1:] == b'"' and b'"' not in inner:
            quoted.add(inner)
        else:
            others.append(needle)

    def contains_any(data: bytes) -> bool:
        if not quoted.isdisjoint(data.split(b'"')[1:-1]):
            return True
        return any(needle in data for needle in others)

    return contains_any


def _index_query(filters: dict) -> IndexQuery:
    terms: list[tuple[bytes, bytes]] = []
    if filters["flowfile_uuid"] is not None:
        terms.append((b"uuid", term_key(filters["flowfile_uuid"])))
    if filters["event_type"] is not None:
        terms.append((b"type", filters["event_type"].value.encode()))
    for name in ("component_id", "component_name", "relationship"):
        if filters[name] is not None:
            terms.append((name.encode(), term_key(filters[name])))
    for name, value in (filters["attributes"] or {}).items():
        terms.append((b"attribute", attribute_key(name, value)))
    return IndexQuery(tuple(terms), filters["start_time"], filters["end_time"],
                      filters["min_size"], filters["max_size"])


def _tagged(journal: JournalFile) -> Iterator[tuple[int, int, memoryview, JournalFile]]:
    for entry_id, count, data in journal.iter_entries():
        yield entry_id, count, data, journal


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------- in memory


class InMemoryProvenanceRepository:
    """The same interface with no files (unit tests, the stateless engine).

    Events are kept encoded (so a caller cannot change a registered event, and sizes are real);
    search is a scan. Age-off counts the encoded bytes against ``max_storage_size``.
    """

    def __init__(self, *, max_storage_time: float = 86400.0, max_storage_size: int = 10 << 30,
                 indexed_attributes: Sequence[str] = (), **_ignored: Any):
        self.max_storage_time = max_storage_time
        self.max_storage_size = max_storage_size
        self.indexed_attributes = tuple(indexed_attributes)
        self._searchable = {"filename", *self.indexed_attributes}
        self._events: dict[int, bytes] = {}
        self._bytes = 0
        self._next_id = 0
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, repository_dir: Any, settings: Any, **overrides: Any) -> "InMemoryProvenanceRepository":
        return cls(max_storage_time=settings.provenance_max_storage_time,
                   max_storage_size=settings.provenance_max_storage_size,
                   indexed_attributes=settings.provenance_indexed_attributes, **overrides)

    def register(self, events: Sequence[ProvenanceEvent]) -> tuple[int, int]:
        with self._lock:
            first = self._next_id
            for offset, event in enumerate(events):
                event.event_id = first + offset
            return self._store_locked(first, [encode_fields(event_fields(event)) for event in events])

    def register_batches(self, batches: Sequence[EncodedBatch]) -> tuple[int, int]:
        check_batches(batches)
        with self._lock:
            first = next_id = self._next_id
            encoded = []
            for batch in batches:
                encoded.extend(map(encode_fields, decode_entry(batch.data, next_id, batch.count)))
                next_id += batch.count
            return self._store_locked(first, encoded) if encoded else (first, first - 1)

    def register_numbered(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> list[int]:
        """Batches with ids reserved by the caller, kept at those ids (nothing here is late)."""
        check_batches([batch for _, batch in numbered])
        with self._lock:
            for first, batch in numbered:
                if batch.count and first not in self._events:
                    self._store_locked(first, list(map(encode_fields, decode_entry(batch.data, first, batch.count))))
        return []

    def continue_from(self, next_id: int) -> None:
        with self._lock:
            self._next_id = max(self._next_id, next_id)

    def settle(self) -> None:
        pass

    def sync_journals(self) -> None:
        pass

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        return True

    def _store_locked(self, first: int, encoded: list[bytes]) -> tuple[int, int]:
        in_order = first >= self._next_id
        for offset, data in enumerate(encoded):
            self._events[first + offset] = data
            self._bytes += len(data)
        if not in_order:   # ids come in order of arrival otherwise; readers walk them in id order
            self._events = dict(sorted(self._events.items()))
        self._next_id = max(self._next_id, first + len(encoded))
        return first, first + len(encoded) - 1

    def rollover(self) -> dict:
        return {"events": 0, "file": None, "blocks": 0, "bytes": 0, "seconds": 0.0}

    def maybe_rollover(self, now: float | None = None) -> dict | None:
        return None

    def get(self, event_id: int) -> ProvenanceEvent | None:
        with self._lock:
            data = self._events.get(event_id)
        return None if data is None else decode_event(data)

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        with self._lock:
            ids = [i for i in self._events if i >= start_id][:count]
            return [decode_event(self._events[i]) for i in ids]

    def _all_newest_first(self) -> Iterator[ProvenanceEvent]:
        with self._lock:
            items = list(self._events.values())
        for data in reversed(items):
            yield decode_event(data)

    def search(self, *, flowfile_uuid=None, event_type=None, component_id=None, component_name=None,
               relationship=None, filename=None, attributes=None, start_time=None, end_time=None,
               min_size=None, max_size=None, limit: int | None = 1000) -> list[ProvenanceEvent]:
        filters = _search_filters(self._searchable, flowfile_uuid, event_type, component_id,
                                  component_name, relationship, filename, attributes, start_time,
                                  end_time, min_size, max_size)
        out: list[ProvenanceEvent] = []
        if limit is not None and limit <= 0:
            return out
        for event in self._all_newest_first():
            if matches(event, **filters):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def _find_many(self, uuids: Collection[str]) -> list[ProvenanceEvent]:
        wanted = set(uuids)
        return [event for event in self._all_newest_first() if not wanted.isdisjoint(named_uuids(event))]

    def lineage(self, flowfile_uuid: str, *, max_events: int = 100_000) -> Lineage:
        events, truncated = collect_family(flowfile_uuid, self._find_many, max_events)
        return build_lineage(flowfile_uuid, events, truncated)

    def age_off(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        cutoff = (now - self.max_storage_time) * 1000.0
        removed = 0
        freed = 0
        with self._lock:
            shrinking = self._bytes > self.max_storage_size
            for event_id in list(self._events):
                data = self._events[event_id]
                if shrinking and self._bytes <= 0.9 * self.max_storage_size:
                    shrinking = False
                if not shrinking and decode_event(data).timestamp >= cutoff:
                    continue
                del self._events[event_id]
                self._bytes -= len(data)
                freed += len(data)
                removed += 1
        return {"deleted_events": removed, "bytes_freed": freed, "deleted_files": [], "dropped_shards": []}

    def stats(self) -> dict:
        with self._lock:
            return {
                "max_event_id": self._next_id - 1,
                "next_event_id": self._next_id,
                "oldest_event_id": next(iter(self._events), None),
                "event_files": 0,
                "event_file_bytes": 0,
                "events_in_files": 0,
                "journal_files": 0,
                "journal_bytes": 0,
                "index_shards": 0,
                "index_bytes": 0,
                "max_indexed_id": self._next_id - 1,
                "bytes_on_disk": 0,
                "bytes_in_memory": self._bytes,
                "index_lag": 0,
                "events": len(self._events),
            }

    def close(self) -> None:
        pass

    def __enter__(self) -> "InMemoryProvenanceRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
