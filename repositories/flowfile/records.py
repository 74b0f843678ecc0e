"""Byte layouts of the FlowFile repository's keys and values (docs/formats/flowfile-repository.md).

Pure functions, no LMDB: ``wal.py`` calls them and turns their ``RecordError`` into a
``RepositoryCorruptError`` that names the repository path. Nothing here uses pickle: every value
is ``struct`` fields, UTF-8 strings and (for attributes) an orjson object, behind a version byte,
so a damaged or hostile value gives an error, never code execution.

A FlowFile record (the value in the ``flowfiles`` sub-database; its key is the uuid's 16 raw
bytes) is laid out so that a commit can take what it needs from a FlowFile's *previous* record
by slicing, without parsing it: from byte 1 it starts with the record's own order-index key
(queue prefix, queue_date, queue_index, id), and the content claim is stored as its exact key in
the ``claims`` sub-database::

    off        size  field
    0          1     record version, 1
    1          2     Lq: length of the queue id, u16 BE        } = the queue prefix of the
    3          Lq    queue id, UTF-8                            }   order-index key
    3+Lq       8     queue_date + 2**63, u64 BE      }
    11+Lq      8     queue_index + 2**63, u64 BE     } = the order part of the index key
    19+Lq      8     id + 2**63, u64 BE              }
    27+Lq      8     entry_date, i64 BE
    35+Lq      8     lineage_start_date, i64 BE
    43+Lq      8     penalized_until, i64 BE
    51+Lq      2     Lk: length of the claim key, u16 BE (0: no content claim)
    53+Lq      8     content offset in the resource claim, i64 BE (0 without claim)
    61+Lq      8     content length, i64 BE (0 without claim)
    69+Lq      Lk    claim key: container, section, id, each a u16 BE length + UTF-8
    69+Lq+Lk   A     attributes: an orjson (JSON, UTF-8) object of string -> string
    end-4      4     CRC-32 (zlib) of every byte before it, u32 LE

The CRC is last so that a check is one call over the whole value: the CRC-32 of a message
followed by its own CRC (little-endian) is always 0x2144DF1C.
"""

from __future__ import annotations

import functools
import re
import struct
import sys
import zlib
from array import array
from itertools import repeat
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim

#: Queue id of FlowFiles in a swap file: this prefix, then the swap file's location.
SWAP_QUEUE_PREFIX = "swap:"

#: Version byte of a FlowFile record and of a swap-file registry entry.
RECORD_VERSION = 1

#: LMDB's maximum key size in the library py-lmdb bundles (``Environment.max_key_size()``).
MAX_KEY_SIZE = 511

_SIGN = 1 << 63
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_CRC_RESIDUE = 0x2144DF1C

_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_CRC = struct.Struct("<I")
#: splits a run of uuid keys (16 bytes each) in one C call
_SIXTEEN = re.compile(rb".{16}", re.DOTALL)
#: after the queue: qdate, qindex, id (offset u64), entry, lineage, penalized, Lk, offset, length
_FIXED = struct.Struct(">QQQqqqHqq")
_ORDER = struct.Struct(">QQQ")  # queue_date, queue_index, id, each + 2**63
_ORDER_LEN = _ORDER.size
_CLAIM_AT = 48  # offset of Lk inside _FIXED
_CLAIM = struct.Struct(">Hqq")
_CLAIM_VALUE = struct.Struct(">QQ")  # claimant count, pending-release sequence (0 = not pending)
_QUEUE_VALUE = struct.Struct(">qq")  # FlowFile count, content bytes
_dumps = orjson.dumps
_loads = orjson.loads
_crc32 = zlib.crc32
_VERSION_BYTE = bytes((RECORD_VERSION,))

#: Length of the fixed tail of an order-index key: the order part and the 16-byte uuid.
INDEX_TAIL = _ORDER_LEN + 16
#: Longest queue id (UTF-8 bytes) that fits an order-index key.
MAX_QUEUE_BYTES = MAX_KEY_SIZE - 2 - INDEX_TAIL


#: One FlowFile of a commit as the log applies it (``encode_commit``, ``decode_journal_entry``):
#: ``(uuid key, source of its record, where in the source, queue prefix, claim key or b"",
#: content length)``; the source is the FlowFile itself (then "where" is its queue id) or what
#: makes its record from a journal entry (``update_record``)
Update = tuple[bytes, Any, Any, bytes, bytes, int]
#: One commit's changes: ``(updates, removed uuid keys, keys of the claims it wrote)``
JournalEntry = tuple[list[Update], list[bytes], list[bytes]]


class RecordError(ValueError):
    """A value could not be decoded; ``wal.py`` reports it as repository corruption."""


