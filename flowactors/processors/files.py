"""Processors that read and write local files: ListFile, FetchFile, GetFile, PutFile."""

from __future__ import annotations

import errno
import grp
import logging
import os
import pwd
import re
import stat
import time
import uuid as uuid_module
import zlib
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping

import orjson

from flowactors.sdk import ContentRepositoryError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.processors._common import CHUNK, NIFI_TIME_FORMAT, REGEX_VALIDATOR, boolean_property, permission_text
from flowactors.sdk.relationships import FAILURE, SUCCESS

log = logging.getLogger(__name__)

def _format_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime(NIFI_TIME_FORMAT)


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _uri(path: str | os.PathLike) -> str:
    return Path(os.path.abspath(path)).as_uri()


# ---------------------------------------------------------------------------------- listing
@dataclass(frozen=True)
class _Entry:
    path: str          # absolute path of the file
    relative_dir: str  # directory relative to the input directory, "" for the input directory
    stat: os.stat_result

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def attributes(self) -> dict[str, str]:
        """The attributes NiFi's ListFile / GetFile give a file."""
        st = self.stat
        return {
            "filename": self.name,
            "path": f"{self.relative_dir}/" if self.relative_dir else "./",
            "absolute.path": os.path.dirname(self.path) + "/",
            "file.size": str(st.st_size),
            "file.lastModifiedTime": _format_time(st.st_mtime),
            "file.lastAccessTime": _format_time(st.st_atime),
            "file.creationTime": _format_time(st.st_ctime),
            "file.owner": _owner(st.st_uid),
            "file.group": _group(st.st_gid),
            "file.permissions": permission_text(st.st_mode),
        }


_INPUT_DIRECTORY = PropertyDescriptor("Input Directory", "The directory to take files from", required=True,
                                      validator=validators.NON_EMPTY)
_RECURSE = boolean_property("Recurse Subdirectories", True, "Whether to take files from subdirectories too")
_FILE_FILTER = PropertyDescriptor("File Filter", "Only files whose whole name matches this regular expression",
                                  required=True, default=r"[^\.].*", validator=REGEX_VALIDATOR)
_PATH_FILTER = PropertyDescriptor("Path Filter", "With recursion, only files whose directory, relative to the "
                                  "input directory, matches this regular expression", validator=REGEX_VALIDATOR)
_MIN_AGE = PropertyDescriptor("Minimum File Age", "Files modified more recently than this are left alone "
                              "(so that files still being written are not taken)", required=True,
                              default="0 sec", validator=validators.DURATION)
_MAX_AGE = PropertyDescriptor("Maximum File Age", "Files modified longer ago than this are left alone",
                              validator=validators.DURATION)
_MIN_SIZE = PropertyDescriptor("Minimum File Size", "Smaller files are left alone", required=True,
                               default="0 B", validator=validators.DATA_SIZE)
_MAX_SIZE = PropertyDescriptor("Maximum File Size", "Larger files are left alone", validator=validators.DATA_SIZE)
_IGNORE_HIDDEN = boolean_property("Ignore Hidden Files", True,
                                  "Whether to leave alone files and directories whose name starts with '.'")


