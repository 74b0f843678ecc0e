"""The executor: hosts many processor tasks and the connection queues beside them.

As NiFi's JVM runs hundreds of processors on a thread pool, an executor runs each hosted
processor task's trigger loop on a thread of its own and keeps each hosted queue on its event
loop. A task reaches a queue hosted here with a local call (``LoopLink``: no pickling, no actor
call) and one hosted elsewhere through that executor's ``call_hosted`` (``HostedLink``: on Ray one
batched actor call); the hosted tasks each write their commits to the log in this process (``LogWriter``).
Which executor hosts what is ``flowactors.engine.placement``'s decision; the controller creates
the executors through its engine's hosting (an actor each on Ray, ``ExecutorActor``; objects on
one event loop in process), hands each its plan, then starts them.

Guarantees are the tasks' and queues' own (``EngineBackend``, ``QueueHost``): hosting changes the
transport, never the commit order.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

from flowactors.engine import STOP_TIMEOUT, gc_policy
from flowactors.engine.session_backend import EngineBackend
from flowactors.engine.cluster.cluster_state import ClusterState
from flowactors.engine.cluster.partitioning import Partitioner
from flowactors.engine.cluster.topology import ClusterView, connection_of, partition_id
from flowactors.engine.cluster.transfer import (FAILOVER, LoadBalanceSender, ReceivePort, TransferReceiver,
                                                TRANSFER_BATCH, TransferRefused, sender_name)
from flowactors.engine.log_writer import LogWriter
from flowactors.engine.placement import ExecutorPlan
from flowactors.engine.process_deaths import DeathGuard
from flowactors.engine.services import ServiceHost
from flowactors.engine.stateless_engine import STATELESS_ENGINE
from flowactors.engine.task import ProcessorTask, make_context, task_key
from flowactors.engine.transport import Link, LoopLink
from flowactors.sdk.flow import Flow, ProcessorNode
from flowactors.sdk.session_contract import IdAllocator
from flowactors.engine.queues.connection import QueueConfig, QueueHost
from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository


class Executor:
    """Hosts the processor tasks and queues of one ``ExecutorPlan``; ``ExecutorActor`` is its actor."""

    def __init__(self, flow: Flow, plan: ExecutorPlan, root: str, settings: Settings,
                 queue_configs: dict[str, QueueConfig], flowfile_repository: Link,
                 provenance_repository: Link | None, cluster: dict | None = None,
                 process_tasks: list[str] | None = None):
        # the hosted tasks wait on Ray from threads of their own, never on the event loop, which
        # Ray's warning about blocking calls in an async actor cannot tell apart
        os.environ["RAY_WARN_BLOCKING_GET_INSIDE_ASYNC"] = "0"
        gc_policy.tune_own_process()
        self.flow = flow
        self.plan = plan
        self.root = root
        self.settings = settings
        self.flowfile_repository = flowfile_repository
        self.provenance_repository = provenance_repository
        #: the keys of every task of the process this executor is in (None: its own; the
        #: in-process engine's executors share one), whose deaths are settled together (process_deaths)
        self.process_tasks = process_tasks
        #: a new value each time this executor is built: Ray rebuilds a killed actor with the same
        #: arguments, and the controller tells a restart from a survivor by it (``health``)
        self.incarnation = uuid.uuid4().hex
        self.queues: dict[str, QueueHost] = {}
        self._host({q: queue_configs[q] for q in plan.queues})
        self.tasks: dict[str, ProcessorTask] = {}
        self.log: LogWriter | None = None  # the log the hosted tasks write to (``wire``)
        self._wal: WriteAheadFlowFileRepository | None = None  # the log, written from this process
        self._counters: dict = {}  # the tasks' counters and metrics, kept across a repair (``reset``)
        #: on a flow across several nodes: this node's view of the cluster (``set_cluster``), the
        #: receivers of the load-balanced connections hosted here (``receive_transfer``)
        self.view = ClusterView(**cluster) if cluster else None
        self.started = False
        self.receivers: dict[str, TransferReceiver] = {}
        #: the controller services the hosted processors use (``flowactors.engine.services``):
        #: enabled by ``wire``, disabled by ``stop`` (a repair's stop and wire enable them afresh)
        self.services: ServiceHost | None = None

    def __repr__(self) -> str:
        """What the Ray dashboard and log prefixes show for this actor: what it hosts (its class's
        name while it is being built: Ray shows an actor whose ``__init__`` failed by it too)."""
        if "plan" not in self.__dict__:
            return f"{type(self).__name__}(not built)"
        tasks = ", ".join(f"{name}#{i}" if self.flow.processors[name].concurrent_tasks > 1 else name
                          for name, i in self.plan.tasks)
        return f"{self.flow.name}.{self.plan.name}[{tasks}; queues: {', '.join(self.plan.queues) or '-'}]"

    # ------------------------------------------------------------------ wiring and lifecycle
    async def wire(self, queues: dict[str, Link], run: int | None = None,
                   shared_services: dict[str, Link] | None = None) -> None:
        """Create the hosted processor tasks. ``queues``: every connection's link as the
        controller holds it (a ``HostedLink`` into some executor, or a queue of its own); ``run``:
        the log's run the tasks commit under (``WriteAheadFlowFileRepository.begin_run``);
        ``shared_services``: the flow's shared controller services, by path (``SharedService``)."""
        loop = asyncio.get_running_loop()
        content = FileSystemContentRepository.from_settings(self.root, self.settings)
        if self._wal is None:  # kept across repairs: the log's file outlives its actor
            own = WriteAheadFlowFileRepository.open_here(Path(self.root) / "flowfile") is None
            self._wal = await loop.run_in_executor(
                None, lambda: WriteAheadFlowFileRepository.from_settings(self.root, self.settings, shared=True))
            # the FlowFile repository's service applies the journal (in another process on Ray;
            # in this one the instance is the service's, and the commits apply it as they always did)
            self._wal.applied_elsewhere = own
        services = self.services
        if services is None:
            used = self.flow.services_used_by(sorted({name for name, _ in self.plan.tasks}))
            services = ServiceHost(used, self.flow.services.values(), shared_services)
            await loop.run_in_executor(None, services.enable)   # raises ServiceEnableError: the start fails
            self.services = services
        log = self.log = LogWriter(self._wal, self.provenance_repository is not None, flow=self.flow.name, run=run)
        counted, self._counters = self._counters, {}

        def link(queue_id: str) -> Link:
            return LoopLink(self.queues[queue_id], loop) if queue_id in self.queues else queues[queue_id]

        partitioners = self._partitioners()

        def backend_for(node: ProcessorNode, inputs: list[str], destinations: dict[str, list[str]],
                        back_pressure: bool = True, partition: bool = True) -> EngineBackend:
            targets = {q for ids in destinations.values() for q in ids}
            mine = {q: p for q, p in partitioners.items() if q in targets} if partition else {}
            used = set(inputs) | targets | {q for q in queues if connection_of(q) in mine}
            return EngineBackend(
                content=content, queues={q: link(q) for q in used}, log=log, inputs=inputs,
                destinations=destinations, always_sync=self.settings.always_sync,
                component=(f"{self.flow.name}/{node.name}", node.name, node.type.__name__), overlap_delivery=True,
                partitioners=mine, back_pressure=back_pressure)

        def add(task: ProcessorTask) -> ProcessorTask:
            if task.key in counted:  # a repair: the counts (and their metrics) go on
                task.backend.counters = task.counters = counted[task.key][0]
                task.metrics = counted[task.key][1]
            self.tasks[task.key] = task
            return task

        hosted = [task_key(name, instance) for name, instance in self.plan.tasks]
        guards = DeathGuard.open_tasks(self.root, self.flow.name, hosted, self.process_tasks or hosted)
        for name, instance in self.plan.tasks:
            node = self.flow.processors[name]
            backend = backend_for(node, [c.id for c in self.flow.connections_to(name)], self.flow.destinations(name))
            task = add(ProcessorTask(self.flow.name, node, instance, backend, self.settings))
            task.guard_with(guards[task.key])
            task.context.stateless_engine = STATELESS_ENGINE
            services.give_to(task.context)
            if self.view is not None and self.view.cluster_state:
                task.context.cluster_state = ClusterState(self.view.cluster_state, task.component_id)
        for connection_id, target in self.plan.senders:
            assert self.view is not None  # senders are planned only for a flow across several nodes
            connection = self._connection(connection_id)
            node = ProcessorNode(sender_name(connection_id, target), LoadBalanceSender, batch_size=TRANSFER_BATCH,
                                 yield_duration="100 ms")
            backend = backend_for(node, [partition_id(connection_id, target)], {FAILOVER: [connection_id]},
                                  back_pressure=False)
            sender = add(ProcessorTask(self.flow.name, node, 0, backend, self.settings)).processor
            assert isinstance(sender, LoadBalanceSender)  # the node's type
            sender.bind(connection_id, target, connection.load_balance, connection.load_balance_compression,
                        self.view, self.flow.name)
        self.receivers = {}
        for connection_id in (q for q in self.plan.queues if q in partitioners):
            node = ProcessorNode(f"load-balance:{connection_id}", ReceivePort)
            backend = backend_for(node, [], {"success": [connection_id]}, partition=False)  # it stays here
            self.receivers[connection_id] = TransferReceiver(self.flow.name, connection_id,
                                                             make_context(node, self.settings), backend,
                                                             IdAllocator(backend))

    def _connection(self, connection_id: str):
        return next(c for c in self.flow.connections if c.id == connection_id)

    def _partitioners(self) -> dict[str, Partitioner]:
        """A partitioner for each load-balanced connection, when the flow runs on several nodes."""
        if self.view is None:
            return {}
        return {c.id: Partitioner(c.id, c.load_balance, self.view, c.partition_attribute)
                for c in self.flow.connections if c.load_balanced}

    def _held_back(self, task: ProcessorTask) -> bool:
        """A primary-node-only processor's task on a node that is not the primary."""
        return task.node.primary_node_only and self.view is not None and not self.view.is_primary

    async def start(self) -> None:
        self.started = True
        for task in self.tasks.values():
            if not self._held_back(task):
                task.start()

    async def set_cluster(self, nodes: list[str] | None = None, connected: list[str] | None = None,
                          primary: str | None = None, receivers: dict | None = None) -> None:
        """The coordinator's news of the cluster (``flowactors.engine.cluster``): the topology,
        the connected nodes, the primary (primary-node-only tasks start or stop here), the
        receivers on the other nodes."""
        if self.view is None:
            return
        self.view.update(nodes, connected, primary, receivers)
        loop = asyncio.get_running_loop()
        for task in self.tasks.values():
            if task.node.primary_node_only:
                if self._held_back(task) and task.running:
                    await loop.run_in_executor(None, task.stop, STOP_TIMEOUT)
                elif not self._held_back(task) and not task.running and self.started:
                    task.start()

    async def transfer_room(self, connection_id: str) -> int:
        """How many FlowFiles another node may send to this connection now (its back pressure)."""
        return await asyncio.get_running_loop().run_in_executor(None, self._receiver(connection_id).room)

    def _receiver(self, connection_id: str) -> TransferReceiver:
        receiver = self.receivers.get(connection_id)
        if receiver is None:
            raise TransferRefused(f"{self!r} takes no transfers for connection {connection_id!r}")
        return receiver

    async def receive_transfer(self, connection_id: str, payload: tuple) -> int:
        """Another node's transfer of a load-balanced connection's FlowFiles, committed here
        (``flowactors.engine.cluster.transfer``); returns the room left here."""
        return await asyncio.get_running_loop().run_in_executor(None, self._receiver(connection_id).receive, payload)

    async def stop(self, timeout: float = STOP_TIMEOUT) -> list[dict]:
        """Stop every hosted task (each finishes its session and gives back what it fetched),
        waiting up to ``timeout`` seconds for each; a task still in ``on_trigger`` then is left
        behind (its status says ``running``): what its session holds was never committed."""
        loop = asyncio.get_running_loop()
        self.started = False
        for task in self.tasks.values():
            task.request_stop()
        # joined off the event loop: a stopping task may still need its local queues
        statuses = list(await asyncio.gather(*(loop.run_in_executor(None, task.stop, timeout)
                                               for task in self.tasks.values())))
        if self.log is not None:  # a task left behind that commits later is refused
            await loop.run_in_executor(None, self.log.close)
        self._close_guards()
        if self.services is not None and not any(task.running for task in self.tasks.values()):
            await loop.run_in_executor(None, self.services.disable)   # a task left behind keeps them
            self.services = None
        return statuses

    def _close_guards(self) -> None:
        """Close the tasks' death guards; a task left behind in ``on_trigger`` keeps its guard
        open but abandoned (a left-behind trigger is no process death, and its thread may still
        write: closing the file under it could let that write land in another file)."""
        for task in self.tasks.values():
            if task.guard is None:
                continue
            if task.running:
                task.guard.abandon()
            else:
                task.guard.close()
            task.guard = task.backend.guard = None

    async def health(self) -> dict:
        """What the controller's watch asks (``FlowController.watch``): which build of this
        executor answers, and what its tasks could not carry out (a repair is due)."""
        lost = [f"{key}: {task.backend.lost}" for key, task in self.tasks.items() if task.backend.lost]
        return {"incarnation": self.incarnation, "lost": lost}

    async def reset(self) -> None:
        """After ``stop``, before a repair's ``wire``: forget the tasks and empty every hosted queue
        (``QueueHost.reset``), to be refilled from the log."""
        for queue in self.queues.values():
            await queue.reset()
        self.log = None
        self._close_guards()
        self._counters = {key: (task.counters, task.metrics) for key, task in self.tasks.items()}
        self.tasks = {}

    # ------------------------------------------------------------------ calls from elsewhere
    async def host_queues(self, configs: dict[str, QueueConfig]) -> None:
        """Host these queues too, beside the planned ones (``ProcessorRunner`` on the Ray engine
        hosts each test's queues in one executor this way)."""
        self._host(configs)

    def _host(self, configs: dict[str, QueueConfig]) -> None:
        for queue_id, config in configs.items():
            if queue_id in self.queues:
                raise ValueError(f"{self.flow.name}.{self.plan.name} already hosts a queue {queue_id!r}")
            self.queues[queue_id] = QueueHost(config, self.root, self.flowfile_repository)

    async def call_hosted(self, queue_id: str, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` on a hosted queue (``QueueHost``), for a task or tool elsewhere."""
        queue = self.queues.get(queue_id)
        if queue is None:
            raise KeyError(f"{self!r} hosts no queue {queue_id!r}")
        return await getattr(queue, method)(*args, **kwargs)

    async def statuses(self) -> dict:
        """Every hosted task's and queue's status in one call (the controller's status poll)."""
        status = {"incarnation": self.incarnation, "tasks": [task.status() for task in self.tasks.values()],
                  "queues": {q: await queue.status() for q, queue in self.queues.items()},
                  "services": self.services.status() if self.services is not None else []}
        if self.view is not None:  # what this executor knows of the cluster (a flow on several nodes)
            status["cluster"] = self.view.describe()
        return status


