"""Provenance events and their byte encoding.

A provenance event is a snapshot of one FlowFile at one step of a flow: its attributes before and
after, its content claim before and after, and where it came from and went (parents, children,
relationship, queue). Events are immutable once registered; the repository gives each a one-up
``event_id`` at registration.

Four encodings (docs/formats/provenance-repository.md, "Event encoding"), each a version byte then
orjson, claims flattened to ``[container, section, id, offset, length]``:

- version 1, one event: an array of the fields in ``_FIELDS`` order (``encode_fields``);
- version 4, a batch of events, as the commit path writes them (``encode_batch``): one column a
  field, a value the whole batch shares stored once, attribute maps stored once however many
  events share them, each resource claim once, a ``previous_*`` column that equals its
  ``updated_*`` one (and filenames that are the uuids) stored as a reference to it, and a column
  that the batch's runs give a value each as a value and a count a stretch. A batch carries no ids: its entry in a journal
  or block gives the first. The columns the index reads (and each event's ``filename``) come
  first, in a part of their own, so indexing parses only them (``decode_index_columns``), not
  the attribute maps and claims that make up most of a batch. Version 3 (the same without claim
  and same-as columns) and version 2 (without the split) are still read.

Nothing is pickled: decoding a hostile or corrupt record raises :class:`ProvenanceFormatError`,
never runs code.
"""

from __future__ import annotations

import enum
import struct
from itertools import chain, repeat
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, final

import orjson

from repositories.model import ContentClaim, ResourceClaim, now_millis
from repositories.provenance.field_kinds import (FILENAME_CHECK, ColumnCheck, check_claim_table, column_checks,
                                                 string_maps)

#: The version byte of one encoded event.
EVENT_ENCODING_VERSION = 1
#: The version byte of an encoded batch of events (what the commit path writes).
BATCH_ENCODING_VERSION = 4
#: A batch without claim and same-as columns (release 3): read, never written.
SPLIT_BATCH_ENCODING_VERSION = 3
#: A batch of events without the index part (release 2): read, never written.
LEGACY_BATCH_ENCODING_VERSION = 2


class ProvenanceFormatError(ValueError):
    """A provenance file or record is corrupt or of an unknown version; the message names the file."""


class ProvenanceEventType(str, enum.Enum):
    """What happened to a FlowFile (NiFi's vocabulary, same names)."""

    CREATE = "CREATE"                      # made by the flow from no external data
    RECEIVE = "RECEIVE"                    # received from an external system
    FETCH = "FETCH"                        # content replaced by data fetched from an external system
    SEND = "SEND"                          # sent to an external system
    DROP = "DROP"                          # left the flow (auto-terminated, removed)
    EXPIRE = "EXPIRE"                      # aged out of a queue
    CLONE = "CLONE"                        # an exact copy was made (children = the clones)
    FORK = "FORK"                          # split into children (parent = the original)
    JOIN = "JOIN"                          # parents merged into one child
    ROUTE = "ROUTE"                        # transferred to a relationship
    ATTRIBUTES_MODIFIED = "ATTRIBUTES_MODIFIED"
    CONTENT_MODIFIED = "CONTENT_MODIFIED"
    ADDINFO = "ADDINFO"                    # extra information (e.g. an alternate identifier)
    ASSOCIATE = "ASSOCIATE"                # associated with an identifier of another system
    REPLAY = "REPLAY"                      # re-created from a past event (parent = the original)
    DOWNLOAD = "DOWNLOAD"                  # content downloaded by a user

    def __str__(self) -> str:  # "FORK", not "ProvenanceEventType.FORK"
        return self.value


#: Event types whose parent and child uuids link FlowFiles to each other in a lineage.
LINKING_TYPES = frozenset(
    {ProvenanceEventType.FORK, ProvenanceEventType.JOIN, ProvenanceEventType.CLONE,
     ProvenanceEventType.REPLAY}
)


