"""The provenance repository library: journals, event files, index, search, lineage, age-off.

Real files in tmp_path, real LMDB; no Ray. Crash recovery is in test_provenance_crash.py.
"""

from __future__ import annotations

import dataclasses
import math
import re
import struct
import threading
from collections import deque
from pathlib import Path

import orjson
import pytest

from flowactors.sdk.settings import Settings
from repositories.model import ContentClaim, ResourceClaim
from repositories.provenance import (
    InMemoryProvenanceRepository,
    ProvenanceEvent,
    ProvenanceEventType,
    ProvenanceFormatError,
    WriteAheadProvenanceRepository,
    decode_event,
    encode_event,
)
from repositories.provenance.event import EVENT_ENCODING_VERSION, LINKING_TYPES, event_to_dict, matches
from repositories.provenance.eventfile import BLOCK_HEADER_SIZE, TableOfContents
from repositories.provenance.lineage import build_lineage

T = ProvenanceEventType
BASE_MS = 1_700_000_000_000
CLAIM = ContentClaim(ResourceClaim("default", "3", "1700000000000-1"), 128, 42)


def ev(event_type, uuid, *, ts=0, **fields) -> ProvenanceEvent:
    fields.setdefault("component_id", "c-gen")
    fields.setdefault("component_name", "Gen")
    return ProvenanceEvent(event_type=event_type, flowfile_uuid=uuid, timestamp=BASE_MS + ts, **fields)


def open_repo(root: Path, **kw) -> WriteAheadProvenanceRepository:
    kw.setdefault("journal_count", 2)
    kw.setdefault("block_size", 2048)
    return WriteAheadProvenanceRepository(root, **kw)


def ids(events) -> list[int]:
    return [e.event_id for e in events]


def same(a: ProvenanceEvent, b: ProvenanceEvent) -> bool:
    return event_to_dict(a) == event_to_dict(b)


def dataset(n: int = 240) -> list[ProvenanceEvent]:
    """Events with every searchable field varied, deterministic."""
    types = [T.CREATE, T.ATTRIBUTES_MODIFIED, T.ROUTE, T.CONTENT_MODIFIED, T.SEND, T.DROP]
    out = []
    for i in range(n):
        uuid = f"ff-{i // 4}"
        etype = types[i % len(types)]
        attrs = {"filename": f"file-{i // 4}.txt", "color": ("red", "green", "blue")[i % 3]}
        out.append(ev(
            etype, uuid, ts=i * 10,
            component_id=f"c-{i % 5}", component_name=f"Proc{i % 5}",
            relationship=("success" if i % 2 else "failure") if etype is T.ROUTE else None,
            previous_attributes={"filename": f"old-{i}"} if i % 7 == 0 else {},
            updated_attributes=attrs if i % 11 else {"color": attrs["color"]},
            updated_size=(i * 37) % 1000, updated_claim=CLAIM,
            parent_uuids=[f"ff-{i // 4 - 1}"] if etype is T.CONTENT_MODIFIED and i > 8 else [],
        ))
    return out


QUERIES = [
    dict(flowfile_uuid="ff-7"),
    dict(flowfile_uuid="ff-6"),                 # also matched as a parent
    dict(event_type=T.ROUTE),
    dict(event_type="DROP"),
    dict(component_id="c-3"),
    dict(component_name="Proc2"),
    dict(relationship="success"),
    dict(filename="file-9.txt"),
    dict(filename="old-14"),                    # only in previous attributes of event 14
    dict(attributes={"color": "red"}),
    dict(start_time=BASE_MS + 500, end_time=BASE_MS + 900),
    dict(start_time=BASE_MS + 2000),
    dict(end_time=BASE_MS + 100),
    dict(min_size=100, max_size=300),
    dict(min_size=990),
    dict(max_size=20),
    dict(event_type=T.ROUTE, relationship="failure", component_id="c-4"),
    dict(component_id="c-1", attributes={"color": "green"}, start_time=BASE_MS + 300),
    dict(event_type=T.SEND, min_size=200, end_time=BASE_MS + 1800),
    dict(flowfile_uuid="ff-20", event_type=T.CREATE),
    dict(component_id="no-such-component"),
    dict(component_id="c-2", limit=7),
    dict(limit=5),
    dict(start_time=BASE_MS + 1000, end_time=BASE_MS + 1500, limit=3),
    dict(min_size=500, limit=4),
    dict(),
]


def expected(events: list[ProvenanceEvent], query: dict) -> list[int]:
    q = dict(query)
    limit = q.pop("limit", 1000)
    attrs = dict(q.pop("attributes", None) or {})
    if "filename" in q:
        attrs["filename"] = q.pop("filename")
    if "event_type" in q:
        q["event_type"] = ProvenanceEventType(q["event_type"])
    found = [e.event_id for e in reversed(events) if matches(e, attributes=attrs or None, **q)]
    return found[:limit]


# ---------------------------------------------------------------- encoding


def test_event_encoding_round_trip_and_version_byte():
    event = ev(T.FORK, "p", parent_uuids=["p"], child_uuids=["a", "b"], relationship="split",
               previous_attributes={"x": "1"}, updated_attributes={"x": "2", "ünï": "çødé"},
               previous_claim=CLAIM, updated_claim=CLAIM.slice(2, 10), previous_size=42,
               updated_size=10, details="d", transit_uri="file:///x", source_queue_id="q-1",
               source_system_flowfile_id="s", alternate_identifier="alt", lineage_start_date=5)
    event.event_id = 77
    data = encode_event(event)
    assert data[0] == EVENT_ENCODING_VERSION == 1
    back = decode_event(data)
    assert same(back, event) and back.updated_claim == CLAIM.slice(2, 10)
    assert back.event_type is T.FORK and str(back.event_type) == "FORK"
    with pytest.raises(ProvenanceFormatError, match="some/file.prov.*version 9"):
        decode_event(bytes([9]) + data[1:], "some/file.prov")
    with pytest.raises(ProvenanceFormatError, match="here"):
        decode_event(b"\x01[1,2]", "here")


def test_all_event_types_exist():
    assert {t.value for t in T} == {
        "CREATE", "RECEIVE", "FETCH", "SEND", "DROP", "EXPIRE", "CLONE", "FORK", "JOIN", "ROUTE",
        "ATTRIBUTES_MODIFIED", "CONTENT_MODIFIED", "ADDINFO", "ASSOCIATE", "REPLAY", "DOWNLOAD"}
    assert ProvenanceEvent(event_type="DROP", flowfile_uuid="x").event_type is T.DROP


# ---------------------------------------------------------------- register / get / events


def test_register_get_across_journals_and_rollovers(tmp_path):
    repo = open_repo(tmp_path / "p", journal_count=3)
    events = dataset(60)
    ranges = [repo.register(events[i:i + 10]) for i in range(0, 30, 10)]
    assert ranges == [(0, 9), (10, 19), (20, 29)]
    assert ids(events[:30]) == list(range(30))
    journals = sorted(p.name for p in (tmp_path / "p" / "default" / "journals").iterdir())
    assert journals == ["0-0.journal", "0-1.journal", "0-2.journal"]      # round-robin, one per call
    assert all(same(repo.get(i), events[i]) for i in range(30))             # from the journals
    assert repo.stats()["index_lag"] == 30
    result = repo.rollover()
    assert (result["events"], result["first_id"], result["last_id"]) == (30, 0, 29)
    assert result["blocks"] > 1                                              # 2 KiB blocks
    assert list((tmp_path / "p" / "default" / "journals").iterdir()) == []
    assert repo.register(events[30:45]) == (30, 44)
    repo.rollover()
    assert repo.register(events[45:60]) == (45, 59)
    assert all(same(repo.get(i), events[i]) for i in range(60))             # two files + a journal
    assert repo.get(60) is None and repo.get(-1) is None
    assert repo.register([]) == (60, 59)
    stats = repo.stats()
    assert (stats["max_event_id"], stats["event_files"], stats["index_lag"]) == (59, 2, 15)
    repo.close()
    repo = open_repo(tmp_path / "p")                 # the journal is merged on open
    assert all(same(repo.get(i), events[i]) for i in range(60))
    assert repo.stats()["index_lag"] == 0 and repo.register([ev(T.DROP, "z")]) == (60, 60)
    repo.close()


def test_events_sequential_by_id_range(tmp_path):
    repo = open_repo(tmp_path / "p", block_size=512)
    events = dataset(100)
    repo.register(events[:40])
    repo.rollover()
    repo.register(events[40:70])
    repo.rollover()
    repo.register(events[70:])
    assert ids(repo.events(0, 1000)) == list(range(100))
    assert ids(repo.events(33, 20)) == list(range(33, 53))                  # across a file boundary
    assert ids(repo.events(65, 10)) == list(range(65, 75))                  # file into journal
    assert ids(repo.events(95, 10)) == list(range(95, 100))
    assert repo.events(100, 10) == []
    assert all(same(a, b) for a, b in zip(repo.events(0, 100), events))
    repo.close()


