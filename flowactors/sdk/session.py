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
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Protocol, Sequence

from flowactors.sdk.processor import ProcessContext, Relationship
from flowactors.sdk.provenance_reporter import ProvenanceReporter
from repositories.model import (ContentClaim, FlowFile, FlowFileBatch, QueuedFlowFile, ResourceClaim, StateChange,
                               StateMap, new_flowfile_uuid, new_flowfile_uuids, now_millis)
from repositories.provenance.event import FIELD_INDEX, EventRun, ProvenanceEventType, new_event_fields

CHUNK = 1024 * 1024
#: positions in an event's field array (``CommitBatch.events``)
_TYPE, _UUID, _CHILDREN = FIELD_INDEX["event_type"], FIELD_INDEX["flowfile_uuid"], FIELD_INDEX["child_uuids"]
_PREVIOUS_ATTRIBUTES, _PREVIOUS_CLAIM = FIELD_INDEX["previous_attributes"], FIELD_INDEX["previous_claim"]
_PREVIOUS_SIZE, _SOURCE_QUEUE = FIELD_INDEX["previous_size"], FIELD_INDEX["source_queue_id"]
_UPDATED_ATTRIBUTES, _UPDATED_CLAIM = FIELD_INDEX["updated_attributes"], FIELD_INDEX["updated_claim"]
_UPDATED_SIZE = FIELD_INDEX["updated_size"]
_LINEAGE_START, _DETAILS = FIELD_INDEX["lineage_start_date"], FIELD_INDEX["details"]
_T = ProvenanceEventType
_new_tuple = tuple.__new__
_CLAIM_LENGTH = itemgetter(2)


class FlowFileHandlingError(RuntimeError):
    """A processor broke the session's rules (e.g. left a FlowFile without a destination)."""


class CommitError(RuntimeError):
    """The write-ahead log refused the commit; nothing of the session became visible."""


class StateConflict(CommitError):
    """The commit was refused because another task of the processor changed its state since this
    session read it (``context.state.replace``): the session rolled back; trigger again."""


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
    #: provenance events as field arrays (``repositories.provenance.event.new_event_fields``) or
    #: runs of them (``EventRun``, a batch call's events as columns): many a commit, so no object
    #: each; encoded once, as one batch, by the log (``encode_batch``: shipping bytes is ~8x
    #: cheaper than pickling event objects)
    events: list[list | EventRun] = field(default_factory=list)
    #: queue id -> FlowFiles to offer there (after the WAL transaction); a ``FlowFileBatch``
    #: each, so that an offer to a queue in another process pickles as columns
    offers: dict[str, FlowFileBatch] = field(default_factory=dict)
    #: queue id -> uuids taken from it that are now done with
    acknowledgements: dict[str, list[str]] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0
    #: the session's change of its processor's state (``context.state``), written in the same
    #: transaction as everything above
    state: StateChange | None = None


class SessionBackend(Protocol):
    """What a session needs from the runtime: its queues, the repositories and the flow's wiring."""

    content: Any  # FileSystemContentRepository or InMemoryContentRepository
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

    def after_commit(self, on_success: Callable[[], None] | None,
                     on_failure: Callable[[BaseException], None] | None) -> None:
        """A commit went through: run ``on_success`` now, or hold both until the engine knows
        whether the work it belongs to succeeded (``commit_async``)."""


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


class _Run:
    """FlowFiles a processor handles as one batch: taken by one ``get_batch`` or made by one
    ``create_batch``, and since then changed only by batch calls given the whole batch, in order.
    The session keeps their records as columns, one list a field, with no record a FlowFile; the
    first per-FlowFile call turns every run into per-FlowFile records (``ProcessSession._explode``),
    so a processor may mix both kinds of call and see the same effects.

    ``current`` is never changed in place (a batch call puts a new list there), and the session
    hands processors copies of it: a processor that reorders or trims its list cannot change the
    session's records."""

    __slots__ = ("current", "originals", "sources", "relationship", "removed", "attributes_modified",
                 "content_modified", "reported")

    def __init__(self, current: list[FlowFile], originals: list[FlowFile] | None, sources: list[str] | None):
        self.current = current
        self.originals = originals   # None: made in this session
        self.sources = sources       # the queue each was taken from
        self.relationship: str | list[str] | None = None   # one for all, or one a FlowFile
        self.removed = False
        self.attributes_modified = False
        self.content_modified = False
        self.reported: set[str] = set()   # event types the processor reported for the whole run


