"""Jolt's Default (Defaultr): fills in values the input lacks, changing the input in place.

The spec mirrors the input. A key whose value is a scalar, a list or null is a default: written
(a deep copy) where the input has no such key or a null there. A key whose value is a map walks
down, making the container when the input has none (a map; a list when the key ends in ``[]``,
whose children are then indexes). Keys: a literal; ``a|b`` (the alternatives the input has);
``*`` (every key the input has at that level). Literals apply first, then ``|`` keys (fewer
alternatives first), then ``*``, so a literal's default wins over a wildcard's.
"""

from __future__ import annotations

import copy
from typing import Any

from flowactors.processors.jolt.paths import JoltSpecError, JoltTransformError

_LITERAL, _OR, _STAR = 0, 1, 2


class DefaultKey:
    """One spec key: what it matches, and either a default value or children."""

    __slots__ = ("raw", "op", "names", "array", "value", "children", "size", "index_keys")

    def __init__(self, raw: str, spec: Any, parent_is_array: bool):
        if not isinstance(raw, str):
            raise JoltSpecError(f"Default spec keys must be strings, not {raw!r}")
        self.array = raw.endswith("[]")
        self.raw = key = raw[:-2] if self.array else raw
        if "*" in key:
            if key != "*":
                raise JoltSpecError(f"Default key {raw!r}: a * key can hold nothing but the *")
            self.op, self.names = _STAR, []
        elif "|" in key:
            self.op, self.names = _OR, key.split("|")
        else:
            self.op, self.names = _LITERAL, [key]
        self.index_keys = parent_is_array
        if parent_is_array:
            try:
                self.names = [int(name) for name in self.names]
            except ValueError:
                raise JoltSpecError(f"Default key {raw!r}: below an array key ([]) keys are indexes") from None
        self.children: list[DefaultKey] | None = None
        self.value = None
        self.size = -1
        if isinstance(spec, dict):
            children = [DefaultKey(name, sub, self.array) for name, sub in spec.items()]
            self.children = sorted(children, key=lambda k: (k.op, len(k.names) if k.op == _OR else 0,
                                                             k.raw if k.op == _OR else ""))
            if self.array:
                self.size = max((n for child in children if child.op == _LITERAL for n in child.names), default=-1)
        else:
            self.value = spec

    def apply_children(self, container: Any) -> None:
        if self.array and isinstance(container, list):
            while len(container) <= self.size:
                container.append(None)
        for child in self.children:
            child.apply(container)

    def apply(self, container: Any) -> None:
        if isinstance(container, dict) and not self.index_keys:
            if self.op == _STAR:
                keys = list(container)
            elif self.op == _OR:
                keys = [name for name in self.names if name in container]
            else:
                keys = self.names
            for key in keys:
                self._apply_at(container, key, container.get(key))
        elif isinstance(container, list) and self.index_keys:
            if self.op == _STAR:
                keys = range(len(container))
            else:
                keys = [n for n in self.names if n < len(container)] if self.op == _OR else self.names
            for index in keys:
                if index < len(container):
                    self._apply_at(container, index, container[index])

    def _apply_at(self, container: Any, key: Any, current: Any) -> None:
        if self.children is None:
            if current is None:
                container[key] = copy.deepcopy(self.value)
            return
        if current is None:
            current = [] if self.array else {}
            container[key] = current
        self.apply_children(current)


class Default:
    """A compiled Default spec; ``apply(input)`` fills the input in place and returns it."""

    def __init__(self, spec: Any):
        if not isinstance(spec, dict):
            raise JoltSpecError(f"a Default spec is a JSON object, not {type(spec).__name__}")
        self.map_root = DefaultKey("root", spec, False)
        try:
            self.list_root: DefaultKey | None = DefaultKey("root[]", spec, False)
        except JoltSpecError:
            self.list_root = None   # keys that are no indexes: this spec takes no top-level array

    def apply(self, document: Any) -> Any:
        if document is None:
            document = {}
        if isinstance(document, list):
            if self.list_root is None:
                raise JoltTransformError("this Default spec can not take a top-level JSON array "
                                         "(its top-level keys are not indexes)")
            self.list_root.apply_children(document)
        else:
            self.map_root.apply_children(document)
        return document
