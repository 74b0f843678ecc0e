"""``flowactors repository salvage``: a FlowFile repository with a damaged LMDB page gives up only
the records on that page; the others go into a new repository, which opens and runs (issue 50).

The repository is a real one (the log, the content repository, queued FlowFiles with content, a
processor's state, a commit still in the journal) and the damage real: a page of data.mdb in the
middle of the FlowFile records is overwritten, as a bad disk block would be.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from pathlib import Path

import lmdb
import pytest

from cli_helpers import run_cli
from flowactors import Flow
from flowactors.driver.running import run_flow
from flowactors.processors import GetFile, PutFile
from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.flowfile import records as rec
from repositories.flowfile.lmdb_walk import DamagedEnvironment
from repositories.model import FlowFile, QueuedFlowFile, StateChange, new_flowfile_uuid, now_millis

QUEUE = "get.success.put"   # the connection of salvaged_flow
COUNT = 3000
PAGE = 4096


def queued_repository(repository: Path) -> list[FlowFile]:
    """COUNT FlowFiles queued with content as a flow leaves them, a processor's state, and the last
    commit (100 removed, 100 new) still in the journal; returns the FlowFiles queued, in order."""
    settings = Settings()
    content = FileSystemContentRepository.from_settings(repository, settings)
    with WriteAheadFlowFileRepository.from_settings(repository, settings) as log:
        first = log.reserve_ids(COUNT + 100)
        now = now_millis()

        def made(i: int, writer) -> FlowFile:
            claim = writer.write_bytes(f"content of file {i}\n".encode() * (1 + i % 3))
            return FlowFile(first + i, new_flowfile_uuid(), {"filename": f"file-{i:04d}.txt", "path": "./"}, claim,
                            now, now, 0, now, i)

        flowfiles = []
        for start in range(0, COUNT, 500):
            writer = content.writer()
            batch = [made(i, writer) for i in range(start, start + 500)]
            writer.flush()
            writer.close()
            log.commit([QueuedFlowFile(f, QUEUE) for f in batch], [], new_claims=writer.created())
            flowfiles += batch
        log.commit([], [], state=StateChange("salvaged/get", {"listed": "up to file-2999"}))
        log.checkpoint()   # the tables hold everything so far
        writer = content.writer()
        late = [made(i, writer) for i in range(COUNT, COUNT + 100)]
        writer.flush()
        writer.close()
        log.commit([QueuedFlowFile(f, QUEUE) for f in late], [f.uuid for f in flowfiles[:100]],
                   new_claims=writer.created())
    compact(repository / "flowfile")
    return flowfiles[100:] + late


def compact(directory: Path) -> None:
    """Replace the log's data.mdb with a compacting copy of it (``mdb_copy -c``, as a backup is
    made): every page in it is in use, so a page found by its bytes is the live one, not an
    older copy LMDB freed."""
    env = lmdb.open(str(directory), readonly=True, lock=False, max_dbs=16)
    try:
        env.copy(str(directory.parent), compact=True)   # writes <repository>/data.mdb
    finally:
        env.close()
    (directory.parent / "data.mdb").replace(directory / "data.mdb")


def damage_the_page_of(data: Path, flowfile: FlowFile) -> set[str]:
    """Overwrite the LMDB page holding ``flowfile``'s record with random bytes; returns the uuids of
    every record on that page (found by their keys, each followed by its record's version byte
    and queue length, as a leaf page of the ``flowfiles`` table lays them out)."""
    raw = data.read_bytes()
    record_start = struct.pack(">BH", rec.RECORD_VERSION, len(QUEUE.encode()))
    at = raw.find(rec.uuid_key(flowfile.uuid) + record_start)
    assert at > 0
    page = raw[at // PAGE * PAGE: (at // PAGE + 1) * PAGE]
    on_page = set()
    for i in range(len(page) - 16):
        if page[i + 16: i + 19] == record_start:
            on_page.add(rec.key_uuid(page[i: i + 16]))
    with open(data, "r+b") as f:
        f.seek(at // PAGE * PAGE)
        f.write(random.Random(50).randbytes(PAGE))
    return on_page


def salvaged_flow(tmp_path: Path) -> Flow:
    (tmp_path / "in").mkdir(exist_ok=True)
    flow = Flow("salvaged")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")}, run_schedule="1 sec")
    put = flow.add(PutFile, "put", properties={"Directory": str(tmp_path / "out")},
                   auto_terminate=["success", "failure"])
    flow.connect(get, put)
    return flow


def test_salvage_keeps_every_record_but_those_on_the_damaged_page_and_the_new_repository_runs(tmp_path, capsys):
    damaged, new = tmp_path / "repository", tmp_path / "salvaged"
    queued = queued_repository(damaged)
    data = damaged / "flowfile" / "data.mdb"
    on_page = damage_the_page_of(data, queued[len(queued) // 2])
    assert 0 < len(on_page) < 100   # a leaf page holds a few dozen records at most
    before = hashlib.sha256(data.read_bytes()).hexdigest()

    status, out, err = run_cli(capsys, "repository", "salvage", "--repository", str(damaged), "--to", str(new),
                               "--json")
    report = json.loads(out)
    assert status == 1, err   # something was lost
    assert set(report["lost"]) == on_page   # exactly the records of the damaged page, each named
    assert all(why == f"in queue {QUEUE}: its record was on a damaged page" for why in report["lost"].values())
    assert report["lost_unnamed"] == 0 and report["journal_lost"] == []
    assert report["kept"] == {QUEUE: len(queued) - len(on_page)}
    assert report["states"] == ["salvaged/get"] and report["states_lost"] == {}
    assert len(report["problems"]) == 1 and report["problems"][0].startswith("flowfiles: the keys after key ")
    assert hashlib.sha256(data.read_bytes()).hexdigest() == before   # the damaged repository is only read

    kept = [f for f in queued if f.uuid not in on_page]
    settings = Settings()
    with WriteAheadFlowFileRepository.from_settings(new, settings) as log:
        assert [f for batch in log.iter_queue(QUEUE) for f in batch] == kept   # each as it was, in FIFO order
        assert log.get_state("salvaged/get").values == {"listed": "up to file-2999"}
    content = FileSystemContentRepository.from_settings(new, settings)
    original = FileSystemContentRepository.from_settings(damaged, settings, create=False)
    assert content.read_many([f.claim for f in kept]) == original.read_many([f.claim for f in kept])

    final = run_flow(salvaged_flow(tmp_path), new, engine="in-process", timeout=120, stall_seconds=30)
    assert not final.get("timed_out") and "stalled" not in final
    delivered = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert delivered == {f.attributes["filename"]: original.read_bytes(f.claim) for f in kept}


def test_salvage_says_what_it_kept_and_lost_in_words(tmp_path, capsys):
    damaged, new = tmp_path / "repository", tmp_path / "salvaged"
    queued = queued_repository(damaged)
    on_page = damage_the_page_of(damaged / "flowfile" / "data.mdb", queued[len(queued) // 2])
    status, out, err = run_cli(capsys, "repository", "salvage", "--repository", str(damaged), "--to", str(new))
    assert status == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == (f"salvaged {damaged} into {new}: kept {len(queued) - len(on_page)} FlowFiles "
                        f"({len(queued) - len(on_page)} in {QUEUE}), 30 content claims, 1 processor states")
    assert lines[1] == f"lost {len(on_page)} FlowFiles:"
    assert lines[2] == f"  {sorted(on_page)[0]}: in queue {QUEUE}: its record was on a damaged page"
    assert lines[-1] == f"run the flow on {new} (--repository {new}); {damaged} is unchanged"


def test_an_intact_repository_is_salvaged_whole(tmp_path, capsys):
    damaged, new = tmp_path / "repository", tmp_path / "salvaged"
    queued = queued_repository(damaged)
    status, out, _ = run_cli(capsys, "repository", "salvage", "--repository", str(damaged), "--to", str(new), "--json")
    assert status == 0
    report = json.loads(out)
    assert report["kept_total"] == len(queued) and report["lost_total"] == 0 and report["problems"] == []


@pytest.mark.parametrize("case", ["missing", "not empty", "itself"])
def test_salvage_refuses_a_folder_it_cannot_use_in_one_line(tmp_path, capsys, case):
    damaged = tmp_path / "repository"
    if case != "missing":
        queued_repository(damaged)
    new = {"missing": tmp_path / "new", "not empty": tmp_path / "full", "itself": damaged}[case]
    if case == "not empty":
        new.mkdir()
        (new / "something").write_text("x")
    status, out, err = run_cli(capsys, "repository", "salvage", "--repository", str(damaged), "--to", str(new))
    assert status == 2 and out == ""
    expected = {"missing": f"no FlowFile repository in {damaged}",
                "not empty": f"{new} is not empty: give a new folder",
                "itself": "--to must be a new folder, not the damaged repository"}[case]
    assert err.startswith(f"flowactors: {expected}") and len(err.splitlines()) == 1


def test_a_page_whose_header_makes_lmdb_abort_costs_only_its_own_records(tmp_path):
    """A zeroed page header trips an assertion in LMDB, which aborts the reading process: the
    walk goes on in another one past the damaged page."""
    damaged = tmp_path / "repository"
    queued = queued_repository(damaged)
    data = damaged / "flowfile" / "data.mdb"
    raw = data.read_bytes()
    at = raw.find(rec.uuid_key(queued[len(queued) // 2].uuid) + struct.pack(">BH", 1, len(QUEUE)))
    with open(data, "r+b") as f:
        f.seek(at // PAGE * PAGE)
        f.write(bytes(16))
    with DamagedEnvironment(damaged / "flowfile") as env:
        keys = [key for key, _ in env.walk(b"flowfiles", 16)]
        problems = env.problems
    assert COUNT - 100 < len(keys) < COUNT
    assert keys == sorted(keys)
    assert len(problems) == 1 and "LMDB aborted reading it" in problems[0]


def test_swapped_out_flowfiles_are_salvaged_into_the_queue_that_swapped_them(tmp_path, capsys):
    damaged, new = tmp_path / "repository", tmp_path / "salvaged"
    queued = queued_repository(damaged)
    with WriteAheadFlowFileRepository.from_settings(damaged, Settings()) as log:
        log.register_swap_file(QUEUE, "swap-1.swap", 500, 0, flowfiles=queued[:500])
        assert log.queue_counts()[QUEUE] == len(queued) - 500
    status, out, _ = run_cli(capsys, "repository", "salvage", "--repository", str(damaged), "--to", str(new), "--json")
    assert status == 0 and json.loads(out)["kept"] == {QUEUE: len(queued)}
    with WriteAheadFlowFileRepository.from_settings(new, Settings()) as log:
        assert log.swap_files() == []
        assert sorted(f.uuid for batch in log.iter_queue(QUEUE) for f in batch) == sorted(f.uuid for f in queued)
