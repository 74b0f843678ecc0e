"""Every read-only command works on a read-only repository and changes nothing (issue 19).

A small flow runs in-process and stops with FlowFiles queued, processor state stored and provenance
merged; events registered afterwards stay in journals, unmerged, as after a stop that did not roll
over. Then the repository is made read-only (``chmod -R a-w``) and each read-only command runs:
as root, which ignores file modes, so the real assertion is a snapshot of every name, byte, mode
and mtime under the folder taken before and compared after; and as ``nobody``, for whom the modes
hold, in a child process.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from flowactors import Flow, Processor, PropertyDescriptor, Relationship
from flowactors.driver.running import queue_totals, run_flow
from flowactors.ops.queue_admin import stopped_status
from flowactors.ops.state_admin import list_states
from flowactors.processors import GenerateFlowFile, ListFile
from repositories.flowfile import RepositoryCorruptError, UnsupportedFormatVersionError, WriteAheadFlowFileRepository
from repositories.lock import RepositoryInUseError, RepositoryLock
from repositories.model import FlowFile, QueuedFlowFile, now_millis
from repositories.provenance import ProvenanceEvent, ProvenanceEventType, ProvenanceFormatError, WriteAheadProvenanceRepository
from repositories.provenance.repository import ProvenanceReadOnlyError
from tests.cli_helpers import run_cli
from tmpfs import mount_tmpfs, unmount

REPO_ROOT = Path(__file__).resolve().parents[1]
JOURNAL_ONLY = "journal-only"   # the component name of the events that live only in journals


class Closed(Processor):
    """Takes nothing: what reaches it waits in its queue (the queue list has something to show)."""

    relationships = [Relationship("success")]
    properties = [PropertyDescriptor("Note", default="closed")]

    def on_trigger(self, context, session):
        context.yield_()


class Broken(Processor):
    """Fails each time it runs: the error log has something to show."""

    input_required = False
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        raise RuntimeError("broken on purpose")


def held_flow(source: Path) -> Flow:
    flow = Flow("ro", settings={"archive_max_usage_percent": 100.0})
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(source)})
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": "hello", "Max FlowFiles": 2, "filename": "hello.txt"})
    closed = flow.add(Closed, "closed", auto_terminate=["success"])
    flow.add(Broken, "broken", auto_terminate=["success"], run_schedule="1 sec")
    flow.connect(listing, closed, name="listed")
    flow.connect(generate, closed, name="generated")
    return flow


def snapshot(root: Path) -> dict[str, tuple]:
    """Every name under ``root`` with its type, mode, size, mtime and (files) a hash of its bytes."""
    out = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else None
        out[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_size,
                                            info.st_mtime_ns, digest)
    return out


def chmod_tree(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A stopped flow's repository, read-only, in a folder ``nobody`` may read: (repository, facts)."""
    base = Path(tempfile.mkdtemp(prefix="flowactors-readonly-test-"))
    base.chmod(0o755)
    try:
        source, repository = base / "in", base / "repository"
        source.mkdir()
        for name in ("a.txt", "b.txt", "c.txt"):
            (source / name).write_text(name)
        final = run_flow(held_flow(source), repository, engine="in-process", timeout=60,
                         until=lambda status: queue_totals(status)["listed"]["count"] == 3
                         and queue_totals(status)["generated"]["count"] == 2
                         and any(p["errors"] for p in status["processors"]))
        assert not final.get("timed_out")
        provenance = WriteAheadProvenanceRepository(repository / "provenance")
        merged_ids = {e.event_id for e in provenance.search(limit=None)}
        assert provenance.stats()["journal_files"] == 0 and merged_ids   # the stop merged the flow's events
        journal_only = [ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=now_millis(),
                                        flowfile_uuid=f"00000000-0000-4000-8000-00000000000{i}",
                                        component_id="ro/journal", component_name=JOURNAL_ONLY,
                                        updated_attributes={"filename": f"late-{i}.txt"}) for i in range(3)]
        provenance.register(journal_only)
        provenance.close()   # no rollover: the journals stay unmerged
        journals = sorted((repository / "provenance" / "default" / "journals").iterdir())
        assert journals
        for path in [base, *base.rglob("*")]:
            path.chmod(stat.S_IMODE(path.lstat().st_mode) | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
        chmod_tree(repository, writable=False)
        yield repository, {"merged_ids": merged_ids, "journal_only": journal_only, "journals": journals}
        chmod_tree(repository, writable=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_every_read_only_command_reads_a_read_only_repository_and_changes_nothing(stopped, capsys):
    repository, facts = stopped
    before = snapshot(repository)
    at = ["--repository", str(repository)]

    status, out, err = run_cli(capsys, "provenance", "search", *at, "--json")
    assert status == 0, err
    found = {e["event_id"]: e for e in json.loads(out)}
    late = {e.event_id for e in facts["journal_only"]}
    assert set(found) == facts["merged_ids"] | late   # the journal-only events too, and nothing twice
    assert {found[i]["component_name"] for i in late} == {JOURNAL_ONLY}

    status, out, err = run_cli(capsys, "provenance", "search", *at, "--component", JOURNAL_ONLY)
    assert status == 0, err
    assert out.splitlines()[-1] == "3 event(s), newest first"

    newest = max(late)
    status, out, err = run_cli(capsys, "provenance", "show", str(newest), *at)
    assert status == 0, err
    assert out.startswith(f"event {newest}: CREATE") and JOURNAL_ONLY in out

    generated = next(e for e in found.values() if e["component_name"] == "generate")
    status, out, err = run_cli(capsys, "provenance", "show", str(generated["event_id"]), *at, "--content", "output")
    assert (status, out) == (0, "hello"), err

    status, out, err = run_cli(capsys, "lineage", generated["flowfile_uuid"], *at)
    assert status == 0, err
    assert generated["flowfile_uuid"] in out
    status, out, err = run_cli(capsys, "lineage", facts["journal_only"][0].flowfile_uuid, *at)
    assert status == 0, err
    assert facts["journal_only"][0].flowfile_uuid in out

    status, out, err = run_cli(capsys, "queue", "list", "listed", *at, "--json")
    assert status == 0, err
    assert sorted(row["filename"] for row in json.loads(out)) == ["a.txt", "b.txt", "c.txt"]
    status, out, err = run_cli(capsys, "queue", "list", "generated", *at)
    assert status == 0, err
    assert out.startswith("queue 'generated': first 2 FlowFile(s)")

    status, out, err = run_cli(capsys, "state", "list", *at, "--json")
    assert status == 0, err
    listed = json.loads(out)["ro/list"]["values"]
    assert {str(Path(p).name) for p in listed if p.endswith(".txt")} == {"a.txt", "b.txt", "c.txt"}

    status, out, err = run_cli(capsys, "status", *at, "--json")
    assert status == 0, err
    assert json.loads(out) == {"repository": str(repository), "queued": {"listed": 3, "generated": 2},
                               "swap_files": [], "damaged": None}

    status, out, err = run_cli(capsys, "errors", *at, "--json")
    assert status == 0, err
    assert {(e["processor"], e["error"]) for e in json.loads(out)} == {("broken", "RuntimeError: broken on purpose")}

    assert snapshot(repository) == before
    assert sorted((repository / "provenance" / "default" / "journals").iterdir()) == facts["journals"]


def test_two_readers_share_the_repository_and_a_running_flow_is_refused_clearly(stopped):
    repository, _ = stopped
    with RepositoryLock(repository, "flowactors provenance search", shared=True):
        assert stopped_status(repository)["queued"] == {"listed": 3, "generated": 2}   # readers share it
    with RepositoryLock(repository, "flow 'ro'"):   # a running flow holds it exclusively (root: modes ignored)
        with pytest.raises(RepositoryInUseError, match=r"in use by flow 'ro' \(pid .*reads a stopped repository "
                                                       r"only: stop that first"):
            list_states(repository)


@pytest.mark.parametrize("former_holder", ["ended", "alive"])
def test_a_flow_refused_by_a_reader_is_told_a_command_reads_it(tmp_path, former_holder):
    if former_holder == "ended":   # the file names a flow that has ended
        subprocess.run([sys.executable, "-c", "import sys; from repositories.lock import RepositoryLock; "
                        "RepositoryLock(sys.argv[1], \"flow 'x'\").acquire()", str(tmp_path)], check=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    else:   # the file names this process, alive, which let go of it
        RepositoryLock(tmp_path, "flow 'x'").acquire().release()
    with RepositoryLock(tmp_path, "flowactors state list", shared=True):
        with pytest.raises(RepositoryInUseError, match="in use by a command reading it"):
            RepositoryLock(tmp_path, "flow 'y'").acquire()


def test_a_writer_refused_by_a_writer_is_told_which(tmp_path):
    with RepositoryLock(tmp_path, "flow 'x'"):
        with pytest.raises(RepositoryInUseError, match=rf"in use by flow 'x' \(pid {os.getpid()} .*flowactors "
                                                       r"queue empty needs it to itself"):
            RepositoryLock(tmp_path, "flowactors queue empty").acquire()


def test_a_reader_of_a_folder_without_the_lock_file_still_keeps_a_flow_out(tmp_path):
    with RepositoryLock(tmp_path, "flowactors status", shared=True):
        assert (tmp_path / "repository.lock").read_bytes() == b""   # created, written by nobody
        with pytest.raises(RepositoryInUseError, match="in use by a command reading it"):
            RepositoryLock(tmp_path, "flow 'y'").acquire()
    RepositoryLock(tmp_path, "flow 'y'").acquire().release()


def unprivileged_user() -> str | None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        return pwd.getpwnam("nobody").pw_name
    except KeyError:
        return None


@pytest.mark.skipif(unprivileged_user() is None, reason="needs root, setpriv and a 'nobody' user")
def test_the_commands_work_for_a_user_who_cannot_write_the_repository(stopped):
    repository, facts = stopped
    before = snapshot(repository)
    script = (
        "import json, sys\n"
        "from flowactors.cli.main import main\n"
        "r = sys.argv[1]\n"
        "codes = [main(['provenance', 'search', '--repository', r, '--component', sys.argv[2]]),\n"
        "         main(['queue', 'list', 'listed', '--repository', r]), main(['state', 'list', '--repository', r]),\n"
        "         main(['status', '--repository', r]), main(['errors', '--repository', r, '--last', '1'])]\n"
        "print(json.dumps({'codes': codes}))\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT), "HOME": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                           script, str(repository), JOURNAL_ONLY], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["codes"] == [0, 0, 0, 0, 0], done.stdout
    assert "3 event(s), newest first" in done.stdout
    assert f"repository {repository}: 5 FlowFiles queued\n  generated: 2\n  listed: 3\n" in done.stdout
    assert "broken: on_trigger\nRuntimeError: broken on purpose" in done.stdout
    assert snapshot(repository) == before


@pytest.mark.skipif(unprivileged_user() is None, reason="needs root, setpriv and a 'nobody' user")
def test_a_read_only_folder_without_the_lock_file_is_read_without_a_lock_and_unchanged():
    folder = Path(tempfile.mkdtemp(prefix="flowactors-readonly-test-"))
    try:
        folder.chmod(0o555)   # read-only for nobody (root ignores modes and would create the file)
        before = snapshot(folder)
        script = ("import sys\n"
                  "from repositories.lock import RepositoryLock\n"
                  "lock = RepositoryLock(sys.argv[1], 'flowactors status', shared=True).acquire()\n"
                  "print(lock.held)\n")
        done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-c", script, str(folder)], capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT),
                                   "PYTHONDONTWRITEBYTECODE": "1"})
        assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
        assert snapshot(folder) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- the repositories themselves


def log_with_unapplied_commits(path: Path) -> None:
    """A log whose last commits are only in its journal: the process died before applying them."""
    script = ("import os, sys\n"
              "from repositories.flowfile import WriteAheadFlowFileRepository\n"
              "from repositories.model import FlowFile, QueuedFlowFile\n"
              "wal = WriteAheadFlowFileRepository(sys.argv[1])\n"
              "first = wal.reserve_ids(5)\n"
              "wal.commit([QueuedFlowFile(FlowFile(first + i, f'00000000-0000-4000-8000-{i:012d}', {}, None, 1, 1,"
              " queue_date=1, queue_index=i), 'q') for i in range(5)], [])\n"
              "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                   timeout=60)


def test_a_log_with_unapplied_commits_is_read_from_a_private_copy(tmp_path):
    path = tmp_path / "flowfile"
    log_with_unapplied_commits(path)
    before = snapshot(path)
    wal = WriteAheadFlowFileRepository(path, readonly=True)
    try:
        assert wal.queue_counts() == {"q": 5}
        assert [f.uuid[-1] for batch in wal.iter_queue("q") for f in batch] == list("01234")
        with pytest.raises(Exception, match="open read-only .*private copy.*needs write access"):
            wal.commit([], [f"00000000-0000-4000-8000-{0:012d}"])
    finally:
        wal.close()
    assert snapshot(path) == before
    assert not list(Path(tempfile.gettempdir()).glob("flowactors-readonly-log-*"))   # the copy is gone
    with WriteAheadFlowFileRepository(path, create=False) as writable:   # the log itself still holds them
        assert writable.queue_counts() == {"q": 5}


def test_status_is_not_told_damaged_when_the_private_copy_finds_no_room(tmp_path, monkeypatch, capsys):
    repository, small = tmp_path / "repository", tmp_path / "small-tmp"
    log_with_unapplied_commits(repository / "flowfile")   # read only from a private copy
    small.mkdir()
    if not mount_tmpfs(small, 4096):
        pytest.skip("needs root and mount for a file system that fills up")
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(small))   # where the private copy goes
        status, out, err = run_cli(capsys, "status", "--repository", str(repository))
        assert (status, out) == (1, ""), out   # the command ends; nothing says the log is DAMAGED
        assert "private copy, which could not be made" in err and "No space left on device" in err
    finally:
        unmount(small)


def test_a_read_only_log_refuses_writes_and_writes_no_lock_file(tmp_path):
    path = tmp_path / "flowfile"
    with WriteAheadFlowFileRepository(path) as wal:
        flowfile = FlowFile(wal.reserve_ids(1), "00000000-0000-4000-8000-000000000001", {}, None, 1, 1)
        wal.commit([QueuedFlowFile(flowfile, "q")], [])
    (path / "lock.mdb").unlink()
    before = snapshot(path)
    with WriteAheadFlowFileRepository(path, readonly=True) as wal:
        assert wal.queue_counts() == {"q": 1}
        for write in (lambda: wal.reserve_ids(1), wal.checkpoint, wal.begin_run):
            with pytest.raises(Exception, match="is open read-only: .* needs write access"):
                write()
    assert snapshot(path) == before and not (path / "lock.mdb").exists()


def test_a_damaged_or_unsupported_log_gives_its_error_read_only(tmp_path):
    path = tmp_path / "flowfile"
    with WriteAheadFlowFileRepository(path):
        pass
    data = path / "data.mdb"
    good = data.read_bytes()
    data.write_bytes(b"")
    with pytest.raises(RepositoryCorruptError, match="is empty"):
        WriteAheadFlowFileRepository(path, readonly=True)
    import lmdb   # a newer format version than this release reads
    data.write_bytes(good)
    with lmdb.open(str(path), max_dbs=16) as env:
        with env.begin(write=True) as txn:
            txn.put(b"format_version", bytes((9,)), db=env.open_db(b"meta", txn=txn))
    before = snapshot(path)
    with pytest.raises(UnsupportedFormatVersionError):
        WriteAheadFlowFileRepository(path, readonly=True)
    assert snapshot(path) == before
    with pytest.raises(Exception, match="does not exist"):
        WriteAheadFlowFileRepository(tmp_path / "nowhere", readonly=True)
    assert not (tmp_path / "nowhere").exists()


def provenance_with_journals(root: Path) -> list[ProvenanceEvent]:
    """Events merged into an event file, then more left in journals (no rollover), as after kill -9."""
    repo = WriteAheadProvenanceRepository(root)
    made = []
    for name in ("merged", JOURNAL_ONLY):
        events = [ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=now_millis(),
                                  flowfile_uuid=f"{name}-{i}", component_id="c", component_name=name)
                  for i in range(5)]
        repo.register(events)
        made += events
        if name == "merged":
            repo.rollover()
    repo.close()
    return made


def test_read_only_provenance_searches_the_journals_where_they_lie(tmp_path):
    root = tmp_path / "provenance"
    made = provenance_with_journals(root)
    journal = next((root / "default" / "journals").iterdir())
    with open(journal, "ab") as torn:   # a torn tail: cut by a writable open, stepped over here
        torn.write(b"\x07" * 5)
    before = snapshot(root)
    with WriteAheadProvenanceRepository(root, readonly=True) as repo:
        assert [e.event_id for e in repo.search(limit=None)] == [e.event_id for e in reversed(made)]
        assert [e.flowfile_uuid for e in repo.search(component_name=JOURNAL_ONLY)] == [
            f"{JOURNAL_ONLY}-{i}" for i in reversed(range(5))]
        assert repo.get(made[-1].event_id).flowfile_uuid == f"{JOURNAL_ONLY}-4"
        assert [e.event_id for e in repo.events(0, 100)] == [e.event_id for e in made]
        assert repo.recovery["events_recovered"] == 5 and "stepped over (read-only)" in repo.recovery["problems"][0]
        with pytest.raises(ProvenanceReadOnlyError):
            repo.register(made[:1])
        with pytest.raises(ProvenanceReadOnlyError):
            repo.rollover()
    assert snapshot(root) == before
    with WriteAheadProvenanceRepository(root) as writable:   # a writable open still recovers and merges them
        assert writable.recovery["events_recovered"] == 5 and writable.stats()["journal_files"] == 0


def test_read_only_provenance_with_a_lost_index_or_unknown_journal_says_so(tmp_path):
    root = tmp_path / "provenance"
    provenance_with_journals(root)
    shutil.rmtree(root / "index")
    with pytest.raises(ProvenanceFormatError, match="not in the index .*flowactors provenance repair"):
        WriteAheadProvenanceRepository(root, readonly=True)
    assert not (root / "index").exists()
    journal = next((root / "default" / "journals").iterdir())
    journal.write_bytes(b"NOTAJRNL" + journal.read_bytes()[8:])
    with pytest.raises(ProvenanceFormatError, match="not a provenance journal"):
        WriteAheadProvenanceRepository(root, readonly=True)
    with pytest.raises(FileNotFoundError, match="no provenance repository"):
        WriteAheadProvenanceRepository(tmp_path / "nowhere", readonly=True)
    assert not (tmp_path / "nowhere").exists()
