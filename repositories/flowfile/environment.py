"""The open LMDB environment of the FlowFile log, which every part of the repository shares.

A ``LogEnvironment`` holds the environment, its sub-databases by name, the instance lock under
which this process writes, and the read and write transactions every other module of the log
uses; it turns LMDB's errors and the records' ``RecordError`` into the repository's errors, which
name the repository directory and say what to do. ``opening.py`` makes one (creating, checking,
upgrading the files, or reading a private copy); docs/formats/flowfile-repository.md has the
layout of each sub-database and meta key named here.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, TypeAlias

import lmdb

from repositories.flowfile import records as rec
from repositories.flowfile.errors import (
    FlowFileRepositoryError,
    RepositoryCorruptError,
    UnsupportedFormatVersionError,
    log_damaged_count,
)

#: a transaction of the log: its values are ``bytes`` (no transaction is begun with ``buffers=True``)
Txn: TypeAlias = "lmdb.Transaction[bytes]"
#: a sub-database handle
Db: TypeAlias = "lmdb._Database"

META = b"meta"
FLOWFILES = b"flowfiles"
ORDER = b"order"
QUEUES = b"queues"
CLAIMS = b"claims"
DESTRUCTIBLE = b"destructible"
SWAP = b"swap_files"
JOURNAL = b"journal"
STATE = b"state"
OUTBOX = b"provenance_outbox"
#: the sub-databases besides ``meta``, in the order a new repository creates them
DB_NAMES = (FLOWFILES, ORDER, QUEUES, CLAIMS, DESTRUCTIBLE, SWAP, JOURNAL, STATE, OUTBOX)

# keys of the meta sub-database
K_FORMAT = b"format_version"
K_NEXT_ID = b"next_id"
K_SEQ = b"commit_seq"
K_CREATED = b"created"
K_CHECKPOINT = b"last_checkpoint"
K_RUN = b"run"
K_NEXT_EVENT = b"next_event_id"

#: Reader slots in ``lock.mdb``: enough for the repository actor plus tools on the node.
MAX_READERS = 256
#: Named sub-databases allowed (nine used, room for later versions).
MAX_DBS = 16

_CORRUPTION_ERRORS = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.BadValsizeError,
)
#: what a read-only transaction is doing when an LMDB error there can only mean a damaged file: a
#: read transaction of ours is never misused, so MDB_BAD_TXN in it is LMDB refusing a bad page (a
#: garbled page of the meta sub-database gives that, not MDB_CORRUPTED)
_READING = ("opening", "reading")


class CallerError(ValueError):
    """A caller's mistake found inside a write transaction (the transaction is aborted)."""


class SubDatabases(NamedTuple):
    """The handles of the log's sub-databases."""

    meta: Db
    flowfiles: Db
    order: Db
    queues: Db
    claims: Db
    destructible: Db
    swap: Db
    journal: Db
    state: Db
    outbox: Db


def lmdb_error(path: Path, e: lmdb.Error, doing: str, env: lmdb.Environment | None) -> FlowFileRepositoryError:
    """The repository's error for LMDB's ``e``, raised while ``doing`` something: damage is a
    ``RepositoryCorruptError``; a full map, a lock file of another LMDB version and too many
    readers say which setting or step helps."""
    if isinstance(e, _CORRUPTION_ERRORS) or (isinstance(e, lmdb.BadTxnError) and doing in _READING):
        return RepositoryCorruptError(path, f"LMDB reports {type(e).__name__} while {doing}: {e}")
    if isinstance(e, lmdb.MapFullError):
        return FlowFileRepositoryError(
            f"FlowFile repository at {path} is full (map size {_map_size(env)} bytes) while "
            f"{doing}; raise Settings.flowfile_map_size and restart",
            path,
        )
    if isinstance(e, lmdb.VersionMismatchError):
        return FlowFileRepositoryError(
            f"FlowFile repository at {path}: {e}. Its lock.mdb was made by another LMDB version; "
            "stop every process that uses it (the lock file is then rebuilt) or upgrade flowactors",
            path,
        )
    if isinstance(e, lmdb.ReadersFullError):
        return FlowFileRepositoryError(
            f"FlowFile repository at {path}: all {MAX_READERS} reader slots are taken while "
            f"{doing}; too many processes or threads read it at once",
            path,
        )
    return FlowFileRepositoryError(f"FlowFile repository at {path}: LMDB error while {doing}: {e}", path)


