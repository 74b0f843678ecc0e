"""Who is using a repository folder: a running flow, or a tool that changes it while it is stopped.

Opening the provenance repository runs its recovery, which merges and deletes the journals; in a
second process while a flow is appending to them, that would lose or duplicate events. And a
FlowFile written into the write-ahead log behind a running flow's back would not reach its queue
until the next start. So whoever opens the repositories for writing - the flow controller while a
flow runs, ``flowactors provenance``/``lineage``/``replay`` while it is stopped - holds an exclusive
``flock`` on ``<repository>/repository.lock``; the others are told who has it.

``flock`` belongs to the open file, so the kernel drops the lock when its holder exits, even by
``kill -9``: a stale lock file never blocks anybody. The file holds JSON naming the holder (pid,
host, what it is, since when), for the message only.

A command that only reads (``flowactors status``, ``provenance search|show``, ``lineage``, ``queue
list``, ``state list``) takes the same lock *shared* (``shared=True``): it opens the file read-only
and writes nothing to it, so it works on a read-only repository; readers do not exclude each
other, and while it reads no flow or tool can write (its exclusive lock is refused), which is what
lets the readers open LMDB without its lock file (docs/formats/flowfile-repository.md, "Reading
without writing"). A folder without the lock file (no flow of this release ran on it) gets an
empty one from the reader, so that a flow starting meanwhile is refused as well; only where the
file cannot be created (a read-only folder or file system, where no flow can write either) does
the reader go on without a lock.

Refused, the message names who holds the lock: an exclusive lock refused while a shared one
would be granted is held by readers only (a reader writes nothing, so the file still names its
last writer); otherwise the file names the writer that holds it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

LOCK_FILE = "repository.lock"


class RepositoryInUseError(RuntimeError):
    """Another process holds the repository; the message names it and what to do."""


class RepositoryLock:
    """A non-blocking lock on one repository folder, exclusive or ``shared`` (see the module docstring)."""

    def __init__(self, repository: str | os.PathLike, owner: str, *, shared: bool = False):
        self.path = Path(repository) / LOCK_FILE
        self.owner = owner
        self.shared = shared
        self._fd: int | None = None

    def acquire(self) -> "RepositoryLock":
        """Take the lock or raise ``RepositoryInUseError`` naming the holder; never waits."""
        if self._fd is not None:
            return self
        if self.shared:   # read-only: the file is opened (created if missing) but never written
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as err:
                if err.errno not in (errno.EACCES, errno.EROFS):
                    raise
                self._fd = -1   # a read-only folder: nobody can write it (see the module docstring)
                return self
            self._fd = self._flock(fd, fcntl.LOCK_SH, "reads a stopped repository only")
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._flock(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644), fcntl.LOCK_EX,
                         "needs it to itself")
        info = json.dumps({"owner": self.owner, "pid": os.getpid(), "host": socket.gethostname(),
                           "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        self._fd = fd
        return self

    def _flock(self, fd: int, operation: int, need: str) -> int:
        """``flock`` the open file without waiting and return it; refused, it is closed and
        ``RepositoryInUseError`` names the holder (see the module docstring)."""
        try:
            try:
                fcntl.flock(fd, operation | fcntl.LOCK_NB)
            except BlockingIOError:
                readers_only = operation == fcntl.LOCK_EX and _grants_shared(fd)
                holder = _READERS if readers_only else _named(os.pread(fd, 4096, 0))
                raise RepositoryInUseError(f"the repository {self.path.parent} is in use by {holder}; "
                                           f"{self.owner} {need}: stop that first") from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def release(self) -> None:
        """Let go (closing the file drops the flock); the file stays, naming the last holder."""
        fd, self._fd = self._fd, None
        if fd is not None and fd >= 0:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "RepositoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


_READERS = "a command reading it (flowactors status, provenance, lineage, queue list or state list)"


def _grants_shared(fd: int) -> bool:
    """Whether a shared lock on ``fd`` is granted now (then let go): only readers hold the file."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _named(raw: bytes) -> str:
    """The writer the lock file names (the one holding it exclusively)."""
    try:
        info = json.loads(raw.decode())
        return f"{info['owner']} (pid {info['pid']} on {info['host']}, since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"

