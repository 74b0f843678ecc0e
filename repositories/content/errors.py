"""Errors of the content repository.

Every error keeps its message as its only positional argument and its details as instance
attributes, so it pickles (``Exception.__reduce__`` restores ``__dict__``) and survives a Ray call.
"""

from __future__ import annotations

import errno as _errno
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import shutil

#: errno values that mean "this file system cannot take more data".
FULL_ERRNOS = frozenset({_errno.ENOSPC, _errno.EDQUOT})


class ContentRepositoryError(Exception):
    """A content repository operation failed (I/O error, corrupt or unknown claim, misuse)."""


class ContentRepositoryFullError(ContentRepositoryError):
    """A write failed because a container's file system is full (ENOSPC) or over quota (EDQUOT).

    ``container`` is the container's name, ``path`` its directory, ``errno`` the kernel's errno.
    """

    container: str | None = None
    path: str | None = None
    errno: int | None = None

    @classmethod
    def for_container(
        cls, container: str, path: str | os.PathLike[str], cause: OSError,
        disk: "shutil._ntuple_diskusage | None" = None, archive_emptied: bool = False,
    ) -> "ContentRepositoryFullError":
        """The error of a write refused by the file system of ``container`` (at ``path``).
        ``disk``: its file system's usage, said in the message; ``archive_emptied``: the
        repository deleted every archived claim it could before refusing, so the message says
        that only live content (or other files) is left on that disk."""
        code = cause.errno
        reason = "over its disk quota" if code == _errno.EDQUOT else "out of disk space"
        usage = ""
        if disk is not None and disk.total:
            used = disk.total - disk.free
            usage = (f"; its file system is {100.0 * used / disk.total:.1f} % used ({used:,} of "
                     f"{disk.total:,} bytes, {disk.free:,} free)")
        left = ", and it holds no archived content left to delete" if archive_emptied else ""
        error = cls(
            f"content repository container {container!r} at {os.fspath(path)} is {reason} "
            f"({_errno.errorcode.get(code or 0, code)}: {cause.strerror}){usage}{left}; free space "
            f"on that file system (for example lower the archive retention or usage percent, or let "
            f"the queued FlowFiles that hold live content drain) or add a container on another disk "
            f"(settings.content_containers)"
        )
        error.container = container
        error.path = os.fspath(path)
        error.errno = code
        return error


class ContentNotFoundError(ContentRepositoryError):
    """A content claim's resource claim is neither live nor archived: it was aged off or deleted."""

    claim: object = None


class ContentChecksumError(ContentRepositoryError):
    """A content's bytes do not match the checksum written with them: the claim file (or its
    checksum file) was changed or damaged after it was written. ``path`` is the claim file,
    ``offset`` the first byte of the failing 4 KiB block in it, ``claim`` the content read."""

    path: str | None = None
    offset: int | None = None
    claim: object = None
