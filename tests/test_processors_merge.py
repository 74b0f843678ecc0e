"""MergeContent: bins across triggers, the merge rules, and no loss or duplication."""

from __future__ import annotations

import io
import tarfile
import time
import zipfile
from collections import Counter

import pytest

from flowactors.processors import MergeContent
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T
from packaging_vectors import v3_record

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines


def runner_with(properties, contents=(), attributes=None, **options) -> ProcessorRunner:
    runner = ProcessorRunner(MergeContent, properties, **options)
    for index, content in enumerate(contents):
        attrs = attributes(index) if callable(attributes) else (attributes or {})
        runner.enqueue(content, {"n": str(index), **attrs})
    return runner


def originals_of(runner: ProcessorRunner) -> list[str]:
    return [f.attributes["n"] for f in runner.output("original")]


def test_bins_by_count_in_one_trigger():
    runner = runner_with({"Minimum Number of Entries": "3", "Maximum Number of Entries": "3"},
                         [b"%d" % i for i in range(7)])
    runner.run()
    assert runner.contents("merged") == [b"012", b"345"]
    assert [f.attributes["merge.count"] for f in runner.output("merged")] == ["3", "3"]
    assert sorted(originals_of(runner)) == [str(i) for i in range(6)]
    assert runner.input_count == 1  # the 7th waited in a bin and went back on stop
    assert runner.queues["input"].in_flight == 0


def test_bin_collects_over_several_triggers():
    runner = runner_with({"Minimum Number of Entries": "4"}, batch_size=2)
    for i in range(6):
        runner.enqueue(b"%d" % i, {"n": str(i)})
    runner.run(1, stop=False)
    assert runner.output("merged") == []
    assert runner.input_count == 6  # held (in flight), not lost
    runner.run(1, stop=False)
    assert runner.contents("merged") == [b"0123"]
    runner.run(2, stop=False)  # 4, 5 wait for two more
    assert len(runner.output("merged")) == 1
    runner.enqueue(b"6", {"n": "6"})
    runner.enqueue(b"7", {"n": "7"})
    runner.run(2)
    assert runner.contents("merged") == [b"0123", b"4567"]
    assert Counter(originals_of(runner)) == Counter(str(i) for i in range(8))
    assert runner.input_count == 0


def test_default_minimum_of_one_merges_what_each_trigger_got():
    runner = runner_with({}, [b"a", b"b", b"c"])
    runner.run()
    assert runner.contents("merged") == [b"abc"]
    [merged] = runner.output("merged")
    assert merged.attributes["merge.reason"].startswith("Minimum number of entries")


def test_bins_by_size():
    runner = runner_with({"Minimum Group Size": "10 B", "Maximum Group Size": "12 B",
                          "Minimum Number of Entries": "1"}, [b"aaaa", b"bbbb", b"cccc", b"dddd", b"e" * 20, b"ff"])
    runner.run()
    merged = runner.contents("merged")
    # 4+4+4 = 12 is full; "dddd" cannot take 20 more: the big one gets a bin of its own
    assert merged == [b"aaaabbbbcccc", b"e" * 20]
    reasons = [f.attributes["merge.reason"] for f in runner.output("merged")]
    assert reasons == ["Maximum group size reached", "Maximum group size reached"]
    assert runner.input_count == 2  # dddd + ff: 6 bytes, under the minimum size, back on stop


def test_max_bin_age_flushes_a_bin_on_an_empty_trigger():
    assert MergeContent.trigger_when_empty
    runner = runner_with({"Minimum Number of Entries": "100", "Max Bin Age": "200 ms"}, [b"x", b"y"])
    runner.run(stop=False)
    assert runner.output("merged") == []
    time.sleep(0.25)
    runner.run(stop=False)  # nothing in the queue: the old bin is flushed anyway
    [merged] = runner.output("merged")
    assert runner.read(merged) == b"xy"
    assert merged.attributes["merge.reason"] == "Max Bin Age reached"
    assert int(merged.attributes["merge.bin.age"]) >= 200
    runner.run()
    assert runner.input_count == 0