def test_no_empty_files_on_rollover_without_events(tmp_path):
    repo = open_repo(tmp_path / "p")
    assert repo.rollover()["file"] is None
    assert repo.maybe_rollover(now=10**9)["file"] is None
    container = tmp_path / "p" / "default"
    assert [p.name for p in container.iterdir()] == ["journals"]
    assert list((container / "journals").iterdir()) == []
    assert list((tmp_path / "p" / "index").iterdir()) == []
    repo.register([ev(T.CREATE, "a")])
    assert repo.rollover()["events"] == 1
    assert repo.rollover()["file"] is None                                   # nothing new: no file
    assert sorted(p.name for p in container.iterdir()) == ["0.prov", "0.toc", "journals"]
    assert list((container / "journals").iterdir()) == []
    repo.close()


def test_maybe_rollover_by_interval_and_size(tmp_path):
    repo = open_repo(tmp_path / "p", rollover_interval=30.0, rollover_bytes=None)
    repo.register([ev(T.CREATE, "a")])
    start = repo._last_rollover
    assert repo.maybe_rollover(now=start + 10) is None
    assert repo.maybe_rollover(now=start + 31)["events"] == 1
    repo.close()
    repo = open_repo(tmp_path / "q", rollover_interval=3600.0, rollover_bytes=2000)
    repo.register(dataset(2))
    assert repo.maybe_rollover() is None
    repo.register(dataset(20))
    assert repo.maybe_rollover()["events"] == 22
    repo.close()


def test_multiple_containers(tmp_path):
    other = tmp_path / "elsewhere"
    repo = open_repo(tmp_path / "p", containers=("a", str(other)), journal_count=1)
    events = dataset(40)
    for i in range(0, 40, 10):
        repo.register(events[i:i + 10])
    assert {p.name for p in (tmp_path / "p" / "a" / "journals").iterdir()} == {"0-0.journal"}
    assert {p.name for p in (other / "journals").iterdir()} == {"0-1.journal"}
    repo.rollover()
    repo.register([ev(T.DROP, "x")])
    repo.rollover()
    assert (tmp_path / "p" / "a" / "0.prov").exists() and (other / "40.prov").exists()
    repo.close()
    repo = open_repo(tmp_path / "p", containers=("a", str(other)), journal_count=1)
    assert ids(repo.events(0, 100)) == list(range(41))
    assert ids(repo.search(component_id="c-1")) == expected(events, dict(component_id="c-1"))
    repo.close()


def test_from_settings(tmp_path):
    settings = Settings(provenance_journal_count=3, provenance_block_size=4096,
                        provenance_indexed_attributes=("color",))
    repo = WriteAheadProvenanceRepository.from_settings(tmp_path, settings)
    assert repo.root == tmp_path / "provenance" and repo.journal_count == 3
    assert repo.block_size == 4096 and "color" in repo._searchable
    repo.close()


# ---------------------------------------------------------------- search


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    """The dataset split over three event files (small blocks, one shard per file) and a journal."""
    root = tmp_path_factory.mktemp("search") / "p"
    events = dataset(240)
    repo = open_repo(root, indexed_attributes=("color",), index_shard_size=1, index_chunk=25)
    for start, end in ((0, 80), (80, 150), (150, 200)):
        for i in range(start, end, 9):
            repo.register(events[i:min(i + 9, end)])
        repo.rollover()
    repo.register(events[200:220])
    repo.register(events[220:])
    assert repo.stats()["index_shards"] >= 8          # every 25-event batch starts a shard
    memory = InMemoryProvenanceRepository(indexed_attributes=("color",))
    memory.register([decode_event(encode_event(e)) for e in events])
    yield repo, memory, events
    repo.close()


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}" for k in q) or "all")
def test_every_search_filter_and_combination(searchable, query):
    repo, memory, events = searchable
    want = expected(events, query)
    assert ids(repo.search(**query)) == want
    assert ids(memory.search(**query)) == want
    found = repo.search(**query)
    assert all(same(e, events[e.event_id]) for e in found)


def test_search_only_journal_or_only_index(tmp_path):
    events = dataset(50)
    repo = open_repo(tmp_path / "p")
    repo.register(events[:50])
    assert ids(repo.search(component_id="c-2")) == expected(events, dict(component_id="c-2"))
    repo.rollover()
    assert ids(repo.search(component_id="c-2")) == expected(events, dict(component_id="c-2"))
    assert ids(repo.search(component_id="c-2", limit=2)) == expected(events, dict(component_id="c-2"))[:2]
    assert repo.search(limit=0) == []
    repo.close()


def test_search_rejects_unindexed_attribute(tmp_path):
    repo = open_repo(tmp_path / "p", indexed_attributes=("color",))
    with pytest.raises(ValueError, match="'shape'.*not indexed"):
        repo.search(attributes={"shape": "round"})
    repo.close()


def test_long_values_are_indexed_by_hash(tmp_path):
    repo = open_repo(tmp_path / "p")
    long_name = "n" * 5000
    repo.register([ev(T.CREATE, "a", updated_attributes={"filename": long_name}),
                   ev(T.CREATE, "b", updated_attributes={"filename": long_name[:-1] + "m"})])
    repo.rollover()
    assert ids(repo.search(filename=long_name)) == [0]
    repo.close()


def test_an_event_without_a_filename_leaves_the_others_of_its_batch_found_by_theirs(tmp_path):
    repo = open_repo(tmp_path / "p")
    repo.register([ev(T.CREATE, "a", updated_attributes={"filename": "x"}), ev(T.CREATE, "b"),
                   ev(T.CREATE, "c", updated_attributes={"filename": "y"})])
    repo.rollover()
    assert ids(repo.search(filename="x")) == [0] and ids(repo.search(filename="y")) == [2]
    repo.close()


def test_term_keys_of_a_batch_are_those_of_one_value_at_a_time():
    from repositories.provenance.index import attribute_key, term_key, term_keys
    values = ["a", "é" * 300, "x" * 500, "name-1.txt", ""]
    assert term_keys(values) == [term_key(v) for v in values]
    assert term_keys(values, b"filename\x00") == [attribute_key("filename", v) for v in values]
    assert term_keys([7, "b"]) == [term_key("7"), term_key("b")]


# ---------------------------------------------------------------- lineage


def lineage_history() -> list[ProvenanceEvent]:
    """A created file is split in two; one half is cloned; a half and the clone are merged and sent.

        A: CREATE, ATTRIBUTES_MODIFIED, FORK -> B, C, DROP
        B: ROUTE                  C: CLONE -> D
        JOIN(B, D) -> E           E: SEND, DROP           (and an unrelated X: CREATE)
    """
    return [
        ev(T.CREATE, "A", ts=1),
        ev(T.ATTRIBUTES_MODIFIED, "A", ts=2),
        ev(T.CREATE, "X", ts=3),
        ev(T.FORK, "A", ts=4, parent_uuids=["A"], child_uuids=["B", "C"]),
        ev(T.ROUTE, "B", ts=5, relationship="success"),
        ev(T.CLONE, "C", ts=6, parent_uuids=["C"], child_uuids=["D"]),
        ev(T.DROP, "A", ts=7),
        ev(T.JOIN, "E", ts=8, parent_uuids=["B", "D"], child_uuids=["E"]),
        ev(T.SEND, "E", ts=9, transit_uri="sftp://x"),
        ev(T.DROP, "E", ts=10),
    ]


EXPECTED_NODES = ["flowfile:A", "event:0", "event:1", "event:3", "flowfile:B", "flowfile:C",
                  "event:4", "event:5", "flowfile:D", "event:6", "event:7", "flowfile:E",
                  "event:8", "event:9"]
EXPECTED_EDGES = {
    ("flowfile:A", "event:0", "A"), ("event:0", "event:1", "A"), ("event:1", "event:3", "A"),
    ("event:3", "flowfile:B", "B"), ("event:3", "flowfile:C", "C"), ("flowfile:B", "event:4", "B"),
    ("flowfile:C", "event:5", "C"), ("event:5", "flowfile:D", "D"), ("event:3", "event:6", "A"),
    ("event:4", "event:7", "B"), ("flowfile:D", "event:7", "D"), ("event:7", "flowfile:E", "E"),
    ("flowfile:E", "event:8", "E"), ("event:8", "event:9", "E"),
}


@pytest.mark.parametrize("start", ["A", "B", "D", "E"])
@pytest.mark.parametrize("kind", ["durable", "memory"])
def test_lineage_graph_is_exact_from_any_member(tmp_path, start, kind):
    events = lineage_history()
    if kind == "durable":
        repo = open_repo(tmp_path / "p")
        repo.register(events[:4])
        repo.rollover()                       # part in an event file, part in the journal
        repo.register(events[4:])
    else:
        repo = InMemoryProvenanceRepository()
        repo.register(events)
    lineage = repo.lineage(start)
    assert [n.id for n in lineage.nodes] == EXPECTED_NODES
    assert {(e.source, e.target, e.flowfile_uuid) for e in lineage.edges} == EXPECTED_EDGES
    assert len(lineage.edges) == len(EXPECTED_EDGES) and not lineage.truncated
    assert lineage.node("event:7").event_type is T.JOIN
    repo.close()


