"""Jolt spec keys and paths: parsing them once, matching input keys and writing output paths.

A spec is compiled into objects of this module before any document is transformed; applying it
then only walks the document. The walk keeps a *walked path*: a list of ``Step``s, one a level,
each the input object met there and the key that matched it (``Matched``: the whole key and the
parts its ``*`` wildcards captured). References in a spec read that list from its end: ``&n``,
``$n`` and ``#n`` count levels up from the current one (``&`` = ``&0``), ``&(n,m)`` is the m-th
capture of level n (m = 0: the whole key).

Key kinds (Jolt's names): a literal; ``*`` (anything), ``pre*suf`` and keys with more stars
(each star captures one or more characters, as few as possible); ``&...`` keys (a literal built
from references); ``$``/``$n``/``$(n,m)`` (the matched key, as data); ``#text`` (the text, as
data); ``@`` (the current value); ``@n``, ``@path`` and ``@(n,path)`` (a value elsewhere in the
input); ``[...]`` array positions. A backslash escapes the next character.
"""

from __future__ import annotations

import re
from typing import Any

from flowactors.sdk.record_path.conversions import java_text


class JoltSpecError(ValueError):
    """A Jolt spec that cannot be compiled: the message names the key or value at fault."""


class JoltTransformError(ValueError):
    """A document the compiled spec cannot be applied to (Jolt's TransformException)."""


#: a value that is not there (Jolt's empty Optional), as opposed to a JSON null
MISSING = object()


class Matched:
    """What one level of the walk matched: ``groups[0]`` the whole key, then the star captures;
    ``hash_count`` counts the children of this level that were walked so far (``#n``)."""

    __slots__ = ("key", "groups", "hash_count")

    def __init__(self, key: str, captures: tuple[str, ...] = ()):
        self.key = key
        self.groups = (key, *captures)
        self.hash_count = 0

    def group(self, index: int) -> str:
        if index >= len(self.groups):
            raise JoltTransformError(f"the reference asks for capture {index} of key {self.key!r}, "
                                     f"which has {len(self.groups) - 1}")
        return self.groups[index]


def level(walked: list, up: int) -> tuple[Any, Matched]:
    """The step ``up`` levels above the current one (0: the current one)."""
    if up >= len(walked):
        raise JoltTransformError(f"a reference goes {up} levels up, but the walk is only {len(walked) - 1} deep")
    return walked[-1 - up]


def key_text(value: Any) -> str:
    """A scalar as Jolt turns it into a key (Java's toString)."""
    return java_text(value)


# ------------------------------------------------------------------------------ references
_REFERENCE = re.compile(r"\((\d+)(?:,(\d+))?\)|(\d*)")


def parse_reference(text: str, at: int, key: str) -> tuple[int, int, int]:
    """A reference after its token at ``text[at]`` (``&``, ``$``): (levels up, capture, end)."""
    match = _REFERENCE.match(text, at + 1)
    if match.group(1) is not None:
        return int(match.group(1)), int(match.group(2) or 0), match.end()
    if text.startswith("(", at + 1):
        raise JoltSpecError(f"bad reference in key {key!r}: write &(levels,capture), e.g. &(1,0)")
    return int(match.group(3) or 0), 0, match.end()


def unescape(text: str) -> str:
    """``text`` without its escaping backslashes (``\\\\@`` -> ``@``)."""
    return re.sub(r"\\(.)", r"\1", text) if "\\" in text else text


def _without_escaped(text: str) -> str:
    """``text`` without its escaped characters: what decides a key's kind."""
    return re.sub(r"\\.", "", text) if "\\" in text else text


# ------------------------------------------------------------------------------- key kinds
class Literal:
    order = 0
    __slots__ = ("key",)

    def __init__(self, key: str):
        self.key = key

    def match(self, data_key: str, walked: list) -> Matched | None:
        return Matched(data_key) if data_key == self.key else None

    def evaluate(self, walked: list) -> str:
        return self.key


class StarAll:
    order = 5
    key = "*"

    def match(self, data_key: str, walked: list) -> Matched | None:
        return Matched(data_key)

    def matches_text(self, text: str) -> bool:
        return True


