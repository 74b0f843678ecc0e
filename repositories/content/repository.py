"""The file-system content repository: containers, sections, resource claims, archive, age-off.

Where claim files are is ``ClaimFiles``'s part (claim_files.py, and
``docs/formats/content-repository.md`` byte by byte); reading a content is ``ContentInputStream``'s
(streams.py); writing a session's contents is ``ClaimWriter``'s (file_writer.py).

Processor actors write (``writer()``) and read (``open()``, ``read_bytes()``) claim files directly;
the content-repository actor runs the management methods (``release``, ``age_off_archive``,
``remove_orphans``, ``usage``). Nothing here keeps state that must agree between processes: claim
ids are unique without coordination and every size or age is taken from the files themselves.
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from repositories.fsutil import fsync_dir
from repositories.model import ContentClaim, ResourceClaim

from .claim_files import ARCHIVE_DIR, CLAIM_ID, ClaimFiles, scandir, section_dirs
from .errors import FULL_ERRNOS
from .file_writer import ClaimWriter
from .options import ContentRepositoryOptions, ContentSettings, options_from_settings
from .protocol import ContentRepository
from .streams import ClaimRangeIO, ContentInputStream, read_content, read_contents

log = logging.getLogger(__name__)

#: archived claims kept in memory per container and pass of the usage age-off (as NiFi).
ARCHIVE_CANDIDATES_PER_PASS = 10_000
#: free space, in hundredths of the disk, that making room for a refused write leaves besides the
#: write's own bytes when no max usage percent says how much (so that not every next write is
#: refused and scans the archive again)
ROOM_PERCENT = 1


def disk_usage(path: str | os.PathLike[str]) -> "shutil._ntuple_diskusage":
    """The file system's ``(total, used, free)`` in bytes; age-off and ``usage()`` call this
    (tests replace it)."""
    return shutil.disk_usage(path)


class FileSystemContentRepository(ContentRepositoryOptions, ContentRepository):
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
        directories: dict[str, str] = {}
        for name, location in pairs:
            if not name or name in directories:
                raise ValueError(f"container names must be unique and not empty: {name!r}")
            path = Path(location)
            directories[name] = os.path.abspath(path if path.is_absolute() else self.root / path)
        self._files = ClaimFiles(directories, self.next_section)
        self.archive_candidates_per_pass = archive_candidates_per_pass
        self._room_lock = threading.Lock()  # one thread of the process makes room at a time
        self._rooms_made = 0  # times room was made (a waiting thread sees it was made meanwhile)
        self._config = dict(root=os.fspath(root), containers=dict(pairs),
                            archive_candidates_per_pass=archive_candidates_per_pass, **options)
        if not create:
            return
        for directory in directories.values():
            os.makedirs(directory, exist_ok=True)
        if self.always_sync:
            for directory in directories.values():
                fsync_dir(directory)
                fsync_dir(os.path.dirname(directory))

    @classmethod
    def from_settings(cls, repository_dir: str | os.PathLike[str], settings: ContentSettings, *,
                      create: bool = True) -> "FileSystemContentRepository":
        """The content repository of a flow's repository folder: ``<repository>/content``, with the
        settings' content options (the same convention as the other repositories)."""
        return cls(Path(repository_dir) / "content", create=create, **options_from_settings(settings))

    def __reduce__(self) -> tuple[Any, ...]:
        config = dict(self._config)
        root = config.pop("root")
        return (_restore, (root, config))

    def __repr__(self) -> str:
        return f"FileSystemContentRepository({os.fspath(self.root)!r}, containers={self._files.containers!r})"

    @property
    def containers(self) -> dict[str, Path]:
        """Container name to directory."""
        return {name: Path(path) for name, path in self._files.containers.items()}

    # --- writing ------------------------------------------------------------------------
    def writer(self) -> ClaimWriter:
        """A writer for the contents of one session (see ``ClaimWriter``)."""
        return ClaimWriter(self._files, max_appendable_size=self.max_appendable_size,
                           max_flowfiles_per_claim=self.max_flowfiles_per_claim,
                           always_sync=self.always_sync, make_room=self.make_room, checksums=self.checksums)

    # --- locating and reading -----------------------------------------------------------
    def path_of(self, resource: ResourceClaim) -> Path:
        """The live file of a resource claim (whether or not it exists); raises
        ``ContentRepositoryError`` for a claim of no configured container or not of the layout."""
        return self._files.path_of(resource)

    def archive_path_of(self, resource: ResourceClaim) -> Path:
        """The file of a resource claim once archived (checked as ``path_of``)."""
        return self._files.archive_path_of(resource)

    def open(self, claim: ContentClaim) -> ContentInputStream:
        """A stream over the content of ``claim``, from the live file or else the archive.

        Raises ``ContentNotFoundError`` when the resource claim is in neither.
        """
        fd, path, trailer = self._files.open_for_reading(claim.resource)
        try:
            return ContentInputStream(ClaimRangeIO(fd, claim, path, trailer), claim, path)
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, claim: ContentClaim | None) -> bytes:
        """The whole content in memory (``b""`` for ``None``); use ``open()`` for large ones."""
        if claim is None:
            return b""
        fd, path, trailer = self._files.open_for_reading(claim.resource)
        try:
            return read_content(fd, trailer, path, claim.offset, claim.length, claim)
        finally:
            os.close(fd)

    def read_many(self, claims: Sequence[ContentClaim | None]) -> list[bytes]:
        """``read_bytes`` of each claim, each claim file opened once (a batch's read: many
        contents of one resource claim cost one ``open`` and a ``pread`` each, or with checksums
        one read and check of the blocks they span, ``read_contents``)."""
        out: list[bytes] = [b""] * len(claims)
        by_resource: dict[ResourceClaim, tuple[list[int], list[ContentClaim]]] = {}
        for i, claim in enumerate(claims):
            if claim is not None:
                indexes, group = by_resource.setdefault(claim.resource, ([], []))
                indexes.append(i)
                group.append(claim)
        for resource, (indexes, group) in by_resource.items():
            fd, path, trailer = self._files.open_for_reading(resource)
            try:
                contents = read_contents(fd, trailer, path, group)
            finally:
                os.close(fd)
            for i, data in zip(indexes, contents):
                out[i] = data
        return out

    def adopt(self, source: "FileSystemContentRepository", resource: ResourceClaim) -> bool:
        """Make the claim file of ``resource`` in the repository ``source`` (live, else archived) a
        live claim of this one: hard-linked where both are on one file system, else copied. A
        claim this repository holds already (a container both share) is left as it is. Returns
        False when ``source`` holds the claim in neither place. For a salvage (docs/cli.md)."""
        target = self.path_of(resource)
        if target.exists():
            return True
        live, archived = source.path_of(resource), source.archive_path_of(resource)
        path = live if live.exists() else archived
        if not path.exists():
            return False
        self._files.make_section_dir(resource)
        try:
            os.link(path, target)
        except OSError:
            shutil.copyfile(path, target)
        return True

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
            self._files.directory_of(resource)  # validate all before touching any
        return sum(map(self._archive if self.archive_enabled else self._delete, unique))

    def _delete(self, resource: ResourceClaim) -> bool:
        """Delete a released claim's file; False when it was deleted already."""
        try:
            os.unlink(os.path.join(self._files.containers[resource.container], resource.section, resource.id))
        except FileNotFoundError:
            return False
        return True

    def _archive(self, resource: ResourceClaim) -> bool:
        """Move a released claim's file to its section's archive, with the current time as its
        mtime; False when it was released already."""
        section = os.path.join(self._files.containers[resource.container], resource.section)
        live = os.path.join(section, resource.id)
        archive_dir = os.path.join(section, ARCHIVE_DIR)
        archived = os.path.join(archive_dir, resource.id)
        try:
            os.rename(live, archived)
        except FileNotFoundError:
            if not os.path.exists(live):
                return False  # already released
            try:
                os.makedirs(archive_dir, exist_ok=True)
            except OSError as exc:
                if exc.errno not in FULL_ERRNOS:
                    raise
                # No room even for the archive directory: the disk is full, where age-off would
                # remove the archived file anyway. Delete it.
                return self._delete(resource)
            try:
                os.rename(live, archived)
            except FileNotFoundError:
                return False
        os.utime(archived)
        return True

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
        for path in self._files.containers.values():
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

    def make_room(self, name: str, wanted: int) -> bool:
        """Called by a writer whose write to container ``name`` its file system refused for lack of
        space (ENOSPC, EDQUOT): delete the container's archived claims, oldest first, until the
        file system is under the max usage percent and has ``wanted`` bytes free besides (and,
        without a max usage percent, ``ROOM_PERCENT`` of the disk), and say in one log line what
        was deleted. Returns whether the write is worth trying again: archived claims were
        deleted, by this call or by another thread of the process while this one waited."""
        container = self._files.containers[name]
        made = self._rooms_made
        with self._room_lock:
            if self._rooms_made != made:
                return True
            stats = dict(removed_by_retention=0, removed_by_usage=0, bytes_freed=0)
            totals = [0, 0]
            candidates = heapq.nsmallest(self.archive_candidates_per_pass,
                                         self._scan_archive(container, None, totals, stats))
            if not candidates:
                return False
            self._age_off_by_usage(container, candidates, None, totals, stats, wanted)
            if not stats["removed_by_usage"]:
                return False
            self._rooms_made += 1
        disk = disk_usage(container)
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(candidates[0][0] / 1e9))
        log.warning(
            "content repository container %r at %s was out of disk space: deleted its %d oldest "
            "archived claims (%d bytes, archived since %s) to make room; its file system is now "
            "%.1f %% used, %d archived claims left", name, container, stats["removed_by_usage"],
            stats["bytes_freed"], since, 100.0 * (disk.total - disk.free) / (disk.total or 1), totals[1])
        return True

    def _over_target(self, container: str, room: int | None = None) -> int:
        """Bytes the container's file system holds beyond the max usage percent (<= 0: none, and
        always without a max usage percent); with ``room``, at least the bytes to delete for
        ``room`` bytes to be free (``make_room``)."""
        percent = self.archive_max_usage_percent
        if percent is None and room is None:
            return 0
        usage = disk_usage(container)
        used = usage.total - usage.free
        excess = used - int(usage.total * percent / 100.0) if percent is not None else 0
        if room is not None:
            extra = 0 if percent is not None else usage.total * ROOM_PERCENT // 100
            excess = max(excess, room + extra - usage.free)
        return excess

    def _age_off_by_usage(self, container: str, candidates: list[tuple[int, str, int, int]],
                          cutoff_ns: int | None, totals: list[int],
                          stats: dict[str, int], room: int | None = None) -> list[tuple[int, str, int, int]]:
        """Delete the oldest archived claims while ``_over_target(container, room)`` is above 0:
        first ``candidates``, then the next oldest of another scan, and so on; returns the
        candidates of the last scan. With ``room`` (the file system refused a write) at least
        ``room`` bytes (one claim for 0) go whatever the figures say: a disk quota, reserved blocks
        or a lack of inodes can refuse a write that ``disk_usage`` says fits."""
        excess = self._over_target(container, room)
        if room is not None:
            excess = max(excess, room, 1)
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
                excess = self._over_target(container, room)
        return candidates

    def _scan_archive(self, container: str, cutoff_ns: int | None, totals: list[int],
                      stats: dict[str, int]) -> Iterator[tuple[int, str, int, int]]:
        """Yield ``(mtime_ns, path, size, estimated bytes freed)`` of every archived claim kept,
        deleting on the way those archived before ``cutoff_ns``; adds the kept to ``totals``."""
        for section in section_dirs(container):
            for entry in scandir(os.path.join(section.path, ARCHIVE_DIR)):
                if not CLAIM_ID.match(entry.name):
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
        for name, container in self._files.containers.items():
            for section in section_dirs(container):
                for entry in scandir(section.path):
                    if (entry.name != ARCHIVE_DIR and CLAIM_ID.match(entry.name)
                            and entry.is_file(follow_symlinks=False)):
                        yield ResourceClaim(name, section.name, entry.name)

    def usage(self) -> dict[str, dict[str, Any]]:
        """Per container: its path, live and archived bytes and file counts (from the files), and
        the file system's total, used and free bytes and percent used ((total - free) / total)."""
        result: dict[str, dict[str, Any]] = {}
        for name, container in self._files.containers.items():
            live_bytes = live_count = archive_bytes = archive_count = 0
            for section in section_dirs(container):
                for entry in scandir(section.path):
                    archived = entry.name == ARCHIVE_DIR
                    for item in scandir(entry.path) if archived else (entry,):
                        if not CLAIM_ID.match(item.name) or not item.is_file(follow_symlinks=False):
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


def _restore(root: str, config: dict[str, Any]) -> FileSystemContentRepository:
    return FileSystemContentRepository(root, **config)