class RecordVersionError(RecordError):
    """A value carries a version byte this release does not know."""

    def __init__(self, found: int) -> None:
        self.found = found
        super().__init__(f"record version {found}, this release reads {RECORD_VERSION}")


# --- uuids -------------------------------------------------------------------------------------


def uuid_key(uuid: str) -> bytes:
    """The 16 raw bytes of a uuid string (any case, with or without dashes)."""
    try:
        key = bytes.fromhex(uuid.replace("-", ""))
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"FlowFile uuid {uuid!r} is not a UUID") from None
    if len(key) != 16:
        raise ValueError(f"FlowFile uuid {uuid!r} is not a UUID")
    return key


def key_uuid(key: bytes) -> str:
    """The canonical (lower-case, dashed) string of a 16-byte uuid key."""
    h = key.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid_keys(given: Iterable[str]) -> tuple[bytes, list[bytes]]:
    """``(every key joined, the keys)``: ``uuid_key`` of each uuid, with a few C calls for the
    batch; a uuid that is not one is named as ``uuid_key`` names it."""
    uuids = given if isinstance(given, (list, tuple)) else list(given)
    n = len(uuids)
    try:
        text = "".join(uuids)
        # the canonical form, each uuid 36 characters with its four dashes in place: checked on
        # the joined text by strides, so the batch is stripped and parsed in one call each
        if (set(map(len, uuids)) <= {36} and text.count("-") == 4 * n
                and text[8::36] == text[13::36] == text[18::36] == text[23::36] == "-" * n):
            joined = bytes.fromhex(text.replace("-", ""))
            return joined, list(_keys_struct(n).unpack(joined))
        stripped = [u.replace("-", "") for u in uuids]
        joined = bytes.fromhex("".join(stripped))
        if set(map(len, stripped)) - {32}:
            raise ValueError
    except (ValueError, TypeError, AttributeError):
        for uuid in uuids:
            uuid_key(uuid)
        raise
    return joined, [joined[i : i + 16] for i in range(0, len(joined), 16)]


@functools.lru_cache(maxsize=16)
def _keys_struct(count: int) -> struct.Struct:
    """Splits ``count`` joined 16-byte keys (a batch's count repeats: its Struct is kept)."""
    return struct.Struct("16s" * count)


# --- queue prefixes and the order index --------------------------------------------------------


def queue_prefix(queue: str) -> bytes:
    """The first bytes of every order-index key of ``queue``: u16 BE length, then UTF-8."""
    if not isinstance(queue, str):
        raise ValueError(f"queue id {queue!r} is not a string")
    qb = queue.encode()
    if len(qb) > MAX_QUEUE_BYTES:
        raise ValueError(
            f"queue id of {len(qb)} bytes is too long (at most {MAX_QUEUE_BYTES} bytes of UTF-8)"
        )
    return _U16.pack(len(qb)) + qb


def prefix_successor(prefix: bytes) -> bytes:
    """The smallest key greater than every key that starts with ``prefix``."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return b"\xff" * MAX_KEY_SIZE
    b[-1] += 1
    return bytes(b)


def order_key_fields(key: bytes) -> tuple[str, bytes]:
    """(queue, uuid key) of an order-index key."""
    if len(key) < 2:
        raise RecordError("index key is too short")
    (n,) = _U16.unpack_from(key)
    if len(key) != 2 + n + INDEX_TAIL:
        raise RecordError("index key length does not match its queue length")
    try:
        queue = key[2 : 2 + n].decode()
    except UnicodeDecodeError:
        raise RecordError("index key queue is not UTF-8") from None
    return queue, key[-16:]


# --- resource claims ---------------------------------------------------------------------------


def claim_key(resource: tuple) -> bytes:
    """Key of a resource claim: container, section, id, each a u16 BE length and UTF-8."""
    out = bytearray()
    for part in resource:
        b = part.encode()
        out += _U16.pack(len(b))
        out += b
    if len(out) > MAX_KEY_SIZE - _U64.size:
        raise ValueError(f"resource claim {tuple(resource)!r} is too long to be a key")
    return bytes(out)


class ClaimKeyCache(dict):
    """Claim keys by resource claim, each encoded once: the FlowFiles of one batch (a commit, a
    swap file) often share a few resource claims."""

    def __missing__(self, resource: tuple) -> bytes:
        key = self[resource] = claim_key(resource)
        return key


def claim_from_key(key: bytes) -> ResourceClaim:
    parts = []
    pos = 0
    try:
        for _ in range(3):
            (n,) = _U16.unpack_from(key, pos)
            pos += 2
            if pos + n > len(key):
                raise RecordError("claim key is truncated")
            parts.append(bytes(key[pos : pos + n]).decode())
            pos += n
    except (struct.error, UnicodeDecodeError):
        raise RecordError("claim key is malformed") from None
    if pos != len(key):
        raise RecordError("claim key has trailing bytes")
    return ResourceClaim(*parts)


# --- FlowFile records --------------------------------------------------------------------------


def _default(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"cannot store a {type(obj).__name__} in FlowFile attributes")


def encode_flowfile(ff: FlowFile, prefix: bytes, ckey: bytes, ukey: bytes) -> tuple[bytes, bytes]:
    """``(record, order-index key)`` of FlowFile ``ff`` in the queue whose prefix is ``prefix``;
    ``ckey`` is the claim key of its content's resource claim (``b""`` without content)."""
    id_, _uuid, attributes, c, entry, lineage, penalized, qdate, qindex = ff
    try:
        if c is None:
            fixed = _FIXED.pack(qdate + _SIGN, qindex + _SIGN, id_ + _SIGN, entry, lineage, penalized, 0, 0, 0)
        else:
            fixed = _FIXED.pack(
                qdate + _SIGN, qindex + _SIGN, id_ + _SIGN, entry, lineage, penalized, len(ckey), c[1], c[2]
            )
    except (struct.error, TypeError):
        raise ValueError(f"FlowFile {ff.uuid} has a field that is not a signed 64-bit integer: {ff!r}") from None
    body = b"".join((_VERSION_BYTE, prefix, fixed, ckey, _dumps(attributes, default=_default)))
    return body + _CRC.pack(_crc32(body)), prefix + fixed[:_ORDER_LEN] + ukey


