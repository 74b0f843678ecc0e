"""A processor's named outlet."""

from __future__ import annotations


class Relationship:
    """Where a processor may send FlowFiles. ``auto_terminated``: dropped unless connected."""

    def __init__(self, name, description, auto_terminated=False):
        self.name = name
        self.description = description
        self.auto_terminated = auto_terminated

    def __repr__(self) -> str:
        return f"Relationship({self.name!r})"
