"""Opening the FlowFile log's LMDB environment: creating an empty one atomically, checking what
is found (a directory, a whole file, the format version, every sub-database), upgrading an older
format in place, and the read-only open that writes nothing at all.

``open_environment`` returns a ``LogEnvironment`` or raises the repository's errors: a damaged
log gives ``RepositoryCorruptError``, one of a newer release ``UnsupportedFormatVersionError``,
each naming the directory. Formats: docs/formats/flowfile-repository.md ("Reading without
writing" for the read-only open).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import lmdb

from repositories.flowfile import records as rec
from repositories.flowfile.environment import (
    DB_NAMES,
    JOURNAL,
    K_CREATED,
    K_FORMAT,
    K_NEXT_ID,
    K_SEQ,
    MAX_DBS,
    MAX_READERS,
    META,
    OUTBOX,
    STATE,
    Db,
    LogEnvironment,
    SubDatabases,
    lmdb_error,
    load_counter,
    reading,
)
from repositories.flowfile.errors import FlowFileRepositoryError, RepositoryCorruptError, UnsupportedFormatVersionError
from repositories.fsutil import fsync_dir

log = logging.getLogger(__name__)

#: On-disk format of the whole environment (meta key ``format_version``).
FORMAT_VERSION = 4
#: Format versions opened and upgraded in place (1: no journal sub-database, 2: no state,
#: 3: no provenance outbox).
UPGRADABLE_VERSIONS = (1, 2, 3)


class _ReadFromCopy(Exception):
    """Opening read-only: the log cannot be read as it lies on disk (the message says why)."""


def open_environment(path: Path, *, always_sync: bool, map_size: int, create: bool,
                     readonly: bool) -> LogEnvironment:
    """The log's environment at ``path``, created empty when absent and ``create`` (never when
    ``readonly``). ``readonly``: see ``_open_readonly``; the caller then brings a private copy
    up to date (``LogEnvironment.copy``) and refuses writes."""
    if path.exists() and not path.is_dir():
        raise FlowFileRepositoryError(
            f"FlowFile repository path {path} exists but is not a directory; point the "
            "repository at a directory",
            path,
        )
    data = path / "data.mdb"
    if not data.exists():
        if readonly:
            raise FlowFileRepositoryError(
                f"no FlowFile repository at {path} ({data} does not exist); check the repository directory", path)
        if not create:
            raise FlowFileRepositoryError(
                f"no FlowFile repository at {path} ({data} does not exist) and create=False; "
                "check the repository directory, or open with create=True to start empty",
                path,
            )
        _initialize(path, map_size)
    file_size = data.stat().st_size
    if file_size == 0:
        raise RepositoryCorruptError(path, f"{data} is empty (0 bytes); it was truncated")
    if readonly:
        return _open_readonly(path, always_sync, map_size, file_size)
    _remove_stale_creations(path)
    return _open_in(path, path, always_sync, map_size, file_size)


def _open_readonly(path: Path, always_sync: bool, map_size: int, file_size: int) -> LogEnvironment:
    """Open without writing a byte: LMDB ``readonly`` and ``lock=False`` (no ``lock.mdb`` reader
    slot). Without the lock file LMDB cannot tell a writer which pages a reader still uses, so
    this is only safe while nobody writes: the caller holds the repository lock shared
    (``repositories.lock``), which every writer of the log (a running flow, the tools that
    change a stopped one) holds exclusively. A log that cannot be read as it lies - commits
    not yet applied to the tables (its flow did not stop cleanly), an older format version, a
    file shorter than its last page - is copied to a private temporary directory, opened there
    (and upgraded) and returned with its ``copy`` set, for the caller to apply its journal; the
    folder is never touched. Damage and unsupported versions give the same errors as a
    writable open."""
    try:
        return _open_in(path, path, always_sync, map_size, file_size, in_place=True)
    except _ReadFromCopy as why:
        copy = Path(tempfile.mkdtemp(prefix="flowactors-readonly-log-"))
        log.info("FlowFile repository at %s is read from a private copy (%s): nothing in it is changed", path, why)
        try:
            try:
                shutil.copyfile(path / "data.mdb", copy / "data.mdb")
            except OSError as e:
                raise FlowFileRepositoryError(
                    f"FlowFile repository at {path} {why}, so reading it without changing it needs a "
                    f"private copy, which could not be made in {copy.parent}: {e}; open it with write "
                    f"access (start the flow) instead", path) from None
            environment = _open_in(path, copy, always_sync, map_size, file_size)
        except BaseException:
            shutil.rmtree(copy, ignore_errors=True)
            raise
        environment.copy = copy
        return environment


def _open_in(path: Path, directory: Path, always_sync: bool, map_size: int, file_size: int, *,
             in_place: bool = False) -> LogEnvironment:
    """Open the LMDB environment in ``directory`` (the repository's, or a private copy's) and
    its sub-databases; ``in_place``: read-only, raising ``_ReadFromCopy`` where a read-only
    open cannot go on (see ``_open_readonly``). Errors name the repository, not a copy."""
    try:
        env = lmdb.open(
            str(directory),
            map_size=map_size,
            subdir=True,
            create=False,
            readonly=in_place,
            sync=always_sync,
            metasync=always_sync,
            writemap=False,
            map_async=False,
            meminit=True,
            readahead=True,
            lock=not in_place,
            max_readers=MAX_READERS,
            max_dbs=MAX_DBS,
        )
    except lmdb.Error as e:
        raise lmdb_error(path, e, "opening", None) from e
    try:
        dbs = _open_whole(path, env, directory / "data.mdb", file_size, in_place)
        with reading(path, env) as txn:
            load_counter(path, txn, dbs.meta, K_NEXT_ID)
            load_counter(path, txn, dbs.meta, K_SEQ)
            pending = txn.stat(dbs.journal)["entries"]
        if pending and in_place:
            raise _ReadFromCopy(f"holds {pending} commits not yet applied to its tables "
                                "(its flow did not stop cleanly)")
    except BaseException:
        env.close()
        raise
    return LogEnvironment(path, env, dbs, always_sync=always_sync)


def _open_whole(path: Path, env: lmdb.Environment, data: Path, file_size: int, in_place: bool) -> SubDatabases:
    """The sub-databases of ``env``, whose file ``data`` had ``file_size`` bytes before it was opened.

    A file shorter than its last page would SIGBUS on the first read of the map. A file can look
    so without damage: LMDB may leave pages freed at the end of the file unwritten, and the size
    read before the open misses a commit another process made meanwhile (a tool). So the file is
    extended with zero pages, every page in use is read (``_walk``), and only if one of them was
    missing is the file called truncated (given back its size: it is left as it was found)."""
    try:
        if not in_place:
            env.reader_check()  # free the reader slots of processes that died (kill -9)
        end = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    except lmdb.Error as e:
        raise lmdb_error(path, e, "opening", env) from e
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
        dbs = _open_dbs(path, env, in_place)
        if short:
            _walk(env, list(dbs))
    except (lmdb.Error, FlowFileRepositoryError):
        if not short:
            raise
        env.close()
        os.truncate(data, file_size)  # as it was found
        raise RepositoryCorruptError(
            path, f"{path / 'data.mdb'} has {file_size} bytes but its last page ends at byte {end}; it was truncated"
        ) from None
    return dbs


def _open_dbs(path: Path, env: lmdb.Environment, in_place: bool) -> SubDatabases:
    """Open the meta sub-database (checking the format version) and the others, by name;
    ``in_place`` as for ``_open_in`` (an older version is then read from a copy)."""
    try:
        meta = env.open_db(META, create=False)
    except lmdb.NotFoundError:
        raise RepositoryCorruptError(
            path, "it is an LMDB environment without the 'meta' sub-database, not a FlowFile repository"
        ) from None
    except lmdb.Error as e:
        raise lmdb_error(path, e, "opening", env) from e
    with reading(path, env) as txn:
        raw = txn.get(K_FORMAT, db=meta)
    if raw is None or len(raw) != 1:
        raise RepositoryCorruptError(path, "the meta sub-database has no format version")
    if raw[0] in UPGRADABLE_VERSIONS:
        if in_place:
            raise _ReadFromCopy(f"has format version {raw[0]} (this release upgrades it to {FORMAT_VERSION})")
        _upgrade(path, env, meta)
    elif raw[0] != FORMAT_VERSION:
        raise UnsupportedFormatVersionError(path, raw[0], FORMAT_VERSION)
    dbs = [meta]
    for name in DB_NAMES:
        try:
            dbs.append(env.open_db(name, create=False))
        except lmdb.NotFoundError:
            raise RepositoryCorruptError(path, f"the sub-database {name.decode()!r} is missing") from None
        except lmdb.Error as e:
            raise lmdb_error(path, e, "opening", env) from e
    return SubDatabases(*dbs)


def _upgrade(path: Path, env: lmdb.Environment, meta: Db) -> None:
    """Version 1, 2 or 3 to 4: add the sub-databases it lacks (1: the journal, 1 and 2: state,
    all: the provenance outbox), empty, in one transaction."""
    try:
        with env.begin(write=True) as txn:
            for name in (JOURNAL, STATE, OUTBOX):
                env.open_db(name, txn=txn, create=True)
            txn.put(K_FORMAT, bytes((FORMAT_VERSION,)), db=meta)
    except lmdb.Error as e:
        raise lmdb_error(path, e, "upgrading the format", env) from e


def _walk(env: lmdb.Environment, dbs: list[Db]) -> None:
    """Read every key and value of these sub-databases (and so every page they use): raises
    ``lmdb.Error`` if one is not a valid page."""
    with env.begin(write=False) as txn:
        for db in [None, *dbs]:
            for key, value in txn.cursor(db=db):
                len(key) + len(value)


def _initialize(path: Path, map_size: int) -> None:
    """Create an empty repository atomically: build it in a temporary directory, then link
    its data.mdb into place (a crash leaves either no data.mdb or a complete one)."""
    path.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".creating-{os.getpid()}-", dir=path))
    try:
        env = lmdb.open(str(tmp), map_size=map_size, subdir=True, max_dbs=MAX_DBS, sync=True, metasync=True)
        try:
            with env.begin(write=True) as txn:
                meta = env.open_db(META, txn=txn, create=True)
                for name in DB_NAMES:
                    env.open_db(name, txn=txn, create=True)
                txn.put(K_FORMAT, bytes((FORMAT_VERSION,)), db=meta)
                txn.put(K_NEXT_ID, rec.pack_u64(1), db=meta)
                txn.put(K_SEQ, rec.pack_u64(0), db=meta)
                txn.put(K_CREATED, rec.pack_u64(time.time_ns() // 1_000_000), db=meta)
            env.sync(True)
        finally:
            env.close()
        try:
            os.link(tmp / "data.mdb", path / "data.mdb")  # fails if another process won the race
        except FileExistsError:
            pass
        fsync_dir(path)
    except lmdb.Error as e:
        raise FlowFileRepositoryError(f"cannot create a FlowFile repository at {path}: {e}", path) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_creations(path: Path) -> None:
    """Delete the temporary directories of creations whose process is gone (``_initialize``)."""
    for d in path.glob(".creating-*"):
        try:
            pid = int(d.name.split("-")[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            pass
