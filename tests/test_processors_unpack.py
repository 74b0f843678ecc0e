"""UnpackContent: MergeContent's packages and NiFi's open back into their FlowFiles, whole or not at all."""

from __future__ import annotations

import io
import tarfile
import zipfile
from datetime import datetime

import pytest

from flowactors.processors import MergeContent, UnpackContent
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T
from packaging_vectors import v3_record

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines

LONG_NAME = "long-name-" + "x" * 120 + ".bin"  # more than a TAR header's 100 bytes
SOURCES = [
    (b"hello", {"filename": "a.txt", "path": "docs/", "colour": "blue"}),
    (b"", {"filename": "empty.dat", "note": "Grüße aus 東京 🚀"}),
    (bytes(range(256)) * 300, {"filename": LONG_NAME, "path": "docs/deep/", "long": "v" * 70_000}),
]
CONTENTS = [content for content, _ in SOURCES]


def merge(merge_format: str, sources=SOURCES, **properties):
    """MergeContent's package of ``sources``: (merged FlowFile, its bytes, the originals by filename)."""
    runner = ProcessorRunner(MergeContent, {"Merge Format": merge_format, **properties})
    for content, attributes in sources:
        runner.enqueue(content, attributes)
    runner.run()
    [bundle] = runner.output("merged")
    return bundle, runner.read(bundle), {f.attributes["filename"]: f for f in runner.output("original")}


