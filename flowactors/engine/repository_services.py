"""The services that own a flow's repositories on a node. Each wraps a plain library from
``repositories``; the Ray engine runs each in an actor of its own
(``flowactors.engine.actors.repository_actors``), the in-process engine behind a ``ThreadedLink``
(one call at a time, as on an actor, except provenance's few).

Opening happens in ``open()`` rather than the constructor so a corrupt or too-new repository comes
back to the caller as the library's own exception (with the path and what to do), not as a dead actor.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Protocol, Sequence

from flowactors.engine import gc_policy
from flowactors.engine.metrics import ContentRepositoryMetrics, FlowFileRepositoryMetrics, ProvenanceMetrics
from flowactors.engine.periodic import Periodic
from flowactors.sdk.settings import Settings
from repositories.content import ContentRepository, FileSystemContentRepository
from repositories.flowfile.journal import Journal
from repositories.flowfile import (SWAP_QUEUE_PREFIX, FlowFileRepository, FlowFileRepositoryError,
                                   WriteAheadFlowFileRepository)
from repositories.flowfile.protocol import SwapFileEntry
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap
from repositories.provenance import ProvenanceRepository, WriteAheadProvenanceRepository
from repositories.provenance.event import EncodedBatch, ProvenanceEvent
from repositories.provenance.outbox import take_from_outbox

log = logging.getLogger(__name__)

#: seconds between two looks of the FlowFile repository's service at the log's journal
#: (``FlowFileRepositoryService._look_at_journal``): a look is one read transaction's ``stat``
JOURNAL_LOOK_INTERVAL = 0.05


def renamed_queue_moves(renames: dict[str, str], recovery: dict) -> dict[str, str]:
    """The queue ids ``open`` found holding FlowFiles or swap files (``recovery``: its answer) that
    ``renames`` renamed (a former id, or one of its load-balance partitions ``<id>@<node>``), each
    with its new id: what ``FlowFileRepositoryService.rename_queues`` is to move, usually nothing."""
    held = set(recovery["queues"]) | {e["queue"] for e in recovery["swap_files"]}
    return {queue: current + queue[len(former):] for former, current in renames.items()
            for queue in sorted(q for q in held if q == former or q.startswith(former + "@"))}


class Service:
    """What every repository service answers the controller's watch (``FlowController.watch``)."""

    def __init__(self) -> None:
        gc_policy.tune_own_process()
        #: a new value each time the service is built: Ray rebuilds a killed actor with the same
        #: arguments, and the controller tells a restart from a survivor by it
        self.incarnation = uuid.uuid4().hex

    def health(self) -> dict:
        return {"incarnation": self.incarnation, "lost": []}


class OpenedRepository(Protocol):
    """A repository service that opened its repository (the FlowFile and provenance services): a
    start that fails part-way closes each one it opened, the newest first."""

    def close(self) -> None:
        """Close the repository (checkpoint, rollover: each service's own)."""


