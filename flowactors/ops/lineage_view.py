"""A lineage as a person reads it: from the FlowFile asked for, with large forks and joins collapsed.

``condense(lineage, uuid)`` turns a ``Lineage`` (every FlowFile and event of a family: 2,007 nodes
for a 1,000-line split and merge) into a ``LineageView`` of a few nodes:

* **focus**: the node of the FlowFile asked for; every other node is its ``ancestor`` (a path
  leads from it to the focus), ``descendant`` (a path leads from the focus to it) or ``relative``
  (neither: a sibling, another parent of a JOIN below).
* **groups**: a node's children that are alike (FlowFiles; or events of one type by one
  component) and more than ``collapse_over`` of them are shown ``shown`` at a time and the
  rest become one group node ("… 997 more splits"); the same for a node's parents (a JOIN's
  inputs). The FlowFile asked for and, before relatives, its ancestors and descendants are the ones
  kept in view. A group also takes what hangs off its members alone: a node whose parents are all
  in groups, or whose children all are, joins their group; groups that share a node are one. So a
  split then merged is "FORK -> 3 splits + … 997 more splits -> JOIN", one group both ways.
* every lineage edge becomes a view edge between the visible nodes (or groups) at its ends; edges
  inside a group vanish, parallel ones are counted.

A group's id is stable (``group:<node id>/children`` or ``/parents``: the node that first
collapsed it), and ``condense(..., expand={group id})`` shows its members, so a page can expand a
group on click by asking again. ``LineageView.to_dict()`` is the JSON form (described there).
``to_text`` prints the view: the focus first, then its ancestors (nearest first) and its
descendants, each a tree, every node once ("(see above)" after).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Iterable

from repositories.provenance.lineage import Lineage, LineageNode

#: siblings kept in view when a group collapses the rest
SHOWN = 3
#: siblings alike beyond this many collapse (so a group always stands for at least 3)
COLLAPSE_OVER = 5

RELATIONS = ("focus", "ancestor", "descendant", "relative")
_PREFERENCE = {"focus": 0, "ancestor": 1, "descendant": 1, "relative": 2}   # who stays in view
_NOUNS = {"FORK": "splits", "CLONE": "clones", "REPLAY": "replays", "JOIN": "inputs"}


@dataclass
class ViewNode:
    """A node of the view: a lineage node (``kind`` flowfile or event, ``node`` set) or a group."""

    id: str
    kind: str                                  # "flowfile", "event" or "group"
    label: str
    relation: str                              # one of RELATIONS
    node: LineageNode | None = None            # the lineage node (not for a group)
    count: int = 0                             # a group: how many siblings it stands for
    members: list[str] = field(default_factory=list)   # a group: every lineage node id it hides
    description: str = ""                      # a group: what it collapsed, in words


@dataclass
class ViewEdge:
    source: str
    target: str
    flowfile_uuid: str | None                  # None when it stands for edges of several FlowFiles
    count: int = 1                             # lineage edges it stands for


@dataclass
class LineageView:
    """The condensed graph (see the module docstring); ``nodes`` keep the lineage's order."""

    flowfile_uuid: str
    focus: str | None
    nodes: list[ViewNode]
    edges: list[ViewEdge]
    lineage_nodes: int                         # nodes of the whole family
    lineage_events: int
    truncated: bool

    @property
    def groups(self) -> list[ViewNode]:
        return [n for n in self.nodes if n.kind == "group"]

    def to_dict(self) -> dict[str, Any]:
        """The view as plain JSON values (``json.dumps`` takes it as is)::

            {"flowfile_uuid": str,            # the FlowFile asked for
             "focus": str | None,             # its node id (None: no event names it)
             "lineage_nodes": int, "lineage_events": int,   # the whole family's size
             "truncated": bool,               # the family has more events than were read
             "nodes": [{"id": str, "kind": "flowfile" | "event" | "group", "label": str,
                        "relation": "focus" | "ancestor" | "descendant" | "relative",
                        # flowfile and event nodes:
                        "flowfile_uuid": str, "event_id": int | None, "event_type": str | None,
                        "timestamp": int | None (ms since the epoch), "component_id": str | None,
                        "component_name": str | None, "relationship": str | None,
                        # group nodes:
                        "count": int (siblings it stands for), "description": str,
                        "members": [lineage node id, ...] (all it hides, in lineage order)}],
             "edges": [{"source": node id, "target": node id,
                        "flowfile_uuid": str | None (None: several), "count": int}]}

        Node ids are the lineage's (``flowfile:<uuid>``, ``event:<id>``; a cluster lineage prefixes
        the Ray node's name) or a group's (``group:<node id>/children|parents``); pass a group's id
        to ``condense(..., expand=...)`` to see its members.
        """
        nodes = []
        for n in self.nodes:
            item: dict[str, Any] = {"id": n.id, "kind": n.kind, "label": n.label, "relation": n.relation}
            if n.node is not None:
                item.update(flowfile_uuid=n.node.flowfile_uuid, event_id=n.node.event_id,
                            event_type=str(n.node.event_type) if n.node.event_type else None,
                            timestamp=n.node.timestamp, component_id=n.node.component_id,
                            component_name=n.node.component_name, relationship=n.node.relationship)
            else:
                item.update(count=n.count, description=n.description, members=list(n.members))
            nodes.append(item)
        return {"flowfile_uuid": self.flowfile_uuid, "focus": self.focus, "lineage_nodes": self.lineage_nodes,
                "lineage_events": self.lineage_events, "truncated": self.truncated, "nodes": nodes,
                "edges": [{"source": e.source, "target": e.target, "flowfile_uuid": e.flowfile_uuid,
                           "count": e.count} for e in self.edges]}


