"""The file-system content repository (and the in-memory one where the behaviour is shared), on
real files under tmp_path."""

from __future__ import annotations

import errno
import io
import multiprocessing
import os
import pickle
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from repositories.content import (
    ARCHIVE_DIR,
    ClaimWriter,
    ContentInputStream,
    ContentNotFoundError,
    FileSystemContentRepository,
    ContentRepositoryError,
    ContentRepositoryFullError,
    InMemoryContentRepository,
)
from repositories.content import options as options_module
from repositories.content import repository as repository_module
from repositories.model import ContentClaim, ResourceClaim

HOUR = 3600.0


@pytest.fixture
def make_repo(tmp_path):
    def make(**options):
        return FileSystemContentRepository(tmp_path / "content", **options)

    return make


@pytest.fixture(params=["file", "memory"])
def any_repo(request, tmp_path):
    """A factory of either implementation, for behaviour both must share."""

    def make(**options):
        if request.param == "file":
            return FileSystemContentRepository(tmp_path / "content", **options)
        return InMemoryContentRepository(**options)

    return make


def file_bytes(repo: FileSystemContentRepository, resource: ResourceClaim) -> bytes:
    return repo.path_of(resource).read_bytes()


# --- appending and rolling over ----------------------------------------------------------

def test_a_section_directory_is_made_once_a_process_not_once_a_claim(make_repo, monkeypatch):
    """Claim files do not wait on a directory syscall each: a process puts runs of claims in one
    section, which it makes the first time it writes there and then remembers."""
    repo = make_repo(sections=64, max_flowfiles_per_claim=1)
    made: list[str] = []
    mkdir = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: (made.append(str(path)), mkdir(path, *a, **k))[1])
    writer = repo.writer()
    run = options_module.CLAIMS_PER_SECTION
    claims = [writer.write_bytes(b"x") for _ in range(3 * run + 8)]  # a claim file each: four runs
    writer.flush(sync=True)
    sections = {c.resource.section for c in claims}
    assert len(sections) == 4 and len(made) == len(set(made)) == len(sections)  # once a section
    assert sorted(Path(p).name for p in made) == sorted(sections)
    assert all(repo.read_bytes(c) == b"x" for c in claims)
    made.clear()
    more = [writer.write_bytes(b"y") for _ in range(run)]  # the rest of the fourth run, then a fifth
    writer.flush(sync=False)
    assert len(more) == run and len(made) == 1
    assert not {Path(p).name for p in made} & sections  # a section already made is never made again


def test_threads_writing_at_once_make_their_claim_files_in_different_sections(any_repo):
    """Two tasks of one executor never create claim files in the same directory at once: ext4
    holds a directory's lock through a create, and the other thread spun on it (a flow's system
    time went up a third with two tasks a processor). Each thread still makes its runs."""
    repo = any_repo(sections=64, max_flowfiles_per_claim=1)
    run = options_module.CLAIMS_PER_SECTION
    both_running = threading.Barrier(2)
    sections: dict[int, list[int]] = {}

    def write(name: int) -> None:
        writer = repo.writer()
        both_running.wait()
        claims = [writer.write_bytes(b"z") for _ in range(2 * run)]  # a claim file each: two runs
        writer.flush(sync=False)
        sections[name] = [int(c.resource.section) for c in claims]

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(sections) == [0, 1]
    assert not set(sections[0]) & set(sections[1])
    for made in sections.values():
        assert made == [made[0]] * run + [(made[0] + 1) % 64] * run
    starts = sorted(made[0] for made in sections.values())
    assert (starts[1] - starts[0]) % 64 in {options_module.THREAD_SECTION_STRIDE % 64,
                                             -options_module.THREAD_SECTION_STRIDE % 64}




def test_small_contents_share_a_claim_until_the_size_limit(any_repo):
    repo = any_repo(max_appendable_size=1000, max_flowfiles_per_claim=0)
    writer = repo.writer()
    contents = [bytes([i]) * 100 for i in range(25)]
    claims = [writer.write_bytes(data) for data in contents]

    resources = [c.resource for c in claims]
    # 10 contents of 100 bytes reach 1000 bytes: the 11th starts a new claim.
    assert resources[:10] == [resources[0]] * 10
    assert resources[10:20] == [resources[10]] * 10
    assert resources[20:] == [resources[20]] * 5
    assert len({resources[0], resources[10], resources[20]}) == 3
    assert writer.created() == [resources[0], resources[10], resources[20]]
    assert [c.offset for c in claims[:12]] == [i * 100 for i in range(10)] + [0, 100]
    assert all(c.length == 100 for c in claims)
    assert writer.bytes_written == 2500
    for claim, data in zip(claims, contents):
        assert repo.read_bytes(claim) == data
    writer.close()


