"""SplitRecord: a FlowFile's records cut into FlowFiles of a number of records each."""

from __future__ import annotations

import uuid

from flowactors.processors.records._io import (RECORD_READER, RECORD_WRITER, is_flowfile_error, open_records,
                                               positive_count, reader_and_writer, remove_all, route_failure,
                                               write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory
from flowactors.sdk.relationships import FAILURE

#: originals split per trigger: each may fan out to very many splits in one session
SPLIT_PARENTS_PER_TRIGGER = 100

RECORDS_PER_SPLIT = PropertyDescriptor(
    "Records Per Split", "How many records each split holds (the last may hold fewer)", required=True,
    validator=validators.POSITIVE_INTEGER, expression_language=True)


class SplitRecord(Processor):
    """Splits each FlowFile's records into FlowFiles of Records Per Split records.

    The records are read once, a batch at a time, and each split is written by the Record
    Writer with the schema its access strategy gives for the original (the records' own when it
    inherits). Each split gets ``record.count``, ``mime.type``, the writer's schema attributes,
    ``fragment.identifier`` (the same random id for every split of an original),
    ``fragment.index`` (0, 1, ... in record order, as NiFi's SplitRecord), ``fragment.count`` and
    ``segment.original.filename``; the original goes to original with ``fragment.identifier`` and
    ``fragment.count``. A FlowFile without records makes no split (``fragment.count`` 0).
    Provenance: one FORK event from the original to its splits. A FlowFile whose records cannot
    be read or written, or whose Records Per Split (an expression) is not a positive whole number,
    goes to failure unchanged, and the splits begun for it are dropped.
    """

    description = "Splits a FlowFile's records into FlowFiles of a number of records each"
    properties = (RECORD_READER, RECORD_WRITER, RECORDS_PER_SPLIT)
    SPLITS = Relationship("splits", "The FlowFiles of Records Per Split records each")
    ORIGINAL = Relationship("original", "The FlowFiles that were split")
    relationships = (SPLITS, ORIGINAL, Relationship(FAILURE.name, "FlowFiles whose records could not be read or "
                                                                  "written, unchanged"))

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        for original in session.get_batch(min(context.batch_size, SPLIT_PARENTS_PER_TRIGGER)):
            fragment_id = str(uuid.uuid4())
            try:
                per_split = positive_count(context, RECORDS_PER_SPLIT, original)
                splits = split(session, original, reader, writer, per_split, fragment_id)
            except Exception as err:
                if not is_flowfile_error(err):
                    raise
                route_failure(context, session, original, err)
                continue
            count = {"fragment.count": str(len(splits))}
            splits = session.put_attributes_batch(splits, count)
            if splits:
                session.provenance.fork(original, splits)
            session.transfer_batch(splits, self.SPLITS)
            session.transfer(session.put_all_attributes(original, {"fragment.identifier": fragment_id, **count}),
                             self.ORIGINAL)


def split(session, original: FlowFile, reader: RecordReaderFactory, writer: RecordSetWriterFactory, per_split: int,
          fragment_id: str) -> list[FlowFile]:
    """The splits of ``original``'s records, ``per_split`` records each, written and given their
    attributes but ``fragment.count``; on an error, the splits made so far are removed."""
    splits: list[FlowFile] = []
    filename = original.attributes.get("filename", "")
    try:
        with open_records(session, original, reader) as records:
            schema = writer.write_schema(original.attributes, records.schema)
            while not records.exhausted():
                child = session.create(original)
                splits.append(child)
                splits[-1], _ = write_records(session, child, writer, schema, records.take(per_split), extra={
                    "fragment.identifier": fragment_id, "fragment.index": str(len(splits) - 1),
                    "segment.original.filename": filename})
    except BaseException:
        remove_all(session, splits)
        raise
    return splits
