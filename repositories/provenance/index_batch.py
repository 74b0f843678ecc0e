"""The provenance index's entries as a merge makes them: the layout of the shards' keys and values,
the terms values are indexed under, and ``IndexBatch``, the entries of a run of events gathered for
one LMDB transaction (docs/formats/provenance-repository.md, "Index shards"). ``index.py`` writes
them into the shards and searches them.
"""

from __future__ import annotations

import hashlib
import struct
from itertools import compress, groupby, repeat
from typing import Callable, Iterator, Sequence

from repositories.provenance.event import (FIELD_INDEX, ProvenanceEvent, ProvenanceEventType, decode_columns,
                                           decode_index_columns, event_fields)

#: an ``events`` key, and a ``uuid`` or ``attribute`` value (format 1: every term table's): u64 BE event id
ID_KEY = struct.Struct(">Q")
#: an ``events`` value: file id, block offset, timestamp, size
POINTER = struct.Struct("<QQqq")
#: a ``zones`` value: last event id, min/max timestamp, min/max size
ZONE = struct.Struct("<Qqqqq")
#: a range table's value: a term's run of event ids, last then first (so sorted by last)
ID_RANGE = struct.Struct(">QQ")
#: Events per ``zones`` entry: a range search skips a zone whose time or size span misses.
ZONE_EVENTS = 1024
MAX_I64 = (1 << 63) - 1
_pack_id = ID_KEY.pack
_unpack_id = ID_KEY.unpack
_pack_ptr = POINTER.pack
_pack_range = ID_RANGE.pack

TERM_TABLES = (b"uuid", b"type", b"component_id", b"component_name", b"relationship", b"attribute")
#: term tables whose values are ranges of ids (format 2); the others hold one id an event
RANGE_TABLES = (b"type", b"component_id", b"component_name", b"relationship")
_MAX_TERM = 400        # LMDB keys are at most 511 bytes
_TERM_PREFIX = 360


def term_key(value: str) -> bytes:
    """The key a value is indexed under: its UTF-8, or a prefix plus a hash when too long."""
    data = value.encode()
    if len(data) <= _MAX_TERM:
        return data
    return data[:_TERM_PREFIX] + b"\x00#" + hashlib.blake2b(data, digest_size=16).digest()


def attribute_key(name: str, value: str) -> bytes:
    return term_key(f"{name}\x00{value}")


def term_keys(values: list, prefix: bytes = b"") -> list[bytes]:
    """``term_key`` of each string value (after ``prefix``: ``attribute_key``'s is the name and a
    NUL), built without a Python call a value: the rollover makes one for every event."""
    try:
        keys = list(map(str.encode, values))
    except TypeError:   # not all strings: one at a time, as term_key would do it
        keys = [str(value).encode() for value in values]
    if prefix:
        keys = list(map(prefix.__add__, keys))
    if keys and max(map(len, keys)) > _MAX_TERM:
        keys = [key if len(key) <= _MAX_TERM else term_key(key.decode()) for key in keys]
    return keys


_F = FIELD_INDEX
_F_ID, _F_TYPE, _F_TS, _F_UUID = _F["event_id"], _F["event_type"], _F["timestamp"], _F["flowfile_uuid"]
_F_PARENTS, _F_CHILDREN, _F_CID, _F_CNAME = _F["parent_uuids"], _F["child_uuids"], _F["component_id"], _F["component_name"]
_F_REL, _F_PREV, _F_UPD, _F_SIZE = _F["relationship"], _F["previous_attributes"], _F["updated_attributes"], _F["updated_size"]
_TYPE_KEYS = {t.value: t.value.encode() for t in ProvenanceEventType}


class _TermRanges:
    """One term table's entries of a batch: ``[term, first id, last id]`` runs, a run extended
    while the next event with that term follows the last one (ids come in increasing order)."""

    __slots__ = ("runs", "_last")

    def __init__(self) -> None:
        self.runs: list[list] = []
        self._last: dict[bytes, list] = {}

    def add(self, term: bytes, first: int, last: int) -> None:
        run = self._last.get(term)
        if run is not None and run[2] == first - 1:
            run[2] = last
        else:
            run = [term, first, last]
            self.runs.append(run)
            self._last[term] = run

    def add_column(self, values: list, ids: list[int], key: Callable[[str], bytes]) -> None:
        """The runs of equal values of one entry's column; None and "" are not indexed."""
        first = values[0]
        if values.count(first) == len(values):   # the usual case: one term for the whole entry
            if first is not None and first != "":
                self.add(key(first), ids[0], ids[-1])
            return
        terms: dict[str, bytes] = {}
        position = 0
        for value, group in groupby(values):
            length = len(list(group))
            if value is not None and value != "":
                term = terms.get(value)
                if term is None:
                    term = terms[value] = key(value)
                self.add(term, ids[position], ids[position + length - 1])
            position += length

    def packed(self) -> list[tuple[bytes, bytes]]:
        return [(term, _pack_range(last, first)) for term, first, last in self.runs]


