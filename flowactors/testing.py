"""Running one processor as a test does: a NiFi-style ``ProcessorRunner``, on either engine.

The runner triggers the processor in this process through the engines' own session backend
(``EngineBackend``: the same commit order everywhere); what differs is where its queues and
repositories are, as between the engines:

* ``engine="in-process"`` (the default): ``ConnectionQueue`` objects and repository objects in this
  process: the in-memory ones for fast unit tests, or durable ones the test hands in;
* ``engine="stateless"``: the stateless engine's backend (``flowactors.engine.stateless_engine``): queues
  and content in memory, each ``run`` iteration one trigger whose state, provenance and
  ``commit_async`` callbacks are kept only when it succeeded;
* ``engine="ray"``: the Ray engine's components: the queues hosted in an executor actor, reached
  with ``HostedLink`` as a task in another executor reaches them, the FlowFile repository (LMDB)
  and provenance in their actors, commits through an executor's log, claim files on disk. Runners on
  Ray share one set of these actors (``RayComponents``, each runner with queues of its own), so a
  test pays no actor start-up; ``ProcessorRunner.close_ray`` ends them (``tests/conftest.py``).

A test that asserts through the runner (``output``, ``queues``, ``events``, ``read``) runs
unchanged on both; ``LocalBackend`` is the in-process engine's backend.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from typing import Any, Mapping, Sequence

from flowactors.engine.actors.ray_hosting import RayHosting
from flowactors.engine.session_backend import EngineBackend
from flowactors.engine.errors import TriggerFailed
from flowactors.engine.executor import Executor
from flowactors.engine.log_writer import LogWriter
from flowactors.engine.placement import ExecutorPlan
from flowactors.engine.queues.connection import ConnectionQueue, QueueConfig, QueueHost
from flowactors.engine.services import ServiceHost
from flowactors.engine.repository_services import FlowFileRepositoryService, ProvenanceRepositoryService
from flowactors.engine.stateless_engine import STATELESS_ENGINE, InMemoryStateStore, StatelessBackend, TriggerLog
from flowactors.engine.transport import HostedLink, Link, ObjectLink, QueueObjectLink, call_now, resolve
from flowactors.sdk.flow import Flow
from flowactors.sdk.processor import ProcessContext, Processor
from flowactors.sdk.services import ControllerService, ServiceNode, dependency_order, flow_problems
from flowactors.sdk.session import ProcessSession
from flowactors.sdk.session_contract import CommitBatch, IdAllocator
from flowactors.sdk.settings import Settings
from flowactors.sdk.state import ProcessorState
from repositories.content import FileSystemContentRepository, InMemoryContentRepository
from repositories.flowfile import FlowFileRepository, InMemoryFlowFileRepository, WriteAheadFlowFileRepository
from repositories.model import (ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, new_flowfile_uuid,
                               now_millis)
from repositories.provenance import InMemoryProvenanceRepository, ProvenanceRepository
from repositories.provenance.event import ProvenanceEvent
from repositories.provenance.outbox import take_from_outbox

INPUT = "input"


class LocalBackend(EngineBackend):
    """The engines' session backend over repository objects and ``ConnectionQueue`` objects in this
    process: the same commit order and the same commit path as every durable engine (each session
    one transaction of an ``LogWriter``, its events kept in the log's provenance outbox), with
    plain calls for transport. Provenance follows the log at once: after each commit the events
    move from the outbox to ``provenance_repository`` (on an engine the provenance service takes
    them a moment later, ``ProvenanceRepositoryService.follow_log``)."""

    def __init__(self, *, content, flowfile_repository: FlowFileRepository,
                 provenance_repository: ProvenanceRepository | None,
                 queues: dict[str, ConnectionQueue], inputs: Sequence[str],
                 destinations: Mapping[str, list[str]], always_sync: bool = False,
                 component: tuple[str, str, str] = ("test", "test", "test")):
        super().__init__(
            content=content, queues={q: QueueObjectLink(queue) for q, queue in queues.items()},
            log=LogWriter(flowfile_repository, provenance_repository is not None),
            inputs=inputs, destinations=destinations, always_sync=always_sync, component=component)
        self.flowfile_repository = flowfile_repository
        self.provenance_repository = provenance_repository

    def commit(self, batch: CommitBatch) -> None:
        try:
            super().commit(batch)
        finally:  # a commit decided but not delivered still reached the log, events and all
            if self.provenance_repository is not None and batch.events:
                take_from_outbox(self.flowfile_repository, self.provenance_repository)


class QueueView:
    """One of a runner's queues, the same on both engines (calls through its link)."""

    def __init__(self, link: Link):
        self.link = link

    def listing(self, limit: int) -> list[FlowFile]:
        return call_now(self.link, QueueHost.listing, limit)

    def poll(self, max_count: int) -> tuple[list[FlowFile], list[FlowFile]]:
        """Take up to ``max_count`` (now in flight), and the expired ones: ``(taken, expired)``."""
        return call_now(self.link, QueueHost.poll, max_count, 0.0)

    def offer(self, flowfiles: list[FlowFile]) -> Any:
        return call_now(self.link, QueueHost.offer, flowfiles)

    def requeue(self, flowfiles: list[FlowFile]) -> Any:
        return call_now(self.link, QueueHost.requeue, flowfiles)

    def status(self) -> dict:
        return call_now(self.link, QueueHost.status)

    @property
    def count(self) -> int:
        return self.status()["count"]

    @property
    def queued(self) -> int:
        return self.status()["queued"]

    @property
    def in_flight(self) -> int:
        return self.status()["in_flight"]


class ProcessorRunner:
    """Runs one processor against an input queue and one output queue per relationship.

    >>> runner = ProcessorRunner(UpdateAttribute, {"color": "blue"})
    >>> runner.enqueue(b"hello", {"filename": "a.txt"})
    >>> runner.run()
    >>> [f.attributes["color"] for f in runner.output("success")]
    ['blue']

    ``engine``: see the module docstring; ``default_engine`` is what a runner made without one uses.
    ``incoming_connection``: what ``ProcessContext.has_incoming_connection`` says (NiFi's
    ``TestRunner.setIncomingConnection``): False to run a processor that allows input as the source
    it is without a connection (the runner's input queue is there either way).
    """

    default_engine = "in-process"
    #: the Ray components every runner on Ray shares (started by the first one)
    _ray: "RayComponents | None" = None

    def __init__(self, processor_type: type[Processor], properties: Mapping[str, Any] | None = None, *,
                 content=None, flowfile_repository=None, provenance_repository=None,
                 auto_terminate: Sequence[str] = (), batch_size: int = 1000, name: str | None = None,
                 penalty_duration: float = 30.0, validate: bool = True, engine: str | None = None,
                 services: Mapping[str, tuple[type[ControllerService], Mapping[str, Any]]] | None = None,
                 incoming_connection: bool = True):
        self.processor_type = processor_type
        self.properties = _texts(properties or {})
        service_nodes = {name: ServiceNode(name, kind, _texts(values)) for name, (kind, values) in (services or {}).items()}
        if validate:
            problems = processor_type.validate_properties(self.properties) + flow_problems(
                service_nodes, [(name or processor_type.__name__, processor_type, self.properties)])
            if problems:
                raise ValueError(f"{processor_type.__name__} is not valid: " + "; ".join(problems))
        #: the controller services the processor may use (``services``: name -> (type, properties)),
        #: enabled here and now, as the engines enable them before a processor starts
        self.services = ServiceHost(dependency_order(service_nodes.values(), service_nodes.values()),
                                    service_nodes.values())
        self.services.enable()
        self.engine = engine or self.default_engine
        self.processor = processor_type()
        self.name = name or processor_type.__name__
        relationships = [r for r in processor_type.relationship_names(self.properties) if r not in auto_terminate]
        if self.engine == "in-process":
            self.content = content if content is not None else InMemoryContentRepository()
            self.flowfile_repository = flowfile_repository or InMemoryFlowFileRepository()
            self.provenance_repository = provenance_repository or InMemoryProvenanceRepository()
            self.component_id = f"test/{self.name}"
            self.queue_ids = {q: q for q in [INPUT, *relationships]}
            self.backend: EngineBackend = LocalBackend(
                content=self.content, flowfile_repository=self.flowfile_repository,
                provenance_repository=self.provenance_repository,
                queues={q: ConnectionQueue(QueueConfig(q, 0, 0)) for q in self.queue_ids}, inputs=[INPUT],
                destinations={r: [r] for r in relationships},
                component=(self.component_id, self.name, processor_type.__name__))
            self._provenance: Link = ObjectLink(self.provenance_repository)
        elif self.engine == "stateless":
            if flowfile_repository is not None:
                raise ValueError("the stateless engine keeps no FlowFile repository")
            self.content = content if content is not None else InMemoryContentRepository()
            self.provenance_repository = provenance_repository or InMemoryProvenanceRepository()
            self.component_id = f"test/{self.name}"
            self.queue_ids = {q: q for q in [INPUT, *relationships]}
            stateless = StatelessBackend(
                log=TriggerLog(InMemoryStateStore(), self.provenance_repository), inputs=[INPUT],
                destinations={r: [r] for r in relationships},
                component=(self.component_id, self.name, processor_type.__name__))
            stateless.use(self.content, {q: ConnectionQueue(QueueConfig(q, 0, 0)) for q in self.queue_ids})
            self.backend = stateless
            self._provenance = ObjectLink(self.provenance_repository)
        elif self.engine == "ray":
            if flowfile_repository is not None or provenance_repository is not None:
                raise ValueError("a runner on the Ray engine uses the engine's own FlowFile and provenance "
                                 "repositories (actors); pass those only with engine='in-process'")
            ray_components = ProcessorRunner._ray = ProcessorRunner._ray or RayComponents()
            unique = f"{self.name}-{uuid.uuid4().hex[:8]}"
            self.component_id = f"test/{unique}"
            self.queue_ids = {q: f"{unique}.{q}" for q in [INPUT, *relationships]}
            self.content = content if content is not None else ray_components.content  # claims: this process
            self._provenance = ray_components.provenance
            self.backend = EngineBackend(
                content=self.content, queues=ray_components.host_queues(list(self.queue_ids.values())),
                log=ray_components.log, inputs=[self.queue_ids[INPUT]],
                destinations={r: [self.queue_ids[r]] for r in relationships},
                component=(self.component_id, self.name, processor_type.__name__))
        else:
            raise ValueError(f"engine must be 'in-process', 'stateless' or 'ray', not {self.engine!r}")
        self.queues = {q: QueueView(self.backend.queues[real]) for q, real in self.queue_ids.items()}
        self.context = ProcessContext(
            name=self.name, processor_type=processor_type.__name__, descriptors=processor_type.descriptor_map(),
            values=self.properties, relationships=list(processor_type.relationships_for(self.properties)),
            batch_size=batch_size, state=ProcessorState(self.component_id, self.backend),
            stateless_engine=STATELESS_ENGINE, has_incoming_connection=incoming_connection)
        self.services.give_to(self.context)
        self.ids = IdAllocator(self.backend)
        self.penalty_duration = penalty_duration
        self.scheduled = False
        self.errors: list[BaseException] = []

    @classmethod
    def close_ray(cls) -> None:
        """End the Ray components the runners on Ray shared, if any were started."""
        if cls._ray is not None:
            cls._ray.close()
            cls._ray = None

    # ------------------------------------------------------------------ input
    def enqueue(self, content: bytes = b"", attributes: Mapping[str, str] | None = None) -> FlowFile:
        """Put a FlowFile with this content on the input queue (committed like any other)."""
        writer = self.content.writer()
        claim = writer.write_bytes(content) if content else None
        writer.flush(sync=False)
        new_uuid = new_flowfile_uuid()
        now = now_millis()
        attrs = {"filename": new_uuid, "path": "./", **(attributes or {}), "uuid": new_uuid}
        flowfile = FlowFile(self.ids.take(), new_uuid, attrs, claim, now, now, queue_date=now)
        if self.engine != "stateless":  # whose trigger log keeps nothing between triggers
            self.backend.log.record(CommitBatch(updates=[QueuedFlowFile(flowfile, self.queue_ids[INPUT])],
                                                new_claims=writer.created()))
        writer.close()
        self.queues[INPUT].offer([flowfile])
        return flowfile

    def lose_content(self, flowfile: FlowFile) -> FlowFile:
        """Make a queued FlowFile's content unreadable (its claim now names a claim file that does
        not exist), as a deleted or unreadable claim file would: for a processor's I/O error path."""
        queue = self.queues[INPUT]
        taken, _ = queue.poll(queue.count)
        lost = flowfile._replace(claim=ContentClaim(ResourceClaim("default", "0", "gone"), 0, flowfile.size))
        queue.requeue([lost if f.uuid == flowfile.uuid else f for f in taken])
        return lost

    # ------------------------------------------------------------------ running
    def new_session(self) -> ProcessSession:
        return ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self.ids,
                              penalty_duration=self.penalty_duration)

    def run(self, iterations: int = 1, *, stop: bool = True, raise_errors: bool = True) -> None:
        """Trigger ``iterations`` times, as the runtime does: commit, or roll back on an exception."""
        if not self.scheduled:
            self.processor.on_scheduled(self.context)
            self.scheduled = True
        for _ in range(iterations):
            session = self.new_session()
            try:
                with self.context.state.bound_to(session):
                    self.processor.on_trigger(self.context, session)
                session.commit()
            except Exception as err:
                session.rollback()
                self._trigger_ended(err)
                self.errors.append(err)
                if raise_errors:
                    raise
            else:
                self._trigger_ended(None)
        if stop:
            self.processor.on_stopped(self.context)
            self.scheduled = False

    def _trigger_ended(self, err: Exception | None) -> None:
        """On the stateless engine a run iteration is a trigger: keep it or forget it."""
        if self.engine == "stateless":
            if err is None:
                self.backend.log.acknowledge()
            else:
                self.backend.log.fail(TriggerFailed(f"{type(err).__name__}: {err}", "exception"))

    # ------------------------------------------------------------------ output
    def output(self, relationship: str) -> list[FlowFile]:
        """FlowFiles transferred to a relationship so far (penalized ones included), left queued."""
        return self.queues[relationship].listing(1_000_000)

    def contents(self, relationship: str) -> list[bytes]:
        return [self.content.read_bytes(f.claim) for f in self.output(relationship)]

    def read(self, flowfile: FlowFile) -> bytes:
        return self.content.read_bytes(flowfile.claim)

    @property
    def input_count(self) -> int:
        return self.queues[INPUT].count

    def events(self) -> list[ProvenanceEvent]:
        """This runner's provenance events, oldest first."""
        return [e for e in call_now(self._provenance, ProvenanceRepositoryService.events, 0, 1_000_000) if e.component_id == self.component_id]


