"""Jolt's Cardinality (CardinalityTransform): makes values single or lists, in place.

The spec mirrors the input; a key's value is ``"ONE"`` or ``"MANY"``, or a map to walk down.
``MANY``: a list stays, a map or a scalar becomes a list of it, null becomes ``[]``. ``ONE``: a
list becomes its first element (null when empty); anything else stays. An ``@`` key beside others
changes the value of the level it sits in before its siblings walk into it. Keys: literals, ``*``
and star patterns (a literal takes a key before any pattern; patterns in the order ``&``, stars).
"""

from __future__ import annotations

from typing import Any

from flowactors.processors.jolt.paths import (
    Amp, JoltSpecError, Literal, Matched, StarAll, StarMany, StarSingle, unescape,
)

ONE, MANY = "ONE", "MANY"


def _element(raw: str) -> Any:
    if "@" in raw:
        return None   # the level's own value
    if raw == "*":
        return StarAll()
    stars = raw.count("*")
    if stars:
        return StarSingle(raw) if stars == 1 else StarMany(raw)
    return Amp(raw) if "&" in raw else Literal(unescape(raw))


def _build(raw: str, spec: Any) -> "CardinalityLeaf | CardinalityComposite":
    if not isinstance(raw, str):
        raise JoltSpecError(f"Cardinality spec keys must be strings, not {raw!r}")
    if isinstance(spec, dict):
        return CardinalityComposite(raw, spec)
    return CardinalityLeaf(raw, spec)


class CardinalityLeaf:
    __slots__ = ("element", "relationship")

    def __init__(self, raw: str, spec: Any):
        self.element = _element(raw)
        if spec not in (ONE, MANY):
            raise JoltSpecError(f"Cardinality key {raw!r}: the value must be \"ONE\" or \"MANY\", not {spec!r}")
        self.relationship = spec

    def adjust(self, key: Any, value: Any, parent: Any) -> Any:
        """Write the value's new form into ``parent[key]`` and return it."""
        if self.relationship == MANY:
            if isinstance(value, list):
                return value
            value = [] if value is None else [value]
        else:
            if not isinstance(value, list):
                return value
            value = value[0] if value else None
        parent[key] = value
        return value

    def apply(self, key: str, position: Any, value: Any, walked: list, parent: Any) -> bool:
        if self.element is None or self.element.match(key, walked) is None:
            return False
        self.adjust(position, value, parent)
        return True


class CardinalityComposite:
    __slots__ = ("element", "own", "literal", "computed")

    def __init__(self, raw: str, spec: dict):
        self.element = _element(raw)
        if self.element is None:
            raise JoltSpecError(f"Cardinality key {raw!r}: an @ key takes \"ONE\" or \"MANY\", not a map")
        if not spec:
            raise JoltSpecError(f"Cardinality key {raw!r}: an empty {{}} is not a valid spec value")
        self.own: CardinalityLeaf | None = None
        self.literal: dict[str, Any] = {}
        computed = []
        for name, sub in spec.items():
            child = _build(name, sub)
            if child.element is None:
                self.own = child
            elif isinstance(child.element, Literal):
                self.literal[child.element.key] = child
            else:
                computed.append(child)
        self.computed = sorted(computed, key=lambda child: 0 if isinstance(child.element, Amp) else 1)

    def apply(self, key: str, position: Any, value: Any, walked: list, parent: Any) -> bool:
        matched = self.element.match(key, walked)
        if matched is None:
            return False
        walked.append((value, matched))
        if self.own is not None:
            value = self.own.adjust(position, value, parent)
        self.children(value, walked)
        walked.pop()
        return True

    def children(self, value: Any, walked: list) -> None:
        if isinstance(value, dict):
            entries = [(key, key, item) for key, item in value.items()]
        elif isinstance(value, list):
            entries = [(str(index), index, item) for index, item in enumerate(value)]
        else:
            return   # a scalar has nothing to change below it
        for key, position, item in entries:
            child = self.literal.get(key)
            if child is not None:
                child.apply(key, position, item, walked, value)
                continue
            for child in self.computed:
                if child.apply(key, position, item, walked, value):
                    break


class Cardinality:
    """A compiled Cardinality spec; ``apply(input)`` changes the input in place and returns the
    result (a new value when the spec's top-level ``@`` changes the document itself)."""

    def __init__(self, spec: Any):
        if not isinstance(spec, dict):
            raise JoltSpecError(f"a Cardinality spec is a JSON object, not {type(spec).__name__}")
        self.root = CardinalityComposite("root", spec)

    def apply(self, document: Any) -> Any:
        holder = {"root": document}
        self.root.apply("root", "root", document, [(holder, Matched("root"))], holder)
        return holder["root"]

