"""The cluster's nodes as a flow knows them, and the live view every node shares.

A node has a *name* and the Ray *resource* that places actors on it. A Ray node started with a
custom resource ``flowactors-node:<name>`` (``ray start --resources='{"flowactors-node:east-1": 1}'``)
is the node ``<name>``, whatever its address; any other node is named by its IP address and placed
by Ray's own ``node:<ip>`` resource. Placing by resource, not by node id, is what lets a node that
died come back: Ray restarts the node's actors on whichever Ray node carries the resource again.

The *topology* (the nodes, in order) is persisted with the flow in ``<repository>/cluster.json``
(docs/formats/cluster-topology.md), so a whole-cluster restart finds the same nodes and
partitioned data is not rebalanced. A node is *connected* while Ray says a node with its resource
is alive; the *primary* node (which runs primary-node-only processors) is the first connected node
of the topology.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import orjson

from flowactors.engine.errors import TopologyError

NODE_RESOURCE_PREFIX = "flowactors-node:"
#: the topology file's format version (docs/formats/cluster-topology.md)
TOPOLOGY_VERSION = 1
TOPOLOGY_FILE = "cluster.json"
#: how much of its node's resource an actor asks for (Ray needs a positive amount to place by it)
RESOURCE_SHARE = 0.001


@dataclass(frozen=True)
class ClusterNode:
    name: str
    resource: str  # the Ray resource that places an actor on this node


def ray_nodes(entries: Iterable[dict] | None = None) -> dict[str, tuple[ClusterNode, bool]]:
    """Every node Ray knows (``ray.nodes()``): name -> (node, alive). A name that Ray lists twice
    (a node that died and came back) is alive if any of its entries is."""
    if entries is None:
        import ray  # heavy: the CLI's provenance commands import this module without running a flow

        entries = ray.nodes()
    found: dict[str, tuple[ClusterNode, bool]] = {}
    for entry in entries:
        resources = entry.get("Resources") or {}
        labels = [r[len(NODE_RESOURCE_PREFIX):] for r in resources if r.startswith(NODE_RESOURCE_PREFIX)]
        if labels:
            node = ClusterNode(labels[0], NODE_RESOURCE_PREFIX + labels[0])
        else:
            address = entry.get("NodeManagerAddress", "")
            node = ClusterNode(address, f"node:{address}")
        alive = bool(entry.get("Alive")) or found.get(node.name, (node, False))[1]
        found[node.name] = (node, alive)
    return found


def resolve_nodes(spec: Any, known: dict[str, tuple[ClusterNode, bool]]) -> list[ClusterNode]:
    """The nodes ``spec`` asks for among the alive ones: ``"all"``, a count (the first N by name),
    or a list of names. A ``TopologyError`` names what is missing."""
    alive = sorted((node for node, up in known.values() if up), key=lambda n: n.name)
    if spec == "all":
        return alive
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 1 or spec > len(alive):
            raise TopologyError(f"nodes={spec} asks for {spec} node(s); the Ray cluster has {len(alive)} alive "
                                f"({', '.join(n.name for n in alive) or 'none'})")
        return alive[:spec]
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(n, str) for n in spec):
        by_name = {node.name: node for node, up in known.values() if up}
        missing = [n for n in spec if n not in by_name]
        if missing:
            raise TopologyError(
                f"node(s) {', '.join(missing)} are not alive in the Ray cluster (alive: "
                f"{', '.join(sorted(by_name)) or 'none'}); a node is named by its 'flowactors-node:<name>' "
                f"resource, else by its IP address")
        if len(set(spec)) != len(spec):
            raise TopologyError(f"nodes lists a node twice: {list(spec)}")
        return [by_name[n] for n in spec]
    raise TopologyError(f"nodes must be 'all', a number of nodes or a list of node names, not {spec!r}")


def read_topology(repository: str | Path) -> list[ClusterNode] | None:
    """The topology persisted in ``repository`` (None if the flow never ran on several nodes)."""
    path = Path(repository) / TOPOLOGY_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise _damaged(path, f"not JSON: {err}") from None
    if not isinstance(data, dict):
        raise _damaged(path, "not a JSON object")
    version = data.get("flowactors_cluster")
    if version != TOPOLOGY_VERSION:
        raise TopologyError(f"{path} has format version {version!r}; this flowactors reads version "
                            f"{TOPOLOGY_VERSION} (docs/formats/cluster-topology.md)")
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not all(
            isinstance(n, dict) and isinstance(n.get("name"), str) and isinstance(n.get("resource"), str)
            for n in nodes):
        raise _damaged(path, "'nodes' must be a list of objects each with a 'name' and a 'resource' string")
    return [ClusterNode(n["name"], n["resource"]) for n in nodes]


def _damaged(path: Path, problem: str) -> TopologyError:
    return TopologyError(f"{path} is damaged ({problem}); it records the nodes the flow ran on. Restore it from "
                         f"a backup, or delete it to let the flow take the nodes it is given (partitioned "
                         f"FlowFiles may then move to other nodes)")


def write_topology(repository: str | Path, flow: str, nodes: Sequence[ClusterNode]) -> None:
    """Persist the topology (a temporary file renamed over the old one: never half written)."""
    path = Path(repository) / TOPOLOGY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"flowactors_cluster": TOPOLOGY_VERSION, "flow": flow,
            "nodes": [{"name": n.name, "resource": n.resource} for n in nodes]}
    temporary = path.with_suffix(".json.tmp")
    with open(temporary, "wb") as out:
        out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def node_repository(repository: str | Path, node: str) -> str:
    """A node's own repository folder: ``<repository>/nodes/<name>`` on that node's disk."""
    return str(Path(repository) / "nodes" / node.replace("/", "_"))


@dataclass
class ClusterView:
    """What one node knows of the cluster while the flow runs, shared by its executor's tasks and
    updated by the coordinator (``Executor.set_cluster``): the topology, which nodes are
    connected, which is primary. Reads take no lock (each field is replaced whole)."""

    local: str
    nodes: tuple[str, ...]
    connected: frozenset[str] = frozenset()
    primary: str | None = None
    #: node -> a link to each connection's receiver there (``Executor.receive_transfer``)
    receivers: dict[str, Any] = field(default_factory=dict)
    #: the name of the actor keeping cluster-scoped state (``cluster_state.ClusterStateService``)
    cluster_state: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, nodes: Sequence[str] | None = None, connected: Iterable[str] | None = None,
               primary: str | None = None, receivers: dict[str, Any] | None = None) -> None:
        with self._lock:
            if nodes is not None:
                self.nodes = tuple(nodes)
            if connected is not None:
                self.connected = frozenset(connected)
            if primary is not None:
                self.primary = primary
            if receivers is not None:
                self.receivers = dict(receivers)

    def describe(self) -> dict:
        """What this view holds, for the status: the nodes, which are connected, the primary, and
        the actor each connection's transfers to a node go to."""
        def actor(link: Any) -> str:
            return getattr(link, "name", "") or repr(link)

        return {"nodes": list(self.nodes), "connected": sorted(self.connected), "primary": self.primary,
                "receivers": {node: {c: actor(link) for c, link in links.items()}
                              for node, links in self.receivers.items()}}

    @property
    def is_primary(self) -> bool:
        return self.primary == self.local

    def reachable(self, node: str) -> bool:
        return node == self.local or node in self.connected


def partition_id(connection_id: str, node: str) -> str:
    """The queue id of a connection's partition for ``node`` (on the node that sends to it)."""
    return f"{connection_id}@{node}"


def partition_of(queue_id: str) -> tuple[str, str] | None:
    """(connection, node) of a partition's queue id, None for a connection's own queue."""
    connection, at, node = queue_id.rpartition("@")
    return (connection, node) if at and connection else None


def connection_of(queue_id: str) -> str | None:
    """The connection a partition's queue id belongs to, None for a connection's own queue."""
    parsed = partition_of(queue_id)
    return parsed[0] if parsed else None
