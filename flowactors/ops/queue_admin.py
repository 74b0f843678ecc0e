"""Queue operations: list the FlowFiles waiting in a connection, and empty it (NiFi's "List queue"
and "Empty queue").

Two ways in, the same results:

* a running flow: ``FlowController.list_queue`` / ``FlowController.empty_queue``. The queue actor
  lists in the order it would deliver (swapped FlowFiles included) and hands out the FlowFiles to
  drop; the controller removes them from the write-ahead log and records a DROP event for each.
* a stopped flow's repository folder: ``list_queue`` / ``empty_queue`` here (and ``flowactors
  queue list|empty``), which read and change the write-ahead log directly, under the repository
  lock (``repositories.lock``), so they refuse while a flow runs on the folder. Listing only reads:
  it holds the lock shared and opens the log read-only, changing nothing in the folder. They list
  in the log's order (when each FlowFile entered the queue), swapped FlowFiles after the others:
  a stopped flow's prioritizers are not known here.

Emptying drops only queued FlowFiles, not those a processor is working on (as NiFi). Content is
released the normal way: each removal lowers its claim's claimant count, and the next checkpoint
hands claims nobody references to the content repository (the offline version runs that
checkpoint itself).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from flowactors.engine.flow_operations import describe, drop_events
from flowactors.engine.errors import NoSuchQueueError
from repositories.content import FileSystemContentRepository
from repositories.lock import RepositoryLock
from flowactors.sdk.settings import Settings
from repositories.flowfile import (SWAP_QUEUE_PREFIX, RepositoryCorruptError, UnsupportedFormatVersionError,
                                   WriteAheadFlowFileRepository)
from repositories.flowfile.swapfile import swap_directory
from repositories.model import FlowFile, now_millis, total_size
from repositories.provenance import WriteAheadProvenanceRepository

DEFAULT_LIMIT = 100
#: the errors that say the log itself is damaged (``flowactors status`` reports it DAMAGED)
DAMAGE = (RepositoryCorruptError, UnsupportedFormatVersionError)


# ---------------------------------------------------------------------------------- stopped flows


def stopped_status(repository: str | os.PathLike) -> dict:
    """What a stopped flow's write-ahead log holds, read-only (``flowactors status``):
    ``{"queued": {queue: count}, "swap_files": [...], "damaged": None or what is wrong}``.
    A damaged log or one of an unsupported version is reported as damaged, with the library's
    message; any other ``FlowFileRepositoryError`` (no room for the private copy a read-only open
    may need, say) says nothing about the log and is raised, ending the command."""
    try:
        with stopped_log(repository, "flowactors status", readonly=True) as wal:
            counts = wal.queue_counts()
            return {"queued": counts, "swap_files": wal.swap_files(), "damaged": verify_records(wal, counts)}
    except DAMAGE as err:
        return {"queued": {}, "swap_files": [], "damaged": str(err)}


def verify_records(wal: WriteAheadFlowFileRepository, counts: dict[str, int]) -> str | None:
    """Read every queued record, as the next start will: None if each decodes and every queue's
    count matches its records, else what is wrong (the library's message names the file); other
    errors are raised (see ``stopped_status``)."""
    found: dict[str, int] = {}
    try:
        for queue, batch in wal.recover(include_swapped=True):
            found[queue] = found.get(queue, 0) + len(batch)
    except DAMAGE as err:
        return str(err)
    wrong = {q: (counts.get(q, 0), n) for q, n in found.items() if counts.get(q, 0) != n}
    wrong.update({q: (c, 0) for q, c in counts.items() if c and q not in found})
    if wrong:
        listing = ", ".join(f"'{q}' counts {c} but holds {n}" for q, (c, n) in sorted(wrong.items()))
        return (f"queue counts do not match the records in {wal.path}: {listing}. Starting the flow "
                f"rebuilds the counts from the records")
    return None


@contextlib.contextmanager
def stopped_log(repository: str | os.PathLike, owner: str, *,
                readonly: bool = False) -> Iterator[WriteAheadFlowFileRepository]:
    """The write-ahead log of a stopped flow's repository folder, open under the repository lock
    held by ``owner``: exclusively, or for ``readonly`` shared and the log opened read-only (the
    two always go together, see ``repositories.lock``). Refuses while a flow runs there; no log
    in the folder is a ``FileNotFoundError`` (checked before the lock, which would create the folder)."""
    root = Path(repository)
    if not (root / "flowfile" / "data.mdb").exists():
        raise FileNotFoundError(f"no FlowFile repository in {root} (expected {root / 'flowfile' / 'data.mdb'}); "
                                f"give the --repository folder a flow ran with")
    with RepositoryLock(root, owner, shared=readonly):
        with WriteAheadFlowFileRepository(root / "flowfile", create=False, readonly=readonly) as wal:
            yield wal


def _swap_files(wal: WriteAheadFlowFileRepository, queue_id: str) -> list[dict]:
    return [e for e in wal.swap_files() if e["queue"] == queue_id]


def _require_queue(wal: WriteAheadFlowFileRepository, queue_id: str, root: Path) -> None:
    counts = wal.queue_counts()
    if queue_id in counts or _swap_files(wal, queue_id):
        return
    known = sorted(q for q in counts if not q.startswith(SWAP_QUEUE_PREFIX))
    known += sorted({e["queue"] for e in wal.swap_files()} - set(known))
    raise NoSuchQueueError(
        f"queue '{queue_id}' holds no FlowFiles in {root}"
        + (f"; queues with FlowFiles: {', '.join(known)}" if known else "; no queue holds any"))


def _stored(wal: WriteAheadFlowFileRepository, queue_id: str, batch: int) -> Iterator[tuple[list[FlowFile], bool]]:
    """Batches of a queue's FlowFiles in log order: in memory at the stop, then each swap file's."""
    for flowfiles in wal.iter_queue(queue_id, batch):
        yield flowfiles, False
    for entry in _swap_files(wal, queue_id):
        for flowfiles in wal.iter_queue(SWAP_QUEUE_PREFIX + entry["location"], batch):
            yield flowfiles, True


def list_queue(repository: str | os.PathLike, queue_id: str, limit: int = DEFAULT_LIMIT) -> list[dict]:
    """The first ``limit`` FlowFiles of a stopped flow's queue (see the module docstring for order)."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    root = Path(repository)
    with stopped_log(root, "flowactors queue list", readonly=True) as wal:
        _require_queue(wal, queue_id, root)
        rows: list[dict] = []
        now = now_millis()
        for flowfiles, swapped in _stored(wal, queue_id, min(limit, 10_000)):
            for f in flowfiles[: limit - len(rows)]:
                rows.append(describe(f, position=len(rows) + 1, swapped=swapped, now=now))
            if len(rows) >= limit:
                break
        return rows


def empty_queue(repository: str | os.PathLike, queue_id: str, settings: Settings | None = None, *,
                requested_by: str | None = None, batch_size: int = 10_000) -> dict:
    """Drop every FlowFile of a stopped flow's queue, swapped ones included: removed from the log
    (claimant counts lowered), a DROP event each, swap files deleted; then a checkpoint releases
    the content nobody references any more."""
    root = Path(repository)
    settings = settings or Settings()
    with stopped_log(root, "flowactors queue empty") as wal:
        provenance = None
        try:
            _require_queue(wal, queue_id, root)
            if settings.provenance_enabled:
                provenance = WriteAheadProvenanceRepository.from_settings(root, settings)
            dropped = size = 0
            swap_files = _swap_files(wal, queue_id)
            for source in [queue_id] + [SWAP_QUEUE_PREFIX + e["location"] for e in swap_files]:
                while True:  # a fresh scan each time: the batch before is gone
                    flowfiles = next(iter(wal.iter_queue(source, batch_size)), None)
                    if not flowfiles:
                        break
                    wal.commit([], [f.uuid for f in flowfiles])
                    if provenance is not None:
                        provenance.register(drop_events(flowfiles, queue_id, requested_by))
                    dropped += len(flowfiles)
                    size += total_size(flowfiles)
            for entry in swap_files:
                wal.unregister_swap_file(entry["location"])
                (swap_directory(root) / entry["location"]).unlink(missing_ok=True)
            released = wal.checkpoint()
            if released:
                FileSystemContentRepository.from_settings(root, settings).release(released)
            return {"queue": queue_id, "dropped": dropped, "bytes": size, "swap_files_removed": len(swap_files),
                    "claims_released": len(released)}
        finally:
            if provenance is not None:
                provenance.close()

