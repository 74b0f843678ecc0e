"""Errors of the FlowFile repository.

Every message names the repository directory and says what an operator can do about it, because
these errors surface at start-up, in a log, far from the code that raised them. Every error
pickles (it crosses a Ray call from the repository's actor): it is rebuilt from its message and
attributes, not from its constructor's arguments.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

#: What to do when the repository cannot be read; appended to every corruption message.
CORRUPT_ADVICE = (
    "Restore the directory from a backup, or copy the FlowFiles it can still read into a new "
    "repository folder with `flowactors repository salvage --repository <folder> --to <new folder>` "
    "and run the flow there, or move it aside (e.g. rename it to 'flowfile.corrupt') so that "
    "flowactors starts with an empty FlowFile repository (the FlowFiles it held are then lost; "
    "their content stays in the content repository until orphan cleanup)."
)


class FlowFileRepositoryError(Exception):
    """Any failure of the FlowFile repository (the base class of the others)."""

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        super().__init__(message)

    def __reduce__(self):
        return _rebuild, (type(self), str(self), self.__dict__)


def _rebuild(cls: type[FlowFileRepositoryError], message: str, attributes: dict) -> FlowFileRepositoryError:
    """An unpickled error: its class, message and attributes, whatever its constructor takes."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(attributes)
    return error


class RepositoryCorruptError(FlowFileRepositoryError):
    """The repository's files are damaged: unreadable, truncated, or inconsistent."""

    def __init__(self, path: str | Path, problem: str, advice: str = CORRUPT_ADVICE) -> None:
        self.problem = problem
        super().__init__(f"FlowFile repository at {path} is corrupt: {problem}. {advice}", path)


def log_damaged_count(path: str | Path, problem: str) -> None:
    """Report a claimant or queue count that would have gone below 0: the counts no longer match
    the FlowFile records (NiFi's NIFI-9993 / NIFI-6110 class of bug). The change that found it is
    already decided, so it is logged, not raised; the caller keeps the claim referenced."""
    log.error("FlowFile repository at %s: %s. The counts no longer match the FlowFile records; the next "
              "start-up recomputes every count from them (rebuild_claimant_counts). If this happens "
              "again, report it as a bug.", path, problem)


class UnsupportedFormatVersionError(FlowFileRepositoryError):
    """The repository (or one record) was written in a format version this release cannot read."""

    def __init__(self, path: str | Path, found: int, supported: int, what: str = "repository") -> None:
        self.found = found
        self.supported = supported
        if found > supported:
            advice = (
                f"It was written by a newer flowactors; upgrade flowactors to a release that reads "
                f"format version {found}, or move the directory aside to start empty."
            )
        else:
            advice = (
                "This release has no reader for that older version; open it with the release that "
                "wrote it, or move the directory aside to start empty."
            )
        super().__init__(
            f"FlowFile repository at {path}: {what} has format version {found}, this flowactors "
            f"reads version {supported}. {advice}",
            path,
        )


class RunReplacedError(FlowFileRepositoryError):
    """A commit made for a run of the flow that a newer start replaced (``begin_run``): refused,
    nothing written. Raised in a process the flow no longer owns (an executor of a controller
    that died, not yet killed), so that it cannot change the log the new run recovered from."""

    def __init__(self, path, run: int, current: int):
        super().__init__(f"FlowFile repository at {path}: this commit belongs to run {run} of the flow, "
                         f"but run {current} has started since; refused (nothing written)", path)
        self.run, self.current = run, current


class StateConflictError(FlowFileRepositoryError):
    """A commit that replaces a processor's state at a version that is no longer the stored one
    (another task of the processor changed it first): refused, nothing written."""

    def __init__(self, path, component_id: str, expected: int, current: int):
        super().__init__(f"the state of {component_id} is at version {current}, not {expected} as this session "
                         f"read it (another task changed it); the commit was refused, nothing written", path)
        self.component_id, self.expected, self.current = component_id, expected, current
