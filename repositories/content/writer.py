"""Writing contents into resource claims: the rules every claim writer follows.

A writer appends the contents of one session, one after another, into resource claims that only it
writes. A claim is *retired* (never appended to again) once it holds ``max_appendable_size`` bytes
or ``max_flowfiles_per_claim`` contents, and the next content starts a new claim. Because no two
writers share a claim, a rollback can delete every claim the writer created, and no writer ever
appends to a claim whose claimant count might already have reached zero.

A writer is used by one thread at a time (the session's). It is sealed by ``close()`` after the
session commits, or by ``discard()`` when it rolls back. The bytes of a content are handed to the
kernel when the content is complete (small writes inside one stream are gathered first), so a
finished content can be read through the repository at once, before any commit.

Failure model: if storage reports an error while writing (``ENOSPC``/``EDQUOT`` raise
``ContentRepositoryFullError``, anything else ``ContentRepositoryError``), the writer is *failed*:
every later write, stream and ``flush()`` raises, so no commit can reference content whose bytes
may not be stored (including earlier contents whose buffered bytes could not be written). The
session must ``discard()`` it. An exception from the caller's own code (inside an
``open_stream()`` block, or from the source of ``copy_from``) only abandons that one content: its
bytes are truncated away and the writer stays usable.

``BaseClaimWriter`` holds these rules; where the bytes go is its subclasses' part: claim files
(``ClaimWriter``, file_writer.py) or memory (``InMemoryClaimWriter``, memory.py).
"""

from __future__ import annotations

import io
import os
from itertools import accumulate, islice, repeat
from operator import is_
from typing import Any, BinaryIO, Callable, Sequence

from repositories.model import ContentClaim, ResourceClaim

from .errors import ContentRepositoryError
from .streams import COPY_CHUNK

_new_tuple = tuple.__new__


def _as_bytes_view(data: Any) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.itemsize != 1 or view.ndim != 1:
        view = view.cast("B")
    return view


class ContentOutputStream(io.RawIOBase):
    """A writable stream for one content; after ``close()``, ``claim`` is its ``ContentClaim``.

    Use it as a context manager: leaving the block normally closes it (the content is kept);
    leaving it with an exception aborts it (the content's bytes are dropped). ``tell()`` is the
    number of bytes written so far. Bytes go to the claim file as they are written (gathered in
    a small buffer), so a stream of any size needs little memory.
    """

    def __init__(self, writer: "BaseClaimWriter", start: int) -> None:
        super().__init__()
        self._writer = writer
        self._start = start
        self._length = 0
        self._claim: ContentClaim | None = None
        self._aborted = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("write to a closed content stream")
        view = _as_bytes_view(data)
        self._writer._stream_write(self, view)
        self._length += len(view)
        return len(view)

    def tell(self) -> int:
        return self._length

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._aborted:
                self._claim = self._writer._stream_finish(self)
        finally:
            super().close()

    def abort(self) -> None:
        """Drop this content: its bytes are removed and ``claim`` stays unset."""
        if self.closed:
            return
        self._aborted = True
        try:
            self._writer._stream_abort(self)
        finally:
            super().close()

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def claim(self) -> ContentClaim:
        if self._claim is None:
            state = "aborted" if self._aborted else "still open"
            raise ContentRepositoryError(f"content stream is {state}; it has no claim")
        return self._claim

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # A stream dropped without close() produces no content.
        try:
            if not self.closed:
                self.abort()
        except Exception:
            pass


