"""The provenance repository: what happened to every FlowFile, searchable, with lineage.

Public names are re-exported here; the modules are ``event`` (the event type and its encoding),
``journal`` (commit-path journals), ``eventfile`` (merged, compressed event files and their tables of
contents), ``index`` (LMDB index shards), ``lineage`` and ``repository``.
"""

from repositories.provenance.event import (
    ProvenanceEvent,
    ProvenanceEventType,
    ProvenanceFormatError,
    decode_event,
    encode_event,
)
from repositories.provenance.lineage import Lineage, LineageEdge, LineageNode
from repositories.provenance.repository import InMemoryProvenanceRepository, ProvenanceRepository

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
