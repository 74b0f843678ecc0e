"""ProcessSession: a processor's only door to data, and the unit of work that commits durably.

A session collects what a processor does to a batch of FlowFiles: new versions of their
attributes, content written copy-on-write into the session's own claim files, where each one goes.
Nothing is visible outside the session until ``commit``, which follows the order the design fixes:
content flushed (and fsynced under ``always_sync``), then one write-ahead-log transaction, then
provenance events and the records offered to the downstream queues. ``rollback`` deletes the content
the session wrote and returns the FlowFiles it took to their queues, unchanged.

The session keeps a record of each FlowFile it holds (``flowactors.sdk.session_records``), except
for a batch it handed out whole and that only batch calls changed since: those it keeps as columns
(``flowactors.sdk.session_runs``); each path builds its part of the commit. The session talks to the world through a ``SessionBackend``
(``flowactors.sdk.session_contract``; the engines share one, ``flowactors.engine.session_backend.EngineBackend``),
so the same processor code runs on every engine and in unit tests. The errors a commit raises are
the contract's, re-exported here for processors, as is ``FlowFileHandlingError``; every put of
attributes is checked against ``flowactors.sdk.attribute_limits`` (``AttributeLimitError``).
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, Mapping, Sequence, cast

from flowactors.sdk.attribute_limits import AttributeLimitError, check_batch, check_total, check_values
from flowactors.sdk.processor import ProcessContext, Relationship
from flowactors.sdk.provenance_reporter import ProvenanceReporter
from flowactors.sdk.session_contract import (F_UPDATED_ATTRIBUTES, F_UPDATED_CLAIM, F_UPDATED_SIZE, F_UUID, CommitBatch,
                                             CommitError, DeliveryError, FlowFileHandlingError, IdAllocator,
                                             SessionBackend, StateConflict)
from flowactors.sdk.session_records import FlowFileRecord, RecordCommit
from flowactors.sdk.session_runs import EventSource, Run, Runs
from repositories.content.writer import BaseClaimWriter
from repositories.model import ContentClaim, FlowFile, FlowFileBatch, new_flowfile_uuid, new_flowfile_uuids, now_millis
from repositories.provenance.event import FIELD_INDEX, ProvenanceEventType, new_event_fields

if TYPE_CHECKING:  # an annotation: the state module makes the pending change, the session only commits it
    from flowactors.sdk.state import PendingState

__all__ = ["AttributeLimitError", "CommitError", "DeliveryError", "FlowFileHandlingError", "ProcessSession",
           "StateConflict"]

CHUNK = 1024 * 1024
_T = ProvenanceEventType
_new_tuple = tuple.__new__


class ProcessSession:
    def __init__(self, context: ProcessContext, backend: SessionBackend, *, component_id: str,
                 ids: IdAllocator | None = None, penalty_duration: float = 30.0):
        self.context = context
        self.backend = backend
        self.component_id = component_id
        self.penalty_duration = penalty_duration
        self._ids = ids or IdAllocator(backend)
        self._records: dict[str, FlowFileRecord] = {}
        self._runs = Runs()   # only while ``_records`` is empty (see ``flowactors.sdk.session_runs``)
        self._writer: BaseClaimWriter | None = None
        self._events: list[list] = []  # field arrays (``CommitBatch.events``)
        self._bytes_read = 0
        #: this session's change of the processor's state, made through ``context.state``
        #: (``flowactors.sdk.state``): committed and rolled back with the session
        self.pending_state: PendingState | None = None
        self.provenance = ProvenanceReporter(self._report, self._report_each)

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
                self._records[flowfile.uuid] = FlowFileRecord(flowfile, flowfile, queue_id)
            return [flowfile for _, flowfile in taken]
        flowfiles = [flowfile for _, flowfile in taken]
        self._runs.add(Run(flowfiles, flowfiles, [queue_id for queue_id, _ in taken]))
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
        record = FlowFileRecord(None, flowfile, None)
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
            self._emit(_T.CLONE, source, child_uuids=[child.uuid])
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
        record = FlowFileRecord(None, child, None)
        record.parents = [source.uuid]
        self._records[new_uuid] = record
        return child

    def split(self, flowfile: FlowFile, ranges: Sequence[tuple[int, int]]) -> list[FlowFile]:
        """Children that each reference a byte range (offset, length) of the content: no copy."""
        source = self._record(flowfile).current
        children = [self._child(source, offset, length) for offset, length in ranges]
        self._emit(_T.FORK, source, child_uuids=[c.uuid for c in children])
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
        self._emit(_T.JOIN, merged, parent_uuids=[s.uuid for s in sources], child_uuids=[merged.uuid])
        return merged

    # ------------------------------------------------------------------ attributes
    def put_attribute(self, flowfile: FlowFile, key: str, value: str) -> FlowFile:
        return self.put_all_attributes(flowfile, {key: value})

    def put_all_attributes(self, flowfile: FlowFile, values: Mapping[str, str]) -> FlowFile:
        """Set these attributes (``uuid`` excepted); ``AttributeLimitError``, nothing changed, when
        that would pass a limit of ``flowactors.sdk.attribute_limits``."""
        return self._put(self._record(flowfile), _attribute_values(values), checked=True)

    def _put(self, record: FlowFileRecord, values: dict[str, str], checked: bool) -> FlowFile:
        current = record.current
        if all(current.attributes.get(k) == v for k, v in values.items()):
            return current
        if checked:
            check_total(self.context.name, current, values, check_values(self.context.name, current, values))
        return self._update(record, attributes={**current.attributes, **values})

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
        run = self._runs.of(flowfiles)
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
            callback(cast(BinaryIO, out))  # a binary file object (io.RawIOBase), which typing's BinaryIO does not name
        return self._update(record, claim=out.claim, content=True)

    def rewrite(self, flowfile: FlowFile, callback: Callable[[BinaryIO, BinaryIO], None]) -> FlowFile:
        """Stream the old content through ``callback(in, out)`` into a new claim (copy-on-write)."""
        record = self._record(flowfile)
        with self.read(record.current) as source, self._content_writer().open_stream() as out:
            callback(source, cast(BinaryIO, out))  # as in ``write``
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
    # changed, as the per-FlowFile loop would; the session rolls back as a whole anyway. A batch the
    # session holds whole goes down the columnar path (``Runs.of``), any other the per-FlowFile one.

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
                records[flowfile.uuid] = FlowFileRecord(None, flowfile, None)
        else:
            self._runs.add(Run(created, None, None))
        return list(created)

    def write_bytes_batch(self, flowfiles: Sequence[FlowFile], data: bytes | Sequence[bytes]) -> list[FlowFile]:
        """Each FlowFile's content replaced by ``data`` (bytes: the same for every one; a sequence:
        the i-th for the i-th), each a content of its own, copy-on-write as ``write_bytes``."""
        contents: Sequence[Any]
        if isinstance(data, (bytes, bytearray, memoryview)):
            contents = [data] * len(flowfiles)
        elif len(data) != len(flowfiles):
            raise ValueError(f"{len(data)} contents for {len(flowfiles)} FlowFiles")
        else:
            contents = data
        run = self._runs.of(flowfiles)
        if run is not None:
            run.replace_claims(self._content_writer().write_many(contents))
            return list(run.current)
        records = [self._record(f) for f in flowfiles]
        claims = self._content_writer().write_many(contents)
        update = self._update
        return [update(record, claim=claim, content=True) for record, claim in zip(records, claims)]

    def put_attributes_batch(self, flowfiles: Sequence[FlowFile],
                             values: Mapping[str, str] | Sequence[Mapping[str, str]]) -> list[FlowFile]:
        """``put_all_attributes`` on each FlowFile: ``values`` a mapping (the same for every one)
        or one mapping a FlowFile. A FlowFile that already has every value is left as it is. The
        limits are checked for the whole batch first: ``AttributeLimitError`` changes none."""
        wanted = _attribute_values_for(values, len(flowfiles))
        run = self._runs.of(flowfiles)
        if run is not None:
            check_batch(self.context.name, run.current, wanted)
            if run.put_attributes(wanted):
                return list(run.current)
        records = [self._record(f) for f in flowfiles]
        if run is None:
            check_batch(self.context.name, [r.current for r in records], wanted)
        each = [wanted] * len(records) if isinstance(wanted, dict) else wanted
        update = self._update
        out = []
        for record, mine in zip(records, each):
            attributes = record.current.attributes
            if all(attributes.get(k) == v for k, v in mine.items()):
                out.append(record.current)
            else:
                out.append(update(record, attributes={**attributes, **mine}))
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
        run = self._runs.of(flowfiles)
        if run is not None:
            run.relationship = names
            return
        each = [names] * len(flowfiles) if isinstance(names, str) else names
        for record, name in zip([self._record(f) for f in flowfiles], each):
            record.relationship = name

    def remove_batch(self, flowfiles: Sequence[FlowFile]) -> None:
        """``remove`` each FlowFile."""
        run = self._runs.of(flowfiles)
        if run is not None:
            run.remove()
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
        if self.pending_state is not None:
            batch = batch or CommitBatch()
            batch.state = self.pending_state.change
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

    def _committed(self, writer: BaseClaimWriter | None) -> None:
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
        runs (a source deletes what it took, which the log now holds), then the error is raised."""
        try:
            self.commit()
        except DeliveryError:
            if on_success is not None:
                on_success()
            raise
        except BaseException as err:
            if on_failure is None:
                raise
            on_failure(err)
            return
        if on_success is not None or on_failure is not None:
            self.backend.after_commit(on_success, on_failure)

    def routed(self) -> list[tuple[FlowFile, str, bool]]:
        """Each FlowFile the session now routes to a relationship: its current version, the
        relationship, and whether it derives from FlowFiles taken from a queue (it was taken, or
        made from ones that were) rather than made from nothing."""
        self._explode()
        return [(r.current, r.relationship, r.original is not None or bool(r.parents))
                for r in self._records.values() if not r.removed and r.relationship is not None]

    def give_back(self, uuids: Sequence[str], returned: Callable[[FlowFile, FlowFile], FlowFile]) -> int:
        """Before the commit, take the FlowFiles ``uuids`` and every FlowFile linked to them in the
        session (the children they gave, the parents they came from, theirs in turn) out of it, as
        a rollback of those alone would: the ones taken from a queue go back to it as
        ``returned(as taken, as now)`` makes them; the ones made in the session are dropped; the
        session's events about any of them are forgotten. The content they were given here is
        deleted when nothing is left in the session (as a rollback deletes it); otherwise it goes
        with the commit's new claims, and a claim nothing committed references is released at the
        next checkpoint. Returns how many went back to a queue (NiFi's retry of a relationship)."""
        self._explode()
        records = self._records
        linked = _linked(records, uuids)
        back: dict[str, list[FlowFile]] = {}
        for uuid in linked:
            record = records.pop(uuid)
            if record.original is not None and record.source_queue is not None:
                back.setdefault(record.source_queue, FlowFileBatch()).append(returned(record.original, record.current))
        if linked:
            self._events = [event for event in self._events if event[F_UUID] not in linked]
        if not records and self._writer is not None:   # nothing left to commit: its content goes as a rollback's
            self._writer.discard()
            self._writer = None
        if back:
            self.backend.requeue(back)
        return sum(map(len, back.values()))

    def rollback(self, penalize: bool = False) -> None:
        """Forget everything: delete the content written and return taken FlowFiles to their queues."""
        if self._writer is not None:
            self._writer.discard()
        returned: dict[str, list[FlowFile]] = {}
        until = now_millis() + int(self.penalty_duration * 1000) if penalize else 0
        for queue_id, original in self._taken():
            returned.setdefault(queue_id, FlowFileBatch()).append(
                original._replace(penalized_until=until) if penalize else original)
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
        other._events.extend(e for e in self._events if e[F_UUID] in moved)
        self._events = [e for e in self._events if e[F_UUID] not in moved]

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
        for queue_id, flowfile in taken:   # unchecked: a FlowFile past the limits still gets there
            record = self._records[flowfile.uuid] = FlowFileRecord(flowfile, flowfile, queue_id)
            self.transfer(self._put(record, _attribute_values(attributes), checked=False), relationship)
        self.commit(keep_on_failure=True)

    # ------------------------------------------------------------------ internals
    def _taken(self) -> list[tuple[str, FlowFile]]:
        """(source queue, FlowFile as taken) of each FlowFile this session took from a queue."""
        taken = [(r.source_queue, r.original) for r in self._records.values()
                 if r.original is not None and r.source_queue is not None]
        taken.extend(self._runs.taken())
        return taken

    def _record(self, flowfile: FlowFile) -> FlowFileRecord:
        if self._runs:
            self._explode()
        record = self._records.get(flowfile.uuid)
        if record is None:
            raise FlowFileHandlingError(f"FlowFile {flowfile.uuid} does not belong to this session")
        if record.removed:
            raise FlowFileHandlingError(f"FlowFile {flowfile.uuid} was already removed in this session")
        return record

    def available_relationships(self) -> set[str]:
        """The processor's relationships that can take FlowFiles now: those none of whose
        connections is under back pressure (an auto-terminated one always can); NiFi's
        ``ProcessContext.getAvailableRelationships``. For a processor that is triggered while
        any destination has room (``Processor.trigger_when_any_destination_available``)."""
        return relationships_with_room(self.context.relationships, self.backend, self.backend.full_destinations())

    def _relationship_name(self, relationship: Relationship | str) -> str:
        """The relationship's name, if the processor has it (any name when it declares none)."""
        name = relationship.name if isinstance(relationship, Relationship) else relationship
        known = {r.name for r in self.context.relationships}
        if known and name not in known:
            raise FlowFileHandlingError(
                f"{self.context.name} has no relationship '{name}' (it has: {', '.join(sorted(known))})")
        return name

    def _explode(self) -> None:
        """Turn every run into per-FlowFile records, and the events reported for runs into an
        event a FlowFile, in order: what the per-FlowFile calls work on."""
        if not self._runs:
            return
        runs, run_events = self._runs.release()
        records = self._records
        for run in runs:
            for original, flowfile, source_queue, relationship in run.members():
                record = FlowFileRecord(original, flowfile, source_queue)
                record.relationship = relationship
                record.removed = run.removed
                record.attributes_modified = run.attributes_modified
                record.content_modified = run.content_modified
                records[flowfile.uuid] = record
        for event in run_events:   # in order; ``_emit`` appends to ``_events``
            for flowfile, fields in event.per_flowfile():
                self._emit(event.event_type, flowfile, **fields)

    def _content_writer(self) -> BaseClaimWriter:
        if self._writer is None:
            self._writer = self.backend.content.writer()
        return self._writer

    @staticmethod
    def _update(record: FlowFileRecord, *, attributes: Mapping[str, str] | None = None,
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

    # ------------------------------------------------------------------ provenance events
    def _report(self, event_type: ProvenanceEventType, flowfile: FlowFile, /, **fields: Any) -> None:
        """An event the processor reported (``ProvenanceReporter``) about a FlowFile as the session
        holds it now."""
        self._emit(event_type, self._record(flowfile).current, **fields)

    def _report_each(self, event_type: ProvenanceEventType, flowfiles: Sequence[FlowFile], shared: Mapping[str, Any],
                     each: Mapping[str, Sequence[Any]], /) -> None:
        """An event the processor reported about each FlowFile of a batch: one event run when the
        session holds the batch whole, else ``_report`` each."""
        run = self._runs.of(flowfiles)
        if run is not None:
            self._runs.report(event_type, run, shared, each)
            return
        for i, flowfile in enumerate(flowfiles):
            self._report(event_type, flowfile, **shared, **{name: values[i] for name, values in each.items()})

    def _emit(self, event_type: ProvenanceEventType, flowfile: FlowFile, /, **fields: Any) -> list:
        """Record an event (a field array, see ``CommitBatch.events``); ``fields`` by name."""
        context = self.context
        event = new_event_fields(event_type, now_millis(), flowfile.uuid, self.component_id, context.name,
                                 context.processor_type, flowfile.lineage_start_date)
        for name, value in fields.items():
            event[FIELD_INDEX[name]] = value
        if event_type == _T.SEND:  # what was sent, not what the FlowFile became
            event[F_UPDATED_ATTRIBUTES] = flowfile.attributes  # never changed in place: shared with the event
            event[F_UPDATED_CLAIM] = flowfile.claim
            event[F_UPDATED_SIZE] = flowfile.size
        self._events.append(event)
        return event

    # ------------------------------------------------------------------ the commit's batch
    def _build_batch(self) -> CommitBatch | None:
        if self._runs:
            if self._runs.needs_clones(self.backend.destinations):
                self._explode()   # a relationship connected more than once: clones, one FlowFile at a time
            else:
                self._check_handled(self._runs.unhandled())
                source = EventSource(self.component_id, self.context.name, self.context.processor_type)
                return self._with_content(self._runs.commit_batch(self.backend.destinations, source))
        if not self._records and not self._events:
            return None
        self._check_handled([r.current.uuid for r in self._records.values() if not r.removed and r.relationship is None])
        commit = RecordCommit(self._records, self._events, self.backend.destinations, self.clone, self._emit)
        return self._with_content(commit.build())

    def _check_handled(self, unhandled: list[str]) -> None:
        if unhandled:
            raise FlowFileHandlingError(
                f"{self.context.name}: {len(unhandled)} FlowFile(s) were neither transferred nor "
                f"removed, e.g. {unhandled[0]}")

    def _with_content(self, batch: CommitBatch) -> CommitBatch:
        """``batch`` with the claims the session wrote and its byte counts."""
        if self._writer is not None:
            batch.new_claims = list(self._writer.created())
            batch.bytes_written = self._writer.bytes_written
        batch.bytes_read = self._bytes_read
        return batch

    def _reset(self) -> None:
        self._records.clear()
        self._runs = Runs()
        self._events = []
        self._writer = None
        self._bytes_read = 0
        self.pending_state = None


def _attribute_values(values: Mapping[str, Any]) -> dict[str, str]:
    """Attribute values as the session stores them: strings, and never ``uuid`` (a FlowFile's
    identity is not an attribute a processor sets)."""
    return {k: str(v) for k, v in values.items() if k != "uuid"}


def _attribute_values_for(values: Mapping[str, Any] | Sequence[Mapping[str, Any]],
                          count: int) -> dict[str, str] | list[dict[str, str]]:
    """``put_attributes_batch``'s values for ``count`` FlowFiles as the session stores them: one
    dict for all (a mapping given, or one mapping a FlowFile that are all equal), else a list of
    one a FlowFile; a mapping given for many FlowFiles is converted once."""
    if isinstance(values, Mapping):
        return _attribute_values(values)
    if len(values) != count:
        raise ValueError(f"{len(values)} attribute maps for {count} FlowFiles")
    converted: dict[int, dict[str, str]] = {}
    each = []
    for mapping in values:
        mine = converted.get(id(mapping))
        if mine is None:
            mine = converted[id(mapping)] = _attribute_values(mapping)
        each.append(mine)
    return each[0] if each and each.count(each[0]) == len(each) else each


def _common_attributes(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Attributes that every parent has with the same value (what NiFi gives a merged child)."""
    first, *rest = maps
    return {k: v for k, v in first.items() if k != "uuid" and all(m.get(k) == v for m in rest)}


def _linked(records: Mapping[str, FlowFileRecord], uuids: Sequence[str]) -> set[str]:
    """``uuids`` and every FlowFile of the session linked to one of them through parents and
    children, however far."""
    neighbours: dict[str, set[str]] = {uuid: set() for uuid in records}
    for uuid, record in records.items():
        for parent in record.parents:
            if parent in neighbours:
                neighbours[uuid].add(parent)
                neighbours[parent].add(uuid)
    found: set[str] = set()
    todo = list(uuids)
    while todo:
        uuid = todo.pop()
        if uuid not in found:
            found.add(uuid)
            todo.extend(neighbours[uuid] - found)
    return found


def relationships_with_room(relationships: Sequence[Relationship], backend: SessionBackend,
                            full: Sequence[str]) -> set[str]:
    """The names of ``relationships`` none of whose queues is among ``full`` (the destinations
    under back pressure); an auto-terminated relationship always has room."""
    under = set(full)
    return {r.name for r in relationships if not under.intersection(backend.destinations(r.name))}
