"""The FlowFile repository: claimant counts, checkpoints, recovery order, swap registry, repair.

Behaviour shared by the durable (LMDB) and the in-memory repository runs against both; what only
a disk can show (reopening, corruption, format versions) runs against the LMDB one. The SIGKILL
crash tests are in test_flowfile_crash.py; byte layouts in test_flowfile_records.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import lmdb
import pytest

from flowactors.sdk.settings import Settings
from repositories.flowfile import (
    FlowFileRepositoryError,
    InMemoryFlowFileRepository,
    RepositoryCorruptError,
    RunReplacedError,
    StateConflictError,
    UnsupportedFormatVersionError,
    WriteAheadFlowFileRepository,
)
from repositories.flowfile import records as rec
from repositories.flowfile.opening import FORMAT_VERSION
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

R1 = ResourceClaim("default", "1", "claim-1")
R2 = ResourceClaim("default", "2", "claim-2")
R3 = ResourceClaim("other", "3", "claim-3")


class Harness:
    """One repository under test and the operations a test needs beyond its interface."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "flowfile"
        self.repo = self._open()
        self._next = 1

    def _open(self):
        if self.kind == "wal":
            return WriteAheadFlowFileRepository(self.path)
        return InMemoryFlowFileRepository(self.path)

    def reopen(self):
        """Close and open again (the in-memory one keeps its state: nothing to reopen)."""
        if self.kind == "wal":
            self.repo.close()
            self.repo = self._open()
        return self.repo

    def set_claim_count(self, resource: ResourceClaim, count: int | None) -> None:
        """Damage a claimant count behind the repository's back (None: delete the entry)."""
        key = tuple(resource)
        if self.kind == "memory":
            if count is None:
                self.repo._claims.pop(key, None)
            else:
                self.repo._claims[key] = [count, 0]
            return
        self.repo.close()
        env = lmdb.open(str(self.path), max_dbs=16)
        db = env.open_db(b"claims")
        with env.begin(write=True) as txn:
            if count is None:
                txn.delete(rec.claim_key(key), db=db)
            else:
                txn.put(rec.claim_key(key), rec.pack_claim_value(count, 0), db=db)
        env.close()
        self.repo = self._open()

    def ff(self, claim: ResourceClaim | None = None, *, offset: int = 0, length: int = 10,
           qdate: int = 100, qindex: int = 0, **attrs: str) -> FlowFile:
        id_ = self._next
        self._next += 1
        content = ContentClaim(claim, offset, length) if claim is not None else None
        u = str(uuid.uuid4())
        return FlowFile(id_, u, {"uuid": u, "filename": f"f{id_}", **attrs}, content, 1000, 1000, 0, qdate, qindex)


@pytest.fixture(params=["wal", "memory"])
def h(request, tmp_path):
    harness = Harness(request.param, tmp_path)
    yield harness
    harness.repo.close()


@pytest.fixture
def w(tmp_path):
    harness = Harness("wal", tmp_path)
    yield harness
    harness.repo.close()


def make_ff(claim: ResourceClaim | None, attributes: dict | None = None) -> FlowFile:
    u = str(uuid.uuid4())
    content = ContentClaim(claim, 0, 10) if claim is not None else None
    return FlowFile(1, u, attributes or {"uuid": u}, content, 1000, 1000)


def q(ff: FlowFile, queue: str = "q1") -> QueuedFlowFile:
    return QueuedFlowFile(ff, queue)


def everything(repo) -> dict[str, tuple[str, FlowFile]]:
    return {ff.uuid: (queue, ff) for queue, batch in repo.recover(include_swapped=True) for ff in batch}


# --- claimant counts: every case ---------------------------------------------------------------


def test_create_counts_each_flowfile_on_its_claim(h):
    a, b = h.ff(R1), h.ff(R1, offset=10)
    h.repo.commit([q(a), q(b)], [])
    assert h.repo.claimant_count(R1) == 2
    assert h.repo.queue_counts() == {"q1": 2}
    assert h.repo.queue_sizes() == {"q1": (2, 20)}


