"""Scenario 5: provenance. Ingest against a bare journal append; search and lineage at scale.

* Ingest: ``bench.provenance_workload.bench_register`` - ``WriteAheadProvenanceRepository.register``
  against a loop that encodes the same events and appends them to one file.
* Search: a repository of 10 million events (quick: 200,000) is loaded in chunks - events made
  by ``make_events`` a chunk at a time (never all in memory), registered 1,000 a call, rolled
  over into an event file every million events (rollover fsync off: this is a fixture, not a
  durability test); how long that takes is reported. Searches by uuid and by an indexed
  attribute are timed (median of 7) against the same search on a repository 100 times smaller:
  a ratio near 1 means search time does not grow with the repository.
* Lineage: a FlowFile forked into 1,000 children (each then modified and dropped), registered
  after the bulk and rolled over; ``lineage`` (which looks the family up a BFS level at a time) is
  timed against reading the family's events by id range, the least any lineage must read.
"""

from __future__ import annotations

import contextlib
import gc
import io
import time
from pathlib import Path

from bench import row
from repositories.model import new_flowfile_uuid
from bench.provenance_workload import COMPONENTS, batches, bench_register, make_events, timed
from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType
from repositories.provenance.repository import WriteAheadProvenanceRepository

S5 = "5 provenance"
T = ProvenanceEventType
CHUNK = 250_000
PER_FILE = 1_000_000
START_MS = 1_700_000_000_000
DESCENDANTS = 1000


def load(root: Path, total: int) -> tuple[WriteAheadProvenanceRepository, ProvenanceEvent, dict]:
    """A repository of ``total`` events; returns it, an event from the middle, and the load timings."""
    repo = WriteAheadProvenanceRepository(root, indexed_attributes=("batch",), fsync_rollover=False)
    timings = {"generate": 0.0, "register": 0.0, "rollover": 0.0}
    sample = None
    middle = total // 2
    chunk = min(CHUNK, total)
    since_rollover = 0
    gc.disable()  # millions of acyclic objects: the cycle collector would only rescan them
    try:
        for index, start in enumerate(range(0, total, chunk)):
            count = min(chunk, total - start)
            t0 = time.perf_counter()
            events = make_events(count, seed=index + 1, start_ms=START_MS + start)
            t1 = time.perf_counter()
            for batch in batches(events, 1000):
                repo.register(batch)
            t2 = time.perf_counter()
            if start <= middle < start + count:
                sample = events[middle - start]
            del events
            since_rollover += count
            if since_rollover >= PER_FILE or start + count >= total:
                repo.rollover()
                since_rollover = 0
            t3 = time.perf_counter()
            timings["generate"] += t1 - t0
            timings["register"] += t2 - t1
            timings["rollover"] += t3 - t2
    finally:
        gc.enable()
    timings["total"] = sum(timings.values())
    return repo, sample, timings


def family(parent_uuid: str, children: int, timestamp: int) -> list[ProvenanceEvent]:
    """CREATE and FORK of a parent into ``children``, each child modified and dropped; parent dropped."""
    cid, name = COMPONENTS[4]
    common = dict(component_id=cid, component_name=name, component_type=name, lineage_start_date=timestamp)
    child_uuids = [new_flowfile_uuid() for _ in range(children)]
    events = [ProvenanceEvent(event_type=T.CREATE, flowfile_uuid=parent_uuid, timestamp=timestamp, **common),
              ProvenanceEvent(event_type=T.FORK, flowfile_uuid=parent_uuid, timestamp=timestamp + 1,
                              child_uuids=child_uuids, **common)]
    for i, child in enumerate(child_uuids):
        attributes = {"uuid": child, "filename": f"part-{i}", "fragment.index": str(i)}
        events.append(ProvenanceEvent(event_type=T.ATTRIBUTES_MODIFIED, flowfile_uuid=child, timestamp=timestamp + 2,
                                      updated_attributes=attributes, **common))
        events.append(ProvenanceEvent(event_type=T.DROP, flowfile_uuid=child, timestamp=timestamp + 3,
                                      updated_attributes=attributes, **common))
    events.append(ProvenanceEvent(event_type=T.DROP, flowfile_uuid=parent_uuid, timestamp=timestamp + 3, **common))
    return events


