"""SplitText (by reference) and ReplaceText."""

from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest

from flowactors.processors import ReplaceText, SplitText
from flowactors.processors.text import scan_splits
from flowactors.testing import ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines


def reference_splits(data: bytes, header: int, count: int, trim: bool) -> list[tuple[bytes, int]]:
    """What SplitText should produce: (content, line count) per split, computed the naive way."""
    lines = re.findall(rb"[^\n]*\n|[^\n]+$", data)
    if len(lines) < header:
        raise ValueError("not enough lines")
    head, body = b"".join(lines[:header]), lines[header:]
    out = []
    for start in range(0, len(body), count):
        group = body[start:start + count]
        chunk = b"".join(group)
        if trim:
            chunk = chunk.rstrip(b"\r\n")
            if not chunk:
                continue
        out.append((head + chunk, len(group)))
    return out


def split(data: bytes, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(SplitText, properties)
    runner.enqueue(data, {"filename": "input.txt"})
    runner.run()
    return runner


# ---------------------------------------------------------------------------------- SplitText
def test_split_lines_with_attributes_and_fork_event():
    runner = split(b"a\nb\nc\nd\ne\n", **{"Line Split Count": "2"})
    splits = runner.output("splits")
    assert [runner.read(f) for f in splits] == [b"a\nb", b"c\nd", b"e"]
    [original] = runner.output("original")
    identifier = original.attributes["fragment.identifier"]
    assert original.attributes["fragment.count"] == "3"
    for index, flowfile in enumerate(splits, start=1):
        a = flowfile.attributes
        assert a["fragment.identifier"] == identifier and a["fragment.index"] == str(index)
        assert a["fragment.count"] == "3" and a["segment.original.filename"] == "input.txt"
        assert a["fragment.size"] == str(flowfile.size)
        assert flowfile.claim.resource == original.claim.resource  # a range of the same claim
    assert [f.attributes["text.line.count"] for f in splits] == ["2", "2", "1"]
    [fork] = [e for e in runner.events() if e.event_type == T.FORK]
    assert fork.flowfile_uuid == original.uuid
    assert fork.child_uuids == [f.uuid for f in splits]


def test_keep_trailing_newlines_and_crlf():
    data = b"a\r\nb\r\n\r\nc"
    runner = split(data, **{"Line Split Count": "1", "Remove Trailing Newlines": False})
    assert runner.contents("splits") == [b"a\r\n", b"b\r\n", b"\r\n", b"c"]
    assert b"".join(runner.contents("splits")) == data  # joined again, the original
    runner = split(data, **{"Line Split Count": "1"})
    assert runner.contents("splits") == [b"a", b"b", b"c"]  # the empty line is not emitted
    assert runner.output("splits")[2].attributes["fragment.count"] == "3"


def test_trailing_empty_lines_are_trimmed_from_a_split():
    runner = split(b"a\n\n\nb\n\n\n\n\n", **{"Line Split Count": "3"})
    assert runner.contents("splits") == [b"a", b"b"]
    assert [f.attributes["text.line.count"] for f in runner.output("splits")] == ["3", "3"]


def test_header_lines_are_copied_into_every_split():
    runner = split(b"h1\nh2\n1\n2\n3\n", **{"Line Split Count": "2", "Header Line Count": "2"})
    assert runner.contents("splits") == [b"h1\nh2\n1\n2", b"h1\nh2\n3"]
    splits = runner.output("splits")
    assert [f.attributes["text.line.count"] for f in splits] == ["2", "1"]
    [original] = runner.output("original")
    [fork] = [e for e in runner.events() if e.event_type == T.FORK]
    assert fork.flowfile_uuid == original.uuid and fork.child_uuids == [f.uuid for f in splits]
    assert not [e for e in runner.events() if e.event_type == T.JOIN]


def test_fewer_lines_than_the_header_goes_to_failure():
    runner = split(b"only\n", **{"Line Split Count": "1", "Header Line Count": "2"})
    assert len(runner.output("failure")) == 1
    assert runner.output("splits") == [] and runner.output("original") == []


@pytest.mark.parametrize("data,header", [(b"", "0"), (b"\n\n\n", "0"), (b"h1\nh2\n", "2")])
def test_nothing_to_split_gives_no_splits_and_no_fork(data, header):
    runner = split(data, **{"Line Split Count": "5", "Header Line Count": header})
    assert runner.output("splits") == []
    assert runner.output("original")[0].attributes["fragment.count"] == "0"
    assert not [e for e in runner.events() if e.event_type == T.FORK]


@pytest.mark.parametrize("seed", range(30))
def test_scan_matches_a_naive_split_at_every_chunk_size(seed):
    rng = random.Random(seed)
    pieces = [b"a", b"bc", b"\n", b"\r", b"\r\n", b"\n\n", b"xyz"]
    data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
    header, count, trim = rng.randint(0, 3), rng.randint(1, 4), rng.random() < 0.5
    try:
        expected = reference_splits(data, header, count, trim)
    except ValueError:
        expected = None
    for chunk_size in (1, 2, 3, 7, 1 << 20):
        try:
            header_end, splits = scan_splits(io.BytesIO(data), header, count, trim, chunk_size=chunk_size)
        except Exception:
            assert expected is None
            continue
        got = [(data[:header_end] + data[s.offset:s.offset + s.length], s.lines) for s in splits]
        assert got == expected, (data, header, count, trim, chunk_size)


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_split_without_header_writes_zero_content_bytes(tmp_path):
    content_root = tmp_path / "content"
    repository = FileSystemContentRepository(content_root, sections=4, max_appendable_size=1024 * 1024)
    runner = ProcessorRunner(SplitText, {"Line Split Count": "3"}, content=repository)
    lines = b"".join(b"line %06d with some text\n" % i for i in range(60_000))  # ~1.6 MB, several chunks
    runner.enqueue(lines)
    batches = []
    real_commit = runner.backend.commit
    runner.backend.commit = lambda batch: (batches.append(batch), real_commit(batch))[1]
    before = disk_bytes(content_root)
    runner.run()
    assert disk_bytes(content_root) == before  # not one byte on disk
    assert [b.bytes_written for b in batches] == [0] and batches[0].new_claims == []
    splits = runner.output("splits")
    assert len(splits) == 20_000
    assert runner.read(splits[0]) == b"\n".join(b"line %06d with some text" % i for i in range(3))
    assert runner.read(splits[-1]).endswith(b"line 059999 with some text")


def test_split_with_header_writes_header_plus_range(tmp_path):
    content_root = tmp_path / "content"
    repository = FileSystemContentRepository(content_root, sections=4)
    runner = ProcessorRunner(SplitText, {"Line Split Count": "2", "Header Line Count": "1"}, content=repository)
    runner.enqueue(b"id,name\n1,a\n2,b\n3,c\n")
    batches = []
    real_commit = runner.backend.commit
    runner.backend.commit = lambda batch: (batches.append(batch), real_commit(batch))[1]
    before = disk_bytes(content_root)
    runner.run()
    contents = runner.contents("splits")
    assert contents == [b"id,name\n1,a\n2,b", b"id,name\n3,c"]
    assert batches[0].bytes_written == sum(map(len, contents))
    assert disk_bytes(content_root) - before == sum(map(len, contents))


def test_split_text_takes_parents_in_batches():
    runner = ProcessorRunner(SplitText, {"Line Split Count": "1"})
    for i in range(5):
        runner.enqueue(b"x\ny\n")
    runner.run()
    assert len(runner.output("splits")) == 10 and len(runner.output("original")) == 5
    assert runner.backend.commits == 1


def test_split_text_validation():
    assert SplitText.validate_properties({})
    assert SplitText.validate_properties({"Line Split Count": "0"})
    assert SplitText.validate_properties({"Line Split Count": "1", "Header Line Count": "-1"})
    assert not SplitText.validate_properties({"Line Split Count": "1"})


# ---------------------------------------------------------------------------------- ReplaceText
def replace(data: bytes | list[bytes], attributes=None, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(ReplaceText, properties)
    for item in data if isinstance(data, list) else [data]:
        runner.enqueue(item, attributes)
    runner.run()
    return runner


def test_regex_replace_entire_text_with_groups_and_expressions():
    runner = replace(b"John Smith\nJane Doe\n", {"tag": "!"}, **{
        "Evaluation Mode": "Entire text", "Search Value": r"(\w+) (?P<last>\w+)",
        "Replacement Value": r"$${last}, $1${tag} \$2"})  # $${ escapes the expression language
    assert runner.contents("success") == [b"Smith, John! $2\nDoe, Jane! $2\n"]
    assert [e.event_type for e in runner.events()] == [T.CONTENT_MODIFIED]


def test_default_regex_replace_keeps_content():
    runner = replace(b"one\ntwo\n")
    assert runner.contents("success") == [b"one\ntwo\n"]


def test_regex_replace_line_by_line_keeps_line_endings():
    runner = replace(b"a1\r\nb22\n\nc333", **{"Search Value": r"\d+$", "Replacement Value": "#"})
    assert runner.contents("success") == [b"a#\r\nb#\n\nc#"]


def test_literal_replace_treats_the_search_value_as_text():
    runner = replace(b"a.b.c", **{"Replacement Strategy": "Literal Replace", "Search Value": ".",
                                  "Replacement Value": "$1", "Evaluation Mode": "Entire text"})
    assert runner.contents("success") == [b"a$1b$1c"]


@pytest.mark.parametrize("strategy,mode,expected", [
    ("Prepend", "Entire text", b">a\nb\n"),
    ("Append", "Entire text", b"a\nb\n>"),
    ("Prepend", "Line-by-Line", b">a\n>b\n"),
    ("Append", "Line-by-Line", b"a>\nb>\n"),
    ("Always Replace", "Entire text", b">"),
    ("Always Replace", "Line-by-Line", b">\n>\n"),
])
def test_prepend_append_always_replace(strategy, mode, expected):
    runner = replace(b"a\nb\n", **{"Replacement Strategy": strategy, "Evaluation Mode": mode,
                                   "Replacement Value": ">"})
    assert runner.contents("success") == [expected]


def test_entire_text_over_the_buffer_size_fails_but_streaming_strategies_do_not():
    big = b"x" * 2048
    runner = replace(big, **{"Evaluation Mode": "Entire text", "Maximum Buffer Size": "1 KB",
                             "Search Value": "x", "Replacement Value": "y"})
    assert runner.contents("failure") == [big] and runner.output("success") == []
    runner = replace(big, **{"Evaluation Mode": "Entire text", "Maximum Buffer Size": "1 KB",
                             "Replacement Strategy": "Append", "Replacement Value": "!"})
    assert runner.contents("success") == [big + b"!"]


def test_line_by_line_line_over_the_buffer_size_fails():
    runner = replace([b"short\n" + b"y" * 3000 + b"\nend", b"ok\nfine"], **{
        "Maximum Buffer Size": "1 KB", "Search Value": "o", "Replacement Value": "0"})
    assert runner.contents("failure") == [b"short\n" + b"y" * 3000 + b"\nend"]
    assert runner.contents("success") == [b"0k\nfine"]


def test_line_by_line_streams_large_content():
    data = b"".join(b"row %d\n" % i for i in range(300_000))  # > 2 MB, several chunks
    runner = replace(data, **{"Search Value": r"^row ", "Replacement Value": "R"})
    assert runner.contents("success") == [b"".join(b"R%d\n" % i for i in range(300_000))]


def test_character_set_and_undecodable_bytes():
    runner = replace("grüß\n".encode("latin-1"), **{"Character Set": "ISO-8859-1", "Search Value": "ü",
                                                   "Replacement Value": "ue"})
    assert runner.contents("success") == ["grueß\n".encode("latin-1")]
    runner = replace(b"\xff\xfeok\n", **{"Search Value": "ok", "Replacement Value": "OK"})
    assert runner.contents("success") == [b"\xff\xfeOK\n"]  # bytes that do not decode are kept


def test_invalid_search_regex_from_an_expression_fails_the_flowfile():
    runner = replace(b"abc", {"pattern": "(unclosed"}, **{"Search Value": "${pattern}", "Replacement Value": "x"})
    assert runner.contents("failure") == [b"abc"]
    assert ReplaceText.validate_properties({"Search Value": "(unclosed"})
    assert ReplaceText.validate_properties({"Evaluation Mode": "Whole"})


@pytest.mark.parametrize("processor, properties, passed_on", [
    (SplitText, {"Line Split Count": "1"}, "original"),
    (ReplaceText, {"Search Value": "a", "Replacement Value": "b"}, "success"),
    (ReplaceText, {"Replacement Strategy": "Prepend", "Replacement Value": ">"}, "success"),
])
def test_unreadable_content_goes_to_failure_and_the_others_go_on(processor, properties, passed_on):
    runner = ProcessorRunner(processor, properties)
    good = runner.enqueue(b"a\nb\n", {"filename": "good"})
    bad = runner.lose_content(runner.enqueue(b"a\nb\n", {"filename": "bad"}))
    runner.run()
    assert [f.uuid for f in runner.output("failure")] == [bad.uuid] and runner.input_count == 0
    assert [f.uuid for f in runner.output(passed_on)] == [good.uuid]
    if processor is SplitText:
        assert runner.contents("splits") == [b"a", b"b"]  # the good one's lines only
