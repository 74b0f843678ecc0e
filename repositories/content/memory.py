"""An in-memory content repository with the same reading and writing interface, for unit tests of
the framework and for the stateless engine. Nothing survives the process; ``flush(sync=True)``
gives no durability. Claims follow the same layout rules (appending, roll-over, archive, age-off by
retention) so tests of claim sharing behave as with the file-system repository.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

from repositories.model import ContentClaim, ResourceClaim

from .errors import ContentNotFoundError, ContentRepositoryError
from .options import ContentRepositoryOptions, ContentSettings, new_claim_id, options_from_settings
from .protocol import ContentRepository
from .streams import ChunkedIteration
from .writer import BaseClaimWriter


class MemoryContentStream(ChunkedIteration, io.BytesIO):
    """A content read from memory; iterating yields chunks of up to 1 MiB, as ``open()`` of the
    file-system repository does."""

    def __init__(self, data: bytes, claim: ContentClaim) -> None:
        super().__init__(data)
        self.claim = claim


class InMemoryClaimWriter(BaseClaimWriter):
    """``ClaimWriter`` over the in-memory repository (same rules and errors)."""

    def __init__(self, repository: "InMemoryContentRepository") -> None:
        super().__init__(repository.max_appendable_size, repository.max_flowfiles_per_claim)
        self._repo = repository
        self._data: bytearray | None = None

    def flush(self, sync: bool | None = None) -> None:
        """Nothing to hand to a kernel; raises like ``ClaimWriter.flush`` after a failure."""
        self._check_failed()

    def _storage_new_claim(self) -> None:
        resource, data = self._repo._new_claim()
        self._created.append(resource)
        self._resource = resource
        self._data = data

    def _storage_append(self, view: memoryview) -> None:
        assert self._data is not None
        self._data += view

    def _storage_truncate(self, size: int) -> None:
        assert self._data is not None
        del self._data[size:]

    def _storage_retire(self) -> None:
        self._data = None

    def _storage_discard(self) -> None:
        self._data = None
        self._repo._delete(self._created)

    def _storage_close(self) -> None:
        self._data = None


class InMemoryContentRepository(ContentRepositoryOptions, ContentRepository):
    """Contents in ``bytearray``s keyed by resource claim; thread-safe. Takes the options of
    ``FileSystemContentRepository`` (``archive_max_usage_percent`` does not apply: there is no disk)."""

    def __init__(self, *, containers: Iterable[str] = ("memory",), **options: Any) -> None:
        super().__init__(**options)
        self._names = tuple(containers)
        if not self._names:
            raise ValueError("at least one content container is needed")
        self._live: dict[ResourceClaim, bytearray] = {}
        self._archive: dict[ResourceClaim, tuple[bytearray, float]] = {}
        self._lock = threading.Lock()
        self._next = 0

    @classmethod
    def from_settings(cls, root: Any, settings: ContentSettings) -> "InMemoryContentRepository":
        """Same options as ``FileSystemContentRepository.from_settings``; ``root`` is ignored."""
        return cls(**options_from_settings(settings))

    # --- writing ------------------------------------------------------------------------
    def writer(self) -> InMemoryClaimWriter:
        return InMemoryClaimWriter(self)

    def _new_claim(self) -> tuple[ResourceClaim, bytearray]:
        claim_id = new_claim_id()
        with self._lock:
            name = self._names[self._next % len(self._names)]
            self._next += 1
            resource = ResourceClaim(name, self.next_section(), claim_id)
            data = self._live[resource] = bytearray()
        return resource, data

    def _delete(self, resources: Iterable[ResourceClaim]) -> None:
        with self._lock:
            for resource in resources:
                self._live.pop(resource, None)

    # --- reading ------------------------------------------------------------------------
    def _slice(self, claim: ContentClaim) -> bytes:
        resource = claim.resource
        with self._lock:
            data = self._live.get(resource)
            if data is None:
                archived = self._archive.get(resource)
                if archived is None:
                    error = ContentNotFoundError(
                        f"resource claim {resource.id!r} of container {resource.container!r} is "
                        f"neither live nor archived: it was aged off the archive or deleted"
                    )
                    error.claim = resource
                    raise error
                data = archived[0]
            if claim.offset + claim.length > len(data):
                raise ContentRepositoryError(
                    f"resource claim {resource.id!r} holds {len(data)} bytes, fewer than the "
                    f"content at offset {claim.offset}, length {claim.length}"
                )
            return bytes(data[claim.offset : claim.offset + claim.length])

    def open(self, claim: ContentClaim) -> MemoryContentStream:
        return MemoryContentStream(self._slice(claim), claim)

    def read_bytes(self, claim: ContentClaim | None) -> bytes:
        return b"" if claim is None else self._slice(claim)

    def read_many(self, claims: Sequence[ContentClaim | None]) -> list[bytes]:
        return [self.read_bytes(claim) for claim in claims]

    # --- management ---------------------------------------------------------------------
    def release(self, resources: Iterable[ResourceClaim]) -> int:
        done = 0
        now = time.time()
        with self._lock:
            for resource in dict.fromkeys(resources):
                data = self._live.pop(resource, None)
                if data is None:
                    continue
                if self.archive_enabled:
                    self._archive[resource] = (data, now)
                done += 1
        return done

    def age_off_archive(self, now: float | None = None) -> dict[str, int]:
        """Age-off by retention only (there is no disk to fill)."""
        now = time.time() if now is None else now
        stats = dict(removed=0, removed_by_retention=0, removed_by_usage=0, bytes_freed=0,
                     archive_bytes=0, archive_count=0)
        with self._lock:
            if self.archive_max_retention is not None:
                cutoff = now - self.archive_max_retention
                for resource, (data, archived_at) in list(self._archive.items()):
                    if archived_at < cutoff:
                        del self._archive[resource]
                        stats["removed_by_retention"] += 1
                        stats["bytes_freed"] += len(data)
            stats["archive_count"] = len(self._archive)
            stats["archive_bytes"] = sum(len(data) for data, _ in self._archive.values())
        stats["removed"] = stats["removed_by_retention"]
        return stats

    def remove_orphans(self, is_referenced: Callable[[ResourceClaim], bool]) -> int:
        orphans = [r for r in self.iter_resource_claims() if not is_referenced(r)]
        self._delete(orphans)
        return len(orphans)

    def iter_resource_claims(self) -> Iterator[ResourceClaim]:
        with self._lock:
            resources = list(self._live)
        return iter(resources)

    def usage(self) -> dict[str, dict[str, Any]]:
        result = {name: _empty_usage() for name in self._names}
        with self._lock:
            for resource, data in self._live.items():
                entry = result.setdefault(resource.container, _empty_usage())
                entry["live_bytes"] += len(data)
                entry["live_count"] += 1
            for resource, (data, _) in self._archive.items():
                entry = result.setdefault(resource.container, _empty_usage())
                entry["archive_bytes"] += len(data)
                entry["archive_count"] += 1
        return result


def _empty_usage() -> dict[str, Any]:
    """A container's ``usage()`` entry before anything is counted (no path: nothing is on disk)."""
    return dict(path=None, live_bytes=0, live_count=0, archive_bytes=0, archive_count=0)
