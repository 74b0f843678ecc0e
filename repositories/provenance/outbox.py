"""Taking a running flow's events from the FlowFile repository's provenance outbox.

Each session commit keeps its encoded events in the write-ahead log's ``provenance_outbox``, in
the commit's own transaction, under the first event id it reserved
(``WriteAheadFlowFileRepository.commit(event_batch=...)``; docs/formats/flowfile-repository.md).
``take_from_outbox`` moves them into a provenance repository: registered in id order, then
deleted from the outbox, so an event is always in one of the two, and one taken twice (the taker
died between the two steps) is dropped the second time. The provenance service takes them while a
flow runs; ``flowactors provenance repair`` takes what a killed flow left. ``register_anew_if_late``
is the one way batches numbered by the log are registered, from the outbox or over a link.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from repositories.provenance.event import EncodedBatch

log = logging.getLogger(__name__)

#: bytes of outbox entries taken in one read
READ_BYTES = 16 * 1024**2
#: reads one call makes at most (a flow that commits faster than this is taken from again later)
MAX_READS = 64

Register = Callable[[Sequence[tuple[int, EncodedBatch]]], list[int]]


def register_anew_if_late(register: Register, reserve: Callable[[int], int],
                          numbered: list[tuple[int, EncodedBatch]]) -> int:
    """Register batches under the ids the log reserved for them (``register``: a provenance
    repository's ``register_numbered``, or a call to it); those that came after provenance gave
    their ids up get new ids from ``reserve`` (the log's ``reserve_event_ids``) and go again.
    Returns the highest id registered (-1: none)."""
    last = -1
    while numbered:
        last = max(last, *(first + batch.count - 1 for first, batch in numbered))
        late = register(numbered)
        numbered = [(reserve(numbered[i][1].count), numbered[i][1]) for i in late]
    return last


def take_from_outbox(wal: Any, provenance: Any, register: Register | None = None,
                     sync: bool = False) -> tuple[int, list[str]]:
    """Register the outbox's events with ``provenance`` (through ``register``, its
    ``register_numbered`` unless given) and remove them from ``wal``'s outbox; ``sync``: fsync
    the provenance journals first (``always_sync``). Returns how many events were taken, and the
    problems of damaged entries (logged, their events lost, removed with the others). Batches
    whose ids provenance gave up meanwhile get new ids from the log and are registered again."""
    register = register or provenance.register_numbered
    taken = 0
    problems: list[str] = []
    for _ in range(MAX_READS):
        entries = wal.outbox_entries(max_bytes=READ_BYTES)
        if not entries:
            break
        numbered = []
        for first, entry in entries:
            if isinstance(entry, str):
                log.error("%s; its events are lost (the others are kept)", entry)
                problems.append(entry)
            else:
                count, min_timestamp, max_timestamp, data = entry
                numbered.append((first, EncodedBatch(data, count, min_timestamp, max_timestamp)))
        taken += sum(batch.count for _, batch in numbered)
        register_anew_if_late(register, wal.reserve_event_ids, numbered)
        if sync:
            provenance.sync_journals()
        wal.remove_from_outbox(first for first, _ in entries)
    return taken, problems
