"""The FlowFile log's start-up repair: every count recomputed from the FlowFile records.

Run at start-up, before the flow starts, against leaked or double counts (NIFI-8727, NIFI-6110,
NIFI-1527): the claimant counts, each queue's size, the order index and the next FlowFile id are
made what the records say, in one write transaction that streams the records (memory: one
counter per resource claim and per queue), and what differed is reported.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from repositories.flowfile import records as rec
from repositories.flowfile.claims import ClaimTable
from repositories.flowfile.counters import Counters
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.journal import Journal
from repositories.flowfile.protocol import RebuildReport
from repositories.flowfile.queue_table import QueueTable


class _Census(NamedTuple):
    """What the records say (``_count_records``)."""

    flowfiles: int
    claims: dict[bytes, int]                # claim key -> FlowFiles referencing it
    queues: dict[bytes, tuple[int, int]]    # queue id (UTF-8) -> (FlowFiles, content bytes)
    max_id: int
    index_missing: int                      # records the order index lacks


def rebuild_claimant_counts(environment: LogEnvironment, journal: Journal, claims: ClaimTable, queues: QueueTable,
                            counters: Counters, max_reported: int = 1000) -> RebuildReport:
    """Apply the journal, then recompute every claimant count (and each queue's size, the order
    index and the next id) from the FlowFile records, fix what differs, and report it (at most
    ``max_reported`` claims in ``differences``). A count found too high drops to 0 and the claim
    waits for the next checkpoint like any other unreferenced claim."""
    t0 = time.perf_counter()
    with environment.write("rebuilding claimant counts") as txn:
        journal.fold(txn)
        seq = environment.next_seq(txn)
        census = _count_records(environment, txn)
        index_rebuilt = census.index_missing > 0 or txn.stat(environment.order)["entries"] != census.flowfiles
        if index_rebuilt:
            _rebuild_index(environment, txn)
        repaired = claims.reconcile(txn, census.claims, seq, max_reported)
        queues_fixed = queues.reconcile(txn, census.queues)
        next_id_raised = counters.raise_next_id(txn, census.max_id)
        claims_total = txn.stat(environment.claims)["entries"]
    return {
        "flowfiles": census.flowfiles,
        "claims": claims_total,
        "fixed": repaired.fixed,
        "differences": repaired.differences,
        "stale_destructible": repaired.stale,
        "queues_fixed": queues_fixed,
        "index_rebuilt": index_rebuilt,
        "next_id_raised": next_id_raised,
        "duration": time.perf_counter() - t0,
    }


def _count_records(environment: LogEnvironment, txn: Txn) -> _Census:
    """Stream every record: its claim, its queue and size, its id, and whether the index has it."""
    counts: dict[bytes, int] = {}
    sizes: dict[bytes, list[int]] = {}
    max_id = 0
    n = 0
    index_missing = 0
    ukey = b""
    try:
        for ukey, value in txn.cursor(db=environment.flowfiles):
            order, prefix, ckey, size = rec.peek(value)
            n += 1
            if ckey:
                counts[ckey] = counts.get(ckey, 0) + 1
            s = sizes.get(prefix)
            if s is None:
                s = sizes[prefix] = [0, 0]
            s[0] += 1
            s[1] += size
            fid = rec.order_id(order)
            if fid > max_id:
                max_id = fid
            if txn.get(order + ukey, db=environment.order) is None:
                index_missing += 1
    except rec.RecordError as e:
        raise environment.record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
    by_queue = {prefix[2:]: (count, size) for prefix, (count, size) in sizes.items()}
    return _Census(n, counts, by_queue, max_id, index_missing)


def _rebuild_index(environment: LogEnvironment, txn: Txn) -> None:
    """Empty the order index and make it again from the records."""
    txn.drop(environment.order, delete=False)
    for ukey, value in txn.cursor(db=environment.flowfiles):
        txn.put(rec.peek(value)[0] + ukey, b"", db=environment.order)
