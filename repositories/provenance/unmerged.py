"""The journals not merged yet: where the commit path writes, and the order ids become visible in.

Between two rollovers the durable repository writes one *generation* of journals (``Generation``;
its journals are named after the first id it could hold). ``UnmergedJournals`` holds the one being
written (``active``) and the ones a rollover sealed that are not merged into an event file yet
(``sealed``), and keeps the id order:

* ``append`` gives batches the next ids and writes them as one record of the next journal in turn
  (round-robin over ``journal_count`` journals per container);
* ``write_numbered`` writes a batch whose ids were reserved elsewhere (the FlowFile repository's
  log): it becomes visible once every id below it is (``sequence``), else it waits in ``held``;
  ``skip_gaps`` gives up ids a held batch waited ``gap_timeout`` seconds for;
* readers (``get``, ``events_from``, ``newest_first``) see every visible event of the journals.

``next_id`` is one past the highest visible id: every id below it is visible, or was given up.
Not locked by itself: every method is called with the repository's lock held (the lock given to
the constructor), except ``wait_visible``, which takes it.
"""

from __future__ import annotations

import bisect
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from repositories.provenance.event import EncodedBatch, ProvenanceEvent, decode_entry, event_from_fields
from repositories.provenance.journal import JournalFile, JournalRecord, journal_name, pack_count, pack_entry_header

log = logging.getLogger(__name__)

#: A record written whose lower ids have not arrived: its generation, journal, record, and since when
#: (``time.monotonic``) it waits.
HeldRecord = tuple["Generation", JournalFile, JournalRecord, float]


@dataclass(eq=False)
class Generation:
    """The journals written between two rollovers; ids in it start at ``first_id``."""

    first_id: int
    #: one past the last id it takes, set when rollover seals it (ids below that may still come:
    #: it is merged once every id below ``end_id`` is visible or given up)
    end_id: int | None = None
    journals: dict[int, JournalFile] = field(default_factory=dict)
    record_first_ids: list[int] = field(default_factory=list)
    records: list[tuple[JournalFile, JournalRecord]] = field(default_factory=list)
    last_id: int = -1
    count: int = 0
    bytes: int = 0
    attempted: bool = False   # a merge of it was started (and failed): redo with cleanup

    def add_record(self, journal: JournalFile, record: JournalRecord) -> None:
        """A record's events are visible: readers find them here (records come in id order)."""
        self.record_first_ids.append(record.first_id)
        self.records.append((journal, record))
        self.last_id = max(self.last_id, record.last_id)
        self.count += record.count

    def holds(self, event_id: int) -> bool:
        return self.count > 0 and self.record_first_ids[0] <= event_id <= self.last_id

    def payload_for(self, event_id: int) -> tuple[JournalFile, JournalRecord] | None:
        index = bisect.bisect_right(self.record_first_ids, event_id) - 1
        if index < 0:
            return None
        journal, record = self.records[index]
        return (journal, record) if record.first_id <= event_id <= record.last_id else None