def test_replay_links_lineage(tmp_path):
    repo = InMemoryProvenanceRepository()
    repo.register([ev(T.RECEIVE, "orig"), ev(T.SEND, "orig"),
                   ev(T.REPLAY, "copy", parent_uuids=["orig"], child_uuids=["copy"]),
                   ev(T.SEND, "copy")])
    lineage = repo.lineage("copy")
    assert {(e.source, e.target) for e in lineage.edges} == {
        ("flowfile:orig", "event:0"), ("event:0", "event:1"), ("event:1", "event:2"),
        ("event:2", "flowfile:copy"), ("flowfile:copy", "event:3")}


def lineage_one_uuid_at_a_time(repo, uuid: str, max_events: int) -> tuple[list[int], bool]:
    """The reference: lineage's walk as it was before lookups were batched by BFS level, one
    ``search`` per uuid. Returns the event ids found and whether the walk was cut short."""
    found: dict[int, ProvenanceEvent] = {}
    seen: set[str] = set()
    frontier = deque([uuid])
    truncated = False
    while frontier:
        current = frontier.popleft()
        if current in seen:
            continue
        seen.add(current)
        for event in repo.search(flowfile_uuid=current, limit=None):
            if event.event_id in found:
                continue
            found[event.event_id] = event
            if event.event_type in LINKING_TYPES:
                frontier.extend(other for other in (event.flowfile_uuid, *event.parent_uuids, *event.child_uuids)
                                if other not in seen)
        if len(found) >= max_events:
            truncated = any(other not in seen for other in frontier)
            break
    return sorted(found), truncated


ODD_KID = 'odd"kid\\'          # a quote and a backslash: its encoded needle has a quote inside


def wide_family() -> tuple[list[ProvenanceEvent], list[ProvenanceEvent]]:
    """A family whose BFS levels are wider than a few uuids, and unrelated events naming its uuids.

        root: CREATE, FORK -> kid-0..kid-39 and ODD_KID; every kid: ATTRIBUTES_MODIFIED
        JOIN(kid-2i, kid-2i+1) -> join-2i (i < 5); join-0: CLONE -> clone; REPLAY(clone) -> replay
        the other kids and root: DROP; replay: SEND
    The noise has the family's uuids as attribute values and details and a uuid extending one.
    """
    kids = [f"kid-{i}" for i in range(40)] + [ODD_KID]
    family = [ev(T.CREATE, "root"), ev(T.FORK, "root", parent_uuids=["root"], child_uuids=kids)]
    family += [ev(T.ATTRIBUTES_MODIFIED, kid, updated_attributes={"filename": kid}) for kid in kids]
    family += [ev(T.JOIN, f"join-{i}", parent_uuids=kids[i:i + 2], child_uuids=[f"join-{i}"]) for i in range(0, 10, 2)]
    family += [ev(T.CLONE, "join-0", parent_uuids=["join-0"], child_uuids=["clone"]),
               ev(T.REPLAY, "replay", parent_uuids=["clone"], child_uuids=["replay"])]
    family += [ev(T.DROP, kid) for kid in kids[10:]] + [ev(T.DROP, "root"), ev(T.SEND, "replay")]
    noise = [ev(T.CREATE, f"noise-{i}", updated_attributes={"filename": kids[i % len(kids)]},
                details=f"about {kids[(i + 1) % len(kids)]} and root") for i in range(30)]
    noise += [ev(T.CREATE, "kid-1x", previous_attributes={"filename": "replay"}),
              ev(T.FORK, "kid-1x", parent_uuids=["kid-1x"], child_uuids=["kid-1xy"])]
    return family, noise


def test_lineage_reads_a_family_across_event_files_shards_and_journals_level_at_a_time(tmp_path):
    """The family lies in two event files (one index shard each), in sealed journals whose merge is
    under way (some of their index entries written, the file not yet live) and in the active
    journal: the graph is the one built from the family's events, as the in-memory repository
    gives it; with max_events it is cut exactly where a walk of one search per uuid cuts."""
    family, noise = wide_family()
    mixed: list[ProvenanceEvent] = []
    for i, event in enumerate(family):
        mixed.append(event)
        if i % 4 == 3 and noise:
            mixed.append(noise.pop())
    mixed += noise
    quarter = len(mixed) // 4
    parts = [mixed[:quarter], mixed[quarter:2 * quarter], mixed[2 * quarter:3 * quarter], mixed[3 * quarter:]]
    assert all(any(e in part for e in family) for part in parts)

    in_merge, release = threading.Event(), threading.Event()

    def hook(step):
        if step == "merge-indexed-chunk" and armed and not in_merge.is_set():
            in_merge.set()
            assert release.wait(10)

    armed = False
    repo = open_repo(tmp_path / "p", index_shard_size=1, fault_hook=hook)   # a shard per index chunk
    memory = InMemoryProvenanceRepository()
    for number, part in enumerate(parts):
        for start in range(0, len(part), 7):
            repo.register(part[start:start + 7])
            memory.register([decode_event(encode_event(e)) for e in part[start:start + 7]])
        if number < 2:
            repo.rollover()
        elif number == 2:
            armed, repo.index_chunk = True, 10      # the merge stops after indexing 10 of its events
            worker = threading.Thread(target=repo.rollover)
            worker.start()
            assert in_merge.wait(10)
    stats = repo.stats()
    assert stats["event_files"] == 2 and stats["index_shards"] == 3 and stats["index_lag"] == len(parts[2]) + len(parts[3])
    family_ids = sorted(ids(family))

    def check(repository) -> None:
        for start in ("root", "kid-7", ODD_KID, "join-4", "clone", "replay"):
            lineage = repository.lineage(start)
            expected = build_lineage(start, family)
            assert ids(lineage.events) == family_ids and not lineage.truncated
            assert lineage.nodes == expected.nodes and lineage.edges == expected.edges
        for max_events in (1, 2, 3, 10, 43, 44, 60, len(family) - 1, len(family), 10_000):
            for start in ("root", "kid-3", "replay"):
                lineage = repository.lineage(start, max_events=max_events)
                assert (ids(lineage.events), lineage.truncated) == lineage_one_uuid_at_a_time(
                    repository, start, max_events), (start, max_events)
        assert ids(repository.lineage("kid-1x").events) == [e.event_id for e in mixed if e.flowfile_uuid == "kid-1x"]

    try:
        check(repo)              # files, shards, a merge under way and the active journal
        check(memory)
    finally:
        release.set()
        worker.join(10)
    check(repo)                  # the sealed journals merged
    repo.rollover()
    assert repo.stats()["index_lag"] == 0
    check(repo)                  # everything in event files
    repo.close()


def test_contains_any_is_a_substring_test():
    from repositories.provenance.filters import FEW_NEEDLES, contains_any

    values = [f"v-{i}" for i in range(2 * FEW_NEEDLES)] + ['q"x', "b\\s", "", "é"]
    encoded = [orjson.dumps(v) for v in values]
    samples = [b"", b'"', b'""', b'"v-1"', b'"v-10"', b'["v-1x","v-2"]', b'"v-1', b'v-1"', b'"q\\"x"',
               b'a"b\\\\s"c', b'"\xc3\xa9"', b"raw", b'x"', b'\x00"v-3"\xff', b'"v-99"', b"nothing here",
               b'"v-3', b'v-3"', b'"v-32"', b'\x00"v-20" "q\\"y"']
    for needles in (encoded[:1], encoded[:FEW_NEEDLES], encoded, encoded[1::2], encoded + [b"raw", b'x"'],
                    [b'"'] + encoded[20:]):
        test = contains_any(needles)
        for sample in samples:
            assert test(sample) == any(n in sample for n in needles), (len(needles), sample)
    assert sum(contains_any(encoded)(sample) for sample in samples) == 9


# ---------------------------------------------------------------- age-off


def aged_repo(root: Path, **kw) -> WriteAheadProvenanceRepository:
    """Three event files: events 0-19 at t=0..19 s, 20-39 at t=100.., 40-59 at t=200.."""
    kw.setdefault("index_shard_size", 1 << 30)
    repo = open_repo(root, **kw)
    for part in range(3):
        repo.register([ev(T.CREATE, f"f{part}-{i}", ts=part * 100_000 + i * 1000, component_id="c")
                       for i in range(20)])
        repo.rollover()
    return repo


def test_age_off_by_time_oldest_first_and_dangling_skipped(tmp_path):
    repo = aged_repo(tmp_path / "p", max_storage_time=120.0)
    assert repo.stats()["index_shards"] == 1          # one shard points at all three files
    now = (BASE_MS + 250_000) / 1000                   # files 0 (max t=19 s) and 20 (119 s) expire
    result = repo.age_off(now=now)
    assert result["deleted_files"] == [0, 20] and result["dropped_shards"] == []
    container = tmp_path / "p" / "default"
    assert sorted(p.name for p in container.glob("*.prov")) == ["40.prov"]
    assert ids(repo.search(component_id="c")) == list(range(59, 39, -1))   # dangling entries skipped
    assert ids(repo.search(start_time=BASE_MS, limit=100)) == list(range(59, 39, -1))
    assert repo.get(5) is None and repo.get(45).event_id == 45
    assert ids(repo.events(0, 100)) == list(range(40, 60))
    result = repo.age_off(now=now + 1000)
    assert result["deleted_files"] == [40] and len(result["dropped_shards"]) == 1
    assert list((tmp_path / "p" / "index").iterdir()) == []
    repo.register([ev(T.DROP, "late")])                # ids continue after everything aged off
    assert repo.stats()["max_event_id"] == 60
    repo.close()
    repo = open_repo(tmp_path / "p")
    assert repo.register([ev(T.DROP, "later")]) == (61, 61)
    repo.close()