def _map_size(env: lmdb.Environment | None) -> int | str:
    try:
        return env.info()["map_size"] if env is not None else "?"
    except lmdb.Error:
        return "?"


@contextlib.contextmanager
def reading(path: Path, env: lmdb.Environment) -> Iterator[Txn]:
    """A read transaction of ``env`` (aborted at the end); LMDB's errors in it as the repository's."""
    try:
        txn = env.begin(write=False)
    except lmdb.Error as e:
        raise lmdb_error(path, e, "reading", env) from e
    try:
        yield txn
    except lmdb.Error as e:
        raise lmdb_error(path, e, "reading", env) from e
    finally:
        txn.abort()


def load_counter(path: Path, txn: Txn, meta: Db, key: bytes, missing: int | None = None) -> int:
    """A u64 meta value; ``missing`` if the key is absent and that is allowed, else corrupt."""
    raw = txn.get(key, db=meta)
    if raw is None:
        if missing is not None:
            return missing
        raise RepositoryCorruptError(path, f"the meta key {key.decode()!r} is missing")
    try:
        return rec.unpack_u64(raw)
    except rec.RecordError as e:
        raise RepositoryCorruptError(path, f"meta key {key.decode()!r}: {e}") from None


class LogEnvironment:
    """An open LMDB environment of the log: its sub-databases, its transactions, its errors.

    ``write`` transactions are serialized in this process by ``lock`` (LMDB serializes them
    between processes); every method is safe to call from several threads. ``copy``: the private
    temporary directory the environment lives in when the log is read from a copy (deleted by
    ``close``)."""

    def __init__(self, path: Path, env: lmdb.Environment, dbs: SubDatabases, *, always_sync: bool,
                 copy: Path | None = None) -> None:
        self.path = path
        self.always_sync = always_sync
        self.copy = copy
        self.lock = threading.RLock()
        self.meta = dbs.meta
        self.flowfiles = dbs.flowfiles
        self.order = dbs.order
        self.queues = dbs.queues
        self.claims = dbs.claims
        self.destructible = dbs.destructible
        self.swap = dbs.swap
        self.journal = dbs.journal
        self.state = dbs.state
        self.outbox = dbs.outbox
        #: claimant or queue counts that would have gone below 0 (``damaged``)
        self.damaged_counts = 0
        self._env: lmdb.Environment | None = env
        #: why writes are refused (``refuse_writes``; None: writable)
        self._writes_refused: str | None = None
        self._prefixes: dict[str, bytes] = {}

    @property
    def closed(self) -> bool:
        return self._env is None

    def check_open(self) -> lmdb.Environment:
        """The LMDB environment; ``FlowFileRepositoryError`` once closed."""
        if self._env is None:
            raise FlowFileRepositoryError(f"FlowFile repository at {self.path} is closed", self.path)
        return self._env

    def refuse_writes(self, why: str) -> None:
        """From now on every write transaction and sync raises, saying ``why``."""
        self._writes_refused = why

    def close(self) -> None:
        """Close the environment and delete the private copy, if any (idempotent)."""
        env, self._env = self._env, None
        if env is not None:
            env.close()
        if self.copy is not None:
            shutil.rmtree(self.copy, ignore_errors=True)
            self.copy = None

    # --- transactions ----------------------------------------------------------------------------

    def read(self) -> contextlib.AbstractContextManager[Txn]:
        """A read transaction (a snapshot: it sees the commits made before it began)."""
        return reading(self.path, self.check_open())

    @contextlib.contextmanager
    def write(self, doing: str) -> Iterator[Txn]:
        """One write transaction under the instance lock: committed on success, aborted (nothing
        written) on any exception. ``doing`` names it in errors."""
        env = self.check_open()
        if self._writes_refused:
            raise FlowFileRepositoryError(f"{self._writes_refused}: {doing} needs write access", self.path)
        with self.lock:
            try:
                txn = env.begin(write=True)
            except lmdb.Error as e:
                raise self.wrap(e, doing) from e
            try:
                yield txn
            except BaseException as e:
                txn.abort()
                if isinstance(e, lmdb.Error):
                    raise self.wrap(e, doing) from e
                raise
            try:
                txn.commit()
            except lmdb.Error as e:
                raise self.wrap(e, doing) from e

    def sync(self) -> None:
        """Flush every committed transaction to disk (``fdatasync`` of data.mdb)."""
        if self._writes_refused:
            raise FlowFileRepositoryError(f"{self._writes_refused}: a checkpoint needs write access", self.path)
        try:
            self.check_open().sync(True)
        except lmdb.Error as e:
            raise self.wrap(e, "syncing") from e

    # --- meta counters -----------------------------------------------------------------------

    def load_counter(self, txn: Txn, key: bytes, missing: int | None = None) -> int:
        """A u64 meta value; ``missing`` if the key is absent and that is allowed, else corrupt."""
        return load_counter(self.path, txn, self.meta, key, missing)

    def next_seq(self, txn: Txn) -> int:
        """Take the next change sequence number in ``txn`` (stored at once; the transaction
        decides whether it counts)."""
        seq = self.load_counter(txn, K_SEQ) + 1
        txn.put(K_SEQ, rec.pack_u64(seq), db=self.meta)
        return seq

    # --- errors ------------------------------------------------------------------------------

    def wrap(self, e: lmdb.Error, doing: str) -> FlowFileRepositoryError:
        """The repository's error for LMDB's ``e`` (``lmdb_error``)."""
        return lmdb_error(self.path, e, doing, self._env)

    def record_error(self, e: rec.RecordError, what: str) -> FlowFileRepositoryError:
        """The repository's error for a value ``what`` names that could not be decoded."""
        if isinstance(e, rec.RecordVersionError):
            return UnsupportedFormatVersionError(self.path, e.found, rec.RECORD_VERSION, what)
        return RepositoryCorruptError(self.path, f"{what}: {e}")

    def number_key(self, key: bytes, table: str) -> int:
        """The u64 BE number a key of ``table`` (``journal``: a commit sequence;
        ``provenance_outbox``: a first event id) holds; ``RepositoryCorruptError`` naming the table
        and the key when it holds none."""
        try:
            return rec.unpack_u64(key)
        except rec.RecordError as e:
            raise self._damaged_key(key, table, str(e)) from None

    def text_key(self, key: bytes, table: str) -> str:
        """The text a key of ``table`` (``state``: a component id; ``swap_files``: a swap file's
        location) is; ``RepositoryCorruptError`` naming the table and the key when it is not UTF-8."""
        try:
            return key.decode()
        except UnicodeDecodeError:
            raise self._damaged_key(key, table, "not UTF-8") from None

    def _damaged_key(self, key: bytes, table: str, problem: str) -> RepositoryCorruptError:
        shown = key[:32].hex() + ("..." if len(key) > 32 else "")
        return RepositoryCorruptError(self.path, f"the {table} sub-database holds a damaged key, "
                                                 f"{len(key)} bytes {shown} ({problem})")

    def damaged(self, problem: str) -> None:
        """Count and log a claimant or queue count that would have gone below 0 (``log_damaged_count``)."""
        self.damaged_counts += 1
        log_damaged_count(self.path, problem)

    # --- keys --------------------------------------------------------------------------------

    def prefix(self, queue: str) -> bytes:
        """``records.queue_prefix`` of ``queue``, cached (``ValueError`` for a queue id that
        cannot be one)."""
        p = self._prefixes.get(queue)
        if p is None:
            p = rec.queue_prefix(queue)
            if len(self._prefixes) > 100_000:
                self._prefixes.clear()
            self._prefixes[queue] = p
        return p
