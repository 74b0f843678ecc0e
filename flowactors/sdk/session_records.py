"""The per-FlowFile path of a session: a record of each FlowFile it holds (``FlowFileRecord``), and
the commit built from those records (``RecordCommit``).

A session keeps a record a FlowFile for every FlowFile a per-FlowFile call touched (and, once one
did, for every FlowFile it holds: ``flowactors.sdk.session_runs`` keeps the others as columns).
At commit the records decide everything: each FlowFile's queue (an auto-terminated one dropped, a
relationship connected more than once giving clones), the events nobody reported (CREATE, FORK,
JOIN, CONTENT_MODIFIED, ATTRIBUTES_MODIFIED, DROP), and every event completed with the FlowFiles
as committed.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from flowactors.sdk.session_contract import (F_CHILDREN, F_PREVIOUS_ATTRIBUTES, F_PREVIOUS_CLAIM, F_PREVIOUS_SIZE,
                                             F_SOURCE_QUEUE, F_TYPE, F_UPDATED_ATTRIBUTES, F_UPDATED_CLAIM,
                                             F_UPDATED_SIZE, F_UUID, CommitBatch)
from flowactors.sdk.session_runs import CONTENT_EVENTS, CREATION_EVENTS, QueueIndex
from repositories.model import FlowFile, FlowFileBatch, QueuedFlowFile, now_millis
from repositories.provenance.event import ProvenanceEventType

_T = ProvenanceEventType


class FlowFileRecord:
    """The session's view of one FlowFile: where it came from, what it is now, where it goes."""

    __slots__ = ("original", "current", "source_queue", "relationship", "queue", "removed",
                 "auto_terminated", "created", "attributes_modified", "content_modified", "parents")

    def __init__(self, original: FlowFile | None, current: FlowFile, source_queue: str | None):
        self.original = original
        self.current = current
        self.source_queue = source_queue
        self.relationship: str | None = None
        self.queue: str | None = None
        self.removed = False
        self.auto_terminated = False
        self.created = original is None
        self.attributes_modified = False
        self.content_modified = False
        self.parents: list[str] = []


class Emit(Protocol):
    """How the commit records an event with its session: a field array about ``flowfile``, its
    ``fields`` by name (``FIELD_INDEX``), appended to the session's events."""

    def __call__(self, event_type: ProvenanceEventType, flowfile: FlowFile, /, **fields: Any) -> list: ...


class RecordCommit:
    """The commit of a session's records: ``build`` makes the ``CommitBatch`` (its FlowFiles and
    events; the session adds its content). The records must all be handled (transferred or
    removed). It changes the records and appends to ``events``, the session's own list, through
    ``emit``; ``clone`` is the session's, giving a record a FlowFile."""

    def __init__(self, records: dict[str, FlowFileRecord], events: list[list],
                 destinations: Callable[[str], list[str]], clone: Callable[[FlowFile], FlowFile], emit: Emit):
        self.records = records
        self.events = events
        self.destinations = destinations
        self.clone = clone
        self.emit = emit

    def build(self) -> CommitBatch:
        self._resolve_destinations()
        self._add_implicit_events()
        batch = CommitBatch()
        self._add_records(batch)
        finals = {r.current.uuid: r for r in self.records.values()}
        for event in self.events:
            _complete_event(event, finals.get(event[F_UUID]))
        batch.events = self.events
        return batch

    def _resolve_destinations(self) -> None:
        """Pick each FlowFile's queue; auto-terminated ones are dropped, extra connections get clones."""
        for record in list(self.records.values()):
            if record.removed or record.relationship is None:
                continue
            destinations = self.destinations(record.relationship)
            if not destinations:
                record.removed = record.auto_terminated = True
                continue
            record.queue = destinations[0]
            for extra in destinations[1:]:
                clone = self.records[self.clone(record.current).uuid]
                clone.relationship, clone.queue = record.relationship, extra

    def _add_implicit_events(self) -> None:
        """CREATE / FORK / JOIN / CONTENT_MODIFIED / ATTRIBUTES_MODIFIED events nobody reported."""
        reported: dict[str, set[str]] = {}
        for event in self.events:
            reported.setdefault(event[F_UUID], set()).add(event[F_TYPE])
            for child in event[F_CHILDREN]:
                reported.setdefault(child, set()).add("CHILD")
        by_parent: dict[str, list[str]] = {}
        emit = self.emit
        for record in self.records.values():
            uuid = record.current.uuid
            types = reported.get(uuid, set())
            if record.created and (record.auto_terminated or not record.removed):
                if "CHILD" in types or types & CREATION_EVENTS:
                    pass
                elif len(record.parents) == 1:
                    by_parent.setdefault(record.parents[0], []).append(uuid)
                elif len(record.parents) > 1:
                    emit(_T.JOIN, record.current, parent_uuids=list(record.parents), child_uuids=[record.current.uuid])
                else:
                    emit(_T.CREATE, record.current)
                continue
            if record.removed or record.created:
                continue
            if record.content_modified and not types & CONTENT_EVENTS:
                emit(_T.CONTENT_MODIFIED, record.current)
            elif record.attributes_modified and not types:
                emit(_T.ATTRIBUTES_MODIFIED, record.current)
        for parent_uuid, children in by_parent.items():
            parent = self.records.get(parent_uuid)
            if parent is not None:
                emit(_T.FORK, parent.current, child_uuids=children)

    def _add_records(self, batch: CommitBatch) -> None:
        """Each record's acknowledgement, then its removal and DROP event, or its queued version
        and offer."""
        now = now_millis()
        dropped = {e[F_UUID] for e in self.events if e[F_TYPE] == _T.DROP}
        for record in self.records.values():
            if record.original is not None and record.source_queue is not None:
                batch.acknowledgements.setdefault(record.source_queue, []).append(record.original.uuid)
            if record.removed:
                if record.original is not None:
                    batch.removals.append(record.current.uuid)
                if record.auto_terminated:
                    self.emit(_T.DROP, record.current, details=f"Auto-Terminated by {record.relationship} Relationship")
                elif record.original is not None and record.current.uuid not in dropped:
                    self.emit(_T.DROP, record.current)
                continue
            queue = record.queue
            assert queue is not None  # every record kept has one: _resolve_destinations
            record.current = record.current.queued(now, QueueIndex.take())
            batch.updates.append(QueuedFlowFile(record.current, queue))
            batch.offers.setdefault(queue, FlowFileBatch()).append(record.current)


def _complete_event(event: list, record: FlowFileRecord | None) -> None:
    """Fill in attributes and content as committed (SEND keeps what it had when emitted). The
    attribute maps are the FlowFiles' own, not copies: a FlowFile's attributes are never
    changed in place (every change makes a new map), so an event can share them."""
    if record is None:
        return
    original = record.original
    if original is not None:
        event[F_PREVIOUS_ATTRIBUTES] = original.attributes
        event[F_PREVIOUS_CLAIM] = original.claim
        event[F_PREVIOUS_SIZE] = original.size
        event[F_SOURCE_QUEUE] = record.source_queue
    if event[F_TYPE] != _T.SEND:
        current = record.current
        event[F_UPDATED_ATTRIBUTES] = current.attributes
        event[F_UPDATED_CLAIM] = current.claim
        event[F_UPDATED_SIZE] = current.size
