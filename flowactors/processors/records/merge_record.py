"""MergeRecord: FlowFiles' records merged into bigger FlowFiles, bins held across triggers.

The binning is MergeContent's (``flowactors.sdk.binning.BinPacker``: the holding session, the
correlation key, Maximum Number of Bins, Max Bin Age) with MergeRecord's rules on top
(``RecordBins``): each FlowFile is read once when it arrives, for its schema and its record count;
records of different schemas never share a bin; limits count records and bytes and are soft, as
NiFi's (a FlowFile's records all go into the bin it joins, which may pass a maximum by them).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa

from flowactors.processors.merge import ATTRIBUTE_STRATEGY, BIN_PACKING, MAX_BIN_AGE, UNIQUE, unique_attributes
from flowactors.processors.records._io import (RECORD_READER, RECORD_WRITER, is_flowfile_error, open_records, reason,
                                               remove_all, route_failure, write_records)
from flowactors.sdk import FlowFile, now_millis
from flowactors.sdk.binning import (MAX_AGE_REACHED, MAX_BINS_REACHED, REJECTED, Bin, BinPacker,
                                    BinSettings)
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory
from flowactors.sdk.records.schema import conform
from flowactors.sdk.relationships import FAILURE
from flowactors.sdk.units import parse_data_size

log = logging.getLogger(__name__)

DEFRAGMENT = "Defragment"
FRAGMENT_ID, FRAGMENT_INDEX, FRAGMENT_COUNT = "fragment.identifier", "fragment.index", "fragment.count"
MERGE_COUNT, MERGE_BIN_AGE, MERGE_UUID = "merge.count", "merge.bin.age", "merge.uuid"
MERGE_REASON = "merge.completion.reason"

FULL, FULL_ENOUGH = "Bin is full", "Bin is full enough"
#: BinPacker's reasons, as NiFi's MergeRecord says them
NIFI_REASONS = {MAX_BINS_REACHED: "Maximum number of bins has been exceeded",
                MAX_AGE_REACHED: "Bin has reached Max Bin Age"}


@dataclass
class Entry:
    """What binning learnt of one FlowFile: its records' schema and count, and the records
    themselves while the processor holds few enough (else they are read again to merge)."""

    schema: pa.Schema
    records: int
    table: pa.Table | None


class RecordBins(BinPacker):
    """BinPacker with MergeRecord's rules (see the module docstring): ``configure`` reads
    MergeRecord's properties, each FlowFile is read as it is admitted, ``fits`` keeps schemas apart
    (Bin-Packing) and ``full`` counts records, bytes or fragments. A bin that reached Minimum
    Number of Records and Minimum Bin Size is merged at the first trigger that finds no input, as
    NiFi's (while FlowFiles keep coming, only full bins are merged). A FlowFile that cannot be read
    (or, in Defragment, lacks a numeric fragment.count or a fragment.identifier) comes back alone
    as a ``REJECTED`` bin, its error in ``errors``."""

    #: the most bytes of records held in memory across bins (beyond: read again when merged)
    HOLD_BYTES = 64 << 20
    enough_only_when_idle = True

    def __init__(self) -> None:
        super().__init__()
        self._entries: dict[str, Entry] = {}
        self._counted: dict[int, list] = {}   # id(bin) -> [bin, FlowFiles counted, records]
        self._held = 0
        self.errors: dict[str, BaseException | str] = {}

    def configure(self, context: ProcessContext) -> None:
        p = context.property
        self.defragment = p("Merge Strategy").evaluate() == DEFRAGMENT
        self.reader = context.service(RECORD_READER.name, RecordReaderFactory)
        # the packer's own limits count FlowFiles, which are not limits here (records are)
        self.settings = BinSettings(correlation=p("Correlation Attribute Name").evaluate() or None,
                                    max_age=p(MAX_BIN_AGE.name).as_duration(),
                                    max_bins=p("Maximum Number of Bins").as_int())
        self._min_records = p("Minimum Number of Records").as_int()
        self._max_records = p("Maximum Number of Records").as_int() or sys.maxsize
        self._min_bytes = p("Minimum Bin Size").as_data_size() or 0
        self._max_bytes = p("Maximum Bin Size").as_data_size()

    def release(self) -> None:
        self._entries.clear()
        self._counted.clear()
        self.errors.clear()
        self._held = 0
        super().release()

    # ------------------------------------------------------------------ what a FlowFile holds
    def entry(self, flowfile: FlowFile) -> Entry:
        return self._entries[flowfile.uuid]

    def forget(self, bin: Bin) -> None:
        """Drop what was kept of a bin taken out (merged or failed)."""
        self._counted.pop(id(bin), None)
        for flowfile in bin.flowfiles:
            entry = self._entries.pop(flowfile.uuid, None)
            if entry is not None and entry.table is not None:
                self._held -= entry.table.nbytes
            self.errors.pop(flowfile.uuid, None)

    def admit(self, holding, flowfile: FlowFile) -> bool:
        """Read ``flowfile``'s records (its ``Entry``); False, its error in ``errors``, when they
        cannot be read or, in Defragment, its fragment attributes are wrong."""
        problem: BaseException | str | None = _fragment_problem(flowfile) if self.defragment else None
        if problem is None:
            try:
                self._entries[flowfile.uuid] = self._read(holding, flowfile)
            except Exception as err:   # any: raised here, the FlowFile would stay held in no bin
                problem = err
        if problem is None:
            return True
        self.errors[flowfile.uuid] = problem
        return False

    def _read(self, holding, flowfile: FlowFile) -> Entry:
        """The FlowFile's schema and record count, read a batch at a time; its records kept while
        they fit in ``HOLD_BYTES`` with those held already (else none of them: one beyond is
        counted and let go, and the FlowFile is read again when merged)."""
        count, size = 0, 0
        kept: list[pa.RecordBatch] | None = []
        with open_records(holding, flowfile, self.reader) as records:
            for batch in records:
                count += batch.num_rows
                size += batch.nbytes
                if kept is not None and self._held + size <= self.HOLD_BYTES:
                    kept.append(batch)
                else:
                    kept = None
            schema = records.schema
        table = pa.Table.from_batches(kept, schema=schema) if kept is not None else None
        self._held += table.nbytes if table is not None else 0
        return Entry(schema, count, table)

    # ------------------------------------------------------------------ the rules
    def records(self, bin: Bin) -> int:
        """How many records the bin holds (counted once a FlowFile)."""
        counted = self._counted.get(id(bin))
        if counted is None or counted[0] is not bin:
            counted = self._counted[id(bin)] = [bin, 0, 0]
        for flowfile in bin.flowfiles[counted[1]:]:
            counted[2] += self._entries[flowfile.uuid].records
        counted[1] = len(bin.flowfiles)
        return counted[2]

    def key(self, flowfile: FlowFile) -> str | None:
        return flowfile.attributes.get(FRAGMENT_ID) if self.defragment else super().key(flowfile)

    def fits(self, bin: Bin, flowfile: FlowFile) -> bool:
        if self.defragment:
            return True   # the key (fragment.identifier) is the bin
        return self.entry(flowfile).schema.equals(self.entry(bin.flowfiles[0]).schema, check_metadata=True)

    def enough(self, bin: Bin) -> str | None:
        if self.defragment or self.records(bin) < self._min_records or bin.size < self._min_bytes:
            return None
        return FULL_ENOUGH

    def full(self, bin: Bin) -> str | None:
        if self.defragment:
            expected = int(bin.flowfiles[0].attributes[FRAGMENT_COUNT])
            return FULL if len(bin.flowfiles) >= expected else None
        if self.enough(bin) is None:
            return None
        if self.records(bin) >= self._max_records or (self._max_bytes is not None and bin.size >= self._max_bytes):
            return FULL
        return None


def _fragment_problem(flowfile: FlowFile) -> str | None:
    """Why Defragment cannot bin ``flowfile`` (no fragment.identifier, no whole fragment.count), or None."""
    attributes = flowfile.attributes
    if not attributes.get(FRAGMENT_ID):
        return f"Defragment needs the '{FRAGMENT_ID}' attribute, which the FlowFile lacks"
    count = attributes.get(FRAGMENT_COUNT)
    if count is None or not count.strip().isdigit():
        return f"Defragment needs a whole number in the '{FRAGMENT_COUNT}' attribute, not {count!r}"
    return None


def _records_problems(values: Mapping[str, str]) -> list[str]:
    def number(name: str, default: str) -> int | None:
        value = values.get(name, default)
        return int(value) if value and value.strip().lstrip("-").isdigit() else None

    problems = []
    low, high = number("Minimum Number of Records", "1"), number("Maximum Number of Records", "1000")
    if low is not None and high is not None and high < low:
        problems.append("Maximum Number of Records is smaller than Minimum Number of Records")
    small, large = values.get("Minimum Bin Size", "0 B"), values.get("Maximum Bin Size")
    if large and parse_data_size(large) < parse_data_size(small):
        problems.append("Maximum Bin Size is smaller than Minimum Bin Size")
    return problems


class MergeRecord(Processor):
    """Merges the records of many FlowFiles into one FlowFile (NiFi's MergeRecord).

    **Bin-Packing Algorithm**: FlowFiles whose records have the same schema (and, with Correlation
    Attribute Name, the same value of that attribute) share a bin. A bin is merged when it is
    full (it holds Minimum Number of Records and Minimum Bin Size, and Maximum Number of Records
    or Maximum Bin Size), when it is full enough and a trigger finds no input, when it is older
    than Max Bin Age, or, oldest first, when a new bin is needed and Maximum Number of Bins are
    open. Sizes are the FlowFiles' content sizes.

    **Defragment**: the FlowFiles of one fragment.identifier share a bin, whatever their schemas
    (each one's records are cast to the first's), and it is merged, in fragment.index order, once
    it holds fragment.count FlowFiles. A bin completed short of that (Max Bin Age, Maximum Number
    of Bins), or whose FlowFiles disagree on fragment.count, goes to failure.

    The merged FlowFile (``merged``) is written by the Record Writer with the first FlowFile's
    attributes; it gets the attributes the originals share (or, with Keep All Unique Attributes,
    every attribute no two disagree on), ``record.count``, ``mime.type``, the writer's schema
    attributes, ``merge.count``, ``merge.bin.age`` (ms) and ``merge.completion.reason``. The
    originals go to ``original`` with ``merge.uuid``, in the same commit. Provenance: a JOIN.
    A FlowFile the reader cannot read goes to failure alone when it arrives (``record.error.*``);
    a bin that cannot be written goes to failure whole. When the processor stops, open bins go
    back to the queue, unchanged.
    """

    description = "Merges the records of FlowFiles with the same schema into bigger FlowFiles"
    trigger_when_empty = True
    properties = (
        RECORD_READER, RECORD_WRITER,
        PropertyDescriptor("Merge Strategy", "Bin-Packing Algorithm: bins by schema (and correlation attribute); "
                           "Defragment: bins by fragment.identifier and merges fragment.count FlowFiles",
                           required=True, default=BIN_PACKING, allowable_values=(BIN_PACKING, DEFRAGMENT)),
        PropertyDescriptor("Correlation Attribute Name", "Only FlowFiles with the same value of this attribute are "
                           "merged together (Bin-Packing)"),
        ATTRIBUTE_STRATEGY,
        PropertyDescriptor("Minimum Number of Records", "The fewest records a bin is merged with (unless it is older "
                           "than Max Bin Age or makes room for a new bin)", required=True, default="1",
                           validator=validators.POSITIVE_INTEGER, expression_language=True),
        PropertyDescriptor("Maximum Number of Records", "A bin holding this many records is merged (a soft limit: "
                           "the last FlowFile's records all go in)", default="1000",
                           validator=validators.POSITIVE_INTEGER, expression_language=True),
        PropertyDescriptor("Minimum Bin Size", "The smallest total content a bin is merged with", required=True,
                           default="0 B", validator=validators.DATA_SIZE),
        PropertyDescriptor("Maximum Bin Size", "A bin holding this much content is merged (a soft limit)",
                           validator=validators.DATA_SIZE),
        MAX_BIN_AGE,
        PropertyDescriptor("Maximum Number of Bins", "The most bins open at once; the oldest is merged to make room",
                           required=True, default="10", validator=validators.POSITIVE_INTEGER),
    )
    #: NiFi's internal property names (for the NiFi import; the values are NiFi's own)
    NIFI_PROPERTY_NAMES = {"record-reader": "Record Reader", "record-writer": "Record Writer",
                           "merge-strategy": "Merge Strategy", "correlation-attribute-name": "Correlation Attribute Name",
                           "min-bin-size": "Minimum Bin Size", "max-bin-size": "Maximum Bin Size",
                           "min-records": "Minimum Number of Records", "max-records": "Maximum Number of Records",
                           "max.bin.count": "Maximum Number of Bins", "max-bin-age": "Max Bin Age"}
    MERGED = Relationship("merged", "The FlowFiles holding the merged records")
    ORIGINAL = Relationship("original", "The FlowFiles whose records were merged")
    relationships = (MERGED, ORIGINAL, FAILURE)

    def __init__(self) -> None:
        self._bins = RecordBins()

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return _records_problems(values)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._bins.configure(context)
        self._writer = context.service(RECORD_WRITER.name, RecordSetWriterFactory)
        self._unique = context.property(ATTRIBUTE_STRATEGY.name).evaluate() == UNIQUE

    def on_stopped(self, context: ProcessContext) -> None:
        """Give every binned FlowFile back to its queue, unchanged."""
        self._bins.release()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for bin, why in self._bins.take_ready(session):
            try:
                if why == REJECTED:
                    route_failure(context, session, bin.flowfiles[0], self._bins.errors[bin.flowfiles[0].uuid])
                else:
                    self._complete(context, session, bin, NIFI_REASONS.get(why, why))
            finally:
                self._bins.forget(bin)
        if not self._bins.found_input:
            context.yield_()

    # ------------------------------------------------------------------ merging
    def _complete(self, context: ProcessContext, session, bin: Bin, why: str) -> None:
        sources = bin.flowfiles
        if self._bins.defragment:
            problem = _fragments_problem(sources)
            if problem is not None:
                for source in sources:
                    route_failure(context, session, source, problem)
                return
            sources = sorted(sources, key=_fragment_index)
        merged = session.create(parents=sources)
        first = sources[0]
        schema = self._bins.entry(first).schema
        age = max(0, now_millis() - bin.created_ms)
        extra = {MERGE_COUNT: str(len(sources)), MERGE_BIN_AGE: str(age), MERGE_REASON: why}
        if self._unique:
            extra = {**unique_attributes(sources), **extra}
        try:
            write_schema = self._writer.write_schema(first.attributes, schema)
            merged, _ = write_records(session, merged, self._writer, write_schema,
                                      self._batches(session, sources, schema), first.attributes, extra=extra,
                                      size_hint=bin.size)
        except Exception as err:
            if not is_flowfile_error(err):
                raise
            remove_all(session, [merged])
            message = f"the records of {len(sources)} FlowFiles could not be merged: {reason(err)}"
            for source in sources:
                route_failure(context, session, source, message)
            return
        session.provenance.join(sources, merged, details=f"Records Merged due to: {why}")
        session.transfer(merged, self.MERGED)
        for source in sources:
            session.transfer(session.put_attribute(source, MERGE_UUID, merged.uuid), self.ORIGINAL)

    def _batches(self, session, sources: Sequence[FlowFile], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Each source's records, in order: the held ones, or read again; cast to ``schema``
        where a fragment's schema differs (Defragment)."""
        for source in sources:
            entry = self._bins.entry(source)
            if entry.table is not None:
                batches: Iterator[pa.RecordBatch] = iter(entry.table.to_batches())
                yield from (b if b.schema.equals(schema) else conform(b, schema) for b in batches)
                continue
            with open_records(session, source, self._bins.reader) as records:
                yield from (b if b.schema.equals(schema) else conform(b, schema) for b in records)


def _fragment_index(flowfile: FlowFile) -> int:
    """Where a fragment goes (fragment.index; one without a whole number first, in arrival order)."""
    index = (flowfile.attributes.get(FRAGMENT_INDEX) or "").strip()
    return int(index) if index.isdigit() else -1


def _fragments_problem(sources: Sequence[FlowFile]) -> str | None:
    """Why a Defragment bin cannot be merged, or None when it holds every fragment."""
    counts = {f.attributes[FRAGMENT_COUNT].strip() for f in sources}
    identifier = sources[0].attributes[FRAGMENT_ID]
    if len(counts) > 1:
        return (f"the fragments of '{identifier}' disagree on {FRAGMENT_COUNT} "
                f"({', '.join(sorted(counts, key=int))})")
    expected = int(counts.pop())
    if expected != len(sources):
        return (f"{FRAGMENT_COUNT} of '{identifier}' is {expected}, but only {len(sources)} fragments arrived before "
                f"the bin was completed (Max Bin Age reached, or Maximum Number of Bins exceeded)")
    return None
