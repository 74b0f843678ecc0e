"""Type coercion (NiFi guide: Type Coercion): a value as text or as a number. Dates and instants
are read and converted by ``functions.dates``."""

from __future__ import annotations

import math

from flowactors.sdk.expression.language import Value, Call, as_number, register_function, render

_LONG_MIN, _LONG_MAX = -2**63, 2**63 - 1


@register_function("toString")
def _to_string(call: Call, subject: Value) -> Value:
    return None if subject is None else render(subject)


def _number(call: Call, subject: Value) -> int | float | None:
    """The subject as a number, None when it is missing or text that is not one; a boolean fails
    (NiFi refuses to convert one)."""
    if isinstance(subject, bool):
        call.fail(f"subject {render(subject)} is not a number")
    return as_number(subject)


@register_function("toNumber")
def _to_number(call: Call, subject: Value) -> Value:
    """The subject as a whole number, as NiFi's: a decimal cut toward zero (as Java's ``longValue``),
    a date its milliseconds; missing when the subject is not a number."""
    number = _number(call, subject)
    if not isinstance(number, float):
        return number
    if number != number:
        return 0
    return max(_LONG_MIN, min(_LONG_MAX, int(number))) if math.isfinite(number) else (
        _LONG_MAX if number > 0 else _LONG_MIN)


@register_function("toDecimal")
def _to_decimal(call: Call, subject: Value) -> Value:
    """The subject as a decimal number; missing when it is not a number, as NiFi's."""
    number = _number(call, subject)
    return None if number is None else float(number)
