"""What the record processors share: their reader and writer properties, one FlowFile's records
read batch by batch through the reader service, records written through the writer service into
a FlowFile's content, NiFi's attributes on what was written, and a FlowFile sent to failure.

**Streaming.** ``Records`` hands out the reader's batches one at a time and keeps none of them
(only the unread rest of a batch ``take`` cut, which is a zero-copy slice); ``write_records``
writes each batch as it comes. A conversion therefore holds about one batch of records
(``flowactors.sdk.records.BATCH_RECORDS`` / ``BATCH_BYTES`` of input) plus whatever the writer
buffers (a Parquet row group), whatever the content's size.

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
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa

from flowactors.processors._common import boolean_property
from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, PropertyDescriptor, Relationship
from flowactors.sdk.records import (MalformedRecordError, RecordError, RecordReader, RecordReaderFactory,
                                    RecordSetWriterFactory, WriteResult)
from flowactors.sdk.relationships import FAILURE, failure_attributes

log = logging.getLogger(__name__)

RECORD_READER = PropertyDescriptor("Record Reader", "The controller service that reads the records of each FlowFile",
                                   required=True, service=RecordReaderFactory)
RECORD_WRITER = PropertyDescriptor("Record Writer", "The controller service that writes the records out",
                                   required=True, service=RecordSetWriterFactory)
INCLUDE_ZERO_RECORDS = boolean_property(
    "Include Zero Record FlowFiles", True, "Whether a FlowFile whose result holds no record is still sent on (false: "
    "it is dropped)")

#: the attributes NiFi's record processors write
RECORD_COUNT, MIME_TYPE, ERROR_MESSAGE = "record.count", "mime.type", "record.error.message"


def reader_and_writer(context: ProcessContext) -> tuple[RecordReaderFactory, RecordSetWriterFactory]:
    """The services the processor's ``Record Reader`` and ``Record Writer`` properties name."""
    return (context.service(RECORD_READER.name, RecordReaderFactory),
            context.service(RECORD_WRITER.name, RecordSetWriterFactory))


def is_flowfile_error(err: BaseException) -> bool:
    """Whether ``err`` is the FlowFile's problem (route it to failure), not the trigger's."""
    return isinstance(err, (RecordError, ContentRepositoryError, OSError)) and \
        not isinstance(err, ContentRepositoryFullError)


def reason(err: BaseException | str) -> str:
    """The error's message (or the text) on one line; an error's type's name when it has none."""
    text = " ".join(line.strip() for line in str(err).strip().splitlines() if line.strip())
    return text or type(err).__name__


def route_failure(context: ProcessContext, session, flowfile: FlowFile, err: BaseException | str,
                  extra: Mapping[str, str] | None = None, relationship: Relationship = FAILURE) -> FlowFile:
    """Send ``flowfile`` to failure with the attributes that say why (see the module docstring)."""
    message = err if isinstance(err, str) else reason(err)
    log.warning("%s: routing %s to %s: %s", context.name, flowfile.uuid, relationship.name, message)
    attributes = failure_attributes(context.name, message)
    if isinstance(err, MalformedRecordError):
        attributes.update(err.attributes())   # record.error.index and .offset, when the reader knows them
    attributes[ERROR_MESSAGE] = message
    flowfile = session.put_all_attributes(flowfile, {**attributes, **(extra or {})})
    session.transfer(flowfile, relationship)
    return flowfile


class Records:
    """One content's records, read through a ``RecordReader`` a batch at a time: iterate for every
    batch left, or ``take`` the next few records. Batches without records are skipped."""

    def __init__(self, reader: RecordReader):
        self.schema: pa.Schema = reader.schema()
        self._batches = reader.batches()
        self._head: pa.RecordBatch | None = None

    def _next(self) -> pa.RecordBatch | None:
        if self._head is not None:
            batch, self._head = self._head, None
            return batch
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


@contextmanager
def open_records(session, flowfile: FlowFile, reader_factory: RecordReaderFactory) -> Iterator[Records]:
    """The records of ``flowfile``'s content, read through ``reader_factory`` while the context lasts."""
    with session.read(flowfile) as stream:
        yield Records(reader_factory.create_reader(flowfile.attributes, stream, flowfile.size))


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


def written_attributes(writer_factory: RecordSetWriterFactory, result: WriteResult) -> dict[str, str]:
    """What a FlowFile the writer wrote says of it: ``mime.type``, the writer's schema attributes,
    ``record.count``."""
    return {MIME_TYPE: writer_factory.mime_type(), **result.attributes, RECORD_COUNT: str(result.record_count)}


def remove_all(session, flowfiles: Iterable[FlowFile]) -> None:
    """Remove FlowFiles this session created (what a failed FlowFile had begun to make)."""
    for flowfile in flowfiles:
        session.remove(flowfile)
