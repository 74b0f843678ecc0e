"""Reading a stopped flow's repository: its provenance events, and the content of any past version.

``StoppedRepository`` opens the repositories of a folder no flow is running on (it holds the
repository lock, so a flow cannot start meanwhile; see ``repositories.lock``). By default it only
reads, changing nothing (the lock held shared, every repository opened read-only: unmerged
provenance journals are searched where they lie); ``writable=True`` (replay, repair) holds the
lock exclusively and lets provenance recovery merge the journals. A past
version's content is read through the event that recorded it: ``input`` is the content the
component received (the event's previous claim), ``output`` what it left (the updated claim).
The content repository keeps a claim while a FlowFile references it and then, archived, until
the archive's age-off (``archive_max_retention``, ``archive_max_usage_percent``); after that
the bytes are gone and ``ContentGoneError`` says so.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, BinaryIO

from flowactors.engine.flow_operations import missing_event_message
from flowactors.engine.errors import NoSuchEventError
from repositories.lock import RepositoryInUseError, RepositoryLock
from flowactors.sdk.settings import Settings
from repositories.content import ContentNotFoundError, FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import ContentClaim
from repositories.provenance import ProvenanceEvent, WriteAheadProvenanceRepository
from repositories.provenance.outbox import take_from_outbox

SIDES = ("input", "output")


class ContentGoneError(LookupError):
    """The content an event refers to was aged off (or the event has none on that side)."""


def event_claim(event: ProvenanceEvent, side: str) -> ContentClaim | None:
    """The event's content claim on that side; ``ContentGoneError`` when it has no such side."""
    if side not in SIDES:
        raise ValueError(f"content side must be one of {SIDES}, not {side!r}")
    if side == "input":
        if not event.previous_attributes:
            raise ContentGoneError(
                f"event {event.event_id} ({event.event_type} by {event.component_name or '?'}) has no input: "
                f"the FlowFile was created by it, not received from a connection; only its output exists")
        return event.previous_claim
    return event.updated_claim


def open_event_content(content: FileSystemContentRepository, event: ProvenanceEvent, side: str) -> BinaryIO:
    """A stream over the event's input or output content (live or archived)."""
    claim = event_claim(event, side)
    if claim is None:
        return io.BytesIO(b"")
    try:
        return content.open(claim)
    except ContentNotFoundError:
        raise ContentGoneError(
            f"the {side} content of event {event.event_id} ({_size(claim.length)} in resource claim "
            f"{claim.resource.container}/{claim.resource.section}/{claim.resource.id}) is no longer "
            f"available: it was aged off the content repository's archive (archive_max_retention, "
            f"archive_max_usage_percent) or the archive is disabled") from None


def _size(n: int) -> str:
    return f"{n} byte" + ("" if n == 1 else "s")


class StoppedRepository:
    """The repositories of a folder with no flow running, opened under the repository lock.

    ``provenance`` and ``content`` open on first use; ``flowfile`` (the write-ahead log, opened
    for writing) only for replay, which is ``writable``. Read-only unless ``writable`` (repair,
    replay): nothing in the folder is created or changed, so it works on a read-only folder, and
    two readers may share it. Close it (or use ``with``) to let a flow start again.
    """

    def __init__(self, repository: str | os.PathLike, settings: Settings | None = None, *,
                 purpose: str = "flowactors provenance", writable: bool = False):
        self.root = Path(repository)
        self.settings = settings or Settings()
        self.writable = writable
        if not (self.root / "provenance").is_dir():
            raise FileNotFoundError(
                f"no provenance repository in {self.root} (expected {self.root / 'provenance'}); "
                f"give the --repository folder a flow ran with")
        try:
            self._lock = RepositoryLock(self.root, purpose, shared=not self.writable).acquire()
        except RepositoryInUseError as err:
            raise RepositoryInUseError(f"{err}, or, while a flow runs, use its FlowController from the SDK "
                                       f"(docs/provenance.md)") from None
        self._provenance: WriteAheadProvenanceRepository | None = None
        self._content: FileSystemContentRepository | None = None
        self._flowfile: Any = None

    @property
    def provenance(self) -> WriteAheadProvenanceRepository:
        if self._provenance is None:
            self._provenance = WriteAheadProvenanceRepository.from_settings(self.root, self.settings,
                                                                  readonly=not self.writable)
        return self._provenance

    @property
    def content(self) -> FileSystemContentRepository:
        if self._content is None:
            self._content = FileSystemContentRepository.from_settings(self.root, self.settings, create=self.writable)
        return self._content

    @property
    def flowfile(self):
        """The FlowFile write-ahead log (``WriteAheadFlowFileRepository``), for replay (``writable``)."""
        if self._flowfile is None:
            if not (self.root / "flowfile" / "data.mdb").exists():
                raise FileNotFoundError(f"no FlowFile repository in {self.root} (expected {self.root / 'flowfile'})")
            self._flowfile = WriteAheadFlowFileRepository.from_settings(self.root, self.settings)
        return self._flowfile

    def take_outbox(self) -> tuple[int, list[str]]:
        """Move into provenance the events a run that did not stop cleanly left in the FlowFile
        repository's outbox (``repositories.provenance.outbox``; ``writable`` only): how many,
        and the problems of damaged entries. Nothing to take without a FlowFile repository."""
        if not (self.root / "flowfile" / "data.mdb").exists():
            return 0, []
        taken, problems = take_from_outbox(self.flowfile, self.provenance)
        self.provenance.settle()  # nothing more is on its way: no id below them is waited for
        return taken, problems

    def event(self, event_id: int) -> ProvenanceEvent:
        """The event, or ``NoSuchEventError`` saying what the repository holds."""
        event = self.provenance.get(event_id)
        if event is None:
            raise NoSuchEventError(missing_event_message(event_id, self.provenance.stats(), self.root))
        return event

    def warnings(self) -> list[str]:
        """What the reads so far could not read, one line (damaged event file blocks, named and
        counted, with the command that repairs them; ``damage_warning``); none if provenance was
        not opened or is intact."""
        warning = self._provenance.damage_warning() if self._provenance is not None else None
        return [warning] if warning else []

    def close(self) -> None:
        try:
            if self._provenance is not None:
                self._provenance.close()
            if self._flowfile is not None:
                self._flowfile.close()
        finally:
            self._provenance = self._flowfile = None
            self._lock.release()

    def __enter__(self) -> "StoppedRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
