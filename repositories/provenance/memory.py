"""The provenance repository in memory: no files (unit tests, the stateless engine).

``InMemoryProvenanceRepository`` implements ``ProvenanceRepository`` (protocol.py) as the durable
``WriteAheadProvenanceRepository`` does, with the same ids, search semantics and lineage. Events
are kept encoded, so a caller cannot change a registered event and sizes are real; a search is a
scan, newest first. Nothing is durable, nothing is merged: ``rollover`` has nothing to do, and
every registered event is visible at once.
"""

from __future__ import annotations

import threading
import time
from typing import Collection, Iterator, Mapping, Sequence

from repositories.provenance.event import (
    EncodedBatch,
    ProvenanceEvent,
    ProvenanceEventType,
    check_batches,
    decode_entry,
    decode_event,
    encode_fields,
    event_fields,
    matches,
)
from repositories.provenance.filters import search_filters
from repositories.provenance.lineage import Lineage, build_lineage, collect_family, named_uuids
from repositories.provenance.protocol import ProvenanceRepository


class InMemoryProvenanceRepository(ProvenanceRepository):
    """A node's provenance in memory (see the module docstring); thread-safe.

    Age-off counts the encoded bytes against ``max_storage_size``.
    """

    def __init__(self, *, max_storage_time: float = 86400.0, max_storage_size: int = 10 << 30,
                 indexed_attributes: Sequence[str] = ()):
        self.max_storage_time = max_storage_time
        self.max_storage_size = max_storage_size
        self.indexed_attributes = tuple(indexed_attributes)
        self._searchable = {"filename", *self.indexed_attributes}
        self._events: dict[int, bytes] = {}
        self._bytes = 0
        self._next_id = 0
        self._lock = threading.RLock()

    def register(self, events: Sequence[ProvenanceEvent]) -> tuple[int, int]:
        with self._lock:
            first = self._next_id
            for offset, event in enumerate(events):
                event.event_id = first + offset
            return self._store_locked(first, [encode_fields(event_fields(event)) for event in events])

    def register_batches(self, batches: Sequence[EncodedBatch]) -> tuple[int, int]:
        check_batches(batches)
        with self._lock:
            first = next_id = self._next_id
            encoded: list[bytes] = []
            for batch in batches:
                encoded.extend(map(encode_fields, decode_entry(batch.data, next_id, batch.count)))
                next_id += batch.count
            return self._store_locked(first, encoded) if encoded else (first, first - 1)

    def register_numbered(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> list[int]:
        """Batches with ids reserved by the caller, kept at those ids (nothing here is late)."""
        check_batches([batch for _, batch in numbered])
        with self._lock:
            for first, batch in numbered:
                if batch.count and first not in self._events:
                    self._store_locked(first, list(map(encode_fields, decode_entry(batch.data, first, batch.count))))
        return []

    def continue_from(self, next_id: int) -> None:
        with self._lock:
            self._next_id = max(self._next_id, next_id)

    def settle(self) -> None:
        pass

    def sync_journals(self) -> None:
        pass

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        return True

    def _store_locked(self, first: int, encoded: list[bytes]) -> tuple[int, int]:
        in_order = first >= self._next_id
        for offset, data in enumerate(encoded):
            self._events[first + offset] = data
            self._bytes += len(data)
        if not in_order:   # ids come in order of arrival otherwise; readers walk them in id order
            self._events = dict(sorted(self._events.items()))
        self._next_id = max(self._next_id, first + len(encoded))
        return first, first + len(encoded) - 1

    def rollover(self) -> dict:
        return {"events": 0, "file": None, "blocks": 0, "bytes": 0, "seconds": 0.0}

    def maybe_rollover(self, now: float | None = None) -> dict | None:
        return None

    def get(self, event_id: int) -> ProvenanceEvent | None:
        with self._lock:
            data = self._events.get(event_id)
        return None if data is None else decode_event(data)

    def events(self, start_id: int, count: int) -> list[ProvenanceEvent]:
        with self._lock:
            ids = [i for i in self._events if i >= start_id][:count]
            return [decode_event(self._events[i]) for i in ids]

    def _all_newest_first(self) -> Iterator[ProvenanceEvent]:
        with self._lock:
            items = list(self._events.values())
        for data in reversed(items):
            yield decode_event(data)

    def search(
        self,
        *,
        flowfile_uuid: str | None = None,
        event_type: ProvenanceEventType | str | None = None,
        component_id: str | None = None,
        component_name: str | None = None,
        relationship: str | None = None,
        filename: str | None = None,
        attributes: Mapping[str, str] | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        limit: int | None = 1000,
    ) -> list[ProvenanceEvent]:
        filters = search_filters(self._searchable, flowfile_uuid, event_type, component_id,
                                 component_name, relationship, filename, attributes, start_time,
                                 end_time, min_size, max_size)
        out: list[ProvenanceEvent] = []
        if limit is not None and limit <= 0:
            return out
        for event in self._all_newest_first():
            if matches(event, **filters):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def _find_many(self, uuids: Collection[str]) -> list[ProvenanceEvent]:
        wanted = set(uuids)
        return [event for event in self._all_newest_first() if not wanted.isdisjoint(named_uuids(event))]

    def lineage(self, flowfile_uuid: str, *, max_events: int = 100_000) -> Lineage:
        events, truncated = collect_family(flowfile_uuid, self._find_many, max_events)
        return build_lineage(flowfile_uuid, events, truncated)

    def age_off(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        cutoff = (now - self.max_storage_time) * 1000.0
        removed = 0
        freed = 0
        with self._lock:
            shrinking = self._bytes > self.max_storage_size
            for event_id in list(self._events):
                data = self._events[event_id]
                if shrinking and self._bytes <= 0.9 * self.max_storage_size:
                    shrinking = False
                if not shrinking and decode_event(data).timestamp >= cutoff:
                    continue
                del self._events[event_id]
                self._bytes -= len(data)
                freed += len(data)
                removed += 1
        return {"deleted_events": removed, "bytes_freed": freed, "deleted_files": [], "dropped_shards": []}

    def stats(self) -> dict:
        with self._lock:
            return {
                "max_event_id": self._next_id - 1,
                "next_event_id": self._next_id,
                "oldest_event_id": next(iter(self._events), None),
                "event_files": 0,
                "event_file_bytes": 0,
                "events_in_files": 0,
                "journal_files": 0,
                "journal_bytes": 0,
                "index_shards": 0,
                "index_bytes": 0,
                "max_indexed_id": self._next_id - 1,
                "bytes_on_disk": 0,
                "bytes_in_memory": self._bytes,
                "index_lag": 0,
                "events": len(self._events),
            }

    def close(self) -> None:
        pass

    def __enter__(self) -> "InMemoryProvenanceRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
