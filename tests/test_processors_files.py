"""ListFile, FetchFile, GetFile and PutFile against real directories in tmp_path."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from flowactors.processors import FetchFile, GetFile, ListFile, PutFile
from flowactors.sdk.session import CommitError
from flowactors.testing import ProcessorRunner
from repositories.model import now_millis
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines


def tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def fail_commits(runner: ProcessorRunner, monkeypatch) -> None:
    def refuse(batch):
        raise CommitError("refused for the test")
    monkeypatch.setattr(runner.backend, "commit", refuse)


# ---------------------------------------------------------------------------------- ListFile
def test_listfile_lists_each_file_once_with_attributes(tmp_path):
    tree(tmp_path, {"a.txt": b"aa", "sub/b.csv": b"bbb", ".hidden": b"h", "sub/.deep/c.txt": b"c"})
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path)})
    runner.run(stop=False)
    out = {f.attributes["filename"]: f for f in runner.output("success")}
    assert set(out) == {"a.txt", "b.csv"}
    a, b = out["a.txt"], out["b.csv"]
    assert a.size == 0 and a.claim is None  # a listing has no content
    assert a.attributes["path"] == "./" and b.attributes["path"] == "sub/"
    assert a.attributes["absolute.path"] == f"{tmp_path}/"
    assert b.attributes["absolute.path"] == f"{tmp_path}/sub/"
    assert b.attributes["file.size"] == "3"
    mtime = os.stat(tmp_path / "sub/b.csv").st_mtime
    assert b.attributes["file.lastModifiedTime"] == time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(mtime))
    assert b.attributes["file.permissions"] == stat.filemode(os.stat(tmp_path / "sub/b.csv").st_mode)[1:]
    assert b.attributes["file.owner"] and b.attributes["file.group"]
    assert {e.event_type for e in runner.events()} == {T.CREATE}

    runner.run(stop=False)  # nothing new
    assert len(runner.output("success")) == 2
    assert runner.context._yield_requested

    (tmp_path / "new.txt").write_bytes(b"n")
    earlier = time.time() - 100
    os.utime(tmp_path / "a.txt", (earlier, earlier))  # modified (another time): listed again
    runner.run()
    names = sorted(f.attributes["filename"] for f in runner.output("success"))
    assert names == ["a.txt", "a.txt", "b.csv", "new.txt"]


def test_listfile_filters(tmp_path):
    tree(tmp_path, {"keep.csv": b"1", "skip.txt": b"2", "x/keep2.csv": b"3", "y/keep3.csv": b"4",
                    ".dot.csv": b"5", "big.csv": b"0123456789"})
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "File Filter": r".*\.csv",
                                        "Path Filter": "x", "Maximum File Size": "5 B",
                                        "Ignore Hidden Files": False})
    runner.run()
    assert sorted(f.attributes["filename"] for f in runner.output("success")) == [".dot.csv", "keep.csv", "keep2.csv"]

    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "Recurse Subdirectories": False,
                                        "Minimum File Size": "2 B"})
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("success")] == ["big.csv"]


def test_listfile_minimum_age_waits_for_files_to_settle(tmp_path):
    tree(tmp_path, {"old.txt": b"o", "fresh.txt": b"f"})
    past = time.time() - 3600
    os.utime(tmp_path / "old.txt", (past, past))
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "Minimum File Age": "10 min"})
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("success")] == ["old.txt"]
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "Maximum File Age": "10 min"})
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("success")] == ["fresh.txt"]


def test_listfile_remembers_only_what_was_committed(tmp_path, monkeypatch):
    tree(tmp_path, {"a.txt": b"a"})
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path)})
    real_commit = runner.backend.commit
    fail_commits(runner, monkeypatch)
    with pytest.raises(CommitError):
        runner.run(stop=False)
    monkeypatch.setattr(runner.backend, "commit", real_commit)
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("success")] == ["a.txt"]


# ---------------------------------------------------------------------------------- FetchFile
def test_listfile_then_fetchfile_with_default_path(tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 7)
    tree(tmp_path, {"d/big.bin": data})
    lister = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path)})
    lister.run()
    [listing] = lister.output("success")
    fetcher = ProcessorRunner(FetchFile)
    fetcher.enqueue(b"", dict(listing.attributes))
    fetcher.run()
    [fetched] = fetcher.output("success")
    assert fetcher.read(fetched) == data
    assert fetched.attributes["filename"] == "big.bin"
    fetch = [e for e in fetcher.events() if e.event_type == T.FETCH]
    assert len(fetch) == 1
    assert fetch[0].transit_uri == (tmp_path / "d/big.bin").as_uri()
    assert fetch[0].flowfile_uuid == fetched.uuid and fetch[0].updated_size == len(data)
    assert (tmp_path / "d/big.bin").exists()  # Completion Strategy None


def test_fetchfile_not_found_permission_denied_and_failure(tmp_path, monkeypatch):
    tree(tmp_path, {"secret": b"s", "dir/x": b"x"})
    runner = ProcessorRunner(FetchFile, {"File to Fetch": "${path.to}"}, penalty_duration=0)
    runner.enqueue(b"", {"path.to": str(tmp_path / "missing")})
    runner.enqueue(b"", {"path.to": str(tmp_path / "secret")})
    runner.enqueue(b"", {"path.to": str(tmp_path / "dir")})
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda p, mode, **kw: not str(p).endswith("secret") and real_access(p, mode, **kw))
    runner.run()
    assert [f.attributes["path.to"] for f in runner.output("not.found")] == [str(tmp_path / "missing")]
    assert [f.attributes["path.to"] for f in runner.output("permission.denied")] == [str(tmp_path / "secret")]
    assert [f.attributes["path.to"] for f in runner.output("failure")] == [str(tmp_path / "dir")]
    for rel in ("not.found", "permission.denied", "failure"):
        assert all(f.penalized_until > 0 for f in runner.output(rel))
    assert runner.output("success") == []
    assert not [e for e in runner.events() if e.event_type == T.FETCH]


def test_fetchfile_permission_error_while_reading(tmp_path, monkeypatch):
    tree(tmp_path, {"f": b"data"})
    runner = ProcessorRunner(FetchFile, {"File to Fetch": str(tmp_path / "f")}, penalty_duration=0)
    runner.enqueue(b"")
    import flowactors.sdk.session as session_module

    def denied(self, path, flowfile):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(session_module.ProcessSession, "import_from", denied)
    runner.run()
    assert len(runner.output("permission.denied")) == 1


def test_fetchfile_delete_happens_only_after_commit(tmp_path, monkeypatch):
    tree(tmp_path, {"a": b"1", "b": b"2"})
    runner = ProcessorRunner(FetchFile, {"File to Fetch": f"{tmp_path}/${{filename}}",
                                         "Completion Strategy": "Delete File"})
    runner.enqueue(b"", {"filename": "a"})
    real_commit = runner.backend.commit
    fail_commits(runner, monkeypatch)
    with pytest.raises(CommitError):
        runner.run()
    assert (tmp_path / "a").exists()  # the commit failed: the file stays
    assert runner.input_count == 1
    monkeypatch.setattr(runner.backend, "commit", real_commit)
    runner.enqueue(b"", {"filename": "b"})
    runner.run()
    assert sorted(runner.contents("success")) == [b"1", b"2"]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ---------------------------------------------------------------------------------- GetFile
def test_getfile_takes_files_deletes_after_commit_and_emits_receive(tmp_path):
    inbox = tmp_path / "in"
    tree(inbox, {"a.txt": b"alpha", "s/b.txt": b"beta", "skip.tmp": b"x"})
    runner = ProcessorRunner(GetFile, {"Input Directory": str(inbox), "File Filter": r".*\.txt"})
    runner.run()
    out = {f.attributes["filename"]: f for f in runner.output("success")}
    assert set(out) == {"a.txt", "b.txt"}
    assert runner.read(out["a.txt"]) == b"alpha" and runner.read(out["b.txt"]) == b"beta"
    assert out["b.txt"].attributes["path"] == "s/"
    assert out["b.txt"].attributes["absolute.path"] == f"{inbox}/s/"
    assert not (inbox / "a.txt").exists() and not (inbox / "s/b.txt").exists()
    assert (inbox / "skip.tmp").exists()
    receive = [e for e in runner.events() if e.event_type == T.RECEIVE]
    assert sorted(e.transit_uri for e in receive) == sorted([(inbox / "a.txt").as_uri(), (inbox / "s/b.txt").as_uri()])
    assert not [e for e in runner.events() if e.event_type == T.CREATE]


def test_getfile_leaves_a_file_whose_name_is_not_utf8_and_takes_the_others(tmp_path, caplog):
    """Issue 14: one such name made every commit fail, so not one file of the batch was taken."""
    tree(tmp_path, {f"good{i}.txt": b"g" for i in range(4)})
    bad = os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")  # Latin-1, not UTF-8
    with open(bad, "wb") as f:
        f.write(b"latin")
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Batch Size": 10})
    runner.run()
    assert sorted(f.attributes["filename"] for f in runner.output("success")) == [f"good{i}.txt" for i in range(4)]
    assert os.listdir(os.fsencode(tmp_path)) == [b"caf\xe9.txt"]  # left where it was
    assert any("is not valid UTF-8" in r.getMessage() and "caf\\xe9.txt" in r.getMessage() for r in caplog.records)


def test_getfile_batch_size_and_keep_source(tmp_path):
    tree(tmp_path, {f"f{i}": b"%d" % i for i in range(5)})
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Batch Size": "2",
                                       "Keep Source File": True})
    runner.run()
    assert len(runner.output("success")) == 2
    assert len(os.listdir(tmp_path)) == 5
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Batch Size": "2"})
    runner.run(3)
    assert sorted(runner.contents("success")) == [b"0", b"1", b"2", b"3", b"4"]
    assert os.listdir(tmp_path) == []


def test_getfile_one_listing_serves_many_batches(tmp_path):
    """A listing is used up batch by batch (not walked again per batch), skipping files gone
    meanwhile; files that appear later are taken once it is used up."""
    tree(tmp_path, {f"f{i}": b"%d" % i for i in range(5)})
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Batch Size": "2"})
    runner.run(1, stop=False)
    assert len(runner.output("success")) == 2
    taken = {f.attributes["filename"] for f in runner.output("success")}
    left = sorted(set(os.listdir(tmp_path)) - taken)
    (tmp_path / left[0]).unlink()  # listed, then gone: skipped without error
    tree(tmp_path, {"later": b"L"})
    os.utime(tmp_path / "later", (time.time() - 3600, time.time() - 3600))  # older than all, listed later
    runner.run(1, stop=False)
    second = {f.attributes["filename"] for f in runner.output("success")} - taken
    assert second == set(left[1:])  # the rest of the first listing, not the new file yet
    runner.run(2)
    assert sorted(runner.contents("success")) == sorted([b"L"] + [b"%d" % i for i in range(5)
                                                                   if f"f{i}" != left[0]])
    assert os.listdir(tmp_path) == []


def test_getfile_filters(tmp_path):
    tree(tmp_path, {"top.txt": b"1", "sub/deep.txt": b"2", ".hidden": b"3", "big.txt": b"0123456789"})
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Recurse Subdirectories": False,
                                       "Ignore Hidden Files": False, "File Filter": ".*", "Maximum File Size": "5 B",
                                       "Path Filter": "nothing"})
    runner.run()
    assert sorted(runner.contents("success")) == [b"1", b"3"]
    assert (tmp_path / "sub/deep.txt").exists() and (tmp_path / "big.txt").exists()


def test_getfile_keeps_the_file_when_the_commit_fails(tmp_path, monkeypatch):
    tree(tmp_path, {"a": b"1"})
    runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path)})
    fail_commits(runner, monkeypatch)
    with pytest.raises(CommitError):
        runner.run()
    assert (tmp_path / "a").read_bytes() == b"1"


def test_getfile_tasks_share_files_without_overlap(tmp_path):
    tree(tmp_path, {f"f{i}": b"x" for i in range(20)})
    seen = []
    for instance in range(2):
        runner = ProcessorRunner(GetFile, {"Input Directory": str(tmp_path), "Batch Size": "100",
                                           "Keep Source File": True})
        runner.context.concurrent_tasks, runner.context.instance = 2, instance
        runner.run()
        seen.append({f.attributes["filename"] for f in runner.output("success")})
    assert not seen[0] & seen[1]
    assert len(seen[0] | seen[1]) == 20


# ---------------------------------------------------------------------------------- PutFile
def put(tmp_path, files: list[tuple[str, bytes]], **properties) -> ProcessorRunner:
    # penalty 0: the harness's output() does not show FlowFiles still penalized
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path / "out"), **properties}, penalty_duration=0)
    for name, data in files:
        runner.enqueue(data, {"filename": name})
    runner.run()
    return runner


def test_putfile_writes_files_and_sends(tmp_path):
    data = os.urandom(2 * 1024 * 1024 + 1)
    runner = put(tmp_path, [("a.bin", data), ("sub/dir/b.txt", b"b")])
    out = tmp_path / "out"
    assert (out / "a.bin").read_bytes() == data
    assert (out / "sub/dir/b.txt").read_bytes() == b"b"
    assert len(runner.output("success")) == 2
    assert sorted(os.listdir(out)) == ["a.bin", "sub"]  # no temporary file left
    sends = [e for e in runner.events() if e.event_type == T.SEND]
    assert sorted(e.transit_uri for e in sends) == sorted([(out / "a.bin").as_uri(), (out / "sub/dir/b.txt").as_uri()])


def test_putfile_directory_expression_and_permissions(tmp_path):
    runner = ProcessorRunner(PutFile, {"Directory": f"{tmp_path}/${{team}}", "Permissions": "rw-r-----"})
    runner.enqueue(b"x", {"filename": "f", "team": "blue"})
    runner.run()
    assert (tmp_path / "blue/f").read_bytes() == b"x"
    assert (tmp_path / "blue/f").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("strategy,content,relationship", [
    ("replace", b"new", "success"), ("ignore", b"old", "success"), ("fail", b"old", "failure"),
])
def test_putfile_conflict_resolution(tmp_path, strategy, content, relationship):
    tree(tmp_path / "out", {"f": b"old"})
    runner = put(tmp_path, [("f", b"new")], **{"Conflict Resolution Strategy": strategy})
    assert (tmp_path / "out/f").read_bytes() == content
    assert len(runner.output(relationship)) == 1
    assert os.listdir(tmp_path / "out") == ["f"]
    sends = [e for e in runner.events() if e.event_type == T.SEND]
    assert len(sends) == (1 if strategy == "replace" else 0)
    if relationship == "failure":
        [failed] = runner.output("failure")
        assert "exists" in failed.attributes[PutFile.REASON]
        assert failed.penalized_until > 0


def test_putfile_missing_directory_without_create(tmp_path):
    runner = put(tmp_path, [("f", b"1"), ("a/g", b"2")], **{"Create Missing Directories": False})
    assert len(runner.output("failure")) == 2
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    runner = put(tmp_path, [("f", b"1"), ("a/g", b"2")], **{"Create Missing Directories": False})
    assert (tmp_path / "out/f").read_bytes() == b"1"
    [failed] = runner.output("failure")
    assert failed.attributes["filename"] == "a/g" and "does not exist" in failed.attributes[PutFile.REASON]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
            for p in root.rglob("*")}


@pytest.mark.parametrize("filename,reason", [
    ("../x", "'..'"),
    ("../../x", "'..'"),
    ("a/../../x", "'..'"),
    ("a/../b", "'..'"),
    ("/abs/x", "absolute"),
    ("", "no filename"),
    ("./", "names no file"),
    ("ok\x00.txt", "NUL"),
])
def test_putfile_refuses_names_that_leave_the_directory(tmp_path, filename, reason):
    (tmp_path / "out").mkdir()
    (tmp_path / "abs").mkdir()
    before = snapshot(tmp_path)
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path / "out"), "Conflict Resolution Strategy": "replace"},
                             penalty_duration=0)
    runner.enqueue(b"evil", {"filename": filename})
    runner.run()
    [failed] = runner.output("failure")
    assert reason in failed.attributes[PutFile.REASON]
    assert snapshot(tmp_path) == before  # nothing written anywhere
    assert not os.path.exists("/abs/x")
    assert not [e for e in runner.events() if e.event_type == T.SEND]


def test_putfile_refuses_symlinks_that_escape(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    (out / "escape").symlink_to(outside)                    # a directory link leading out
    (out / "victim").symlink_to(outside / "victim")         # a file link leading out
    (out / "inner").mkdir()
    (out / "alias").symlink_to(out / "inner")               # a link that stays inside: allowed
    before = snapshot(outside)
    runner = ProcessorRunner(PutFile, {"Directory": str(out), "Conflict Resolution Strategy": "replace"},
                             penalty_duration=0)
    for name in ("escape/new", "escape/victim", "victim", "alias/ok"):
        runner.enqueue(b"evil" if name != "alias/ok" else b"fine", {"filename": name})
    runner.run()
    failed = {f.attributes["filename"]: f.attributes[PutFile.REASON] for f in runner.output("failure")}
    assert set(failed) == {"escape/new", "escape/victim", "victim"}
    assert all("symbolic link" in reason and "outside" in reason for reason in failed.values())
    assert snapshot(outside) == before
    assert (outside / "victim").read_bytes() == b"precious"
    assert [f.attributes["filename"] for f in runner.output("success")] == ["alias/ok"]
    assert (out / "inner/ok").read_bytes() == b"fine"


def test_putfile_file_that_is_a_directory_fails(tmp_path):
    (tmp_path / "out/f").mkdir(parents=True)
    runner = put(tmp_path, [("f", b"1")], **{"Conflict Resolution Strategy": "replace"})
    [failed] = runner.output("failure")
    assert "is a directory" in failed.attributes[PutFile.REASON]


def test_putfile_failures_are_penalized(tmp_path):
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path)})  # default 30 s penalty
    runner.enqueue(b"x", {"filename": "../x"})
    runner.run()
    [failed] = runner.queues["failure"].listing(10)
    assert failed.penalized_until > now_millis() + 20_000
    assert not (tmp_path.parent / "x").exists()


def test_putfile_unreadable_content_fails_and_leaves_no_file(tmp_path):
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path)}, penalty_duration=0)
    runner.lose_content(runner.enqueue(b"abc", {"filename": "f"}))
    runner.run()
    [failed] = runner.output("failure")
    assert "gone" in failed.attributes[PutFile.REASON]
    assert os.listdir(tmp_path) == []  # the temporary file is removed too


def test_fetchfile_an_io_error_while_reading_goes_to_failure_penalized():
    """/proc/self/mem is a readable regular file whose read at offset 0 fails with EIO: a real I/O
    error in the middle of the import, not one of the checks before it."""
    runner = ProcessorRunner(FetchFile, {"File to Fetch": "${absolute.path}"})
    flowfile = runner.enqueue(b"", {"absolute.path": "/proc/self/mem"})
    runner.run()
    [failed] = runner.output("failure")
    assert failed.uuid == flowfile.uuid and failed.penalized_until > now_millis()
    assert runner.output("success") == [] and failed.size == 0


def test_listfile_tracking_timestamps_keeps_a_small_state(tmp_path):
    tree(tmp_path, {"a.txt": b"a", "b.txt": b"b"})
    same = time.time() - 50
    for name in ("a.txt", "b.txt"):
        os.utime(tmp_path / name, (same, same))
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "Listing Strategy": "Tracking Timestamps"})
    runner.run(stop=False)
    assert sorted(f.attributes["filename"] for f in runner.output("success")) == ["a.txt", "b.txt"]
    state = runner.context.state.get()
    assert set(state.values) == {ListFile.TIMESTAMP, ListFile.IDS}  # not a key a file
    assert int(state.values[ListFile.TIMESTAMP]) == os.stat(tmp_path / "a.txt").st_mtime_ns

    tree(tmp_path, {"c.txt": b"c", "old.txt": b"o"})
    os.utime(tmp_path / "c.txt", (same, same))  # at the newest time listed, not listed yet: listed
    os.utime(tmp_path / "old.txt", (same - 100, same - 100))  # older than the newest listed: not (the caveat)
    runner.run(stop=False)
    assert sorted(f.attributes["filename"] for f in runner.output("success")) == ["a.txt", "b.txt", "c.txt"]
    (tmp_path / "a.txt").write_bytes(b"changed")  # modified now: newer, listed again
    runner.run(stop=False)
    runner.run()  # nothing new
    assert sorted(f.attributes["filename"] for f in runner.output("success")) == ["a.txt", "a.txt", "b.txt", "c.txt"]


def test_listfile_past_the_states_size_says_which_strategy_to_use(tmp_path, monkeypatch):
    from repositories.flowfile import records

    tree(tmp_path, {f"file-{i:03d}.txt": b"x" for i in range(40)})
    monkeypatch.setattr(records, "MAX_STATE_BYTES", 1000)
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path)})
    with pytest.raises(ValueError, match="too many files for Listing Strategy 'Tracking Entities'; set it to "
                                         "'Tracking Timestamps'"):
        runner.run()
    assert runner.output("success") == []  # nothing listed, nothing remembered
    monkeypatch.undo()
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path), "Listing Strategy": "Tracking Timestamps"})
    runner.run()
    assert len(runner.output("success")) == 40


def test_listfile_tracking_entities_costs_a_path_and_about_30_bytes_a_file(tmp_path):
    """What docs/processors.md says the state grows by (so what the 4 MiB limit means in files)."""
    from repositories.flowfile.records import encode_state

    tree(tmp_path, {f"order-{i:06d}.csv": b"x" * (i * 37 % 5000) for i in range(200)})
    runner = ProcessorRunner(ListFile, {"Input Directory": str(tmp_path)})
    runner.run()
    state = runner.context.state.get()
    paths = [p for p in state.values if p.startswith("/")]
    assert len(paths) == 200
    per_file = (len(encode_state(state.version, state.values)) - 60) / 200  # less the header and the timestamp
    assert 25 <= per_file - sum(map(len, paths)) / 200 <= 32
