"""Reading the FlowFile log's queues in FIFO order: recovery, a queue's stream, pages, one FlowFile.

The ``order`` sub-database indexes every record by queue, then (queue_date, queue_index, id),
then uuid; a queue's records are read through it in short read transactions, a batch or a page
at a time, never the whole repository at once (NIFI-7557). Every read applies the journal first,
so it sees every commit made before it.
"""

from __future__ import annotations

from collections.abc import Iterator

from repositories.flowfile import records as rec
from repositories.flowfile.environment import LogEnvironment, Txn
from repositories.flowfile.errors import RepositoryCorruptError
from repositories.flowfile.journal import Journal
from repositories.flowfile.records import SWAP_QUEUE_PREFIX
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim

_SWAP_TAG = SWAP_QUEUE_PREFIX.encode()


class QueueReader:
    """Reads the records of one log through its order index."""

    def __init__(self, environment: LogEnvironment, journal: Journal) -> None:
        self.environment = environment
        self.journal = journal

    def scan(self, start: bytes, stop: bytes | None, batch_size: int,
             include_swapped: bool) -> Iterator[tuple[str, list[FlowFile]]]:
        """``(queue, batch)`` of the records whose order-index keys lie in ``[start, stop)``, each
        batch of one queue and at most ``batch_size``, one read transaction a batch; the queues
        ``swap:<location>`` are skipped unless ``include_swapped``."""
        resume: bytes | None = start
        while resume is not None:
            self.journal.settle()
            with self.environment.read() as txn:
                queue, batch, resume = self._batch(txn, resume, stop, batch_size, include_swapped)
            if batch:
                yield queue, batch

    def _batch(self, txn: Txn, start: bytes, stop: bytes | None, batch_size: int,
               include_swapped: bool) -> tuple[str, list[FlowFile], bytes | None]:
        """``scan``'s next batch from ``start``: ``(queue, batch, the key to resume at or None)``."""
        queue = ""
        batch: list[FlowFile] = []
        claims: dict[bytes, ResourceClaim] = {}
        prefix = b""
        with txn.cursor(db=self.environment.order) as cur:
            ok = cur.set_range(start)
            while ok:
                okey = cur.key()
                if stop is not None and okey >= stop:
                    break
                if not (prefix and okey.startswith(prefix)):
                    p = okey[: len(okey) - rec.INDEX_TAIL]
                    if not include_swapped and p[2:].startswith(_SWAP_TAG):
                        ok = cur.set_range(rec.prefix_successor(p))
                        continue
                    if batch:
                        return queue, batch, okey
                    prefix = p
                if len(batch) >= batch_size:
                    return queue, batch, okey
                queue, ff = self._indexed(txn, okey, claims)
                batch.append(ff)
                ok = cur.next()
        return queue, batch, None

    def _indexed(self, txn: Txn, okey: bytes, claims: dict[bytes, ResourceClaim]) -> tuple[str, FlowFile]:
        """``(queue, FlowFile)`` of the record an order-index key names, checked."""
        ukey = okey[-16:]
        value = txn.get(ukey, db=self.environment.flowfiles)
        if value is None:
            raise RepositoryCorruptError(
                self.environment.path, f"the order index names FlowFile {rec.key_uuid(ukey)}, which has no record")
        try:
            return rec.decode_record(ukey, value, claims)
        except rec.RecordError as e:
            raise self.environment.record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None

    def page(self, queue: str, start: bytes | None, stop: bytes | None,
             count: int) -> tuple[list[FlowFile], bytes | None]:
        """Up to ``count`` FlowFiles of ``queue`` with keys in ``[start, stop)`` (None: the queue's
        first, its end), and the key to start the next page at (None: the range is done)."""
        prefix = self.environment.prefix(queue)
        stop = rec.prefix_successor(prefix) if stop is None else stop
        out: list[FlowFile] = []
        claims: dict[bytes, ResourceClaim] = {}
        self.journal.settle()
        with self.environment.read() as txn:
            cur = txn.cursor(db=self.environment.order)
            ok = cur.set_range(prefix if start is None else start)
            while ok:
                okey = cur.key()
                if okey >= stop:
                    return out, None
                if len(out) >= count:
                    return out, bytes(okey)
                out.append(self._indexed(txn, okey, claims)[1])
                ok = cur.next()
        return out, None

    def last_key(self, queue: str) -> bytes | None:
        """The order-index key of ``queue``'s last FlowFile in FIFO order (None: it is empty)."""
        prefix = self.environment.prefix(queue)
        self.journal.settle()
        with self.environment.read() as txn:
            cur = txn.cursor(db=self.environment.order)
            found = cur.prev() if cur.set_range(rec.prefix_successor(prefix)) else cur.last()
            key = bytes(cur.key()) if found else b""
            return key if key.startswith(prefix) else None

    def get(self, uuid: str) -> QueuedFlowFile | None:
        """The stored FlowFile with this uuid and its queue, or None."""
        ukey = rec.uuid_key(uuid)
        self.journal.settle()
        with self.environment.read() as txn:
            value = txn.get(ukey, db=self.environment.flowfiles)
        if value is None:
            return None
        try:
            queue, ff = rec.decode_record(ukey, value)
        except rec.RecordError as e:
            raise self.environment.record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
        return QueuedFlowFile(ff, queue)
