"""A real ENOSPC from the kernel: the container lives on a 1 MiB tmpfs.

As root the test mounts the tmpfs itself (and unmounts it in a finalizer). Without the right to
mount, it runs the same scenario in a child process inside a new user and mount namespace
(``unshare --user --map-root-user --mount``), where an unprivileged user may mount a tmpfs; the
errno still comes from the kernel's tmpfs, nothing is simulated. If neither is possible the test
is skipped with the reason (it is never silently passed).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repositories.content import (
    ContentNotFoundError,
    FileSystemContentRepository,
    ContentRepositoryError,
    ContentRepositoryFullError,
)
from tmpfs import mount_tmpfs, unmount
from flowactors.processors import CompressContent, ReplaceText
from flowactors.testing import ProcessorRunner

SIZE = 1024 * 1024


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def _check_full_error(error: ContentRepositoryFullError, container: Path) -> None:
    assert error.errno == errno.ENOSPC
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.ENOSPC
    assert error.path == str(container) and str(container) in str(error)
    assert "out of disk space" in str(error)
    assert "free space" in str(error) and "add a container" in str(error)


def full_disk_scenario(mount: Path, scratch: Path) -> None:
    """Everything the test checks, given an empty 1 MiB tmpfs at ``mount``."""
    container = mount / "content"
    repo = FileSystemContentRepository(mount, containers=("content",), sections=4)
    empty_free = shutil.disk_usage(mount).free

    # 1. Small contents until the file system is full.
    writer = repo.writer()
    written = []
    with pytest.raises(ContentRepositoryFullError) as caught:
        for _ in range(64):  # 64 x 64 KiB = 4 MiB > 1 MiB
            written.append(writer.write_bytes(os.urandom(64 * 1024)))
    _check_full_error(caught.value, container)
    assert 0 < len(written) <= SIZE // (64 * 1024)
    assert writer.failed
    # No later commit can reference anything this writer wrote.
    with pytest.raises(ContentRepositoryError, match="failed earlier") as later:
        writer.write_bytes(b"x")
    assert not isinstance(later.value, ContentRepositoryFullError)
    with pytest.raises(ContentRepositoryError, match="failed earlier"):
        writer.flush(sync=True)
    with pytest.raises(ContentRepositoryError, match="failed earlier"):
        writer.open_stream()
    writer.discard()
    assert _files_under(container) == []
    for claim in written:
        with pytest.raises(ContentNotFoundError):
            repo.read_bytes(claim)
    assert shutil.disk_usage(mount).free == empty_free  # the space came back

    # 2. One streamed content bigger than the disk.
    writer = repo.writer()
    head = writer.write_bytes(b"head")
    with pytest.raises(ContentRepositoryFullError) as caught:
        with writer.open_stream() as out:
            for _ in range(32):
                out.write(b"s" * (64 * 1024))
    _check_full_error(caught.value, container)
    assert out.closed
    with pytest.raises(ContentRepositoryError):
        out.claim
    with pytest.raises(ContentRepositoryError, match="failed earlier"):
        writer.flush(sync=False)
    writer.discard()
    assert _files_under(container) == []
    with pytest.raises(ContentNotFoundError):
        repo.read_bytes(head)

    # 3. Importing a file bigger than the disk (kernel copy or its fallback).
    source = scratch / "big-source.bin"
    source.write_bytes(os.urandom(2 * SIZE))
    writer = repo.writer()
    with pytest.raises(ContentRepositoryFullError) as caught:
        writer.copy_file(source)
    _check_full_error(caught.value, container)
    writer.discard()
    assert _files_under(container) == []

    # 4. After the rollbacks the repository works again.
    writer = repo.writer()
    claim = writer.write_bytes(b"fits")
    writer.flush(sync=True)
    writer.close()
    assert repo.read_bytes(claim) == b"fits"


class _Lines(logging.Handler):
    """The messages logged while it is attached (the scenarios may run in a child process, where
    pytest's caplog does not reach)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def archive_room_scenario(mount: Path, scratch: Path) -> None:
    """A disk full of archived content makes room for new content; one full of live content
    refuses it naming the disk and its usage (issue 50)."""
    container = mount / "content"
    repo = FileSystemContentRepository(mount, containers=("content",), sections=4,
                                       max_flowfiles_per_claim=1)
    lines = _Lines()
    logging.getLogger("repositories.content.repository").addHandler(lines)
    try:
        # 14 x 64 KiB contents, committed and then released: the archive fills 7/8 of the disk.
        old = []
        for _ in range(14):
            writer = repo.writer()
            old.append(writer.write_bytes(os.urandom(64 * 1024)))
            writer.flush(sync=False)
            writer.close()
        repo.release([claim.resource for claim in old])
        assert repo.usage()["content"]["archive_count"] == 14

        # 1. New content that does not fit beside the archive: the oldest archived claims go.
        writer = repo.writer()
        new = [writer.write_bytes(os.urandom(64 * 1024)) for _ in range(6)]
        writer.flush(sync=False)
        writer.close()
        assert all(len(repo.read_bytes(claim)) == 64 * 1024 for claim in new)
        usage = repo.usage()["content"]
        kept = [repo.archive_path_of(claim.resource).exists() for claim in old]
        deleted = kept.count(False)
        assert kept == [False] * deleted + [True] * (14 - deleted)  # oldest first
        assert deleted == 14 - usage["archive_count"] and 0 < deleted < 14
        # each time, down to the archive's max usage percent (90 %), said in one line
        said = [re.fullmatch(rf"content repository container 'content' at {re.escape(str(container))} was "
                             r"out of disk space: deleted its (\d+) oldest archived claims \((\d+) bytes, "
                             r"archived since [-\d: ]+\) to make room; its file system is now (\S+) % used, "
                             r"(\d+) archived claims left", line) for line in lines.lines]
        assert all(said), lines.lines
        assert sum(int(m[1]) for m in said) == deleted
        assert sum(int(m[2]) for m in said) == deleted * 64 * 1024
        assert all(float(m[3]) <= 90.0 for m in said) and int(said[-1][4]) == 14 - deleted

        # 2. Live content alone fills the disk: the archive is emptied, then the write is refused.
        writer = repo.writer()
        with pytest.raises(ContentRepositoryFullError) as caught:
            for _ in range(20):
                writer.write_bytes(os.urandom(64 * 1024))
        _check_full_error(caught.value, container)
        message = str(caught.value)
        assert "holds no archived content left to delete" in message
        assert re.search(r"its file system is (?:9\d|100)\.\d % used \([\d,]+ of 1,048,576 bytes, [\d,]+ free\)",
                         message), message
        assert repo.usage()["content"]["archive_count"] == 0
        writer.discard()
        assert all(len(repo.read_bytes(claim)) == 64 * 1024 for claim in new)  # live untouched
    finally:
        logging.getLogger("repositories.content.repository").removeHandler(lines)


def _on_a_small_disk(tmp_path: Path, scenario: str) -> None:
    """Run ``scenario`` (a function of this module) on an empty 1 MiB tmpfs: mounted here as root,
    else in a child process in a user and mount namespace of its own; skipped, saying why, when
    neither can mount."""
    mount = tmp_path / "small-fs"
    mount.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if mount_tmpfs(mount, SIZE):
        try:
            assert shutil.disk_usage(mount).total == SIZE
            globals()[scenario](mount, scratch)
        finally:
            unmount(mount)
        return

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("cannot mount a tmpfs (not root) and no unshare(1): ENOSPC not tested")
    child = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        f"import test_content_enospc as t; t.{scenario}(Path(sys.argv[2]), Path(sys.argv[3]))"
    )
    script = (
        f'mount -t tmpfs -o size={SIZE} tmpfs "$1" || exit 77; '
        f'exec "$0" -c "$4" "$2" "$1" "$3"'
    )
    result = subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", script, sys.executable,
         str(mount), str(Path(__file__).parent), str(scratch), child],
        capture_output=True, text=True, timeout=120,
    )
    if result.returncode == 77 or "unshare failed" in result.stderr:
        pytest.skip(f"cannot mount a tmpfs here (no privileges, no user namespaces): "
                    f"{result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_real_enospc_fails_the_writer_and_discard_frees_the_space(tmp_path):
    _on_a_small_disk(tmp_path, "full_disk_scenario")


def _rolls_back_on_a_full_disk(mount: Path, processor, properties: dict) -> None:
    """A processor that writes content rolls back on a full disk: nothing is wrong with the
    FlowFile, so it goes back to its queue rather than to ``failure`` (CompressContent and
    ReplaceText routed it to failure, as for content they could not read)."""
    repo = FileSystemContentRepository(mount, containers=("content",), sections=4)
    filler = repo.writer()  # live content: nothing the archive could give back
    filler.write_bytes(b"f" * (SIZE - 460 * 1024))  # room for the input, not for what is made of it
    filler.flush(sync=False)
    runner = ProcessorRunner(processor, properties, content=repo)
    runner.enqueue(os.urandom(300 * 1024), {"filename": "big.bin"})  # incompressible
    with pytest.raises(ContentRepositoryFullError):
        runner.run()
    assert runner.output("failure") == [] and runner.output("success") == []
    assert runner.input_count == 1  # back in its queue, to be tried again once there is room
    filler.close()


def compress_full_disk_scenario(mount: Path, scratch: Path) -> None:
    _rolls_back_on_a_full_disk(mount, CompressContent, {"Mode": "compress", "Compression Format": "gzip"})


def replace_text_full_disk_scenario(mount: Path, scratch: Path) -> None:
    _rolls_back_on_a_full_disk(mount, ReplaceText, {"Replacement Strategy": "Append", "Evaluation Mode": "Entire text",
                                                    "Replacement Value": "!"})


@pytest.mark.parametrize("scenario", ["compress_full_disk_scenario", "replace_text_full_disk_scenario"])
def test_processors_that_write_roll_back_on_a_full_disk_instead_of_failing_the_flowfile(tmp_path, scenario):
    _on_a_small_disk(tmp_path, scenario)


def test_a_disk_full_of_archive_makes_room_and_one_full_of_live_content_says_so(tmp_path):
    _on_a_small_disk(tmp_path, "archive_room_scenario")
