"""What the record processors share: their reader and writer properties, one FlowFile's records
read batch by batch through the reader service, records written through the writer service into
a FlowFile's content, NiFi's attributes on what was written, a FlowFile sent to failure, and
what the processors that change records by RecordPath share (checking their paths, finding the
top-level field a value is in, making a batch again of its records changed as dicts).

**Streaming.** ``Records`` hands out the reader's batches one at a time and keeps none of them
(only the unread rest of a batch ``take`` cut, which is a zero-copy slice); ``write_records``
writes each batch as it comes. A conversion therefore holds about one batch of records
(``flowactors.sdk.records.BATCH_RECORDS`` / ``BATCH_BYTES`` of input), two when the content is
larger than a batch (the next is read ahead by a thread while this one is written:
``ReadAhead``), plus whatever the writer buffers (a Parquet row group), whatever the content's size.

**Failure.** A record the reader cannot read (``MalformedRecordError``), a schema it cannot find,
a record that does not fit the writer's schema (``RecordError``), or a content that cannot be read
(``ContentRepositoryError``, ``OSError``) is the FlowFile's problem: ``route_failure`` sends it,
unchanged but for its attributes, to ``failure`` with NiFi's ``record.error.message`` (and
``record.error.index`` / ``record.error.offset`` when the reader knows where) and flowactors'
``flowactors.failure.reason`` / ``flowactors.failure.processor``. The content written for it
before the error is dropped with the session's write. A full content repository is not the
FlowFile's problem: it fails the trigger, whose session rolls back.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from contextlib import contextmanager
from itertools import chain
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from flowactors.processors._common import boolean_property
from flowactors.processors._common import route_failure as common_route_failure
from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, PropertyDescriptor, Relationship
from flowactors.sdk.record_path import FieldValue, RecordPath, RecordPathError, compile_path
from flowactors.sdk.records import (BATCH_BYTES, MalformedRecordError, RecordError, RecordReader, RecordReaderFactory,
                                    RecordSetWriterFactory, WriteResult)
from flowactors.sdk.records.schema import merge_types, to_choice_storage
from flowactors.sdk.records.spooling import SpooledRecords, written_attributes
from flowactors.sdk.relationships import FAILURE, reason

log = logging.getLogger(__name__)

RECORD_READER = PropertyDescriptor("Record Reader", "The controller service that reads the records of each FlowFile",
                                   required=True, service=RecordReaderFactory)
RECORD_WRITER = PropertyDescriptor("Record Writer", "The controller service that writes the records out",
                                   required=True, service=RecordSetWriterFactory)
INCLUDE_ZERO_RECORDS = boolean_property(
    "Include Zero Record FlowFiles", True, "Whether a FlowFile whose result holds no record is still sent on (false: "
    "it is dropped)")

#: the attribute NiFi's record processors write on a record that failed
ERROR_MESSAGE = "record.error.message"


def reader_and_writer(context: ProcessContext) -> tuple[RecordReaderFactory, RecordSetWriterFactory]:
    """The services the processor's ``Record Reader`` and ``Record Writer`` properties name."""
    return (context.service(RECORD_READER.name, RecordReaderFactory),
            context.service(RECORD_WRITER.name, RecordSetWriterFactory))


class PropertyValueError(ValueError):
    """A property whose value, evaluated for one FlowFile, the processor cannot use: the
    FlowFile's problem (``is_flowfile_error``); the message names the property and the value."""


def positive_count(context: ProcessContext, descriptor: PropertyDescriptor, flowfile: FlowFile) -> int:
    """``descriptor``'s value evaluated for ``flowfile``, a positive whole number;
    ``PropertyValueError`` when it is not one."""
    value = context.property(descriptor.name).evaluate(flowfile) or ""
    if not value.strip().isdigit() or int(value) <= 0:
        raise PropertyValueError(f"'{descriptor.name}' is {value!r} for this FlowFile, not a positive whole number")
    return int(value)