class StarSingle:
    order = 4
    __slots__ = ("key", "prefix", "suffix", "least")

    def __init__(self, key: str):
        self.key = key
        self.prefix, self.suffix = key.split("*")
        self.least = len(self.prefix) + len(self.suffix)

    def matches_text(self, text: str) -> bool:
        return len(text) > self.least and text.startswith(self.prefix) and text.endswith(self.suffix)

    def match(self, data_key: str, walked: list) -> Matched | None:
        if not self.matches_text(data_key):
            return None
        return Matched(data_key, (data_key[len(self.prefix):len(data_key) - len(self.suffix)],))


class StarMany:
    """Two stars or more: each captures one or more characters, reluctantly."""
    __slots__ = ("key", "pattern", "order")

    def __init__(self, key: str):
        self.key = key
        self.order = 3 if key.count("*") == 2 else 2
        self.pattern = re.compile("(.+?)".join(re.escape(part) for part in key.split("*")) + r"\Z", re.S)

    def matches_text(self, text: str) -> bool:
        return self.pattern.match(text) is not None

    def match(self, data_key: str, walked: list) -> Matched | None:
        found = self.pattern.match(data_key)
        return Matched(data_key, found.groups()) if found else None


class Amp:
    """A key made of literal text and ``&`` references: it matches the text it evaluates to."""
    order = 1
    __slots__ = ("key", "parts")

    def __init__(self, key: str):
        self.key = key
        self.parts: list[str | tuple[int, int]] = []
        text, i = [], 0
        while i < len(key):
            char = key[i]
            if char == "\\" and i + 1 < len(key):
                text.append(key[i + 1])
                i += 2
            elif char == "&":
                if text:
                    self.parts.append("".join(text))
                    text = []
                up, group, i = parse_reference(key, i, key)
                self.parts.append((up, group))
            else:
                text.append(char)
                i += 1
        if text:
            self.parts.append("".join(text))

    def evaluate(self, walked: list) -> str:
        if len(self.parts) == 1 and type(self.parts[0]) is tuple:
            up, group = self.parts[0]
            return level(walked, up)[1].group(group)
        return "".join(part if type(part) is str else level(walked, part[0])[1].group(part[1])
                       for part in self.parts)

    def match(self, data_key: str, walked: list) -> Matched | None:
        return Matched(data_key) if self.evaluate(walked) == data_key else None


class Dollar:
    """``$``, ``$n``, ``$(n,m)``: matches any key; its data is the referenced key."""
    order = 0
    __slots__ = ("key", "up", "group")

    def __init__(self, key: str):
        self.key = key
        if not key.startswith("$"):
            raise JoltSpecError(f"key {key!r}: a $ reference must start the key")
        self.up, self.group, end = parse_reference(key, 0, key)
        if end != len(key):
            raise JoltSpecError(f"key {key!r} is not a $ reference ($, $n or $(n,m))")

    def match(self, data_key: str, walked: list) -> Matched | None:
        return Matched(level(walked, self.up)[1].group(self.group))


class Hash:
    """``#text`` or ``#(text)``: matches any key; its data is the text."""
    order = 0
    __slots__ = ("key", "text")

    def __init__(self, key: str):
        self.key = key
        if not key.startswith("#") or len(key) < 2:
            raise JoltSpecError(f"key {key!r}: a # key is # followed by the text to write")
        body = key[1:]
        if body.startswith("("):
            if not body.endswith(")"):
                raise JoltSpecError(f"key {key!r}: unbalanced parentheses")
            body = body[1:-1]
        self.text = body

    def match(self, data_key: str, walked: list) -> Matched | None:
        return Matched(self.text)


class At:
    """``@``: the current value."""
    order = 0
    key = "@"

    def match(self, data_key: str, walked: list) -> Matched | None:
        return walked[-1][1]   # the parent's match: & and &1 below both read the parent's key


