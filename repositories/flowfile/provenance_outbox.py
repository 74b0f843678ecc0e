"""The FlowFile log's provenance outbox: each commit's provenance events, kept in the commit's
own transaction until the provenance repository takes them.

An entry is the commit's encoded event batch under the first event id the commit reserved
(``records.encode_outbox_entry``; docs/formats/flowfile-repository.md, ``provenance_outbox``), so
a commit's events are exactly as durable as the commit. ``repositories/provenance/outbox.py``
takes them: it reads ``entries``, registers them, then ``remove``s them.
"""

from __future__ import annotations

from collections.abc import Iterable

from repositories.flowfile import records as rec
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.protocol import OutboxEntry


class ProvenanceOutbox:
    """The ``provenance_outbox`` sub-database of one log."""

    def __init__(self, environment: LogEnvironment) -> None:
        self.environment = environment

    def put(self, txn: Txn, first_id: int, value: bytes) -> None:
        """Keep ``value`` (``encode_outbox_entry``) under ``first_id`` in ``txn`` (the commit's)."""
        txn.put(rec.pack_u64(first_id), value, db=self.environment.outbox, append=True)

    def entries(self, max_bytes: int) -> list[OutboxEntry]:
        """The entries in id order, about ``max_bytes`` at most (always at least one): ``(first
        id, (count, min_timestamp, max_timestamp, batch))``, or ``(first id, problem)`` for a
        damaged entry. Read as it is: the journal need not be applied for it."""
        found: list[OutboxEntry] = []
        size = 0
        environment = self.environment
        path = environment.path
        with environment.read() as txn, txn.cursor(db=environment.outbox) as cur:
            for key, value in cur:
                first = environment.number_key(key, "provenance_outbox")
                try:
                    found.append((first, rec.decode_outbox_entry(value)))
                except rec.RecordError as e:
                    found.append((first, f"{path}: the provenance outbox entry of event id {first} is damaged: {e}"))
                size += len(value)
                if size >= max_bytes:
                    break
        return found

    def remove(self, first_ids: Iterable[int]) -> int:
        """Delete the entries of these first event ids; how many were there."""
        with self.environment.write("removing events the provenance repository took") as txn:
            return sum(txn.delete(rec.pack_u64(first), db=self.environment.outbox) for first in first_ids)
