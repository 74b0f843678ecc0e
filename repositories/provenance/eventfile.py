"""Merged provenance event files: zstd-compressed blocks plus a table of contents.

``<first event id>.prov`` holds the events of one rollover in id order, packed into blocks of about
``block_size`` uncompressed bytes, each compressed on its own so that one event is reached by
seeking to its block and decompressing at most one block. ``<first event id>.toc`` lists the first
event id and byte offset of every block, so the block of an event is a binary search away.

Layout (little-endian; docs/formats/provenance-repository.md has it byte by byte)::

    .prov  header  magic b"FAPE" | u8 version (2) | u8 codec (1 = zstd) | 2 zero bytes | u64 first id
           block   u32 compressed length | u32 CRC-32 of the compressed bytes | u32 uncompressed
                   length | u32 event count | u64 first id | u64 last id | compressed entry list
    .toc   magic b"FAPT" | u8 version (1) | 3 zero bytes | u64 first id | u64 last id | u64 event
           count | i64 min timestamp | i64 max timestamp | u32 block count |
           block count x (u64 first id of block | u64 offset of block) | u32 CRC-32 of all before

A block's entry list is a journal's (journal.py): in version 2 an entry is a batch of events,
which never spans two blocks; version 1 files (one event an entry) are still read.

A block that is cut short, fails its checksum or does not decompress to a valid entry list raises
``DamagedBlockError`` (a damaged header too, at offset 0); the file's other blocks read on. The
table of contents lists the blocks to read: a repaired file (repair.py) keeps its intact blocks at
their offsets, and the bytes of a dropped block between two of them are never read again.

While a merge runs the files are named ``.prov.part`` and ``.toc.part``; the rename of the
``.prov.part`` is the merge's commit point (see repository.py).
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import zstandard

from repositories.provenance.event import (ProvenanceEvent, ProvenanceFormatError,
                                           decode_entry, event_from_fields)
from repositories.provenance.journal import ENTRY_HEADER_SIZE, iter_entries, pack_count, pack_entry_header

EVENT_FILE_MAGIC = b"FAPE"
TOC_MAGIC = b"FAPT"
#: the version this release writes; it reads ``READ_VERSIONS`` (version 1: one event an entry)
EVENT_FILE_VERSION = 2
READ_VERSIONS = (1, 2)
TOC_VERSION = 1
CODEC_ZSTD = 1
EVENT_SUFFIX = ".prov"
TOC_SUFFIX = ".toc"
PART_SUFFIX = ".part"

_FILE_HEADER = struct.Struct("<4sBB2xQ")
_BLOCK_HEADER = struct.Struct("<IIIIQQ")
_TOC_HEADER = struct.Struct("<4sB3xQQQqqI")
_TOC_ENTRY = struct.Struct("<QQ")
_CRC = struct.Struct("<I")
FILE_HEADER_SIZE = _FILE_HEADER.size
BLOCK_HEADER_SIZE = _BLOCK_HEADER.size
#: the largest offset a block can start at: its header must end within what a file can hold (an
#: offset of 2**63 - 1 bytes, which ``pread`` takes)
_MAX_BLOCK_OFFSET = (1 << 63) - 1 - BLOCK_HEADER_SIZE
#: the first bytes of every block's compressed data (a zstd frame's magic number)
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"


def event_file_name(first_id: int) -> str:
    return f"{first_id}{EVENT_SUFFIX}"


def toc_file_name(first_id: int) -> str:
    return f"{first_id}{TOC_SUFFIX}"


@dataclass(frozen=True, slots=True)
class TableOfContents:
    """What an event file holds: its id and time range and where each block starts."""

    first_id: int
    last_id: int
    event_count: int
    min_timestamp: int
    max_timestamp: int
    block_first_ids: tuple[int, ...]
    block_offsets: tuple[int, ...]

    def block_for(self, event_id: int) -> int | None:
        """Offset of the block that would hold ``event_id``, None if outside the file."""
        if event_id < self.first_id or event_id > self.last_id:
            return None
        index = bisect.bisect_right(self.block_first_ids, event_id) - 1
        return self.block_offsets[max(index, 0)]

    def block_span(self, index: int) -> tuple[int, int]:
        """The ids the ``index``-th block may hold: its first id up to the next block's, or the
        file's last id."""
        firsts = self.block_first_ids
        return firsts[index], (firsts[index + 1] - 1 if index + 1 < len(firsts) else self.last_id)

    def span_at(self, offset: int) -> tuple[int, int] | tuple[None, None]:
        """The ids of the block at ``offset``; every id of the file for offset 0 (its header);
        ``(None, None)`` for an offset that starts no block the table lists."""
        if offset == 0:
            return self.first_id, self.last_id
        index = bisect.bisect_left(self.block_offsets, offset)
        if index < len(self.block_offsets) and self.block_offsets[index] == offset:
            return self.block_span(index)
        return None, None

    def encode(self) -> bytes:
        body = bytearray(
            _TOC_HEADER.pack(TOC_MAGIC, TOC_VERSION, self.first_id, self.last_id, self.event_count,
                             self.min_timestamp, self.max_timestamp, len(self.block_offsets))
        )
        for first, offset in zip(self.block_first_ids, self.block_offsets):
            body += _TOC_ENTRY.pack(first, offset)
        body += _CRC.pack(zlib.crc32(body))
        return bytes(body)

    @classmethod
    def decode(cls, data: bytes, where: str) -> "TableOfContents":
        if len(data) < _TOC_HEADER.size + _CRC.size:
            raise ProvenanceFormatError(f"{where}: table of contents of {len(data)} bytes is too short")
        magic, version, first, last, count, min_ts, max_ts, blocks = _TOC_HEADER.unpack_from(data, 0)
        if magic != TOC_MAGIC:
            raise ProvenanceFormatError(f"{where}: not a provenance table of contents (magic {magic!r})")
        if version != TOC_VERSION:
            raise ProvenanceFormatError(
                f"{where}: unsupported table-of-contents version {version} (this release reads {TOC_VERSION})"
            )
        expected = _TOC_HEADER.size + blocks * _TOC_ENTRY.size + _CRC.size
        if len(data) != expected:
            raise ProvenanceFormatError(f"{where}: {len(data)} bytes, expected {expected} for {blocks} blocks")
        (crc,) = _CRC.unpack_from(data, expected - _CRC.size)
        if zlib.crc32(data[: expected - _CRC.size]) != crc:
            raise ProvenanceFormatError(f"{where}: table of contents fails its checksum")
        firsts, offsets = [], []
        for i in range(blocks):
            first_of_block, offset = _TOC_ENTRY.unpack_from(data, _TOC_HEADER.size + i * _TOC_ENTRY.size)
            firsts.append(first_of_block)
            offsets.append(offset)
        # blocks follow the header, one after another, in id order: what the reads' binary searches assume
        if offsets and (offsets[0] < FILE_HEADER_SIZE or offsets[-1] > _MAX_BLOCK_OFFSET
                        or not _increasing(offsets) or not _increasing(firsts)):
            raise ProvenanceFormatError(f"{where}: table of contents lists blocks out of order or outside a file")
        return cls(first, last, count, min_ts, max_ts, tuple(firsts), tuple(offsets))

    @classmethod
    def read(cls, path: Path) -> "TableOfContents":
        return cls.decode(Path(path).read_bytes(), str(path))


