"""The provenance repository's workload and measurements: scenario 5 (bench/provenance.py) and
scenario 13 (bench/lineage.py) build on it, and it runs on its own (docs/provenance-index.md quotes
its figures)::

    .venv/bin/python -m bench.provenance_workload register --events 200000
    .venv/bin/python -m bench.provenance_workload rollover --events 200000
    .venv/bin/python -m bench.provenance_workload search --events 1000000
    .venv/bin/python -m bench.provenance_workload compare --events 200000

``register`` compares ``WriteAheadProvenanceRepository.register`` with a bare loop that encodes the same
events and appends them to one file (one write + flush per batch, no ids, checksums or locks).
``compare`` loads the same events into the LMDB index and into SQLite (stdlib, WAL, indexed
tables) and times insertion and the same queries. Every figure is a ratio in the same run, on the
same machine; absolute numbers drift on shared machines.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import sqlite3
import statistics
import struct
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from repositories.model import ContentClaim, ResourceClaim
from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType, encode_event
from repositories.provenance.index import (
    TERM_TABLES, FileSpan, IndexBatch, IndexQuery, LiveFiles, ProvenanceIndex, attribute_key, term_key,
)
from repositories.provenance.repository import WriteAheadProvenanceRepository

T = ProvenanceEventType
Result = TypeVar("Result")
COMPONENTS = [(f"{i:08x}-0000-4000-8000-000000000000", name) for i, name in enumerate(
    ["GenerateFlowFile", "UpdateAttribute", "RouteOnAttribute", "PutFile", "SplitText",
     "MergeContent", "InvokeHTTP", "LogAttribute", "ReplaceText", "CompressContent"])]


def _settle() -> None:
    """Keep the benchmark's own event objects out of the garbage collector's way: in the actor the
    events of a ``register`` call are gone once it returns, so they do not slow later collections."""
    gc.collect()
    gc.freeze()


def make_events(n: int, seed: int = 1, start_ms: int = 1_700_000_000_000) -> list[ProvenanceEvent]:
    """A flow's worth of events: each FlowFile gets CREATE, ATTRIBUTES_MODIFIED, ROUTE, DROP."""
    rng = random.Random(seed)
    events: list[ProvenanceEvent] = []
    resource = ResourceClaim("default", "17", "1700000000000-42")
    i = 0
    while len(events) < n:
        uuid = str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
        size = rng.choice((0, 10, 100, 1024, 1024, 4096, 65536, 1 << 20))
        claim = ContentClaim(resource, i * 1024, size)
        base = {"filename": f"file-{i}.txt", "path": "./", "uuid": uuid}
        updated = dict(base, **{"mime.type": "text/plain", "batch": str(i // 1000)})
        ts = start_ms + i  # one FlowFile a millisecond
        for step, (etype, rel) in enumerate(((T.CREATE, None), (T.ATTRIBUTES_MODIFIED, None),
                                             (T.ROUTE, rng.choice(("matched", "unmatched"))), (T.DROP, None))):
            cid, cname = COMPONENTS[(i + step) % len(COMPONENTS)]
            events.append(ProvenanceEvent(
                event_type=etype, flowfile_uuid=uuid, timestamp=ts + step, duration=1,
                component_id=cid, component_name=cname, component_type=cname, relationship=rel,
                previous_attributes=base if step else {}, updated_attributes=updated,
                previous_claim=claim if step else None, updated_claim=claim, previous_size=size if step else 0,
                updated_size=size, lineage_start_date=ts, source_queue_id=f"queue-{step}",
            ))
        i += 1
    return events[:n]


def batches(events: list[ProvenanceEvent], size: int) -> Iterator[list[ProvenanceEvent]]:
    """The events in slices of ``size`` (one ``register`` call each)."""
    for start in range(0, len(events), size):
        yield events[start:start + size]


def bench_register(n: int, batch: int) -> dict:
    """Print and return the events/s of the bare journal loop and of ``register``, and the rollover."""
    events = make_events(n)
    _settle()
    work = Path(tempfile.mkdtemp(prefix="prov-bench-"))
    try:
        entry = struct.Struct("<I").pack
        start = time.perf_counter()
        with open(work / "bare.journal", "wb") as out:
            for chunk in batches(events, batch):
                parts = []
                for event in chunk:
                    data = encode_event(event)
                    parts.append(entry(len(data)))
                    parts.append(data)
                out.write(b"".join(parts))
                out.flush()
        bare = n / (time.perf_counter() - start)
        repo = WriteAheadProvenanceRepository(work / "repo")
        start = time.perf_counter()
        for chunk in batches(events, batch):
            repo.register(chunk)
        reg = n / (time.perf_counter() - start)
        start = time.perf_counter()
        result = repo.rollover()
        roll = time.perf_counter() - start
        repo.close()
        print(f"events={n} batch={batch}")
        print(f"  bare journal append loop : {bare:12,.0f} events/s")
        print(f"  WriteAheadProvenanceRepository.register: {reg:8,.0f} events/s  ({reg / bare:.2f} x bare)")
        print(f"  rollover (merge+compress+index): {n / roll:8,.0f} events/s, {roll:.2f} s, "
              f"file {result['bytes']:,} bytes ({result['bytes'] / n:.0f} B/event)")
        return {"events": n, "batch": batch, "bare_events_per_s": bare, "register_events_per_s": reg,
                "rollover_seconds": roll, "event_file_bytes": result["bytes"]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def timed(fn: Callable[[], Result], repeat: int = 7) -> tuple[float, Result]:
    """The median of ``repeat`` calls' wall-clock times in milliseconds, and the last call's result."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


def bench_search(n: int, batch: int, keep: str | None, journal_events: int = 0) -> None:
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="prov-bench-"))
    try:
        if not (work / "repo").exists():
            events = make_events(n)
            _settle()
            repo = WriteAheadProvenanceRepository(work / "repo", indexed_attributes=("batch",))
            start = time.perf_counter()
            per_file = max(n // 10, 1)
            for chunk_start in range(0, n, per_file):
                for chunk in batches(events[chunk_start:chunk_start + per_file], batch):
                    repo.register(chunk)
                repo.rollover()
            print(f"loaded {n:,} events in {time.perf_counter() - start:.1f} s (register + 10 rollovers)")
            sample = events[n // 2]
            del events
        else:
            repo = WriteAheadProvenanceRepository(work / "repo", indexed_attributes=("batch",))
            sample = repo.get(repo.stats()["max_event_id"] // 2)
        if journal_events:
            start = time.perf_counter()
            for chunk in batches(make_events(journal_events, seed=2, start_ms=sample.timestamp + 10**7), batch):
                repo.register(chunk)
            print(f"registered {journal_events:,} more events, left in the journals "
                  f"({time.perf_counter() - start:.1f} s)")
        stats = repo.stats()
        print(f"  files={stats['event_files']} shards={stats['index_shards']} "
              f"event bytes={stats['event_file_bytes']:,} index bytes={stats['index_bytes']:,}")
        t0 = sample.timestamp
        queries = {
            "flowfile_uuid": dict(flowfile_uuid=sample.flowfile_uuid),
            "component_id limit 100": dict(component_id=sample.component_id, limit=100),
            "event_type+component+relationship limit 100": dict(
                event_type="ROUTE", component_name=COMPONENTS[2][1], relationship="matched", limit=100),
            "filename": dict(filename=sample.filename),
            "attribute batch=N (1000 FlowFiles) limit 1000": dict(attributes={"batch": sample.updated_attributes["batch"]}),
            "time range 1 s, limit 100": dict(start_time=t0, end_time=t0 + 1000, limit=100),
            "size >= 1 MiB limit 100": dict(min_size=1 << 20, limit=100),
            "DROP and size 10..100 limit 100": dict(event_type="DROP", min_size=10, max_size=100, limit=100),
            "no filter limit 1000": dict(limit=1000),
        }
        for name, query in queries.items():
            ms, result = timed(lambda: repo.search(**query))
            print(f"  search {name:45s} {ms:8.2f} ms  ({len(result)} events)")
        ms, lineage = timed(lambda: repo.lineage(sample.flowfile_uuid))
        print(f"  lineage of one FlowFile                            {ms:8.2f} ms  ({len(lineage.nodes)} nodes)")
        ms, result = timed(lambda: repo.events(n // 3, 1000))
        print(f"  events(start, 1000)                                {ms:8.2f} ms")
        ms, result = timed(lambda: repo.get(n // 3 + 17))
        print(f"  get(id)                                            {ms:8.3f} ms")
        repo.close()
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


class _SqliteIndex:
    """The comparison: the same entries in SQLite (a primary table and a term table)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path)
        self.db.executescript(
            """
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            CREATE TABLE events(id INTEGER PRIMARY KEY, file INTEGER, off INTEGER, ts INTEGER, size INTEGER);
            CREATE TABLE terms(field INTEGER, term BLOB, id INTEGER, PRIMARY KEY(field, term, id)) WITHOUT ROWID;
            CREATE INDEX events_ts ON events(ts);
            """
        )
        self.seconds = 0.0

    def add(self, batch: IndexBatch) -> None:
        """The same entries as the LMDB batch (unpacking them is not counted against SQLite)."""
        codes = {name: i for i, name in enumerate(TERM_TABLES)}
        unpack_id = struct.Struct(">Q").unpack
        unpack_ptr = struct.Struct("<QQqq").unpack
        events = [(unpack_id(k)[0], *unpack_ptr(v)) for k, v in batch.primary]
        terms = [(codes[table], key, event_id) for table, key, event_id in batch.postings()]
        start = time.perf_counter()
        with self.db:
            self.db.executemany("INSERT INTO events VALUES (?,?,?,?,?)", events)
            self.db.executemany("INSERT OR IGNORE INTO terms VALUES (?,?,?)", terms)
        self.seconds += time.perf_counter() - start

    def search(self, terms, limit):
        codes = {name: i for i, name in enumerate(TERM_TABLES)}
        # walk the first term's ids backwards on its primary key, probe the others by key
        joins = "".join(f" JOIN terms t{i} ON t{i}.field=? AND t{i}.term=? AND t{i}.id=t0.id"
                        for i in range(1, len(terms)))
        args = [x for t, k in terms[1:] for x in (codes[t], k)] + [codes[terms[0][0]], terms[0][1]]
        sql = (f"SELECT t0.id, e.file, e.off FROM terms t0{joins} JOIN events e ON e.id=t0.id "
               "WHERE t0.field=? AND t0.term=? ORDER BY t0.id DESC LIMIT ?")
        return self.db.execute(sql, (*args, limit)).fetchall()

    def search_time(self, start, end, limit):
        return self.db.execute("SELECT id, file, off FROM events WHERE ts BETWEEN ? AND ? ORDER BY id DESC LIMIT ?",
                               (start, end, limit)).fetchall()

    def size_bytes(self, path: Path) -> int:
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def bench_compare(n: int, chunk: int) -> None:
    events = make_events(n)
    for i, e in enumerate(events):
        e.event_id = i
    attrs = ("filename", "batch")
    index_batches = []
    for start in range(0, n, chunk):
        batch = IndexBatch(0, attrs)
        for i in range(start, min(start + chunk, n)):
            batch.add_event(events[i], (i // 2000) * 4096)
        index_batches.append(batch)
    _settle()
    work = Path(tempfile.mkdtemp(prefix="prov-bench-"))
    try:
        lm = ProvenanceIndex(work / "lmdb", shard_size=500 << 20, indexed_attributes=("batch",))
        start = time.perf_counter()
        for batch in index_batches:
            lm.add(batch)
        lm_rate = n / (time.perf_counter() - start)
        sq = _SqliteIndex(work / "index.sqlite")
        start = time.perf_counter()
        for batch in index_batches:
            sq.add(batch)
        sq_rate = n / sq.seconds
        print(f"events={n:,} chunk={chunk}")
        print(f"  insert  LMDB   {lm_rate:10,.0f} events/s   {lm.size_bytes():>12,} bytes")
        print(f"  insert  SQLite {sq_rate:10,.0f} events/s   {sq.size_bytes(work / 'index.sqlite'):>12,} bytes")
        live = LiveFiles([FileSpan(0, n - 1, events[0].timestamp, events[-1].timestamp)])
        sample = events[n // 2]
        queries = {
            "uuid (4 hits)": ((b"uuid", term_key(sample.flowfile_uuid)),),
            "component_id limit 100": ((b"component_id", term_key(sample.component_id)),),
            "type+component+relationship limit 100": (
                (b"type", b"ROUTE"), (b"component_name", term_key(COMPONENTS[2][1])),
                (b"relationship", term_key("matched"))),
            "filename (4 hits)": ((b"attribute", attribute_key("filename", sample.filename)),),
        }
        for name, terms in queries.items():
            lm_ms, lm_hits = timed(lambda: lm.search(IndexQuery(terms), 100, live))
            sq_ms, sq_hits = timed(lambda: sq.search(terms, 100))
            assert [h.event_id for h in lm_hits] == [r[0] for r in sq_hits], name
            print(f"  query {name:40s} LMDB {lm_ms:8.3f} ms   SQLite {sq_ms:8.3f} ms   ({len(lm_hits)} hits)")
        t0 = sample.timestamp
        lm_ms, lm_hits = timed(lambda: lm.search(IndexQuery((), t0, t0 + 1000), 100, live))
        sq_ms, sq_hits = timed(lambda: sq.search_time(t0, t0 + 1000, 100))
        assert [h.event_id for h in lm_hits] == [r[0] for r in sq_hits]
        print(f"  query {'time range 1 s limit 100':40s} LMDB {lm_ms:8.3f} ms   SQLite {sq_ms:8.3f} ms   ({len(lm_hits)} hits)")
        lm.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.provenance_workload")
    parser.add_argument("what", choices=("register", "rollover", "search", "compare"))
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="events per register call")
    parser.add_argument("--chunk", type=int, default=20_000, help="events per index transaction")
    parser.add_argument("--keep", help="directory to build (or reuse) the search repository in")
    parser.add_argument("--journal-events", type=int, default=0,
                        help="search: register this many more events and leave them in the journals")
    args = parser.parse_args(argv)
    if args.what in ("register", "rollover"):
        bench_register(args.events, args.batch)
    elif args.what == "search":
        bench_search(args.events, args.batch, args.keep, args.journal_events)
    else:
        bench_compare(args.events, args.chunk)


if __name__ == "__main__":
    main()
