"""The executor's log: every task of one executor writes its sessions to the write-ahead log
itself, in its own thread, in the executor's own process.

The write-ahead log is written in the executor's process: LMDB serializes write transactions
across processes (and frees the lock of a writer that died), so each session's transaction runs
here, without an actor call or pickling its records (what that saves: docs/performance.md). The
repository actor keeps what needs one owner: opening and recovery, checkpoints, the swap
registry, paging queues in, applying the journal.

Each commit runs in the task's own thread: no hand-over to a log thread and back (two wake-ups,
each waiting for the GIL; docs/performance.md, decision "who writes a commit to the log in an
executor"). Tasks that commit at once take turns at the log's writer lock.

Provenance costs the commit **no call at all**: each session's transaction reserves its events'
ids and keeps the encoded events in the log's provenance outbox under the first of them
(``WriteAheadFlowFileRepository.commit(event_batch=...)``). The provenance repository's service
takes them from there in id order, many commits a read (``ProvenanceRepositoryService.follow_log``),
and deletes them once its journal has them. So ids follow the order the log puts commits in
across every executor, a commit's events are exactly as durable as the commit, and an executor or
provenance process that dies loses none.

Guarantees: each session is its own LMDB transaction, refused or accepted
alone (a refused one raises ``CommitError`` in its own task, which rolls back only that session);
``record`` returns once the commit is in the log, before the task delivers anything, and an
error after that (the commit metric) is logged, never raised: a raise would roll back a written
commit. After ``close`` no commit starts; ``close`` waits for the commits under way (up to its
timeout, and says so when one is still running then).
"""

from __future__ import annotations

import logging
import threading

from flowactors.engine.metrics import FlowFileRepositoryMetrics
from flowactors.sdk.session_contract import CommitBatch, CommitError, StateConflict
from repositories.flowfile import FlowFileRepository, StateConflictError
from repositories.model import StateMap
from repositories.provenance.event import encode_batch

log = logging.getLogger(__name__)


def refused(err: BaseException) -> CommitError:
    """The error a session gets when the FlowFile repository did not take its commit: a
    ``StateConflict`` when its state change lost a race with another task's."""
    error = StateConflict if isinstance(err, StateConflictError) else CommitError
    return error(f"the FlowFile repository refused the commit: {type(err).__name__}: {err}")


class LogWriter:
    """The ``Log`` that every task of one executor shares (see the module docstring);
    ``recording``: provenance is on, so commits keep their events in the log's outbox; ``flow``:
    the flow whose commit metric it counts (None: no metric, as in the test runner)."""

    def __init__(self, wal: FlowFileRepository, recording: bool, flow: str | None = None, run: int | None = None):
        self.wal = wal  # open in this process (``WriteAheadFlowFileRepository.open_shared``; in memory: the test runner)
        self.recording = recording
        #: the log's run these commits belong to: once a newer start began another (a controller
        #: that died and came back while this process lives on), they are refused
        self.run = run
        self.metrics = FlowFileRepositoryMetrics(flow) if flow is not None else None
        self._closed = False
        self._writing = 0  # commits under way
        self._state = threading.Condition()

    def record(self, batch: CommitBatch) -> None:
        """Write one session's commit, in this thread; ``CommitError`` if the log refused it."""
        with self._state:
            if self._closed:
                raise CommitError("the executor is stopping; the commit was not written")
            self._writing += 1
        try:
            try:
                events = encode_batch(batch.events) if self.recording and batch.events else None
                self.wal.commit(batch.updates, batch.removals, batch.new_claims, run=self.run,
                                state=batch.state, event_batch=events)
            except Exception as err:  # nothing written: this session rolls back
                raise refused(err) from err
            if self.metrics is not None:
                try:  # the commit is in the log: nothing after it may raise
                    self.metrics.committed()
                except Exception as err:
                    self._not_sent(err)
        finally:
            with self._state:
                self._writing -= 1
                if not self._writing:
                    self._state.notify_all()

    def reserve_ids(self, count: int) -> int:
        return self.wal.reserve_ids(count)

    def get_state(self, component_id: str) -> StateMap:
        return self.wal.get_state(component_id)

    def close(self, timeout: float = 30.0) -> None:
        """Take no more commits, wait up to ``timeout`` seconds for those under way, send the
        held commit count."""
        with self._state:
            self._closed = True
            if not self._state.wait_for(lambda: not self._writing, timeout):
                log.warning("%d commit(s) still under way %g s after the executor's log closed; "
                            "each ends written or refused as its task is told", self._writing, timeout)
        if self.metrics is not None:
            try:
                self.metrics.flush()
            except Exception as err:
                self._not_sent(err)

    @staticmethod
    def _not_sent(err: Exception) -> None:
        log.warning("the executor's commit count could not reach its metric (tried again): %s", err)
