"""The provenance repository's readers given damage the format fuzzer found (issue 50, "fuzz every
reader"): each gives ``ProvenanceFormatError`` naming the file and what is wrong (or, for an
unreadable ``next-event-id``, a warning and ids that still never repeat), never another exception,
and never an event of the wrong types.

Real files in tmp_path made by the real writers: a batch encoded by ``encode_batch`` with one of
its JSON parts changed (what a checksum made right lets through) and registered as it is; index
shards made by a rollover, then an entry no writer makes put with LMDB itself; a table of contents
written by its own encoder with a block offset no writer makes. No Ray.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import struct
from pathlib import Path

import lmdb
import orjson
import pytest

from repositories.provenance import ProvenanceEvent, ProvenanceEventType, ProvenanceFormatError
from repositories.provenance import WriteAheadProvenanceRepository as Repository
from repositories.provenance.event import FIELD_INDEX, INDEX_FIELDS, EncodedBatch, encode_batch, event_fields
from repositories.provenance.eventfile import TableOfContents

T = ProvenanceEventType
BASE_MS = 1_700_000_000_000
REBUILD = "delete the index directory and start the flow, or run 'flowactors provenance repair'"


def events() -> list[ProvenanceEvent]:
    return [ProvenanceEvent(event_type=T.CREATE if i == 0 else T.FORK, flowfile_uuid=f"uuid-{i}",
                            timestamp=BASE_MS + i, component_id="f/gen", component_name="gen",
                            child_uuids=[f"uuid-{i + 10}"] if i else [],
                            updated_attributes={"filename": f"{i}.txt"}) for i in range(3)]


def repository(root: Path, **options) -> Repository:
    return Repository(root, journal_count=1, fsync_rollover=False, **options)


# --- a batch whose columns hold what no writer puts there --------------------------------------------


def edited_batch(part: int, edit) -> EncodedBatch:
    """The events encoded by the real encoder, then the batch's index part (``part`` 0) or the
    rest (1) edited as JSON by ``edit``."""
    batch = encode_batch([event_fields(event) for event in events()])
    data = batch.data
    (length,) = struct.unpack_from("<I", data, 1)
    parts = [orjson.loads(data[5:5 + length]), orjson.loads(data[5 + length:])]
    edit(parts[part])
    index = orjson.dumps(parts[0])
    return EncodedBatch(data[:1] + struct.pack("<I", len(index)) + index + orjson.dumps(parts[1]), batch.count,
                        batch.min_timestamp, batch.max_timestamp)


def shared_column(field: str, value):
    """An edit of the index part: the column of ``field`` one value all events share."""
    return lambda index: index[1].__setitem__(INDEX_FIELDS.index(field), [0, value])


INDEX_PART_DAMAGE = [
    ("component_id", 5, "a string"),
    ("event_type", "/", "an event type name"),
    ("timestamp", [], "a whole number of 64 bits"),
    ("updated_size", (1 << 64) - 1, "a whole number of 64 bits"),
    ("flowfile_uuid", {"a": 1}, "a non-empty string"),
    ("flowfile_uuid", "", "a non-empty string"),
    ("child_uuids", ["uuid-1", 7], "a list of non-empty strings"),
    ("relationship", ["success"], "a string or null"),
]


@pytest.mark.parametrize("field, value, what", INDEX_PART_DAMAGE,
                         ids=[f"{field}-{type(value).__name__}" for field, value, _ in INDEX_PART_DAMAGE])
def test_a_column_of_the_wrong_kind_is_refused_naming_the_journal_entry_and_column(field: str, value, what: str,
                                                                                    tmp_path: Path) -> None:
    repo = repository(tmp_path / "provenance")
    try:
        first, _ = repo.register_batches([edited_batch(0, shared_column(field, value))])
        problem = (rf"{re.escape(str(tmp_path / 'provenance'))}/default/journals/\S+ entry {first}: not a valid "
                   rf"version-4 event batch \(its {field} column holds a value that is not {re.escape(what)}\)")
        with pytest.raises(ProvenanceFormatError, match=problem):   # reading it from the journal
            repo.events(0, 10)
        with pytest.raises(ProvenanceFormatError, match=problem):   # merging it into an event file, indexed
            repo.rollover()
    finally:
        repo.close()


@pytest.mark.parametrize("maps", [{}, [{"filename": 5}], [["filename", "a"]]], ids=["object", "number", "list"])
def test_attribute_maps_of_the_wrong_kind_are_refused_naming_the_journal_entry(maps, tmp_path: Path) -> None:
    repo = repository(tmp_path / "provenance")
    try:
        first, _ = repo.register_batches([edited_batch(1, lambda rest: rest.__setitem__(1, maps))])
    finally:
        repo.close()
    readonly = repository(tmp_path / "provenance", readonly=True)
    try:
        with pytest.raises(ProvenanceFormatError, match=rf"/journals/\S+ entry {first}: not a valid version-4 event "
                                                        r"batch \(its attribute maps are not a list of objects of "
                                                        r"strings\)"):
            readonly.events(0, 10)
    finally:
        readonly.close()


def test_a_map_index_that_is_not_one_is_refused(tmp_path: Path) -> None:
    def negative_index(rest: list) -> None:
        columns, maps = rest
        maps.extend([{"filename": "a"}, {"filename": "b"}])
        columns[FIELD_INDEX["previous_attributes"]] = [2, [-1, 0, 1]]   # kind 2, maps: -1 for the first event

    repo = repository(tmp_path / "provenance")
    try:
        repo.register_batches([edited_batch(1, negative_index)])
        with pytest.raises(ProvenanceFormatError, match="its attribute map column holds a value that is not an "
                                                        "index of a map"):
            repo.events(0, 10)
    finally:
        repo.close()


# --- the index and next-event-id ----------------------------------------------------------------------


def merged(root: Path) -> Path:
    """A repository whose events are merged into an event file and indexed; its one shard."""
    repo = repository(root)
    repo.register(events())
    repo.rollover()
    repo.close()
    (shard,) = (root / "index").iterdir()
    return shard


def put_raw(shard: Path, table: str, key: bytes, value: bytes, *, replace: bool = False) -> None:
    """Put an entry no writer of the index makes (``replace``: instead of the key's entries)."""
    env = lmdb.open(str(shard), max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            terms = table not in ("meta", "events", "zones")
            db = env.open_db(table.encode(), txn=txn, create=False, dupsort=terms, dupfixed=terms)
            if replace:
                txn.delete(key, db=db)
            txn.put(key, value, db=db)
    finally:
        env.close()


@pytest.mark.parametrize("table, key, problem", [
    ("meta", b"file:abc", "its meta key b'file:abc' names no event file"),
    ("meta", b"min_ts", "its meta value min_ts is 3 bytes, not 8"),
    ("events", b"abc", "its events table has a key of 3 bytes, not an event id"),
], ids=["file-id-of-3-bytes", "time-of-3-bytes", "events-key-of-3-bytes"])
def test_a_damaged_shard_refuses_the_open_naming_it_and_is_rebuilt_once_deleted(table: str, key: bytes, problem: str,
                                                                                 tmp_path: Path) -> None:
    root = tmp_path / "provenance"
    shard = merged(root)
    put_raw(shard, table, key, b"abc")
    for readonly in (True, False):
        with pytest.raises(ProvenanceFormatError, match=re.escape(f"{shard}: the index shard is damaged: {problem}; "
                                                                  f"{REBUILD}")):
            repository(root, readonly=readonly)

    shutil.rmtree(root / "index")   # as the error says: the open indexes the event file again
    repo = repository(root)
    try:
        assert [e.flowfile_uuid for e in repo.search(component_name="gen", limit=10)] == ["uuid-2", "uuid-1", "uuid-0"]
    finally:
        repo.close()


@pytest.mark.parametrize("table, key, filters", [
    ("events", struct.pack(">Q", 1), {}),
    ("zones", struct.pack(">Q", 0), {"start_time": BASE_MS}),
    ("component_name", b"gen", {"component_name": "gen"}),
], ids=["events-value-of-5-bytes", "zones-value-of-5-bytes", "range-of-5-bytes"])
def test_a_damaged_entry_met_by_a_search_is_the_shard_named(table: str, key: bytes, filters: dict,
                                                            tmp_path: Path) -> None:
    root = tmp_path / "provenance"
    shard = merged(root)
    put_raw(shard, table, key, b"abcde", replace=True)
    for readonly in (True, False):
        repo = repository(root, readonly=readonly)
        try:
            with pytest.raises(ProvenanceFormatError, match=re.escape(f"{shard}: the index shard is damaged: an entry "
                                                                      f"of its tables is not of its format's size")):
                repo.search(**filters, limit=10)
        finally:
            repo.close()


@pytest.mark.parametrize("text", [b"null", b"[1]", b'{"version": 1, "next_event_id": -4}',
                                  b'{"version": 1, "next_event_id": 1e30}'])
def test_an_unreadable_next_event_id_is_ignored_with_a_warning_and_ids_go_on(text: bytes, tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "provenance"
    merged(root)
    (root / "next-event-id").write_bytes(text)
    with caplog.at_level(logging.WARNING, logger="repositories.provenance.merge"):
        repo = repository(root)
    try:
        assert repo.register(events()) == (3, 5)   # after the merged events' ids 0..2
    finally:
        repo.close()
    assert f"provenance: ignoring unreadable {root / 'next-event-id'}" in caplog.text


# --- an event file's table of contents --------------------------------------------------------------


@pytest.mark.parametrize("offset", [1 << 63, (1 << 63) - 1, 3], ids=["past-an-i64", "past-any-file", "inside-the-header"])
def test_a_table_of_contents_listing_a_block_outside_the_file_is_rebuilt(offset: int, tmp_path: Path) -> None:
    root = tmp_path / "provenance"
    merged(root)
    path = root / "default" / "0.toc"
    toc = TableOfContents.read(path)
    path.write_bytes(dataclasses.replace(toc, block_offsets=(offset,)).encode())
    for readonly in (True, False):
        repo = repository(root, readonly=readonly)
        try:
            assert [e.flowfile_uuid for e in repo.events(0, 10)] == ["uuid-0", "uuid-1", "uuid-2"]
            assert repo.recovery["tocs_rebuilt"] == [str(root / "default" / "0.prov")]
        finally:
            repo.close()


@pytest.mark.parametrize("offset", [(1 << 64) - 1, (1 << 63) - 1], ids=["past-an-i64", "past-any-file"])
def test_an_index_pointer_past_any_file_is_a_missing_block(offset: int, tmp_path: Path) -> None:
    root = tmp_path / "provenance"
    shard = merged(root)
    put_raw(shard, "events", struct.pack(">Q", 1), struct.pack("<QQqq", 0, offset, BASE_MS + 1, 0), replace=True)
    for readonly in (True, False):
        repo = repository(root, readonly=readonly)
        try:
            assert [e.flowfile_uuid for e in repo.search(limit=10)] == ["uuid-2", "uuid-0"]
            assert f"block at offset {offset} is missing (the file ends before it)" in repo.damage_warning()
        finally:
            repo.close()
