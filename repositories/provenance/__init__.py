"""The provenance repository: what happened to every FlowFile, searchable, with lineage.

Public names are re-exported here; the modules are ``event`` (the event type and its encoding),
``journal`` (commit-path journals), ``eventfile`` (merged, compressed event files and their tables of
contents), ``index`` (LMDB index shards), ``lineage``, ``protocol`` (``ProvenanceRepository``: what
the engine calls on a repository), ``repository`` (``WriteAheadProvenanceRepository``, the durable
one) with its parts ``unmerged``, ``file_set``, ``merge``, ``recovery``, ``damage`` and ``repair``
(damaged event files), ``index_query`` and ``filters``, ``memory``
(``InMemoryProvenanceRepository``) and ``outbox`` (taking a running flow's events from the FlowFile
repository).
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
from repositories.provenance.protocol import ProvenanceRepository
from repositories.provenance.repository import WriteAheadProvenanceRepository

__all__ = [
    "InMemoryProvenanceRepository",
    "Lineage",
    "LineageEdge",
    "LineageNode",
    "ProvenanceEvent",
    "ProvenanceEventType",
    "ProvenanceFormatError",
    "ProvenanceRepository",
    "WriteAheadProvenanceRepository",
    "decode_event",
    "encode_event",
]
