"""Processors that read and write local files: ListFile, FetchFile, GetFile, PutFile.

Listing a directory (ListFile, GetFile) is ``_listing``; keeping a path beneath a directory
(PutFile's filename and Base Directory, FetchFile's Base Directory) is ``_beneath``.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
import time
import uuid as uuid_module
from collections import deque
from pathlib import Path
from typing import BinaryIO, Iterator, Mapping

import orjson

from flowactors.processors._beneath import (
    DIR_FLAGS, Refused, inside, name_parts, open_beneath, relative_parts, resolve_beneath, unlink_beneath, walk,
)
from flowactors.processors._common import CHUNK, boolean_property
from flowactors.processors._listing import (
    FILE_FILTER, IGNORE_HIDDEN, INPUT_DIRECTORY, MAX_AGE, MAX_SIZE, MIN_AGE, MIN_SIZE, PATH_FILTER, RECURSE, Entry,
    Lister,
)
from flowactors.sdk import ContentRepositoryError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS

log = logging.getLogger(__name__)

#: what ListFile and GetFile do with a file taken while it is still being written (their warning's words)
_LISTED_TOO_EARLY = "and listed again, a FlowFile each time, as it changes"
_TAKEN_TOO_EARLY = "then deleted, so what is written to it afterwards is lost"


def _uri(path: str | os.PathLike) -> str:
    return Path(os.path.abspath(path)).as_uri()


def _base_directory(what: str, effect: str) -> PropertyDescriptor:
    """The optional Base Directory of PutFile and FetchFile (a flowactors addition; unset, as NiFi)."""
    return PropertyDescriptor(
        "Base Directory", f"When set, {effect} only beneath this directory: a {what} that resolves outside it "
        f"(through '..', an absolute path or a symbolic link) sends the FlowFile to failure, saying where it led. "
        f"Unset (the default), as NiFi: wherever {what} leads", validator=validators.NON_EMPTY)


# ---------------------------------------------------------------------------------- ListFile
class ListFile(Processor):
    """Lists the files of a directory, one FlowFile without content per file, for FetchFile to read.

    Each FlowFile carries filename, path (the directory relative to Input Directory, "./" for the
    directory itself), absolute.path (ending in "/"), file.size, file.lastModifiedTime,
    file.lastAccessTime, file.creationTime, file.owner, file.group and file.permissions. What was
    listed is kept in the processor's **state** (``context.state``, in the FlowFile repository), so
    **a restart lists only new or changed files**; the state changes in the commit that creates
    the FlowFiles, so a listing that did not commit is listed again and one that did is never
    repeated. Two ways, as NiFi's Listing Strategy:

    * ``Tracking Entities`` (the default): each listed file's path with its modification time and
      size. A file is listed once, listed again when its modification time or size changes (to
      any time), and a file that appears with an old modification time (moved in, ``cp -p``) is
      listed too. The state grows with the directory (a file's path and about 30 bytes: 4 MiB,
      the most a state may take, is about 60,000 files of 40-character paths; past it the listing
      stops with an error that says to switch strategy);
      files that disappeared leave it at the next listing that changes it.
    * ``Tracking Timestamps``: the newest modification time listed (``listing.timestamp``, ns) and
      the files listed at exactly that time (``listing.ids``): a file is listed when it is newer.
      The state stays small whatever the directory holds, but a file that appears with a
      modification time older than the newest listed is not listed (NiFi's default, and its
      caveat).

    With several concurrent tasks each lists the files whose path hashes to its task number;
    under Tracking Entities they share the state (a task that commits at the same moment as
    another lists again), under Tracking Timestamps each keeps its own time. Provenance: a CREATE
    event per FlowFile (from the session).

    Minimum File Age is NiFi's 0 sec by default, so a file still being written is listed as it is
    so far, and again as it changes; with the property left unset, the first file listed less
    than a second after it was modified is warned about once per run (``Lister.warn_if_recent``).
    A run until idle would end before a default wait let such a file settle (a source that finds
    nothing to take is idle), which is why the default stays NiFi's.
    """

    description = "Lists files in a directory (one content-less FlowFile per new file)"
    input_required = False
    ENTITIES, TIMESTAMPS = "Tracking Entities", "Tracking Timestamps"
    properties = (INPUT_DIRECTORY, RECURSE, FILE_FILTER, PATH_FILTER, MIN_AGE, MAX_AGE, MIN_SIZE,
                  MAX_SIZE, IGNORE_HIDDEN,
                  PropertyDescriptor("Listing Strategy", "How the files already listed are remembered",
                                     required=True, default=ENTITIES, allowable_values=(ENTITIES, TIMESTAMPS)))
    relationships = (SUCCESS,)
    #: state keys: the newest modification time listed (both strategies), the files listed at it
    #: (Tracking Timestamps); under Tracking Entities every other key is a listed file's path
    TIMESTAMP, IDS = "listing.timestamp", "listing.ids"

    def on_scheduled(self, context: ProcessContext) -> None:
        self._lister = Lister(context, _LISTED_TOO_EARLY)
        self._by_timestamp = context.property("Listing Strategy").evaluate() == self.TIMESTAMPS
        # under Tracking Timestamps each task keeps its own time (its files' newest is its own)
        tasks = self._lister.tasks
        self._prefix = f"{self._lister.instance}/{tasks}." if self._by_timestamp and tasks > 1 else ""

    def on_trigger(self, context: ProcessContext, session) -> None:
        state = context.state.get()
        new, remembered = (self._new_by_timestamp if self._by_timestamp else self._new_by_entity)(state.values)
        if not new:
            context.yield_()
            return
        self._lister.warn_if_recent(new)
        for entry in new:
            flowfile = session.create()
            flowfile = session.put_all_attributes(flowfile, entry.attributes())
            session.transfer(flowfile, SUCCESS)
        try:
            kept = context.state.replace(state, remembered)
        except ValueError as err:  # over the state's size
            if self._by_timestamp:
                raise ValueError(f"{err}: too many files share the newest modification time for Listing "
                                 f"Strategy '{self.TIMESTAMPS}'") from None
            raise ValueError(f"{err}: the directory has too many files for Listing Strategy '{self.ENTITIES}'; "
                             f"set it to '{self.TIMESTAMPS}'") from None
        if not kept:  # another task listed meanwhile: next time
            session.rollback()

    def _new_by_entity(self, listed: Mapping[str, str]) -> tuple[list[Entry], dict[str, str]]:
        """The files new or changed since listed, and (when there are some) the state to keep:
        every file of this task as it is now, the other tasks' and the strategies' keys as they are."""
        seen: dict[str, str] = {}
        new: list[Entry] = []
        # no file of this task tracked yet, but a time kept (Tracking Timestamps before, or
        # another task count): what that time covers counts as listed
        newest, at_newest = (-1, set()) if any(self._owned_paths(listed)) else self._kept_time(listed)
        for entry in self._lister.entries():
            key = seen[entry.path] = f"{entry.stat.st_mtime_ns} {entry.stat.st_size}"
            mtime = entry.stat.st_mtime_ns
            if listed.get(entry.path) != key and not (mtime < newest or (mtime == newest and entry.path in at_newest)):
                new.append(entry)
        if not new:
            return new, {}
        new.sort(key=lambda e: (e.stat.st_mtime_ns, e.path))
        remembered = {p: k for p, k in listed.items() if not p.startswith("/") or not self._lister.owns(p)}
        remembered.update(seen)  # this task's files as they are now (the gone ones leave)
        remembered[self.TIMESTAMP] = str(max(new[-1].stat.st_mtime_ns, int(listed.get(self.TIMESTAMP, "0"))))
        return new, remembered

    def _owned_paths(self, listed: Mapping[str, str]) -> Iterator[tuple[str, str]]:
        """The files of this task that Tracking Entities keeps (their keys are absolute paths)."""
        return ((p, v) for p, v in listed.items() if p.startswith("/") and self._lister.owns(p))

    def _kept_time(self, listed: Mapping[str, str]) -> tuple[int, set[str]]:
        """For a task that kept nothing of its own yet: the time before which Tracking Timestamps
        listed every file under another setting (one task, or another task count; not this one's
        sibling tasks, whose files are not this task's): the oldest such time, so a file between
        two old tasks' times is listed again rather than missed, with the files listed at exactly
        it; (-1, none) when there is none."""
        siblings = f"/{self._lister.tasks}." if self._by_timestamp and self._lister.tasks > 1 else None
        times = {}
        for key, value in listed.items():
            prefix = key[:-len(self.TIMESTAMP)]
            if (key.endswith(self.TIMESTAMP) and prefix + self.IDS in listed  # written by Tracking Timestamps
                    and not (self._by_timestamp and prefix == self._prefix)
                    and not (siblings and prefix.endswith(siblings))):
                times[prefix] = int(value)
        if not times:
            return -1, set()
        oldest = min(times.values())
        ids = set()
        for prefix, at in times.items():
            if at == oldest:
                ids |= set(orjson.loads(listed[prefix + self.IDS]))
        return oldest, ids

    def _new_by_timestamp(self, listed: Mapping[str, str]) -> tuple[list[Entry], dict[str, str]]:
        time_key, ids_key = self._prefix + self.TIMESTAMP, self._prefix + self.IDS
        if ids_key in listed:  # its own (Tracking Entities keeps a timestamp too, never the ids)
            newest = int(listed[time_key])
            at_newest = set(orjson.loads(listed[ids_key]))
        elif mtimes := {p: int(v.split(" ")[0]) for p, v in self._owned_paths(listed)}:
            # Tracking Entities before: from the newest file it listed
            newest = max(mtimes.values())
            at_newest = {p for p, m in mtimes.items() if m == newest}
        else:
            newest, at_newest = self._kept_time(listed)
        new = sorted((e for e in self._lister.entries()
                      if e.stat.st_mtime_ns > newest or (e.stat.st_mtime_ns == newest and e.path not in at_newest)),
                     key=lambda e: (e.stat.st_mtime_ns, e.path))
        if not new:
            return new, {}
        kept = {k: v for k, v in listed.items() if not k.startswith("/")}  # paths of Tracking Entities go
        top = new[-1].stat.st_mtime_ns
        ids = sorted({e.path for e in new if e.stat.st_mtime_ns == top} | (at_newest if top == newest else set()))
        return new, {**kept, time_key: str(top), ids_key: orjson.dumps(ids).decode()}


# ---------------------------------------------------------------------------------- FetchFile
class _NotFetched(Exception):
    """The file cannot be fetched: the relationship the FlowFile goes to, and why."""

    def __init__(self, relationship: Relationship, reason: str):
        super().__init__(reason)
        self.relationship = relationship


class FetchFile(Processor):
    """Replaces each FlowFile's content with the content of a local file (streamed, never loaded).

    The file is ``File to Fetch`` (default ``${absolute.path}/${filename}``, as ListFile writes
    them). A missing file goes to not.found, an unreadable one to permission.denied, any other
    problem (e.g. a directory) to failure; all three are penalized. With Completion Strategy
    "Delete File" the file is deleted only after the session committed, so a crash in between
    leaves the file in place (at-least-once). Provenance: a FETCH event with the ``file://`` URI.

    File to Fetch is built from attributes, so it can lead anywhere (``../`` in a filename, an
    absolute path, a symbolic link): as in NiFi, unless **Base Directory** is set; then a file
    that resolves outside it goes to failure, and the file is opened, and deleted, through
    directories entered one at a time without following a link out of it (``_beneath``).
    """

    description = "Fetches the content of a local file into a FlowFile"
    properties = (
        PropertyDescriptor("File to Fetch", "The full path of the file to fetch", required=True,
                           default="${absolute.path}/${filename}", expression_language=True),
        PropertyDescriptor("Completion Strategy", "What to do with the file once fetched (and committed)",
                           required=True, default="None", allowable_values=("None", "Delete File")),
        _base_directory("File to Fetch", "files are fetched"),
    )
    NOT_FOUND = Relationship("not.found", "The file does not exist")
    PERMISSION_DENIED = Relationship("permission.denied", "The file could not be read for lack of permission")
    relationships = (SUCCESS, NOT_FOUND, PERMISSION_DENIED, FAILURE)

    def on_trigger(self, context: ProcessContext, session) -> None:
        target = context.property("File to Fetch")
        delete = context.property("Completion Strategy").evaluate() == "Delete File"
        base = context.property("Base Directory").evaluate()
        to_delete: list[str] = []
        for flowfile in session.get_batch():
            path = target.evaluate(flowfile)
            started = time.monotonic()
            try:
                flowfile = self._fetch(session, flowfile, path, base)
            except _NotFetched as failed:
                log.warning("%s: cannot fetch %s for %s: %s", context.name, path, flowfile.uuid, failed)
                session.transfer(session.penalize(flowfile), failed.relationship)
                continue
            session.provenance.fetch(flowfile, _uri(path), duration=int((time.monotonic() - started) * 1000))
            session.transfer(flowfile, SUCCESS)
            if delete:
                to_delete.append(path)
        if to_delete:
            session.commit_async(on_success=lambda: _delete_all(to_delete, context.name, base))

    def _fetch(self, session, flowfile: FlowFile, path: str, base: str | None) -> FlowFile:
        """The FlowFile with the file's content; ``_NotFetched`` says where it goes instead."""
        try:
            if base is None:
                if not os.path.exists(path):
                    raise FileNotFoundError(path)
                if not os.path.isfile(path):
                    raise IsADirectoryError(path)
                if not os.access(path, os.R_OK):
                    raise PermissionError(path)
                return session.import_from(path, flowfile)
            with _open_beneath(path, base) as source:
                size = os.fstat(source.fileno()).st_size
                return session.write(flowfile, lambda out: shutil.copyfileobj(source, out, CHUNK), size_hint=size)
        except Refused as refused:
            raise _NotFetched(FAILURE, str(refused)) from None
        except FileNotFoundError:
            raise _NotFetched(self.NOT_FOUND, "no such file") from None
        except PermissionError:
            raise _NotFetched(self.PERMISSION_DENIED, "permission denied") from None
        except IsADirectoryError:
            raise _NotFetched(FAILURE, "not a regular file") from None
        except OSError as err:
            raise _NotFetched(FAILURE, str(err)) from None


def _open_beneath(path: str, base: str) -> BinaryIO:
    """The regular file ``path`` opened for reading, only where it resolves beneath ``base``."""
    resolved, real_base = resolve_beneath(path, base, "File to Fetch")
    parts = relative_parts(resolved, real_base)
    if not parts:
        raise IsADirectoryError(path)
    parent, _ = open_beneath(real_base, parts[:-1], create=False)
    try:  # not blocking: a FIFO put there is refused below, not waited on
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(path)
    return os.fdopen(fd, "rb", buffering=0)


def _delete_all(paths: list[str], name: str, base: str | None = None) -> None:
    """Delete the files a committed session took (beneath ``base`` when set)."""
    for path in paths:
        try:
            if base is None:
                os.unlink(path)
            else:
                unlink_beneath(path, base)
        except FileNotFoundError:
            pass
        except (OSError, Refused) as err:
            log.warning("%s: could not delete %s after it was committed: %s", name, path, err)


# ---------------------------------------------------------------------------------- GetFile
class GetFile(Processor):
    """Takes files from a directory into FlowFiles (streamed), then deletes them unless told to keep them.

    At most Batch Size files per trigger, oldest first; one listing of the directory serves
    batch after batch until it is used up, then the directory is listed again (each file is
    checked again when taken). The content is imported, the session is
    committed and only then are the source files deleted (``session.commit_async(on_success=...)``):
    delivery is **at least once** - a crash between the commit and the deletion leaves the file
    to be taken again after a restart, but a file is never deleted before its FlowFile is durable.
    As in NiFi, Keep Source File = true takes the same files again on every trigger (useful for
    tests). With several concurrent tasks each takes the files whose path hashes to its task
    number, so no two tasks take the same file. Attributes as ListFile. Provenance: a RECEIVE
    event per file with its ``file://`` URI. Minimum File Age and its warning as ListFile's: a file
    taken while still being written is deleted, and what its writer adds afterwards is lost.
    """

    description = "Takes files from a local directory"
    input_required = False
    properties = (
        INPUT_DIRECTORY, FILE_FILTER, PATH_FILTER,
        PropertyDescriptor("Batch Size", "The most files taken per trigger", required=True, default="10",
                           validator=validators.POSITIVE_INTEGER),
        boolean_property("Keep Source File", False, "Whether to leave the files in place (they are then "
                         "taken again on every trigger)"),
        RECURSE, MIN_AGE, MAX_AGE, MIN_SIZE, MAX_SIZE, IGNORE_HIDDEN,
    )
    relationships = (SUCCESS,)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._lister = Lister(context, _TAKEN_TOO_EARLY)
        self._batch = context.property("Batch Size").as_int()
        self._keep = context.property("Keep Source File").as_bool()
        #: files listed and not yet taken, oldest first. One walk of the directory serves batch
        #: after batch until it is used up (as NiFi's GetFile keeps a file queue): listing 100,000
        #: files costs ~0.7 s, which per batch made a backlog quadratic. Each file is stat'ed again
        #: when taken. With Keep Source File every trigger lists again (it takes the same files).
        self._listed: deque[Entry] = deque()

    def _next_entries(self) -> list[Entry]:
        if self._keep or not self._listed:
            self._listed = deque(sorted(self._lister.entries(), key=lambda e: (e.stat.st_mtime_ns, e.path)))
        entries: list[Entry] = []
        while self._listed and len(entries) < self._batch:
            entry = self._lister.refresh(self._listed.popleft())
            if entry is not None:
                entries.append(entry)
        self._lister.warn_if_recent(entries)
        return entries

    def on_trigger(self, context: ProcessContext, session) -> None:
        entries = self._next_entries()
        if not entries:
            context.yield_()
            return
        taken: list[str] = []
        for entry in entries:
            if not self._keep and not os.access(os.path.dirname(entry.path), os.W_OK):
                log.warning("%s: %s cannot be deleted (no write permission on its directory); left alone",
                            context.name, entry.path)
                continue
            flowfile = session.create()
            started = time.monotonic()
            try:
                flowfile = session.import_from(entry.path, flowfile)
            except OSError as err:  # vanished or unreadable meanwhile: leave it for later
                log.warning("%s: cannot read %s: %s", context.name, entry.path, err)
                session.remove(flowfile)
                continue
            flowfile = session.put_all_attributes(flowfile, entry.attributes())
            session.provenance.receive(flowfile, _uri(entry.path), duration=int((time.monotonic() - started) * 1000))
            session.transfer(flowfile, SUCCESS)
            taken.append(entry.path)
        if not self._keep and taken:
            session.commit_async(on_success=lambda: _delete_all(taken, context.name))


# ---------------------------------------------------------------------------------- PutFile
def _permissions(value: str) -> int:
    value = value.strip()
    if re.fullmatch(r"[0-7]{3,4}", value):
        return int(value, 8)
    if re.fullmatch(r"[r-][w-][x-][r-][w-][x-][r-][w-][x-]", value):
        return sum(1 << (8 - i) for i, c in enumerate(value) if c != "-")
    raise ValueError(f"{value!r} is not a permission (e.g. 644 or rw-r--r--)")


def _permissions_problem(value: str) -> str | None:
    if "${" in value:
        return None
    try:
        _permissions(value)
    except ValueError as err:
        return str(err)
    return None


class PutFile(Processor):
    """Writes each FlowFile's content to a file in Directory, named by its ``filename`` attribute.

    The content is streamed to a hidden temporary file in the target directory and then renamed
    into place, so readers never see a partial file. Conflict Resolution Strategy decides what
    happens when the file exists: replace it, ignore (the FlowFile goes to success, nothing is
    written) or fail (the FlowFile goes to failure). **A filename can never write outside
    Directory**: absolute names, ``..`` components, and symbolic links (in the directories on the
    way or as the file itself) that resolve outside it send the FlowFile to failure, with the
    reason in ``putfile.failure.reason``. Directories are walked with ``O_NOFOLLOW`` file
    descriptors and the file is created relative to them, so the checks apply to what is written.
    Subdirectories in the filename (``a/b.txt``) are created when Create Missing Directories is
    true. Failures are penalized. Provenance: a SEND event with the ``file://`` URI of the file.

    **Directory** may lead anywhere, as in NiFi (it is built from attributes, ``/out/${tenant}``),
    unless **Base Directory** is set: then a Directory that resolves outside it goes to failure,
    naming where it led and the base, and Directory is entered from the base as the filename is.

    **A retry of the FlowFile's own write is not a conflict.** The file is written before the
    session commits; when the commit fails (a full disk, a killed process) the FlowFile comes
    back and finds the file. Under ``fail`` and ``ignore``, an existing file that holds exactly
    this FlowFile's content (same size, same bytes) counts as written: success, with the SEND
    event the failed commit lost. The file itself is the evidence that survives any crash and
    needs nothing else on disk (a marker or a kept temporary name would be left behind by the
    same crashes), and it is exact: placing those bytes again would change nothing. So another
    FlowFile with the very same content succeeds too, where NiFi sends it to failure; the bytes
    are compared only when the sizes are equal.
    """

    description = "Writes FlowFile contents to files in a local directory"
    properties = (
        PropertyDescriptor("Directory", "The directory to write files to", required=True,
                           expression_language=True, validator=validators.NON_EMPTY),
        PropertyDescriptor("Conflict Resolution Strategy", "What to do when a file of that name exists (one "
                           "holding exactly this FlowFile's content counts as written, so a retry succeeds)",
                           required=True, default="fail", allowable_values=("replace", "ignore", "fail")),
        boolean_property("Create Missing Directories", True, "Whether to create the directories that do not "
                         "exist (the target directory and subdirectories in the filename)"),
        PropertyDescriptor("Permissions", "Permissions of the written file, e.g. 644 or rw-r--r-- "
                           "(default: as the process's umask gives)", expression_language=True,
                           validator=_permissions_problem),
        _base_directory("Directory", "files are written"),
    )
    relationships = (SUCCESS, FAILURE)
    REASON = "putfile.failure.reason"

    def on_trigger(self, context: ProcessContext, session) -> None:
        directory = context.property("Directory")
        permissions = context.property("Permissions")
        placer = self.placer(context, session)
        for flowfile in session.get_batch():
            try:
                mode = _permissions(permissions.evaluate(flowfile)) if permissions.is_set else None
                started = time.monotonic()
                written = placer.put(flowfile, directory.evaluate(flowfile), mode)
            except Refused as refused:
                reason = str(refused)
            except (OSError, ValueError, ContentRepositoryError) as err:
                reason = f"{type(err).__name__}: {err}"
            else:
                if written is not None:
                    session.provenance.send(flowfile, _uri(written),
                                            duration=int((time.monotonic() - started) * 1000))
                if flowfile.attributes.get(self.REASON) is not None:
                    flowfile = session.remove_attribute(flowfile, self.REASON)
                session.transfer(flowfile, SUCCESS)
                continue
            log.warning("%s: %s not written: %s", context.name, flowfile.uuid, reason)
            flowfile = session.put_attribute(flowfile, self.REASON, reason)
            session.transfer(session.penalize(flowfile), FAILURE)

    def placer(self, context: ProcessContext, session) -> "_Placer":
        """What places one trigger's files (``put``: the path written, or None), with this
        processor's settings; a subclass may wrap it (the crash tests log each file placed)."""
        return _Placer(session, strategy=context.property("Conflict Resolution Strategy").evaluate(),
                       create=context.property("Create Missing Directories").as_bool(),
                       base=context.property("Base Directory").evaluate(),
                       sync=bool(getattr(session.backend, "always_sync", False)))


class _Placer:
    """Places FlowFiles' contents as files, with one trigger's PutFile settings."""

    def __init__(self, session, *, strategy: str, create: bool, base: str | None, sync: bool):
        self.session, self.strategy, self.create, self.base, self.sync = session, strategy, create, base, sync

    def put(self, flowfile: FlowFile, directory: str, mode: int | None) -> str | None:
        """Write the file; its path, or None when an existing file was left alone ("ignore")."""
        parts = name_parts(flowfile.attributes.get("filename"))
        if not directory:
            raise Refused("the Directory property evaluated to an empty path")
        try:
            fd, root = self._open_directory(directory)
            fd, real = walk(fd, root, parts[:-1], root, self.create)
        except FileNotFoundError as err:
            unset = "" if self.create else " (Create Missing Directories is false)"
            raise Refused(f"directory {err.filename or directory!r} does not exist{unset}") from None
        try:
            return self._write(flowfile, fd, real, parts[-1], root, mode)
        finally:
            os.close(fd)

    def _open_directory(self, directory: str) -> tuple[int, str]:
        """Directory opened (created first if asked): its descriptor and resolved path. With a
        Base Directory, only beneath it, entered from it."""
        if self.base is None:
            if self.create:
                os.makedirs(directory, exist_ok=True)
            root = os.path.realpath(directory)
            return os.open(root, DIR_FLAGS), root
        resolved, real_base = resolve_beneath(directory, self.base, "Directory")
        if self.create:
            os.makedirs(real_base, exist_ok=True)
        return open_beneath(real_base, relative_parts(resolved, real_base), self.create)

    @staticmethod
    def _existing(dir_fd: int, real: str, name: str, root: str) -> bool:
        """Whether ``name`` exists in the directory (refusing links that lead outside ``root``)."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(os.path.join(real, name))
            if not inside(target, root):
                raise Refused(f"{os.path.join(real, name)!r} is a symbolic link to {target!r}, "
                              f"outside the target directory")
        elif stat.S_ISDIR(st.st_mode):
            raise Refused(f"{os.path.join(real, name)!r} is a directory")
        return True

    def _conflict(self, flowfile: FlowFile, dir_fd: int, path: str, name: str) -> str | None:
        """``name`` exists, under ``ignore`` or ``fail``: ``path`` when it holds exactly this
        content (this FlowFile's own earlier write, whose commit failed), else None to leave it
        ("ignore") or ``Refused`` ("fail")."""
        if self._holds(flowfile, dir_fd, name):
            return path
        if self.strategy == "ignore":
            return None
        raise Refused(f"{path!r} exists (Conflict Resolution Strategy is fail)")

    def _holds(self, flowfile: FlowFile, dir_fd: int, name: str) -> bool:
        """Whether the regular file ``name`` has the FlowFile's size and bytes (read a chunk at
        a time; opened without blocking, so a FIFO there is no match rather than a hang)."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return False
        with os.fdopen(fd, "rb") as existing:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != flowfile.size:
                return False
            with self.session.read(flowfile) as content:
                while chunk := content.read(CHUNK):
                    if existing.read(len(chunk)) != chunk:
                        return False
            return existing.read(1) == b""

    def _write(self, flowfile: FlowFile, dir_fd: int, real: str, name: str, root: str,
               mode: int | None) -> str | None:
        path = os.path.join(real, name)
        if self._existing(dir_fd, real, name, root) and self.strategy != "replace":
            return self._conflict(flowfile, dir_fd, path, name)
        temp = f".{name}.{uuid_module.uuid4().hex[:16]}.partial"
        if len(temp.encode()) > 255:
            temp = f".putfile.{uuid_module.uuid4().hex}.partial"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=dir_fd)
        placed = False
        try:
            self._fill(flowfile, fd, mode)
            if self.strategy == "replace":
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                placed = True
            else:
                # no-clobber: link() fails if the name appeared since the check above
                try:
                    os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                except FileExistsError:
                    return self._conflict(flowfile, dir_fd, path, name)
                except OSError as err:
                    if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
                        raise
                    if os.path.lexists(path):  # no hard links on this file system: check, then rename
                        return self._conflict(flowfile, dir_fd, path, name)
                    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    placed = True
            if self.sync:
                os.fsync(dir_fd)
            return path
        finally:
            if not placed:  # the temporary file (after a link, the name holds the content)
                try:
                    os.unlink(temp, dir_fd=dir_fd)
                except FileNotFoundError:
                    pass

    def _fill(self, flowfile: FlowFile, fd: int, mode: int | None) -> None:
        """Stream the content into the new file ``fd`` and close it (its mode set, synced when asked)."""
        try:
            with self.session.read(flowfile) as source:
                while chunk := source.read(CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
            if mode is not None:
                os.fchmod(fd, mode)
            if self.sync:
                os.fsync(fd)
        finally:
            os.close(fd)