class _RunEvent:
    """An event a processor reported for a whole run (``ProvenanceReporter.route_batch``),
    completed from the run's columns at commit."""

    __slots__ = ("event_type", "run", "shared", "each")

    def __init__(self, event_type: ProvenanceEventType, run: _Run, shared: dict, each: dict):
        self.event_type = event_type
        self.run = run
        self.shared = {"timestamp": now_millis(), **shared}   # field name -> the value of every event
        self.each = each                                      # field name -> one value a FlowFile


class _Ids:
    """Hands out FlowFile ids from blocks reserved through the backend (one call per block)."""

    BLOCK = 10_000

    def __init__(self, backend: SessionBackend):
        self._backend = backend
        self._next = 0
        self._end = 0

    def _reserve(self) -> None:
        self._next = self._backend.next_ids(self.BLOCK)
        self._end = self._next + self.BLOCK

    def take(self) -> int:
        if self._next >= self._end:
            self._reserve()
        value = self._next
        self._next += 1
        return value

    def take_many(self, count: int) -> list[int]:
        """``count`` ids, as ``take`` would hand them out one after the other."""
        out: list[int] = []
        while len(out) < count:
            if self._next >= self._end:
                self._reserve()
            step = min(count - len(out), self._end - self._next)
            out.extend(range(self._next, self._next + step))
            self._next += step
        return out


class _QueueIndex:
    """Per-process one-up counter that orders FlowFiles entering queues in the same millisecond."""

    value = 0

    @classmethod
    def take(cls) -> int:
        cls.value += 1
        return cls.value

    @classmethod
    def take_many(cls, count: int) -> range:
        """``count`` values, as ``take`` would give them one after the other."""
        first = cls.value + 1
        cls.value += count
        return range(first, first + count)