def test_contents_roll_over_at_the_flowfile_count_limit(any_repo):
    repo = any_repo(max_appendable_size=10**9, max_flowfiles_per_claim=3)
    writer = repo.writer()
    claims = [writer.write_bytes(b"abc") for _ in range(7)]
    groups = [c.resource for c in claims]
    assert groups[0:3] == [groups[0]] * 3 and groups[3:6] == [groups[3]] * 3
    assert groups[6] not in (groups[0], groups[3])
    assert [c.offset for c in claims] == [0, 3, 6, 0, 3, 6, 0]
    assert len(writer.created()) == 3


def test_write_many_lays_contents_out_as_write_bytes_does_and_hands_them_over_at_once(any_repo, monkeypatch):
    """The same claims as ``write_bytes`` one by one (rolled over at the size and count limits, a
    large content in a claim of its own) and the same bytes, readable as soon as it returns; on
    disk one ``pwrite`` a claim file, not one a content."""
    contents = [bytes([i]) * (100 if i != 7 else 5000) for i in range(25)] + [b""]
    repo = any_repo(max_appendable_size=1000, max_flowfiles_per_claim=6)
    one_by_one = repo.writer()
    layout = [one_by_one.write_bytes(data) for data in contents]
    one_by_one.close()
    writes: list[int] = []
    pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: (writes.append(len(data)), pwrite(fd, data, offset))[1])
    writer = repo.writer()
    claims = writer.write_many(contents)
    assert [(c.offset, c.length) for c in claims] == [(c.offset, c.length) for c in layout]
    same_claim = [[a.resource == b.resource for b in claims] for a in claims]
    assert same_claim == [[a.resource == b.resource for b in layout] for a in layout]
    assert len({c.resource for c in claims}) == 6      # 0-5 | 6 | 7 alone | 8-13 | 14-19 | 20-24 and b""
    assert all(repo.read_bytes(c) == data for c, data in zip(claims, contents))   # before any flush
    if isinstance(repo, FileSystemContentRepository):
        assert len(writes) == 6 and sum(writes) == sum(map(len, contents))
    assert writer.bytes_written == sum(map(len, contents))
    writer.close()


def test_write_many_of_one_content_for_all_lays_it_out_as_write_bytes_does(any_repo):
    """GenerateFlowFile's case (the same bytes object for every FlowFile) takes a shortcut; the
    claims, roll-overs and bytes are still those of ``write_bytes`` one by one."""
    data = b"0123456789" * 30
    repo = any_repo(max_appendable_size=1000, max_flowfiles_per_claim=3)
    one_by_one = repo.writer()
    layout = [one_by_one.write_bytes(data) for _ in range(20)]
    one_by_one.close()
    writer = repo.writer()
    claims = writer.write_many([data] * 20)
    assert [(c.offset, c.length) for c in claims] == [(c.offset, c.length) for c in layout]
    assert [[a.resource == b.resource for b in claims] for a in claims] == \
        [[a.resource == b.resource for b in layout] for a in layout]
    assert all(repo.read_bytes(c) == data for c in claims)
    assert writer.write_many([]) == [] and writer.bytes_written == 20 * len(data)
    writer.close()


def test_write_many_takes_any_buffer_even_one_whose_equality_is_elementwise(any_repo):
    """Arrays compare elementwise (``==`` gives an array, not a bool): the one-content-for-all
    shortcut must not compare contents, only recognise the same object."""
    import numpy as np

    arrays = [np.full(8, i, dtype=np.uint8) for i in range(5)]
    repo = any_repo()
    writer = repo.writer()
    claims = writer.write_many(arrays) + writer.write_many([arrays[0]] * 3)
    assert [repo.read_bytes(c) for c in claims] == [a.tobytes() for a in arrays] + [arrays[0].tobytes()] * 3
    writer.close()


def test_claim_file_is_the_raw_concatenation_of_its_contents(make_repo):
    repo = make_repo(max_appendable_size=10_000, max_flowfiles_per_claim=100)
    writer = repo.writer()
    parts = [b"first", b"", b"\x00\x01\x02", b"last one"]
    claims = [writer.write_bytes(p) for p in parts]
    writer.flush(sync=False)
    resource = claims[0].resource
    assert all(c.resource == resource for c in claims)
    # No header, no framing: exactly the bytes, in order.
    assert file_bytes(repo, resource) == b"".join(parts)
    assert claims[1] == ContentClaim(resource, 5, 0)
    assert repo.read_bytes(claims[1]) == b""


