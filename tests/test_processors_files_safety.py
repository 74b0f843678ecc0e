"""The file processors against what users did to break them (issue 50): files listed while still
being written, a PutFile retried after its commit failed, a file name that is not UTF-8, and a
Directory or File to Fetch built from attributes that leads out of a base directory. Real files
in tmp_path, on the in-process runner."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from flowactors.processors import FetchFile, GetFile, ListFile, PutFile
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T


def warnings_about(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and text in r.getMessage()]


# ---------------------------------------------------------------------------------- files still being written
def append_and_list(runner: ProcessorRunner, path: Path, lines: int) -> None:
    """Append ``lines`` lines to ``path``, one at a time, the processor triggered after each."""
    with open(path, "a") as f:
        for i in range(lines):
            f.write(f"line {i}\n")
            f.flush()
            runner.run(stop=False)


def test_listfile_says_once_that_it_listed_a_file_still_being_written(tmp_path, caplog):
    """NiFi's default Minimum File Age (0 sec) is kept: a file being appended to is listed as it
    is, again after each change, and the run's log says so once, with what to do."""
    source = tmp_path / "in"
    source.mkdir()
    runner = ProcessorRunner(ListFile, {"Input Directory": str(source)})
    append_and_list(runner, source / "app.log", 20)
    sizes = [int(f.attributes["file.size"]) for f in runner.output("success")]
    assert len(sizes) == 20 and sizes == sorted(sizes)  # every version, as NiFi lists them
    [warning] = warnings_about(caplog, "modified")
    assert str(source / "app.log") in warning and "'Minimum File Age'" in warning and "ListFile" in warning


def test_listfile_with_a_minimum_age_lists_a_file_being_appended_to_once_whole(tmp_path, caplog):
    source = tmp_path / "in"
    source.mkdir()
    runner = ProcessorRunner(ListFile, {"Input Directory": str(source), "Minimum File Age": "300 ms"})
    append_and_list(runner, source / "app.log", 20)
    assert runner.output("success") == []  # never quiet long enough
    deadline = time.monotonic() + 10
    while not runner.output("success") and time.monotonic() < deadline:  # until it has settled
        runner.run(stop=False)
    [listed] = runner.output("success")
    fetcher = ProcessorRunner(FetchFile)
    fetcher.enqueue(b"", dict(listed.attributes))
    fetcher.run()
    [fetched] = fetcher.output("success")
    assert fetcher.read(fetched) == "".join(f"line {i}\n" for i in range(20)).encode()
    assert warnings_about(caplog, "modified") == []  # the user chose how long to wait


def test_getfile_says_once_that_it_took_a_file_just_written(tmp_path, caplog):
    source = tmp_path / "in"
    source.mkdir()
    runner = ProcessorRunner(GetFile, {"Input Directory": str(source)})
    append_and_list(runner, source / "app.log", 3)
    # as NiFi: taken with its first line and deleted; the writer's next lines went to the deleted file
    assert runner.contents("success") == [b"line 0\n"] and list(source.iterdir()) == []
    [warning] = warnings_about(caplog, "modified")
    assert "GetFile" in warning and "'Minimum File Age'" in warning and "lost" in warning
    caplog.clear()
    runner = ProcessorRunner(GetFile, {"Input Directory": str(source), "Minimum File Age": "0 sec"})
    append_and_list(runner, source / "other.log", 2)
    assert warnings_about(caplog, "modified") == []  # set explicitly, even to NiFi's default: no warning


# ---------------------------------------------------------------------------------- names not UTF-8
@pytest.mark.parametrize("processor", [ListFile, GetFile])
def test_a_name_that_is_not_utf8_is_warned_about_once_per_file_and_run(tmp_path, caplog, processor):
    def bad_file(name: bytes) -> None:
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
            f.write(b"latin")

    bad_file(b"caf\xe9.txt")
    runner = ProcessorRunner(processor, {"Input Directory": str(tmp_path)})
    runner.run(3, stop=False)
    assert len(warnings_about(caplog, "not valid UTF-8")) == 1
    bad_file(b"na\xefve.txt")
    runner.run(3, stop=False)
    messages = warnings_about(caplog, "not valid UTF-8")
    assert len(messages) == 2 and "na\\xefve.txt" in messages[1]
    runner.run()  # the run ends; the next says it again
    runner.run(stop=False)
    assert len(warnings_about(caplog, "not valid UTF-8")) == 4


