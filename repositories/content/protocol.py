"""The content repository as the framework uses it: ``ContentRepository``.

Two implementations follow it: ``FileSystemContentRepository`` (repository.py), the durable one a
flow's folder holds, and ``InMemoryContentRepository`` (memory.py), for the stateless engine and
the unit-test runner. Both subclass it, so the type checker holds their signatures to it.

A session writes its contents through one ``writer()`` and reads them through ``open()``,
``read_bytes()`` or ``read_many()``; the repository service (the content-repository actor on Ray)
calls the management methods: ``release``, ``age_off_archive``, ``remove_orphans``, ``usage``.
What only the file-system repository has (its files' paths, its containers' directories) is not
part of it.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, Iterable, Protocol, Sequence

from repositories.model import ContentClaim, ResourceClaim

from .writer import BaseClaimWriter


class ContentRepository(Protocol):
    """FlowFile contents in resource claims: written by one writer a session, read by anyone,
    released once no FlowFile references them. Errors are ``ContentRepositoryError`` (errors.py)."""

    def writer(self) -> BaseClaimWriter:
        """A new writer for the contents of one session (writer.py states its rules). Its resource
        claims are its own: no other writer appends to them. A content it has finished can be read
        through this repository at once, before any commit."""

    def open(self, claim: ContentClaim) -> BinaryIO:
        """A readable, seekable stream over exactly the content of ``claim`` (positions relative to
        the content) from the live resource claim or else the archived one; iterating it yields
        chunks of bytes, not lines. The caller closes it. Raises ``ContentNotFoundError`` when the
        resource claim is neither live nor archived, and ``ContentRepositoryError`` (at once or
        when read) when it is unknown or holds fewer bytes than ``claim`` names."""

    def read_bytes(self, claim: ContentClaim | None) -> bytes:
        """The whole content of ``claim`` in memory, ``b""`` for ``None``; raises as ``open``."""

    def read_many(self, claims: Sequence[ContentClaim | None]) -> list[bytes]:
        """``read_bytes`` of each claim, in order (a batch's read); raises as ``open``."""

    def release(self, resources: Iterable[ResourceClaim]) -> int:
        """Archive (with the archive enabled) or delete resource claims no FlowFile references any
        more. Call only for claims whose claimant count reached zero and after a FlowFile
        repository checkpoint that no longer references them. An archived claim stays readable
        until age-off removes it. Claims already released are skipped; every claim is checked
        before any is touched. Returns the number archived or deleted."""

    def age_off_archive(self, now: float | None = None) -> dict[str, int]:
        """Remove archived claims archived longer than the retention before ``now`` (default: the
        current time), then, where the repository has a disk, the oldest archived claims while its
        file system is fuller than the max usage percent. Returns ``removed``,
        ``removed_by_retention``, ``removed_by_usage``, ``bytes_freed`` and the
        ``archive_bytes``/``archive_count`` left."""

    def remove_orphans(self, is_referenced: Callable[[ResourceClaim], bool]) -> int:
        """Delete the live resource claims for which ``is_referenced`` is false (written by
        sessions that never committed); archived claims are left alone. Run at start-up only,
        after FlowFile repository recovery and before any writer exists: it would delete the
        claims of a session in progress. Returns the number deleted."""

    def usage(self) -> dict[str, dict[str, Any]]:
        """Per container name: ``path`` (its directory, None in memory), ``live_bytes``,
        ``live_count``, ``archive_bytes``, ``archive_count``, and where there is a disk its file
        system's ``disk_total``, ``disk_used``, ``disk_free`` and ``disk_percent``."""