def test_large_content_of_known_size_gets_a_claim_of_its_own(any_repo):
    """A content known not to fit the current claim's room starts a new claim, so small contents
    written before it cannot pin it (seed 003's disk flood); one of unknown size (a stream without
    a hint) can only share with what came before it, as in NiFi."""
    repo = any_repo(max_appendable_size=1024, max_flowfiles_per_claim=100)
    writer = repo.writer()
    small = [writer.write_bytes(b"s" * 10) for _ in range(3)]
    big = writer.write_bytes(b"B" * 5000)
    after = writer.write_bytes(b"after")
    assert big.resource != small[0].resource and big.offset == 0 and big.length == 5000
    assert after.resource not in (big.resource, small[0].resource) and after.offset == 0

    fits = writer.write_bytes(b"f" * 1000)  # 5 + 1000 bytes still fit the 1024-byte claim
    assert fits.resource == after.resource and fits.offset == 5
    with writer.open_stream() as stream:  # size unknown: appended to the open claim
        stream.write(b"U" * 3000)
    assert stream.claim.resource == after.resource and stream.claim.offset == 1005
    with writer.open_stream(size_hint=3000) as hinted:
        hinted.write(b"H" * 3000)
    assert hinted.claim.offset == 0 and hinted.claim.resource != after.resource
    assert repo.read_bytes(big) == b"B" * 5000 and repo.read_bytes(stream.claim) == b"U" * 3000


def test_writers_never_share_a_claim(any_repo):
    repo = any_repo()
    one, two = repo.writer(), repo.writer()
    a = one.write_bytes(b"a")
    b = two.write_bytes(b"b")
    c = one.write_bytes(b"c")
    assert a.resource == c.resource != b.resource
    assert set(one.created()).isdisjoint(two.created())


def test_claim_ids_sections_and_paths(make_repo):
    repo = make_repo(sections=16)
    writer = repo.writer()
    claim = writer.write_bytes(b"data")
    resource = claim.resource
    assert repo.path_of(resource) == repo.root / "default" / resource.section / resource.id
    assert repo.path_of(resource).is_file()
    many = make_repo(sections=16, max_flowfiles_per_claim=1).writer()
    for _ in range(300):
        many.write_bytes(b"y")  # one claim each
    all_ids = [r.id for r in many.created()] + [resource.id]
    assert len(set(all_ids)) == len(all_ids) == 301
    # runs of options_module.CLAIMS_PER_SECTION claims in one section, the sections in turn (wrapping at 16)
    sections = [int(r.section) for r in many.created()]
    assert all(0 <= s < 16 for s in sections)
    runs = [sections[i:i + options_module.CLAIMS_PER_SECTION] for i in range(0, 300, options_module.CLAIMS_PER_SECTION)]
    assert all(len(set(run)) == 1 for run in runs)
    assert [run[0] for run in runs] == [(sections[0] + i) % 16 for i in range(len(runs))]
    assert len(set(sections)) == len(runs)


# --- reading -----------------------------------------------------------------------------


def test_open_reads_only_the_claim_range_with_seek_and_partial_reads(any_repo):
    repo = any_repo()
    writer = repo.writer()
    writer.write_bytes(b"<before>")
    claim = writer.write_bytes(bytes(range(256)) * 4)
    writer.write_bytes(b"<after>")
    expected = bytes(range(256)) * 4

    with repo.open(claim) as stream:
        assert stream.read(10) == expected[:10]
        assert stream.tell() == 10
        stream.seek(1000)
        assert stream.read(100) == expected[1000:]  # stops at the content's end
        assert stream.read(5) == b""
        stream.seek(-4, io.SEEK_END)
        assert stream.read() == expected[-4:]
        stream.seek(2)
        stream.seek(3, io.SEEK_CUR)
        buffer = bytearray(7)
        assert stream.readinto(buffer) == 7 and bytes(buffer) == expected[5:12]
        stream.seek(0)
        assert stream.read() == expected
        stream.seek(5000)
        assert stream.read() == b""
    with repo.open(claim) as stream:
        stream.chunk_size = 300
        chunks = list(stream)
    assert [len(c) for c in chunks] == [300, 300, 300, 124]
    assert b"".join(chunks) == expected
    assert repo.read_bytes(None) == b""
    assert repo.read_bytes(claim.slice(256, 3)) == bytes([0, 1, 2])


def test_open_stream_has_no_file_descriptor_and_reads_big_content_in_chunks(make_repo):
    repo = make_repo()
    writer = repo.writer()
    payload = os.urandom(3 * 1024 * 1024 + 5)
    claim = writer.write_bytes(payload)
    with repo.open(claim) as stream:
        assert isinstance(stream, ContentInputStream)
        with pytest.raises(io.UnsupportedOperation):
            stream.fileno()
        chunks = list(stream)
    assert [len(c) for c in chunks] == [1 << 20] * 3 + [5]
    assert b"".join(chunks) == payload


