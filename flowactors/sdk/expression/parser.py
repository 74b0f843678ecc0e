"""The syntax: ``compile_value`` parses a property value once (cached) into a tree of small node
objects, so every error in the text is reported before any FlowFile is processed, and
``CompiledValue.evaluate`` only walks the tree.

The tree's leaves and joints are here (constants, text and expressions side by side, attributes, a
multi-attribute function's chain); a function call is ``language.Call``, the function it calls one
registered in ``language.FUNCTIONS`` (by the modules of ``flowactors.sdk.expression.functions``).
"""

from __future__ import annotations

import difflib
import operator
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, NoReturn, Sequence

from flowactors.sdk.expression.cache import text_cache
from flowactors.sdk.expression.language import (DYNAMIC, FLOWFILE_FIELDS, FUNCTIONS, MANY, MAX_EVALUATION_CHARS,
                                                VOLATILE_FUNCTIONS,
                                                ArgumentError, Call, EvaluationContext, ExpressionError, Function,
                                                Node, Value, limit_error, lookup_attribute, render)

if TYPE_CHECKING:
    from repositories.model import FlowFile

__all__ = ["CompiledValue", "compile_value"]


# --------------------------------------------------------------------------------------------
# Tree
# --------------------------------------------------------------------------------------------


class _Const(Node):
    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value

    def eval(self, ctx: EvaluationContext) -> Value:
        return self.value


class _Concat(Node):
    """Literal text and expressions side by side: the result is always text, counted against the
    evaluation's ``MAX_EVALUATION_CHARS`` before it is joined; ``text`` is the property value."""

    __slots__ = ("parts", "text")

    def __init__(self, parts: tuple[str | Node, ...], text: str) -> None:
        self.parts = parts
        self.text = text

    def eval(self, ctx: EvaluationContext) -> Value:
        pieces = [p if isinstance(p, str) else render(p.eval(ctx)) for p in self.parts]
        ctx.produced += sum(map(len, pieces))   # ``ctx.charge``, inline: this runs for most values
        if ctx.produced > MAX_EVALUATION_CHARS:
            self.refuse(ctx.produced)
        return "".join(pieces)

    def refuse(self, chars: int) -> NoReturn:
        raise limit_error("the value's text", chars, 0, self.text)


class _Attr(Node):
    __slots__ = ("name", "fallback")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fallback = FLOWFILE_FIELDS.get(name)

    def eval(self, ctx: EvaluationContext) -> Value:
        return lookup_attribute(self.name, ctx, self.fallback)


