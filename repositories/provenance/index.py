"""The provenance index: LMDB tables in shards, written at rollover, read by ``search``.

Each shard is one LMDB environment (a directory ``index/<created ms>-<first event id>``) holding
the entries of a contiguous range of event ids; a new shard starts when the current one's data file
passes ``shard_size`` bytes. Tables (docs/formats/provenance-repository.md, "Index"):

* ``events``    u64 BE event id -> (u64 event file id, u64 block offset, i64 timestamp, i64 size)
* ``uuid``, ``attribute``: dupsort/dupfixed, term -> u64 BE event id (a value rarely shared by
  consecutive events), so the ids of one term are sorted and walking them backwards yields newest first
* ``type``, ``component_id``, ``component_name``, ``relationship``: dupsort/dupfixed, term -> a
  range of consecutive event ids holding it, (u64 BE last id, u64 BE first id), sorted by last id:
  one entry stands for a commit's run of events of one type or component. Format 1 stored one id
  an event here too; its shards are still read (never written to).
* ``zones``     u64 BE first id of a run of 1024 events -> (last id, min/max timestamp, min/max size)
* ``meta``      format version, creation time, time bounds, and ``file:<u64 BE id>`` for every
  event file the shard points at.

Searching: equality filters are intersected by a leapfrog join that walks each term's ids from the
newest down (seeking, never listing a whole term), checking time and size on the ``events`` entry;
with no equality filter the ``events`` table is walked backwards, skipping every zone whose time or
size span misses the ranges. Entries whose event file is gone (aged off, or a merge that never
finished) are skipped, and so are the ids whose ``events`` entry a repair deleted (``drop_pointers``:
their event file block was damaged). A shard is deleted whole once every event file it lists is gone.
An entry no writer makes (a key or value of another length) is the shard damaged: a
``ProvenanceFormatError`` naming it, with ``REBUILD_ADVICE``. docs/provenance-index.md has the
measurements behind this design; ``index_batch.py`` makes the entries.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Iterator, Sequence

import lmdb

from repositories.provenance.event import ProvenanceFormatError
from repositories.provenance.index_batch import ID_KEY, ID_RANGE, MAX_I64, POINTER, TERM_TABLES, ZONE, IndexBatch
# the terms and tables too: the index's callers outside the repository (tests, bench) name them from here
from repositories.provenance.index_batch import RANGE_TABLES, attribute_key, term_key, term_keys  # noqa: F401
# FileSpan too: the index's callers outside the repository (bench.provenance_workload) name it from here
from repositories.provenance.index_query import FileSpan, Hit, IndexQuery, LiveFiles  # noqa: F401

INDEX_FORMAT_VERSION = 2
#: shards of this format (a term entry an event) are read, never written to
LEGACY_INDEX_FORMAT = 1

_I64 = struct.Struct("<q")
_pack_id = ID_KEY.pack
_unpack_id = ID_KEY.unpack
_unpack_ptr = POINTER.unpack
_pack_range = ID_RANGE.pack


def _unpack_range(value: bytes | memoryview) -> tuple[int, int]:
    """``(first, last)`` of a term table's value: a range (format 2) or one id (format 1)."""
    if len(value) == 8:
        event_id = _unpack_id(value)[0]
        return event_id, event_id
    last, first = ID_RANGE.unpack(value)
    return first, last


#: what to do about a damaged index or one of an unknown format: recovery (a writable open) indexes
#: every event file that no shard lists
REBUILD_ADVICE = ("delete the index directory and start the flow, or run 'flowactors provenance repair': the index "
                  "is rebuilt from the event files")