class Transpose:
    """``@n``, ``@path``, ``@(n,path)``: the value found ``path`` below the input n levels up."""
    order = 0
    __slots__ = ("key", "up", "reader")

    def __init__(self, key: str):
        self.key = key
        body = key[1:]
        if "@" in body:
            raise JoltSpecError(f"key {key!r}: an @ reference cannot hold another @")
        if "*" in body or "[]" in body:
            raise JoltSpecError(f"key {key!r}: an @ reference cannot hold * or []")
        if body.startswith("("):
            if not body.endswith(")"):
                raise JoltSpecError(f"key {key!r}: an @( needs its closing )")
            body = body[1:-1]
        self.up, path = 0, body
        if body[:1].isdigit():
            number, _, path = body.partition(",")
            if not number.isdigit():
                raise JoltSpecError(f"key {key!r}: the level of @(level,path) must be a number")
            self.up = int(number)
        self.reader = OutputPath(path, reading=True) if path else None

    def value(self, walked: list) -> Any:
        """The referenced value, or MISSING."""
        if self.up >= len(walked):
            return MISSING
        tree = walked[-1 - self.up][0]
        return tree if self.reader is None else self.reader.read(tree, walked)

    def evaluate(self, walked: list) -> str | None:
        value = self.value(walked)
        if type(value) is bool:
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(int(value))
        return value if isinstance(value, str) else None

    def match(self, data_key: str, walked: list) -> Matched | None:
        return walked[-1][1]   # the parent's match, so & and &1 below both still work


class ArrayIndex:
    """``[]`` (append), ``[n]``, ``[#n]`` (the n-th level's count of walked children),
    ``[&n]`` and ``[@(n,path)]``: a position in a list."""
    order = 1
    __slots__ = ("key", "kind", "index", "reference")

    def __init__(self, key: str):
        self.key = key
        body = key[1:-1]
        self.index, self.reference = None, None
        if not body:
            self.kind = "append"
        elif body[0] == "&":
            self.kind, self.reference = "amp", Amp(body)
        elif body[0] == "#":
            up, _, end = parse_reference(body, 0, key)
            self.kind, self.index = "hash", up
        elif body[0] == "@":
            self.kind, self.reference = "at", Transpose(body)
        elif body.isdigit():
            self.kind, self.index = "literal", int(body)
        else:
            raise JoltSpecError(f"key {key!r}: an array position is [], [n], [#n], [&n] or [@(n,path)]")

    def evaluate(self, walked: list) -> int | str | None:
        """The index (an int), "[]" to append, or None when the reference is no index."""
        kind = self.kind
        if kind == "literal":
            return self.index
        if kind == "append":
            return "[]"
        if kind == "hash":
            return level(walked, self.index)[1].hash_count
        text = self.reference.evaluate(walked)
        return int(text) if text is not None and text.isdigit() else None

    def match(self, data_key: str, walked: list) -> Matched | None:
        index = self.evaluate(walked)
        return Matched(data_key) if str(index) == data_key else None


def parse_key(raw: str) -> Any:
    """A spec's left-hand key as one of the key kinds above."""
    kind = _without_escaped(raw)
    key = unescape(raw)
    if kind == "@":
        return At()
    if kind == "*":
        return StarAll()
    if kind.startswith("["):
        if kind.count("[") != 1 or kind.count("]") != 1 or not kind.endswith("]"):
            raise JoltSpecError(f"key {raw!r}: too many [] references")
        return ArrayIndex(key)
    if kind.startswith("@") or "@(" in kind:
        if not kind.startswith("@"):
            raise JoltSpecError(f"key {raw!r}: an @ reference must start the key")
        return Transpose(raw)
    if "@" in kind:
        raise JoltSpecError(f"key {raw!r} can not have an @ other than at the front")
    if "$" in kind:
        return Dollar(key)
    if "&" in kind:
        if "*" in kind:
            raise JoltSpecError(f"key {raw!r} mixes * and &")
        return Amp(raw)
    if "*" in kind:
        return StarSingle(key) if kind.count("*") == 1 else StarMany(key)
    if "#" in kind:
        return Hash(key)
    return Literal(key)


# ------------------------------------------------------------------------------ output paths
def split_path(text: str) -> list[str]:
    """A dot-notation path cut into its keys: ``a.b[0].@(1,c.d)`` -> a, b, [0], @(1,c.d).

    Dots inside parentheses or escaped (``\\\\.``) do not cut; ``[...]`` is a key of its own."""
    parts: list[str] = []
    current: list[str] = []
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if depth == 0 and char == ".":
            parts.append("".join(current))
            current = []
        elif depth == 0 and char == "[" and not (current and current[0] == "["):
            if current:
                parts.append("".join(current))
            current = ["["]
        elif depth == 0 and char == "]" and current and current[0] == "[":
            current.append("]")
            parts.append("".join(current))
            current = []
            if text.startswith(".", i + 1):
                i += 1
            elif i + 1 < len(text) and text[i + 1] != "[":
                raise JoltSpecError(f"path {text!r}: a ] must end the key (. or [ or the end after it)")
        else:
            current.append(char)
        i += 1
    if current:
        parts.append("".join(current))
    return parts


