"""Group commit: the sessions of every task in one executor reach the repositories together.

The write-ahead log is written in the executor's own process: LMDB serializes write transactions
across processes (and frees the lock of a writer that died), so each session's transaction runs
here, without an actor call or pickling its records (bench scenario 10's way of sampling put 17 %
of the busiest executor's samples in that call's pickling; docs/performance.md). The
repository actor keeps what needs one owner: opening and recovery, checkpoints, the swap
registry, paging queues in.

Provenance goes to its actor, grouped: ``GroupLog`` gathers the commits that arrive while the
previous group is being written and sends their events in one ``register_batches`` call (one encoded
batch a commit), as databases do with group commit. What stays exactly as with one call per session
(``DirectLog``): each session is its own LMDB transaction, refused or accepted alone (a refused one
raises ``CommitError`` in its own task, which rolls back only that session); a session's task waits
until its commit is in the log before it delivers anything; provenance is recorded after the log
accepted, never before. A group never waits for more commits to arrive: the first commit goes out at
once, and later ones ride along with whatever queued up behind it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import ray

from flowactors.engine.backend import refused
from flowactors.engine.metrics import FlowFileRepositoryMetrics
from flowactors.engine.transport import Link, call_now
from flowactors.sdk.session import CommitBatch, CommitError
from repositories.flowfile import WriteAheadFlowFileRepository
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
        self._ready = threading.Condition()
        self._closed = False
        self.unrecorded: list[EncodedBatch] = []  # events provenance did not take
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def record(self, batch: CommitBatch) -> list[Any]:
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self._ready:
            if self._closed:
                raise CommitError("the executor is stopping; the commit was not written")
            self._waiting.append((batch, done))
            self._ready.notify()
        return done.result()  # CommitError, or the pending provenance call

    def reserve_ids(self, count: int) -> int:
        return self.wal.reserve_ids(count)

    def _record_events(self, encoded: EncodedBatch) -> Any:
        """Send events to provenance; if that call fails, keep them in ``unrecorded`` to send
        again once provenance is back (``resend``): a lost provenance process costs no event
        of a commit the log accepted (at worst one recorded twice, if it died after writing)."""
        pending = self.provenance_repository.call("register_batches", [encoded])
        future = pending.future() if isinstance(pending, ray.ObjectRef) else pending
        future.add_done_callback(lambda f: f.exception() is not None and self.unrecorded.append(encoded))
        return pending

    def resend(self, unrecorded: list[EncodedBatch]) -> None:
        """Send events another log could not (``unrecorded`` of the log this one replaces)."""
        if unrecorded and self.provenance_repository is not None:
            call_now(self.provenance_repository, "register_batches", unrecorded)

    def close(self) -> None:
        """Write what is waiting, then stop the thread (later commits are refused)."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(30)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return
                group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
            self._write(group)

    def _write(self, group: list[tuple[CommitBatch, concurrent.futures.Future]]) -> None:
        reasons: list[str | None] = []
        for batch, _ in group:  # each its own transaction: one refused does not touch the others
            try:
                self.wal.commit(batch.updates, batch.removals, batch.new_claims, run=self.run)
            except Exception as err:  # nothing written: this session rolls back
                reasons.append(f"{type(err).__name__}: {err}")
                continue
            reasons.append(None)
        written = reasons.count(None)
        if written:
            self.metrics.committed(written)
        events = [e for (b, _), reason in zip(group, reasons) if reason is None for e in b.events]
        provenance: list[Any] = []
        if self.provenance_repository is not None and events:
            provenance = [self._record_events(encode_batch(events))]
        for (_, done), reason in zip(group, reasons):
            if reason is None:
                done.set_result(provenance)
            else:
                done.set_exception(refused(reason))