def _increasing(values: list[int]) -> bool:
    return all(map(int.__lt__, values, values[1:]))


class EventFileWriter:
    """Writes one event file (as ``.prov.part``/``.toc.part``) from entries in increasing id order."""

    def __init__(self, directory: Path, first_id: int, *, block_size: int, level: int = 3):
        self.directory = Path(directory)
        self.first_id = first_id
        self.path = self.directory / (event_file_name(first_id) + PART_SUFFIX)
        self.toc_path = self.directory / (toc_file_name(first_id) + PART_SUFFIX)
        self.block_size = block_size
        self._compressor = zstandard.ZstdCompressor(level=level)
        self._file = open(self.path, "xb")
        self._file.write(_FILE_HEADER.pack(EVENT_FILE_MAGIC, EVENT_FILE_VERSION, CODEC_ZSTD, first_id))
        self._offset = FILE_HEADER_SIZE
        self._parts: list[bytes | memoryview] = []
        self._pending = 0
        self._block_count = 0      # events in the block being filled
        self._block_entries = 0    # entries in it
        self._block_first = -1
        self._block_last = -1
        self._block_firsts: list[int] = []
        self._block_offsets: list[int] = []
        self._last_id = -1
        self._count = 0
        self._min_ts: int | None = None
        self._max_ts: int | None = None

    def add(self, first_id: int, count: int, encoded: bytes | memoryview, min_ts: int, max_ts: int) -> int:
        """Append one entry (``count`` encoded events from ``first_id``, their time span);
        returns the offset of the block that holds it."""
        if first_id <= self._last_id:
            raise ValueError(f"event {first_id} after {self._last_id}: ids must increase")
        if self._block_count == 0:
            self._block_first = first_id
        offset = self._offset
        self._parts.append(pack_entry_header(first_id, count, len(encoded)))
        self._parts.append(encoded)
        self._pending += ENTRY_HEADER_SIZE + len(encoded)
        self._block_entries += 1
        self._block_count += count
        self._last_id = self._block_last = first_id + count - 1
        self._count += count
        if self._min_ts is None or min_ts < self._min_ts:
            self._min_ts = min_ts
        if self._max_ts is None or max_ts > self._max_ts:
            self._max_ts = max_ts
        if self._pending >= self.block_size:
            self._flush_block()
        return offset

    def _flush_block(self) -> None:
        if not self._block_count:
            return
        raw = pack_count(self._block_entries) + b"".join(self._parts)
        compressed = self._compressor.compress(raw)
        self._file.write(
            _BLOCK_HEADER.pack(len(compressed), zlib.crc32(compressed), len(raw), self._block_count,
                               self._block_first, self._block_last)
        )
        self._file.write(compressed)
        self._block_firsts.append(self._block_first)
        self._block_offsets.append(self._offset)
        self._offset += BLOCK_HEADER_SIZE + len(compressed)
        self._parts = []
        self._pending = 0
        self._block_count = 0
        self._block_entries = 0

    @property
    def event_count(self) -> int:
        return self._count

    def finish(self, *, fsync: bool = True) -> TableOfContents:
        """Write the last block and the table of contents; both files stay ``.part``."""
        self._flush_block()
        if self._count == 0:
            raise ValueError("an event file needs at least one event")
        self._file.flush()
        if fsync:
            os.fsync(self._file.fileno())
        self._file.close()
        toc = TableOfContents(self.first_id, self._last_id, self._count, int(self._min_ts or 0),
                              int(self._max_ts or 0), tuple(self._block_firsts), tuple(self._block_offsets))
        with open(self.toc_path, "xb") as out:
            out.write(toc.encode())
            out.flush()
            if fsync:
                os.fsync(out.fileno())
        return toc

    def close(self) -> None:
        """Close the file without finishing it (the .part files stay for recovery to remove)."""
        self._file.close()


