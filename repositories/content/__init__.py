"""The content repository: FlowFile contents in append-only resource claim files.

``FileSystemContentRepository`` is the file-system implementation (containers, sections, archive,
age-off); ``InMemoryContentRepository`` offers the same reading and writing interface in memory. A
session writes through one writer (``ClaimWriter`` on disk) and reads through
``open()``/``read_bytes()``. The on-disk layout is described in
``docs/formats/content-repository.md``.
"""

from .claim_files import ARCHIVE_DIR
from .errors import ContentNotFoundError, ContentRepositoryError, ContentRepositoryFullError
from .file_writer import ClaimWriter
from .memory import InMemoryClaimWriter, InMemoryContentRepository, MemoryContentStream
from .options import ContentSettings
from .repository import FileSystemContentRepository
from .streams import ContentInputStream
from .writer import BaseClaimWriter, ContentOutputStream

__all__ = [
    "ARCHIVE_DIR",
    "BaseClaimWriter",
    "ClaimWriter",
    "ContentInputStream",
    "ContentNotFoundError",
    "ContentOutputStream",
    "ContentRepositoryError",
    "ContentRepositoryFullError",
    "ContentSettings",
    "FileSystemContentRepository",
    "InMemoryClaimWriter",
    "InMemoryContentRepository",
    "MemoryContentStream",
]
