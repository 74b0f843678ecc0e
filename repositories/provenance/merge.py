"""Rollover's merge: sealed journals into one event file, indexed, then the journals deleted.

``JournalMerger.merge`` reads the journals of sealed generations in id order (a heap merge of
their entries), writes them as one event file of compressed blocks (``.prov.part`` and
``.toc.part``), indexes them a chunk at a time, fsyncs, renames the table of contents and then the
event file (the rename of the ``.prov`` is the merge's commit point), takes the file in and
deletes the journals. A merge that failed or was cut short by a crash is redone from the journals,
which still hold every event: ``discard_partial`` first removes what it left (``.part`` files,
files renamed but not taken in, index entries). docs/formats/provenance-repository.md lists every
crash point; ``MERGE_STEPS`` names them for the fault hook.

The id high-water mark (``next-event-id``) is written after each merge, so ids never repeat even
after every file aged off.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import orjson

from repositories.fsutil import fsync_dir, write_atomically
from repositories.provenance.event import FIELD_INDEX
from repositories.provenance.eventfile import (
    EVENT_SUFFIX,
    PART_SUFFIX,
    TOC_SUFFIX,
    EventFileWriter,
    TableOfContents,
    event_file_name,
    toc_file_name,
)
from repositories.provenance.file_set import EventFileSet, StoredEventFile
from repositories.provenance.index import ProvenanceIndex
from repositories.provenance.index_batch import IndexBatch
from repositories.provenance.journal import JournalFile
from repositories.provenance.unmerged import Generation, UnmergedJournals

log = logging.getLogger(__name__)

NEXT_ID_FILE = "next-event-id"
#: the largest event id (the index keys ids as u64, packs them as i64 in places)
_MAX_ID = (1 << 63) - 1
_TIMESTAMP = FIELD_INDEX["timestamp"]

#: Steps of a merge at which a fault hook is called (tests stop there to simulate a crash).
MERGE_STEPS = (
    "merge-started",        # the .part files exist, nothing written yet
    "merge-indexed-chunk",  # after each chunk of index entries is committed
    "merge-written",        # event file and TOC complete and fsynced, still .part
    "merge-toc-renamed",    # .toc final, .prov still .part
    "merge-committed",      # .prov renamed: the merge is committed, journals not yet deleted
    "merge-journal-deleted",  # after each journal is deleted
)


def read_next_id(root: Path) -> int:
    """The id high-water mark a repository kept under ``root`` (0 if none or unreadable: the
    ids then continue from the journals, the event files and the index)."""
    path = root / NEXT_ID_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return 0
    except orjson.JSONDecodeError as err:
        log.warning("provenance: ignoring unreadable %s (%s)", path, err)
        return 0
    if type(data) is not dict:
        log.warning("provenance: ignoring unreadable %s (not a JSON object)", path)
        return 0
    if data.get("version") != 1:
        return 0
    next_id = data.get("next_event_id")
    if type(next_id) is not int or not 0 <= next_id <= _MAX_ID:
        log.warning("provenance: ignoring unreadable %s (its next_event_id is %r, not an event id)", path, next_id)
        return 0
    return next_id


class JournalMerger:
    """Merges sealed generations into event files for one repository (see the module docstring).

    One merge at a time (the caller holds the repository's merge lock); the repository's lock is
    taken only to take the new file in and forget the journals. ``report`` is the repository's
    recovery report: what ``discard_partial`` removes is counted there.
    """

    def __init__(self, root: Path, containers: Sequence[Path], index: ProvenanceIndex, files: EventFileSet,
                 journals: UnmergedJournals, lock: threading.RLock, report: dict[str, Any], *,
                 block_size: int, compression_level: int, fsync: bool, index_chunk: int,
                 hook: Callable[[str], None]):
        self.root = root
        self.containers = list(containers)
        self.index = index
        self.files = files
        self.journals = journals
        self.lock = lock
        self.report = report
        self.block_size = block_size
        self.compression_level = compression_level
        self.fsync = fsync
        #: events indexed in one index transaction
        self.index_chunk = index_chunk
        self.hook = hook
        self._container_turn = 0

    def merge(self, generations: list[Generation], *, redo: bool | None = None) -> dict:
        """Merge these sealed generations into one event file; returns what ``rollover`` returns.
        ``redo``: clean up after an earlier attempt first (default: if one of them was attempted)."""
        started = time.perf_counter()
        redo = any(g.attempted for g in generations) if redo is None else redo
        for generation in generations:
            generation.attempted = True
        journals = [j for g in generations for j in g.journals.values() if j.records]
        first_id = min(r.first_id for j in journals for r in j.records)
        if redo:
            self.discard_partial(journals, first_id)
        container = self.containers[self._container_turn % len(self.containers)]
        self._container_turn += 1
        writer = EventFileWriter(container, first_id, block_size=self.block_size, level=self.compression_level)
        try:
            toc = self._write(writer, journals, first_id)
        except BaseException:
            writer.close()   # leave the .part files: the next rollover or the next open undoes them
            raise
        info = self._commit(writer, container, first_id, toc)
        with self.lock:
            self.files.add(info)
            self.journals.forget(generations)
            for journal in journals:
                journal.close()
                journal.path.unlink(missing_ok=True)
                self.hook("merge-journal-deleted")
            next_id = self.journals.next_id
        self.write_next_id(next_id)
        return {
            "events": toc.event_count,
            "file": str(info.path),
            "first_id": toc.first_id,
            "last_id": toc.last_id,
            "blocks": len(toc.block_offsets),
            "bytes": info.size(),
            "seconds": time.perf_counter() - started,
        }

    def _write(self, writer: EventFileWriter, journals: list[JournalFile], first_id: int) -> TableOfContents:
        """The journals' entries in id order into the event file and the index; the files stay
        ``.part``. An entry seen twice (a batch sent again) is kept once."""
        self.hook("merge-started")
        batch = self.index.batch(first_id)
        last = -1
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
            if len(batch) >= self.index_chunk:
                self.index.add(batch)
                batch = self.index.batch(first_id)
                self.hook("merge-indexed-chunk")
        if len(batch):
            self.index.add(batch)
            self.hook("merge-indexed-chunk")
        toc = writer.finish(fsync=self.fsync)
        self.hook("merge-written")
        return toc

    def _commit(self, writer: EventFileWriter, container: Path, first_id: int,
                toc: TableOfContents) -> StoredEventFile:
        """Rename the finished files into place: the table of contents, then the event file (the
        commit point of the merge)."""
        final_toc = container / toc_file_name(first_id)
        final_prov = container / event_file_name(first_id)
        os.replace(writer.toc_path, final_toc)
        self.hook("merge-toc-renamed")
        os.replace(writer.path, final_prov)          # the commit point of the merge
        if self.fsync:
            fsync_dir(container)
        self.hook("merge-committed")
        return StoredEventFile(first_id, final_prov, final_toc, toc)

    def discard_partial(self, journals: list[JournalFile], first_id: int) -> None:
        """Undo what an interrupted merge of these journals left: .part files and index entries."""
        partial_ids = self._remove_partial_files()
        batch = self.index.batch(first_id)
        removed = 0
        if first_id >= 0 and self.index.max_indexed_id() >= first_id:
            partial_ids.add(first_id)
        else:
            journals = []   # nothing of theirs reached the index: no need to read them twice
        for journal in journals:
            for entry_id, count, data in journal.iter_entries():
                columns, filenames = batch.decode(data, entry_id, count, f"{journal.path} entry {entry_id}")
                batch.add_columns(columns, 0, filenames)
                if len(batch) >= self.index_chunk:
                    removed += self.index.remove(batch, ())
                    batch = self.index.batch(first_id)
        removed += self.index.remove(batch, partial_ids)
        report = self.report
        report["partial_index_entries_removed"] = report.get("partial_index_entries_removed", 0) + removed
        report.setdefault("partial_files_removed", []).extend(sorted(partial_ids))

    def _remove_partial_files(self) -> set[int]:
        """Delete the .part files, and the files renamed but not taken in; returns their ids."""
        partial_ids: set[int] = set()
        for container in self.containers:
            for path in list(container.iterdir()):
                name = path.name
                if name.endswith(PART_SUFFIX):
                    stem = name.split(".", 1)[0]
                    if stem.isdigit():
                        partial_ids.add(int(stem))
                    path.unlink(missing_ok=True)
                elif name.endswith((TOC_SUFFIX, EVENT_SUFFIX)) and name.split(".", 1)[0].isdigit():
                    # renamed but not taken in (the merge failed after its renames, in this
                    # process): the journals still hold every event, so it is redone too
                    file_id = int(name.split(".", 1)[0])
                    if file_id not in self.files:
                        partial_ids.add(file_id)
                        path.unlink(missing_ok=True)
        return partial_ids

    def reindex(self, info: StoredEventFile) -> None:
        """Index a committed event file again (its entries missing from the index); its damaged
        blocks are stepped over (noted in the file set's damage log)."""
        reader = self.files.reader(info)
        batch: IndexBatch = self.index.batch(info.file_id)
        for offset, entry_id, count, data in reader.iter_entries_all(self.files.note_damage(info)):
            columns, filenames = batch.decode(data, entry_id, count, f"{info.path} entry {entry_id}")
            batch.add_columns(columns, offset, filenames)
            if len(batch) >= self.index_chunk:
                self.index.add(batch)
                batch = self.index.batch(info.file_id)
        self.index.add(batch)

    def write_next_id(self, next_id: int) -> None:
        """Keep the id high-water mark, so ids never repeat even after every file aged off."""
        write_atomically(self.root / NEXT_ID_FILE,
                         orjson.dumps({"version": 1, "next_event_id": next_id}), fsync=self.fsync)


def _tagged(journal: JournalFile) -> Iterator[tuple[int, int, memoryview, JournalFile]]:
    for entry_id, count, data in journal.iter_entries():
        yield entry_id, count, data, journal
