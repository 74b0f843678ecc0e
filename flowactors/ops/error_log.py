"""The error log of a flow's runs: every processor error a run saw, in full, in
``<repository>/errors.jsonl`` (format: docs/formats/error-log.md).

The live view shows an error as one line; this keeps its whole text and traceback, one command
away (``flowactors errors --repository R``). A run records what its status looks show: the
processors keep their last few errors, so errors that come faster than the run looks are counted
(the processor's ``errors``) but not all kept.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

FILE_NAME = "errors.jsonl"
VERSION = 1
#: the fields of a version-1 entry a reader needs (docs/formats/error-log.md)
FIELDS = ("version", "at", "processor", "where", "error")
#: the fields that may be left out or null, else text
OPTIONAL_TEXTS = ("flow", "traceback", "node")
#: past this size the log is moved to ``errors.jsonl.1`` (replacing an older one) and started anew
MAX_BYTES = 16 * 1024 * 1024


class ErrorLog:
    """Appends the errors new in each status of a run to the repository's error log."""

    def __init__(self, repository: str | Path) -> None:
        self.path = Path(repository) / FILE_NAME
        self._seen: dict[str, float] = {}  # processor -> time of the newest error recorded
        self._failed = False

    def record(self, status: dict) -> int:
        """Append the errors in ``status`` not recorded yet; how many were new. The log serves
        the user, never the flow: a write that fails (a full disk) is said once on stderr and
        the run goes on."""
        new = []
        for p in status.get("processors", []):
            newest = self._seen.get(p["name"], 0.0)
            for error in p.get("recent_errors", []):
                if error["at"] > newest:
                    new.append({"version": VERSION, "at": error["at"], "flow": status.get("flow"),
                                "processor": p["name"], "where": error["where"], "error": error["error"],
                                "traceback": error.get("traceback"), "node": error.get("node")})
                    self._seen[p["name"]] = max(self._seen.get(p["name"], 0.0), error["at"])
        if new and self.path.parent.is_dir():
            try:
                self._append(sorted(new, key=lambda e: e["at"]))
            except OSError as err:
                if not self._failed:
                    print(f"flowactors: warning: the errors of this run are not kept in {self.path}: {err}",
                          file=sys.stderr)
                self._failed = True
        return len(new)

    def _append(self, entries: list[dict]) -> None:
        """The entries as whole lines in one ``write``; after a line a crash cut short, a new line
        first, so that line alone is lost."""
        if self.path.exists() and self.path.stat().st_size > MAX_BYTES:
            self.path.replace(self.path.with_name(FILE_NAME + ".1"))
        data = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries).encode()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            os.write(fd, data)
        finally:
            os.close(fd)


class ErrorLogError(ValueError):
    """The error log holds a line of another version; the message names the file and line."""


def read_errors(repository: str | Path) -> tuple[list[dict], list[int]]:
    """Every error in the repository's error log, oldest first, and the numbers of the lines
    that could not be read (cut short by a crash, or damaged). A line of another version is
    ``ErrorLogError``."""
    path = Path(repository) / FILE_NAME
    if not path.exists():
        return [], []
    entries, unreadable = [], []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            entry = None
        if isinstance(entry, dict) and entry.get("version") not in (None, VERSION):
            raise ErrorLogError(f"{path}, line {number}: an error log entry of version {entry['version']!r}; "
                                f"this flowactors reads version {VERSION} (docs/formats/error-log.md)")
        if _readable(entry):
            entries.append(entry)
        elif line.strip():
            unreadable.append(number)
    return entries, unreadable


def _readable(entry: object) -> bool:
    """Whether a line's JSON is an entry of the documented types: ``at`` a time a calendar
    holds (not NaN, infinite or past year 9999), the texts text, the optional ones text or null."""
    if not (isinstance(entry, dict) and all(k in entry for k in FIELDS)
            and all(isinstance(entry[k], str) for k in ("processor", "where", "error"))
            and all(isinstance(entry.get(k), (str, type(None))) for k in OPTIONAL_TEXTS)):
        return False
    at = entry["at"]
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return False
    try:
        datetime.fromtimestamp(at, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return False
    return True
