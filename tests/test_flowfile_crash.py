"""Kill -9 a process that commits to the FlowFile repository, many times, and check every FlowFile.

A child process (plain Python, no Ray) runs a deterministic workload: batch ``b`` creates FlowFiles
on a new resource claim, clones one, moves and rewrites the FlowFiles of batch ``b-1``, drops those
of batch ``b-2``, registers a claim nobody references, and updates a progress FlowFile to ``b``, all
in ONE commit; every few batches it checkpoints. After each commit returns it appends
``commit <b>`` to a report file (unbuffered ``os.write``; the kernel keeps it when the process
dies). The parent kills it with SIGKILL at a random moment, reopens the repository and checks:

* durability: the repository holds batch ``L`` or ``L+1``, where ``L`` is the last batch the child
  reported (``L+1`` when the kill landed after LMDB committed but before the report);
* atomicity: the whole repository equals the model's state after that batch, FlowFile by
  FlowFile, queue, claim and attributes; nothing of the next batch is present;
* every claimant count equals the live FlowFiles referencing the claim (rebuild finds nothing to
  fix), every claim a checkpoint released is unreferenced, and ids continue past every stored id.

Rounds run with ``always_sync`` off (the guarantee under test: a commit survives the death of every
process) and on, some rounds kill inside ``checkpoint()`` between its sync and its release, and
some never checkpoint and apply the journal every few commits, so kills land while it is applied.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

N = 16  # FlowFiles created per batch
CHECKPOINT_EVERY = 4
NS = uuid.UUID("5b0b7c1e-2f0a-4a57-9a55-0c1d0e0f1a2b")
PROGRESS = str(uuid.uuid5(NS, "progress"))


def _model():
    from repositories.model import ContentClaim, FlowFile, ResourceClaim

    def fid(b, i):
        return str(uuid.uuid5(NS, f"f/{b}/{i}"))

    def cid(b):
        return str(uuid.uuid5(NS, f"c/{b}"))

    def claim(kind, b):
        return ResourceClaim("default", str(b % 7), f"{kind}-{b}")

    def created(b, i, id_=0):
        return f"q{b % 3}", FlowFile(
            id_, fid(b, i), {"b": str(b), "i": str(i), "pad": "x" * 40},
            ContentClaim(claim("r", b), i * 10, 10), 1000 + b, 1000 + b, 0, b, i,
        )  # fmt: skip

    def cloned(b, id_=0):
        return "clones", FlowFile(
            id_, cid(b), {"b": str(b), "clone": "1"}, ContentClaim(claim("r", b), 0, 10), 1000 + b, 1000 + b, 0, b, N
        )

    def updated(ff, b):
        i = int(ff.attributes["i"])
        c = ContentClaim(claim("w", b - 1), i * 10, 10) if i % 2 == 0 else ff.claim
        return "out", ff._replace(attributes={**ff.attributes, "seen": str(b)}, claim=c, queue_date=b)

    def progress(b):
        return "progress", FlowFile(0, PROGRESS, {"batch": str(b)}, None, 0, 0, 0, b, 0)

    def expected(B):
        """uuid -> (queue, FlowFile without id) after batch B."""
        out = {}
        if B >= 1:
            for i in range(N):
                qq, ff = created(B, i)
                out[ff.uuid] = (qq, ff)
            qq, ff = cloned(B)
            out[ff.uuid] = (qq, ff)
            qq, ff = progress(B)
            out[ff.uuid] = (qq, ff)
        if B >= 2:
            for i in range(N):
                qq, ff = updated(created(B - 1, i)[1], B)
                out[ff.uuid] = (qq, ff)
            qq, ff = cloned(B - 1)
            out[ff.uuid] = (qq, ff)
        return out

    return fid, cid, claim, created, cloned, updated, progress, expected


def child_main(path: str, report: str, always_sync: str, mode: str) -> None:
    from repositories.flowfile import WriteAheadFlowFileRepository
    from repositories.model import QueuedFlowFile

    fid, cid, claim, created, cloned, updated, progress, _expected = _model()
    fd = os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    repo = WriteAheadFlowFileRepository(path, always_sync=always_sync == "1")
    if mode == "checkpoint":
        real_sync = repo._sync

        def slow_sync():  # widen the window between the checkpoint's sync and its release
            real_sync()
            say("cp-synced")
            time.sleep(0.03)

        repo._sync = slow_sync
    elif mode == "journal":
        repo._journal.FOLD_ENTRIES = 3
    p = repo.get(PROGRESS)
    b = int(p.flowfile.attributes["batch"]) if p is not None else 0
    prev = [repo.get(fid(b, i)).flowfile for i in range(N)] if b >= 1 else []
    say(f"ready {b}")
    while True:
        b += 1
        first = repo.reserve_ids(N + 1)
        new = [created(b, i, first + i) for i in range(N)]
        updates = [QueuedFlowFile(ff, qq) for qq, ff in new]
        updates.append(QueuedFlowFile(*reversed(cloned(b, first + N))))
        updates += [QueuedFlowFile(*reversed(updated(ff, b))) for ff in prev]
        updates.append(QueuedFlowFile(*reversed(progress(b))))
        removals = [fid(b - 2, i) for i in range(N)] + [cid(b - 2)] if b >= 3 else []
        new_claims = [claim("r", b), claim("x", b)] + ([claim("w", b - 1)] if b >= 2 else [])
        repo.commit(updates, removals, new_claims)
        say(f"commit {b}")
        prev = [ff for _qq, ff in new]
        if b % CHECKPOINT_EVERY == 0 and mode != "journal":
            say("cp-start")
            released = repo.checkpoint()
            say("cp-done " + " ".join(r.id for r in released))


if __name__ == "__main__":
    child_main(*sys.argv[1:5])
    sys.exit(0)


# --- the tests (not imported by the child) ---------------------------------------------------

import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from repositories.flowfile import WriteAheadFlowFileRepository  # noqa: E402
from repositories.model import ResourceClaim  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _read_report(report: Path) -> list[str]:
    return report.read_text().splitlines() if report.exists() else []


def _wait_for(report: Path, predicate, start: int, proc, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(predicate(line) for line in _read_report(report)[start:]):
            return True
        if proc.poll() is not None:
            raise AssertionError(f"writer exited early with {proc.returncode}: {proc.stderr.read().decode()}")
        time.sleep(0.0005)
    raise AssertionError("writer did not get there in time")


def _verify(path: Path, last_reported: int, released_ids: set[str]) -> int:
    """Reopen after a kill and check the whole repository against the model; return its batch."""
    *_, expected = _model()
    with WriteAheadFlowFileRepository(path) as repo:
        p = repo.get(PROGRESS)
        batch = int(p.flowfile.attributes["batch"]) if p is not None else 0
        assert batch in (last_reported, last_reported + 1), (
            f"the child reported batch {last_reported} committed but the repository holds batch {batch}"
        )
        got = {ff.uuid: (qq, ff) for qq, fb in repo.recover(batch_size=7, include_swapped=True) for ff in fb}
        want = expected(batch)
        assert set(got) == set(want), "a batch is partially present or partially missing"
        for u, (qq, ff) in want.items():
            gq, gff = got[u]
            assert (gq, gff._replace(id=0)) == (qq, ff), f"FlowFile {u} differs from the model"
        ids = [ff.id for _qq, ff in got.values() if ff.uuid != PROGRESS]
        assert len(set(ids)) == len(ids)
        # claimant counts equal the live references, and nothing needed fixing
        refs: dict[ResourceClaim, int] = {}
        for _qq, ff in got.values():
            if ff.claim is not None:
                refs[ff.claim.resource] = refs.get(ff.claim.resource, 0) + 1
        for resource, n in refs.items():
            assert repo.claimant_count(resource) == n, resource
            assert repo.is_referenced(resource)
        for k in range(max(1, batch - 40), batch + 2):
            for kind in "rwx":
                resource = ResourceClaim("default", str(k % 7), f"{kind}-{k}")
                if resource not in refs:
                    assert repo.claimant_count(resource) == 0
        for rid in released_ids:
            kind, k = rid.split("-")
            resource = ResourceClaim("default", str(int(k) % 7), rid)
            assert resource not in refs and not repo.is_referenced(resource), f"released {rid} is live"
        assert repo.queue_counts() == {
            qq: sum(1 for q2, _ in want.values() if q2 == qq) for qq in {q2 for q2, _ in want.values()}
        }
        report = repo.rebuild_claimant_counts()
        assert (report["fixed"], report["queues_fixed"], report["index_rebuilt"], report["stale_destructible"]) == (
            0, {}, False, 0,
        ), report  # fmt: skip
        assert repo.reserve_ids(1) > max(ids, default=0)
    return batch


def _spawn(path: Path, report: Path, always_sync: bool, mode: str):
    return subprocess.Popen(
        [sys.executable, __file__, str(path), str(report), "1" if always_sync else "0", mode],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.crash
def test_sigkill_during_commits_and_checkpoints_loses_no_committed_batch(tmp_path):
    path = tmp_path / "flowfile"
    WriteAheadFlowFileRepository(path).close()  # created once; the children open it
    report = tmp_path / "report.txt"
    rnd = random.Random(int(os.environ.get("CRASH_SEED", "20240611")))
    rounds = (
        [("commits", False)] * 10  # kill at a random moment while committing, always_sync off
        + [("commits", True)] * 5  # the same with always_sync on
        + [("checkpoint", False)] * 7  # kill inside checkpoint(): after its sync, around its release
        + [("startup", False)] * 2  # kill while the child opens the repository
        + [("journal", False)] * 5  # no checkpoint: kill while commits are applied from the journal
    )
    rnd.shuffle(rounds)
    batch = 0
    released: set[str] = set()
    kinds = {"commits": 0, "checkpoint": 0, "startup": 0, "journal": 0}
    in_checkpoint = 0
    progressed = 0
    for mode, always_sync in rounds:
        start = len(_read_report(report))
        proc = _spawn(path, report, always_sync, mode if mode in ("checkpoint", "journal") else "commits")
        try:
            if mode == "startup":
                time.sleep(rnd.uniform(0.0, 0.25))
            else:
                _wait_for(report, lambda line: line.startswith("ready"), start, proc)
                if mode == "checkpoint":
                    n = len(_read_report(report))
                    _wait_for(report, lambda line: line == "cp-synced", n, proc)
                    time.sleep(rnd.uniform(0.0, 0.035))  # mostly before the release, some after
                else:
                    time.sleep(rnd.uniform(0.005, 0.15))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        kinds[mode] += 1
        lines = _read_report(report)[start:]
        commits = [int(line.split()[1]) for line in lines if line.startswith("commit ")]
        for line in lines:
            if line.startswith("cp-done"):
                released.update(line.split()[1:])
        cps = [line for line in lines if line.startswith("cp-")]
        if cps and cps[-1] in ("cp-start", "cp-synced"):
            in_checkpoint += 1
        last_reported = commits[-1] if commits else batch
        new_batch = _verify(path, last_reported, released)
        assert new_batch >= batch
        progressed += new_batch > batch
        batch = new_batch
    print(f"kills {kinds}, inside a checkpoint {in_checkpoint}, rounds that progressed {progressed}, final batch {batch}, claims released {len(released)}")
    assert sum(kinds.values()) >= 20
    assert in_checkpoint >= 3, f"only {in_checkpoint} kills landed inside a checkpoint"
    assert progressed >= 15 and batch > 50, (progressed, batch)
    assert released, "no checkpoint released a claim"