class ProcessSession:
    def __init__(self, context: ProcessContext, backend: SessionBackend, *, component_id: str,
                 ids: _Ids | None = None, penalty_duration: float = 30.0):
        self.context = context
        self.backend = backend
        self.component_id = component_id
        self.penalty_duration = penalty_duration
        self._ids = ids or _Ids(backend)
        self._records: dict[str, _Record] = {}
        self._runs: list[_Run] = []   # only while ``_records`` is empty (see ``_Run``)
        self._writer = None
        self._events: list[list | _RunEvent] = []  # field arrays (``CommitBatch.events``), run events
        self._bytes_read = 0
        #: this session's change of the processor's state and the state as it makes it
        #: (``flowactors.sdk.state``): committed and rolled back with the session
        self._state_change: StateChange | None = None
        self._state_view: StateMap | None = None
        self.provenance = ProvenanceReporter(self)

    # ------------------------------------------------------------------ taking FlowFiles
    def get(self) -> FlowFile | None:
        batch = self._take(1, as_run=False)
        return batch[0] if batch else None

    def get_batch(self, max_count: int | None = None) -> list[FlowFile]:
        """Up to ``max_count`` FlowFiles (default: the processor's batch size) from its input queues."""
        return self._take(max_count or self.context.batch_size, as_run=True)

    def _take(self, max_count: int, as_run: bool) -> list[FlowFile]:
        """Take FlowFiles from the input queues: as a run while the session has no per-FlowFile
        records and ``as_run``, else as records."""
        if not as_run:
            self._explode()
        taken = self.backend.poll(max_count)
        if not taken:
            return []
        if self._records or not as_run:
            for queue_id, flowfile in taken:
                self._records[flowfile.uuid] = _Record(flowfile, flowfile, queue_id)
            return [flowfile for _, flowfile in taken]
        flowfiles = [flowfile for _, flowfile in taken]
        self._runs.append(_Run(flowfiles, flowfiles, [queue_id for queue_id, _ in taken]))
        return list(flowfiles)

    # ------------------------------------------------------------------ making FlowFiles
    def create(self, parent: FlowFile | None = None, parents: Sequence[FlowFile] | None = None) -> FlowFile:
        """A new FlowFile with no content; with parents it inherits their common attributes."""
        self._explode()
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

    def concatenation(self, sources: Sequence[FlowFile], *, header: bytes = b"", footer: bytes = b"",
                      demarcator: bytes = b"") -> tuple[Callable[[BinaryIO], None], int]:
        """A writer of the sources' contents joined (header, demarcators between, footer), for
        ``write``, and the size it writes (``write``'s ``size_hint``)."""
        def write_all(out: BinaryIO) -> None:
            out.write(header)
            for index, source in enumerate(sources):
                if index and demarcator:
                    out.write(demarcator)
                with self.read(source) as stream:
                    shutil.copyfileobj(stream, out, CHUNK)
            out.write(footer)

        size = len(header) + len(footer) + len(demarcator) * max(len(sources) - 1, 0) + sum(s.size for s in sources)
        return write_all, size

    def merge(self, flowfiles: Sequence[FlowFile], *, header: bytes = b"", footer: bytes = b"",
              demarcator: bytes = b"", attributes: Mapping[str, str] | None = None) -> FlowFile:
        """One new FlowFile whose content is the inputs' contents joined (bytes are copied)."""
        sources = [self._record(f).current for f in flowfiles]
        merged = self.create(parents=sources)
        write_all, size = self.concatenation(sources, header=header, footer=footer, demarcator=demarcator)
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
        values = _attribute_values(values)
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

    def read_bytes_batch(self, flowfiles: Sequence[FlowFile]) -> list[bytes]:
        """``read_bytes`` of each FlowFile, in memory: each claim file opened once, and a batch
        the session holds whole (``get_batch``) read without a record a FlowFile."""
        run = self._run_of(flowfiles)
        current = run.current if run is not None else [self._record(f).current for f in flowfiles]
        claims = [f[3] for f in current]
        if self._writer is not None:
            created = self._writer.created()
            if any(c is not None and c.resource in created for c in claims):
                self._writer.flush(sync=False)
        data = self.backend.content.read_many(claims)
        self._bytes_read += sum(map(len, data))
        return data

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
        if count <= 0:
            return []
        now = now_millis()
        uuids = new_flowfile_uuids(count)
        created = [_new_tuple(FlowFile, (id_, new_uuid, {"uuid": new_uuid, "filename": new_uuid, "path": "./"},
                                         None, now, now, 0, 0, 0))
                   for id_, new_uuid in zip(self._ids.take_many(count), uuids)]
        if self._records:
            records = self._records
            for flowfile in created:
                records[flowfile.uuid] = _Record(None, flowfile, None)
        else:
            self._runs.append(_Run(created, None, None))
        return list(created)

    def write_bytes_batch(self, flowfiles: Sequence[FlowFile], data: bytes | Sequence[bytes]) -> list[FlowFile]:
        """Each FlowFile's content replaced by ``data`` (bytes: the same for every one; a sequence:
        the i-th for the i-th), each a content of its own, copy-on-write as ``write_bytes``."""
        same = isinstance(data, (bytes, bytearray, memoryview))
        if not same and len(data) != len(flowfiles):
            raise ValueError(f"{len(data)} contents for {len(flowfiles)} FlowFiles")
        run = self._run_of(flowfiles)
        if run is not None:
            claims = self._content_writer().write_many([data] * len(flowfiles) if same else data)
            run.current = [_new_tuple(FlowFile, (f[0], f[1], f[2], c, f[4], f[5], f[6], f[7], f[8]))
                           for f, c in zip(run.current, claims)]
            run.content_modified = True
            return list(run.current)
        records = [self._record(f) for f in flowfiles]
        claims = self._content_writer().write_many([data] * len(records) if same else data)
        update = self._update
        return [update(record, claim=claim, content=True) for record, claim in zip(records, claims)]

    def put_attributes_batch(self, flowfiles: Sequence[FlowFile],
                             values: Mapping[str, str] | Sequence[Mapping[str, str]]) -> list[FlowFile]:
        """``put_all_attributes`` on each FlowFile: ``values`` a mapping (the same for every one)
        or one mapping a FlowFile. A FlowFile that already has every value is left as it is."""
        if isinstance(values, Mapping):
            shared: dict[str, str] | None = _attribute_values(values)
            each = None
        else:
            if len(values) != len(flowfiles):
                raise ValueError(f"{len(values)} attribute maps for {len(flowfiles)} FlowFiles")
            each = _attribute_values_each(values)
            shared = each[0] if each and each.count(each[0]) == len(each) else None   # one for all
        run = self._run_of(flowfiles)
        if run is not None and self._put_attributes_run(run, shared, each):
            return list(run.current)
        records = [self._record(f) for f in flowfiles]
        update = self._update
        out = []
        for i, record in enumerate(records):
            wanted = shared if shared is not None else each[i]
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
        names: str | list[str]   # one for all, or one a FlowFile
        if isinstance(relationship, (str, Relationship)):
            names = self._relationship_name(relationship)
        else:
            if len(relationship) != len(flowfiles):
                raise ValueError(f"{len(relationship)} relationships for {len(flowfiles)} FlowFiles")
            names = [r.name if isinstance(r, Relationship) else r for r in relationship]
            distinct = set(names)
            for name in distinct:
                self._relationship_name(name)
            if len(distinct) == 1:
                names = names[0]
        run = self._run_of(flowfiles)
        if run is not None:
            run.relationship = names
            return
        each = [names] * len(flowfiles) if isinstance(names, str) else names
        for record, name in zip([self._record(f) for f in flowfiles], each):
            record.relationship = name

    def remove_batch(self, flowfiles: Sequence[FlowFile]) -> None:
        """``remove`` each FlowFile."""
        run = self._run_of(flowfiles)
        if run is not None:
            run.removed = True
            run.relationship = None
            return
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
        if self._state_change is not None:
            batch = batch or CommitBatch()
            batch.state = self._state_change
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

        When the callbacks run is the engine's to say (``SessionBackend.after_commit``): at once
        on the durable engines; on the stateless engine ``on_success`` is held until the whole
        flow's trigger succeeded, and ``on_failure`` runs if the trigger failed instead (NiFi's
        ``commitAsync``). A commit refused runs ``on_failure`` at once on every engine.

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
        if on_success is not None or on_failure is not None:
            self.backend.after_commit(on_success, on_failure)

    def rollback(self, penalize: bool = False) -> None:
        """Forget everything: delete the content written and return taken FlowFiles to their queues."""
        if self._writer is not None:
            self._writer.discard()
        returned: dict[str, list[FlowFile]] = {}
        until = now_millis() + int(self.penalty_duration * 1000) if penalize else 0
        for queue_id, original in self._taken():
            returned.setdefault(queue_id, FlowFileBatch()).append(original._replace(penalized_until=until) if penalize else original)
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
        self._explode()
        other._explode()
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
        return bool(self._records or self._runs)

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
        taken = [(r.source_queue, r.original) for r in self._records.values()
                 if r.original is not None and r.source_queue is not None]
        for run in self._runs:
            if run.originals is not None:
                taken.extend(zip(run.sources, run.originals))
        return taken

    def _record(self, flowfile: FlowFile) -> _Record:
        if self._runs:
            self._explode()
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

    # ------------------------------------------------------------------ runs (see ``_Run``)
    def _run_of(self, flowfiles: Sequence[FlowFile]) -> _Run | None:
        """The run whose FlowFiles ``flowfiles`` are, all of them and in order, if there is one
        (a batch call's columnar path); None sends the call down the per-FlowFile path."""
        if not flowfiles or type(flowfiles) is not list:
            return None
        for run in self._runs:
            if not run.removed and run.current == flowfiles:   # lengths first, then identity, in C
                return run
        return None

    def _put_attributes_run(self, run: _Run, shared: dict[str, str] | None, each: list[dict[str, str]] | None) -> bool:
        """``put_attributes_batch`` on a whole run, values converted (``shared`` for all when
        given, else ``each``); False (nothing done) when some FlowFile already has every value,
        which the per-FlowFile path handles (no new version, no event for it)."""
        current = run.current
        if shared is not None:
            # a value no FlowFile has yet rules out a FlowFile that has them all (the usual case)
            if not any([f[2].get(k) for f in current].count(v) == 0 for k, v in shared.items()):
                if any(all(f[2].get(k) == v for k, v in shared.items()) for f in current):
                    return False
            run.current = [_new_tuple(FlowFile, (f[0], f[1], {**f[2], **shared}, f[3], f[4], f[5], f[6], f[7], f[8]))
                           for f in current]
        else:
            if any(all(f[2].get(k) == v for k, v in w.items()) for f, w in zip(current, each)):
                return False
            run.current = [f.with_attributes({**f[2], **w}) for f, w in zip(current, each)]
        run.attributes_modified = True
        return True

    def _emit_run(self, event_type: ProvenanceEventType, run: _Run, shared: dict, each: dict) -> None:
        """Record an event for every FlowFile of ``run``: ``shared`` and ``each`` by field name
        (a value for all, a list of one a FlowFile)."""
        self._events.append(_RunEvent(event_type, run, shared, each))
        run.reported.add(event_type.value)

    def _explode(self) -> None:
        """Turn every run into per-FlowFile records, and the events reported for runs into an
        event a FlowFile, in order: what the per-FlowFile calls work on."""
        if not self._runs:
            return
        runs, self._runs = self._runs, []
        records = self._records
        for run in runs:
            relationship = run.relationship
            for i, flowfile in enumerate(run.current):
                if run.originals is None:
                    record = _Record(None, flowfile, None)
                else:
                    record = _Record(run.originals[i], flowfile, run.sources[i])
                record.relationship = relationship if type(relationship) is not list else relationship[i]
                record.removed = run.removed
                record.attributes_modified = run.attributes_modified
                record.content_modified = run.content_modified
                records[flowfile.uuid] = record
        reported, self._events = self._events, []
        for event in reported:   # in order; ``_emit`` appends to ``_events``
            if type(event) is not _RunEvent:
                self._events.append(event)
                continue
            for i, flowfile in enumerate(event.run.current):
                self._emit(event.event_type, flowfile, **event.shared,
                           **{name: values[i] for name, values in event.each.items()})

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
            event[_UPDATED_CLAIM] = flowfile.claim
            event[_UPDATED_SIZE] = flowfile.size
        self._events.append(event)
        return event

    def _build_batch(self) -> CommitBatch | None:
        if self._runs:
            if self._needs_clones():
                self._explode()   # a relationship connected more than once: clones, one FlowFile at a time
            else:
                return self._build_run_batch()
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
            batch.offers.setdefault(record.queue, FlowFileBatch()).append(record.current)
        finals = {r.current.uuid: r for r in self._records.values()}
        for event in self._events:
            self._complete_event(event, finals.get(event[_UUID]))
        batch.events = self._events
        if self._writer is not None:
            batch.new_claims = list(self._writer.created())
            batch.bytes_written = self._writer.bytes_written
        batch.bytes_read = self._bytes_read
        return batch

    def _needs_clones(self) -> bool:
        for run in self._runs:
            relationship = run.relationship
            names = () if relationship is None else [relationship] if type(relationship) is str else set(relationship)
            if any(len(self.backend.destinations(name)) > 1 for name in names):
                return True
        return False

    def _build_run_batch(self) -> CommitBatch:
        """``_build_batch`` for a session whose FlowFiles are all in runs: the same batch (records,
        offers, acknowledgements, events in the same order) built from the runs' columns."""
        unhandled = [f.uuid for run in self._runs if not run.removed and run.relationship is None
                     for f in run.current]
        if unhandled:
            raise FlowFileHandlingError(
                f"{self.context.name}: {len(unhandled)} FlowFile(s) were neither transferred nor "
                f"removed, e.g. {unhandled[0]}")
        batch = CommitBatch()
        now = now_millis()
        implicit: list[EventRun] = []
        drops: list[EventRun] = []
        columns: dict[int, dict[int, list]] = {}
        updates, offers, acknowledgements = batch.updates, batch.offers, batch.acknowledgements
        for run in self._runs:
            current, taken = run.current, run.originals is not None
            count = len(current)
            if taken:
                _extend_by_queue(acknowledgements, run.sources, [f[1] for f in run.originals], list)
            # where each FlowFile goes: a queue, or None when removed or auto-terminated
            relationship = run.relationship
            if run.removed:
                queues: list | None = None
                dropped = range(count)
            elif type(relationship) is str:
                destinations = self.backend.destinations(relationship)
                queues = [destinations[0]] * count if destinations else None
                dropped = range(count) if not destinations else ()
            else:
                first = {name: (self.backend.destinations(name) or [None])[0] for name in set(relationship)}
                queues = [first[name] for name in relationship]
                dropped = [i for i, queue in enumerate(queues) if queue is None]
            if not dropped:
                kept: Sequence[int] = range(count)
            else:
                gone = set(dropped)
                kept = [i for i in range(count) if i not in gone]
            # events nobody reported (as _add_implicit_events), then the drops (as _build_batch)
            reported = run.reported
            if not taken:
                if not run.removed and not reported & {"RECEIVE", "FETCH", "CREATE", "JOIN", "CLONE"}:
                    implicit.append(self._event_run(_T.CREATE, run, range(count), now, columns))
            elif kept:
                if run.content_modified and not reported & {"CONTENT_MODIFIED", "FETCH", "RECEIVE"}:
                    implicit.append(self._event_run(_T.CONTENT_MODIFIED, run, kept, now, columns))
                elif run.attributes_modified and not reported:
                    implicit.append(self._event_run(_T.ATTRIBUTES_MODIFIED, run, kept, now, columns))
            if dropped:
                if taken:
                    batch.removals.extend(current[i][1] for i in dropped)
                if not run.removed:
                    drop = self._event_run(_T.DROP, run, dropped, now, columns)
                    names = relationship if type(relationship) is list else None
                    if names is None:
                        drop.shared[_DETAILS] = f"Auto-Terminated by {relationship} Relationship"
                    else:
                        drop.each[_DETAILS] = [f"Auto-Terminated by {names[i]} Relationship" for i in dropped]
                    drops.append(drop)
                elif taken and "DROP" not in reported:
                    drops.append(self._event_run(_T.DROP, run, dropped, now, columns))
            if kept:
                kept_queues = queues if len(kept) == count else [queues[i] for i in kept]
                moving = current if len(kept) == count else [current[i] for i in kept]
                queued = [_new_tuple(FlowFile, (f[0], f[1], f[2], f[3], f[4], f[5], f[6], now, index))
                          for f, index in zip(moving, _QueueIndex.take_many(len(moving)))]
                updates.extend([_new_tuple(QueuedFlowFile, pair) for pair in zip(queued, kept_queues)])
                _extend_by_queue(offers, kept_queues, queued, FlowFileBatch)
        reported_events = [self._complete_run_event(e, columns) for e in self._events]
        batch.events = reported_events + implicit + drops
        if self._writer is not None:
            batch.new_claims = list(self._writer.created())
            batch.bytes_written = self._writer.bytes_written
        batch.bytes_read = self._bytes_read
        return batch

    def _run_columns(self, run: _Run, cache: dict[int, dict[int, list]]) -> dict[int, list]:
        """The event fields a run's FlowFiles give every event about them, as columns (made once a
        commit, shared by all the run's events)."""
        made = cache.get(id(run))
        if made is None:
            current = run.current
            claims = [f[3] for f in current]
            made = {_UUID: [f[1] for f in current], _LINEAGE_START: [f[5] for f in current],
                    _UPDATED_ATTRIBUTES: [f[2] for f in current], _UPDATED_CLAIM: claims,
                    _UPDATED_SIZE: _sizes(claims)}
            if run.originals is not None:
                if run.originals is current:
                    made[_PREVIOUS_ATTRIBUTES], made[_PREVIOUS_CLAIM], made[_PREVIOUS_SIZE] = (
                        made[_UPDATED_ATTRIBUTES], made[_UPDATED_CLAIM], made[_UPDATED_SIZE])
                else:
                    old = [f[3] for f in run.originals]
                    made[_PREVIOUS_ATTRIBUTES] = [f[2] for f in run.originals]
                    if old == claims:   # content unchanged (compared by identity first): the same fields
                        made[_PREVIOUS_CLAIM], made[_PREVIOUS_SIZE] = made[_UPDATED_CLAIM], made[_UPDATED_SIZE]
                    else:
                        made[_PREVIOUS_CLAIM], made[_PREVIOUS_SIZE] = old, _sizes(old)
                made[_SOURCE_QUEUE] = run.sources
            cache[id(run)] = made
        return made

    def _event_run(self, event_type: ProvenanceEventType, run: _Run, positions: Sequence[int], timestamp: int,
                   cache: dict[int, dict[int, list]]) -> EventRun:
        """Events of ``event_type`` for the FlowFiles of ``run`` at ``positions``, completed as
        ``_complete_event`` completes one."""
        context = self.context
        shared = new_event_fields(event_type, timestamp, None, self.component_id, context.name,
                                  context.processor_type, None)
        made = self._run_columns(run, cache)
        if len(positions) == len(run.current):
            each = dict(made)
        else:
            each = {position: [column[i] for i in positions] for position, column in made.items()}
        return EventRun(len(positions), shared, each)

    def _complete_run_event(self, event: _RunEvent, cache: dict[int, dict[int, list]]) -> EventRun:
        completed = self._event_run(event.event_type, event.run, range(len(event.run.current)),
                                    event.shared["timestamp"], cache)
        for name, value in event.shared.items():
            completed.shared[FIELD_INDEX[name]] = value
        for name, values in event.each.items():
            completed.each[FIELD_INDEX[name]] = values
        return completed

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
            event[_PREVIOUS_CLAIM] = original.claim
            event[_PREVIOUS_SIZE] = original.size
            event[_SOURCE_QUEUE] = record.source_queue
        if event[_TYPE] != ProvenanceEventType.SEND:
            current = record.current
            event[_UPDATED_ATTRIBUTES] = current.attributes
            event[_UPDATED_CLAIM] = current.claim
            event[_UPDATED_SIZE] = current.size

    def _reset(self) -> None:
        self._records.clear()
        self._runs = []
        self._events = []
        self._writer = None
        self._bytes_read = 0
        self._state_change = self._state_view = None


