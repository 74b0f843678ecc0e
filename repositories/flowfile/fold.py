"""The net effect of journal entries on the FlowFile log's tables (applying the journal).

A commit writes only a journal entry; applying the journal turns a run of entries into what they
change in the records, the order index, the claimant counts and the queue sizes together
(``net_effect``), from the records as a transaction holds them, without writing anything: a
read transaction works it out outside LMDB's writer lock, and ``journal.py`` writes it. A
FlowFile changed by several entries is followed in memory, so one created and removed among them
costs no write and no record (docs/formats/flowfile-repository.md, "Applying the journal").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from repositories.flowfile import records as rec
from repositories.flowfile.environment import CallerError, LogEnvironment, Txn
from repositories.flowfile.records import JournalEntry, Update

#: an update's claim key (``records.encode_commit``'s shape)
_CLAIM_KEY = itemgetter(4)


class Effect(NamedTuple):
    """What applying journal entries writes (``net_effect``)."""

    removed: list[bytes]                   # records to delete
    index_dels: list[bytes]                # order index entries to delete
    record_puts: list[tuple[bytes, bytes]]  # (uuid key, record)
    index_puts: list[tuple[bytes, bytes]]   # (order key, b"")
    deltas: dict[bytes, int]               # claim key -> change of its claimant count
    news: set[bytes]                       # claims the entries created
    queues: dict[bytes, list[int]]         # queue prefix -> [count change, size change]
    unknown: int                           # removals of FlowFiles not in the repository


class PlannedFold(NamedTuple):
    """The journal's entries ``first`` to ``last`` and their ``effect``, worked out before the
    write transaction that applies them (``Journal.plan``)."""

    first: int
    last: int
    effect: Effect


class _Tally:
    """What the entries change in the claimant counts and the queue sizes, as they are followed."""

    def __init__(self, deltas: defaultdict[bytes, int]) -> None:
        self.deltas = deltas
        self.queues: defaultdict[bytes, list[int]] = defaultdict(lambda: [0, 0])
        self.news: set[bytes] = set()
        self.unknown = 0


def passing_through(entries: Sequence[JournalEntry], update_keys: list[list[bytes]], removed: list[bytes],
                    in_tables: set[bytes]) -> set[bytes]:
    """The FlowFiles that ``entries`` create and then remove: not ``in_tables`` before them,
    updated one or more times, then removed once and never updated again. They leave nothing in
    the records, the order index, the queue sizes or the claimant counts (each claim and queue
    they took they gave back), so applying the entries can skip them; in a flow of short-lived
    FlowFiles that is nearly all of them. Found with set operations, not a Python step a
    FlowFile. (A FlowFile removed twice is not one of them: its second removal is an unknown
    one, which ``net_effect`` counts.)"""
    once = set(removed)
    if len(once) != len(removed):
        once -= {ukey for ukey, n in Counter(removed).items() if n > 1}
    gone: set[bytes] = set()
    late: set[bytes] = set()  # updated after a removal: not passing through
    for updated, (_updates, rkeys, _news) in zip(update_keys, entries):
        if gone and not gone.isdisjoint(updated):
            late.update(gone.intersection(updated))
        gone.update(rkeys)
    return (once & set().union(*update_keys)) - in_tables - late


def without(entries: Sequence[JournalEntry], update_keys: list[list[bytes]],
            passing: set[bytes]) -> tuple[list[JournalEntry], set[bytes]]:
    """``entries`` without the FlowFiles of ``passing``, and the claim keys those referenced (their
    counts must still be looked at: a claim with no other claimant becomes destructible)."""
    kept: list[JournalEntry] = []
    touched: set[bytes] = set()
    for updated, (updates, rkeys, new_ckeys) in zip(update_keys, entries):
        if passing.issuperset(updated):   # the usual case: a whole commit passes
            touched.update(map(_CLAIM_KEY, updates))
            updates = []
        elif not passing.isdisjoint(updated):
            touched.update([u[4] for u in updates if u[0] in passing])
            updates = [u for u in updates if u[0] not in passing]
        if not passing.isdisjoint(rkeys):
            rkeys = [ukey for ukey in rkeys if ukey not in passing]
        kept.append((updates, rkeys, new_ckeys))
    touched.discard(b"")
    return kept, touched


def net_effect(environment: LogEnvironment, txn: Txn, entries: Sequence[JournalEntry],
               expect_prefix: bytes | None = None) -> Effect:
    """The net effect of ``entries`` (``(updates, removal keys, new claim keys)`` each, in commit
    order; updates shaped as ``records.encode_commit`` makes them) on the records, the order
    index, the claimant counts and the queue sizes, from the records as ``txn`` holds them (it
    writes nothing, so a read transaction does). With ``expect_prefix`` every update must move a
    stored FlowFile out of that queue (a swap registration; else ``ValueError``).

    Previous records come in one ``getmulti`` call and are only sliced (``records.peek``); each
    FlowFile is followed in memory through the entries, and ``records.update_record`` makes the
    records of the FlowFiles that stay."""
    # each FlowFile as the tables hold it and as the entries so far leave it (None: not
    # there), both shaped as an update (the stored one with its order key in place of a
    # record), in the order the entries name them: uuids grow with time, so the records and
    # index entries below reach the B-trees' right edges in order, not random pages
    stored: dict[bytes, Update | None] = {}
    update_keys = [[u[0] for u in updates] for updates, _rkeys, _news in entries]
    removed: list[bytes] = []
    for updated, (_updates, rkeys, _news) in zip(update_keys, entries):
        stored.update(dict.fromkeys(updated))
        stored.update(dict.fromkeys(rkeys))
        removed += rkeys
    olds = txn.cursor(db=environment.flowfiles).getmulti(list(stored)) if stored else []
    tally = _Tally(defaultdict(int))
    if expect_prefix is None and removed:
        passing = passing_through(entries, update_keys, removed, {ukey for ukey, _old in olds})
        if passing:
            entries, touched = without(entries, update_keys, passing)
            tally.deltas.update(dict.fromkeys(touched, 0))
            stored = {ukey: None for ukey in stored if ukey not in passing}
    _previous(environment, olds, stored)
    state = dict(stored)   # the same keys in the same order
    for updates, rkeys, new_ckeys in entries:
        tally.news.update(new_ckeys)
        _follow_updates(state, updates, tally, expect_prefix)
        _follow_removals(state, rkeys, tally)
    return Effect(*_writes(environment, state, stored), tally.deltas, tally.news, tally.queues, tally.unknown)


def _previous(environment: LogEnvironment, olds: Sequence[tuple[bytes, bytes]],
              stored: dict[bytes, Update | None]) -> None:
    """Set in ``stored`` each previous record of ``olds``, shaped as an update."""
    peek = rec.peek
    ukey = b""
    try:
        for ukey, old in olds:
            oorder, oprefix, ockey, osize = peek(old)
            stored[ukey] = (ukey, oorder + ukey, None, oprefix, ockey, osize)
    except rec.RecordError as e:
        raise environment.record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None


def _follow_updates(state: dict[bytes, Update | None], updates: Sequence[Update], tally: _Tally,
                    expect_prefix: bytes | None) -> None:
    """Follow one entry's updates: each FlowFile's claim and queue, from its state before."""
    deltas, queues = tally.deltas, tally.queues
    for u in updates:
        ukey, _ff, _queue, prefix, ckey, size = u
        prev = state[ukey]
        if prev is None:
            if expect_prefix is not None:
                raise CallerError(f"FlowFile {rec.key_uuid(ukey)} is not in the repository")
            if ckey:
                deltas[ckey] += 1
        else:
            _ukey, _ff, _queue, pprefix, pckey, psize = prev
            if expect_prefix is not None and pprefix != expect_prefix:
                raise CallerError(
                    f"FlowFile {rec.key_uuid(ukey)} is in queue {pprefix[2:].decode()!r}, "
                    f"not {expect_prefix[2:].decode()!r}"
                )
            if pckey != ckey:
                if pckey:
                    deltas[pckey] -= 1
                if ckey:
                    deltas[ckey] += 1
            qd = queues[pprefix]
            qd[0] -= 1
            qd[1] -= psize
        qd = queues[prefix]
        qd[0] += 1
        qd[1] += size
        state[ukey] = u


def _follow_removals(state: dict[bytes, Update | None], rkeys: Sequence[bytes], tally: _Tally) -> None:
    """Follow one entry's removals (one of a FlowFile not there is counted as unknown)."""
    deltas, queues = tally.deltas, tally.queues
    for ukey in rkeys:
        prev = state[ukey]
        if prev is None:
            tally.unknown += 1
            continue
        _ukey, _ff, _queue, pprefix, pckey, psize = prev
        if pckey:
            deltas[pckey] -= 1
        qd = queues[pprefix]
        qd[0] -= 1
        qd[1] -= psize
        state[ukey] = None


def _writes(environment: LogEnvironment, state: dict[bytes, Update | None], stored: dict[bytes, Update | None]
            ) -> tuple[list[bytes], list[bytes], list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """``(records to delete, index entries to delete, records to put, index entries to put)``
    that take the tables from ``stored`` to ``state`` (the same keys in the same order)."""
    record_puts = []
    index_puts = []
    index_dels = []
    removed = []
    record_of = rec.update_record
    ukey = b""
    try:
        for (ukey, now), old in zip(state.items(), stored.values()):
            if now is None:
                if old is not None:
                    removed.append(ukey)
                    index_dels.append(old[1])
                continue
            value, okey = record_of(now)
            record_puts.append((ukey, value))
            if old is None:
                index_puts.append((okey, b""))
            elif old[1] != okey:
                index_dels.append(old[1])
                index_puts.append((okey, b""))
    except rec.RecordError as e:
        raise environment.record_error(e, f"journal entry holding FlowFile {rec.key_uuid(ukey)}") from None
    return removed, index_dels, record_puts, index_puts