def is_flowfile_error(err: BaseException) -> bool:
    """Whether ``err`` is the FlowFile's problem (route it to failure), not the trigger's."""
    return isinstance(err, (RecordError, ContentRepositoryError, OSError, PropertyValueError)) and \
        not isinstance(err, ContentRepositoryFullError)


def route_failure(context: ProcessContext, session, flowfile: FlowFile, err: BaseException | str,
                  extra: Mapping[str, str] | None = None, relationship: Relationship = FAILURE) -> FlowFile:
    """Send ``flowfile`` to failure with the attributes that say why (see the module docstring)."""
    message = err if isinstance(err, str) else reason(err)
    # record.error.index and .offset, when the reader knows them
    attributes = err.attributes() if isinstance(err, MalformedRecordError) else {}
    attributes[ERROR_MESSAGE] = message
    return common_route_failure(context, session, flowfile, message, {**attributes, **(extra or {})}, relationship)


class ReadAhead:
    """The batches of ``batches`` read by a thread of their own, at most ``depth`` ahead of the
    one consuming them: the reader decodes the next batch while the consumer works on this one
    (pyarrow's readers and writers, and DuckDB, release the GIL). The thread is the one thread that
    uses the reader from then on; an exception it meets is raised to the consumer where that
    batch would have come. ``close`` stops the thread and waits for it to end (so the content
    stream it reads may be closed after)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], depth: int = 1):
        self._depth = depth
        self._ready: deque[tuple[pa.RecordBatch | None, BaseException | None]] = deque()
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._read, args=(batches,), name="records-read-ahead", daemon=True)
        self._thread.start()

    def _read(self, batches: Iterator[pa.RecordBatch]) -> None:
        try:
            for batch in batches:
                if not self._put(batch, None):
                    break
            else:
                self._put(None, None)
        except BaseException as err:   # given to the consumer, raised there
            self._put(None, err)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()   # a generator's cleanup in the thread that ran it

    def _put(self, batch: pa.RecordBatch | None, error: BaseException | None) -> bool:
        with self._changed:
            while len(self._ready) >= self._depth and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return False
            self._ready.append((batch, error))
            self._changed.notify_all()
            return True

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self

    def __next__(self) -> pa.RecordBatch:
        with self._changed:
            while not self._ready:
                if self._stopped:
                    raise StopIteration
                self._changed.wait()
            batch, error = self._ready.popleft()
            self._changed.notify_all()
            if error is not None or batch is None:
                self._stopped = True
        if error is not None:
            raise error
        if batch is None:
            raise StopIteration
        return batch

    def close(self) -> None:
        with self._changed:
            self._stopped = True
            self._ready.clear()
            self._changed.notify_all()
        self._thread.join()


class Records:
    """One content's records, read through a ``RecordReader`` a batch at a time: iterate for every
    batch left, or ``take`` the next few records. Batches without records are skipped. With
    ``read_ahead`` the reader's batches are read a batch ahead by a thread (``ReadAhead``) until
    ``close``."""

    def __init__(self, reader: RecordReader, read_ahead: bool = False):
        self._reader = reader
        self.schema: pa.Schema = reader.schema()
        self._fields: Sequence[str] | None = None
        self._read_ahead = read_ahead
        self._batches: Iterator[pa.RecordBatch] | None = None   # asked for at the first batch
        self._head: pa.RecordBatch | None = None

    def project(self, names: Sequence[str]) -> None:
        """Read only the fields ``names`` (of ``schema``, each once), in that order, from now on
        (``RecordReader.projected_batches``); ``schema`` becomes theirs. Before any batch is read."""
        self.schema = pa.schema([self.schema.field(name) for name in names], metadata=self.schema.metadata)
        self._fields = names

    def _next(self) -> pa.RecordBatch | None:
        if self._head is not None:
            batch, self._head = self._head, None
            return batch
        if self._batches is None:
            self._batches = self._reader.batches() if self._fields is None else \
                self._reader.projected_batches(self._fields)
            if self._read_ahead:
                self._batches = ReadAhead(self._batches)
        for batch in self._batches:
            if batch.num_rows:
                return batch
        return None

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while (batch := self._next()) is not None:
            yield batch

    def take(self, count: int) -> Iterator[pa.RecordBatch]:
        """The next ``count`` records (fewer at the end), as batches; what a batch had beyond them
        is kept for the next call."""
        while count > 0 and (batch := self._next()) is not None:
            if batch.num_rows > count:
                self._head = batch.slice(count)
                batch = batch.slice(0, count)
            count -= batch.num_rows
            yield batch

    def exhausted(self) -> bool:
        """Whether no record is left (reads ahead one batch, kept for the next call)."""
        if self._head is None:
            self._head = self._next()
        return self._head is None

    def close(self) -> None:
        """Stop reading ahead (waiting for the thread that does)."""
        if isinstance(self._batches, ReadAhead):
            self._batches.close()


@contextmanager
def open_records(session, flowfile: FlowFile, reader_factory: RecordReaderFactory) -> Iterator[Records]:
    """The records of ``flowfile``'s content, read through ``reader_factory`` while the context
    lasts; a content of more than one batch's bytes (``BATCH_BYTES``) is read a batch ahead."""
    with session.read(flowfile) as stream:
        records = Records(reader_factory.create_reader(flowfile.attributes, stream, flowfile.size),
                          read_ahead=flowfile.size > BATCH_BYTES)
        try:
            yield records
        finally:
            records.close()


