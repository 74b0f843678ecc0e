"""The provenance repository's formats for the fuzzers (tests/fuzz_formats.py has the rules):
journals, event files with their tables of contents, and the index shards with the
``next-event-id`` file, each damaged in a copy of a repository the real writer made and read by
``WriteAheadProvenanceRepository`` opened as a flow (merging what it finds) or read-only."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import lmdb
import orjson
import zstandard
from hypothesis import strategies as st

from repositories.model import ContentClaim, ResourceClaim
from repositories.provenance.event import (EventRun, ProvenanceEvent, ProvenanceEventType, ProvenanceFormatError,
                                           encode_batch, new_event_fields)
from repositories.provenance.journal import scan_journal
from tests.fuzz_formats import Format, expect, strings
from tests.fuzz_mutations import damaged, json_mutated, mutated, tail_crc

_UUIDS = [f"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4b{i:02x}" for i in range(12)]
_OPTIONS = {"fsync_rollover": False, "indexed_attributes": ("kind",), "block_size": 600}
_INDEX_TABLES = ("meta", "events", "uuid", "type", "component_id", "component_name", "relationship", "attribute",
                 "zones")
_TERM_TABLES = {"uuid", "type", "component_id", "component_name", "relationship", "attribute"}


def _events() -> list[ProvenanceEvent]:
    claim = ContentClaim(ResourceClaim("default", "3", "170-1"), 0, 10)
    out = []
    for i, uuid in enumerate(_UUIDS[:6]):
        kind = (ProvenanceEventType.CREATE, ProvenanceEventType.FORK, ProvenanceEventType.DROP)[i % 3]
        out.append(ProvenanceEvent(event_type=kind, flowfile_uuid=uuid, timestamp=1_700_000_000_000 + i, duration=i,
                                   parent_uuids=_UUIDS[:1] if i % 3 == 1 else [],
                                   child_uuids=_UUIDS[6:8] if i % 3 == 1 else [], component_id=f"c{i % 2}",
                                   component_name="Generate" if i % 2 else "Route", component_type="T",
                                   relationship="success" if i else None,
                                   updated_attributes={"filename": f"{i}.txt", "kind": "a" if i % 2 else "b"},
                                   previous_attributes={"filename": f"{i}.txt"} if i else {},
                                   updated_claim=claim if i % 2 else None, updated_size=10 * i,
                                   details="d" if i == 4 else None, lineage_start_date=1_700_000_000_000))
    return out


def _run_batch():
    shared = new_event_fields(ProvenanceEventType.ROUTE, 1_700_000_000_100, "", "c1", "Route", "T", 1_700_000_000_000)
    shared[10] = "matched"
    return encode_batch([EventRun(3, shared, {4: _UUIDS[8:11], 12: [{"filename": "r"}, {"filename": "s"}, {}]})])


def _make_repository(folder: Path) -> dict[str, Any]:
    """A repository whose journals hold every event (``journaled``), and the same merged into an
    event file and indexed (``merged``)."""
    from repositories.provenance.repository import WriteAheadProvenanceRepository

    root = folder / "journaled"
    repository = WriteAheadProvenanceRepository(root, journal_count=2, **_OPTIONS)
    try:
        events = _events()
        repository.register(events[:2])
        repository.register_batches([_run_batch()])
        repository.register(events[2:])
    finally:
        repository.close()
    shutil.copytree(root, folder / "merged")
    WriteAheadProvenanceRepository(folder / "merged", **_OPTIONS).close()   # recovery merges the journals
    return {"folder": folder}


def read_repository(root: Path, writable: bool) -> None:
    """Open a provenance repository as a flow (``writable``: recovery merges and reindexes) or as
    the read-only commands do, and read every event through each way there is."""
    from repositories.provenance.repository import WriteAheadProvenanceRepository

    repository = WriteAheadProvenanceRepository(root, readonly=not writable, **_OPTIONS)
    try:
        for event in repository.events(0, 10_000):
            expect(type(event.timestamp) is int and type(event.flowfile_uuid) is str
                   and strings(event.updated_attributes) and strings(event.previous_attributes)
                   and all(type(u) is str for u in (*event.parent_uuids, *event.child_uuids)),
                   f"event {event.event_id} is {event!r}")
            repository.get(event.event_id)
        for filters in ({}, {"flowfile_uuid": _UUIDS[0]}, {"component_name": "Generate"}, {"filename": "1.txt"},
                        {"attributes": {"kind": "a"}}, {"event_type": "FORK", "relationship": "success"},
                        {"start_time": 1_700_000_000_002, "end_time": 1_700_000_000_200}, {"min_size": 10}):
            repository.search(**filters, limit=100)
        repository.lineage(_UUIDS[0])
        repository.stats()
    finally:
        repository.close()


# --- journals -------------------------------------------------------------------------------------


def _journal_seeds(folder: Path) -> dict[str, Any]:
    seeds = _make_repository(folder)
    journals = sorted((folder / "journaled" / "default" / "journals").iterdir())
    seeds["journals"] = {path.name: path.read_bytes() for path in journals}
    return seeds


def reseal_journal(data: bytes) -> bytes:
    """A journal with each record's CRC recomputed, as far as its lengths hold."""
    out = bytearray(data)
    pos = 16
    while pos + 8 <= len(out):
        length = struct.unpack_from("<I", out, pos)[0]
        if pos + 8 + length > len(out):
            break
        struct.pack_into("<I", out, pos + 4, zlib.crc32(out[pos + 8:pos + 8 + length]))
        pos += 8 + length
    return bytes(out)


