"""Swap files: a batch of FlowFile records that a connection queue moved out of memory.

A queue past its swap threshold writes its lowest-priority FlowFiles, one batch per file, into
``<repository>/flowfile/swap/`` and registers the file with the FlowFile repository, which moves
the same FlowFiles' records to queue ``swap:<location>`` in one transaction. The write-ahead log
therefore stays the truth: a lost or damaged swap file costs a read of those records from the log,
never the FlowFiles (NiFi lost data that way, NIFI-3897). Byte layout: docs/formats/swap-file.md.

This module only reads and writes the files; it knows nothing about queues or Ray. Each record is
the FlowFile repository's own record encoding (``records.py``, with an empty queue id), framed with
its uuid and a CRC-32, so one damaged byte is reported with the file's path and the entry's index,
and a file can be read a few entries at a time from any entry boundary.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from repositories.flowfile import records as rec
from repositories.flowfile.errors import FlowFileRepositoryError, UnsupportedFormatVersionError
from repositories.fsutil import fsync_dir
from repositories.model import FlowFile, ResourceClaim, now_millis

#: First bytes of every swap file.
MAGIC = b"FLOWSWAP"
#: Version byte of the swap-file layout this release writes and reads.
SWAP_FILE_VERSION = 1
#: File name suffixes: a complete swap file, one being written, one found damaged.
SUFFIX = ".swap"
PARTIAL_SUFFIX = ".swap.partial"
CORRUPT_SUFFIX = ".swap.corrupt"

_HEAD = struct.Struct(">8sBIQq")  # magic, version, count, content bytes, created ms
_U16 = struct.Struct(">H")
_FRAME = struct.Struct(">I16s")  # record length, uuid
_CRC = struct.Struct("<I")
_FRAME_AND_CRC = _FRAME.size + _CRC.size  # an entry's bytes besides its record
_EMPTY_QUEUE = rec.queue_prefix("")
_MAX_NAME = 120
_counter = itertools.count(1)


class SwapFileError(FlowFileRepositoryError):
    """A swap file cannot be read: missing, truncated, damaged, or not a swap file.

    The FlowFiles it held are not lost: their records are in the FlowFile repository under queue
    ``swap:<location>`` until the file is unregistered, and the queue reads them from there.
    """

    def __init__(self, path: str | Path, problem: str) -> None:
        self.problem = problem
        location = Path(path).name
        super().__init__(
            f"swap file {path} is unreadable: {problem}. Its FlowFiles are still recorded in the "
            f"FlowFile repository under queue 'swap:{location}' and the queue reads them from there "
            f"instead, so none is lost; the queue renames a damaged file to '*{CORRUPT_SUFFIX}' "
            f"(delete it once inspected).",
            path,
        )


@dataclass(frozen=True, slots=True)
class SwapHeader:
    """What the header of a swap file says (see docs/formats/swap-file.md)."""

    version: int
    count: int
    size: int
    created: int
    queue: str
    partition: str
    #: the order of the entries: ``"FIFO"`` (arrival order) or the prioritizers, comma-separated
    order: str
    #: byte offset of the first entry
    length: int


@dataclass(frozen=True, slots=True)
class SwapFileInfo:
    """A swap file just written: where, and what it holds."""

    location: str
    path: Path
    count: int
    size: int


def swap_directory(repository: str | Path) -> Path:
    """Where a flow's swap files live: ``<repository>/flowfile/swap``."""
    return Path(repository) / "flowfile" / "swap"


