"""Lineage: the graph of FlowFiles and events connected to one FlowFile.

Starting from one uuid, every event that names a uuid (as its FlowFile, a parent or a child) is
collected; FORK, JOIN, CLONE and REPLAY events add their parents and children to the uuids to
visit, so the graph is the whole connected family, ancestors and descendants alike. The family is
walked breadth first and looked up a level at a time: the repository answers all the uuids waiting
in the frontier with one pass (``collect_family``'s ``find_many``).

The graph, built from the events in id order (the order they were committed):

* one ``flowfile:<uuid>`` node where a FlowFile first appears: the FlowFile's first event, or the
  FORK/JOIN/CLONE/REPLAY event that made it (an edge event -> FlowFile);
* one ``event:<id>`` node per event; an edge to it from the previous node on the same FlowFile
  (its flowfile node, or its latest event). A linking event's inputs are its parents, so a JOIN has
  one incoming edge per parent. Every edge carries the uuid of the FlowFile it follows.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from repositories.provenance.event import LINKING_TYPES, ProvenanceEvent, ProvenanceEventType


@dataclass(frozen=True, slots=True)
class LineageNode:
    id: str                                   # "flowfile:<uuid>" or "event:<event id>"
    kind: str                                 # "flowfile" or "event"
    flowfile_uuid: str
    event_id: int | None = None
    event_type: ProvenanceEventType | None = None
    timestamp: int | None = None
    component_id: str | None = None
    component_name: str | None = None
    relationship: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "flowfile":
            return f"FlowFile {self.flowfile_uuid}"
        text = f"#{self.event_id} {self.event_type} by {self.component_name or self.component_id or '?'}"
        return text + (f" -> {self.relationship}" if self.relationship else "")


@dataclass(frozen=True, slots=True)
class LineageEdge:
    source: str
    target: str
    flowfile_uuid: str


@dataclass
class Lineage:
    """Nodes (FlowFiles and events) and directed edges; ``truncated`` if ``max_events`` was hit.

    ``unreadable``: ids of the family's events that lie in damaged event file blocks, so are
    missing from the graph; ``warnings``: what a reader of stopped repositories (the ``lineage``
    command, ``cluster_lineage``) could not read, one line a repository."""

    flowfile_uuid: str
    nodes: list[LineageNode] = field(default_factory=list)
    edges: list[LineageEdge] = field(default_factory=list)
    events: list[ProvenanceEvent] = field(default_factory=list)
    truncated: bool = False
    unreadable: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def node(self, node_id: str) -> LineageNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


def named_uuids(event: ProvenanceEvent) -> tuple[str, ...]:
    """The uuids an event names: its FlowFile, parents and children (what a uuid search matches)."""
    if not event.parent_uuids and not event.child_uuids:
        return (event.flowfile_uuid,)
    return tuple(dict.fromkeys((event.flowfile_uuid, *event.parent_uuids, *event.child_uuids)))


def collect_family(flowfile_uuid: str, find_many: Callable[[Sequence[str]], Iterable[ProvenanceEvent]],
                   max_events: int) -> tuple[list[ProvenanceEvent], bool]:
    """Every event of the FlowFile's connected family, in id order, and whether it was cut short.

    ``find_many(uuids)`` returns every event naming any of the uuids (``named_uuids``), each once,
    in any order. The family is visited one uuid at a time, breadth first; each uuid's events are
    taken newest first (the order of ``search(flowfile_uuid=uuid)``) and after each uuid the walk
    stops if ``max_events`` events were found (so the last uuid's events are all kept, and the
    result may pass ``max_events``); ``truncated`` says some FlowFile of the family was left unvisited
    then. The lookups are
    batched: visiting a uuid not looked up yet looks up every unvisited uuid waiting in the frontier
    (the rest of its BFS level), at most ``max_events - found`` of them, in one ``find_many`` call.
    The batching does not change the result: the same events in the same order as looking up one
    uuid at a time; a cut only means the last batch's unvisited uuids were read for nothing.
    """
    found: dict[int, ProvenanceEvent] = {}
    seen: set[str] = set()
    frontier = deque([flowfile_uuid])
    looked_up: dict[str, list[ProvenanceEvent]] = {}
    truncated = False
    while frontier:
        uuid = frontier.popleft()
        if uuid in seen:
            continue
        if uuid not in looked_up:
            budget = max_events - len(found)   # >= 1: the walk stops once found reaches max_events
            batch = dict.fromkeys([uuid])
            for other in frontier:
                if len(batch) >= budget:
                    break
                if other not in seen:
                    batch[other] = None
            looked_up = _by_uuid(list(batch), find_many(list(batch)))
        seen.add(uuid)
        for event in looked_up.pop(uuid):
            if event.event_id in found:
                continue
            found[event.event_id] = event
            if event.event_type in LINKING_TYPES:
                for other in (event.flowfile_uuid, *event.parent_uuids, *event.child_uuids):
                    if other not in seen:
                        frontier.append(other)
        if len(found) >= max_events:
            truncated = any(other not in seen for other in frontier)
            break
    return sorted(found.values(), key=lambda e: e.event_id), truncated


def _by_uuid(uuids: list[str], events: Iterable[ProvenanceEvent]) -> dict[str, list[ProvenanceEvent]]:
    """Each uuid's events, newest first, as a search by that uuid alone returns them."""
    out: dict[str, list[ProvenanceEvent]] = {uuid: [] for uuid in uuids}
    unique = {event.event_id: event for event in events}
    for event_id in sorted(unique, reverse=True):
        event = unique[event_id]
        for uuid in named_uuids(event):
            if uuid in out:
                out[uuid].append(event)
    return out


def build_lineage(flowfile_uuid: str, events: Iterable[ProvenanceEvent], truncated: bool = False) -> Lineage:
    """The graph of these events (see the module docstring for its exact shape)."""
    lineage = Lineage(flowfile_uuid, truncated=truncated)
    nodes: dict[str, LineageNode] = {}
    edges: dict[tuple[str, str, str], LineageEdge] = {}
    last: dict[str, str] = {}

    def flowfile_node(uuid: str) -> str:
        node_id = f"flowfile:{uuid}"
        if node_id not in nodes:
            nodes[node_id] = LineageNode(node_id, "flowfile", uuid)
        return node_id

    def edge(source: str, target: str, uuid: str) -> None:
        key = (source, target, uuid)
        if key not in edges:
            edges[key] = LineageEdge(source, target, uuid)

    for event in sorted(events, key=lambda e: e.event_id):
        lineage.events.append(event)
        linking = event.event_type in LINKING_TYPES
        inputs = list(dict.fromkeys(event.parent_uuids)) if linking and event.parent_uuids else [event.flowfile_uuid]
        sources = [last.get(uuid) or flowfile_node(uuid) for uuid in inputs]
        event_node = f"event:{event.event_id}"
        nodes[event_node] = LineageNode(
            event_node, "event", event.flowfile_uuid, event.event_id, event.event_type,
            event.timestamp, event.component_id, event.component_name, event.relationship,
        )
        for uuid, source in zip(inputs, sources):
            edge(source, event_node, uuid)
            last[uuid] = event_node
        if linking:
            # a JOIN's own FlowFile is the child it made, whether or not child_uuids names it
            for child in dict.fromkeys([*event.child_uuids, event.flowfile_uuid]):
                if child in inputs:
                    continue
                child_node = flowfile_node(child)
                edge(event_node, child_node, child)
                last.setdefault(child, child_node)
    lineage.nodes = list(nodes.values())
    lineage.edges = list(edges.values())
    return lineage
