"""The lineage of a FlowFile that crossed nodes (a flow run with ``nodes=``, seed 002).

Each node keeps its own provenance (``<repository>/nodes/<name>/provenance``). A load-balanced
transfer leaves a SEND (and DROP) on the sending node, whose transit URI names the receiving
node (``flowactors://<node>/<flow>/<connection>``), and a RECEIVE on the receiving node whose
``source_system_flowfile_id`` is the sent FlowFile's uuid and whose transit URI names the sender.
``cluster_lineage`` starts on whichever node knows the FlowFile, and follows those pairs both ways,
node to node, into one ``Lineage``: node and event ids are prefixed with the node's name
(``n1/event:12``), component names say the node (``fetch @ n1``), and an edge joins each SEND to
the RECEIVE it became. Read on a stopped flow's repository folder, as ``flowactors lineage``;
what a node's damaged event files kept from it is in the lineage's ``warnings``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from urllib.parse import urlparse

from flowactors.engine.cluster.topology import node_repository, read_topology
from flowactors.ops.provenance_tools import StoppedRepository
from flowactors.sdk.settings import Settings
from repositories.provenance.lineage import Lineage, LineageEdge

#: transfers followed at most (a FlowFile sent back and forth is followed this many hops)
MAX_HOPS = 64


def cluster_nodes(repository: str | os.PathLike) -> list[str]:
    """The nodes a repository folder holds a part of: its topology, and node folders beside it."""
    names = [n.name for n in read_topology(repository) or []]
    folder = Path(repository) / "nodes"
    if folder.is_dir():
        names += sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in names)
    return names


def _transit_node(uri: str | None) -> str | None:
    if not uri:
        return None
    parsed = urlparse(uri)
    return parsed.netloc or None if parsed.scheme == "flowactors" else None


def cluster_lineage(repository: str | os.PathLike, flowfile_uuid: str, settings: Settings | None = None) -> Lineage:
    """See the module docstring; an empty ``Lineage`` when no node knows the FlowFile."""
    nodes = cluster_nodes(repository)
    opened: dict[str, StoppedRepository] = {}

    def provenance(node: str):
        if node not in opened:
            opened[node] = StoppedRepository(node_repository(repository, node), settings,
                                             purpose="flowactors lineage")
        return opened[node].provenance

    merged = Lineage(flowfile_uuid)
    try:
        start = next((n for n in nodes if provenance(n).search(flowfile_uuid=flowfile_uuid, limit=1)), None)
        if start is None:
            return merged
        pending, done, links = [(start, flowfile_uuid)], set(), []
        while pending and len(done) < MAX_HOPS:
            node, uuid = pending.pop()
            if (node, uuid) in done:
                continue
            done.add((node, uuid))
            part = provenance(node).lineage(uuid)
            _add(merged, node, part)
            for event in part.events:
                other = _transit_node(event.transit_uri)
                if other is None or other not in nodes:
                    continue
                if event.event_type == "SEND":
                    for received in provenance(other).search(event_type="RECEIVE", limit=None):
                        if received.source_system_flowfile_id == event.flowfile_uuid:
                            links.append((f"{node}/event:{event.event_id}", f"{other}/event:{received.event_id}",
                                          received.flowfile_uuid))
                            pending.append((other, received.flowfile_uuid))
                elif event.event_type == "RECEIVE" and event.source_system_flowfile_id:
                    for sent in provenance(other).search(flowfile_uuid=event.source_system_flowfile_id,
                                                         event_type="SEND", limit=None):
                        links.append((f"{other}/event:{sent.event_id}", f"{node}/event:{event.event_id}",
                                      event.flowfile_uuid))
                    pending.append((other, event.source_system_flowfile_id))
        known = {n.id for n in merged.nodes}
        merged.edges += [LineageEdge(a, b, uuid) for a, b, uuid in dict.fromkeys(links) if a in known and b in known]
        return merged
    finally:
        for node, repo in opened.items():
            merged.warnings += [f"node {node}: {warning}" for warning in repo.warnings()]
            repo.close()


def _add(merged: Lineage, node: str, part: Lineage) -> None:
    """One node's lineage into the merged one, its ids and names saying the node."""
    seen = {n.id for n in merged.nodes}
    for n in part.nodes:
        renamed = dataclasses.replace(n, id=f"{node}/{n.id}",
                                      component_name=f"{n.component_name} @ {node}" if n.component_name else None)
        if renamed.id not in seen:
            merged.nodes.append(renamed)
            seen.add(renamed.id)
    merged.edges += [dataclasses.replace(e, source=f"{node}/{e.source}", target=f"{node}/{e.target}")
                     for e in part.edges]
    merged.events += part.events
    merged.truncated = merged.truncated or part.truncated
