"""Salvaging a damaged FlowFile log: every intact record it still holds, written into a new log.

A damaged LMDB page makes the log refuse to open (``RepositoryCorruptError``), and with it every
FlowFile it holds. ``salvage`` reads what LMDB still lets be read (``lmdb_walk.DamagedEnvironment``:
the damaged ranges are skipped), checks each FlowFile record against its own CRC-32, applies the
readable journal entries (commits not yet applied to the tables) in order, and writes the
FlowFiles that survive into a new, empty log, each in its queue at its FIFO position, with the
processors' states. Nothing of the damaged log is changed.

What is lost is reported: the FlowFiles whose records were on a damaged page or fail their
checksum (their ids, where the order index or the record's key still names them; a count where
only the queue sizes tell), journal entries that fail their checksum (the changes of those
commits: what they removed may come back), states that do not decode, and the provenance events
still waiting in the outbox (the new log starts without them). docs/cli.md, "repository salvage".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from repositories.flowfile import records as rec
from repositories.flowfile.environment import (
    FLOWFILES,
    JOURNAL,
    K_FORMAT,
    K_NEXT_EVENT,
    META,
    ORDER,
    OUTBOX,
    QUEUES,
    STATE,
    SWAP,
)
from repositories.flowfile.errors import UnsupportedFormatVersionError
from repositories.flowfile.lmdb_walk import DamagedEnvironment
from repositories.flowfile.opening import FORMAT_VERSION
from repositories.flowfile.wal import WriteAheadFlowFileRepository
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange

#: FlowFiles written to the new log a commit
BATCH = 10_000
#: key widths the damaged ranges of each sub-database are skipped in (``DamagedEnvironment.walk``)
_UUID, _SEQ, _INDEX, _NAME = 16, 8, 48, 32


@dataclass
class SalvageReport:
    """What ``salvage`` kept and what it lost."""

    #: FlowFiles written to the new log, by queue
    kept: dict[str, int] = field(default_factory=dict)
    #: FlowFiles lost, by uuid: why (and in which queue, where known)
    lost: dict[str, str] = field(default_factory=dict)
    #: FlowFiles lost whose ids nothing readable names (the queue sizes count them)
    lost_unnamed: int = 0
    #: resource claims the kept FlowFiles reference, brought into the new repository
    claims: int = 0
    #: processor states kept (component ids), and those that do not decode (key: why)
    states: list[str] = field(default_factory=list)
    states_lost: dict[str, str] = field(default_factory=dict)
    #: journal entries (commit sequences) that fail their checksum: their changes are lost
    journal_lost: list[int] = field(default_factory=list)
    #: provenance events of commits the provenance repository had not taken (not carried over)
    events_not_carried: int = 0
    #: what LMDB could not read, in words
    problems: list[str] = field(default_factory=list)

    @property
    def kept_total(self) -> int:
        return sum(self.kept.values())

    @property
    def lost_total(self) -> int:
        return len(self.lost) + self.lost_unnamed


class _Found:
    """What the damaged log still says, as it is read."""

    def __init__(self) -> None:
        self.records: dict[bytes, tuple[str, FlowFile]] = {}
        self.in_tables: set[bytes] = set()      # uuid keys the tables name (records, index)
        self.damaged: dict[bytes, str] = {}     # uuid key -> why its record is unreadable
        self.indexed: dict[bytes, str] = {}     # uuid key -> queue, from the order index
        self.table_count = 0                    # FlowFiles the queue sizes count


def salvage(source: Path, target: WriteAheadFlowFileRepository,
            adopt: Callable[[ResourceClaim], bool]) -> SalvageReport:
    """Read every intact record of the damaged log in directory ``source`` (never changed) and
    write them into the empty log ``target``; ``adopt(resource)`` brings a resource claim the kept
    FlowFiles reference into the new repository and says whether it could (False: its file is
    missing, and its FlowFiles are lost). Raises ``UnsupportedFormatVersionError`` for a log of a
    newer release (nothing is written)."""
    report = SalvageReport()
    found = _Found()
    with DamagedEnvironment(source) as env:
        version = env.read(META, K_FORMAT)
        if version and version[0] > FORMAT_VERSION:
            raise UnsupportedFormatVersionError(source, version[0], FORMAT_VERSION)
        next_event = env.read(META, K_NEXT_EVENT)
        _read_records(env.walk(FLOWFILES, _UUID), found)
        _read_index(env.walk(ORDER, _INDEX), env.walk(QUEUES, _NAME), found)
        swapped = _swap_queues(env.walk(SWAP, _NAME))
        _apply_journal(env.walk(JOURNAL, _SEQ), found, report)
        states = _read_states(env.walk(STATE, _NAME), report)
        report.events_not_carried = _outbox_events(env.walk(OUTBOX, _SEQ))
        report.problems = env.problems
    kept = _kept(found, swapped, report)
    kept = _with_content(kept, adopt, report)
    for start in range(0, len(kept), BATCH):
        target.commit(kept[start:start + BATCH], [])
    if next_event is not None and len(next_event) == 8:
        target.raise_event_ids(rec.unpack_u64(next_event))
    for component, values in states.items():
        target.commit([], [], state=StateChange(component, values))
    target.rebuild_claimant_counts()
    for queued in kept:
        report.kept[queued.queue] = report.kept.get(queued.queue, 0) + 1
    return report


def _read_records(walk: Iterable[tuple[bytes, bytes]], found: _Found) -> None:
    """The ``flowfiles`` table: each record checked against its CRC."""
    for ukey, value in walk:
        if len(ukey) != 16:
            continue   # not a key this table holds: what a damaged page gave back
        found.in_tables.add(ukey)
        try:
            found.records[ukey] = rec.decode_record(ukey, value)
        except rec.RecordError as e:
            found.damaged[ukey] = f"its record is damaged ({e})"


def _read_index(order: Iterable[tuple[bytes, bytes]], queues: Iterable[tuple[bytes, bytes]], found: _Found) -> None:
    """The order index names every FlowFile of the tables and its queue; the queue sizes count them."""
    for key, _ in order:
        try:
            queue, ukey = rec.order_key_fields(key)
        except rec.RecordError:
            continue
        found.indexed[ukey] = queue
        found.in_tables.add(ukey)
    for _, value in queues:
        try:
            found.table_count += rec.unpack_queue_value(value)[0]
        except rec.RecordError:
            continue


def _swap_queues(walk: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Swap file location -> the queue that swapped its FlowFiles out (the new log holds them in
    that queue: its flow swaps them out again when it is over its threshold)."""
    queues = {}
    for location, value in walk:
        try:
            queues[location.decode()] = rec.decode_swap_entry(value)["queue"]
        except (rec.RecordError, UnicodeDecodeError):
            continue
    return queues