@dataclass(slots=True, kw_only=True)
class ProvenanceEvent:
    """One provenance event. Times are wall-clock milliseconds; sizes are bytes.

    ``source_queue_id`` is the connection the FlowFile was taken from (replay puts it back there).
    ``event_id`` is -1 until :meth:`ProvenanceRepository.register` assigns it.
    """

    event_type: ProvenanceEventType
    flowfile_uuid: str
    event_id: int = -1
    timestamp: int = field(default_factory=now_millis)
    duration: int = 0
    parent_uuids: list[str] = field(default_factory=list)
    child_uuids: list[str] = field(default_factory=list)
    component_id: str = ""
    component_name: str = ""
    component_type: str = ""
    relationship: str | None = None
    previous_attributes: Mapping[str, str] = field(default_factory=dict)
    updated_attributes: Mapping[str, str] = field(default_factory=dict)
    previous_claim: ContentClaim | None = None
    updated_claim: ContentClaim | None = None
    previous_size: int = 0
    updated_size: int = 0
    details: str | None = None
    transit_uri: str | None = None
    source_system_flowfile_id: str | None = None
    alternate_identifier: str | None = None
    lineage_start_date: int = 0
    source_queue_id: str | None = None

    def __post_init__(self) -> None:
        if type(self.event_type) is not ProvenanceEventType:
            self.event_type = ProvenanceEventType(self.event_type)

    def attribute(self, name: str) -> str | None:
        """The attribute's value at this event: the updated value, else the previous one."""
        value = self.updated_attributes.get(name)
        return value if value is not None else self.previous_attributes.get(name)

    @property
    def filename(self) -> str | None:
        return self.attribute("filename")


#: The order of the fields in the encoded array (index 0 follows the version byte).
_FIELDS = (
    "event_id", "event_type", "timestamp", "duration", "flowfile_uuid", "parent_uuids",
    "child_uuids", "component_id", "component_name", "component_type", "relationship",
    "previous_attributes", "updated_attributes", "previous_claim", "updated_claim",
    "previous_size", "updated_size", "details", "transit_uri", "source_system_flowfile_id",
    "alternate_identifier", "lineage_start_date", "source_queue_id",
)

#: Position of each field in the decoded array.
FIELD_INDEX = {name: i for i, name in enumerate(_FIELDS)}

_VERSION_PREFIX = bytes([EVENT_ENCODING_VERSION])
_TYPES = {t.value: t for t in ProvenanceEventType}
_dumps = orjson.dumps
_loads = orjson.loads


def claim_field(claim: ContentClaim | None) -> list | None:
    if claim is None:
        return None
    resource = claim.resource
    return [resource.container, resource.section, resource.id, claim.offset, claim.length]


def _claim_in(value: Any) -> ContentClaim | None:
    if value is None:
        return None
    container, section, resource_id, offset, length = value
    return ContentClaim(ResourceClaim(container, section, resource_id), offset, length)