class BaseClaimWriter:
    """The claim layout rules (append, roll over, abort, seal); storage is left to subclasses."""

    def __init__(self, max_appendable_size: int, max_flowfiles_per_claim: int) -> None:
        self._max_size = max_appendable_size
        self._max_count = max_flowfiles_per_claim
        self._created: list[ResourceClaim] = []
        self._bytes_written = 0
        self._resource: ResourceClaim | None = None  # the claim being appended to
        self._size = 0  # bytes in the current claim
        self._count = 0  # contents in the current claim
        self._stream: ContentOutputStream | None = None
        self._sealed: str | None = None  # "closed" or "discarded"
        self._failure: BaseException | None = None

    # --- public interface ---------------------------------------------------------------
    def write_bytes(self, data: Any) -> ContentClaim:
        """Append one content held in memory; returns its claim."""
        return self._write_content(data, done=True)

    def write_many(self, contents: Sequence[Any]) -> list[ContentClaim]:
        """``write_bytes`` for each content, in order (the same claims, the same roll-overs), handed
        to the kernel together once all are appended: the contents that go to one claim are
        appended as one buffer, their claims made without a Python call each. Returns the claims."""
        if not contents:
            return []
        first = contents[0]
        # one object for all (GenerateFlowFile's case), told by identity only: == is elementwise
        # for arrays, and contents need not be compared
        if all(map(is_, contents, repeat(first))):
            views = [_as_bytes_view(first)] * len(contents)
        else:
            views = list(map(_as_bytes_view, contents))
        lengths = list(map(len, views))
        claims: list[ContentClaim] = []
        i = 0
        while i < len(views):
            start = self._begin(lengths[i])
            end, size = self._claim_run(lengths, i, start)
            self._size = size
            try:
                if size > start:   # one content as it is (it may be large), several joined
                    self._storage_append(views[i] if end - i == 1 else memoryview(b"".join(views[i:end])))
            except BaseException:
                self._abort_content(start)
                raise
            claims += map(_new_tuple, repeat(ContentClaim), zip(
                repeat(self._resource), accumulate(lengths[i:end - 1], initial=start), lengths[i:end]))
            self._count += end - i
            self._bytes_written += size - start
            self._retire_if_full()
            i = end
        self._storage_content_done()
        return claims

    def _claim_run(self, lengths: list[int], i: int, start: int) -> tuple[int, int]:
        """``(end, size)``: contents ``i`` to ``end`` go to the current claim, which then holds
        ``size`` bytes; the next would start a claim of its own (as ``_begin`` and ``_end`` decide)."""
        size, count, end = start, self._count, i
        for length in islice(lengths, i, None):
            if not self._fits(size, count, length):
                break
            size += length
            count += 1
            end += 1
            if self._full(size, count):
                break
        return end, size

    # the claim layout's two rules, for one content (_begin, _end) and for a run (_claim_run)
    def _fits(self, size: int, count: int, length: int) -> bool:
        """Whether a content of ``length`` bytes goes to a claim holding ``count`` contents and
        ``size`` bytes (a claim's first content always does)."""
        return not count or size + length <= self._max_size

    def _full(self, size: int, count: int) -> bool:
        """Whether a claim holding ``count`` contents and ``size`` bytes is retired."""
        return size >= self._max_size or bool(self._max_count and count >= self._max_count)

    def _write_content(self, data: Any, *, done: bool) -> ContentClaim:
        view = _as_bytes_view(data)
        start = self._begin(len(view))
        try:
            if len(view):
                self._storage_append(view)
                self._size += len(view)
        except BaseException:
            self._abort_content(start)
            raise
        return self._end(start, done=done)

    def open_stream(self, size_hint: int | None = None) -> ContentOutputStream:
        """A stream for one content (a context manager); ``.claim`` is set when it closes.

        ``size_hint``, the expected size when known, lets a content that will not fit the current
        claim start a claim of its own (see ``_begin``).
        """
        start = self._begin(size_hint)
        stream = ContentOutputStream(self, start)
        self._stream = stream
        return stream

    def copy_from(self, source: BinaryIO, length: int | None = None) -> ContentClaim:
        """Copy ``length`` bytes (all until EOF when None) from ``source`` as one content.

        Streams in chunks of ``COPY_CHUNK``; raises ``ContentRepositoryError`` if ``source`` ends
        before ``length`` bytes (the partial content is dropped).
        """
        if length is not None and length < 0:
            raise ValueError(f"length must be >= 0, not {length}")
        start = self._begin(length)
        try:
            copied = self._copy_source(source, length)
            if length is not None and copied < length:
                raise ContentRepositoryError(
                    f"source ended after {copied} of the {length} bytes to copy"
                )
        except BaseException:
            self._abort_content(start)
            raise
        return self._end(start)

    def copy_file(self, path: str | os.PathLike[str]) -> ContentClaim:
        """Import the file at ``path`` as one content, streaming."""
        with open(path, "rb", buffering=0) as source:
            start = self._begin(os.fstat(source.fileno()).st_size)
            try:
                self._copy_source(source, None)
            except BaseException:
                self._abort_content(start)
                raise
            return self._end(start)

    def created(self) -> list[ResourceClaim]:
        """The resource claims this writer created, in order."""
        return list(self._created)

    @property
    def bytes_written(self) -> int:
        """Bytes of all the contents this writer completed."""
        return self._bytes_written

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def flush(self, sync: bool | None = None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def discard(self) -> None:
        """Rollback: close and delete every resource claim this writer created."""
        if self._sealed == "discarded":
            return
        if self._sealed == "closed":
            raise ContentRepositoryError(
                "cannot discard a closed (committed) writer: its claims may be referenced"
            )
        self._sealed = "discarded"
        if self._stream is not None:
            self._stream._aborted = True
            io.RawIOBase.close(self._stream)
            self._stream = None
        self._resource = None
        self._storage_discard()

    def close(self) -> None:
        """Seal after commit: close the files; later writes raise."""
        if self._sealed is not None:
            return
        if self._stream is not None:
            raise ContentRepositoryError("close() while a content stream is still open")
        self._sealed = "closed"
        self._resource = None
        self._storage_close()

    # --- content life cycle -------------------------------------------------------------
    def _check_failed(self) -> None:
        """What ``flush()`` refuses, on disk and in memory alike: a failed or a discarded writer (a
        closed one may still flush)."""
        if self._failure is not None:
            raise ContentRepositoryError(
                f"this claim writer failed earlier ({self._failure}); discard it"
            ) from self._failure
        if self._sealed == "discarded":
            raise ContentRepositoryError("this claim writer is discarded")

    def _check_usable(self) -> None:
        self._check_failed()
        if self._sealed is not None:
            raise ContentRepositoryError(f"this claim writer is {self._sealed}")

    def _begin(self, size_hint: int | None = None) -> int:
        """Start a content. One known not to fit the current claim's room starts a claim of its own,
        so a large content never lands in a claim that small survivors pin (seed 003's disk flood).
        """
        self._check_usable()
        if self._stream is not None:
            raise ContentRepositoryError(
                "a content stream of this writer is still open; close it before the next content"
            )
        if (self._resource is not None and size_hint is not None
                and not self._fits(self._size, self._count, size_hint)):
            self._resource = None
            self._storage_retire()
        if self._resource is None:
            self._storage_new_claim()
            self._size = 0
            self._count = 0
        return self._size

    def _end(self, start: int, *, done: bool = True) -> ContentClaim:
        """Finish the content begun at ``start``; ``done``: hand it to the kernel now (else the
        caller does, or the claim's retirement)."""
        assert self._resource is not None
        if done:
            self._storage_content_done()
        claim = _new_tuple(ContentClaim, (self._resource, start, self._size - start))   # no frame: hot
        self._count += 1
        self._bytes_written += claim.length
        self._retire_if_full()
        return claim

    def _retire_if_full(self) -> None:
        if self._full(self._size, self._count):
            self._resource = None
            self._storage_retire()

    def _abort_content(self, start: int) -> None:
        """Remove the bytes of an unfinished content (unless the writer already failed)."""
        if self._failure is None and self._resource is not None and self._size > start:
            self._storage_truncate(start)
            self._size = start

    def _stream_write(self, stream: ContentOutputStream, view: memoryview) -> None:
        if stream is not self._stream:
            raise ContentRepositoryError("this content stream is no longer open")
        self._check_usable()
        if len(view):
            self._storage_append(view)
            self._size += len(view)

    def _stream_finish(self, stream: ContentOutputStream) -> ContentClaim:
        if stream is not self._stream:
            raise ContentRepositoryError("this content stream is no longer open")
        self._stream = None
        self._check_usable()
        return self._end(stream._start)

    def _stream_abort(self, stream: ContentOutputStream) -> None:
        if stream is self._stream:
            self._stream = None
            self._abort_content(stream._start)

    # --- storage (subclasses) -----------------------------------------------------------
    def _copy_source(self, source: BinaryIO, length: int | None) -> int:
        """Copy from a Python stream through a reused buffer; returns the bytes copied."""
        buffer = bytearray(COPY_CHUNK if length is None else min(COPY_CHUNK, max(length, 1)))
        view = memoryview(buffer)
        copied = 0
        readinto: Callable[[Any], Any] | None = getattr(source, "readinto", None)
        while length is None or copied < length:
            want = len(view) if length is None else min(len(view), length - copied)
            if readinto is not None:
                n = readinto(view[:want])
                chunk = view[: n or 0]
            else:
                data = source.read(want)
                n = len(data)
                chunk = _as_bytes_view(data)
            if not n:
                break
            self._storage_append(chunk)
            self._size += n
            copied += n
        return copied

    def _storage_new_claim(self) -> None:
        raise NotImplementedError

    def _storage_append(self, view: memoryview) -> None:
        raise NotImplementedError

    def _storage_truncate(self, size: int) -> None:
        raise NotImplementedError

    def _storage_content_done(self) -> None:
        """A content is complete: make its bytes readable by other readers."""

    def _storage_retire(self) -> None:
        raise NotImplementedError

    def _storage_discard(self) -> None:
        raise NotImplementedError

    def _storage_close(self) -> None:
        raise NotImplementedError