def new_location(queue: str, partition: str = "local") -> str:
    """A fresh swap file name for ``queue``: readable prefix, hash of the full id, time, counter.

    The name is the swap file's *location* in the FlowFile repository's registry; it is unique
    within the directory and short enough for the registry's key (well under 469 bytes)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", queue)[:48] or "queue"
    digest = hashlib.blake2s(f"{queue}\x00{partition}".encode(), digest_size=5).hexdigest()
    part = re.sub(r"[^A-Za-z0-9_-]+", "_", partition)[:24] or "p"
    return f"{slug}-{digest}.{part}.{now_millis()}-{os.getpid()}-{next(_counter)}{SUFFIX}"


def _header_bytes(count: int, size: int, queue: str, partition: str, order: str) -> bytes:
    body = bytearray(_HEAD.pack(MAGIC, SWAP_FILE_VERSION, count, size, now_millis()))
    for text in (queue, partition, order):
        raw = text.encode()
        if len(raw) > 0xFFFF:
            raise ValueError(f"swap file header field of {len(raw)} bytes is too long")
        body += _U16.pack(len(raw))
        body += raw
    return bytes(body) + _CRC.pack(zlib.crc32(body))


def encode_entries(flowfiles: Iterable[FlowFile]) -> tuple[list[bytes], int]:
    """The framed entries of ``flowfiles`` and their total content bytes."""
    out: list[bytes] = []
    size = 0
    ckeys = rec.ClaimKeyCache()
    encode = rec.encode_flowfile
    frame = _FRAME.pack
    crc = zlib.crc32
    pack_crc = _CRC.pack
    for ff in flowfiles:
        claim = ff.claim
        if claim is None:
            ckey = b""
        else:
            ckey = ckeys[claim.resource]
            size += claim.length
        ukey = rec.uuid_key(ff.uuid)
        try:
            record = encode(ff, _EMPTY_QUEUE, ckey, ukey)[0]
        except TypeError as e:
            raise ValueError(f"FlowFile {ff.uuid} cannot be swapped out: {e}") from None
        head = frame(len(record), ukey)
        out.append(head + record + pack_crc(crc(record, crc(head))))
    return out, size


def write_swap_file(
    directory: str | Path,
    location: str,
    queue: str,
    flowfiles: Sequence[FlowFile],
    *,
    partition: str = "local",
    order: str = "FIFO",
    sync: bool = False,
) -> SwapFileInfo:
    """Write ``flowfiles`` (in the order given) to ``<directory>/<location>``.

    Written to ``<location>.partial`` and renamed, so a file under its final name is complete;
    with ``sync`` the file and the directory are fsynced first (``Settings.always_sync``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries, size = encode_entries(flowfiles)
    header = _header_bytes(len(entries), size, queue, partition, order)
    path = directory / location
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as f:
            f.write(header)
            f.write(b"".join(entries))
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(partial, path)
        if sync:
            fsync_dir(directory)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return SwapFileInfo(location, path, len(entries), size)


def read_header(f, path: Path) -> SwapHeader:
    """Parse and check the header at the start of open file ``f``."""
    fixed = f.read(_HEAD.size)
    if len(fixed) < _HEAD.size:
        if not fixed:
            raise SwapFileError(path, "the file is empty (truncated before its header)")
        raise SwapFileError(path, f"the file is {len(fixed)} bytes long, shorter than a swap file header")
    magic, version, count, size, created = _HEAD.unpack(fixed)
    if magic != MAGIC:
        raise SwapFileError(path, f"it does not start with {MAGIC!r} (found {magic!r}): not a swap file")
    if version != SWAP_FILE_VERSION:
        if version > SWAP_FILE_VERSION:
            raise UnsupportedFormatVersionError(path, version, SWAP_FILE_VERSION, "swap file")
        raise SwapFileError(path, f"version byte is {version}, this release reads {SWAP_FILE_VERSION}")
    body = bytearray(fixed)
    texts = []
    for field in ("queue id", "partition", "order"):
        raw_len = f.read(2)
        if len(raw_len) < 2:
            raise SwapFileError(path, f"the header is truncated in its {field}")
        (n,) = _U16.unpack(raw_len)
        raw = f.read(n)
        if len(raw) < n:
            raise SwapFileError(path, f"the header is truncated in its {field}")
        body += raw_len
        body += raw
        texts.append(raw)
    stored = f.read(4)
    if len(stored) < 4:
        raise SwapFileError(path, "the header is truncated before its checksum")
    if _CRC.unpack(stored)[0] != zlib.crc32(body):
        raise SwapFileError(path, "the header checksum does not match its bytes")
    try:
        queue, partition, order = (t.decode() for t in texts)
    except UnicodeDecodeError:
        raise SwapFileError(path, "a header text field is not UTF-8") from None
    return SwapHeader(version, count, size, created, queue, partition, order, len(body) + 4)


class SwapFileReader:
    """Reads a swap file's entries in order, from the start or from an entry boundary.

    ``offset``/``index`` are where the next entry starts and how many entries precede it, so a
    caller can stop, forget the reader, and resume later without keeping the file open."""

    def __init__(self, path: str | Path, offset: int | None = None, index: int = 0) -> None:
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")
        except FileNotFoundError:
            raise SwapFileError(self.path, "the file does not exist") from None
        except OSError as e:
            raise SwapFileError(self.path, f"it cannot be opened ({e.strerror or e})") from None
        try:
            self._size = os.fstat(self._f.fileno()).st_size
            self.header = read_header(self._f, self.path)
            if offset is not None and offset != self.header.length:
                self._f.seek(offset)
            self.offset = offset if offset is not None else self.header.length
            self.index = index
            self._claims: dict[bytes, ResourceClaim] = {}
        except BaseException:
            self._f.close()
            raise

    @property
    def remaining(self) -> int:
        return self.header.count - self.index

    def _entry(self) -> tuple[bytes, bytes]:
        """The next entry's (uuid key, record), checked; advances ``offset`` and ``index``."""
        f = self._f
        i = self.index
        head = f.read(_FRAME.size)
        if len(head) < _FRAME.size:
            raise SwapFileError(
                self.path, f"it is truncated: entry {i} of {self.header.count} starts at byte "
                           f"{self.offset} but the file ends there")
        length, ukey = _FRAME.unpack(head)
        end = self.offset + _FRAME_AND_CRC + length
        # a damaged length is bounded by what the file holds before anything is read
        if end > self._size or len(body := f.read(length + 4)) < length + 4:
            raise SwapFileError(
                self.path, f"it is truncated inside entry {i} of {self.header.count} (byte {self.offset}): the "
                           f"entry says its record is {length} bytes, more than the rest of the file holds")
        record = body[:-4]
        if _CRC.unpack_from(body, length)[0] != zlib.crc32(record, zlib.crc32(head)):
            raise SwapFileError(self.path, f"entry {i} (byte {self.offset}) does not match its checksum")
        self.offset = end
        self.index = i + 1
        return ukey, record

    def read(self, n: int) -> list[FlowFile]:
        """Up to ``n`` FlowFiles (fewer only at the end of the file)."""
        out = []
        decode = rec.decode_record
        claims = self._claims
        for _ in range(min(n, self.remaining)):
            i = self.index
            ukey, record = self._entry()
            try:
                queue, ff = decode(ukey, record, claims)
            except rec.RecordVersionError as e:
                raise UnsupportedFormatVersionError(self.path, e.found, rec.RECORD_VERSION,
                                                    f"entry {i} of the swap file") from None
            except rec.RecordError as e:
                raise SwapFileError(self.path, f"entry {i}: {e}") from None
            if queue:
                raise SwapFileError(self.path, f"entry {i} names queue {queue!r}; swap entries have none")
            out.append(ff)
        if self.index == self.header.count and n > 0:
            self._check_end()
        return out

    def verify(self) -> int:
        """Check every remaining entry's framing and checksum without decoding; return the count.

        Leaves the reader where it was."""
        offset, index = self.offset, self.index
        try:
            while self.index < self.header.count:
                self._entry()
            self._check_end()
            return self.header.count - index
        finally:
            self._f.seek(offset)
            self.offset, self.index = offset, index

    def _check_end(self) -> None:
        extra = self._f.read(1)
        if extra:
            raise SwapFileError(self.path, f"it has bytes after its last entry (byte {self.offset})")

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "SwapFileReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_swap_file(path: str | Path) -> tuple[SwapHeader, list[FlowFile]]:
    """The header and every FlowFile of a swap file (for tools and tests)."""
    with SwapFileReader(path) as reader:
        return reader.header, reader.read(reader.header.count)


def set_aside(path: str | Path) -> Path | None:
    """Rename a damaged swap file to ``*.swap.corrupt`` (kept for inspection); None if it is gone."""
    path = Path(path)
    target = path.with_name(path.name + ".corrupt")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target


def remove_orphans(directory: str | Path, registered: Iterable[str]) -> list[str]:
    """Delete swap files the FlowFile repository does not list, and unfinished ``.partial`` ones.

    Run at start-up only, before any queue swaps: an unregistered file is one whose registration
    never committed (its FlowFiles are still in their queue in the log) or one already swapped back
    in, so it holds nothing the log does not (NIFI-5997: unknown swap files on restart).
    Damaged files set aside as ``.swap.corrupt`` are left alone. Returns the names removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    keep = set(registered)
    removed = []
    for entry in directory.iterdir():
        name = entry.name
        if name.endswith(PARTIAL_SUFFIX) or (name.endswith(SUFFIX) and name not in keep):
            entry.unlink(missing_ok=True)
            removed.append(name)
    return removed