def test_age_off_by_size_drops_whole_shards(tmp_path):
    repo = aged_repo(tmp_path / "p", index_shard_size=1)   # each file gets its own shard
    assert repo.stats()["index_shards"] == 3
    oldest_file = repo._files[0].size()
    oldest_shard = sum(p.stat().st_size for p in repo._index.shards[0].path.iterdir())
    usage = repo._usage()
    # a limit the usage is over: the oldest file and its shard must go; then usage <= 90 % of it
    repo.max_storage_size = math.ceil((usage - oldest_file - oldest_shard) / 0.9) + 1
    assert usage > repo.max_storage_size
    result = repo.age_off(now=BASE_MS / 1000)
    assert result["deleted_files"] == [0] and len(result["dropped_shards"]) == 1
    assert repo._usage() <= 0.9 * repo.max_storage_size
    assert ids(repo.search(component_id="c", limit=100)) == list(range(59, 19, -1))
    repo.max_storage_size = 1
    result = repo.age_off(now=BASE_MS / 1000)
    assert result["deleted_files"] == [20, 40] and repo.stats()["event_files"] == 0
    assert repo.stats()["index_shards"] == 0 and repo.search() == []
    repo.close()


def test_in_memory_age_off():
    repo = InMemoryProvenanceRepository(max_storage_time=50.0)
    repo.register([ev(T.CREATE, f"x{i}", ts=i * 10_000) for i in range(10)])
    assert repo.age_off(now=(BASE_MS + 100_000) / 1000)["deleted_events"] == 5
    assert ids(repo.events(0, 100)) == [5, 6, 7, 8, 9]
    repo.max_storage_size = repo.stats()["bytes_in_memory"] - 1
    repo.age_off(now=0)
    assert repo.stats()["bytes_in_memory"] <= 0.9 * repo.max_storage_size


# ---------------------------------------------------------------- corruption


def test_corrupt_block_names_the_file(tmp_path):
    repo = open_repo(tmp_path / "p", block_size=256)
    events = dataset(30)
    for start in range(0, 30, 3):        # a batch never spans two blocks: ten batches, several blocks
        repo.register(events[start:start + 3])
    repo.rollover()
    prov = tmp_path / "p" / "default" / "0.prov"
    toc = TableOfContents.read(tmp_path / "p" / "default" / "0.toc")
    offset = toc.block_offsets[1] + BLOCK_HEADER_SIZE + 3
    data = bytearray(prov.read_bytes())
    data[offset] ^= 0xFF
    prov.write_bytes(bytes(data))
    repo._cache.forget(str(prov))
    first_of_block = toc.block_first_ids[1]
    with pytest.raises(ProvenanceFormatError,
                       match=re.escape(f"{prov}: block at offset {toc.block_offsets[1]} fails its checksum")):
        repo.get(first_of_block)
    assert repo.get(0).event_id == 0                  # other blocks still read
    repo.close()


def test_bad_version_bytes_are_clear_errors(tmp_path):
    repo = open_repo(tmp_path / "p")
    repo.register(dataset(3))
    repo.rollover()
    repo.close()
    prov = tmp_path / "p" / "default" / "0.prov"
    data = bytearray(prov.read_bytes())
    data[4] = 7                                         # the event file's version byte
    prov.write_bytes(bytes(data))
    repo = open_repo(tmp_path / "p")
    with pytest.raises(ProvenanceFormatError, match=re.escape(f"{prov}: unsupported event file version 7")):
        repo.get(1)
    repo.close()
    toc = tmp_path / "p" / "default" / "0.toc"
    data = bytearray(toc.read_bytes())
    data[4] = 9
    toc.write_bytes(bytes(data))
    with pytest.raises(ProvenanceFormatError, match=re.escape(f"{toc}: unsupported table-of-contents version 9")):
        TableOfContents.read(toc)


def test_bad_event_version_in_journal_names_the_journal(tmp_path):
    from repositories.provenance.journal import JournalFile, pack_count, pack_entry_header
    root = tmp_path / "p"
    open_repo(root).close()
    path = root / "default" / "journals" / "0-0.journal"
    journal = JournalFile.create(path, 0)
    bad = bytes([9]) + encode_event(ev(T.CREATE, "a"))[1:]
    journal.append(pack_count(1) + pack_entry_header(0, 1, len(bad)) + bad, 0, 0, 1)
    journal.close()
    with pytest.raises(ProvenanceFormatError, match=r"0-0.journal.*encoding version 9"):
        open_repo(root)


def test_lost_or_corrupt_toc_is_rebuilt(tmp_path):
    repo = open_repo(tmp_path / "p", block_size=300)
    events = dataset(40)
    for start in range(0, 40, 4):
        repo.register(events[start:start + 4])
    repo.rollover()
    repo.close()
    (tmp_path / "p" / "default" / "0.toc").write_bytes(b"garbage")
    repo = open_repo(tmp_path / "p")
    assert repo.recovery["tocs_rebuilt"] == [str(tmp_path / "p" / "default" / "0.prov")]
    assert all(same(a, b) for a, b in zip(repo.events(0, 100), events))
    repo.close()


def test_deleted_index_is_rebuilt_from_event_files(tmp_path):
    import shutil
    repo = open_repo(tmp_path / "p")
    events = dataset(40)
    repo.register(events)
    repo.rollover()
    repo.close()
    shutil.rmtree(tmp_path / "p" / "index")
    repo = open_repo(tmp_path / "p")
    assert repo.recovery["files_reindexed"] == [0]
    assert ids(repo.search(component_id="c-1")) == expected(events, dict(component_id="c-1"))
    repo.close()


# ---------------------------------------------------------------- threads


def test_register_and_search_while_a_rollover_runs(tmp_path):
    """register only waits for the seal and commit steps; reads stay complete and duplicate-free."""
    in_merge = threading.Event()
    release = threading.Event()

    def hook(step):
        if step == "merge-indexed-chunk" and not in_merge.is_set():
            in_merge.set()
            assert release.wait(10)

    events = dataset(120)
    repo = open_repo(tmp_path / "p", index_chunk=20, fault_hook=hook)
    repo.register(events[:60])
    worker = threading.Thread(target=repo.rollover)
    worker.start()
    assert in_merge.wait(10)
    assert repo.register(events[60:120]) == (60, 119)          # not blocked by the merge
    assert ids(repo.search(component_id="c-1", limit=None)) == expected(events, dict(component_id="c-1"))
    assert ids(repo.events(0, 500)) == list(range(120))
    release.set()
    worker.join(10)
    assert ids(repo.search(component_id="c-1", limit=None)) == expected(events, dict(component_id="c-1"))
    repo.rollover()
    assert ids(repo.search(limit=None)) == list(range(119, -1, -1))
    assert repo.stats()["event_files"] == 2
    repo.close()


def test_register_batches_gives_each_batch_the_ids_that_follow(tmp_path):
    """Batches encoded by the executors carry no ids: each takes the next ones, in call order."""
    from repositories.provenance.event import encode_batch, event_fields

    for repo in (open_repo(tmp_path / "durable"), InMemoryProvenanceRepository()):
        events = [ev(T.CREATE, f"u{i}", ts=i) for i in range(6)]
        repo.register(events[:1])
        batches = [encode_batch([event_fields(e) for e in events[1:4]]),
                   encode_batch([event_fields(e) for e in events[4:]])]
        assert repo.register_batches(batches) == (1, 5)
        assert [(e.event_id, e.flowfile_uuid) for e in repo.events(0, 10)] == [(i, f"u{i}") for i in range(6)]
        assert repo.register_batches([]) == (6, 5)
        with pytest.raises(ProvenanceFormatError, match="must be encoded by encode_batch"):
            repo.register_batches([dataclasses.replace(batches[0], data=encode_event(events[0]))])
        repo.rollover()
        assert [e.flowfile_uuid for e in repo.search(limit=None)] == [f"u{i}" for i in range(5, -1, -1)]
        repo.close()


def _numbered(first: int, count: int, prefix: str = "u"):
    from repositories.provenance.event import encode_batch, event_fields

    return first, encode_batch([event_fields(ev(T.CREATE, f"{prefix}{i}", ts=i)) for i in range(first, first + count)])


def test_numbered_batches_become_visible_in_id_order_whatever_order_they_arrive_in(tmp_path):
    """Ids reserved by the log arrive out of order from several executors: a batch whose lower
    ids are on their way is written but not shown, so a reader walking ids never sees an id
    appear behind one it read; a batch sent again is dropped."""
    repo = open_repo(tmp_path)
    assert repo.register_numbered([_numbered(3, 2), _numbered(7, 1)]) == []
    assert repo.events(0, 10) == [] and repo.search(limit=None) == [] and repo.get(3) is None
    assert repo.stats()["waiting_batches"] == 2 and repo.stats()["journal_bytes"] > 0  # written
    assert repo.register_numbered([_numbered(0, 3)]) == []      # 0-4 now, 7 still waits for 5-6
    assert ids(repo.events(0, 10)) == [0, 1, 2, 3, 4]
    assert repo.register_numbered([_numbered(5, 2), _numbered(3, 2)]) == []   # 3-4 again: dropped
    assert ids(repo.events(0, 10)) == list(range(8)) and repo.stats()["waiting_batches"] == 0
    assert repo.wait_visible(7, 0.0)
    repo.rollover()
    assert [e.flowfile_uuid for e in repo.events(0, 10)] == [f"u{i}" for i in range(8)]
    assert ids(repo.search(limit=None)) == list(range(7, -1, -1))
    repo.close()


