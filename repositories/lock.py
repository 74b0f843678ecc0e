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
and writes nothing, so it works on a read-only repository; readers do not exclude each other, and
while it reads no flow or tool can write (its exclusive lock is refused), which is what lets the
readers open LMDB without its lock file (docs/formats/flowfile-repository.md, "Reading without
writing"). A folder without the lock file has never had a flow of this release run on it: there
is nothing to lock, and the reader goes on.
"""

from __future__ import annotations

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
        if self.shared:   # read-only: the file is opened without creating or writing it
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._fd = -1   # no flow ever held this folder (see the module docstring)
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
        ``RepositoryInUseError`` names the holder."""
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(os.pread(fd, 4096, 0), readers_possible=operation == fcntl.LOCK_EX)
            os.close(fd)
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


def _describe(raw: bytes, *, readers_possible: bool) -> str:
    """The holder the file names. A shared holder writes nothing, so when an exclusive lock is
    refused and the named process is gone (on this host), the holder is a reading command."""
    try:
        info = json.loads(raw.decode())
        named = f"{info['owner']} (pid {info['pid']} on {info['host']}, since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"
    if readers_possible and info["host"] == socket.gethostname() and not process_alive(info["pid"]):
        return "a command reading it (flowactors status, provenance, lineage, queue list or state list)"
    return named


def process_alive(pid: object) -> bool:
    """Whether the process ``pid`` may still run on this machine (signal 0 checks, sends nothing):
    False only when no such process exists; one owned by someone else, or a value that is no pid,
    counts as alive (say what a file says rather than guess)."""
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError, OverflowError):
        pass  # not ours to signal, or not a pid: say what the file says
    return True
