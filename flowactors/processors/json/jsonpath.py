"""JsonPath as Jayway JsonPath (the library NiFi's JSON processors use) reads it, compiled once.

``compile_path(text)`` parses a path into a ``JsonPath``; ``JsonPath.read(document)`` evaluates it
against a parsed JSON document (dicts, lists, str, int, float, bool, None). The language:

* ``$`` the root (a path not starting with ``$`` or ``@`` gets ``$.`` in front, as Jayway does);
  ``.name`` and ``['name']`` / ``["name"]`` a property; ``['a','b']`` several (at the end of the
  path: one object holding those the node has, as Jayway merges them); ``.*`` / ``[*]`` every
  value; ``..`` a deep scan (the node and all below it, in document order); ``[0]``, ``[-1]``,
  ``[0,2]`` indexes; ``[1:3]``, ``[:2]``, ``[-2:]`` slices (no step, as Jayway);
* ``[?(expression)]`` a filter: on an array each element is tested as ``@``, on an object the
  object itself. Operands are ``@...`` / ``$...`` paths, 'text', "text", numbers, true, false,
  null, ``/regex/flags`` and JSON arrays; operators ``== != < <= > >= =~ in nin subsetof anyof
  noneof size empty contains``, ``===`` / ``!==`` (equal and of the same type), ``&&``, ``||``,
  ``!`` and parentheses. A path alone tests that it exists (a null value exists). ``!=`` is the
  negation of ``==`` (so it holds where the property is missing), ``=~`` must match the whole text
  (of a text, number or boolean; any element of an array), a number equals the text of the same
  number;
* a function at the end: ``length()``, ``min()``, ``max()``, ``avg()``, ``sum()``, ``stddev()``
  (numbers; the aggregates are floating point, as Jayway's doubles), ``keys()``, ``first()``,
  ``last()``. It applies to each node the path reaches, but after a path starting with a deep scan
  (``$..a.f()``) as Jayway's inversion ``$.f($..a)`` does (``_after_scan``).

A *definite* path (only single properties and single indexes, or a function after those) reads one
value and raises ``PathNotFound`` when nothing is there; any other path reads a list, empty when
nothing matched. ``JsonPathError`` is a path that does not compile, or a function given what it
cannot take.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from flowactors.sdk.expression.regex import java_regex

#: a missing value in a filter (Jayway's UNDEFINED): equal to nothing, existing nowhere
UNDEFINED = object()


class JsonPathError(ValueError):
    """A path that does not compile, or that cannot be evaluated against a document."""


class PathNotFound(LookupError):
    """A definite path that found nothing in the document."""


class KeySet(tuple):
    """What ``keys()`` returns: Jayway gives a Java Set, which NiFi writes with Java's toString."""


#: a step maps a node (and the document's root) to the nodes it selects
Step = Callable[[Any, Any], Iterator[Any]]
#: a filter's test of a node (and the root)
Test = Callable[[Any, Any], bool]


@dataclass(frozen=True)
class JsonPath:
    """A compiled path: ``read`` evaluates it (the module docstring)."""

    text: str
    steps: tuple[Step, ...]
    definite: bool
    function: Callable[[Any], Any] | None = None
    scanned: bool = False     # the path starts with a deep scan and ends with a function (``_after_scan``)

    def nodes(self, document: Any, root: Any = None) -> list[Any]:
        """Every node the path's steps (its function aside) reach, in document order."""
        root = document if root is None else root
        found = [document]
        for step in self.steps:
            found = [out for node in found for out in step(node, root)]
        return found

    def read(self, document: Any, root: Any = None) -> Any:
        """The value of a definite path (``PathNotFound`` when none), else the list of matches."""
        found = self.nodes(document, root)
        if self.function is not None:
            if self.scanned:
                return _after_scan(self.function, found, document)
            found = [self.function(node) for node in found]
        if self.definite:
            if not found:
                raise PathNotFound(f"no results for path {self.text}")
            return found[0]
        return found


