"""A provenance search's filters, checked, and the forms each way of searching takes them in.

``search_filters`` turns ``search``'s keyword arguments into one filters dict (``matches``'s
keywords, event.py); both repositories start from it. The durable one then asks its index with
``index_query`` and tests the bytes of its unmerged journals before decoding them, with the
``needles`` every match must contain (``contains_any`` for many searches at once: a lineage level).
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Mapping

import orjson

from repositories.provenance.event import ProvenanceEventType
from repositories.provenance.index_batch import attribute_key, term_key
from repositories.provenance.index_query import IndexQuery

#: What ``search_filters`` returns: ``matches``'s keyword arguments.
Filters = dict[str, Any]

#: Up to this many needles, ``contains_any`` searches for each in turn (a substring search each);
#: past it, one split of the bytes on '"' tests them all at once.
FEW_NEEDLES = 16


def search_filters(searchable: Collection[str], flowfile_uuid: str | None = None,
                   event_type: ProvenanceEventType | str | None = None, component_id: str | None = None,
                   component_name: str | None = None, relationship: str | None = None,
                   filename: str | None = None, attributes: Mapping[str, str] | None = None,
                   start_time: int | None = None, end_time: int | None = None,
                   min_size: int | None = None, max_size: int | None = None) -> Filters:
    """The filters of a search, ``filename`` one of its ``attributes``; raises ``ValueError`` for an
    attribute that is not ``searchable`` (not indexed) and for an unknown event type."""
    attrs = dict(attributes or {})
    if filename is not None:
        attrs["filename"] = filename
    unknown = sorted(set(attrs) - set(searchable))
    if unknown:
        raise ValueError(
            f"attributes {unknown} are not indexed; searchable attributes are {sorted(searchable)} "
            "(add names to provenance_indexed_attributes)"
        )
    return {
        "flowfile_uuid": flowfile_uuid,
        "event_type": None if event_type is None else ProvenanceEventType(event_type),
        "component_id": component_id,
        "component_name": component_name,
        "relationship": relationship,
        "attributes": attrs or None,
        "start_time": start_time,
        "end_time": end_time,
        "min_size": min_size,
        "max_size": max_size,
    }


def needles(filters: Filters) -> list[bytes]:
    """Byte strings an encoded event must contain to match (orjson encodes a string one way)."""
    values = [filters[name] for name in ("flowfile_uuid", "component_id", "component_name", "relationship")
              if filters[name] is not None]
    if filters["event_type"] is not None:
        values.append(filters["event_type"].value)
    values.extend((filters["attributes"] or {}).values())
    return [orjson.dumps(value) for value in values]


def contains_any(wanted: Collection[bytes]) -> Callable[[bytes], bool]:
    """A test of whether bytes contain any of these needles (``needles``: encoded JSON strings).

    With many needles (a lineage level's uuids), a needle ``"x"`` with no '"' inside occurs in the
    bytes exactly when ``x`` is one of the pieces between two '"' of the bytes, so one split and a
    set lookup test them all at once; any other needle is searched for by itself.
    """
    distinct = list(dict.fromkeys(wanted))
    if len(distinct) <= FEW_NEEDLES:
        return lambda data: any(needle in data for needle in distinct)
    quoted: set[bytes] = set()
    others: list[bytes] = []
    for needle in distinct:
        inner = needle[1:-1]
        if len(needle) >= 2 and needle[:1] == needle[-1:] == b'"' and b'"' not in inner:
            quoted.add(inner)
        else:
            others.append(needle)

    def test(data: bytes) -> bool:
        if not quoted.isdisjoint(data.split(b'"')[1:-1]):
            return True
        return any(needle in data for needle in others)

    return test


def index_query(filters: Filters) -> IndexQuery:
    """The filters as the index takes them: equality terms, time and size ranges."""
    terms: list[tuple[bytes, bytes]] = []
    if filters["flowfile_uuid"] is not None:
        terms.append((b"uuid", term_key(filters["flowfile_uuid"])))
    if filters["event_type"] is not None:
        terms.append((b"type", filters["event_type"].value.encode()))
    for name in ("component_id", "component_name", "relationship"):
        if filters[name] is not None:
            terms.append((name.encode(), term_key(filters[name])))
    for name, value in (filters["attributes"] or {}).items():
        terms.append((b"attribute", attribute_key(name, value)))
    return IndexQuery(tuple(terms), filters["start_time"], filters["end_time"],
                      filters["min_size"], filters["max_size"])