def _texts(values: Mapping[str, Any]) -> dict[str, str]:
    """Property values as text (booleans as NiFi writes them)."""
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in values.items()}


def enable_service(service_type: type[ControllerService], properties: Mapping[str, Any] | None = None, *,
                   services: Mapping[str, tuple[type[ControllerService], Mapping[str, Any]]] | None = None,
                   name: str | None = None) -> ControllerService:
    """A controller service validated and enabled as a flow's engine enables it, with the services
    it names (``services``: name -> (type, properties)) enabled first: for a service's tests.
    ``ValueError`` lists what is not valid; ``ServiceEnableError`` when it refuses to enable."""
    nodes = {n: ServiceNode(n, kind, _texts(values)) for n, (kind, values) in (services or {}).items()}
    own = ServiceNode(name or service_type.__name__, service_type, _texts(properties or {}))
    nodes[own.path] = own
    problems = flow_problems(nodes, [])
    if problems:
        raise ValueError(f"{service_type.__name__} is not valid: " + "; ".join(problems))
    host = ServiceHost(dependency_order([own], nodes.values()), nodes.values())
    host.enable()
    return host.instances[own.path]


class RayComponents:
    """The Ray engine's components that runners on Ray share: the FlowFile repository and
    provenance actors over a temporary folder, one executor actor hosting every runner's queues,
    and one executor log (as an executor's tasks share one)."""

    def __init__(self) -> None:
        settings = Settings()
        self.flow = Flow(f"runners-{uuid.uuid4().hex[:8]}")
        self.root = tempfile.mkdtemp(prefix="flowactors-runners-")
        self.hosting = RayHosting()
        name = self.flow.name
        self.flowfiles = self.hosting.repository("flowfile", self.root, settings, name)
        self.provenance = self.hosting.repository("provenance", self.root, settings, name)
        self.executor = self.hosting.executor(f"{name}.executor", ExecutorPlan(0, "executor"), self.flow, self.root,
                                              settings, {}, self.flowfiles, self.provenance)
        resolve([self.flowfiles.call(FlowFileRepositoryService.open), self.provenance.call(ProvenanceRepositoryService.open)])
        call_now(self.provenance, ProvenanceRepositoryService.follow_log)  # the commits' events, from the log's outbox
        self.content = FileSystemContentRepository.from_settings(self.root, settings)
        self.wal = WriteAheadFlowFileRepository.from_settings(self.root, settings, shared=True)
        self.log = LogWriter(self.wal, True, flow=name)

    def host_queues(self, queue_ids: list[str]) -> dict[str, Link]:
        call_now(self.executor, Executor.host_queues, {q: QueueConfig(q, 0, 0, flow=self.flow.name) for q in queue_ids})
        return {q: HostedLink(self.executor, q) for q in queue_ids}

    def close(self) -> None:
        self.log.close()
        self.wal.close()
        try:
            call_now(self.provenance, ProvenanceRepositoryService.close)  # first: it takes the last events from the log
            call_now(self.flowfiles, FlowFileRepositoryService.close)
        finally:
            self.hosting.close()
            shutil.rmtree(self.root, ignore_errors=True)
