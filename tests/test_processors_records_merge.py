"""MergeRecord: NiFi's TestMergeRecord cases (with JSON instead of its mock comma-separated reader
and writer), then what differs here: schemas kept apart, unreadable FlowFiles, bins that cannot be
written, attributes and provenance."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from flowactors.processors.records.merge_record import MergeRecord, RecordBins
from flowactors.services import JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on every engine

NAME_ONLY = json.dumps({"type": "record", "name": "person", "fields": [{"name": "name", "type": "string"}]})


def merging(writer: dict | None = None, **properties) -> ProcessorRunner:
    return ProcessorRunner(MergeRecord, {"Record Reader": "reader", "Record Writer": "writer", **properties},
                           services={"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, writer or {})})


def people(*people: tuple) -> bytes:
    """A JSON array of records: (name, age) pairs, or dicts as they are."""
    return json.dumps([p if isinstance(p, dict) else {"name": p[0], "age": p[1]} for p in people]).encode()


def records(runner: ProcessorRunner, relationship: str = "merged") -> list[list[dict]]:
    return [json.loads(runner.read(f)) for f in runner.output(relationship)]


def fragment(identifier: str, index: int, count: int = 2, **more) -> dict[str, str]:
    return {"fragment.identifier": identifier, "fragment.index": str(index), "fragment.count": str(count), **more}


def test_small_output_is_flushed():
    runner = merging(**{"Minimum Number of Records": "1", "Maximum Number of Records": "1"})
    runner.enqueue(people(("John", 35), ("Jane", 34)))
    runner.run(1)
    [merged] = runner.output("merged")
    assert merged.attributes["record.count"] == "2"
    assert merged.attributes["merge.completion.reason"] == "Bin is full"
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jane", "age": 34}]]
    [original] = runner.output("original")
    assert original.attributes["merge.uuid"] == merged.uuid


def test_merge_simple():
    runner = merging()
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34)))
    runner.run(2)   # the first trigger bins both; the second finds no input: the bin is full enough
    [merged] = runner.output("merged")
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jane", "age": 34}]]
    assert merged.attributes["merge.completion.reason"] == "Bin is full enough"
    assert merged.attributes["merge.count"] == "2"
    assert merged.attributes["mime.type"] == "application/json"
    assert [f.attributes["merge.uuid"] for f in runner.output("original")] == [merged.uuid, merged.uuid]


def test_merge_with_a_different_write_schema():
    runner = merging({"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": NAME_ONLY})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34)))
    runner.run(2)
    assert records(runner) == [[{"name": "John"}, {"name": "Jane"}]]
    assert runner.output("merged")[0].attributes["record.count"] == "2"


def test_flowfiles_of_different_schemas_never_share_a_bin():
    runner = merging(**{"Minimum Number of Records": "2"})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people({"name": "Jane", "color": "Red"}))
    runner.run(1, stop=False)
    assert runner.output("merged") == [] and runner.output("original") == []
    runner.enqueue(people(("Jane", 34)))
    runner.enqueue(people({"name": "John", "color": "Blue"}))
    runner.run(1, stop=False)
    runner.run(1)
    assert sorted(records(runner), key=str) == sorted([
        [{"name": "John", "age": 35}, {"name": "Jane", "age": 34}],
        [{"name": "Jane", "color": "Red"}, {"name": "John", "color": "Blue"}]], key=str)
    assert len(runner.output("original")) == 4


def test_a_flowfile_the_reader_cannot_read_fails_alone():
    # NiFi fails the whole bin, since its bin had begun writing the records; here a FlowFile is
    # read when it is binned, so only the unreadable one goes to failure
    runner = merging(**{"Minimum Number of Records": "3"})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(b'[{"name": "Jane", "age": 34}, {"name": ')
    runner.enqueue(people(("Jake", 3)))
    runner.enqueue(people(("Jan", 2)))
    runner.run(2)
    [failed] = runner.output("failure")
    assert runner.read(failed) == b'[{"name": "Jane", "age": 34}, {"name": '
    assert failed.attributes["record.error.message"].startswith("not valid JSON")
    assert failed.attributes["flowactors.failure.processor"] == "MergeRecord"
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jake", "age": 3}, {"name": "Jan", "age": 2}]]


def test_defragment():
    runner = merging(**{"Merge Strategy": "Defragment"})
    runner.enqueue(people(("John", 35)), fragment("1", 0))
    runner.enqueue(people(("Jane", 34)), fragment("1", 1))
    runner.enqueue(people(("Jay", 24)), fragment("2", 0))
    runner.enqueue(people(("Jan", 2)), fragment("3", 1))   # out of order: fragment.index decides
    runner.enqueue(people(("Jake", 3)), fragment("3", 0))
    runner.run(1)
    assert runner.input_count == 1   # fragment 2 waits for its other half, back in the queue on stop
    assert sorted(records(runner), key=str) == sorted([
        [{"name": "John", "age": 35}, {"name": "Jane", "age": 34}],
        [{"name": "Jake", "age": 3}, {"name": "Jan", "age": 2}]], key=str)
    assert len(runner.output("original")) == 4
    assert {f.attributes["merge.completion.reason"] for f in runner.output("merged")} == {"Bin is full"}


def test_defragment_over_several_triggers_with_several_records_a_fragment():
    runner = merging(**{"Merge Strategy": "Defragment"})
    runner.enqueue(people(("John", 35), ("Jane", 34)), fragment("1", 0, record_count="2"))
    runner.run(2)
    assert runner.input_count == 1 and runner.output("merged") == [] and runner.output("failure") == []
    runner.enqueue(people(("Jake", 3), ("Jan", 2)), fragment("1", 1, record_count="2"))
    runner.run(1)
    assert runner.input_count == 0
    [merged] = runner.output("merged")
    assert merged.attributes["record.count"] == "4"
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jane", "age": 34},
                                {"name": "Jake", "age": 3}, {"name": "Jan", "age": 2}]]


def test_defragment_casts_each_fragment_to_the_first_ones_schema():
    runner = merging(**{"Merge Strategy": "Defragment"})
    runner.enqueue(people(("John", 35)), fragment("1", 0))
    runner.enqueue(people({"name": "Jane", "age": 34, "color": "red"}), fragment("1", 1))
    runner.run()
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jane", "age": 34}]]


def test_defragment_oldest_bin_fails_when_too_many_bins():
    runner = merging(**{"Merge Strategy": "Defragment", "Maximum Number of Bins": "5"})
    for i in range(5):
        runner.enqueue(people(("John", 30 + i)), fragment(str(i), 0, 5))
    runner.run(1, stop=False)
    assert runner.output("failure") == []
    runner.enqueue(people(("John", 35)), fragment("5", 0, 5))
    runner.run(1, stop=False)
    [failed] = runner.output("failure")
    assert failed.attributes["fragment.identifier"] == "0"
    assert "fragment.count of '0' is 5, but only 1 fragments arrived" in failed.attributes["record.error.message"]
    assert runner.output("merged") == [] and runner.output("original") == []
    runner.run(1)
    assert runner.input_count == 5


def test_defragment_expired_bin_fails_on_timeout():
    runner = merging(**{"Merge Strategy": "Defragment", "Max Bin Age": "1 ms"})
    runner.enqueue(people(("John", 30)), fragment("0", 0, 5))
    runner.run(1, stop=False)
    time.sleep(0.05)
    runner.run(1)
    assert len(runner.output("failure")) == 1 and runner.output("merged") == []


def test_defragment_needs_the_fragment_attributes():
    runner = merging(**{"Merge Strategy": "Defragment"})
    runner.enqueue(people(("John", 30)), {"fragment.identifier": "1", "fragment.count": "two"})
    runner.enqueue(people(("Jane", 31)), {"fragment.count": "2"})
    runner.run()
    messages = [f.attributes["record.error.message"] for f in runner.output("failure")]
    assert messages == ["Defragment needs a whole number in the 'fragment.count' attribute, not 'two'",
                        "Defragment needs the 'fragment.identifier' attribute, which the FlowFile lacks"]


def test_defragment_fails_fragments_that_disagree_on_their_count():
    runner = merging(**{"Merge Strategy": "Defragment"})
    runner.enqueue(people(("John", 30)), fragment("1", 0, 2))
    runner.enqueue(people(("Jane", 31)), fragment("1", 1, 3))
    runner.run()
    failed = runner.output("failure")
    assert len(failed) == 2
    assert failed[0].attributes["record.error.message"] == "the fragments of '1' disagree on fragment.count (2, 3)"


def test_min_size():
    runner = merging(**{"Minimum Number of Records": "2", "Minimum Bin Size": "500 B"})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34)))
    runner.run()
    assert runner.output("merged") == []
    runner.enqueue(people(*[(f"Person {i}", i) for i in range(100)]))
    runner.run(2)
    [merged] = runner.output("merged")
    assert merged.attributes["record.count"] == "102"
    assert len(runner.output("original")) == 3


def test_min_records():
    runner = merging(**{"Minimum Number of Records": "103", "Minimum Bin Size": "500 B"})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34)))
    runner.enqueue(people(*[(f"Person {i}", i) for i in range(100)]))
    runner.run()
    assert runner.output("merged") == []
    runner.enqueue(people(("John", 35)))
    runner.run(2)
    [merged] = runner.output("merged")
    assert merged.attributes["record.count"] == "103"
    assert len(runner.output("original")) == 4


def test_max_records():
    runner = merging(**{"Minimum Number of Records": "5", "Maximum Number of Records": "10"})
    for _ in range(34):
        runner.enqueue(people(("John", 35)))
    runner.run()
    assert [f.attributes["record.count"] for f in runner.output("merged")] == ["10", "10", "10"]
    assert len(runner.output("original")) == 30
    assert runner.input_count == 4


def test_the_maximum_is_soft_a_flowfiles_records_all_go_in():
    runner = merging(**{"Maximum Number of Records": "3"})
    runner.enqueue(people(("a", 1), ("b", 2)))
    runner.enqueue(people(("c", 3), ("d", 4)))
    runner.enqueue(people(("e", 5)))
    runner.run()
    assert [f.attributes["record.count"] for f in runner.output("merged")] == ["4"]
    assert runner.input_count == 1


def test_max_size_counts_the_flowfiles_content():
    # NiFi counts the bytes its writer wrote; here the bins count the FlowFiles' contents (30 bytes each)
    content = people(("Johnny", 5))
    assert len(content) == 30
    runner = merging(**{"Minimum Number of Records": "5", "Maximum Bin Size": "200 B"})
    for _ in range(36):
        runner.enqueue(content)
    runner.run()
    assert [f.attributes["record.count"] for f in runner.output("merged")] == ["7"] * 5   # 210 bytes each
    assert len(runner.output("original")) == 35
    assert runner.input_count == 1


def test_max_bin_age_merges_whatever_the_bin_holds():
    runner = merging(**{"Minimum Number of Records": "500", "Max Bin Age": "100 ms"})
    for i in range(10):
        runner.enqueue(people(("Johnny", i)))
    runner.run(1, stop=False)
    assert runner.output("merged") == []
    time.sleep(0.15)
    runner.run(1)
    [merged] = runner.output("merged")
    assert merged.attributes["record.count"] == "10"
    assert merged.attributes["merge.completion.reason"] == "Bin has reached Max Bin Age"
    assert int(merged.attributes["merge.bin.age"]) >= 100
    assert len(runner.output("original")) == 10


def test_bin_count():
    runner = merging(**{"Minimum Number of Records": "5", "Maximum Number of Records": "10",
                        "Maximum Number of Bins": "5", "Correlation Attribute Name": "correlationId"})
    for i in range(5):
        runner.enqueue(people(("John", 30 + i)), {"correlationId": str(i)})
    runner.run(1, stop=False)
    assert runner.output("merged") == [] and runner.output("failure") == []
    runner.enqueue(people(("John", 35)), {"correlationId": "5"})
    runner.run(1, stop=False)
    [merged] = runner.output("merged")
    assert records(runner) == [[{"name": "John", "age": 30}]]   # the oldest bin made room
    assert merged.attributes["merge.completion.reason"] == "Maximum number of bins has been exceeded"
    assert merged.attributes["correlationId"] == "0"
    assert len(runner.output("original")) == 1
    runner.run(1)
    assert runner.input_count == 5


def test_correlated_flowfiles_share_bins_by_value():
    runner = merging(**{"Correlation Attribute Name": "group"})
    for i, group in enumerate("abab"):
        runner.enqueue(people(("n", i)), {"group": group})
    runner.run(2)
    assert sorted(records(runner), key=str) == sorted(
        [[{"name": "n", "age": 0}, {"name": "n", "age": 2}], [{"name": "n", "age": 1}, {"name": "n", "age": 3}]],
        key=str)


def test_attribute_strategies():
    for strategy, expected in (("Keep Only Common Attributes", {"shared": "yes"}),
                               ("Keep All Unique Attributes", {"shared": "yes", "only": "first"})):
        runner = merging(**{"Attribute Strategy": strategy})
        runner.enqueue(people(("a", 1)), {"shared": "yes", "only": "first", "differ": "1"})
        runner.enqueue(people(("b", 2)), {"shared": "yes", "differ": "2"})
        runner.run(2)
        [merged] = runner.output("merged")
        kept = {k: v for k, v in merged.attributes.items() if k in ("shared", "only", "differ")}
        assert kept == expected, strategy


def test_merged_records_read_again_when_too_many_are_held(monkeypatch):
    monkeypatch.setattr(RecordBins, "HOLD_BYTES", 0)
    runner = merging()
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34), ("Jay", 3)))
    runner.run(2)
    assert records(runner) == [[{"name": "John", "age": 35}, {"name": "Jane", "age": 34}, {"name": "Jay", "age": 3}]]


def test_a_bin_the_writer_cannot_write_goes_to_failure_whole():
    # the writer's schema comes from each FlowFile's avro.schema attribute, which these lack
    runner = merging({"Schema Access Strategy": "Use 'Schema Text' Property"})
    runner.enqueue(people(("John", 35)))
    runner.enqueue(people(("Jane", 34)))
    runner.run(2)
    assert runner.output("merged") == [] and runner.output("original") == []
    failed = runner.output("failure")
    assert len(failed) == 2
    assert failed[0].attributes["record.error.message"].startswith(
        "the records of 2 FlowFiles could not be merged: the schema text is empty")


def test_provenance_joins_the_originals():
    runner = merging()
    sources = [runner.enqueue(people(("John", 35))), runner.enqueue(people(("Jane", 34)))]
    runner.run(2)
    [merged] = runner.output("merged")
    joins = [e for e in runner.events() if e.event_type == T.JOIN]
    assert len(joins) == 1
    assert joins[0].flowfile_uuid == merged.uuid
    assert Counter(joins[0].parent_uuids) == Counter(f.uuid for f in sources)
    assert joins[0].details == "Records Merged due to: Bin is full enough"


@pytest.mark.parametrize("values, problem", [
    ({"Minimum Number of Records": "103", "Maximum Number of Records": "2"},
     "Maximum Number of Records is smaller than Minimum Number of Records"),
    ({"Minimum Bin Size": "1 KB", "Maximum Bin Size": "10 B"}, "Maximum Bin Size is smaller than Minimum Bin Size"),
    ({"Minimum Number of Records": "0"}, "property 'Minimum Number of Records'"),
    ({"Maximum Number of Records": "-1"}, "property 'Maximum Number of Records'"),
])
def test_validation(values, problem):
    problems = MergeRecord.validate_properties({"Record Reader": "r", "Record Writer": "w", **values})
    assert any(problem in p for p in problems), problems
    assert MergeRecord.validate_properties({"Record Reader": "r", "Record Writer": "w",
                                            "Minimum Number of Records": "2", "Maximum Number of Records": "103"}) == []