def _batches(entry_list: bytes) -> list[tuple[int, int, bytes]]:
    """``(first id, count, batch)`` of each entry of a (valid) entry list."""
    (count,) = struct.unpack_from("<I", entry_list)
    pos, out = 4, []
    for _ in range(count):
        first, events, length = struct.unpack_from("<QII", entry_list, pos)
        out.append((first, events, entry_list[pos + 16:pos + 16 + length]))
        pos += 16 + length
    return out


def _entry_list(entries: list[tuple[int, int, bytes]]) -> bytes:
    return struct.pack("<I", len(entries)) + b"".join(struct.pack("<QII", f, n, len(b)) + b for f, n, b in entries)


@st.composite
def _batch_json_mutated(draw: st.DrawFn, batch: bytes) -> bytes:
    """A version-4 batch (version byte, index part length, index JSON, the rest's JSON) with one
    of its JSON parts changed as JSON: what a reader meets past every checksum."""
    (length,) = struct.unpack_from("<I", batch, 1)
    index, rest = orjson.loads(batch[5:5 + length]), orjson.loads(batch[5 + length:])
    if draw(st.booleans()):
        index = draw(json_mutated([index]))
    else:
        rest = draw(json_mutated([rest]))
    encoded = orjson.dumps(index)
    return batch[:1] + struct.pack("<I", len(encoded)) + encoded + orjson.dumps(rest)


@st.composite
def _journal_with_bad_batch(draw: st.DrawFn, journal: bytes) -> bytes:
    """``journal`` with one entry's batch changed as JSON, its framing and checksum made right."""
    scan_records = []
    pos = 16
    while pos + 8 <= len(journal):
        length = struct.unpack_from("<I", journal, pos)[0]
        scan_records.append(journal[pos + 8:pos + 8 + length])
        pos += 8 + length
    which = draw(st.integers(0, len(scan_records) - 1))
    entries = _batches(scan_records[which])
    at = draw(st.integers(0, len(entries) - 1))
    first, count, batch = entries[at]
    entries[at] = (first, count, draw(_batch_json_mutated(batch)))
    scan_records[which] = _entry_list(entries)
    return journal[:16] + b"".join(struct.pack("<II", len(p), zlib.crc32(p)) + p for p in scan_records)


