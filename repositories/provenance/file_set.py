"""The committed event files of a durable provenance repository, by id, with their readers.

An event file (eventfile.py: ``<first id>.prov`` and its table of contents ``<first id>.toc``) is
taken in once its merge committed (or recovery found it) and leaves when age-off deletes it.
``EventFileSet`` finds the file holding an id, opens one reader a file (sharing one block cache)
and fetches the events the index points at, stepping over damaged blocks (noted in its
``DamageLog``). Its state is guarded by the repository's lock (given to the constructor); a reader
is used outside it, so a file deleted meanwhile makes a read raise ``FileNotFoundError``, which the
callers treat as the events being gone.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from repositories.provenance.damage import DamageLog
from repositories.provenance.event import ProvenanceEvent
from repositories.provenance.eventfile import BlockCache, DamagedBlockError, EventFileReader, TableOfContents
from repositories.provenance.index_query import FileSpan, Hit, LiveFiles


@dataclass
class StoredEventFile:
    """One committed event file: its id (its first event id), paths and table of contents."""

    file_id: int
    path: Path
    toc_path: Path
    toc: TableOfContents

    @property
    def span(self) -> FileSpan:
        return FileSpan(self.file_id, self.toc.last_id, self.toc.min_timestamp, self.toc.max_timestamp)

    def size(self) -> int:
        """Bytes of the event file and its table of contents (0 for one already deleted)."""
        total = 0
        for path in (self.path, self.toc_path):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                pass
        return total


class EventFileSet:
    """The committed event files, in id order (see the module docstring)."""

    def __init__(self, lock: threading.RLock, cache: BlockCache, damage: DamageLog):
        self._lock = lock
        self.cache = cache
        self.damage = damage
        self._files: dict[int, StoredEventFile] = {}
        self._file_ids: list[int] = []
        self._readers: dict[int, EventFileReader] = {}

    def __getitem__(self, file_id: int) -> StoredEventFile:
        return self._files[file_id]

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def __iter__(self) -> Iterator[int]:
        """The file ids, in id order."""
        return iter(list(self._file_ids))

    def in_order(self) -> list[StoredEventFile]:
        """Every file, oldest (lowest ids) first."""
        return [self._files[i] for i in self._file_ids]

    def add(self, info: StoredEventFile) -> None:
        self._files[info.file_id] = info
        bisect.insort(self._file_ids, info.file_id)

    def replace(self, info: StoredEventFile) -> None:
        """A file repaired in place (a new table of contents): read through it from now on."""
        with self._lock:
            self._files[info.file_id] = info
            reader = self._readers.pop(info.file_id, None)
        if reader is not None:
            reader.close()
        self.cache.forget(str(info.path))

    def holding(self, event_id: int) -> StoredEventFile | None:
        """The file whose id range holds ``event_id``, if any."""
        index = bisect.bisect_right(self._file_ids, event_id) - 1
        if index < 0:
            return None
        info = self._files[self._file_ids[index]]
        return info if info.toc.first_id <= event_id <= info.toc.last_id else None

    def from_position(self, position: int) -> list[StoredEventFile]:
        """The files holding ids at or past ``position``, in id order."""
        return [self._files[i] for i in self._file_ids if self._files[i].toc.last_id >= position]

    def live(self) -> LiveFiles:
        """What the index needs to know of the files (hits in other files are skipped)."""
        return LiveFiles(self._files[i].span for i in self._file_ids)

    def reader(self, info: StoredEventFile) -> EventFileReader:
        """The file's reader, opened on first use (may be called without the lock)."""
        reader = self._readers.get(info.file_id)
        if reader is None:
            reader = EventFileReader(info.path, info.toc, self.cache)
            with self._lock:
                existing = self._readers.setdefault(info.file_id, reader)
            if existing is not reader:
                reader.close()
                reader = existing
        return reader

    def fetch(self, hits: list[Hit], lost: list[int] | None = None) -> list[ProvenanceEvent]:
        """The events the index hits point at, in hit order; dangling hits are skipped, and so are
        hits into damaged blocks (noted in ``damage``; their ids appended to ``lost``)."""
        wanted: dict[int, dict[int, list[int]]] = {}
        for hit in hits:
            wanted.setdefault(hit.file_id, {}).setdefault(hit.block_offset, []).append(hit.event_id)
        found: dict[int, ProvenanceEvent] = {}
        for file_id, blocks in wanted.items():
            info = self._files.get(file_id)
            if info is None:
                continue
            try:
                reader = self.reader(info)
                for offset, ids in blocks.items():
                    try:
                        found.update(reader.get_many({offset: ids}))
                    except DamagedBlockError as err:
                        self._note(err, info, ids, lost)
            except DamagedBlockError as err:   # its header: every block of it
                self._note(err, info, [i for ids in blocks.values() for i in ids], lost)
            except FileNotFoundError:
                continue
        return [found[h.event_id] for h in hits if h.event_id in found]

    def _note(self, err: DamagedBlockError, info: StoredEventFile, ids: list[int], lost: list[int] | None) -> None:
        self.damage.note(err, info.toc, ids)
        if lost is not None:
            lost.extend(ids)

    def note_damage(self, info: StoredEventFile) -> Callable[[DamagedBlockError], None]:
        """What a sequential read of the file calls with a damaged block it steps over."""
        return lambda err: self.damage.note(err, info.toc)

    def delete(self, file_id: int) -> int:
        """Forget the file and delete it; returns the bytes it took."""
        with self._lock:
            info = self._files.pop(file_id)
            self._file_ids.remove(file_id)
            self._readers.pop(file_id, None)    # closed when no search holds it any more
        size = info.size()
        self.cache.forget(str(info.path))
        self.damage.forget(str(info.path))
        info.path.unlink(missing_ok=True)
        info.toc_path.unlink(missing_ok=True)
        return size

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