class DamagedBlockError(ProvenanceFormatError):
    """A block of an event file fails its checks (``offset`` 0: the file's header, so every block
    of it): the message names the file, the block and what is wrong; the file's other blocks read on."""

    def __init__(self, path: str | Path, offset: int, problem: str):
        self.path, self.offset, self.problem = str(path), offset, problem
        super().__init__(f"{path}: {problem}" if offset == 0 else f"{path}: block at offset {offset} {problem}")


#: what a sequential reader calls with a damaged block it steps over
DamageHandler = Callable[[DamagedBlockError], None]


def read_block(fd: int, offset: int, where: str, decompressor: zstandard.ZstdDecompressor) -> tuple[bytes, int]:
    """The verified, decompressed entry list of the block at ``offset``, and the bytes the block
    takes in the file (``DamagedBlockError`` when it is cut short, fails its checksum or does not
    decompress to its length)."""
    size = os.fstat(fd).st_size
    if offset >= size:   # an offset past any file too (a damaged index's), which pread would refuse
        raise DamagedBlockError(where, offset, "is missing (the file ends before it)")
    header = os.pread(fd, BLOCK_HEADER_SIZE, offset)
    if len(header) != BLOCK_HEADER_SIZE:
        raise DamagedBlockError(where, offset, "is cut short (header)")
    clen, crc, ulen, count, first, last = _BLOCK_HEADER.unpack(header)
    left = size - offset - BLOCK_HEADER_SIZE
    if clen > left:   # not read: a damaged length would have this allocate up to 4 GiB
        raise DamagedBlockError(where, offset, f"is cut short ({max(left, 0)} of {clen} bytes)")
    compressed = os.pread(fd, clen, offset + BLOCK_HEADER_SIZE)
    if zlib.crc32(compressed) != crc:
        raise DamagedBlockError(where, offset, "fails its checksum (corrupt file)")
    try:
        if zstandard.frame_content_size(compressed) != ulen:   # decompressing would allocate what it says
            raise DamagedBlockError(where, offset, f"holds a frame of another length than its header's {ulen}")
        raw = decompressor.decompress(compressed, max_output_size=ulen)
    except zstandard.ZstdError as err:
        raise DamagedBlockError(where, offset, f"does not decompress ({err})") from err
    if len(raw) != ulen:
        raise DamagedBlockError(where, offset, f"holds {len(raw)} bytes, header says {ulen}")
    return raw, BLOCK_HEADER_SIZE + clen


