"""Issue 3's figure: FlowFile repository commit throughput against a raw LMDB loop.

Both sides commit the same FlowFiles (1 KiB content claims, five attributes) in transactions of
1,000: flowactors through ``WriteAheadFlowFileRepository.commit`` (record encoding with CRC,
per-queue order index, claimant counts), the baseline as bare ``txn.put`` of each FlowFile's
orjson record under its uuid, and nothing else. Measured with ``always_sync`` off (the default:
survives kill -9 of every process) and on (fsync per commit: survives power loss); the baseline
uses the matching LMDB ``sync`` flag. Each figure is the best of three runs on a fresh directory.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import lmdb
import orjson

from bench import row
from repositories.flowfile import WriteAheadFlowFileRepository
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
    repo = WriteAheadFlowFileRepository(directory, always_sync=sync, map_size=8 * 1024**3)
    try:
        started = time.perf_counter()
        for batch in batches:
            repo.commit(batch, [])
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


def run(quick: bool, workdir: Path) -> list[dict]:
    total = 20_000 if quick else 200_000
    batches = _batches(total)
    rows = []
    for sync in (False, True):
        ours, raw = [], []
        for attempt in range(3):
            for measure, store in ((_flowactors, ours), (_raw_lmdb, raw)):
                target = workdir / f"{measure.__name__}-{sync}-{attempt}"
                store.append(measure(batches, target, sync))
                shutil.rmtree(target, ignore_errors=True)
        mode = "always_sync on" if sync else "always_sync off"
        rows.append(row(SCENARIO, f"commit throughput, {BATCH} FlowFiles a commit, {mode}",
                        round(total / min(ours)), round(total / min(raw)), "raw LMDB puts, same records",
                        "FlowFiles/s", notes=f"{total:,} FlowFiles; best of 3; flowactors also keeps the "
                                             f"order index and claimant counts in the same transaction"))
    return rows
