"""Records written aside into a spool, and what a FlowFile the writer wrote says of it.

A session writes one content at a time, so records that belong to another FlowFile than the one
being written (ValidateRecord's invalid ones, LookupRecord's unmatched ones, a NiFi record
transform's groups) are written through their writer into a spool as they come - memory up to
``SPOOL_BYTES``, then a temporary file - and copied into a FlowFile's content once written
(``SpooledRecords``). ``written_attributes`` are the attributes NiFi's record processors set on
what a writer wrote: ``mime.type``, the writer's schema attributes and ``record.count``.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import BinaryIO, Mapping

import pyarrow as pa

from flowactors.sdk import FlowFile
from flowactors.sdk.records.api import BATCH_BYTES, RecordSetWriter, RecordSetWriterFactory, WriteResult

#: the attributes NiFi's record processors write on what a writer wrote
RECORD_COUNT, MIME_TYPE = "record.count", "mime.type"
#: records put aside (``SpooledRecords``) are held in memory up to this many bytes, then in a temporary file
SPOOL_BYTES = BATCH_BYTES


def written_attributes(writer_factory: RecordSetWriterFactory, result: WriteResult) -> dict[str, str]:
    """What a FlowFile the writer wrote says of it: ``mime.type``, the writer's schema attributes,
    ``record.count``."""
    return {MIME_TYPE: writer_factory.mime_type(), **result.attributes, RECORD_COUNT: str(result.record_count)}


class SpooledRecords:
    """Records put aside while the session writes another content (it writes one at a time):
    written as they come through a writer of ``schema`` (made with the first of them, given
    ``attributes``) into a spool, memory up to ``SPOOL_BYTES`` and then a temporary file, whatever
    their number; once the other content is written, ``finish`` and ``write_to`` make them a
    FlowFile's content. A context manager: the spool is deleted when it exits."""

    def __init__(self, factory: RecordSetWriterFactory, schema: pa.Schema, attributes: Mapping[str, str]):
        self._factory = factory
        self._schema = schema
        self._attributes = attributes
        self._spool = tempfile.SpooledTemporaryFile(SPOOL_BYTES)
        self._writer: RecordSetWriter | None = None
        self._result: WriteResult | None = None

    def __enter__(self) -> "SpooledRecords":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._spool.close()

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            self._writer = self._factory.create_writer(self._schema, self._spool, self._attributes)
        self._writer.write_batch(batch)

    def finish(self) -> WriteResult | None:
        """Finish the writer: what it wrote, or None when no record was written."""
        if self._writer is not None and self._result is None:
            self._result = self._writer.finish()
        return self._result

    def write_to(self, session, flowfile: FlowFile, extra: Mapping[str, str] | None = None) -> FlowFile:
        """``flowfile`` with the records written (after ``finish`` gave a result) as its content,
        and the attributes the writer gives them (``written_attributes``), then ``extra``."""
        assert self._result is not None, "write_to before finish() gave a result"
        flowfile = session.write(flowfile, self._copy_to)
        return session.put_all_attributes(flowfile, {**written_attributes(self._factory, self._result),
                                                     **(extra or {})})

    def _copy_to(self, out: BinaryIO) -> None:
        self._spool.seek(0)
        shutil.copyfileobj(self._spool, out, 1 << 20)
