"""The FlowFile log's swap-file registry, and renaming a queue.

A queue that swaps FlowFiles out to a swap file registers the file here (``swap_files``
sub-database), and in the same transaction the FlowFiles' records move to the queue
``swap:<location>``, which recovery skips: their records (and so their claimant counts) stay in
the log, so a lost swap file loses nothing and a restart does not count them twice. Swap-file
format: ``repositories/flowfile/swapfile.py``, docs/formats/swap-file.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from repositories.flowfile import records as rec
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.journal import Journal
from repositories.flowfile.protocol import SwapFileEntry
from repositories.flowfile.queue_table import QueueTable
from repositories.flowfile.records import SWAP_QUEUE_PREFIX
from repositories.model import FlowFile


class SwapRegistry:
    """The ``swap_files`` sub-database of one log; every change applies the journal first."""

    def __init__(self, environment: LogEnvironment, journal: Journal, queues: QueueTable) -> None:
        self.environment = environment
        self.journal = journal
        self.queues = queues

    def register(self, queue: str, location: str, count: int, size: int,
                 flowfiles: Sequence[FlowFile] | None = None) -> None:
        """Record the swap file; with ``flowfiles``, move them to ``swap:<location>`` in the same
        transaction (each must be in ``queue``, else ``ValueError`` and nothing written)."""
        environment = self.environment
        prepared = rec.encode_swap_registration(location, count, flowfiles, environment.prefix)
        skey = location.encode()
        with environment.write("registering a swap file") as txn:
            if txn.get(skey, db=environment.swap) is not None:
                raise ValueError(f"swap file {location} is already registered")
            self.journal.fold(txn)
            seq = environment.next_seq(txn)
            expect = environment.prefix(queue) if flowfiles is not None else None
            self.journal.apply(txn, seq, [(prepared, [], [])], expect)
            registered = time.time_ns() // 1_000_000
            txn.put(skey, rec.encode_swap_entry(queue, count, size, seq, registered), db=environment.swap)

    def unregister(self, location: str) -> int:
        """Forget a swap file, moving its records still under ``swap:<location>`` back to its queue
        in their FIFO position; how many moved (0 for an unknown location)."""
        environment = self.environment
        skey = location.encode()
        with environment.write("unregistering a swap file") as txn:
            self.journal.fold(txn)
            raw = txn.get(skey, db=environment.swap)
            if raw is None:
                return 0
            moved = self._unregister_in(txn, location, environment.prefix(self._entry(raw, location)["queue"]))
            environment.next_seq(txn)
        return moved

    def rename_queue(self, old: str, new: str) -> int:
        """Move every record of queue ``old`` to queue ``new`` in their FIFO position, the swap
        files ``old`` registered unregistered into ``new``, in one transaction; how many moved."""
        environment = self.environment
        target = environment.prefix(new)
        with environment.write("renaming a queue") as txn:
            self.journal.fold(txn)
            moved = self.queues.move_records(txn, environment.prefix(old), target)
            for key, raw in list(txn.cursor(db=environment.swap)):
                location = environment.text_key(key, "swap_files")
                if self._entry(raw, location)["queue"] == old:
                    moved += self._unregister_in(txn, location, target)
            environment.next_seq(txn)
        return moved

    def files(self) -> list[SwapFileEntry]:
        """Registered swap files, oldest first."""
        out = []
        with self.environment.read() as txn:
            for key, value in txn.cursor(db=self.environment.swap):
                location = self.environment.text_key(key, "swap_files")
                e = self._entry(value, location)
                entry: SwapFileEntry = {"queue": e["queue"], "location": location, "count": e["count"],
                                        "size": e["size"]}
                out.append((e["seq"], entry))
        out.sort(key=lambda x: x[0])
        return [d for _, d in out]

    def _entry(self, raw: bytes, location: str) -> dict:
        try:
            return rec.decode_swap_entry(raw)
        except rec.RecordError as e:
            raise self.environment.record_error(e, f"swap registry entry {location}") from None

    def _unregister_in(self, txn: Txn, location: str, target: bytes) -> int:
        """Within ``txn``: forget swap file ``location``, its records still in the log moving to
        the queue of prefix ``target`` in their FIFO position; how many moved."""
        moved = self.queues.move_records(txn, self.environment.prefix(SWAP_QUEUE_PREFIX + location), target)
        txn.delete(location.encode(), db=self.environment.swap)
        return moved