def _sizes(claims: list) -> list[int]:
    """Each claim's length, 0 for none: one C-level pass when every FlowFile has content."""
    if None in claims:
        return [0 if c is None else c[2] for c in claims]
    return list(map(_CLAIM_LENGTH, claims))


def _attribute_values(values: Mapping[str, Any]) -> dict[str, str]:
    """Attribute values as the session stores them: strings, and never ``uuid`` (a FlowFile's
    identity is not an attribute a processor sets)."""
    return {k: str(v) for k, v in values.items() if k != "uuid"}


def _attribute_values_each(maps: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``_attribute_values`` of each mapping; one given for many FlowFiles is converted once."""
    converted: dict[int, dict[str, str]] = {}
    out = []
    for values in maps:
        mine = converted.get(id(values))
        if mine is None:
            mine = converted[id(values)] = _attribute_values(values)
        out.append(mine)
    return out


def _extend_by_queue(by_queue: dict[str, list], queues: Sequence[str], values: Sequence[Any],
                     new: Callable[[], list]) -> None:
    """Append ``values[i]`` to ``by_queue[queues[i]]`` (in one step when all go to one queue);
    ``new`` makes a queue's list."""
    first = queues[0]
    if queues.count(first) == len(queues):
        by_queue.setdefault(first, new()).extend(values)
        return
    for queue, value in zip(queues, values):
        by_queue.setdefault(queue, new()).append(value)


def _common_attributes(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Attributes that every parent has with the same value (what NiFi gives a merged child)."""
    first, *rest = maps
    return {k: v for k, v in first.items() if k != "uuid" and all(m.get(k) == v for m in rest)}