def test_correlation_attribute_keeps_groups_apart():
    runner = runner_with({"Correlation Attribute Name": "group", "Minimum Number of Entries": "2",
                          "Maximum Number of Entries": "2"},
                         [b"a1", b"b1", b"a2", b"c1", b"b2", b"a3"], attributes=lambda i: {"group": "abacba"[i]})
    runner.run()
    merged = {f.attributes["group"]: runner.read(f) for f in runner.output("merged")}
    assert merged == {"a": b"a1a2", "b": b"b1b2"}  # the common attribute 'group' is kept
    assert runner.input_count == 2  # c1 and a3 wait for partners


def test_maximum_number_of_bins_merges_the_oldest():
    runner = runner_with({"Correlation Attribute Name": "g", "Minimum Number of Entries": "5",
                          "Maximum number of Bins": "2"}, [b"a", b"b", b"c"], attributes=lambda i: {"g": "abc"[i]})
    runner.run()
    [merged] = runner.output("merged")
    assert runner.read(merged) == b"a"
    assert merged.attributes["merge.reason"] == "Maximum number of bins reached"


def test_text_header_footer_and_demarcator():
    runner = runner_with({"Delimiter Strategy": "Text", "Header": "[${kind}:", "Footer": "]", "Demarcator": ", "},
                         [b"1", b"2", b"3"], attributes={"kind": "nums"})
    runner.run()
    assert runner.contents("merged") == [b"[nums:1, 2, 3]"]


def test_text_delimiters_use_the_character_set():
    runner = runner_with({"Delimiter Strategy": "Text", "Demarcator": "é", "Character Set": "ISO-8859-1"},
                         [b"1", b"2"])
    runner.run()
    assert runner.contents("merged") == [b"1\xe92"]


def test_delimiters_ignored_without_strategy_and_read_from_files(tmp_path):
    runner = runner_with({"Header": "H", "Footer": "F"}, [b"1", b"2"])
    runner.run()
    assert runner.contents("merged") == [b"12"]
    (tmp_path / "h").write_bytes(b"<head>")
    (tmp_path / "d").write_bytes(b"\n")
    runner = runner_with({"Delimiter Strategy": "Filename", "Header": str(tmp_path / "h"),
                          "Demarcator": str(tmp_path / "d")}, [b"1", b"2"])
    runner.run()
    assert runner.contents("merged") == [b"<head>1\n2"]


def test_attribute_strategies():
    attrs = [{"same": "s", "differs": "1", "only.one": "x"}, {"same": "s", "differs": "2"}]
    runner = runner_with({}, [b"a", b"b"], attributes=lambda i: attrs[i])
    runner.run()
    [merged] = runner.output("merged")
    assert merged.attributes["same"] == "s"
    assert "differs" not in merged.attributes and "only.one" not in merged.attributes
    runner = runner_with({"Attribute Strategy": "Keep All Unique Attributes"}, [b"a", b"b"],
                         attributes=lambda i: attrs[i])
    runner.run()
    [merged] = runner.output("merged")
    assert merged.attributes["same"] == "s" and merged.attributes["only.one"] == "x"
    assert "differs" not in merged.attributes


def test_join_event_names_every_parent_in_one_commit():
    runner = runner_with({"Minimum Number of Entries": "3"}, [b"a", b"b", b"c"])
    runner.run()
    [merged] = runner.output("merged")
    originals = runner.output("original")
    [join] = [e for e in runner.events() if e.event_type == T.JOIN]
    assert join.flowfile_uuid == merged.uuid
    assert sorted(join.parent_uuids) == sorted(f.uuid for f in originals)
    assert join.updated_size == 3
    assert runner.backend.commits == 1  # merged, originals and acknowledgements together


def test_stop_returns_binned_flowfiles_to_the_queue_unchanged():
    runner = runner_with({"Minimum Number of Entries": "10"}, [b"%d" % i for i in range(5)])
    before = {f.uuid: f for f in runner.queues["input"].listing(10)}
    runner.run(2, stop=False)
    assert runner.queues["input"].queued == 0 and runner.queues["input"].in_flight == 5
    runner.processor.on_stopped(runner.context)
    runner.scheduled = False
    after = runner.queues["input"].listing(10)
    assert sorted(f.uuid for f in after) == sorted(before)
    assert all(f == before[f.uuid] for f in after)  # the very same records
    assert runner.queues["input"].in_flight == 0
    assert runner.events() == [] and runner.output("merged") == []
    # scheduled again, each FlowFile is merged exactly once
    for i in range(5, 10):
        runner.enqueue(b"%d" % i, {"n": str(i)})
    runner.run()
    [merged] = runner.contents("merged")
    assert sorted(merged) == sorted(b"0123456789")
    assert Counter(originals_of(runner)) == Counter(str(i) for i in range(10))
    assert runner.input_count == 0