class IndexBatch:
    """The entries of a run of events of one event file, gathered for one LMDB transaction.

    Built straight from decoded columns (no event objects), an entry (a batch of events) at a
    time, because this loop is the cost of a rollover; also used to remove the same entries again
    when a merge is redone. A term shared by consecutive events (a commit's component, type,
    relationship) is one range entry, not an entry an event.
    """

    __slots__ = ("file_id", "attributes", "primary", "uuid", "attribute", "ranges", "timestamps", "sizes",
                 "min_ts", "max_ts")

    def __init__(self, file_id: int, attributes: Sequence[str]):
        self.file_id = file_id
        self.attributes = tuple(attributes)
        self.primary: list[tuple[bytes, bytes]] = []
        self.uuid: list[tuple[bytes, bytes]] = []        # (term, u64 BE event id)
        self.attribute: list[tuple[bytes, bytes]] = []
        self.ranges = {table: _TermRanges() for table in RANGE_TABLES}
        self.timestamps: list[int] = []
        self.sizes: list[int] = []
        self.min_ts = MAX_I64
        self.max_ts = -MAX_I64

    def __len__(self) -> int:
        return len(self.primary)

    @property
    def first_id(self) -> int:
        return _unpack_id(self.primary[0][0])[0]

    @property
    def last_id(self) -> int:
        return _unpack_id(self.primary[-1][0])[0]

    def zones(self) -> list[tuple[bytes, bytes]]:
        """``zones`` entries: the id, time and size span of every run of ZONE_EVENTS events."""
        out = []
        primary, timestamps, sizes = self.primary, self.timestamps, self.sizes
        for start in range(0, len(primary), ZONE_EVENTS):
            end = min(start + ZONE_EVENTS, len(primary))
            times, zone_sizes = timestamps[start:end], sizes[start:end]
            out.append((primary[start][0], ZONE.pack(_unpack_id(primary[end - 1][0])[0], min(times),
                                                      max(times), min(zone_sizes), max(zone_sizes))))
        return out

    def tables(self) -> dict[bytes, list[tuple[bytes, bytes]]]:
        """Each term table's entries as LMDB writes them (format 2 values)."""
        out = {table: ranges.packed() for table, ranges in self.ranges.items()}
        out[b"uuid"], out[b"attribute"] = self.uuid, self.attribute
        return out

    def postings(self) -> Iterator[tuple[bytes, bytes, int]]:
        """Every ``(table, term, event id)`` the batch indexes, ranges expanded: what an index
        with an entry an event would hold (the SQLite comparison in ``bench.provenance_workload``)."""
        for table, items in ((b"uuid", self.uuid), (b"attribute", self.attribute)):
            for term, packed in items:
                yield table, term, _unpack_id(packed)[0]
        for table, ranges in self.ranges.items():
            for term, first, last in ranges.runs:
                for event_id in range(first, last + 1):
                    yield table, term, event_id

    def add_event(self, event: ProvenanceEvent, block_offset: int) -> None:
        self.add_columns([[value] for value in event_fields(event)], block_offset)

    def decode(self, data: bytes | memoryview, first_id: int, count: int, where: str) -> tuple[list, list | None]:
        """An encoded entry's columns and filenames as ``add_columns`` takes them, parsing only a
        batch's index part when the filename is the only attribute indexed (the default)."""
        if self.attributes == ("filename",):
            return decode_index_columns(data, first_id, count, where)
        return decode_columns(data, first_id, count, where), None

    def add_columns(self, columns: list[list], block_offset: int, filenames: list | None = None) -> None:
        """Add the events of one entry given as columns (``event.decode_columns``, or ``decode``
        with each event's ``filenames``); an entry's ids are consecutive (the journal's layout),
        so a run of equal values is a range of ids."""
        ids = columns[_F_ID]
        if not ids:
            return
        if ids[-1] - ids[0] != len(ids) - 1:
            raise ValueError(f"an entry's event ids must be consecutive, got {ids[0]}..{ids[-1]} for {len(ids)}")
        file_id = self.file_id
        packed = list(map(_pack_id, ids))
        timestamps, sizes = columns[_F_TS], columns[_F_SIZE]   # whole numbers: the decoder checked them
        self.primary.extend(zip(packed, map(_pack_ptr, repeat(file_id), repeat(block_offset), timestamps, sizes)))
        uuids = columns[_F_UUID]
        self.uuid.extend(zip(term_keys(uuids), packed))
        parents, children = columns[_F_PARENTS], columns[_F_CHILDREN]
        if any(parents) or any(children):
            for uuid, others, p in zip(uuids, map(list.__add__, parents, children), packed):
                for other in dict.fromkeys(others):
                    if other != uuid:
                        self.uuid.append((term_key(other), p))
        ranges = self.ranges
        ranges[b"type"].add_column(columns[_F_TYPE], ids, _type_key)
        ranges[b"component_id"].add_column(columns[_F_CID], ids, term_key)
        ranges[b"component_name"].add_column(columns[_F_CNAME], ids, term_key)
        ranges[b"relationship"].add_column(columns[_F_REL], ids, term_key)
        if filenames is not None and self.attributes == ("filename",):
            named = packed
            if None in filenames:   # events whose FlowFile has no filename: not indexed
                present = [name is not None for name in filenames]
                filenames, named = list(compress(filenames, present)), list(compress(packed, present))
            self.attribute.extend(zip(term_keys(filenames, b"filename\x00"), named))
        elif self.attributes:
            for updated, previous, p in zip(columns[_F_UPD], columns[_F_PREV], packed):
                for name in self.attributes:
                    value = updated.get(name)
                    if value is None:
                        value = previous.get(name)
                    if value is not None:
                        self.attribute.append((attribute_key(name, str(value)), p))
        self.timestamps.extend(timestamps)
        self.sizes.extend(sizes)
        self.min_ts = min(self.min_ts, min(timestamps))
        self.max_ts = max(self.max_ts, max(timestamps))


def _type_key(event_type: str) -> bytes:
    return _TYPE_KEYS[event_type]


