"""Provenance crash recovery: torn journals, a merge stopped at every step, SIGKILL of a process.

After every crash and reopen: each registered event is there exactly once (by id, by search and
in id order), nothing partial is left on disk, and ids continue after the largest one found.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from repositories.provenance import ProvenanceEvent, ProvenanceEventType, WriteAheadProvenanceRepository
from repositories.provenance.event import event_to_dict
from repositories.provenance.journal import FRAME_SIZE, HEADER_SIZE
from repositories.provenance.merge import MERGE_STEPS

T = ProvenanceEventType
BASE_MS = 1_700_000_000_000
ROOT = Path(__file__).resolve().parents[1]


def make(n: int, start: int = 0) -> list[ProvenanceEvent]:
    return [ProvenanceEvent(event_type=(T.CREATE, T.ROUTE, T.DROP)[i % 3], flowfile_uuid=f"ff-{i // 3}",
                            timestamp=BASE_MS + i, component_id=f"c-{i % 4}", component_name="P",
                            relationship="success" if i % 3 == 1 else None,
                            updated_attributes={"filename": f"f{i // 3}"}, updated_size=i)
            for i in range(start, start + n)]


def open_repo(root: Path, **kw) -> WriteAheadProvenanceRepository:
    kw.setdefault("journal_count", 3)
    kw.setdefault("block_size", 1024)
    kw.setdefault("index_chunk", 15)
    return WriteAheadProvenanceRepository(root, **kw)


def assert_complete(root: Path, count: int, originals: list[ProvenanceEvent] | None = None) -> WriteAheadProvenanceRepository:
    """Reopen and check: ids 0..count-1 exactly once everywhere, nothing partial left, ids go on."""
    repo = open_repo(root)
    events = repo.events(0, count + 100)
    assert [e.event_id for e in events] == list(range(count))
    if originals is not None:
        assert [event_to_dict(e) for e in events] == [event_to_dict(e) for e in originals[:count]]
    assert [e.event_id for e in repo.search(limit=None)] == list(range(count - 1, -1, -1))
    by_component = [e.event_id for e in repo.search(component_id="c-1", limit=None)]
    assert by_component == [i for i in range(count - 1, -1, -1) if i % 4 == 1]
    assert [e.event_id for e in repo.search(flowfile_uuid="ff-2")] == [i for i in (8, 7, 6) if i < count]
    assert all(repo.get(i).event_id == i for i in (0, count // 2, count - 1))
    container = root / "default"
    assert not [p for p in container.iterdir() if p.name.endswith((".part", ".tmp"))]
    assert sorted(p.name[:-4] for p in container.glob("*.toc")) == sorted(p.name[:-5] for p in container.glob("*.prov"))
    assert list((container / "journals").iterdir()) == []
    assert repo.stats()["index_lag"] == 0
    assert repo.register(make(1, count)) == (count, count)
    return repo


class Crash(Exception):
    pass


CRASH_POINTS = [(step, 1) for step in MERGE_STEPS] + [("merge-indexed-chunk", 3), ("merge-journal-deleted", 2)]


@pytest.mark.parametrize("step,occurrence", CRASH_POINTS, ids=lambda v: str(v))
def test_crash_at_each_merge_step_then_reopen(tmp_path, step, occurrence):
    armed = {"on": False, "seen": 0}

    def hook(name):
        if armed["on"] and name == step:
            armed["seen"] += 1
            if armed["seen"] == occurrence:
                raise Crash(name)

    events = make(100)
    repo = open_repo(tmp_path / "p", fault_hook=hook)
    for i in range(0, 40, 7):
        repo.register(events[i:min(i + 7, 40)])
    repo.rollover()                                   # a committed file before the crash
    for i in range(40, 100, 7):
        repo.register(events[i:min(i + 7, 100)])
    armed["on"] = True
    with pytest.raises(Crash):
        repo.rollover()
    repo.close()                                      # only closes handles: the state is as a crash left it
    repo = assert_complete(tmp_path / "p", 100, events)
    committed_before = step in ("merge-committed", "merge-journal-deleted")
    assert repo.recovery["journals_merged"] == (0 if committed_before else 3)
    if step in ("merge-indexed-chunk", "merge-written", "merge-toc-renamed"):
        assert repo.recovery["partial_index_entries_removed"] > 0
        assert repo.recovery["partial_files_removed"] == [40]
    repo.close()


@pytest.mark.parametrize("step", ["merge-started", "merge-indexed-chunk", "merge-toc-renamed",
                                  "merge-committed", "merge-journal-deleted"])
def test_failed_rollover_is_redone_by_the_next_one_in_the_same_process(tmp_path, step):
    failures = {"left": 1}

    def hook(name):
        if name == step and failures["left"]:
            failures["left"] -= 1
            raise OSError(28, "No space left on device (simulated)")

    events = make(60)
    repo = open_repo(tmp_path / "p", fault_hook=hook)
    repo.register(events[:50])
    with pytest.raises(OSError):
        repo.rollover()
    assert [e.event_id for e in repo.search(component_id="c-1", limit=None)] == [i for i in range(49, -1, -1) if i % 4 == 1]
    assert [e.event_id for e in repo.events(0, 100)] == list(range(50))
    repo.register(events[50:])
    result = repo.rollover()          # merges the failed generation (again) and the new one
    if step == "merge-journal-deleted":                 # the failed merge had committed
        assert (result["first_id"], result["last_id"]) == (50, 59)
    else:
        assert (result["first_id"], result["last_id"], result["events"]) == (0, 59, 60)
    assert [e.event_id for e in repo.search(limit=None)] == list(range(59, -1, -1))
    repo.close()
    assert_complete(tmp_path / "p", 60, events).close()


def test_torn_journal_tail_is_cut_not_fatal(tmp_path):
    events = make(30)
    repo = open_repo(tmp_path / "p", journal_count=1)
    repo.register(events[:10])
    repo.register(events[10:20])
    repo.register(events[20:30])
    repo.close()
    journal = tmp_path / "p" / "default" / "journals" / "0-0.journal"
    size = journal.stat().st_size
    os.truncate(journal, size - 25)                     # the last record is torn mid-payload
    repo = open_repo(tmp_path / "p")
    assert repo.recovery["torn_bytes_cut"] > 0 and "0-0.journal" in repo.recovery["problems"][0]
    repo.close()
    assert_complete(tmp_path / "p", 20, events).close()  # the torn commit is gone as a whole


@pytest.mark.parametrize("damage", ["garbage-tail", "bad-checksum", "torn-frame-header", "torn-file-header"])
def test_journal_damage_variants(tmp_path, damage):
    events = make(20)
    repo = open_repo(tmp_path / "p", journal_count=1)
    repo.register(events[:10])
    repo.register(events[10:20])
    repo.close()
    journal = tmp_path / "p" / "default" / "journals" / "0-0.journal"
    data = bytearray(journal.read_bytes())
    first_record_end = HEADER_SIZE + FRAME_SIZE + int.from_bytes(data[HEADER_SIZE:HEADER_SIZE + 4], "little")
    keep = 20
    if damage == "garbage-tail":
        data += b"\x07" * 100
    elif damage == "bad-checksum":
        data[first_record_end + FRAME_SIZE + 20] ^= 0x01      # second record's payload
        keep = 10
    elif damage == "torn-frame-header":
        data = data[:first_record_end + 5]
        keep = 10
    else:
        data = data[:HEADER_SIZE - 3]
        keep = 0
    journal.write_bytes(bytes(data))
    if keep:
        assert_complete(tmp_path / "p", keep, events).close()
    else:
        repo = open_repo(tmp_path / "p")
        assert repo.events(0, 10) == [] and repo.register(make(1)) == (0, 0)
        repo.close()


# ---------------------------------------------------------------- SIGKILL of a real process

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from repositories.provenance import ProvenanceEvent, WriteAheadProvenanceRepository

    root, mode = sys.argv[1], sys.argv[2]

    def hook(step):
        if step == "merge-indexed-chunk" and mode in ("merge", "recover"):
            print("IN-MERGE", flush=True)
            time.sleep(60)

    def make(start, n):
        return [ProvenanceEvent(event_type=("CREATE", "ROUTE", "DROP")[i % 3], flowfile_uuid=f"ff-{i // 3}",
                                timestamp=1_700_000_000_000 + i, component_id=f"c-{i % 4}", component_name="P",
                                relationship="success" if i % 3 == 1 else None,
                                updated_attributes={"filename": f"f{i // 3}"}, updated_size=i)
                for i in range(start, start + n)]

    repo = WriteAheadProvenanceRepository(root, journal_count=3, block_size=1024, index_chunk=15, fault_hook=hook)
    print("OPEN", flush=True)
    n = repo.stats()["next_event_id"]
    while True:
        first, last = repo.register(make(n, 10))
        n = last + 1
        print(f"REGISTERED {last}", flush=True)
        if mode == "merge" and n >= 300:
            repo.rollover()
        if mode == "register" and n % 200 == 0:
            repo.rollover()
    """
)


