"""What a provenance repository is to the engine: the ``ProvenanceRepository`` protocol.

Two implementations: ``WriteAheadProvenanceRepository`` (repository.py: journals, event files and
an index on disk; NiFi's name) and ``InMemoryProvenanceRepository`` (memory.py: unit tests, the
stateless engine). The engine, the test runner and the operations tools call these methods on
either (``tests/test_repository_protocols.py`` checks both keep the protocol's signatures).

Ids: every event has a one-up id, set on it when registered; ids never repeat. An event is
*visible* once ``get``, ``events``, ``search`` and ``lineage`` find it.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from repositories.provenance.event import EncodedBatch, ProvenanceEvent, ProvenanceEventType
from repositories.provenance.lineage import Lineage


class ProvenanceRepository(Protocol):
    """A node's provenance events: registered in id order, searchable, with lineage, aged off."""

    def register(self, events: Sequence[ProvenanceEvent]) -> tuple[int, int]:
        """Give the events the next one-up ids (set on them) and keep them; returns
        ``(first_id, last_id)`` (``(n, n - 1)`` for none). They are visible on return."""
        ...

    def register_numbered(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> list[int]:
        """Keep encoded batches (``encode_batch``) under the first ids the FlowFile repository
        reserved for them, each batch's ids following its first. A batch whose first id is here
        already is dropped (sent again). Returns the positions of the batches that came after
        their ids were given up (``wait_visible``): they are not kept, and the caller sends them
        again under new ids."""
        ...

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``event_id`` is visible (or was given up: ids that
        never arrive are given up, so the batches after them become visible); whether it is."""
        ...

    def continue_from(self, next_id: int) -> None:
        """Ids below ``next_id`` will never be registered here (a flow numbers its events from the
        FlowFile repository's next event id, which may be past this repository's)."""
        ...

    def settle(self) -> None:
        """Give up every id still awaited: nothing more is on its way (the flow stopped)."""
        ...

    def sync_journals(self) -> None:
        """Make what was registered survive a power loss before returning, where the repository
        is durable (an fsync of its journals; nothing to do in memory)."""
        ...

    def maybe_rollover(self, now: float | None = None) -> dict | None:
        """A rollover (``rollover``) if one is due, with what it returned; else None. ``now``:
        ``time.monotonic()`` seconds (default: now)."""
        ...

    def rollover(self) -> dict:
        """Move what was registered since the last rollover to the repository's long-term form;
        returns at least ``{"events", "file", "blocks", "bytes", "seconds"}`` (``file`` None when
        nothing was moved). Every event stays visible throughout."""
        ...

    def age_off(self, now: float | None = None) -> dict:
        """Delete the oldest events while storage is over ``max_storage_size`` (down to 90 % of
        it), then those older than ``max_storage_time`` seconds (on disk: whole event files, once
        their newest event is); returns at least ``deleted_files``, ``dropped_shards`` and
        ``bytes_freed``. ``now``: wall-clock seconds (default: now)."""
        ...

    def get(self, event_id: int) -> ProvenanceEvent | None:
        """The event with this id; None if unknown, not visible yet, or aged off."""
        ...

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        """Up to ``count`` visible events with id >= ``start_id``, in id order (gaps where events
        aged off or ids were given up)."""
        ...

    def search(
        self,
        *,
        flowfile_uuid: str | None = None,
        event_type: ProvenanceEventType | str | None = None,
        component_id: str | None = None,
        component_name: str | None = None,
        relationship: str | None = None,
        filename: str | None = None,
        attributes: Mapping[str, str] | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        limit: int | None = 1000,
    ) -> list[ProvenanceEvent]:
        """Visible events meeting every given filter (``event.matches``), newest (highest id)
        first, at most ``limit`` (None: all). ``flowfile_uuid`` also matches an event naming the
        uuid as a parent or child; ``filename`` and ``attributes`` only indexed attributes
        (``filename`` plus ``indexed_attributes``: else ``ValueError``); times (ms) and sizes
        (``updated_size``) are inclusive ranges."""
        ...

    def lineage(self, flowfile_uuid: str, *, max_events: int = 100_000) -> Lineage:
        """The lineage graph of the FlowFile's whole family (lineage.py), of about ``max_events``
        events at most (``truncated`` when cut)."""
        ...

    def stats(self) -> dict:
        """Counts and sizes, at least ``max_event_id``, ``next_event_id`` (the id ``register``
        gives next), ``oldest_event_id``, ``event_files``, ``journal_files``, ``index_shards``,
        ``bytes_on_disk`` and ``index_lag`` (events not moved by a rollover yet)."""
        ...

    def close(self) -> None:
        """Release the repository's files; the repository is not used after (a second close does
        nothing). Events not rolled over are kept for the next open where that is durable."""
        ...
