"""Jolt's Remove (Removr): deletes keys from the input, in place.

The spec mirrors the input. A key whose value is ``""`` removes that key; a key whose value is a
map walks down. Keys: a literal (in a list: an index), ``*`` (every key or index), a pattern with
stars (``TAG-*``: map keys only, each star one or more characters), and ``a|b``. Indexes are
removed from a list highest first, so that they all mean the positions before the removal.
"""

from __future__ import annotations

from typing import Any

from flowactors.processors.jolt.paths import JoltSpecError, Literal, StarAll, StarMany, StarSingle, unescape


def _element(raw: str) -> Any:
    if raw == "*":
        return StarAll()
    stars = raw.count("*")
    if stars == 1:
        return StarSingle(raw)
    return StarMany(raw) if stars else Literal(unescape(raw))


class RemoveKey:
    """One spec key: ``children`` None removes what it matches, else the walk goes on below."""

    __slots__ = ("element", "children", "index")

    def __init__(self, raw: str, spec: Any):
        self.element = _element(raw)
        key = self.element.key
        self.index = int(key) if isinstance(self.element, Literal) and key.isdigit() else None
        if isinstance(spec, dict):
            self.children = compile_children(spec)
        elif isinstance(spec, str) and not spec.strip():
            self.children = None
        else:
            raise JoltSpecError(f"Remove key {raw!r}: the value must be \"\" (remove it) or a map, not {spec!r}")

    def map_keys(self, tree: dict) -> list[str]:
        """The keys of ``tree`` this key matches."""
        element = self.element
        if isinstance(element, Literal):
            return [element.key] if element.key in tree else []
        return [key for key in tree if element.matches_text(key)]

    def list_indexes(self, tree: list) -> list[int]:
        if self.index is not None:
            return [self.index] if self.index < len(tree) else []
        return list(range(len(tree))) if isinstance(self.element, StarAll) else []

    def remove_from(self, tree: Any) -> list:
        """Walk into the matched children; return what to remove from ``tree`` itself."""
        if isinstance(tree, dict):
            matched = self.map_keys(tree)
            if self.children is None:
                return matched
            for key in matched:
                remove_children(self.children, tree[key])
        elif isinstance(tree, list):
            matched = self.list_indexes(tree)
            if self.children is None:
                return matched
            for index in matched:
                remove_children(self.children, tree[index])
        return []


def compile_children(spec: dict) -> list[RemoveKey]:
    return [RemoveKey(alternative, sub) for raw, sub in spec.items() for alternative in raw.split("|")]


def remove_children(children: list[RemoveKey], tree: Any) -> None:
    doomed: set = set()
    for child in children:
        doomed.update(child.remove_from(tree))
    if isinstance(tree, list):
        for index in sorted(doomed, reverse=True):
            del tree[index]
    else:
        for key in doomed:
            del tree[key]


class Remove:
    """A compiled Remove spec; ``apply(input)`` changes the input in place and returns it."""

    def __init__(self, spec: Any):
        if not isinstance(spec, dict):
            raise JoltSpecError(f"a Remove spec is a JSON object, not {type(spec).__name__}")
        self.children = compile_children(spec)

    def apply(self, document: Any) -> Any:
        if document is not None:
            remove_children(self.children, document)
        return document
