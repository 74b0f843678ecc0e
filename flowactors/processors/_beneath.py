"""Paths kept beneath a directory, for PutFile (its filename beneath Directory, and with a Base
Directory its Directory beneath that) and FetchFile (with a Base Directory, its file beneath it).

A path is first resolved as the kernel would (``os.path.realpath``: links followed, ``..`` after
them) and checked; then it is opened one component at a time, each relative to the directory
before it with ``O_NOFOLLOW``, so a symbolic link put in the way after the check is seen and
followed only when it too resolves beneath the root. Refusals are ``Refused``, whose message is
the reason a user reads.
"""

from __future__ import annotations

import errno
import os
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
#: symbolic links followed in one walk at most (the kernel's own bound, MAXSYMLINKS)
MAX_LINKS = 40


class Refused(Exception):
    """The path leads where it must not (or nowhere); the message is the reason."""


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or beneath it (both absolute and normalized)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def name_parts(filename: str | None) -> list[str]:
    """The path components of a filename, refusing anything that could leave the directory."""
    if not filename:
        raise Refused("the FlowFile has no filename")
    if "\x00" in filename:
        raise Refused("the filename contains a NUL character")
    if filename.startswith("/") or os.path.isabs(filename):
        raise Refused(f"the filename {filename!r} is an absolute path")
    parts = [p for p in filename.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"the filename {filename!r} has a '..' component")
    if not parts:
        raise Refused(f"the filename {filename!r} names no file")
    return parts


def resolve_beneath(path: str, base: str, what: str) -> tuple[str, str]:
    """``(resolved path, resolved base)`` for a ``path`` that resolves beneath ``base``;
    ``Refused`` naming both (``what``: the property ``path`` is the value of) otherwise."""
    if "\x00" in path:
        raise Refused(f"the {what} {path!r} contains a NUL character")
    real_base = os.path.realpath(base)
    resolved = os.path.realpath(path)
    if not inside(resolved, real_base):
        raise Refused(f"the {what} {path!r} resolves to {resolved!r}, outside the Base Directory {base!r}")
    return resolved, real_base


def relative_parts(resolved: str, real_base: str) -> list[str]:
    """The components that lead from ``real_base`` to ``resolved`` (beneath it)."""
    return [] if resolved == real_base else resolved[len(real_base.rstrip("/")) + 1:].split("/")


def open_beneath(root: str, parts: list[str], create: bool) -> tuple[int, str]:
    """Open the directory ``root/parts...`` (``root`` resolved): ``walk`` from ``root``."""
    return walk(os.open(root, DIR_FLAGS), root, parts, root, create)


def walk(fd: int, real: str, parts: list[str], root: str, create: bool, links: int = 0) -> tuple[int, str]:
    """From the open directory ``fd`` (resolved path ``real``, beneath ``root``), enter each of
    ``parts`` in turn (``enter``; ``links``: the links this walk followed so far): the last one's
    descriptor, which the caller closes, and its resolved path. ``fd`` is taken over: closed
    here, also when a part is refused."""
    try:
        for part in parts:
            child, real = enter(fd, real, part, root, create, links)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, real


def enter(parent: int, real: str, part: str, root: str, create: bool, links: int = 0) -> tuple[int, str]:
    """Open the subdirectory ``part`` of ``parent`` (whose resolved path is ``real``) without
    following a link outside ``root``; with ``create``, make it when missing, else
    ``FileNotFoundError`` naming its path. A link that resolves beneath ``root`` is followed by
    walking from ``root`` to its target again, so a link put on that way meanwhile is checked
    too; past ``MAX_LINKS`` links the path is refused."""
    for _ in range(2):
        try:
            return os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent), os.path.join(real, part)
        except FileNotFoundError:
            if not create:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.path.join(real, part)) from None
            try:
                os.mkdir(part, 0o777, dir_fd=parent)
            except FileExistsError:
                pass  # made by someone else meanwhile: open it
        except OSError as err:
            if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            st = os.stat(part, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                raise Refused(f"{os.path.join(real, part)!r} is not a directory") from None
            target = os.path.realpath(os.path.join(real, part))
            if not inside(target, root):
                raise Refused(f"{os.path.join(real, part)!r} is a symbolic link to {target!r}, "
                              f"outside {root!r}") from None
            if not os.path.isdir(target):
                raise Refused(f"{os.path.join(real, part)!r} is not a directory") from None
            if links >= MAX_LINKS:
                raise Refused(f"{os.path.join(real, part)!r}: more than {MAX_LINKS} symbolic links on the way") from None
            return walk(os.open(root, DIR_FLAGS), root, relative_parts(target, root), root, False, links + 1)
    raise Refused(f"could not create directory {os.path.join(real, part)!r}")


def unlink_beneath(path: str, base: str) -> None:
    """Delete the directory entry ``path`` (a link itself, not what it leads to, as ``os.unlink``)
    only while its directory resolves beneath ``base``, entered as ``walk`` does: ``Refused``
    otherwise, ``FileNotFoundError`` when it is gone."""
    parent, name = os.path.split(path)
    resolved, real_base = resolve_beneath(parent or os.curdir, base, "file to delete")
    fd, _ = open_beneath(real_base, relative_parts(resolved, real_base), create=False)
    try:
        os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)
