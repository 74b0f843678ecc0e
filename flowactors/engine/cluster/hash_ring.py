"""Consistent hashing for ``partition-by-attribute`` (seed 002): a key's node changes only when
the node it hashed to leaves, or when a joining node takes over a share of the ring.

Each node owns ``VIRTUAL_NODES`` points on a 64-bit ring (BLAKE2b of ``"<node>#<i>"``); a key goes
to the first point at or after its own hash (BLAKE2b of its UTF-8 value), wrapping around. A
missing attribute is a value of its own (``None`` hashes as a byte string no text can give), so
FlowFiles without the attribute still go to one node together, as NiFi sends them. The hash is
stable across processes and Python versions (``hash()`` is salted per process and is not).
"""

from __future__ import annotations

import bisect
from hashlib import blake2b
from typing import Iterable

#: points a node owns on the ring: more spread the keys more evenly (128: each node's share of
#: random keys within 6 % of 1/N for 3 nodes (tests/test_cluster_partitioning.py), between 0.82 and
#: 1.21 of it for 100 nodes (docs/scale-out.md))
VIRTUAL_NODES = 128
_MISSING = b"\xff\x00missing"  # not valid UTF-8: no attribute value encodes to it


def _point(data: bytes) -> int:
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big")


def key_hash(value: str | None) -> int:
    """Where a key (an attribute's value, ``None`` when missing) sits on the ring."""
    return _point(_MISSING if value is None else value.encode("utf-8", "surrogatepass"))


class HashRing:
    """The ring of ``nodes``; ``node_for(value)`` is the node a key belongs to."""

    def __init__(self, nodes: Iterable[str], virtual_nodes: int = VIRTUAL_NODES):
        self.nodes = tuple(dict.fromkeys(nodes))
        if not self.nodes:
            raise ValueError("a hash ring needs at least one node")
        points = sorted((_point(f"{node}#{i}".encode()), node) for node in self.nodes for i in range(virtual_nodes))
        self._hashes = [h for h, _ in points]
        self._owners = [n for _, n in points]

    def node_for(self, value: str | None) -> str:
        index = bisect.bisect_left(self._hashes, key_hash(value))
        return self._owners[index if index < len(self._owners) else 0]