def order_key(ff: FlowFile, prefix: bytes, ukey: bytes) -> bytes:
    """The order-index key of ``ff`` in the queue whose prefix is ``prefix`` (what
    ``encode_flowfile`` returns beside the record, without making the record)."""
    return prefix + _ORDER.pack(ff[7] + _SIGN, ff[8] + _SIGN, ff[0] + _SIGN) + ukey


def encode(ff: FlowFile, queue: str) -> bytes:
    """The record of ``ff`` in ``queue`` (convenience for tools and tests)."""
    resource = ff.claim.resource if ff.claim is not None else None
    ckey = claim_key(resource) if resource is not None else b""
    return encode_flowfile(ff, queue_prefix(queue), ckey, uuid_key(ff.uuid))[0]


#: A journal entry's updates are columns of i64 LE (``array("q")`` is 8 bytes on every platform)
_NATIVE_LE = sys.byteorder == "little"
_TABLES = struct.Struct(">II")  # queue prefixes, claim keys
_COLUMNS = 10  # id, entry, lineage, penalized, queue date, queue index, offset, length, queue no, claim no


class _Batch(NamedTuple):
    """A commit's updates encoded at once (``_encode_updates``)."""

    prepared: list[Update]
    ukeys: list[bytes]          # their uuid keys
    joined: bytes               # the same, joined
    prefixes: list[bytes]       # the batch's queue prefixes, each once
    ckeys: list[bytes]          # b"" (no content), then the batch's claim keys, each once
    columns: list[array]
    attributes: bytes           # every FlowFile's attributes, one JSON array


def encode_commit(
    updates: Sequence[QueuedFlowFile], removals: Iterable[str], prefix_of: Callable[[str], bytes] = queue_prefix
) -> tuple[list[Update], list[bytes], bytes]:
    """Validate and encode one commit's batch, before any write, as both FlowFile repositories do.

    The LMDB and the in-memory repository share it so that they refuse the same batches with the
    same ``ValueError`` (a uuid twice among updates and removals, a FlowFile that cannot be stored)
    and order FlowFiles by the same keys. ``prefix_of`` is ``queue_prefix`` or a cache of it.
    Returns ``([(uuid key, FlowFile, queue, queue prefix, claim key, content length)], removal
    uuid keys, the updates' columns)``: an *update* each (the shape the FlowFile repository
    applies; ``update_record`` makes its record when it is written), and the updates as the
    columns of a journal entry (``encode_journal_entry``), built for the whole batch at once."""
    if len(updates):
        batch = _encode_updates(updates, prefix_of)
    else:
        batch = _Batch([], [], b"", [], [b""], [array("q")] * _COLUMNS, b"[]")
    rkeys = uuid_keys(removals)[1]
    keys = batch.ukeys + rkeys
    if len(set(keys)) != len(keys):  # checked at once; the loop below only names the culprit
        seen: set[bytes] = set()
        for i, ukey in enumerate(keys):
            if ukey in seen:
                where = "" if i < len(updates) else " (update and removal)"
                raise ValueError(f"FlowFile {key_uuid(ukey)} appears more than once in one commit{where}")
            seen.add(ukey)
    columns = batch.columns
    if not _NATIVE_LE:
        for column in columns:
            column.byteswap()
    tables = [_TABLES.pack(len(batch.prefixes), len(batch.ckeys) - 1), *batch.prefixes]
    for ckey in batch.ckeys[1:]:
        tables += (_U16.pack(len(ckey)), ckey)
    body = b"".join([*tables, batch.joined, *[c.tobytes() for c in columns], _U32.pack(len(batch.attributes)),
                     batch.attributes])
    return batch.prepared, rkeys, body