class _Posting:
    """A cursor over one term's event ids (stored as ranges, or one id a value in format 1), able
    to seek to the largest id <= a target. After a seek the cursor sits on the range holding it."""

    __slots__ = ("cursor", "key", "count", "width")

    def __init__(self, txn: lmdb.Transaction, db, key: bytes):
        self.cursor = txn.cursor(db)
        self.key = key
        found = self.cursor.set_key(key)
        self.count = self.cursor.count() if found else 0   # entries, not ids: a join's order hint
        self.width = len(self.cursor.value()) if found else ID_RANGE.size

    def seek_le(self, target: int) -> int | None:
        c = self.cursor
        probe = _pack_id(target) if self.width == 8 else _pack_range(target, 0)
        if c.set_range_dup(self.key, probe):   # the first range whose last id >= target
            first, _ = _unpack_range(c.value())
            if first <= target:
                return target
            return _unpack_range(c.value())[1] if c.prev_dup() else None
        if c.set_key(self.key):
            c.last_dup()
            return _unpack_range(c.value())[1]
        return None

    def range(self) -> tuple[int, int]:
        """``(first, last)`` of the range the cursor sits on."""
        return _unpack_range(self.cursor.value())


def _leapfrog(postings: list[_Posting], upper: int, lower: int) -> Iterator[int]:
    """Ids present in every posting, from ``upper`` down to ``lower``."""
    if len(postings) == 1:
        p = postings[0]
        high = p.seek_le(upper)
        if high is None or high < lower:
            return
        first, _ = p.range()
        while True:   # walk the term's ranges backwards, each from its top
            yield from range(high, max(first, lower) - 1, -1)
            if first <= lower or not p.cursor.prev_dup():
                return
            first, high = p.range()
            if high < lower:
                return
    count = len(postings)
    candidate = upper
    agreed = 0
    i = 0
    while candidate >= lower:
        got = postings[i].seek_le(candidate)
        if got is None or got < lower:
            return
        if got == candidate:
            agreed += 1
        else:
            candidate = got
            agreed = 1
        if agreed == count:
            yield candidate
            candidate -= 1
            agreed = 0
        i = (i + 1) % count


