"""The language's values, the nodes every tree has, and the function registry: what the parser
(``flowactors.sdk.expression.parser``) and the function library (``flowactors.sdk.expression.functions``,
one module a section of NiFi's Expression Language Guide, each function registered with
``register_function``) are written against.

Values inside an expression are typed: ``None`` (a missing attribute, NiFi's null), ``str``,
``bool``, ``int``/``float`` (NiFi's whole and decimal numbers) and ``Date`` (milliseconds since
the epoch, as ``now()`` and ``${entryDate}`` give). Only the final result is rendered to text.

What the function library uses: the values (``Date``, ``render``, ``parse_number``), the tree a
lazy function walks (``Node``, ``Call``, ``EvaluationContext``, ``lookup_attribute``,
``FLOWFILE_FIELDS``), the coercions of arguments (``to_number``, ``to_whole``, ``to_boolean``,
``to_millis``, ``as_number``), and the registry (``register_function``,
``register_string_function``, ``literal_check``, ``ArgumentError``, ``FUNCTIONS``, ``MANY``,
``DYNAMIC``, ``OMITTED``). A processor uses ``ExpressionError`` and the parser's ``compile_value``.

One evaluation produces at most ``MAX_EVALUATION_CHARS`` characters of text in all: a function whose
result grows with a number or by repetition checks the size before it makes the result
(``Call.check_result_size``), and every text a function returns is counted against the evaluation
(``EvaluationContext.charge``); going over is ``ExpressionLimitError``, an ``ExpressionError``.
"""

from __future__ import annotations

import decimal
import math
import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, NoReturn

if TYPE_CHECKING:
    from repositories.model import FlowFile


class ExpressionError(ValueError):
    """A syntax or evaluation error, pointing at the character of the property value at fault.

    ``position`` is the 0-based index in ``text`` (the whole property value); ``message`` is the
    description without the position. All three are the exception's ``args``, so it pickles (Ray
    sends exceptions between processes).
    """

    def __init__(self, message: str, position: int, text: str) -> None:
        super().__init__(message, position, text)
        self.message = message
        self.position = position
        self.text = text

    def __str__(self) -> str:
        return f"{self.message} at position {self.position} in '{excerpt(self.text, self.position)}'"


#: the most characters of the property value an error message quotes (around the position at fault)
_QUOTED_CHARS = 160


