"""The entries of a DistributedMapCacheServer: in memory, bounded, evicted by a strategy, and
durable when given a folder (``flowactors.services.map_cache`` serves them).

**Durable.** With a folder, the entries are kept in an LMDB environment there (``FOLDER_NAME``),
written before each change is answered, one transaction a change, synced: a put that returned
survives a restart and a kill -9 of the process. What is stored (docs/map-cache.md gives it byte
by byte, with its version) is the key, the value, the revision, the time and order of entry,
each record with a CRC-32; nothing is pickled. Opening a folder written by another version, or a
record whose checksum fails, raises ``MapCacheStoreError`` naming the folder and the record.

**Eviction.** A new key when the cache holds Maximum Cache Entries evicts one entry first: the
least frequently used (fewest hits since entry, the oldest entry first among equals), the least
recently used (put or hit), or the first in (the oldest put). Each is found without looking at
every entry: LRU and FIFO keep the entries in eviction order, LFU keeps a heap of (hits, entry
order) beside them. Hits are counted in memory only: a reopened cache starts every entry from zero
hits, last used at its entry.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import struct
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import lmdb

from flowactors.sdk.map_cache import MapCacheError

LFU, LRU, FIFO = "Least Frequently Used", "Least Recently Used", "First In, First Out"
EVICTION_STRATEGIES = (LFU, LRU, FIFO)
#: the LMDB environment's folder inside the Persistence Directory
FOLDER_NAME = "flowactors-map-cache"
#: ``meta[b"format"]``: this magic, then the format's version (unsigned 16 bits, big-endian)
MAGIC = b"FAMC"
FORMAT_VERSION = 1
#: a record's head: its version (1), revision, entry time (ms since the epoch), entry order, key length
_HEAD = struct.Struct(">BQQQI")
_CRC = struct.Struct(">I")


class MapCacheStoreError(Exception):
    """The Persistence Directory holds what this version cannot read; the message says what."""


@dataclass
class _Entry:
    value: bytes
    revision: int
    entered: int    # ms since the epoch
    order: int      # the cache's count of puts when this one was made: breaks ties, orders FIFO
    hits: int = 0


class MapCacheStore:
    """The entries, safe to call from several threads at once (every method takes one lock)."""

    def __init__(self, max_entries: int, eviction: str, max_read_size: int, directory: str | None = None,
                 clock: Callable[[], float] = time.time):
        if eviction not in EVICTION_STRATEGIES:
            raise ValueError(f"eviction strategy must be one of {', '.join(EVICTION_STRATEGIES)}, not {eviction!r}")
        self.max_entries = max_entries
        self.eviction = eviction
        self.max_read_size = max_read_size
        self.clock = clock
        self._lock = threading.Lock()
        #: in eviction order for FIFO and LRU (the next to go first); in put order for LFU
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        #: LFU only: (hits, order, key) of each entry as it is now, and of what it was before a
        #: later hit or put (stale, skipped when met; rebuilt when they outnumber the entries)
        self._frequencies: list[tuple[int, int, str]] = []
        self._order = 0
        self._env: lmdb.Environment | None = None
        if directory is not None:
            self._open(Path(directory))

    # ------------------------------------------------------------------ NiFi's map cache operations
    def put_if_absent(self, key: str, value: bytes) -> bool:
        with self._lock:
            if self._hit(key) is not None:
                return False
            self._put(key, value, None)
            return True

    def get_and_put_if_absent(self, key: str, value: bytes) -> bytes | None:
        with self._lock:
            entry = self._hit(key)
            if entry is not None:
                return entry.value
            self._put(key, value, None)
            return None

    def contains_key(self, key: str) -> bool:
        with self._lock:
            return self._hit(key) is not None

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._put(key, value, self._entries.get(key))

    def get(self, key: str) -> bytes | None:
        with self._lock:
            entry = self._hit(key)
            return None if entry is None else entry.value

    def fetch(self, key: str) -> tuple[bytes, int] | None:
        """The value of ``key`` and its revision."""
        with self._lock:
            entry = self._hit(key)
            return None if entry is None else (entry.value, entry.revision)

    def replace(self, key: str, value: bytes, revision: int | None) -> bool:
        """Store ``value`` if ``key``'s revision is ``revision`` (None: if ``key`` has no value)."""
        with self._lock:
            existing = self._entries.get(key)
            if (existing.revision if existing is not None else None) != revision:
                return False
            self._put(key, value, existing)
            return True

    def remove(self, key: str) -> bool:
        with self._lock:
            return self._remove([key]) == 1

    def remove_by_pattern(self, regex: str) -> int:
        """Remove every key ``regex`` matches whole; how many."""
        try:
            pattern = re.compile(regex)
        except re.error as err:
            raise MapCacheError(f"'{regex}' is not a regular expression: {err}") from None
        with self._lock:
            return self._remove([key for key in self._entries if pattern.fullmatch(key)])

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._entries)

    def close(self) -> None:
        with self._lock:
            if self._env is not None:
                self._env.close()
                self._env = None

    # ------------------------------------------------------------------ in memory
    def _hit(self, key: str) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.hits += 1
            if self.eviction == LRU:
                self._entries.move_to_end(key)
            self._count(key, entry)
        return entry

    def _count(self, key: str, entry: _Entry) -> None:
        """LFU: note an entry's new hits or order in the heap (the older note goes stale)."""
        if self.eviction != LFU:
            return
        heapq.heappush(self._frequencies, (entry.hits, entry.order, key))
        if len(self._frequencies) > 2 * len(self._entries) + 64:
            self._frequencies = [(e.hits, e.order, k) for k, e in self._entries.items()]
            heapq.heapify(self._frequencies)

    def _put(self, key: str, value: bytes, existing: _Entry | None) -> None:
        for what, size in (("key", len(key.encode())), ("value", len(value))):
            if size > self.max_read_size:
                raise MapCacheError(f"a {what} of {size} bytes is over the map cache server's Maximum Read Size "
                                    f"({self.max_read_size} bytes)")
        evicted = [self._victim()] if existing is None and len(self._entries) >= self.max_entries else []
        self._order += 1
        entry = _Entry(bytes(value), 0 if existing is None else existing.revision + 1, int(self.clock() * 1000),
                       self._order)
        self._write({key: entry}, evicted)
        for gone in evicted:
            del self._entries[gone]
        self._entries.pop(key, None)
        self._entries[key] = entry
        self._count(key, entry)

    def _victim(self) -> str:
        """The key to evict: the first in eviction order; LFU: the fewest hits, then the oldest
        entry (the heap's first note that is still current)."""
        if self.eviction != LFU:
            return next(iter(self._entries))
        while True:
            hits, order, key = self._frequencies[0]
            entry = self._entries.get(key)
            if entry is not None and entry.hits == hits and entry.order == order:
                return key
            heapq.heappop(self._frequencies)

    def _remove(self, keys: list[str]) -> int:
        present = [key for key in keys if key in self._entries]
        self._write({}, present)
        for key in present:
            del self._entries[key]
        return len(present)

    # ------------------------------------------------------------------ on disk
    def _open(self, directory: Path) -> None:
        folder = directory / FOLDER_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True)
            map_size = min(max(64 << 20, self.max_entries * (2 * self.max_read_size + 256)), 1 << 40)
            self._env = lmdb.open(str(folder), map_size=map_size, max_dbs=2, sync=True, metasync=True)
        except (OSError, lmdb.Error) as err:
            raise MapCacheStoreError(f"the map cache in {folder} cannot be opened: {err}") from None
        try:
            loaded = self._load(folder)
        except BaseException:
            self._env.close()   # a second environment on the same folder in one process would deadlock
            self._env = None
            raise
        self._entries.update(loaded)
        for key, entry in loaded:
            self._count(key, entry)
        self._order = max((entry.order for _key, entry in loaded), default=0)
        while len(self._entries) > self.max_entries:   # the maximum was lowered since
            self._remove([self._victim()])

    def _load(self, folder: Path) -> list[tuple[str, _Entry]]:
        """Check the format stamp (writing it in a new environment) and read every record, in entry order."""
        assert self._env is not None
        self._meta = self._env.open_db(b"meta")
        self._db = self._env.open_db(b"entries")
        with self._env.begin(write=True) as txn:
            stamp = txn.get(b"format", db=self._meta)
            if stamp is None and txn.stat(self._db)["entries"] == 0:
                txn.put(b"format", MAGIC + struct.pack(">H", FORMAT_VERSION), db=self._meta)
            else:
                _check_stamp(stamp, folder)
            records = txn.cursor(self._db).iternext(keys=False)
            return sorted((_decode(raw, folder, index) for index, raw in enumerate(records)),
                          key=lambda item: item[1].order)

    def _write(self, puts: dict[str, _Entry], deletes: list[str]) -> None:
        """Make a change durable before it is made in memory (nothing to do without a folder)."""
        if self._env is None or not (puts or deletes):
            return
        try:
            with self._env.begin(write=True) as txn:
                for key in deletes:
                    txn.delete(_db_key(key), db=self._db)
                for key, entry in puts.items():
                    txn.put(_db_key(key), _encode(key, entry), db=self._db)
        except lmdb.Error as err:
            raise MapCacheError(f"the map cache server could not write its Persistence Directory: {err}") from None