class IndexShard:
    """One LMDB environment holding the index entries of a range of event ids."""

    def __init__(self, path: Path, *, map_size: int, sync: bool, create: bool = False, readonly: bool = False):
        """``readonly``: LMDB ``readonly`` without its lock file, writing nothing (safe while no
        process writes the index: the repository lock, see ``WriteAheadProvenanceRepository``); a
        shard that never got its tables raises ``lmdb.NotFoundError``."""
        self.path = Path(path)
        self.env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(TERM_TABLES) + 4,
                             subdir=True, sync=sync, metasync=sync, readahead=False, create=create,
                             lock=not readonly, readonly=readonly)
        try:
            make = not readonly
            self.meta = self.env.open_db(b"meta", create=make)
            self.events = self.env.open_db(b"events", create=make)
            self.terms = {name: self.env.open_db(name, dupsort=True, dupfixed=True, create=make) for name in TERM_TABLES}
            self.zones = self.env.open_db(b"zones", create=make)
        except BaseException:
            self.env.close()
            raise
        self.files: set[int] = set()
        self.min_id = -1
        self.max_id = -1
        self.min_ts = MAX_I64
        self.max_ts = -MAX_I64
        self.full = False
        self.legacy = False
        try:
            self._read_meta(readonly)
            self._refresh_id_bounds()
        except BaseException:
            self.env.close()
            raise

    def _read_meta(self, readonly: bool) -> None:
        """Check the shard's format (writing it into a new shard) and read its files and time span."""
        with self.env.begin(write=not readonly) as txn:
            version = txn.get(b"format", db=self.meta)
            if version is None and readonly:
                pass   # made, never written: empty
            elif version is None:
                txn.put(b"format", str(INDEX_FORMAT_VERSION).encode(), db=self.meta)
                txn.put(b"created", _I64.pack(int(time.time() * 1000)), db=self.meta)
            elif version == str(LEGACY_INDEX_FORMAT).encode():
                self.legacy = self.full = True   # searched and aged off as before; new batches go to a new shard
            elif version != str(INDEX_FORMAT_VERSION).encode():
                raise ProvenanceFormatError(
                    f"{self.path}: unsupported index format {version!r} (this release reads formats "
                    f"{LEGACY_INDEX_FORMAT} and {INDEX_FORMAT_VERSION}); {REBUILD_ADVICE}")
            cursor = txn.cursor(self.meta)
            if cursor.set_range(b"file:"):
                for key in cursor.iternext(keys=True, values=False):
                    if not key.startswith(b"file:"):
                        break
                    if len(key) != 5 + ID_KEY.size:
                        raise self._damaged(f"its meta key {key[:40]!r} names no event file")
                    self.files.add(_unpack_id(key[5:])[0])
            for name, attr in ((b"min_ts", "min_ts"), (b"max_ts", "max_ts")):
                value = txn.get(name, db=self.meta)
                if value is not None:
                    if len(value) != _I64.size:
                        raise self._damaged(f"its meta value {name.decode()} is {len(value)} bytes, not {_I64.size}")
                    setattr(self, attr, _I64.unpack(value)[0])

    def _refresh_id_bounds(self) -> None:
        with self.env.begin() as txn:
            cursor = txn.cursor(self.events)
            self.min_id = self._event_id(cursor.key()) if cursor.first() else -1
            self.max_id = self._event_id(cursor.key()) if cursor.last() else -1

    def _event_id(self, key: bytes) -> int:
        if len(key) != ID_KEY.size:
            raise self._damaged(f"its events table has a key of {len(key)} bytes, not an event id")
        return _unpack_id(key)[0]

    def _damaged(self, problem: str) -> ProvenanceFormatError:
        """The error of a shard whose tables hold what the index never writes."""
        return ProvenanceFormatError(f"{self.path}: the index shard is damaged: {problem}; {REBUILD_ADVICE}")

    @contextlib.contextmanager
    def _reading_tables(self) -> Iterator[None]:
        """An entry of the tables not of its format's size, met in the body, as ``_damaged``."""
        try:
            yield
        except struct.error as err:
            raise self._damaged(f"an entry of its tables is not of its format's size ({err})") from None

    @property
    def empty(self) -> bool:
        return self.max_id < 0

    def size_bytes(self) -> int:
        try:
            return os.stat(self.path / "data.mdb").st_size
        except FileNotFoundError:
            return 0

    def add(self, batch: IndexBatch) -> None:
        """Write a batch (events in id order) in one transaction."""
        first_new, last_new = batch.first_id, batch.last_id
        with self.env.begin(write=True) as txn:
            txn.put(b"file:" + _pack_id(batch.file_id), b"", db=self.meta)
            txn.cursor(self.events).putmulti(batch.primary, append=first_new > self.max_id)
            for table, items in batch.tables().items():
                if items:
                    txn.cursor(self.terms[table]).putmulti(items, dupdata=True)
            txn.cursor(self.zones).putmulti(batch.zones())
            min_ts, max_ts = min(self.min_ts, batch.min_ts), max(self.max_ts, batch.max_ts)
            txn.put(b"min_ts", _I64.pack(min_ts), db=self.meta)
            txn.put(b"max_ts", _I64.pack(max_ts), db=self.meta)
        self.files.add(batch.file_id)
        self.min_ts, self.max_ts = min_ts, max_ts
        self.max_id = max(self.max_id, last_new)
        self.min_id = first_new if self.min_id < 0 else min(self.min_id, first_new)

    def remove(self, batch: IndexBatch | None, file_ids: Iterable[int]) -> int:
        """Delete the entries a batch would have written and forget these files; returns events removed."""
        removed = 0
        with self._reading_tables(), self.env.begin(write=True) as txn:
            if batch is not None:
                present = set()
                for packed, _ in batch.primary:
                    if txn.delete(packed, db=self.events):
                        present.add(packed)
                removed = len(present)
                if present:
                    for table, items in ((b"uuid", batch.uuid), (b"attribute", batch.attribute)):
                        db = self.terms[table]
                        for key, packed in items:
                            if packed in present:
                                txn.delete(key, packed, db=db)
                    for table, ranges in batch.ranges.items():
                        self._remove_runs(txn, self.terms[table], ranges.runs, present)
                    cursor = txn.cursor(self.zones)
                    low, high = batch.primary[0][0], batch.primary[-1][0]
                    if cursor.set_range(low):
                        while cursor.key() and cursor.key() <= high:
                            if not cursor.delete():
                                break
            for file_id in file_ids:
                txn.delete(b"file:" + _pack_id(file_id), db=self.meta)
                self.files.discard(file_id)
        self._refresh_id_bounds()
        return removed

    def drop_pointers(self, file_id: int, low: int, high: int, keep: Collection[int]) -> int:
        """Delete the ``events`` entries of ids ``low``..``high`` that point into ``file_id`` at a
        block offset not in ``keep`` (blocks a repair dropped); returns how many. The term tables'
        entries of those ids stay, dangling: a search skips an id with no ``events`` entry."""
        removed = 0
        with self._reading_tables(), self.env.begin(write=True) as txn:
            cursor = txn.cursor(self.events)
            found = cursor.set_range(_pack_id(low))
            while found and _unpack_id(cursor.key())[0] <= high:
                pointed_file, offset, _, _ = _unpack_ptr(cursor.value())
                if pointed_file == file_id and offset not in keep:
                    cursor.delete()
                    removed += 1
                    found = bool(cursor.key())
                else:
                    found = cursor.next()
        self._refresh_id_bounds()
        return removed

    def _remove_runs(self, txn, db, runs: list[list], present: set[bytes]) -> None:
        """Delete a term table's entries for the events in ``present`` (removed from ``events``).
        A stored range was written by one transaction, so its ids are all present or none: its
        first id decides, whatever runs the caller's batch cut (chunks may differ from the merge's)."""
        if self.legacy:
            for term, first, last in runs:
                for event_id in range(first, last + 1):
                    packed = _pack_id(event_id)
                    if packed in present:
                        txn.delete(term, packed, db=db)
            return
        cursor = txn.cursor(db)
        for term, first, last in runs:
            stale = []
            found = cursor.set_range_dup(term, _pack_range(first, 0))
            while found:
                value = cursor.value()
                stored_first, _ = _unpack_range(value)
                if stored_first > last:
                    break
                if _pack_id(stored_first) in present:
                    stale.append(value)
                found = cursor.next_dup()
            for value in stale:
                txn.delete(term, value, db=db)

    def covers(self, query: IndexQuery) -> bool:
        """Whether the shard may hold hits of the query (it has entries in the query's time range)."""
        return not self.empty and query.time_overlaps(self.min_ts, self.max_ts)

    def search(self, query: IndexQuery, limit: int | None, live: LiveFiles) -> list[Hit]:
        if self.empty:
            return []
        with self._reading_tables(), self.env.begin() as txn:
            return self._search(txn, query, limit, live)

    def search_many(self, queries: Sequence[IndexQuery], live: LiveFiles) -> list[list[Hit]]:
        """``search(query, None, live)`` of each query, all in one read transaction."""
        if self.empty:
            return [[] for _ in queries]
        with self._reading_tables(), self.env.begin() as txn:
            return [self._search(txn, query, None, live) for query in queries]

    def _search(self, txn, query: IndexQuery, limit: int | None, live: LiveFiles) -> list[Hit]:
        hits: list[Hit] = []
        if query.terms:
            postings = [_Posting(txn, self.terms[table], key) for table, key in query.terms]
            if any(p.count == 0 for p in postings):
                return []
            postings.sort(key=lambda p: p.count)
            get = txn.get
            events_db = self.events
            for event_id in _leapfrog(postings, self.max_id, self.min_id):
                ptr = get(_pack_id(event_id), db=events_db)
                if ptr is None:
                    continue
                file_id, offset, ts, size = _unpack_ptr(ptr)
                if file_id not in live or not query.accepts(ts, size):
                    continue
                hits.append(Hit(event_id, file_id, offset))
                if limit is not None and len(hits) >= limit:
                    break
        else:
            self._walk_events(txn, query, limit, live, hits)
        return hits

    def _walk_events(self, txn, query: IndexQuery, limit: int | None, live: LiveFiles, hits: list[Hit]) -> None:
        """Newest first through the ``events`` table, skipping zones whose time/size span misses."""
        zones = txn.cursor(self.zones)
        cursor = txn.cursor(self.events)
        if not zones.last():
            return
        for first_key, zone in zones.iterprev():
            last_id, min_ts, max_ts, min_size, max_size = ZONE.unpack(zone)
            if not query.zone_overlaps(min_ts, max_ts, min_size, max_size):
                continue
            start = _pack_id(last_id)
            if not cursor.set_key(start):
                if cursor.set_range(start):
                    if not cursor.prev():
                        continue
                elif not cursor.last():
                    return
            for key, ptr in cursor.iterprev():
                if key < first_key:
                    break
                file_id, offset, ts, size = _unpack_ptr(ptr)
                if file_id not in live or not query.accepts(ts, size):
                    continue
                hits.append(Hit(_unpack_id(key)[0], file_id, offset))
                if limit is not None and len(hits) >= limit:
                    return

    def close(self) -> None:
        self.env.close()


