"""The provenance reporter a session offers its processor: events it records explicitly.

Events are queued in the session and emitted at commit with the attributes as committed (SEND keeps
the attributes as they were when it was reported). A rolled-back session emits nothing.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from repositories.model import FlowFile
from repositories.provenance.event import ProvenanceEventType as T


class RecordEvent(Protocol):
    """How the reporter records an event with its session: about ``flowfile`` as the session holds
    it now, ``fields`` by name (``repositories.provenance.event.FIELD_INDEX``)."""

    def __call__(self, event_type: T, flowfile: FlowFile, /, **fields: Any) -> None: ...


class RecordEvents(Protocol):
    """How the reporter records an event about each FlowFile of a batch with its session: ``shared``
    the fields every event has, ``each`` a field's values, one a FlowFile, by name."""

    def __call__(self, event_type: T, flowfiles: Sequence[FlowFile], shared: Mapping[str, Any],
                 each: Mapping[str, Sequence[Any]], /) -> None: ...


class ProvenanceReporter:
    """``session.provenance``: records the events a processor reports through the two functions its
    session gives it, and nothing else of the session."""

    def __init__(self, record: RecordEvent, record_each: RecordEvents):
        self._record = record
        self._record_each = record_each

    def create(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._record(T.CREATE, flowfile, details=details)

    def receive(self, flowfile: FlowFile, transit_uri: str, *, source_system_flowfile_id: str | None = None,
                details: str | None = None, duration: int = 0) -> None:
        self._record(T.RECEIVE, flowfile, transit_uri=transit_uri, details=details, duration=duration,
                   source_system_flowfile_id=source_system_flowfile_id)

    def fetch(self, flowfile: FlowFile, transit_uri: str, details: str | None = None, duration: int = 0) -> None:
        self._record(T.FETCH, flowfile, transit_uri=transit_uri, details=details, duration=duration)

    def send(self, flowfile: FlowFile, transit_uri: str, details: str | None = None, duration: int = 0) -> None:
        self._record(T.SEND, flowfile, transit_uri=transit_uri, details=details, duration=duration)

    def send_batch(self, flowfiles: Sequence[FlowFile], transit_uri: str, details: str | None = None,
                   duration: int = 0) -> None:
        """``send`` each FlowFile (one event run for a batch the session holds whole)."""
        self._record_each(T.SEND, flowfiles, {"transit_uri": transit_uri, "details": details, "duration": duration}, {})

    def receive_batch(self, flowfiles: Sequence[FlowFile], transit_uri: str, *,
                      source_system_flowfile_ids: Sequence[str | None] | None = None, details: str | None = None,
                      duration: int = 0) -> None:
        """``receive`` each FlowFile, the i-th from ``source_system_flowfile_ids[i]``."""
        each = {}
        if source_system_flowfile_ids is not None:
            if len(source_system_flowfile_ids) != len(flowfiles):
                raise ValueError(f"{len(source_system_flowfile_ids)} source ids for {len(flowfiles)} FlowFiles")
            each["source_system_flowfile_id"] = list(source_system_flowfile_ids)
        self._record_each(T.RECEIVE, flowfiles, {"transit_uri": transit_uri, "details": details, "duration": duration}, each)

    def route(self, flowfile: FlowFile, relationship: str, details: str | None = None) -> None:
        self._record(T.ROUTE, flowfile, relationship=relationship, details=details)

    def route_batch(self, flowfiles: Sequence[FlowFile], relationships: str | Sequence[str],
                    details: str | None = None) -> None:
        """``route`` each FlowFile: to one relationship, or the i-th to ``relationships[i]``."""
        if not isinstance(relationships, str):
            if len(relationships) != len(flowfiles):
                raise ValueError(f"{len(relationships)} relationships for {len(flowfiles)} FlowFiles")
            if relationships and relationships.count(relationships[0]) == len(relationships):
                relationships = relationships[0]   # one for all
        if isinstance(relationships, str):
            self._record_each(T.ROUTE, flowfiles, {"details": details, "relationship": relationships}, {})
        else:
            self._record_each(T.ROUTE, flowfiles, {"details": details}, {"relationship": list(relationships)})

    def modify_content(self, flowfile: FlowFile, details: str | None = None, duration: int = 0) -> None:
        self._record(T.CONTENT_MODIFIED, flowfile, details=details, duration=duration)

    def modify_attributes(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._record(T.ATTRIBUTES_MODIFIED, flowfile, details=details)

    def fork(self, parent: FlowFile, children: Sequence[FlowFile], details: str | None = None) -> None:
        self._record(T.FORK, parent, child_uuids=[c.uuid for c in children], details=details)

    def join(self, parents: Sequence[FlowFile], child: FlowFile, details: str | None = None) -> None:
        self._record(T.JOIN, child, parent_uuids=[p.uuid for p in parents], child_uuids=[child.uuid], details=details)

    def drop(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._record(T.DROP, flowfile, details=details)

    def associate(self, flowfile: FlowFile, alternate_identifier: str, details: str | None = None) -> None:
        self._record(T.ASSOCIATE, flowfile, alternate_identifier=alternate_identifier, details=details)
