"""What each field of a decoded provenance event may hold, checked once a batch where a batch is
decoded (``event.decode_columns``, ``event.decode_index_columns``).

Past its checksum a batch is JSON, and JSON can hold any value anywhere: a damaged batch whose
checksum was made right, or one a bug wrote, would otherwise reach the index (which makes LMDB
keys of the uuids, types and components and packs the times and sizes) or a caller as an event
whose uuid is an object. The decoder checks the values a column stores: a value all the events
share once (by its type, and for a few fields one more test), a column of a value an event or a
run in a few C calls over the whole column, an attribute map once however many events carry it:
no Python step a value (docs/formats/provenance-repository.md, "Event encoding", lists what
each field holds and what the checks cost).

The fields the framework fills (what the index reads, the attributes and claims) are checked; the
ones a processor reports through ``session.provenance`` (``duration``, ``details``,
``transit_uri``, ``source_system_flowfile_id``, ``alternate_identifier``) are returned as they
were stored, since nothing but their display reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain
from typing import Any

_MAX_I64 = (1 << 63) - 1
#: the types a value may have
_INT: frozenset[type] = frozenset({int})
_STR: frozenset[type] = frozenset({str})
_LIST: frozenset[type] = frozenset({list})
_DICT: frozenset[type] = frozenset({dict})
_OPTIONAL_STR: frozenset[type] = frozenset({str, type(None)})
_OPTIONAL_LIST: frozenset[type] = frozenset({list, type(None)})


def _of_types(values: Iterable, allowed: frozenset[type]) -> bool:
    return set(map(type, values)) <= allowed


def _strings(values: Iterable) -> bool:
    """Only strings: joining them raises for anything else (a third of a type test's time)."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _longs(values: Sequence) -> bool:
    """Whole numbers of 64 bits (what the index packs), never true or false. JSON's numbers as
    orjson reads them are never below -2**63, so only the largest is bounded."""
    return _of_types(values, _INT) and (not values or max(values) <= _MAX_I64)


def _names(values: Sequence) -> bool:
    """Non-empty strings (a uuid: an empty one cannot be a key of the index)."""
    return _strings(values) and "" not in values


def _name_list(uuids: list) -> bool:
    return not uuids or _names(uuids)   # most events have no parents or children


def _name_lists(values: Sequence) -> bool:
    return _of_types(values, _LIST) and _names(list(chain.from_iterable(values)))


def _optional_strings(values: Sequence) -> bool:
    return _strings(values) or _of_types(values, _OPTIONAL_STR)   # most columns hold no null: joined first


def string_maps(maps: Iterable) -> bool:
    """Objects of string values (JSON's keys are strings): attribute maps (one that is not a
    ``dict`` makes ``dict.values`` raise inside the join)."""
    return _strings(chain.from_iterable(map(dict.values, maps)))


def _claims(values: Sequence) -> bool:
    """Null, or ``[container, section, id, offset, length]`` (``event.claim_field``)."""
    if not _of_types(values, _OPTIONAL_LIST):
        return False
    claims = list(filter(None, values))
    if len(claims) + values.count(None) != len(values) or set(map(len, claims)) - {5}:
        return False
    container, section, resource_id, offset, length = zip(*claims) if claims else ((),) * 5
    return _strings(container + section + resource_id) and _of_types(offset + length, _INT)


def check_claim_table(resources: Sequence, offsets: Sequence, lengths: Sequence) -> None:
    """A claim column of version 4's kind (each resource claim once, an offset and a length an
    event): ``ValueError`` unless each resource is ``[container, section, id]`` and each offset
    and length a whole number."""
    if not (_of_types(resources, _LIST) and not set(map(len, resources)) - {3}
            and _strings(chain.from_iterable(resources)) and _of_types(offsets, _INT) and _of_types(lengths, _INT)):
        raise ValueError("its claim column holds a claim that is not [container, section, id, offset, length]")


class ColumnCheck:
    """One field's check. A value all events share passes when its type is one of ``types`` and
    ``one`` (if any) holds for it; a list of stored values when ``many`` holds for it (the same
    rule, in C calls over the list). ``error`` says which field and what its values must be."""

    __slots__ = ("name", "types", "one", "many", "what")

    def __init__(self, name: str, types: frozenset[type], one: Callable[[Any], bool] | None,
                 many: Callable[[Sequence], bool], what: str) -> None:
        self.name, self.types, self.one, self.many, self.what = name, types, one, many, what

    def passes(self, value: Any) -> bool:
        """Whether one value (all events share it) is what the field holds."""
        return type(value) in self.types and (self.one is None or self.one(value))

    def error(self) -> ValueError:
        return ValueError(f"its {self.name} column holds a value that is not {self.what}")


def column_checks(fields: Sequence[str], event_types: Collection[str]) -> list[ColumnCheck | None]:
    """The check of each field, in ``fields`` order (None: the id, given by the entry, and the
    fields a processor reports, returned as stored)."""
    types = frozenset(event_types)

    def event_types_only(values: Sequence) -> bool:
        try:
            return types.issuperset(values)
        except TypeError:   # an object or a list: not hashable
            return False

    kinds: dict[str, tuple[frozenset[type], Callable[[Any], bool] | None, Callable[[Sequence], bool], str]] = {
        "event_type": (_STR, types.__contains__, event_types_only, "an event type name"),
        "flowfile_uuid": (_STR, bool, _names, "a non-empty string"),
        "previous_claim": (_OPTIONAL_LIST, lambda claim: claim is None or _claims((claim,)), _claims,
                           "null or a claim [container, section, id, offset, length]"),
        **{name: (_LIST, _name_list, _name_lists, "a list of non-empty strings")
           for name in ("parent_uuids", "child_uuids")},
        **{name: (_DICT, lambda attributes: _strings(attributes.values()), string_maps, "an object of strings")
           for name in ("previous_attributes", "updated_attributes")},
        **{name: (_OPTIONAL_STR, None, _optional_strings, "a string or null")
           for name in ("relationship", "source_queue_id")},
        **{name: (_STR, None, _strings, "a string") for name in ("component_id", "component_name", "component_type")},
        **{name: (_INT, _MAX_I64.__ge__, _longs, "a whole number of 64 bits")
           for name in ("timestamp", "previous_size", "updated_size", "lineage_start_date")},
    }
    kinds["updated_claim"] = kinds["previous_claim"]
    return [ColumnCheck(name, *kinds[name]) if name in kinds else None for name in fields]


#: the check of a batch's filename column (the index part's: each event's filename, or null)
FILENAME_CHECK = ColumnCheck("filename", _OPTIONAL_STR, None, _optional_strings, "a string or null")