def _encode_updates(updates: Sequence[QueuedFlowFile], prefix_of: Callable[[str], bytes]) -> _Batch:
    """A non-empty batch of updates as the columns of a journal entry and as updates; the
    batch's queues and resource claims are each numbered once (claim 0: no content)."""
    n = len(updates)
    flowfiles, queues = map(list, zip(*updates))
    # the FlowFiles' fields as columns: one C-level transposition, not a pass a field
    ids, uuids, attribute_maps, claims, entry, lineage, penalized, qdates, qindexes = zip(*flowfiles)
    joined, ukeys = uuid_keys(uuids)
    if queues.count(queues[0]) == n:
        queue_numbers = [0] * n
        prefixes = [prefix_of(queues[0])]
        prefix_each = prefixes * n
    else:
        numbered: dict[str, int] = {}
        queue_numbers = [numbered.setdefault(q, len(numbered)) for q in queues]
        prefixes = [prefix_of(q) for q in numbered]
        prefix_each = [prefixes[i] for i in queue_numbers]
    offsets: Sequence[int]
    sizes: Sequence[int]
    if None in claims:
        resources: dict[tuple, int] = {}
        claim_numbers = [0 if c is None else resources.setdefault(c[0], len(resources) + 1) for c in claims]
        offsets = [0 if c is None else c[1] for c in claims]
        sizes = [0 if c is None else c[2] for c in claims]
    else:
        owners, offsets, sizes = zip(*claims)
        resources = {r: i for i, r in enumerate(dict.fromkeys(owners), 1)}
        claim_numbers = list(map(resources.__getitem__, owners))
    ckeys = [b"", *map(claim_key, resources)]
    try:
        columns = [array("q", ids), array("q", entry), array("q", lineage), array("q", penalized),
                   array("q", qdates), array("q", qindexes), array("q", offsets), array("q", sizes),
                   array("q", queue_numbers), array("q", claim_numbers)]
        attributes = _dumps(attribute_maps, default=_default)
    except (TypeError, OverflowError) as e:
        for ff in flowfiles:   # names the FlowFile, as encoding one at a time would
            try:
                encode_flowfile(ff, b"", b"", b"")
            except TypeError as each:
                raise ValueError(f"FlowFile {ff.uuid} cannot be stored: {each}") from None
        raise ValueError(f"a FlowFile of the commit cannot be stored: {e}") from None
    prepared = list(zip(ukeys, flowfiles, queues, prefix_each, map(ckeys.__getitem__, claim_numbers), sizes))
    return _Batch(prepared, ukeys, joined, prefixes, ckeys, columns, attributes)


def encode_swap_registration(
    location: str, count: int, flowfiles: Sequence[FlowFile] | None, prefix_of: Callable[[str], bytes] = queue_prefix
) -> list[tuple[bytes, FlowFile, str, bytes, bytes, int]]:
    """Check a swap file's registration and encode the FlowFiles it moves to ``swap:<location>``
    (none without ``flowfiles``), as ``encode_commit`` does, so that both FlowFile repositories
    refuse the same registrations with the same ``ValueError``."""
    if not location:
        raise ValueError("swap file location must not be empty")
    if len(location.encode()) > MAX_KEY_SIZE:
        raise ValueError(f"swap file location of {len(location.encode())} bytes is too long")
    swap_queue = SWAP_QUEUE_PREFIX + location
    prefix_of(swap_queue)  # refuses a location too long for the order index
    if flowfiles is None:
        return []
    if len(flowfiles) != count:
        raise ValueError(f"count is {count} but {len(flowfiles)} FlowFiles were given")
    return encode_commit([QueuedFlowFile(ff, swap_queue) for ff in flowfiles], (), prefix_of)[0]


