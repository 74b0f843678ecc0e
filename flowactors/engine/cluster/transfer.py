"""Moving a load-balanced connection's FlowFiles to the node they were assigned to (seed 002).

On the sending node each partition (``<connection>@<node>``, a queue beside the connection's own)
has a ``LoadBalanceSender``: a processor task of the engine's own, in the executor that hosts the
partition, so every step is an ordinary session with the ordinary commit order. It takes a batch,
reads its content and calls the receiving node's executor that hosts the connection's queue
(``Executor.receive_transfer``), which runs a ``TransferReceiver`` session there: the content is
written into that node's content repository and the FlowFiles (new uuids, the sender's attributes,
a RECEIVE event naming the sender's FlowFile) are committed to that node's write-ahead log and
queued. Only once that call returned does the sender's session remove its copies, with a SEND and a
DROP event each. Either side may die at any point: before the receiver's commit nothing was taken
there and the sender still holds everything (rolled back, sent again); after it, the sender's copy
is sent again only if the sender died before its own commit, so a transfer in flight may be
delivered twice, never lost.

What a sender does when its node is out of reach follows the strategy: ``round-robin`` data fails
over (sent back to the connection, whose partitioner now skips that node); ``single-node`` and
``partition-by-attribute`` data waits for its node. A node no longer in the topology is treated as
failing over for every strategy: its partition drains into the connection again, where the
current topology decides.

A transfer is an actor call: Ray passes its arguments inline when small and through its object
store otherwise, node to node, never through the driver (bench scenario 12 compares it with a
plain object-store transfer).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol, Sequence

import orjson
import zstandard

from flowactors.engine.errors import TransferRefused
from flowactors.engine.cluster.topology import ClusterView
from flowactors.engine.queues.connection import QueueHost
from flowactors.engine.transport import P, R, Link, Method, call_now, component_lost, finished, resolve
from flowactors.sdk.processor import ProcessContext, Processor, Relationship
from flowactors.sdk.session import ProcessSession
from repositories.model import FlowFile

#: a transfer's payload layout (in memory between two nodes; never on disk)
PAYLOAD_VERSION = 1
#: seconds a transfer may take before its node is treated as out of reach
TRANSFER_TIMEOUT = 30.0
#: seconds a sender waits before it tries a node that was out of reach again
RETRY_PAUSE = 1.0
FAILOVER = "failover"
#: FlowFiles a transfer carries at most (a sender task's batch size)
TRANSFER_BATCH = 1000
#: content bytes a transfer carries at most (about: the batch is sized by the FlowFiles seen so far)
TRANSFER_BYTES = 8 * 1024 * 1024
#: what a receiver answers when its connection is under back pressure (nothing was taken)
REFUSED_FULL = -1
#: attributes the receiving session makes afresh (NiFi gives a received FlowFile a new uuid)
_OWN_ATTRIBUTES = ("uuid",)


def sender_name(connection_id: str, node: str) -> str:
    """The name a partition's sender has in status and provenance."""
    return f"load-balance:{connection_id}@{node}"


class TransferReceiving(Protocol):
    """What the executor hosting a load-balanced connection's queue on another node offers its
    senders (``Executor.transfer_room``, ``Executor.receive_transfer``)."""

    async def transfer_room(self, connection_id: str) -> int:
        """How many FlowFiles may be sent to the connection now."""

    async def receive_transfer(self, connection_id: str, payload: tuple) -> int:
        """Commit a transfer there; the room left."""


def encode_transfer(sender: str, compression: str, flowfiles: Sequence[FlowFile],
                    contents: Sequence[bytes]) -> tuple:
    """The payload of one transfer: (version, sender node, compression, header, content). The
    header is JSON: per FlowFile its uuid, attributes and content length."""
    header = orjson.dumps([[f.uuid, dict(f.attributes), len(c)] for f, c in zip(flowfiles, contents)])
    content = b"".join(contents)
    if compression in ("attributes", "attributes-and-content"):
        header = zstandard.compress(header, 3)
    if compression == "attributes-and-content":
        content = zstandard.compress(content, 1)
    return (PAYLOAD_VERSION, sender, compression, header, content)


def decode_transfer(payload: tuple) -> tuple[str, list[tuple[str, dict, bytes]]]:
    """(sender node, [(source uuid, attributes, content), ...]) of a payload."""
    version, sender, compression, header, content = payload
    if version != PAYLOAD_VERSION:
        raise TransferRefused(f"a transfer from node {sender} has payload version {version}; this node reads "
                              f"version {PAYLOAD_VERSION}: run the same flowactors on every node")
    if compression in ("attributes", "attributes-and-content"):
        header = zstandard.decompress(header)
    if compression == "attributes-and-content":
        content = zstandard.decompress(content)
    records, offset = [], 0
    view = memoryview(content)
    for source, attributes, length in orjson.loads(header):
        records.append((source, attributes, bytes(view[offset:offset + length])))
        offset += length
    return sender, records