def _db_key(key: str) -> bytes:
    """The LMDB key of a cache key: its SHA-256 (LMDB keys are at most 511 bytes; cache keys are not)."""
    return hashlib.sha256(key.encode()).digest()


def _encode(key: str, entry: _Entry) -> bytes:
    key_bytes = key.encode()
    body = _HEAD.pack(1, entry.revision, entry.entered, entry.order, len(key_bytes)) + key_bytes + entry.value
    return body + _CRC.pack(zlib.crc32(body))


def _decode(raw: bytes, folder: Path, index: int) -> tuple[str, _Entry]:
    damaged = f"the map cache in {folder} is damaged: record {index + 1}"
    if len(raw) < _HEAD.size + _CRC.size or _CRC.unpack_from(raw, len(raw) - _CRC.size)[0] != zlib.crc32(raw[:-4]):
        raise MapCacheStoreError(f"{damaged} fails its checksum")
    version, revision, entered, order, key_length = _HEAD.unpack_from(raw)
    if version != 1 or _HEAD.size + key_length > len(raw) - _CRC.size:
        raise MapCacheStoreError(f"{damaged} is not a version 1 record")
    key = raw[_HEAD.size:_HEAD.size + key_length].decode()
    return key, _Entry(raw[_HEAD.size + key_length:-_CRC.size], revision, entered, order)


def _check_stamp(stamp: bytes | None, folder: Path) -> None:
    if stamp is None or len(stamp) != len(MAGIC) + 2 or not stamp.startswith(MAGIC):
        raise MapCacheStoreError(f"{folder} is not a flowactors map cache (its format stamp is missing or "
                                 f"unknown); give the server an empty Persistence Directory")
    version = struct.unpack_from(">H", stamp, len(MAGIC))[0]
    if version != FORMAT_VERSION:
        raise MapCacheStoreError(f"the map cache in {folder} has format version {version}; this flowactors reads "
                                 f"version {FORMAT_VERSION} only")