def run_child(root: Path, mode: str, until: str, script: Path) -> tuple[int, list[str]]:
    """Start the child, SIGKILL it once a line starting with ``until`` appears; returns the last id."""
    proc = subprocess.Popen([sys.executable, str(script), str(root), mode, str(ROOT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 30
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith(until):
                break
            assert time.monotonic() < deadline, "child never reached " + until
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    registered = [int(line.split()[1]) for line in lines if line.startswith("REGISTERED")]
    return (registered[-1] if registered else -1), lines


def test_sigkill_mid_rollover_then_mid_recovery(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "p"
    last, _ = run_child(root, "merge", "IN-MERGE", script)       # killed inside the merge
    assert last == 299
    assert any(p.name.endswith(".part") for p in (root / "default").iterdir())
    last_again, lines = run_child(root, "recover", "IN-MERGE", script)   # killed inside recovery's redo
    assert "OPEN" not in lines
    assert_complete(root, 300).close()


def test_sigkill_while_registering(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "p"
    last, _ = run_child(root, "register", "REGISTERED 1509", script)
    repo = open_repo(root)
    count = repo.stats()["next_event_id"]
    repo.close()
    assert count >= last + 1                     # every register that returned survived
    assert count % 10 == 0                       # and a commit's events come back all or nothing
    assert_complete(root, count).close()


def _journal_records(path: Path):
    from repositories.provenance.journal import scan_journal

    return scan_journal(path).records


def test_a_truncated_journal_is_named_and_the_events_it_lost_are_counted(tmp_path, caplog):
    """Issue 14 point 5: 350 of 3,200 events went with no word. Now the journal is named in a
    warning and the lost events are counted (ids missing between the readable records)."""
    repo = open_repo(tmp_path / "p", journal_count=4)
    for start in range(0, 3200, 10):
        repo.register(make(10, start))
    repo.close()
    journals = tmp_path / "p" / "default" / "journals"
    damaged = sorted(journals.iterdir())[1]
    records = _journal_records(damaged)
    cut = damaged.stat().st_size // 2
    os.truncate(damaged, cut)
    lost = [r for r in records if r.offset + FRAME_SIZE + r.length > cut]
    readable_max = max(r.last_id for p in journals.iterdir() for r in _journal_records(p))
    assert lost and all(r.last_id < readable_max for r in lost)  # so each lost id is a gap
    expected = sum(r.count for r in lost)
    with caplog.at_level("WARNING"):
        repo = open_repo(tmp_path / "p")
    try:
        assert repo.recovery["events_lost"] == expected
        assert len(repo.events(0, 4000)) == 3200 - expected
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert any(w.startswith(f"provenance: damaged journal: {damaged}: ") for w in warnings), warnings
        assert any(f"{expected} provenance events" in w and "could not be read" in w for w in warnings), warnings
    finally:
        repo.close()


def test_damage_inside_a_journal_costs_only_the_damaged_record(tmp_path, caplog):
    repo = open_repo(tmp_path / "p", journal_count=1)
    for start in range(0, 300, 10):
        repo.register(make(10, start))
    repo.close()
    journal = tmp_path / "p" / "default" / "journals" / "0-0.journal"
    records = _journal_records(journal)
    victim = records[12]
    with open(journal, "r+b") as f:  # garble the middle of one record's payload
        f.seek(victim.offset + FRAME_SIZE + victim.length // 2)
        f.write(b"\xff" * 16)
    with caplog.at_level("WARNING"):
        repo = open_repo(tmp_path / "p")
    try:
        ids = [e.event_id for e in repo.events(0, 400)]
        assert ids == [i for i in range(300) if not victim.first_id <= i <= victim.last_id]
        assert repo.recovery["events_lost"] == victim.count
        assert any("fails its checksum" in p and "damaged bytes stepped over" in p for p in repo.recovery["problems"])
    finally:
        repo.close()