def test_ids_that_arrive_after_a_rollover_sealed_their_generation_go_to_its_event_file(tmp_path):
    """Rollover seals the journals at the highest id written; the ids below it that were still
    on their way go to the sealed journals when they come, which are merged once complete: event
    files never overlap, whatever the timing."""
    repo = open_repo(tmp_path)
    repo.register_numbered([_numbered(0, 2), _numbered(4, 2)])
    assert repo.rollover()["events"] == 0   # sealed at 6, 2-3 missing
    repo.register_numbered([_numbered(6, 2)])   # the next generation's first
    assert ids(repo.events(0, 10)) == [0, 1]
    repo.register_numbered([_numbered(2, 2)])
    assert ids(repo.events(0, 10)) == list(range(8))
    merged = repo.maybe_rollover()            # due: a sealed generation became complete
    assert (merged["first_id"], merged["last_id"], merged["events"]) == (0, 7, 8)
    assert repo.stats()["journal_files"] == 0
    assert ids(repo.search(limit=None)) == list(range(7, -1, -1))
    assert [repo.get(i).flowfile_uuid for i in range(8)] == [f"u{i}" for i in range(8)]
    repo.close()


def test_a_rollover_while_only_an_older_generation_waits_seals_nothing_new(tmp_path):
    """Ids of a sealed generation still on their way, nothing written since: a rollover then has
    no current generation to seal, and the ids keep going to the sealed one's event file."""
    repo = open_repo(tmp_path)
    repo.register_numbered([_numbered(0, 1), _numbered(4, 2)])
    repo.rollover()                               # sealed at 6; 1-3 on their way
    repo.register_numbered([_numbered(2, 2)])     # waits for 1
    assert repo.rollover()["events"] == 0 and repo.stats()["journal_files"] >= 1
    repo.register_numbered([_numbered(1, 1), _numbered(6, 1)])
    first = repo.maybe_rollover()
    assert (first["first_id"], first["last_id"]) == (0, 6)
    assert ids(repo.events(0, 10)) == list(range(7))
    assert [repo.get(i).flowfile_uuid for i in range(7)] == [f"u{i}" for i in range(7)]
    repo.close()
    reopened = open_repo(tmp_path)
    assert ids(reopened.events(0, 10)) == list(range(7)) and reopened.recovery["events_lost"] == 0
    reopened.close()


def test_ids_that_never_arrive_are_given_up_and_late_batches_are_sent_back(tmp_path, caplog):
    """A commit's process died between the log and provenance: the batches after its ids wait
    ``gap_timeout`` seconds, then its ids are given up (said in the log); its events, if they
    come after all, are refused as late (the caller reserves new ids)."""
    repo = open_repo(tmp_path, gap_timeout=0.2)
    repo.register_numbered([_numbered(0, 2), _numbered(5, 2)])
    assert ids(repo.events(0, 10)) == [0, 1]
    assert repo.rollover()["events"] == 0   # sealed at 7, merged once 2-4 came or were given up
    assert repo.stats()["waiting_batches"] == 1 and repo.stats()["event_files"] == 0
    assert not repo.wait_visible(5, 0.05)
    repo.maybe_rollover(now=float("-inf"))  # a timer tick before the timeout: still waiting
    assert ids(repo.events(0, 10)) == [0, 1]
    threading.Event().wait(0.25)
    repo.maybe_rollover()
    assert ids(repo.events(0, 10)) == [0, 1, 5, 6] and repo.stats()["ids_given_up"] == 3
    assert repo.stats()["event_files"] == 1 and ids(repo.search(limit=None)) == [6, 5, 1, 0]  # merged
    assert "event ids 2-4 never arrived" in caplog.text
    assert repo.register_numbered([_numbered(9, 1), _numbered(2, 3), _numbered(0, 1)]) == [1]  # late; 0: again
    assert repo.stats()["waiting_batches"] == 1 and ids(repo.events(0, 10)) == [0, 1, 5, 6]
    repo.close()


def test_numbered_batches_waiting_at_a_crash_are_recovered(tmp_path):
    """Batches written while lower ids were on their way are in the journals: a crash (no
    close) loses none of them; the ids that never came are counted apart from damage."""
    repo = open_repo(tmp_path)
    repo.register_numbered([_numbered(0, 2), _numbered(4, 3)])
    repo.rollover()
    repo.register_numbered([_numbered(8, 1), _numbered(2, 1)])   # 0-2 shown; 4-6 and 8 wait
    reopened = open_repo(tmp_path)  # the first one was never closed: as after a kill -9
    assert ids(reopened.events(0, 20)) == [0, 1, 2, 4, 5, 6, 8]
    assert reopened.recovery["events_lost"] == 0 and reopened.recovery["ids_without_events"] == 2
    assert reopened.stats()["next_event_id"] == 9
    assert reopened.register_numbered([_numbered(3, 1)]) == [0]  # its ids are in the past now
    reopened.continue_from(20)
    reopened.register_numbered([_numbered(20, 1)])
    assert ids(reopened.events(0, 30))[-1] == 20
    reopened.close()
    repo.close()


def test_register_with_ids_from_the_log_in_memory_too():
    repo = InMemoryProvenanceRepository()
    assert repo.register_numbered([_numbered(3, 2), _numbered(0, 3), _numbered(0, 3)]) == []
    assert [e.flowfile_uuid for e in repo.events(0, 10)] == [f"u{i}" for i in range(5)]
    assert repo.register_numbered([_numbered(9, 1, "x")]) == []
    assert ids(repo.search(limit=None)) == [9, 4, 3, 2, 1, 0]


def test_a_batch_decodes_to_the_events_encoded_one_by_one():
    """Shared columns, per-event columns and attribute maps shared by identity all come back as
    the very fields each event encodes to alone; a map shared by events is stored once."""
    from repositories.provenance.event import (FIELD_INDEX, decode_entry, encode_batch, encode_fields,
                                               event_fields, event_from_fields)

    shared = {"filename": "a.txt", "path": "/in"}
    events = [ev(T.ATTRIBUTES_MODIFIED if i % 2 else T.ROUTE, f"u{i}", ts=i % 3, previous_attributes=shared,
                 updated_attributes={**shared, "n": str(i)}, relationship="matched" if i % 2 == 0 else None,
                 updated_claim=CLAIM, updated_size=i, parent_uuids=[f"p{i}"] if i == 4 else [])
              for i in range(8)]
    fields = [event_fields(e) for e in events]
    for f in fields:
        f[FIELD_INDEX["previous_attributes"]] = shared        # what the session does: one map, shared
    batch = encode_batch(fields)
    assert (batch.count, batch.min_timestamp, batch.max_timestamp) == (8, BASE_MS, BASE_MS + 2)
    count, columns, maps, filenames = _batch_parts(batch.data)
    assert batch.data[0] == 4 and count == 8
    assert columns[FIELD_INDEX["component_id"]] == [0, "c-gen"]              # shared: stored once
    assert columns[FIELD_INDEX["updated_size"]] == [1, list(range(8))]       # one value an event
    assert columns[FIELD_INDEX["previous_attributes"]] == [0, shared]        # the same map for all
    assert columns[FIELD_INDEX["updated_attributes"]][0] == 2 and len(maps) == 8
    assert filenames == [0, "a.txt"]                                          # in the index part
    for data in (batch.data, _as_version_3_of(batch.data), _as_version_2(batch.data)):
        # release 3's and release 2's batches still read, to the same values
        decoded = decode_entry(data, 40, 8)
        for i, (event, got) in enumerate(zip(events, decoded)):
            assert got[0] == 40 + i
            alone = event_fields(event)
            alone[0] = 40 + i
            assert encode_fields(got) == encode_fields(alone)
            assert event_to_dict(event_from_fields(got)) == event_to_dict(event) | {"event_id": 40 + i}
    fields[1][FIELD_INDEX["updated_attributes"]] = fields[0][FIELD_INDEX["updated_attributes"]]
    _, columns, maps, _ = _batch_parts(encode_batch(fields).data)
    assert columns[FIELD_INDEX["updated_attributes"]][1][:2] == [0, 0] and len(maps) == 7


