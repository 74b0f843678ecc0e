"""Group commit: the sessions of every task in one executor reach the repositories together.

The write-ahead log is written in the executor's own process: LMDB serializes write transactions
across processes (and frees the lock of a writer that died), so each session's transaction runs
here, without an actor call or pickling its records (bench scenario 10's way of sampling put 17 %
of the busiest executor's samples in that call's pickling; docs/performance.md). The
repository actor keeps what needs one owner: opening and recovery, checkpoints, the swap
registry, paging queues in.

Provenance goes to its actor, grouped, and **no task waits for it**: each session's transaction
also reserves its events' ids (``commit(events=...)``), so ids follow the order the log puts
commits in, across every executor, and the provenance repository shows them in that order
(``register_numbered``) whenever they arrive. ``GroupLog`` gathers the commits that arrive while
the previous group is being written and sends their events in one call (one encoded batch a
commit), as databases do with group commit. A call that fails keeps its events in ``unrecorded``
(sent again by the next log, after the repair that follows); events that came after provenance
gave their ids up get new ids and go again. ``close`` waits for every call still on its way.

What stays exactly as with one call per session (``DirectLog``): each session is its own LMDB
transaction, refused or accepted alone (a refused one raises ``CommitError`` in its own task, which
rolls back only that session); a session's task waits until its commit is in the log before it
delivers anything; provenance is recorded after the log accepted, never before. A group never
waits for more commits to arrive: the first commit goes out at once, and later ones ride along
with whatever queued up behind it.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import ray

from flowactors.engine.backend import Numbered, refused, register_numbered_now
from flowactors.engine.metrics import FlowFileRepositoryMetrics
from flowactors.engine.transport import Link
from flowactors.sdk.session import CommitBatch, CommitError
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import StateMap
from repositories.provenance.event import EncodedBatch, encode_batch

#: at most this many sessions in one group (bounds the size of one provenance call)
MAX_GROUP = 64


class GroupLog:
    """The ``Log`` that every task of one executor shares (see the module docstring)."""

    def __init__(self, wal: WriteAheadFlowFileRepository, provenance_repository: Link | None,
                 name: str = "group-commit", flow: str = "", run: int | None = None):
        self.wal = wal  # open in this process (``WriteAheadFlowFileRepository.open_shared``)
        #: the log's run these commits belong to: once a newer start began another (a controller
        #: that died and came back while this process lives on), they are refused
        self.run = run
        self.provenance_repository = provenance_repository
        self.metrics = FlowFileRepositoryMetrics(flow)
        self._waiting: list[tuple[CommitBatch, concurrent.futures.Future]] = []
        self._late: list[EncodedBatch] = []  # events provenance answered late: new ids, sent again
        self._sending: set[concurrent.futures.Future] = set()  # provenance calls not answered yet
        self._ready = threading.Condition()
        self._closed = False
        self.unrecorded: list[Numbered] = []  # events provenance did not take
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

    def _send(self, numbered: list[Numbered]) -> None:
        """Send events to provenance without waiting (see the module docstring)."""
        pending = self.provenance_repository.call("register_numbered", numbered)
        future = pending.future() if isinstance(pending, ray.ObjectRef) else pending
        with self._ready:
            self._sending.add(future)
        future.add_done_callback(lambda f: self._answered(f, numbered))

    def _answered(self, future: concurrent.futures.Future, numbered: list[Numbered]) -> None:
        with self._ready:
            self._sending.discard(future)
            if future.exception() is not None:  # a lost provenance process costs no event
                self.unrecorded.extend(numbered)
            elif future.result():
                self._late.extend(numbered[i][1] for i in future.result())
            self._ready.notify_all()

    def resend(self, unrecorded: list[Numbered]) -> None:
        """Send events another log could not (``unrecorded`` of the log this one replaces)."""
        if unrecorded and self.provenance_repository is not None:
            register_numbered_now(self.wal.reserve_event_ids, self.provenance_repository, unrecorded)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is waiting, wait for provenance's answers, then stop the thread (later
        commits are refused); events provenance could not take stay in ``unrecorded``."""
        with self._ready:
            self._closed = True
            self._ready.notify()
            deadline = time.monotonic() + timeout
            while (self._waiting or self._late or self._sending) and self._thread.is_alive():
                if not self._ready.wait(max(0.0, deadline - time.monotonic())):
                    break
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._late and not (self._closed and not self._sending):
                    self._ready.wait()
                if not self._waiting and not self._late:
                    return
                group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
                late, self._late = self._late, []
            self._write(group, late)

    def _write(self, group: list[tuple[CommitBatch, concurrent.futures.Future]], late: list[EncodedBatch]) -> None:
        reasons: list[Exception | None] = []
        numbered: list[Numbered] = []
        recording = self.provenance_repository is not None
        for batch, _ in group:  # each its own transaction: one refused does not touch the others
            events = encode_batch(batch.events) if recording and batch.events else None
            try:
                first = self.wal.commit(batch.updates, batch.removals, batch.new_claims,
                                        events.count if events else 0, run=self.run, state=batch.state)
            except Exception as err:  # nothing written: this session rolls back
                reasons.append(err)
                continue
            reasons.append(None)
            if first is not None:
                numbered.append((first, events))
        written = reasons.count(None)
        if written:
            self.metrics.committed(written)
        for (_, done), reason in zip(group, reasons):
            if reason is None:
                done.set_result(None)
            else:
                done.set_exception(refused(reason))
        for encoded in late:
            try:
                numbered.append((self.wal.reserve_event_ids(encoded.count), encoded))
            except Exception:  # the log is out of reach: kept, sent by the next log
                with self._ready:
                    self.unrecorded.append((-1, encoded))
        if numbered:
            self._send(numbered)

