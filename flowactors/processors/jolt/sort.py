"""Jolt's Sort (Sortr): the same document with every map's keys in order, recursively.

Keys starting with ``~`` come first; within each group keys are in Java's String order (UTF-16
code units, which differs from Python's code point order only past U+FFFF). Lists keep their
order; their elements are sorted within. Sort takes no spec.
"""

from __future__ import annotations

from typing import Any


def _order(key: str) -> tuple[bool, bytes]:
    return not key.startswith("~"), key.encode("utf-16-be", "surrogatepass")


def sort_document(value: Any) -> Any:
    """A sorted copy of the containers of ``value`` (scalars are shared)."""
    if isinstance(value, dict):
        return {key: sort_document(value[key]) for key in sorted(value, key=_order)}
    if isinstance(value, list):
        return [sort_document(item) for item in value]
    return value


class Sort:
    """Sort as a compiled transform: ``apply(input)`` returns the sorted document."""

    def __init__(self, spec: Any = None):
        self.spec = spec   # ignored, as Jolt and NiFi ignore it

    def apply(self, document: Any) -> Any:
        return sort_document(document)