def block_length(fd: int, offset: int) -> int | None:
    """Bytes the block at ``offset`` takes (its header and compressed bytes, as its header says),
    None if its header is cut short."""
    header = os.pread(fd, BLOCK_HEADER_SIZE, offset)
    if len(header) != BLOCK_HEADER_SIZE:
        return None
    return BLOCK_HEADER_SIZE + _BLOCK_HEADER.unpack(header)[0]


def checked_entries(raw: bytes, path: str | Path, offset: int, version: int) -> list[tuple[int, int, memoryview]]:
    """The entries of a decompressed block; ``DamagedBlockError`` when its entry list is malformed
    (its checksum held: the block was written so, or damaged along with its checksum)."""
    try:
        return list(iter_entries(raw, f"{path} block at offset {offset}", version))
    except ProvenanceFormatError as err:
        raise DamagedBlockError(path, offset, f"holds a damaged entry list ({err})") from None


def check_header(fd: int, path: str | Path) -> tuple[int, int]:
    """Verify an event file's header; returns its first event id and its version. A header cut
    short or of another magic is damage (``DamagedBlockError`` at offset 0); an unknown version or
    codec is refused (``ProvenanceFormatError``: a file of another release, never repaired)."""
    data = os.pread(fd, FILE_HEADER_SIZE, 0)
    if len(data) != FILE_HEADER_SIZE:
        raise DamagedBlockError(path, 0, "event file header is cut short")
    magic, version, codec, first = _FILE_HEADER.unpack(data)
    if magic != EVENT_FILE_MAGIC:
        raise DamagedBlockError(path, 0, f"not a provenance event file (magic {magic!r})")
    if version not in READ_VERSIONS:
        raise ProvenanceFormatError(
            f"{path}: unsupported event file version {version} (this release reads versions "
            f"{', '.join(map(str, READ_VERSIONS))})"
        )
    if codec != CODEC_ZSTD:
        raise ProvenanceFormatError(f"{path}: unknown block codec {codec}")
    return first, version


def header_bytes(version: int, first_id: int) -> bytes:
    """An event file's 16-byte header (a repair rewrites a damaged one with it)."""
    return _FILE_HEADER.pack(EVENT_FILE_MAGIC, version, CODEC_ZSTD, first_id)


#: a block's entries, as ``checked_entries`` returns them
BlockEntries = list[tuple[int, int, memoryview]]


class BlockCache:
    """A small LRU of decompressed, checked blocks (their entries), keyed by (path, offset),
    shared by the readers."""

    def __init__(self, capacity: int = 16):
        self.capacity = capacity
        self._blocks: OrderedDict[tuple[str, int], BlockEntries] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> BlockEntries | None:
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
            return block

    def put(self, key: tuple[str, int], block: BlockEntries) -> None:
        with self._lock:
            self._blocks[key] = block
            self._blocks.move_to_end(key)
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)

    def forget(self, path: str) -> None:
        with self._lock:
            for key in [k for k in self._blocks if k[0] == path]:
                del self._blocks[key]


