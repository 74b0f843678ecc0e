"""The FlowFile repository: the write-ahead log of every FlowFile's attributes, content claim and
queue (LMDB), with claimant counts, checkpoints, recovery, the swap-file registry and processor
state.

``WriteAheadFlowFileRepository`` is the durable one; ``InMemoryFlowFileRepository`` has the same
interface for tests and the stateless engine. Formats: docs/formats/flowfile-repository.md.
"""

from repositories.flowfile.errors import (
    FlowFileRepositoryError,
    RepositoryCorruptError,
    RunReplacedError,
    StateConflictError,
    UnsupportedFormatVersionError,
)
from repositories.flowfile.memory import InMemoryFlowFileRepository
from repositories.flowfile.wal import SWAP_QUEUE_PREFIX, WriteAheadFlowFileRepository

__all__ = [
    "FlowFileRepositoryError",
    "InMemoryFlowFileRepository",
    "RepositoryCorruptError",
    "RunReplacedError",
    "SWAP_QUEUE_PREFIX",
    "StateConflictError",
    "UnsupportedFormatVersionError",
    "WriteAheadFlowFileRepository",
]
