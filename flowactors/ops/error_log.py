"""The error log of a flow's runs: every processor error a run saw, in full, in
``<repository>/errors.jsonl`` (format: docs/formats/error-log.md).

The live view shows an error as one line; this keeps its whole text and traceback, one command
away (``flowactors errors --repository R``). A run records what its status looks show: the
processors keep their last few errors, so errors that come faster than the run looks are counted
(the processor's ``errors``) but not all kept.
"""

from __future__ import annotations

import json
from pathlib import Path

FILE_NAME = "errors.jsonl"
VERSION = 1
#: past this size the log is moved to ``errors.jsonl.1`` (replacing an older one) and started anew
MAX_BYTES = 16 * 1024 * 1024


class ErrorLog:
    """Appends the errors new in each status of a run to the repository's error log."""

    def __init__(self, repository: str | Path) -> None:
        self.path = Path(repository) / FILE_NAME
        self._seen: dict[str, float] = {}  # processor -> time of the newest error recorded

    def record(self, status: dict) -> int:
        """Append the errors in ``status`` not recorded yet; how many were new."""
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
            if self.path.exists() and self.path.stat().st_size > MAX_BYTES:
                self.path.replace(self.path.with_name(FILE_NAME + ".1"))
            with open(self.path, "a", encoding="utf-8") as log:
                log.writelines(json.dumps(entry, ensure_ascii=False) + "\n" for entry in sorted(new, key=lambda e: e["at"]))
        return len(new)


def read_errors(repository: str | Path) -> list[dict]:
    """Every error in the repository's error log, oldest first (a line cut short by a crash is skipped)."""
    path = Path(repository) / FILE_NAME
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries
