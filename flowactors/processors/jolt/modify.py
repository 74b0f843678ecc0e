"""Jolt's Modify (Modifier): computes values in place, in three modes.

* ``overwrite`` (Modify - Overwrite, key prefix ``+``): always writes;
* ``default`` (Modify - Default, ``~``): writes where the key is missing or null;
* ``define`` (Modify - Define, ``_``): writes only where the key is missing.

The spec mirrors the input: literal keys, ``*`` and star patterns, and ``[n]`` list positions (a
level holds positions or keys, not both); ``a|b`` is both. A key prefixed ``+``, ``~`` or ``_``
uses that mode below it; a key ending ``?`` applies only where the input has the key. A map value
walks down, making the map or list where there is none (when the mode lets it write there). A
leaf's value is what to write: a literal; ``@(n,path)`` (a value of the input, n levels up from
the key being written, whose own value is ``@(0)``); ``=func`` (the function of the current
value) or ``=func(arg, ...)`` with arguments ``@(n,path)``, ``'text'``, numbers, ``true``,
``false`` or bare text; or a list of these, the first that has a result winning. A function
without a result (wrong kinds of argument, an empty list) writes nothing. functions.py holds the
library.
"""

from __future__ import annotations

from typing import Any

from flowactors.processors.jolt.functions import ABSENT, FUNCTIONS, to_number
from flowactors.processors.jolt.paths import (
    MISSING, ArrayIndex, JoltSpecError, Literal, Matched, OutputPath, StarAll, Transpose, parse_key,
)

OVERWRITE, DEFAULT, DEFINE = "overwrite", "default", "define"
_PREFIXES = {"+": OVERWRITE, "~": DEFAULT, "_": DEFINE}


class _Level(Matched):
    """A matched list position, or a list level: knows the list's size before the spec padded it."""

    __slots__ = ("original_size",)

    def __init__(self, key: str, original_size: int):
        super().__init__(key)
        self.original_size = original_size


def _may_write(mode: str, container: Any, key: Any, original_size: int | None) -> bool:
    if isinstance(container, dict):
        if mode == OVERWRITE:
            return True
        if mode == DEFAULT:
            return container.get(key) is None
        return key not in container
    if original_size is None or key < 0 or key >= len(container):
        return False
    if mode == OVERWRITE:
        return True
    if mode == DEFAULT:
        return container[key] is None
    return key >= original_size and container[key] is None


# ------------------------------------------------------------------------------- arguments
def parse_call(text: str) -> tuple[str, list[str]]:
    """``name(a, b(c, d), 'e, f')`` -> ("name", ["a", "b(c, d)", "'e, f'"])."""
    name, _, rest = text.partition("(")
    if not rest.endswith(")"):
        raise JoltSpecError(f"function call {'=' + text!r} needs its closing )")
    body, args, current, depth, quoted = rest[:-1], [], [], 0, False
    for char in body:
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    args.append("".join(current).strip())
    return name, args


class Walk(list):
    """The walked path (paths.py), with the context that ``^path`` arguments read."""

    __slots__ = ("context",)

    def __init__(self, steps: list, context: dict | None):
        super().__init__(steps)
        self.context = context


class _Argument:
    """One argument: a literal, a lookup ``@(n,path)`` in the input, or ``^path`` in the
    context (JoltTransformJSON gives none: such an argument finds nothing, as in NiFi)."""

    __slots__ = ("literal", "lookup", "context")

    def __init__(self, text: Any, in_call: bool):
        self.literal, self.lookup, self.context = text, None, None
        if not isinstance(text, str):
            return
        if text.startswith("^"):
            self.context = OutputPath(text[1:], reading=True)
        elif text.startswith("@"):
            self.lookup = Transpose(text)
        elif in_call:
            if text == "":
                self.literal = None
            elif len(text) >= 2 and text.startswith("'") and text.endswith("'"):
                self.literal = text[1:-1]
            elif text.lower() in ("true", "false"):
                self.literal = text.lower() == "true"
            else:
                number = to_number(text)
                self.literal = text if number is ABSENT else number

    def value(self, walked: "Walk") -> Any:
        if self.context is not None:
            return MISSING if walked.context is None else self.context.read(walked.context, walked)
        if self.lookup is not None:
            return self.lookup.value(walked)
        return self.literal


class _Evaluator:
    """One right-hand value: a function (with its arguments, or of the current value) or an argument."""

    __slots__ = ("function", "args")

    def __init__(self, rhs: Any):
        self.function = None
        if isinstance(rhs, str) and rhs.startswith("="):
            text = rhs[1:]
            if "(" in text or text.endswith(")"):
                name, raw_args = parse_call(text)
                self.args = [_Argument(arg, True) for arg in raw_args]
            else:
                name, self.args = text, []
            if name not in FUNCTIONS:
                raise JoltSpecError(f"unknown Modify function {name!r} in {rhs!r} "
                                    f"(known: {', '.join(sorted(FUNCTIONS))})")
            self.function = FUNCTIONS[name]
        else:
            self.args = [_Argument(rhs, False)]

    def evaluate(self, current: Any, walked: list) -> Any:
        """The value to write, or ABSENT."""
        args = self.args
        if self.function is None:
            value = args[0].value(walked)
            return ABSENT if value is MISSING else value
        if not args:
            result = self.function() if current is MISSING else self.function(current)
        elif len(args) == 1:
            value = args[0].value(walked)
            result = self.function() if value is MISSING else self.function(value)
        else:
            values = [arg.value(walked) for arg in args]
            result = self.function(*[None if value is MISSING else value for value in values])
        return result


# ------------------------------------------------------------------------------- spec nodes
def _parse(raw: str, mode: str) -> tuple[Any, str, bool]:
    if not isinstance(raw, str) or not raw:
        raise JoltSpecError(f"Modify spec keys must be non-empty strings, not {raw!r}")
    if raw[0] in _PREFIXES:
        mode, raw = _PREFIXES[raw[0]], raw[1:]
    check = raw.endswith("?") and not raw.endswith("\\?") and len(raw) > 1
    if check:
        raw = raw[:-1]
    element = parse_key(raw)
    if not (isinstance(element, (Literal, ArrayIndex)) or hasattr(element, "matches_text")):
        raise JoltSpecError(f"Modify key {raw!r}: only literal keys, * patterns and [n] positions are allowed")
    if isinstance(element, ArrayIndex) and element.kind != "literal":
        raise JoltSpecError(f"Modify key {raw!r}: a list position must be an explicit index, [n]")
    return element, mode, check


class ModifyLeaf:
    __slots__ = ("element", "mode", "check", "evaluators")

    def __init__(self, raw: str, rhs: Any, mode: str):
        self.element, self.mode, self.check = _parse(raw, mode)
        values = rhs if isinstance(rhs, list) and rhs else [rhs]
        self.evaluators = [_Evaluator(value) for value in values]

    def apply(self, key: str, value: Any, walked: list) -> bool:
        matched = _match(self.element, key, walked)
        if matched is None:
            return False
        if self.check and value is MISSING:
            return True
        parent = walked[-1][0]
        walked.append((None if value is MISSING else value, matched))
        try:
            for evaluator in self.evaluators:
                try:
                    result = evaluator.evaluate(value, walked)
                except (TypeError, ValueError, ArithmeticError, IndexError, KeyError):
                    result = ABSENT   # Jolt takes a failing function for one without a result
                if result is not ABSENT:
                    _write(parent, matched, result, self.mode)
                    break
        finally:
            walked.pop()
        return True


def _match(element: Any, key: str, walked: list) -> Matched | None:
    matched = element.match(key, walked)
    if matched is None:
        return None
    parent_level = walked[-1][1]
    if isinstance(parent_level, _Level) and isinstance(element, (ArrayIndex, StarAll)):
        return _Level(key, parent_level.original_size)
    if isinstance(element, ArrayIndex):
        return None   # a list position where the input has no list
    return matched


def _write(parent: Any, matched: Matched, value: Any, mode: str) -> None:
    if isinstance(parent, dict):
        if _may_write(mode, parent, matched.key, None):
            parent[matched.key] = value
    elif isinstance(parent, list) and isinstance(matched, _Level):
        index = int(matched.key)
        if _may_write(mode, parent, index, matched.original_size):
            parent[index] = value


class ModifyComposite:
    __slots__ = ("element", "mode", "check", "literal", "computed", "kind", "pad_to")

    def __init__(self, raw: str, spec: dict, mode: str):
        self.element, self.mode, self.check = _parse(raw, mode)
        self.literal: dict[str, Any] = {}
        computed = []
        positions, keys = [], []
        self.pad_to = -1
        for name, sub in spec.items():
            for alternative in name.split("|"):
                child = build(alternative, sub, self.mode)
                if isinstance(child.element, ArrayIndex):
                    positions.append(alternative)
                    if not child.check:
                        self.pad_to = max(self.pad_to, child.element.index)
                    self.literal[str(child.element.index)] = child
                elif isinstance(child.element, Literal):
                    keys.append(alternative)
                    self.literal[child.element.key] = child
                else:
                    if not isinstance(child.element, StarAll):
                        keys.append(alternative)
                    computed.append(child)
        if positions and keys:
            raise JoltSpecError(f"Modify key {raw!r}: a level can not mix list positions "
                                f"({positions[0]}) and map keys ({keys[0]})")
        self.kind = "list" if positions else "map" if keys else "any"
        self.computed = sorted(computed, key=lambda child: getattr(child.element, "order", 0))

    def apply(self, key: str, value: Any, walked: list) -> bool:
        matched = _match(self.element, key, walked)
        if matched is None:
            return False
        if self.check and value is MISSING:
            return True
        if value is MISSING:
            value = None
        kind = self.kind
        if (kind == "list" and not (value is None or isinstance(value, list))) or \
                (kind == "map" and not (value is None or isinstance(value, dict))) or (kind == "any" and value is None):
            return True
        if value is None:
            value = self._create(matched, walked)
            if value is None:
                return True
        if isinstance(value, list):
            original = len(value)
            if kind == "list" and self.pad_to >= len(value):
                value.extend([None] * (self.pad_to + 1 - len(value)))
            matched = _Level(matched.key, original)
        walked.append((value, matched))
        self.children(value, walked)
        walked.pop()
        return True

    def _create(self, matched: Matched, walked: list) -> Any:
        parent = walked[-1][0]
        new: Any = [] if self.kind == "list" else {}
        if isinstance(parent, dict) and _may_write(self.mode, parent, matched.key, None):
            parent[matched.key] = new
            return new
        if isinstance(parent, list) and isinstance(matched, _Level) and matched.key.isdigit():
            index = int(matched.key)
            if _may_write(self.mode, parent, index, matched.original_size):
                parent[index] = new
                return new
        return None

    def children(self, value: Any, walked: list) -> None:
        if isinstance(value, dict):
            for key, child in self.literal.items():
                child.apply(key, value.get(key, MISSING), walked)
            entries = list(value.items())
        elif isinstance(value, list):
            original = walked[-1][1].original_size
            for key, child in self.literal.items():
                index = int(key) if key.isdigit() else len(value)
                present = index < len(value) and (value[index] is not None or index < original)
                child.apply(key, value[index] if present else MISSING, walked)
            entries = [(str(i), item if item is not None or i < original else MISSING) for i, item in enumerate(value)]
        else:
            return   # below a scalar there is nothing to write into
        if self.computed:
            for key, item in entries:
                if self.mode == DEFINE and self.kind == "list" and key in self.literal:
                    continue
                for child in self.computed:
                    if child.apply(key, item, walked):
                        break


def build(raw: str, rhs: Any, mode: str) -> ModifyLeaf | ModifyComposite:
    if isinstance(rhs, dict) and rhs:
        return ModifyComposite(raw, rhs, mode)
    return ModifyLeaf(raw, rhs, mode)


class Modify:
    """A compiled Modify spec in one mode; ``apply(input)`` changes the input in place and returns it."""

    def __init__(self, spec: Any, mode: str):
        if not isinstance(spec, dict):
            raise JoltSpecError(f"a Modify spec is a JSON object, not {type(spec).__name__}")
        if mode not in (OVERWRITE, DEFAULT, DEFINE):
            raise ValueError(f"mode must be {OVERWRITE}, {DEFAULT} or {DEFINE}, not {mode!r}")
        self.root = ModifyComposite("root", spec, mode)

    def apply(self, document: Any, context: dict | None = None) -> Any:
        """``context``: what ``^path`` arguments read (Jolt's transform context)."""
        walked = Walk([(document, Matched("root"))], context)
        self.root.apply("root", document, walked)
        return document
