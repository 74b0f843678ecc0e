"""Which node each FlowFile offered to a load-balanced connection goes to (seed 002's strategies).

Decided in the producer's commit before the write-ahead-log transaction (``partition_batch``,
called by ``EngineBackend.commit``), so the log records each FlowFile in its partition's queue
(``<connection>@<node>``, or the connection's own queue for this node) and a restart finds it
there, waiting for the same node:

* ``round-robin``: the nodes in turn, skipping those not connected; data already waiting for a node
  that is lost is sent on to the others by that partition's sender (``transfer``);
* ``single-node``: every FlowFile to the topology's first node; it waits while that node is away;
* ``partition-by-attribute``: by consistent hashing of the attribute's value over the topology's
  nodes (``hash_ring``), connected or not: a key always goes to one node, and waits for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from flowactors.engine.cluster.hash_ring import HashRing
from flowactors.engine.errors import FlowStartError
from flowactors.engine.cluster.topology import ClusterView, partition_id
from flowactors.engine.queues.connection import QueueConfig
from repositories.model import FlowFile, FlowFileBatch, QueuedFlowFile

#: distinct attribute values whose node a partitioner remembers (the ring is cheap, not free)
_CACHE_LIMIT = 65_536


class Partitioner:
    """The strategy of one load-balanced connection, on one node."""

    def __init__(self, connection_id: str, strategy: str, view: ClusterView, attribute: str | None = None):
        if strategy not in ("round-robin", "single-node", "partition-by-attribute"):
            raise ValueError(f"no partitioner for load balance strategy {strategy!r}")
        self.connection_id = connection_id
        self.strategy = strategy
        self.attribute = attribute
        self.view = view
        self._turn = 0
        self._ring: HashRing | None = None
        self._cache: dict[str | None, str] = {}

    def queue_for(self, node: str) -> str:
        return self.connection_id if node == self.view.local else partition_id(self.connection_id, node)

    def assign(self, flowfiles: Sequence[FlowFile]) -> list[str]:
        """The queue id each FlowFile goes to, in order."""
        view = self.view
        if self.strategy == "round-robin":
            nodes = [n for n in view.nodes if view.reachable(n)] or [view.local]
            queues = [self.queue_for(n) for n in nodes]
            start, count = self._turn, len(queues)
            self._turn = (start + len(flowfiles)) % count
            return [queues[(start + i) % count] for i in range(len(flowfiles))]
        if self.strategy == "single-node":
            return [self.queue_for(view.nodes[0])] * len(flowfiles)
        ring = self._ring
        if ring is None or ring.nodes != view.nodes:
            ring = self._ring = HashRing(view.nodes)
            self._cache.clear()
        cache, attribute = self._cache, self.attribute
        assert attribute is not None  # a flow's validation: partition-by-attribute names its attribute
        out = []
        for flowfile in flowfiles:
            value = flowfile[2].get(attribute)
            queue = cache.get(value)
            if queue is None:
                queue = self.queue_for(ring.node_for(value))
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[value] = queue
            out.append(queue)
        return out


def partition_batch(batch, partitioners: Mapping[str, Partitioner]) -> None:
    """Move a commit's offers to load-balanced connections into their partitions, and their log
    records with them (``CommitBatch``, changed in place, before the log sees it)."""
    moved: dict[str, str] = {}
    offers = batch.offers
    for queue_id in [q for q in offers if q in partitioners]:
        flowfiles = offers.pop(queue_id)
        for flowfile, target in zip(flowfiles, partitioners[queue_id].assign(flowfiles)):
            offers.setdefault(target, FlowFileBatch()).append(flowfile)
            if target != queue_id:
                moved[flowfile[1]] = target
    if moved:
        batch.updates = [QueuedFlowFile(u[0], moved.get(u[0][1], u[1])) if u[1] in partitioners else u
                         for u in batch.updates]


def plan_partitions(flow, placement, cluster: dict, configs: Mapping[str, QueueConfig], settings) -> dict:
    """Add each load-balanced connection's partitions to a node's placement: a queue
    ``<connection>@<node>`` and its sender for every other node of ``cluster["partition_nodes"]``
    (the topology, and nodes that left it while data still waited for them), in the executor
    that hosts the connection's own queue. Returns the partitions' queue configs (the
    connection's, swapping at ``partition_swap_threshold``)."""
    home = placement.queue_home()
    out = {}
    for connection in (c for c in flow.connections if c.load_balanced):
        if connection.id not in home:
            raise FlowStartError(f"connection '{connection.id}' is load-balanced, which needs its queue in an "
                                 f"executor (placement 'shared', the default), not an actor of its own")
        executor = placement.executors[home[connection.id]]
        for node in cluster["partition_nodes"]:
            if node == cluster["local"]:
                continue
            queue_id = partition_id(connection.id, node)
            out[queue_id] = replace(configs[connection.id], queue_id=queue_id,
                                    swap_threshold=settings.partition_swap_threshold,
                                    swap_batch_size=settings.partition_swap_batch_size)
            executor.queues.append(queue_id)
            executor.senders.append((connection.id, node))
    return out