class _Lister:
    """The filters ListFile and GetFile share, read from the context once when scheduled."""

    def __init__(self, context: ProcessContext):
        self.root = os.path.abspath(context.property("Input Directory").evaluate())
        self.recurse = context.property("Recurse Subdirectories").as_bool()
        self.file_filter = re.compile(context.property("File Filter").evaluate())
        path_filter = context.property("Path Filter").evaluate()
        self.path_filter = re.compile(path_filter) if path_filter else None
        self.min_age = context.property("Minimum File Age").as_duration() or 0.0
        self.max_age = context.property("Maximum File Age").as_duration()
        self.min_size = context.property("Minimum File Size").as_data_size() or 0
        self.max_size = context.property("Maximum File Size").as_data_size()
        self.ignore_hidden = context.property("Ignore Hidden Files").as_bool()
        # with several concurrent tasks each takes the files whose path hashes to its number
        self.instance = context.instance
        self.tasks = max(1, context.concurrent_tasks)

    def owns(self, path: str) -> bool:
        """Whether this task lists ``path`` (with several concurrent tasks, by a hash of it)."""
        return self.tasks == 1 or zlib.crc32(path.encode()) % self.tasks == self.instance

    def accepts(self, st: os.stat_result, now: float) -> bool:
        """Whether a file of this age and size passes the age and size filters."""
        age = now - st.st_mtime
        if age < self.min_age or (self.max_age is not None and age > self.max_age):
            return False
        return self.min_size <= st.st_size and (self.max_size is None or st.st_size <= self.max_size)

    def refresh(self, entry: _Entry) -> _Entry | None:
        """The entry with a fresh stat, or None if the file is gone or no longer passes the filters."""
        try:
            st = os.stat(entry.path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or not self.accepts(st, time.time()):
            return None
        return _Entry(entry.path, entry.relative_dir, st)

    def entries(self) -> Iterator[_Entry]:
        """Every file under the root that passes the filters (symlinked directories are not followed)."""
        now = time.time()
        pending = [("", self.root)]
        while pending:
            relative, directory = pending.pop()
            try:
                with os.scandir(directory) as it:
                    children = list(it)
            except FileNotFoundError:
                continue
            except OSError as err:
                log.warning("cannot list %s: %s", directory, err)
                continue
            for child in children:
                if self.ignore_hidden and child.name.startswith("."):
                    continue
                try:
                    if child.is_dir(follow_symlinks=False):
                        if self.recurse:
                            pending.append((f"{relative}/{child.name}" if relative else child.name, child.path))
                        continue
                    if not child.is_file():
                        continue
                    st = child.stat()
                except OSError:
                    continue  # gone meanwhile
                if not _storable(child.path):
                    log.warning("left %r where it is: its name is not valid UTF-8, which a FlowFile's "
                                "attributes must be; rename the file to take it", os.fsencode(child.path))
                    continue
                if not self.file_filter.fullmatch(child.name):
                    continue
                if self.path_filter is not None and relative and not self.path_filter.fullmatch(relative):
                    continue
                if not self.accepts(st, now):
                    continue
                if not self.owns(child.path):
                    continue
                yield _Entry(child.path, relative, st)


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
    """

    description = "Lists files in a directory (one content-less FlowFile per new file)"
    input_required = False
    ENTITIES, TIMESTAMPS = "Tracking Entities", "Tracking Timestamps"
    properties = (_INPUT_DIRECTORY, _RECURSE, _FILE_FILTER, _PATH_FILTER, _MIN_AGE, _MAX_AGE, _MIN_SIZE,
                  _MAX_SIZE, _IGNORE_HIDDEN,
                  PropertyDescriptor("Listing Strategy", "How the files already listed are remembered",
                                     required=True, default=ENTITIES, allowable_values=(ENTITIES, TIMESTAMPS)))
    relationships = (SUCCESS,)
    #: state keys: the newest modification time listed (both strategies), the files listed at it
    #: (Tracking Timestamps); under Tracking Entities every other key is a listed file's path
    TIMESTAMP, IDS = "listing.timestamp", "listing.ids"

    def on_scheduled(self, context: ProcessContext) -> None:
        self._lister = _Lister(context)
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

    def _new_by_entity(self, listed: Mapping[str, str]) -> tuple[list[_Entry], dict[str, str]]:
        """The files new or changed since listed, and (when there are some) the state to keep:
        every file of this task as it is now, the other tasks' and the strategies' keys as they are."""
        seen: dict[str, str] = {}
        new: list[_Entry] = []
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

    def _new_by_timestamp(self, listed: Mapping[str, str]) -> tuple[list[_Entry], dict[str, str]]:
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


class FetchFile(Processor):
    """Replaces each FlowFile's content with the content of a local file (streamed, never loaded).

    The file is ``File to Fetch`` (default ``${absolute.path}/${filename}``, as ListFile writes
    them). A missing file goes to not.found, an unreadable one to permission.denied, any other
    problem (e.g. a directory) to failure; all three are penalized. With Completion Strategy
    "Delete File" the file is deleted only after the session committed, so a crash in between
    leaves the file in place (at-least-once). Provenance: a FETCH event with the ``file://`` URI.
    """

    description = "Fetches the content of a local file into a FlowFile"
    properties = (
        PropertyDescriptor("File to Fetch", "The full path of the file to fetch", required=True,
                           default="${absolute.path}/${filename}", expression_language=True),
        PropertyDescriptor("Completion Strategy", "What to do with the file once fetched (and committed)",
                           required=True, default="None", allowable_values=("None", "Delete File")),
    )
    NOT_FOUND = Relationship("not.found", "The file does not exist")
    PERMISSION_DENIED = Relationship("permission.denied", "The file could not be read for lack of permission")
    relationships = (SUCCESS, NOT_FOUND, PERMISSION_DENIED, FAILURE)

    def on_trigger(self, context: ProcessContext, session) -> None:
        target = context.property("File to Fetch")
        delete = context.property("Completion Strategy").evaluate() == "Delete File"
        to_delete: list[str] = []
        for flowfile in session.get_batch():
            path = target.evaluate(flowfile)
            relationship, problem = None, None
            try:
                if not os.path.exists(path):
                    relationship, problem = self.NOT_FOUND, "no such file"
                elif not os.path.isfile(path):
                    relationship, problem = FAILURE, "not a regular file"
                elif not os.access(path, os.R_OK):
                    relationship, problem = self.PERMISSION_DENIED, "permission denied"
                else:
                    started = time.monotonic()
                    flowfile = session.import_from(path, flowfile)
                    session.provenance.fetch(flowfile, _uri(path),
                                             duration=int((time.monotonic() - started) * 1000))
            except FileNotFoundError:
                relationship, problem = self.NOT_FOUND, "no such file"
            except PermissionError:
                relationship, problem = self.PERMISSION_DENIED, "permission denied"
            except IsADirectoryError:
                relationship, problem = FAILURE, "not a regular file"
            except OSError as err:
                relationship, problem = FAILURE, str(err)
            if relationship is not None:
                log.warning("%s: cannot fetch %s for %s: %s", context.name, path, flowfile.uuid, problem)
                session.transfer(session.penalize(flowfile), relationship)
                continue
            session.transfer(flowfile, SUCCESS)
            if delete:
                to_delete.append(path)
        if to_delete:
            session.commit_async(on_success=lambda: _delete_all(to_delete, context.name))


def _delete_all(paths: list[str], name: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("%s: could not delete %s after it was committed: %s", name, path, err)


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
    event per file with its ``file://`` URI.
    """

    description = "Takes files from a local directory"
    input_required = False
    properties = (
        _INPUT_DIRECTORY, _FILE_FILTER, _PATH_FILTER,
        PropertyDescriptor("Batch Size", "The most files taken per trigger", required=True, default="10",
                           validator=validators.POSITIVE_INTEGER),
        boolean_property("Keep Source File", False, "Whether to leave the files in place (they are then "
                         "taken again on every trigger)"),
        _RECURSE, _MIN_AGE, _MAX_AGE, _MIN_SIZE, _MAX_SIZE, _IGNORE_HIDDEN,
    )
    relationships = (SUCCESS,)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._lister = _Lister(context)
        self._batch = context.property("Batch Size").as_int()
        self._keep = context.property("Keep Source File").as_bool()
        #: files listed and not yet taken, oldest first. One walk of the directory serves batch
        #: after batch until it is used up (as NiFi's GetFile keeps a file queue): listing 100,000
        #: files costs ~0.7 s, which per batch made a backlog quadratic. Each file is stat'ed again
        #: when taken. With Keep Source File every trigger lists again (it takes the same files).
        self._listed: deque[_Entry] = deque()

    def _next_entries(self) -> list[_Entry]:
        if self._keep or not self._listed:
            self._listed = deque(sorted(self._lister.entries(), key=lambda e: (e.stat.st_mtime_ns, e.path)))
        entries: list[_Entry] = []
        while self._listed and len(entries) < self._batch:
            entry = self._lister.refresh(self._listed.popleft())
            if entry is not None:
                entries.append(entry)
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
class _Refused(Exception):
    """The FlowFile cannot be written where its filename says; the message is the reason."""


def _storable(path: str) -> bool:
    """Whether a path (as the OS gave it, undecodable bytes as surrogates) can be an attribute."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _name_parts(filename: str | None) -> list[str]:
    """The path components of a filename, refusing anything that could leave the directory."""
    if not filename:
        raise _Refused("the FlowFile has no filename")
    if "\x00" in filename:
        raise _Refused("the filename contains a NUL character")
    if filename.startswith("/") or os.path.isabs(filename):
        raise _Refused(f"the filename {filename!r} is an absolute path")
    parts = [p for p in filename.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Refused(f"the filename {filename!r} has a '..' component")
    if not parts:
        raise _Refused(f"the filename {filename!r} names no file")
    return parts


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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


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
    """

    description = "Writes FlowFile contents to files in a local directory"
    properties = (
        PropertyDescriptor("Directory", "The directory to write files to", required=True,
                           expression_language=True, validator=validators.NON_EMPTY),
        PropertyDescriptor("Conflict Resolution Strategy", "What to do when a file of that name exists",
                           required=True, default="fail", allowable_values=("replace", "ignore", "fail")),
        boolean_property("Create Missing Directories", True, "Whether to create the directories that do not "
                         "exist (the target directory and subdirectories in the filename)"),
        PropertyDescriptor("Permissions", "Permissions of the written file, e.g. 644 or rw-r--r-- "
                           "(default: as the process's umask gives)", expression_language=True,
                           validator=_permissions_problem),
    )
    relationships = (SUCCESS, FAILURE)
    REASON = "putfile.failure.reason"

    def on_trigger(self, context: ProcessContext, session) -> None:
        directory = context.property("Directory")
        strategy = context.property("Conflict Resolution Strategy").evaluate()
        create = context.property("Create Missing Directories").as_bool()
        permissions = context.property("Permissions")
        sync = bool(getattr(session.backend, "always_sync", False))
        for flowfile in session.get_batch():
            try:
                mode = _permissions(permissions.evaluate(flowfile)) if permissions.is_set else None
                started = time.monotonic()
                written = self._put(session, flowfile, directory.evaluate(flowfile), strategy, create, mode, sync)
            except _Refused as refused:
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

    def _put(self, session, flowfile: FlowFile, directory: str, strategy: str, create: bool,
             mode: int | None, sync: bool) -> str | None:
        """Write the file; its path, or None when an existing file was left alone ("ignore")."""
        parts = _name_parts(flowfile.attributes.get("filename"))
        if not directory:
            raise _Refused("the Directory property evaluated to an empty path")
        if create:
            os.makedirs(directory, exist_ok=True)
        root = os.path.realpath(directory)
        fds: list[int] = []
        try:
            fds.append(os.open(root, _DIR_FLAGS))
            real = root
            for part in parts[:-1]:
                fd, real = self._enter(fds[-1], real, part, root, create)
                fds.append(fd)
            return self._write(session, flowfile, fds[-1], real, parts[-1], root, strategy, mode, sync)
        except FileNotFoundError as err:
            raise _Refused(f"directory does not exist: {err.filename or directory}") from None
        finally:
            for fd in fds:
                os.close(fd)

    @staticmethod
    def _enter(parent: int, real: str, part: str, root: str, create: bool) -> tuple[int, str]:
        """Open the subdirectory ``part`` of ``parent`` without following a link outside ``root``."""
        for _ in range(2):
            try:
                return os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent), os.path.join(real, part)
            except FileNotFoundError:
                if not create:
                    raise _Refused(f"directory {os.path.join(real, part)!r} does not exist "
                                   f"(Create Missing Directories is false)") from None
                try:
                    os.mkdir(part, 0o777, dir_fd=parent)
                except FileExistsError:
                    pass  # made by someone else meanwhile: open it
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(part, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise _Refused(f"{os.path.join(real, part)!r} is not a directory") from None
                target = os.path.realpath(os.path.join(real, part))
                if not _inside(target, root):
                    raise _Refused(f"{os.path.join(real, part)!r} is a symbolic link to {target!r}, "
                                   f"outside the target directory") from None
                if not os.path.isdir(target):
                    raise _Refused(f"{os.path.join(real, part)!r} is not a directory") from None
                return os.open(target, _DIR_FLAGS), target
        raise _Refused(f"could not create directory {os.path.join(real, part)!r}")

    @staticmethod
    def _existing(dir_fd: int, real: str, name: str, root: str) -> bool:
        """Whether ``name`` exists in the directory (refusing links that lead outside ``root``)."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(os.path.join(real, name))
            if not _inside(target, root):
                raise _Refused(f"{os.path.join(real, name)!r} is a symbolic link to {target!r}, "
                               f"outside the target directory")
        elif stat.S_ISDIR(st.st_mode):
            raise _Refused(f"{os.path.join(real, name)!r} is a directory")
        return True

    def _write(self, session, flowfile: FlowFile, dir_fd: int, real: str, name: str, root: str,
               strategy: str, mode: int | None, sync: bool) -> str | None:
        path = os.path.join(real, name)
        if self._existing(dir_fd, real, name, root):
            if strategy == "ignore":
                return None
            if strategy == "fail":
                raise _Refused(f"{path!r} exists (Conflict Resolution Strategy is fail)")
        temp = f".{name}.{uuid_module.uuid4().hex[:16]}.partial"
        if len(temp.encode()) > 255:
            temp = f".putfile.{uuid_module.uuid4().hex}.partial"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=dir_fd)
        placed = False
        try:
            try:
                with session.read(flowfile) as source:
                    while chunk := source.read(CHUNK):
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
                if mode is not None:
                    os.fchmod(fd, mode)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if strategy == "replace":
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                placed = True
            else:
                # no-clobber: link() fails if the name appeared since the check above
                try:
                    os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                except FileExistsError:
                    if strategy == "ignore":
                        return None
                    raise _Refused(f"{path!r} exists (Conflict Resolution Strategy is fail)") from None
                except OSError as err:
                    if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
                        raise
                    if os.path.lexists(path):  # no hard links on this file system: check, then rename
                        if strategy == "ignore":
                            return None
                        raise _Refused(f"{path!r} exists (Conflict Resolution Strategy is fail)") from None
                    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    placed = True
            if sync:
                os.fsync(dir_fd)
            return path
        finally:
            if not placed:  # the temporary file (after a link, the name holds the content)
                try:
                    os.unlink(temp, dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
