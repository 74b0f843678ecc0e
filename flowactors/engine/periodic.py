"""A background job run every few seconds on a thread of its own: the controller's maintenance,
the cluster coordinator's watch, and the repository services' looks at the log (its journal, its
provenance outbox). One place for what each of them needs: a job that raises is tried again
(after ``retry_after``), never ends the thread; ``stop`` returns once the job under way has finished
(or ``join`` seconds passed), so nothing runs after the owner closes what the job uses."""

from __future__ import annotations

import threading
from typing import Callable


class Periodic:
    """Calls ``job()`` every ``interval`` seconds from ``start`` until ``stop``.

    An exception from ``job`` goes to ``on_error(err)`` and the next call waits ``retry_after``
    seconds (``interval`` if not given). With ``each_error_once`` the same error (by its message)
    reaches ``on_error`` only once until a call succeeds, so a log is not filled with one problem.
    """

    def __init__(self, name: str, interval: float, job: Callable[[], object],
                 on_error: Callable[[Exception], object], *, retry_after: float | None = None,
                 each_error_once: bool = False, join: float = 30.0):
        self.name = name
        self.interval = interval
        self.retry_after = interval if retry_after is None else retry_after
        self.join = join
        self._job = job
        self._on_error = on_error
        self._each_error_once = each_error_once
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        """True while ``stop`` waits for the thread: a job that loops checks it to end early."""
        return self._stopping.is_set()

    def start(self) -> None:
        """Start the thread, unless it runs already (so an owner may call this more than once)."""
        previous = self._thread
        if previous is not None and previous.is_alive():
            if not self.stopping:
                return
            previous.join(self.join)  # one that outlived stop's wait ends first
            if previous.is_alive():
                raise RuntimeError(f"{self.name} cannot start again: its job is still running "
                                   f"{self.join:g} s after it was asked to stop")
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread: the job under way finishes first (up to ``join`` seconds). Once it has
        ended, it may be started again; one still in its job past ``join`` ends after it."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.join)
            if thread.is_alive():
                return
            self._thread = None
        self._stopping.clear()

    def _run(self) -> None:
        said = None
        wait = self.interval
        while not self._stopping.wait(wait):
            wait = self.interval
            try:
                self._job()
                said = None
            except Exception as err:  # tried again after retry_after: the thread never ends on it
                wait = self.retry_after
                if not self._each_error_once or str(err) != said:
                    said = str(err)
                    self._on_error(err)
