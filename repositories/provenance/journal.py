"""Provenance journals: the append-only files that ``register`` writes on the commit path.

A journal is a 16-byte header followed by framed records, one record per ``register`` call::

    header  magic b"FAPJ" | u8 version (2) | 3 zero bytes | u64 generation (first event id)
    record  u32 payload length | u32 CRC-32 of the payload | payload
    payload u32 entry count | count x (u64 first event id | u32 event count | u32 length | events)

(all integers little-endian; docs/formats/provenance-repository.md has the full layout). An entry
holds an encoded batch of events (usually one commit group's), whose ids follow from its first
id. Version 1 journals (entries of one event each: u64 event id | u32 length | event) are still
read. The "entry list" that makes up a payload is also the uncompressed content of an event-file
block, so both are read by :func:`iter_entries`.

A record is written with one ``write`` system call and is not fsynced: on return it is in the OS
page cache, which survives the death of the process but not a power loss (the same guarantee as
NiFi's journals). A crash can leave a torn last record; :func:`scan_journal` finds where the
valid records end (a short frame, an impossible length or a bad checksum) and
:meth:`JournalFile.open_existing` cuts the file there. Because a record is a whole ``register``
call, a commit's events are recovered all or nothing. Damage in the middle of a journal (a bad
disk block, a partial copy) does not cost the records after it: the scan steps over the damaged
bytes to the next record whose frame and checksum are valid and reads on, and says what it
skipped (``JournalScan.damaged``); the repository names the file and counts the events lost.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from repositories.provenance.event import ProvenanceFormatError

JOURNAL_MAGIC = b"FAPJ"
#: the version this release writes; it reads ``READ_VERSIONS``
JOURNAL_VERSION = 2
#: entry lists of version 1 hold one event an entry, with no event count
READ_VERSIONS = (1, 2)
JOURNAL_SUFFIX = ".journal"

_HEADER = struct.Struct("<4sB3xQ")      # magic, version, generation
_FRAME = struct.Struct("<II")           # payload length, crc32(payload)
_COUNT = struct.Struct("<I")
_ENTRY = struct.Struct("<QII")          # first event id, event count, encoded length
_ENTRY_V1 = struct.Struct("<QI")        # event id, encoded length (one event an entry)
HEADER_SIZE = _HEADER.size
FRAME_SIZE = _FRAME.size
COUNT_SIZE = _COUNT.size
ENTRY_HEADER_SIZE = _ENTRY.size

#: A record larger than this is treated as corruption when scanning (a torn length field).
MAX_RECORD_SIZE = 1 << 31

pack_count = _COUNT.pack
pack_entry_header = _ENTRY.pack
_unpack_count = _COUNT.unpack_from


def iter_entries(buf: bytes | memoryview, where: str, version: int = JOURNAL_VERSION
                 ) -> Iterator[tuple[int, int, memoryview]]:
    """``(first event id, event count, encoded events)`` for each entry of an entry list (a record
    payload or a block) written in ``version``'s layout. Ids strictly increase across entries."""
    view = memoryview(buf)
    if len(view) < COUNT_SIZE:
        raise ProvenanceFormatError(f"{where}: entry list of {len(view)} bytes has no count")
    (entries,) = _unpack_count(view, 0)
    one_each = version == 1
    header = _ENTRY_V1 if one_each else _ENTRY
    unpack, size = header.unpack_from, header.size
    pos = COUNT_SIZE
    end = len(view)
    next_id = -1
    for _ in range(entries):
        if pos + size > end:
            raise ProvenanceFormatError(f"{where}: entry list ends inside an entry header")
        if one_each:
            first_id, length = unpack(view, pos)
            count = 1
        else:
            first_id, count, length = unpack(view, pos)
        pos += size
        if pos + length > end:
            raise ProvenanceFormatError(f"{where}: entry for event {first_id} runs past the end")
        if count < 1 or first_id < next_id:
            raise ProvenanceFormatError(f"{where}: entry of {count} events from id {first_id} after id {next_id - 1}")
        next_id = first_id + count
        yield first_id, count, view[pos:pos + length]
        pos += length
    if pos != end:
        raise ProvenanceFormatError(f"{where}: {end - pos} bytes after the last of {entries} entries")


def entry_span(buf: bytes | memoryview, where: str, version: int = JOURNAL_VERSION) -> tuple[int, int, int] | None:
    """``(first id, last id, event count)`` of an entry list's events, None if it holds none."""
    first = last = -1
    total = 0
    for first_id, count, _ in iter_entries(buf, where, version):
        if total == 0:
            first = first_id
        last = first_id + count - 1
        total += count
    return (first, last, total) if total else None