def write_records(session, flowfile: FlowFile, writer_factory: RecordSetWriterFactory, schema: pa.Schema,
                  batches: Iterable[pa.RecordBatch], attributes: Mapping[str, str] | None = None, *,
                  extra: Mapping[str, str] | None = None, size_hint: int | None = None) -> tuple[FlowFile, WriteResult]:
    """Replace ``flowfile``'s content with ``batches`` written by a writer of ``schema`` (given
    ``attributes``: the FlowFile's own when None), and set ``record.count``, ``mime.type`` and the
    writer's schema attributes, plus ``extra``. Returns the FlowFile and what the writer wrote."""
    results: list[WriteResult] = []

    def write(out: Any) -> None:
        writer = writer_factory.create_writer(schema, out, flowfile.attributes if attributes is None else attributes)
        for batch in batches:
            writer.write_batch(batch)
        results.append(writer.finish())

    flowfile = session.write(flowfile, write, size_hint=size_hint)
    result = results[0]
    return session.put_all_attributes(flowfile, {**written_attributes(writer_factory, result), **(extra or {})}), result


def set_aside(batch: pa.RecordBatch, kept: np.ndarray, spool: SpooledRecords) -> pa.RecordBatch | None:
    """The records of ``batch`` that ``kept`` (one bool a record) marks: the batch itself when it
    marks all, None when it marks none; the others are written to ``spool``."""
    if not kept.all():
        spool.write(batch.filter(pa.array(~kept)))
    if not kept.any():
        return None
    return batch if kept.all() else batch.filter(pa.array(kept))


def remove_all(session, flowfiles: Iterable[FlowFile]) -> None:
    """Remove FlowFiles this session created (what a failed FlowFile had begun to make)."""
    for flowfile in flowfiles:
        session.remove(flowfile)


# ---------------------------------------------------------------------------------- RecordPath on records
#: what Arrow raises when values do not make an array of a type (``pa.array``, a scalar's cast)
ARROW_FAILURES = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
                  OverflowError)


def record_path_problem(text: str) -> str | None:
    """Why ``text`` is not a RecordPath (where the mistake is), or None; a text holding an
    expression is known only per FlowFile and is not checked (for ``custom_validate``)."""
    if "${" in text:
        return None
    try:
        compile_path(text)
    except RecordPathError as err:
        return str(err)
    return None


def record_path_problems(paths: Mapping[str, str], part: str) -> list[str]:
    """One sentence for each path of ``paths`` (dynamic property -> its path text) that is not a
    RecordPath (``record_path_problem``), naming the property and ``part`` (its name or its value)."""
    return [f"dynamic property '{name}': {part} is not a valid RecordPath: {problem}"
            for name, text in paths.items() if (problem := record_path_problem(text)) is not None]


