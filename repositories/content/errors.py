"""Errors of the content repository.

Every error keeps its message as its only positional argument and its details as instance
attributes, so it pickles (``Exception.__reduce__`` restores ``__dict__``) and survives a Ray call.
"""

from __future__ import annotations

import errno as _errno
import os

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
        cls, container: str, path: str | os.PathLike[str], cause: OSError
    ) -> "ContentRepositoryFullError":
        code = cause.errno
        reason = "over its disk quota" if code == _errno.EDQUOT else "out of disk space"
        error = cls(
            f"content repository container {container!r} at {os.fspath(path)} is {reason} "
            f"({_errno.errorcode.get(code or 0, code)}: {cause.strerror}); free space on that "
            f"file system (for example lower the archive retention or usage percent) or add a "
            f"container on another disk (settings.content_containers)"
        )
        error.container = container
        error.path = os.fspath(path)
        error.errno = code
        return error


class ContentNotFoundError(ContentRepositoryError):
    """A content claim's resource claim is neither live nor archived: it was aged off or deleted."""

    claim: object = None