class _AttrOf(Node):
    """``${${inner}}``: the attribute named by the value of another expression."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node) -> None:
        self.inner = inner

    def eval(self, ctx: EvaluationContext) -> Value:
        name = render(self.inner.eval(ctx))
        return lookup_attribute(name, ctx, FLOWFILE_FIELDS.get(name))


class _Each(Node):
    """Stands for each value of a multi-attribute function in the chain that follows it."""

    __slots__ = ()

    def eval(self, ctx: EvaluationContext) -> Value:
        return ctx.each


class _Multi(Node):
    """``${anyAttribute('a', 'b'):equals('x')}``: the chain after a multi-attribute function is
    applied to each of its values; the results are combined by the function (any: or, all: and),
    or by an aggregate closing the chain (``join(sep)``, ``count()``), whose result the rest of
    the expression goes on with."""

    __slots__ = ("source", "chain", "aggregate", "args")

    def __init__(self, source: Call, chain: Node, aggregate: str | None = None, args: tuple[Node, ...] = ()):
        self.source = source
        self.chain = chain
        self.aggregate = aggregate
        self.args = args

    def eval(self, ctx: EvaluationContext) -> Value:
        values = self.source.eval(ctx)
        if not values:   # no attribute matched: as NiFi, the chain decides once on a missing value
            if self.aggregate is not None:
                return 0 if self.aggregate == "count" else ""
            values = [None]
        saved = ctx.each
        results = []
        try:
            for value in values:
                ctx.each = value
                results.append(self.chain.eval(ctx))
        finally:
            ctx.each = saved
        if self.aggregate == "join":
            separator = render(self.args[0].eval(ctx))
            pieces = [render(r) for r in results]
            ctx.charge(sum(map(len, pieces)) + len(separator) * (len(pieces) - 1), self.refuse)
            return separator.join(pieces)
        if self.aggregate == "count":
            return sum(1 for r in results if (r is True or (r is not None and not isinstance(r, bool))))
        combine = all if self.source.function.name.startswith("all") else any
        return combine(r is True or (isinstance(r, str) and r.lower() == "true") for r in results)

    def refuse(self, chars: int) -> NoReturn:
        raise limit_error("join()", chars, self.source.position, self.source.text)


#: the functions whose result is true or false: what the chain after a multi-attribute function
#: must end with (unless join() or count() closes it), as NiFi requires
TESTS = frozenset(("isNull", "notNull", "isEmpty", "isJson", "isValidDate", "isValidInstant", "equals",
                   "equalsIgnoreCase", "gt", "ge", "lt", "le", "and", "or", "not", "startsWith", "endsWith",
                   "contains", "in", "matches", "find"))

# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

_WHITESPACE = " \t\r\n"
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
#: NiFi's number literals: whole (``42``, ``+5``, ``-3``) or decimal (``2.5``, ``.5``, ``5.``, ``1e3``)
_NUMBER_TOKEN = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_DEPTH = 64


def _is_name_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "_.-")


def _arity(function: Function) -> str:
    low, high = function.min_args, function.max_args
    if high == 0:
        return "no arguments"
    if high == MANY:
        return f"at least {low} argument{'s' if low > 1 else ''}"
    if low == high:
        return f"exactly {low} argument{'s' if low > 1 else ''}"
    return f"{low} or {high} arguments" if high == low + 1 else f"{low} to {high} arguments"


def _unknown_function(name: str) -> str:
    known = sorted(FUNCTIONS)
    guesses = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    same_letters = [k for k in known if k.lower() == name.lower() and k not in guesses]
    guesses = same_letters + guesses
    hint = f" (did you mean {' or '.join(g + '()' for g in guesses)}?)" if guesses else ""
    return f"unknown function {name!r}{hint}"


class _Parser:
    """Recursive descent over ``source``, which is the property value or the unescaped content of
    a string literal inside it; ``origin`` then maps each index back into the property value, so
    that every error points at the character the user wrote."""

    def __init__(self, source: str, text: str, origin: Sequence[int] | None = None, depth: int = 0) -> None:
        self.source = source
        self.text = text
        self.origin = origin
        self.depth = depth
        self.i = 0

    def error(self, message: str, index: int) -> NoReturn:
        raise ExpressionError(message, self.origin[index] if self.origin is not None else index, self.text)

    # value := (text | '$${' | expression)*
    def template(self) -> Node:
        source, n = self.source, len(self.source)
        parts: list[str | Node] = []
        literal: list[str] = []
        i = 0
        while i < n:
            dollar = source.find("$", i)
            if dollar < 0:
                literal.append(source[i:])
                break
            literal.append(source[i:dollar])
            end = dollar
            while end < n and source[end] == "$":
                end += 1
            if end == n or source[end] != "{":
                literal.append(source[dollar:end])  # a '$' not before '{' is plain text
                i = end
                continue
            # Before '{', '$$' stands for '$'; an odd '$' left over opens an expression.
            literal.append("$" * ((end - dollar) // 2))
            i = end
            if (end - dollar) % 2:
                if literal:
                    parts.append("".join(literal))
                    literal = []
                self.i = end - 1
                parts.append(self.expression())
                i = self.i
        if literal:
            parts.append("".join(literal))
        parts = [p for p in parts if p != ""]
        if not parts:
            return _Const("")
        if len(parts) == 1:
            return _Const(parts[0]) if isinstance(parts[0], str) else parts[0]
        return _Concat(tuple(parts), self.text)

    def peek(self, start: int) -> str:
        """The next character after blanks and comments (``#`` to the end of the line, not ``#{``);
        inside an expression the text must not end here."""
        source, n = self.source, len(self.source)
        while self.i < n:
            if source[self.i] in _WHITESPACE:
                self.i += 1
            elif source[self.i] == "#" and not source.startswith("#{", self.i):
                end = source.find("\n", self.i)
                self.i = n if end < 0 else end
            else:
                break
        if self.i == len(self.source):
            self.error("unclosed '${' (no matching '}')", start)
        return self.source[self.i]

    def name(self) -> str:
        begin = self.i
        while self.i < len(self.source) and _is_name_char(self.source[self.i]):
            self.i += 1
        return self.source[begin : self.i]

    # expression := '${' subject (':' call)* '}'
    def expression(self) -> Node:
        start = self.i
        if self.depth >= _MAX_DEPTH:
            self.error(f"expressions nested more than {_MAX_DEPTH} deep", start)
        self.depth += 1
        self.i += 2
        node = self.subject(start)
        multi = None   # the multi-attribute function whose chain is being read
        if isinstance(node, Call) and node.function.role == "multi":
            multi, node = node, _Each()
        while True:
            c = self.peek(start)
            if c == "}":
                if multi is not None:
                    if not (isinstance(node, Call) and node.function.name in TESTS):
                        self.error(f"the functions after {multi.function.name}() must end with a test (such as "
                                   f"equals() or isEmpty()), or with join() or count()", self.i)
                    node = _Multi(multi, node)
                self.i += 1
                break
            if c == ":":
                self.i += 1
                self.peek(start)
                chain = node
                node = self.call(start, chain)
                if multi is not None and isinstance(node, Call) and node.function.role == "aggregate":
                    node, multi = _Multi(multi, chain, node.function.name, node.args), None
                continue
            hint = ""
            if isinstance(node, _Attr) and _is_name_char(c):
                hint = " (quote attribute names that contain blanks, as in ${'my attr'})"
            self.error(f"expected ':' or '}}'{hint}", self.i)
        self.depth -= 1
        return node

    # subject := name | quoted-name | function-call
    def subject(self, start: int) -> Node:
        c = self.peek(start)
        if c in "'\"":   # a quoted name may hold expressions: ${'abc${b}'}
            content, origin = self.string()
            name = _Parser(content, self.text, origin, self.depth).template()
            return _Attr(render(name.value)) if isinstance(name, _Const) else _AttrOf(name)
        if self.source.startswith("${", self.i):   # the attribute named by an expression's value
            return _AttrOf(self.expression())
        if not _is_name_char(c):
            self.error("expected an attribute name or a function call", self.i)
        name_at = self.i
        name = self.name()
        after_name = self.i
        if self.peek(start) == "(":
            return self.function(start, name, name_at, None)
        self.i = after_name
        return _Attr(name)

    def call(self, start: int, subject: Node) -> Node:
        if not _is_name_char(self.peek(start)):
            self.error("expected a function name after ':'", self.i)
        name_at = self.i
        return self.function(start, self.name(), name_at, subject)

    # function-call := name '(' [argument (',' argument)*] ')'
    def function(self, start: int, name: str, name_at: int, subject: Node | None) -> Node:
        function = FUNCTIONS.get(name)
        if function is None:
            self.error(_unknown_function(name), name_at)
        if subject is None and function.needs_subject is True:
            self.error(f"{name}() needs a subject, as in ${{attribute:{name}()}}", name_at)
        if subject is not None and function.needs_subject is False:
            self.error(f"{name}() takes no subject; write ${{{name}()}}", name_at)
        if self.peek(start) != "(":
            self.error(f"expected '(' after {name}: every function needs parentheses, as in {name}()", self.i)
        self.i += 1
        args: list[Node] = []
        args_at: list[int] = []
        if self.peek(start) == ")":
            self.i += 1
        else:
            while True:
                if len(args) == function.max_args:
                    self.error(f"{name}() takes {_arity(function)}", self.i)
                args_at.append(self.i)
                args.append(self.argument(start))
                c = self.peek(start)
                if c == ")":
                    self.i += 1
                    break
                if c != ",":
                    self.error("expected ')'" if len(args) == function.max_args else "expected ',' or ')'", self.i)
                self.i += 1
                self.peek(start)
        if len(args) < function.min_args:
            self.error(f"{name}() takes {_arity(function)}, got {len(args)}", self.i - 1)
        if function.check is not None:
            values = tuple(arg.value if isinstance(arg, _Const) else DYNAMIC for arg in args)
            try:
                function.check(values)
            except ArgumentError as exc:
                self.error(f"{name}(): {exc}", args_at[exc.index])
        position = self.origin[name_at] if self.origin is not None else name_at
        return Call(function, subject, tuple(args), position, self.text)

    # argument := string | number | true | false | null | expression
    def argument(self, start: int) -> Node:
        c = self.source[self.i]
        if c in "'\"":
            content, origin = self.string()
            return _Parser(content, self.text, origin, self.depth).template()
        if self.source.startswith("${", self.i):
            return self.expression()
        number = _NUMBER_TOKEN.match(self.source, self.i)
        if number is not None:
            self.i = number.end()
            token = number.group()
            return _Const(float(token) if any(c in token for c in ".eE") else int(token))
        if _is_name_char(c):
            word_at = self.i
            word = self.name()
            if word in ("true", "false", "null"):
                return _Const(None if word == "null" else word == "true")
            self.error(f"unquoted text {word!r}; quote text arguments, as in '{word}'", word_at)
        self.error("expected an argument: a quoted string, a number, true, false, null or ${...}", self.i)

    def string(self) -> tuple[str, list[int]]:
        """A quoted string: its unescaped content, and where each character came from (plus one
        entry for the closing quote, where an error at the end of the content points)."""
        quote, opened = self.source[self.i], self.i
        source, n = self.source, len(self.source)
        chars: list[str] = []
        origin: list[int] = []
        self.i += 1
        while True:
            if self.i >= n:
                self.error("unclosed string (missing closing quote)", opened)
            c = source[self.i]
            at = self.origin[self.i] if self.origin is not None else self.i
            if c == quote:
                origin.append(at)
                self.i += 1
                return "".join(chars), origin
            if c == "\\" and self.i + 1 < n and source[self.i + 1] in _ESCAPES:
                chars.append(_ESCAPES[source[self.i + 1]])
                self.i += 2
            else:  # any other backslash stays, so that regular expressions like '\d+' work
                chars.append(c)
                self.i += 1
            origin.append(at)


# --------------------------------------------------------------------------------------------
# Public interface
# --------------------------------------------------------------------------------------------


class CompiledValue:
    """A parsed property value, ready to evaluate against any number of FlowFiles.

    ``is_literal`` is True when the value holds no expression; ``evaluate`` then returns the same
    constant every time (``text`` with each ``$${`` unescaped), so callers may evaluate it once.
    """

    __slots__ = ("text", "is_literal", "_root", "_constant", "_inputs")

    def __init__(self, text: str, root: Node) -> None:
        self.text = text
        self._root = root
        self.is_literal = isinstance(root, _Const)
        self._constant = render(root.value) if isinstance(root, _Const) else None
        self._inputs = _inputs(root)

    def evaluate_each(self, flowfiles: Sequence[FlowFile]) -> list[str]:
        """``evaluate(flowfile=f)`` for each FlowFile, evaluated once per distinct input: a value
        that reads only attributes (and the FlowFile fields standing in for them) gives the same
        result for FlowFiles that agree on those; one that reads the clock or draws a ``UUID()``
        is evaluated for every FlowFile."""
        if self._constant is not None:
            return [self._constant] * len(flowfiles)
        inputs = self._inputs
        if inputs is None:
            return [self.evaluate(flowfile=f) for f in flowfiles]
        # the inputs as columns (no Python call a FlowFile unless a field stands in for an
        # attribute it lacks), then one evaluation a distinct key, by its first FlowFile
        maps = [f[2] for f in flowfiles]
        columns = []
        for name, fallback in inputs:
            column: list[Any] = [a.get(name) for a in maps]
            if fallback is not None and None in column:
                column = [(fallback(f),) if v is None else v for v, f in zip(column, flowfiles)]
            columns.append(column)
        keys = columns[0] if len(columns) == 1 else list(zip(*columns)) if columns else [()] * len(maps)
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))   # each key's first position
        results: dict = {}
        for key, position in sorted(first.items(), key=_second):   # in FlowFile order, as one at a time
            results[key] = self.evaluate(maps[position], flowfile=flowfiles[position])
        return list(map(results.__getitem__, keys))

    def evaluate(self, attributes: Mapping[str, str] | None = None, *, flowfile: FlowFile | None = None,
                 state: Mapping[str, str] | None = None) -> str:
        """The value with every expression replaced by its result.

        ``attributes`` defaults to the FlowFile's; the FlowFile also supplies ``fileSize``,
        ``entryDate``, ``lineageStartDate`` and ``uuid`` when no attribute has that name, and the
        environment any other name it lacks. ``state`` is what ``getStateValue`` reads.
        """
        if self._constant is not None:
            return self._constant
        if attributes is None:
            attributes = flowfile.attributes if flowfile is not None else {}
        return render(self._root.eval(EvaluationContext(attributes, flowfile, state)))

    def evaluate_within(self, ctx: EvaluationContext) -> str:
        """The value evaluated as part of an evaluation under way (``evaluateELString``): the same
        attributes, FlowFile and state, and the same ``MAX_EVALUATION_CHARS`` for both."""
        if self._constant is not None:
            return self._constant
        return render(self._root.eval(ctx))

    def __reduce__(self) -> tuple[Any, ...]:
        return compile_value, (self.text,)  # the tree is rebuilt (and cached) on the other side

    def __repr__(self) -> str:
        return f"compile_value({self.text!r})"


_second = operator.itemgetter(1)



def _inputs(root: Node) -> tuple[tuple[str, Callable | None], ...] | None:
    """What an evaluation of ``root`` reads: each attribute name (with the FlowFile field that
    stands in for it), or None when it reads something else (the clock, a random uuid)."""
    names: dict[str, Callable | None] = {}
    pending: list[Any] = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, _Attr):
            names[node.name] = node.fallback
        elif isinstance(node, (_AttrOf, _Multi)):   # which attributes it reads depends on values
            return None
        elif isinstance(node, _Concat):
            pending.extend(p for p in node.parts if isinstance(p, Node))
        elif isinstance(node, Call):
            if node.function.name in VOLATILE_FUNCTIONS:
                return None
            if node.subject is not None:
                pending.append(node.subject)
            pending.extend(node.args)
    return tuple(names.items())


@text_cache(4096)
def compile_value(text: str) -> CompiledValue:
    """Parse a property value; raises ExpressionError for any syntax error, unknown function, wrong
    number of arguments or invalid literal regular expression / date pattern. Cached
    (``flowactors.sdk.expression.cache``: a value read from an attribute is parsed again rather
    than kept when the cache holds much text)."""
    return CompiledValue(text, _Parser(text, text).template())
