"""The durable FlowFile repository: a write-ahead log of FlowFile records in LMDB.

One LMDB environment at ``<repository>/flowfile`` holds the live FlowFile records, a per-queue
FIFO index, per-queue sizes, resource-claim claimant counts, the claims waiting to be released at
the next checkpoint, the swap-file registry, the journal of commits not yet applied to those
tables, and the commits' provenance events until the provenance repository takes them (the
outbox; docs/formats/flowfile-repository.md has every byte). Every public write is one LMDB write
transaction, so a session commit is all or nothing. A commit writes one journal entry; the
journal is applied to the tables a few dozen commits at a time, and before anything reads them,
so a FlowFile created and removed in between is never written to them (NiFi's journal of deltas,
in LMDB: the order index, the counts and the crash guarantees stay).

Durability (verified in tests/test_flowfile_crash.py, documented in the format doc):

* ``always_sync=False`` (NiFi's default): LMDB ``sync=False, metasync=False``. A commit writes its
  pages and the new meta page with ``pwrite`` and returns: it survives the death (SIGKILL) of every
  process because the bytes are in the OS page cache. It does not survive a power loss or kernel
  crash until the next ``checkpoint()``, which calls ``fdatasync``.
* ``always_sync=True``: LMDB ``sync=True, metasync=True``. ``fdatasync`` of the data pages and an
  ``O_DSYNC`` write of the meta page before ``commit()`` returns: survives power loss.

One instance per repository directory per process (LMDB must not be opened twice in one process:
``open_shared``); several processes may open and write the same directory (the engine's executors
commit in their own processes). Methods are safe to call from several threads.

``readonly=True`` (the read-only commands on a stopped flow's folder) writes nothing at all, not
even LMDB's lock file: see ``_open_readonly`` and the format doc's "Reading without writing".
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

from repositories.flowfile import records as rec
from repositories.flowfile.errors import (
    FlowFileRepositoryError,
    RepositoryCorruptError,
    RunReplacedError,
    StateConflictError,
    UnsupportedFormatVersionError,
    log_damaged_count,
)
from repositories.fsutil import fsync_dir
from repositories.model import FlowFile, QueuedFlowFile, ResourceClaim, StateChange, StateMap

SWAP_QUEUE_PREFIX = rec.SWAP_QUEUE_PREFIX
log = logging.getLogger(__name__)

_META = b"meta"
_FLOWFILES = b"flowfiles"
_ORDER = b"order"
_QUEUES = b"queues"
_CLAIMS = b"claims"
_DESTRUCTIBLE = b"destructible"
_SWAP = b"swap_files"
_JOURNAL = b"journal"
_STATE = b"state"
_OUTBOX = b"provenance_outbox"
_DB_NAMES = (_FLOWFILES, _ORDER, _QUEUES, _CLAIMS, _DESTRUCTIBLE, _SWAP, _JOURNAL, _STATE, _OUTBOX)

_K_FORMAT = b"format_version"
_K_NEXT_ID = b"next_id"
_K_SEQ = b"commit_seq"
_K_CREATED = b"created"
_K_CHECKPOINT = b"last_checkpoint"
_K_RUN = b"run"
_K_NEXT_EVENT = b"next_event_id"

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

# LMDB forbids opening one environment twice in one process (closing either breaks the other's
# POSIX locks), so instances register their directory here.
_open_lock = threading.Lock()
_open_paths: dict[str, weakref.ReferenceType] = {}


class _CallerError(ValueError):
    """A caller's mistake found inside a write transaction (the transaction is aborted)."""


