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