def _check(value: bytes) -> int:
    """Verify a record's version and checksum; return Lq."""
    n = len(value)
    if n < 3 + _FIXED.size + 4:
        raise RecordError(f"record of {n} bytes is shorter than its fixed fields")
    if _crc32(value) != _CRC_RESIDUE:
        if value[0] > RECORD_VERSION:
            raise RecordVersionError(value[0])
        raise RecordError("record checksum does not match its bytes")
    if value[0] != RECORD_VERSION:
        if value[0] > RECORD_VERSION:
            raise RecordVersionError(value[0])
        raise RecordError(f"record version byte is {value[0]}")
    return _queue_length(value)


def _queue_length(value: bytes) -> int:
    """Lq of a record, checked against its length (not its checksum)."""
    if len(value) < 3 + _FIXED.size + 4:
        raise RecordError(f"record of {len(value)} bytes is shorter than its fixed fields")
    lq = (value[1] << 8) | value[2]
    if 3 + lq + _FIXED.size + 4 > len(value):
        raise RecordError("record queue length exceeds the record")
    return lq


def _parts(value: bytes, lq: int) -> tuple[bytes, bytes, bytes, int]:
    """``(order key without the uuid, queue prefix, claim key or b"", content length)``."""
    end = 3 + lq
    lk, _offset, length = _CLAIM.unpack_from(value, end + _CLAIM_AT)
    cstart = end + _FIXED.size
    if cstart + lk + 4 > len(value):
        raise RecordError("record claim key length exceeds the record")
    return value[1 : end + _ORDER_LEN], value[1:end], value[cstart : cstart + lk], length


def peek(value: bytes) -> tuple[bytes, bytes, bytes, int]:
    """What a commit needs of a previous record, by slicing: ``(order key without the uuid,
    queue prefix, claim key or b"", content length)``. Verifies version and checksum."""
    return _parts(value, _check(value))


# --- journal entries (a commit's changes, applied to the tables later) --------------------------

#: Version byte of a journal entry: 2 stores the updates as columns; 1 (2026-11-25, before the
#: columns) stored each update's record, and is still read.
JOURNAL_VERSION = 2
_ENTRY_HEAD = struct.Struct(">BIII")  # version, updates, removals, new claims
_U32 = struct.Struct(">I")


def encode_journal_entry(updates: int, columns: bytes, rkeys: Sequence[bytes], new_ckeys: Sequence[bytes]) -> bytes:
    """One commit's changes as one value: the ``updates`` FlowFiles as ``encode_commit``'s
    ``columns``, the uuid keys of its removals and the keys of the claims it wrote, then a CRC-32."""
    parts = [_ENTRY_HEAD.pack(JOURNAL_VERSION, updates, len(rkeys), len(new_ckeys)), columns, *rkeys]
    for ckey in new_ckeys:
        parts += (_U16.pack(len(ckey)), ckey)
    body = b"".join(parts)
    return body + _CRC.pack(_crc32(body))


#: a provenance outbox entry's head: version, event count (u32 BE), earliest and latest event
#: time (i64 BE, ms); then the encoded event batch and a CRC-32 of everything before it
_OUTBOX_HEAD = struct.Struct(">BIqq")
OUTBOX_VERSION = 1


def _check_framed(value: bytes, head: int, newest: int, what: str) -> None:
    """A value that starts with its version byte and a ``head``-byte header and ends with a CRC-32
    of the rest: whole and unchanged, or a ``RecordError`` saying which (a newer version than
    ``newest`` whose checksum fails is reported as that version, whatever its layout)."""
    if len(value) < head + 4:
        raise RecordError(f"{what} of {len(value)} bytes is shorter than its header")
    if _crc32(value) != _CRC_RESIDUE:
        if value[0] > newest:
            raise RecordVersionError(value[0])
        raise RecordError(f"{what} checksum does not match its bytes")


def encode_outbox_entry(count: int, min_timestamp: int, max_timestamp: int, data: bytes) -> bytes:
    """A commit's provenance events (an encoded batch of ``count`` events) as the log keeps them
    until the provenance repository takes them (docs/formats/flowfile-repository.md, ``outbox``)."""
    head = _OUTBOX_HEAD.pack(OUTBOX_VERSION, count, min_timestamp, max_timestamp)
    return b"".join((head, data, _CRC.pack(_crc32(data, _crc32(head)))))


def decode_outbox_entry(value: bytes) -> tuple[int, int, int, bytes]:
    """``(count, min_timestamp, max_timestamp, batch)`` of an outbox entry, its checksum checked."""
    _check_framed(value, _OUTBOX_HEAD.size, OUTBOX_VERSION, "provenance outbox entry")
    version, count, min_timestamp, max_timestamp = _OUTBOX_HEAD.unpack_from(value)
    if version != OUTBOX_VERSION:
        raise RecordVersionError(version) if version > OUTBOX_VERSION else RecordError(
            f"provenance outbox entry version byte is {version}")
    return count, min_timestamp, max_timestamp, bytes(value[_OUTBOX_HEAD.size:-4])