class UnmergedJournals:
    """The active and sealed generations of a repository's journals (see the module docstring)."""

    def __init__(self, containers: Sequence[Path], journal_count: int, gap_timeout: float,
                 lock: threading.RLock):
        self.containers = list(containers)
        self.journal_count = journal_count
        self.gap_timeout = gap_timeout
        self.visible = threading.Condition(lock)   # notified as ids become visible
        self.next_id = 0
        #: numbered records written whose lower ids have not arrived, by first id
        self.held: dict[int, HeldRecord] = {}
        self.ids_given_up = 0
        self.active = Generation(0)
        self.sealed: list[Generation] = []
        self._journal_turn = 0

    def resume(self, next_id: int) -> None:
        """Continue after an earlier run (recovery): ids from ``next_id``, in a new generation."""
        self.next_id = next_id
        self.active = Generation(next_id)

    def generations(self) -> list[Generation]:
        """Sealed generations oldest first, then the active one."""
        return [*self.sealed, self.active]

    def journal_files(self) -> list[JournalFile]:
        return [journal for generation in self.generations() for journal in generation.journals.values()]

    def unmerged_events(self) -> int:
        return sum(generation.count for generation in self.generations())

    # ------------------------------------------------------------------ writing

    def append(self, batches: Sequence[EncodedBatch], now: float) -> tuple[int, int]:
        """Append encoded batches, their ids the next ones, to one journal in one record; returns
        ``(first_id, last_id)``. Ids still awaited are given up first (not mixed with a flow's)."""
        self.skip_gaps(now, force=True)
        first = next_id = self.next_id
        if not batches:
            return first, first - 1
        numbered = []
        for batch in batches:
            numbered.append((next_id, batch))
            next_id += batch.count
        self.sequence(*self.write(numbered))
        return first, next_id - 1

    def arrived(self, first_id: int) -> bool:
        """Whether a batch with this first id was written already, or its ids given up."""
        return first_id in self.held or first_id < self.next_id

    def write_numbered(self, first_id: int, batch: EncodedBatch, now: float) -> None:
        """Write a batch whose ids were reserved elsewhere: visible now if its ids are next,
        else held until the ids below it arrive or are given up."""
        generation, journal, record = self.write([(first_id, batch)])
        if first_id == self.next_id:
            self.sequence(generation, journal, record)
        else:
            self.held[first_id] = (generation, journal, record, now)

    def write(self, numbered: Sequence[tuple[int, EncodedBatch]]) -> tuple[Generation, JournalFile, JournalRecord]:
        """Write batches with consecutive ids as one record of the next journal in turn, in the
        generation their ids belong to (a sealed one still waiting for them, or the active one)."""
        parts: list[bytes] = [pack_count(len(numbered))]
        count = 0
        for first, batch in numbered:
            parts.append(pack_entry_header(first, batch.count, len(batch.data)))
            parts.append(batch.data)
            count += batch.count
        min_ts = min(b.min_timestamp for _, b in numbered)
        max_ts = max(b.max_timestamp for _, b in numbered)
        payload = b"".join(parts)
        first = numbered[0][0]
        generation = self.active
        if first < generation.first_id:
            generation = next(g for g in reversed(self.sealed) if g.first_id <= first)
        turn = self._journal_turn
        self._journal_turn = (turn + 1) % (self.journal_count * len(self.containers))
        journal = generation.journals.get(turn)
        if journal is None:
            container = self.containers[turn % len(self.containers)]
            path = container / "journals" / journal_name(generation.first_id, turn)
            journal = generation.journals[turn] = JournalFile.create(path, generation.first_id)
        journal.append(payload, first, first + count - 1, count, min_ts, max_ts)
        generation.bytes += len(payload) + 8
        return generation, journal, journal.records[-1]

    def sequence(self, generation: Generation, journal: JournalFile, record: JournalRecord) -> None:
        """Make a written record visible (its ids are next), then any held ones that follow it."""
        while True:
            generation.add_record(journal, record)
            self.next_id = record.last_id + 1
            held = self.held.pop(self.next_id, None)
            if held is None:
                self.visible.notify_all()
                return
            generation, journal, record, _ = held

    def wait_visible(self, event_id: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``event_id`` is visible (or was given up)."""
        with self.visible:
            return self.visible.wait_for(lambda: self.next_id > event_id, timeout)

    def skip_gaps(self, now: float, force: bool = False) -> None:
        """Give up ids that a held batch has waited ``gap_timeout`` seconds for (all, with
        ``force``), oldest first, so the batches after them become visible."""
        while self.held:
            lowest = min(self.held)
            generation, journal, record, since = self.held[lowest]
            if not force and now - since < self.gap_timeout:
                return
            gap = lowest - self.next_id
            self.ids_given_up += gap
            log.warning("provenance: event ids %d-%d never arrived within %g s (their commit's process "
                        "died between the write-ahead log and provenance); %d event ids given up",
                        self.next_id, lowest - 1, self.gap_timeout, gap)
            del self.held[lowest]
            self.sequence(generation, journal, record)

    def continue_from(self, next_id: int) -> None:
        """Ids below ``next_id`` will never come (unless batches are held: they keep their place)."""
        if next_id > self.next_id and not self.held:
            self.next_id = next_id
            if not self.active.count:
                self.active = Generation(next_id)

    # ------------------------------------------------------------------ rollover

    def seal(self) -> None:
        """End the active generation (if it holds records) at the highest id written so far;
        new records go to a new one."""
        active = self.active
        if active.journals:   # it holds records, visible or waiting for lower ids
            end = max([active.first_id, self.next_id,
                       *(r.last_id + 1 for g, _, r, _ in self.held.values() if g is active)])
            active.end_id = end
            self.sealed.append(active)
            self.active = Generation(end)

    def complete(self) -> list[Generation]:
        """The sealed generations every id of which is visible or given up, oldest first."""
        return [g for g in self.sealed if g.end_id is None or g.end_id <= self.next_id]

    def forget(self, merged: Sequence[Generation]) -> None:
        """Merged generations leave the sealed ones."""
        merged_ids = {id(g) for g in merged}
        self.sealed = [g for g in self.sealed if id(g) not in merged_ids]

    def sync(self) -> None:
        for journal in self.journal_files():
            journal.fsync()

    def close(self) -> None:
        for journal in self.journal_files():
            journal.close()

    # ------------------------------------------------------------------ reading

    def holds(self, event_id: int) -> bool:
        """Whether the id belongs to the journals (``get`` answers for it, None if not visible)."""
        return any(generation.holds(event_id) for generation in self.generations())

    def get(self, event_id: int) -> ProvenanceEvent | None:
        """The visible event with this id in the journals, else None."""
        for generation in self.generations():
            if generation.holds(event_id):
                found = generation.payload_for(event_id)
                if found is None:
                    return None
                journal, record = found
                for entry_id, count, data in journal.record_entries(record):
                    if entry_id <= event_id < entry_id + count:
                        fields = decode_entry(data, entry_id, count, f"{journal.path} entry {entry_id}")
                        return event_from_fields(fields[event_id - entry_id], f"{journal.path} event {event_id}")
                return None
        return None

    def events_from(self, position: int, count: int) -> list[ProvenanceEvent]:
        """Up to ``count`` visible events with id >= ``position``, in id order."""
        out: list[ProvenanceEvent] = []
        for generation in self.generations():
            if generation.count == 0 or generation.last_id < position:
                continue
            start = max(bisect.bisect_right(generation.record_first_ids, position) - 1, 0)
            for journal, record in generation.records[start:]:
                if record.last_id < position:
                    continue
                for entry_id, events, data in journal.record_entries(record):
                    if entry_id + events <= position:
                        continue
                    fields = decode_entry(data, entry_id, events, f"{journal.path} entry {entry_id}")
                    for one in fields[max(position - entry_id, 0):]:
                        out.append(event_from_fields(one, f"{journal.path} event {one[0]}"))
                        if len(out) >= count:
                            return out
        return out

    def newest_first(self, test: Callable[[bytes], bool] | None, start: int | None = None,
                     end: int | None = None) -> Iterator[ProvenanceEvent]:
        """Visible events, newest first (iterate with the lock held), from the records whose time
        span meets ``[start, end]``, and only those whose encoding passes ``test``: a prefilter on
        bytes (a value searched for must be in them), tried on a whole record payload first, then
        on each entry (a batch of events); only the entries passing it are decoded."""
        for generation in reversed(self.generations()):
            for journal, record in reversed(generation.records):
                if (start is not None and record.max_ts < start) or (end is not None and record.min_ts > end):
                    continue   # the record's events are all outside the time range
                payload = journal.read_payload(record)
                if test is not None and not test(payload):
                    continue   # a value searched for is not in the record: nothing to decode
                for entry_id, count, data in reversed(list(journal.record_entries(record))):
                    if test is not None and not test(bytes(data)):
                        continue
                    for one in reversed(decode_entry(data, entry_id, count, f"{journal.path} entry {entry_id}")):
                        yield event_from_fields(one, f"{journal.path} event {one[0]}")