def test_read_of_a_truncated_claim_file_is_a_clear_error(make_repo):
    repo = make_repo()
    writer = repo.writer()
    claim = writer.write_bytes(b"0123456789")
    writer.close()
    os.truncate(repo.path_of(claim.resource), 4)
    with pytest.raises(ContentRepositoryError, match="truncated or is corrupt"):
        repo.read_bytes(claim)
    with repo.open(claim) as stream, pytest.raises(ContentRepositoryError, match="truncated"):
        stream.read()


def test_hostile_or_unknown_resource_claims_are_rejected(make_repo):
    repo = make_repo()
    for resource in (
        ResourceClaim("default", "1", "../../etc/passwd"),
        ResourceClaim("default", "../..", "abc"),
        ResourceClaim("default", "1", ".hidden"),
    ):
        with pytest.raises(ContentRepositoryError, match="not a valid resource claim"):
            repo.path_of(resource)
    with pytest.raises(ContentRepositoryError, match="not configured"):
        repo.read_bytes(ContentClaim(ResourceClaim("elsewhere", "1", "123-1"), 0, 1))


# --- streams and copies ------------------------------------------------------------------


def test_open_stream_writes_a_content_and_aborts_on_exception(any_repo):
    repo = any_repo()
    writer = repo.writer()
    head = writer.write_bytes(b"head")
    with writer.open_stream() as out:
        out.write(b"hello ")
        out.write(memoryview(b"world"))
        assert out.tell() == 11
        with pytest.raises(ContentRepositoryError, match="still open"):
            writer.write_bytes(b"no")
    assert out.claim == ContentClaim(head.resource, 4, 11)
    assert repo.read_bytes(out.claim) == b"hello world"

    with pytest.raises(RuntimeError):
        with writer.open_stream() as failing:
            failing.write(b"x" * 400_000)  # past the write buffer: on disk already
            raise RuntimeError("processor failed")
    assert failing.aborted
    with pytest.raises(ContentRepositoryError, match="aborted"):
        failing.claim
    # The aborted bytes were truncated away: the next content follows the last good one.
    tail = writer.write_bytes(b"tail")
    assert tail == ContentClaim(head.resource, 15, 4)
    writer.flush(sync=False)
    if isinstance(repo, FileSystemContentRepository):
        assert file_bytes(repo, head.resource) == b"headhello worldtail"


def test_copy_from_streams_and_respects_length(any_repo, tmp_path):
    repo = any_repo()
    writer = repo.writer()
    source = io.BytesIO(b"0123456789" * 1000)
    first = writer.copy_from(source, 25)
    rest = writer.copy_from(source)
    assert repo.read_bytes(first) == (b"0123456789" * 3)[:25]
    assert repo.read_bytes(rest) == (b"0123456789" * 1000)[25:]

    class ReadOnly:  # no readinto
        def __init__(self):
            self.data = io.BytesIO(b"abcdef")

        def read(self, n=-1):
            return self.data.read(n)

    assert repo.read_bytes(writer.copy_from(ReadOnly())) == b"abcdef"

    before = writer.bytes_written
    with pytest.raises(ContentRepositoryError, match="source ended after 3 of the 10 bytes"):
        writer.copy_from(io.BytesIO(b"xyz"), 10)
    assert writer.bytes_written == before
    after = writer.write_bytes(b"!")
    assert after.offset == rest.offset + rest.length + 6  # the short copy left nothing behind

    path = tmp_path / "import.bin"
    path.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    imported = writer.copy_file(path)
    assert imported.length == path.stat().st_size
    assert repo.read_bytes(imported) == path.read_bytes()


def test_copy_from_another_claim_copies_the_range_only(make_repo):
    repo = make_repo()
    writer = repo.writer()
    writer.write_bytes(b"noise")
    original = writer.write_bytes(b"ABCDEFGHIJ" * 10_000)
    writer.write_bytes(b"more noise")
    copier = repo.writer()
    with repo.open(original) as source:
        source.read(3)
        copy = copier.copy_from(source, 50_000)
        assert source.tell() == 50_003
        remainder = copier.copy_from(source)
    assert repo.read_bytes(copy) == (b"ABCDEFGHIJ" * 10_000)[3:50_003]
    assert repo.read_bytes(remainder) == (b"ABCDEFGHIJ" * 10_000)[50_003:]


# --- flush, discard, close ---------------------------------------------------------------