@dataclass
class IndexStats:
    shards: int
    bytes: int
    max_indexed_id: int
    shard_names: list[str] = field(default_factory=list)


class ProvenanceIndex:
    """The set of index shards under one directory.

    Writes (``add``, ``remove``, ``drop_unreferenced``) come from one thread at a time (the
    repository's merge lock); ``search`` may run from any thread meanwhile.
    """

    def __init__(self, directory: str | Path, *, shard_size: int, indexed_attributes: Sequence[str] = (),
                 sync: bool = True, readonly: bool = False):
        """``readonly``: open the shards read-only, skip empty or unfinished ones (deleted when
        writable) and never write: nothing may be added, removed or dropped
        (``WriteAheadProvenanceRepository`` refuses every write of a read-only repository before
        it reaches the index)."""
        self.directory = Path(directory)
        if not readonly:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.shard_size = shard_size
        self.attributes = tuple(dict.fromkeys(("filename", *indexed_attributes)))
        self.sync = sync
        # the map is address space, not disk: room for one shard plus the chunk that filled it
        self.map_size = max(2 * shard_size, 64 << 20) + (64 << 20)
        self._lock = threading.Lock()
        self._shards: list[IndexShard] = []
        found = sorted(p for p in self.directory.iterdir() if p.is_dir()) if self.directory.is_dir() else []
        for path in found:
            if readonly:
                if not (path / "data.mdb").exists():
                    continue   # a shard whose creation was cut short: empty
                try:
                    shard = IndexShard(path, map_size=self.map_size, sync=sync, readonly=True)
                except lmdb.NotFoundError:   # its tables were never made: empty too
                    continue
            else:
                shard = IndexShard(path, map_size=self.map_size, sync=sync)
            if shard.empty and not shard.files:
                shard.close()
                if not readonly:
                    shutil.rmtree(path, ignore_errors=True)
                continue
            self._shards.append(shard)
        self._shards.sort(key=lambda s: (s.min_id, s.path.name))
        for shard in self._shards[:-1]:
            shard.full = True
        if self._shards and self._shards[-1].size_bytes() >= shard_size:
            self._shards[-1].full = True

    @property
    def shards(self) -> list[IndexShard]:
        with self._lock:
            return list(self._shards)

    def _writable_shard(self, first_id: int) -> IndexShard:
        with self._lock:
            if self._shards and not self._shards[-1].full:
                return self._shards[-1]
            name = f"{int(time.time() * 1000)}-{first_id}"
            suffix = 0
            while (self.directory / name).exists():
                suffix += 1
                name = f"{int(time.time() * 1000)}-{first_id}.{suffix}"
            shard = IndexShard(self.directory / name, map_size=self.map_size, sync=self.sync, create=True)
            self._shards.append(shard)
            return shard

    def batch(self, file_id: int) -> IndexBatch:
        """An empty batch for an event file, with this index's attributes."""
        return IndexBatch(file_id, self.attributes)

    def add(self, batch: IndexBatch) -> None:
        """Index a batch of an event file's events (in id order), starting a new shard when full."""
        if not len(batch):
            return
        shard = self._writable_shard(batch.first_id)
        try:
            shard.add(batch)
        except lmdb.MapFullError:
            shard.full = True
            shard = self._writable_shard(batch.first_id)
            shard.add(batch)
        if shard.size_bytes() >= self.shard_size:
            shard.full = True

    def remove(self, batch: IndexBatch | None, file_ids: Iterable[int]) -> int:
        """Remove a batch's entries (a merge being redone) and forget these event files."""
        file_ids = list(file_ids)
        low, high = (batch.first_id, batch.last_id) if batch is not None and len(batch) else (0, -1)
        removed = 0
        for shard in self.shards:
            overlaps = not shard.empty and shard.min_id <= high and low <= shard.max_id
            if overlaps or shard.files.intersection(file_ids):
                removed += shard.remove(batch if overlaps else None, file_ids)
        return removed

    def drop_pointers(self, file_id: int, low: int, high: int, keep: Collection[int]) -> int:
        """``IndexShard.drop_pointers`` in every shard listing the file; returns entries deleted."""
        return sum(shard.drop_pointers(file_id, low, high, keep) for shard in self.shards
                   if file_id in shard.files and not shard.empty and shard.min_id <= high and low <= shard.max_id)

    def drop_unreferenced(self, live_file_ids: Iterable[int]) -> list[str]:
        """Delete every shard none of whose event files still exists; returns their names."""
        live = set(live_file_ids)
        dropped = []
        with self._lock:
            keep = []
            for shard in self._shards:
                if shard.files & live:
                    keep.append(shard)
                    continue
                dropped.append(shard.path.name)
                shard.close()
                shutil.rmtree(shard.path, ignore_errors=True)
            self._shards = keep
        return dropped

    def search(self, query: IndexQuery, limit: int | None, live: LiveFiles) -> list[Hit]:
        """Hits newest (highest id) first, at most ``limit`` (None: all)."""
        hits: list[Hit] = []
        for shard in sorted(self.shards, key=lambda s: s.max_id, reverse=True):
            if not shard.covers(query):
                continue
            remaining = None if limit is None else limit - len(hits)
            try:
                hits.extend(shard.search(query, remaining, live))
            except lmdb.Error:
                continue  # the shard was dropped by age-off while we searched
            if limit is not None and len(hits) >= limit:
                break
        hits.sort(key=lambda h: h.event_id, reverse=True)
        return hits if limit is None else hits[:limit]

    def search_many(self, queries: Sequence[IndexQuery], live: LiveFiles) -> list[list[Hit]]:
        """``search(query, None, live)`` of each query (a lineage level: one uuid each), with one
        read transaction per shard for all of them."""
        out: list[list[Hit]] = [[] for _ in queries]
        for shard in self.shards:
            todo = [i for i, query in enumerate(queries) if shard.covers(query)]
            if not todo:
                continue
            try:
                found = shard.search_many([queries[i] for i in todo], live)
            except lmdb.Error:
                continue  # the shard was dropped by age-off while we searched
            for i, hits in zip(todo, found):
                out[i].extend(hits)
        for hits in out:
            hits.sort(key=lambda h: h.event_id, reverse=True)
        return out

    def max_indexed_id(self) -> int:
        return max((s.max_id for s in self.shards), default=-1)

    def size_bytes(self) -> int:
        return sum(s.size_bytes() + _lock_size(s.path) for s in self.shards)

    def stats(self) -> IndexStats:
        shards = self.shards
        return IndexStats(len(shards), self.size_bytes(), self.max_indexed_id(), [s.path.name for s in shards])

    def close(self) -> None:
        with self._lock:
            for shard in self._shards:
                shard.close()
            self._shards = []


def _lock_size(path: Path) -> int:
    try:
        return os.stat(path / "lock.mdb").st_size
    except FileNotFoundError:
        return 0