@dataclass(slots=True)
class JournalRecord:
    """Where one record (one ``register`` call) sits in a journal."""

    offset: int          # offset of the frame header
    length: int          # payload length
    first_id: int
    last_id: int
    count: int
    #: time span of the record's events, kept in memory only (unknown for records read back)
    min_ts: int = -(1 << 63)
    max_ts: int = (1 << 63) - 1


@dataclass
class JournalScan:
    """What :func:`scan_journal` found: the valid records and where they end."""

    path: Path
    generation: int | None
    records: list[JournalRecord] = field(default_factory=list)
    valid_end: int = 0
    file_size: int = 0
    problem: str | None = None
    #: byte ranges ``(start, end)`` stepped over inside the journal: records that could not be read
    damaged: list[tuple[int, int]] = field(default_factory=list)
    #: the journal's format version (from its header)
    version: int = JOURNAL_VERSION

    def note(self, problem: str) -> None:
        """Add a problem to what the scan says (``problem``: each, ``; ``-separated)."""
        self.problem = problem if self.problem is None else f"{self.problem}; {problem}"

    @property
    def torn_bytes(self) -> int:
        return self.file_size - self.valid_end


def parse_journal_name(name: str) -> tuple[int, int] | None:
    """``(generation, journal index)`` from ``<generation>-<index>.journal``, else None."""
    if not name.endswith(JOURNAL_SUFFIX):
        return None
    stem = name[: -len(JOURNAL_SUFFIX)]
    generation, sep, index = stem.partition("-")
    if not sep or not generation.isdigit() or not index.isdigit():
        return None
    return int(generation), int(index)


def journal_name(generation: int, index: int) -> str:
    return f"{generation}-{index}{JOURNAL_SUFFIX}"


def scan_journal(path: Path) -> JournalScan:
    """Read every frame of a journal, verifying checksums; stop at the first invalid one.

    Never raises for a torn or corrupt tail: ``problem`` says what ended the scan early and
    ``valid_end`` where the good records end. A file whose header is missing or torn has no records.
    A header of another format or version raises :class:`ProvenanceFormatError`.
    """
    data = Path(path).read_bytes()
    scan = JournalScan(path=Path(path), generation=None, file_size=len(data))
    if len(data) < HEADER_SIZE:
        scan.problem = f"header torn ({len(data)} of {HEADER_SIZE} bytes)"
        return scan
    magic, version, generation = _HEADER.unpack_from(data, 0)
    if magic != JOURNAL_MAGIC:
        raise ProvenanceFormatError(f"{path}: not a provenance journal (magic {magic!r})")
    if version not in READ_VERSIONS:
        raise ProvenanceFormatError(
            f"{path}: unsupported journal version {version} (this release reads versions "
            f"{', '.join(map(str, READ_VERSIONS))})"
        )
    scan.generation = generation
    scan.version = version
    pos = HEADER_SIZE
    end = len(data)
    view = memoryview(data)
    while pos < end:
        found = _read_record(data, view, pos, path, version)
        if isinstance(found, str):  # damaged here: read on from the next valid record, if any
            resume = _next_record(data, view, pos + 1, path, version)
            if resume is None:
                scan.note(found)
                break
            scan.damaged.append((pos, resume))
            scan.note(f"{found}; {resume - pos} damaged bytes stepped over")
            pos = resume
            continue
        if found is not None:
            scan.records.append(found)
        pos += FRAME_SIZE + _FRAME.unpack_from(data, pos)[0]
    scan.valid_end = pos
    return scan


def _read_record(data: bytes, view: memoryview, pos: int, path: Path, version: int) -> "JournalRecord | str | None":
    """The record framed at ``pos`` (None if it holds no event), or what is wrong with it."""
    end = len(data)
    if pos + FRAME_SIZE > end:
        return f"frame header torn at offset {pos}"
    length, crc = _FRAME.unpack_from(data, pos)
    body = pos + FRAME_SIZE
    if length < COUNT_SIZE or length > MAX_RECORD_SIZE or body + length > end:
        return f"record at offset {pos} claims {length} bytes, {end - body} remain"
    payload = view[body:body + length]
    if zlib.crc32(payload) != crc:
        return f"record at offset {pos} fails its checksum"
    try:
        span = entry_span(payload, f"{path} record at offset {pos}", version)
    except ProvenanceFormatError as err:
        return str(err)
    return JournalRecord(pos, length, *span) if span else None