class _ReadFromCopy(Exception):
    """Opening read-only: the log cannot be read as it lies on disk (the message says why)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class WriteAheadFlowFileRepository:
    """FlowFile records, queue order, claimant counts and swap files in one LMDB environment."""

    #: On-disk format of the whole environment (meta key ``format_version``).
    FORMAT_VERSION = 4
    #: Format versions opened and upgraded in place (1: no journal sub-database, 2: no state,
    #: 3: no provenance outbox).
    UPGRADABLE_VERSIONS = (1, 2, 3)
    #: Journal entries (commits), or bytes of them, after which a commit applies the journal to
    #: the tables: bounds the journal, the time the applying holds the writer lock, and what one
    #: application (or one part of a long journal's) holds in memory. The window must also hold
    #: several lives of a FlowFile (its commits from creation to removal), since only one that
    #: is created and removed inside it never reaches the tables: at 8 MiB a pipeline of three
    #: processors at batch 10,000 (2.3 MB an entry that creates or updates 10,000) applied every
    #: few entries, and most FlowFiles were written and deleted again. 64 MiB was no faster than
    #: 32 on Ray and held the writer lock twice as long when nothing passes through
    #: (docs/performance.md).
    FOLD_ENTRIES = 64
    FOLD_BYTES = 32 * 1024**2
    #: At most this many FlowFile updates of this process's commits are held as encoded (besides
    #: at most twice FOLD_ENTRIES commits); applying decodes the others from the journal. A
    #: window of FOLD_BYTES holds about 145,000 updates (230 bytes each), so this keeps what a
    #: process holds near one window's worth even while applying fails, when the entries bound
    #: alone would let it hold 128 commits of any size; in one process at batch 10,000 the last
    #: commit or so of a window is decoded.
    RECENT_UPDATES = 131_072
    #: After applying failed (a damaged record, a full map), commits wait this long to try again.
    FOLD_RETRY_SECONDS = 10
    #: True where another process applies the journal once it is long (``apply_if_long``, which
    #: the FlowFile repository's service calls on a thread): this process's commits then apply it
    #: only past twice the bounds, a backstop while that process is down, and keep none of their
    #: entries as encoded (they would only be used by the backstop).
    applied_elsewhere = False
    #: Reader slots in ``lock.mdb``: enough for the repository actor plus tools on the node.
    MAX_READERS = 256
    #: Named sub-databases allowed (nine used, room for later versions).
    MAX_DBS = 16

    def __init__(
        self,
        path: str | Path,
        *,
        always_sync: bool = False,
        map_size: int = 64 * 1024**3,
        create: bool = True,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.always_sync = bool(always_sync)
        self.readonly = bool(readonly)
        #: why writes are refused (set once a read-only open is done; None: writable)
        self._writes_refused: str | None = None
        #: read-only, from a private copy: its temporary directory (``_open_readonly``)
        self._copy: Path | None = None
        self._lock = threading.RLock()
        self._applying = threading.Lock()  # held by the commit that applies the journal (``commit``)
        self._env: lmdb.Environment | None = None
        self._closed = True
        self._commits = 0
        self._checkpoints = 0
        self._unknown_removals = 0
        self._damaged_counts = 0
        self._last_checkpoint: dict[str, Any] | None = None
        self._prefixes: dict[str, bytes] = {}
        #: this process's commits not applied yet, by sequence: the journal entries as they were
        #: encoded, so that applying them does not decode them again
        self._recent: dict[int, tuple] = {}
        self._journal = None  # set once the environment is open and checked
        self._fold_retry_at = 0.0
        self._key = os.path.realpath(self.path)
        with _open_lock:
            other = _open_paths.get(self._key)
            if other is not None and other() is not None and not other()._closed:
                raise FlowFileRepositoryError(
                    f"FlowFile repository at {self.path} is already open in this process; "
                    "use that instance or close() it first (LMDB must not be opened twice in "
                    "one process)",
                    self.path,
                )
            _open_paths[self._key] = weakref.ref(self)
            self._closed = False
        try:
            self._open(create, map_size)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open_shared(cls, path: str | Path, **options: Any) -> "WriteAheadFlowFileRepository":
        """The instance open on ``path`` in this process, else a new one (``options`` as for the
        constructor). Several processes write one log (LMDB serializes their write transactions
        and frees the lock of a writer that died), but one process must share a single instance."""
        shared = cls.open_here(path)
        return shared if shared is not None else cls(path, **options)

    @classmethod
    def open_here(cls, path: str | Path) -> "WriteAheadFlowFileRepository | None":
        """The instance this process has open on ``path``, if any."""
        with _open_lock:
            other = _open_paths.get(os.path.realpath(path))
            shared = other() if other is not None else None
            return shared if shared is not None and not shared._closed else None

    @classmethod
    def from_settings(cls, root_dir: str | Path, settings: Any, *,
                      shared: bool = False) -> "WriteAheadFlowFileRepository":
        """The repository at ``<root_dir>/flowfile`` configured from a ``Settings``; ``shared``:
        an existing one only (``create=False``), the instance this process has open if any
        (``open_shared``)."""
        options = {"always_sync": settings.always_sync, "map_size": settings.flowfile_map_size}
        if shared:
            return cls.open_shared(Path(root_dir) / "flowfile", create=False, **options)
        return cls(Path(root_dir) / "flowfile", **options)

    # --- opening ------------------------------------------------------------------------------

    def _open(self, create: bool, map_size: int) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise FlowFileRepositoryError(
                f"FlowFile repository path {p} exists but is not a directory; point the "
                "repository at a directory",
                p,
            )
        data = p / "data.mdb"
        if not data.exists():
            if self.readonly:
                raise FlowFileRepositoryError(
                    f"no FlowFile repository at {p} ({data} does not exist); check the repository directory", p)
            if not create:
                raise FlowFileRepositoryError(
                    f"no FlowFile repository at {p} ({data} does not exist) and create=False; "
                    "check the repository directory, or open with create=True to start empty",
                    p,
                )
            self._initialize(map_size)
        file_size = data.stat().st_size
        if file_size == 0:
            raise RepositoryCorruptError(p, f"{data} is empty (0 bytes); it was truncated")
        if self.readonly:
            self._open_readonly(map_size, file_size)
            return
        self._remove_stale_creations()
        self._open_env(p, map_size, file_size)

    def _open_readonly(self, map_size: int, file_size: int) -> None:
        """Open without writing a byte: LMDB ``readonly`` and ``lock=False`` (no ``lock.mdb`` reader
        slot). Without the lock file LMDB cannot tell a writer which pages a reader still uses, so
        this is only safe while nobody writes: the caller holds the repository lock shared
        (``repositories.lock``), which every writer of the log (a running flow, the tools that
        change a stopped one) holds exclusively. A log that cannot be read as it lies - commits
        not yet applied to the tables (its flow did not stop cleanly), an older format version, a
        file shorter than its last page - is copied to a private temporary directory, brought up
        to date there and read from the copy (deleted at ``close``); the folder is never touched.
        Damage and unsupported versions give the same errors as a writable open."""
        try:
            self._open_env(self.path, map_size, file_size, in_place=True)
        except _ReadFromCopy as why:
            if self._env is not None:
                self._env.close()
                self._env = None
            self._copy = Path(tempfile.mkdtemp(prefix="flowactors-readonly-log-"))
            log.info("FlowFile repository at %s is read from a private copy (%s): nothing in it is changed",
                     self.path, why)
            try:
                shutil.copyfile(self.path / "data.mdb", self._copy / "data.mdb")
            except OSError as e:
                raise FlowFileRepositoryError(
                    f"FlowFile repository at {self.path} {why}, so reading it without changing it needs a "
                    f"private copy, which could not be made in {self._copy.parent}: {e}; open it with write "
                    f"access (start the flow) instead", self.path) from None
            self._open_env(self._copy, map_size, file_size)
            self._settle()
        self._writes_refused = (f"FlowFile repository at {self.path} is open read-only"
                                + (" (read from a private copy)" if self._copy is not None else ""))

    def _open_env(self, directory: Path, map_size: int, file_size: int, *, in_place: bool = False) -> None:
        """Open the LMDB environment in ``directory`` (the repository's, or a private copy's) and
        its sub-databases; ``in_place``: read-only, raising ``_ReadFromCopy`` where a read-only
        open cannot go on (see ``_open_readonly``). Errors name the repository, not a copy."""
        p = self.path
        data, shown = directory / "data.mdb", p / "data.mdb"
        try:
            env = lmdb.open(
                str(directory),
                map_size=map_size,
                subdir=True,
                create=False,
                readonly=in_place,
                sync=self.always_sync,
                metasync=self.always_sync,
                writemap=False,
                map_async=False,
                meminit=True,
                readahead=True,
                lock=not in_place,
                max_readers=self.MAX_READERS,
                max_dbs=self.MAX_DBS,
            )
        except lmdb.Error as e:
            raise self._wrap(e, "opening") from e
        self._env = env
        try:
            if not in_place:
                env.reader_check()  # free the reader slots of processes that died (kill -9)
            psize = env.stat()["psize"]
            end = (env.info()["last_pgno"] + 1) * psize
        except lmdb.Error as e:
            raise self._wrap(e, "opening") from e
        # A file shorter than its last page would SIGBUS on the first read of the map. A file can
        # look so without damage: LMDB may leave pages freed at the end of the file unwritten, and
        # the size read before the open misses a commit another process made meanwhile (a tool).
        # So the file is extended with zero pages, every page in use is read (``_walk``), and only
        # if one of them was missing is the file called truncated (given back its size: it is left
        # as it was found).
        short = file_size < end
        if short and in_place:
            raise _ReadFromCopy(f"has a data.mdb shorter than its last page ({file_size} < {end} bytes)")
        if short:  # zeros past the end only: never shrinks the file or touches a byte in it
            fd = os.open(data, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.posix_fallocate(fd, 0, end)
            finally:
                os.close(fd)
        try:
            dbs = self._open_dbs(env, p, in_place)
            if short:
                self._walk(env, [self._meta, *dbs.values()])
        except (lmdb.Error, FlowFileRepositoryError):
            if not short:
                raise
            env.close()
            self._env = None
            os.truncate(data, file_size)  # as it was found
            raise RepositoryCorruptError(
                p, f"{shown} has {file_size} bytes but its last page ends at byte {end}; it was truncated"
            ) from None
        self._ff = dbs[_FLOWFILES]
        self._order = dbs[_ORDER]
        self._queues = dbs[_QUEUES]
        self._claims = dbs[_CLAIMS]
        self._destructible = dbs[_DESTRUCTIBLE]
        self._swap = dbs[_SWAP]
        self._journal = dbs[_JOURNAL]
        self._state = dbs[_STATE]
        self._outbox = dbs[_OUTBOX]
        with self._read() as txn:
            self._load_counter(txn, _K_NEXT_ID)
            self._load_counter(txn, _K_SEQ)
            pending = txn.stat(self._journal)["entries"]
        if pending and in_place:
            raise _ReadFromCopy(f"holds {pending} commits not yet applied to its tables (its flow did not stop cleanly)")

    def _initialize(self, map_size: int) -> None:
        """Create an empty repository atomically: build it in a temporary directory, then link
        its data.mdb into place (a crash leaves either no data.mdb or a complete one)."""
        p = self.path
        p.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".creating-{os.getpid()}-", dir=p))
        try:
            env = lmdb.open(
                str(tmp), map_size=map_size, subdir=True, max_dbs=self.MAX_DBS, sync=True, metasync=True
            )
            try:
                with env.begin(write=True) as txn:
                    meta = env.open_db(_META, txn=txn, create=True)
                    for name in _DB_NAMES:
                        env.open_db(name, txn=txn, create=True)
                    txn.put(_K_FORMAT, bytes((self.FORMAT_VERSION,)), db=meta)
                    txn.put(_K_NEXT_ID, rec.pack_u64(1), db=meta)
                    txn.put(_K_SEQ, rec.pack_u64(0), db=meta)
                    txn.put(_K_CREATED, rec.pack_u64(_now_ms()), db=meta)
                env.sync(True)
            finally:
                env.close()
            try:
                os.link(tmp / "data.mdb", p / "data.mdb")  # fails if another process won the race
            except FileExistsError:
                pass
            fsync_dir(p)
        except lmdb.Error as e:
            raise FlowFileRepositoryError(f"cannot create a FlowFile repository at {p}: {e}", p) from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _remove_stale_creations(self) -> None:
        for d in self.path.glob(".creating-*"):
            try:
                pid = int(d.name.split("-")[1])
                os.kill(pid, 0)
            except ProcessLookupError:
                shutil.rmtree(d, ignore_errors=True)
            except (ValueError, IndexError, PermissionError):
                pass

    def _load_counter(self, txn: lmdb.Transaction, key: bytes, missing: int | None = None) -> int:
        """A u64 meta value; ``missing`` if the key is absent and that is allowed, else corrupt."""
        raw = txn.get(key, db=self._meta)
        if raw is None:
            if missing is not None:
                return missing
            raise RepositoryCorruptError(self.path, f"the meta key {key.decode()!r} is missing")
        try:
            return rec.unpack_u64(raw)
        except rec.RecordError as e:
            raise RepositoryCorruptError(self.path, f"meta key {key.decode()!r}: {e}") from None

    # --- transactions and errors --------------------------------------------------------------

    def _open_dbs(self, env: lmdb.Environment, p: Path, in_place: bool) -> dict:
        """Open the meta sub-database (checking the format version) and the others, by name;
        ``in_place`` as for ``_open_env`` (an older version is then read from a copy)."""
        try:
            self._meta = env.open_db(_META, create=False)
        except lmdb.NotFoundError:
            raise RepositoryCorruptError(
                p, "it is an LMDB environment without the 'meta' sub-database, not a FlowFile repository"
            ) from None
        except lmdb.Error as e:
            raise self._wrap(e, "opening") from e
        with self._read() as txn:
            raw = txn.get(_K_FORMAT, db=self._meta)
        if raw is None or len(raw) != 1:
            raise RepositoryCorruptError(p, "the meta sub-database has no format version")
        if raw[0] in self.UPGRADABLE_VERSIONS:
            if in_place:
                raise _ReadFromCopy(f"has format version {raw[0]} (this release upgrades it to {self.FORMAT_VERSION})")
            self._upgrade(env)
        elif raw[0] != self.FORMAT_VERSION:
            raise UnsupportedFormatVersionError(p, raw[0], self.FORMAT_VERSION)
        dbs = {}
        for name in _DB_NAMES:
            try:
                dbs[name] = env.open_db(name, create=False)
            except lmdb.NotFoundError:
                raise RepositoryCorruptError(p, f"the sub-database {name.decode()!r} is missing") from None
            except lmdb.Error as e:
                raise self._wrap(e, "opening") from e
        return dbs

    def _upgrade(self, env: lmdb.Environment) -> None:
        """Version 1, 2 or 3 to 4: add the sub-databases it lacks (1: the journal, 1 and 2: state,
        all: the provenance outbox), empty, in one transaction."""
        try:
            with env.begin(write=True) as txn:
                for name in (_JOURNAL, _STATE, _OUTBOX):
                    env.open_db(name, txn=txn, create=True)
                txn.put(_K_FORMAT, bytes((self.FORMAT_VERSION,)), db=self._meta)
        except lmdb.Error as e:
            raise self._wrap(e, "upgrading the format") from e

    @staticmethod
    def _walk(env: lmdb.Environment, dbs: list) -> None:
        """Read every key and value of these sub-databases (and so every page they use): raises
        ``lmdb.Error`` if one is not a valid page."""
        with env.begin(write=False) as txn:
            for db in [None, *dbs]:
                for key, value in txn.cursor(db=db):
                    len(key) + len(value)

    def _check_open(self) -> lmdb.Environment:
        if self._closed or self._env is None:
            raise FlowFileRepositoryError(f"FlowFile repository at {self.path} is closed", self.path)
        return self._env

    def _wrap(self, e: lmdb.Error, doing: str) -> FlowFileRepositoryError:
        p = self.path
        if isinstance(e, _CORRUPTION_ERRORS) or (isinstance(e, lmdb.BadTxnError) and doing in _READING):
            return RepositoryCorruptError(p, f"LMDB reports {type(e).__name__} while {doing}: {e}")
        if isinstance(e, lmdb.MapFullError):
            return FlowFileRepositoryError(
                f"FlowFile repository at {p} is full (map size {self._map_size()} bytes) while "
                f"{doing}; raise Settings.flowfile_map_size and restart",
                p,
            )
        if isinstance(e, lmdb.VersionMismatchError):
            return FlowFileRepositoryError(
                f"FlowFile repository at {p}: {e}. Its lock.mdb was made by another LMDB version; "
                "stop every process that uses it (the lock file is then rebuilt) or upgrade flowactors",
                p,
            )
        if isinstance(e, lmdb.ReadersFullError):
            return FlowFileRepositoryError(
                f"FlowFile repository at {p}: all {self.MAX_READERS} reader slots are taken while "
                f"{doing}; too many processes or threads read it at once",
                p,
            )
        return FlowFileRepositoryError(f"FlowFile repository at {p}: LMDB error while {doing}: {e}", p)

    def _map_size(self) -> int | str:
        try:
            return self._env.info()["map_size"] if self._env is not None else "?"
        except lmdb.Error:
            return "?"

    def _record_error(self, e: rec.RecordError, what: str) -> FlowFileRepositoryError:
        if isinstance(e, rec.RecordVersionError):
            return UnsupportedFormatVersionError(self.path, e.found, rec.RECORD_VERSION, what)
        return RepositoryCorruptError(self.path, f"{what}: {e}")

    @contextlib.contextmanager
    def _read(self) -> Iterator[lmdb.Transaction]:
        env = self._check_open()
        try:
            txn = env.begin(write=False)
        except lmdb.Error as e:
            raise self._wrap(e, "reading") from e
        try:
            yield txn
        except lmdb.Error as e:
            raise self._wrap(e, "reading") from e
        finally:
            txn.abort()

    @contextlib.contextmanager
    def _write(self, doing: str) -> Iterator[lmdb.Transaction]:
        """One write transaction under the instance lock: committed on success, aborted (nothing
        written) on any exception."""
        env = self._check_open()
        if self._writes_refused:
            raise FlowFileRepositoryError(f"{self._writes_refused}: {doing} needs write access", self.path)
        with self._lock:
            try:
                txn = env.begin(write=True)
            except lmdb.Error as e:
                raise self._wrap(e, doing) from e
            try:
                yield txn
            except BaseException as e:
                txn.abort()
                if isinstance(e, lmdb.Error):
                    raise self._wrap(e, doing) from e
                raise
            try:
                txn.commit()
            except lmdb.Error as e:
                raise self._wrap(e, doing) from e

    def _prefix(self, queue: str) -> bytes:
        p = self._prefixes.get(queue)
        if p is None:
            p = rec.queue_prefix(queue)
            if len(self._prefixes) > 100_000:
                self._prefixes.clear()
            self._prefixes[queue] = p
        return p

    # --- ids ----------------------------------------------------------------------------------

    def reserve_ids(self, count: int) -> int:
        """Reserve ``count`` one-up FlowFile ids durably and return the first.

        The reservation is its own transaction, committed before any FlowFile uses the ids, so
        after a restart ids continue past the highest ever reserved (ids of a crashed session are
        skipped, never reused)."""
        if type(count) is not int or count < 0:
            raise ValueError(f"count must be a non-negative int, not {count!r}")
        with self._write("reserving ids") as txn:
            first = self._load_counter(txn, _K_NEXT_ID)
            if count:
                txn.put(_K_NEXT_ID, rec.pack_u64(first + count), db=self._meta)
        return first

    def reserve_event_ids(self, count: int) -> int:
        """Reserve ``count`` provenance event ids and return the first: events registered outside
        a session commit (a queue emptied, a replay) take their ids here, as a commit's do."""
        if type(count) is not int or count < 0:
            raise ValueError(f"count must be a non-negative int, not {count!r}")
        with self._write("reserving event ids") as txn:
            return self._take_event_ids(txn, count)

    def raise_event_ids(self, at_least: int) -> int:
        """Make the next event id at least ``at_least`` (a flow's start: past every id the
        provenance repository holds) and return it."""
        with self._write("raising event ids") as txn:
            first = self._load_counter(txn, _K_NEXT_EVENT, missing=0)
            if at_least > first:
                txn.put(_K_NEXT_EVENT, rec.pack_u64(at_least), db=self._meta)
            return max(first, at_least)

    def _take_event_ids(self, txn: lmdb.Transaction, count: int) -> int:
        first = self._load_counter(txn, _K_NEXT_EVENT, missing=0)  # absent: no event yet
        if count:
            txn.put(_K_NEXT_EVENT, rec.pack_u64(first + count), db=self._meta)
        return first

    # --- commit -------------------------------------------------------------------------------

    def begin_run(self) -> int:
        """Number a new run of the flow over this log (``meta`` key ``run``) and return it. A
        commit made for an older run is refused from then on (``commit(run=...)``): processes of
        a run that was replaced (a controller that died, whose executors Ray has not killed yet)
        can no longer write the log a new run recovered from."""
        with self._write("beginning a run") as txn:
            run = self._load_counter(txn, _K_RUN, missing=0) + 1  # absent: no run yet (older release)
            txn.put(_K_RUN, rec.pack_u64(run), db=self._meta)
        return run


    def commit(
        self,
        updates: Sequence[QueuedFlowFile],
        removals: Sequence[str],
        new_claims: Sequence[ResourceClaim] = (),
        events: int = 0,
        run: int | None = None,
        state: StateChange | None = None,
        event_batch: Any = None,
    ) -> int | None:
        """Record one session's changes in one LMDB write transaction (all or nothing).

        ``updates`` are created or changed FlowFiles with their queue; ``removals`` are uuids of
        FlowFiles that left the flow (unknown uuids are ignored, so a retried commit cannot
        decrement twice); ``new_claims`` are resource claims the session wrote, registered with a
        count of 0 (and so released after the next checkpoint) when nothing references them.
        The transaction writes the commit's journal entry, which decides it; claimant counts and
        queue sizes change when the journal is applied, by comparing each FlowFile's previous
        version with the new one (``_apply``). Raises ``ValueError`` (nothing written) when a uuid
        appears twice, ``RunReplacedError`` (nothing written) when ``run`` is given and is no
        longer the log's run (``begin_run``).

        ``events``: how many provenance events the session made. Their ids are reserved in the
        same transaction and the first is returned (None without events), so event ids follow
        the order the log puts commits in: a FlowFile's events are numbered in the order they
        happened, whichever processes made them. ``event_batch``: those events, encoded (an
        ``EncodedBatch``: ``data``, ``count``, ``min_timestamp``, ``max_timestamp``; ``events``
        is then its count), kept in the same transaction in the provenance outbox under their
        first id until the provenance repository takes them (``outbox_entries``,
        ``remove_from_outbox``): a commit's events are as durable as the commit itself.

        ``state``: the session's change of its processor's state, written in the same transaction
        (``StateConflictError``, nothing written, when its ``expected`` version is not the stored one).
        """
        prepared, rkeys, columns = rec.encode_commit(updates, removals, self._prefix)  # errors before writing
        new_ckeys = [rec.claim_key(r) for r in new_claims]
        outbox = None
        if event_batch is not None:
            events = event_batch.count
            outbox = rec.encode_outbox_entry(events, event_batch.min_timestamp, event_batch.max_timestamp,
                                             event_batch.data)
        if not (prepared or rkeys or new_ckeys or events or state):
            self._check_open()
            return None
        first_event = None
        fold = False
        seq = 0
        with self._lock:  # the bookkeeping in commit order: an executor's tasks commit at once
            with self._write("committing") as txn:
                if run is not None and run != (current := self._load_counter(txn, _K_RUN, missing=0)):
                    raise RunReplacedError(self.path, run, current)
                if prepared or rkeys or new_ckeys:
                    seq = self._next_seq(txn)
                    txn.put(rec.pack_u64(seq), rec.encode_journal_entry(len(prepared), columns, rkeys, new_ckeys),
                            db=self._journal, append=True)
                    journal = txn.stat(self._journal)
                    fold = self._long(journal, 2 if self.applied_elsewhere else 1)
                    if self._recent and next(iter(self._recent)) < seq - journal["entries"] + 1:
                        # another process applied some of what this one holds: drop those
                        cur = txn.cursor(db=self._journal)
                        oldest = rec.unpack_u64(cur.key()) if cur.first() else seq
                        self._recent = {s: e for s, e in self._recent.items() if s >= oldest}
                if events:
                    first_event = self._take_event_ids(txn, events)
                    if outbox is not None:
                        txn.put(rec.pack_u64(first_event), outbox, db=self._outbox, append=True)
                if state is not None:
                    self._put_state(txn, state)
            self._commits += 1
            # (more than the bounds are held only while applying fails)
            if seq and not self.applied_elsewhere and len(self._recent) < 2 * self.FOLD_ENTRIES:
                held_updates = sum(len(entry[0]) for entry in self._recent.values())
                if held_updates + len(prepared) <= self.RECENT_UPDATES:
                    self._recent[seq] = (prepared, rkeys, new_ckeys)
        # one application at a time in this process: the others' commits go on (it applies theirs too)
        if fold and time.monotonic() >= self._fold_retry_at and self._applying.acquire(blocking=False):
            try:
                self._fold_after_commit()
            finally:
                self._applying.release()
        return first_event

    def _long(self, journal: dict, factor: int = 1) -> bool:
        """Whether the journal (its ``txn.stat``) has reached ``factor`` times the bounds at
        which it is applied (FOLD_ENTRIES, FOLD_BYTES)."""
        return (journal["entries"] >= factor * self.FOLD_ENTRIES
                or (journal["leaf_pages"] + journal["overflow_pages"]) * journal["psize"] >= factor * self.FOLD_BYTES)

    def apply_if_long(self) -> bool:
        """Apply the journal's first part (``_journal_part``) if the journal has reached the
        bounds at which a commit would apply it (FOLD_ENTRIES, FOLD_BYTES); whether it did (not
        when another process applied it meanwhile). For a process that applies it on behalf of the
        committing ones (``applied_elsewhere``), off their path: it holds the writer lock only to
        write what it worked out before (``_plan_fold``)."""
        with self._read() as txn:
            if not self._long(txn.stat(self._journal)):
                return False
            planned = self._plan_fold(txn)
        with self._write("applying the journal") as txn:
            return self._fold(txn, planned, rest=False) > 0

    def _fold_after_commit(self) -> None:
        """Apply the journal once it is long; the commit is already decided, so an error here is
        logged (the readers, which apply the journal first, report it) rather than raised."""
        try:
            self._settle()
        except FlowFileRepositoryError as e:
            self._fold_retry_at = time.monotonic() + self.FOLD_RETRY_SECONDS
            log.error("%s (commits go on into the journal; applying it is tried again in %d s)",
                      e, self.FOLD_RETRY_SECONDS)

    def _settle(self) -> None:
        """Apply the journal to the tables before reading them (nothing to do when it is empty).

        The net effect of the journal's first part is worked out in a read transaction
        (``_plan_fold``), outside LMDB's writer lock, which every process's commits wait for; the
        write transaction only writes it, then applies what came in meanwhile (``_fold``)."""
        with self._read() as txn:
            planned = self._plan_fold(txn)
        if planned is not None:
            with self._write("applying the journal") as txn:
                self._fold(txn, planned)

    def _journal_part(self, txn: lmdb.Transaction) -> Iterator[tuple[int, list[tuple]]]:
        """The journal in commit order, a part at a time: ``(last sequence, entries)``, each part
        at most FOLD_ENTRIES entries or about FOLD_BYTES, to bound what applying holds in memory.
        Entries this process committed come from ``_recent`` as they were encoded."""
        entries: list[tuple] = []
        held = 0
        seq = 0
        recent = self._recent
        with txn.cursor(db=self._journal) as cur:
            for key, value in cur:
                seq = rec.unpack_u64(key)
                entry = recent.get(seq)
                if entry is None:
                    try:
                        entry = rec.decode_journal_entry(value)
                    except rec.RecordError as e:
                        raise self._record_error(e, f"journal entry {seq}") from None
                entries.append(entry)
                held += len(value)
                if len(entries) >= self.FOLD_ENTRIES or held >= self.FOLD_BYTES:
                    yield seq, entries
                    entries, held = [], 0
        if entries:
            yield seq, entries

    def _plan_fold(self, txn: lmdb.Transaction) -> "_PlannedFold | None":
        """The net effect of the journal's first part as ``txn`` (a read transaction) sees it, to
        be written by ``_fold`` (None: the journal is empty)."""
        with txn.cursor(db=self._journal) as cur:
            if not cur.first():
                return None
            first = rec.unpack_u64(cur.key())
        for last, entries in self._journal_part(txn):
            return _PlannedFold(first, last, self._net_effect(txn, entries))
        return None

    def _fold(self, txn: lmdb.Transaction, planned: "_PlannedFold | None" = None, rest: bool = True) -> int:
        """Apply every journal entry, in commit order, to the tables and empty the journal; return
        the sequence of the last entry applied (0: the journal was empty).

        A FlowFile created and removed between two folds never reaches the ``flowfiles`` and
        ``order`` tables: only each FlowFile's net change is written. A long journal (applying
        failed for a while) is applied a part at a time, to bound the memory it takes.

        ``planned``: the first part's effect, worked out in an earlier read transaction
        (``_plan_fold``). It is written only when the journal still starts with the entry it
        starts with: the tables change only by applying the journal (the swap and queue
        operations apply it first), and applying removes the entries it applied, so the tables
        are still as the plan read them; otherwise it is dropped and the journal applied here.
        With ``rest`` False only the plan is written (when it still holds): the entries after it,
        or all of them, wait for the next application, and nothing is decoded under the lock."""
        seq = 0
        if planned is not None:
            with txn.cursor(db=self._journal) as cur:
                if cur.first() and rec.unpack_u64(cur.key()) == planned.first:
                    self._write_effect(txn, planned.last, planned.effect)
                    while cur.key() and rec.unpack_u64(cur.key()) <= planned.last:
                        cur.delete()
                    seq = planned.last
        if rest:
            for seq, entries in self._journal_part(txn):
                self._apply(txn, seq, entries)
            if seq:
                txn.drop(self._journal, delete=False)
        if not seq:
            return 0
        self._recent = {s: e for s, e in self._recent.items() if s > seq}
        return seq

    def _apply(self, txn: lmdb.Transaction, seq: int, entries: Sequence[tuple], expect_prefix: bytes | None = None) -> None:
        """Write the net effect of ``entries`` (``_net_effect``) in ``txn``."""
        self._write_effect(txn, seq, self._net_effect(txn, entries, expect_prefix))

    def _net_effect(self, txn: lmdb.Transaction, entries: Sequence[tuple],
                    expect_prefix: bytes | None = None) -> "_Effect":
        """The net effect of ``entries`` (``(updates, removal keys, new claim keys)`` each,
        in commit order; updates shaped as ``records.encode_commit`` makes them) on the records,
        the order index, the claimant counts and the queue sizes, from the records as ``txn``
        holds them (it writes nothing, so a read transaction does). With ``expect_prefix`` every
        update must move a stored FlowFile out of that queue (a swap registration).

        Previous records come in one ``getmulti`` call and are only sliced (``records.peek``);
        a FlowFile changed by several entries is followed in memory, so one created and removed
        among them costs no write and no record (``records.update_record`` makes the records of
        the FlowFiles that stay)."""
        ff_db = self._ff
        # each FlowFile as the tables hold it and as the entries so far leave it (None: not
        # there), both shaped as an update (the stored one with its order key in place of a
        # record), in the order the entries name them: uuids grow with time, so the records and
        # index entries below reach the B-trees' right edges in order, not random pages
        stored: dict[bytes, tuple | None] = {}
        update_keys = [[u[0] for u in updates] for updates, _rkeys, _news in entries]
        removed: list[bytes] = []
        for updated, (_updates, rkeys, _news) in zip(update_keys, entries):
            stored.update(dict.fromkeys(updated))
            stored.update(dict.fromkeys(rkeys))
            removed += rkeys
        olds = txn.cursor(db=ff_db).getmulti(list(stored)) if stored else []
        deltas: defaultdict[bytes, int] = defaultdict(int)
        if expect_prefix is None and removed:
            passing = _passing_through(entries, update_keys, removed, {ukey for ukey, _old in olds})
            if passing:
                entries, touched = _without(entries, update_keys, passing)
                deltas.update(dict.fromkeys(touched, 0))
                stored = {ukey: None for ukey in stored if ukey not in passing}
        peek = rec.peek
        queues: defaultdict[bytes, list] = defaultdict(lambda: [0, 0])
        news: set[bytes] = set()
        unknown = 0
        ukey = b""
        try:
            for ukey, old in olds:
                oorder, oprefix, ockey, osize = peek(old)
                stored[ukey] = (ukey, oorder + ukey, None, oprefix, ockey, osize)
            state = dict(stored)   # the same keys in the same order
            for updates, rkeys, new_ckeys in entries:
                news.update(new_ckeys)
                for u in updates:
                    ukey, _ff, _queue, prefix, ckey, size = u
                    prev = state[ukey]
                    if prev is None:
                        if expect_prefix is not None:
                            raise _CallerError(f"FlowFile {rec.key_uuid(ukey)} is not in the repository")
                        if ckey:
                            deltas[ckey] += 1
                    else:
                        _ukey, _ff, _queue, pprefix, pckey, psize = prev
                        if expect_prefix is not None and pprefix != expect_prefix:
                            raise _CallerError(
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
                for ukey in rkeys:
                    prev = state[ukey]
                    if prev is None:
                        unknown += 1
                        continue
                    _ukey, _ff, _queue, pprefix, pckey, psize = prev
                    if pckey:
                        deltas[pckey] -= 1
                    qd = queues[pprefix]
                    qd[0] -= 1
                    qd[1] -= psize
                    state[ukey] = None
        except rec.RecordError as e:
            raise self._record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
        record_puts = []
        index_puts = []
        index_dels = []
        removed = []
        record_of = rec.update_record
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
            raise self._record_error(e, f"journal entry holding FlowFile {rec.key_uuid(ukey)}") from None
        return _Effect(removed, index_dels, record_puts, index_puts, deltas, news, queues, unknown)

    def _write_effect(self, txn: lmdb.Transaction, seq: int, effect: "_Effect") -> None:
        """Write ``effect`` (``_net_effect``) in ``txn``: records and index entries in ``putmulti``
        calls, in key order (uuids grow with time, so they reach the B-trees' right edges); a
        claim count at 0 afterwards puts its claim on the destructible list under ``seq``."""
        removed, index_dels, record_puts, index_puts, deltas, news, queues, unknown = effect
        self._unknown_removals += unknown
        ff_db, order_db = self._ff, self._order
        delete = txn.delete
        for k in removed:
            delete(k, db=ff_db)
        for k in index_dels:
            delete(k, db=order_db)  # a missing entry is recreated by rebuild_claimant_counts
        if record_puts:
            txn.cursor(db=ff_db).putmulti(record_puts)
        if index_puts:
            txn.cursor(db=order_db).putmulti(index_puts)
        self._apply_claims(txn, seq, deltas, news)
        self._apply_queues(txn, queues)

    def _apply_claims(self, txn: lmdb.Transaction, seq: int, deltas: dict, new_ckeys: Iterable[bytes]) -> None:
        """Apply claimant count changes; a count at 0 afterwards puts the claim on the destructible
        list under ``seq`` (a claim the changes referenced and let go again included, and a new
        claim nothing references). A count that would go below 0 was damaged (too low): the
        commits are decided, so the claim is kept referenced, at 1, never released before the next
        start-up's ``rebuild_claimant_counts`` recounts it, and the damage is logged."""
        for ckey in new_ckeys:
            deltas.setdefault(ckey, 0)
        claims_db, dest_db = self._claims, self._destructible
        for ckey, d in deltas.items():
            raw = txn.get(ckey, db=claims_db)
            if raw is None:
                count = pending = 0
            else:
                count, pending = self._claim_value(raw, ckey)
            n = count + d
            if n < 0:
                self._damaged(f"the claimant count of resource claim {_claim_name(ckey)} would become {n} "
                              f"(stored {count}, change {d}); the claim is kept")
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

    def _damaged(self, problem: str) -> None:
        self._damaged_counts += 1
        log_damaged_count(self.path, problem)

    def _claim_value(self, raw: bytes, ckey: bytes) -> tuple[int, int]:
        try:
            return rec.unpack_claim_value(raw)
        except rec.RecordError as e:
            raise RepositoryCorruptError(self.path, f"claim {_claim_name(ckey)}: {e}") from None

    def _apply_queues(self, txn: lmdb.Transaction, queues: dict) -> None:
        """Change the count and size of each queue (keyed by its prefix) by the given amounts."""
        db = self._queues
        for prefix, (dc, ds) in queues.items():
            if dc == 0 and ds == 0:
                continue
            qb = prefix[2:]
            raw = txn.get(qb, db=db)
            count, size = (0, 0) if raw is None else self._queue_value(raw, qb)
            count += dc
            size += ds
            if count < 0:
                self._damaged(f"the FlowFile count of queue {qb.decode(errors='replace')!r} would become {count}; "
                              f"it is set to 0")
                count = 0
            if count == 0:
                if raw is not None:
                    txn.delete(qb, db=db)
            else:
                txn.put(qb, rec.pack_queue_value(count, size), db=db)

    def _queue_value(self, raw: bytes, qb: bytes) -> tuple[int, int]:
        try:
            return rec.unpack_queue_value(raw)
        except rec.RecordError as e:
            raise RepositoryCorruptError(self.path, f"size of queue {qb.decode(errors='replace')!r}: {e}") from None

    # --- swap files ---------------------------------------------------------------------------

    # --- processor state ----------------------------------------------------------------------

    # --- the provenance outbox ----------------------------------------------------------------

    def outbox_entries(self, max_bytes: int = 64 * 1024**2) -> list[tuple[int, tuple[int, int, int, bytes] | str]]:
        """Commits' provenance events the provenance repository has not taken yet (``commit``'s
        ``event_batch``), in id order, about ``max_bytes`` at most (always at least one):
        ``(first id, (count, min_timestamp, max_timestamp, batch))``, or ``(first id, problem)``
        for a damaged entry (its events cannot be read). The journal is not applied for this: the
        outbox is read as it is."""
        found: list = []
        size = 0
        with self._read() as txn, txn.cursor(db=self._outbox) as cur:
            for key, value in cur:
                first = rec.unpack_u64(key)
                try:
                    found.append((first, rec.decode_outbox_entry(value)))
                except rec.RecordError as e:
                    found.append((first, f"{self.path}: the provenance outbox entry of event id {first} is damaged: {e}"))
                size += len(value)
                if size >= max_bytes:
                    break
        return found

    def remove_from_outbox(self, first_ids: Iterable[int]) -> int:
        """Delete the outbox entries of these first event ids (the provenance repository has
        them); returns how many were there."""
        with self._write("removing events the provenance repository took") as txn:
            return sum(txn.delete(rec.pack_u64(first), db=self._outbox) for first in first_ids)

    def get_state(self, component_id: str) -> StateMap:
        """The stored state of a processor (version -1 and no values when it has none)."""
        with self._read() as txn:
            raw = txn.get(self._state_key(component_id), db=self._state)
        return self._state_map(raw, component_id)

    def state_ids(self) -> list[str]:
        """The component ids that have stored state, without reading it (a damaged one included)."""
        with self._read() as txn:
            return [key.decode() for key in txn.cursor(db=self._state).iternext(keys=True, values=False)]

    def _put_state(self, txn: lmdb.Transaction, change: StateChange) -> None:
        """Check ``change`` against the stored version and write it. Only the stored value's
        header is read: a value whose map is damaged is replaced by any write, and one whose
        header is damaged by a write that does not compare versions (set, clear: how it is
        repaired), its version starting over."""
        key = self._state_key(change.component_id)
        raw = txn.get(key, db=self._state)
        try:
            current = rec.state_version(raw) if raw is not None else -1
        except rec.RecordError as e:
            if change.expected is not None or isinstance(e, rec.RecordVersionError):  # never downgrade a newer one
                raise self._record_error(e, f"the state of {change.component_id}") from None
            current = -1
        stored = change.applied_to(StateMap(current))
        if stored is None:
            raise StateConflictError(self.path, change.component_id, change.expected, current)
        try:
            value = rec.encode_state(stored.version, stored.values)
        except ValueError as e:
            raise _CallerError(f"{change.component_id}: {e}") from None
        txn.put(key, value, db=self._state)

    @staticmethod
    def _state_key(component_id: str) -> bytes:
        key = component_id.encode()
        if not key or len(key) > rec.MAX_KEY_SIZE:
            raise ValueError(f"a component id of 1 to {rec.MAX_KEY_SIZE} UTF-8 bytes keys processor state, "
                             f"not {component_id!r}")
        return key

    def _state_map(self, raw: bytes | None, component_id: str) -> StateMap:
        if raw is None:
            return StateMap()
        try:
            version, values = rec.decode_state(raw)
        except rec.RecordError as e:
            raise self._record_error(e, f"the state of {component_id}") from None
        return StateMap.of(version, values)

    def register_swap_file(
        self,
        queue: str,
        location: str,
        count: int,
        size: int,
        flowfiles: Sequence[FlowFile] | None = None,
    ) -> None:
        """Record that ``queue`` swapped ``count`` FlowFiles (``size`` bytes) out to ``location``.

        The FlowFiles' records stay in the repository, so their claimant counts stay right and a
        lost swap file loses nothing. With ``flowfiles`` given (the FlowFiles written to the swap
        file), they move in the same transaction to the queue ``swap:<location>``, which
        ``recover()`` skips, so that a restart does not count them twice; each must currently be
        in ``queue`` (else ``ValueError``, nothing written).
        """
        prepared = rec.encode_swap_registration(location, count, flowfiles, self._prefix)
        skey = location.encode()
        with self._write("registering a swap file") as txn:
            if txn.get(skey, db=self._swap) is not None:
                raise ValueError(f"swap file {location} is already registered")
            self._fold(txn)
            seq = self._next_seq(txn)
            self._apply(txn, seq, [(prepared, [], [])], self._prefix(queue) if flowfiles is not None else None)
            txn.put(skey, rec.encode_swap_entry(queue, count, size, seq, _now_ms()), db=self._swap)

    def unregister_swap_file(self, location: str) -> int:
        """Forget a swap file (swapped back in, or its queue was emptied).

        Records still in ``swap:<location>`` move back to the swap file's queue in the same
        transaction, keeping their FIFO position; returns how many moved. An unknown location is
        ignored (returns 0), so a retried call is harmless."""
        skey = location.encode()
        with self._write("unregistering a swap file") as txn:
            self._fold(txn)
            raw = txn.get(skey, db=self._swap)
            if raw is None:
                return 0
            moved = self._unregister_in(txn, location, self._prefix(self._swap_entry(raw, location)["queue"]))
            self._next_seq(txn)
        return moved

    def rename_queue(self, old: str, new: str) -> int:
        """Move every FlowFile of queue ``old`` to queue ``new``, each keeping its FIFO position,
        in one transaction: how a connection whose id changed keeps what was queued under the
        former one. The swap files ``old`` registered are unregistered in the same transaction
        (as ``unregister_swap_file``: their records join ``new`` in their FIFO position), since
        each file's header names ``old``; the files are then orphans, deleted at start-up.
        Returns how many records moved, swapped ones included."""
        target = self._prefix(new)
        with self._write("renaming a queue") as txn:
            self._fold(txn)
            moved = self._move_records(txn, self._prefix(old), target)
            for key, raw in list(txn.cursor(db=self._swap)):
                if self._swap_entry(raw, key.decode())["queue"] == old:
                    moved += self._unregister_in(txn, key.decode(), target)
            self._next_seq(txn)
        return moved

    def _next_seq(self, txn: lmdb.Transaction) -> int:
        """Take the next change sequence number in ``txn`` (stored at once; the transaction
        decides whether it counts)."""
        seq = self._load_counter(txn, _K_SEQ) + 1
        txn.put(_K_SEQ, rec.pack_u64(seq), db=self._meta)
        return seq

    def _unregister_in(self, txn: lmdb.Transaction, location: str, target: bytes) -> int:
        """Within ``txn``: forget swap file ``location``, its records still in the log moving to
        the queue of prefix ``target`` in their FIFO position; how many moved."""
        moved = self._move_records(txn, self._prefix(SWAP_QUEUE_PREFIX + location), target)
        txn.delete(location.encode(), db=self._swap)
        return moved

    def _move_records(self, txn: lmdb.Transaction, source: bytes, target: bytes) -> int:
        """Move the records of the queue of prefix ``source`` to that of ``target`` (FIFO position
        kept, counts and sizes moved with them); how many moved."""
        okeys = []
        cur = txn.cursor(db=self._order)
        if cur.set_range(source):
            for okey in cur.iternext(keys=True, values=False):
                if not okey.startswith(source):
                    break
                okeys.append(okey)
        cur.close()
        moved_size = 0
        for okey in okeys:
            ukey = okey[-16:]
            value = txn.get(ukey, db=self._ff)
            if value is None:
                raise RepositoryCorruptError(
                    self.path, f"the order index names FlowFile {rec.key_uuid(ukey)}, which has no record"
                )
            try:
                moved_size += rec.peek(value)[3]
                new_value, order = rec.with_queue(value, target)
            except rec.RecordError as e:
                raise self._record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
            txn.put(ukey, new_value, db=self._ff)
            txn.delete(okey, db=self._order)
            txn.put(order + ukey, b"", db=self._order)
        if okeys:
            self._apply_queues(txn, {source: [-len(okeys), -moved_size], target: [len(okeys), moved_size]})
        return len(okeys)

    def swap_files(self) -> list[dict]:
        """Registered swap files, oldest first: ``{queue, location, count, size}``."""
        out = []
        with self._read() as txn:
            for key, value in txn.cursor(db=self._swap):
                location = key.decode()
                e = self._swap_entry(value, location)
                out.append(
                    (e["seq"], {"queue": e["queue"], "location": location, "count": e["count"], "size": e["size"]})
                )
        out.sort(key=lambda x: x[0])
        return [d for _, d in out]

    def _swap_entry(self, raw: bytes, location: str) -> dict:
        try:
            return rec.decode_swap_entry(raw)
        except rec.RecordError as e:
            raise self._record_error(e, f"swap registry entry {location}") from None

    # --- checkpoint ---------------------------------------------------------------------------

    def _sync(self) -> None:
        """Flush every committed transaction to disk (``fdatasync`` of data.mdb)."""
        if self._writes_refused:
            raise FlowFileRepositoryError(f"{self._writes_refused}: a checkpoint needs write access", self.path)
        try:
            self._check_open().sync(True)
        except lmdb.Error as e:
            raise self._wrap(e, "syncing") from e

    def checkpoint(self) -> list[ResourceClaim]:
        """Make every commit so far durable, then release the claims whose count reached 0 in a
        commit before this checkpoint started and is still 0.

        Returns the released resource claims, for the content repository to archive or delete.
        Each is returned once, except that after a power loss with ``always_sync=False`` the
        release itself may be undone and a claim returned again: deleting must tolerate a claim
        that is already gone. Claims whose count reaches 0 while the checkpoint runs wait for
        the next one.
        """
        started = time.time()
        t0 = time.perf_counter()
        self._settle()
        with self._read() as txn:
            boundary = self._load_counter(txn, _K_SEQ)
        self._sync()
        released: list[ResourceClaim] = []
        with self._write("checkpointing") as txn:
            cur = txn.cursor(db=self._destructible)
            due = []
            for dkey in cur.iternext(keys=True, values=False):
                try:
                    seq, ckey = rec.destructible_fields(dkey)
                except rec.RecordError as e:
                    raise RepositoryCorruptError(self.path, f"destructible list: {e}") from None
                if seq > boundary:
                    break
                due.append((dkey, seq, ckey))
            cur.close()
            for dkey, seq, ckey in due:
                txn.delete(dkey, db=self._destructible)
                raw = txn.get(ckey, db=self._claims)
                if raw is None:
                    continue
                count, pending = self._claim_value(raw, ckey)
                if count == 0 and pending == seq:
                    try:
                        claim = rec.claim_from_key(ckey)
                    except rec.RecordError as e:
                        raise RepositoryCorruptError(self.path, f"claim on the destructible list: {e}") from None
                    txn.delete(ckey, db=self._claims)
                    released.append(claim)
            duration = time.perf_counter() - t0
            txn.put(
                _K_CHECKPOINT,
                rec.pack_u64(int(started * 1000)) + rec.pack_u64(int(duration * 1e6)) + rec.pack_u64(len(released)),
                db=self._meta,
            )
        self._checkpoints += 1
        self._last_checkpoint = {"time": started, "duration": time.perf_counter() - t0, "released": len(released)}
        return released

    # --- recovery -----------------------------------------------------------------------------

    def recover(
        self, batch_size: int = 10_000, *, include_swapped: bool = False
    ) -> Iterator[tuple[str, list[FlowFile]]]:
        """Stream ``(queue_id, batch)`` for every queue, each queue in FIFO order
        (queue_date, queue_index, id), at most ``batch_size`` FlowFiles a batch; consecutive
        batches of one queue continue its order.

        Reads one short transaction per batch, never the whole repository at once (NIFI-7557);
        run it at start-up, before sessions commit (each batch sees the latest commits).
        FlowFiles in swap files (queues ``swap:<location>``) are skipped unless
        ``include_swapped``: their queues learn of them from ``swap_files()``."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        return self._scan(b"", None, batch_size, include_swapped)

    def iter_queue(self, queue: str, batch_size: int = 10_000) -> Iterator[list[FlowFile]]:
        """Stream one queue's FlowFiles in FIFO order (e.g. ``swap:<location>`` to swap in)."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        prefix = self._prefix(queue)
        return (b for _q, b in self._scan(prefix, rec.prefix_successor(prefix), batch_size, True))

    def _scan(
        self, start: bytes, stop: bytes | None, batch_size: int, include_swapped: bool
    ) -> Iterator[tuple[str, list[FlowFile]]]:
        swap_tag = SWAP_QUEUE_PREFIX.encode()
        resume: bytes | None = start
        while resume is not None:
            self._settle()
            queue = ""
            batch: list[FlowFile] = []
            claims: dict = {}
            with self._read() as txn:
                cur = txn.cursor(db=self._order)
                ok = cur.set_range(resume)
                resume = None
                prefix = b""
                while ok:
                    okey = cur.key()
                    if stop is not None and okey >= stop:
                        break
                    if not (prefix and okey.startswith(prefix)):
                        p = okey[: len(okey) - rec.INDEX_TAIL]
                        if not include_swapped and p[2:].startswith(swap_tag):
                            ok = cur.set_range(rec.prefix_successor(p))
                            continue
                        if batch:
                            resume = okey
                            break
                        prefix = p
                    if len(batch) >= batch_size:
                        resume = okey
                        break
                    queue, ff = self._indexed(txn, okey, claims)
                    batch.append(ff)
                    ok = cur.next()
                cur.close()
            if batch:
                yield queue, batch

    def _indexed(self, txn: lmdb.Transaction, okey: bytes, claims: dict) -> tuple[str, FlowFile]:
        """``(queue, FlowFile)`` of the record an order-index key names, checked."""
        ukey = okey[-16:]
        value = txn.get(ukey, db=self._ff)
        if value is None:
            raise RepositoryCorruptError(
                self.path, f"the order index names FlowFile {rec.key_uuid(ukey)}, which has no record")
        try:
            return rec.decode_record(ukey, value, claims)
        except rec.RecordError as e:
            raise self._record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None

    def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int) -> tuple[list[FlowFile], bytes | None]:
        """Up to ``count`` FlowFiles of ``queue`` in FIFO order whose order-index keys lie in
        ``[start, stop)`` (``None``: from the queue's first, to its last), and the key to start
        the next page at (``None``: the range is done). One short read transaction: a queue pages
        its FlowFiles in from here instead of holding them all."""
        if count < 1:
            raise ValueError("count must be at least 1")
        prefix = self._prefix(queue)
        stop = rec.prefix_successor(prefix) if stop is None else stop
        out: list[FlowFile] = []
        claims: dict = {}
        self._settle()
        with self._read() as txn:
            cur = txn.cursor(db=self._order)
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
        prefix = self._prefix(queue)
        self._settle()
        with self._read() as txn:
            cur = txn.cursor(db=self._order)
            found = cur.prev() if cur.set_range(rec.prefix_successor(prefix)) else cur.last()
            key = bytes(cur.key()) if found else b""
            return key if key.startswith(prefix) else None

    # --- queries ------------------------------------------------------------------------------

    def queue_counts(self) -> dict[str, int]:
        """FlowFiles per queue id (swapped-out ones under ``swap:<location>``)."""
        return {q: c for q, (c, _s) in self.queue_sizes().items()}

    def queue_sizes(self) -> dict[str, tuple[int, int]]:
        """``(FlowFile count, content bytes)`` per queue id."""
        out = {}
        self._settle()
        with self._read() as txn:
            for key, value in txn.cursor(db=self._queues):
                out[key.decode()] = self._queue_value(value, key)
        return out

    def _claim(self, resource: ResourceClaim) -> tuple[int, int] | None:
        ckey = rec.claim_key(tuple(resource))
        self._settle()
        with self._read() as txn:
            raw = txn.get(ckey, db=self._claims)
        return None if raw is None else self._claim_value(raw, ckey)

    def claimant_count(self, resource: ResourceClaim) -> int:
        """How many FlowFiles in the repository reference ``resource``."""
        v = self._claim(resource)
        return 0 if v is None else v[0]

    def is_referenced(self, resource: ResourceClaim) -> bool:
        """Whether the content repository must keep ``resource``: a FlowFile references it, or it
        waits for the next checkpoint to be released. Orphan cleanup deletes only the others."""
        v = self._claim(resource)
        return v is not None and (v[0] > 0 or v[1] != 0)

    def pending_release(self) -> list[ResourceClaim]:
        """Claims without claimant that the next checkpoint releases (or the one after), oldest first."""
        out = []
        self._settle()
        with self._read() as txn:
            for dkey in txn.cursor(db=self._destructible).iternext(values=False):
                try:
                    out.append(rec.claim_from_key(rec.destructible_fields(dkey)[1]))
                except rec.RecordError as e:
                    raise RepositoryCorruptError(self.path, f"destructible list: {e}") from None
        return out

    def get(self, uuid: str) -> QueuedFlowFile | None:
        """The stored FlowFile with this uuid and its queue, or None."""
        ukey = rec.uuid_key(uuid)
        self._settle()
        with self._read() as txn:
            value = txn.get(ukey, db=self._ff)
        if value is None:
            return None
        try:
            queue, ff = rec.decode_record(ukey, value)
        except rec.RecordError as e:
            raise self._record_error(e, f"record of FlowFile {uuid}") from None
        return QueuedFlowFile(ff, queue)

    # --- start-up repair ----------------------------------------------------------------------

    def rebuild_claimant_counts(self, max_reported: int = 1000) -> dict:
        """Recompute every claimant count (and each queue's size, the order index and the next
        id) from the FlowFile records, fix what differs, and report it.

        Streams the records in one write transaction (memory: one counter per resource claim and
        per queue). Run at start-up, before the flow starts, against leaked or double counts
        (NIFI-8727, NIFI-6110, NIFI-1527). A count found too high drops to 0 and the claim waits
        for the next checkpoint like any other unreferenced claim."""
        t0 = time.perf_counter()
        counts: dict[bytes, int] = {}
        sizes: dict[bytes, list] = {}
        max_id = 0
        n = 0
        index_missing = 0
        with self._write("rebuilding claimant counts") as txn:
            self._fold(txn)
            seq = self._next_seq(txn)
            ukey = b""
            try:
                for ukey, value in txn.cursor(db=self._ff):
                    order, prefix, ckey, size = rec.peek(value)
                    n += 1
                    if ckey:
                        counts[ckey] = counts.get(ckey, 0) + 1
                    s = sizes.get(prefix)
                    if s is None:
                        s = sizes[prefix] = [0, 0]
                    s[0] += 1
                    s[1] += size
                    fid = rec.order_id(order)
                    if fid > max_id:
                        max_id = fid
                    if txn.get(order + ukey, db=self._order) is None:
                        index_missing += 1
            except rec.RecordError as e:
                raise self._record_error(e, f"record of FlowFile {rec.key_uuid(ukey)}") from None
            sizes = {prefix[2:]: s for prefix, s in sizes.items()}
            index_rebuilt = index_missing > 0 or txn.stat(self._order)["entries"] != n
            if index_rebuilt:
                txn.drop(self._order, delete=False)
                for ukey, value in txn.cursor(db=self._ff):
                    txn.put(rec.peek(value)[0] + ukey, b"", db=self._order)

            # claims: compare, collect the fixes, then write them (no writes while iterating)
            changes = []
            for ckey, raw in txn.cursor(db=self._claims):
                count, pending = self._claim_value(raw, ckey)
                actual = counts.pop(ckey, 0)
                if actual > 0:
                    if count != actual or pending:
                        changes.append((ckey, count, pending, actual))
                elif (
                    count != 0
                    or not pending
                    or txn.get(rec.destructible_key(pending, ckey), db=self._destructible) is None
                ):
                    changes.append((ckey, count, pending, 0))
            for ckey, actual in counts.items():
                changes.append((ckey, 0, 0, actual))
            differences: list[dict] = []
            fixed = 0
            for ckey, count, pending, actual in changes:
                if pending:
                    txn.delete(rec.destructible_key(pending, ckey), db=self._destructible)
                if actual > 0:
                    txn.put(ckey, rec.pack_claim_value(actual, 0), db=self._claims)
                else:
                    txn.put(ckey, rec.pack_claim_value(0, seq), db=self._claims)
                    txn.put(rec.destructible_key(seq, ckey), b"", db=self._destructible)
                if count != actual:
                    fixed += 1
                    if len(differences) < max_reported:
                        differences.append({"claim": _claim_or_key(ckey), "recorded": count, "actual": actual})
            # destructible entries whose claim is not pending under that sequence are stale
            stale = []
            for dkey in txn.cursor(db=self._destructible).iternext(values=False):
                dseq, ckey = rec.destructible_fields(dkey)
                raw = txn.get(ckey, db=self._claims)
                if raw is None or self._claim_value(raw, ckey) != (0, dseq):
                    stale.append(dkey)
            for dkey in stale:
                txn.delete(dkey, db=self._destructible)

            queues_fixed = {}
            stored = {qb: self._queue_value(raw, qb) for qb, raw in txn.cursor(db=self._queues)}
            for qb in set(stored) | set(sizes):
                want = tuple(sizes.get(qb, (0, 0)))
                have = stored.get(qb, (0, 0))
                if want != have:
                    queues_fixed[qb.decode(errors="replace")] = {"recorded": have, "actual": want}
                    if want[0] == 0:
                        txn.delete(qb, db=self._queues)
                    else:
                        txn.put(qb, rec.pack_queue_value(*want), db=self._queues)

            next_id = self._load_counter(txn, _K_NEXT_ID)
            next_id_raised = max_id >= next_id
            if next_id_raised:
                txn.put(_K_NEXT_ID, rec.pack_u64(max_id + 1), db=self._meta)
            claims_total = txn.stat(self._claims)["entries"]
        return {
            "flowfiles": n,
            "claims": claims_total,
            "fixed": fixed,
            "differences": differences,
            "stale_destructible": len(stale),
            "queues_fixed": queues_fixed,
            "index_rebuilt": index_rebuilt,
            "next_id_raised": next_id_raised,
            "duration": time.perf_counter() - t0,
        }

    # --- statistics, closing ------------------------------------------------------------------

    def stats(self) -> dict:
        env = self._check_open()
        self._settle()
        with self._read() as txn:
            flowfiles = txn.stat(self._ff)["entries"]
            claims = txn.stat(self._claims)["entries"]
            pending = txn.stat(self._destructible)["entries"]
            swap = txn.stat(self._swap)["entries"]
            queues = txn.stat(self._queues)["entries"]
            outbox = txn.stat(self._outbox)["entries"]
            seq = self._load_counter(txn, _K_SEQ)
            next_id = self._load_counter(txn, _K_NEXT_ID)
            next_event_id = self._load_counter(txn, _K_NEXT_EVENT, missing=0)
            cp = txn.get(_K_CHECKPOINT, db=self._meta)
        info = env.info()
        psize = env.stat()["psize"]
        last = self._last_checkpoint
        if last is None and cp is not None and len(cp) == 24:
            last = {
                "time": rec.unpack_u64(cp[:8]) / 1000,
                "duration": rec.unpack_u64(cp[8:16]) / 1e6,
                "released": rec.unpack_u64(cp[16:]),
            }
        return {
            "path": str(self.path),
            "always_sync": self.always_sync,
            "flowfiles": flowfiles,
            "queues": queues,
            "claims": claims,
            "pending_release": pending,
            "swap_files": swap,
            "provenance_outbox": outbox,
            "commit_seq": seq,
            "commits": self._commits,
            "checkpoints": self._checkpoints,
            "unknown_removals": self._unknown_removals,
            "damaged_counts": self._damaged_counts,
            "next_id": next_id,
            "next_event_id": next_event_id,
            "last_checkpoint_time": last["time"] if last else None,
            "last_checkpoint_duration": last["duration"] if last else None,
            "last_checkpoint_released": last["released"] if last else None,
            "map_size": info["map_size"],
            "map_used": (info["last_pgno"] + 1) * psize,
            "file_size": (self.path / "data.mdb").stat().st_size,
            "readers": info["num_readers"],
        }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Apply the journal and close the environment (idempotent). Commits are already on disk
        (or in the page cache with ``always_sync=False``); close does not sync: call
        ``checkpoint()`` for that."""
        with self._lock:
            if self._env is not None and self._journal is not None and not self._closed:
                try:
                    self._settle()
                except FlowFileRepositoryError as e:  # the journal stays; the next open applies it
                    log.error("%s", e)
            env, self._env = self._env, None
            if env is not None:
                env.close()
            self._closed = True
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)
                self._copy = None
        with _open_lock:
            ref = _open_paths.get(self._key)
            if ref is not None and ref() in (self, None):
                del _open_paths[self._key]

    def __enter__(self) -> "WriteAheadFlowFileRepository":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<WriteAheadFlowFileRepository {self.path} {state} always_sync={self.always_sync}>"


#: an update's claim key (``records.encode_commit``'s shape)
_CLAIM_KEY = itemgetter(4)


class _Effect(NamedTuple):
    """What applying journal entries writes (``WriteAheadFlowFileRepository._net_effect``)."""
    removed: list[bytes]            # records to delete
    index_dels: list[bytes]         # order index entries to delete
    record_puts: list[tuple]        # (uuid key, record)
    index_puts: list[tuple]         # (order key, b"")
    deltas: dict                    # claim key -> change of its claimant count
    news: set[bytes]                # claims the entries created
    queues: dict                    # queue prefix -> [count change, size change]
    unknown: int                    # removals of FlowFiles not in the repository


class _PlannedFold(NamedTuple):
    """The journal's entries ``first`` to ``last`` and their ``effect``, worked out before the
    write transaction that applies them (``WriteAheadFlowFileRepository._fold``)."""
    first: int
    last: int
    effect: _Effect


def _passing_through(entries: Sequence[tuple], update_keys: list[list[bytes]], removed: list[bytes],
                     in_tables: set[bytes]) -> set[bytes]:
    """The FlowFiles that ``entries`` create and then remove: not ``in_tables`` before them,
    updated one or more times, then removed once and never updated again. They leave nothing in
    the records, the order index, the queue sizes or the claimant counts (each claim and queue
    they took they gave back), so applying the entries can skip them; in a flow of short-lived
    FlowFiles that is nearly all of them (docs/performance.md). Found with set operations, not a
    Python step a FlowFile. (A FlowFile removed twice is not one of them: its second removal is
    an unknown one, which ``_apply`` counts.)"""
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


def _without(entries: Sequence[tuple], update_keys: list[list[bytes]],
             passing: set[bytes]) -> tuple[list[tuple], set[bytes]]:
    """``entries`` without the FlowFiles of ``passing``, and the claim keys those referenced (their
    counts must still be looked at: a claim with no other claimant becomes destructible)."""
    kept: list[tuple] = []
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


def _claim_name(ckey: bytes) -> str:
    try:
        return "/".join(rec.claim_from_key(ckey))
    except rec.RecordError:
        return ckey.hex()


def _claim_or_key(ckey: bytes) -> ResourceClaim | str:
    try:
        return rec.claim_from_key(ckey)
    except rec.RecordError:
        return ckey.hex()
