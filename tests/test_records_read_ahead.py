"""Reading records a batch ahead (``ReadAhead``, used by ``open_records`` for a content larger than
one batch): the batches in order, an error where its batch would have come, the reading thread
stopped and waited for on close; and record processors over such contents giving every record, or
the FlowFile to failure with where the reader stopped."""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pytest

from flowactors.processors.records import ConvertRecord, QueryRecord
from flowactors.processors.records._io import ReadAhead
from flowactors.sdk.records import BATCH_BYTES, MalformedRecordError
from flowactors.services import CSVReader, JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import ProcessorRunner


def numbered(count: int, log: list | None = None, fail_at: int | None = None):
    """Batches of one record each, 0 .. count-1; each read is logged with its thread; the batch
    ``fail_at`` raises instead; ``log`` gets "closed" when the generator is closed or ends."""
    try:
        for number in range(count):
            if log is not None:
                log.append((number, threading.current_thread().name))
            if number == fail_at:
                raise MalformedRecordError(f"record {number} is bad", record=number)
            yield pa.record_batch({"n": [number]})
    finally:
        if log is not None:
            log.append("closed")


def test_batches_come_in_order_from_a_thread_of_their_own():
    log: list = []
    ahead = ReadAhead(numbered(5, log))
    assert [batch["n"][0].as_py() for batch in ahead] == [0, 1, 2, 3, 4]
    ahead.close()
    assert log[-1] == "closed" and {thread for _, thread in log[:-1]} == {"records-read-ahead"}


def test_an_error_comes_where_its_batch_would_have():
    ahead = ReadAhead(numbered(5, fail_at=2))
    assert [next(ahead)["n"][0].as_py(), next(ahead)["n"][0].as_py()] == [0, 1]
    with pytest.raises(MalformedRecordError, match="record 2 is bad") as raised:
        next(ahead)
    assert raised.value.record == 2
    with pytest.raises(StopIteration):
        next(ahead)
    ahead.close()


def test_close_stops_the_thread_at_most_depth_batches_ahead():
    log: list = []
    ahead = ReadAhead(numbered(1000, log), depth=1)
    assert next(ahead)["n"][0].as_py() == 0
    ahead.close()   # returns once the thread has ended: the log is final
    read = [entry for entry in log if entry != "closed"]
    assert len(read) <= 3 and log[-1] == "closed"   # the one consumed, one waiting, one being read
    assert not [t for t in threading.enumerate() if t.name == "records-read-ahead"]


def test_closing_before_the_first_batch_and_twice_is_harmless():
    ahead = ReadAhead(numbered(3))
    ahead.close()
    ahead.close()
    assert list(ahead) == []


def big_json(count: int) -> bytes:
    content = b"\n".join(json.dumps({"id": i, "text": "x" * 60}).encode() for i in range(count))
    assert len(content) > 2 * BATCH_BYTES   # read ahead, over several batches
    return content


def test_a_content_larger_than_a_batch_converts_whole():
    convert = ProcessorRunner(ConvertRecord, {"Record Reader": "reader", "Record Writer": "writer"},
                              services={"reader": (JsonTreeReader, {}),
                                        "writer": (JsonRecordSetWriter, {"Output Grouping": "One Line Per Object"})})
    convert.enqueue(big_json(150_000))
    convert.run()
    [out] = convert.output("success")
    assert out.attributes["record.count"] == "150000"
    lines = convert.read(out).splitlines()
    assert [json.loads(lines[i])["id"] for i in (0, 77_777, 149_999)] == [0, 77_777, 149_999]


def test_a_bad_record_late_in_a_large_content_sends_it_to_failure():
    content = b"id,text\n" + b"".join(b"%d,%s\n" % (i, b"y" * 60) for i in range(150_000)) + b'1,"unclosed\n'
    assert len(content) > 2 * BATCH_BYTES
    query = ProcessorRunner(QueryRecord, {"Record Reader": "reader", "Record Writer": "writer",
                                          "q": "SELECT id FROM FLOWFILE WHERE id % 1000 = 0"},
                            services={"reader": (CSVReader, {"Schema Access Strategy": "Use String Fields From Header"}),
                                      "writer": (JsonRecordSetWriter, {})})
    original = query.enqueue(content)
    query.run()
    assert query.output("q") == [] and query.output("original") == []
    [failed] = query.output("failure")
    assert failed.uuid == original.uuid
    assert "record.error.message" in failed.attributes
    assert not [t for t in threading.enumerate() if t.name == "records-read-ahead"]
