"""Writing contents into resource claims: one ``ClaimWriter`` per session.

A writer appends the contents of one session, one after another, into resource claims that only it
writes. A claim is *retired* (never appended to again) once it holds ``max_appendable_size`` bytes
or ``max_flowfiles_per_claim`` contents, and the next content starts a new claim. Because no two
writers share a claim, a rollback can delete every claim the writer created, and no writer ever
appends to a claim whose claimant count might already have reached zero.

A writer is used by one thread at a time (the session's). It is sealed by ``close()`` after the
session commits, or by ``discard()`` when it rolls back. The bytes of a content are handed to the
kernel when the content is complete (small writes inside one stream are gathered first), so a
finished content can be read through the repository at once, before any commit.

Failure model: if the file system reports an error while writing (``ENOSPC``/``EDQUOT`` raise
``ContentRepositoryFullError``, anything else ``ContentRepositoryError``), the writer is *failed*:
every later write, stream and ``flush()`` raises, so no commit can reference content whose bytes
may not be on disk (including earlier contents whose buffered bytes could not be written). The
session must ``discard()`` it. An exception from the caller's own code (inside an
``open_stream()`` block, or from the source of ``copy_from``) only abandons that one content: its
bytes are truncated away and the writer stays usable.
"""

from __future__ import annotations

import errno
import io
import os
from itertools import accumulate, islice, repeat
from operator import is_
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Sequence

from repositories.fsutil import fsync_dir
from repositories.model import ContentClaim, ResourceClaim

from .errors import FULL_ERRNOS, ContentRepositoryError, ContentRepositoryFullError

if TYPE_CHECKING:
    from .repository import FileSystemContentRepository

_new_tuple = tuple.__new__
#: bytes per step when copying from a stream or a file.
COPY_CHUNK = 1024 * 1024
#: small writes are gathered in memory up to this size before one ``pwrite``; larger writes go
#: straight to the file.
WRITE_BUFFER = 256 * 1024
#: errno values for which ``copy_file_range`` is not usable between two files (fall back to
#: reading and writing).
_NO_KERNEL_COPY = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF, errno.EPERM}
)


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

    def write(self, data: Any) -> int:  # type: ignore[override]
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


