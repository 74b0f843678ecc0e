"""The value types that the framework and the repositories share.

This module imports nothing from ``flowactors`` or the repositories, so both sides can depend on it.
Every type is an immutable ``NamedTuple``: cheap to build, hashable, and pickled by Ray as a plain
tuple (docs/performance.md compares it with a dict). A change to a FlowFile makes a new version
(``with_attributes``, ``with_claim``, ``queued``); the old version stays valid, which is what
provenance needs.
"""

from __future__ import annotations

import os
import time
from itertools import repeat
from operator import itemgetter
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

_new_tuple = tuple.__new__
_claim_of = itemgetter(3)


class ResourceClaim(NamedTuple):
    """One file in the content repository: ``<container>/<section>/<id>``, shared by many contents."""

    container: str
    section: str
    id: str


class ContentClaim(NamedTuple):
    """Where one FlowFile's content lives: a byte range of a resource claim."""

    resource: ResourceClaim
    offset: int
    length: int

    def slice(self, offset: int, length: int) -> "ContentClaim":
        """A sub-range of this content, sharing the same resource claim (no bytes copied)."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise ValueError(f"range {offset}+{length} is outside content of {self.length} bytes")
        return ContentClaim(self.resource, self.offset + offset, length)


class FlowFile(NamedTuple):
    """A FlowFile version: attributes plus a reference to content, never the content itself.

    ``id`` is a one-up number unique in the repository; ``uuid`` is the identity users see (and the
    ``uuid`` attribute). ``queue_date``/``queue_index`` record when the FlowFile last entered a queue,
    which is the FIFO order that recovery restores. ``penalized_until`` is a wall-clock time in ms.
    ``attributes`` must be treated as read-only: changes go through the session, which copies it.
    """

    id: int
    uuid: str
    attributes: Mapping[str, str]
    claim: ContentClaim | None
    entry_date: int
    lineage_start_date: int
    penalized_until: int = 0
    queue_date: int = 0
    queue_index: int = 0

    @property
    def size(self) -> int:
        return self.claim.length if self.claim is not None else 0

    # New versions, built straight from the fields: ``_replace`` costs about three times as much,
    # and the session makes a version a FlowFile at every change (issue 15's profile).
    def with_attributes(self, attributes: Mapping[str, str]) -> "FlowFile":
        return _new_tuple(FlowFile, (self[0], self[1], attributes, *self[3:]))

    def with_claim(self, claim: ContentClaim | None) -> "FlowFile":
        return _new_tuple(FlowFile, (self[0], self[1], self[2], claim, *self[4:]))

    def queued(self, queue_date: int, queue_index: int) -> "FlowFile":
        """This version as it enters a queue (the FIFO order recovery restores)."""
        return _new_tuple(FlowFile, (*self[:7], queue_date, queue_index))

    def is_penalized(self, now_ms: int | None = None) -> bool:
        return self.penalized_until > (now_ms if now_ms is not None else now_millis())


def total_size(flowfiles: Iterable[FlowFile]) -> int:
    """The content bytes of ``flowfiles``: ``sum(f.size for f in flowfiles)`` without a Python
    call a FlowFile (queues count their bytes at every add, take and acknowledgement)."""
    return sum([c[2] for c in map(_claim_of, flowfiles) if c is not None])


class FlowFileBatch(list):
    """A list of FlowFile versions that crosses a process boundary as columns.

    In a process it is a plain list (nothing is converted for a local call). Pickled (an actor
    call to a queue in another executor, the answer of a poll) it travels as one tuple a field
    (ids, uuids, attribute maps, dates) and its claims as a table of distinct resource claims
    plus an index, offset and length each: only builtin values, which the pickler writes without
    calling back into Python. A list of ``FlowFile`` named tuples costs Python-level reductions
    a FlowFile instead (the FlowFile, its content claim); docs/performance.md has the measurement.
    It is rebuilt as a ``FlowFileBatch`` on the other side, equal to the list that was sent.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple:
        if not self:
            return (FlowFileBatch, ())
        ids, uuids, attributes, claims, entry, lineage, penalized, queue_dates, queue_indexes = zip(*self)
        resources: dict[ResourceClaim, int] = {}
        refs = [-1 if c is None else resources.setdefault(c[0], len(resources)) for c in claims]
        offsets = [0 if c is None else c[1] for c in claims]
        lengths = [0 if c is None else c[2] for c in claims]
        table = [tuple(r) for r in resources]
        return (_unpack_batch, (ids, uuids, attributes, table, refs, offsets, lengths, entry, lineage, penalized,
                                queue_dates, queue_indexes))


