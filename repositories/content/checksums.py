"""Content checksums: the CRC-32 of every 4 KiB block of a claim file, kept in a trailer after its
contents, written with them and verified when they are read (``checksums=True``;
docs/formats/content-repository.md, "Checksums", has every byte).

A claim file written with checksums has an id ending in ``CHECKED_SUFFIX``, so a reader knows from
the claim alone that it must find a trailer. Its contents keep their offsets (they start at byte
0, one after another, as without checksums); the trailer follows the last content byte ``D``:

    D + 4 i       u32 LE   CRC-32 (zlib) of bytes [4096 i, min(4096 (i + 1), D)), for i < ceil(D / 4096)
    D + 4 n       u64 LE   D
                  u32 LE   CRC-32 of the n entries
                  4 bytes  b"fcs1"

A release without checksums reads such a file as before: the trailer is bytes no content
references. Blocks rather than contents, so that any byte range a FlowFile references (a content,
or a slice of one that ``split`` or ``clone`` made) is verified by reading at most a block more on
each side. The writer writes the trailer where the contents end at every ``flush`` (the one
before the FlowFile commit included) and when it moves on to another claim; a content appended
later overwrites it, and the next flush writes it again further on.

``BlockSums`` keeps the checksums of the claim a writer appends to; ``Trailer`` is a claim file's
trailer as a reader loads it, and ``read_checked`` reads a range and verifies it, raising
``ContentChecksumError`` naming the claim file, the block and the content when they do not match.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from array import array
from functools import partial
from typing import Callable, Sequence

from repositories.model import ContentClaim, ResourceClaim

from .errors import ContentChecksumError

#: bytes of a claim file one checksum covers
BLOCK = 4096
#: the end of the id of a claim file written with checksums
CHECKED_SUFFIX = ".c1"
#: the last bytes of a claim file written with checksums
MAGIC = b"fcs1"
_FOOTER = struct.Struct("<QI4s")   # contents' length, CRC-32 of the entries, MAGIC
#: bytes read from the end of a claim file to find its trailer in one read (claims up to 60 MiB)
_TAIL_READ = 64 * 1024
_NATIVE_LE = sys.byteorder == "little"


def is_checked(claim_id: str) -> bool:
    """Whether the claim file of this id was written with checksums (and must have a trailer)."""
    return claim_id.endswith(CHECKED_SUFFIX)


def _le(values: array) -> array:
    if not _NATIVE_LE:
        values = array("I", values)
        values.byteswap()
    return values


class BlockSums:
    """The checksums of the claim file a writer appends to, as its bytes are handed to the kernel
    (``add``, in file order); ``trailer()`` is what follows them in the file."""

    def __init__(self) -> None:
        self._done = array("I")   # CRCs of the complete blocks
        self._crc = 0             # CRC of the block being filled
        self._filled = 0          # its bytes so far

    @property
    def size(self) -> int:
        """Bytes summed: where the contents end."""
        return BLOCK * len(self._done) + self._filled

    def add(self, view: memoryview) -> None:
        """The next bytes of the claim file."""
        crc32, done = zlib.crc32, self._done
        crc, filled = self._crc, self._filled
        while view:
            part = view[:BLOCK - filled]
            crc = crc32(part, crc)
            filled += len(part)
            view = view[len(part):]
            if filled == BLOCK:
                done.append(crc)
                crc = filled = 0
        self._crc, self._filled = crc, filled

    def trailer(self) -> bytes:
        """The trailer of the bytes summed so far."""
        entries = array("I", self._done)
        if self._filled:
            entries.append(self._crc)
        raw = _le(entries).tobytes()
        return raw + _FOOTER.pack(self.size, zlib.crc32(raw), MAGIC)

    def truncate(self, size: int, read: Callable[[int, int], bytes]) -> None:
        """The claim file was cut back to ``size`` bytes: forget the checksums past it and take the
        block it now ends in again from the file (``read(offset, count)``)."""
        keep = size // BLOCK
        del self._done[keep:]
        tail = size - keep * BLOCK
        self._crc = zlib.crc32(read(keep * BLOCK, tail)) if tail else 0
        self._filled = tail


class Trailer:
    """The trailer of a claim file written with checksums, as a reader loads it (``load``):
    ``length``, the bytes of contents before it, and ``entries``, their blocks' CRC-32s."""

    __slots__ = ("length", "entries")

    def __init__(self, length: int, entries: array) -> None:
        self.length, self.entries = length, entries

    @classmethod
    def load(cls, fd: int, path: str, resource: ResourceClaim) -> "Trailer":
        """The trailer of the open claim file ``fd`` (at ``path``); ``ContentChecksumError`` when
        it is missing or damaged."""
        size = os.fstat(fd).st_size
        tail = _read_upto(fd, min(size, _TAIL_READ), max(0, size - _TAIL_READ))
        if len(tail) < _FOOTER.size or tail[-4:] != MAGIC:
            raise _bad_trailer(path, resource, "it does not end with one")
        length, entries_crc, _magic = _FOOTER.unpack_from(tail, len(tail) - _FOOTER.size)
        count = -(-length // BLOCK)
        if length + 4 * count + _FOOTER.size != size:
            raise _bad_trailer(path, resource, f"its trailer says {length} bytes of contents, which a "
                                               f"file of {size} bytes cannot hold")
        start = size - _FOOTER.size - 4 * count
        raw = (tail[len(tail) - _FOOTER.size - 4 * count:-_FOOTER.size] if 4 * count + _FOOTER.size <= len(tail)
               else _read_upto(fd, 4 * count, start))
        if zlib.crc32(raw) != entries_crc:
            raise _bad_trailer(path, resource, "the checksums in its trailer fail their own CRC-32")
        return cls(length, _le(array("I", raw)))


def _read_upto(fd: int, count: int, offset: int) -> bytes:
    """``count`` bytes from ``offset``, fewer only where the file ends."""
    parts = []
    while count > 0:
        data = os.pread(fd, count, offset)
        if not data:
            break
        parts.append(data)
        offset += len(data)
        count -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_checked(fd: int, trailer: Trailer, path: str, offset: int, count: int, claim: ContentClaim,
                 truncated: Callable[[], Exception]) -> bytes:
    """``count`` bytes from ``offset`` of the claim file ``fd`` (at ``path``), part of ``claim``,
    verified against its ``trailer``: every block they touch is read whole and checked. Raises
    ``ContentChecksumError`` when a block does not match, ``truncated()`` when the bytes are not
    all among the contents the trailer covers."""
    if count <= 0:
        return b""
    end = offset + count
    if end > trailer.length:
        raise truncated()
    first, last = offset // BLOCK, (end - 1) // BLOCK
    start = first * BLOCK
    data = _read_upto(fd, min((last + 1) * BLOCK, trailer.length) - start, start)
    view, crc32, entries = memoryview(data), zlib.crc32, trailer.entries
    for i in range(last - first + 1):
        actual = crc32(view[i * BLOCK:(i + 1) * BLOCK])
        if actual != entries[first + i]:
            raise _mismatch(path, claim, start + i * BLOCK, actual, entries[first + i])
    if offset == start and len(data) == count:
        return data
    return data[offset - start:end - start]


def read_checked_many(fd: int, trailer: Trailer, path: str, claims: Sequence[ContentClaim],
                      truncated: Callable[[str, int, int], Exception]) -> list[bytes]:
    """``read_checked`` of each of ``claims`` (contents of the claim file ``fd``, in any order):
    the blocks from the first to the last are read and checked once where the contents fill most
    of them (a batch's contents of one claim lie one after another); else, or when that fails, each
    content is read on its own, so that an error names the content it is in.
    ``truncated(path, offset, length)`` is the error of a content past the end of the contents."""
    low = min(c.offset for c in claims)
    high = max(c.offset + c.length for c in claims)
    if len(claims) > 1 and high <= trailer.length and high - low <= 2 * sum(c.length for c in claims) + 2 * BLOCK:
        try:
            span = read_checked(fd, trailer, path, low, high - low, claims[0], partial(truncated, path, low, high))
        except ContentChecksumError:
            pass
        else:
            return [span[c.offset - low:c.offset - low + c.length] for c in claims]
    return [read_checked(fd, trailer, path, c.offset, c.length, c, partial(truncated, path, c.offset, c.length))
            for c in claims]


def _mismatch(path: str, claim: ContentClaim, at: int, actual: int, expected: int) -> ContentChecksumError:
    error = ContentChecksumError(
        f"content at offset {claim.offset}, length {claim.length} of claim file {path} fails its checksum: "
        f"bytes {at} to {at + BLOCK - 1} of the file have CRC-32 {actual:#010x} where its trailer says "
        f"{expected:#010x}; the file was changed or damaged after it was written, so the content is not "
        f"delivered (restore the claim file from a backup, or drop the FlowFile)")
    error.path, error.offset, error.claim = path, at, claim
    return error


def _bad_trailer(path: str, resource: ResourceClaim, problem: str) -> ContentChecksumError:
    error = ContentChecksumError(
        f"claim file {path} was written with checksums, but {problem} (the file was cut short, changed "
        f"or damaged after it was written), so none of its contents is delivered; restore the claim "
        f"file from a backup")
    error.path, error.offset, error.claim = path, None, resource
    return error
