"""The baselines flowactors is measured against, each run in the same bench run as its scenario.

* ``bare_durable_flow``: the "bare durable flow" of shared/notes/machine-baselines.md - one Python
  loop, no actors, no index, no parallelism, doing the durable work of scenario 1 for 1 KiB
  FlowFiles in batches: content appended to a claim file (fdatasync once a batch), the FlowFile
  created, an attribute updated, routed on, dropped; the WAL records put and then deleted in one
  LMDB transaction a batch; four provenance events per FlowFile appended to a journal. With
  ``sync=False`` it skips the fdatasync and opens LMDB without sync: the guarantee of flowactors'
  default (``always_sync`` off). ``measure_bare_flow`` runs it in a fresh process under
  ``/usr/bin/time -v``, so neither the bench's Ray driver nor its sampler thread slows it, and
  its peak RSS comes from the kernel.
* ``ray_data_transform``: the same per-FlowFile transform in Ray Data, with no durability.
* ``dd_write``: ``dd conv=fdatasync``, the disk's sequential write speed (from /dev/zero, or
  copying a file).
* ``lmdb_scan``: a raw LMDB cursor scan, the floor of reading a write-ahead log back.

``python -m bench.baselines bare --flowfiles N --batch B [--no-sync] --dir D`` prints the bare
loop's result as JSON (what ``measure_bare_flow`` runs).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import lmdb
import orjson

CONTENT_SIZE = 1024
TIME = "/usr/bin/time"
#: the size class UpdateAttribute computes, and the route RouteOnAttribute takes (scenario 1's flow)
LARGE = 1024


def bare_durable_flow(flowfiles: int, batch: int, workdir: Path, sync: bool = True) -> dict:
    """Run the bare durable loop over ``flowfiles`` 1 KiB FlowFiles; return its counts and seconds."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(workdir / "wal"), map_size=16 << 30, sync=sync, metasync=sync, max_dbs=2)
    records_db = env.open_db(b"flowfiles")
    claim_fd = os.open(workdir / "claim", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    journal_fd = os.open(workdir / "journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    content = os.urandom(CONTENT_SIZE)
    dumps = orjson.dumps
    events = 0
    offset = 0
    next_id = 0
    started = time.perf_counter()
    try:
        for first in range(0, flowfiles, batch):
            count = min(batch, flowfiles - first)
            chunks: list[bytes] = []
            records: list[tuple[bytes, bytes]] = []
            journal: list[bytes] = []
            for _ in range(count):
                now = time.time_ns() // 1_000_000
                flowfile_uuid = str(uuid.uuid4())
                chunks.append(content)
                claim = ["claim", offset, CONTENT_SIZE]
                offset += CONTENT_SIZE
                created = {"filename": flowfile_uuid, "path": "./", "uuid": flowfile_uuid}
                record = {"id": next_id, "uuid": flowfile_uuid, "attributes": created, "claim": claim,
                          "entry_date": now, "lineage_start_date": now}
                next_id += 1
                updated = dict(created)
                updated["size.class"] = "large" if CONTENT_SIZE >= LARGE else "small"
                route = "large" if updated["size.class"] == "large" else "unmatched"
                routed = dict(updated)
                routed["RouteOnAttribute.Route"] = route
                records.append((flowfile_uuid.encode(), dumps(record)))
                for event_type, before, after, relationship in (
                        ("CREATE", None, created, None), ("ATTRIBUTES_MODIFIED", created, updated, None),
                        ("ROUTE", updated, routed, route), ("DROP", routed, routed, None)):
                    data = dumps({"type": event_type, "ts": now, "uuid": flowfile_uuid, "component": "bench",
                                  "previous": before, "updated": after, "relationship": relationship,
                                  "claim": claim, "size": CONTENT_SIZE, "lineage_start": now})
                    journal.append(len(data).to_bytes(4, "little"))
                    journal.append(data)
                events += 4
            _write_all(claim_fd, b"".join(chunks))
            if sync:
                os.fdatasync(claim_fd)
            with env.begin(write=True, db=records_db) as txn:
                txn.cursor().putmulti(records)
                for key, _value in records:
                    txn.delete(key)
            _write_all(journal_fd, b"".join(journal))
        seconds = time.perf_counter() - started
    finally:
        os.close(claim_fd)
        os.close(journal_fd)
        env.close()
    return {"flowfiles": flowfiles, "batch": batch, "sync": sync, "seconds": seconds, "events": events,
            "flowfiles_per_s": flowfiles / seconds, "events_per_s": events / seconds}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def measure_bare_flow(flowfiles: int, batch: int, workdir: Path, sync: bool = True) -> dict:
    """``bare_durable_flow`` in a fresh Python process (under ``/usr/bin/time -v`` when present);
    adds ``peak_rss`` (bytes) and removes its files afterwards."""
    command = [sys.executable, "-m", "bench.baselines", "bare", "--flowfiles", str(flowfiles),
               "--batch", str(batch), "--dir", str(workdir)] + ([] if sync else ["--no-sync"])
    timed = os.access(TIME, os.X_OK)
    if timed:
        command = [TIME, "-v", *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              cwd=Path(__file__).resolve().parent.parent)
        if done.returncode != 0:
            raise RuntimeError(f"the bare loop failed ({done.returncode}): {done.stderr[-2000:]}")
        result = orjson.loads(done.stdout.strip().splitlines()[-1])
        match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr) if timed else None
        result["peak_rss"] = int(match.group(1)) * 1024 if match else None
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def ray_data_transform(flowfiles: int, batch: int) -> dict:
    """Scenario 1's transform in Ray Data (in the caller's Ray session), nothing durable.

    Three ``map_batches`` steps as the flow's three processors - make 1 KiB FlowFiles (uuid,
    attributes, content), set the size class attribute, route on it and drop every FlowFile
    (the routes are counted) - which Ray Data fuses into one task per block.
    """
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset INFO lines in the bench output
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    content = os.urandom(CONTENT_SIZE)

    def generate(block: dict) -> dict:
        ids = [int(i) for i in block["id"]]
        uuids = [str(uuid.uuid4()) for _ in ids]
        return {"id": ids, "uuid": uuids, "filename": uuids, "content": [content] * len(ids)}

    def update(block: dict) -> dict:
        block["size.class"] = ["large" if len(c) >= LARGE else "small" for c in block["content"]]
        return block

    def route_and_drop(block: dict) -> dict:
        routes = ["large" if s == "large" else "unmatched" for s in block["size.class"]]
        return {"large": [routes.count("large")], "unmatched": [routes.count("unmatched")]}

    started = time.perf_counter()
    dataset = (ray.data.range(flowfiles)
               .map_batches(generate, batch_size=batch, batch_format="numpy")
               .map_batches(update, batch_size=batch, batch_format="numpy")
               .map_batches(route_and_drop, batch_size=batch, batch_format="numpy"))
    routed = sum(int(r["large"]) + int(r["unmatched"]) for r in dataset.iter_rows())
    seconds = time.perf_counter() - started
    if routed != flowfiles:
        raise RuntimeError(f"Ray Data routed {routed} FlowFiles, not {flowfiles}")
    return {"flowfiles": flowfiles, "seconds": seconds, "flowfiles_per_s": flowfiles / seconds}


def dd_write(path: Path, mebibytes: int, source: str | Path = "/dev/zero") -> dict:
    """``dd if=source of=path bs=1M count=mebibytes conv=fdatasync``; dd's own seconds."""
    command = ["dd", f"if={source}", f"of={path}", "bs=1M", f"count={mebibytes}", "conv=fdatasync"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    wall = time.perf_counter() - started
    match = re.search(r"copied, ([0-9.]+) s", done.stderr)
    seconds = float(match.group(1)) if match else wall
    nbytes = mebibytes * 1024**2
    return {"command": " ".join(command), "bytes": nbytes, "seconds": seconds, "bytes_per_s": nbytes / seconds}


def lmdb_scan(path: Path, db_name: bytes) -> dict:
    """Read every key and value of one named LMDB database with a cursor (nothing decoded)."""
    started = time.perf_counter()
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=16, subdir=True)
    try:
        db = env.open_db(db_name, create=False)
        count = nbytes = 0
        with env.begin(db=db, buffers=True) as txn:
            for key, value in txn.cursor():
                count += 1
                nbytes += len(key) + len(value)
    finally:
        env.close()
    return {"records": count, "bytes": nbytes, "seconds": time.perf_counter() - started}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.baselines")
    parser.add_argument("what", choices=("bare",))
    parser.add_argument("--flowfiles", type=int, required=True)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--no-sync", dest="sync", action="store_false")
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    print(orjson.dumps(bare_durable_flow(args.flowfiles, args.batch, args.dir, args.sync)).decode())


if __name__ == "__main__":
    main()