def _json_default(value: Any) -> Any:
    """orjson's fallback: attribute maps that are not dicts (a read-only view) go as dicts, a
    ``ContentClaim`` in a field array as ``claim_field``'s list."""
    if isinstance(value, Mapping):
        return dict(value)
    if type(value) is ContentClaim:
        return claim_field(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a provenance event")


def event_fields(e: ProvenanceEvent) -> list:
    """The event as its field array (``FIELD_INDEX`` gives positions), as it is encoded."""
    return [
        e.event_id, e.event_type, e.timestamp, e.duration, e.flowfile_uuid,
        e.parent_uuids, e.child_uuids, e.component_id, e.component_name, e.component_type,
        e.relationship, e.previous_attributes, e.updated_attributes,
        claim_field(e.previous_claim), claim_field(e.updated_claim), e.previous_size,
        e.updated_size, e.details, e.transit_uri, e.source_system_flowfile_id,
        e.alternate_identifier, e.lineage_start_date, e.source_queue_id,
    ]


def new_event_fields(event_type: ProvenanceEventType, timestamp: int, flowfile_uuid: str, component_id: str,
                     component_name: str, component_type: str, lineage_start_date: int) -> list:
    """A new unregistered event as a field array, every other field at its default: how code
    that makes many events (the session) builds them, with no event object each. Set fields by
    ``FIELD_INDEX``; a claim goes in as the ``ContentClaim`` (or ``claim_field(claim)``)."""
    return [-1, event_type, timestamp, 0, flowfile_uuid, [], [], component_id, component_name, component_type,
            None, {}, {}, None, None, 0, 0, None, None, None, None, lineage_start_date, None]


def encode_fields(fields: list) -> bytes:
    """An event's field array as bytes: version byte + orjson array (see the module docstring)."""
    return _VERSION_PREFIX + _dumps(fields, default=_json_default)


def encode_event(e: ProvenanceEvent) -> bytes:
    """The event as bytes: version byte + orjson array (see the module docstring)."""
    return encode_fields(event_fields(e))


_F_PREVIOUS_ATTRIBUTES, _F_UPDATED_ATTRIBUTES = FIELD_INDEX["previous_attributes"], FIELD_INDEX["updated_attributes"]
_F_TIMESTAMP = FIELD_INDEX["timestamp"]
_BATCH_PREFIX = bytes([BATCH_ENCODING_VERSION])
#: column kinds of an encoded batch (claims, same-as and runs: version 4)
_SHARED, _EACH, _MAPS, _CLAIMS, _SAME_AS, _RUNS = 0, 1, 2, 3, 4, 5
_F_UUID = FIELD_INDEX["flowfile_uuid"]
_MAP_POSITIONS = frozenset((_F_PREVIOUS_ATTRIBUTES, _F_UPDATED_ATTRIBUTES))
_CLAIM_POSITIONS = frozenset((FIELD_INDEX["previous_claim"], FIELD_INDEX["updated_claim"]))
#: (previous, updated) field positions: a previous column may be stored as its updated one
_SAME_PAIRS = tuple((FIELD_INDEX[f"previous_{name}"], FIELD_INDEX[f"updated_{name}"])
                    for name in ("attributes", "claim", "size"))
_SAME_OF = dict(_SAME_PAIRS)
_RESOURCE, _OFFSET, _LENGTH = itemgetter(0), itemgetter(1), itemgetter(2)
#: a missing claim in a claim column, as (resource, offset, length): ref -1, offset and length 0
_NO_CLAIM: tuple[None, int, int] = (None, 0, 0)
#: the fields a batch's index part holds (versions 3 and 4), in this order: what the index reads
INDEX_FIELDS = ("event_type", "timestamp", "flowfile_uuid", "parent_uuids", "child_uuids", "component_id",
                "component_name", "relationship", "updated_size")
_INDEX_POSITIONS = tuple(FIELD_INDEX[name] for name in INDEX_FIELDS)
#: the check of each field's values, by position (None: not checked), and of the index part's
_CHECKS = column_checks(_FIELDS, _TYPES)
_INDEX_CHECKS = tuple(_CHECKS[position] for position in _INDEX_POSITIONS)
_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A batch of unregistered events, encoded (``encode_batch``), with what the repository needs
    to register it without decoding it: how many events, and their time span."""

    data: bytes
    count: int
    min_timestamp: int
    max_timestamp: int


@final   # no subclasses: ``type(e) is EventRun`` tells a run from a field array
@dataclass(frozen=True, slots=True)
class EventRun:
    """Events of one kind about many FlowFiles, as columns: how a session records what a batch
    call did to a whole batch, with no field array an event. ``shared`` is a field array
    (``new_event_fields``) holding the values every event of the run has; ``each`` maps a field's
    position (``FIELD_INDEX``) to a list of ``count`` values, one an event, in event order."""

    count: int
    shared: list
    each: dict


def encode_batch(events: Sequence[list | EventRun]) -> EncodedBatch:
    """Unregistered events, field arrays (``new_event_fields``) or runs of them (``EventRun``),
    as one version-4 batch, in the order given.

    A column whose value every event shares is stored once; the attribute-map columns store each
    distinct map once (by identity: the session shares a FlowFile's map among its events) and an
    index an event; a claim column stores each resource claim once and an offset and a length an
    event; a ``previous_*`` column equal to its ``updated_*`` column (nothing changed) is stored as
    a reference to it, as is a filename column that is the uuid column; a column that runs give
    a value each (a ROUTE run and a DROP run) is a value and a count a stretch. Event ids are not
    stored: the batch's entry gives the first, the rest follow. The ``INDEX_FIELDS`` columns and
    each event's filename go in the index part, the rest after it. A run's claim columns may hold
    ``ContentClaim`` objects (no conversion an event). For runs no step is a Python call an event
    (field arrays are handled one by one): this runs once a commit in the executor for every
    event of a flow.
    """
    count = sum(e.count if type(e) is EventRun else 1 for e in events)
    if not count:
        raise ValueError("an event batch needs at least one event")
    full: list = [None]      # each field's column, a value an event; None where runs give it
    stretches: list = [None]  # for those: [value, count] an equal stretch of runs
    for position in range(1, len(_FIELDS)):
        runs = _run_values(events, position)
        stretches.append(runs)
        if runs is not None:
            full.append(None)
            continue
        column: list = []
        for e in events:
            if type(e) is EventRun:
                values = e.each.get(position)
                column.extend([e.shared[position]] * e.count if values is None else values)
            else:
                column.append(e[position])
        full.append(column)
    columns: list = [None]   # the ids: not stored
    maps = _Maps()
    for position in range(1, len(_FIELDS)):
        column = full[position]
        if column is None:
            runs = stretches[position]
            columns.append([_SHARED, runs[0][0]] if len(runs) == 1 else [_RUNS, runs])
        elif position in _SAME_OF and full[_SAME_OF[position]] == column:
            columns.append([_SAME_AS, _SAME_OF[position]])   # nothing changed: a reference, not a copy
        elif position in _MAP_POSITIONS:
            columns.append(maps.column(events, position, column, count))
        elif position in _CLAIM_POSITIONS:
            columns.append(_claims_column(column, count))
        elif column.count(column[0]) == count:
            columns.append([_SHARED, column[0]])
        else:
            columns.append([_EACH, column])
    times = full[_F_TIMESTAMP] or [value for value, _ in stretches[_F_TIMESTAMP]]
    low, high = min(times), max(times)
    filenames = _filenames(count, *(full[p] or _stretched(stretches[p])
                                    for p in (_F_UPDATED_ATTRIBUTES, _F_PREVIOUS_ATTRIBUTES)))
    if filenames[0] == _EACH and filenames[1] == full[_F_UUID]:   # NiFi names a new FlowFile by its uuid
        filenames = [_SAME_AS, _F_UUID]
    index = _dumps([count, [columns[p] for p in _INDEX_POSITIONS], filenames], default=_json_default)
    for position in _INDEX_POSITIONS:
        columns[position] = None
    rest = _dumps([columns, maps.maps], default=_json_default)
    return EncodedBatch(b"".join((_BATCH_PREFIX, _U32.pack(len(index)), index, rest)), count, low, high)


class _Maps:
    """The distinct attribute maps of a batch being encoded, and where each went. A run's list of
    maps is placed whole, once however many runs or columns carry that very list (a commit's ROUTE
    and DROP runs share their FlowFiles' list; every FlowFile's map holds its own uuid, so a list
    repeats no map): no lookup a map. A list that starts with a map already placed (a DROP run of
    part of a ROUTE run's FlowFiles) is placed a map at a time by identity, as is a field array's
    map or a run's shared one."""

    __slots__ = ("maps", "_lists", "_each")

    def __init__(self) -> None:
        self.maps: list = []
        self._lists: dict[int, int] = {}     # id of a list placed whole -> its first index
        self._each: dict[int, int] | None = None   # id of a map -> its index, made when first needed

    def column(self, events: Sequence[list | EventRun], position: int, column: list, count: int) -> list:
        """The ``[kind, values]`` of one attribute-map column: shared when every event has the same
        map (or only empty ones), else an index an event into ``maps``."""
        first = column[0]
        if not any(column) or (first is column[-1] and column.count(first) == count):
            return [_SHARED, first]
        indexes: list[int] = []
        for e in events:
            if type(e) is EventRun:
                values = e.each.get(position)
                if values is not None:
                    indexes.extend(self._place_list(values))
                    continue
                indexes.extend(repeat(self._place(e.shared[position]), e.count))
            else:
                indexes.append(self._place(e[position]))
        return [_MAPS, indexes]

    def _place_list(self, values: list) -> Sequence[int]:
        first = self._lists.get(id(values))
        if first is not None:
            return range(first, first + len(values))
        if values and self.maps and id(values[0]) in self._index():
            return [self._place(m) for m in values]
        first = self._lists[id(values)] = len(self.maps)
        self.maps.extend(values)
        if self._each is not None:
            self._each.update(zip(map(id, values), range(first, first + len(values))))
        return range(first, first + len(values))

    def _place(self, value: Any) -> int:
        each = self._index()
        index = each.get(id(value))
        if index is None:
            index = each[id(value)] = len(self.maps)
            self.maps.append(value)
        return index

    def _index(self) -> dict[int, int]:
        if self._each is None:
            self._each = dict(zip(map(id, self.maps), range(len(self.maps))))
        return self._each


def _claims_column(column: list, count: int) -> list:
    """A claim column (``ContentClaim`` objects, ``claim_field`` lists or None): shared when every
    event has the same one, else ``[resources, refs, offsets, lengths]``: each resource claim once
    (``[container, section, id]``) and an index into them an event, -1 for no claim. (orjson's
    fallback, ``_json_default``, writes a shared ``ContentClaim`` as ``claim_field``'s list.)"""
    first = column[0]
    if column.count(first) == count:
        return [_SHARED, first]
    if set(map(type, column)) != {ContentClaim}:   # lists or None among them: made claims first
        column = [_NO_CLAIM if c is None else c if type(c) is ContentClaim else _claim_in(c) for c in column]
    resources = list(map(_RESOURCE, column))
    table = dict.fromkeys(resources)
    table.pop(None, None)
    number = dict(zip(table, range(len(table))))
    number[None] = -1
    return [_CLAIMS, [list(map(list, table)), list(map(number.__getitem__, resources)),
                      list(map(_OFFSET, column)), list(map(_LENGTH, column))]]


def _filenames(count: int, updated: list, previous: list) -> list:
    """The filename column of the index part: each event's ``filename`` after it (before it when
    the event's updated attributes lack one; null when neither has it), as ``[kind, values]``."""
    try:   # one C-level pass when the maps are dicts (the session's are)
        names = list(map(dict.get, updated, repeat("filename")))
    except TypeError:
        names = [attributes.get("filename") for attributes in updated]
    if None in names:
        names = [name if name is not None else before.get("filename") for name, before in zip(names, previous)]
    first = names[0]
    return [_SHARED, first] if names.count(first) == count else [_EACH, names]


def _stretched(runs: list) -> list:
    """``[value, count]`` stretches (``_run_values``, a kind-5 column) as one value an event."""
    return list(chain.from_iterable(repeat(value, n) for value, n in runs))


def _run_values(events: Sequence[list | EventRun], position: int) -> list | None:
    """``[value, count]`` of each stretch of events that share the value at ``position``, when all
    are runs that share one there (no column to build: a commit's ROUTE and DROP runs differ in
    type, relationship and details), else None."""
    out: list = []
    for e in events:
        if type(e) is not EventRun or position in e.each:
            return None
        mine = e.shared[position]
        if out and (out[-1][0] is mine or out[-1][0] == mine):
            out[-1][1] += e.count
        else:
            out.append([mine, e.count])
    return out


def check_batches(batches: Sequence[EncodedBatch]) -> None:
    """Refuse anything but ``encode_batch``'s output before it is registered unread."""
    for batch in batches:
        if not batch.data.startswith(_BATCH_PREFIX) or batch.count < 1:
            raise ProvenanceFormatError("an event batch to register must be encoded by encode_batch")


def decode_columns(data: bytes | memoryview, first_id: int, count: int,
                   where: str = "provenance record") -> list[list]:
    """The fields of the ``count`` events encoded in ``data`` (a version 4, 3 or 2 batch, or one
    version-1 event), as columns: ``FIELD_INDEX`` gives a column's position, each holds a value
    an event, in id order from ``first_id``. Events share the values their batch stored once (do
    not change them)."""
    version = _version(data, where)
    if version == EVENT_ENCODING_VERSION:
        fields = decode_fields(data, where)
        if count != 1 or fields[0] != first_id:
            raise ProvenanceFormatError(f"{where}: a version-1 event with id {fields[0]} given as "
                                        f"{count} events from id {first_id}")
        for check, value in zip(_CHECKS, fields):
            if check is not None and not check.passes(value):
                raise ProvenanceFormatError(f"{where}: not a valid version-1 event ({check.error()})")
        return [[value] for value in fields]
    try:
        if version == LEGACY_BATCH_ENCODING_VERSION:
            stored, columns, maps = _parse(data[1:], where)
            if stored != count:
                raise ValueError(f"{stored} events, the entry says {count}")
        else:
            index_columns, _, rest = _index_part(data, count, where)
            columns, maps = _parse(rest, where)
            for position, column in zip(_INDEX_POSITIONS, index_columns):
                columns[position] = column
        if type(columns) is not list or len(columns) != len(_FIELDS):
            raise ValueError(f"{len(columns)} columns, not {len(_FIELDS)}")
        if type(maps) is not list or not string_maps(maps):
            raise ValueError("its attribute maps are not a list of objects of strings")
        current = version == BATCH_ENCODING_VERSION
        out: list = [list(range(first_id, first_id + count))]
        out.extend(None if current and type(c) is list and c and c[0] == _SAME_AS
                   else _expand(c, count, maps, current, check) for c, check in zip(columns[1:], _CHECKS[1:]))
        for previous, updated in _SAME_PAIRS:
            if out[updated] is None:
                raise ValueError(f"column {updated} refers to another column")
            if out[previous] is None:
                if columns[previous][1] != updated:
                    raise ValueError(f"column {previous} cannot be the same as column {columns[previous][1]!r}")
                out[previous] = out[updated]
        if None in out:
            raise ValueError(f"column {out.index(None)} refers to another column")
        return out
    except (ValueError, TypeError, IndexError) as err:
        raise ProvenanceFormatError(f"{where}: not a valid version-{version} event batch ({err})") from err


def decode_index_columns(data: bytes | memoryview, first_id: int, count: int,
                         where: str = "provenance record") -> tuple[list, list | None]:
    """What an index reads of an entry: its columns (as ``decode_columns``) with only the ids and
    the ``INDEX_FIELDS`` filled in (the others None), and each event's filename (the value after
    the event, else before it). For a version 4 or 3 batch only its index part is parsed;
    anything older is decoded whole and the filenames are None (the index reads the attribute
    maps)."""
    version = _version(data, where)
    if version != BATCH_ENCODING_VERSION and version != SPLIT_BATCH_ENCODING_VERSION:
        return decode_columns(data, first_id, count, where), None
    try:
        index_columns, filenames, _ = _index_part(data, count, where)
        out: list = [None] * len(_FIELDS)
        out[0] = list(range(first_id, first_id + count))
        current = version == BATCH_ENCODING_VERSION
        for position, column, check in zip(_INDEX_POSITIONS, index_columns, _INDEX_CHECKS):
            out[position] = _expand(column, count, None, current, check)
        if current and type(filenames) is list and filenames[:1] == [_SAME_AS]:
            if filenames[1:] != [_F_UUID]:
                raise ValueError(f"the filename column cannot be the same as column {filenames[1:]!r}")
            return out, out[_F_UUID]
        return out, _expand(filenames, count, None, current, FILENAME_CHECK)
    except (ValueError, TypeError, IndexError) as err:
        raise ProvenanceFormatError(f"{where}: not a valid version-{version} event batch ({err})") from err


_VERSIONS = (EVENT_ENCODING_VERSION, LEGACY_BATCH_ENCODING_VERSION, SPLIT_BATCH_ENCODING_VERSION,
             BATCH_ENCODING_VERSION)


def _version(data: bytes | memoryview, where: str) -> int:
    if len(data) < 2:
        raise ProvenanceFormatError(f"{where}: event record of {len(data)} bytes is too short")
    version = data[0]
    if version not in _VERSIONS:
        raise ProvenanceFormatError(
            f"{where}: unsupported event encoding version {version} (this release reads versions "
            f"{', '.join(map(str, _VERSIONS))})")
    return version


def _index_part(data: bytes | memoryview, count: int, where: str) -> tuple[list, Any, memoryview]:
    """A version 4 or 3 batch's index columns and filename column, parsed, and the rest unparsed
    (``ValueError`` if the part does not fit the batch or does not hold ``count`` events)."""
    view = memoryview(data)
    if len(view) < 5:
        raise ValueError(f"{len(view)} bytes hold no index part length")
    (length,) = _U32.unpack_from(view, 1)
    if 5 + length > len(view):
        raise ValueError(f"an index part of {length} bytes in a batch of {len(view)}")
    stored, index_columns, filenames = _parse(view[5:5 + length], where)
    if stored != count or type(index_columns) is not list or len(index_columns) != len(_INDEX_POSITIONS):
        raise ValueError(f"{stored} events in {len(index_columns)} index columns, the entry says {count} events")
    return index_columns, filenames, view[5 + length:]


def _parse(part: bytes | memoryview, where: str) -> Any:
    try:
        return _loads(part)
    except orjson.JSONDecodeError as err:
        raise ProvenanceFormatError(f"{where}: event batch is not valid JSON ({err})") from err


def _expand(column: Any, count: int, maps: list | None, current: bool, check: ColumnCheck | None) -> list:
    """A stored ``[kind, values]`` column as one value an event (claims and runs only if
    ``current``: version 4's kinds), its values passed by ``check`` (each stored value once; the
    attribute maps an index refers to are the caller's to check)."""
    kind, values = column
    stored: list | None = None
    if kind == _SHARED:   # ``check.passes(values)``, without its call: most columns of a small batch are shared
        if check is not None and (type(values) not in check.types or check.one is not None and not check.one(values)):
            raise check.error()
        return [values] * count
    if kind == _EACH and type(values) is list and len(values) == count:
        out = stored = values
    elif kind == _MAPS and maps is not None and type(values) is list and len(values) == count:
        if values and min(values) < 0:   # not a number: TypeError here or below
            raise ValueError("its attribute map column holds a value that is not an index of a map")
        return [maps[i] for i in values]
    elif kind == _RUNS and current and type(values) is list:
        for _, n in values:
            if type(n) is not int or n < 1:
                raise ValueError(f"a run of {n!r} events")
        out = _stretched(values)
        stored = [value for value, _ in values]
    elif kind == _CLAIMS and current and type(values) is list and len(values) == 4:
        resources, refs, offsets, lengths = values
        if len(refs) == len(offsets) == len(lengths) == count and -1 <= min(refs) and max(refs) < len(resources):
            check_claim_table(resources, offsets, lengths)   # the claims' parts, each resource once
            return [None if ref < 0 else [*resources[ref], offset, length]
                    for ref, offset, length in zip(refs, offsets, lengths)]
    if stored is None or len(out) != count:
        raise ValueError(f"a column of kind {kind!r} does not hold {count} values")
    if check is not None and not check.many(stored):
        raise check.error()
    return out


def decode_entry(data: bytes | memoryview, first_id: int, count: int,
                 where: str = "provenance record") -> list[list]:
    """The field arrays of the events of one entry (``decode_columns``), in id order."""
    return list(map(list, zip(*decode_columns(data, first_id, count, where))))


def decode_fields(data: bytes | memoryview, where: str = "provenance record") -> list:
    """The decoded field array of one version-1 event (``FIELD_INDEX`` gives positions), unconverted."""
    if len(data) < 2:
        raise ProvenanceFormatError(f"{where}: event record of {len(data)} bytes is too short")
    version = data[0]
    if version != EVENT_ENCODING_VERSION:
        raise ProvenanceFormatError(
            f"{where}: unsupported event encoding version {version} for one event "
            f"(this release reads version {EVENT_ENCODING_VERSION})"
        )
    try:
        fields = _loads(data[1:])
    except orjson.JSONDecodeError as err:
        raise ProvenanceFormatError(f"{where}: event record is not valid JSON ({err})") from err
    if type(fields) is not list or len(fields) != len(_FIELDS):
        raise ProvenanceFormatError(f"{where}: event record is not a version-1 event array")
    return fields


def decode_event(data: bytes | memoryview, where: str = "provenance record") -> ProvenanceEvent:
    """The event encoded in ``data`` (version 1); ``where`` names the file/offset in error messages."""
    return event_from_fields(decode_fields(data, where), where)


def event_from_fields(v: list, where: str = "provenance record") -> ProvenanceEvent:
    """The event whose decoded field array is ``v`` (``decode_fields``, ``decode_entry``)."""
    try:
        (event_id, event_type, timestamp, duration, flowfile_uuid, parent_uuids, child_uuids,
         component_id, component_name, component_type, relationship, previous_attributes,
         updated_attributes, previous_claim, updated_claim, previous_size, updated_size, details,
         transit_uri, source_system_flowfile_id, alternate_identifier, lineage_start_date,
         source_queue_id) = v
        return ProvenanceEvent(
            event_id=event_id, event_type=_TYPES[event_type], timestamp=timestamp,
            duration=duration, flowfile_uuid=flowfile_uuid, parent_uuids=list(parent_uuids),
            child_uuids=list(child_uuids), component_id=component_id, component_name=component_name,
            component_type=component_type, relationship=relationship,
            previous_attributes=dict(previous_attributes), updated_attributes=dict(updated_attributes),
            previous_claim=_claim_in(previous_claim), updated_claim=_claim_in(updated_claim),
            previous_size=previous_size, updated_size=updated_size, details=details,
            transit_uri=transit_uri, source_system_flowfile_id=source_system_flowfile_id,
            alternate_identifier=alternate_identifier, lineage_start_date=lineage_start_date,
            source_queue_id=source_queue_id,
        )
    except (KeyError, ValueError, TypeError) as err:
        raise ProvenanceFormatError(f"{where}: event record is not a valid event ({err})") from err


def event_to_dict(e: ProvenanceEvent) -> dict[str, Any]:
    """A JSON-friendly dict of the event (for export and reporting; not the storage format)."""
    out = {name: getattr(e, name) for name in _FIELDS}
    out["event_type"] = e.event_type.value
    out["previous_claim"] = claim_field(e.previous_claim)
    out["updated_claim"] = claim_field(e.updated_claim)
    return out


def matches(
    e: ProvenanceEvent,
    *,
    flowfile_uuid: str | None = None,
    event_type: ProvenanceEventType | None = None,
    component_id: str | None = None,
    component_name: str | None = None,
    relationship: str | None = None,
    attributes: Mapping[str, str] | None = None,
    start_time: int | None = None,
    end_time: int | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
) -> bool:
    """Whether an event meets a search's filters; the semantics the index implements too.

    ``flowfile_uuid`` matches the event's FlowFile and its parents and children (as NiFi does, so
    that the FORK that made a FlowFile is found by the FlowFile's uuid). ``attributes`` (which
    includes ``filename``) match :meth:`ProvenanceEvent.attribute`. Times and sizes are inclusive;
    the size is ``updated_size``.
    """
    if flowfile_uuid is not None and not (
        e.flowfile_uuid == flowfile_uuid or flowfile_uuid in e.parent_uuids
        or flowfile_uuid in e.child_uuids
    ):
        return False
    if event_type is not None and e.event_type is not event_type:
        return False
    if component_id is not None and e.component_id != component_id:
        return False
    if component_name is not None and e.component_name != component_name:
        return False
    if relationship is not None and e.relationship != relationship:
        return False
    if start_time is not None and e.timestamp < start_time:
        return False
    if end_time is not None and e.timestamp > end_time:
        return False
    if min_size is not None and e.updated_size < min_size:
        return False
    if max_size is not None and e.updated_size > max_size:
        return False
    if attributes:
        for name, value in attributes.items():
            if e.attribute(name) != value:
                return False
    return True
