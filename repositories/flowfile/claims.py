"""Resource claims' claimant counts in the FlowFile log, and their release.

The ``claims`` sub-database holds, for each resource claim the log knows, how many FlowFiles
reference it and, once none does, the commit sequence that made it unreferenced; the
``destructible`` list holds those claims under that sequence until a checkpoint releases them
(``release_due``), so the content repository never deletes a claim before every commit that let
it go is durable. Counts change only when the journal is applied (``apply``) and are recomputed
from the records at start-up (``reconcile``, ``rebuild_claimant_counts`` in repair.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from repositories.flowfile import records as rec
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.errors import RepositoryCorruptError
from repositories.flowfile.protocol import ClaimDifference
from repositories.model import ResourceClaim


class ClaimRepair(NamedTuple):
    """What ``ClaimTable.reconcile`` fixed."""

    fixed: int                            # counts that differed from the records
    differences: list[ClaimDifference]    # the first of them
    stale: int                            # destructible entries dropped


def claim_name(ckey: bytes) -> str:
    """A claim key as ``container/section/id`` for a message (hex when it cannot be read)."""
    try:
        return "/".join(rec.claim_from_key(ckey))
    except rec.RecordError:
        return ckey.hex()


def _claim_or_key(ckey: bytes) -> ResourceClaim | str:
    try:
        return rec.claim_from_key(ckey)
    except rec.RecordError:
        return ckey.hex()


class ClaimTable:
    """The ``claims`` and ``destructible`` sub-databases of one log."""

    def __init__(self, environment: LogEnvironment) -> None:
        self.environment = environment

    def value(self, raw: bytes, ckey: bytes) -> tuple[int, int]:
        """``(claimant count, pending-release sequence)`` of a stored claim value, checked."""
        try:
            return rec.unpack_claim_value(raw)
        except rec.RecordError as e:
            raise RepositoryCorruptError(self.environment.path, f"claim {claim_name(ckey)}: {e}") from None

    def lookup(self, resource: ResourceClaim) -> tuple[int, int] | None:
        """``value`` of ``resource`` as the tables hold it (None: unknown to the log)."""
        ckey = rec.claim_key(tuple(resource))
        with self.environment.read() as txn:
            raw = txn.get(ckey, db=self.environment.claims)
        return None if raw is None else self.value(raw, ckey)

    def pending_release(self) -> list[ResourceClaim]:
        """Claims without claimant on the destructible list, oldest first."""
        out = []
        with self.environment.read() as txn:
            for dkey in txn.cursor(db=self.environment.destructible).iternext(values=False):
                try:
                    out.append(rec.claim_from_key(rec.destructible_fields(dkey)[1]))
                except rec.RecordError as e:
                    raise RepositoryCorruptError(self.environment.path, f"destructible list: {e}") from None
        return out

    def apply(self, txn: Txn, seq: int, deltas: dict[bytes, int], new_ckeys: Iterable[bytes]) -> None:
        """Apply claimant count changes; a count at 0 afterwards puts the claim on the destructible
        list under ``seq`` (a claim the changes referenced and let go again included, and a new
        claim nothing references). A count that would go below 0 was damaged (too low): the
        commits are decided, so the claim is kept referenced, at 1, never released before the next
        start-up's ``rebuild_claimant_counts`` recounts it, and the damage is logged."""
        for ckey in new_ckeys:
            deltas.setdefault(ckey, 0)
        claims_db, dest_db = self.environment.claims, self.environment.destructible
        for ckey, d in deltas.items():
            raw = txn.get(ckey, db=claims_db)
            if raw is None:
                count = pending = 0
            else:
                count, pending = self.value(raw, ckey)
            n = count + d
            if n < 0:
                self.environment.damaged(f"the claimant count of resource claim {claim_name(ckey)} would become "
                                         f"{n} (stored {count}, change {d}); the claim is kept")
                n = 1
            if n == 0:
                if raw is None or count != 0 or not pending:
                    txn.put(ckey, rec.pack_claim_value(0, seq), db=claims_db)
                    txn.put(rec.destructible_key(seq, ckey), b"", db=dest_db)
            else:
                if pending:
                    txn.delete(rec.destructible_key(pending, ckey), db=dest_db)
                if n != count or pending:
                    txn.put(ckey, rec.pack_claim_value(n, 0), db=claims_db)

    def release_due(self, txn: Txn, boundary: int) -> list[ResourceClaim]:
        """Take off the destructible list every claim put there at sequence ``boundary`` or
        before, and delete (release) those still without claimant since then; returns them."""
        path = self.environment.path
        due = []
        with txn.cursor(db=self.environment.destructible) as cur:
            for dkey in cur.iternext(keys=True, values=False):
                try:
                    seq, ckey = rec.destructible_fields(dkey)
                except rec.RecordError as e:
                    raise RepositoryCorruptError(path, f"destructible list: {e}") from None
                if seq > boundary:
                    break
                due.append((dkey, seq, ckey))
        released: list[ResourceClaim] = []
        for dkey, seq, ckey in due:
            txn.delete(dkey, db=self.environment.destructible)
            raw = txn.get(ckey, db=self.environment.claims)
            if raw is None:
                continue
            count, pending = self.value(raw, ckey)
            if count == 0 and pending == seq:
                try:
                    claim = rec.claim_from_key(ckey)
                except rec.RecordError as e:
                    raise RepositoryCorruptError(path, f"claim on the destructible list: {e}") from None
                txn.delete(ckey, db=self.environment.claims)
                released.append(claim)
        return released

    def reconcile(self, txn: Txn, counts: dict[bytes, int], seq: int, max_reported: int) -> ClaimRepair:
        """Make every claimant count what the records say (``counts``: claim key -> FlowFiles
        referencing it; emptied here). A count found too high drops to 0 and the claim waits on
        the destructible list under ``seq`` like any other unreferenced claim; destructible
        entries whose claim is not pending under their sequence are dropped."""
        differences: list[ClaimDifference] = []
        fixed = 0
        for ckey, count, pending, actual in self._wrong_counts(txn, counts):
            if pending:
                txn.delete(rec.destructible_key(pending, ckey), db=self.environment.destructible)
            if actual > 0:
                txn.put(ckey, rec.pack_claim_value(actual, 0), db=self.environment.claims)
            else:
                txn.put(ckey, rec.pack_claim_value(0, seq), db=self.environment.claims)
                txn.put(rec.destructible_key(seq, ckey), b"", db=self.environment.destructible)
            if count != actual:
                fixed += 1
                if len(differences) < max_reported:
                    differences.append({"claim": _claim_or_key(ckey), "recorded": count, "actual": actual})
        return ClaimRepair(fixed, differences, self._drop_stale(txn))

    def _wrong_counts(self, txn: Txn, counts: dict[bytes, int]) -> list[tuple[bytes, int, int, int]]:
        """``(claim key, stored count, pending sequence, actual count)`` of every claim whose
        entry does not match ``counts`` (all found before any is written: no writes while iterating)."""
        changes = []
        for ckey, raw in txn.cursor(db=self.environment.claims):
            count, pending = self.value(raw, ckey)
            actual = counts.pop(ckey, 0)
            if actual > 0:
                if count != actual or pending:
                    changes.append((ckey, count, pending, actual))
            elif (
                count != 0
                or not pending
                or txn.get(rec.destructible_key(pending, ckey), db=self.environment.destructible) is None
            ):
                changes.append((ckey, count, pending, 0))
        for ckey, actual in counts.items():
            changes.append((ckey, 0, 0, actual))
        return changes

    def _drop_stale(self, txn: Txn) -> int:
        """Delete the destructible entries whose claim is not pending under that sequence; how many."""
        stale = []
        for dkey in txn.cursor(db=self.environment.destructible).iternext(values=False):
            dseq, ckey = rec.destructible_fields(dkey)
            raw = txn.get(ckey, db=self.environment.claims)
            if raw is None or self.value(raw, ckey) != (0, dseq):
                stale.append(dkey)
        for dkey in stale:
            txn.delete(dkey, db=self.environment.destructible)
        return len(stale)