# ---------------------------------------------------------------------------------- PutFile retried
def sends(runner: ProcessorRunner) -> list:
    return [e for e in runner.events() if e.event_type == T.SEND]


def test_putfile_retried_after_its_commit_failed_is_not_a_conflict(tmp_path):
    """The file was written, the session rolled back (a commit that failed, a process killed):
    the retry finds its own bytes there and succeeds, with the SEND the rollback lost."""
    data = os.urandom(3 * 1024 * 1024 + 5)
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path)}, penalty_duration=0)
    flowfile = runner.enqueue(data, {"filename": "f.bin"})
    session = runner.new_session()
    runner.processor.on_trigger(runner.context, session)
    session.rollback()
    assert (tmp_path / "f.bin").read_bytes() == data and runner.input_count == 1 and sends(runner) == []
    runner.run()
    assert runner.output("failure") == []
    [placed] = runner.output("success")
    assert placed.uuid == flowfile.uuid and PutFile.REASON not in placed.attributes
    assert (tmp_path / "f.bin").read_bytes() == data and os.listdir(tmp_path) == ["f.bin"]
    assert [e.flowfile_uuid for e in sends(runner)] == [flowfile.uuid]


@pytest.mark.parametrize("existing,relationship", [
    (b"same bytes", "success"),        # what this FlowFile's write would leave there
    (b"same bytez", "failure"),        # as long, other bytes: a conflict
    (b"same bytes, longer", "failure"),
    (b"", "failure"),
])
def test_putfile_fail_strategy_counts_only_identical_content_as_written(tmp_path, existing, relationship):
    (tmp_path / "f").write_bytes(existing)
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path)}, penalty_duration=0)
    runner.enqueue(b"same bytes", {"filename": "f"})
    runner.run()
    assert len(runner.output(relationship)) == 1
    assert (tmp_path / "f").read_bytes() == existing and os.listdir(tmp_path) == ["f"]
    assert len(sends(runner)) == (1 if relationship == "success" else 0)


def test_putfile_an_existing_fifo_is_a_conflict_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "f")
    runner = ProcessorRunner(PutFile, {"Directory": str(tmp_path)}, penalty_duration=0)
    runner.enqueue(b"x", {"filename": "f"})
    runner.run()
    [failed] = runner.output("failure")
    assert "exists" in failed.attributes[PutFile.REASON]


# ---------------------------------------------------------------------------------- Base Directory
def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def tenants(tmp_path):
    """base/ holds the tenants' folders; outside/ is another's; base/a/escape links out of base."""
    base, outside = tmp_path / "base", tmp_path / "outside"
    (base / "a").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    (base / "a" / "escape").symlink_to(outside)
    (base / "b").mkdir()
    (base / "a" / "to-b").symlink_to(base / "b")  # a link that stays under base: allowed
    return base, outside


@pytest.mark.parametrize("subdir,resolved", [
    ("../outside", "outside"),
    ("a/../../outside", "outside"),
    ("../x", "x"),
    ("a/escape", "outside"),
    ("a/escape/deeper", "outside/deeper"),
])
def test_putfile_base_directory_refuses_a_directory_that_leads_out_of_it(tenants, subdir, resolved):
    base, outside = tenants
    before = snapshot(base.parent)
    runner = ProcessorRunner(PutFile, {"Directory": f"{base}/${{subdir}}", "Base Directory": str(base),
                                       "Conflict Resolution Strategy": "replace"}, penalty_duration=0)
    runner.enqueue(b"evil", {"filename": "victim", "subdir": subdir})
    runner.run()
    [failed] = runner.output("failure")
    reason = failed.attributes[PutFile.REASON]
    assert f"{base}/{subdir}" in reason and str(base.parent / resolved) in reason and f"'{base}'" in reason
    assert "Base Directory" in reason
    assert snapshot(base.parent) == before and failed.penalized_until > 0 and sends(runner) == []