class FlowFileRepositoryService(Service):
    """Owns ``<repository>/flowfile``: opening and recovery, checkpoints, the swap registry, paging.
    The executors commit sessions themselves, in their own processes (``LogWriter``); ``commit``
    here serves the controller (emptying a queue) and the test runner."""

    def __init__(self, root: str, settings: Settings, flow: str = ""):
        super().__init__()
        self.root = Path(root)
        self.settings = settings
        self.repo: FlowFileRepository | None = None  # the log, between ``open`` and ``close``
        self.commits = 0
        self.last_checkpoint = {"at": 0.0, "seconds": 0.0, "released": 0}
        self.metrics = FlowFileRepositoryMetrics(flow)
        #: applies the log's journal so that the executors' commits need not (``_look_at_journal``)
        self._applier = Periodic("flowfile-journal", JOURNAL_LOOK_INTERVAL, self._look_at_journal,
                                 self._journal_not_applied, each_error_once=True,
                                 retry_after=Journal.FOLD_RETRY_SECONDS)

    def open(self) -> dict:
        """Open the log and begin a new run of the flow over it (commits of an older run are
        refused from now on: ``begin_run``), rebuild claimant counts, and delete content that was
        never committed. ``run`` in the answer is what the executors commit under."""
        repo = self.repo = WriteAheadFlowFileRepository.from_settings(self.root, self.settings)
        rebuilt = repo.rebuild_claimant_counts()  # reads every record: a damaged file says so here
        run = repo.begin_run()  # before the orphan cleanup: no older run commits what it deletes
        orphans = self.remove_orphans()
        self._applier.start()
        return {"queues": repo.queue_counts(), "claimant_counts": rebuilt, "orphans_removed": orphans,
                "swap_files": repo.swap_files(), "run": run}

    @property
    def opened(self) -> FlowFileRepository:
        """The log ``open`` opened: the controller calls nothing else before ``open`` or after ``close``."""
        assert self.repo is not None, "the FlowFile repository service is not open"
        return self.repo

    def _look_at_journal(self) -> None:
        """Every ``JOURNAL_LOOK_INTERVAL`` seconds: apply the log's journal, a part after another
        while it is long (``apply_if_long``), so that the executors' commits need not (they set
        ``applied_elsewhere`` and apply it only past twice the bounds, should this fall behind or
        stop)."""
        while self.opened.apply_if_long() and not self._applier.stopping:
            pass

    def _journal_not_applied(self, err: Exception) -> None:
        """Tried again after ``FOLD_RETRY_SECONDS``, as a commit's would be; the commits are decided
        already and wait in the journal."""
        log.error("the FlowFile repository could not apply its journal (tried again every %g s; "
                  "the commits stay in the journal until then): %s", self._applier.retry_after, err)

    def rename_queues(self, moves: dict[str, str]) -> dict:
        """Move what the log holds under each queue id of ``moves`` to its new id (``renamed_queue_moves``):
        FlowFiles an older version queued under a connection's former default name
        (``Flow.renamed_queues``) are recovered, not refused. Returns ``renamed_queues`` (each
        former queue id with how many records moved) and ``open``'s ``queues`` and ``swap_files`` afresh."""
        repo = self.opened
        moved = {queue: repo.rename_queue(queue, new) for queue, new in moves.items()}
        return {"renamed_queues": moved, "queues": repo.queue_counts(), "swap_files": repo.swap_files()}

    def remove_orphans(self) -> int:
        """Delete claim files no FlowFile in the log references (content written by sessions that
        never committed); only while no session runs (start-up, a repair)."""
        return FileSystemContentRepository.from_settings(self.root, self.settings).remove_orphans(self.opened.is_referenced)

    def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int
             ) -> tuple[list[FlowFile], bytes | None]:
        """A page of a queue's records in FIFO order (a queue paging its FlowFiles in, a restore)."""
        return self.opened.page(queue, start, stop, count)

    def last_key(self, queue: str) -> bytes | None:
        return self.opened.last_key(queue)

    def reserve_ids(self, count: int) -> int:
        return self.opened.reserve_ids(count)

    def commit(self, updates: Sequence[QueuedFlowFile], removals: Sequence[str],
               new_claims: Sequence[ResourceClaim] = (), events: int = 0, state: StateChange | None = None
               ) -> int | None:
        """One commit; the first of ``events`` provenance event ids reserved with it, if any."""
        first_event = self.opened.commit(updates, removals, new_claims, events, state=state)
        self.commits += 1
        self.metrics.committed()
        return first_event

    def reserve_event_ids(self, count: int) -> int:
        return self.opened.reserve_event_ids(count)

    def get_state(self, component_id: str) -> StateMap:
        return self.opened.get_state(component_id)

    def raise_event_ids(self, at_least: int) -> int:
        return self.opened.raise_event_ids(at_least)

    def checkpoint(self) -> list[ResourceClaim]:
        started = time.monotonic()
        released = self.opened.checkpoint()
        self.last_checkpoint = {"at": time.time(), "seconds": time.monotonic() - started,
                                "released": len(released)}
        self.metrics.checkpointed(self.last_checkpoint["seconds"])
        return released

    def register_swap_file(self, queue: str, location: str, count: int, size: int,
                           flowfiles: Sequence[FlowFile]) -> None:
        """A queue wrote these FlowFiles to a swap file: their records move to it in one transaction."""
        self.opened.register_swap_file(queue, location, count, size, flowfiles=flowfiles)

    def unregister_swap_file(self, location: str) -> int:
        return self.opened.unregister_swap_file(location)

    def swap_files(self) -> list[SwapFileEntry]:
        return self.opened.swap_files()

    def swapped_flowfiles(self, location: str) -> list[FlowFile]:
        """The records still under ``swap:<location>`` (a swap file that cannot be read)."""
        return [f for batch in self.opened.iter_queue(SWAP_QUEUE_PREFIX + location) for f in batch]

    def queue_sizes(self) -> dict[str, tuple[int, int]]:
        return self.opened.queue_sizes()

    def queue_counts(self) -> dict[str, int]:
        return self.opened.queue_counts()

    def claimant_count(self, resource: ResourceClaim) -> int:
        return self.opened.claimant_count(resource)

    def stats(self) -> dict:
        return {**self.opened.stats(), "commits_via_actor": self.commits, "last_checkpoint": self.last_checkpoint}

    def close(self) -> None:
        self._applier.stop()
        self.metrics.flush()
        if self.repo is not None:
            self.repo.checkpoint()
            self.repo.close()
            self.repo = None


