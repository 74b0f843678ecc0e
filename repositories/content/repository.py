"""The file-system content repository: containers, sections, resource claims, archive, age-off.

Layout (``docs/formats/content-repository.md`` describes it byte by byte)::

    <container>/<section>/<claim id>            a live resource claim: raw contents, no header
    <container>/<section>/archive/<claim id>    an archived claim; its mtime is the archive time

Processor actors write (``writer()``) and read (``open()``, ``read_bytes()``) claim files directly;
the content-repository actor runs the management methods (``release``, ``age_off_archive``,
``remove_orphans``, ``usage``). Nothing here keeps state that must agree between processes: claim
ids are unique without coordination and every size or age is taken from the files themselves.
"""

from __future__ import annotations

import heapq
import io
import itertools
import os
import random
import re
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from repositories.fsutil import fsync_dir
from repositories.model import ContentClaim, ResourceClaim

from .errors import FULL_ERRNOS, ContentNotFoundError, ContentRepositoryError
from .writer import COPY_CHUNK, ClaimWriter

if TYPE_CHECKING:
    from flowactors.sdk.settings import Settings

#: name of the archive directory inside every section.
ARCHIVE_DIR = "archive"
#: archived claims kept in memory per container and pass of the usage age-off (as NiFi).
ARCHIVE_CANDIDATES_PER_PASS = 10_000
#: read buffer of a content stream (smaller for smaller contents).
READ_BUFFER = 256 * 1024
#: new claims a repository object (a process) puts in one section before it moves on to the next
#: (``ContentRepositoryOptions.next_section``)
CLAIMS_PER_SECTION = 64
#: sections between where two threads of one process start their runs of sections: two threads'
#: runs share a directory only once one has made this many runs more than the other (modulo the
#: number of sections)
THREAD_SECTION_STRIDE = 97

_SECTION_NAME = re.compile(r"[0-9]{1,9}\Z")
_CLAIM_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,199}\Z")


def disk_usage(path: str | os.PathLike[str]) -> Any:
    """The file system's ``(total, used, free)`` in bytes; age-off and ``usage()`` call this
    (tests replace it)."""
    return shutil.disk_usage(path)


def options_from_settings(settings: "Settings") -> dict[str, Any]:
    """The constructor options a flow's settings give a content repository: the same for the
    file-system and the in-memory repository, so that both follow the flow's settings alike."""
    return dict(
        containers=tuple(settings.content_containers),
        sections=settings.content_sections,
        max_appendable_size=settings.max_appendable_claim_size,
        max_flowfiles_per_claim=settings.max_flowfiles_per_claim,
        always_sync=settings.always_sync,
        archive_enabled=settings.archive_enabled,
        archive_max_retention=settings.archive_max_retention,
        archive_max_usage_percent=settings.archive_max_usage_percent,
    )


