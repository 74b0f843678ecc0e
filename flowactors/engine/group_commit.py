"""Group commit: the sessions of every task in one executor reach the repositories together.

Profiling a 60-processor flow on two executors showed a third of the busiest executor's time in
submitting actor calls: two per session commit (the write-ahead log, then provenance), from 30
threads at once. ``GroupLog`` gathers the commits that arrive while the previous group is being
written and sends them in one ``commit_group`` call, then their provenance in one
``register_encoded`` call, as databases do with group commit.

What stays exactly as with one call per session (``DirectLog``): each session is its own LMDB
transaction, refused or accepted alone (a refused one raises ``CommitError`` in its own task, which
rolls back only that session); a session's task waits until its commit is in the log before it
delivers anything; provenance is recorded after the log accepted, never before. A group never
waits for more commits to arrive: the first commit goes out at once, and later ones ride along
with whatever queued up behind it, so a lone task sees no extra latency.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import ray

from flowactors.engine.backend import encoded_events, not_written, refused
from flowactors.engine.transport import Link, call_now
from flowactors.sdk.session import CommitBatch, CommitError

#: at most this many sessions in one call (bounds the size of one actor call)
MAX_GROUP = 64


class GroupLog:
    """The ``Log`` that every task of one executor shares (see the module docstring)."""

    def __init__(self, flowfile_repository: Link, provenance_repository: Link | None, name: str = "group-commit"):
        self.flowfile_repository = flowfile_repository
        self.provenance_repository = provenance_repository
        self._waiting: list[tuple[CommitBatch, concurrent.futures.Future]] = []
        self._ready = threading.Condition()
        self._closed = False
        self.unrecorded: list[tuple[list[bytes], list[int]]] = []  # events provenance did not take
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

    def _record_events(self, encoded: tuple[list[bytes], list[int]]) -> Any:
        """Send events to provenance; if that call fails, keep them in ``unrecorded`` to send
        again once provenance is back (``resend``): a lost provenance process costs no event
        of a commit the log accepted (at worst one recorded twice, if it died after writing)."""
        pending = self.provenance_repository.call("register_encoded", *encoded)
        future = pending.future() if isinstance(pending, ray.ObjectRef) else pending
        future.add_done_callback(lambda f: f.exception() is not None and self.unrecorded.append(encoded))
        return pending

    def resend(self, unrecorded: list[tuple[list[bytes], list[int]]]) -> None:
        """Send events another log could not (``unrecorded`` of the log this one replaces)."""
        if unrecorded and self.provenance_repository is not None:
            call_now(self.provenance_repository, "register_encoded",
                     [e for encoded, _ in unrecorded for e in encoded], [t for _, ts in unrecorded for t in ts])

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
        try:
            reasons = call_now(self.flowfile_repository, "commit_group",
                               [(b.updates, b.removals, b.new_claims) for b, _ in group])
        except Exception as err:  # the call itself failed: refused, or in doubt if the log died
            for _, done in group:
                done.set_exception(not_written(err))
            return
        events = [e for (b, _), reason in zip(group, reasons) if reason is None for e in b.events]
        provenance: list[Any] = []
        if self.provenance_repository is not None and events:
            provenance = [self._record_events(encoded_events(events))]
        for (_, done), reason in zip(group, reasons):
            if reason is None:
                done.set_result(provenance)
            else:
                done.set_exception(refused(reason))
