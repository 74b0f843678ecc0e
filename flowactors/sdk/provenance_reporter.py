"""The provenance reporter a session offers its processor: events it records explicitly.

Events are queued in the session and emitted at commit with the attributes as committed (SEND keeps
the attributes as they were when it was reported). A rolled-back session emits nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from repositories.model import FlowFile
from repositories.provenance.event import ProvenanceEventType as T

if TYPE_CHECKING:
    from flowactors.sdk.session import ProcessSession


class ProvenanceReporter:
    def __init__(self, session: "ProcessSession"):
        self._session = session

    def _emit(self, event_type: T, flowfile: FlowFile, **fields):
        current = self._session._record(flowfile).current
        return self._session._emit(event_type, current, **fields)

    def create(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._emit(T.CREATE, flowfile, details=details)

    def receive(self, flowfile: FlowFile, transit_uri: str, *, source_system_flowfile_id: str | None = None,
                details: str | None = None, duration: int = 0) -> None:
        self._emit(T.RECEIVE, flowfile, transit_uri=transit_uri, details=details, duration=duration,
                   source_system_flowfile_id=source_system_flowfile_id)

    def fetch(self, flowfile: FlowFile, transit_uri: str, details: str | None = None, duration: int = 0) -> None:
        self._emit(T.FETCH, flowfile, transit_uri=transit_uri, details=details, duration=duration)

    def send(self, flowfile: FlowFile, transit_uri: str, details: str | None = None, duration: int = 0) -> None:
        self._emit(T.SEND, flowfile, transit_uri=transit_uri, details=details, duration=duration)

    def send_batch(self, flowfiles: Sequence[FlowFile], transit_uri: str, details: str | None = None,
                   duration: int = 0) -> None:
        """``send`` each FlowFile (one event run for a batch the session holds whole)."""
        self._batch(T.SEND, flowfiles, {"transit_uri": transit_uri, "details": details, "duration": duration}, {})

    def receive_batch(self, flowfiles: Sequence[FlowFile], transit_uri: str, *,
                      source_system_flowfile_ids: Sequence[str | None] | None = None, details: str | None = None,
                      duration: int = 0) -> None:
        """``receive`` each FlowFile, the i-th from ``source_system_flowfile_ids[i]``."""
        each = {}
        if source_system_flowfile_ids is not None:
            if len(source_system_flowfile_ids) != len(flowfiles):
                raise ValueError(f"{len(source_system_flowfile_ids)} source ids for {len(flowfiles)} FlowFiles")
            each["source_system_flowfile_id"] = list(source_system_flowfile_ids)
        self._batch(T.RECEIVE, flowfiles, {"transit_uri": transit_uri, "details": details, "duration": duration}, each)

    def _batch(self, event_type: T, flowfiles: Sequence[FlowFile], shared: dict, each: dict) -> None:
        run = self._session._run_of(flowfiles)
        if run is not None:
            self._session._emit_run(event_type, run, shared, each)
            return
        for i, flowfile in enumerate(flowfiles):
            self._emit(event_type, flowfile, **shared, **{k: v[i] for k, v in each.items()})

    def route(self, flowfile: FlowFile, relationship: str, details: str | None = None) -> None:
        self._emit(T.ROUTE, flowfile, relationship=relationship, details=details)

    def route_batch(self, flowfiles: Sequence[FlowFile], relationships: str | Sequence[str],
                    details: str | None = None) -> None:
        """``route`` each FlowFile: to one relationship, or the i-th to ``relationships[i]``."""
        if not isinstance(relationships, str):
            if len(relationships) != len(flowfiles):
                raise ValueError(f"{len(relationships)} relationships for {len(flowfiles)} FlowFiles")
            if relationships and relationships.count(relationships[0]) == len(relationships):
                relationships = relationships[0]   # one for all
        run = self._session._run_of(flowfiles)
        if run is not None:   # the whole batch the session holds as one run: one event run
            if isinstance(relationships, str):
                self._session._emit_run(T.ROUTE, run, {"details": details, "relationship": relationships}, {})
            else:
                self._session._emit_run(T.ROUTE, run, {"details": details}, {"relationship": list(relationships)})
            return
        names = [relationships] * len(flowfiles) if isinstance(relationships, str) else relationships
        for flowfile, name in zip(flowfiles, names):
            self._emit(T.ROUTE, flowfile, relationship=name, details=details)

    def modify_content(self, flowfile: FlowFile, details: str | None = None, duration: int = 0) -> None:
        self._emit(T.CONTENT_MODIFIED, flowfile, details=details, duration=duration)

    def modify_attributes(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._emit(T.ATTRIBUTES_MODIFIED, flowfile, details=details)

    def fork(self, parent: FlowFile, children: Sequence[FlowFile], details: str | None = None) -> None:
        self._emit(T.FORK, parent, child_uuids=[c.uuid for c in children], details=details)

    def join(self, parents: Sequence[FlowFile], child: FlowFile, details: str | None = None) -> None:
        self._emit(T.JOIN, child, parent_uuids=[p.uuid for p in parents], child_uuids=[child.uuid], details=details)

    def drop(self, flowfile: FlowFile, details: str | None = None) -> None:
        self._emit(T.DROP, flowfile, details=details)

    def associate(self, flowfile: FlowFile, alternate_identifier: str, details: str | None = None) -> None:
        self._emit(T.ASSOCIATE, flowfile, alternate_identifier=alternate_identifier, details=details)
