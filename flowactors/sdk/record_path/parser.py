"""The syntax: ``compile_path`` parses a path once (cached) into a tree of nodes, reporting the
first error with its position; ``RecordPath.evaluate`` walks the tree for one record.

The grammar, as NiFi's (``RecordPathParser.g``)::

    top        := condition END
    condition  := filter-function | expression [operator expression]
    expression := path | 'string' | number | function
    path       := '/' | step-ref step* | ('.' | '..') [step-ref step*]
    step-ref   := '/' (name | 'string' | '*' | '.' | '..') | '//' (name | 'string' | '*') | index
    step       := step-ref | '.' | '[' condition ']'
    index      := '[' ( '*' | 'string' {',' 'string'} | range {',' range} ) ']'
    range      := number ['..' number]
    function   := name '(' [argument {',' argument}] ')'

A condition with an operator, or a filter function, is true or false for each value of its left
side or subject: inside ``[...]`` it keeps the values it holds for; elsewhere (at the top, as an
argument) it gives those booleans.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flowactors.sdk.expression.cache import text_cache
from flowactors.sdk.record_path.conversions import LONG_MAX, LONG_MIN
from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.filters import Comparison   # (its module registers the filter functions)
from flowactors.sdk.record_path.functions.registry import FUNCTIONS   # (its package registers the others)
from flowactors.sdk.record_path.lexer import (COMMA, DESCENDANT, DOT, END, LBRACKET, LPAREN, NAME, NUMBER, OPERATOR,
                                              RANGE, RBRACKET, RPAREN, SLASH, STAR, STRING, Token, tokenize)
from flowactors.sdk.record_path.nodes import (Context, CurrentStart, Filter, FilterValue, Literal, Node, ParentStart,
                                              Path, RootStart, Step)
from flowactors.sdk.record_path.shapes import schema_shape
from flowactors.sdk.record_path.steps import (ArrayIndex, ArrayIndexes, Child, Current, Descendant, MapKey, Parent,
                                              Predicate, WildcardChild, WildcardIndex)
from flowactors.sdk.record_path.values import FieldValue
from flowactors.sdk.records.schema import printable
from flowactors.sdk.suggest import did_you_mean

__all__ = ["RecordPath", "compile_path"]

#: how deep functions, predicates and conditions may nest inside one another in a path
MAX_NESTING = 50
#: the most characters of a name, string or number a message quotes
_QUOTED = 60

class RecordPath:
    """A compiled path. ``text`` is the path as written; ``is_absolute`` says it starts at the
    root record (``/...``), so its values do not depend on a context node (a relative path, a
    function or a literal may: UpdateRecord evaluates those once per field it updates)."""

    __slots__ = ("text", "is_absolute", "_node")

    def __init__(self, text: str, node: Node, is_absolute: bool) -> None:
        self.text = text
        self.is_absolute = is_absolute
        self._node = node

    def evaluate(self, record: dict, schema: pa.Schema | None = None,
                 context: FieldValue | None = None) -> list[FieldValue]:
        """The values the path selects in ``record`` (a dict: nested dicts for records, lists for
        arrays, dicts for maps), in order. ``schema`` (the record's Arrow schema, may be None) says
        the fields' types and tells records from maps; ``context`` is the node relative paths
        (``.``, ``..``) start from (the root record when None). The values can be changed in place
        (``FieldValue.update``). RecordPathError when a function cannot take a value it is given."""
        ctx = Context(record, schema_shape(schema) if schema is not None else None, context)
        try:
            return self._node.evaluate(ctx)
        except RecordPathError as exc:
            raise exc.with_text(self.text) from None

    def __reduce__(self) -> tuple:
        """Pickled as its text (Ray ships processors holding compiled paths): compiled again where
        it is unpickled."""
        return compile_path, (self.text,)

    def __repr__(self) -> str:
        return f"RecordPath({self.text!r})"


@text_cache(1024)
def compile_path(text: str) -> RecordPath:
    """The compiled path of ``text`` (cached: the same object for the same text). RecordPathError
    naming the first mistake and its position: a syntax error, an unknown function, a wrong number
    of arguments, an invalid literal regular expression, hash algorithm, character set or time
    zone."""
    if not text.strip():
        raise RecordPathError("the path is empty", 0, text)
    try:
        parser = _Parser(text)
        node = parser.top()
    except RecordPathError as exc:
        raise exc.with_text(text) from None
    return RecordPath(text, node, isinstance(node, Path) and isinstance(node.start, RootStart))


class _Parser:
    """Recursive descent over the tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.at = 0
        self.depth = 0

    # --- tokens ---

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.tokens[self.at]
        self.at = min(self.at + 1, len(self.tokens) - 1)
        return token

    def expect(self, kind: str, what: str) -> Token:
        token = self.peek()
        if token.kind != kind:
            raise self.unexpected(token, what)
        return self.take()

    def unexpected(self, token: Token, expected: str) -> RecordPathError:
        if token.kind == END:
            found = "the end of the path"
        elif token.kind == STRING:
            found = f"the string '{printable(token.text, _QUOTED)}'"
        else:
            found = f"'{printable(token.text, _QUOTED)}'"
        return RecordPathError(f"expected {expected}, found {found}", token.position)

    # --- conditions and expressions ---

    def top(self) -> Node:
        condition = self.condition()
        if self.peek().kind != END:
            raise self.unexpected(self.peek(), "the end of the path (or an operator)")
        return FilterValue(condition) if isinstance(condition, Filter) else condition

    def condition(self) -> Node | Filter:
        """A filter function, or an expression with an optional operator and right side."""
        left = self.expression()
        if isinstance(left, Filter):
            return left
        if self.peek().kind == OPERATOR:
            operator = self.take()
            right = self.expression()
            return Comparison(operator.text, left, self._value(right), operator.position)
        return left

    def expression(self) -> Node | Filter:
        """A path, a literal or a function call (a filter function gives its Filter); at most
        ``MAX_NESTING`` inside one another (as arguments, in predicates)."""
        if self.depth >= MAX_NESTING:
            raise RecordPathError(f"the path nests functions and predicates more than {MAX_NESTING} deep",
                                  self.peek().position)
        self.depth += 1
        try:
            return self._expression()
        finally:
            self.depth -= 1

    def _expression(self) -> Node | Filter:
        token = self.peek()
        if token.kind == STRING:
            self.take()
            return Literal(token.text, token.position)
        if token.kind == NUMBER:
            self.take()
            return Literal(self._number(token), token.position)
        if token.kind == NAME and self.peek(1).kind == LPAREN:
            return self.call()
        if token.kind in (SLASH, DESCENDANT, LBRACKET):
            return self.absolute_path()
        if token.kind in (DOT, RANGE):
            self.take()
            start: Node = CurrentStart(token.position) if token.kind == DOT else ParentStart(token.position)
            return Path(start, self.steps()) if self.peek().kind in (SLASH, DESCENDANT, LBRACKET) else start
        if token.kind == NAME:
            name = printable(token.text, _QUOTED)
            raise RecordPathError(f"unexpected name '{name}': a field is written /{name} (./{name} relative to the "
                                  "current field), a function name(...)", token.position)
        raise self.unexpected(token, "a path, a string, a number or a function")

    def _number(self, token: Token) -> int:
        number = int(token.text)
        if not LONG_MIN <= number <= LONG_MAX:
            raise RecordPathError(f"the number {printable(token.text, _QUOTED)} is out of range (a 64-bit whole "
                                  "number)", token.position)
        return number

    @staticmethod
    def _value(expression: Node | Filter) -> Node:
        """An expression as a value: a filter gives its booleans."""
        return FilterValue(expression) if isinstance(expression, Filter) else expression

    def call(self) -> Node | Filter:
        name = self.take()
        spec = FUNCTIONS.get(name.text)
        if spec is None:
            hint = did_you_mean(name.text, sorted(FUNCTIONS), "the functions are")
            raise RecordPathError(f"unknown function '{printable(name.text, _QUOTED)}': {hint}", name.position)
        self.expect(LPAREN, "'('")
        args: list[Any] = []
        if self.peek().kind != RPAREN:
            args.append(self.argument(spec.conditions))
            while self.peek().kind == COMMA:
                self.take()
                args.append(self.argument(spec.conditions))
        self.expect(RPAREN, "',' or ')'")
        if len(args) < spec.least or spec.most is not None and len(args) > spec.most:
            raise RecordPathError(f"{name.text} takes {spec.arity()}, but {len(args)} "
                                  f"{'was' if len(args) == 1 else 'were'} given", name.position)
        return spec.build(args, name.position)

    def argument(self, condition: bool) -> Node | Filter:
        """A function's argument: a value; for ``not``, a condition."""
        token = self.peek()
        if not condition:
            return self._value(self.expression())
        argument = self.condition()
        if not isinstance(argument, Filter):
            raise RecordPathError("not takes a condition: a comparison (<value> <operator> <value>) or a "
                                  "filter function", token.position)
        return argument

    # --- paths ---

    def absolute_path(self) -> Node:
        token = self.peek()
        if token.kind == SLASH and self.peek(1).kind not in (NAME, STRING, STAR, DOT, RANGE):
            self.take()
            return Path(RootStart(token.position), ())
        return Path(RootStart(token.position), self.steps())

    def steps(self) -> tuple[Step, ...]:
        """The steps of a path (the caller has seen that the first is '/', '//' or '[')."""
        steps: list[Step] = []
        while True:
            token = self.peek()
            if token.kind == SLASH:
                self.take()
                steps.append(self.child_step(token))
            elif token.kind == DESCENDANT:
                self.take()
                steps.append(self.descendant_step(token))
            elif token.kind == LBRACKET:
                self.take()
                steps.append(self.bracket(token))
            elif token.kind == DOT and steps:
                self.take()
                steps.append(Current(token.position))
            else:
                return tuple(steps)

    def child_step(self, slash: Token) -> Step:
        token = self.take()
        if token.kind in (NAME, STRING):
            return Child(token.text, token.position)
        if token.kind == STAR:
            return WildcardChild(token.position)
        if token.kind == DOT:
            return Current(token.position)
        if token.kind == RANGE:
            return Parent(token.position)
        raise self.unexpected(token, "a field name, '*', '.' or '..' after '/'")

    def descendant_step(self, slashes: Token) -> Step:
        token = self.take()
        if token.kind in (NAME, STRING):
            return Descendant(token.text, token.position)
        if token.kind == STAR:
            return Descendant(None, token.position)
        raise self.unexpected(token, "a field name or '*' after '//'")

    def bracket(self, bracket: Token) -> Step:
        """``[...]`` after '[': an index, map keys, '*' or a predicate."""
        index = self.index(bracket)
        if index is not None:
            return index
        condition = self.condition()
        if self.peek().kind != RBRACKET:
            raise self.unexpected(self.peek(), "an operator or ']'" if not isinstance(condition, Filter) else "']'")
        if not isinstance(condition, Filter):
            raise RecordPathError("a predicate [...] must be a comparison (<value> <operator> <value>) or a filter "
                                  "function (contains, containsRegex, endsWith, startsWith, isBlank, isEmpty, "
                                  "matchesRegex, not), not a value", bracket.position + 1)
        self.expect(RBRACKET, "']' to close the predicate")
        return Predicate(condition, bracket.position)

    def index(self, bracket: Token) -> Step | None:
        """An index, map keys or '*' (with the closing ']'), else None with nothing consumed."""
        start = self.at
        token = self.peek()
        if token.kind == STAR and self.peek(1).kind == RBRACKET:
            self.at += 2
            return WildcardIndex(bracket.position)
        if token.kind == STRING:
            keys = self._list(STRING, lambda t: t.text)
            if keys is not None:
                return MapKey(tuple(keys), bracket.position)
        elif token.kind == NUMBER:
            ranges = self._list(NUMBER, self._range)
            if ranges is not None:
                if self.at - start == 2:   # one number and the ']'
                    return ArrayIndex(ranges[0][0], bracket.position)
                return ArrayIndexes(tuple(ranges), bracket.position)
        self.at = start
        return None

    def _list(self, kind: str, item: Any) -> list[Any] | None:
        """``item`` of each of a comma-separated list of ``kind`` tokens closed by ']', or None (the
        position left where it failed, for the caller to restore)."""
        items = []
        while True:
            if self.peek().kind != kind:
                return None
            items.append(item(self.take()))
            if self.peek().kind == RBRACKET:
                self.take()
                return items
            if self.peek().kind != COMMA:
                return None
            self.take()

    def _range(self, low: Token) -> tuple[int, int]:
        """A number, or a range ``low..high`` (when '..' and a number follow)."""
        if self.peek().kind == RANGE and self.peek(1).kind == NUMBER:
            self.take()
            return self._number(low), self._number(self.take())
        return self._number(low), self._number(low)
