"""The swap-file format (repositories/flowfile/swapfile.py, docs/formats/swap-file.md): round trips,
the documented bytes, and a clear error naming the file for every kind of damage."""

from __future__ import annotations

import struct
import zlib

import pytest

from repositories.flowfile import UnsupportedFormatVersionError
from repositories.flowfile import records as rec
from repositories.flowfile.swapfile import (MAGIC, SwapFileError, SwapFileReader, new_location, read_swap_file,
                                            remove_orphans, set_aside, swap_directory, write_swap_file)
from repositories.model import ContentClaim, FlowFile, ResourceClaim, new_flowfile_uuid


def flowfiles(n: int, start: int = 1) -> list[FlowFile]:
    claim = ResourceClaim("default", "7", "1700000000-1")
    out = []
    for i in range(start, start + n):
        uuid = new_flowfile_uuid()
        content = ContentClaim(claim, i * 10, 10) if i % 3 else None
        out.append(FlowFile(i, uuid, {"uuid": uuid, "filename": f"ä-{i}.txt", "priority": str(i % 5)},
                            content, 1_700_000_000_000 + i, 1_700_000_000_000 - i, (i % 2) * 5, 1_700_000_001_000, i))
    return out


def test_round_trip_keeps_every_field_and_the_order(tmp_path):
    batch = flowfiles(25)
    info = write_swap_file(tmp_path, "a.swap", "queue-é", batch, partition="node-1", order="PriorityAttribute")
    assert (info.count, info.size) == (25, sum(f.size for f in batch))
    header, back = read_swap_file(tmp_path / "a.swap")
    assert back == batch
    assert (header.queue, header.partition, header.order, header.count, header.size) == (
        "queue-é", "node-1", "PriorityAttribute", 25, info.size)
    assert not list(tmp_path.glob("*.partial"))


def test_header_and_first_entry_bytes_are_as_documented(tmp_path):
    ff = FlowFile(42, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", {"filename": "a.txt"},
                  ContentClaim(ResourceClaim("default", "17", "1700000000-42"), 100, 25),
                  1_700_000_000_000, 1_700_000_000_000, 0, 1_700_000_000_123, 0)
    write_swap_file(tmp_path, "doc.swap", "q1", [ff], partition="local", order="FIFO")
    raw = (tmp_path / "doc.swap").read_bytes()
    # header: magic, version 1, count u32 BE, content bytes u64 BE, created i64 BE, then 3 texts
    assert raw[:8] == b"FLOWSWAP" and raw[8] == 1
    assert struct.unpack_from(">I", raw, 9)[0] == 1
    assert struct.unpack_from(">Q", raw, 13)[0] == 25
    pos = 29
    texts = []
    for _ in range(3):
        (n,) = struct.unpack_from(">H", raw, pos)
        texts.append(raw[pos + 2: pos + 2 + n].decode())
        pos += 2 + n
    assert texts == ["q1", "local", "FIFO"]
    assert struct.unpack_from("<I", raw, pos)[0] == zlib.crc32(raw[:pos])
    pos += 4
    # entry: record length u32 BE, uuid (16 raw bytes), the FlowFile record with an empty queue id, CRC-32 LE
    (length,) = struct.unpack_from(">I", raw, pos)
    assert raw[pos + 4: pos + 20] == bytes.fromhex("0190a1b2c3d47e5f8a9b0c1d2e3f4a5b")
    record = raw[pos + 20: pos + 20 + length]
    assert record == rec.encode(ff, "")
    assert record[:3] == b"\x01\x00\x00"  # record version 1, Lq = 0
    assert struct.unpack_from("<I", raw, pos + 20 + length)[0] == zlib.crc32(raw[pos: pos + 20 + length])
    assert len(raw) == pos + 20 + length + 4


def test_reading_resumes_at_an_entry_boundary_and_verify_does_not_move(tmp_path):
    batch = flowfiles(10)
    write_swap_file(tmp_path, "r.swap", "q", batch)
    with SwapFileReader(tmp_path / "r.swap") as reader:
        assert reader.verify() == 10
        first = reader.read(4)
        offset, index = reader.offset, reader.index
    with SwapFileReader(tmp_path / "r.swap", offset, index) as reader:
        assert reader.remaining == 6
        rest = reader.read(100)
    assert first + rest == batch


def _damaged(tmp_path, mutate) -> SwapFileError:
    write_swap_file(tmp_path, "d.swap", "q", flowfiles(20))
    path = tmp_path / "d.swap"
    raw = bytearray(path.read_bytes())
    path.write_bytes(bytes(mutate(raw)))
    with pytest.raises(SwapFileError) as err:
        read_swap_file(path)
    assert str(path) in str(err.value) and "swap:d.swap" in str(err.value)
    return err.value


def _flip(at):
    def mutate(raw):
        raw[at(raw)] ^= 0x40
        return raw
    return mutate


def test_a_flipped_byte_in_an_entry_names_the_entry(tmp_path):
    err = _damaged(tmp_path, _flip(lambda raw: len(raw) // 2))
    assert "entry" in err.problem and "checksum" in err.problem


def test_a_flipped_byte_in_the_header_is_reported(tmp_path):
    err = _damaged(tmp_path, _flip(lambda raw: 10))
    assert "header checksum" in err.problem


@pytest.mark.parametrize("keep", [0, 5, 40, -30])
def test_a_truncated_file_is_reported(tmp_path, keep):
    err = _damaged(tmp_path, lambda raw: raw[:keep] if keep >= 0 else raw[:keep])
    assert "truncated" in err.problem or "empty" in err.problem or "shorter" in err.problem


def test_trailing_bytes_are_reported(tmp_path):
    err = _damaged(tmp_path, lambda raw: raw + b"\x00")
    assert "after its last entry" in err.problem


def test_not_a_swap_file_and_missing_file(tmp_path):
    (tmp_path / "x.swap").write_bytes(b"GARBAGE!" + bytes(100))
    with pytest.raises(SwapFileError, match="not a swap file"):
        read_swap_file(tmp_path / "x.swap")
    with pytest.raises(SwapFileError, match="does not exist"):
        read_swap_file(tmp_path / "missing.swap")


def test_a_newer_version_asks_for_an_upgrade(tmp_path):
    write_swap_file(tmp_path, "v.swap", "q", flowfiles(2))
    path = tmp_path / "v.swap"
    raw = bytearray(path.read_bytes())
    raw[8] = 2
    path.write_bytes(bytes(raw))
    with pytest.raises(UnsupportedFormatVersionError, match="upgrade flowactors"):
        read_swap_file(path)


def test_orphans_are_removed_but_registered_and_set_aside_files_kept(tmp_path):
    directory = swap_directory(tmp_path)
    keep = new_location("q/with spaces", "local")
    assert "/" not in keep and keep.endswith(".swap")
    drop = new_location("q", "local")
    write_swap_file(directory, keep, "q", flowfiles(1))
    write_swap_file(directory, drop, "q", flowfiles(1))
    write_swap_file(directory, "bad.swap", "q", flowfiles(1))
    (directory / "half.swap.partial").write_bytes(MAGIC)
    moved = set_aside(directory / "bad.swap")
    assert moved.name == "bad.swap.corrupt"
    removed = remove_orphans(directory, {keep})
    assert sorted(removed) == sorted([drop, "half.swap.partial"])
    assert sorted(p.name for p in directory.iterdir()) == sorted([keep, "bad.swap.corrupt"])
