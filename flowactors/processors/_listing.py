"""Listing a directory for ListFile and GetFile: their shared properties, the filters read from
them (``Lister``), one listed file with the attributes NiFi gives it (``Entry``), and the two
warnings a listing gives once per run (a name that is not UTF-8, a file taken just after it was
modified)."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import re
import stat
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator, Sequence

from flowactors.processors._common import NIFI_TIME_FORMAT, REGEX_VALIDATOR, boolean_property, permission_text
from flowactors.sdk.processor import ProcessContext, PropertyDescriptor, validators

log = logging.getLogger(__name__)

#: seconds: a file modified more recently than this when it is taken may still be being written
#: (the warning of ``Lister.warn_if_recent``)
RECENTLY_MODIFIED = 1.0


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


def storable(path: str) -> bool:
    """Whether a path (as the OS gave it, undecodable bytes as surrogates) can be an attribute."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Entry:
    """One file a listing found."""

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


INPUT_DIRECTORY = PropertyDescriptor("Input Directory", "The directory to take files from", required=True,
                                     validator=validators.NON_EMPTY)
RECURSE = boolean_property("Recurse Subdirectories", True, "Whether to take files from subdirectories too")
FILE_FILTER = PropertyDescriptor("File Filter", "Only files whose whole name matches this regular expression",
                                 required=True, default=r"[^\.].*", validator=REGEX_VALIDATOR)
PATH_FILTER = PropertyDescriptor("Path Filter", "With recursion, only files whose directory, relative to the "
                                 "input directory, matches this regular expression", validator=REGEX_VALIDATOR)
MIN_AGE = PropertyDescriptor("Minimum File Age", "Files modified more recently than this are left alone "
                             "(so that files still being written are not taken; 0 sec, NiFi's default, takes "
                             "them as they are, and a warning says so once per run unless this is set)",
                             required=True, default="0 sec", validator=validators.DURATION)
MAX_AGE = PropertyDescriptor("Maximum File Age", "Files modified longer ago than this are left alone",
                             validator=validators.DURATION)
MIN_SIZE = PropertyDescriptor("Minimum File Size", "Smaller files are left alone", required=True,
                              default="0 B", validator=validators.DATA_SIZE)
MAX_SIZE = PropertyDescriptor("Maximum File Size", "Larger files are left alone", validator=validators.DATA_SIZE)
IGNORE_HIDDEN = boolean_property("Ignore Hidden Files", True,
                                 "Whether to leave alone files and directories whose name starts with '.'")


class Lister:
    """The filters ListFile and GetFile share, read from the context once when scheduled; one
    Lister lives for one run of the processor (scheduled to stopped), and so do its warnings'
    memories: each file whose name is not UTF-8 is warned about once per run, and a file taken
    just after it was modified once per run (``warn_if_recent``)."""

    def __init__(self, context: ProcessContext, taken_too_early: str):
        """``taken_too_early``: what happens, for this processor, to a file taken while it is
        still being written (the warning's words)."""
        self.name = f"{context.processor_type} '{context.name}'"
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
        #: the warning about files taken too early is due: the user chose no minimum age
        self._recent_warning_due = MIN_AGE.name not in context.values
        self._taken_too_early = taken_too_early
        self._not_utf8_warned: set[str] = set()

    def owns(self, path: str) -> bool:
        """Whether this task lists ``path`` (with several concurrent tasks, by a hash of it)."""
        return self.tasks == 1 or zlib.crc32(path.encode()) % self.tasks == self.instance

    def accepts(self, st: os.stat_result, now: float) -> bool:
        """Whether a file of this age and size passes the age and size filters."""
        age = now - st.st_mtime
        if age < self.min_age or (self.max_age is not None and age > self.max_age):
            return False
        return self.min_size <= st.st_size and (self.max_size is None or st.st_size <= self.max_size)

    def refresh(self, entry: Entry) -> Entry | None:
        """The entry with a fresh stat, or None if the file is gone or no longer passes the filters."""
        try:
            st = os.stat(entry.path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or not self.accepts(st, time.time()):
            return None
        return Entry(entry.path, entry.relative_dir, st)

    def warn_if_recent(self, taken: Sequence[Entry]) -> None:
        """Warn, once per run and only when the user left Minimum File Age unset, that a file was
        taken less than ``RECENTLY_MODIFIED`` seconds after it was last modified: it may still be
        being written, and NiFi's default age (0 sec) takes it as it is so far."""
        if not self._recent_warning_due or not taken:
            return
        now = time.time()
        recent = next((e for e in taken if now - e.stat.st_mtime < RECENTLY_MODIFIED), None)
        if recent is None:
            return
        self._recent_warning_due = False
        log.warning("%s: took %s %.2f s after it was last modified; with 'Minimum File Age' unset (0 sec, NiFi's "
                    "default) a file still being written is taken as it is so far, %s. If writers write files in "
                    "place, set 'Minimum File Age' longer than they pause (e.g. '10 sec'); if they write elsewhere "
                    "and move files in whole, set it to '0 sec' to say so. (Said once per run.)",
                    self.name, recent.path, max(0.0, now - recent.stat.st_mtime), self._taken_too_early)

    def entries(self) -> Iterator[Entry]:
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
                log.warning("%s: cannot list %s: %s", self.name, directory, err)
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
                if not storable(child.path):
                    self._warn_not_utf8(child.path)
                    continue
                if not self.file_filter.fullmatch(child.name):
                    continue
                if self.path_filter is not None and relative and not self.path_filter.fullmatch(relative):
                    continue
                if not self.accepts(st, now):
                    continue
                if not self.owns(child.path):
                    continue
                yield Entry(child.path, relative, st)

    def _warn_not_utf8(self, path: str) -> None:
        """Say once per run, for each such file, that it stays where it is and why."""
        if path in self._not_utf8_warned:
            return
        self._not_utf8_warned.add(path)
        log.warning("%s: left %r where it is: its name is not valid UTF-8, which a FlowFile's attributes must be; "
                    "rename the file to take it (said once per file and run)", self.name, os.fsencode(path))
