"""The FlowFile repository: the write-ahead log of every FlowFile's attributes, content claim and
queue (LMDB), with claimant counts, checkpoints, recovery, the swap-file registry and processor
state.

``FlowFileRepository`` (protocol.py) is its interface, what the engine and the tools call;
``WriteAheadFlowFileRepository`` (wal.py) is the durable implementation, ``InMemoryFlowFileRepository``
(memory.py) the one for tests and the test runner. Formats: docs/formats/flowfile-repository.md.
"""

from repositories.flowfile.errors import (
    FlowFileRepositoryError,
    RepositoryCorruptError,
    RunReplacedError,
    StateConflictError,
    UnsupportedFormatVersionError,
)
from repositories.flowfile.memory import InMemoryFlowFileRepository
from repositories.flowfile.protocol import FlowFileRepository
from repositories.flowfile.wal import SWAP_QUEUE_PREFIX, WriteAheadFlowFileRepository

__all__ = [
    "FlowFileRepository",
    "FlowFileRepositoryError",
    "InMemoryFlowFileRepository",
    "RepositoryCorruptError",
    "RunReplacedError",
    "SWAP_QUEUE_PREFIX",
    "StateConflictError",
    "UnsupportedFormatVersionError",
    "WriteAheadFlowFileRepository",
]