@st.composite
def _journal_examples(draw: st.DrawFn, seeds: dict[str, Any]) -> tuple[str, bytes, bool]:
    journals = seeds["journals"]
    name = draw(st.sampled_from(sorted(journals)))
    if draw(st.integers(0, 3)) == 0:
        data = draw(_journal_with_bad_batch(journals[name]))
    else:
        data = draw(damaged(list(journals.values()), reseal_journal))
    return name, data, draw(st.booleans())


def _read_journal(folder: Path, example: tuple[str, bytes, bool], seeds: dict[str, Any]) -> None:
    name, data, writable = example
    root = folder / "provenance"
    shutil.copytree(seeds["folder"] / "journaled", root)
    (root / "default" / "journals" / name).write_bytes(data)
    scan_journal(root / "default" / "journals" / name)
    read_repository(root, writable)


# --- event files and their tables of contents -------------------------------------------------------


def _event_file_seeds(folder: Path) -> dict[str, Any]:
    seeds = _make_repository(folder)
    container = folder / "merged" / "default"
    seeds["files"] = {path.name: path.read_bytes() for path in sorted(container.iterdir()) if path.is_file()}
    return seeds


def reseal_event_file(data: bytes) -> bytes:
    """An event file with each block's CRC recomputed, as far as its lengths hold."""
    out = bytearray(data)
    pos = 16
    while pos + 32 <= len(out):
        length = struct.unpack_from("<I", out, pos)[0]
        if pos + 32 + length > len(out):
            break
        struct.pack_into("<I", out, pos + 4, zlib.crc32(out[pos + 32:pos + 32 + length]))
        pos += 32 + length
    return bytes(out)


@st.composite
def _event_file_with_bad_block(draw: st.DrawFn, data: bytes) -> bytes:
    """An event file with one block's entry list changed (as bytes, or a batch in it as JSON),
    then compressed and framed again as the writer does: what a reader meets past the CRC."""
    blocks, pos = [], 16
    while pos + 32 <= len(data):
        header = struct.unpack_from("<IIIIQQ", data, pos)
        blocks.append((header, zstandard.ZstdDecompressor().decompress(data[pos + 32:pos + 32 + header[0]])))
        pos += 32 + header[0]
    which = draw(st.integers(0, len(blocks) - 1))
    header, raw = blocks[which]
    if draw(st.booleans()):
        entries = _batches(raw)
        at = draw(st.integers(0, len(entries) - 1))
        entries[at] = (entries[at][0], entries[at][1], draw(_batch_json_mutated(entries[at][2])))
        raw = _entry_list(entries)
    else:
        raw = draw(mutated([raw]))
    compressed = zstandard.ZstdCompressor(level=1).compress(raw)
    blocks[which] = ((len(compressed), zlib.crc32(compressed), len(raw), *header[3:]), raw)
    out = [data[:16]]
    for header, raw in blocks:
        body = compressed if header[2] == len(raw) and header[0] == len(compressed) else \
            zstandard.ZstdCompressor(level=1).compress(raw)
        out.append(struct.pack("<IIIIQQ", len(body), zlib.crc32(body), len(raw), *header[3:]) + body)
    return b"".join(out)


@st.composite
def _event_file_examples(draw: st.DrawFn, seeds: dict[str, Any]) -> tuple[str, bytes, bool]:
    files = seeds["files"]
    name = draw(st.sampled_from(sorted(files)))
    if name.endswith(".toc"):
        data = draw(damaged([files[name]], tail_crc))
    elif draw(st.integers(0, 2)) == 0:
        data = draw(_event_file_with_bad_block(files[name]))
    else:
        data = draw(damaged([files[name]], reseal_event_file))
    return name, data, draw(st.booleans())


