"""The content repository inside flows: release after checkpoint, archive, disk flood, 2 GB, ENOSPC."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import ray.cloudpickle

from flowactors.engine.controller import FlowController
from flowactors import Flow, Processor, Relationship
from flowactors.processors import GenerateFlowFile, PutFile
from flowactors.driver.running import processor_totals, run_flow
from flowactors.engine.transport import call_now
from flowactors.testing import ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from tmpfs import mount_tmpfs, unmount

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Drop(Processor):
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            session.remove(flowfile)


def durable_runner(tmp_path, processor=Drop, **options):
    content = FileSystemContentRepository(tmp_path / "content", **options)
    wal = WriteAheadFlowFileRepository(tmp_path / "flowfile")
    return ProcessorRunner(processor, content=content, flowfile_repository=wal), content, wal


def test_claim_is_released_only_after_a_checkpoint_and_stays_readable_in_the_archive(tmp_path):
    runner, content, wal = durable_runner(tmp_path)
    try:
        flowfile = runner.enqueue(b"remember me", {"filename": "a.txt"})
        resource = flowfile.claim.resource
        runner.run()
        assert runner.flowfile_repository.queue_counts().get("input", 0) == 0
        assert wal.claimant_count(resource) == 0
        assert content.path_of(resource).exists(), "released before any checkpoint"
        released = wal.checkpoint()
        assert released == [resource]
        assert content.release(released) == 1
        assert not content.path_of(resource).exists() and content.archive_path_of(resource).exists()
        assert content.read_bytes(flowfile.claim) == b"remember me"  # provenance can still show it
        assert wal.checkpoint() == []  # released once, never twice
    finally:
        wal.close()


def test_without_archive_a_released_claim_is_deleted(tmp_path):
    runner, content, wal = durable_runner(tmp_path, archive_enabled=False)
    try:
        flowfile = runner.enqueue(b"forget me")
        runner.run()
        content.release(wal.checkpoint())
        assert not content.path_of(flowfile.claim.resource).exists()
        assert not content.archive_path_of(flowfile.claim.resource).exists()
    finally:
        wal.close()


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


class TwoWay(Processor):
    relationships = [Relationship("success"), Relationship("other")]


def _flood(root: Path, max_appendable: int, rounds: int = 30) -> tuple[int, int]:
    """Seed 003's disk flood; returns (bytes on disk, live bytes).

    Each round a session writes 99 contents of 1,000 bytes and then one 1-byte FlowFile, which
    lands in the same resource claim; the 99 are merged into one (copied) and dropped, the tiny
    one is kept alive. The tiny survivors pin their shared claims, so the disk holds about
    rounds x (bytes that share a claim with a survivor), bounded by the max appendable size.
    """
    runner, content, wal = durable_runner(root, TwoWay, max_appendable_size=max_appendable,
                                          archive_enabled=False)
    live = 0
    try:
        for _ in range(rounds):
            session = runner.new_session()
            bigs = [session.write_bytes(session.create(), b"x" * 1000) for _ in range(99)]
            keeper = session.write_bytes(session.create(), b"k")
            merged = session.merge(bigs)
            for flowfile in (*bigs, merged):
                session.remove(flowfile)
            session.transfer(keeper, "other")
            session.commit()
            live += keeper.size
            content.release(wal.checkpoint())
        return _disk_bytes(root / "content"), live
    finally:
        wal.close()


def test_disk_flood_is_bounded_by_the_max_appendable_claim_size(tmp_path):
    rounds = 30
    small_disk, live = _flood(tmp_path / "50KB", 50 * 1024, rounds)
    large_disk, _ = _flood(tmp_path / "1MB", 1024 * 1024, rounds)
    print(f"live {live} B; on disk with 50 KB claims {small_disk} B ({small_disk / live:.0f}x live), "
          f"with 1 MB claims {large_disk} B ({large_disk / live:.0f}x live)")
    block = 4096  # the file system rounds every claim file up to whole blocks
    assert small_disk <= rounds * (50 * 1024 + 1000 + block)
    assert large_disk >= rounds * 99 * 1000  # the survivor pins every byte written before it
    assert small_disk < large_disk / 1.5


COPY_ON_WRITE_2GB = textwrap.dedent('''
    import resource, sys
    from pathlib import Path
    from flowactors import Processor, Relationship
    from flowactors.testing import ProcessorRunner
    from repositories.content import FileSystemContentRepository
    from repositories.flowfile import WriteAheadFlowFileRepository

    class Invert(Processor):
        """Copy-on-write: streams the content through, 1 MiB at a time, into a new claim."""
        relationships = [Relationship("success")]
        def on_trigger(self, context, session):
            def invert(src, out):
                while chunk := src.read(1 << 20):
                    out.write(chunk.translate(bytes(range(255, -1, -1))))
            for flowfile in session.get_batch():
                session.transfer(session.rewrite(flowfile, invert), "success")

    root = Path(sys.argv[1])
    size = int(sys.argv[2])
    source = root / "source.bin"
    with open(source, "wb") as f:
        block = bytes(range(256)) * 4096
        for _ in range(size // len(block)):
            f.write(block)
    runner = ProcessorRunner(Invert, content=FileSystemContentRepository(root / "content"),
                             flowfile_repository=WriteAheadFlowFileRepository(root / "flowfile"))
    session = runner.new_session()
    imported = session.import_from(source, session.create())
    session.transfer(imported, "success")
    session.commit()
    source.unlink()
    moved, _ = runner.queues["success"].poll(1)
    runner.queues["input"].offer(moved)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runner.run()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (out,) = runner.output("success")
    with runner.content.open(out.claim) as stream:
        first = stream.read(256)
        stream.seek(out.size - 256)
        last = stream.read(256)
    assert out.size == size and out.claim != imported.claim
    assert first == last == bytes(range(255, -1, -1))
    print(f"{(after - before) / 1024:.1f}")
''')


def test_two_gigabyte_flowfile_through_a_copy_on_write_processor(tmp_path):
    size = 2 * 1024**3
    result = subprocess.run([sys.executable, "-c", COPY_ON_WRITE_2GB, str(tmp_path), str(size)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr[-3000:]
    growth_mb = float(result.stdout.strip().splitlines()[-1])
    assert growth_mb < 100, f"peak RSS grew by {growth_mb} MB"


@pytest.mark.ray
def test_full_disk_rolls_back_shows_in_status_and_resumes_when_space_returns(ray_session, tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if not mount_tmpfs(mount, 4 * 1024 * 1024):
        pytest.skip("needs root to mount a small tmpfs for a real ENOSPC")
    try:
        filler = mount / "filler"
        filler.write_bytes(b"\0" * (3 * 1024 * 1024 + 700 * 1024))
        out = tmp_path / "out"
        flow = Flow("full-disk", settings={"content_containers": [str(mount / "content")],
                                           "administrative_yield": 0.2, "checkpoint_interval": 0.5})
        generate = flow.add(GenerateFlowFile, "generate", properties={
            "File Size": "1 KB", "Unique FlowFiles": "true", "Batch Size": 50, "Max FlowFiles": 1000})
        put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success", "failure"])
        flow.connect(generate, put)

        def free_space_later(controller):
            import threading, time

            def free():
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    status = call_now(controller, FlowController.status)
                    errors = [e for p in status["processors"] for e in p["recent_errors"]]
                    if any("ContentRepositoryFullError" in e["error"] for e in errors):
                        seen.extend(errors)
                        break
                    time.sleep(0.2)
                filler.unlink()
            threading.Thread(target=free, daemon=True).start()

        seen: list[dict] = []
        final = run_flow(flow, tmp_path / "repository", timeout=180, on_started=free_space_later)
        assert seen, "the flow never hit the full disk"
        assert "no space" in seen[0]["error"].lower() or "full" in seen[0]["error"].lower()
        totals = processor_totals(final)
        assert totals["generate"]["errors"] >= 1
        assert totals["generate"]["flowfiles_out"] == 1000 and totals["put"]["flowfiles_in"] == 1000
        files = list(out.iterdir())
        assert len(files) == 1000 and all(f.stat().st_size == 1024 for f in files)
    finally:
        unmount(mount)
