"""The FlowFile log's one-up counters: FlowFile ids, provenance event ids and runs of the flow.

Each is a u64 in the ``meta`` sub-database, taken in a write transaction of its own or of the
commit that uses it, so after a restart every counter continues past the highest value it ever
gave (values of a transaction that did not commit are given again; of one that did, never).
"""

from __future__ import annotations

from repositories.flowfile import records as rec
from repositories.flowfile.environment import K_NEXT_EVENT, K_NEXT_ID, K_RUN, LogEnvironment, Txn
from repositories.flowfile.errors import RunReplacedError


def _check_count(count: int) -> None:
    if type(count) is not int or count < 0:
        raise ValueError(f"count must be a non-negative int, not {count!r}")


class Counters:
    """The ``next_id``, ``next_event_id`` and ``run`` meta keys of one log."""

    def __init__(self, environment: LogEnvironment) -> None:
        self.environment = environment

    def reserve_ids(self, count: int) -> int:
        """Reserve ``count`` FlowFile ids in their own transaction and return the first."""
        _check_count(count)
        environment = self.environment
        with environment.write("reserving ids") as txn:
            first = environment.load_counter(txn, K_NEXT_ID)
            if count:
                txn.put(K_NEXT_ID, rec.pack_u64(first + count), db=environment.meta)
        return first

    def reserve_event_ids(self, count: int) -> int:
        """Reserve ``count`` provenance event ids in their own transaction and return the first."""
        _check_count(count)
        with self.environment.write("reserving event ids") as txn:
            return self.take_event_ids(txn, count)

    def take_event_ids(self, txn: Txn, count: int) -> int:
        """Reserve ``count`` provenance event ids in ``txn`` (a commit's) and return the first."""
        environment = self.environment
        first = environment.load_counter(txn, K_NEXT_EVENT, missing=0)  # absent: no event yet
        if count:
            txn.put(K_NEXT_EVENT, rec.pack_u64(first + count), db=environment.meta)
        return first

    def next_event_id(self, txn: Txn) -> int:
        """The next provenance event id ``txn`` sees (0 before the first)."""
        return self.environment.load_counter(txn, K_NEXT_EVENT, missing=0)

    def raise_event_ids(self, at_least: int) -> int:
        """Make the next event id at least ``at_least`` and return it."""
        environment = self.environment
        with environment.write("raising event ids") as txn:
            first = self.next_event_id(txn)
            if at_least > first:
                txn.put(K_NEXT_EVENT, rec.pack_u64(at_least), db=environment.meta)
            return max(first, at_least)

    def raise_next_id(self, txn: Txn, max_id: int) -> bool:
        """Make the next FlowFile id greater than ``max_id`` (a stored id) in ``txn``; whether it was not."""
        environment = self.environment
        if max_id < environment.load_counter(txn, K_NEXT_ID):
            return False
        txn.put(K_NEXT_ID, rec.pack_u64(max_id + 1), db=environment.meta)
        return True

    def begin_run(self) -> int:
        """Number a new run of the flow and return it."""
        environment = self.environment
        with environment.write("beginning a run") as txn:
            run = environment.load_counter(txn, K_RUN, missing=0) + 1  # absent: no run yet (older release)
            txn.put(K_RUN, rec.pack_u64(run), db=environment.meta)
        return run

    def check_run(self, txn: Txn, run: int) -> None:
        """``RunReplacedError`` unless ``run`` is the log's run as ``txn`` sees it."""
        current = self.environment.load_counter(txn, K_RUN, missing=0)
        if run != current:
            raise RunReplacedError(self.environment.path, run, current)