class OutputPath:
    """A right-hand path (``a.&1.b[#2]``): evaluated against the walk, then written to or read.

    Shift writes with Jolt's collision rule: a value written where one already is makes a list of
    both (a list already there gets the value appended)."""

    __slots__ = ("text", "keys", "arrays", "parts", "root_arrays")

    def __init__(self, text: str, reading: bool = False):
        self.text = text
        plain = _without_escaped(text)
        if not reading and ("*" in plain or "$" in plain):
            raise JoltSpecError(f"output path {text!r} can not contain * or $")
        self.keys = []
        for part in split_path(text):
            key = parse_key(part)
            if isinstance(key, (At, Dollar, Hash)) or hasattr(key, "matches_text"):
                raise JoltSpecError(f"output path {text!r}: {part!r} is not valid in an output path")
            self.keys.append(key)
        self.arrays = [isinstance(key, ArrayIndex) for key in self.keys]
        self.root_arrays = [False, *self.arrays]
        # each key as (False, its constant) or (True, what evaluates it): literals cost nothing a write
        self.parts = [(False, key.key) if isinstance(key, Literal) else
                      (False, key.index) if isinstance(key, ArrayIndex) and key.kind == "literal" else
                      (True, key.evaluate) for key in self.keys]

    def evaluate(self, walked: list) -> list | None:
        """The path's keys for this point of the walk, or None when a reference finds nothing."""
        out = []
        for computed, part in self.parts:
            if computed:
                part = part(walked)
                if part is None:
                    return None
            out.append(part)
        return out

    def read(self, tree: Any, walked: list) -> Any:
        """The value at this path below ``tree``, or MISSING."""
        keys = self.evaluate(walked)
        if keys is None:
            return MISSING
        for key in keys:
            if isinstance(tree, dict):
                if key not in tree and str(key) not in tree:
                    return MISSING
                tree = tree[key] if key in tree else tree[str(key)]
            elif isinstance(tree, list):
                index = key if type(key) is int else (int(key) if isinstance(key, str) and key.isdigit() else -1)
                if not 0 <= index < len(tree):
                    return MISSING
                tree = tree[index]
            else:
                return MISSING
        return tree

    def write(self, data: Any, output: dict, walked: list) -> None:
        """Write ``data`` at this path below ``output["root"]`` (Shift's output holder)."""
        keys = self.evaluate(walked)
        if keys is not None:
            keys.insert(0, "root")
            place(output, keys, self.root_arrays, data)


def place(tree: Any, keys: list, arrays: list[bool], data: Any) -> None:
    """Walk ``keys`` from ``tree``, making each missing container (a list where the next key is an
    array position, else a map), and write ``data`` at the end by the collision rule. A container
    of the wrong kind already in the way drops the write, as Jolt does."""
    last = len(keys) - 1
    for i in range(last):
        key = keys[i]
        if arrays[i]:
            if type(tree) is not list:
                return
            if key == "[]":
                child: Any = [] if arrays[i + 1] else {}
                tree.append(child)
                tree = child
                continue
            if key >= len(tree):
                tree.extend([None] * (key + 1 - len(tree)))
            child = tree[key]
        else:
            if type(tree) is not dict:
                return
            child = tree.get(key)
        if child is None:
            child = [] if arrays[i + 1] else {}
            tree[key] = child
        tree = child
    if (type(tree) is list) == arrays[last] and type(tree) in (list, dict):
        _collide(tree, keys[last], data)


def _collide(tree: Any, key: Any, data: Any) -> None:
    if key == "[]":
        tree.append(data)
        return
    if isinstance(tree, list):
        if key >= len(tree):
            tree.extend([None] * (key + 1 - len(tree)))
        existing = tree[key]
    else:
        existing = tree.get(key)
    if existing is None:
        tree[key] = data
    elif isinstance(existing, list):
        existing.append(data)
    else:
        tree[key] = [existing, data]
