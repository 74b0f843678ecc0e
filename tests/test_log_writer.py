"""The executor's log (flowactors/engine/log_writer.py) over the real LMDB log, written from the
executor's process by each task's own thread: sessions sent together are accepted or refused one
by one; a log that cannot write refuses them; close waits for the commits under way. The test
runner commits through the same log (``flowactors.testing.LocalBackend``)."""

from __future__ import annotations

import concurrent.futures
import os
import threading

import pytest

from flowactors.engine.log_writer import LogWriter
from flowactors.sdk.session_contract import CommitBatch, CommitError
from flowactors.sdk.settings import Settings
from repositories.flowfile.journal import Journal
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis


def flowfile(n: int, uuid: str | None = None) -> FlowFile:
    now = now_millis()
    return FlowFile(n, uuid or new_flowfile_uuid(), {"n": str(n)}, None, now, now, queue_date=now, queue_index=n)


@pytest.fixture
def wal(tmp_path):
    repository = WriteAheadFlowFileRepository(tmp_path / "flowfile")
    yield repository
    repository.close()


def test_sessions_sent_together_are_accepted_or_refused_one_by_one(wal):
    twice = new_flowfile_uuid()
    good = [CommitBatch(updates=[QueuedFlowFile(flowfile(i), "q")]) for i in range(20)]
    bad = CommitBatch(updates=[QueuedFlowFile(flowfile(100, twice), "q")], removals=[twice])
    log = LogWriter(wal, False)
    start = threading.Barrier(len(good) + 1)

    def commit(batch):
        start.wait()  # all at once, so that they take turns at the writer lock
        return log.record(batch)

    with concurrent.futures.ThreadPoolExecutor(len(good) + 1) as pool:
        results = [pool.submit(commit, b) for b in [*good[:10], bad, *good[10:]]]
    log.close()
    outcomes = [r.exception() for r in results]
    assert isinstance(outcomes[10], CommitError) and "more than once" in str(outcomes[10])
    assert [o for i, o in enumerate(outcomes) if i != 10] == [None] * 20
    assert wal.queue_counts() == {"q": 20}  # the refused one wrote nothing
    with pytest.raises(CommitError, match="stopping"):
        log.record(good[0])  # a closed log takes nothing more


def test_a_commit_is_written_in_the_tasks_own_thread(wal, monkeypatch):
    """No hand-over to a log thread and back (each a wake-up that waits for the GIL while another
    task computes): the transaction runs in the thread that records the session."""
    log = LogWriter(wal, False)
    writers = []
    commit = wal.commit

    def noted(*args, **kwargs):
        writers.append(threading.current_thread())
        return commit(*args, **kwargs)

    monkeypatch.setattr(wal, "commit", noted)
    log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))
    log.close()
    assert writers == [threading.current_thread()]
    assert wal.queue_counts() == {"q": 1}


def test_close_waits_for_the_commits_under_way_and_takes_no_more(wal, monkeypatch):
    """The executor closes its log before the log's file: a commit under way is written first,
    one that comes later is refused and writes nothing."""
    log = LogWriter(wal, False)
    inside, go_on = threading.Event(), threading.Event()
    commit = wal.commit

    def slow(*args, **kwargs):
        inside.set()
        go_on.wait(10)
        return commit(*args, **kwargs)

    monkeypatch.setattr(wal, "commit", slow)
    writer = threading.Thread(target=log.record, args=(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]),))
    writer.start()
    assert inside.wait(10)
    closing = threading.Thread(target=log.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waiting for the commit under way
    with pytest.raises(CommitError, match="stopping"):
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(2), "q")]))
    go_on.set()
    closing.join(10)
    writer.join(10)
    assert not closing.is_alive() and wal.queue_counts() == {"q": 1}


def test_a_metric_that_fails_after_the_commit_is_written_does_not_fail_the_commit(wal, monkeypatch):
    """Once the log has the commit, nothing may raise into the session: it would roll back (and
    delete the content of) a commit the log keeps."""
    log = LogWriter(wal, False, flow="f")  # an executor's: it counts its commits

    def fails(count=1):
        raise RuntimeError("the metrics agent is gone")

    monkeypatch.setattr(log.metrics, "committed", fails)
    log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))  # no error
    log.close()
    assert wal.queue_counts() == {"q": 1}