def _apply_journal(walk: Iterable[tuple[bytes, bytes]], found: _Found, report: SalvageReport) -> None:
    """Apply the readable journal entries (commits after the tables) in order."""
    for key, value in walk:
        seq = rec.unpack_u64(key) if len(key) == 8 else -1
        try:
            updates, removals, _claims = rec.decode_journal_entry(value)
            changed = [(update[0], rec.decode_record(update[0], rec.update_record(update)[0])) for update in updates]
        except rec.RecordError:
            report.journal_lost.append(seq)
            continue
        for ukey, decoded in changed:
            found.records[ukey] = decoded
            found.damaged.pop(ukey, None)
        for ukey in removals:
            found.records.pop(ukey, None)
            found.damaged.pop(ukey, None)
            found.indexed.pop(ukey, None)


def _read_states(walk: Iterable[tuple[bytes, bytes]], report: SalvageReport) -> dict[str, dict[str, str]]:
    states = {}
    for key, value in walk:
        name = key.decode(errors="replace")
        try:
            states[key.decode()] = rec.decode_state(value)[1]
        except (rec.RecordError, UnicodeDecodeError) as e:
            report.states_lost[name] = str(e)
    report.states = sorted(states)
    return states


def _outbox_events(walk: Iterable[tuple[bytes, bytes]]) -> int:
    events = 0
    for _, value in walk:
        try:
            events += rec.decode_outbox_entry(value)[0]
        except rec.RecordError:
            continue
    return events


def _kept(found: _Found, swapped: dict[str, str], report: SalvageReport) -> list[QueuedFlowFile]:
    """The FlowFiles to keep, each in its queue (a swapped one in the queue that swapped it out);
    the lost ones go to ``report``."""
    kept = []
    for ukey, (queue, flowfile) in found.records.items():
        if queue.startswith(rec.SWAP_QUEUE_PREFIX):
            location = queue[len(rec.SWAP_QUEUE_PREFIX):]
            if location not in swapped:
                report.lost[flowfile.uuid] = f"swapped out to {location}, whose queue the damaged swap registry no longer names"
                continue
            queue = swapped[location]
        kept.append(QueuedFlowFile(flowfile, queue))
    for ukey, why in found.damaged.items():
        report.lost[rec.key_uuid(ukey)] = why
    for ukey, queue in found.indexed.items():
        if ukey not in found.records and ukey not in found.damaged:
            report.lost[rec.key_uuid(ukey)] = f"in queue {queue}: its record was on a damaged page"
    report.lost_unnamed = max(0, found.table_count - len(found.in_tables))
    return kept


def _with_content(kept: list[QueuedFlowFile], adopt: Callable[[ResourceClaim], bool],
                  report: SalvageReport) -> list[QueuedFlowFile]:
    """The kept FlowFiles whose content claim could be brought into the new repository."""
    available: dict[ResourceClaim, bool] = {}
    with_content = []
    for queued in kept:
        claim = queued.flowfile.claim
        if claim is not None:
            if claim.resource not in available:
                available[claim.resource] = adopt(claim.resource)
            if not available[claim.resource]:
                report.lost[queued.flowfile.uuid] = (f"in queue {queued.queue}: its content's claim file "
                                                     f"{claim.resource.id} is missing")
                continue
        with_content.append(queued)
    report.claims = sum(available.values())
    return with_content