class ClaimWriter(BaseClaimWriter):
    """Writes the contents of ONE session into resource claim files of its own.

    Get one from ``FileSystemContentRepository.writer()``. Claims are created with ``O_EXCL`` under the
    layout of ``docs/formats/content-repository.md``; bytes are written with ``pwrite`` at offsets
    the writer tracks, so nothing depends on a shared file position.
    """

    def __init__(self, repository: "FileSystemContentRepository") -> None:
        super().__init__(repository.max_appendable_size, repository.max_flowfiles_per_claim)
        self._repo = repository
        self._fd = -1
        self._path = ""
        self._container_name = ""
        self._container_path = ""
        self._buffer = bytearray()
        self._flushed = 0  # bytes of the current claim already handed to the kernel
        self._unsynced: list[str] = []  # retired claim files not yet fsynced
        self._dirs_to_sync: dict[str, None] = {}

    # --- flushing and sealing -----------------------------------------------------------
    def flush(self, sync: bool | None = None) -> None:
        """Hand every byte written to the kernel; with ``sync`` also fsync the claim files and
        the directories that got new entries. ``sync=None`` uses the repository's
        ``always_sync``. Call it before the FlowFile repository commit that references the
        contents. Without sync the contents survive the death of the process (they are in the
        page cache) but not a power loss."""
        self._check_failed()
        if sync is None:
            sync = self._repo.always_sync
        if self._fd >= 0:
            self._drain()
        if not sync:
            return
        # A failed fsync is never retried (the kernel may have dropped the dirty pages): the
        # writer fails and the session rolls back.
        current = self._path
        try:
            if self._fd >= 0:
                _datasync(self._fd)
            for current in self._unsynced:
                fd = os.open(current, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    _datasync(fd)
                finally:
                    os.close(fd)
            for current in self._dirs_to_sync:
                fsync_dir(current)
        except OSError as exc:
            self._fail(exc, current)
        self._unsynced.clear()
        self._dirs_to_sync.clear()

    def _storage_close(self) -> None:
        if self._fd < 0:
            return
        try:
            if self._failure is None:
                self._drain()
        finally:
            fd, self._fd = self._fd, -1
            try:
                os.close(fd)
            except OSError as exc:
                self._fail(exc, self._path)

    def _storage_discard(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.close(fd)
            except OSError:
                pass
        self._buffer = bytearray()
        problems = []
        for resource in self._created:
            try:
                os.unlink(self._repo.path_of(resource))
            except FileNotFoundError:
                pass
            except OSError as exc:
                problems.append(exc)
        self._unsynced.clear()
        self._dirs_to_sync.clear()
        if problems:
            raise ContentRepositoryError(
                f"rollback could not delete {len(problems)} claim file(s): {problems[0]}; "
                f"they will be removed as orphans at the next start-up"
            ) from problems[0]

    # --- storage ------------------------------------------------------------------------
    def _storage_new_claim(self) -> None:
        repo = self._repo
        resource, container_path = repo._new_resource_claim()
        path = os.path.join(container_path, resource.section, resource.id)
        try:
            new_dirs = repo._ensure_section_dir(resource.container, resource.section)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._container_name, self._container_path = resource.container, container_path
            self._fail(exc, path)
        self._fd = fd
        self._path = path
        self._container_name = resource.container
        self._container_path = container_path
        self._flushed = 0
        self._created.append(resource)
        self._resource = resource
        self._dirs_to_sync[os.path.dirname(path)] = None
        for directory in new_dirs:
            self._dirs_to_sync[os.path.dirname(directory)] = None

    def _storage_append(self, view: memoryview) -> None:
        buffer = self._buffer
        if len(buffer) + len(view) <= WRITE_BUFFER:
            buffer += view
            return
        self._drain()
        if len(view) >= WRITE_BUFFER:
            self._pwrite_all(view)
        else:
            buffer += view

    def _storage_content_done(self) -> None:
        # Every finished content is handed to the kernel at once, so the session (or anyone)
        # can read it back through the repository before the commit.
        self._drain()

    def _drain(self) -> None:
        if self._buffer:
            self._pwrite_all(memoryview(self._buffer))
            self._buffer.clear()

    def _pwrite_all(self, view: memoryview) -> None:
        fd, offset = self._fd, self._flushed
        try:
            while view:
                written = os.pwrite(fd, view, offset)
                offset += written
                view = view[written:]
        except OSError as exc:
            self._flushed = offset
            self._fail(exc, self._path)
        self._flushed = offset

    def _storage_truncate(self, size: int) -> None:
        if size >= self._flushed:
            del self._buffer[size - self._flushed :]
            return
        self._buffer.clear()
        try:
            os.ftruncate(self._fd, size)
        except OSError as exc:
            self._fail(exc, self._path)
        self._flushed = size

    def _storage_retire(self) -> None:
        try:
            self._drain()
        finally:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError as exc:
                    self._fail(exc, self._path)
        self._unsynced.append(self._path)

    def _copy_source(self, source: BinaryIO, length: int | None) -> int:
        # Zero-copy paths: another claim of this repository, or a plain file.
        from .repository import ContentInputStream

        if isinstance(source, ContentInputStream) and source.claim_fd() is not None:
            position = source.tell()
            available = max(source.claim.length - position, 0)
            count = available if length is None else min(length, available)
            copied = self._kernel_copy(
                source.claim_fd(), source.claim.offset + position, count
            )
            source.seek(position + copied)
            return copied
        if isinstance(source, io.FileIO) and source.seekable():
            position = source.tell()
            copied = self._kernel_copy(source.fileno(), position, length)
            source.seek(position + copied)
            return copied
        return super()._copy_source(source, length)

    def _kernel_copy(self, src_fd: int, src_offset: int, count: int | None) -> int:
        """Copy from ``src_fd`` at ``src_offset`` into the claim with ``copy_file_range`` (in
        the kernel, a reflink on file systems that offer it), falling back to ``preadv`` and
        ``pwrite`` through a 1 MiB buffer. Returns the bytes copied (fewer at EOF)."""
        self._drain()
        copied = 0
        kernel = hasattr(os, "copy_file_range")
        buffer: memoryview | None = None
        while count is None or copied < count:
            want = COPY_CHUNK * 64 if count is None else min(COPY_CHUNK * 64, count - copied)
            if kernel:
                try:
                    n = os.copy_file_range(
                        src_fd, self._fd, want, src_offset + copied, self._flushed
                    )
                except OSError as exc:
                    if exc.errno in _NO_KERNEL_COPY and copied == 0:
                        kernel = False
                        continue
                    # Which side failed is unknown: treat it as a failed write.
                    self._fail(exc, self._path)
                self._flushed += n
            else:
                if buffer is None:
                    buffer = memoryview(bytearray(COPY_CHUNK))
                part = buffer[: min(want, COPY_CHUNK)]
                n = os.preadv(src_fd, [part], src_offset + copied)
                if n:
                    self._pwrite_all(part[:n])
            if n == 0:
                break
            copied += n
            self._size += n
        return copied

    def _fail(self, exc: OSError, path: str) -> None:
        """Mark the writer failed and raise the repository error for ``exc`` (never returns)."""
        if self._failure is None:
            self._failure = exc
        if exc.errno in FULL_ERRNOS:
            raise ContentRepositoryFullError.for_container(
                self._container_name, self._container_path, exc
            ) from exc
        raise ContentRepositoryError(f"writing claim file {path} failed: {exc}") from exc

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def _datasync(fd: int) -> None:
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)