def test_claims_are_stored_a_resource_once_and_unchanged_columns_as_references():
    """Version 4: a claim column holds each resource claim once and an offset and length an event
    (-1 for none), whether a run gives ``ContentClaim`` objects or field arrays give lists; a
    previous column equal to its updated one is a reference to it. Either way each event decodes
    to the fields it encodes to alone, and to what the same batch as release 3 wrote decodes to."""
    from repositories.provenance.event import (FIELD_INDEX, EventRun, claim_field, decode_entry, encode_batch,
                                               encode_fields, event_fields, new_event_fields)

    other = ResourceClaim("default", "4", "1700000000001-2")
    claims = [ContentClaim(CLAIM.resource, i * 10, 10) if i % 2 else ContentClaim(other, i, 1) for i in range(6)]
    maps = [{"filename": f"f{i}"} for i in range(6)]
    shared = new_event_fields(T.ROUTE, BASE_MS, None, "c-route", "Route", "RouteOnAttribute", None)
    each = {FIELD_INDEX["flowfile_uuid"]: [f"u{i}" for i in range(6)],
            FIELD_INDEX["lineage_start_date"]: [BASE_MS] * 6,
            FIELD_INDEX["updated_attributes"]: maps, FIELD_INDEX["previous_attributes"]: maps,
            FIELD_INDEX["updated_claim"]: claims, FIELD_INDEX["previous_claim"]: claims,
            FIELD_INDEX["updated_size"]: [c.length for c in claims],
            FIELD_INDEX["previous_size"]: [c.length for c in claims]}
    created = new_event_fields(T.CREATE, BASE_MS, "u9", "c-route", "Route", "RouteOnAttribute", BASE_MS)
    created[FIELD_INDEX["updated_claim"]] = claim_field(ContentClaim(other, 99, 1))   # a field array's list
    batch = encode_batch([EventRun(6, shared, each), created])
    count, columns, _, _ = _batch_parts(batch.data)
    assert batch.data[0] == 4 and count == 7
    kind, (resources, refs, offsets, lengths) = columns[FIELD_INDEX["updated_claim"]]
    assert kind == 3 and resources == [list(other), list(CLAIM.resource)]
    assert refs == [0, 1, 0, 1, 0, 1, 0] and offsets == [0, 10, 2, 30, 4, 50, 99] and lengths == [1, 10, 1, 10, 1, 10, 1]
    kind, (resources, refs, _, _) = columns[FIELD_INDEX["previous_claim"]]
    assert kind == 3 and refs[-1] == -1           # the created event has no previous claim
    assert columns[FIELD_INDEX["previous_attributes"]] == [4, FIELD_INDEX["updated_attributes"]]   # {} == {} too
    run_only = encode_batch([EventRun(6, shared, each)])
    _, columns, _, _ = _batch_parts(run_only.data)
    for name in ("claim", "size", "attributes"):   # nothing changed: a reference, not a copy
        assert columns[FIELD_INDEX[f"previous_{name}"]] == [4, FIELD_INDEX[f"updated_{name}"]]
    copies = [ContentClaim(c.resource, c.offset, c.length) for c in claims]   # equal, not the same objects
    assert encode_batch([EventRun(6, shared, {**each, FIELD_INDEX["previous_claim"]: copies})]).data == run_only.data
    alone = [list(shared) for _ in range(6)] + [list(created)]
    for i, fields in enumerate(alone[:6]):
        for position, values in each.items():
            fields[position] = values[i]
    for data, n in ((batch.data, 7), (_as_version_3_of(batch.data), 7), (run_only.data, 6),
                    (_as_version_3_of(run_only.data), 6)):
        for i, got in enumerate(decode_entry(data, 40, n)):
            expected = list(alone[i])
            expected[0] = 40 + i
            for position in (FIELD_INDEX["previous_claim"], FIELD_INDEX["updated_claim"]):
                if type(expected[position]) is ContentClaim:
                    expected[position] = claim_field(expected[position])
            assert encode_fields(got) == encode_fields(expected), (data[0], i)
    assert encode_fields(decode_entry(batch.data, 0, 7)[6]) == encode_fields([6, *event_fields(
        ProvenanceEvent(event_type=T.CREATE, flowfile_uuid="u9", timestamp=BASE_MS, component_id="c-route",
                        component_name="Route", component_type="RouteOnAttribute", lineage_start_date=BASE_MS,
                        updated_claim=ContentClaim(other, 99, 1)))[1:]])


def test_runs_are_stored_a_stretch_once_and_a_filename_that_is_the_uuid_as_a_reference():
    """Version 4: where runs share a value each but not all the same one (a commit's ROUTE and
    DROP runs: type, relationship, details), the column is a value and a count a stretch; an
    index part whose filenames are the FlowFiles' uuids (NiFi names a new FlowFile so) refers to
    the uuid column. Both decode to what the events encode to alone, and the index reads them."""
    from repositories.provenance.event import (FIELD_INDEX, EventRun, decode_entry, decode_index_columns,
                                               encode_batch, encode_fields, new_event_fields)
    from repositories.provenance.index import IndexBatch

    uuids = [f"u{i}" for i in range(4)]
    maps = [{"uuid": u, "filename": u} for u in uuids]
    each = {FIELD_INDEX["flowfile_uuid"]: uuids, FIELD_INDEX["updated_attributes"]: maps,
            FIELD_INDEX["previous_attributes"]: maps}
    route = new_event_fields(T.ROUTE, BASE_MS, None, "c-route", "Route", "RouteOnAttribute", BASE_MS)
    route[FIELD_INDEX["relationship"]] = "large"
    drop = new_event_fields(T.DROP, BASE_MS, None, "c-route", "Route", "RouteOnAttribute", BASE_MS)
    drop[FIELD_INDEX["details"]] = "Auto-Terminated by large Relationship"
    runs = [EventRun(4, route, each), EventRun(2, list(route), {p: v[:2] for p, v in each.items()}),
            EventRun(4, drop, each)]
    data = encode_batch(runs).data
    count, columns, stored_maps, filenames = _batch_parts(data)
    assert count == 10 and filenames == [4, FIELD_INDEX["flowfile_uuid"]]
    # the ROUTE and DROP runs share their list of maps: stored once; the two-FlowFile run (part of it) finds its maps there
    assert columns[FIELD_INDEX["updated_attributes"]] == [2, [0, 1, 2, 3, 0, 1, 0, 1, 2, 3]] and len(stored_maps) == 4
    assert columns[FIELD_INDEX["previous_attributes"]] == [4, FIELD_INDEX["updated_attributes"]]
    assert columns[FIELD_INDEX["event_type"]] == [5, [["ROUTE", 6], ["DROP", 4]]]
    assert columns[FIELD_INDEX["relationship"]] == [5, [["large", 6], [None, 4]]]
    assert columns[FIELD_INDEX["details"]] == [5, [[None, 6], ["Auto-Terminated by large Relationship", 4]]]
    alone = []
    for run in runs:
        for i in range(run.count):
            fields = list(run.shared)
            for position, values in run.each.items():
                fields[position] = values[i]
            alone.append(fields)
    for version in (data, _as_version_3_of(data)):
        for i, got in enumerate(decode_entry(version, 40, 10)):
            assert encode_fields(got) == encode_fields([40 + i, *alone[i][1:]])
        index_columns, names = decode_index_columns(version, 40, 10)
        assert names == uuids + uuids[:2] + uuids and index_columns[FIELD_INDEX["event_type"]] == ["ROUTE"] * 6 + ["DROP"] * 4
    batch = IndexBatch(1, ("filename",))
    batch.add_columns(*batch.decode(data, 40, 10, "x")[:1], 0, batch.decode(data, 40, 10, "x")[1])
    assert [term for term, _ in batch.attribute] == [f"filename\x00{u}".encode() for u in uuids + uuids[:2] + uuids]
    named = [dict(m, filename=f"f{i}") for i, m in enumerate(maps)]   # other names: a column of their own
    _, _, _, filenames = _batch_parts(encode_batch([EventRun(4, route, {**each, FIELD_INDEX["updated_attributes"]: named})]).data)
    assert filenames == [1, ["f0", "f1", "f2", "f3"]]


def _with_column(data: bytes, name: str, column: list) -> bytes:
    """The batch with one column replaced, rebuilt as the same version (for damaging)."""
    from repositories.provenance.event import FIELD_INDEX

    count, columns, maps, filenames = _batch_parts(data)
    columns[FIELD_INDEX[name]] = column
    return bytes([data[0]]) + _as_version_3(count, columns, maps, filenames)[1:]


def _batch_parts(data: bytes) -> tuple[int, list, list, list]:
    """A version 4 or 3 batch read by hand from the documented layout: count, the 23 columns
    (index part's put back in place), the maps and the filename column."""
    from repositories.provenance.event import FIELD_INDEX, INDEX_FIELDS

    assert data[0] in (3, 4)
    (length,) = struct.unpack_from("<I", data, 1)
    count, index_columns, filenames = orjson.loads(data[5:5 + length])
    columns, maps = orjson.loads(data[5 + length:])
    for name, column in zip(INDEX_FIELDS, index_columns, strict=True):
        assert columns[FIELD_INDEX[name]] is None
        columns[FIELD_INDEX[name]] = column
    return count, columns, maps, filenames


def _as_version_2(data: bytes) -> bytes:
    """The same batch as release 2 wrote it (docs/formats/provenance-repository.md, version 2)."""
    count, columns, maps, _ = _batch_parts(_as_version_3_of(data))
    return b"\x02" + orjson.dumps([count, columns, maps])