class _ClaimIds:
    """``<time_ns>-<pid>-<random 32-bit hex>-<counter>``: unique across processes and restarts
    without coordination (the token is drawn again in a forked child)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._prefix = f"-{os.getpid()}-{secrets.token_hex(4)}-"
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{time.time_ns()}{self._prefix}{next(self._counter)}"


_claim_ids = _ClaimIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_claim_ids._reset)


def new_claim_id() -> str:
    return _claim_ids.next()


class _ClaimRangeIO(io.RawIOBase):
    """Unbuffered reading of ``length`` bytes at ``offset`` of a claim file, with ``pread`` (no
    shared file position); positions are relative to the content."""

    def __init__(self, fd: int, claim: ContentClaim, path: str) -> None:
        super().__init__()
        self._fd = fd
        self._start = claim.offset
        self._length = claim.length
        self._pos = 0
        self._path = path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._checkClosed()
        remaining = self._length - self._pos
        if remaining <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        if len(view) > remaining:
            view = view[:remaining]
        n = os.preadv(self._fd, [view], self._start + self._pos)
        if n == 0:
            self._truncated()
        self._pos += n
        return n

    def readall(self) -> bytes:
        self._checkClosed()
        data = _read_range(self._fd, self._start + self._pos, self._length - self._pos, self._path,
                           self._start, self._length)
        self._pos = self._length
        return data

    def _truncated(self) -> None:
        _truncated(self._path, self._start, self._length)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._pos + offset
        elif whence == io.SEEK_END:
            position = self._length + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._pos = position
        return position

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


def _truncated(path: str, start: int, length: int) -> None:
    raise ContentRepositoryError(
        f"claim file {path} ends before byte {start + length} of the content "
        f"at offset {start}, length {length}: it was truncated or is corrupt"
    )


def _read_range(fd: int, offset: int, count: int, path: str, start: int, length: int) -> bytes:
    """``count`` bytes of ``fd`` from ``offset`` (part of the content at ``start``, ``length``)."""
    parts = []
    while count > 0:
        data = os.pread(fd, count, offset)
        if not data:
            _truncated(path, start, length)
        parts.append(data)
        offset += len(data)
        count -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class ChunkedIteration:
    """Iteration over a content stream: chunks of up to ``chunk_size`` bytes, not lines (contents
    are binary). The file-system and the in-memory content streams both iterate this way."""

    chunk_size = COPY_CHUNK

    def __iter__(self) -> "ChunkedIteration":
        if self.closed:  # type: ignore[attr-defined]
            raise ValueError("I/O operation on closed content stream")
        return self

    def __next__(self) -> bytes:
        chunk = self.read(self.chunk_size)  # type: ignore[attr-defined]
        if not chunk:
            raise StopIteration
        return chunk


class ContentInputStream(ChunkedIteration, io.BufferedReader):
    """A readable, seekable stream over one content (positions relative to the content).

    ``read(n)``, ``read()``, ``readinto()``, ``seek()``/``tell()`` work as on a file limited to the
    content; iterating yields chunks of up to 1 MiB (not lines). ``fileno()`` is not offered: the
    claim file holds other contents too. ``claim`` is the content claim, ``path`` the file read
    (the archive path when the claim was archived).
    """

    def __init__(self, raw: _ClaimRangeIO, claim: ContentClaim, path: str) -> None:
        super().__init__(raw, max(1, min(READ_BUFFER, max(claim.length, 8192))))
        self.claim = claim
        self.path = path

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a content stream has no file descriptor of its own")

    def claim_fd(self) -> int | None:
        """The claim file's descriptor (absolute offsets: ``claim.offset + tell()``), for
        zero-copy transfers inside this package."""
        return None if self.closed else self.raw._fd  # type: ignore[attr-defined]


class ContentRepositoryOptions:
    """The options every content repository is built with (the file-system one and the in-memory
    one), with their defaults and checks: how claims are laid out and retired, sync, archive."""

    def __init__(
        self,
        *,
        sections: int = 1024,
        max_appendable_size: int = 50 * 1024,
        max_flowfiles_per_claim: int = 100,
        always_sync: bool = False,
        archive_enabled: bool = True,
        archive_max_retention: float | None = 3 * 3600.0,
        archive_max_usage_percent: float | None = 90.0,
    ) -> None:
        if sections < 1:
            raise ValueError(f"sections must be >= 1, not {sections}")
        if max_appendable_size < 0 or max_flowfiles_per_claim < 0:
            raise ValueError("max_appendable_size and max_flowfiles_per_claim must be >= 0")
        if archive_max_usage_percent is not None and not 0 < archive_max_usage_percent <= 100:
            raise ValueError(f"archive_max_usage_percent must be in (0, 100], not "
                             f"{archive_max_usage_percent}")
        self.sections = sections
        self.max_appendable_size = max_appendable_size
        self.max_flowfiles_per_claim = max_flowfiles_per_claim
        self.always_sync = always_sync
        self.archive_enabled = archive_enabled
        self.archive_max_retention = archive_max_retention
        self.archive_max_usage_percent = archive_max_usage_percent
        self._first_section = random.randrange(sections)
        self._writer_threads = itertools.count()  # threads that made a claim, in turn
        self._section_turns = threading.local()  # each thread's own runs (``next_section``)

    def next_section(self) -> str:
        """The section of the next new claim: runs of ``CLAIMS_PER_SECTION`` claims in one section,
        the sections in turn from a random one. Consecutive claim files share a directory, so a
        process makes one section directory a run instead of nearly one a claim, and a new file
        lands where the file system's metadata was just used (docs/performance.md); over time every
        section gets its share. Readers never compute a section: it is part of the claim.

        Each thread has runs of its own, the k-th thread's starting ``k * THREAD_SECTION_STRIDE``
        sections after the first's: two tasks of one executor that create claim files at once
        create them in different directories, so neither spins on the other's directory lock,
        which ext4 holds through a create that can take hundreds of µs (docs/performance.md)."""
        turns = self._section_turns
        try:
            turn = next(turns.count)
        except AttributeError:  # this thread's first claim: its count starts at its first section's run
            first = self._first_section + next(self._writer_threads) * THREAD_SECTION_STRIDE
            turns.count = itertools.count(first * CLAIMS_PER_SECTION)
            turn = next(turns.count)
        return str(turn // CLAIMS_PER_SECTION % self.sections)


class FileSystemContentRepository(ContentRepositoryOptions):
    """The content repository of one node, on the local file system.

    ``root`` is the content repository directory (``<repository>/content``); each container is a
    subdirectory of it unless given as an absolute path (its name is then the path itself), or a
    mapping ``{name: path}``. New resource claims go to the containers round-robin. The other
    options, with their defaults, are those of ``ContentRepositoryOptions``.

    One instance per process; instances on the same ``root`` in other processes cooperate through
    the file system only. An instance pickles by its configuration.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        containers: Sequence[str] | Mapping[str, str | os.PathLike[str]] = ("default",),
        archive_candidates_per_pass: int = ARCHIVE_CANDIDATES_PER_PASS,
        create: bool = True,
        **options: Any,
    ) -> None:
        """``create=False``: make no container directory (a reader of a stopped flow's folder,
        which must not change it; a missing container then holds no content)."""
        super().__init__(**options)
        if archive_candidates_per_pass < 1:
            raise ValueError("archive_candidates_per_pass must be >= 1")
        self.root = Path(root)
        pairs: list[tuple[str, str | os.PathLike[str]]]
        if isinstance(containers, Mapping):
            pairs = list(containers.items())
        else:
            pairs = [(str(name), name) for name in containers]
        if not pairs:
            raise ValueError("at least one content container is needed")
        self._containers: dict[str, str] = {}
        for name, location in pairs:
            if not name or name in self._containers:
                raise ValueError(f"container names must be unique and not empty: {name!r}")
            path = Path(location)
            self._containers[name] = os.path.abspath(path if path.is_absolute() else self.root / path)
        self._names = tuple(self._containers)
        self.archive_candidates_per_pass = archive_candidates_per_pass
        self._config = dict(root=os.fspath(root), containers=dict(pairs),
                            archive_candidates_per_pass=archive_candidates_per_pass, **options)
        self._round_robin = itertools.count()
        self._known_dirs: set[str] = set()
        self._dirs_lock = threading.Lock()
        if not create:
            return
        for path in self._containers.values():
            os.makedirs(path, exist_ok=True)
        if self.always_sync:
            for path in self._containers.values():
                fsync_dir(path)
                fsync_dir(os.path.dirname(path))

    @classmethod
    def from_settings(cls, repository_dir: str | os.PathLike[str], settings: "Settings", *,
                      create: bool = True) -> "FileSystemContentRepository":
        """The content repository of a flow's repository folder: ``<repository>/content``, with the
        settings' content options (the same convention as the other repositories)."""
        return cls(Path(repository_dir) / "content", create=create, **options_from_settings(settings))

    def __reduce__(self) -> tuple[Any, ...]:
        config = dict(self._config)
        root = config.pop("root")
        return (_restore, (root, config))

    def __repr__(self) -> str:
        return f"FileSystemContentRepository({os.fspath(self.root)!r}, containers={self._containers!r})"

    @property
    def containers(self) -> dict[str, Path]:
        """Container name to directory."""
        return {name: Path(path) for name, path in self._containers.items()}

    # --- writing ------------------------------------------------------------------------
    def writer(self) -> ClaimWriter:
        """A writer for the contents of one session (see ``ClaimWriter``)."""
        return ClaimWriter(self)

    def _new_resource_claim(self) -> tuple[ResourceClaim, str]:
        claim_id = _claim_ids.next()
        name = self._names[next(self._round_robin) % len(self._names)]
        return ResourceClaim(name, self.next_section(), claim_id), self._containers[name]

    def _ensure_section_dir(self, container: str, section: str) -> list[str]:
        """Make ``<container>/<section>`` exist; returns the directories created."""
        path = os.path.join(self._containers[container], section)
        if path in self._known_dirs:
            return []
        created = []
        try:
            os.mkdir(path)
            created.append(path)
        except FileExistsError:
            pass
        except FileNotFoundError:  # the container directory was removed under us
            os.makedirs(self._containers[container], exist_ok=True)
            os.mkdir(path)
            created.append(path)
        with self._dirs_lock:
            self._known_dirs.add(path)
        return created

    # --- locating and reading -----------------------------------------------------------
    def _container_path(self, resource: ResourceClaim) -> str:
        try:
            container = self._containers[resource.container]
        except KeyError:
            raise ContentRepositoryError(
                f"resource claim {resource.id!r} is in container {resource.container!r}, which "
                f"is not configured (containers: {list(self._containers)})"
            ) from None
        if not _SECTION_NAME.match(resource.section) or not _CLAIM_ID.match(resource.id):
            raise ContentRepositoryError(f"not a valid resource claim: {resource!r}")
        return container

    def path_of(self, resource: ResourceClaim) -> Path:
        """The live file of a resource claim (whether or not it exists)."""
        return Path(self._container_path(resource), resource.section, resource.id)

    def archive_path_of(self, resource: ResourceClaim) -> Path:
        """The file of a resource claim once archived."""
        return Path(self._container_path(resource), resource.section, ARCHIVE_DIR, resource.id)

    def _open_fd(self, resource: ResourceClaim) -> tuple[int, str]:
        container = self._container_path(resource)
        live = os.path.join(container, resource.section, resource.id)
        try:
            return os.open(live, os.O_RDONLY | os.O_CLOEXEC), live
        except FileNotFoundError:
            pass
        archived = os.path.join(container, resource.section, ARCHIVE_DIR, resource.id)
        try:
            return os.open(archived, os.O_RDONLY | os.O_CLOEXEC), archived
        except FileNotFoundError:
            pass
        error = ContentNotFoundError(
            f"resource claim {resource.id!r} of container {resource.container!r} is neither live "
            f"({live}) nor archived ({archived}): it was aged off the archive or deleted"
        )
        error.claim = resource
        raise error

    def open(self, claim: ContentClaim) -> ContentInputStream:
        """A stream over the content of ``claim``, from the live file or else the archive.

        Raises ``ContentNotFoundError`` when the resource claim is in neither.
        """
        fd, path = self._open_fd(claim.resource)
        try:
            return ContentInputStream(_ClaimRangeIO(fd, claim, path), claim, path)
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, claim: ContentClaim | None) -> bytes:
        """The whole content in memory (``b""`` for ``None``); use ``open()`` for large ones."""
        if claim is None:
            return b""
        fd, path = self._open_fd(claim.resource)
        try:
            raw = _ClaimRangeIO(fd, claim, path)
            return raw.readall()
        finally:
            os.close(fd)

    def read_many(self, claims: Sequence[ContentClaim | None]) -> list[bytes]:
        """``read_bytes`` of each claim, each claim file opened once (a batch's read: many
        contents of one resource claim cost one ``open`` and a ``pread`` each)."""
        fds: dict[ResourceClaim, tuple[int, str]] = {}
        out: list[bytes] = []
        try:
            for claim in claims:
                if claim is None:
                    out.append(b"")
                    continue
                opened = fds.get(claim.resource)
                if opened is None:
                    opened = fds[claim.resource] = self._open_fd(claim.resource)
                out.append(_read_range(opened[0], claim.offset, claim.length, opened[1], claim.offset, claim.length))
        finally:
            for fd, _path in fds.values():
                os.close(fd)
        return out

    # --- management (the content-repository actor) --------------------------------------
    def release(self, resources: Iterable[ResourceClaim]) -> int:
        """Archive (when enabled) or delete resource claims that no FlowFile references any more.

        Call only for claims whose claimant count reached zero *and* after a FlowFile repository
        checkpoint that no longer references them. An archived file gets the current time as
        its modification time, which age-off reads as the archive time. Claims already released
        are skipped; returns the number archived or deleted.
        """
        unique = list(dict.fromkeys(resources))
        for resource in unique:
            self._container_path(resource)  # validate all before touching any
        done = 0
        for resource in unique:
            container = self._containers[resource.container]
            live = os.path.join(container, resource.section, resource.id)
            if self.archive_enabled:
                archive_dir = os.path.join(container, resource.section, ARCHIVE_DIR)
                archived = os.path.join(archive_dir, resource.id)
                try:
                    os.rename(live, archived)
                except FileNotFoundError:
                    if not os.path.exists(live):
                        continue  # already released
                    try:
                        os.makedirs(archive_dir, exist_ok=True)
                    except OSError as exc:
                        if exc.errno not in FULL_ERRNOS:
                            raise
                        # No room even for the archive directory: the disk is full, where
                        # age-off would remove the archived file anyway. Delete it.
                        try:
                            os.unlink(live)
                        except FileNotFoundError:
                            continue
                        done += 1
                        continue
                    try:
                        os.rename(live, archived)
                    except FileNotFoundError:
                        continue
                os.utime(archived)
            else:
                try:
                    os.unlink(live)
                except FileNotFoundError:
                    continue
            done += 1
        return done

    def age_off_archive(self, now: float | None = None) -> dict[str, int]:
        """Delete archived claims older than the retention, then, per container, the oldest
        archived claims while its file system is fuller than the max usage percent.

        Ages come from the files' mtimes (the archive time) and usage from ``disk_usage`` of the
        container, every pass: no counters are kept between passes. At most
        ``archive_candidates_per_pass`` of the oldest candidates are held in memory; when they
        run out and the disk is still too full, the archive is scanned again.

        Returns ``removed``, ``removed_by_retention``, ``removed_by_usage``, ``bytes_freed`` and
        the ``archive_bytes``/``archive_count`` left.
        """
        now = time.time() if now is None else now
        retention = self.archive_max_retention
        cutoff_ns = None if retention is None else int((now - retention) * 1e9)
        stats = dict(removed=0, removed_by_retention=0, removed_by_usage=0, bytes_freed=0,
                     archive_bytes=0, archive_count=0)
        for path in self._containers.values():
            totals = [0, 0]  # archive bytes, count: kept by the scan generator
            candidates = heapq.nsmallest(
                self.archive_candidates_per_pass, self._scan_archive(path, cutoff_ns, totals, stats)
            )
            if self.archive_max_usage_percent is not None and totals[1]:
                candidates = self._age_off_by_usage(path, candidates, cutoff_ns, totals, stats)
            stats["archive_bytes"] += totals[0]
            stats["archive_count"] += totals[1]
        stats["removed"] = stats["removed_by_retention"] + stats["removed_by_usage"]
        return stats

    def _over_target(self, container: str) -> int:
        """Bytes the container's file system holds beyond the max usage percent (<= 0: none)."""
        usage = disk_usage(container)
        used = usage.total - usage.free
        return used - int(usage.total * self.archive_max_usage_percent / 100.0)  # type: ignore[operator]

    def _age_off_by_usage(self, container: str, candidates: list[tuple[int, str, int, int]],
                          cutoff_ns: int | None, totals: list[int], stats: dict[str, int]) -> list:
        excess = self._over_target(container)
        index = 0
        deleted_since_scan = 0
        while excess > 0:
            if index >= len(candidates):
                if totals[1] == 0 or (deleted_since_scan == 0 and index > 0):
                    break  # nothing left to delete, or nothing could be deleted
                totals[0] = totals[1] = 0
                candidates = heapq.nsmallest(
                    self.archive_candidates_per_pass,
                    self._scan_archive(container, cutoff_ns, totals, stats),
                )
                index = deleted_since_scan = 0
                if not candidates:
                    break
                continue
            _, path, size, estimate = candidates[index]
            index += 1
            try:
                os.unlink(path)
            except FileNotFoundError:
                totals[0] -= size
                totals[1] -= 1
                continue
            except OSError:
                continue
            deleted_since_scan += 1
            totals[0] -= size
            totals[1] -= 1
            stats["removed_by_usage"] += 1
            stats["bytes_freed"] += size
            excess -= estimate
            if excess <= 0:
                # The estimate says enough; the file system has the last word.
                excess = self._over_target(container)
        return candidates

    def _scan_archive(self, container: str, cutoff_ns: int | None, totals: list[int],
                      stats: dict[str, int]) -> Iterator[tuple[int, str, int, int]]:
        """Yield ``(mtime_ns, path, size, estimated bytes freed)`` of every archived claim kept,
        deleting on the way those archived before ``cutoff_ns``; adds the kept to ``totals``."""
        for section in _scandir(container):
            if not _SECTION_NAME.match(section.name) or not section.is_dir(follow_symlinks=False):
                continue
            for entry in _scandir(os.path.join(section.path, ARCHIVE_DIR)):
                if not _CLAIM_ID.match(entry.name):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                if cutoff_ns is not None and st.st_mtime_ns < cutoff_ns:
                    try:
                        os.unlink(entry.path)
                    except FileNotFoundError:
                        continue
                    except OSError:
                        pass
                    else:
                        stats["removed_by_retention"] += 1
                        stats["bytes_freed"] += st.st_size
                        continue
                totals[0] += st.st_size
                totals[1] += 1
                blocks = getattr(st, "st_blocks", None)
                yield (st.st_mtime_ns, entry.path, st.st_size,
                       st.st_size if blocks is None else blocks * 512)

    def remove_orphans(self, is_referenced: Callable[[ResourceClaim], bool]) -> int:
        """Delete live claim files that no committed FlowFile references (written by a session
        that never committed). Run at start-up only, after FlowFile repository recovery and
        before any writer exists: it would delete the claims of a session still in progress.
        Returns the number deleted."""
        removed = 0
        for resource in self.iter_resource_claims():
            if is_referenced(resource):
                continue
            try:
                os.unlink(self.path_of(resource))
            except FileNotFoundError:
                continue
            removed += 1
        return removed

    def iter_resource_claims(self) -> Iterator[ResourceClaim]:
        """Every live (not archived) resource claim file, container by container."""
        for name, container in self._containers.items():
            for section in _scandir(container):
                if not _SECTION_NAME.match(section.name) or not section.is_dir(follow_symlinks=False):
                    continue
                for entry in _scandir(section.path):
                    if (entry.name != ARCHIVE_DIR and _CLAIM_ID.match(entry.name)
                            and entry.is_file(follow_symlinks=False)):
                        yield ResourceClaim(name, section.name, entry.name)

    def usage(self) -> dict[str, dict[str, Any]]:
        """Per container: its path, live and archived bytes and file counts (from the files), and
        the file system's total, used and free bytes and percent used ((total - free) / total)."""
        result: dict[str, dict[str, Any]] = {}
        for name, container in self._containers.items():
            live_bytes = live_count = archive_bytes = archive_count = 0
            for section in _scandir(container):
                if not _SECTION_NAME.match(section.name) or not section.is_dir(follow_symlinks=False):
                    continue
                for entry in _scandir(section.path):
                    archived = entry.name == ARCHIVE_DIR
                    for item in _scandir(entry.path) if archived else (entry,):
                        if not _CLAIM_ID.match(item.name) or not item.is_file(follow_symlinks=False):
                            continue
                        try:
                            size = item.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            continue
                        if archived:
                            archive_bytes += size
                            archive_count += 1
                        else:
                            live_bytes += size
                            live_count += 1
            disk = disk_usage(container)
            result[name] = dict(
                path=container, live_bytes=live_bytes, live_count=live_count,
                archive_bytes=archive_bytes, archive_count=archive_count,
                disk_total=disk.total, disk_used=disk.total - disk.free, disk_free=disk.free,
                disk_percent=(100.0 * (disk.total - disk.free) / disk.total) if disk.total else 0.0,
            )
        return result


def _scandir(path: str) -> Iterator[os.DirEntry[str]]:
    """Entries of a directory, streamed, or none if it does not exist (a section without an
    archive)."""
    try:
        entries = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        yield from entries


def _restore(root: str, config: dict[str, Any]) -> FileSystemContentRepository:
    return FileSystemContentRepository(root, **config)