def test_flush_with_sync_fsyncs_every_claim_file_and_new_directory(make_repo, monkeypatch):
    repo = make_repo(max_appendable_size=100, sections=4)
    writer = repo.writer()
    claims = [writer.write_bytes(b"x" * 150) for _ in range(5)]  # one claim each, 4 retired
    synced: list[str] = []

    def recorder(real):
        def sync(fd):
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            return real(fd)

        return sync

    monkeypatch.setattr(os, "fdatasync", recorder(os.fdatasync))
    monkeypatch.setattr(os, "fsync", recorder(os.fsync))

    writer.flush(sync=False)
    assert synced == []
    writer.flush(sync=True)
    claim_files = {str(repo.path_of(c.resource)) for c in claims}
    section_dirs = {str(repo.path_of(c.resource).parent) for c in claims}
    assert claim_files <= set(synced)
    assert section_dirs <= set(synced)
    assert str(repo.containers["default"]) in synced  # new section directories' parent
    synced.clear()
    writer.flush(sync=True)  # nothing new since the last sync
    assert synced == []
    writer.write_bytes(b"y")
    writer.flush()  # None: the repository's always_sync (off)
    assert synced == []


def test_discard_deletes_every_claim_the_writer_created(any_repo):
    repo = any_repo(max_appendable_size=100)
    keep = repo.writer()
    kept = keep.write_bytes(b"committed")
    keep.close()
    writer = repo.writer()
    claims = [writer.write_bytes(b"z" * 120) for _ in range(4)]
    stream = writer.open_stream()
    stream.write(b"half")
    writer.discard()
    assert stream.closed
    assert set(repo.iter_resource_claims()) == {kept.resource}
    for claim in claims:
        with pytest.raises(ContentNotFoundError):
            repo.read_bytes(claim)
    with pytest.raises(ContentRepositoryError, match="discarded"):
        writer.write_bytes(b"more")
    with pytest.raises(ContentRepositoryError, match="discarded"):
        writer.flush(sync=False)
    writer.discard()  # idempotent
    assert repo.read_bytes(kept) == b"committed"


def test_close_seals_the_writer(any_repo):
    repo = any_repo()
    writer = repo.writer()
    claim = writer.write_bytes(b"data")
    with writer.open_stream() as out:
        out.write(b"x")
    writer.close()
    with pytest.raises(ContentRepositoryError, match="closed"):
        writer.write_bytes(b"more")
    with pytest.raises(ContentRepositoryError, match="closed"):
        writer.open_stream()
    with pytest.raises(ContentRepositoryError, match="cannot discard a closed"):
        writer.discard()
    assert repo.read_bytes(claim) == b"data"

    other = repo.writer()
    other.open_stream()
    with pytest.raises(ContentRepositoryError, match="stream is still open"):
        other.close()


def test_a_full_disk_error_fails_the_writer_until_discarded(make_repo, monkeypatch):
    """errno mapping (EDQUOT here; the real ENOSPC is in test_content_enospc.py)."""
    repo = make_repo()
    writer = repo.writer()
    good = writer.write_bytes(b"good")

    def over_quota(fd, data, offset):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(os, "pwrite", over_quota)
    with pytest.raises(ContentRepositoryFullError) as caught:
        writer.write_bytes(b"x")
    monkeypatch.undo()
    error = caught.value
    assert error.errno == errno.EDQUOT and error.container == "default"
    assert str(repo.containers["default"]) in str(error)
    assert "disk quota" in str(error) and "add a container" in str(error)
    assert writer.failed
    with pytest.raises(ContentRepositoryError, match="failed earlier"):
        writer.write_bytes(b"y")
    with pytest.raises(ContentRepositoryError, match="failed earlier"):
        writer.flush(sync=True)
    writer.discard()
    with pytest.raises(ContentNotFoundError):
        repo.read_bytes(good)
    assert list(repo.iter_resource_claims()) == []


# --- containers --------------------------------------------------------------------------


def test_a_write_over_quota_deletes_the_oldest_archived_claim_and_goes_through(make_repo, monkeypatch, caplog):
    """A quota (EDQUOT) refuses a write that the disk's figures say fits: the oldest archived
    claim goes all the same, and the write is tried again (the real ENOSPC: test_content_enospc.py)."""
    repo = make_repo(max_flowfiles_per_claim=1, archive_max_usage_percent=100)  # whatever this disk holds
    archived = _committed_claims(repo, 3)
    repo.release([c.resource for c in archived])
    real_pwrite, refusals = os.pwrite, [errno.EDQUOT]

    def over_quota_once(fd, data, offset):
        if refusals:
            raise OSError(refusals.pop(), os.strerror(errno.EDQUOT))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", over_quota_once)
    writer = repo.writer()
    claim = writer.write_bytes(b"fits now")
    writer.close()
    monkeypatch.undo()
    assert repo.read_bytes(claim) == b"fits now"
    assert [repo.archive_path_of(c.resource).exists() for c in archived] == [False, True, True]
    assert "deleted its 1 oldest archived claims (100 bytes" in caplog.text