class ContentRepositoryService(Service):
    """Releases claims after checkpoints, ages off the archive and reports usage.

    Processors read and write claim files themselves; this service only manages their lifecycle.
    """

    def __init__(self, root: str, settings: Settings, flow: str = ""):
        super().__init__()
        self.repo: ContentRepository = FileSystemContentRepository.from_settings(root, settings)
        self.released = 0
        self.last_age_off: dict = {}
        self.metrics = ContentRepositoryMetrics(flow)
        self.metrics.maybe_publish(self.repo.usage, force=True)

    def release(self, resources: Sequence[ResourceClaim]) -> int:
        count = self.repo.release(resources)
        self.released += count
        self.metrics.maybe_publish(self.repo.usage)
        return count

    def age_off_archive(self) -> dict:
        self.last_age_off = self.repo.age_off_archive()
        self.metrics.maybe_publish(self.repo.usage)
        return self.last_age_off

    def usage(self) -> dict:
        return {"usage": self.repo.usage(), "released": self.released, "last_age_off": self.last_age_off}


PROVENANCE_CONCURRENCY = 4
#: seconds between two looks at the log's provenance outbox while the service follows it
OUTBOX_LOOK_INTERVAL = 0.05


class ProvenanceRepositoryService(Service):
    """Appends each commit's events to a journal; rollover, indexing and age-off run on timers.

    The commits' events come from the write-ahead log's provenance outbox (``follow_log``: each
    session's transaction keeps its events there, ``LogWriter``), taken every
    ``OUTBOX_LOOK_INTERVAL`` seconds on a thread of this service and before every read, so a
    search sees every event of the commits made before it. An entry leaves the outbox only once
    the journal has it (fsynced first with ``always_sync``); one taken twice (this process died
    between the two) is dropped the second time.

    Threaded (``PROVENANCE_CONCURRENCY`` calls at once): a rollover (merge, compress, index) runs while ``register`` keeps appending, so
    provenance never stalls a commit (NiFi bug NIFI-7646); the library locks what must not overlap.
    """

    def __init__(self, root: str, settings: Settings, flow: str = ""):
        super().__init__()
        self.root = root
        self.settings = settings
        self.repo: ProvenanceRepository | None = None  # between ``open`` and ``close``
        self.metrics = ProvenanceMetrics(flow)
        self._log: FlowFileRepository | None = None  # the outbox's log (``follow_log``)
        self._owns_log = False  # opened here, not shared with a FlowFile repository service
        self._taking = threading.Lock()
        #: takes the outbox's events every ``OUTBOX_LOOK_INTERVAL`` seconds (``follow_log``)
        self._follower = Periodic("provenance-outbox", OUTBOX_LOOK_INTERVAL, self.take_events,
                                  self._events_not_taken, each_error_once=True)

    def open(self) -> dict:
        """Open (recovering journals) and report: the stats, and what recovery could not read."""
        repo = WriteAheadProvenanceRepository.from_settings(self.root, self.settings)
        self.repo = repo
        recovery = repo.recovery
        return {**repo.stats(), "events_lost": recovery.get("events_lost", 0),
                "problems": list(recovery.get("problems", []))}

    @property
    def opened(self) -> ProvenanceRepository:
        """The repository ``open`` opened: the controller calls nothing else before ``open`` or after ``close``."""
        assert self.repo is not None, "the provenance repository service is not open"
        return self.repo

    def register_numbered(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> list[int]:
        """Events encoded as batches, their ids reserved in the log: the commit path's way in, no
        decoding here; the positions of those that came too late (``register_numbered_now``)."""
        late = self.opened.register_numbered(numbered)
        self.metrics.registered(sum(batch.count for _, batch in numbered))
        return late

    def follow_log(self) -> dict:
        """Take the events waiting in the FlowFile repository's outbox now, then every
        ``OUTBOX_LOOK_INTERVAL`` seconds on a thread (once: calling it again only takes what is
        waiting). Called by a flow's start, once the log is open. Returns what was taken now:
        ``taken`` events, and the ``problems`` of damaged entries (the start reports them)."""
        if self._log is None or self._log.closed:
            path = Path(self.root) / "flowfile"
            self._owns_log = WriteAheadFlowFileRepository.open_here(path) is None
            self._log = WriteAheadFlowFileRepository.from_settings(self.root, self.settings, shared=True)
        taken, problems = self.take_events()
        self._follower.start()
        return {"taken": taken, "problems": problems}

    @staticmethod
    def _events_not_taken(err: Exception) -> None:
        """The entries stay in the outbox: taken at the next look."""
        log.error("provenance could not take the commits' events from the log (tried again every %g s; "
                  "they stay in the log until then): %s", OUTBOX_LOOK_INTERVAL, err)

    def take_events(self) -> tuple[int, list[str]]:
        """Register the outbox's events in id order, then remove them from it (``take_from_outbox``:
        how many, and the problems of damaged entries, which it logs)."""
        with self._taking:
            if self._log is None or self.repo is None:
                return 0, []
            return take_from_outbox(self._log, self.repo, self.register_numbered, sync=self.settings.always_sync)

    def _catch_up(self) -> None:
        """Before a read: the events of every commit made so far (if the log is still open)."""
        if self._log is not None and not self._log.closed:
            try:
                self.take_events()
            except FlowFileRepositoryError as err:  # read what is here; the follower says why
                log.debug("provenance read without catching up: %s", err)

    def _stop_follow(self) -> None:
        """Stop the thread and take what is left, while the log is still open."""
        self._follower.stop()
        self._catch_up()
        if self._log is not None and self._owns_log:
            self._log.close()
        self._log = None

    def continue_from(self, next_id: int) -> None:
        self.opened.continue_from(next_id)

    def settle(self) -> None:
        self._catch_up()
        self.opened.settle()

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        return self.opened.wait_visible(event_id, timeout)

    def maybe_rollover(self) -> dict | None:
        repo = self.opened
        done = repo.maybe_rollover()
        self.metrics.maybe_publish_lag(repo.stats, force=done is not None)
        return done

    def rollover(self) -> dict:
        repo = self.opened
        done = repo.rollover()
        self.metrics.maybe_publish_lag(repo.stats, force=True)
        return done

    def age_off(self) -> dict:
        return self.opened.age_off()

    def get(self, event_id: int) -> ProvenanceEvent | None:
        self._catch_up()
        return self.opened.get(event_id)

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        self._catch_up()
        return self.opened.events(start_id, count)

    def search_with(self, filters: dict, limit: int | None) -> list[ProvenanceEvent]:
        """``WriteAheadProvenanceRepository.search(**filters, limit=limit)``, newest first, for the
        flow page's search, whose filters arrive as one dict of the fields the user filled in."""
        self._catch_up()
        return self.opened.search(**filters, limit=limit)

    def lineage(self, flowfile_uuid: str):
        self._catch_up()
        return self.opened.lineage(flowfile_uuid)

    def stats(self) -> dict:
        self._catch_up()
        return self.opened.stats()

    def close(self) -> None:
        """Take the log's last events (if it is still open: else they wait there for the next
        start), then close with a rollover."""
        self._stop_follow()
        if self.repo is not None:
            self.repo.settle()
            self.repo.rollover()
            self.repo.close()
            self.repo = None
