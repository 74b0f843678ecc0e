"""Jolt's Shift (Shiftr): copies values of the input to places in a new output tree.

The spec mirrors the input: at each level its keys match the input's keys (paths.py lists the key
kinds), and a key whose value is a path (or a list of paths, or null) writes the matched value
there. Literal keys are tried first; a key that no literal takes goes to the first wildcard that
matches it, in Jolt's order: ``&`` keys, keys of 3+ stars, of 2 stars, ``pre*suf``, then ``*``.
``$``, ``#`` and ``@`` keys are "special": they run at every matched level, before the others.
A value that is a scalar where the spec has more levels is matched as a key itself (``"true":
{"#yes": "out"}``). Values written to the same place become a list, in the order written.
"""

from __future__ import annotations

from typing import Any

from flowactors.processors.jolt.paths import (
    MISSING, At, Dollar, Hash, JoltSpecError, Literal, Matched, OutputPath, Transpose, key_text, parse_key,
)

_SPECIAL = (At, Dollar, Hash, Transpose)


class ShiftLeaf:
    """A key whose value is where to write: a path, a list of paths, or null (write nowhere)."""

    __slots__ = ("element", "writers", "kind")

    def __init__(self, element: Any, rhs: Any):
        self.element = element
        if isinstance(rhs, str):
            self.writers = [OutputPath(rhs)]
        elif isinstance(rhs, list):
            if not all(isinstance(path, str) for path in rhs):
                raise JoltSpecError(f"key {element.key!r}: a list of output paths holds only strings")
            self.writers = [OutputPath(path) for path in rhs]
        elif rhs is None:
            self.writers = []
        else:
            raise JoltSpecError(f"key {element.key!r}: the value must be a map, an output path, "
                                f"a list of output paths or null, not {rhs!r}")
        self.kind = type(element)

    def apply(self, key: str, value: Any, walked: list, output: dict) -> bool:
        matched = self.element.match(key, walked)
        if matched is None:
            return False
        if value is MISSING:
            value = None
        kind = self.kind
        real = False
        if kind is Dollar or kind is Hash:
            data = matched.key
        elif kind is At:
            data = value
        elif kind is Transpose:
            data = self.element.value(walked)
            if data is MISSING:
                return False
        else:
            data = value
            real = True
        walked.append((value, matched))
        for writer in self.writers:
            writer.write(data, output, walked)
        walked.pop()
        if real:
            walked[-1][1].hash_count += 1
        return real


class ShiftComposite:
    """A key whose value is a map of keys one level down."""

    __slots__ = ("element", "special", "literal", "computed", "mixed")

    def __init__(self, element: Any, spec: dict):
        self.element = element
        if isinstance(element, (At, Dollar)):
            raise JoltSpecError(f"key {element.key!r} can not have children")
        if not spec:
            where = "the Shift spec" if element.key == "root" else f"key {element.key!r}"
            raise JoltSpecError(f"{where}: an empty {{}} is not a valid Shift spec value")
        self.special, self.literal, computed = [], {}, []
        seen = set()
        for raw, rhs in spec.items():
            if not isinstance(raw, str):
                raise JoltSpecError(f"Shift spec keys must be strings, not {raw!r}")
            for alternative in raw.split("|"):
                child = build(alternative, rhs)
                if alternative in seen:
                    raise JoltSpecError(f"key {alternative!r} appears twice at one level of the spec")
                seen.add(alternative)
                if isinstance(child.element, Literal):
                    self.literal[child.element.key] = child
                elif isinstance(child.element, _SPECIAL):
                    self.special.append(child)
                else:
                    computed.append(child)
        self.computed = sorted(computed, key=lambda child: child.element.order)
        # a wildcard that could also take a literal's key: each key goes to a literal or to the wildcards
        self.mixed = bool(self.literal) and any(
            not hasattr(child.element, "matches_text") or any(child.element.matches_text(key) for key in self.literal)
            for child in self.computed)

    def apply(self, key: str, value: Any, walked: list, output: dict) -> bool:
        matched = self.element.match(key, walked)
        if matched is None:
            return False
        if type(self.element) is Transpose:
            value = self.element.value(walked)
            if value is MISSING:
                return False
        elif value is MISSING:
            value = None
        walked.append((value, matched))
        for child in self.special:
            child.apply(key, value, walked, output)
        if value is not None:
            self.children(value, walked, output)
        walked.pop()
        walked[-1][1].hash_count += 1
        return True

    def children(self, value: Any, walked: list, output: dict) -> None:
        literal, computed = self.literal, self.computed
        if isinstance(value, dict):
            entries = value.items()
        elif isinstance(value, list):
            entries = ((str(index), item) for index, item in enumerate(value))
        else:
            entries = ((key_text(value), MISSING),)
        if self.mixed:
            for key, item in entries:
                child = literal.get(key)
                if child is not None:
                    child.apply(key, item, walked, output)
                else:
                    _first(computed, key, item, walked, output)
            return
        if literal:
            if isinstance(value, dict):
                for key, child in literal.items():
                    if key in value:
                        child.apply(key, value[key], walked, output)
            elif isinstance(value, list):
                for key, child in literal.items():
                    if key.isdigit() and int(key) < len(value):
                        child.apply(key, value[int(key)], walked, output)
            else:
                child = literal.get(key_text(value))
                if child is not None:
                    child.apply(key_text(value), MISSING, walked, output)
        if computed:
            for key, item in entries:
                _first(computed, key, item, walked, output)


def _first(computed: list, key: str, item: Any, walked: list, output: dict) -> None:
    for child in computed:
        if child.apply(key, item, walked, output):
            return


def build(raw: str, rhs: Any) -> ShiftLeaf | ShiftComposite:
    element = parse_key(raw)
    if isinstance(rhs, dict):
        return ShiftComposite(element, rhs)
    return ShiftLeaf(element, rhs)


class Shift:
    """A compiled Shift spec; ``apply(input)`` returns a new tree (the input is not changed, but
    the output shares the input's values)."""

    def __init__(self, spec: Any):
        if not isinstance(spec, dict):
            raise JoltSpecError(f"a Shift spec is a JSON object, not {type(spec).__name__}")
        self.root = ShiftComposite(Literal("root"), spec)

    def apply(self, document: Any) -> Any:
        output: dict = {}
        walked: list = [(document, Matched("root"))]
        self.root.apply("root", document, walked, output)
        return output.get("root")
