"""The math functions: add, subtract, multiply, divide, toNumber.

An operand is a number, text holding one or a date (milliseconds since the epoch). Two whole
numbers give a whole number with Java's long arithmetic (it wraps around past 64 bits; division
truncates toward zero); anything else gives a float. A missing operand (the argument selects
nothing) is an error, an operand that is None gives no result, as NiFi's.
"""

from __future__ import annotations

import operator
from decimal import Decimal
from typing import Any, Callable, Sequence

from flowactors.sdk.record_path.conversions import LONG_MAX, LONG_MIN, java_long, numeric
from flowactors.sdk.record_path.functions.base import Call
from flowactors.sdk.record_path.functions.registry import register
from flowactors.sdk.record_path.nodes import Context, Node, first
from flowactors.sdk.record_path.shapes import DOUBLE, LONG
from flowactors.sdk.record_path.values import FieldValue, computed


def _whole(number: Any) -> bool:
    """Whether ``number`` takes Java's long arithmetic (a whole number in the long range)."""
    return isinstance(number, int) and LONG_MIN <= number <= LONG_MAX


class _MathCall(Call):
    """A math function's operands, as numbers."""

    __slots__ = ()

    def operand(self, index: int, ctx: Context, side: str) -> FieldValue:
        fv = first(self.args[index], ctx)
        if fv is None:
            raise self.error(f"{self.name} function requires {side} operand")
        return fv

    def number(self, fv: FieldValue) -> int | float | Decimal:
        """The operand as a number; an error naming its field when it is none."""
        number = numeric(fv.value)
        if number is None:
            raise self.error(f"Cannot coerce field '{fv.name or '<Anonymous Inner Field>'}' to number")
        return number


def _divide_whole(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


class _Binary(_MathCall):
    """``add``, ``subtract``, ``multiply``, ``divide`` of two operands."""

    __slots__ = ("whole", "decimal")

    def __init__(self, name: str, args: Sequence[Node], position: int,
                 whole: Callable[[int, int], int], decimal: Callable[[float, float], float]) -> None:
        super().__init__(name, args, position)
        self.whole = whole
        self.decimal = decimal

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        left = self.operand(0, ctx, "a left-hand")
        right = self.operand(1, ctx, "a right-hand")
        if left.value is None or right.value is None:
            return []
        a, b = self.number(left), self.number(right)
        if self.name == "divide" and b == 0:
            raise self.error("Division by zero in RecordPath divide function")
        if _whole(a) and _whole(b):
            return [computed(java_long(self.whole(int(a), int(b))), None, LONG, self.name)]
        return [computed(self.decimal(float(a), float(b)), None, DOUBLE, self.name)]


def _binary(name: str, whole: Callable[[int, int], int], decimal: Callable[[float, float], float]) -> None:
    register(name, 2)(lambda args, position: _Binary(name, args, position, whole, decimal))


_binary("add", operator.add, operator.add)
_binary("subtract", operator.sub, operator.sub)
_binary("multiply", operator.mul, operator.mul)
_binary("divide", _divide_whole, operator.truediv)


class _ToNumber(_MathCall):
    """``toNumber(value)``: a number as it is (with its type), text or a date as a number; None
    stays None."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        fv = self.operand(0, ctx, "an")
        value = fv.value
        if value is None or isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return [fv]
        number = self.number(fv)
        return [computed(number, None, LONG if _whole(number) else DOUBLE, "toNumber")]


register("toNumber", 1)(lambda args, position: _ToNumber("toNumber", args, position))
