"""What a session and the engine running it agree on: the batch a commit hands over, the errors a
commit raises, the backend a session talks to, and the FlowFile id allocator.

``flowactors.sdk.session.ProcessSession`` builds a ``CommitBatch`` and hands it to its
``SessionBackend``; every engine implements the backend with ``flowactors.engine.session_backend.EngineBackend``
(the test runner too, through its subclass). The commit errors are raised by the backend and reach
the processor through ``ProcessSession.commit``, which re-exports them; ``FlowFileHandlingError``
is the session's own, for a processor that broke its rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from repositories.model import FlowFile, FlowFileBatch, QueuedFlowFile, ResourceClaim, StateChange
from repositories.provenance.event import FIELD_INDEX, EventRun

__all__ = ["CommitBatch", "CommitError", "DeliveryError", "FlowFileHandlingError", "IdAllocator", "SessionBackend",
           "StateConflict"]


#: positions in an event's field array (``CommitBatch.events``; ``repositories.provenance.event.FIELD_INDEX``),
#: named once for the session's modules
F_TYPE = FIELD_INDEX["event_type"]
F_UUID = FIELD_INDEX["flowfile_uuid"]
F_CHILDREN = FIELD_INDEX["child_uuids"]
F_PREVIOUS_ATTRIBUTES = FIELD_INDEX["previous_attributes"]
F_PREVIOUS_CLAIM = FIELD_INDEX["previous_claim"]
F_PREVIOUS_SIZE = FIELD_INDEX["previous_size"]
F_SOURCE_QUEUE = FIELD_INDEX["source_queue_id"]
F_UPDATED_ATTRIBUTES = FIELD_INDEX["updated_attributes"]
F_UPDATED_CLAIM = FIELD_INDEX["updated_claim"]
F_UPDATED_SIZE = FIELD_INDEX["updated_size"]
F_LINEAGE_START = FIELD_INDEX["lineage_start_date"]
F_DETAILS = FIELD_INDEX["details"]


class FlowFileHandlingError(RuntimeError):
    """A processor broke the session's rules (e.g. left a FlowFile without a destination, or put
    an attribute past its limit: ``flowactors.sdk.attribute_limits``)."""


class CommitError(RuntimeError):
    """The write-ahead log refused the commit; nothing of the session became visible."""


class StateConflict(CommitError):
    """The commit was refused because another task of the processor changed its state since this
    session read it (``context.state.replace``): the session rolled back; trigger again."""


class DeliveryError(RuntimeError):
    """The write-ahead log accepted the commit, but handing it on (provenance, queues) failed.

    The commit stands: nothing is rolled back, and the log restores the FlowFiles at the next start.
    """


@dataclass
class CommitBatch:
    """Everything one session commit changes, handed to the backend in one call."""

    updates: list[QueuedFlowFile] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    new_claims: list[ResourceClaim] = field(default_factory=list)
    #: provenance events as field arrays (``repositories.provenance.event.new_event_fields``) or
    #: runs of them (``EventRun``, a batch call's events as columns): many a commit, so no object
    #: each; encoded once, as one batch, by the log (``encode_batch``: shipping bytes is cheaper
    #: than pickling event objects)
    events: Sequence[list | EventRun] = field(default_factory=list)
    #: queue id -> FlowFiles to offer there (after the WAL transaction); a ``FlowFileBatch``
    #: each, so that an offer to a queue in another process pickles as columns
    offers: dict[str, FlowFileBatch] = field(default_factory=dict)
    #: queue id -> uuids taken from it that are now done with
    acknowledgements: dict[str, list[str]] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0
    #: the session's change of its processor's state (``context.state``), written in the same
    #: transaction as everything above
    state: StateChange | None = None


class SessionBackend(Protocol):
    """What a session needs from the runtime: its queues, the repositories and the flow's wiring."""

    content: Any  # FileSystemContentRepository or InMemoryContentRepository
    always_sync: bool

    def poll(self, max_count: int) -> list[tuple[str, FlowFile]]:
        """Take up to ``max_count`` FlowFiles from the processor's input queues: (queue id, FlowFile)."""

    def destinations(self, relationship: str) -> list[str]:
        """The queue ids a relationship is connected to (empty when auto-terminated)."""

    def full_destinations(self) -> list[str]:
        """The destination queues under back pressure now (at most one commit behind); none
        where the engine applies no back pressure."""

    def next_ids(self, count: int) -> int:
        """The first of ``count`` fresh one-up FlowFile ids."""

    def commit(self, batch: CommitBatch) -> None:
        """Make the batch durable, then deliver it. Raises ``CommitError`` when nothing was written,
        ``DeliveryError`` when the log has it but delivering failed (never anything else)."""

    def requeue(self, returned: dict[str, list[FlowFile]]) -> None:
        """Give FlowFiles back to the queues they were taken from (rollback)."""

    def after_commit(self, on_success: Callable[[], None] | None,
                     on_failure: Callable[[BaseException], None] | None) -> None:
        """A commit went through: run ``on_success`` now, or hold both until the engine knows
        whether the work it belongs to succeeded (``commit_async``)."""


class IdAllocator:
    """Hands out FlowFile ids (``FlowFile.id``), one-up, from blocks it reserves through the
    backend's ``next_ids``: one backend call a ``BLOCK`` ids.

    Every id it hands out is one no other allocator on the same backend hands out (the backend
    reserves each block once), and the ids of one allocator grow. An allocator is not thread-safe:
    the engine gives each processor task its own, shared by the sessions of that task
    (``ProcessSession.new_session`` passes it on). Ids left in a block when the allocator is
    dropped are never used.
    """

    BLOCK = 10_000

    def __init__(self, backend: SessionBackend):
        self._backend = backend
        self._next = 0
        self._end = 0

    def _reserve(self) -> None:
        self._next = self._backend.next_ids(self.BLOCK)
        self._end = self._next + self.BLOCK

    def take(self) -> int:
        """The next id."""
        if self._next >= self._end:
            self._reserve()
        value = self._next
        self._next += 1
        return value

    def take_many(self, count: int) -> list[int]:
        """``count`` ids, as ``take`` would hand them out one after the other."""
        out: list[int] = []
        while len(out) < count:
            if self._next >= self._end:
                self._reserve()
            step = min(count - len(out), self._end - self._next)
            out.extend(range(self._next, self._next + step))
            self._next += step
        return out
