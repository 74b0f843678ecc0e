"""The byte layouts of docs/formats/flowfile-repository.md, pinned byte by byte."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from repositories.flowfile import records as rec
from repositories.model import ContentClaim, FlowFile, ResourceClaim

U = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
UKEY = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
RC = ResourceClaim("default", "17", "1700000000-42")


def sample(claim: bool = True) -> FlowFile:
    return FlowFile(
        id=42, uuid=U, attributes={"filename": "a.txt", "ü": "✓"},
        claim=ContentClaim(RC, 100, 25) if claim else None,
        entry_date=1_700_000_000_000, lineage_start_date=1_699_999_999_000, penalized_until=7,
        queue_date=1_700_000_000_123, queue_index=-3,
    )  # fmt: skip


def test_uuid_key_is_the_16_raw_bytes():
    assert rec.uuid_key(U) == UKEY
    assert rec.uuid_key(U.upper()) == UKEY
    assert rec.key_uuid(UKEY) == U
    for bad in ("", "xyz", U + "00", 12):
        with pytest.raises(ValueError):
            rec.uuid_key(bad)


def test_record_layout_byte_by_byte():
    ff = sample()
    ckey = rec.claim_key(RC)
    value, okey = rec.encode_flowfile(ff, rec.queue_prefix("q-ü"), ckey, UKEY)
    qb = "q-ü".encode()
    assert value[0] == 1  # version
    assert value[1:3] == struct.pack(">H", len(qb)) and value[3 : 3 + len(qb)] == qb
    at = 3 + len(qb)
    s = 1 << 63
    assert struct.unpack_from(">QQQ", value, at) == (ff.queue_date + s, ff.queue_index + s, ff.id + s)
    assert struct.unpack_from(">qqq", value, at + 24) == (ff.entry_date, ff.lineage_start_date, 7)
    assert struct.unpack_from(">Hqq", value, at + 48) == (len(ckey), 100, 25)
    assert value[at + 66 : at + 66 + len(ckey)] == ckey
    assert orjson.loads(value[at + 66 + len(ckey) : -4]) == ff.attributes
    assert struct.unpack("<I", value[-4:])[0] == zlib.crc32(value[:-4])
    assert zlib.crc32(value) == 0x2144DF1C  # the residue a reader may check instead
    # the order-index key is the record's bytes 1..at+24 followed by the uuid
    assert okey == value[1 : at + 24] + UKEY
    assert rec.order_key_fields(okey) == ("q-ü", UKEY)


def test_claim_key_layout():
    ckey = rec.claim_key(RC)
    assert ckey == b"\x00\x07default" + b"\x00\x0217" + b"\x00\x0d1700000000-42"
    assert rec.claim_from_key(ckey) == RC
    for bad in (ckey[:-1], ckey + b"x", b"\x00"):
        with pytest.raises(rec.RecordError):
            rec.claim_from_key(bad)


def test_decode_and_peek():
    for ff in (sample(), sample(claim=False)):
        value = rec.encode(ff, "q1")
        queue, back = rec.decode_record(UKEY, value)
        assert (queue, back) == ("q1", ff)
        order, prefix, ckey, size = rec.peek(value)
        assert prefix == rec.queue_prefix("q1") and size == ff.size
        assert ckey == (rec.claim_key(RC) if ff.claim else b"")
        assert rec.order_id(order) == 42


def test_with_queue_keeps_everything_but_the_queue():
    value = rec.encode(sample(), "q1")
    moved, order = rec.with_queue(value, rec.queue_prefix("swap:/x/y.swap"))
    queue, ff = rec.decode_record(UKEY, moved)
    assert (queue, ff) == ("swap:/x/y.swap", sample())
    assert order + UKEY == rec.encode_flowfile(sample(), rec.queue_prefix("swap:/x/y.swap"), rec.claim_key(RC), UKEY)[1]


def test_order_keys_sort_numerically_within_a_queue():
    prefix = rec.queue_prefix("q")
    keys = []
    for qdate, qindex, id_ in [(-5, 0, 1), (0, -1, 2), (0, 0, 1), (0, 0, 2), (3, 9, 0), (1 << 40, 0, 0)]:
        ff = sample()._replace(queue_date=qdate, queue_index=qindex, id=id_)
        keys.append(rec.encode_flowfile(ff, prefix, b"", UKEY)[1])
    assert keys == sorted(keys)


def test_prefix_successor_bounds_a_queue():
    p = rec.queue_prefix("q1")
    assert rec.prefix_successor(p) == rec.queue_prefix("q2")
    assert rec.prefix_successor(b"a\xff\xff") == b"b"
    assert all(rec.prefix_successor(p) > p + tail for tail in (b"\xff" * 40, b""))


@pytest.mark.parametrize(
    "mangle, error",
    [
        (lambda v: v[:10], "shorter"),
        (lambda v: v[:-1] + bytes([v[-1] ^ 1]), "checksum"),
        (lambda v: bytes([0]) + v[1:], "checksum"),
    ],
)
def test_damaged_records_are_record_errors(mangle, error):
    value = rec.encode(sample(), "q1")
    with pytest.raises(rec.RecordError, match=error):
        rec.decode_record(UKEY, mangle(value))
    with pytest.raises(rec.RecordError, match=error):
        rec.peek(mangle(value))


def test_a_record_with_a_valid_checksum_but_unknown_version():
    value = bytearray(rec.encode(sample(), "q1"))
    for version, exc in ((2, rec.RecordVersionError), (0, rec.RecordError)):
        value[0] = version
        body = bytes(value[:-4])
        fixed = body + struct.pack("<I", zlib.crc32(body))
        with pytest.raises(exc):
            rec.peek(fixed)


def test_attributes_must_be_json_strings_keyed():
    with pytest.raises(TypeError):
        rec.encode(sample()._replace(attributes={1: "x"}), "q")
    from types import MappingProxyType

    value = rec.encode(sample()._replace(attributes=MappingProxyType({"a": "b"})), "q")
    assert rec.decode_record(UKEY, value)[1].attributes == {"a": "b"}


def test_small_values():
    assert rec.unpack_claim_value(rec.pack_claim_value(3, 9)) == (3, 9)
    assert rec.pack_claim_value(1, 2) == bytes(7) + b"\x01" + bytes(7) + b"\x02"
    assert rec.pack_queue_value(2, -1)[8:] == b"\xff" * 8
    assert rec.destructible_fields(rec.destructible_key(5, b"abc")) == (5, b"abc")
    entry = rec.encode_swap_entry("q", 3, 30, 7, 123)
    assert entry[0] == 1 and orjson.loads(entry[1:])["queue"] == "q"
    assert rec.decode_swap_entry(entry)["count"] == 3
    with pytest.raises(rec.RecordVersionError):
        rec.decode_swap_entry(b"\x05{}")


def test_the_example_in_the_format_doc_is_what_the_code_writes():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "formats" / "flowfile-repository.md").read_text()
    block = doc.split("Example: FlowFile id 42", 1)[1].split("```", 2)[1]
    hex_bytes = "".join(re.findall(r"^[0-9a-f]{4}  ((?:[0-9a-f]{2} ?)+)", block, flags=re.M)).split()
    ff = FlowFile(42, U, {"filename": "a.txt"}, ContentClaim(RC, 100, 25), 1_700_000_000_000, 1_700_000_000_000,
                  0, 1_700_000_000_123, 0)
    assert bytes.fromhex("".join(hex_bytes)) == rec.encode(ff, "q1")


def test_uuid_keys_of_a_batch_are_each_uuid_key():
    many = [U, U.upper(), U.replace("-", ""), "00000000-0000-7000-8000-000000000001"]
    joined, keys = rec.uuid_keys(many)
    assert keys == [rec.uuid_key(u) for u in many] and joined == b"".join(keys)
    assert rec.uuid_keys([]) == (b"", [])
    # 31 and 33 hex digits would join to 64: each uuid is checked on its own
    canonical = ["00000000-0000-7000-8000-%012x" % i for i in range(50)] + [U.upper()]
    joined, keys = rec.uuid_keys(canonical)   # the canonical form: split in one call
    assert keys == [rec.uuid_key(u) for u in canonical] and joined == b"".join(keys)
    assert rec.uuid_keys(iter(canonical))[1] == keys
    # a digit short in one and over in the next join to two well-placed uuids: still refused
    for bad in ([U[:-1], U + "0"], [U[:-1], "f" + U], [U, "not-a-uuid"], [U, 12]):
        with pytest.raises(ValueError, match="is not a UUID"):
            rec.uuid_keys(bad)


def _commit_entry():
    from repositories.model import QueuedFlowFile

    other = sample(claim=False)._replace(uuid="00000000-0000-7000-8000-000000000001", id=43)
    third = sample()._replace(uuid="00000000-0000-7000-8000-000000000002", id=44, attributes={})
    updates = [QueuedFlowFile(sample(), "q1"), QueuedFlowFile(other, "q2"), QueuedFlowFile(third, "q1")]
    prepared, rkeys, columns = rec.encode_commit(updates, ["00000000-0000-7000-8000-0000000000ff"])
    return updates, prepared, rkeys, columns


def test_a_journal_entry_byte_by_byte_and_back():
    """A commit's journal entry: header, the updates' queue and claim tables, uuid keys, ten i64
    LE columns and one JSON array of attributes, the removals' uuid keys, the new claims' keys,
    CRC-32; it decodes to updates that make the same records as the FlowFiles they came from."""
    updates, prepared, rkeys, columns = _commit_entry()
    ckey = rec.claim_key(tuple(RC))
    entry = rec.encode_journal_entry(len(prepared), columns, rkeys, [ckey])
    ffs = [u.flowfile for u in updates]

    def i64s(values):
        return struct.pack("<3q", *values)

    expected = (bytes([2]) + struct.pack(">III", 3, 1, 1)
                + struct.pack(">II", 2, 1) + b"\x00\x02q1" + b"\x00\x02q2" + struct.pack(">H", len(ckey)) + ckey
                + UKEY + rec.uuid_key(ffs[1].uuid) + rec.uuid_key(ffs[2].uuid)
                + i64s([42, 43, 44]) + i64s([f.entry_date for f in ffs]) + i64s([f.lineage_start_date for f in ffs])
                + i64s([7, 7, 7]) + i64s([f.queue_date for f in ffs]) + i64s([-3, -3, -3])
                + i64s([100, 0, 100]) + i64s([25, 0, 25]) + i64s([0, 1, 0]) + i64s([1, 0, 1])
                + struct.pack(">I", len(orjson.dumps([f.attributes for f in ffs])))
                + orjson.dumps([f.attributes for f in ffs])
                + rkeys[0]
                + struct.pack(">H", len(ckey)) + ckey)
    assert entry == expected + struct.pack("<I", zlib.crc32(expected))
    decoded, removals, claims = rec.decode_journal_entry(entry)
    assert [d[:1] + d[3:] for d in decoded] == [p[:1] + p[3:] for p in prepared]
    assert [u[3:] for u in decoded] == [(b"\x00\x02q1", ckey, 25), (b"\x00\x02q2", b"", 0), (b"\x00\x02q1", ckey, 25)]
    assert [rec.update_record(d) for d in decoded] == [rec.update_record(p) for p in prepared]
    assert [rec.order_key(p[1], p[3], p[0]) for p in prepared] == [rec.update_record(p)[1] for p in prepared]
    assert [rec.update_record(p) for p in prepared] == [
        rec.encode_flowfile(f, rec.queue_prefix(u.queue), ckey if f.claim else b"", rec.uuid_key(f.uuid))
        for f, u in zip(ffs, updates)]
    assert removals == rkeys and claims == [ckey]
    empty = rec.encode_commit([], [])
    assert rec.decode_journal_entry(rec.encode_journal_entry(0, empty[2], [], [])) == ([], [], [])


def test_a_version_1_journal_entry_is_still_read():
    """Entries written before the columns (version 1: each update's uuid key, length and record)
    may still be in a journal when this release opens it."""
    updates, prepared, rkeys, _columns = _commit_entry()
    records = [rec.update_record(p) for p in prepared]
    body = bytes([1]) + struct.pack(">III", 3, 1, 0)
    for p, (value, _okey) in zip(prepared, records):
        body += p[0] + struct.pack(">I", len(value)) + value
    body += rkeys[0]
    decoded, removals, claims = rec.decode_journal_entry(body + struct.pack("<I", zlib.crc32(body)))
    assert [d[:1] + d[3:] for d in decoded] == [p[:1] + p[3:] for p in prepared]
    assert [rec.update_record(d) for d in decoded] == records
    assert removals == rkeys and claims == []


def test_a_journal_entry_with_numbers_it_does_not_hold_is_a_record_error():
    _updates, prepared, rkeys, columns = _commit_entry()
    entry = bytearray(rec.encode_journal_entry(len(prepared), columns, rkeys, []))
    # the queue-number column's first value: after the header (13), table counts (8), two queue
    # prefixes (4 each), one claim key, three uuid keys and eight columns of three
    at = 13 + 8 + 4 + 4 + 2 + len(rec.claim_key(tuple(RC))) + 3 * 16 + 8 * 3 * 8
    assert struct.unpack_from("<q", entry, at)[0] == 0
    struct.pack_into("<q", entry, at, 5)
    body = bytes(entry[:-4])
    with pytest.raises(rec.RecordError, match="does not hold"):
        rec.decode_journal_entry(body + struct.pack("<I", zlib.crc32(body)))


@pytest.mark.parametrize("mangle, error", [
    (lambda v: v[:8], "shorter than its header"),
    (lambda v: v[:-5] + bytes([v[-5] ^ 1]) + v[-4:], "checksum"),
    (lambda v: v[:-4] + b"x" + v[-4:], "checksum"),
])
def test_a_damaged_journal_entry_is_a_record_error(mangle, error):
    from repositories.model import QueuedFlowFile

    prepared, rkeys, columns = rec.encode_commit([QueuedFlowFile(sample(), "q1")], [])
    with pytest.raises(rec.RecordError, match=error):
        rec.decode_journal_entry(mangle(rec.encode_journal_entry(len(prepared), columns, rkeys, [])))


def test_a_journal_entry_of_a_newer_version_or_wrong_counts():
    def sealed(body: bytes) -> bytes:
        return body + struct.pack("<I", zlib.crc32(body))

    with pytest.raises(rec.RecordVersionError):
        rec.decode_journal_entry(sealed(bytes([3]) + struct.pack(">III", 0, 0, 0)))
    with pytest.raises(rec.RecordError, match="truncated|length"):
        rec.decode_journal_entry(sealed(bytes([1]) + struct.pack(">III", 0, 3, 0)))
