"""Running processors without Ray: a local session backend and a NiFi-style ``ProcessorRunner``.

``LocalBackend`` is the engines' own ``EngineBackend`` (same commit order: content, FlowFile
repository, then provenance and queues) with plain calls for transport, over any repository
implementations: the in-memory ones for fast unit tests, or the durable ones on a temporary directory.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from flowactors.engine.backend import DirectLog, EngineBackend
from flowactors.engine.transport import ObjectLink, QueueObjectLink
from flowactors.sdk.processor import ProcessContext, Processor
from flowactors.engine.queues.connection import ConnectionQueue, QueueConfig
from flowactors.sdk.session import ProcessSession, _Ids
from repositories.content import InMemoryContentRepository
from repositories.flowfile import InMemoryFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis
from repositories.provenance import InMemoryProvenanceRepository
from repositories.provenance.event import ProvenanceEvent

INPUT = "input"


class LocalBackend(EngineBackend):
    """The engines' session backend over repository objects and ``ConnectionQueue`` objects in this
    process: the same commit order as every engine, with plain calls for transport."""

    def __init__(self, *, content, flowfile_repository, provenance_repository,
                 queues: dict[str, ConnectionQueue], inputs: Sequence[str],
                 destinations: Mapping[str, list[str]], always_sync: bool = False,
                 component: tuple[str, str, str] = ("test", "test", "test")):
        super().__init__(
            content=content, queues={q: QueueObjectLink(queue) for q, queue in queues.items()},
            log=DirectLog(ObjectLink(flowfile_repository),
                          ObjectLink(provenance_repository) if provenance_repository is not None else None),
            inputs=inputs, destinations=destinations, always_sync=always_sync, component=component)


class ProcessorRunner:
    """Runs one processor against an input queue and one output queue per relationship.

    >>> runner = ProcessorRunner(UpdateAttribute, {"color": "blue"})
    >>> runner.enqueue(b"hello", {"filename": "a.txt"})
    >>> runner.run()
    >>> [f.attributes["color"] for f in runner.output("success")]
    ['blue']
    """

    def __init__(self, processor_type: type[Processor], properties: Mapping[str, Any] | None = None, *,
                 content=None, flowfile_repository=None, provenance_repository=None,
                 auto_terminate: Sequence[str] = (), batch_size: int = 1000, name: str | None = None,
                 penalty_duration: float = 30.0, validate: bool = True):
        self.processor_type = processor_type
        self.properties = {k: ("true" if v is True else "false" if v is False else str(v))
                           for k, v in (properties or {}).items()}
        if validate:
            problems = processor_type.validate_properties(self.properties)
            if problems:
                raise ValueError(f"{processor_type.__name__} is not valid: " + "; ".join(problems))
        self.processor = processor_type()
        self.name = name or processor_type.__name__
        self.content = content if content is not None else InMemoryContentRepository()
        self.flowfile_repository = flowfile_repository or InMemoryFlowFileRepository()
        self.provenance_repository = provenance_repository or InMemoryProvenanceRepository()
        self.queues = {INPUT: ConnectionQueue(QueueConfig(INPUT, 0, 0))}
        destinations: dict[str, list[str]] = {}
        for rel in processor_type.relationship_names(self.properties):
            if rel not in auto_terminate:
                self.queues[rel] = ConnectionQueue(QueueConfig(rel, 0, 0))
                destinations[rel] = [rel]
        self.backend = LocalBackend(content=self.content, flowfile_repository=self.flowfile_repository,
                                    provenance_repository=self.provenance_repository, queues=self.queues,
                                    inputs=[INPUT], destinations=destinations,
                                    component=(f"test/{self.name}", self.name, processor_type.__name__))
        self.context = ProcessContext(
            name=self.name, processor_type=processor_type.__name__, descriptors=processor_type.descriptor_map(),
            values=self.properties, relationships=list(processor_type.relationships_for(self.properties)),
            batch_size=batch_size)
        self.ids = _Ids(self.backend)
        self.penalty_duration = penalty_duration
        self.scheduled = False
        self.errors: list[BaseException] = []

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
        self.flowfile_repository.commit([QueuedFlowFile(flowfile, INPUT)], [], writer.created())
        writer.close()
        self.queues[INPUT].offer([flowfile])
        return flowfile

    # ------------------------------------------------------------------ running
    def new_session(self) -> ProcessSession:
        return ProcessSession(self.context, self.backend, component_id=f"test/{self.name}", ids=self.ids,
                              penalty_duration=self.penalty_duration)

    def run(self, iterations: int = 1, *, stop: bool = True, raise_errors: bool = True) -> None:
        """Trigger ``iterations`` times, as the runtime does: commit, or roll back on an exception."""
        if not self.scheduled:
            self.processor.on_scheduled(self.context)
            self.scheduled = True
        for _ in range(iterations):
            session = self.new_session()
            try:
                self.processor.on_trigger(self.context, session)
                session.commit()
            except Exception as err:
                session.rollback()
                self.errors.append(err)
                if raise_errors:
                    raise
        if stop:
            self.processor.on_stopped(self.context)
            self.scheduled = False

    # ------------------------------------------------------------------ output
    def output(self, relationship: str) -> list[FlowFile]:
        """FlowFiles transferred to a relationship so far (penalized ones included), left queued."""
        queue = self.queues[relationship]
        return queue.listing(queue.count)

    def contents(self, relationship: str) -> list[bytes]:
        return [self.content.read_bytes(f.claim) for f in self.output(relationship)]

    def read(self, flowfile: FlowFile) -> bytes:
        return self.content.read_bytes(flowfile.claim)

    @property
    def input_count(self) -> int:
        return self.queues[INPUT].count

    def events(self) -> list[ProvenanceEvent]:
        return self.provenance_repository.events(0, 1_000_000)