def test_events_that_cannot_be_encoded_refuse_the_session_and_write_nothing(wal, monkeypatch):
    import flowactors.engine.log_writer as executor_log

    def fails(events):
        raise ValueError("an attribute value is not text")

    monkeypatch.setattr(executor_log, "encode_batch", fails)
    log = LogWriter(wal, True)
    ff = flowfile(1)
    with pytest.raises(CommitError, match="refused the commit: ValueError: an attribute value is not text"):
        log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=_created(ff)))
    log.close()
    assert wal.queue_counts() == {}


def test_a_log_that_cannot_write_refuses_the_session(tmp_path):
    closed = WriteAheadFlowFileRepository(tmp_path / "flowfile")
    closed.close()
    log = LogWriter(closed, False)
    with pytest.raises(CommitError, match="the FlowFile repository refused the commit: .*is closed") as refused:
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))
    assert type(refused.value) is CommitError  # refused, not a state conflict: the session rolls back
    log.close()


def test_an_executor_log_of_a_replaced_run_refuses_its_sessions(wal):
    """An executor that outlives its controller (Ray has not killed it yet) commits under the
    run it was wired with; once the new controller began its run, those sessions are refused and
    roll back, so the log the new run recovered from stays as it read it."""
    old = wal.begin_run()
    log = LogWriter(wal, False, run=old)
    log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))
    wal.begin_run()  # the new controller's start
    with pytest.raises(CommitError, match="has started since"):
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(2), "q")]))
    log.close()
    assert wal.queue_counts() == {"q": 1}


def test_two_processes_write_one_log_and_a_writer_killed_mid_transaction_blocks_nobody(wal, tmp_path):
    """What the executors rely on: another process commits to the same log, and one SIGKILLed
    while it holds LMDB's write lock leaves nothing of its transaction and no lock behind."""
    import signal
    import subprocess
    import sys
    import textwrap

    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = {sys.path!r}
        from repositories.flowfile import WriteAheadFlowFileRepository
        from repositories.model import FlowFile, QueuedFlowFile
        wal = WriteAheadFlowFileRepository({str(tmp_path / "flowfile")!r}, create=False)
        wal.commit([QueuedFlowFile(FlowFile(1, {new_flowfile_uuid()!r}, {{}}, None, 1, 1, queue_date=1, queue_index=1), "q")], [])
        with wal._environment.write("holding the lock") as txn:
            txn.put(b"x", b"y", db=wal._environment.meta)
            print("holding", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
    log = LogWriter(wal, False)
    log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(2), "q")]))
    log.close()
    assert wal.queue_counts() == {"q": 2}
    with wal._environment.read() as txn:
        assert txn.get(b"x", db=wal._environment.meta) is None  # the killed transaction left nothing


def _created(ff: FlowFile) -> list:
    from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType, event_fields

    return [event_fields(ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=now_millis(),
                                         flowfile_uuid=ff.uuid, component_id="t/p", component_name="p",
                                         component_type="T"))]


def test_events_wait_in_the_log_until_provenance_takes_them_and_a_second_take_adds_none(wal, tmp_path, monkeypatch):
    """A commit's events are kept in the log's outbox in the commit's own transaction, under the
    ids it reserved: no provenance process is needed for the commit to stand. Provenance that
    died after registering them but before removing them from the outbox (its process killed)
    takes them again after its restart, and drops them as already held: each event once."""
    from flowactors.engine.repository_services import ProvenanceRepositoryService

    ffs = [flowfile(1), flowfile(2)]
    log = LogWriter(wal, True)
    for ff in ffs:
        log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=_created(ff)))
    log.close()
    assert wal.get(ffs[0].uuid) is not None and wal.stats()["provenance_outbox"] == 2  # no provenance yet
    assert [first for first, _ in wal.outbox_entries()] == [0, 1]

    def dies(first_ids):
        raise RuntimeError("the process died")

    provenance = ProvenanceRepositoryService(str(tmp_path), Settings())
    provenance.open()
    with monkeypatch.context() as patch:
        patch.setattr(wal, "remove_from_outbox", dies)
        with pytest.raises(RuntimeError, match="died"):
            provenance.follow_log()  # registered, not removed
    assert provenance.repo.stats()["max_event_id"] == 1 and wal.stats()["provenance_outbox"] == 2
    provenance.repo.close()

    restarted = ProvenanceRepositoryService(str(tmp_path), Settings())
    restarted.open()
    assert restarted.follow_log() == {"taken": 2, "problems": []}
    assert [(e.event_id, e.flowfile_uuid) for e in restarted.events(0, 10)] == [(0, ffs[0].uuid), (1, ffs[1].uuid)]
    assert wal.stats()["provenance_outbox"] == 0
    restarted.close()