class LoadBalanceSender(Processor):
    """Sends one partition of a load-balanced connection to its node (see the module docstring).
    Built by the executor that hosts the partition, which hands it the cluster view (``bind``)."""

    relationships = [Relationship(FAILOVER, "FlowFiles whose node is out of reach, back to the connection "
                                            "(round robin, or a node that left the topology)")]
    input_required = True

    def bind(self, connection_id: str, node: str, strategy: str, compression: str, view: ClusterView,
             flow: str) -> None:
        self.connection_id, self.node, self.strategy = connection_id, node, strategy
        self.compression, self.view, self.flow = compression, view, flow
        self._unreachable_until = 0.0
        #: FlowFiles the connection over there takes before back pressure, as it last said
        self._room = 0
        #: the mean content size of what was sent last (sizes the next batch to ``TRANSFER_BYTES``;
        #: until something was sent, FlowFiles are assumed large: 16 a transfer)
        self._mean_size = TRANSFER_BYTES // 16

    def _ask(self, receiver: Link, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        call = receiver.call(method, *args, **kwargs)
        if not finished(call, TRANSFER_TIMEOUT):
            raise TimeoutError(f"node {self.node} did not answer within {TRANSFER_TIMEOUT:g} s")
        return resolve([call])[0]

    def _fails_over(self) -> bool:
        view = self.view
        return self.node not in view.nodes or (self.strategy == "round-robin" and not view.reachable(self.node))

    def on_trigger(self, context: ProcessContext, session) -> None:
        if self._fails_over():
            flowfiles = session.get_batch()
            if flowfiles:
                session.transfer_batch(flowfiles, FAILOVER)
            return
        receiver = self.view.receivers.get(self.node, {}).get(self.connection_id)
        if receiver is None or not self.view.reachable(self.node) or time.monotonic() < self._unreachable_until:
            context.yield_()  # the data waits for its node
            return
        try:
            if self._room <= 0:  # back pressure over there when last heard of: ask again
                self._room = self._ask(receiver, TransferReceiving.transfer_room, self.connection_id)
            if self._room <= 0:
                context.yield_()
                return
            flowfiles = session.get_batch(min(self._room, context.batch_size, TRANSFER_BYTES // self._mean_size or 1))
            if not flowfiles:
                return
            contents = session.read_bytes_batch(flowfiles)
            self._mean_size = max(1, sum(map(len, contents)) // len(contents))
            payload = encode_transfer(self.view.local, self.compression, flowfiles, contents)
            started = time.monotonic()
            taken = self._room = self._ask(receiver, TransferReceiving.receive_transfer, self.connection_id, payload)
        except Exception as err:
            if isinstance(err, TimeoutError) or component_lost(err):
                self._unreachable_until = time.monotonic() + RETRY_PAUSE
                self._room = 0
                if self.strategy == "round-robin" and session.inputs:  # out of reach: to the other nodes
                    session.transfer_batch(session.inputs, FAILOVER)
                else:  # the data waits for its node: back into the partition as it was (no penalty)
                    session.rollback()
                    context.yield_()
                return
            raise  # rolled back: the partition keeps them for the next try
        if taken == REFUSED_FULL:  # back pressure over there: they wait here
            self._room = 0
            session.rollback()
            context.yield_()
            return
        millis = int((time.monotonic() - started) * 1000)
        uri = f"flowactors://{self.node}/{self.flow}/{self.connection_id}"
        session.provenance.send_batch(flowfiles, uri, duration=millis)
        session.remove_batch(flowfiles)


class TransferReceiver:
    """Takes transfers in on the receiving node: one session a transfer over a backend whose
    only destination is the connection's own queue here (never partitioned again). Transfers to
    one connection are taken one at a time (a backend carries one session's delivery)."""

    def __init__(self, flow: str, connection_id: str, context: ProcessContext, backend: Any, ids: Any):
        self.flow = flow
        self.connection_id = connection_id
        self.context = context
        self.backend = backend
        self.ids = ids
        self.component_id = f"{flow}/load-balance:{connection_id}"
        self._lock = threading.Lock()

    def room(self) -> int:
        """FlowFiles the connection here takes before back pressure (``QueueState.room_objects``,
        0 when it is over its size threshold)."""
        state = call_now(self.backend.queues[self.connection_id], QueueHost.state)
        return 0 if state.full else state.room_objects

    def receive(self, payload: tuple) -> int:
        """Commit the transfer here (content, log, queue); returns the room left here (``room``),
        or ``REFUSED_FULL`` (nothing taken) while the connection here is under back pressure:
        a connection's back pressure holds across the nodes, as NiFi's does (a sender sends
        at most the room it was last told of)."""
        if self.room() <= 0:
            return REFUSED_FULL
        sender, records = decode_transfer(payload)
        uri = f"flowactors://{sender}/{self.flow}/{self.connection_id}"
        with self._lock:
            session = ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self.ids)
            flowfiles = session.create_batch(len(records))
            flowfiles = session.put_attributes_batch(
                flowfiles, [{k: v for k, v in r[1].items() if k not in _OWN_ATTRIBUTES} for r in records])
            flowfiles = session.write_bytes_batch(flowfiles, [r[2] for r in records])
            session.provenance.receive_batch(flowfiles, uri, source_system_flowfile_ids=[r[0] for r in records])
            session.transfer_batch(flowfiles, "success")
            session.commit()
            self.backend.finish_delivery()
        return max(0, self.room())


class ReceivePort(Processor):
    """The component a ``TransferReceiver``'s sessions run as (its provenance names it)."""

    relationships = [Relationship("success", "FlowFiles received from another node")]
    input_required = False
