"""The content repository: FlowFile contents in append-only resource claim files.

``ContentRepository`` is the interface the framework uses (protocol.py);
``FileSystemContentRepository`` implements it on disk (containers, sections, archive, age-off) and
``InMemoryContentRepository`` in memory. A session writes through one writer (``ClaimWriter`` on
disk) and reads through ``open()``/``read_bytes()``. The on-disk layout is described in
``docs/formats/content-repository.md``.
"""

from .claim_files import ARCHIVE_DIR
from .errors import ContentChecksumError, ContentNotFoundError, ContentRepositoryError, ContentRepositoryFullError
from .file_writer import ClaimWriter
from .memory import InMemoryClaimWriter, InMemoryContentRepository, MemoryContentStream
from .options import ContentSettings
from .protocol import ContentRepository
from .repository import FileSystemContentRepository
from .streams import ContentInputStream
from .writer import BaseClaimWriter, ContentOutputStream

__all__ = [
    "ARCHIVE_DIR",
    "BaseClaimWriter",
    "ClaimWriter",
    "ContentChecksumError",
    "ContentInputStream",
    "ContentNotFoundError",
    "ContentOutputStream",
    "ContentRepository",
    "ContentRepositoryError",
    "ContentRepositoryFullError",
    "ContentSettings",
    "FileSystemContentRepository",
    "InMemoryClaimWriter",
    "InMemoryContentRepository",
    "MemoryContentStream",
]
