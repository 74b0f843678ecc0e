"""Issue 3's figure: FlowFile repository commit throughput against a raw LMDB loop.

Both sides commit the same FlowFiles (1 KiB content claims, five attributes) in transactions of
1,000: flowactors through ``WriteAheadFlowFileRepository.commit`` (record encoding with CRC,
per-queue order index, claimant counts), the baseline as bare ``txn.put`` of each FlowFile's
orjson record under its uuid, and nothing else. Measured with ``always_sync`` off (the default:
survives kill -9 of every process) and on (fsync per commit: survives power loss); the baseline
uses the matching LMDB ``sync`` flag. Each figure is the best of three runs on a fresh directory.

The bare puts do less than a commit. Issue 15's floor is against raw LMDB *doing the same durable
work*, so a second baseline is a plain loop that does it: for each FlowFile, read what the store
holds under its uuid (a commit must, to keep claimant counts right when a FlowFile changes), put
its record and its queue-order key, all in LMDB's batch calls (``getmulti``, ``putmulti``) as the
repository does; then, once a commit, the claimant count of each resource claim and the queue's size. It writes the bare loop's orjson record, not the repository's (no CRC, no
version byte); what it leaves out is validation (a uuid twice in a commit) and the run fence.

Issue 15 asks to measure NiFi's own design against it: a journal of batch deltas, folded into a
snapshot at checkpoint. The third and fourth rows measure that journal's write side: each commit
appends the same records (the repository's own encoding, CRC included) as one framed batch to an
append-only file, fdatasync'd when ``always_sync``; against today's log. Its other costs (folding
every live record into a snapshot at checkpoint, replaying and sorting at recovery, no order index
to page a queue from) are not in that figure: docs/formats/flowfile-repository.md has the decision.
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import uuid
import zlib
from pathlib import Path

import lmdb
import orjson

from bench import row
from flowactors.engine import gc_policy
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.flowfile.records import ClaimKeyCache, encode_flowfile, queue_prefix, uuid_key
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, new_flowfile_uuid, now_millis

SCENARIO = "8 FlowFile repository"
BATCH = 1000


def _batches(total: int) -> list[list[QueuedFlowFile]]:
    now = now_millis()
    batches = []
    for b in range(total // BATCH):
        resource = ResourceClaim("default", str(b % 1024), f"bench-{b}")
        batch = []
        for i in range(BATCH):
            ff_uuid = new_flowfile_uuid()
            attributes = {"uuid": ff_uuid, "filename": f"file-{b}-{i}.txt", "path": "./",
                          "mime.type": "text/plain", "batch": str(b)}
            claim = ContentClaim(resource, (i % 50) * 1024, 1024)
            batch.append(QueuedFlowFile(FlowFile(b * BATCH + i, ff_uuid, attributes, claim, now, now,
                                                 queue_date=now, queue_index=i), "bench-queue"))
        batches.append(batch)
    return batches


def _flowactors(batches: list, directory: Path, sync: bool) -> float:
    """Commit every batch, then close: closing applies the commits still in the journal to the
    tables, which is part of the work (docs/formats/flowfile-repository.md, "Applying the journal")."""
    repo = WriteAheadFlowFileRepository(directory, always_sync=sync, map_size=8 * 1024**3)
    try:
        started = time.perf_counter()
        for batch in batches:
            repo.commit(batch, [])
        repo.close()
        return time.perf_counter() - started
    finally:
        repo.close()


def _raw_lmdb(batches: list, directory: Path, sync: bool) -> float:
    directory.mkdir(parents=True)
    env = lmdb.open(str(directory), map_size=8 * 1024**3, sync=sync, metasync=sync, max_dbs=2)
    try:
        db = env.open_db(b"flowfiles")
        started = time.perf_counter()
        for batch in batches:
            with env.begin(write=True, db=db) as txn:
                for queued in batch:
                    ff = queued.flowfile
                    value = orjson.dumps([ff.id, ff.attributes, list(ff.claim.resource), ff.claim.offset,
                                          ff.claim.length, ff.entry_date, queued.queue])
                    txn.put(uuid.UUID(ff.uuid).bytes, value)
        return time.perf_counter() - started
    finally:
        env.close()


def _raw_lmdb_same_work(batches: list, directory: Path, sync: bool) -> float:
    directory.mkdir(parents=True)
    env = lmdb.open(str(directory), map_size=8 * 1024**3, sync=sync, metasync=sync, max_dbs=4)
    try:
        records, order = env.open_db(b"flowfiles"), env.open_db(b"order")
        counts, sizes = env.open_db(b"claims"), env.open_db(b"queues")
        pair, order_tail = struct.Struct(">qq"), struct.Struct(">qqq")
        started = time.perf_counter()
        for batch in batches:
            with env.begin(write=True) as txn:
                keys = [uuid.UUID(queued.flowfile.uuid).bytes for queued in batch]
                dict(txn.cursor(db=records).getmulti(keys))   # none before: every FlowFile here is new
                record_puts, order_puts = [], []
                claims: dict[bytes, int] = {}
                queued_count: dict[bytes, list[int]] = {}
                for key, (ff, queue_id) in zip(keys, batch):
                    record_puts.append((key, orjson.dumps([ff.id, ff.attributes, list(ff.claim.resource),
                                                           ff.claim.offset, ff.claim.length, ff.entry_date,
                                                           queue_id])))
                    queue = queue_id.encode()
                    order_puts.append((queue + order_tail.pack(ff.queue_date, ff.queue_index, ff.id) + key, b""))
                    claim = "/".join(ff.claim.resource).encode()
                    claims[claim] = claims.get(claim, 0) + 1
                    totals = queued_count.setdefault(queue, [0, 0])
                    totals[0] += 1
                    totals[1] += ff.claim.length
                txn.cursor(db=records).putmulti(record_puts)
                txn.cursor(db=order).putmulti(order_puts)
                for claim, added in claims.items():
                    old = txn.get(claim, db=counts)
                    txn.put(claim, pair.pack((pair.unpack(old)[0] if old else 0) + added, 0), db=counts)
                for queue, (count, size) in queued_count.items():
                    old = txn.get(queue, db=sizes)
                    before = pair.unpack(old) if old else (0, 0)
                    txn.put(queue, pair.pack(before[0] + count, before[1] + size), db=sizes)
        return time.perf_counter() - started
    finally:
        env.close()


def _journal(batches: list, directory: Path, sync: bool) -> float:
    """The write side of a journal of batch deltas: one framed append (length, CRC) per commit."""
    directory.mkdir(parents=True)
    fd = os.open(directory / "journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        started = time.perf_counter()
        prefixes: dict[str, bytes] = {}
        claims = ClaimKeyCache()
        for batch in batches:
            parts = []
            for ff, queue in batch:
                prefix = prefixes.get(queue) or prefixes.setdefault(queue, queue_prefix(queue))
                record, _order = encode_flowfile(ff, prefix, claims[ff.claim.resource], uuid_key(ff.uuid))
                parts += (struct.pack(">I", len(record)), record)
            body = b"".join(parts)
            os.write(fd, struct.pack(">II", len(body), zlib.crc32(body)) + body)
            if sync:
                os.fdatasync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)


def run(quick: bool, workdir: Path) -> list[dict]:
    """Every side runs under the garbage collector's thresholds of the engine's processes
    (``gc_policy``), where the repository commits in a flow: with CPython's defaults the full
    collections that walk the 200,000 FlowFiles built beforehand would be timed too."""
    gc_policy.hold()
    try:
        return _run(quick, workdir)
    finally:
        gc_policy.release()


def _run(quick: bool, workdir: Path) -> list[dict]:
    total = 20_000 if quick else 200_000
    batches = _batches(total)
    rows = []
    journals = {}
    for sync in (False, True):
        ours, raw, same_work, journal = [], [], [], []
        for attempt in range(3):
            for measure, store in ((_flowactors, ours), (_raw_lmdb, raw), (_raw_lmdb_same_work, same_work),
                                   (_journal, journal)):
                target = workdir / f"{measure.__name__}-{sync}-{attempt}"
                store.append(measure(batches, target, sync))
                shutil.rmtree(target, ignore_errors=True)
        mode = "always_sync on" if sync else "always_sync off"
        rows.append(row(SCENARIO, f"commit throughput, {BATCH} FlowFiles a commit, {mode}",
                        round(total / min(ours)), round(total / min(raw)), "raw LMDB puts, same records",
                        "FlowFiles/s", notes=f"{total:,} FlowFiles; best of 3; flowactors also keeps the "
                                             f"order index and claimant counts in the same transaction"))
        rows.append(row(SCENARIO, f"commit throughput against raw LMDB doing the same durable work, {mode}",
                        round(total / min(ours)), round(total / min(same_work)),
                        "raw LMDB: get + record + order key a FlowFile, counts a commit", "FlowFiles/s",
                        notes=f"{total:,} FlowFiles; best of 3; the baseline reads each uuid, puts the bare "
                              f"record and a queue-order key, then a claimant count a resource claim and "
                              f"the queue's size a commit; issue 15's floor is 0.8x"))
        journals[mode] = (round(total / min(journal)), round(total / min(ours)))
    for mode, (journal, ours) in journals.items():
        rows.append(row(SCENARIO, f"a journal of batch deltas instead (write side only), {mode}", journal, ours,
                        "today's LMDB write-ahead log, same records", "FlowFiles/s",
                        notes=f"{total:,} FlowFiles; best of 3; the same record encoding appended as one framed "
                              f"batch a commit; without the snapshot fold at checkpoint, the replay at "
                              f"recovery and the order index (docs/formats/flowfile-repository.md)"))
    return rows