def test_containers_are_chosen_round_robin(tmp_path):
    absolute = tmp_path / "elsewhere" / "disk3"
    repo = FileSystemContentRepository(
        tmp_path / "content", containers=("a", "b", str(absolute)), max_flowfiles_per_claim=1
    )
    writer = repo.writer()
    claims = [writer.write_bytes(b"%d" % i) for i in range(7)]
    names = [c.resource.container for c in claims]
    assert names == ["a", "b", str(absolute), "a", "b", str(absolute), "a"]
    assert repo.path_of(claims[0].resource).is_relative_to(tmp_path / "content" / "a")
    assert repo.path_of(claims[1].resource).is_relative_to(tmp_path / "content" / "b")
    assert repo.path_of(claims[2].resource).is_relative_to(absolute)
    assert [repo.read_bytes(c) for c in claims] == [b"%d" % i for i in range(7)]
    usage = repo.usage()
    assert {k: v["live_count"] for k, v in usage.items()} == {"a": 3, "b": 2, str(absolute): 2}


def _write_claims_in_child(root: str, count: int, queue) -> None:
    repo = FileSystemContentRepository(root, max_flowfiles_per_claim=1)
    writer = repo.writer()
    for i in range(count):
        writer.write_bytes(b"child %d" % i)
    writer.close()
    queue.put([r.id for r in writer.created()])


