"""Where the claim files of a file-system content repository are: containers, sections, names.

Layout (``docs/formats/content-repository.md`` describes it byte by byte)::

    <container>/<section>/<claim id>            a live resource claim: raw contents, no header
    <container>/<section>/archive/<claim id>    an archived claim; its mtime is the archive time

``ClaimFiles`` maps a resource claim to those paths, refusing one whose container is not configured
or whose section or id is not a name of this layout (so a hostile claim never reaches outside the
containers), and names and places new claim files. The repository reads and releases claims
through it; a ``ClaimWriter`` creates its claim files through it.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from pathlib import Path
from typing import Callable, Iterator, Mapping

from repositories.model import ResourceClaim

from .checksums import CHECKED_SUFFIX, Trailer, is_checked
from .errors import ContentNotFoundError, ContentRepositoryError
from .options import new_claim_id

#: name of the archive directory inside every section.
ARCHIVE_DIR = "archive"
#: a section directory's name
SECTION_NAME = re.compile(r"[0-9]{1,9}\Z")
#: a claim file's name (what ``new_claim_id`` makes, and what older releases made)
CLAIM_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,199}\Z")


class ClaimFiles:
    """The claim files of one content repository object.

    ``containers`` maps each container's name to its absolute directory, in the order new claims
    take them in turn; ``next_section`` gives the section of the next new claim. Thread-safe.
    """

    def __init__(self, containers: Mapping[str, str], next_section: Callable[[], str]) -> None:
        self.containers: dict[str, str] = dict(containers)
        self._names = tuple(self.containers)
        self._next_section = next_section
        self._round_robin = itertools.count()
        self._known_dirs: set[str] = set()
        self._dirs_lock = threading.Lock()

    # --- locating -----------------------------------------------------------------------
    def directory_of(self, resource: ResourceClaim) -> str:
        """The directory of the resource claim's container; raises ``ContentRepositoryError`` when
        the container is not configured or the claim's section or id is not a layout name."""
        try:
            container = self.containers[resource.container]
        except KeyError:
            raise ContentRepositoryError(
                f"resource claim {resource.id!r} is in container {resource.container!r}, which "
                f"is not configured (containers: {list(self.containers)})"
            ) from None
        if not SECTION_NAME.match(resource.section) or not CLAIM_ID.match(resource.id):
            raise ContentRepositoryError(f"not a valid resource claim: {resource!r}")
        return container

    def path_of(self, resource: ResourceClaim) -> Path:
        """The live file of a resource claim (whether or not it exists), checked as
        ``directory_of`` does."""
        return Path(self.directory_of(resource), resource.section, resource.id)

    def archive_path_of(self, resource: ResourceClaim) -> Path:
        """The file of a resource claim once archived, checked as ``directory_of`` does."""
        return Path(self.directory_of(resource), resource.section, ARCHIVE_DIR, resource.id)

    def open_for_reading(self, resource: ResourceClaim) -> tuple[int, str, Trailer | None]:
        """The claim file opened read-only, live or else archived, its path, and its checksums (None
        for a claim written without); the caller closes the descriptor. Raises
        ``ContentNotFoundError`` when the claim is in neither place, and ``ContentChecksumError``
        when a claim written with checksums has no valid trailer."""
        container = self.directory_of(resource)
        live = os.path.join(container, resource.section, resource.id)
        archived = os.path.join(container, resource.section, ARCHIVE_DIR, resource.id)
        for path in (live, archived):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            if not is_checked(resource.id):
                return fd, path, None
            try:
                return fd, path, Trailer.load(fd, path, resource)
            except BaseException:
                os.close(fd)
                raise
        error = ContentNotFoundError(
            f"resource claim {resource.id!r} of container {resource.container!r} is neither live "
            f"({live}) nor archived ({archived}): it was aged off the archive or deleted"
        )
        error.claim = resource
        raise error

    # --- new claim files ----------------------------------------------------------------
    def next_claim(self, checked: bool = False) -> tuple[ResourceClaim, str]:
        """A resource claim no other has (``new_claim_id``) in the next container in turn and the
        next section, and that container's directory; ``checked``: its id says it is written with
        checksums. Nothing is created: the writer makes the section directory
        (``make_section_dir``) and then creates the file with ``O_EXCL``."""
        name = self._names[next(self._round_robin) % len(self._names)]
        claim_id = new_claim_id() + CHECKED_SUFFIX if checked else new_claim_id()
        return ResourceClaim(name, self._next_section(), claim_id), self.containers[name]

    def make_section_dir(self, resource: ResourceClaim) -> list[str]:
        """Make the claim's section directory exist (and its container's, if it was removed);
        returns the directories this call created, whose parents an fsync makes durable. A section
        this object made or found once is not looked at again."""
        container = self.containers[resource.container]
        path = os.path.join(container, resource.section)
        if path in self._known_dirs:
            return []
        created = []
        try:
            os.mkdir(path)
            created.append(path)
        except FileExistsError:
            pass
        except FileNotFoundError:  # the container directory was removed under us
            os.makedirs(container, exist_ok=True)
            os.mkdir(path)
            created.append(path)
        with self._dirs_lock:
            self._known_dirs.add(path)
        return created


def scandir(path: str) -> Iterator[os.DirEntry[str]]:
    """Entries of a directory, streamed, or none if it does not exist (a section without an
    archive)."""
    try:
        entries = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        yield from entries


def section_dirs(container: str) -> Iterator[os.DirEntry[str]]:
    """The section directories of a container (entries with other names are not the layout's)."""
    for section in scandir(container):
        if SECTION_NAME.match(section.name) and section.is_dir(follow_symlinks=False):
            yield section