def search_times(repo: WriteAheadProvenanceRepository, sample: ProvenanceEvent) -> dict:
    uuid_ms, by_uuid = timed(lambda: repo.search(flowfile_uuid=sample.flowfile_uuid))
    attribute = {"batch": sample.updated_attributes["batch"]}
    attribute_ms, by_attribute = timed(lambda: repo.search(attributes=attribute, limit=1000))
    return {"uuid_ms": uuid_ms, "uuid_hits": len(by_uuid), "attribute_ms": attribute_ms,
            "attribute_hits": len(by_attribute)}


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """``size``: events in the search repository (default 10 million, quick 200,000)."""
    total = size or (200_000 if quick else 10_000_000)
    ingest_events = min(total, 50_000 if quick else 500_000)
    with contextlib.redirect_stdout(io.StringIO()):  # bench_register prints its own summary
        ingest = bench_register(ingest_events, 1000)
    rows = [row(S5, "ingest events/s (register, 1,000 a call)", ingest["register_events_per_s"],
                ingest["bare_events_per_s"], "bare journal append (encode + write, one file)", "events/s",
                f"{ingest_events:,} events of 4-event FlowFile histories; rollover of them took "
                f"{ingest['rollover_seconds']:.2f} s")]

    small_repo, small_sample, _ = load(workdir / "small", max(total // 100, 1000))
    small = search_times(small_repo, small_sample)
    small_total = small_repo.stats()["max_event_id"] + 1
    small_repo.close()

    repo, sample, timings = load(workdir / "large", total)
    large = search_times(repo, sample)
    stats = repo.stats()
    loaded = (f"loading {total:,} events took {timings['total']:.0f} s ({total / timings['total']:,.0f} events/s: "
              f"making events {timings['generate']:.0f} s, register {timings['register']:.0f} s, rollover and "
              f"indexing {timings['rollover']:.0f} s) into {stats['event_files']} event files, "
              f"{stats['event_file_bytes'] / 1024**2:,.0f} MiB + index {stats['index_bytes'] / 1024**2:,.0f} MiB")
    rows.append(row(S5, f"search by uuid over {total:,} events", large["uuid_ms"], small["uuid_ms"],
                    f"same search over {small_total:,} events", "ms",
                    f"median of 7; {large['uuid_hits']} events found; {loaded}"))
    rows.append(row(S5, f"search by attribute over {total:,} events (limit 1,000)", large["attribute_ms"],
                    small["attribute_ms"], f"same search over {small_total:,} events", "ms",
                    f"median of 7; indexed attribute 'batch'; {large['attribute_hits']} events returned"))

    parent = new_flowfile_uuid()
    events = family(parent, DESCENDANTS, START_MS + total + 10_000)
    first_id, last_id = repo.register(events)
    repo.rollover()
    lineage_ms, lineage = timed(lambda: repo.lineage(parent), repeat=3)
    read_ms, read = timed(lambda: repo.events(first_id, last_id - first_id + 1), repeat=3)
    repo.close()
    problems = [] if len(lineage.events) == len(events) == len(read) else [
        f"PROBLEM: lineage has {len(lineage.events)} events, {len(events)} registered, {len(read)} read back"]
    rows.append(row(S5, f"lineage of a FlowFile with {DESCENDANTS:,} descendants", lineage_ms, read_ms,
                    "read the family's events by id range", "ms",
                    "; ".join([f"median of 3 in the {total:,}-event repository; {len(lineage.nodes):,} nodes, "
                               f"{len(lineage.events):,} events", *problems])))
    return rows