def _as_version_3_of(data: bytes) -> bytes:
    """The same batch as release 3 wrote it: claim columns (kind 3) as a claim an event, runs
    (kind 5) as a value an event, a column the same as another (kind 4) as that column, from the
    documented layout."""
    count, columns, maps, filenames = _batch_parts(data)
    for position, (kind, values) in enumerate(columns[1:], 1):
        if kind == 3:
            resources, refs, offsets, lengths = values
            columns[position] = [1, [None if r < 0 else [*resources[r], o, n] for r, o, n in zip(refs, offsets, lengths)]]
        elif kind == 5:
            columns[position] = [1, [value for value, n in values for _ in range(n)]]
    for position, column in enumerate(columns[1:], 1):
        if column[0] == 4:
            columns[position] = columns[column[1]]
    if filenames[0] == 4:
        filenames = columns[filenames[1]]
    return _as_version_3(count, columns, maps, filenames)


def test_a_journal_of_release_2_batches_is_merged_and_searched_as_the_same_events_written_now(tmp_path):
    """Release 2 wrote batches without the index part (version 2): a journal of them is merged at
    open and indexed through the whole batch (filenames from the maps), and answers every search
    as the same events registered by this release do."""
    from repositories.provenance.event import encode_batch, event_fields
    from repositories.provenance.journal import JournalFile, pack_count, pack_entry_header

    events = [dataclasses.replace(e, event_id=i) for i, e in enumerate(dataset(40))]
    batches = [encode_batch([event_fields(e) for e in events[i:i + 10]]) for i in range(0, 40, 10)]
    old, new = tmp_path / "old", tmp_path / "new"
    open_repo(old).close()
    journal = JournalFile.create(old / "default" / "journals" / "0-0.journal", 0)
    for i, batch in enumerate(batches):
        data = _as_version_2(batch.data)
        journal.append(pack_count(1) + pack_entry_header(i * 10, 10, len(data)) + data, i * 10, i * 10 + 9, 10)
    journal.close()
    released, current = open_repo(old), open_repo(new)
    assert current.register_batches(batches) == (0, 39)
    current.rollover()
    assert all(same(a, b) for a, b in zip(released.events(0, 100), events)) and len(released.events(0, 100)) == 40
    for query in QUERIES:
        if "attributes" in query:   # "color" is not indexed here
            continue
        assert ids(released.search(**query)) == ids(current.search(**query)) == expected(events, query), query
    released.close()
    current.close()


def test_the_index_reads_a_batch_s_index_part_alone_and_indexes_it_as_the_whole_batch():
    """An index built from a version-3 batch's index part (the filenames given with it) holds the
    very entries one built from the whole batch, or from the same batch as version 2, holds."""
    from repositories.provenance.event import FIELD_INDEX, decode_columns, decode_index_columns, encode_batch, \
        event_fields
    from repositories.provenance.index import IndexBatch

    events = [ev(T.ROUTE if i < 4 else T.DROP, f"u{i}", ts=i, relationship="large" if i < 4 else None,
                 previous_attributes={"filename": f"f{i}.txt"},
                 updated_attributes={"filename": f"g{i}.txt"} if i % 3 else {"n": str(i)},
                 parent_uuids=[f"p{i}"] if i == 2 else [], updated_size=i * 10)
              for i in range(7)]
    data = encode_batch([event_fields(e) for e in events]).data
    columns, filenames = decode_index_columns(data, 100, 7)
    assert filenames == ["f0.txt", "g1.txt", "g2.txt", "f3.txt", "g4.txt", "g5.txt", "f6.txt"]
    assert columns[FIELD_INDEX["updated_attributes"]] is None    # the maps were not parsed
    whole = decode_columns(data, 100, 7)
    for name in ("event_type", "timestamp", "flowfile_uuid", "parent_uuids", "relationship", "updated_size"):
        assert columns[FIELD_INDEX[name]] == whole[FIELD_INDEX[name]]
    assert decode_index_columns(_as_version_2(data), 100, 7) == (whole, None)

    def index_of(encoded: bytes | None) -> tuple:
        """The entries of an index batch fed ``encoded`` through ``decode`` (None: the whole
        batch's columns, maps and all, with no filename column)."""
        batch = IndexBatch(5, ("filename",))
        if encoded is None:
            batch.add_columns(whole, 0)
        else:
            batch.add_columns(*batch.decode(encoded, 100, 7, "x")[:1], 0, batch.decode(encoded, 100, 7, "x")[1])
        return batch.primary, batch.uuid, batch.attribute, batch.tables(), batch.zones()

    from_part = index_of(data)
    assert from_part == index_of(None) == index_of(_as_version_2(data))
    assert len(from_part[2]) == 7      # a filename entry an event
    extra = IndexBatch(5, ("filename", "n"))     # another attribute indexed: the maps are read
    columns, filenames = extra.decode(data, 100, 7, "x")
    assert filenames is None and columns[FIELD_INDEX["updated_attributes"]] == whole[FIELD_INDEX["updated_attributes"]]


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:-3], "not valid JSON"),
    (lambda d: b"\x02" + orjson.dumps([5, [None], []]), "not a valid version-2 event batch"),
    (lambda d: b"\x02" + orjson.dumps([_batch_parts(d)[0], _batch_parts(d)[1], []]),
     "not a valid version-2 event batch"),
    (lambda d: d[:1] + struct.pack("<I", len(d)) + d[5:], "not a valid version-4 event batch"),
    (lambda d: d[:3], "not a valid version-4 event batch"),
    (lambda d: _as_version_3(4, *_batch_parts(d)[1:]), "not a valid version-3 event batch"),
    (lambda d: _as_version_3(3, _batch_parts(d)[1][:9], *_batch_parts(d)[2:]), "not a valid version-3 event batch"),
    (lambda d: b"\x07" + d[1:], "unsupported event encoding version 7"),
    (lambda d: _with_column(d, "previous_claim", [4, 12]), "column 13 cannot be the same as column 12"),
    (lambda d: _with_column(d, "updated_claim", [4, 13]), "column 14 refers to another column"),
    (lambda d: _with_column(d, "details", [4, 13]), "column 17 refers to another column"),
    (lambda d: _with_column(d, "updated_claim", [3, [[["c", "s", "r"]], [0, 1, -1], [0, 0, 0], [1, 1, 1]]]),
     "a column of kind 3 does not hold 3 values"),
    (lambda d: _with_column(d, "updated_claim", [3, [[["c", "s", "r"]], [0, -2, 0], [0, 0, 0], [1, 1, 1]]]),
     "a column of kind 3 does not hold 3 values"),
    (lambda d: _as_version_3_of(d)[:1] + _with_column(d, "updated_claim", [3, [[], [-1] * 3, [0] * 3, [0] * 3]])[1:],
     "not a valid version-3 event batch (a column of kind"),   # kinds 3 and 4 are version 4's
    (lambda d: _with_column(d, "details", [5, [["x", 2]]]), "a column of kind 5 does not hold 3 values"),
    (lambda d: _with_column(d, "details", [5, [["x", 3], ["y", 0]]]), "a run of 0 events"),
    (lambda d: _with_column(d, "details", [5, [["x", "3"]]]), "a run of '3' events"),
])
def test_a_damaged_batch_is_a_clear_error(damage, message):
    from repositories.provenance.event import decode_entry, encode_batch, event_fields

    events = [ev(T.CREATE, f"u{i}", updated_attributes={"i": str(i)}) for i in range(3)]
    data = damage(encode_batch([event_fields(e) for e in events]).data)
    with pytest.raises(ProvenanceFormatError, match=f"f.prov: .*{re.escape(message)}"):
        decode_entry(data, 0, 3, "f.prov")
    with pytest.raises(ProvenanceFormatError, match="a version-1 event with id -1 given as 2 events from id 0"):
        decode_entry(encode_event(events[0]), 0, 2)


def _as_version_3(count: int, columns: list, maps: list, filenames: list) -> bytes:
    """A version-3 batch built by hand (docs/formats/provenance-repository.md), for damaging."""
    from repositories.provenance.event import FIELD_INDEX, INDEX_FIELDS

    columns = list(columns)
    index = [columns[FIELD_INDEX[name]] for name in INDEX_FIELDS if FIELD_INDEX[name] < len(columns)]
    for name in INDEX_FIELDS:
        if FIELD_INDEX[name] < len(columns):
            columns[FIELD_INDEX[name]] = None
    part = orjson.dumps([count, index, filenames])
    return b"\x03" + struct.pack("<I", len(part)) + part + orjson.dumps([columns, maps])


def _version_1_journal(path: Path, events: list[ProvenanceEvent], first_id: int) -> None:
    """A journal as release 1 wrote it, built by hand from the documented layout: one event an entry."""
    import struct
    import zlib
    entries = [struct.pack("<I", len(events))]
    for offset, event in enumerate(events):
        data = encode_event(dataclasses.replace(event, event_id=first_id + offset))
        entries.append(struct.pack("<QI", first_id + offset, len(data)) + data)
    payload = b"".join(entries)
    path.write_bytes(struct.pack("<4sB3xQ", b"FAPJ", 1, first_id)
                     + struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)


