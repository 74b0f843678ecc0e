"""The content repository: FlowFile contents in append-only resource claim files.

``FileSystemContentRepository`` is the file-system implementation (containers, sections, archive, age-off);
``InMemoryContentRepository`` offers the same reading and writing interface in memory. A session
writes through one ``ClaimWriter`` and reads through ``open()``/``read_bytes()``. The on-disk
layout is described in ``docs/formats/content-repository.md``.
"""

from .errors import ContentNotFoundError, ContentRepositoryError, ContentRepositoryFullError
from .memory import InMemoryClaimWriter, InMemoryContentRepository, MemoryContentStream
from .repository import ARCHIVE_DIR, ContentInputStream, FileSystemContentRepository
from .writer import ClaimWriter, ContentOutputStream

__all__ = [
    "ARCHIVE_DIR",
    "ClaimWriter",
    "ContentInputStream",
    "ContentNotFoundError",
    "ContentOutputStream",
    "FileSystemContentRepository",
    "ContentRepositoryError",
    "ContentRepositoryFullError",
    "InMemoryClaimWriter",
    "InMemoryContentRepository",
    "MemoryContentStream",
]