# ------------------------------------------------------------------------------------ steps
def _property(names: tuple[str, ...], merge: bool) -> Step:
    if merge:   # several names at the end of the path: one object with those present
        def merged(node: Any, root: Any) -> Iterator[Any]:
            if isinstance(node, dict):
                yield {name: node[name] for name in names if name in node}
        return merged

    def select(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            for name in names:
                if name in node:
                    yield node[name]
    return select


def _wildcard(node: Any, root: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        yield from node.values()
    elif isinstance(node, list):
        yield from node


def _indexes(indexes: tuple[int, ...]) -> Step:
    def select(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, list):
            for index in indexes:
                if -len(node) <= index < len(node):
                    yield node[index]
    return select


def _slice(start: int | None, stop: int | None) -> Step:
    def select(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, list):
            yield from node[start:stop]
    return select


def _filter(test: Test) -> Step:
    def select(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, list):
            yield from (element for element in node if test(element, root))
        elif isinstance(node, dict) and test(node, root):
            yield node
    return select


def _preorder(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _preorder(value)
    elif isinstance(node, list):
        for value in node:
            yield from _preorder(value)


def _scan(inner: Step, test: Test | None = None) -> Step:
    """A deep scan applying ``inner`` to every node at or below the current one; with a filter's
    ``test``, the objects and arrays the scan meets are tested themselves, as Jayway does."""
    if test is not None:
        def scan_filter(node: Any, root: Any) -> Iterator[Any]:
            for each in _preorder(node):
                if isinstance(each, (dict, list)) and test(each, root):
                    yield each
        return scan_filter

    def scan(node: Any, root: Any) -> Iterator[Any]:
        for each in _preorder(node):
            yield from inner(each, root)
    return scan


# ------------------------------------------------------------------------------------ functions
def _numbers(node: Any, name: str) -> list[float]:
    if not isinstance(node, list):
        raise JsonPathError(f"{name}() needs an array, not {_kind(node)}")
    numbers = [v for v in node if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        raise JsonPathError(f"{name}() was given an array without numbers")
    return numbers


def _aggregate(name: str, compute: Callable[[list[float]], float]) -> Callable[[Any], float]:
    def aggregate(node: Any) -> float:
        return float(compute(_numbers(node, name)))
    aggregate.aggregate = True  # type: ignore[attr-defined]
    return aggregate


def _stddev(numbers: list[float]) -> float:
    mean = sum(numbers) / len(numbers)
    return math.sqrt(sum((n - mean) ** 2 for n in numbers) / len(numbers))


def _length(node: Any) -> int:
    if isinstance(node, (list, dict, str)):
        return len(node)
    raise JsonPathError(f"length() needs an array, an object or a text, not {_kind(node)}")


def _keys(node: Any) -> KeySet:
    if not isinstance(node, dict):
        raise JsonPathError(f"keys() needs an object, not {_kind(node)}")
    return KeySet(node)


def _end(name: str, index: int) -> Callable[[Any], Any]:
    def end(node: Any) -> Any:
        if not isinstance(node, list) or not node:
            raise JsonPathError(f"{name}() needs an array with an element, not {_kind(node)}")
        return node[index]
    return end


def _after_scan(function: Callable[[Any], Any], found: list[Any], document: Any) -> Any:
    """A function ending a path that starts with a deep scan, as Jayway turns ``$..a.f()`` into
    ``$.f($..a)``: an aggregate takes the numbers found, length() counts the children (elements,
    values) of what was found, any other function applies to the document itself."""
    if function is _length:
        return sum(len(node) for node in found if isinstance(node, (dict, list)))
    if getattr(function, "aggregate", False):
        return function(found)
    return function(document)


FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "length": _length, "size": _length, "keys": _keys, "first": _end("first", 0), "last": _end("last", -1),
    "min": _aggregate("min", min), "max": _aggregate("max", max), "sum": _aggregate("sum", sum),
    "avg": _aggregate("avg", lambda n: sum(n) / len(n)), "stddev": _aggregate("stddev", _stddev),
}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a text"}.get(type(value), "a number")


# ------------------------------------------------------------------------------------ parsing
@functools.lru_cache(maxsize=1024)
def compile_path(text: str) -> JsonPath:
    """``text`` compiled; ``JsonPathError`` saying where and why when it is not a path."""
    source = text.strip()
    if not source:
        raise JsonPathError("a JsonPath cannot be empty")
    shift = len(text) - len(text.lstrip())   # where the source starts in what the user wrote
    if source[0] not in "$@":
        source, shift = "$." + source, shift - 2
    return _PathParser(source, text, shift).parse()


class _PathParser:
    def __init__(self, source: str, original: str, shift: int):
        self.s, self.original, self.shift, self.i = source, original, shift, 1
        self.steps: list[Step] = []
        self.definite, self.scanned = True, False

    def fail(self, why: str) -> JsonPathError:
        where = min(max(self.i + self.shift, 0), len(self.original) - 1) + 1
        return JsonPathError(f"invalid JsonPath {self.original!r}: {why} at character {where}")

    def parse(self) -> JsonPath:
        s, function = self.s, None
        while self.i < len(s):
            if function is not None:
                raise self.fail("a function must end the path")
            scan = s.startswith("..", self.i)
            if scan:
                self.scanned = self.scanned or not self.steps   # Jayway's inversion: a scan right after $
                self.i += 2
                self.definite = False
                if self.i < len(s) and s[self.i] == "[":
                    step, test = self.bracket(leaf=False)
                    self.steps.append(_scan(step, test))
                    continue
            elif s[self.i] == "[":
                self.steps.append(self.bracket(leaf=True)[0])
                continue
            elif s[self.i] == ".":
                self.i += 1
                if s.startswith("[", self.i):   # Jayway reads .[...] as [...]
                    continue
            elif s[self.i].isspace():
                raise self.fail("unexpected blank")
            step, function = self.dotted()   # a name right after ] is a property too, as in Jayway
            if step is not None:
                self.steps.append(_scan(step) if scan else step)
            elif scan:
                raise self.fail("a deep scan needs a property, a wildcard, an index or a filter after it")
        scanned = self.scanned and function is not None
        return JsonPath(self.original, tuple(self.steps), self.definite, function, scanned)

    def dotted(self) -> tuple[Step | None, Callable[[Any], Any] | None]:
        """``*``, a name, or a function ``name()`` after a dot."""
        s = self.s
        if s.startswith("*", self.i):
            self.i += 1
            self.definite = False
            return _wildcard, None
        match = re.compile(r"[^.\[\]()\s]+").match(s, self.i)
        if not match:
            raise self.fail("a property name is missing")
        name, self.i = match.group(), match.end()
        if s.startswith("(", self.i):
            end = s.find(")", self.i)
            if end < 0 or s[self.i + 1:end].strip():
                raise self.fail(f"function {name}() takes no parameters here")
            if name not in FUNCTIONS:
                raise self.fail(f"unknown function {name}() (known: {', '.join(sorted(FUNCTIONS))})")
            self.i = end + 1
            return None, FUNCTIONS[name]
        return _property((name,), False), None

    def bracket(self, leaf: bool) -> tuple[Step, Test | None]:
        """The step of ``[...]`` at ``self.i``, and its test when it is a filter."""
        s, start = self.s, self.i
        self.i += 1
        while self.i < len(s) and s[self.i] == " ":
            self.i += 1
        if s.startswith("?", self.i):
            end = _closing(s, self.i + 1, self)
            body = s[self.i + 1:end].strip()
            if not (body.startswith("(") and body.endswith(")")):
                raise self.fail("a filter is written [?(expression)]")
            test = _FilterParser(body[1:-1], self.original).parse()
            self.i = end + 1
            self.definite = False
            return _filter(test), test
        end = _closing(s, self.i, self)
        body = s[self.i:end].strip()
        self.i = end + 1
        if body == "*":
            self.definite = False
            return _wildcard, None
        if body[:1] in ("'", '"'):
            names = tuple(_split_quoted(body, self))
            at_end = leaf and self.i >= len(s)
            if len(names) > 1 and not at_end:
                self.definite = False
            return _property(names, len(names) > 1 and at_end), None
        try:
            if ":" in body:
                parts = [p.strip() for p in body.split(":")]
                if len(parts) != 2:
                    raise ValueError("a slice has no step")
                return self._sliced(parts), None
            indexes = tuple(int(p) for p in body.split(","))
        except ValueError:
            self.i = start
            raise self.fail(f"[{body}] is neither a name, an index, a slice, * nor a filter") from None
        if len(indexes) > 1:
            self.definite = False
        return _indexes(indexes), None

    def _sliced(self, parts: list[str]) -> Step:
        self.definite = False
        return _slice(int(parts[0]) if parts[0] else None, int(parts[1]) if parts[1] else None)


def _closing(s: str, i: int, parser: Any) -> int:
    """The index of the ``]`` closing the bracket whose content starts at ``i``."""
    depth, quote = 0, None
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in ")":
            depth -= 1
        elif c == "]":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    raise parser.fail("a '[' is never closed")


def _split_quoted(body: str, parser: Any) -> Iterator[str]:
    """The names of ``'a', "b"``."""
    for match in re.finditer(r"\s*(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")\s*(,|$)", body):
        raw = match.group(1) if match.group(1) is not None else match.group(2)
        yield re.sub(r"\\(.)", r"\1", raw)
        if not match.group(3):
            return
    raise parser.fail(f"[{body}] is not a list of quoted names")


# ------------------------------------------------------------------------------------ filters
_TOKEN = re.compile(r"""\s*(?:
    (?P<op>&&|\|\||===|!==|==|!=|<=|>=|=~|<|>|!|\(|\))
  | (?P<word>(?:in|nin|subsetof|anyof|noneof|size|empty|contains)(?![\w]))
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<constant>true|false|null)(?![\w])
  | (?P<regex>/(?:[^/\\]|\\.)*/[a-zA-Z]*)
  | (?P<path>[@$])
  | (?P<json>[\[{])
)""", re.VERBOSE)

Operand = Callable[[Any, Any], Any]


class _FilterParser:
    """A filter expression into a test ``(current, root) -> bool``."""

    def __init__(self, text: str, original: str):
        self.s, self.original, self.i = text, original, 0

    def fail(self, why: str) -> JsonPathError:
        return JsonPathError(f"invalid filter in JsonPath {self.original!r}: {why} in ({self.s})")

    def peek(self) -> tuple[str, str] | None:
        match = _TOKEN.match(self.s, self.i)
        if not match:
            if self.s[self.i:].strip():
                raise self.fail(f"unexpected {self.s[self.i:].strip()[:20]!r}")
            return None
        return match.lastgroup or "", match.group(match.lastgroup or 0)

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.fail("the expression ends early")
        self.i = _TOKEN.match(self.s, self.i).end()   # type: ignore[union-attr]
        return token

    def parse(self) -> Callable[[Any, Any], bool]:
        test = self.disjunction()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")   # type: ignore[index]
        return test

    def disjunction(self) -> Callable[[Any, Any], bool]:
        parts = [self.conjunction()]
        while self.peek() == ("op", "||"):
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda c, r: any(p(c, r) for p in parts))

    def conjunction(self) -> Callable[[Any, Any], bool]:
        parts = [self.unary()]
        while self.peek() == ("op", "&&"):
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else (lambda c, r: all(p(c, r) for p in parts))

    def unary(self) -> Callable[[Any, Any], bool]:
        token = self.peek()
        if token == ("op", "!"):
            self.take()
            inner = self.unary()
            return lambda c, r: not inner(c, r)
        if token == ("op", "("):
            self.take()
            inner = self.disjunction()
            if self.take() != ("op", ")"):
                raise self.fail("a '(' is never closed")
            return inner
        return self.comparison()

    def comparison(self) -> Callable[[Any, Any], bool]:
        left, is_path = self.operand()
        token = self.peek()
        if token is None or token[0] not in ("op", "word") or token[1] in ("&&", "||", ")", "(", "!"):
            if not is_path:
                raise self.fail("a value alone is not a test (compare it, or test a path's existence)")
            return lambda c, r: left(c, r) is not UNDEFINED
        self.take()
        right, _ = self.operand()
        compare = _COMPARISONS[token[1]]
        return lambda c, r: compare(left(c, r), right(c, r))

    def operand(self) -> tuple[Operand, bool]:
        kind, text = self.take()
        if kind == "number":
            number = float(text) if re.search(r"[.eE]", text) else int(text)
            return (lambda c, r: number), False
        if kind == "string":
            value = re.sub(r"\\(.)", r"\1", text[1:-1])
            return (lambda c, r: value), False
        if kind == "constant":
            constant = {"true": True, "false": False, "null": None}[text]
            return (lambda c, r: constant), False
        if kind == "regex":
            return (lambda c, r, p=_regex(text, self): p), False
        if kind == "json":
            return self.json_literal(), False
        if kind == "path":
            return self.path(text), True
        raise self.fail(f"expected a value, not {text!r}")

    def json_literal(self) -> Operand:
        start = self.i - 1
        end = _closing(self.s, self.i, self) if self.s[start] == "[" else self.s.find("}", start)
        text = self.s[start:end + 1].replace("'", '"')
        try:
            value = json.loads(text)
        except ValueError:
            raise self.fail(f"{text} is not a JSON array or object") from None
        self.i = end + 1
        return lambda c, r: value

    def path(self, anchor: str) -> Operand:
        start, depth, quote, i = self.i - 1, 0, None, self.i
        while i < len(self.s):
            ch = self.s[i]
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch in "[(":
                depth += 1
            elif ch in "])":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (ch.isspace() or ch in "=!<>&|~"):
                break
            i += 1
        self.i = i
        compiled = compile_path(self.s[start:i])

        def value(current: Any, root: Any) -> Any:
            try:
                return compiled.read(current if anchor == "@" else root, root)
            except PathNotFound:
                return UNDEFINED
        return value


def _regex(text: str, parser: _FilterParser) -> re.Pattern[str]:
    body, flags = text[1:text.rindex("/")], text[text.rindex("/") + 1:]
    prefix = "".join(f for f in flags if f in "imsx")
    try:
        return java_regex(f"(?{prefix}){body}" if prefix else body)
    except ValueError as err:
        raise parser.fail(str(err)) from None


# ------------------------------------------------------------------------------------ comparisons
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """Jayway's equality: a number equals the text of the same number, and the other way round."""
    if a is UNDEFINED or b is UNDEFINED:
        return False
    if _is_number(a):
        if _is_number(b):
            return a == b
        if isinstance(b, str):
            try:
                return a == float(b)
            except ValueError:
                return False
        return False
    if isinstance(a, str) and _is_number(b):
        return a == (str(b) if isinstance(b, int) else repr(b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _same_kind(a: Any, b: Any) -> bool:
    """For ``===``: both numbers, or both of the same JSON type."""
    return (_is_number(a) and _is_number(b)) or type(a) is type(b)


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        if _is_number(a) and _is_number(b):
            return op(a, b)
        if isinstance(a, str) and isinstance(b, str):
            return op(a, b)
        return False
    return compare


def _within(a: Any, b: Any) -> bool:
    return isinstance(b, list) and any(_equal(a, item) for item in b)


def _matches(a: Any, b: Any) -> bool:
    """``=~``: the pattern (either side) matches the whole text of the other: a text, a number or
    a boolean as written, any element of an array."""
    if isinstance(a, re.Pattern) == isinstance(b, re.Pattern):
        return False
    pattern, value = (a, b) if isinstance(a, re.Pattern) else (b, a)
    values = value if isinstance(value, list) else [value]
    return any(pattern.fullmatch(_regex_input(item)) is not None for item in values)


def _regex_input(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return str(value) if isinstance(value, int) else repr(value)
    return value if isinstance(value, str) else ""


def _size(a: Any, b: Any) -> bool:
    return isinstance(a, (str, list)) and _is_number(b) and len(a) == int(b)


def _empty(a: Any, b: Any) -> bool:
    return isinstance(a, (str, list)) and isinstance(b, bool) and (len(a) == 0) == b


def _contains(a: Any, b: Any) -> bool:
    if isinstance(a, str):
        return isinstance(b, str) and b in a
    return _within(b, a)


def _lists(test: Callable[[list, list], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: isinstance(a, list) and isinstance(b, list) and test(a, b)


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal, "!=": lambda a, b: not _equal(a, b),
    "===": lambda a, b: _same_kind(a, b) and _equal(a, b), "!==": lambda a, b: not (_same_kind(a, b) and _equal(a, b)),
    "<": _ordered(lambda a, b: a < b), "<=": _ordered(lambda a, b: a <= b),
    ">": _ordered(lambda a, b: a > b), ">=": _ordered(lambda a, b: a >= b),
    "=~": _matches, "in": _within, "nin": lambda a, b: not _within(a, b),
    "subsetof": _lists(lambda a, b: all(_within(x, b) for x in a)),
    "anyof": _lists(lambda a, b: any(_within(x, b) for x in a)),
    "noneof": _lists(lambda a, b: not any(_within(x, b) for x in a)),
    "size": _size, "empty": _empty, "contains": _contains,
}