def _version_1_event_file(directory: Path, events: list[ProvenanceEvent], first_id: int) -> None:
    """An event file and its table of contents as release 1 wrote them, by hand: two blocks of
    one-event entries."""
    import struct
    import zlib

    import zstandard
    prov = bytearray(struct.pack("<4sBB2xQ", b"FAPE", 1, 1, first_id))
    firsts, offsets = [], []
    half = len(events) // 2
    for block_start, block in ((0, events[:half]), (half, events[half:])):
        ids_ = range(first_id + block_start, first_id + block_start + len(block))
        entries = struct.pack("<I", len(block)) + b"".join(
            struct.pack("<QI", i, len(d)) + d for i, d in
            ((i, encode_event(dataclasses.replace(e, event_id=i))) for i, e in zip(ids_, block)))
        packed = zstandard.ZstdCompressor().compress(entries)
        firsts.append(ids_[0])
        offsets.append(len(prov))
        prov += struct.pack("<IIIIQQ", len(packed), zlib.crc32(packed), len(entries), len(block), ids_[0], ids_[-1])
        prov += packed
    (directory / f"{first_id}.prov").write_bytes(bytes(prov))
    last = first_id + len(events) - 1
    times = [e.timestamp for e in events]
    toc = TableOfContents(first_id, last, len(events), min(times), max(times), tuple(firsts), tuple(offsets))
    (directory / f"{first_id}.toc").write_bytes(toc.encode())


def test_version_1_journals_and_event_files_are_still_read_merged_and_searched(tmp_path):
    """A repository written by release 1 (one event an entry) opens under this release: its event
    file is read and indexed, its journal merged into a version-2 file, and new events follow."""
    root = tmp_path / "p"
    open_repo(root, indexed_attributes=("color",)).close()
    events = [dataclasses.replace(e, event_id=i) for i, e in enumerate(dataset(40))]
    _version_1_event_file(root / "default", events[:24], 0)
    _version_1_journal(root / "default" / "journals" / "24-0.journal", events[24:], 24)
    repo = open_repo(root, indexed_attributes=("color",))
    assert repo.recovery["files_reindexed"] == [0]
    assert all(same(a, b) for a, b in zip(repo.events(0, 100), events)) and len(repo.events(0, 100)) == 40
    for query in QUERIES:
        assert ids(repo.search(**query)) == expected(events, query), query
    more = dataset(44)[40:]
    assert repo.register(more) == (40, 43)
    repo.rollover()
    assert ids(repo.search(limit=None)) == list(range(43, -1, -1))
    assert [e.flowfile_uuid for e in repo.events(38, 10)] == [e.flowfile_uuid for e in (events + more)[38:]]
    repo.close()
    merged = sorted(p.name for p in (root / "default").glob("*.prov"))
    assert merged[0] == "0.prov" and open(root / "default" / merged[1], "rb").read(5)[4] == 2


def test_a_journal_or_event_file_of_an_unknown_version_is_refused_by_name(tmp_path):
    root = tmp_path / "p"
    open_repo(root).close()
    journal = root / "default" / "journals" / "0-0.journal"
    _version_1_journal(journal, dataset(3), 0)
    data = bytearray(journal.read_bytes())
    data[4] = 3
    journal.write_bytes(bytes(data))
    with pytest.raises(ProvenanceFormatError, match=re.escape(f"{journal}: unsupported journal version 3")):
        open_repo(root)


def test_an_event_built_as_a_field_array_encodes_to_the_same_bytes_as_the_event_object():
    """The session builds events as field arrays (no object each); they must be the very records
    an event object encodes to, claims and shared attribute maps included."""
    from repositories.model import ContentClaim, ResourceClaim
    from repositories.provenance.event import (FIELD_INDEX, ProvenanceEvent, ProvenanceEventType, claim_field,
                                               encode_event, encode_fields, new_event_fields)

    claim = ContentClaim(ResourceClaim("default", "17", "1795501056342245650-14797-8fd77d98-201"), 1024, 10)
    attributes = {"uuid": "u-1", "filename": "a.txt"}
    event = ProvenanceEvent(event_type=ProvenanceEventType.ATTRIBUTES_MODIFIED, timestamp=5, flowfile_uuid="u-1",
                            component_id="f/p", component_name="p", component_type="T", lineage_start_date=3,
                            previous_attributes=attributes, updated_attributes={**attributes, "x": "1"},
                            previous_claim=claim, updated_claim=claim, previous_size=10, updated_size=10,
                            source_queue_id="q")
    fields = new_event_fields(ProvenanceEventType.ATTRIBUTES_MODIFIED, 5, "u-1", "f/p", "p", "T", 3)
    for name, value in (("previous_attributes", attributes), ("updated_attributes", {**attributes, "x": "1"}),
                        ("previous_claim", claim_field(claim)), ("updated_claim", claim_field(claim)),
                        ("previous_size", 10), ("updated_size", 10), ("source_queue_id", "q")):
        fields[FIELD_INDEX[name]] = value
    assert encode_fields(fields) == encode_event(event)
    bare = ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=1, flowfile_uuid="u-2", component_id="f/p",
                           component_name="p", component_type="T", lineage_start_date=1)
    assert encode_fields(new_event_fields(ProvenanceEventType.CREATE, 1, "u-2", "f/p", "p", "T", 1)) == encode_event(bare)


def _as_index_format_1(shard: Path) -> None:
    """Rewrite an index shard as release 1 wrote it: one u64 BE event id an entry in the type,
    component and relationship tables too (not ranges), and ``format`` ``1``."""
    import lmdb

    from repositories.provenance.index import RANGE_TABLES, TERM_TABLES

    env = lmdb.open(str(shard), max_dbs=len(TERM_TABLES) + 4, subdir=True)
    try:
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            for table in RANGE_TABLES:
                db = env.open_db(table, txn=txn, dupsort=True, dupfixed=True)
                entries = list(txn.cursor(db).iternext())
                assert all(len(value) == 16 for _, value in entries)   # ranges: (last, first)
                txn.drop(db, delete=False)
                for term, value in entries:
                    last, first = int.from_bytes(value[:8], "big"), int.from_bytes(value[8:], "big")
                    for event_id in range(first, last + 1):
                        txn.put(term, event_id.to_bytes(8, "big"), db=db, dupdata=True)
            txn.put(b"format", b"1", db=meta)
    finally:
        env.close()


def test_an_index_shard_of_format_1_is_searched_and_aged_off_and_new_events_go_to_a_new_one(tmp_path):
    """Release 1's shards hold an id an event in every term table; this release writes ranges
    there (format 2) and still reads format 1: the same answers, and its shard is never written."""
    root = tmp_path / "p"
    repo = open_repo(root, indexed_attributes=("color",))
    old = dataset(120)
    run = [ev(T.CREATE, f"run-{i}", ts=5_000 + i, component_id="c-3", component_name="Proc3") for i in range(30)]
    repo.register(old[:60])
    repo.register(run)                    # one entry of 30 events sharing type and component: ranges
    repo.register(old[60:])
    repo.rollover()
    events = repo.events(0, 1000)
    repo.close()
    (shard,) = (root / "index").iterdir()
    _as_index_format_1(shard)

    repo = open_repo(root, indexed_attributes=("color",))
    for query in QUERIES + [dict(component_id="c-3", event_type=T.CREATE), dict(component_name="Proc3", limit=40)]:
        assert ids(repo.search(**query)) == expected(events, query), query
    more = [ev(T.DROP, f"run-{i}", ts=9_000 + i, component_id="c-3") for i in range(10)]
    assert repo.register(more) == (150, 159)
    repo.rollover()
    assert repo.stats()["index_shards"] == 2   # the format-1 shard is full: never written again
    events = repo.events(0, 1000)
    for query in (dict(component_id="c-3"), dict(flowfile_uuid="run-4"), dict(event_type=T.DROP, limit=12)):
        assert ids(repo.search(**query)) == expected(events, query), query
    result = repo.age_off(now=BASE_MS / 1000 + 10**9)   # everything expired: both shards go
    assert len(result["dropped_shards"]) == 2 and repo.search() == []
    repo.close()


def test_a_merge_redone_over_a_format_1_shard_removes_its_entries_an_id_at_a_time(tmp_path):
    """A rollover of release 1 cut short leaves its entries in a format-1 shard; this release
    redoes the merge and first removes them (``IndexShard.remove``), ids one by one there."""
    from repositories.provenance.index import IndexShard

    root = tmp_path / "p"
    repo = open_repo(root)
    repo.register([ev(T.CREATE, f"run-{i}", ts=i, component_id="c-run") for i in range(20)])
    repo.rollover()
    events = repo.events(0, 100)
    repo.close()
    (shard_dir,) = (root / "index").iterdir()
    _as_index_format_1(shard_dir)
    shard = IndexShard(shard_dir, map_size=1 << 24, sync=False)
    try:
        assert shard.legacy
        undone = repo._index.batch(0)   # what the redone merge would write for events 0-9
        for event in events[:10]:
            undone.add_event(event, 0)
        assert shard.remove(undone, []) == 10
        with shard.env.begin() as txn:
            left = sorted(int.from_bytes(value, "big") for key, value in txn.cursor(shard.terms[b"component_id"])
                          .iternext() if key == b"c-run")
            types = sorted(int.from_bytes(value, "big") for _, value in txn.cursor(shard.terms[b"type"]).iternext())
        assert left == types == list(range(10, 20))
    finally:
        shard.env.close()
