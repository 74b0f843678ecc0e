"""ConvertRecord: a FlowFile's records read with one format's reader and written with another's writer."""

from __future__ import annotations

from flowactors.processors.records._io import (INCLUDE_ZERO_RECORDS, RECORD_READER, RECORD_WRITER, is_flowfile_error,
                                               open_records, reader_and_writer, route_failure, write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, Relationship
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory, WriteResult
from flowactors.sdk.relationships import FAILURE


class ConvertRecord(Processor):
    """Converts each FlowFile's records from the Record Reader's format to the Record Writer's.

    The content is replaced by the records as the writer writes them, with the schema the writer's
    schema access strategy gives (the records' own when it inherits), streamed a batch at a time:
    a FlowFile of any size is converted in bounded memory. The FlowFile goes to success with
    ``record.count``, ``mime.type`` and the writer's schema attributes. Provenance: the session's
    CONTENT_MODIFIED. With Include Zero Record FlowFiles false, one with no record is dropped
    instead. A FlowFile whose records cannot be read or written goes to failure unchanged, with
    ``record.error.message`` (and ``record.error.index`` / ``.offset`` where the reader knows them).
    """

    description = "Converts records from one format to another with a Record Reader and a Record Writer"
    properties = (RECORD_READER, RECORD_WRITER, INCLUDE_ZERO_RECORDS)
    SUCCESS = Relationship("success", "FlowFiles whose records were converted")
    relationships = (SUCCESS, Relationship(FAILURE.name, "FlowFiles whose records could not be read or written, "
                                                         "unchanged"))

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        include_empty = context.property(INCLUDE_ZERO_RECORDS.name).as_bool()
        for flowfile in session.get_batch():
            try:
                converted, result = convert(session, flowfile, reader, writer)
            except Exception as err:
                if not is_flowfile_error(err):
                    raise
                route_failure(context, session, flowfile, err)
                continue
            if result.record_count == 0 and not include_empty:
                session.remove(converted)
            else:
                session.transfer(converted, self.SUCCESS)


def convert(session, flowfile: FlowFile, reader: RecordReaderFactory,
            writer: RecordSetWriterFactory) -> tuple[FlowFile, WriteResult]:
    """Replace ``flowfile``'s content with its records written by ``writer``, batch by batch."""
    with open_records(session, flowfile, reader) as records:
        schema = writer.write_schema(flowfile.attributes, records.schema)
        return write_records(session, flowfile, writer, schema, records, size_hint=flowfile.size)
