"""ProcessSession: a processor's only door to data, and the unit of work that commits durably.

A session collects what a processor does to a batch of FlowFiles: new versions of their
attributes, content written copy-on-write into the session's own claim files, where each one goes.
Nothing is visible outside the session until ``commit``, which follows the order the design fixes:
content flushed (and fsynced under ``always_sync``), then one write-ahead-log transaction, then
provenance events and the records offered to the downstream queues. ``rollback`` deletes the content
the session wrote and returns the FlowFiles it took to their queues, unchanged.

The session talks to the world through a ``SessionBackend`` (the engines share one,
``flowactors.engine.backend.EngineBackend``), so the same processor code runs on every engine and
in unit tests.
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Protocol, Sequence

from flowactors.sdk.processor import ProcessContext, Relationship
from flowactors.sdk.provenance_reporter import ProvenanceReporter
from repositories.model import (ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, new_flowfile_uuid,
                               new_flowfile_uuids, now_millis)
from repositories.provenance.event import FIELD_INDEX, ProvenanceEventType, claim_field, new_event_fields

CHUNK = 1024 * 1024
#: positions in an event's field array (``CommitBatch.events``)
_TYPE, _UUID, _CHILDREN = FIELD_INDEX["event_type"], FIELD_INDEX["flowfile_uuid"], FIELD_INDEX["child_uuids"]
_PREVIOUS_ATTRIBUTES, _PREVIOUS_CLAIM = FIELD_INDEX["previous_attributes"], FIELD_INDEX["previous_claim"]
_PREVIOUS_SIZE, _SOURCE_QUEUE = FIELD_INDEX["previous_size"], FIELD_INDEX["source_queue_id"]
_UPDATED_ATTRIBUTES, _UPDATED_CLAIM = FIELD_INDEX["updated_attributes"], FIELD_INDEX["updated_claim"]
_UPDATED_SIZE = FIELD_INDEX["updated_size"]


class FlowFileHandlingError(RuntimeError):
    """A processor broke the session's rules (e.g. left a FlowFile without a destination)."""


class CommitError(RuntimeError):
    """The write-ahead log refused the commit; nothing of the session became visible."""


class DeliveryError(RuntimeError):
    """The write-ahead log accepted the commit, but handing it on (provenance, queues) failed.

    The commit stands: nothing is rolled back, and the log restores the FlowFiles at the next start.
    """


class CommitInDoubt(DeliveryError):
    """The write-ahead log's process died during the commit call: the commit may or may not be
    in the log. Handled as accepted (nothing rolled back, no claim deleted, nothing requeued);
    the engine then repairs the flow from the log, which holds the truth. Content of a commit
    that did not land is deleted by the repair (no FlowFile in the log references it)."""


@dataclass
class CommitBatch:
    """Everything one session commit changes, handed to the backend in one call."""

    updates: list[QueuedFlowFile] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    new_claims: list[ResourceClaim] = field(default_factory=list)
    #: provenance events as field arrays (``repositories.provenance.event.new_event_fields``):
    #: many a commit, so no object each; encoded once, as one batch, by the log (``encode_batch``:
    #: shipping bytes is ~8x cheaper than pickling event objects)
    events: list[list] = field(default_factory=list)
    #: queue id -> FlowFiles to offer there (after the WAL transaction)
    offers: dict[str, list[FlowFile]] = field(default_factory=dict)
    #: queue id -> uuids taken from it that are now done with
    acknowledgements: dict[str, list[str]] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0


