"""The FlowFile repository's interface: what the engine and the tools may call on one.

``WriteAheadFlowFileRepository`` (wal.py, durable: LMDB) and ``InMemoryFlowFileRepository``
(memory.py, for tests and the test runner) both implement ``FlowFileRepository``;
tests/test_repository_protocols.py fails when either one's signatures drift from it. Every
method of either raises ``FlowFileRepositoryError`` once the repository is closed, and the
durable one raises its subclasses when its files are damaged (``RepositoryCorruptError``) or of a
newer format (``UnsupportedFormatVersionError``), each naming the directory (errors.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeAlias, TypedDict

from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

#: a provenance outbox entry: ``(first event id, (count, min_timestamp, max_timestamp, encoded
#: batch))``, or ``(first event id, what is damaged)`` when its events cannot be read
OutboxEntry: TypeAlias = tuple[int, tuple[int, int, int, bytes] | str]


class EventBatch(Protocol):
    """A commit's provenance events, encoded (``repositories.provenance.event.EncodedBatch``)."""

    @property
    def data(self) -> bytes: ...
    @property
    def count(self) -> int: ...
    @property
    def min_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...


class SwapFileEntry(TypedDict):
    """A registered swap file: its queue, location, FlowFile count and content bytes."""

    queue: str
    location: str
    count: int
    size: int


class ClaimDifference(TypedDict):
    """A claimant count the rebuild found wrong (``claim``: the claim, or its key in hex when the
    key cannot be read)."""

    claim: ResourceClaim | str
    recorded: int
    actual: int


class QueueDifference(TypedDict):
    """A queue's ``(FlowFile count, content bytes)`` as the repository had it and as its records say."""

    recorded: tuple[int, int]
    actual: tuple[int, int]


class RebuildReport(TypedDict):
    """What ``rebuild_claimant_counts`` found and fixed."""

    flowfiles: int                              # records read
    claims: int                                 # resource claims known afterwards
    fixed: int                                  # claimant counts that differed
    differences: list[ClaimDifference]          # the first of them
    stale_destructible: int                     # pending releases dropped
    queues_fixed: dict[str, QueueDifference]    # by queue id
    index_rebuilt: bool                         # the order index was made again
    next_id_raised: bool                        # the next FlowFile id was not past every stored id
    duration: float                             # seconds


class RepositoryStats(TypedDict):
    """A FlowFile repository's figures (``stats``): table sizes, counters, the last checkpoint
    (None before the first) and, for the durable one, its LMDB map (0 in memory)."""

    path: str
    always_sync: bool
    flowfiles: int
    queues: int
    claims: int
    pending_release: int
    swap_files: int
    provenance_outbox: int
    commit_seq: int
    commits: int
    checkpoints: int
    unknown_removals: int
    damaged_counts: int
    next_id: int
    next_event_id: int
    last_checkpoint_time: float | None
    last_checkpoint_duration: float | None
    last_checkpoint_released: int | None
    map_size: int
    map_used: int
    file_size: int
    readers: int


