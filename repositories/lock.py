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
    """An exclusive, non-blocking lock on one repository folder (see the module docstring)."""

    def __init__(self, repository: str | os.PathLike, owner: str):
        self.path = Path(repository) / LOCK_FILE
        self.owner = owner
        self._fd: int | None = None

    def acquire(self) -> "RepositoryLock":
        """Take the lock or raise ``RepositoryInUseError`` naming the holder; never waits."""
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(os.pread(fd, 4096, 0))
            os.close(fd)
            raise RepositoryInUseError(f"the repository {self.path.parent} is in use by {holder}; "
                                       f"{self.owner} needs it to itself: stop that first") from None
        except BaseException:
            os.close(fd)
            raise
        info = json.dumps({"owner": self.owner, "pid": os.getpid(), "host": socket.gethostname(),
                           "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go (closing the file drops the flock); the file stays, naming the last holder."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "RepositoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _describe(raw: bytes) -> str:
    try:
        info = json.loads(raw.decode())
        return f"{info['owner']} (pid {info['pid']} on {info['host']}, since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"