def _read_event_file(folder: Path, example: tuple[str, bytes, bool], seeds: dict[str, Any]) -> None:
    name, data, writable = example
    root = folder / "provenance"
    shutil.copytree(seeds["folder"] / "merged", root)
    (root / "default" / name).write_bytes(data)
    read_repository(root, writable)


# --- index shards and next-event-id ----------------------------------------------------------------------


def _index_seeds(folder: Path) -> dict[str, Any]:
    seeds = _make_repository(folder)
    (shard,) = (folder / "merged" / "index").iterdir()
    env = lmdb.open(str(shard), max_dbs=16, subdir=True, readonly=True, lock=False)
    with env.begin() as txn:
        seeds["tables"] = {t: list(txn.cursor(db=env.open_db(t.encode(), txn=txn, create=False,
                                                              dupsort=t in _TERM_TABLES)))
                           for t in _INDEX_TABLES}
    env.close()
    seeds["shard"] = shard.name
    seeds["next_id"] = (folder / "merged" / "next-event-id").read_bytes()
    return seeds


@st.composite
def _index_examples(draw: st.DrawFn, seeds: dict[str, Any]) -> tuple:
    if draw(st.integers(0, 5)) == 0:
        text = seeds["next_id"]
        return ("next-event-id", draw(json_mutated([orjson.loads(text)]).map(orjson.dumps) | damaged([text])),
                draw(st.booleans()))
    tables = seeds["tables"]
    table = draw(st.sampled_from([t for t in _INDEX_TABLES if tables[t]]))
    key, value = draw(st.sampled_from(tables[table]))
    what = draw(st.sampled_from(("value", "value", "key", "delete", "add")))
    if what == "delete":
        return table, key, value, None, draw(st.booleans())
    if what == "key":
        key = draw(mutated([k for k, _ in tables[table]]).filter(lambda k: 0 < len(k) <= 511))
    new = draw(damaged([v for _, v in tables[table]]).filter(lambda v: table not in _TERM_TABLES or 0 < len(v) <= 511))
    return table, key, value if what == "add" else None, new, draw(st.booleans())


def _read_index(folder: Path, example: tuple, seeds: dict[str, Any]) -> None:
    root = folder / "provenance"
    shutil.copytree(seeds["folder"] / "merged", root)
    if example[0] == "next-event-id":
        (root / "next-event-id").write_bytes(example[1])
        read_repository(root, example[2])
        return
    table, key, old, new, writable = example
    env = lmdb.open(str(root / "index" / seeds["shard"]), max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(table.encode(), txn=txn, create=False, dupsort=table in _TERM_TABLES,
                             dupfixed=table in _TERM_TABLES)
            if new is None or old is None:   # a value replaced (its old one deleted first) or deleted
                txn.delete(key, db=db)
            if new is not None:
                try:
                    txn.put(key, new, db=db)
                except lmdb.BadValsizeError:   # LMDB refuses this damage: the shard holds its old entry
                    pass
    finally:
        env.close()
    read_repository(root, writable)


def provenance_formats() -> list[Format]:
    journal_seeds: dict[str, Any] = {}
    file_seeds: dict[str, Any] = {}
    index_seeds: dict[str, Any] = {}

    def keep(into: dict[str, Any], make):
        def made(folder: Path) -> dict[str, Any]:
            into.update(make(folder))
            return into
        return made

    return [
        Format("provenance-journal", keep(journal_seeds, _journal_seeds), _journal_examples,
               lambda folder, example: _read_journal(folder, example, journal_seeds), (ProvenanceFormatError,)),
        Format("provenance-event-file", keep(file_seeds, _event_file_seeds), _event_file_examples,
               lambda folder, example: _read_event_file(folder, example, file_seeds), (ProvenanceFormatError,)),
        Format("provenance-index", keep(index_seeds, _index_seeds), _index_examples,
               lambda folder, example: _read_index(folder, example, index_seeds), (ProvenanceFormatError,)),
    ]