def condense(lineage: Lineage, flowfile_uuid: str | None = None, *, shown: int = SHOWN,
             collapse_over: int = COLLAPSE_OVER, expand: Iterable[str] = ()) -> LineageView:
    """The view of ``lineage`` from ``flowfile_uuid`` (default: the uuid it was read for).

    ``expand``: group ids (from an earlier view) to show in full. ``shown < 1`` or
    ``collapse_over < shown`` is refused (``ValueError``)."""
    if shown < 1 or collapse_over < shown:
        raise ValueError(f"need 1 <= shown <= collapse_over, not shown={shown}, collapse_over={collapse_over}")
    uuid = flowfile_uuid or lineage.flowfile_uuid
    expand = set(expand)
    skip: set[str] = set()
    while True:   # expanding a group that merged several seeds skips all of them
        view, seeds = _condense(lineage, uuid, shown, collapse_over, skip)
        more = {key for group_id, keys in seeds.items() if group_id in expand for key in keys} - skip
        if not more:
            return view
        skip |= more


def _condense(lineage: Lineage, uuid: str, shown: int, collapse_over: int,
              skip: set[str]) -> tuple[LineageView, dict[str, list[str]]]:
    ids = [n.id for n in lineage.nodes]
    rank = {node_id: i for i, node_id in enumerate(ids)}
    by_id = {n.id: n for n in lineage.nodes}
    parents: dict[str, list[str]] = {i: [] for i in ids}
    children: dict[str, list[str]] = {i: [] for i in ids}
    edge_uuid: dict[tuple[str, str], str] = {}
    for e in lineage.edges:
        if (e.source, e.target) not in edge_uuid:
            edge_uuid[(e.source, e.target)] = e.flowfile_uuid
            parents[e.target].append(e.source)
            children[e.source].append(e.target)
    focus = _focus(lineage.nodes, uuid)
    relation = _relations(ids, focus, parents, children)
    groups = _Groups()

    def hidden(node_id: str) -> bool:
        return node_id in groups.of

    def collapse(anchor: str, side: str, neighbours: list[str]) -> None:
        """Collapse each class of alike neighbours beyond ``collapse_over`` (kept in view: the
        focus, then its ancestors and descendants, then nodes of FlowFiles in view; lineage order)."""
        key = f"group:{anchor}/{side}"
        if key in skip or len(neighbours) <= collapse_over:
            return
        classes: dict[tuple, list[str]] = {}
        for n in neighbours:
            classes.setdefault(_likeness(by_id[n]), []).append(n)
        in_view = {by_id[n].flowfile_uuid for n in ids if by_id[n].kind == "flowfile" and not hidden(n)}
        pair = (lambda n: (anchor, n)) if side == "children" else (lambda n: (n, anchor))
        collapsed = 0
        for alike in classes.values():
            if len(alike) <= collapse_over:
                continue
            order = sorted(alike, key=lambda n: (hidden(n), _PREFERENCE[relation[n]],
                                                 edge_uuid[pair(n)] not in in_view, rank[n]))
            kept = {n for n in order[:shown] if not hidden(n)}
            folded = [n for n in alike if n not in kept]
            if folded:
                collapsed += 1
                groups.seed(key if collapsed == 1 else f"{key}/{collapsed}", by_id[anchor], side, folded)

    for node_id in _topological(ids, parents, children, rank):
        if node_id != focus and parents[node_id] and all(hidden(p) for p in parents[node_id]):
            groups.join(node_id, parents[node_id])
        if hidden(node_id):
            continue
        collapse(node_id, "parents", parents[node_id])
        collapse(node_id, "children", children[node_id])
    # what hangs off groups alone (all parents, or all children, hidden) joins them, to a fixpoint
    pending = [n for n in ids if hidden(n)]
    while pending:
        around = pending.pop()
        for node_id in (*parents[around], *children[around]):
            if hidden(node_id) or node_id == focus:
                continue
            for side in (parents[node_id], children[node_id]):
                if side and all(hidden(n) for n in side):
                    groups.join(node_id, side)
                    pending.append(node_id)
                    break
    return _assemble(lineage, uuid, focus, relation, groups, by_id), groups.seed_keys()


