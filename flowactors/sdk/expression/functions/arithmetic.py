"""Mathematical operations (NiFi guide: Mathematical Operations and Numeric Manipulation).

Whole numbers stay whole (Java's long arithmetic: division truncates toward zero, ``mod`` takes
the dividend's sign, a result past the 64-bit range wraps around); a decimal on either side makes
the result decimal. A missing side gives a missing result.
"""

from __future__ import annotations

import math
import random
import string
from typing import Callable

from flowactors.sdk.expression.language import OMITTED, Value, Call, register_function, to_number, render, to_whole


_LONG_MIN, _LONG_SPAN = -2**63, 2**64


def _java_long(number: int) -> int:
    """``number`` as Java's 64-bit long holds it: wrapped around past its range."""
    return (number - _LONG_MIN) % _LONG_SPAN + _LONG_MIN


def _operation(name: str, whole: Callable[[Call, int, int], int], decimal: Callable[[float, float], float]) -> None:
    def impl(call: Call, subject: Value, other: Value) -> Value:
        if subject is None or other is None:
            return None
        a, b = to_number(call, subject, "subject"), to_number(call, other, "argument")
        if isinstance(a, int) and isinstance(b, int):
            return _java_long(whole(call, a, b))
        return decimal(float(a), float(b))

    register_function(name, (1, 1))(impl)


def _truncated_division(call: Call, a: int, b: int) -> int:
    if b == 0:
        call.fail("division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _remainder(call: Call, a: int, b: int) -> int:
    if b == 0:
        call.fail("division by zero")
    rest = abs(a) % abs(b)
    return rest if a >= 0 else -rest


def _java_divide(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _java_fmod(a: float, b: float) -> float:
    return math.nan if b == 0 else math.fmod(a, b)


_operation("plus", lambda call, a, b: a + b, lambda a, b: a + b)
_operation("minus", lambda call, a, b: a - b, lambda a, b: a - b)
_operation("multiply", lambda call, a, b: a * b, lambda a, b: a * b)
_operation("divide", _truncated_division, _java_divide)
_operation("mod", _remainder, _java_fmod)

_DIGITS = string.digits + string.ascii_lowercase


def _radix(call: Call, value: Value) -> int:
    radix = to_whole(call, value, "radix")
    if not 2 <= radix <= 36:
        call.fail(f"the radix must be 2 to 36, got {radix}")
    return radix


@register_function("toRadix", (1, 2))
def _to_radix(call: Call, subject: Value, radix: Value, width: Value = OMITTED) -> Value:
    """The whole number written in base ``radix`` (lower case), left-padded with zeros to ``width``."""
    if subject is None:
        return None
    number, base = to_whole(call, subject, "subject"), _radix(call, radix)
    digits = []
    rest = abs(number)
    while True:
        rest, digit = divmod(rest, base)
        digits.append(_DIGITS[digit])
        if not rest:
            break
    text = "".join(reversed(digits))
    if width is not OMITTED:
        wanted = to_whole(call, width, "width")
        call.check_result_size(wanted)
        text = text.zfill(wanted)
    return "-" + text if number < 0 else text


@register_function("fromRadix", (1, 1))
def _from_radix(call: Call, subject: Value, radix: Value) -> Value:
    if subject is None:
        return None
    text, base = render(subject).strip(), _radix(call, radix)
    try:
        number = int(text, base)
    except ValueError:
        call.fail(f"{text[:40]!r} is not a number in base {base}")
    if number != _java_long(number):   # Java's Long.parseLong refuses it
        call.fail(f"{text[:40]!r} in base {base} is outside the range of a whole number (64 bits)")
    return number


@register_function("random", subject=False, volatile=True)
def _random(call: Call, subject: Value) -> Value:
    """A random whole number from 0 to 2^63 - 1."""
    return random.getrandbits(63)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


#: Java's ``Math`` methods by name: (arguments after the subject, function)
_MATH: dict[str, tuple[int, Callable]] = {
    "abs": (0, abs), "acos": (0, math.acos), "asin": (0, math.asin), "atan": (0, math.atan),
    "atan2": (1, math.atan2), "cbrt": (0, math.cbrt),
    "ceil": (0, lambda x: float(math.ceil(x))), "cos": (0, math.cos), "cosh": (0, math.cosh),
    "exp": (0, math.exp), "expm1": (0, math.expm1), "floor": (0, lambda x: float(math.floor(x))),
    "hypot": (1, math.hypot), "log": (0, math.log), "log10": (0, math.log10), "log1p": (0, math.log1p),
    "max": (1, max), "min": (1, min), "pow": (1, lambda x, y: float(x) ** float(y)),
    "rint": (0, lambda x: float(round(x))), "round": (0, _java_round), "scalb": (1, lambda x, n: math.ldexp(x, int(n))),
    "signum": (0, lambda x: 0.0 if x == 0 else math.copysign(1.0, x)), "sin": (0, math.sin),
    "sinh": (0, math.sinh), "sqrt": (0, math.sqrt), "tan": (0, math.tan), "tanh": (0, math.tanh),
    "toDegrees": (0, math.degrees), "toRadians": (0, math.radians), "ulp": (0, math.ulp),
}


@register_function("math", (1, 2), subject=None, volatile=True)
def _math(call: Call, subject: Value, name: Value, argument: Value = OMITTED) -> Value:
    """A method of Java's ``Math`` on the subject (and one more argument): ``${n:math('sqrt')}``,
    ``${n:math('pow', 2)}``; ``${math('random')}`` without a subject."""
    method = render(name)
    if method == "random":
        return random.random()
    if method not in _MATH:
        call.fail(f"unknown Math method {method!r} (one of random, {', '.join(_MATH)})")
    extra, impl = _MATH[method]
    if subject is None:
        call.fail(f"math('{method}') needs a subject")
    given = 0 if argument is OMITTED else 1
    if given != extra:
        call.fail(f"math('{method}') takes {extra} argument{'s' if extra != 1 else ''} after the name")
    values = [to_number(call, subject, "subject")]
    if argument is not OMITTED:
        values.append(to_number(call, argument, "argument"))
    try:
        return impl(*values)
    except (ValueError, OverflowError):
        return math.nan