def test_a_task_does_not_wait_for_provenance_and_provenance_closes_only_with_every_event(wal, tmp_path):
    """``record`` returns once the log has the commit, while provenance is still busy with the
    events before; closing provenance (a flow's stop) takes every event left in the outbox first,
    so a stopped flow's events are all searchable, in the order of their commits."""
    from flowactors.engine.repository_services import ProvenanceRepositoryService

    release = threading.Event()

    class Slow(ProvenanceRepositoryService):
        def register_numbered(self, numbered):
            release.wait(10)
            return super().register_numbered(numbered)

    provenance = Slow(str(tmp_path), Settings())
    provenance.open()
    provenance.follow_log()
    log = LogWriter(wal, True)
    flowfiles = [flowfile(i) for i in range(1, 4)]
    for ff in flowfiles:  # each returns with its events not yet registered
        log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=_created(ff)))
    log.close()
    assert provenance.repo.stats()["max_event_id"] == -1 and wal.stats()["next_event_id"] == 3
    closing = threading.Thread(target=provenance.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()  # taking the events first
    release.set()
    closing.join(10)
    assert not closing.is_alive() and wal.stats()["provenance_outbox"] == 0
    reopened = ProvenanceRepositoryService(str(tmp_path), Settings())
    reopened.open()
    assert [(e.event_id, e.flowfile_uuid) for e in reopened.events(0, 10)] == [
        (i, ff.uuid) for i, ff in enumerate(flowfiles)]
    reopened.close()


def _commit_created(log: LogWriter, n: int) -> list[FlowFile]:
    flowfiles = [flowfile(i) for i in range(1, n + 1)]
    for ff in flowfiles:
        log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=_created(ff)))
    return flowfiles


def test_the_follower_takes_events_on_its_own_within_its_interval(wal, tmp_path):
    """Following the log, provenance takes a commit's events without being asked: the repository
    itself (not a read through the service, which takes first) holds them within a few looks."""
    import time

    from flowactors.engine.repository_services import OUTBOX_LOOK_INTERVAL, ProvenanceRepositoryService

    provenance = ProvenanceRepositoryService(str(tmp_path), Settings())
    provenance.open()
    assert provenance.follow_log() == {"taken": 0, "problems": []}
    log = LogWriter(wal, True)
    _commit_created(log, 3)
    log.close()
    deadline = time.monotonic() + 20 * OUTBOX_LOOK_INTERVAL
    # the events reach the repository first, then the follower empties the outbox: wait for both
    while ((provenance.repo.stats()["max_event_id"] < 2 or wal.stats()["provenance_outbox"])
           and time.monotonic() < deadline):
        time.sleep(OUTBOX_LOOK_INTERVAL / 5)
    assert provenance.repo.stats()["max_event_id"] == 2 and wal.stats()["provenance_outbox"] == 0
    provenance.close()


def test_a_damaged_outbox_entry_is_reported_and_the_others_are_taken(wal, tmp_path):
    from flowactors.engine.repository_services import ProvenanceRepositoryService
    from repositories.flowfile import records as rec

    log = LogWriter(wal, True)
    flowfiles = _commit_created(log, 3)
    log.close()
    db = wal._environment.check_open().open_db(b"provenance_outbox")
    with wal._environment.check_open().begin(write=True) as txn:
        value = bytearray(txn.get(rec.pack_u64(1), db=db))
        value[30] ^= 0xFF
        txn.put(rec.pack_u64(1), bytes(value), db=db)
    provenance = ProvenanceRepositoryService(str(tmp_path), Settings())
    provenance.open()
    taken = provenance.follow_log()
    assert taken["taken"] == 2 and len(taken["problems"]) == 1
    assert "event id 1 is damaged" in taken["problems"][0] and "checksum" in taken["problems"][0]
    provenance.settle()  # id 1 never comes: the event after it becomes visible
    assert [e.flowfile_uuid for e in provenance.events(0, 10)] == [flowfiles[0].uuid, flowfiles[2].uuid]
    assert wal.stats()["provenance_outbox"] == 0  # the damaged one is not read again and again
    provenance.close()