def update_record(update: tuple) -> tuple[bytes, bytes]:
    """``(record, order-index key)`` of an update (``encode_commit``'s or ``decode_journal_entry``'s
    shape): made when the update is written to the tables, so a FlowFile that a later commit
    changes or removes first never has its record made."""
    ukey, source, where, prefix, ckey, _size = update
    if isinstance(source, FlowFile):
        return encode_flowfile(source, prefix, ckey, ukey)
    return source.record(where, prefix, ckey, ukey)


class _Columns:
    """The updates of one decoded journal entry: its columns, and its attributes parsed only when
    a first record is wanted (most entries' FlowFiles have moved on by the time they are applied)."""

    __slots__ = ("columns", "count", "attributes_json", "attributes")

    def __init__(self, columns: array, count: int, attributes_json: bytes) -> None:
        self.columns, self.count, self.attributes_json = columns, count, attributes_json
        self.attributes: list[dict[str, str]] | None = None

    def record(self, i: int, prefix: bytes, ckey: bytes, ukey: bytes) -> tuple[bytes, bytes]:
        if self.attributes is None:
            try:
                attributes = _loads(self.attributes_json)
            except orjson.JSONDecodeError as e:
                raise RecordError(f"journal entry attributes are not valid JSON ({e})") from None
            if type(attributes) is not list or len(attributes) != self.count or any(
                    type(a) is not dict for a in attributes):
                raise RecordError("journal entry attributes are not one JSON object a FlowFile")
            self.attributes = attributes
        n, c = self.count, self.columns
        id_, entry, lineage, penalized, qdate, qindex, offset, length = (c[k * n + i] for k in range(8))
        fixed = _FIXED.pack(qdate + _SIGN, qindex + _SIGN, id_ + _SIGN, entry, lineage, penalized, len(ckey),
                            offset, length)
        body = b"".join((_VERSION_BYTE, prefix, fixed, ckey, _dumps(self.attributes[i])))
        return body + _CRC.pack(_crc32(body)), prefix + fixed[:_ORDER_LEN] + ukey


class _Stored:
    """One update of a version-1 journal entry, which holds its record."""

    __slots__ = ("value", "okey")

    def __init__(self, value: bytes, okey: bytes) -> None:
        self.value, self.okey = value, okey

    def record(self, _where: None, prefix: bytes, ckey: bytes, ukey: bytes) -> tuple[bytes, bytes]:
        return self.value, self.okey


def decode_journal_entry(value: bytes) -> tuple[list[tuple], list[bytes], list[bytes]]:
    """``(updates, removal keys, new claim keys)`` of a journal entry, each update shaped as
    ``encode_commit`` makes it with something that makes its record (``update_record``) in place
    of its FlowFile, and in place of its queue id what that needs besides (the update's row in
    the entry's columns, or None). The entry's checksum covers everything in it."""
    n = len(value)
    _check_framed(value, _ENTRY_HEAD.size, JOURNAL_VERSION, "journal entry")
    version, nu, nr, nc = _ENTRY_HEAD.unpack_from(value)
    if version not in (1, JOURNAL_VERSION):
        raise RecordVersionError(version) if version > JOURNAL_VERSION else RecordError(
            f"journal entry version byte is {version}")
    end = n - 4
    try:
        if version == 1:
            updates, pos = _decode_records(value, nu, end)
        else:
            updates, pos = _decode_columns(value, nu, end)
        rkeys = _SIXTEEN.findall(value[pos : pos + 16 * nr])   # as many as the entry holds, whatever nr says
        pos += 16 * nr
        ckeys = []
        for _ in range(nc):
            (length,) = _U16.unpack_from(value, pos)
            ckeys.append(value[pos + 2 : pos + 2 + length])
            pos += 2 + length
    except struct.error:
        raise RecordError("journal entry is truncated") from None
    if pos != end:
        raise RecordError("journal entry length does not match its counts")
    return updates, rkeys, ckeys


def _decode_records(value: bytes, count: int, end: int) -> tuple[list[tuple], int]:
    """The updates of a version-1 entry (a uuid key, a length and a record each) and where they end."""
    pos = _ENTRY_HEAD.size
    updates = []
    unpack_u32 = _U32.unpack_from
    for _ in range(count):
        ukey = value[pos : pos + 16]
        (length,) = unpack_u32(value, pos + 16)
        pos += 20
        record = value[pos : pos + length]
        pos += length
        if pos > end:
            raise RecordError("journal entry is truncated")
        order, prefix, ckey, size = _parts(record, _queue_length(record))
        updates.append((ukey, _Stored(record, order + ukey), None, prefix, ckey, size))
    return updates, pos


