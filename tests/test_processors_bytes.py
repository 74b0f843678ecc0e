"""ModifyBytes and SegmentContent: NiFi's TestModifyBytes and TestSegmentContent cases, on the
in-process and stateless engines."""

from __future__ import annotations

import pytest

from flowactors.processors import ModifyBytes, SegmentContent
from flowactors.testing import ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.provenance.event import ProvenanceEventType as T

#: NiFi's TestModifyBytes file has a 12-byte header, a body and a 12-byte footer; ours is shaped alike
HEADER, FOOTER = b"<<<HEADER>>>", b"<<<FOOTER>>>"
BODY = b"\n" + b"".join(b"line %02d of the body, Dew\n" % i for i in range(6))
DOCUMENT = HEADER + BODY + FOOTER


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def modify(content: bytes = DOCUMENT, attributes=None, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(ModifyBytes, properties)
    runner.enqueue(content, attributes)
    runner.run()
    assert runner.input_count == 0
    return runner


@pytest.mark.parametrize("start, end, expected", [
    ("0 MB", "0 MB", DOCUMENT),                       # testReturnSameFile
    ("1 MB", "1 MB", b""),                            # testReturnEmptyFile
    ("12 B", "0 MB", BODY + FOOTER),                  # testRemoveHeader
    ("0 B", "12 B", HEADER + BODY),                   # testRemoveFooter
    ("12 B", "12 B", BODY),                           # testRemoveHeaderAndFooter
    (f"{len(DOCUMENT) - 12} B", "0 B", FOOTER),       # testKeepFooter
    ("0 B", f"{len(DOCUMENT) - 12} B", HEADER),       # testKeepHeader
    (f"{(len(DOCUMENT) + 1) // 2} B", f"{(len(DOCUMENT) + 1) // 2} B", b""),   # testReturnZeroByteFile
    (f"{len(DOCUMENT) - 16} B", "13 B", b"Dew"),      # testDew
])
def test_offsets_remove_bytes_at_both_ends(start, end, expected):
    runner = modify(**{"Start Offset": start, "End Offset": end})
    assert runner.contents("success") == [expected]


def test_offsets_are_expressions_evaluated_per_flowfile():
    runner = modify(attributes={"numBytes": "12 B"}, **{"Start Offset": "${numBytes}"})   # testRemoveHeaderEL
    assert runner.contents("success") == [BODY + FOOTER]
    runner = modify(attributes={"numBytes": f"{len(DOCUMENT) - 12} B"}, **{"End Offset": "${numBytes}"})
    assert runner.contents("success") == [HEADER]                                         # testKeepHeaderEL


@pytest.mark.parametrize("offsets", ["0 B", "10 B"])
def test_remove_all_content_overrides_the_offsets(offsets):
    runner = modify(**{"Start Offset": offsets, "End Offset": offsets, "Remove All Content": "true"})
    [out] = runner.output("success")
    assert out.size == 0 and runner.read(out) == b""


def test_remove_all_false_keeps_the_range_and_the_flowfile():
    runner = ProcessorRunner(ModifyBytes, {"Start Offset": "10 B", "End Offset": "10 B", "Remove All Content": "false"})
    original = runner.enqueue(DOCUMENT, {"filename": "doc.txt"})
    runner.run()
    [out] = runner.output("success")
    assert out.uuid == original.uuid and out.attributes["filename"] == "doc.txt"
    assert out.size == len(DOCUMENT) - 20 and runner.read(out) == DOCUMENT[10:-10]
    assert [e.event_type for e in runner.events()] == [T.CONTENT_MODIFIED]


@pytest.mark.parametrize("value", ["maybe", "certainly"])
def test_remove_all_content_takes_only_true_or_false(value):
    problems = ModifyBytes.validate_properties({"Remove All Content": value})
    assert problems and "Remove All Content" in problems[0]


def test_a_range_is_copied_in_chunks_from_a_file_claim(tmp_path, monkeypatch):
    """A content larger than a copy chunk, in a claim file: the kept range is exact across chunks."""
    monkeypatch.setattr("flowactors.processors._common.CHUNK", 1000)
    data = bytes(range(256)) * 40
    runner = ProcessorRunner(ModifyBytes, {"Start Offset": "1001 B", "End Offset": "999 B"},
                             content=FileSystemContentRepository(tmp_path / "content"))
    runner.enqueue(data)
    runner.run()
    assert runner.contents("success") == [data[1001:-999]]


def test_an_offset_that_is_not_a_data_size_rolls_back_with_one_line():
    runner = ProcessorRunner(ModifyBytes, {"Start Offset": "${numBytes}"})
    runner.enqueue(DOCUMENT, {"numBytes": "twelve"})
    with pytest.raises(ValueError, match=r"^Start Offset evaluated to 'twelve', which is not a data size") as err:
        runner.run()
    assert "\n" not in str(err.value)
    assert runner.output("success") == []
    if runner.engine == "in-process":
        assert runner.input_count == 1   # nothing lost: the FlowFile is back in its queue


# ---------------------------------------------------------------------------------- SegmentContent
def segment(content: bytes, size: str, attributes=None) -> ProcessorRunner:
    runner = ProcessorRunner(SegmentContent, {"Segment Size": size})
    runner.enqueue(content, {"filename": "nine.bin", **(attributes or {})})
    runner.run()
    return runner


@pytest.mark.parametrize("size, attributes", [("4 B", None), ("${segmentSize}", {"segmentSize": "4 B"})])
def test_segments_reference_ranges_of_the_claim(size, attributes):
    runner = segment(bytes(range(1, 10)), size, attributes)                  # test, testExpressionLanguage
    [original] = runner.output("original")
    identifier = original.attributes["fragment.identifier"]
    assert original.attributes["fragment.count"] == "3" and "fragment.index" not in original.attributes
    segments = runner.output("segments")
    assert [runner.read(s) for s in segments] == [bytes([1, 2, 3, 4]), bytes([5, 6, 7, 8]), bytes([9])]
    for index, flowfile in enumerate(segments, start=1):
        assert flowfile.attributes["fragment.index"] == str(index)
        assert flowfile.attributes["fragment.count"] == "3"
        assert flowfile.attributes["fragment.identifier"] == identifier
        assert flowfile.attributes["segment.original.filename"] == "nine.bin"
        assert flowfile.claim.resource == original.claim.resource   # no byte copied
    [fork] = [e for e in runner.events() if e.event_type == T.FORK]
    assert sorted(fork.child_uuids) == sorted(s.uuid for s in segments)


def test_content_no_larger_than_a_segment_is_cloned():
    runner = segment(bytes(range(1, 10)), "4 KB")                           # testTransferSmall
    [original] = runner.output("original")
    [copy] = runner.output("segments")
    assert runner.read(copy) == bytes(range(1, 10)) and copy.uuid != original.uuid
    for flowfile in (original, copy):
        assert flowfile.attributes["fragment.count"] == "1" and flowfile.attributes["fragment.index"] == "1"
        assert flowfile.attributes["segment.original.filename"] == "nine.bin"
    assert original.attributes["fragment.identifier"] == copy.attributes["fragment.identifier"]


def test_a_segment_size_of_nothing_is_refused():
    assert SegmentContent.validate_properties({"Segment Size": "0 B"}) == ["property 'Segment Size' must be at least 1 B"]
    assert SegmentContent.validate_properties({"Segment Size": "1 B"}) == []


def test_a_segment_size_of_nothing_rolls_back_with_one_line():
    runner = ProcessorRunner(SegmentContent, {"Segment Size": "${size}"})
    runner.enqueue(b"abc", {"size": "0 B"})
    with pytest.raises(ValueError, match="Segment Size evaluated to 0 bytes"):
        runner.run()
    assert runner.output("segments") == [] and runner.output("original") == []