def test_events_whose_ids_provenance_gave_up_are_taken_under_new_ids(wal, tmp_path):
    """Provenance moved past the ids of entries still in the outbox (they were given up): taking
    them gives them fresh ids from the log instead of dropping them."""
    from repositories.provenance import WriteAheadProvenanceRepository
    from repositories.provenance.outbox import take_from_outbox

    log = LogWriter(wal, True)
    flowfiles = _commit_created(log, 2)
    log.close()
    provenance = WriteAheadProvenanceRepository(tmp_path / "provenance")
    provenance.continue_from(10)  # ids 0 and 1 are in the past for it now
    assert take_from_outbox(wal, provenance) == (2, [])
    events = provenance.events(0, 10)
    assert [(e.event_id, e.flowfile_uuid) for e in events] == [(10, flowfiles[0].uuid), (11, flowfiles[1].uuid)]
    assert wal.stats()["next_event_id"] == 12 and wal.stats()["provenance_outbox"] == 0
    provenance.close()


def test_with_always_sync_the_journals_are_fsynced_before_the_outbox_lets_go(wal, tmp_path, monkeypatch):
    from repositories.provenance import WriteAheadProvenanceRepository
    from repositories.provenance.outbox import take_from_outbox

    log = LogWriter(wal, True)
    _commit_created(log, 2)
    log.close()
    provenance = WriteAheadProvenanceRepository(tmp_path / "provenance")
    steps: list[str] = []
    sync, remove = provenance.sync_journals, wal.remove_from_outbox
    monkeypatch.setattr(provenance, "sync_journals", lambda: (steps.append("fsync"), sync())[1])
    monkeypatch.setattr(wal, "remove_from_outbox", lambda firsts: (steps.append("remove"), remove(firsts))[1])
    assert take_from_outbox(wal, provenance, sync=True) == (2, [])
    assert steps == ["fsync", "remove"]
    steps.clear()
    log = LogWriter(wal, True)
    _commit_created(log, 1)
    log.close()
    assert take_from_outbox(wal, provenance) == (1, []) and steps == ["remove"]  # always_sync off: no fsync
    provenance.close()


def test_a_flows_start_reports_a_damaged_outbox_entry_a_killed_run_left(tmp_path):
    """The events a killed run left in the outbox are taken at the next start; a damaged entry
    among them is one of the start's provenance problems (``flowactors run`` warns of them)."""
    from flowactors import Flow
    from flowactors.driver.running import run_flow
    from flowactors.processors import GenerateFlowFile
    from repositories.flowfile import records as rec

    flow = Flow("outbox-left")
    flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1}, auto_terminate=["success"])
    root = tmp_path / "repository"
    run_flow(flow, root, engine="in-process", timeout=60)
    with WriteAheadFlowFileRepository(root / "flowfile") as left:  # what a killed run would leave
        log = LogWriter(left, True)
        for ff in (flowfile(1), flowfile(2)):  # events alone: no FlowFile left in a queue
            log.record(CommitBatch(events=_created(ff)))
        log.close()
        first = left.outbox_entries()[0][0]
        db = left._environment.check_open().open_db(b"provenance_outbox")
        with left._environment.check_open().begin(write=True) as txn:
            value = bytearray(txn.get(rec.pack_u64(first), db=db))
            value[30] ^= 0xFF
            txn.put(rec.pack_u64(first), bytes(value), db=db)
    final = run_flow(flow, root, engine="in-process", timeout=60)
    problems = final["recovery"]["provenance_problems"]
    assert len(problems) == 1 and f"event id {first} is damaged" in problems[0]
    with WriteAheadFlowFileRepository(root / "flowfile") as after:
        assert after.stats()["provenance_outbox"] == 0


def _journal_entries(wal: WriteAheadFlowFileRepository) -> int:
    with wal._environment.read() as txn:  # not stats(), which applies the journal first
        return txn.stat(wal._environment.journal)["entries"]