def test_clone_shares_the_claim_plus_one(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    clone = a._replace(id=99, uuid=str(uuid.uuid4()))
    h.repo.commit([q(clone, "q2")], [])
    assert h.repo.claimant_count(R1) == 2


def test_write_moves_one_claimant_from_old_to_new_claim(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    written = a._replace(claim=ContentClaim(R2, 0, 5))
    h.repo.commit([q(written)], [], [R2])
    assert (h.repo.claimant_count(R1), h.repo.claimant_count(R2)) == (0, 1)
    assert h.repo.pending_release() == [R1]
    assert h.repo.queue_sizes() == {"q1": (1, 5)}


def test_clone_then_write_keeps_the_original_claimant(h):
    """NIFI-8727: clone then write leaked a count."""
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    clone = a._replace(id=50, uuid=str(uuid.uuid4()))
    h.repo.commit([q(clone), q(a, "q2")], [])
    h.repo.commit([q(clone._replace(claim=ContentClaim(R2, 0, 3)))], [], [R2])
    assert (h.repo.claimant_count(R1), h.repo.claimant_count(R2)) == (1, 1)
    assert h.repo.rebuild_claimant_counts()["fixed"] == 0


def test_split_adds_one_per_child_and_drops_the_parent(h):
    parent = h.ff(R1, length=30)
    h.repo.commit([q(parent)], [])
    children = [h.ff(R1, offset=10 * i, length=10, qindex=i) for i in range(3)]
    h.repo.commit([q(c, "split") for c in children], [parent.uuid])
    assert h.repo.claimant_count(R1) == 3
    assert h.repo.queue_counts() == {"split": 3}


def test_drop_decrements_and_waits_for_a_checkpoint(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    h.repo.commit([], [a.uuid])
    assert h.repo.claimant_count(R1) == 0
    assert h.repo.is_referenced(R1), "released only after the next checkpoint"
    assert h.repo.queue_counts() == {}
    assert h.repo.checkpoint() == [R1]
    assert not h.repo.is_referenced(R1)
    assert h.repo.checkpoint() == []


def test_attribute_update_and_move_leave_counts_alone(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    h.repo.commit([q(a._replace(attributes={**a.attributes, "x": "1"}, queue_date=200), "q2")], [])
    assert h.repo.claimant_count(R1) == 1
    assert h.repo.pending_release() == []
    assert h.repo.queue_counts() == {"q2": 1}
    assert h.repo.get(a.uuid).flowfile.attributes["x"] == "1"


def test_flowfile_without_content_has_no_claim(h):
    a = h.ff(None)
    h.repo.commit([q(a)], [])
    h.repo.commit([q(a._replace(claim=ContentClaim(R1, 0, 4)))], [], [R1])
    assert h.repo.claimant_count(R1) == 1
    h.repo.commit([q(a._replace(claim=None))], [])
    assert h.repo.claimant_count(R1) == 0 and h.repo.pending_release() == [R1]


def test_claim_overwritten_in_the_session_is_registered_at_zero(h):
    """Content written, then overwritten in the same session: nothing references R1 but it
    must still be released, or it leaks on disk."""
    a = h.ff(R2)
    h.repo.commit([q(a)], [], new_claims=[R1, R2])
    assert h.repo.claimant_count(R1) == 0 and h.repo.is_referenced(R1)
    assert h.repo.claimant_count(R2) == 1
    assert h.repo.checkpoint() == [R1]
    assert h.repo.is_referenced(R2)


def test_new_claim_already_referenced_is_not_counted_twice(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [], [R1])
    b = h.ff(R1, offset=10)
    h.repo.commit([q(b)], [], [R1])
    assert h.repo.claimant_count(R1) == 2
    assert h.repo.pending_release() == []


def test_claim_referenced_again_before_the_checkpoint_is_not_released(h):
    a = h.ff(R1)
    h.repo.commit([q(a)], [])
    h.repo.commit([], [a.uuid])
    b = h.ff(R1, offset=10)
    h.repo.commit([q(b)], [])
    assert h.repo.pending_release() == []
    assert h.repo.checkpoint() == []
    assert h.repo.claimant_count(R1) == 1
    h.repo.commit([], [b.uuid])
    assert h.repo.checkpoint() == [R1]


@pytest.mark.parametrize("reopened", [False, True], ids=["entries-in-memory", "entries-decoded"])
def test_flowfiles_created_and_removed_before_the_log_is_applied_leave_nothing_behind(h, reopened):
    """FlowFiles born and gone between two applications of the journal are skipped when it is
    applied (``_passing_through``): what they took (claims, queue counts) is given back, a claim
    only they referenced is released at the next checkpoint, a second removal is still an
    unknown one, and the FlowFiles around them (one stored before, one written again after its
    removal) are applied as always. ``reopened``: the journal
    is applied by another open, which decodes the entries instead of holding them."""
    e = h.ff(R3, offset=30)
    h.repo.commit([q(e)], [])
    assert h.repo.queue_counts() == {"q1": 1}   # applied: e is in the tables before the others
    a, b, c, d, f = h.ff(R1), h.ff(R1, offset=10), h.ff(R3), h.ff(R2), h.ff(R3, offset=40)
    h.repo.commit([q(a), q(b), q(c), q(d), q(f)], [])
    a2 = a.with_claim(ContentClaim(R2, 20, 5))
    h.repo.commit([q(a2, "q2"), q(c, "q2"), q(e, "q2")], [b.uuid])
    h.repo.commit([], [a.uuid, d.uuid, e.uuid, f.uuid])
    h.repo.commit([q(f, "q3")], [b.uuid])   # b already removed: unknown; f written again after its removal
    if reopened:
        h.reopen()
    assert h.repo.queue_counts() == {"q2": 1, "q3": 1}
    assert everything(h.repo) == {c.uuid: ("q2", c), f.uuid: ("q3", f)}
    assert [h.repo.claimant_count(r) for r in (R1, R2, R3)] == [0, 0, 2]
    assert sorted(h.repo.checkpoint()) == sorted([R1, R2])
    if not reopened:   # the count lives in the process that applied the journal
        assert h.repo.stats()["unknown_removals"] == 1


def test_removing_an_unknown_or_already_removed_flowfile_changes_nothing(h):
    """NIFI-6110: a repeated decrement after a failure."""
    a, b = h.ff(R1), h.ff(R1, offset=10)
    h.repo.commit([q(a), q(b)], [])
    h.repo.commit([], [a.uuid])
    h.repo.commit([], [a.uuid, str(uuid.uuid4())])
    assert h.repo.claimant_count(R1) == 1
    assert h.repo.stats()["unknown_removals"] == 2


def test_a_damaged_count_never_goes_negative_and_its_claim_is_kept_until_rebuilt(h, caplog):
    """A claimant count found too low when a commit is applied (the commit is already decided, as
    in NiFi) is not taken below 0: the claim stays referenced, so no checkpoint or orphan cleanup
    deletes content a FlowFile may still reference, and the next rebuild recounts it."""
    a, b = h.ff(R1), h.ff(R2)
    h.repo.commit([q(a), q(b)], [])
    h.set_claim_count(R1, None)  # damaged: the entry is gone while a still references R1
    c = h.ff(R3)
    h.repo.commit([q(c)], [b.uuid, a.uuid])
    assert set(everything(h.repo)) == {c.uuid}
    assert h.repo.stats()["damaged_counts"] == 1
    assert "claim-1" in caplog.text and "rebuild_claimant_counts" in caplog.text
    assert h.repo.claimant_count(R1) == 1 and h.repo.is_referenced(R1)
    assert h.repo.claimant_count(R2) == 0 and h.repo.claimant_count(R3) == 1
    assert h.repo.queue_counts() == {"q1": 1}
    assert h.repo.checkpoint() == [R2]   # R1 is not released on a damaged count
    report = h.repo.rebuild_claimant_counts()
    assert report["fixed"] == 1
    assert report["differences"] == [{"claim": R1, "recorded": 1, "actual": 0}]
    assert h.repo.checkpoint() == [R1]


@pytest.mark.parametrize("case", ["twice in updates", "update and removal", "twice in removals"])
def test_a_uuid_twice_in_one_commit_is_rejected_before_writing(h, case):
    a, b = h.ff(R1), h.ff(R1)
    h.repo.commit([q(b)], [])
    updates, removals = {
        "twice in updates": ([q(a), q(a, "q2")], []),
        "update and removal": ([q(a), q(b)], [b.uuid]),
        "twice in removals": ([q(a)], [b.uuid, b.uuid.upper()]),
    }[case]
    with pytest.raises(ValueError, match="more than once"):
        h.repo.commit(updates, removals)
    assert set(everything(h.repo)) == {b.uuid}
    assert h.repo.claimant_count(R1) == 1


def test_bad_input_is_a_value_error(h):
    with pytest.raises(ValueError, match="not a UUID"):
        h.repo.commit([], ["not-a-uuid"])
    with pytest.raises(ValueError, match="too long"):
        h.repo.commit([q(h.ff(R1), "x" * 600)], [])
    with pytest.raises(ValueError, match="64-bit"):
        h.repo.commit([q(h.ff(R1)._replace(queue_date=1 << 70))], [])
    with pytest.raises(ValueError):
        h.repo.commit([q(h.ff(R1)._replace(attributes={"a": object()}))], [])
    assert everything(h.repo) == {} and h.repo.claimant_count(R1) == 0


# --- checkpoints -------------------------------------------------------------------------------


def test_a_claim_freed_during_a_checkpoint_waits_for_the_next_one(h, monkeypatch):
    a, b = h.ff(R1), h.ff(R2)
    h.repo.commit([q(a), q(b)], [])
    h.repo.commit([], [a.uuid])  # R1 reaches 0 before the checkpoint starts
    real_sync = h.repo._sync

    def sync_while_a_session_commits():
        real_sync()
        h.repo.commit([], [b.uuid])  # R2 reaches 0 while the checkpoint runs

    monkeypatch.setattr(h.repo, "_sync", sync_while_a_session_commits)
    assert h.repo.checkpoint() == [R1]
    monkeypatch.undo()
    assert h.repo.is_referenced(R2) and h.repo.pending_release() == [R2]
    assert h.repo.checkpoint() == [R2]
    assert not h.repo.is_referenced(R2)


def test_checkpoint_releases_many_claims_in_order(h):
    ffs = [h.ff(ResourceClaim("c", "s", f"r{i}")) for i in range(50)]
    h.repo.commit([q(f) for f in ffs], [])
    for f in ffs:
        h.repo.commit([], [f.uuid])
    released = h.repo.checkpoint()
    assert released == [f.claim.resource for f in ffs]
    st = h.repo.stats()
    assert st["checkpoints"] == 1 and st["last_checkpoint_released"] == 50
    assert st["pending_release"] == 0 and st["claims"] == 0


# --- recovery ----------------------------------------------------------------------------------


def test_recovery_streams_each_queue_in_fifo_order(h):
    import random

    rnd = random.Random(7)
    expected: dict[str, list[str]] = {"a": [], "bb": [], "c": []}
    ffs = []
    for queue in expected:
        for i in range(30):
            f = h.ff(R1, offset=i, qdate=rnd.choice([5, 6, 7]), qindex=rnd.randrange(4))
            ffs.append((f, queue))
    for queue in expected:
        mine = sorted((f for f, qq in ffs if qq == queue), key=lambda f: (f.queue_date, f.queue_index, f.id))
        expected[queue] = [f.uuid for f in mine]
    rnd.shuffle(ffs)
    for i in range(0, len(ffs), 7):
        h.repo.commit([QueuedFlowFile(f, qq) for f, qq in ffs[i : i + 7]], [])
    batches = list(h.repo.recover(batch_size=8))
    assert all(1 <= len(b) <= 8 for _, b in batches)
    seen_queues = [qq for qq, _ in batches]
    assert sorted(set(seen_queues)) == ["a", "bb", "c"]
    # each queue's batches are consecutive, and together they are the queue in FIFO order
    assert seen_queues == sorted(seen_queues, key=seen_queues.index)
    got = {qq: [f.uuid for qb, b in batches if qb == qq for f in b] for qq in expected}
    assert got == expected
    assert h.repo.queue_counts() == {k: 30 for k in expected}


def test_recovery_returns_the_flowfiles_as_committed(h):
    a = h.ff(R1, offset=7, length=9, qdate=123, qindex=4, extra="é ✓")._replace(penalized_until=5555)
    b = h.ff(None, qdate=-5, qindex=-1)
    h.repo.commit([q(a), q(b, "q2")], [])
    h.reopen()
    got = everything(h.repo)
    assert got[a.uuid] == ("q1", a)
    assert got[b.uuid] == ("q2", b)
    assert h.repo.get(a.uuid) == QueuedFlowFile(a, "q1")
    assert h.repo.get(str(uuid.uuid4())) is None


def test_recovery_is_lazy_and_batched(h):
    ffs = [h.ff(R1, offset=i, qindex=i) for i in range(2500)]
    h.repo.commit([q(f) for f in ffs], [])
    stream = h.repo.recover(batch_size=1000)
    assert not isinstance(stream, (list, tuple))
    first = next(stream)
    assert first[0] == "q1" and len(first[1]) == 1000
    rest = list(stream)
    assert [len(b) for _, b in rest] == [1000, 500]
    assert [f.uuid for f in first[1] + rest[0][1] + rest[1][1]] == [f.uuid for f in ffs]
    assert [len(b) for b in h.repo.iter_queue("q1", batch_size=2000)] == [2000, 500]


def test_ids_are_one_up_and_never_reused(h):
    first = h.repo.reserve_ids(10)
    assert h.repo.reserve_ids(5) == first + 10
    assert h.repo.reserve_ids(0) == first + 15
    with pytest.raises(ValueError):
        h.repo.reserve_ids(-1)
    h.reopen()
    assert h.repo.reserve_ids(1) == first + 15


def test_a_commit_reserves_its_events_ids_in_its_own_transaction(h):
    """Provenance event ids come from the log, in the order commits are made; a refused commit
    reserves none; they survive a reopen and can be raised past what provenance holds."""
    a, b = h.ff(R1), h.ff(R1)
    assert h.repo.commit([q(a)], [], (), 3) == 0
    assert h.repo.commit([q(b)], [], ()) is None  # no events, no ids
    assert h.repo.reserve_event_ids(2) == 3
    with pytest.raises(ValueError):
        h.repo.commit([q(a), q(a)], [], (), 5)
    assert h.repo.commit([], [a.uuid], (), 1) == 5
    assert h.repo.commit([], [], (), 1) == 6  # events alone (a queue emptied of nothing)
    h.reopen()
    assert h.repo.stats()["next_event_id"] == 7
    assert h.repo.raise_event_ids(4) == 7 and h.repo.raise_event_ids(40) == 40
    assert h.repo.commit([], [b.uuid], (), 2) == 40


# --- swap files --------------------------------------------------------------------------------


def test_swapped_out_flowfiles_keep_their_claims_and_are_not_recovered_twice(h):
    ffs = [h.ff(R1, offset=i, qindex=i) for i in range(10)]
    h.repo.commit([q(f) for f in ffs], [])
    swapped = ffs[5:]
    h.repo.register_swap_file("q1", "/swap/q1-1.swap", 5, 50, flowfiles=swapped)
    assert h.repo.claimant_count(R1) == 10
    assert h.repo.queue_counts() == {"q1": 5, "swap:/swap/q1-1.swap": 5}
    assert h.repo.swap_files() == [{"queue": "q1", "location": "/swap/q1-1.swap", "count": 5, "size": 50}]
    recovered = [f.uuid for _, b in h.repo.recover() for f in b]
    assert recovered == [f.uuid for f in ffs[:5]]
    assert [f.uuid for b in h.repo.iter_queue("swap:/swap/q1-1.swap") for f in b] == [f.uuid for f in swapped]
    h.reopen()
    assert h.repo.swap_files()[0]["count"] == 5
    assert h.repo.unregister_swap_file("/swap/q1-1.swap") == 5
    assert h.repo.unregister_swap_file("/swap/q1-1.swap") == 0
    assert h.repo.swap_files() == []
    assert h.repo.queue_counts() == {"q1": 10}
    assert [f.uuid for _, b in h.repo.recover() for f in b] == [f.uuid for f in ffs]
    assert h.repo.rebuild_claimant_counts()["fixed"] == 0


def test_swapped_flowfiles_can_be_dropped_while_swapped(h):
    ffs = [h.ff(R1, offset=i, qindex=i) for i in range(4)]
    h.repo.commit([q(f) for f in ffs], [])
    h.repo.register_swap_file("q1", "s1", 4, 40, flowfiles=ffs)
    h.repo.commit([], [f.uuid for f in ffs])  # e.g. the queue was emptied by a user
    assert h.repo.claimant_count(R1) == 0 and h.repo.queue_counts() == {}
    assert h.repo.unregister_swap_file("s1") == 0


def test_renaming_a_queue_moves_its_records_and_its_swapped_ones_in_fifo_order(h):
    """A connection whose id changed keeps what was queued under the former one: every record,
    those in its swap files included, moves to the new queue in its FIFO position; the swap files
    are unregistered and the counts follow."""
    ffs = [h.ff(R1, qdate=100 + i) for i in range(5)]
    other = h.ff(R2)
    h.repo.commit([q(f, "old") for f in ffs] + [q(other, "q2")], [])
    h.repo.register_swap_file("old", "swap-1", 2, 20, ffs[1:3])
    assert h.repo.rename_queue("old", "new") == 5
    assert h.repo.swap_files() == []
    assert h.repo.queue_counts() == {"new": 5, "q2": 1}
    assert [f.uuid for batch in h.repo.iter_queue("new") for f in batch] == [f.uuid for f in ffs]
    assert h.repo.claimant_count(R1) == 5 and h.repo.rename_queue("old", "new") == 0
    assert h.repo.rebuild_claimant_counts()["queues_fixed"] == {}


def test_swap_registration_errors_write_nothing(h):
    a, b = h.ff(R1), h.ff(R1)
    h.repo.commit([q(a), q(b, "other")], [])
    with pytest.raises(ValueError, match="is in queue"):
        h.repo.register_swap_file("q1", "s1", 2, 20, flowfiles=[a, b])
    with pytest.raises(ValueError, match="not in the repository"):
        h.repo.register_swap_file("q1", "s1", 1, 10, flowfiles=[h.ff(R1)])
    with pytest.raises(ValueError, match="count"):
        h.repo.register_swap_file("q1", "s1", 3, 10, flowfiles=[a])
    assert h.repo.swap_files() == []
    assert h.repo.queue_counts() == {"q1": 1, "other": 1}
    h.repo.register_swap_file("q1", "s1", 7, 70)  # registry only: the queue tracks its records
    with pytest.raises(ValueError, match="already registered"):
        h.repo.register_swap_file("q1", "s1", 7, 70)
    h.repo.register_swap_file("q2", "s0", 1, 1)
    assert [s["location"] for s in h.repo.swap_files()] == ["s1", "s0"]  # registration order


# --- repair ------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["too high", "too low", "missing", "unreferenced"])
def test_rebuild_fixes_a_damaged_count(h, damage):
    a, b = h.ff(R1), h.ff(R1, offset=10)
    h.repo.commit([q(a), q(b)], [])
    resource, value, actual = {
        "too high": (R1, 5, 2),
        "too low": (R1, 1, 2),
        "missing": (R1, None, 2),
        "unreferenced": (R2, 3, 0),
    }[damage]
    h.set_claim_count(resource, value)
    report = h.repo.rebuild_claimant_counts()
    assert report["fixed"] == 1 and report["flowfiles"] == 2
    assert report["differences"] == [{"claim": resource, "recorded": value or 0, "actual": actual}]
    assert h.repo.claimant_count(resource) == actual
    assert h.repo.rebuild_claimant_counts()["fixed"] == 0
    if damage == "unreferenced":  # a count found too high is released like any other
        assert h.repo.is_referenced(R2) and h.repo.checkpoint() == [R2]
    h.repo.commit([], [a.uuid, b.uuid])
    assert h.repo.checkpoint() == [R1]


def test_rebuild_raises_the_next_id_past_every_stored_id(h):
    a = h.ff(R1)._replace(id=10_000)
    h.repo.commit([q(a)], [])
    report = h.repo.rebuild_claimant_counts()
    assert report["next_id_raised"]
    assert h.repo.reserve_ids(1) == 10_001


def test_stats_and_close(h):
    h.repo.commit([q(h.ff(R1))], [])
    st = h.repo.stats()
    assert st["flowfiles"] == 1 and st["commits"] == 1 and st["claims"] == 1
    assert st["last_checkpoint_time"] is None
    h.repo.checkpoint()
    st = h.repo.stats()
    assert st["last_checkpoint_time"] > 0 and st["last_checkpoint_duration"] >= 0
    h.repo.close()
    h.repo.close()
    with pytest.raises(FlowFileRepositoryError, match="closed"):
        h.repo.commit([], [])


# --- only on disk ------------------------------------------------------------------------------


def test_everything_survives_reopening(w):
    a, b, c = w.ff(R1), w.ff(R2), w.ff(R3)
    w.repo.commit([q(a), q(b, "q2"), q(c)], [], [R1, R2, R3])
    w.repo.commit([], [c.uuid])
    w.repo.register_swap_file("q2", "s1", 1, 10, flowfiles=[b])
    before = (everything(w.repo), w.repo.queue_sizes(), w.repo.swap_files(), w.repo.pending_release(),
              [w.repo.claimant_count(r) for r in (R1, R2, R3)])
    w.reopen()
    after = (everything(w.repo), w.repo.queue_sizes(), w.repo.swap_files(), w.repo.pending_release(),
             [w.repo.claimant_count(r) for r in (R1, R2, R3)])
    assert after == before
    assert w.repo.checkpoint() == [R3]


def test_durability_modes_set_lmdb_flags(tmp_path):
    with WriteAheadFlowFileRepository(tmp_path / "a") as repo:
        flags = repo._environment.check_open().flags()
        assert (flags["sync"], flags["metasync"], flags["writemap"]) == (False, False, False)
    with WriteAheadFlowFileRepository(tmp_path / "a", always_sync=True) as repo:
        flags = repo._environment.check_open().flags()
        assert (flags["sync"], flags["metasync"], flags["writemap"]) == (True, True, False)
        repo.commit([QueuedFlowFile(make_ff(R1), "q")], [])
        assert repo.stats()["always_sync"]


def test_from_settings_uses_root_flowfile(tmp_path):
    settings = Settings(always_sync=True, flowfile_map_size=1 << 30)
    with WriteAheadFlowFileRepository.from_settings(tmp_path, settings) as repo:
        assert repo.path == tmp_path / "flowfile" and repo.always_sync
        assert repo.stats()["map_size"] == 1 << 30
    assert (tmp_path / "flowfile" / "data.mdb").exists()
    assert not list((tmp_path / "flowfile").glob(".creating-*"))


def test_missing_directory_with_create_false_is_a_clear_error(tmp_path):
    with pytest.raises(FlowFileRepositoryError, match="create=False") as err:
        WriteAheadFlowFileRepository(tmp_path / "nope", create=False)
    assert str(tmp_path / "nope") in str(err.value)
    assert not (tmp_path / "nope").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(FlowFileRepositoryError, match="not a directory"):
        WriteAheadFlowFileRepository(tmp_path / "file")


def test_one_instance_per_directory_per_process(w):
    with pytest.raises(FlowFileRepositoryError, match="already open"):
        WriteAheadFlowFileRepository(w.path)
    w.repo.close()
    WriteAheadFlowFileRepository(w.path).close()


def test_map_full_says_which_setting_to_raise(tmp_path):
    committed = 0
    with WriteAheadFlowFileRepository(tmp_path / "small", map_size=256 * 1024) as repo:
        big = {"x": "y" * 3000}
        with pytest.raises(FlowFileRepositoryError, match="flowfile_map_size"):
            for _ in range(100):
                repo.commit([QueuedFlowFile(make_ff(R1, big), "q")], [])
                committed += 1
    assert committed > 0
    # with the setting raised as the message says, every commit made before is there
    with WriteAheadFlowFileRepository(tmp_path / "small", map_size=4 * 1024**2) as repo:
        assert repo.stats()["flowfiles"] == committed
        assert repo.claimant_count(R1) == committed


def _filled(w, n=300):
    ffs = [w.ff(R1, offset=i, qindex=i, note="needle-%05d" % i) for i in range(n)]
    w.repo.commit([q(f) for f in ffs], [])
    w.repo.close()
    return ffs


@pytest.mark.parametrize("how", ["meta pages", "half", "to zero", "page headers", "zeroed pages"])
def test_a_damaged_file_is_a_corrupt_error_naming_the_path(w, how):
    _filled(w)
    data = w.path / "data.mdb"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        if how == "meta pages":
            f.write(b"\xff" * 8192)
        elif how == "half":
            f.truncate(size // 2)
        elif how == "to zero":
            f.truncate(0)
        else:
            for page in range(2, size // 4096):
                f.seek(page * 4096)
                f.write(b"\xff" * 16 if how == "page headers" else bytes(4096))
    with pytest.raises(RepositoryCorruptError) as err:
        repo = WriteAheadFlowFileRepository(w.path)
        try:  # some damage is only found when the pages are read, as start-up recovery does
            repo.rebuild_claimant_counts()
            list(repo.recover())
        finally:
            repo.close()
    message = str(err.value)
    assert str(w.path) in message and "backup" in message and "move it aside" in message


def test_a_damaged_record_is_found_by_its_checksum(w):
    ffs = _filled(w)
    data = w.path / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = raw.index(b"needle-00042")
    while at >= 0:  # the live record and any stale copy (the journal's pages, freed, keep their bytes)
        raw[at + 7] ^= 0x01
        at = raw.find(b"needle-00042", at + 1)
    data.write_bytes(bytes(raw))
    repo = WriteAheadFlowFileRepository(w.path)
    try:
        with pytest.raises(RepositoryCorruptError, match=f"{ffs[42].uuid}.*checksum"):
            list(repo.recover())
        assert repo.claimant_count(R1) == 300  # a damaged record does not stop reading the rest
        # a commit is decided in the journal; applying it needs the damaged record, so every
        # read from then on says which record is damaged (and the journal keeps the commit)
        repo.commit([], [ffs[42].uuid])
        with pytest.raises(RepositoryCorruptError, match=f"{ffs[42].uuid}.*checksum"):
            repo.claimant_count(R1)
        with pytest.raises(RepositoryCorruptError, match=f"{ffs[42].uuid}.*checksum"):
            repo.checkpoint()
    finally:
        repo.close()


def _poke(path: Path, db_name: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=env.open_db(db_name, txn=txn))
    env.close()


def test_a_newer_format_version_asks_for_an_upgrade(w):
    w.repo.close()
    newer = FORMAT_VERSION + 1
    _poke(w.path, b"meta", b"format_version", bytes([newer]))
    with pytest.raises(UnsupportedFormatVersionError, match="upgrade flowactors") as err:
        WriteAheadFlowFileRepository(w.path)
    assert str(w.path) in str(err.value) and err.value.found == newer


@pytest.mark.parametrize("version, lacks", [(1, (b"journal", b"state", b"provenance_outbox")),
                                            (2, (b"state", b"provenance_outbox")), (3, (b"provenance_outbox",))])
def test_an_older_repository_opens_with_its_flowfiles_and_gains_what_it_lacks(w, version, lacks):
    """Version 1 had no journal and no state, version 2 no state, version 3 no provenance
    outbox: their tables are current, so adding the empty sub-databases upgrades them."""
    ffs = _filled(w, 5)
    env = lmdb.open(str(w.path), max_dbs=16)
    with env.begin(write=True) as txn:
        for name in lacks:
            txn.drop(env.open_db(name, txn=txn), delete=True)
        txn.put(b"format_version", bytes([version]), db=env.open_db(b"meta", txn=txn))
    env.close()
    repo = w.reopen()
    assert set(everything(repo)) == {f.uuid for f in ffs} and repo.claimant_count(R1) == 5
    repo.commit([], [ffs[0].uuid])
    repo.close()
    env = lmdb.open(str(w.path), max_dbs=16, readonly=True)
    with env.begin() as txn:
        assert txn.get(b"format_version", db=env.open_db(b"meta", txn=txn)) == bytes([4])
    env.close()
    repo = w.reopen()
    assert repo.claimant_count(R1) == 4
    assert repo.get_state("flow/list") == StateMap()
    repo.commit([], [], state=StateChange("flow/list", {"k": "v"}))
    assert w.reopen().get_state("flow/list") == StateMap(0, {"k": "v"})


def test_a_record_of_a_newer_version_asks_for_an_upgrade(w):
    ffs = _filled(w, 3)
    key = rec.uuid_key(ffs[1].uuid)
    env = lmdb.open(str(w.path), max_dbs=16)
    db = env.open_db(b"flowfiles")
    with env.begin(write=True) as txn:
        value = bytearray(txn.get(key, db=db))
        value[0] = 9
        txn.put(key, bytes(value), db=db)
    env.close()
    with WriteAheadFlowFileRepository(w.path) as repo:
        with pytest.raises(UnsupportedFormatVersionError, match="version 9"):
            list(repo.recover())


def test_another_lmdb_environment_is_not_a_repository(tmp_path):
    path = tmp_path / "foreign"
    path.mkdir()
    env = lmdb.open(str(path))
    with env.begin(write=True) as txn:
        txn.put(b"hello", b"world")
    env.close()
    with pytest.raises(RepositoryCorruptError, match="not a FlowFile repository"):
        WriteAheadFlowFileRepository(path)


def test_an_interrupted_creation_leaves_no_half_repository(tmp_path):
    """Creation builds data.mdb in a temporary directory and links it into place."""
    path = tmp_path / "flowfile"
    path.mkdir()
    stale = path / ".creating-999999999-x"  # a creation by a process that died
    stale.mkdir()
    (stale / "data.mdb").write_bytes(b"partial")
    with WriteAheadFlowFileRepository(path) as repo:
        assert repo.stats()["flowfiles"] == 0
    assert not stale.exists()
    assert sorted(p.name for p in path.iterdir()) == ["data.mdb", "lock.mdb"]


def test_a_file_shorter_than_its_last_page_only_by_free_pages_opens(w):
    """LMDB leaves pages that one transaction both allocated and freed at the end of the file
    unwritten, so data.mdb can end before its last page without being damaged: such a file must
    open (every page in use is read to be sure), while one missing a page in use is called
    truncated (``test_a_damaged_file_is_a_corrupt_error_naming_the_path``)."""
    for _ in range(5):
        w.repo.commit([q(w.ff(R1, note="n" * 200)) for _ in range(200)], [])
    before = w.repo.queue_counts()
    w.repo.close()
    env = lmdb.open(str(w.path), max_dbs=10, map_size=1 << 30)
    with env.begin(write=True) as txn:  # 100 overflow pages allocated at the end, freed again
        txn.put(b"scratch", b"v" * 100 * 4096)
        txn.delete(b"scratch")
    last = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    env.close()
    size = (w.path / "data.mdb").stat().st_size
    assert size < last  # what LMDB does: those pages were never written
    repo = WriteAheadFlowFileRepository(w.path)
    try:
        assert repo.queue_counts() == before
        repo.rebuild_claimant_counts()
    finally:
        repo.close()


def test_commits_from_several_threads_while_checkpointing(h):
    import threading

    errors = []
    released = []

    def session(n: int) -> None:
        try:
            for i in range(20):
                resource = ResourceClaim("t", str(n), f"claim-{i}")
                ffs = [make_ff(resource) for _ in range(10)]
                h.repo.commit([q(f, f"q{n}") for f in ffs], [], [resource])
                h.repo.commit([], [f.uuid for f in ffs])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def checkpoints() -> None:
        for _ in range(10):
            released.extend(h.repo.checkpoint())

    threads = [threading.Thread(target=session, args=(n,)) for n in range(3)] + [threading.Thread(target=checkpoints)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    released.extend(h.repo.checkpoint())
    released.extend(h.repo.checkpoint())
    assert sorted(set(released)) == sorted(released)  # each release happens once
    assert set(released) == {ResourceClaim("t", str(n), f"claim-{i}") for n in range(3) for i in range(20)}
    assert h.repo.stats()["flowfiles"] == 0 and h.repo.pending_release() == []
    assert h.repo.rebuild_claimant_counts()["fixed"] == 0


def test_a_commit_of_a_replaced_run_is_refused_and_writes_nothing(h):
    """What fences the executors of a controller that died: once a new start begins its run, a
    commit still made for the old one (by a process Ray has not killed yet) changes nothing."""
    repo = h.repo
    first = repo.begin_run()
    kept = make_ff(None)
    repo.commit([q(kept)], [], run=first)
    second = repo.begin_run()
    assert second == first + 1
    with pytest.raises(RunReplacedError, match=f"run {first} of the flow, but run {second} has started"):
        repo.commit([q(make_ff(None))], [kept.uuid], run=first)
    assert list(everything(repo)) == [kept.uuid]  # neither the new FlowFile nor the removal
    repo.commit([], [kept.uuid], run=second)
    assert everything(repo) == {}
    assert h.reopen().begin_run() == second + 1  # the run is in the file: it survives a restart


_OTHER_PROCESS = """
import sys
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import ContentClaim, QueuedFlowFile, ResourceClaim
repo = WriteAheadFlowFileRepository(sys.argv[1])
repo._journal.FOLD_ENTRIES = 2
moved = ResourceClaim("default", "2", "claim-2")
for queued in list(repo.recover()):
    pass
uuids = sys.argv[2].split(",")
for i, u in enumerate(uuids):
    got = repo.get(u)
    if i % 2:
        repo.commit([], [u])
    else:
        ff = got.flowfile._replace(claim=ContentClaim(moved, i, 10), attributes={"uuid": u, "seen": "child"})
        repo.commit([QueuedFlowFile(ff, "q2")], [], [moved])
repo.close()
"""


def test_commits_of_two_processes_are_applied_in_the_order_they_were_made(w, tmp_path):
    """The journal holds both processes' commits; each applies the other's by decoding them
    (its own it keeps as encoded), in commit order: creations here, then updates and removals
    there, then more here, all applied together or a few at a time, end where one log would."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    w.repo._journal.FOLD_ENTRIES = 1000  # nothing applied here before the other process reads
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(8)]
    for ff in ffs:
        w.repo.commit([q(ff)], [], [R1])
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(w.path), ",".join(f.uuid for f in ffs)],
                          cwd=root, env={"PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    late = w.ff(R3)
    w.repo.commit([q(late)], [ffs[0].uuid])   # ffs[0] was moved by the other process: removed now
    assert len(w.repo._journal.recent) == 1  # the 8 commits the other process applied are no longer held here
    stored = everything(w.repo)
    assert set(stored) == {f.uuid for f in ffs[2::2]} | {late.uuid}
    assert all(stored[f.uuid][0] == "q2" and stored[f.uuid][1].attributes["seen"] == "child" for f in ffs[2::2])
    assert (w.repo.claimant_count(R1), w.repo.claimant_count(R2), w.repo.claimant_count(R3)) == (0, 3, 1)
    assert w.repo.queue_counts() == {"q2": 3, "q1": 1}
    assert w.repo.stats()["unknown_removals"] == 0
    assert w.repo.rebuild_claimant_counts()["fixed"] == 0
    assert w.repo.checkpoint() == [R1]


def test_while_applying_fails_commits_go_on_and_what_a_process_holds_stays_bounded(w):
    """Commits go on into the journal while applying it is put off (as after a failure); the
    process holds at most twice FOLD_ENTRIES of its commits as encoded, and applying the long
    journal later, part by part, decodes the rest: nothing is lost or applied twice."""
    w.repo._journal.FOLD_ENTRIES = 4
    w.repo._journal.retry_at = float("inf")   # as when applying has just failed
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(30)]
    for i, ff in enumerate(ffs):
        w.repo.commit([q(ff)], [ffs[i - 1].uuid] if i % 3 == 2 else [], [R1])
    assert len(w.repo._journal.recent) == 2 * w.repo._journal.FOLD_ENTRIES
    kept = [f.uuid for i, f in enumerate(ffs) if i % 3 != 1]   # every third one removed by the next commit
    assert set(everything(w.repo)) == set(kept)
    assert w.repo.claimant_count(R1) == len(kept) and w.repo.queue_counts() == {"q1": len(kept)}
    assert w.repo.stats()["unknown_removals"] == 0 and not w.repo._journal.recent


def test_what_a_process_holds_as_encoded_is_bounded_in_flowfiles_too(w):
    """Besides twice FOLD_ENTRIES commits, the process holds at most RECENT_UPDATES FlowFile
    updates as encoded; the commits past it are decoded when the journal is applied."""
    w.repo._journal.RECENT_UPDATES = 5   # five commits of at most 3 FlowFiles: the journal is not applied meanwhile
    batches = [[w.ff(R1, offset=10 * i + j) for j in range(3)] for i in range(4)]
    for batch in batches:
        w.repo.commit([q(ff) for ff in batch], [], [R1])
    assert sum(len(entry[0]) for entry in w.repo._journal.recent.values()) == 3   # a second commit of 3 would pass 5
    w.repo.commit([], [batches[0][0].uuid])
    kept = {ff.uuid for batch in batches for ff in batch} - {batches[0][0].uuid}
    assert set(everything(w.repo)) == kept and w.repo.claimant_count(R1) == len(kept)


def _plan(repo):
    """The journal's net effect worked out in a read transaction, as ``Journal.settle`` does first."""
    with repo._environment.read() as txn:
        return repo._journal.plan(txn)


def _write_planned(repo, planned) -> None:
    with repo._environment.write("applying the journal") as txn:
        repo._journal.fold(txn, planned)


def test_a_fold_worked_out_before_its_transaction_also_applies_what_came_in_meanwhile(w):
    """Applying the journal works out its net effect outside LMDB's writer lock, in a read
    transaction; the commits made between that and the write transaction (updates, moves and
    removals of FlowFiles the plan saw, new ones) are applied after it, in the same transaction."""
    w.repo._journal.FOLD_ENTRIES = 1000  # nothing applied by the commits themselves
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(6)]
    for ff in ffs:
        w.repo.commit([q(ff)], [], [R1])
    w.repo.commit([], [ffs[0].uuid])
    planned = _plan(w.repo)
    assert (planned.first, planned.last) == (1, 7)
    moved = ffs[1]._replace(claim=ContentClaim(R2, 0, 10), attributes={"uuid": ffs[1].uuid, "seen": "later"})
    late = w.ff(R3)
    w.repo.commit([q(moved, "q2"), q(late)], [ffs[2].uuid], [R2, R3])
    _write_planned(w.repo, planned)
    with w.repo._environment.read() as txn:
        assert txn.stat(w.repo._environment.journal)["entries"] == 0 and not w.repo._journal.recent
    stored = everything(w.repo)
    assert set(stored) == {ffs[1].uuid, *(f.uuid for f in ffs[3:]), late.uuid}
    assert stored[ffs[1].uuid][0] == "q2" and stored[ffs[1].uuid][1].attributes["seen"] == "later"
    assert (w.repo.claimant_count(R1), w.repo.claimant_count(R2), w.repo.claimant_count(R3)) == (3, 1, 1)
    assert w.repo.queue_counts() == {"q1": 4, "q2": 1}
    assert w.repo.stats()["unknown_removals"] == 0
    assert w.repo.rebuild_claimant_counts()["fixed"] == 0


def test_a_fold_worked_out_before_the_tables_changed_is_dropped(w):
    """A plan is written only while the journal still starts where it started: here a swap
    registration applied the journal and moved records in between, so the plan (which would
    count every claimant twice and bring back a removed FlowFile) is dropped and the journal
    applied in the write transaction itself."""
    w.repo._journal.FOLD_ENTRIES = 1000
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(4)]
    for ff in ffs:
        w.repo.commit([q(ff)], [], [R1])
    planned = _plan(w.repo)
    w.repo.register_swap_file("q1", "swap-1", 2, 20, ffs[:2])
    w.repo.commit([], [ffs[3].uuid])
    _write_planned(w.repo, planned)
    assert set(everything(w.repo)) == {f.uuid for f in ffs[:3]}
    assert w.repo.claimant_count(R1) == 3
    assert w.repo.queue_counts() == {"q1": 1, "swap:swap-1": 2}
    assert w.repo.rebuild_claimant_counts()["fixed"] == 0


def test_where_another_process_applies_the_journal_commits_apply_it_only_past_twice_its_bounds(w):
    """An executor's commits on Ray leave the journal to the FlowFile repository's service
    (``applied_elsewhere``) and keep none of their entries as encoded; should that service stop,
    they apply it themselves at twice the bounds, so the journal stays bounded."""
    w.repo._journal.FOLD_ENTRIES = 4
    w.repo.applied_elsewhere = True
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(8)]
    for ff in ffs[:7]:
        w.repo.commit([q(ff)], [], [R1])
    with w.repo._environment.read() as txn:
        assert txn.stat(w.repo._environment.journal)["entries"] == 7 and not w.repo._journal.recent
    assert w.repo.apply_if_long() is True   # what the service's thread calls: the first part, 4 entries
    with w.repo._environment.read() as txn:
        assert txn.stat(w.repo._environment.journal)["entries"] == 3
    assert w.repo.apply_if_long() is False  # 3 is below the bound
    for ff in ffs[7:]:
        w.repo.commit([q(ff)], [], [R1])
    assert set(everything(w.repo)) == {f.uuid for f in ffs} and w.repo.claimant_count(R1) == 8
    w.repo._journal.FOLD_ENTRIES, w.repo._journal.retry_at = 1, 0.0
    for i in range(8, 10):
        w.repo.commit([q(w.ff(R1, offset=i, qindex=i))], [], [R1])
    with w.repo._environment.read() as txn:   # the second commit reached twice the bound (2) and applied it
        assert txn.stat(w.repo._environment.journal)["entries"] == 0


def test_a_commit_leaves_the_journal_to_the_thread_of_its_process_already_applying_it(w):
    """An executor's tasks commit through one instance at once; while one of them applies the
    journal, the others' commits go on without starting an application of their own (it would
    plan the same part and be dropped, or wait for the writer lock behind it)."""
    w.repo._journal.FOLD_ENTRIES = 2
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(4)]
    with w.repo._journal.applying:  # as a task thread in ``Journal.apply_after_commit`` holds it
        for ff in ffs[:3]:
            w.repo.commit([q(ff)], [], [R1])
        with w.repo._environment.read() as txn:
            assert txn.stat(w.repo._environment.journal)["entries"] == 3  # past the bound, not applied
    w.repo.commit([q(ffs[3])], [], [R1])  # nobody applying: this one applies it
    with w.repo._environment.read() as txn:
        assert txn.stat(w.repo._environment.journal)["entries"] == 0
    assert set(everything(w.repo)) == {f.uuid for f in ffs} and w.repo.claimant_count(R1) == 4


def test_applying_for_others_writes_only_what_it_worked_out_and_nothing_when_another_applied_first(w, monkeypatch):
    """``apply_if_long`` (the FlowFile repository service's thread) writes only the part it
    worked out in its read transaction: the commits made meanwhile wait for the next look, and
    when another process applied the journal meanwhile it writes nothing, never decoding or
    applying entries while it holds the writer lock."""
    w.repo._journal.FOLD_ENTRIES = 4
    w.repo.applied_elsewhere = True
    ffs = [w.ff(R1, offset=i, qindex=i) for i in range(8)]
    for ff in ffs[:5]:
        w.repo.commit([q(ff)], [], [R1])
    plan = w.repo._journal.plan

    def meanwhile(txn):
        planned = plan(txn)
        w.repo.commit([q(ffs[5])], [ffs[0].uuid], [R1])   # while the plan is worked out
        return planned

    monkeypatch.setattr(w.repo._journal, "plan", meanwhile)
    assert w.repo.apply_if_long() is True
    with w.repo._environment.read() as txn:
        assert txn.stat(w.repo._environment.journal)["entries"] == 2   # the fifth commit and the one made meanwhile

    def another_applies_first(txn):
        planned = plan(txn)
        with w.repo._environment.write("applying the journal") as other:   # as another process would, between
            w.repo._journal.fold(other)                                 # the read and the write transaction
        return planned

    w.repo.commit([q(ffs[6])], [], [R1])
    w.repo.commit([q(ffs[7])], [], [R1])
    monkeypatch.setattr(w.repo._journal, "plan", another_applies_first)
    assert w.repo.apply_if_long() is False
    monkeypatch.undo()
    assert set(everything(w.repo)) == {f.uuid for f in ffs[1:]} and w.repo.claimant_count(R1) == 7
    assert w.repo.queue_counts() == {"q1": 7} and w.repo.rebuild_claimant_counts()["fixed"] == 0


def test_four_batches_of_a_pipeline_at_batch_10000_pass_through_one_window(w, monkeypatch):
    """Three processors at batch 10,000 (create, update into another queue, remove), their
    commits interleaved as a pipeline's are, four batches (about 19 MB of journal): every
    FlowFile is created and removed inside one window of FOLD_BYTES, so none is written to the
    record and order tables, only to the journal. At 8 MiB the journal was applied at the fifth
    commit, and the second batch (created and updated by then) was written and deleted again
    (docs/performance.md)."""
    written = []
    record_of = rec.update_record
    monkeypatch.setattr(rec, "update_record", lambda update: written.append(update[0]) or record_of(update))
    batches = [[w.ff(R1, offset=10 * j, path="./", mime="text/plain") for j in range(10_000)] for _ in range(4)]
    for i in range(len(batches) + 2):   # stage k handles batch i - k
        if i - 2 >= 0:
            w.repo.commit([], [ff.uuid for ff in batches[i - 2]])
        if 0 <= i - 1 < len(batches):
            w.repo.commit([q(ff.with_attributes({"seen": "yes"}), "q2") for ff in batches[i - 1]], [])
        if i < len(batches):
            w.repo.commit([q(ff) for ff in batches[i]], [], [R1])
    assert w.repo.queue_counts() == {} and not everything(w.repo)
    assert written == [] and w.repo.claimant_count(R1) == 0


# --- processor state ---------------------------------------------------------------------------


def test_state_is_written_in_the_commit_and_survives_a_reopen(h):
    assert h.repo.get_state("flow/list") == StateMap(-1, {})
    a = h.ff(R1)
    h.repo.commit([q(a)], [], [], state=StateChange("flow/list", {"offset": "7"}))
    h.repo.commit([], [], state=StateChange("flow/other", {"x": "1"}))  # a commit with state only
    h.repo.commit([], [], state=StateChange("flow/list", {"offset": "9"}, expected=0))
    repo = h.reopen()
    assert repo.get_state("flow/list") == StateMap(1, {"offset": "9"})
    assert {c: repo.get_state(c) for c in repo.state_ids()} == {"flow/list": StateMap(1, {"offset": "9"}),
                                                                 "flow/other": StateMap(0, {"x": "1"})}
    assert set(everything(repo)) == {a.uuid}
    repo.commit([], [], state=StateChange("flow/list", {}))  # a clear: empty, and the version grows
    assert repo.get_state("flow/list") == StateMap(2, {})


def test_a_state_change_at_a_stale_version_refuses_the_whole_commit(h):
    h.repo.commit([], [], state=StateChange("flow/list", {"offset": "1"}))
    a = h.ff(R1)
    with pytest.raises(StateConflictError, match="flow/list is at version 0, not 5") as err:
        h.repo.commit([q(a)], [], [R1], state=StateChange("flow/list", {"offset": "2"}, expected=5))
    assert (err.value.expected, err.value.current) == (5, 0)
    repo = h.reopen()
    assert everything(repo) == {} and repo.claimant_count(R1) == 0  # nothing of the commit was written
    assert repo.get_state("flow/list") == StateMap(0, {"offset": "1"})
    with pytest.raises(StateConflictError):  # never stored is version -1
        repo.commit([], [], state=StateChange("flow/new", {"a": "b"}, expected=0))
    repo.commit([], [], state=StateChange("flow/new", {"a": "b"}, expected=-1))
    assert repo.get_state("flow/new") == StateMap(0, {"a": "b"})


def test_state_holds_strings_and_bookmarks_only(h):
    with pytest.raises(ValueError, match="strings only"):
        h.repo.commit([], [], state=StateChange("flow/list", {"n": 1}))
    with pytest.raises(ValueError, match="bookmarks"):
        h.repo.commit([], [], state=StateChange("flow/list", {"big": "x" * (rec.MAX_STATE_BYTES + 1)}))
    assert h.repo.get_state("flow/list") == StateMap()


@pytest.mark.parametrize("damage, error, message, header_ok", [
    (lambda v: v[:5], RepositoryCorruptError, "state of flow/list.*too short", False),
    (lambda v: v[:9] + b"{not json", RepositoryCorruptError, "state of flow/list.*not valid JSON", True),
    (lambda v: v[:9] + b'{"a": 1}', RepositoryCorruptError, "state of flow/list.*object of strings", True),
    (lambda v: bytes([7]) + v[1:], UnsupportedFormatVersionError, "version 7", None),  # newer: never overwritten
])
def test_a_damaged_state_value_gives_a_clear_error_and_a_blind_write_repairs_it(w, damage, error, message,
                                                                                 header_ok):
    w.repo.commit([], [], state=StateChange("flow/list", {"a": "b"}))
    w.repo.close()
    env = lmdb.open(str(w.path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"state", txn=txn)
        txn.put(b"flow/list", damage(txn.get(b"flow/list", db=db)), db=db)
    env.close()
    repo = w.reopen()
    with pytest.raises(error, match=message):
        repo.get_state("flow/list")
    if not header_ok:  # a compare-and-set needs the stored version, which is gone
        with pytest.raises(error, match=message):
            repo.commit([], [], state=StateChange("flow/list", {"a": "c"}, expected=0))
    if header_ok is None:  # a newer release's value: no write of this one replaces it
        with pytest.raises(error, match=message):
            repo.commit([], [], state=StateChange("flow/list", {"a": "c"}))
        return
    repo.commit([], [], state=StateChange("flow/list", {"a": "c"}))  # set / clear: how it is repaired
    assert repo.get_state("flow/list") == StateMap(1 if header_ok else 0, {"a": "c"})


def _batch(count: int, fill: bytes = b"e"):
    from repositories.provenance.event import EncodedBatch

    return EncodedBatch(b"FAPB" + fill * (10 * count), count, 1_700_000_000_000, 1_700_000_000_000 + count)


def test_a_commits_events_are_kept_in_the_outbox_with_the_commit_under_their_reserved_ids(h):
    """The outbox entry is written in the commit's own transaction: a refused commit reserves
    no ids and keeps no events; entries come back in id order with what was written."""
    repo = h.repo
    a, b = h.ff(R1), h.ff(R1)
    assert repo.commit([q(a)], [], event_batch=_batch(3)) == 0
    repo.reserve_event_ids(2)  # events made outside a session: no outbox entry
    with pytest.raises(ValueError):
        repo.commit([q(b), q(b)], [], event_batch=_batch(4))  # refused: nothing written
    assert repo.commit([q(b)], [a.uuid], event_batch=_batch(1, b"f")) == 5
    entries = repo.outbox_entries()
    assert [(first, entry[:3]) for first, entry in entries] == [
        (0, (3, 1_700_000_000_000, 1_700_000_000_003)), (5, (1, 1_700_000_000_000, 1_700_000_000_001))]
    assert entries[1][1][3] == _batch(1, b"f").data
    assert [first for first, _ in repo.outbox_entries(max_bytes=1)] == [0]  # at least one, then the bound
    assert repo.stats()["provenance_outbox"] == 2 and repo.stats()["next_event_id"] == 6
    assert repo.remove_from_outbox([0, 99]) == 1
    assert [first for first, _ in h.reopen().outbox_entries()] == [5]  # durable like the commit


def test_a_damaged_outbox_entry_is_named_and_the_others_still_read(w):
    repo = w.repo
    for _ in range(3):
        repo.commit([q(w.ff(R1))], [], event_batch=_batch(2))
    repo.close()
    env = lmdb.open(str(w.path), max_dbs=16)
    db = env.open_db(b"provenance_outbox")
    with env.begin(write=True) as txn:
        key = rec.pack_u64(2)
        value = bytearray(txn.get(key, db=db))
        value[20] ^= 0xFF
        txn.put(key, bytes(value), db=db)
        newer = bytearray(txn.get(rec.pack_u64(4), db=db))
        newer[0] = 9
        txn.put(rec.pack_u64(4), bytes(newer), db=db)
    env.close()
    entries = w.reopen().outbox_entries()
    assert entries[0][0] == 0 and entries[0][1][0] == 2
    assert entries[1][0] == 2 and "event id 2 is damaged: provenance outbox entry checksum" in entries[1][1]
    assert entries[2][0] == 4 and "record version 9" in entries[2][1]


def test_a_stream_outlives_its_dropped_repository_and_keeps_the_log_its_own(tmp_path):
    """``recover`` and ``iter_queue`` hold their repository while they are read: dropping it
    mid-stream neither breaks the stream nor frees the log for a second instance of this process;
    a repository dropped unread lets go of its log at once (no reference cycle keeps it)."""
    repo = WriteAheadFlowFileRepository(tmp_path / "flowfile")
    repo.commit([QueuedFlowFile(make_ff(None), "q"), QueuedFlowFile(make_ff(None), "q")], [])
    recovering, paging = repo.recover(batch_size=1), repo.iter_queue("q", batch_size=1)
    del repo
    assert WriteAheadFlowFileRepository.open_here(tmp_path / "flowfile") is not None
    assert [(q, len(b)) for q, b in recovering] == [("q", 1), ("q", 1)]
    assert [len(b) for b in paging] == [1, 1]
    del recovering, paging
    assert WriteAheadFlowFileRepository.open_here(tmp_path / "flowfile") is None
    dropped = WriteAheadFlowFileRepository(tmp_path / "flowfile")
    del dropped
    assert WriteAheadFlowFileRepository.open_here(tmp_path / "flowfile") is None


#: every call of the FlowFileRepository protocol but close, with arguments it takes
_AFTER_CLOSE = {
    "apply_if_long": (), "begin_run": (), "checkpoint": (), "claimant_count": (R1,), "commit": ([], []),
    "get_state": ("c",), "is_referenced": (R1,), "iter_queue": ("q",), "last_key": ("q",),
    "outbox_entries": (), "page": ("q", None, None, 1), "queue_counts": (), "queue_sizes": (),
    "raise_event_ids": (1,), "rebuild_claimant_counts": (), "recover": (),
    "register_swap_file": ("q", "swap-1", 1, 1), "remove_from_outbox": ([0],), "rename_queue": ("q", "r"),
    "reserve_event_ids": (1,), "reserve_ids": (1,), "state_ids": (), "stats": (), "swap_files": (),
    "unregister_swap_file": ("swap-1",),
}


def test_every_call_of_a_closed_repository_says_it_is_closed(h):
    """protocol.py's contract, on both implementations: once closed, every method raises."""
    from repositories.flowfile.protocol import FlowFileRepository

    called = {n for n in vars(FlowFileRepository) if not n.startswith("_") and callable(getattr(FlowFileRepository, n))}
    assert called - {"close"} == set(_AFTER_CLOSE)   # a new method gets a line here
    h.repo.close()
    for name, args in _AFTER_CLOSE.items():
        with pytest.raises(FlowFileRepositoryError, match="closed"):
            result = getattr(h.repo, name)(*args)
            if name in ("iter_queue", "recover"):
                next(iter(result))
