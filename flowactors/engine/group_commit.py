"""Group commit: the sessions of every task in one executor reach the repositories together.

The write-ahead log is written in the executor's own process: LMDB serializes write transactions
across processes (and frees the lock of a writer that died), so each session's transaction runs
here, without an actor call or pickling its records (bench scenario 10's way of sampling put 17 %
of the busiest executor's samples in that call's pickling; docs/performance.md). The
repository actor keeps what needs one owner: opening and recovery, checkpoints, the swap
registry, paging queues in.

Provenance costs the commit **no call at all**: each session's transaction reserves its events'
ids and keeps the encoded events in the log's provenance outbox under the first of them
(``WriteAheadFlowFileRepository.commit(event_batch=...)``). The provenance repository's service
takes them from there in id order, many commits a read (``ProvenanceRepositoryService.follow_log``),
and deletes them once its journal has them. So ids follow the order the log puts commits in
across every executor, a commit's events are exactly as durable as the commit, and an executor or
provenance process that dies loses none (before, an actor call a commit carried them, and a
process killed between the log and that call lost them; docs/performance.md measures the calls).

What stays exactly as with one transaction per session (``DirectLog``): each session is its own
LMDB transaction, refused or accepted alone (a refused one raises ``CommitError`` in its own task,
which rolls back only that session); a session's task waits until its commit is in the log before
it delivers anything. ``GroupLog`` gathers the commits that arrive while the previous group is
being written and writes them one after another on its thread, as databases do with group commit;
a group never waits for more commits to arrive.
"""

from __future__ import annotations

import concurrent.futures
import threading

from flowactors.engine.backend import refused
from flowactors.engine.metrics import FlowFileRepositoryMetrics
from flowactors.sdk.session import CommitBatch, CommitError
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import StateMap
from repositories.provenance.event import encode_batch

#: at most this many sessions in one group
MAX_GROUP = 64


class GroupLog:
    """The ``Log`` that every task of one executor shares (see the module docstring);
    ``recording``: provenance is on, so commits keep their events in the log's outbox."""

    def __init__(self, wal: WriteAheadFlowFileRepository, recording: bool,
                 name: str = "group-commit", flow: str = "", run: int | None = None):
        self.wal = wal  # open in this process (``WriteAheadFlowFileRepository.open_shared``)
        self.recording = recording
        #: the log's run these commits belong to: once a newer start began another (a controller
        #: that died and came back while this process lives on), they are refused
        self.run = run
        self.metrics = FlowFileRepositoryMetrics(flow)
        self._waiting: list[tuple[CommitBatch, concurrent.futures.Future]] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def record(self, batch: CommitBatch) -> None:
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self._ready:
            if self._closed:
                raise CommitError("the executor is stopping; the commit was not written")
            self._waiting.append((batch, done))
            self._ready.notify()
        done.result()  # CommitError if the log refused it

    def reserve_ids(self, count: int) -> int:
        return self.wal.reserve_ids(count)

    def get_state(self, component_id: str) -> StateMap:
        return self.wal.get_state(component_id)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is waiting, then stop the thread (later commits are refused)."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(timeout)
        self.metrics.flush()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    if not self._ready.wait(self.metrics.min_interval):
                        self.metrics.flush()  # idle: what the last commits counted is sent
                if not self._waiting:
                    return
                group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
            self._write(group)

    def _write(self, group: list[tuple[CommitBatch, concurrent.futures.Future]]) -> None:
        written = 0
        for batch, done in group:  # each its own transaction: one refused does not touch the others
            events = encode_batch(batch.events) if self.recording and batch.events else None
            try:
                self.wal.commit(batch.updates, batch.removals, batch.new_claims, run=self.run,
                                state=batch.state, event_batch=events)
            except Exception as err:  # nothing written: this session rolls back
                done.set_exception(refused(err))
                continue
            written += 1
            done.set_result(None)
        if written:
            self.metrics.committed(written)
