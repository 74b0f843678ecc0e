"""The provenance repository: what happened to every FlowFile, searchable, with lineage.

Public names are re-exported here; the modules are ``event`` (the event type and its encoding),
``journal`` (commit-path journals), ``eventfile`` (merged, compressed event files and their tables of
contents), ``index`` (LMDB index shards), ``lineage``, ``repository`` (the durable repository) with
its parts ``unmerged``, ``file_set``, ``merge``, ``recovery`` and ``filters``, ``memory`` (the
repository in memory) and ``outbox`` (taking a running flow's events from the FlowFile repository).
"""

from repositories.provenance.event import (
    ProvenanceEvent,
    ProvenanceEventType,
    ProvenanceFormatError,
    decode_event,
    encode_event,
)
from repositories.provenance.lineage import Lineage, LineageEdge, LineageNode
from repositories.provenance.memory import InMemoryProvenanceRepository
from repositories.provenance.repository import ProvenanceRepository

__all__ = [
    "InMemoryProvenanceRepository",
    "Lineage",
    "LineageEdge",
    "LineageNode",
    "ProvenanceEvent",
    "ProvenanceEventType",
    "ProvenanceFormatError",
    "ProvenanceRepository",
    "decode_event",
    "encode_event",
]