class EventFileReader:
    """Random and sequential access to one finished event file through its table of contents.

    A damaged block raises ``DamagedBlockError`` when read (a damaged header, when the reader
    opens); the sequential readers can step over it instead (``on_damage``)."""

    def __init__(self, path: Path, toc: TableOfContents, cache: BlockCache | None = None):
        self.path = Path(path)
        self.toc = toc
        self._cache = cache
        self._fd = os.open(self.path, os.O_RDONLY)
        self._decompressor = zstandard.ZstdDecompressor()
        self._lock = threading.Lock()
        try:
            first, self.version = check_header(self._fd, self.path)
        except BaseException:
            self.close()
            raise
        if first != toc.first_id:
            self.close()
            raise DamagedBlockError(path, 0, f"header says first event {first}, table of contents {toc.first_id}")

    def _entries(self, offset: int) -> BlockEntries:
        """The checked entries of the block at ``offset`` (``DamagedBlockError`` if damaged)."""
        key = (str(self.path), offset)
        if self._cache is not None:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        with self._lock:  # a ZstdDecompressor is not safe to share between threads
            raw, _ = read_block(self._fd, offset, str(self.path), self._decompressor)
        entries = checked_entries(raw, self.path, offset, self.version)
        if self._cache is not None:
            self._cache.put(key, entries)
        return entries

    def _decode(self, first: int, count: int, data: memoryview) -> list[list]:
        return decode_entry(data, first, count, f"{self.path} entry {first}")

    def get(self, event_id: int, block_offset: int | None = None) -> ProvenanceEvent | None:
        offset = self.toc.block_for(event_id) if block_offset is None else block_offset
        if offset is None:
            return None
        found = self.get_many({offset: [event_id]})
        return found.get(event_id)

    def get_many(self, wanted: dict[int, list[int]]) -> dict[int, ProvenanceEvent]:
        """Events by id, given ``{block offset: [event ids]}``; one decompression per block, and
        one decoding per entry holding any of them."""
        found: dict[int, ProvenanceEvent] = {}
        for offset, ids in wanted.items():
            targets = sorted(set(ids))
            top = targets[-1]
            for first, count, data in self._entries(offset):
                start = bisect.bisect_left(targets, first)
                if start < len(targets) and targets[start] < first + count:
                    events = self._decode(first, count, data)
                    for event_id in targets[start:bisect.bisect_left(targets, first + count)]:
                        found[event_id] = event_from_fields(events[event_id - first], f"{self.path} event {event_id}")
                if first + count > top:
                    break
        return found

    def iter_from(self, start_id: int, on_damage: DamageHandler | None = None) -> Iterator[ProvenanceEvent]:
        """Events with id >= ``start_id`` in id order, to the end of the file; a damaged block is
        handed to ``on_damage`` and stepped over (raised, without it)."""
        if start_id > self.toc.last_id:
            return
        index = max(bisect.bisect_right(self.toc.block_first_ids, start_id) - 1, 0)
        for offset in self.toc.block_offsets[index:]:
            for first, count, data in self._entries_or_none(offset, on_damage):
                if first + count > start_id:
                    for fields in self._decode(first, count, data)[max(start_id - first, 0):]:
                        yield event_from_fields(fields, f"{self.path} event {fields[0]}")

    def iter_entries_all(self, on_damage: DamageHandler | None = None) -> Iterator[tuple[int, int, int, memoryview]]:
        """``(block offset, first event id, event count, encoded events)`` for every entry
        (rebuilding an index); damaged blocks as in ``iter_from``."""
        for offset in self.toc.block_offsets:
            for first, count, data in self._entries_or_none(offset, on_damage):
                yield offset, first, count, data

    def _entries_or_none(self, offset: int, on_damage: DamageHandler | None) -> BlockEntries:
        """The block's entries, or none when it is damaged and ``on_damage`` takes the error."""
        try:
            return self._entries(offset)
        except DamagedBlockError as err:
            if on_damage is None:
                raise
            on_damage(err)
            return []

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # age-off drops a reader without closing it, so a search still holding it can finish
        # (the file is unlinked; the descriptor keeps it readable until the last reference goes)
        try:
            self.close()
        except (OSError, AttributeError):
            pass