def test_a_failed_trigger_neither_loses_nor_duplicates(monkeypatch):
    runner = runner_with({"Minimum Number of Entries": "3", "Maximum Number of Entries": "3"}, batch_size=2)
    for i in range(6):
        runner.enqueue(b"%d" % i, {"n": str(i)})
    real_merge = MergeContent._merge
    calls = []

    def flaky(self, context, session, bin, reason):
        calls.append(len(bin.flowfiles))
        if len(calls) == 1:
            raise RuntimeError("crash while merging")
        return real_merge(self, context, session, bin, reason)

    monkeypatch.setattr(MergeContent, "_merge", flaky)
    runner.run(1, stop=False)  # 0, 1 binned
    runner.run(1, stop=False, raise_errors=False)  # 2, 3 taken; bin 0-2 fails: 0, 1, 2 back to the queue
    assert len(runner.errors) == 1
    runner.run(6, stop=False)
    runner.run(1)
    merged = runner.contents("merged")
    assert sorted(b"".join(merged)) == sorted(b"012345")
    assert Counter(originals_of(runner)) == Counter(str(i) for i in range(6))
    assert runner.input_count == 0


def unreadable(runner: ProcessorRunner, content: bytes, attributes) -> None:
    """Enqueue a FlowFile whose content claim points at nothing."""
    runner.lose_content(runner.enqueue(content, attributes))


def test_unreadable_content_sends_the_bin_to_failure():
    runner = runner_with({"Minimum Number of Entries": "2"}, [b"a"])
    unreadable(runner, b"b", {"n": "1"})
    runner.run()
    assert sorted(f.attributes["n"] for f in runner.output("failure")) == ["0", "1"]
    assert runner.output("merged") == [] and runner.output("original") == []
    assert not [e for e in runner.events() if e.event_type == T.JOIN]


@pytest.mark.parametrize("properties", [
    {"Minimum Number of Entries": "5", "Maximum Number of Entries": "2"},
    {"Minimum Group Size": "2 KB", "Maximum Group Size": "1 KB"},
    {"Merge Strategy": "Defragment"},
    {"Max Bin Age": "soon"},
    {"Delimiter Strategy": "Magic"},
    {"Merge Format": "FlowFile Stream, v2"},
    {"Merge Format": "Avro"},
    {"Merge Format": "ZIP", "Compression Level": "10"},
])
def test_invalid_configurations(properties):
    assert MergeContent.validate_properties(properties)


# ------------------------------------------------------------------------ package formats

def test_flowfile_stream_v3_packages_every_flowfile_with_its_attributes():
    contents = [b"one", b"", b"three"]
    runner = runner_with({"Merge Format": "FlowFile Stream, v3"}, contents,
                         attributes=lambda i: {"filename": f"f{i}", "label": "é" * i})
    runner.run()
    [merged] = runner.output("merged")
    originals = runner.output("original")
    assert runner.read(merged) == b"".join(v3_record(f.attributes, c) for f, c in zip(originals, contents))
    assert "uuid" in originals[0].attributes  # packaged too, as NiFi does
    assert merged.attributes["mime.type"] == "application/flowfile-v3"
    assert merged.attributes["filename"] == merged.uuid + ".pkg"
    [join] = [e for e in runner.events() if e.event_type == T.JOIN]
    assert join.flowfile_uuid == merged.uuid and sorted(join.parent_uuids) == sorted(f.uuid for f in originals)