def unpack(data: bytes, attributes, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(UnpackContent, properties)
    runner.enqueue(data, attributes)
    runner.run()
    return runner



# ------------------------------------------------------------------------ round trips
def test_flowfile_stream_v3_round_trip_restores_every_content_and_attribute():
    bundle, data, originals = merge("FlowFile Stream, v3")
    runner = unpack(data, bundle.attributes)  # its mime.type names the format
    children = runner.output("success")
    assert [runner.read(c) for c in children] == CONTENTS
    for child in children:
        original = originals[child.attributes["filename"]]
        packaged = {k: v for k, v in original.attributes.items() if k != "uuid"}
        assert {k: child.attributes.get(k) for k in packaged} == packaged
        assert child.attributes["uuid"] == child.uuid != original.uuid  # a FlowFile of its own
        assert child.attributes["mime.type"] == "application/octet-stream"  # none was packaged
        assert "fragment.index" not in child.attributes  # v3 children keep what was packaged, only
    [package] = runner.output("original")
    assert package.attributes["fragment.count"] == "3" and "fragment.identifier" not in package.attributes
    assert all(c.claim.resource == package.claim.resource for c in children)  # byte ranges: nothing copied
    assert runner.output("failure") == []


@pytest.mark.parametrize("merge_format, paths", [
    ("TAR", ["docs/", "/", "docs/deep/"]),
    ("ZIP", ["docs", "/", "docs/deep"]),  # NiFi's ZIP paths have no trailing /
])
def test_archive_round_trip(merge_format, paths):
    bundle, data, _ = merge(merge_format, **{"Keep Path": "true"})
    names = ["docs/a.txt", "empty.dat", f"docs/deep/{LONG_NAME}"]
    if merge_format == "TAR":
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:  # a valid archive, as Python reads it
            assert archive.getnames() == names
            assert [archive.extractfile(m).read() for m in archive] == CONTENTS
    else:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            assert archive.testzip() is None and archive.namelist() == names
            assert [archive.read(name) for name in names] == CONTENTS
    runner = unpack(data, bundle.attributes)
    children = runner.output("success")
    assert [runner.read(c) for c in children] == CONTENTS
    assert [c.attributes["filename"] for c in children] == ["a.txt", "empty.dat", LONG_NAME]
    assert [c.attributes["path"] for c in children] == paths
    assert {c.attributes["mime.type"] for c in children} == {"application/octet-stream"}
    if merge_format == "TAR":   # a plain TAR entry is a byte range of the package: nothing copied
        [package] = runner.output("original")
        assert all(c.claim.resource == package.claim.resource for c in children if c.size)


def test_a_package_made_by_nifi_unpacks_with_its_attributes():
    data = (v3_record({"uuid": "u-1", "filename": "x.json", "mime.type": "application/json",
                       "fragment.identifier": "f-1"}, b"{}")
            + v3_record({"filename": "y"}, b"yy"))
    runner = unpack(data, {"filename": "in.pkg", "kept": "yes"}, **{"Packaging Format": "flowfile-stream-v3"})
    x, y = runner.output("success")
    assert (runner.read(x), runner.read(y)) == (b"{}", b"yy")
    assert x.attributes["mime.type"] == "application/json" and x.attributes["uuid"] == x.uuid != "u-1"
    assert y.attributes["mime.type"] == "application/octet-stream" and y.attributes["filename"] == "y"
    assert x.attributes["kept"] == y.attributes["kept"] == "yes"  # the package's own, under the packaged ones
    [package] = runner.output("original")
    # as NiFi: the original takes the first child's fragment.identifier, here a packaged one
    assert package.attributes["fragment.identifier"] == "f-1" and package.attributes["fragment.count"] == "2"


def test_tar_entry_attributes():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        folder = tarfile.TarInfo("top/sub")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        archive.addfile(folder)
        info = tarfile.TarInfo("top/sub/report.csv")
        info.size, info.mode, info.uname, info.gname, info.mtime = 3, 0o640, "alice", "staff", 1714564800
        archive.addfile(info, io.BytesIO(b"1,2"))
    runner = unpack(out.getvalue(), {"filename": "bundle.tar"}, **{"Packaging Format": "tar"})
    [child] = runner.output("success")  # the folder is no FlowFile
    a = child.attributes
    assert runner.read(child) == b"1,2"
    assert (a["filename"], a["path"], a["file.permissions"], a["file.owner"], a["file.group"]) == (
        "report.csv", "top/sub/", "rw-r-----", "alice", "staff")
    assert datetime.strptime(a["file.lastModifiedTime"], "%Y-%m-%dT%H:%M:%S%z").timestamp() == 1714564800
    assert a["file.creationTime"] == a["file.lastModifiedTime"]
    assert a["segment.original.filename"] == "bundle"


def test_tar_round_trip_keeps_permissions_and_modification_time():
    sources = [(b"1", {"filename": "one", "tar.permissions": "750", "file.lastModifiedTime": "2024-05-01T12:00:00Z"})]
    bundle, data, _ = merge("TAR", sources)
    [child] = unpack(data, bundle.attributes).output("success")
    assert child.attributes["file.permissions"] == "rwxr-x---"
    assert datetime.strptime(child.attributes["file.lastModifiedTime"], "%Y-%m-%dT%H:%M:%S%z").timestamp() \
        == datetime.fromisoformat("2024-05-01T12:00:00+00:00").timestamp()


def test_zip_made_elsewhere_with_stored_and_deflated_entries_and_a_folder():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("folder/", b"")
        archive.writestr("folder/stored.txt", b"as it is", compress_type=zipfile.ZIP_STORED)
        archive.writestr("deflated.txt", b"squeezed " * 100, compress_type=zipfile.ZIP_DEFLATED)
    runner = unpack(out.getvalue(), {"filename": "x.zip"}, **{"Packaging Format": "zip"})
    children = runner.output("success")
    assert [runner.read(c) for c in children] == [b"as it is", b"squeezed " * 100]
    assert [(c.attributes["filename"], c.attributes["path"]) for c in children] == [
        ("stored.txt", "folder"), ("deflated.txt", "/")]
    assert {c.attributes["file.encryptionMethod"] for c in children} == {"NONE"}


# ------------------------------------------------------------------------ choosing the format
def test_mime_type_chooses_the_format():
    packages = {fmt: merge(fmt)[1] for fmt in ("FlowFile Stream, v3", "TAR", "ZIP")}
    runner = ProcessorRunner(UnpackContent, {})
    runner.enqueue(packages["FlowFile Stream, v3"], {"filename": "v3", "mime.type": "application/flowfile-v3"})
    runner.enqueue(packages["TAR"], {"filename": "tar", "mime.type": "application/x-tar"})
    runner.enqueue(packages["ZIP"], {"filename": "zip", "mime.type": "Application/ZIP"})
    runner.enqueue(b"plain", {"filename": "text", "mime.type": "text/plain"})
    runner.enqueue(packages["TAR"], {"filename": "no type"})
    runner.enqueue(packages["FlowFile Stream, v3"], {"filename": "v2", "mime.type": "application/flowfile-v2"})
    runner.run()
    success = runner.output("success")
    assert [runner.read(f) for f in success if f.attributes["filename"] == "text"] == [b"plain"]  # unchanged
    assert sorted(runner.read(f) for f in success if f.attributes["filename"] != "text") == sorted(CONTENTS * 3)
    assert sorted(f.attributes["filename"] for f in runner.output("original")) == ["tar", "v3", "zip"]
    assert sorted(f.attributes["filename"] for f in runner.output("failure")) == ["no type", "v2"]


@pytest.mark.parametrize("merge_format", ["TAR", "ZIP"])
def test_file_filter_picks_entries_by_name(merge_format):
    bundle, data, _ = merge(merge_format, **{"Keep Path": "true"})
    runner = unpack(data, bundle.attributes, **{"File Filter": r"^docs/"})  # found anywhere: ^ anchors it
    children = runner.output("success")
    assert [c.attributes["filename"] for c in children] == ["a.txt", LONG_NAME]
    assert [(c.attributes["fragment.index"], c.attributes["fragment.count"]) for c in children] == [
        ("1", "2"), ("2", "2")]
    runner = unpack(data, bundle.attributes, **{"File Filter": r"\.csv$"})
    assert len(runner.output("failure")) == 1  # nothing to unpack
    assert runner.output("success") == [] and runner.output("original") == []


def test_file_filter_leaves_flowfile_streams_whole():
    bundle, data, _ = merge("FlowFile Stream, v3")
    assert len(unpack(data, bundle.attributes, **{"File Filter": "nothing"}).output("success")) == 3


@pytest.mark.parametrize("merge_format", ["TAR", "ZIP"])
def test_fragment_attributes(merge_format):
    bundle, data, _ = merge(merge_format)
    runner = unpack(data, {**bundle.attributes, "filename": f"parts.{merge_format.lower()}"})
    [package] = runner.output("original")
    identifier = package.attributes["fragment.identifier"]
    assert package.attributes["fragment.count"] == "3"
    assert [(c.attributes["fragment.identifier"], c.attributes["fragment.index"], c.attributes["fragment.count"],
             c.attributes["segment.original.filename"]) for c in runner.output("success")] == [
        (identifier, str(index), "3", "parts") for index in (1, 2, 3)]


@pytest.mark.parametrize("merge_format", ["FlowFile Stream, v3", "TAR", "ZIP"])
def test_fork_event_from_the_package_to_its_children(merge_format):
    bundle, data, _ = merge(merge_format)
    runner = unpack(data, bundle.attributes)
    [package] = runner.output("original")
    children = runner.output("success")
    [fork] = runner.events()  # and no other event
    assert fork.event_type == T.FORK and fork.flowfile_uuid == package.uuid
    assert sorted(fork.child_uuids) == sorted(c.uuid for c in children)


# ------------------------------------------------------------------------ broken packages
def broken_packages() -> dict[str, tuple[bytes, str]]:
    v3 = merge("FlowFile Stream, v3")[1]
    tar = merge("TAR")[1]
    zip_ = merge("ZIP")[1]
    first = zipfile.ZipFile(io.BytesIO(zip_)).infolist()[0]
    flipped = bytearray(zip_)
    flipped[first.header_offset + 30 + len(first.filename) + 1] ^= 0xFF  # inside a.txt's deflated bytes
    return {
        "v3 cut in its last content": (v3[:-10], "application/flowfile-v3"),
        "v3 with a bad magic": (b"NiFiFF2" + v3[7:], "application/flowfile-v3"),
        "v3 empty": (b"", "application/flowfile-v3"),
        "not a tar": (b"this is not a tar archive " * 40, "application/tar"),
        "tar cut in a content": (tar[:len(tar) // 2], "application/tar"),
        "tar with junk for its second header": (tar[:1024] + b"J" * 512 + tar[1536:], "application/tar"),
        "tar empty": (b"", "application/tar"),
        "zip without its central directory": (zip_[:-30], "application/zip"),
        "zip with a damaged entry": (bytes(flipped), "application/zip"),
    }


def test_broken_packages_go_to_failure_with_nothing_else_emitted():
    packages = broken_packages()
    runner = ProcessorRunner(UnpackContent, {})
    for name, (data, mime_type) in packages.items():
        runner.enqueue(data, {"filename": name, "mime.type": mime_type})
    runner.run()
    failed = {f.attributes["filename"]: f for f in runner.output("failure")}
    assert sorted(failed) == sorted(packages)
    assert {name: runner.read(f) if f.size else b"" for name, f in failed.items()} == {
        name: data for name, (data, _) in packages.items()}  # unchanged
    assert all("fragment.count" not in f.attributes for f in failed.values())
    assert runner.output("success") == [] and runner.output("original") == []
    assert runner.events() == []  # no child was kept, not even for the FlowFiles read before the damage


def test_one_broken_package_does_not_stop_the_others():
    bundle, data, _ = merge("FlowFile Stream, v3")
    runner = ProcessorRunner(UnpackContent, {"Packaging Format": "flowfile-stream-v3"})
    runner.enqueue(data, {"filename": "good"})
    runner.enqueue(data[:-1], {"filename": "cut"})
    runner.lose_content(runner.enqueue(data, {"filename": "unreadable"}))
    runner.run()
    assert [runner.read(c) for c in runner.output("success")] == CONTENTS
    assert [f.attributes["filename"] for f in runner.output("original")] == ["good"]
    assert sorted(f.attributes["filename"] for f in runner.output("failure")) == ["cut", "unreadable"]


@pytest.mark.parametrize("properties", [
    {"Packaging Format": "flowfile-stream-v2"},
    {"Packaging Format": "application/zip"},
    {"File Filter": "(unclosed"},
])
def test_invalid_configurations(properties):
    assert UnpackContent.validate_properties(properties)
