"""The FlowFile log's queue sizes, and moving a queue's records to another queue.

The ``queues`` sub-database holds each queue's FlowFile count and content bytes (a queue with
none has no entry); they change when the journal is applied (``apply``), when records move
between queues (``move_records``: swap files, a renamed queue) and when the start-up repair
recomputes them from the records (``reconcile``).
"""

from __future__ import annotations

from collections.abc import Mapping

from repositories.flowfile import records as rec
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.errors import RepositoryCorruptError
from repositories.flowfile.protocol import QueueDifference


class QueueTable:
    """The ``queues`` sub-database of one log."""

    def __init__(self, environment: LogEnvironment) -> None:
        self.environment = environment

    def value(self, raw: bytes, qb: bytes) -> tuple[int, int]:
        """``(FlowFile count, content bytes)`` of a stored queue value, checked."""
        try:
            return rec.unpack_queue_value(raw)
        except rec.RecordError as e:
            raise RepositoryCorruptError(self.environment.path,
                                         f"size of queue {qb.decode(errors='replace')!r}: {e}") from None

    def sizes(self) -> dict[str, tuple[int, int]]:
        """``(FlowFile count, content bytes)`` per queue id, as the tables hold them."""
        out = {}
        environment = self.environment
        with environment.read() as txn:
            for key, value in txn.cursor(db=environment.queues):
                out[environment.text_key(key, "queues")] = self.value(value, key)
        return out

    def apply(self, txn: Txn, changes: Mapping[bytes, list[int]]) -> None:
        """Change the count and size of each queue (keyed by its prefix) by the given amounts. A
        count that would go below 0 was damaged: it is set to 0 and the damage logged."""
        db = self.environment.queues
        for prefix, (dc, ds) in changes.items():
            if dc == 0 and ds == 0:
                continue
            qb = prefix[2:]
            raw = txn.get(qb, db=db)
            count, size = (0, 0) if raw is None else self.value(raw, qb)
            count += dc
            size += ds
            if count < 0:
                self.environment.damaged(f"the FlowFile count of queue {qb.decode(errors='replace')!r} would "
                                         f"become {count}; it is set to 0")
                count = 0
            if count == 0:
                if raw is not None:
                    txn.delete(qb, db=db)
            else:
                txn.put(qb, rec.pack_queue_value(count, size), db=db)

    def move_records(self, txn: Txn, source: bytes, target: bytes) -> int:
        """Move the records of the queue of prefix ``source`` to that of ``target`` (FIFO position
        kept, counts and sizes moved with them); how many moved. The journal must be applied."""
        environment = self.environment
        okeys = []
        with txn.cursor(db=environment.order) as cur:
            if cur.set_range(source):
                for okey in cur.iternext(keys=True, values=False):
                    if not okey.startswith(source):
                        break
                    okeys.append(okey)
        moved_size = 0
        for okey in okeys:
            ukey = okey[-16:]
            value = txn.get(ukey, db=environment.flowfiles)
            if value is None:
                raise RepositoryCorruptError(
                    environment.path, f"the order index names FlowFile {rec.key_uuid(ukey)}, which has no record"
                )
            try:
                moved_size += rec.peek(value)[3]
                new_value, order = rec.with_queue(value, target)
            except rec.RecordError as e:
                raise environment.record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
            txn.put(ukey, new_value, db=environment.flowfiles)
            txn.delete(okey, db=environment.order)
            txn.put(order + ukey, b"", db=environment.order)
        if okeys:
            self.apply(txn, {source: [-len(okeys), -moved_size], target: [len(okeys), moved_size]})
        return len(okeys)

    def reconcile(self, txn: Txn, actual: Mapping[bytes, tuple[int, int]]) -> dict[str, QueueDifference]:
        """Make each queue's entry what the records say (``actual``: ``(count, bytes)`` by queue
        id, UTF-8); the queues that differed, by id."""
        fixed: dict[str, QueueDifference] = {}
        db = self.environment.queues
        stored = {qb: self.value(raw, qb) for qb, raw in txn.cursor(db=db)}
        for qb in set(stored) | set(actual):
            want = actual.get(qb, (0, 0))
            have = stored.get(qb, (0, 0))
            if want != have:
                fixed[qb.decode(errors="replace")] = {"recorded": have, "actual": want}
                if want[0] == 0:
                    txn.delete(qb, db=db)
                else:
                    txn.put(qb, rec.pack_queue_value(*want), db=db)
        return fixed
