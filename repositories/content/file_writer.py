"""Writing contents into claim files: ``ClaimWriter``, one per session (the rules it follows are
``BaseClaimWriter``'s, writer.py).

Claim files are created with ``O_EXCL`` where ``ClaimFiles`` places them; bytes are written with
``pwrite`` at offsets the writer tracks, so nothing depends on a shared file position. A source
that is another content of the repository or a plain file is copied in the kernel
(``copy_file_range``) where the file system allows it.

A write the file system refuses for lack of space (ENOSPC, EDQUOT) is tried again as long as the
repository's ``make_room`` deletes archived claims to make room for it; only when nothing is left
to delete does the writer fail (``ContentRepositoryFullError``, naming the disk and its usage).

With ``checksums`` the writer sums every byte it hands to the kernel and writes the claim file's
trailer (checksums.py) where its contents end at every ``flush`` and when it retires the claim.
Bytes then never go from file to file in the kernel: they pass through the writer, which sums
them, and a content of the repository copied is read through its stream, which verifies it.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
from typing import BinaryIO, Callable

from repositories.fsutil import fsync_dir

from .checksums import BlockSums
from .claim_files import ClaimFiles
from .errors import FULL_ERRNOS, ContentRepositoryError, ContentRepositoryFullError
from .streams import COPY_CHUNK, ContentInputStream
from .writer import BaseClaimWriter

#: small writes are gathered in memory up to this size before one ``pwrite``; larger writes go
#: straight to the file.
WRITE_BUFFER = 256 * 1024
#: errno values for which ``copy_file_range`` is not usable between two files (fall back to
#: reading and writing).
_NO_KERNEL_COPY = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF, errno.EPERM}
)


class ClaimWriter(BaseClaimWriter):
    """Writes the contents of ONE session into resource claim files of its own.

    Get one from ``FileSystemContentRepository.writer()``: ``files`` are the repository's claim
    files, ``make_room(container name, bytes wanted)`` is called when a write to that container
    is refused for lack of space and says whether trying again may succeed (it deleted archived
    claims); the other arguments are the repository's options of the same names.
    """

    def __init__(self, files: ClaimFiles, *, max_appendable_size: int, max_flowfiles_per_claim: int,
                 always_sync: bool, make_room: Callable[[str, int], bool] | None = None,
                 checksums: bool = False) -> None:
        super().__init__(max_appendable_size, max_flowfiles_per_claim)
        self._files = files
        self._make_room = make_room
        self._checksums = checksums
        self._sums: BlockSums | None = None  # the current claim's checksums, with checksums
        self._extent = 0  # where the current claim file ends (past its contents: its trailer)
        self._always_sync = always_sync
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
            sync = self._always_sync
        if self._fd >= 0:
            self._drain()
            self._write_trailer()
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
                self._write_trailer()
        finally:
            self._close_file()

    def _close_file(self) -> None:
        """Close the current claim file (a failure fails the writer)."""
        fd, self._fd = self._fd, -1
        self._sums = None
        if fd >= 0:
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
                os.unlink(self._files.path_of(resource))
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
        resource, container_path = self._files.next_claim(self._checksums)
        path = os.path.join(container_path, resource.section, resource.id)
        self._container_name, self._container_path = resource.container, container_path
        new_dirs: list[str] = []
        access = os.O_RDWR if self._checksums else os.O_WRONLY   # a cut-back block is summed again
        while True:
            try:
                new_dirs += self._files.make_section_dir(resource)
                fd = os.open(path, access | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                break
            except OSError as exc:
                if not self._room_for(exc, 0):
                    self._fail(exc, path)
        self._fd = fd
        self._path = path
        self._flushed = self._extent = 0
        self._sums = BlockSums() if self._checksums else None
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

    def _write_trailer(self) -> None:
        """With checksums: write the current claim's trailer where its contents end (drained), and
        cut off what is left past it of an earlier, longer one."""
        if self._sums is None:
            return
        at, previous = self._flushed, self._extent
        self._pwrite_all(memoryview(self._sums.trailer()), summed=False)
        end, self._flushed = self._flushed, at
        if end < previous:
            try:
                os.ftruncate(self._fd, end)
            except OSError as exc:
                self._fail(exc, self._path)
        self._extent = end

    def _pwrite_all(self, view: memoryview, summed: bool = True) -> None:
        """Write all of ``view`` where the claim's contents end (``summed``: they are contents, which
        the checksums take; a trailer is not)."""
        fd, offset = self._fd, self._flushed
        if summed and self._sums is not None:
            self._sums.add(view)
        while view:
            try:
                written = os.pwrite(fd, view, offset)
            except OSError as exc:
                if self._room_for(exc, len(view)):
                    continue
                self._flushed = offset
                self._fail(exc, self._path)
            offset += written
            view = view[written:]
        self._flushed = offset
        self._extent = max(self._extent, offset)

    def _storage_truncate(self, size: int) -> None:
        if size >= self._flushed:
            del self._buffer[size - self._flushed :]
            return
        self._buffer.clear()
        try:
            os.ftruncate(self._fd, size)
            if self._sums is not None:
                self._sums.truncate(size, lambda offset, count: os.pread(self._fd, count, offset))
        except OSError as exc:
            self._fail(exc, self._path)
        self._flushed = self._extent = size

    def _storage_retire(self) -> None:
        try:
            self._drain()
            self._write_trailer()
        finally:
            self._close_file()
        self._unsynced.append(self._path)

    def _copy_source(self, source: BinaryIO, length: int | None) -> int:
        # Zero-copy paths: another claim of this repository (not with checksums: its bytes are
        # read through the stream, which verifies them where it has checksums), or a plain file.
        claim_fd = source.claim_fd() if isinstance(source, ContentInputStream) else None
        if isinstance(source, ContentInputStream) and claim_fd is not None and not self._checksums:
            position = source.tell()
            available = max(source.claim.length - position, 0)
            count = available if length is None else min(length, available)
            copied = self._kernel_copy(claim_fd, source.claim.offset + position, count)
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
        kernel = hasattr(os, "copy_file_range") and self._sums is None   # with checksums, the bytes are summed
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
                    if self._room_for(exc, want):
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

    def _room_for(self, exc: OSError, wanted: int) -> bool:
        """Whether a write refused with ``exc`` is worth trying again: the file system is full and
        the repository made room on it (deleted archived claims) for ``wanted`` bytes more."""
        if exc.errno not in FULL_ERRNOS or self._make_room is None:
            return False
        return self._make_room(self._container_name, wanted)

    def _fail(self, exc: OSError, path: str) -> None:
        """Mark the writer failed and raise the repository error for ``exc`` (never returns)."""
        if self._failure is None:
            self._failure = exc
        if exc.errno in FULL_ERRNOS:
            try:
                disk = shutil.disk_usage(self._container_path)
            except OSError:
                disk = None
            raise ContentRepositoryFullError.for_container(
                self._container_name, self._container_path, exc, disk,
                archive_emptied=self._make_room is not None,
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