def _unpack_batch(ids, uuids, attributes, table, refs, offsets, lengths, entry, lineage, penalized, queue_dates,
                  queue_indexes) -> FlowFileBatch:
    resources = [_new_tuple(ResourceClaim, r) for r in table]
    claims = [None if r < 0 else _new_tuple(ContentClaim, (resources[r], o, n)) for r, o, n in zip(refs, offsets, lengths)]
    return FlowFileBatch(map(_new_tuple, repeat(FlowFile), zip(   # no Python frame a FlowFile
        ids, uuids, attributes, claims, entry, lineage, penalized, queue_dates, queue_indexes)))


class QueuedFlowFile(NamedTuple):
    """A FlowFile as the write-ahead log records it: the FlowFile and the queue that holds it.

    ``queue`` is the connection id, or ``swap:<path>`` while the FlowFile sits in a swap file.
    """

    flowfile: FlowFile
    queue: str


class StateMap(NamedTuple):
    """A processor's state as read (NiFi's StateMap, local scope): string keys and values and the
    version they were written at, -1 when nothing was ever stored. Versions only grow, a clear
    included, so a version read once identifies exactly what was read."""

    version: int = -1
    values: Mapping[str, str] = MappingProxyType({})

    @classmethod
    def of(cls, version: int, values: Mapping[str, str]) -> "StateMap":
        """A state holding a read-only copy of ``values`` (what every store hands out, so a
        processor cannot change stored state by changing what it read)."""
        return cls(version, MappingProxyType(dict(values)))

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def __reduce__(self):  # a read-only mapping does not pickle; its copy does
        return (StateMap.of, (self.version, dict(self.values)))


class StateChange(NamedTuple):
    """A session's change of its processor's state, written in the session's commit: ``values``
    replace the whole map (empty: cleared) at the stored version + 1. With ``expected`` set the
    commit is refused unless the stored version is still that one (a compare-and-set)."""

    component_id: str
    values: Mapping[str, str]
    expected: int | None = None

    def applied_to(self, current: StateMap) -> StateMap | None:
        """The state this change makes of ``current`` (its values at the next version), or None
        when ``expected`` is set and is not ``current``'s version: the change must be refused.
        Every store decides a change here."""
        if self.expected is not None and self.expected != current.version:
            return None
        return StateMap.of(current.version + 1, self.values)


def now_millis() -> int:
    return time.time_ns() // 1_000_000


def new_flowfile_uuid() -> str:
    """A time-ordered uuid (the RFC 9562 version 7 layout: 48-bit Unix milliseconds, then random).

    Keys that grow with time keep the write-ahead log's B-tree appending at its right edge instead
    of rewriting a random page per FlowFile (docs/performance.md has what it saves a commit).
    """
    return new_flowfile_uuids(1)[0]


_VARIANT = "89ab89ab89ab89ab"   # a hex digit's two low bits -> the digit with the RFC variant bits 10
_VERSION_7 = bytes((b & 0x0F) | 0x70 for b in range(256))   # a byte -> version 7 in its high nibble
_RFC_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))  # a byte -> the variant bits 10 on top
#: the hex digits of a uuid's five groups: where each starts in the text and how many it has
_GROUPS = ((0, 8), (9, 4), (14, 4), (19, 4), (24, 12))
#: from this many uuids on, ``new_flowfile_uuids`` lays the batch out a column at a time
_COLUMNWISE = 64


def new_flowfile_uuids(count: int) -> list[str]:
    """``count`` uuids as ``new_flowfile_uuid`` describes, all of this millisecond, 74 random bits
    each, from one read of the random source. A batch is laid out a byte column at a time
    (strided slices of one buffer: the version and variant bits by ``translate``, the dashes in
    place), then cut into strings, which costs less a uuid than formatting each (docs/performance.md);
    fewer than ``_COLUMNWISE`` are formatted one by one."""
    stamp = now_millis().to_bytes(6, "big")
    if count < _COLUMNWISE:
        hexed = stamp.hex()
        prefix = f"{hexed[:8]}-{hexed[8:]}-7"
        random = os.urandom(10 * count).hex()
        return [f"{prefix}{r[1:4]}-{_VARIANT[int(r[4], 16)]}{r[5:8]}-{r[8:20]}"
                for r in (random[i:i + 20] for i in range(0, 20 * count, 20))]
    raw = bytearray(os.urandom(10 * count))
    raw[0::10] = raw[0::10].translate(_VERSION_7)
    raw[2::10] = raw[2::10].translate(_RFC_VARIANT)
    octets = bytearray(16 * count)
    for k in range(6):
        octets[k::16] = stamp[k:k + 1] * count
    for k in range(10):
        octets[6 + k::16] = raw[k::10]
    digits = octets.hex().encode()
    text = bytearray(b"-" * (36 * count))
    used = 0
    for start, length in _GROUPS:
        for k in range(length):
            text[start + k::36] = digits[used + k::32]
        used += length
    joined = text.decode()
    return [joined[i:i + 36] for i in range(0, 36 * count, 36)]