def test_claim_ids_are_unique_across_processes(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1)
    writer = repo.writer()
    writer.write_bytes(b"parent before fork")  # the counter is copied into forked children
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    children = [
        ctx.Process(target=_write_claims_in_child, args=(str(repo.root), 500, queue))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    for _ in range(500):
        writer.write_bytes(b"parent")
    results = [queue.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    ids = [r.id for r in writer.created()] + results[0] + results[1]
    assert len(ids) == 1501
    assert len(set(ids)) == 1501
    # O_EXCL creation plus unique ids: one file per claim, none overwritten.
    assert len(list(repo.iter_resource_claims())) == 1501


# --- release, archive, age-off -----------------------------------------------------------


def _committed_claims(repo, count, size=100):
    writer = repo.writer()
    claims = [writer.write_bytes(bytes([65 + i % 26]) * size) for i in range(count)]
    writer.flush(sync=False)
    writer.close()
    return claims


def test_release_with_archive_moves_the_file_and_it_stays_readable(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1)
    claims = _committed_claims(repo, 3)
    resource = claims[0].resource
    live = repo.path_of(resource)
    os.utime(live, (1_000_000, 1_000_000))  # written long ago
    before = time.time()
    assert repo.release([resource, resource]) == 1
    archived = repo.archive_path_of(resource)
    assert not live.exists() and archived.is_file()
    assert archived == live.parent / ARCHIVE_DIR / resource.id
    assert archived.stat().st_mtime >= before - 1  # the archive time, not the write time
    assert repo.read_bytes(claims[0]) == b"A" * 100
    with repo.open(claims[0]) as stream:
        assert stream.path == str(archived)
        assert stream.read() == b"A" * 100
    assert resource not in set(repo.iter_resource_claims())
    assert repo.release([resource]) == 0  # already released
    usage = repo.usage()["default"]
    assert (usage["live_count"], usage["archive_count"], usage["archive_bytes"]) == (2, 1, 100)


def test_release_without_archive_deletes(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1, archive_enabled=False)
    claims = _committed_claims(repo, 2)
    assert repo.release([c.resource for c in claims]) == 2
    assert not repo.path_of(claims[0].resource).exists()
    assert not repo.archive_path_of(claims[0].resource).exists()
    with pytest.raises(ContentNotFoundError, match="aged off"):
        repo.read_bytes(claims[0])
    with pytest.raises(ContentNotFoundError):
        repo.open(claims[1])


def test_release_validates_before_touching_anything(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1)
    (claim,) = _committed_claims(repo, 1)
    with pytest.raises(ContentRepositoryError):
        repo.release([claim.resource, ResourceClaim("nope", "1", "1-2")])
    assert repo.path_of(claim.resource).exists()


def _age(path: Path, seconds: float, now: float) -> None:
    os.utime(path, (now - seconds, now - seconds))


def test_age_off_by_retention(any_repo):
    repo = any_repo(max_flowfiles_per_claim=1, archive_max_retention=3 * HOUR,
                    archive_max_usage_percent=None)
    claims = _committed_claims(repo, 4, size=10)
    resources = [c.resource for c in claims]
    assert repo.release(resources[:3]) == 3
    now = time.time()
    if isinstance(repo, FileSystemContentRepository):
        for resource, hours in zip(resources, (4, 2.9, 1)):
            _age(repo.archive_path_of(resource), hours * HOUR, now)
        stats = repo.age_off_archive(now=now)
    else:
        stats = repo.age_off_archive(now=now + 3.5 * HOUR)  # memory: all three archived "now"
    if isinstance(repo, FileSystemContentRepository):
        assert stats == dict(removed=1, removed_by_retention=1, removed_by_usage=0,
                             bytes_freed=10, archive_bytes=20, archive_count=2)
        with pytest.raises(ContentNotFoundError, match="aged off"):
            repo.read_bytes(claims[0])
        assert repo.read_bytes(claims[1]) == claims[1].length * b"B"
        later = repo.age_off_archive(now=now + 0.2 * HOUR)
        assert later["removed"] == 1 and later["archive_count"] == 1
    else:
        assert stats["removed"] == 3 and stats["archive_count"] == 0
    assert repo.read_bytes(claims[3]) == b"D" * 10  # live claims are never aged off


def test_age_off_by_usage_removes_oldest_first_until_under_the_threshold(make_repo, monkeypatch):
    repo = make_repo(max_flowfiles_per_claim=1, archive_max_retention=3 * HOUR,
                     archive_max_usage_percent=90.0, archive_candidates_per_pass=3)
    claims = _committed_claims(repo, 12, size=1000)
    resources = [c.resource for c in claims]
    repo.release(resources[:11])
    now = time.time()
    # Archived 10 minutes apart; resources[0] is the oldest, one beyond the retention.
    for i, resource in enumerate(resources[:11]):
        _age(repo.archive_path_of(resource), 3.5 * HOUR if i == 0 else (11 - i) * 600, now)

    container = str(repo.containers["default"])
    total = 100_000

    def archive_bytes() -> int:
        return sum(p.stat().st_size for p in Path(container).glob(f"*/{ARCHIVE_DIR}/*"))

    calls = []
    DiskUsage = namedtuple("DiskUsage", "total used free")

    def fake_disk_usage(path):
        calls.append(os.fspath(path))
        used = 85_500 + archive_bytes()  # 10 archived files after retention: 95.5 % used
        return DiskUsage(total, used, total - used)

    monkeypatch.setattr(repository_module, "disk_usage", fake_disk_usage)
    stats = repo.age_off_archive(now=now)

    # 95.5 % -> at most 90 %: 5,500 bytes to free, so the 6 oldest of the 10 (4 would leave
    # 91.5 %, 5 leave 90.5 %), with only 3 candidates in memory per scan.
    assert stats["removed_by_retention"] == 1
    assert stats["removed_by_usage"] == 6
    assert stats["removed"] == 7 and stats["bytes_freed"] == 7000
    assert (stats["archive_count"], stats["archive_bytes"]) == (4, 4000)
    gone = [not repo.archive_path_of(r).exists() for r in resources[:11]]
    assert gone == [True] * 7 + [False] * 4  # oldest first
    assert set(calls) == {container}
    assert fake_disk_usage(container).used <= 0.9 * total
    assert repo.read_bytes(claims[11]) == claims[11].length * b"L"  # live untouched

    # Under the threshold nothing more goes.
    again = repo.age_off_archive(now=now)
    assert again["removed"] == 0 and again["archive_count"] == 4


def test_age_off_by_usage_stops_when_the_archive_is_empty(make_repo, monkeypatch):
    repo = make_repo(max_flowfiles_per_claim=1, archive_candidates_per_pass=2)
    claims = _committed_claims(repo, 5)
    repo.release([c.resource for c in claims[:3]])
    DiskUsage = namedtuple("DiskUsage", "total used free")
    monkeypatch.setattr(repository_module, "disk_usage", lambda p: DiskUsage(100, 99, 1))
    stats = repo.age_off_archive()
    assert stats["removed_by_usage"] == 3 and stats["archive_count"] == 0
    assert len(list(repo.iter_resource_claims())) == 2  # the disk is still full of live data


def test_usage_reports_files_and_the_real_disk(make_repo):
    repo = make_repo(max_flowfiles_per_claim=1)
    claims = _committed_claims(repo, 3, size=1234)
    repo.release([claims[0].resource])
    usage = repo.usage()["default"]
    disk = os.statvfs(repo.containers["default"])
    assert usage["live_bytes"] == 2468 and usage["live_count"] == 2
    assert usage["archive_bytes"] == 1234 and usage["archive_count"] == 1
    assert usage["disk_total"] == disk.f_blocks * disk.f_frsize
    assert usage["disk_used"] + usage["disk_free"] == usage["disk_total"]
    assert 0 < usage["disk_percent"] <= 100


# --- start-up cleanup --------------------------------------------------------------------


def test_remove_orphans_deletes_unreferenced_live_claims_only(any_repo):
    repo = any_repo(max_flowfiles_per_claim=1)
    committed = _committed_claims(repo, 3)
    archived = committed[2]
    repo.release([archived.resource])
    crashed = repo.writer()
    orphans = [crashed.write_bytes(b"never committed") for _ in range(4)]
    referenced = {committed[0].resource, committed[1].resource}

    assert repo.remove_orphans(lambda r: r in referenced) == 4
    assert set(repo.iter_resource_claims()) == referenced
    assert repo.read_bytes(archived) == b"C" * 100  # the archive is not touched
    for orphan in orphans:
        with pytest.raises(ContentNotFoundError):
            repo.read_bytes(orphan)


def test_iter_resource_claims_ignores_foreign_files(make_repo):
    repo = make_repo()
    (claim,) = _committed_claims(repo, 1)
    section = repo.path_of(claim.resource).parent
    (section / ".nfs0001").write_bytes(b"")
    (section.parent / "not-a-section").mkdir()
    (section.parent / "not-a-section" / "123-1").write_bytes(b"")
    assert list(repo.iter_resource_claims()) == [claim.resource]
    assert repo.remove_orphans(lambda r: False) == 1
    assert (section / ".nfs0001").exists()


# --- configuration and values ------------------------------------------------------------


def test_from_settings_uses_the_content_settings(tmp_path):
    from flowactors.sdk.settings import Settings

    settings = Settings(content_containers=("one", "two"), content_sections=8,
                        max_appendable_claim_size=123, max_flowfiles_per_claim=7, always_sync=True,
                        archive_enabled=False, archive_max_retention=60.0,
                        archive_max_usage_percent=50.0)
    repo = FileSystemContentRepository.from_settings(tmp_path, settings)
    assert set(repo.containers) == {"one", "two"}
    assert (tmp_path / "content" / "one").is_dir() and (tmp_path / "content" / "two").is_dir()
    assert (repo.sections, repo.max_appendable_size, repo.max_flowfiles_per_claim) == (8, 123, 7)
    assert repo.always_sync and not repo.archive_enabled
    assert (repo.archive_max_retention, repo.archive_max_usage_percent) == (60.0, 50.0)
    defaults = FileSystemContentRepository.from_settings(tmp_path / "d", Settings())
    assert (defaults.max_appendable_size, defaults.max_flowfiles_per_claim) == (50 * 1024, 100)
    assert (defaults.archive_max_retention, defaults.archive_max_usage_percent) == (3 * HOUR, 90.0)
    memory = InMemoryContentRepository.from_settings(None, settings)
    assert memory.max_appendable_size == 123 and not memory.archive_enabled


def test_repository_and_errors_pickle(make_repo):
    repo = make_repo(sections=7, max_appendable_size=99)
    (claim,) = _committed_claims(repo, 1)
    copy = pickle.loads(pickle.dumps(repo))
    assert copy.sections == 7 and copy.max_appendable_size == 99
    assert copy.read_bytes(claim) == b"A" * 100
    full = ContentRepositoryFullError.for_container(
        "default", "/data/c", OSError(errno.ENOSPC, "No space left on device"))
    again = pickle.loads(pickle.dumps(full))
    assert str(again) == str(full) and again.errno == errno.ENOSPC and again.path == "/data/c"
    assert "ENOSPC" in str(full) and "/data/c" in str(full) and "free space" in str(full)
    missing = pickle.loads(pickle.dumps(ContentNotFoundError("gone")))
    assert isinstance(missing, ContentRepositoryError) and str(missing) == "gone"


def test_writer_type_and_invalid_options(make_repo):
    assert isinstance(make_repo().writer(), ClaimWriter)
    with pytest.raises(ValueError):
        make_repo(sections=0)
    with pytest.raises(ValueError):
        make_repo(containers=())
    with pytest.raises(ValueError):
        make_repo(archive_max_usage_percent=150)


def test_release_deletes_when_the_archive_directory_cannot_be_created(make_repo, monkeypatch):
    repo = make_repo(max_flowfiles_per_claim=1)
    claims = _committed_claims(repo, 2)

    def no_space(path, exist_ok=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "makedirs", no_space)
    assert repo.release([claims[0].resource]) == 1
    monkeypatch.undo()
    assert not repo.path_of(claims[0].resource).exists()
    assert not repo.archive_path_of(claims[0].resource).exists()
    assert repo.release([claims[1].resource]) == 1  # with room, it is archived as usual
    assert repo.archive_path_of(claims[1].resource).is_file()
