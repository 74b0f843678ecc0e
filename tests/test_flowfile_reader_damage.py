"""The FlowFile repository's readers given damage the format fuzzer found (issue 50, "fuzz every
reader"): each gives the format's own error naming the file and what is wrong, never another
exception or an allocation a damaged length asks for.

Real files in tmp_path made by the real writers, then damaged: a swap file's entry length set past
its end; a journal entry's removal count set past its end (its checksum made right again); keys of the write-ahead log's sub-databases that no writer makes (a provenance outbox or
journal key that is not a u64, a state, swap registry or queue key that is not UTF-8), put with
LMDB itself. No Ray.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import lmdb
import pytest

from repositories.flowfile import RepositoryCorruptError
from repositories.flowfile import records as rec
from repositories.flowfile.swapfile import SwapFileError, SwapFileReader, write_swap_file
from repositories.flowfile.wal import WriteAheadFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange
from repositories.provenance.event import EncodedBatch, ProvenanceEventType, encode_batch, new_event_fields
from tests.fuzz_mutations import cpu_limit, memory_bound, tail_crc

CLAIM = ResourceClaim("default", "1", "claim-1")


def flowfile(i: int) -> FlowFile:
    return FlowFile(i, f"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a{i:02x}", {"filename": f"{i}.txt"}, None,
                    1_700_000_000_000, 1_700_000_000_000, 0, 1_700_000_000_000 + i, i)


# --- swap files ------------------------------------------------------------------------------------


def test_a_swap_entry_longer_than_the_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    write_swap_file(tmp_path, "q.swap", "q1", [flowfile(1), flowfile(2)])
    path = tmp_path / "q.swap"
    data = bytearray(path.read_bytes())
    with SwapFileReader(path) as reader:
        first_entry = reader.header.length
    struct.pack_into(">I", data, first_entry, 0xFFFFFFF0)   # the first entry's record length
    path.write_bytes(bytes(data))

    problem = re.escape(f"swap file {path} is unreadable: it is truncated inside entry 0 of 2 (byte {first_entry}): "
                        f"the entry says its record is {0xFFFFFFF0} bytes")
    with memory_bound(), SwapFileReader(path) as reader:   # reading 4 GiB to find the end would fail here
        with pytest.raises(SwapFileError, match=problem):
            reader.verify()
        with pytest.raises(SwapFileError, match=problem):
            reader.read(2)


# --- journal entries --------------------------------------------------------------------------------------


def test_a_removal_count_past_the_entry_is_refused_before_the_keys_are_listed() -> None:
    _, rkeys, columns = rec.encode_commit([], [flowfile(1).uuid])
    entry = bytearray(rec.encode_journal_entry(0, columns, rkeys, []))
    struct.pack_into(">I", entry, 5, 0xFFFFFFFF)   # the removals' count, its checksum made right again
    with memory_bound(), cpu_limit(2):   # listing 4 billion keys first would fail or take minutes here
        with pytest.raises(rec.RecordError, match="journal entry length does not match its counts"):
            rec.decode_journal_entry(tail_crc(bytes(entry)))


# --- keys of the write-ahead log ------------------------------------------------------------------------


def log_with_everything(folder: Path) -> Path:
    """A log holding a FlowFile in a queue, a swap file registered, a processor's state and a
    commit's provenance events in the outbox, its journal applied."""
    events = new_event_fields(ProvenanceEventType.CREATE, 1_700_000_000_000, flowfile(1).uuid, "gen", "Generate",
                              "GenerateFlowFile", 1_700_000_000_000)
    with WriteAheadFlowFileRepository(folder) as repository:
        repository.commit([QueuedFlowFile(flowfile(1), "q1"), QueuedFlowFile(flowfile(2), "q1")], [], [CLAIM],
                          state=StateChange("flow/list", {"offset": "7"}))
        repository.commit([], [], event_batch=EncodedBatch(encode_batch([events]).data, 1, 1_700_000_000_000,
                                                           1_700_000_000_000))
        repository.register_swap_file("q1", "q1-0.swap", 1, 0, flowfiles=[flowfile(2)])
        repository.checkpoint()
    return folder


def put_raw(folder: Path, table: str, key: bytes, value: bytes) -> None:
    """Put an entry no writer of the log makes, with LMDB itself."""
    env = lmdb.open(str(folder), max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            txn.put(key, value, db=env.open_db(table.encode(), txn=txn, create=False))
    finally:
        env.close()


@pytest.mark.parametrize("table, key, read", [
    ("provenance_outbox", b"\1" * 11, lambda repository: repository.outbox_entries()),
    ("journal", b"\1" * 11, lambda repository: repository.recover()),
    ("state", b"\xff\xfe", lambda repository: repository.state_ids()),
    ("swap_files", b"\xff", lambda repository: repository.swap_files()),
    ("queues", b"q\xff", lambda repository: repository.queue_sizes()),
], ids=["outbox-key-not-u64", "journal-key-not-u64", "state-key-not-utf8", "swap-key-not-utf8",
        "queue-key-not-utf8"])
def test_a_damaged_key_is_the_log_corrupt_naming_its_sub_database(table: str, key: bytes, read,
                                                                 tmp_path: Path) -> None:
    folder = log_with_everything(tmp_path / "flowfile")
    put_raw(folder, table, key, b"\1" * 16)

    with WriteAheadFlowFileRepository(folder, create=False) as repository:
        with pytest.raises(RepositoryCorruptError, match=re.escape(
                f"FlowFile repository at {folder} is corrupt: the {table} sub-database holds a damaged key, "
                f"{len(key)} bytes {key.hex()}")) as raised:
            list(read(repository))
    assert "flowactors repository salvage" in str(raised.value)