def excerpt(text: str, position: int) -> str:
    """``text``, or for a long one (a template read from an attribute) the part around ``position``,
    on one line: line breaks and other control characters written as Python escapes them (``\\n``)."""
    if len(text) > _QUOTED_CHARS:
        start = max(0, min(position - _QUOTED_CHARS // 2, len(text) - _QUOTED_CHARS))
        end = start + _QUOTED_CHARS
        text = ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


#: The most characters of text one evaluation may produce: every text a function returns, and every
#: value joined from parts, counted together (docs/expression-language.md, "Limits"). 16 Mi
#: characters: 16 times the largest attribute a FlowFile may hold (``flowactors.sdk.attribute_limits``).
MAX_EVALUATION_CHARS = 16 * 1024 * 1024
#: How many ``evaluateELString`` evaluations may be under way inside one another.
MAX_NESTED_EVALUATIONS = 8


class ExpressionLimitError(ExpressionError):
    """An evaluation refused because it would produce more than ``MAX_EVALUATION_CHARS`` characters
    of text (or nest ``evaluateELString`` deeper than ``MAX_NESTED_EVALUATIONS``), before it made
    that text. An ``ExpressionError``: processors treat it as any expression that cannot be evaluated."""


def limit_error(what: str, chars: int, position: int, text: str) -> ExpressionLimitError:
    """The error for ``what`` (a function, a joined value) making the evaluation ``chars`` characters."""
    return ExpressionLimitError(
        f"{what} would make the evaluation produce {chars:,} characters, more than the {MAX_EVALUATION_CHARS:,} "
        f"one evaluation may produce (MAX_EVALUATION_CHARS); keep large data in the FlowFile's content",
        position, text)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


class Date(NamedTuple):
    """A point in time, kept apart from numbers so that ``format`` knows what it has: milliseconds
    since the epoch, and the nanoseconds within the last one (what an instant read with more
    digits of fraction, or moved by nanoseconds, has; NiFi's instants count nanoseconds)."""

    millis: int
    nanos: int = 0


Value = Any  # None | str | bool | int | float | Date

#: What Java's String.trim removes: every code point up to and including the space.
JAVA_WHITESPACE = "".join(chr(c) for c in range(33))
_WHOLE = re.compile(r"[+-]?[0-9]+")
_HEX_NUMBER = re.compile(r"[+-]?0[xX][0-9a-fA-F]+")
#: NiFi's decimal numbers (its NumberParsing, the text Java's Double.valueOf reads): a fraction and/or
#: an exponent, Infinity, NaN, or hexadecimal with a binary exponent (``0x1.8p3``)
_DECIMAL = re.compile(r"[+-]?(?:Infinity|NaN|[0-9]+\.[0-9]+|[0-9]+(?:\.[0-9]+)?[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                      r"|0[xX][0-9a-fA-F]+\.?[pP][+-]?[0-9]+|0[xX]\.[0-9a-fA-F]+(?:[pP][+-]?[0-9]+)?"
                      r"|0[xX][0-9a-fA-F]+\.[0-9a-fA-F]+[pP][+-]?[0-9]+)")


def render(value: Value) -> str:
    """The text of a value, as it appears in the evaluated property."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, Date):
        return str(value.millis)
    return str(value)


def java_double(value: float) -> str:
    """A decimal as Java's ``Double.toString`` writes it, as NiFi renders one: the shortest digits
    that read back the same, ``5.0`` for a whole one, and ``1.0E-4`` / ``1.0E7`` (computerized
    scientific notation) below 0.001 or from 10 million on."""
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)            # Python's shortest digits, in the same fixed notation here
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(digits) + exponent - 1}"


def _describe(value: Value) -> str:
    """A value as an error message shows it: quoted when it is text, so blanks are visible."""
    if value is None:
        return "(missing)"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Date):
        return f"date {value.millis}"
    return render(value)


def parse_number(text: str) -> int | float | None:
    """A whole or decimal number written in ``text`` (surrounding blanks allowed) as NiFi reads one
    (``42``, ``0x2A``, ``-2.5``, ``1e3``, ``.5``, ``0x1.8p3``, ``Infinity``, ``NaN``), else None."""
    text = text.strip(JAVA_WHITESPACE)
    if _WHOLE.fullmatch(text):
        return int(text)
    if _HEX_NUMBER.fullmatch(text):
        return int(text, 16)
    if _DECIMAL.fullmatch(text):
        return float.fromhex(text) if "x" in text or "X" in text else float(text)
    return None


# --------------------------------------------------------------------------------------------
# Tree
# --------------------------------------------------------------------------------------------


class EvaluationContext:
    """What one evaluation sees. ``now()`` is read once, so all its uses in a value agree;
    ``state`` is the processor's state map when the caller gives it (``getStateValue``), ``each``
    the value a multi-attribute function's chain is applied to; ``produced`` the characters of text
    made so far (``charge``), ``nesting`` the ``evaluateELString`` evaluations under way."""

    __slots__ = ("attributes", "flowfile", "state", "each", "produced", "nesting", "_now")

    def __init__(self, attributes: Mapping[str, str], flowfile: FlowFile | None,
                 state: Mapping[str, str] | None = None) -> None:
        self.attributes = attributes
        self.flowfile = flowfile
        self.state = state
        self.each: Value = None
        self.produced = 0
        self.nesting = 0
        self._now: int | None = None

    def now(self) -> int:
        if self._now is None:
            self._now = time.time_ns() // 1_000_000
        return self._now

    def charge(self, chars: int, refuse: Callable[[int], NoReturn]) -> None:
        """Count ``chars`` characters of text made; once the evaluation has made more than
        ``MAX_EVALUATION_CHARS``, ``refuse`` (the maker's) raises, given the total."""
        self.produced += chars
        if self.produced > MAX_EVALUATION_CHARS:
            refuse(self.produced)


class Node:
    """A node of a parsed value's tree: ``eval`` gives its value in one evaluation."""

    __slots__ = ()

    def eval(self, ctx: EvaluationContext) -> Value:
        raise NotImplementedError


#: FlowFile fields that stand in for an attribute of the same name when the attribute is missing.
FLOWFILE_FIELDS: dict[str, Callable[["FlowFile"], Value]] = {
    "fileSize": lambda ff: ff.size,
    "entryDate": lambda ff: Date(ff.entry_date),
    "lineageStartDate": lambda ff: Date(ff.lineage_start_date),
    "uuid": lambda ff: ff.uuid,
}


def lookup_attribute(name: str, ctx: EvaluationContext, fallback: Callable[["FlowFile"], Value] | None) -> Value:
    """An attribute; else the FlowFile field of that name; else the environment variable (NiFi's
    ENVIRONMENT scope: what a property without a FlowFile sees, and a FlowFile's last resort)."""
    value = ctx.attributes.get(name)
    if value is None:
        if fallback is not None and ctx.flowfile is not None:
            return fallback(ctx.flowfile)
        return os.environ.get(name)
    return value


class Function(NamedTuple):
    """A function of the language. A lazy one gets its argument nodes, to evaluate only some."""

    name: str
    min_args: int
    max_args: int
    needs_subject: bool | None   # None: either way (``math``)
    lazy: bool
    impl: Callable[..., Value]
    check: Callable[[tuple[Value, ...]], None] | None
    #: "multi": gives values the chain after it is applied to; "aggregate": closes that chain
    role: str | None = None


class Call(Node):
    """A function applied to its subject (None for a subjectless one) and argument nodes; ``fail``
    reports an error at the function's position in the property value."""

    __slots__ = ("function", "subject", "args", "position", "text")

    def __init__(
        self, function: Function, subject: Node | None, args: tuple[Node, ...], position: int, text: str
    ) -> None:
        self.function = function
        self.subject = subject
        self.args = args
        self.position = position
        self.text = text

    def eval(self, ctx: EvaluationContext) -> Value:
        """The function's result. A text it makes (not its subject, nor a text equal to an
        argument's: returned as it is) counts against the evaluation's ``MAX_EVALUATION_CHARS``; a
        lazy function's result is a value its arguments made, counted there."""
        subject = self.subject.eval(ctx) if self.subject is not None else None
        try:
            if self.function.lazy:
                return self.function.impl(self, ctx, subject, self.args)
            values = [arg.eval(ctx) for arg in self.args]
            result = self.function.impl(self, subject, *values)
        except ExpressionError:
            raise
        except (ValueError, ArithmeticError) as exc:  # a safety net: report it where it happened
            self.fail(str(exc))
        if type(result) is str and result is not subject and result not in values:   # made: counted
            ctx.produced += len(result)   # ``ctx.charge``, inline: this runs for every call
            if ctx.produced > MAX_EVALUATION_CHARS:
                self.refuse(ctx.produced)
        return result

    def fail(self, message: str) -> NoReturn:
        raise ExpressionError(f"{self.function.name}(): {message}", self.position, self.text)

    def refuse(self, chars: int) -> NoReturn:
        """``ExpressionLimitError``: this call would make the evaluation ``chars`` characters."""
        raise limit_error(f"{self.function.name}()", chars, self.position, self.text)

    def check_result_size(self, chars: int) -> None:
        """Refuse a result of ``chars`` characters before making it, when it alone is more than
        ``MAX_EVALUATION_CHARS`` (what a function whose result grows with a number calls first)."""
        if chars > MAX_EVALUATION_CHARS:
            self.refuse(chars)


# --------------------------------------------------------------------------------------------
# Coercions used by the functions
# --------------------------------------------------------------------------------------------


def to_number(call: Call, value: Value, role: str) -> int | float:
    """The value as a number (a date as its milliseconds, text parsed); else ``call`` fails, naming
    the value by ``role`` ("subject", "argument", ...)."""
    if isinstance(value, bool):
        call.fail(f"{role} {_describe(value)} is not a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, Date):
        return value.millis
    number = parse_number(render(value))
    if number is None:
        call.fail(f"{role} {_describe(value)} is not a number")
    return number


def as_number(value: Value) -> int | float | None:
    """The value as a number, or None when it is missing or not one (the tests that are false then)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, Date):
        return value.millis
    return parse_number(render(value))


def to_whole(call: Call, value: Value, role: str) -> int:
    """``to_number``, and the number must be whole; else ``call`` fails."""
    number = to_number(call, value, role)
    if isinstance(number, float):
        if not number.is_integer():
            call.fail(f"{role} {_describe(value)} is not a whole number")
        number = int(number)
    return number


def to_boolean(call: Call, value: Value) -> bool:
    """NiFi's reading of a boolean: text is true only when it is 'true' in any case; null is false."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str):
        return value.lower() == "true"
    call.fail(f"expected true or false, got {_describe(value)}")


def to_millis(call: Call, value: Value) -> int:
    """A date's milliseconds, or a number of them (text parsed; a decimal cut toward zero, as NiFi);
    else ``call`` fails."""
    if isinstance(value, Date):
        return value.millis
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        number = value if not isinstance(value, str) else parse_number(value)
        if number is not None and math.isfinite(number):
            return int(number)
    call.fail(f"{_describe(value)} is not a date or a number of milliseconds")



# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------

#: every function of the language by name, as ``register_function`` registered it
FUNCTIONS: dict[str, Function] = {}
#: functions whose result is not decided by their arguments and the attributes (the clock, chance,
#: the processor's state, the thread): evaluated for every FlowFile
VOLATILE_FUNCTIONS: set[str] = set()
#: the most arguments a function taking "any number" accepts (``in``, ``anyAttribute``, ...)
MANY = 255
DYNAMIC = object()  # stands for an argument whose value is only known at evaluation
OMITTED = object()  # the default of an optional argument: unlike None, it was not written


class ArgumentError(Exception):
    """Raised by a parse-time check: argument ``index`` is invalid."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def register_function(
    name: str,
    args: tuple[int, int] = (0, 0),
    *,
    subject: bool | None = True,
    lazy: bool = False,
    check: Callable[[tuple[Value, ...]], None] | None = None,
    role: str | None = None,
    volatile: bool = False,
) -> Callable[[Callable[..., Value]], Callable[..., Value]]:
    """A decorator registering its function as the language's function ``name``: ``args`` the
    least and most arguments, ``subject`` whether it needs one (None: either way), ``lazy`` given
    its argument nodes instead of their values, ``check`` run at parse time on the literal
    arguments, ``role`` "multi" or "aggregate" (see ``Function``), ``volatile`` evaluated for every
    FlowFile (its result not decided by its arguments and the attributes)."""
    if volatile:
        VOLATILE_FUNCTIONS.add(name)

    def register(impl: Callable[..., Value]) -> Callable[..., Value]:
        FUNCTIONS[name] = Function(name, args[0], args[1], subject, lazy, impl, check, role)
        return impl

    return register


def literal_check(*parsers: Callable[[str], Any]) -> Callable[[tuple[Value, ...]], None]:
    """A parse-time check: ``parsers[i]`` reads argument i when it is written literally, so a bad
    pattern, zone, path or name is reported before any FlowFile is processed."""

    def check(values: tuple[Value, ...]) -> None:
        for index, (parse, value) in enumerate(zip(parsers, values)):
            if value is not DYNAMIC:
                try:
                    parse(render(value))
                except ValueError as exc:
                    raise ArgumentError(index, str(exc)) from None

    return check


def register_string_function(name: str, transform: Callable[[str], str]) -> None:
    """A text-to-text function; a missing value stays missing (so isNull still sees it). A
    transform that raises ValueError fails the evaluation at the function's position."""
    register_function(name)(lambda call, subject: None if subject is None else transform(render(subject)))