def test_putfile_base_directory_refuses_an_absolute_directory_elsewhere(tenants):
    base, outside = tenants
    runner = ProcessorRunner(PutFile, {"Directory": "${dir}", "Base Directory": str(base)}, penalty_duration=0)
    runner.enqueue(b"evil", {"filename": "new", "dir": str(outside)})
    runner.run()
    [failed] = runner.output("failure")
    assert str(outside) in failed.attributes[PutFile.REASON]
    assert sorted(os.listdir(outside)) == ["victim"]


def test_putfile_base_directory_writes_under_it(tenants):
    base, outside = tenants
    runner = ProcessorRunner(PutFile, {"Directory": f"{base}/${{subdir}}", "Base Directory": str(base)},
                             penalty_duration=0)
    placed = {"a": "a/1", "a/new/deep": "a/new/deep/2", "a/../b": "b/3", "a/to-b": "b/4", "": "5"}
    for subdir, where in placed.items():
        runner.enqueue(subdir.encode(), {"filename": where.rpartition("/")[2], "subdir": subdir})
    runner.run()
    assert runner.output("failure") == [] and len(runner.output("success")) == len(placed)
    assert {where: (base / where).read_bytes() for where in placed.values()} == {
        where: subdir.encode() for subdir, where in placed.items()}


def test_putfile_without_base_directory_writes_where_directory_leads_as_nifi(tenants):
    base, outside = tenants
    runner = ProcessorRunner(PutFile, {"Directory": f"{base}/${{subdir}}"}, penalty_duration=0)
    runner.enqueue(b"nifi", {"filename": "new", "subdir": "../outside"})
    runner.run()
    assert (outside / "new").read_bytes() == b"nifi"


@pytest.mark.parametrize("name,resolved", [
    ("../outside/victim", "outside/victim"),
    ("a/escape/victim", "outside/victim"),
])
def test_fetchfile_base_directory_refuses_a_file_out_of_it(tenants, caplog, name, resolved):
    base, outside = tenants
    runner = ProcessorRunner(FetchFile, {"File to Fetch": f"{base}/${{name}}", "Base Directory": str(base)},
                             penalty_duration=0)
    runner.enqueue(b"", {"name": name})
    runner.run()
    [failed] = runner.output("failure")
    assert failed.size == 0 and failed.penalized_until > 0
    [warning] = warnings_about(caplog, "Base Directory")
    assert f"{base}/{name}" in warning and str(base.parent / resolved) in warning and f"'{base}'" in warning
    assert not [e for e in runner.events() if e.event_type == T.FETCH]


def test_fetchfile_base_directory_reads_under_it(tenants):
    base, outside = tenants
    (base / "b" / "data").write_bytes(b"tenant b")
    (base / "a" / "data-link").symlink_to(base / "b" / "data")
    runner = ProcessorRunner(FetchFile, {"File to Fetch": f"{base}/${{name}}", "Base Directory": str(base)},
                             penalty_duration=0)
    for name in ("b/data", "a/to-b/data", "a/data-link", "a/../b/data", "b/missing", "b"):
        runner.enqueue(b"", {"name": name})
    runner.run()
    assert runner.contents("success") == [b"tenant b"] * 4
    assert [f.attributes["name"] for f in runner.output("not.found")] == ["b/missing"]
    assert [f.attributes["name"] for f in runner.output("failure")] == ["b"]
    fetches = [e for e in runner.events() if e.event_type == T.FETCH]
    assert len(fetches) == 4


def test_fetchfile_base_directory_deletes_beneath_it_after_the_commit(tenants):
    base, outside = tenants
    (base / "b" / "data").write_bytes(b"tenant b")
    (base / "b" / "other").write_bytes(b"other")
    (base / "a" / "data-link").symlink_to(base / "b" / "other")
    runner = ProcessorRunner(FetchFile, {"File to Fetch": f"{base}/${{name}}", "Base Directory": str(base),
                                         "Completion Strategy": "Delete File"})
    for name in ("a/to-b/data", "a/data-link"):
        runner.enqueue(b"", {"name": name})
    runner.run()
    assert sorted(runner.contents("success")) == [b"other", b"tenant b"]
    assert not (base / "b" / "data").exists()
    assert not (base / "a" / "data-link").is_symlink() and (base / "b" / "other").exists()  # the link, as os.unlink
    assert (outside / "victim").read_bytes() == b"precious"
