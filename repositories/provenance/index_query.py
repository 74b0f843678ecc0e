"""What a search asks the provenance index and gets back, and which event files it may point into.

``IndexQuery`` is a search as the index sees it (filters.py builds it from a search's filters);
``Hit`` is one event the index found (its file and block); ``LiveFiles`` are the committed event
files (``FileSpan`` each), so that an entry pointing into any other file is skipped (dangling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class IndexQuery:
    """A search as the index sees it: equality terms plus inclusive ranges (ms, bytes)."""

    terms: tuple[tuple[bytes, bytes], ...] = ()
    start_time: int | None = None
    end_time: int | None = None
    min_size: int | None = None
    max_size: int | None = None

    def time_overlaps(self, low: int, high: int) -> bool:
        return not ((self.start_time is not None and high < self.start_time)
                    or (self.end_time is not None and low > self.end_time))

    def zone_overlaps(self, min_ts: int, max_ts: int, min_size: int, max_size: int) -> bool:
        return self.time_overlaps(min_ts, max_ts) and not (
            (self.min_size is not None and max_size < self.min_size)
            or (self.max_size is not None and min_size > self.max_size))

    def accepts(self, timestamp: int, size: int) -> bool:
        return not ((self.start_time is not None and timestamp < self.start_time)
                    or (self.end_time is not None and timestamp > self.end_time)
                    or (self.min_size is not None and size < self.min_size)
                    or (self.max_size is not None and size > self.max_size))


@dataclass(frozen=True, slots=True)
class FileSpan:
    """What the index needs to know about a live event file."""

    file_id: int
    last_id: int
    min_timestamp: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class Hit:
    event_id: int
    file_id: int
    block_offset: int


class LiveFiles:
    """The event files that exist, newest first; index entries pointing elsewhere are dangling."""

    def __init__(self, spans: Iterable[FileSpan]):
        self.newest_first = sorted(spans, key=lambda s: s.file_id, reverse=True)
        self.by_id = {s.file_id: s for s in self.newest_first}

    def __contains__(self, file_id: int) -> bool:
        return file_id in self.by_id
