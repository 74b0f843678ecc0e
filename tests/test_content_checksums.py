"""Content checksums (issue 50: four bytes changed in a claim file were delivered silently): with
``checksums=True`` every 4 KiB block of a claim file has its CRC-32 in a trailer after its
contents, and every read is verified, whole contents, slices, streams and copies alike. Real files
only."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from flowactors import Flow, Processor, Relationship
from flowactors.driver.running import processor_totals, queue_totals, run_flow
from flowactors.processors import GetFile
from flowactors.sdk.settings import Settings
from repositories.content import (
    ContentChecksumError,
    ContentRepositoryError,
    FileSystemContentRepository,
    InMemoryContentRepository,
)
from repositories.content.checksums import BLOCK
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis
from test_failing_flowfiles import Hold


@pytest.fixture
def make_repo(tmp_path):
    def make(**options):
        options.setdefault("checksums", True)
        return FileSystemContentRepository(tmp_path / "content", **options)

    return make


def committed(repo, contents):
    writer = repo.writer()
    claims = [writer.write_bytes(c) for c in contents]
    writer.flush()
    writer.close()
    return claims


def corrupt(path: Path, at: int, data: bytes = b"XXXX") -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def test_each_block_has_its_crc_in_the_trailer_after_the_contents(make_repo):
    repo = make_repo()
    data = os.urandom(3 * BLOCK + 100)
    (claim,) = committed(repo, [data])
    assert claim.resource.id.endswith(".c1") and (claim.offset, claim.length) == (0, len(data))
    blocks = [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]
    entries = b"".join(struct.pack("<I", zlib.crc32(b)) for b in blocks)
    trailer = entries + struct.pack("<QI", len(data), zlib.crc32(entries)) + b"fcs1"
    assert repo.path_of(claim.resource).read_bytes() == data + trailer   # the contents as they were, then it
    assert repo.read_bytes(claim) == data


def test_a_flush_writes_the_trailer_and_a_later_content_moves_it(make_repo):
    repo = make_repo(max_appendable_size=1 << 20)
    writer = repo.writer()
    first = writer.write_bytes(b"a" * 5000)
    writer.flush(sync=False)   # as a session does before it reads what it wrote
    assert repo.read_bytes(first) == b"a" * 5000
    second = writer.write_bytes(b"b" * 10)   # over the trailer
    writer.flush()
    writer.close()
    assert second.offset == 5000 and repo.read_many([first, second]) == [b"a" * 5000, b"b" * 10]
    assert repo.path_of(first.resource).stat().st_size == 5010 + 2 * 4 + 16


def test_four_bytes_changed_in_a_claim_file_are_an_error_naming_the_file_the_block_and_the_content(make_repo):
    repo = make_repo(max_appendable_size=1 << 20)
    contents = [bytes([65 + i]) * 3000 for i in range(4)]   # 12,000 bytes: blocks 0-2
    claims = committed(repo, contents)
    path = repo.path_of(claims[2].resource)
    corrupt(path, claims[2].offset + 10)   # byte 6010: block 1 (4096-8191), also holding content 1's end
    with pytest.raises(ContentChecksumError) as caught:
        repo.read_bytes(claims[2])
    error = caught.value
    assert isinstance(error, ContentRepositoryError)
    assert error.path == str(path) and error.offset == BLOCK and error.claim == claims[2]
    message = str(error)
    assert message.startswith(f"content at offset 6000, length 3000 of claim file {path} fails its checksum: "
                              f"bytes 4096 to 8191 of the file have CRC-32 0x")
    assert "the file was changed or damaged after it was written, so the content is not delivered" in message
    for read in (lambda c: repo.read_many([c]), lambda c: repo.open(c).read(),
                 lambda c: b"".join(repo.open(c))):
        with pytest.raises(ContentChecksumError):
            read(claims[1])   # shares the damaged block
    with pytest.raises(ContentChecksumError) as caught:
        repo.read_many(claims)   # a batch: the error names the first content in the damaged block
    assert caught.value.claim == claims[1]
    assert repo.read_bytes(claims[0]) == contents[0]   # block 0 is intact
    assert repo.read_bytes(claims[3]) == contents[3]   # block 2 is intact


def test_a_slice_of_a_content_is_verified_too(make_repo):
    repo = make_repo()
    data = os.urandom(5 * BLOCK)
    (claim,) = committed(repo, [data])
    piece = claim.slice(BLOCK + 7, 2 * BLOCK)
    assert repo.read_bytes(piece) == data[BLOCK + 7:3 * BLOCK + 7]
    corrupt(repo.path_of(claim.resource), 3 * BLOCK + 100)   # in the slice's last block, past its end
    with pytest.raises(ContentChecksumError):
        repo.read_bytes(piece)
    assert repo.read_bytes(claim.slice(0, BLOCK)) == data[:BLOCK]


def test_a_stream_verifies_what_it_reads_wherever_it_seeks(make_repo):
    repo = make_repo()
    data = os.urandom(600 * 1024)
    (claim,) = committed(repo, [data])
    with repo.open(claim) as stream:
        stream.seek(300_001)
        assert stream.read(5000) == data[300_001:305_001]
        stream.seek(0)
        assert stream.read() == data
    corrupt(repo.path_of(claim.resource), 590_000)
    with repo.open(claim) as stream:
        assert stream.read(400_000) == data[:400_000]   # before the damage
        with pytest.raises(ContentChecksumError):
            stream.read()


def test_aborted_and_truncated_contents_leave_checksums_that_match(make_repo):
    repo = make_repo(max_appendable_size=1 << 20)
    writer = repo.writer()
    first = writer.write_bytes(b"a" * 5000)
    with pytest.raises(RuntimeError):
        with writer.open_stream() as out:
            out.write(os.urandom(300 * 1024))   # past the write buffer: in the file, then cut back
            raise RuntimeError("the processor failed")
    second = writer.write_bytes(b"b" * 7000)
    many = writer.write_many([b"c" * 100, b"d" * 5000])
    with open(__file__, "rb") as source:
        copied = writer.copy_from(source)
    writer.flush()
    writer.close()
    assert repo.read_many([first, second, *many, copied]) == [b"a" * 5000, b"b" * 7000, b"c" * 100, b"d" * 5000,
                                                              Path(__file__).read_bytes()]


def test_copying_a_damaged_content_is_refused_not_laundered_into_fresh_checksums(make_repo):
    repo = make_repo()
    (claim,) = committed(repo, [os.urandom(2 * BLOCK)])
    corrupt(repo.path_of(claim.resource), 100)
    writer = repo.writer()
    with repo.open(claim) as source, pytest.raises(ContentChecksumError):
        writer.copy_from(source)
    writer.discard()


def test_claims_with_and_without_checksums_are_read_whatever_the_setting(tmp_path):
    plain = FileSystemContentRepository(tmp_path / "content")
    checked = FileSystemContentRepository(tmp_path / "content", checksums=True)
    (old,) = committed(plain, [b"written before checksums"])
    (new,) = committed(checked, [b"written with checksums"])
    assert checked.read_bytes(old) == b"written before checksums"
    corrupt(checked.path_of(new.resource), 0, b"W")
    with pytest.raises(ContentChecksumError):
        plain.read_bytes(new)   # the claim says it has checksums: verified with the setting off too


def test_an_archived_claim_is_verified_as_a_live_one(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1)
    claims = committed(repo, [b"x" * 100, b"y" * 100])
    repo.release([claims[0].resource])
    assert repo.read_bytes(claims[0]) == b"x" * 100
    corrupt(repo.archive_path_of(claims[0].resource), 0, b"X")
    with pytest.raises(ContentChecksumError):
        repo.read_bytes(claims[0])


@pytest.mark.parametrize("damage, says", [
    (lambda path, size: os.truncate(path, size - 1), "it does not end with one"),
    (lambda path, size: corrupt(path, size - 16 - 8, b"\xff"), "the checksums in its trailer fail their own CRC-32"),
    (lambda path, size: corrupt(path, size - 16, b"\xff"), "its trailer says 8447 bytes of contents, which a file of "),
])
def test_a_damaged_trailer_refuses_every_content_of_the_claim(make_repo, damage, says):
    repo = make_repo()
    (claim,) = committed(repo, [os.urandom(2 * BLOCK)])
    path = repo.path_of(claim.resource)
    damage(path, path.stat().st_size)
    with pytest.raises(ContentChecksumError) as caught:
        repo.read_bytes(claim)
    assert str(caught.value).startswith(f"claim file {path} was written with checksums, but {says}")


def test_adopting_a_claim_brings_its_checksums(tmp_path, make_repo):
    repo = make_repo()
    (claim,) = committed(repo, [b"salvaged content"])
    other = FileSystemContentRepository(tmp_path / "other")
    assert other.adopt(repo, claim.resource)
    assert other.read_bytes(claim) == b"salvaged content"
    corrupt(other.path_of(claim.resource), 0, b"S")
    with pytest.raises(ContentChecksumError):
        other.read_bytes(claim)


def test_the_in_memory_repository_takes_the_option():
    memory = InMemoryContentRepository(checksums=True)
    writer = memory.writer()
    claim = writer.write_bytes(b"in memory")
    assert memory.read_bytes(claim) == b"in memory"


# --- in a flow: the FlowFile whose content fails its checksum goes to failure, with the reason --------

class Reader(Processor):
    """Reads each content whole; success, and failure where the test gives it one."""

    relationships = [Relationship("success"), Relationship("failure")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            session.read_bytes(flowfile)
            session.transfer(flowfile, "success")


class ReaderWithoutFailure(Reader):
    relationships = [Relationship("success")]


def queued_with_checksums(repository: Path, count: int) -> list[FlowFile]:
    """``count`` FlowFiles queued in "queued", each with a content of one 4 KiB block of a claim
    written with checksums (the reading flow's own settings have them off: the claim says so)."""
    content = FileSystemContentRepository(repository / "content", checksums=True, max_appendable_size=1 << 20)
    writer = content.writer()
    now = now_millis()
    flowfiles = [FlowFile(i + 1, new_flowfile_uuid(), {"filename": f"f{i}.bin"},
                          writer.write_bytes(bytes([i]) * BLOCK), now, now, 0, now, i) for i in range(count)]
    writer.flush()
    writer.close()
    with WriteAheadFlowFileRepository.from_settings(repository, Settings()) as log:
        log.reserve_ids(count)
        log.commit([QueuedFlowFile(f, "queued") for f in flowfiles], [], new_claims=writer.created())
    return flowfiles


@pytest.mark.parametrize("reader", [Reader, ReaderWithoutFailure])
def test_a_flowfile_whose_content_fails_its_checksum_goes_to_failure_with_the_reason(tmp_path, reader):
    repository = tmp_path / "repository"
    flowfiles = queued_with_checksums(repository, 12)
    damaged = flowfiles[7]
    path = FileSystemContentRepository(repository / "content").path_of(damaged.claim.resource)
    corrupt(path, damaged.claim.offset + 100)
    (tmp_path / "in").mkdir()
    flow = Flow("checked")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")}, run_schedule="1 sec")
    read = flow.add(reader, "read", batch_size=12)
    flow.add(Hold, "held", auto_terminate=["success"])
    flow.connect(get, read, name="queued")
    flow.connect(read, "held", relationships=["success"], name="read")
    if reader is Reader:
        flow.connect(read, "held", relationships=["failure"], name="failed")
    if reader is Reader:
        def done(status):
            return queue_totals(status)["failed"]["count"] == 1 and queue_totals(status)["read"]["count"] == 11
    else:
        def done(status):
            return queue_totals(status)["read"]["count"] == 11 and processor_totals(status)["read"]["errors"] > 0
    final = run_flow(flow, repository, engine="in-process", timeout=120, until=done)
    assert not final.get("timed_out")
    with WriteAheadFlowFileRepository.from_settings(repository, Settings()) as log:
        queued = {queue: [f for batch in log.iter_queue(queue) for f in batch]
                  for queue in ("queued", "read", "failed")}
    assert sorted(f.uuid for f in queued["read"]) == sorted(f.uuid for f in flowfiles if f is not damaged)
    if reader is Reader:   # routed to failure, the corruption said in the reason
        (failed,) = queued["failed"]
        reason = failed.attributes["flowactors.failure.reason"]
        assert failed.uuid == damaged.uuid and queued["queued"] == []
        assert reason.startswith(f"ContentChecksumError: content at offset {damaged.claim.offset}, length {BLOCK} "
                                 f"of claim file {path} fails its checksum: bytes {damaged.claim.offset} to ")
    else:   # no failure relationship: penalized in its queue, and the error names it
        (kept,) = queued["queued"]
        assert kept.uuid == damaged.uuid
        errors = [e["error"] for p in final["processors"] for e in p["recent_errors"]]
        assert any(e.startswith("ContentChecksumError: content at offset") and
                   f"FlowFile {damaged.uuid} penalized in its queue" in e for e in errors), errors


def test_the_flow_setting_turns_checksums_on(tmp_path):
    assert not FileSystemContentRepository.from_settings(tmp_path / "off", Settings()).checksums
    on = FileSystemContentRepository.from_settings(tmp_path / "on", Settings(content_checksums=True))
    assert on.checksums and committed(on, [b"x" * 5000])[0].resource.id.endswith(".c1")