def _next_record(data: bytes, view: memoryview, start: int, path: Path, version: int) -> int | None:
    """The offset of the first valid record at or after ``start`` (frame, checksum and entries
    all consistent: a false match is a 1 in 2^32 checksum accident), or None."""
    for pos in range(start, len(data) - FRAME_SIZE):
        length = _FRAME.unpack_from(data, pos)[0]
        if COUNT_SIZE <= length <= len(data) - pos - FRAME_SIZE and not isinstance(
                _read_record(data, view, pos, path, version), str):
            return pos
    return None


class JournalFile:
    """One journal file: appended by ``register``, read back by ``get``/``search`` and the merge.

    A journal of an older version (left by an older release) is only read: recovery merges it
    before anything is registered, and new records go to new journals.
    Not thread-safe by itself: the repository serialises appends under its lock.
    """

    __slots__ = ("path", "generation", "fd", "size", "records", "version")

    def __init__(self, path: Path, generation: int, fd: int, size: int,
                 records: list[JournalRecord] | None = None, version: int = JOURNAL_VERSION):
        self.path = path
        self.generation = generation
        self.fd = fd
        self.size = size
        self.records: list[JournalRecord] = records if records is not None else []
        self.version = version

    @classmethod
    def create(cls, path: Path, generation: int) -> "JournalFile":
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, _HEADER.pack(JOURNAL_MAGIC, JOURNAL_VERSION, generation))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, generation, fd, HEADER_SIZE)

    @classmethod
    def open_existing(cls, path: Path, *, readonly: bool = False) -> tuple["JournalFile | None", JournalScan]:
        """Open a journal left by an earlier run, cutting a torn tail; None if it holds nothing.
        ``readonly``: only to read its records, the file left exactly as it is (a torn tail too)."""
        scan = scan_journal(path)
        if not scan.records:
            return None, scan
        if not readonly and scan.valid_end < scan.file_size:
            os.truncate(path, scan.valid_end)
        fd = os.open(path, (os.O_RDONLY | os.O_CLOEXEC) if readonly else os.O_RDWR)
        os.lseek(fd, scan.valid_end, os.SEEK_SET)   # appends go after the last whole record (reads use pread)
        assert scan.generation is not None
        return cls(path, scan.generation, fd, scan.valid_end, scan.records, scan.version), scan

    def append(self, payload: bytes, first_id: int, last_id: int, count: int,
               min_ts: int = -(1 << 63), max_ts: int = (1 << 63) - 1) -> None:
        """Write one framed record with a single system call (no fsync: see the module docstring)."""
        if self.version != JOURNAL_VERSION:
            raise ProvenanceFormatError(f"{self.path}: a version-{self.version} journal is only read")
        frame = _FRAME.pack(len(payload), zlib.crc32(payload))
        offset = self.size
        total = FRAME_SIZE + len(payload)
        try:
            written = os.writev(self.fd, (frame, payload))
            if written != total:  # a short write (signal, disk filling up): finish it or fail
                _write_all(self.fd, (frame + payload)[written:])
        except BaseException:
            # leave no partial record behind a later good one: cut back to the last whole record
            try:
                os.ftruncate(self.fd, offset)
                os.lseek(self.fd, offset, os.SEEK_SET)
            except OSError:
                pass
            raise
        self.size = offset + total
        self.records.append(JournalRecord(offset, len(payload), first_id, last_id, count, min_ts, max_ts))

    def read_payload(self, record: JournalRecord) -> bytes:
        data = os.pread(self.fd, record.length, record.offset + FRAME_SIZE)
        if len(data) != record.length:
            raise ProvenanceFormatError(f"{self.path}: record at offset {record.offset} is cut short")
        return data

    def record_entries(self, record: JournalRecord) -> Iterator[tuple[int, int, memoryview]]:
        """``(first event id, event count, encoded events)`` of each entry of one record."""
        return iter_entries(self.read_payload(record), f"{self.path} record at offset {record.offset}", self.version)

    def iter_entries(self) -> Iterator[tuple[int, int, memoryview]]:
        """Every entry of the journal in id order (a record whose ids came early, registered
        while the ids below it were on their way, sits in the file after later ones)."""
        for record in sorted(self.records, key=_first_id):
            yield from self.record_entries(record)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _first_id(record: JournalRecord) -> int:
    return record.first_id


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError("journal write made no progress")
        view = view[written:]