class _Groups:
    """Which group hides which node: a union-find over group ids, with each group's seeds (the
    group made first names a merge)."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}          # node id -> group id (maybe merged since: see root)
        self._parent: dict[str, str] = {}
        self._made: dict[str, int] = {}
        self.seeds: dict[str, list[tuple[str, LineageNode, str, int]]] = {}  # root -> (key, anchor, side, count)

    def root(self, group_id: str) -> str:
        while self._parent[group_id] != group_id:
            self._parent[group_id] = self._parent[self._parent[group_id]]
            group_id = self._parent[group_id]
        return group_id

    def _union(self, a: str, b: str) -> str:
        a, b = self.root(a), self.root(b)
        if a == b:
            return a
        first, second = (a, b) if self._made[a] <= self._made[b] else (b, a)
        self._parent[second] = first
        self.seeds[first] += self.seeds.pop(second)
        return first

    def seed(self, key: str, anchor: LineageNode, side: str, members: list[str]) -> None:
        self._parent[key] = key
        self._made[key] = len(self._made)
        self.seeds[key] = [(key, anchor, side, len(members))]
        for n in members:
            self.of[n] = self._union(self.of[n], key) if n in self.of else key

    def join(self, node_id: str, neighbours: list[str]) -> None:
        """Hide ``node_id`` in the group of its hidden neighbours (merging theirs, and its own)."""
        group_id = self.of.get(node_id, self.of[neighbours[0]])
        for n in neighbours:
            group_id = self._union(group_id, self.of[n])
        self.of[node_id] = group_id

    def seed_keys(self) -> dict[str, list[str]]:
        return {root: [s[0] for s in seeds] for root, seeds in self.seeds.items()}


def _focus(nodes: list[LineageNode], uuid: str) -> str | None:
    """The node of the FlowFile ``uuid`` (its flowfile node; an event of it if it has none)."""
    flowfile = next((n.id for n in nodes if n.kind == "flowfile" and n.flowfile_uuid == uuid), None)
    return flowfile or next((n.id for n in nodes if n.flowfile_uuid == uuid), None)


def _relations(ids: list[str], focus: str | None, parents: dict[str, list[str]],
               children: dict[str, list[str]]) -> dict[str, str]:
    relation = dict.fromkeys(ids, "relative")
    if focus is None:
        return relation
    for name, step in (("ancestor", parents), ("descendant", children)):
        stack = list(step[focus])
        while stack:
            node_id = stack.pop()
            if relation[node_id] == "relative":
                relation[node_id] = name
                stack.extend(step[node_id])
    relation[focus] = "focus"
    return relation


def _topological(ids: list[str], parents: dict[str, list[str]], children: dict[str, list[str]],
                 rank: dict[str, int]) -> list[str]:
    """Parents before children, ties in lineage order (the graph is acyclic: edges follow event ids)."""
    waiting = {i: len(parents[i]) for i in ids}
    ready = [(rank[i], i) for i in ids if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, node_id = heapq.heappop(ready)
        order.append(node_id)
        for child in children[node_id]:
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, (rank[child], child))
    return order


def _likeness(node: LineageNode) -> tuple:
    """Siblings that collapse together: FlowFiles; or events of one type by one component."""
    if node.kind == "flowfile":
        return ("flowfile",)
    return ("event", str(node.event_type), node.component_id)


def _assemble(lineage: Lineage, uuid: str, focus: str | None, relation: dict[str, str], groups: _Groups,
              by_id: dict[str, LineageNode]) -> LineageView:
    shown_as = {n: groups.root(g) for n, g in groups.of.items()}
    members: dict[str, list[str]] = {}
    for n in lineage.nodes:
        if n.id in shown_as:
            members.setdefault(shown_as[n.id], []).append(n.id)
    nodes: list[ViewNode] = []
    for n in lineage.nodes:
        group_id = shown_as.get(n.id)
        if group_id is None:
            nodes.append(ViewNode(n.id, n.kind, n.label, relation[n.id], n))
        elif members[group_id][0] == n.id:
            nodes.append(_group_node(group_id, members[group_id], groups.seeds[group_id], relation, by_id))
    edges: dict[tuple[str, str], ViewEdge] = {}
    for e in lineage.edges:
        source, target = shown_as.get(e.source, e.source), shown_as.get(e.target, e.target)
        if source == target:
            continue
        edge = edges.get((source, target))
        if edge is None:
            edges[(source, target)] = ViewEdge(source, target, e.flowfile_uuid)
        else:
            edge.count += 1
            if edge.flowfile_uuid != e.flowfile_uuid:
                edge.flowfile_uuid = None
    return LineageView(uuid, focus, nodes, list(edges.values()), len(lineage.nodes),
                       sum(n.kind == "event" for n in lineage.nodes), lineage.truncated)


def _group_node(group_id: str, members: list[str], seeds: list[tuple[str, LineageNode, str, int]],
                relation: dict[str, str], by_id: dict[str, LineageNode]) -> ViewNode:
    count = max(s[3] for s in seeds)
    _, anchor, side, _ = seeds[0]
    flowfiles = sum(by_id[m].kind == "flowfile" for m in members)
    if flowfiles:
        noun = _NOUNS.get(str(anchor.event_type), "FlowFiles") if anchor.kind == "event" else "FlowFiles"
    else:
        noun = f"{by_id[members[0]].event_type} events"
    description = (f"{count:,} {noun}: {side} of {anchor.label}, collapsed "
                   f"({flowfiles:,} FlowFiles and {len(members) - flowfiles:,} events)")
    rel = next((r for r in ("ancestor", "descendant") if any(relation[m] == r for m in members)), "relative")
    return ViewNode(group_id, "group", f"… {count:,} more {noun}", rel, count=count, members=members,
                    description=description)


# ---------------------------------------------------------------------- text


def to_text(view: LineageView) -> str:
    """The focus first; then ``ancestors`` (nearest first: a tree upwards) and ``descendants`` (a
    tree downwards), every view node once; a last line says what the view leaves out."""
    if view.focus is None:
        return f"no provenance events name FlowFile {view.flowfile_uuid}"
    labels = {n.id: n.label for n in view.nodes}
    up: dict[str, list[str]] = {n.id: [] for n in view.nodes}
    down: dict[str, list[str]] = {n.id: [] for n in view.nodes}
    for e in view.edges:
        up[e.target].append(e.source)
        down[e.source].append(e.target)
    lines = [labels[view.focus]]
    shown = {view.focus}
    for title, step in (("ancestors (nearest first)", up), ("descendants", down)):
        if not step[view.focus]:
            lines.append(f"{title}: none")
            continue
        lines.append(f"{title}:")
        _tree(step[view.focus], step, labels, shown, lines)
    relatives = sum(n.relation == "relative" for n in view.nodes)
    groups = view.groups
    notes = [f"{len(view.nodes):,} of the family's {view.lineage_nodes:,} nodes shown"]
    if groups:
        notes.append(f"{len(groups)} group{'s' * (len(groups) > 1)} collapse "
                     f"{sum(len(g.members) for g in groups):,} nodes")
    if relatives:
        notes.append(f"{relatives:,} relatives (neither ancestors nor descendants) only in the picture")
    if view.truncated:
        notes.append("truncated: the family has more events than were read")
    lines.append("(" + "; ".join(notes) + ")")
    return "\n".join(lines)


def _tree(roots: list[str], step: dict[str, list[str]], labels: dict[str, str], shown: set[str],
          lines: list[str]) -> None:
    stack = [(node_id, i == len(roots) - 1, "") for i, node_id in reversed(list(enumerate(roots)))]
    while stack:
        node_id, last, prefix = stack.pop()
        branch = "└── " if last else "├── "
        if node_id in shown:
            lines.append(f"{prefix}{branch}{labels[node_id]} (see above)")
            continue
        shown.add(node_id)
        lines.append(f"{prefix}{branch}{labels[node_id]}")
        below = prefix + ("    " if last else "│   ")
        kids = step[node_id]
        for i in range(len(kids) - 1, -1, -1):
            stack.append((kids[i], i == len(kids) - 1, below))