class SessionBackend(Protocol):
    """What a session needs from the runtime: its queues, the repositories and the flow's wiring."""

    content: Any  # ContentRepository or InMemoryContentRepository
    always_sync: bool

    def poll(self, max_count: int) -> list[tuple[str, FlowFile]]:
        """Take up to ``max_count`` FlowFiles from the processor's input queues: (queue id, FlowFile)."""

    def destinations(self, relationship: str) -> list[str]:
        """The queue ids a relationship is connected to (empty when auto-terminated)."""

    def next_ids(self, count: int) -> int:
        """The first of ``count`` fresh one-up FlowFile ids."""

    def commit(self, batch: CommitBatch) -> None:
        """Make the batch durable, then deliver it. Raises ``CommitError`` when nothing was written,
        ``DeliveryError`` when the log has it but delivering failed (never anything else)."""

    def requeue(self, returned: dict[str, list[FlowFile]]) -> None:
        """Give FlowFiles back to the queues they were taken from (rollback)."""


class _Record:
    """The session's view of one FlowFile: where it came from, what it is now, where it goes."""

    __slots__ = ("original", "current", "source_queue", "relationship", "queue", "removed",
                 "auto_terminated", "created", "attributes_modified", "content_modified", "parents")

    def __init__(self, original: FlowFile | None, current: FlowFile, source_queue: str | None):
        self.original = original
        self.current = current
        self.source_queue = source_queue
        self.relationship: str | None = None
        self.queue: str | None = None
        self.removed = False
        self.auto_terminated = False
        self.created = original is None
        self.attributes_modified = False
        self.content_modified = False
        self.parents: list[str] = []


class _Ids:
    """Hands out FlowFile ids from blocks reserved through the backend (one call per block)."""

    BLOCK = 10_000

    def __init__(self, backend: SessionBackend):
        self._backend = backend
        self._next = 0
        self._end = 0

    def take(self) -> int:
        if self._next >= self._end:
            self._next = self._backend.next_ids(self.BLOCK)
            self._end = self._next + self.BLOCK
        value = self._next
        self._next += 1
        return value


class _QueueIndex:
    """Per-process one-up counter that orders FlowFiles entering queues in the same millisecond."""

    value = 0

    @classmethod
    def take(cls) -> int:
        cls.value += 1
        return cls.value


