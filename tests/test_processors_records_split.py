"""SplitRecord: NiFi's TestSplitRecord cases on the real record services, bad input, and splits
that cross the reader's batches."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowactors.processors.records import SplitRecord
from flowactors.services import JsonRecordSetWriter, JsonTreeReader, ParquetReader, ParquetRecordSetWriter
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

PEOPLE = [{"name": "John Doe", "age": 48}, {"name": "Jane Doe", "age": 47}, {"name": "Jimmy Doe", "age": 14}]
JSON_SERVICES = {"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {})}


def runner(per_split, services=None) -> ProcessorRunner:
    return ProcessorRunner(SplitRecord, {"Record Reader": "reader", "Record Writer": "writer",
                                         "Records Per Split": str(per_split)}, services=services or JSON_SERVICES)


def split(per_split, rows=PEOPLE, attributes=None) -> ProcessorRunner:
    splitter = runner(per_split)
    splitter.enqueue(json.dumps(rows).encode(), attributes or {"filename": "people.json"})
    splitter.run()
    return splitter


@pytest.mark.usefixtures("processor_engine")
def test_one_record_per_split():
    # NiFi's testIndividualRecordPerSplit
    splitter = split(1)
    splits = splitter.output("splits")
    assert [json.loads(splitter.read(s)) for s in splits] == [[person] for person in PEOPLE]
    identifiers = {s.attributes["fragment.identifier"] for s in splits}
    assert len(identifiers) == 1
    assert [s.attributes["fragment.index"] for s in splits] == ["0", "1", "2"]   # from 0, as NiFi's SplitRecord
    for each in splits:
        assert each.attributes["fragment.count"] == "3"
        assert each.attributes["segment.original.filename"] == "people.json"
        assert each.attributes["record.count"] == "1"
        assert each.attributes["mime.type"] == "application/json"
    [original] = splitter.output("original")
    assert original.attributes["fragment.count"] == "3"
    assert original.attributes["fragment.identifier"] in identifiers
    assert "fragment.index" not in original.attributes
    [fork] = [e for e in splitter.events() if e.event_type == T.FORK]
    assert fork.flowfile_uuid == original.uuid and sorted(fork.child_uuids) == sorted(s.uuid for s in splits)
    assert splitter.output("failure") == []


@pytest.mark.usefixtures("processor_engine")
def test_a_malformed_record_sends_the_original_to_failure_and_no_split():
    # NiFi's testReadFailure
    splitter = runner(1)
    content = b'[{"name": "a"}, {"name": "b"}, {"name": }]'
    splitter.enqueue(content)
    splitter.run()
    [failed] = splitter.output("failure")
    assert splitter.read(failed) == content
    assert failed.attributes["record.error.index"] == "2"
    assert splitter.output("splits") == [] and splitter.output("original") == []


def test_several_records_per_split():
    # NiFi's testMultipleRecordsPerSplit and testAllSplitsOneDestination
    two = split(2)
    assert [json.loads(c) for c in two.contents("splits")] == [PEOPLE[:2], PEOPLE[2:]]
    assert [s.attributes["record.count"] for s in two.output("splits")] == ["2", "1"]
    assert [json.loads(c) for c in split(3).contents("splits")] == [PEOPLE]
    assert [json.loads(c) for c in split(10).contents("splits")] == [PEOPLE]


def test_no_record_makes_no_split():
    splitter = split(1, rows=[])
    assert splitter.output("splits") == []
    [original] = splitter.output("original")
    assert original.attributes["fragment.count"] == "0"
    assert not any(e.event_type == T.FORK for e in splitter.events())


def test_records_per_split_from_an_attribute():
    splitter = runner("${per.split}")
    splitter.enqueue(json.dumps(PEOPLE).encode(), {"per.split": "2"})
    splitter.enqueue(json.dumps(PEOPLE).encode(), {"per.split": "zero"})
    splitter.run()
    assert len(splitter.output("splits")) == 2
    [failed] = splitter.output("failure")
    assert failed.attributes["record.error.message"] == ("'Records Per Split' is 'zero' for this FlowFile, not a "
                                                         "positive whole number")


def test_splits_cross_the_readers_batches():
    rows = 150_000   # the reader's batches hold at most BATCH_RECORDS (65,536) records
    table = pa.table({"id": pa.array(range(rows), pa.int64())})
    content = io.BytesIO()
    pq.write_table(table, content, row_group_size=50_000)
    splitter = runner(70_000, services={"reader": (ParquetReader, {}), "writer": (ParquetRecordSetWriter, {})})
    splitter.enqueue(content.getvalue())
    splitter.run()
    splits = splitter.output("splits")
    assert [s.attributes["record.count"] for s in splits] == ["70000", "70000", "10000"]
    read = [pq.read_table(io.BytesIO(splitter.read(s))) for s in splits]
    assert pa.concat_tables(read).equals(table)


def test_records_per_split_must_be_positive():
    with pytest.raises(ValueError, match="property 'Records Per Split': '0' must be a positive whole number"):
        runner(0)
    with pytest.raises(ValueError, match="property 'Record Writer' needs a RecordSetWriterFactory"):
        ProcessorRunner(SplitRecord, {"Record Reader": "reader", "Record Writer": "reader", "Records Per Split": "1"},
                        services=JSON_SERVICES)