class FlowFileRepository(Protocol):
    """Every FlowFile's attributes, content claim and queue, the claimant count of each resource
    claim, the swap-file registry, processor state and the commits' provenance events.

    Every write is all or nothing. Methods are safe to call from several threads."""

    path: Path

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        ...

    # --- ids and runs --------------------------------------------------------------------------

    def reserve_ids(self, count: int) -> int:
        """Reserve ``count`` one-up FlowFile ids and return the first. The reservation is durable
        before any FlowFile uses the ids: ids are never given twice, not after a restart either
        (those of a session that never committed are skipped). ``ValueError`` unless ``count``
        is a non-negative int."""
        ...

    def reserve_event_ids(self, count: int) -> int:
        """Reserve ``count`` one-up provenance event ids and return the first (events registered
        outside a commit: a queue emptied, a replay). ``ValueError`` as ``reserve_ids``."""
        ...

    def raise_event_ids(self, at_least: int) -> int:
        """Make the next event id at least ``at_least`` (past every id provenance holds) and return it."""
        ...

    def begin_run(self) -> int:
        """Number a new run of the flow (one more than the last) and return it: from then on a
        commit made for an older run is refused (``commit(run=...)``)."""
        ...

    # --- commits -------------------------------------------------------------------------------

    def commit(
        self,
        updates: Sequence[QueuedFlowFile],
        removals: Sequence[str],
        new_claims: Sequence[ResourceClaim] = (),
        events: int = 0,
        state: StateChange | None = None,
        *,
        run: int | None = None,
        event_batch: EventBatch | None = None,
    ) -> int | None:
        """Record one session's changes, all or nothing: ``updates`` (FlowFiles created or
        changed, each with its queue), ``removals`` (uuids of FlowFiles that left the flow;
        unknown ones are ignored, so a retried commit cannot count twice), ``new_claims``
        (resource claims the session wrote: one nothing references is released after the next
        checkpoint). Each FlowFile's claimant and queue counts follow its previous version.

        ``events`` provenance event ids are reserved with the commit and the first returned (None
        without events), so event ids follow the order commits are made in; ``event_batch``
        (those events encoded; ``events`` is then its count) is kept with the commit until the
        provenance repository takes it (``outbox_entries``). ``state``: the session's change of
        its processor's state, written with the commit. The first five parameters may be passed
        by position (the test runner's log does), ``run`` and ``event_batch`` only by name.

        Raises, having written nothing: ``ValueError`` for a uuid named twice or a FlowFile that
        cannot be stored; ``RunReplacedError`` when ``run`` is given and ``begin_run`` has
        numbered a newer one; ``StateConflictError`` when ``state`` expects a version that is
        no longer the stored one."""
        ...

    def get_state(self, component_id: str) -> StateMap:
        """The stored state of a processor (version -1 and no values when it has none)."""
        ...

    def state_ids(self) -> list[str]:
        """The component ids that have stored state."""
        ...

    # --- swap files and queues -----------------------------------------------------------------

    def register_swap_file(self, queue: str, location: str, count: int, size: int,
                           flowfiles: Sequence[FlowFile] | None = None) -> None:
        """Record that ``queue`` swapped ``count`` FlowFiles (``size`` bytes) out to ``location``.
        Their records stay (their claims stay counted, a lost swap file loses nothing); with
        ``flowfiles`` they move in the same write to the queue ``swap:<location>``, which
        ``recover`` skips. ``ValueError``, nothing written, for a location already registered
        or one that cannot be one, a count that is not ``len(flowfiles)``, or a FlowFile not
        in ``queue``."""
        ...

    def unregister_swap_file(self, location: str) -> int:
        """Forget a swap file; its records still under ``swap:<location>`` move back to its queue
        in their FIFO position, in the same write. Returns how many moved; an unknown location
        changes nothing and returns 0, so a retried call is harmless."""
        ...

    def rename_queue(self, old: str, new: str) -> int:
        """Move every FlowFile of queue ``old`` to queue ``new`` in their FIFO position, and
        unregister the swap files of ``old`` (their records joining ``new``), in one write;
        returns how many records moved."""
        ...

    def swap_files(self) -> list[SwapFileEntry]:
        """The registered swap files, oldest registration first."""
        ...

    # --- durability ----------------------------------------------------------------------------

    def checkpoint(self) -> list[ResourceClaim]:
        """Make every commit so far durable, then release the claims whose claimant count reached
        0 in a commit before this checkpoint started and is still 0, and return them (for the
        content repository to archive or delete). A claim is returned once, except that a power
        loss may undo a release (the durable one without ``always_sync``): deleting must
        tolerate a claim that is already gone. Claims freed while it runs wait for the next one."""
        ...

    def apply_if_long(self) -> bool:
        """Bring the tables up to date with the commits made so far if enough of them wait (a
        background thread's call, so that committing sessions need not); whether it did.
        Never needed for correctness: every read sees every commit made before it."""
        ...

    def rebuild_claimant_counts(self, max_reported: int = 1000) -> RebuildReport:
        """Recompute every claimant count, queue size and the next id from the FlowFile records
        and fix what differs (at start-up, before sessions commit); the report lists at most
        ``max_reported`` claims. A count found too high drops to 0 and its claim waits for the
        next checkpoint like any other unreferenced claim."""
        ...

    # --- reading -------------------------------------------------------------------------------

    def recover(self, batch_size: int = 10_000, *,
                include_swapped: bool = False) -> Iterator[tuple[str, list[FlowFile]]]:
        """Stream ``(queue, batch)`` for every queue, each queue in FIFO order (queue_date,
        queue_index, id) in batches of at most ``batch_size``, never the whole repository at
        once; FlowFiles in swap files (queues ``swap:<location>``) only with
        ``include_swapped``. ``ValueError`` for a ``batch_size`` below 1."""
        ...

    def iter_queue(self, queue: str, batch_size: int = 10_000) -> Iterator[list[FlowFile]]:
        """Stream one queue's FlowFiles in FIFO order (``swap:<location>`` included), in batches
        of at most ``batch_size`` (``ValueError`` below 1)."""
        ...

    def page(self, queue: str, start: bytes | None, stop: bytes | None,
             count: int) -> tuple[list[FlowFile], bytes | None]:
        """Up to ``count`` FlowFiles of ``queue`` in FIFO order whose order keys lie in
        ``[start, stop)`` (None: from the queue's first, to its end), and the key the next page
        starts at (None: the range is done). ``ValueError`` for a ``count`` below 1."""
        ...

    def last_key(self, queue: str) -> bytes | None:
        """The order key of ``queue``'s last FlowFile in FIFO order (None: it is empty)."""
        ...

    def queue_counts(self) -> dict[str, int]:
        """FlowFiles per queue id, for every queue that holds one (swapped-out ones under
        ``swap:<location>``)."""
        ...

    def queue_sizes(self) -> dict[str, tuple[int, int]]:
        """``(FlowFile count, content bytes)`` per queue id, as ``queue_counts``."""
        ...

    def claimant_count(self, resource: ResourceClaim) -> int:
        """How many FlowFiles in the repository reference ``resource``."""
        ...

    def is_referenced(self, resource: ResourceClaim) -> bool:
        """Whether the content repository must keep ``resource``: a FlowFile references it, or it
        waits for a checkpoint to be released. Orphan cleanup deletes only the others."""
        ...

    # --- the provenance outbox -----------------------------------------------------------------

    def outbox_entries(self, max_bytes: int = 64 * 1024**2) -> list[OutboxEntry]:
        """The commits' provenance events the provenance repository has not taken yet
        (``commit``'s ``event_batch``), in id order, about ``max_bytes`` of them at most (at
        least one entry when there is one)."""
        ...

    def remove_from_outbox(self, first_ids: Iterable[int]) -> int:
        """Delete the outbox entries of these first event ids (provenance has them); returns how
        many were there."""
        ...

    # --- the rest ------------------------------------------------------------------------------

    def stats(self) -> RepositoryStats:
        """The repository's figures now."""
        ...

    def close(self) -> None:
        """Close the repository (idempotent). It does not sync: ``checkpoint`` first for that."""
        ...