def _decode_columns(value: bytes, count: int, end: int) -> tuple[list[tuple], int]:
    """The updates of a version-2 entry (tables, uuid keys, columns, attributes) and where they end."""
    pos = _ENTRY_HEAD.size
    nq, nk = _TABLES.unpack_from(value, pos)
    pos += _TABLES.size
    tables: list[list[bytes]] = [[], [b""]]
    for table, size, skip in ((tables[0], nq, 0), (tables[1], nk, 2)):
        for _ in range(size):
            (length,) = _U16.unpack_from(value, pos)
            table.append(value[pos + skip : pos + 2 + length])
            pos += 2 + length
    prefixes, ckeys = tables
    joined = value[pos : pos + 16 * count]
    pos += 16 * count
    columns = array("q")
    width = 8 * _COLUMNS * count
    if pos + width > end:
        raise RecordError("journal entry is truncated")
    columns.frombytes(value[pos : pos + width])
    pos += width
    if not _NATIVE_LE:
        columns.byteswap()
    (length,) = _U32.unpack_from(value, pos)
    pos += 4
    if pos + length > end:
        raise RecordError("journal entry is truncated")
    decoded = _Columns(columns, count, value[pos : pos + length])
    pos += length
    sizes, queue_numbers, claim_numbers = (columns[k * count : (k + 1) * count] for k in (7, 8, 9))
    if count and not (0 <= min(queue_numbers) and max(queue_numbers) < nq
                      and 0 <= min(claim_numbers) and max(claim_numbers) <= nk):
        raise RecordError("journal entry numbers a queue or claim it does not hold")
    # built by C-level iterators, no Python step an update: most are never looked at again
    ukeys = _SIXTEEN.findall(joined)
    updates = list(zip(ukeys, repeat(decoded), range(count), map(prefixes.__getitem__, queue_numbers),
                       map(ckeys.__getitem__, claim_numbers), sizes))
    return updates, pos


def key_position(key: bytes) -> tuple[int, int, int]:
    """``(queue_date, queue_index, id)`` of an order-index key: its FIFO position."""
    qdate, qindex, id_ = _ORDER.unpack_from(key, len(key) - INDEX_TAIL)
    return qdate - _SIGN, qindex - _SIGN, id_ - _SIGN


def order_id(order: bytes) -> int:
    """The FlowFile id in an order key (without uuid) as ``peek`` returns it."""
    return _U64.unpack_from(order, len(order) - 8)[0] - _SIGN


def with_queue(value: bytes, prefix: bytes) -> tuple[bytes, bytes]:
    """``(record, order key without the uuid)`` of a record moved to the queue of ``prefix``,
    everything else (FIFO position included) unchanged."""
    lq = _check(value)
    rest = value[3 + lq : -4]
    body = b"".join((_VERSION_BYTE, prefix, rest))
    return body + _CRC.pack(_crc32(body)), prefix + rest[:_ORDER_LEN]


def decode_record(
    ukey: bytes, value: bytes, claims: dict[bytes, ResourceClaim] | None = None
) -> tuple[str, FlowFile]:
    """``(queue, FlowFile)`` of a record; ``claims`` interns equal resource claims."""
    lq = _check(value)
    end = 3 + lq
    try:
        queue = value[3:end].decode()
        qdate, qindex, id_, entry, lineage, penalized, lk, offset, length = _FIXED.unpack_from(value, end)
        cstart = end + _FIXED.size
        astart = cstart + lk
        if astart + 4 > len(value):
            raise RecordError("record claim key length exceeds the record")
        if lk:
            ckey = value[cstart:astart]
            resource = claims.get(ckey) if claims is not None else None
            if resource is None:
                resource = claim_from_key(ckey)
                if claims is not None:
                    claims[ckey] = resource
            content = ContentClaim(resource, offset, length)
        else:
            content = None
        attributes = _loads(memoryview(value)[astart:-4])
    except UnicodeDecodeError:
        raise RecordError("record queue id is not UTF-8") from None
    except orjson.JSONDecodeError as e:
        raise RecordError(f"record attributes are not valid JSON ({e})") from None
    if type(attributes) is not dict:
        raise RecordError("record attributes are not a JSON object")
    ff = FlowFile(
        id_ - _SIGN, key_uuid(ukey), attributes, content, entry, lineage, penalized,
        qdate - _SIGN, qindex - _SIGN,
    )  # fmt: skip
    return queue, ff


