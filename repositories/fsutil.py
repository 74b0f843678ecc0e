"""File-system helpers the repositories share."""

from __future__ import annotations

import os


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory, so that the names created, renamed or removed in it survive a power loss
    (fsync of a file makes its bytes durable, not its directory entry)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o666, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old file or the new one, never part of
    one: written to ``<name>.tmp`` beside it (created afresh with ``mode``, less the umask, so a
    leftover's permissions never carry over), fsynced unless ``fsync=False``, then renamed over."""
    temporary = os.fspath(path) + ".tmp"
    try:
        os.unlink(temporary)   # a crashed writer's
    except FileNotFoundError:
        pass
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
