"""The FlowFile log's journal: each commit's changes as one entry, applied to the tables later.

A commit writes one journal entry (``append``), which decides it; the entries are applied to the
records, the order index, the claimant counts and the queue sizes a few dozen commits at a time
(``FOLD_ENTRIES``, ``FOLD_BYTES``), and before anything reads those tables (``settle``), so a
FlowFile created and removed in between is never written to them (NiFi's journal of deltas, in
LMDB: the order index, the counts and the crash guarantees stay). Applying works out the net
effect of the journal's first part in a read transaction (``plan``, fold.py), outside LMDB's
writer lock that every process's commits wait for, and the write transaction only writes it
(``fold``). Several processes append to and apply one journal; each entry is applied once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence

import lmdb

from repositories.flowfile import records as rec
from repositories.flowfile.claims import ClaimTable
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.errors import FlowFileRepositoryError
from repositories.flowfile.fold import Effect, PlannedFold, net_effect
from repositories.flowfile.queue_table import QueueTable
from repositories.flowfile.records import JournalEntry

log = logging.getLogger(__name__)


class Journal:
    """The ``journal`` sub-database of one log, and applying it to the tables.

    ``recent``: this process's commits not applied yet, by sequence, the entries as they were
    encoded, so that applying them does not decode them again. ``retry_at``: after applying
    failed, commits do not try again before this ``time.monotonic()``. ``applying``: held by the
    commit that applies the journal (one application at a time in a process)."""

    #: Journal entries (commits), or bytes of them, after which a commit applies the journal to
    #: the tables: bounds the journal, the time the applying holds the writer lock, and what one
    #: application (or one part of a long journal's) holds in memory. The window must also hold
    #: several lives of a FlowFile (its commits from creation to removal), since only one that
    #: is created and removed inside it never reaches the tables (docs/performance.md has how
    #: these were chosen). Read at each use: a change on the class or an instance counts at once
    #: (a repository's: ``repository._journal``).
    FOLD_ENTRIES = 64
    FOLD_BYTES = 32 * 1024**2
    #: At most this many FlowFile updates of this process's commits are held as encoded (besides
    #: at most twice FOLD_ENTRIES commits); applying decodes the others from the journal. This
    #: keeps what a process holds near one window's worth (FOLD_BYTES) even while applying
    #: fails, when the entries bound alone would let it hold twice FOLD_ENTRIES commits of any size.
    RECENT_UPDATES = 131_072
    #: After applying failed (a damaged record, a full map), commits wait this long to try again.
    FOLD_RETRY_SECONDS: float = 10
    #: True where another process applies the journal once it is long (``apply_if_long``, which
    #: the FlowFile repository's service calls on a thread): this process's commits then apply it
    #: only past twice the bounds, a backstop while that process is down, and keep none of their
    #: entries as encoded (they would only be used by the backstop).
    applied_elsewhere = False

    def __init__(self, environment: LogEnvironment, claims: ClaimTable, queues: QueueTable) -> None:
        self.environment = environment
        self.claims = claims
        self.queues = queues
        self.recent: dict[int, JournalEntry] = {}
        self.retry_at = 0.0
        self.applying = threading.Lock()
        #: removals of FlowFiles that were not in the repository, as applying found them
        self.unknown_removals = 0

    # --- committing --------------------------------------------------------------------------

    def append(self, txn: Txn, seq: int, value: bytes) -> bool:
        """Write the journal entry ``value`` (``records.encode_journal_entry``) of the commit of
        sequence ``seq`` in ``txn``; whether the journal has reached the bounds at which this
        process applies it (twice them where it is ``applied_elsewhere``)."""
        journal = self.environment.journal
        txn.put(rec.pack_u64(seq), value, db=journal, append=True)
        stat = txn.stat(journal)
        if self.recent and next(iter(self.recent)) < seq - stat["entries"] + 1:
            # another process applied some of what this one holds: drop those
            with txn.cursor(db=journal) as cur:
                oldest = self.environment.number_key(cur.key(), "journal") if cur.first() else seq
            self.recent = {s: e for s, e in self.recent.items() if s >= oldest}
        return self._long(stat, 2 if self.applied_elsewhere else 1)

    def hold(self, seq: int, entry: JournalEntry) -> None:
        """Keep the committed ``entry`` of sequence ``seq`` as encoded, within the bounds (more
        than them are held only while applying fails); called under the instance lock, in
        commit order."""
        if self.applied_elsewhere or len(self.recent) >= 2 * self.FOLD_ENTRIES:
            return
        held_updates = sum(len(held[0]) for held in self.recent.values())
        if held_updates + len(entry[0]) <= self.RECENT_UPDATES:
            self.recent[seq] = entry

    def apply_after_commit(self) -> None:
        """Apply the journal after a commit that found it long, unless applying failed lately or
        another thread of this process is applying it (its application takes this commit's too).
        The commit is already decided, so an error here is logged (the readers, which apply the
        journal first, report it) rather than raised."""
        if time.monotonic() < self.retry_at or not self.applying.acquire(blocking=False):
            return
        try:
            self.settle()
        except FlowFileRepositoryError as e:
            self.retry_at = time.monotonic() + self.FOLD_RETRY_SECONDS
            log.error("%s (commits go on into the journal; applying it is tried again in %d s)",
                      e, self.FOLD_RETRY_SECONDS)
        finally:
            self.applying.release()

    def _long(self, journal: lmdb._StatDict, factor: int = 1) -> bool:
        """Whether the journal (its ``txn.stat``) has reached ``factor`` times the bounds at
        which it is applied (FOLD_ENTRIES, FOLD_BYTES)."""
        return (journal["entries"] >= factor * self.FOLD_ENTRIES
                or (journal["leaf_pages"] + journal["overflow_pages"]) * journal["psize"] >= factor * self.FOLD_BYTES)

    # --- applying ----------------------------------------------------------------------------

    def apply_if_long(self) -> bool:
        """Apply the journal's first part (``parts``) if the journal has reached the bounds at
        which a commit would apply it; whether it did (not when another process applied it
        meanwhile). It holds the writer lock only to write what it worked out before (``plan``)."""
        with self.environment.read() as txn:
            if not self._long(txn.stat(self.environment.journal)):
                return False
            planned = self.plan(txn)
        with self.environment.write("applying the journal") as txn:
            return self.fold(txn, planned, rest=False) > 0

    def settle(self) -> None:
        """Apply the journal to the tables before reading them (nothing to do when it is empty):
        the first part's net effect is worked out in a read transaction (``plan``), then written,
        and what came in meanwhile applied, in a write transaction (``fold``)."""
        with self.environment.read() as txn:
            planned = self.plan(txn)
        if planned is not None:
            with self.environment.write("applying the journal") as txn:
                self.fold(txn, planned)

    def parts(self, txn: Txn) -> Iterator[tuple[int, list[JournalEntry]]]:
        """The journal in commit order, a part at a time: ``(last sequence, entries)``, each part
        at most FOLD_ENTRIES entries or about FOLD_BYTES, to bound what applying holds in memory.
        Entries this process committed come from ``recent`` as they were encoded."""
        entries: list[JournalEntry] = []
        held = 0
        seq = 0
        recent = self.recent
        environment = self.environment
        max_entries, max_bytes = self.FOLD_ENTRIES, self.FOLD_BYTES
        with txn.cursor(db=environment.journal) as cur:
            for key, value in cur:
                seq = environment.number_key(key, "journal")
                entry = recent.get(seq)
                if entry is None:
                    try:
                        entry = rec.decode_journal_entry(value)
                    except rec.RecordError as e:
                        raise environment.record_error(e, f"journal entry {seq}") from None
                entries.append(entry)
                held += len(value)
                if len(entries) >= max_entries or held >= max_bytes:
                    yield seq, entries
                    entries, held = [], 0
        if entries:
            yield seq, entries

    def plan(self, txn: Txn) -> PlannedFold | None:
        """The net effect of the journal's first part as ``txn`` (a read transaction) sees it, to
        be written by ``fold`` (None: the journal is empty)."""
        with txn.cursor(db=self.environment.journal) as cur:
            if not cur.first():
                return None
            first = self.environment.number_key(cur.key(), "journal")
        for last, entries in self.parts(txn):
            return PlannedFold(first, last, net_effect(self.environment, txn, entries))
        return None

    def fold(self, txn: Txn, planned: PlannedFold | None = None, rest: bool = True) -> int:
        """Apply every journal entry, in commit order, to the tables and empty the journal; return
        the sequence of the last entry applied (0: the journal was empty).

        A FlowFile created and removed between two folds never reaches the ``flowfiles`` and
        ``order`` tables: only each FlowFile's net change is written. A long journal (applying
        failed for a while) is applied a part at a time, to bound the memory it takes.

        ``planned``: the first part's effect, worked out in an earlier read transaction
        (``plan``). It is written only when the journal still starts with the entry it
        starts with: the tables change only by applying the journal (the swap and queue
        operations apply it first), and applying removes the entries it applied, so the tables
        are still as the plan read them; otherwise it is dropped and the journal applied here.
        With ``rest`` False only the plan is written (when it still holds): the entries after it,
        or all of them, wait for the next application, and nothing is decoded under the lock."""
        seq = 0
        if planned is not None:
            with txn.cursor(db=self.environment.journal) as cur:
                number = self.environment.number_key
                if cur.first() and number(cur.key(), "journal") == planned.first:
                    self._write_effect(txn, planned.last, planned.effect)
                    while cur.key() and number(cur.key(), "journal") <= planned.last:
                        cur.delete()
                    seq = planned.last
        if rest:
            for seq, entries in self.parts(txn):
                self.apply(txn, seq, entries)
            if seq:
                txn.drop(self.environment.journal, delete=False)
        if not seq:
            return 0
        self.recent = {s: e for s, e in self.recent.items() if s > seq}
        return seq

    def apply(self, txn: Txn, seq: int, entries: Sequence[JournalEntry], expect_prefix: bytes | None = None) -> None:
        """Write the net effect of ``entries`` (``fold.net_effect``) in ``txn`` under sequence ``seq``."""
        self._write_effect(txn, seq, net_effect(self.environment, txn, entries, expect_prefix))

    def _write_effect(self, txn: Txn, seq: int, effect: Effect) -> None:
        """Write ``effect`` in ``txn``: records and index entries in ``putmulti`` calls, in key
        order (uuids grow with time, so they reach the B-trees' right edges); a claim count at 0
        afterwards puts its claim on the destructible list under ``seq``."""
        removed, index_dels, record_puts, index_puts, deltas, news, queues, unknown = effect
        self.unknown_removals += unknown
        ff_db, order_db = self.environment.flowfiles, self.environment.order
        delete = txn.delete
        for k in removed:
            delete(k, db=ff_db)
        for k in index_dels:
            delete(k, db=order_db)  # a missing entry is recreated by rebuild_claimant_counts
        if record_puts:
            txn.cursor(db=ff_db).putmulti(record_puts)
        if index_puts:
            txn.cursor(db=order_db).putmulti(index_puts)
        self.claims.apply(txn, seq, deltas, news)
        self.queues.apply(txn, queues)