#: a path naming one field of the record itself, bare or quoted
_TOP_FIELD = re.compile(r"^\s*/(?:([A-Za-z_$][\w$]*)|'([^'\\]*)')\s*$")


def named_top_field(path: RecordPath) -> str | None:
    """The field of the record itself that ``path`` is, when it is only that (``/name`` or
    ``/'a name'``); None for any other path."""
    match = _TOP_FIELD.match(path.text)
    if match is None:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


def scalar_top_field(path: RecordPath, schema: pa.Schema) -> str | None:
    """The field ``path`` names (``named_top_field``) when ``schema`` has it with a type Arrow can
    group and look values up by (not nested, a union, dictionary-encoded or null): a column the
    work can be done on a column at a time. None otherwise."""
    name = named_top_field(path)
    if name is None or schema.get_field_index(name) < 0:
        return None
    data_type = schema.field(name).type
    nested = pa.types.is_nested(data_type) or pa.types.is_union(data_type) or pa.types.is_dictionary(data_type)
    return None if nested or pa.types.is_null(data_type) else name


def top_field_name(fv: FieldValue) -> str:
    """The name of the record's own (top-level) field that ``fv`` is in, or is; ``fv`` must not be
    the record itself."""
    node = fv
    while node.parent is not None and node.parent.parent is not None:
        node = node.parent
    return node.key if isinstance(node.key, str) else str(node.name)


def rebuild_batch(batch: pa.RecordBatch, rows: list[dict], touched: set[str] | None,
                  fixed: pa.Schema | None) -> pa.RecordBatch:
    """The batch of ``rows``, ``batch``'s records as dicts after a change: the columns not in
    ``touched`` are taken from ``batch`` as they were (no copy), the others made from the rows,
    typed as ``fixed`` says when it has the field, else as ``batch`` had it, widened or made text
    where the values no longer fit (``_column``); a field only the rows have is added last.
    ``touched`` None (a record replaced whole): every column from the rows, in their field order."""
    if touched is None:
        names = list(dict.fromkeys(chain.from_iterable(rows)))
    else:
        names = batch.schema.names + [n for n in touched if n not in batch.schema.names]
    fields, columns = [], []
    for name in names:
        index = batch.schema.get_field_index(name)
        if touched is not None and name not in touched:
            fields.append(batch.schema.field(index))
            columns.append(batch.column(index))
            continue
        known = fixed.field(name) if fixed is not None and name in fixed.names else \
            (batch.schema.field(index) if index >= 0 else None)
        field, column = _column(name, [row.get(name) for row in rows], known)
        fields.append(field)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=batch.schema.metadata))


def _column(name: str, values: list, known: pa.Field | None) -> tuple[pa.Field, pa.Array]:
    """``values`` as an Arrow column: of ``known``'s type when they fit it and need nothing more,
    else of the type both fit (a struct given new fields, a number widened, text), else of their
    own type, else as text."""
    built = None
    if known is not None:
        try:
            built = pa.array(values, type=known.type)
        except ARROW_FAILURES:
            built = None
        if built is not None and not _holds_struct(known.type):
            return known, built
    try:
        inferred: pa.DataType | None = pa.array(values).type
    except ARROW_FAILURES:
        inferred = None
    if inferred is not None and pa.types.is_null(inferred):
        inferred = None
    if known is not None:
        merged = merge_types(known.type, inferred) if inferred is not None else known.type
        if built is not None and (merged is None or merged == known.type):
            return known, built
        target = merged or inferred
    else:
        target = inferred or pa.string()
    if target is not None:
        try:
            return pa.field(name, target), pa.array(values, type=target)
        except ARROW_FAILURES:
            pass
    return pa.field(name, pa.string()), pa.array(to_choice_storage(values, pa.string()), pa.string())


def _holds_struct(data_type: pa.DataType) -> bool:
    """Whether ``data_type`` is or holds a struct (whose extra keys ``pa.array`` would drop)."""
    if pa.types.is_struct(data_type):
        return True
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _holds_struct(data_type.value_type)
    if pa.types.is_map(data_type):
        return _holds_struct(data_type.item_type)
    return False