def test_the_flowfile_repositorys_service_applies_the_journal_for_the_executors(tmp_path, monkeypatch):
    """On Ray the executors' commits leave the journal to the FlowFile repository's service
    (``applied_elsewhere``: they apply it only past twice its bounds); the service's thread
    applies it once it reaches them, without anyone reading."""
    import time

    from flowactors.engine.repository_services import JOURNAL_LOOK_INTERVAL, FlowFileRepositoryService

    monkeypatch.setattr(Journal, "FOLD_ENTRIES", 4)
    service = FlowFileRepositoryService(str(tmp_path), Settings())
    service.open()
    try:
        wal = service.repo
        wal.applied_elsewhere = True  # as an executor's own instance is; here the service's one
        log = LogWriter(wal, False)
        for i in range(6):  # fewer than the 8 at which the commits would apply it themselves
            log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(i), "q")]))
        log.close()
        deadline = time.monotonic() + 40 * JOURNAL_LOOK_INTERVAL
        while _journal_entries(wal) >= 4 and time.monotonic() < deadline:
            time.sleep(JOURNAL_LOOK_INTERVAL / 5)
        assert _journal_entries(wal) < 4
        assert wal.queue_counts() == {"q": 6}
    finally:
        service.close()
    assert not service._applier.alive  # the thread stopped with the service


def _counted_log(wal: WriteAheadFlowFileRepository, min_interval: float) -> tuple[LogWriter, list[int]]:
    """An executor log whose commit counter only lists what it is sent."""
    log = LogWriter(wal, False, flow="f")  # an executor's: it counts its commits
    sent: list[int] = []

    class Counter:
        def inc(self, count, tags):
            sent.append(count)

    log.metrics._commits, log.metrics.min_interval = Counter(), min_interval
    return log, sent


def test_the_logs_commit_count_reaches_its_metric_at_most_every_interval_and_all_of_it_at_close(wal):
    """A Ray metric update costs about what a small commit's transaction does, so the executor log
    sends its commit count at most every ``min_interval`` seconds, and what is held at close."""
    log, sent = _counted_log(wal, 3600.0)
    for i in range(5):
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(i), "q")]))
    assert sent == [1]  # the first at once, the next four held
    log.close()
    assert sent == [1, 4]


def test_the_services_look_applies_a_long_journal_part_after_part_and_an_error_waits_like_a_commits(
        tmp_path, monkeypatch):
    """A look of the FlowFile repository's service applies the journal until it is short again,
    so the executors' commits (which apply it only at twice the bounds) are not left to do it
    under the writer lock when commits come faster than a part a look; after an error it waits
    ``FOLD_RETRY_SECONDS`` before it tries again, as a commit would, instead of every look."""
    import time

    from flowactors.engine.repository_services import JOURNAL_LOOK_INTERVAL, FlowFileRepositoryService
    from repositories.flowfile import FlowFileRepositoryError

    monkeypatch.setattr(Journal, "FOLD_ENTRIES", 4)
    service = FlowFileRepositoryService(str(tmp_path), Settings())
    service.open()
    try:
        service._applier.stop()  # the looks are made here, one at a time
        wal = service.repo
        wal.applied_elsewhere, wal._journal.retry_at = True, float("inf")  # no commit applies it
        for i in range(13):
            wal.commit([QueuedFlowFile(flowfile(i), "q")], [])
        assert _journal_entries(wal) == 13
        service._look_at_journal()
        assert _journal_entries(wal) == 1 and wal.queue_counts() == {"q": 13}

        calls = []

        def fails():
            calls.append(time.monotonic())
            raise FlowFileRepositoryError("the map is full", wal.path)

        monkeypatch.setattr(wal, "apply_if_long", fails)
        service._applier.start()
        time.sleep(20 * JOURNAL_LOOK_INTERVAL)
        assert len(calls) == 1  # then it waits FOLD_RETRY_SECONDS (10 s)
    finally:
        service.close()


def test_an_idle_executor_log_sends_what_its_commits_counted(wal):
    """Held commit counts reach the metric once the log has been idle for ``min_interval``, not
    only at the next commit or at close (a quiet flow's rate would read 0 meanwhile)."""
    import time

    log, sent = _counted_log(wal, 0.05)
    for i in range(3):
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(i), "q")]))
    deadline = time.monotonic() + 5
    while sum(sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sum(sent) == 3  # without a close
    log.close()
