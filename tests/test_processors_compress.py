"""CompressContent: every format, mime.type and filename handling, corrupt input."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib

import pytest
import zstandard

from flowactors.processors import CompressContent
from flowactors.processors.compress import FORMATS
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines

DATA = b"".join(b"line %d of some fairly repetitive text\n" % i for i in range(50_000))  # ~2 MB
DECODERS = {
    "gzip": gzip.decompress, "deflate": zlib.decompress, "bzip2": bz2.decompress,
    "xz-lzma2": lzma.decompress, "lzma": lzma.decompress,
    "zstd": lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d),
}


def run(properties, items) -> ProcessorRunner:
    runner = ProcessorRunner(CompressContent, properties)
    for content, attributes in items:
        runner.enqueue(content, attributes)
    runner.run()
    return runner


@pytest.mark.parametrize("name", list(FORMATS))
def test_round_trip_every_format(name):
    fmt = FORMATS[name]
    runner = run({"Mode": "compress", "Compression Format": name, "Update Filename": True},
                 [(DATA, {"filename": "data.txt", "mime.type": "text/plain"})])
    [compressed] = runner.output("success")
    packed = runner.read(compressed)
    assert len(packed) < len(DATA) // 5
    assert DECODERS[name](packed) == DATA  # a standard decoder reads it
    assert compressed.attributes["mime.type"] == fmt.mime_type
    assert compressed.attributes["filename"] == "data.txt" + fmt.extension
    assert [e.event_type for e in runner.events()] == [T.CONTENT_MODIFIED]

    runner = run({"Mode": "decompress", "Compression Format": name, "Update Filename": True},
                 [(packed, dict(compressed.attributes))])
    [restored] = runner.output("success")
    assert runner.read(restored) == DATA
    assert restored.attributes["filename"] == "data.txt"
    assert "mime.type" not in restored.attributes


def test_filename_is_kept_by_default_and_level_matters():
    fast = run({"Compression Format": "gzip", "Compression Level": "0"}, [(DATA, {"filename": "f"})])
    small = run({"Compression Format": "gzip", "Compression Level": "9"}, [(DATA, {"filename": "f"})])
    [a], [b] = fast.output("success"), small.output("success")
    assert a.attributes["filename"] == "f"
    assert a.size > len(DATA)  # level 0: stored, not compressed
    assert b.size < a.size // 10
    assert gzip.decompress(fast.read(a)) == gzip.decompress(small.read(b)) == DATA


def test_decompress_by_mime_type():
    items = [
        (gzip.compress(b"g"), {"mime.type": "application/gzip", "id": "gzip"}),
        (gzip.compress(b"x"), {"mime.type": "application/x-gzip", "id": "x-gzip"}),
        (bz2.compress(b"b"), {"mime.type": "application/x-bzip2", "id": "bzip2"}),
        (zstandard.ZstdCompressor().compress(b"z"), {"mime.type": "application/zstd", "id": "zstd"}),
        (b"plain", {"mime.type": "text/plain", "id": "text"}),
        (b"none", {"id": "no-mime"}),
    ]
    runner = run({"Mode": "decompress"}, items)
    out = {f.attributes["id"]: (runner.read(f), f.attributes.get("mime.type")) for f in runner.output("success")}
    assert out == {"gzip": (b"g", None), "x-gzip": (b"x", None), "bzip2": (b"b", None), "zstd": (b"z", None),
                   "text": (b"plain", "text/plain")}  # not compressed: passed on unchanged
    assert [f.attributes["id"] for f in runner.output("failure")] == ["no-mime"]


@pytest.mark.parametrize("name,content", [
    ("gzip", b"this is not gzip at all"),
    ("gzip", gzip.compress(DATA)[:-20]),            # truncated
    ("gzip", gzip.compress(DATA)[:100]),            # truncated early
    ("gzip", b""),                                   # empty
    ("gzip", gzip.compress(b"ok") + b"trailing garbage"),
    ("deflate", zlib.compress(b"ok") + b"more"),
    ("bzip2", bz2.compress(DATA)[:-10]),
    ("xz-lzma2", b"\xfd7zXZ\x00garbage"),
    ("lzma", lzma.compress(b"x", format=lzma.FORMAT_ALONE)[:-3]),
    ("zstd", zstandard.ZstdCompressor().compress(DATA)[:-5]),
    ("zstd", b"not zstd"),
])
def test_corrupt_input_goes_to_failure_unchanged(name, content):
    runner = run({"Mode": "decompress", "Compression Format": name},
                 [(content, {"filename": "x.gz", "mime.type": "application/gzip"})])
    [failed] = runner.output("failure")
    assert runner.read(failed) == content
    assert failed.attributes["mime.type"] == "application/gzip" and failed.attributes["filename"] == "x.gz"
    assert runner.output("success") == []
    assert runner.events() == []


def test_a_corrupt_flowfile_does_not_disturb_the_rest_of_the_batch():
    runner = run({"Mode": "decompress", "Compression Format": "gzip"},
                 [(gzip.compress(b"one"), {}), (b"junk", {}), (gzip.compress(b"three"), {})])
    assert runner.contents("success") == [b"one", b"three"]
    assert runner.contents("failure") == [b"junk"]


def test_concatenated_streams_are_one_content():
    gz = gzip.compress(b"first ") + gzip.compress(b"second")
    zs = zstandard.ZstdCompressor().compress(b"first ") + zstandard.ZstdCompressor().compress(b"second")
    big = zstandard.ZstdCompressor().compress(os.urandom(100)) + zstandard.ZstdCompressor().compress(DATA)
    for name, content, expected in (("gzip", gz, b"first second"), ("zstd", zs, b"first second"),
                                    ("zstd", big, None)):
        runner = run({"Mode": "decompress", "Compression Format": name}, [(content, {})])
        [out] = runner.contents("success")
        if expected is not None:
            assert out == expected
        else:
            assert len(out) == 100 + len(DATA) and out.endswith(DATA)


def test_decompression_output_is_streamed_for_highly_compressed_input():
    zeros = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)  # 20 MB from ~20 KB
    runner = run({"Mode": "decompress", "Compression Format": "gzip"}, [(zeros, {})])
    [out] = runner.output("success")
    assert out.size == 20 * 1024 * 1024


def test_validation():
    assert CompressContent.validate_properties({"Mode": "compress"})  # compress needs a format
    assert CompressContent.validate_properties({"Mode": "compress", "Compression Format": "rar"})
    assert CompressContent.validate_properties({"Compression Format": "gzip", "Compression Level": "10"})
    assert not CompressContent.validate_properties({"Mode": "decompress"})


@pytest.mark.parametrize("mode", ["compress", "decompress"])
def test_unreadable_content_goes_to_failure_and_the_others_go_on(mode):
    runner = ProcessorRunner(CompressContent, {"Mode": mode, "Compression Format": "gzip"})
    good = runner.enqueue(gzip.compress(b"hello") if mode == "decompress" else b"hello", {"filename": "good"})
    bad = runner.lose_content(runner.enqueue(b"whatever", {"filename": "bad"}))
    runner.run()
    assert [f.uuid for f in runner.output("failure")] == [bad.uuid] and runner.input_count == 0
    assert [f.uuid for f in runner.output("success")] == [good.uuid]
    [out] = runner.contents("success")
    assert (gzip.decompress(out) if mode == "compress" else out) == b"hello"