def tar_members(data: bytes) -> list[tuple[str, int, float, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return [(m.name, m.mode, m.mtime, archive.extractfile(m).read()) for m in archive]


@pytest.mark.parametrize("keep_path, names", [
    ("false", ["a.txt", "b.txt", "c.txt", "d.txt", "x" * 150]),
    ("true", ["docs/a.txt", "abs/dir/b.txt", "c.txt", "sub/d.txt", "x" * 150]),  # no leading / nor ./
])
def test_tar_entries_are_named_by_path_and_filename(keep_path, names):
    paths = ["docs/", "/abs/dir/", "./", "./sub", "./"]
    runner = runner_with({"Merge Format": "TAR", "Keep Path": keep_path}, [b"A", b"B", b"C", b"D", b"E"],
                         attributes=lambda i: {"path": paths[i], "filename": names[i].rsplit("/", 1)[-1]})
    runner.run()
    [merged] = runner.output("merged")
    assert [(name, content) for name, _, _, content in tar_members(runner.read(merged))] == list(
        zip(names, [b"A", b"B", b"C", b"D", b"E"]))
    assert merged.attributes["mime.type"] == "application/tar"
    assert merged.attributes["filename"] == merged.uuid + ".tar"


def test_tar_modes_and_times_come_from_attributes():
    stamps = ["2024-05-01T12:00:00Z", "2024-05-01T14:00:00+0200", "yesterday", None]
    permissions = ["640", "999", None, "7777"]
    runner = runner_with({"Merge Format": "TAR"}, [b"0", b"1", b"2", b"3"], attributes=lambda i: {
        k: v for k, v in {"file.lastModifiedTime": stamps[i], "tar.permissions": permissions[i]}.items() if v})
    before = time.time()
    runner.run()
    members = tar_members(runner.contents("merged")[0])
    assert [mode for _, mode, _, _ in members] == [0o640, 0o644, 0o644, 0o644]  # octal digits, else 644
    times = [mtime for _, _, mtime, _ in members]
    assert times[:2] == [1714564800, 1714564800]
    assert all(before - 1 <= t <= time.time() + 1 for t in times[2:])  # not a time: now, as NiFi


def test_zip_entries_and_compression_level():
    contents = [b"compressible " * 2000, b"", b"x"]
    sizes = []
    for level in ("0", "9"):
        runner = runner_with({"Merge Format": "ZIP", "Compression Level": level, "Keep Path": "true"}, contents,
                             attributes=lambda i: {"filename": f"f{i}", "path": "dir/" if i else "./"})
        runner.run()
        [merged] = runner.output("merged")
        data = runner.read(merged)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            assert archive.testzip() is None
            assert archive.namelist() == ["f0", "dir/f1", "dir/f2"]
            assert [archive.read(n) for n in archive.namelist()] == contents
            assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_DEFLATED}
        assert merged.attributes["mime.type"] == "application/zip"
        sizes.append(len(data))
    assert sizes[0] > len(contents[0]) > 20 * sizes[1]  # level 0 stores, level 9 squeezes


@pytest.mark.parametrize("merge_format, extension", [("FlowFile Stream, v3", ".pkg"), ("TAR", ".tar"),
                                                     ("ZIP", ".zip")])
def test_package_filenames(merge_format, extension):
    runner = runner_with({"Merge Format": merge_format}, [b"a"], attributes={"filename": "only.txt"})
    runner.run()
    assert runner.output("merged")[0].attributes["filename"] == "only.txt" + extension
    runner = runner_with({"Merge Format": merge_format}, [b"a", b"b"],
                         attributes=lambda i: {"segment.original.filename": f"whole{i}"})
    runner.run()
    assert runner.output("merged")[0].attributes["filename"] == "whole0" + extension  # the first's


def test_header_footer_and_demarcator_are_for_binary_concatenation_only():
    runner = runner_with({"Merge Format": "FlowFile Stream, v3", "Delimiter Strategy": "Text", "Header": "H",
                          "Footer": "F", "Demarcator": "D"}, [b"1", b"2"])
    runner.run()
    data = runner.contents("merged")[0]
    originals = runner.output("original")
    assert data == v3_record(originals[0].attributes, b"1") + v3_record(originals[1].attributes, b"2")


@pytest.mark.parametrize("merge_format", ["FlowFile Stream, v3", "TAR", "ZIP"])
def test_unreadable_content_sends_a_package_bin_to_failure(merge_format):
    runner = runner_with({"Merge Format": merge_format, "Minimum Number of Entries": "2"}, [b"a"])
    unreadable(runner, b"b", {"n": "1"})
    runner.run()
    assert sorted(f.attributes["n"] for f in runner.output("failure")) == ["0", "1"]
    assert runner.output("merged") == [] and runner.output("original") == []