# --- values of the small sub-databases --------------------------------------------------------


def destructible_key(seq: int, ckey: bytes) -> bytes:
    """Key of a pending release: u64 BE commit sequence that made the count 0, then the claim key."""
    return _U64.pack(seq) + ckey


def destructible_fields(key: bytes) -> tuple[int, bytes]:
    if len(key) < _U64.size:
        raise RecordError("destructible key is too short")
    return _U64.unpack_from(key)[0], key[_U64.size :]


def pack_claim_value(count: int, pending_seq: int) -> bytes:
    return _CLAIM_VALUE.pack(count, pending_seq)


def unpack_claim_value(value: bytes) -> tuple[int, int]:
    if len(value) != _CLAIM_VALUE.size:
        raise RecordError(f"claim value of {len(value)} bytes, expected {_CLAIM_VALUE.size}")
    return _CLAIM_VALUE.unpack(value)


def pack_queue_value(count: int, size: int) -> bytes:
    return _QUEUE_VALUE.pack(count, size)


def unpack_queue_value(value: bytes) -> tuple[int, int]:
    if len(value) != _QUEUE_VALUE.size:
        raise RecordError(f"queue value of {len(value)} bytes, expected {_QUEUE_VALUE.size}")
    return _QUEUE_VALUE.unpack(value)


def pack_u64(n: int) -> bytes:
    return _U64.pack(n)


def unpack_u64(value: bytes) -> int:
    if len(value) != _U64.size:
        raise RecordError(f"counter of {len(value)} bytes, expected {_U64.size}")
    return _U64.unpack(value)[0]


def encode_swap_entry(queue: str, count: int, size: int, seq: int, registered: int) -> bytes:
    """Swap registry value: version byte, then an orjson object."""
    payload = _dumps({"queue": queue, "count": count, "size": size, "seq": seq, "registered": registered})
    return _VERSION_BYTE + payload


def decode_swap_entry(value: bytes) -> dict:
    if not value:
        raise RecordError("empty swap registry entry")
    if value[0] != RECORD_VERSION:
        if value[0] > RECORD_VERSION:
            raise RecordVersionError(value[0])
        raise RecordError(f"swap registry entry version byte is {value[0]}")
    try:
        entry = _loads(memoryview(value)[1:])
    except orjson.JSONDecodeError as e:
        raise RecordError(f"swap registry entry is not valid JSON ({e})") from None
    if type(entry) is not dict or not {"queue", "count", "size", "seq"} <= entry.keys():
        raise RecordError("swap registry entry lacks fields")
    return entry


# --- processor state -----------------------------------------------------------------------------

_STATE_HEAD = struct.Struct(">BQ")  # record version, state version
#: one processor's state may not exceed this (NiFi's ZooKeeper provider stops at 1 MB): state is
#: for bookmarks (offsets, timestamps, names), not for data
MAX_STATE_BYTES = 4 * 1024**2


def encode_state(version: int, values: Mapping[str, str]) -> bytes:
    """A ``state`` value: version byte, the state's version (u64 BE), an orjson object of strings."""
    if any(type(k) is not str or type(v) is not str for k, v in values.items()):
        bad = next(f"{k!r}: {v!r}" for k, v in values.items() if type(k) is not str or type(v) is not str)
        raise ValueError(f"processor state holds strings only, not {bad}")
    value = _STATE_HEAD.pack(RECORD_VERSION, version) + orjson.dumps(dict(values))
    if len(value) > MAX_STATE_BYTES:
        raise ValueError(f"processor state of {len(value):,} bytes is over the {MAX_STATE_BYTES:,} allowed; "
                         f"keep bookmarks there, not data")
    return value


def state_version(value: bytes) -> int:
    """The state's version from a ``state`` value's header (the map is not decoded)."""
    if len(value) < _STATE_HEAD.size:
        raise RecordError(f"state value of {len(value)} bytes is too short")
    record_version, version = _STATE_HEAD.unpack_from(value)
    if record_version != RECORD_VERSION:
        if record_version > RECORD_VERSION:
            raise RecordVersionError(record_version)
        raise RecordError(f"state value version byte is {record_version}")
    return version


def decode_state(value: bytes) -> tuple[int, dict[str, str]]:
    """``(version, values)`` of a ``state`` value."""
    version = state_version(value)
    try:
        values = orjson.loads(memoryview(value)[_STATE_HEAD.size:])
    except orjson.JSONDecodeError as e:
        raise RecordError(f"state value is not valid JSON ({e})") from None
    if type(values) is not dict or any(type(v) is not str for v in values.values()):
        raise RecordError("state value is not an object of strings")
    return version, values
