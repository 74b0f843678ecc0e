"""What both content repositories share about their claims: the options they are built with, and
how a new resource claim is named.

``ContentRepositoryOptions`` holds and checks the options of the file-system and the in-memory
repository alike (claim size and count limits, sync, archive), which ``options_from_settings``
takes from a flow's settings (anything with the fields of ``ContentSettings``, such as
``flowactors.sdk.settings.Settings``). A new resource claim gets an id unique without coordination
(``new_claim_id``) and a section from ``ContentRepositoryOptions.next_section``.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import threading
import time
from typing import Any, Protocol, Sequence

#: new claims a repository object (a process) puts in one section before it moves on to the next
#: (``ContentRepositoryOptions.next_section``)
CLAIMS_PER_SECTION = 64
#: sections between where two threads of one process start their runs of sections: two threads'
#: runs share a directory only once one has made this many runs more than the other (modulo the
#: number of sections)
THREAD_SECTION_STRIDE = 97


class ContentSettings(Protocol):
    """The settings a content repository is made from (``options_from_settings``): the names of its
    containers, its sections, the claim limits, sync and the archive, as
    ``docs/configuration.md`` describes them."""

    @property
    def content_containers(self) -> Sequence[str]: ...

    @property
    def content_sections(self) -> int: ...

    @property
    def max_appendable_claim_size(self) -> int: ...

    @property
    def max_flowfiles_per_claim(self) -> int: ...

    @property
    def always_sync(self) -> bool: ...

    @property
    def archive_enabled(self) -> bool: ...

    @property
    def archive_max_retention(self) -> float | None: ...

    @property
    def archive_max_usage_percent(self) -> float | None: ...

    @property
    def content_checksums(self) -> bool: ...


def options_from_settings(settings: ContentSettings) -> dict[str, Any]:
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
        checksums=settings.content_checksums,
    )


class _ClaimIds:
    """``<time_ns>-<pid>-<random 32-bit hex>-<counter>``: unique across processes and restarts
    without coordination (the token is drawn again in a forked child)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._prefix = f"-{os.getpid()}-{secrets.token_hex(4)}-"
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{time.time_ns()}{self._prefix}{next(self._counter)}"


_claim_ids = _ClaimIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_claim_ids.reset)


def new_claim_id() -> str:
    """A resource claim id no other process, thread or earlier run has made or will make (see
    ``_ClaimIds``); it matches the claim id pattern of the layout (``claim_files.CLAIM_ID``)."""
    return _claim_ids.next()


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
        checksums: bool = False,
    ) -> None:
        """``checksums``: write a CRC-32 of every 4 KiB block of each new claim file beside it and
        verify every read of those claims (checksums.py); the in-memory repository has no files
        and ignores it."""
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
        self.checksums = checksums
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
        which ext4 holds through a create (docs/performance.md)."""
        turns = self._section_turns
        try:
            turn = next(turns.count)
        except AttributeError:  # this thread's first claim: its count starts at its first section's run
            first = self._first_section + next(self._writer_threads) * THREAD_SECTION_STRIDE
            turns.count = itertools.count(first * CLAIMS_PER_SECTION)
            turn = next(turns.count)
        return str(turn // CLAIMS_PER_SECTION % self.sections)
