"""The repositories' formats for the fuzzers (tests/fuzz_formats.py has the registry and the
rules): the FlowFile log's values (records, journal entries, swap registry, processor state,
provenance outbox) read by their decoders and, placed in a real log, by the repository itself;
swap files; provenance journals, event files with their tables of contents, and index shards,
read by the provenance repository."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import lmdb
from hypothesis import strategies as st

from repositories.flowfile import records as rec
from repositories.flowfile.errors import FlowFileRepositoryError
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, StateChange
from repositories.provenance.event import EventRun, ProvenanceEventType, encode_batch, new_event_fields
from tests.fuzz_formats import Format, expect, strings
from tests.fuzz_mutations import damaged, mutated, tail_crc

_CLAIM = ResourceClaim("default", "17", "1700000000-42")
_UUIDS = [f"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a{i:02x}" for i in range(8)]


def _flowfiles() -> list[FlowFile]:
    """FlowFiles of every shape a record takes: with and without content, few and many attributes."""
    out = []
    for i, uuid in enumerate(_UUIDS):
        claim = ContentClaim(_CLAIM, 100 * i, 25) if i % 3 else None
        attributes = {"filename": f"{i}.txt", "uuid": uuid, **({"\u00e9t\u00e9": "x" * i} if i % 2 else {})}
        out.append(FlowFile(i + 1, uuid, attributes, claim, 1_700_000_000_000, 1_700_000_000_000 - i,
                            0 if i % 4 else 1_700_000_001_000, 1_700_000_000_123 + i, i))
    return out


def _event_batch() -> bytes:
    """An encoded batch of provenance events as a commit makes it (fields arrays and runs)."""
    fields = []
    for i, uuid in enumerate(_UUIDS[:3]):
        event = new_event_fields(ProvenanceEventType.CREATE, 1_700_000_000_000 + i, uuid, "gen", "Generate",
                                 "GenerateFlowFile", 1_700_000_000_000)
        event[12] = {"filename": f"{i}.txt", "uuid": uuid}
        event[14] = ContentClaim(_CLAIM, i, 5)
        fields.append(event)
    shared = new_event_fields(ProvenanceEventType.ROUTE, 1_700_000_000_009, "", "route", "Route", "RouteOnAttribute",
                              1_700_000_000_000)
    shared[10] = "matched"
    run = EventRun(3, shared, {4: _UUIDS[3:6], 12: [{"filename": "r"}, {"filename": "s"}, {}]})
    return encode_batch([*fields, run]).data


# --- the FlowFile log's values, decoded ---------------------------------------------------------------


def _record_seeds(folder: Path) -> dict[str, list[bytes]]:
    flowfiles = _flowfiles()
    queued = [QueuedFlowFile(ff, "q1" if i % 2 else "connection \u00e9") for i, ff in enumerate(flowfiles)]
    _, rkeys, columns = rec.encode_commit(queued[:5], _UUIDS[5:7])
    entry = rec.encode_journal_entry(5, columns, rkeys, [rec.claim_key(_CLAIM)])
    records = [rec.encode(ff, q.queue) for ff, q in zip(flowfiles, queued)]
    version_1 = b"".join([struct.pack(">BIII", 1, 2, 1, 0),
                          *(rec.uuid_key(ff.uuid) + struct.pack(">I", len(r)) + r for ff, r in zip(flowfiles, records)
                            if ff.id <= 2), rec.uuid_key(_UUIDS[7])])
    batch = _event_batch()
    return {
        "record": records,
        "journal": [entry, tail_crc(version_1 + b"\0" * 4), rec.encode_journal_entry(0, rec.encode_commit([], [_UUIDS[0]])[2],
                                                                                     [rec.uuid_key(_UUIDS[0])], [])],
        "swap-entry": [rec.encode_swap_entry("q1", 3, 75, 4, 1_700_000_000_000)],
        "state": [rec.encode_state(0, {}), rec.encode_state(7, {"offset": "42", "names": "a,b"})],
        "outbox": [rec.encode_outbox_entry(6, 1_700_000_000_000, 1_700_000_000_009, batch)],
        "claim-key": [rec.claim_key(_CLAIM), rec.claim_key(("", "", ""))],
        "order-key": [rec.order_key(ff, rec.queue_prefix("q1"), rec.uuid_key(ff.uuid)) for ff in flowfiles[:2]],
    }


_SEALED = {"record", "journal", "outbox"}   # their last 4 bytes are a CRC-32 of the rest


@st.composite
def _record_examples(draw: st.DrawFn, seeds: dict[str, list[bytes]]) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(seeds)))
    return kind, draw(damaged(seeds[kind], tail_crc if kind in _SEALED else None))


def _read_value(kind: str, value: bytes) -> None:
    """Decode a value of the log as the repository does (``RecordError`` when it cannot)."""
    ukey = bytes(16)
    if kind == "record":
        _queue, ff = rec.decode_record(ukey, value)
        expect(strings(ff.attributes), f"a record's attributes are {ff.attributes!r}")
        rec.peek(value)
        rec.with_queue(value, rec.queue_prefix("q2"))
    elif kind == "journal":
        updates, _removals, claims = rec.decode_journal_entry(value)
        for update in updates:
            record, _order = rec.update_record(update)
            _queue, ff = rec.decode_record(update[0], record)
            expect(strings(ff.attributes), f"a journal entry's attributes are {ff.attributes!r}")
        for ckey in claims:
            rec.claim_from_key(ckey)
    elif kind == "swap-entry":
        entry = rec.decode_swap_entry(value)
        expect(type(entry["queue"]) is str and all(type(entry[k]) is int and entry[k] >= 0
                                                   for k in ("count", "size", "seq")), f"a swap entry {entry!r}")
    elif kind == "state":
        _version, values = rec.decode_state(value)
        expect(strings(values), f"state values {values!r}")
    elif kind == "outbox":
        rec.decode_outbox_entry(value)
    elif kind == "claim-key":
        rec.claim_from_key(value)
    else:
        rec.order_key_fields(value)
        rec.key_position(value)


def _read_record(folder: Path, example: tuple[str, bytes]) -> None:
    _read_value(*example)


# --- the FlowFile log itself (repositories/flowfile/wal.py) ------------------------------------------

#: the log's sub-databases, and the flags they were made with
_LOG_TABLES = ("meta", "flowfiles", "order", "queues", "claims", "destructible", "swap_files", "journal", "state",
               "provenance_outbox")


def _log_seeds(folder: Path) -> dict[str, Any]:
    """Two logs by the real repository: one whose journal is applied (the tables hold it all),
    one copied while its journal still held the commits."""
    from repositories.flowfile.wal import WriteAheadFlowFileRepository
    from repositories.provenance.event import EncodedBatch

    flowfiles = _flowfiles()
    repository = WriteAheadFlowFileRepository(folder / "applied")
    try:
        repository.commit([QueuedFlowFile(ff, "q1" if i % 2 else "q2") for i, ff in enumerate(flowfiles[:6])], [],
                          [_CLAIM], state=StateChange("flow/list", {"offset": "7"}))
        repository.commit([], [_UUIDS[0]], event_batch=EncodedBatch(_event_batch(), 6, 1_700_000_000_000,
                                                                      1_700_000_000_009))
        repository.register_swap_file("q1", "q1-0.swap", 2, 50, flowfiles=list(flowfiles[1:4:2]))
        repository.commit([QueuedFlowFile(flowfiles[6], "q2")], [_UUIDS[2]], [ResourceClaim("default", "1", "x")])
        shutil.copytree(folder / "applied", folder / "journaled")
        repository.checkpoint()
    finally:
        repository.close()
    seeds: dict[str, Any] = {}
    for name in ("applied", "journaled"):
        env = lmdb.open(str(folder / name), max_dbs=16, subdir=True, readonly=True, lock=False)
        with env.begin() as txn:
            seeds[name] = {t: list(txn.cursor(db=env.open_db(t.encode(), txn=txn, create=False)))
                           for t in _LOG_TABLES}
        env.close()
    seeds["folder"] = folder
    return seeds


@st.composite
def _log_examples(draw: st.DrawFn, seeds: dict[str, Any]) -> tuple[str, str, bytes, bytes | None]:
    """``(seed, table, key, new value or None to delete)``: one entry of a log damaged."""
    name = draw(st.sampled_from(("applied", "journaled")))
    tables = seeds[name]
    table = draw(st.sampled_from([t for t in _LOG_TABLES if tables[t]]))
    entries = tables[table]
    key, value = draw(st.sampled_from(entries))
    what = draw(st.sampled_from(("value", "value", "value", "key", "delete")))
    reseal = tail_crc if table in ("flowfiles", "journal", "provenance_outbox") else None
    if what == "delete":
        return name, table, key, None
    if what == "key":
        new_key = draw(mutated([k for k, _ in entries]).filter(lambda k: 0 < len(k) <= 511))
        return name, table, new_key, value
    return name, table, key, draw(damaged([v for _, v in entries], reseal))


def _read_log(folder: Path, example: tuple[str, str, bytes, bytes | None], seeds: dict[str, Any]) -> None:
    from repositories.flowfile.wal import WriteAheadFlowFileRepository

    name, table, key, value = example
    shutil.copytree(seeds["folder"] / name, folder / "flowfile")
    env = lmdb.open(str(folder / "flowfile"), max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(table.encode(), txn=txn, create=False)
            if value is None:
                txn.delete(key, db=db)
            else:
                txn.put(key, value, db=db)
    finally:
        env.close()
    repository = WriteAheadFlowFileRepository(folder / "flowfile", create=False)
    try:
        repository.rebuild_claimant_counts()
        for queue, flowfiles in repository.recover():
            expect(all(strings(ff.attributes) for ff in flowfiles), f"queue {queue} gives {flowfiles!r}")
        for entry in repository.swap_files():
            expect(type(entry["count"]) is int and type(entry["size"]) is int, f"a swap file entry {entry!r}")
            for _ in repository.iter_queue(rec.SWAP_QUEUE_PREFIX + entry["location"]):
                pass
        for component in repository.state_ids():
            state = repository.get_state(component)
            expect(strings(dict(state.values)), f"state {state!r}")
        repository.outbox_entries()
        repository.queue_sizes()
        repository.checkpoint()
    finally:
        repository.close()


# --- swap files (repositories/flowfile/swapfile.py) ----------------------------------------------------


def _swap_seeds(folder: Path) -> list[bytes]:
    from repositories.flowfile.swapfile import write_swap_file

    flowfiles = _flowfiles()
    seeds = []
    for name, batch, order in (("a.swap", flowfiles, "FIFO"), ("b.swap", flowfiles[:1], "PriorityAttribute"),
                               ("c.swap", [], "FIFO")):
        write_swap_file(folder, name, "connection \u00e9", batch, partition="local", order=order)
        seeds.append((folder / name).read_bytes())
    return seeds


def reseal_swap(data: bytes) -> bytes:
    """A swap file with its header's, its entries' and their records' checksums recomputed, as
    far as its lengths hold."""
    out = bytearray(data)
    pos = 29
    for _ in range(3):
        if pos + 2 > len(out):
            return bytes(out)
        pos += 2 + struct.unpack_from(">H", out, pos)[0]
    if pos + 4 > len(out):
        return bytes(out)
    struct.pack_into("<I", out, pos, zlib.crc32(out[:pos]))
    pos += 4
    while pos + 20 <= len(out):
        length = struct.unpack_from(">I", out, pos)[0]
        end = pos + 20 + length
        if end + 4 > len(out):
            break
        if length >= 4:
            struct.pack_into("<I", out, end - 4, zlib.crc32(out[pos + 20:end - 4]))
        struct.pack_into("<I", out, end, zlib.crc32(out[pos:end]))
        pos = end + 4
    return bytes(out)


def _read_swap(folder: Path, data: bytes) -> None:
    from repositories.flowfile.swapfile import SwapFileReader

    path = folder / "q.swap"
    path.write_bytes(data)
    with SwapFileReader(path) as reader:
        reader.verify()
        while reader.remaining:
            for ff in reader.read(3):
                expect(strings(ff.attributes), f"a swapped FlowFile's attributes are {ff.attributes!r}")


# --- provenance (repositories/provenance/) ---------------------------------------------------------------


def formats_of_provenance() -> list[Format]:
    from tests.fuzz_provenance import provenance_formats

    return provenance_formats()


def repository_formats() -> list[Format]:
    log_seeds: dict[str, Any] = {}

    def log_seeds_once(folder: Path) -> dict[str, Any]:
        log_seeds.update(_log_seeds(folder))
        return log_seeds

    return [
        Format("wal-values", _record_seeds, _record_examples, _read_record, (rec.RecordError,), names_place=False),
        Format("wal-log", log_seeds_once, _log_examples, lambda folder, example: _read_log(folder, example, log_seeds),
               (FlowFileRepositoryError,)),
        Format("swap-file", _swap_seeds, lambda seeds: damaged(seeds, reseal_swap), _read_swap,
               (FlowFileRepositoryError,)),
        *formats_of_provenance(),
    ]