class ProcessSession:
    def __init__(self, context: ProcessContext, backend: SessionBackend, *, component_id: str,
                 ids: _Ids | None = None, penalty_duration: float = 30.0):
        self.context = context
        self.backend = backend
        self.component_id = component_id
        self.penalty_duration = penalty_duration
        self._ids = ids or _Ids(backend)
        self._records: dict[str, _Record] = {}
        self._writer = None
        self._events: list[list] = []  # field arrays (``CommitBatch.events``)
        self._bytes_read = 0
        self.provenance = ProvenanceReporter(self)

    # ------------------------------------------------------------------ taking FlowFiles
    def get(self) -> FlowFile | None:
        batch = self.get_batch(1)
        return batch[0] if batch else None

    def get_batch(self, max_count: int | None = None) -> list[FlowFile]:
        """Up to ``max_count`` FlowFiles (default: the processor's batch size) from its input queues."""
        taken = self.backend.poll(max_count or self.context.batch_size)
        for queue_id, flowfile in taken:
            self._records[flowfile.uuid] = _Record(flowfile, flowfile, queue_id)
        return [flowfile for _, flowfile in taken]

    # ------------------------------------------------------------------ making FlowFiles
    def create(self, parent: FlowFile | None = None, parents: Sequence[FlowFile] | None = None) -> FlowFile:
        """A new FlowFile with no content; with parents it inherits their common attributes."""
        parents = list(parents or ([parent] if parent is not None else []))
        now = now_millis()
        new_uuid = new_flowfile_uuid()
        attributes: dict[str, str] = {}
        if parents:
            parent_records = [self._record(p) for p in parents]
            attributes = _common_attributes([r.current.attributes for r in parent_records])
            lineage_start = min(r.current.lineage_start_date for r in parent_records)
        else:
            lineage_start = now
        attributes.update(uuid=new_uuid)
        attributes.setdefault("filename", new_uuid)
        attributes.setdefault("path", "./")
        flowfile = FlowFile(self._ids.take(), new_uuid, attributes, None, now, lineage_start)
        record = _Record(None, flowfile, None)
        record.parents = [self._record(p).current.uuid for p in parents]
        self._records[new_uuid] = record
        return flowfile

    def clone(self, flowfile: FlowFile, offset: int = 0, size: int | None = None) -> FlowFile:
        """A new FlowFile sharing the content (or a byte range of it); zero bytes are copied.

        A whole clone is recorded as CLONE; a range is a child of a FORK (see ``split``).
        """
        source = self._record(flowfile).current
        child = self._child(source, offset, size)
        if offset == 0 and child.size == source.size:
            self._emit(ProvenanceEventType.CLONE, source, child_uuids=[child.uuid])
        return child

    def _child(self, source: FlowFile, offset: int = 0, size: int | None = None) -> FlowFile:
        claim = source.claim
        length = source.size - offset if size is None else size
        if claim is not None:
            claim = claim.slice(offset, length) if (offset, length) != (0, source.size) else claim
        elif (offset, length) != (0, 0):
            raise ValueError(f"cannot take bytes {offset}+{size} of an empty FlowFile")
        new_uuid = new_flowfile_uuid()
        child = FlowFile(self._ids.take(), new_uuid, dict(source.attributes, uuid=new_uuid), claim, now_millis(),
                         source.lineage_start_date)
        record = _Record(None, child, None)
        record.parents = [source.uuid]
        self._records[new_uuid] = record
        return child

    def split(self, flowfile: FlowFile, ranges: Sequence[tuple[int, int]]) -> list[FlowFile]:
        """Children that each reference a byte range (offset, length) of the content: no copy."""
        source = self._record(flowfile).current
        children = [self._child(source, offset, length) for offset, length in ranges]
        self._emit(ProvenanceEventType.FORK, source, child_uuids=[c.uuid for c in children])
        return children

    def merge(self, flowfiles: Sequence[FlowFile], *, header: bytes = b"", footer: bytes = b"",
              demarcator: bytes = b"", attributes: Mapping[str, str] | None = None) -> FlowFile:
        """One new FlowFile whose content is the inputs' contents joined (bytes are copied)."""
        sources = [self._record(f).current for f in flowfiles]
        merged = self.create(parents=sources)

        def write_all(out: BinaryIO) -> None:
            out.write(header)
            for index, source in enumerate(sources):
                if index and demarcator:
                    out.write(demarcator)
                with self.read(source) as stream:
                    shutil.copyfileobj(stream, out, CHUNK)
            out.write(footer)

        size = len(header) + len(footer) + len(demarcator) * max(len(sources) - 1, 0) + sum(s.size for s in sources)
        try:
            merged = self.write(merged, write_all, size_hint=size)
        except BaseException:
            del self._records[merged.uuid]  # the caller can route the inputs; the child never existed
            raise
        if attributes:
            merged = self.put_all_attributes(merged, attributes)
        self._emit(ProvenanceEventType.JOIN, merged, parent_uuids=[s.uuid for s in sources],
                   child_uuids=[merged.uuid])
        return merged

    # ------------------------------------------------------------------ attributes
    def put_attribute(self, flowfile: FlowFile, key: str, value: str) -> FlowFile:
        return self.put_all_attributes(flowfile, {key: value})

    def put_all_attributes(self, flowfile: FlowFile, values: Mapping[str, str]) -> FlowFile:
        record = self._record(flowfile)
        values = {k: str(v) for k, v in values.items() if k != "uuid"}
        if all(record.current.attributes.get(k) == v for k, v in values.items()):
            return record.current
        return self._update(record, attributes={**record.current.attributes, **values})

    def remove_attribute(self, flowfile: FlowFile, key: str) -> FlowFile:
        return self.remove_all_attributes(flowfile, [key])

    def remove_all_attributes(self, flowfile: FlowFile, keys: Sequence[str]) -> FlowFile:
        record = self._record(flowfile)
        doomed = {k for k in keys if k != "uuid" and k in record.current.attributes}
        if not doomed:
            return record.current
        kept = {k: v for k, v in record.current.attributes.items() if k not in doomed}
        return self._update(record, attributes=kept)

    # ------------------------------------------------------------------ content
    @contextmanager
    def read(self, flowfile: FlowFile) -> Iterator[BinaryIO]:
        """A stream over the content; it never loads a whole content into memory."""
        claim = self._record(flowfile).current.claim
        if claim is None:
            yield io.BytesIO(b"")
            return
        if self._writer is not None and claim.resource in self._writer.created():
            self._writer.flush(sync=False)
        stream = self.backend.content.open(claim)
        try:
            yield stream
        finally:
            self._bytes_read += stream.tell() if hasattr(stream, "tell") else 0
            stream.close()

    def read_bytes(self, flowfile: FlowFile) -> bytes:
        with self.read(flowfile) as stream:
            return stream.read()

    def write(self, flowfile: FlowFile, callback: Callable[[BinaryIO], None], *,
              size_hint: int | None = None) -> FlowFile:
        """Replace the content with what ``callback(out)`` writes (a new claim; the old is untouched).

        ``size_hint``, the expected size when known, keeps large contents in claims of their own.
        """
        record = self._record(flowfile)
        with self._content_writer().open_stream(size_hint) as out:
            callback(out)
        return self._update(record, claim=out.claim, content=True)

    def rewrite(self, flowfile: FlowFile, callback: Callable[[BinaryIO, BinaryIO], None]) -> FlowFile:
        """Stream the old content through ``callback(in, out)`` into a new claim (copy-on-write)."""
        record = self._record(flowfile)
        with self.read(record.current) as source, self._content_writer().open_stream() as out:
            callback(source, out)
        return self._update(record, claim=out.claim, content=True)

    def write_bytes(self, flowfile: FlowFile, data: bytes) -> FlowFile:
        record = self._record(flowfile)
        claim = self._content_writer().write_bytes(data)
        return self._update(record, claim=claim, content=True)

    def append(self, flowfile: FlowFile, callback: Callable[[BinaryIO], None]) -> FlowFile:
        """New content = old content + what ``callback(out)`` writes (copied into a new claim)."""

        def copy_then_append(source: BinaryIO, out: BinaryIO) -> None:
            shutil.copyfileobj(source, out, CHUNK)
            callback(out)

        return self.rewrite(flowfile, copy_then_append)

    def import_from(self, path: str | os.PathLike, flowfile: FlowFile) -> FlowFile:
        record = self._record(flowfile)
        claim = self._content_writer().copy_file(path)
        return self._update(record, claim=claim, content=True)

    def export_to(self, flowfile: FlowFile, path: str | os.PathLike, append: bool = False) -> int:
        """Copy the content to a file; returns the bytes written."""
        with self.read(flowfile) as source, open(path, "ab" if append else "wb") as target:
            shutil.copyfileobj(source, target, CHUNK)
            if self.backend.always_sync:
                target.flush()
                os.fsync(target.fileno())
            return target.tell()

    # ------------------------------------------------------------------ routing
    def transfer(self, flowfile: FlowFile, relationship: Relationship | str) -> None:
        name = self._relationship_name(relationship)
        self._record(flowfile).relationship = name

    def remove(self, flowfile: FlowFile) -> None:
        record = self._record(flowfile)
        record.removed = True
        record.relationship = None

    def penalize(self, flowfile: FlowFile) -> FlowFile:
        record = self._record(flowfile)
        until = now_millis() + int(self.penalty_duration * 1000)
        record.current = record.current._replace(penalized_until=until)
        return record.current

    # ------------------------------------------------------------------ batches
    # One call for a batch of FlowFiles, with the effect of the per-FlowFile call on each (the same
    # FlowFile versions, records, events and errors: tests/test_session_batch.py holds them side by
    # side). What the FlowFiles share is done once a call: the relationship checked, the values
    # converted, the uuids drawn, the clock read. A failure part-way leaves the FlowFiles before it
    # changed, as the per-FlowFile loop would; the session rolls back as a whole anyway.

    def create_batch(self, count: int) -> list[FlowFile]:
        """``count`` new FlowFiles with no content and no parents (``create()``, ``count`` times)."""
        now = now_millis()
        records = self._records
        take = self._ids.take
        created = []
        for new_uuid in new_flowfile_uuids(count):
            flowfile = FlowFile(take(), new_uuid, {"uuid": new_uuid, "filename": new_uuid, "path": "./"},
                                None, now, now)
            records[new_uuid] = _Record(None, flowfile, None)
            created.append(flowfile)
        return created

    def write_bytes_batch(self, flowfiles: Sequence[FlowFile], data: bytes | Sequence[bytes]) -> list[FlowFile]:
        """Each FlowFile's content replaced by ``data`` (bytes: the same for every one; a sequence:
        the i-th for the i-th), each a content of its own, copy-on-write as ``write_bytes``."""
        same = isinstance(data, (bytes, bytearray, memoryview))
        if not same and len(data) != len(flowfiles):
            raise ValueError(f"{len(data)} contents for {len(flowfiles)} FlowFiles")
        records = [self._record(f) for f in flowfiles]
        claims = self._content_writer().write_many([data] * len(records) if same else data)
        update = self._update
        return [update(record, claim=claim, content=True) for record, claim in zip(records, claims)]

    def put_attributes_batch(self, flowfiles: Sequence[FlowFile],
                             values: Mapping[str, str] | Sequence[Mapping[str, str]]) -> list[FlowFile]:
        """``put_all_attributes`` on each FlowFile: ``values`` a mapping (the same for every one)
        or one mapping a FlowFile. A FlowFile that already has every value is left as it is."""
        if isinstance(values, Mapping):
            shared = {k: str(v) for k, v in values.items() if k != "uuid"}
            each = None
        else:
            if len(values) != len(flowfiles):
                raise ValueError(f"{len(values)} attribute maps for {len(flowfiles)} FlowFiles")
            each = values
        records = [self._record(f) for f in flowfiles]
        update = self._update
        converted: dict[int, dict[str, str]] = {}   # a mapping given for many FlowFiles is converted once
        out = []
        for i, record in enumerate(records):
            if each is None:
                wanted = shared
            else:
                wanted = converted.get(id(each[i]))
                if wanted is None:
                    wanted = converted[id(each[i])] = {k: str(v) for k, v in each[i].items() if k != "uuid"}
            attributes = record.current.attributes
            if all(attributes.get(k) == v for k, v in wanted.items()):
                out.append(record.current)
            else:
                out.append(update(record, attributes={**attributes, **wanted}))
        return out

    def transfer_batch(self, flowfiles: Sequence[FlowFile],
                       relationship: Relationship | str | Sequence[Relationship | str]) -> None:
        """``transfer`` each FlowFile: to one relationship, or the i-th to ``relationship[i]``
        (routing a batch with a relationship a FlowFile)."""
        if isinstance(relationship, (str, Relationship)):
            names = [self._relationship_name(relationship)] * len(flowfiles)
        else:
            if len(relationship) != len(flowfiles):
                raise ValueError(f"{len(relationship)} relationships for {len(flowfiles)} FlowFiles")
            names = [r.name if isinstance(r, Relationship) else r for r in relationship]
            for name in set(names):
                self._relationship_name(name)
        for record, name in zip([self._record(f) for f in flowfiles], names):
            record.relationship = name

    def remove_batch(self, flowfiles: Sequence[FlowFile]) -> None:
        """``remove`` each FlowFile."""
        for record in [self._record(f) for f in flowfiles]:
            record.removed = True
            record.relationship = None

    # ------------------------------------------------------------------ commit / rollback
    def commit(self, *, keep_on_failure: bool = False) -> None:
        """Make the session's work durable (content, then the log), then deliver it. A failure
        before the log rolls the session back (``CommitError``), unless ``keep_on_failure``: then
        the session stays as it was for the caller to roll back or route (the engine's trigger
        loop, which narrows a failing batch down). A failure after the log is ``DeliveryError``."""
        batch = self._build_batch()
        if batch is None:
            self._reset()
            return
        writer = self._writer
        try:
            if writer is not None:
                writer.flush(sync=self.backend.always_sync)
            self.backend.commit(batch)
        except DeliveryError:
            self._committed(writer)  # the log has it: keep its claims, requeue nothing
            raise
        except BaseException:  # the flush or the log failed: nothing happened
            if not keep_on_failure:
                self.rollback()
            raise
        self._committed(writer)

    def _committed(self, writer) -> None:
        if writer is not None:
            writer.close()
        self._reset()

    def commit_async(self, on_success: Callable[[], None] | None = None,
                     on_failure: Callable[[BaseException], None] | None = None) -> None:
        """Commit; ``on_success`` runs only once the commit is durable, ``on_failure`` if it failed.

        A commit the log accepted but could not deliver (``DeliveryError``) is durable: ``on_success``
        runs (a source deletes what it took, which the log now holds), then the error is raised.
        A commit in doubt (``CommitInDoubt``) runs neither: the source keeps its data, so the worst
        case is the same data taken twice, never lost."""
        try:
            self.commit()
        except DeliveryError as err:
            if on_success is not None and not isinstance(err, CommitInDoubt):
                on_success()
            raise
        except BaseException as err:
            if on_failure is None:
                raise
            on_failure(err)
            return
        if on_success is not None:
            on_success()

    def rollback(self, penalize: bool = False) -> None:
        """Forget everything: delete the content written and return taken FlowFiles to their queues."""
        if self._writer is not None:
            self._writer.discard()
        returned: dict[str, list[FlowFile]] = {}
        until = now_millis() + int(self.penalty_duration * 1000) if penalize else 0
        for queue_id, original in self._taken():
            returned.setdefault(queue_id, []).append(original._replace(penalized_until=until) if penalize else original)
        if returned:
            self.backend.requeue(returned)
        self._reset()

    def new_session(self) -> "ProcessSession":
        """Another session on the same processor, e.g. to hold a bin of FlowFiles across triggers."""
        return ProcessSession(self.context, self.backend, component_id=self.component_id, ids=self._ids,
                              penalty_duration=self.penalty_duration)

    def migrate(self, other: "ProcessSession", flowfiles: Sequence[FlowFile]) -> None:
        """Hand FlowFiles (and their pending events) to another session, which commits them later.

        Only FlowFiles whose content this session has not written can move: the content belongs to
        this session's claims, which are sealed when it commits.
        """
        moving = list(dict.fromkeys(self._record(f).current.uuid for f in flowfiles))  # keeps queue order
        for uuid in moving:
            if self._records[uuid].content_modified:
                raise FlowFileHandlingError(f"FlowFile {uuid} has content written in this session; "
                                            f"commit it before migrating it")
        for uuid in moving:
            other._records[uuid] = self._records.pop(uuid)
        moved = set(moving)
        other._events.extend(e for e in self._events if e[_UUID] in moved)
        self._events = [e for e in self._events if e[_UUID] not in moved]

    @property
    def has_work(self) -> bool:
        return bool(self._records)

    @property
    def inputs(self) -> list[FlowFile]:
        """The FlowFiles this session took from its input queues, as they were taken."""
        return [flowfile for _queue, flowfile in self._taken()]

    def route_inputs(self, relationship: str, attributes: Mapping[str, str]) -> None:
        """Undo everything but the taking, then send each input, unchanged but for ``attributes``,
        to ``relationship`` and commit: how the engine moves a FlowFile its processor keeps
        failing on to the processor's ``failure`` relationship (``flowactors.engine.task``). A
        commit refused before the log leaves the session holding the inputs, for ``rollback``."""
        taken = self._taken()
        if self._writer is not None:
            self._writer.discard()
        self._reset()
        for queue_id, flowfile in taken:
            self._records[flowfile.uuid] = _Record(flowfile, flowfile, queue_id)
            self.transfer(self.put_all_attributes(flowfile, attributes), relationship)
        self.commit(keep_on_failure=True)

    # ------------------------------------------------------------------ internals
    def _taken(self) -> list[tuple[str, FlowFile]]:
        """(source queue, FlowFile as taken) of each FlowFile this session took from a queue."""
        return [(r.source_queue, r.original) for r in self._records.values()
                if r.original is not None and r.source_queue is not None]

    def _record(self, flowfile: FlowFile) -> _Record:
        record = self._records.get(flowfile.uuid)
        if record is None:
            raise FlowFileHandlingError(f"FlowFile {flowfile.uuid} does not belong to this session")
        if record.removed:
            raise FlowFileHandlingError(f"FlowFile {flowfile.uuid} was already removed in this session")
        return record

    def _relationship_name(self, relationship: Relationship | str) -> str:
        """The relationship's name, if the processor has it (any name when it declares none)."""
        name = relationship.name if isinstance(relationship, Relationship) else relationship
        known = {r.name for r in self.context.relationships}
        if known and name not in known:
            raise FlowFileHandlingError(
                f"{self.context.name} has no relationship '{name}' (it has: {', '.join(sorted(known))})")
        return name

    def _content_writer(self):
        if self._writer is None:
            self._writer = self.backend.content.writer()
        return self._writer

    @staticmethod
    def _update(record: _Record, *, attributes: Mapping[str, str] | None = None,
                claim: ContentClaim | None = None, content: bool = False) -> FlowFile:
        current = record.current
        if attributes is not None:
            current = current.with_attributes(attributes)
            record.attributes_modified = True
        if content:
            current = current.with_claim(claim)
            record.content_modified = True
        record.current = current
        return current

    def _emit(self, event_type: ProvenanceEventType, flowfile: FlowFile, **fields: Any) -> list:
        """Record an event (a field array, see ``CommitBatch.events``); ``fields`` by name."""
        context = self.context
        event = new_event_fields(event_type, now_millis(), flowfile.uuid, self.component_id, context.name,
                                 context.processor_type, flowfile.lineage_start_date)
        for name, value in fields.items():
            event[FIELD_INDEX[name]] = value
        if event_type == ProvenanceEventType.SEND:  # what was sent, not what the FlowFile became
            event[_UPDATED_ATTRIBUTES] = flowfile.attributes  # never changed in place: _complete_event
            event[_UPDATED_CLAIM] = claim_field(flowfile.claim)
            event[_UPDATED_SIZE] = flowfile.size
        self._events.append(event)
        return event

    def _build_batch(self) -> CommitBatch | None:
        if not self._records and not self._events:
            return None
        unhandled = [r.current.uuid for r in self._records.values()
                     if not r.removed and r.relationship is None]
        if unhandled:
            raise FlowFileHandlingError(
                f"{self.context.name}: {len(unhandled)} FlowFile(s) were neither transferred nor "
                f"removed, e.g. {unhandled[0]}")
        self._resolve_destinations()
        self._add_implicit_events()
        batch = CommitBatch()
        now = now_millis()
        dropped = {e[_UUID] for e in self._events if e[_TYPE] == ProvenanceEventType.DROP}
        for record in self._records.values():
            if record.original is not None and record.source_queue is not None:
                batch.acknowledgements.setdefault(record.source_queue, []).append(record.original.uuid)
            if record.removed:
                if record.original is not None:
                    batch.removals.append(record.current.uuid)
                if record.auto_terminated:
                    self._emit(ProvenanceEventType.DROP, record.current,
                               details=f"Auto-Terminated by {record.relationship} Relationship")
                elif record.original is not None and record.current.uuid not in dropped:
                    self._emit(ProvenanceEventType.DROP, record.current)
                continue
            record.current = record.current.queued(now, _QueueIndex.take())
            batch.updates.append(QueuedFlowFile(record.current, record.queue))
            batch.offers.setdefault(record.queue, []).append(record.current)
        finals = {r.current.uuid: r for r in self._records.values()}
        for event in self._events:
            self._complete_event(event, finals.get(event[_UUID]))
        batch.events = self._events
        if self._writer is not None:
            batch.new_claims = list(self._writer.created())
            batch.bytes_written = self._writer.bytes_written
        batch.bytes_read = self._bytes_read
        return batch

    def _resolve_destinations(self) -> None:
        """Pick each FlowFile's queue; auto-terminated ones are dropped, extra connections get clones."""
        for record in list(self._records.values()):
            if record.removed:
                continue
            destinations = self.backend.destinations(record.relationship)
            if not destinations:
                record.removed = record.auto_terminated = True
                continue
            record.queue = destinations[0]
            for extra in destinations[1:]:
                clone = self._records[self.clone(record.current).uuid]
                clone.relationship, clone.queue = record.relationship, extra

    def _add_implicit_events(self) -> None:
        """CREATE / FORK / JOIN / CONTENT_MODIFIED / ATTRIBUTES_MODIFIED events nobody reported."""
        reported: dict[str, set[str]] = {}
        for event in self._events:
            reported.setdefault(event[_UUID], set()).add(event[_TYPE])
            for child in event[_CHILDREN]:
                reported.setdefault(child, set()).add("CHILD")
        by_parent: dict[str, list[str]] = {}
        for record in self._records.values():
            uuid = record.current.uuid
            types = reported.get(uuid, set())
            if record.created and (record.auto_terminated or not record.removed):
                if "CHILD" in types or types & {"RECEIVE", "FETCH", "CREATE", "JOIN", "CLONE"}:
                    pass
                elif len(record.parents) == 1:
                    by_parent.setdefault(record.parents[0], []).append(uuid)
                elif len(record.parents) > 1:
                    self._emit(ProvenanceEventType.JOIN, record.current, parent_uuids=list(record.parents),
                               child_uuids=[record.current.uuid])
                else:
                    self._emit(ProvenanceEventType.CREATE, record.current)
                continue
            if record.removed or record.created:
                continue
            if record.content_modified and not types & {"CONTENT_MODIFIED", "FETCH", "RECEIVE"}:
                self._emit(ProvenanceEventType.CONTENT_MODIFIED, record.current)
            elif record.attributes_modified and not types:
                self._emit(ProvenanceEventType.ATTRIBUTES_MODIFIED, record.current)
        for parent_uuid, children in by_parent.items():
            parent = self._records.get(parent_uuid)
            if parent is not None:
                self._emit(ProvenanceEventType.FORK, parent.current, child_uuids=children)

    def _complete_event(self, event: list, record: _Record | None) -> None:
        """Fill in attributes and content as committed (SEND keeps what it had when emitted). The
        attribute maps are the FlowFiles' own, not copies: a FlowFile's attributes are never
        changed in place (every change makes a new map, ``_update``), so an event can share them."""
        if record is None:
            return
        original = record.original
        if original is not None:
            event[_PREVIOUS_ATTRIBUTES] = original.attributes
            event[_PREVIOUS_CLAIM] = claim_field(original.claim)
            event[_PREVIOUS_SIZE] = original.size
            event[_SOURCE_QUEUE] = record.source_queue
        if event[_TYPE] != ProvenanceEventType.SEND:
            current = record.current
            event[_UPDATED_ATTRIBUTES] = current.attributes
            event[_UPDATED_CLAIM] = claim_field(current.claim)
            event[_UPDATED_SIZE] = current.size

    def _reset(self) -> None:
        self._records.clear()
        self._events = []
        self._writer = None
        self._bytes_read = 0


def _common_attributes(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Attributes that every parent has with the same value (what NiFi gives a merged child)."""
    first, *rest = maps
    return {k: v for k, v in first.items() if k != "uuid" and all(m.get(k) == v for m in rest)}
