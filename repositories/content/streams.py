"""Reading one content: the stream over a byte range of a claim file, and chunked iteration.

A content is a byte range of a resource claim file that holds other contents too, so a stream over
it reads with ``pread`` at absolute offsets (no shared file position) and positions relative to the
content. Iterating a content stream yields chunks of ``COPY_CHUNK`` bytes, not lines (contents are
binary); the in-memory repository's streams iterate the same way (``ChunkedIteration``).
"""

from __future__ import annotations

import io
import os
from typing import Any, Protocol, Sequence, TypeVar

from repositories.model import ContentClaim

from .checksums import Trailer, read_checked, read_checked_many
from .errors import ContentRepositoryError

#: bytes per step when copying from a stream or a file, and per chunk when iterating a content.
COPY_CHUNK = 1024 * 1024
#: read buffer of a content stream (smaller for smaller contents).
READ_BUFFER = 256 * 1024


class _ChunkSource(Protocol):
    """What ``ChunkedIteration`` needs of the stream it is mixed into."""

    chunk_size: int

    @property
    def closed(self) -> bool: ...

    def read(self, size: int | None = ..., /) -> bytes: ...


_Source = TypeVar("_Source", bound=_ChunkSource)


class ChunkedIteration:
    """Iteration over a content stream: chunks of up to ``chunk_size`` bytes, not lines. Mixed into
    the file-system and the in-memory content streams, before their ``io`` base."""

    chunk_size = COPY_CHUNK

    def __iter__(self: _Source) -> _Source:
        if self.closed:
            raise ValueError("I/O operation on closed content stream")
        return self

    def __next__(self: _ChunkSource) -> bytes:
        chunk = self.read(self.chunk_size)
        if not chunk:
            raise StopIteration
        return chunk


class ClaimRangeIO(io.RawIOBase):
    """Unbuffered reading of ``claim.length`` bytes at ``claim.offset`` of an open claim file (it
    owns ``fd`` and closes it), with ``pread``; positions are relative to the content. ``path`` is
    named in the error when the file ends before the content does. ``trailer``: the claim file's
    checksums, against which every read is verified (None: written without)."""

    def __init__(self, fd: int, claim: ContentClaim, path: str, trailer: Trailer | None = None) -> None:
        super().__init__()
        self.fd = fd
        self.trailer = trailer
        self._claim = claim
        self._start = claim.offset
        self._length = claim.length
        self._pos = 0
        self._path = path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._checkClosed()
        remaining = self._length - self._pos
        if remaining <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        if len(view) > remaining:
            view = view[:remaining]
        if self.trailer is not None:
            data = self._read(self._start + self._pos, len(view))
            view[:len(data)] = data
            self._pos += len(data)
            return len(data)
        n = os.preadv(self.fd, [view], self._start + self._pos)
        if n == 0:
            raise _truncated(self._path, self._start, self._length)
        self._pos += n
        return n

    def readall(self) -> bytes:
        self._checkClosed()
        data = self._read(self._start + self._pos, self._length - self._pos)
        self._pos = self._length
        return data

    def _read(self, offset: int, count: int) -> bytes:
        return read_content(self.fd, self.trailer, self._path, offset, count, self._claim)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._pos + offset
        elif whence == io.SEEK_END:
            position = self._length + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._pos = position
        return position

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()


def _truncated(path: str, start: int, length: int) -> ContentRepositoryError:
    return ContentRepositoryError(
        f"claim file {path} ends before byte {start + length} of the content "
        f"at offset {start}, length {length}: it was truncated or is corrupt"
    )


def read_range(fd: int, offset: int, count: int, path: str, start: int, length: int) -> bytes:
    """``count`` bytes of the open claim file ``fd`` (at ``path``) from ``offset``, part of the
    content at ``start``, ``length``; raises ``ContentRepositoryError`` if the file ends first."""
    parts = []
    while count > 0:
        data = os.pread(fd, count, offset)
        if not data:
            raise _truncated(path, start, length)
        parts.append(data)
        offset += len(data)
        count -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_content(fd: int, trailer: Trailer | None, path: str, offset: int, count: int,
                 claim: ContentClaim) -> bytes:
    """``count`` bytes of the open claim file ``fd`` (at ``path``) from ``offset``, part of the
    content ``claim``: verified against the claim file's ``trailer`` unless it is None (then
    ``read_range``). Raises ``ContentRepositoryError`` if the file ends first and
    ``ContentChecksumError`` if the bytes do not match their checksums."""
    if trailer is None:
        return read_range(fd, offset, count, path, claim.offset, claim.length)
    return read_checked(fd, trailer, path, offset, count, claim,
                        lambda: _truncated(path, claim.offset, claim.length))


def read_contents(fd: int, trailer: Trailer | None, path: str, claims: Sequence[ContentClaim]) -> list[bytes]:
    """``read_content`` of each of ``claims``, contents of the open claim file ``fd``; with a
    ``trailer``, the blocks they span are read and checked once where they lie close together
    (``read_checked_many``)."""
    if trailer is None:
        return [read_range(fd, c.offset, c.length, path, c.offset, c.length) for c in claims]
    return read_checked_many(fd, trailer, path, claims, _truncated)


class ContentInputStream(ChunkedIteration, io.BufferedReader):
    """A readable, seekable stream over one content (positions relative to the content).

    ``read(n)``, ``read()``, ``readinto()``, ``seek()``/``tell()`` work as on a file limited to the
    content; iterating yields chunks of up to 1 MiB (not lines). ``fileno()`` is not offered: the
    claim file holds other contents too. ``claim`` is the content claim, ``path`` the file read
    (the archive path when the claim was archived).
    """

    def __init__(self, raw: ClaimRangeIO, claim: ContentClaim, path: str) -> None:
        super().__init__(raw, max(1, min(READ_BUFFER, max(claim.length, 8192))))
        self._range = raw
        self.claim = claim
        self.path = path

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a content stream has no file descriptor of its own")

    def claim_fd(self) -> int | None:
        """The claim file's descriptor (absolute offsets: ``claim.offset + tell()``), for
        zero-copy transfers inside this package; None once closed, and for a claim written with
        checksums (its bytes are read, to be verified)."""
        return None if self.closed or self._range.trailer is not None else self._range.fd
