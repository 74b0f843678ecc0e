"""Type coercion (NiFi guide: Type Coercion): a value as text or as a number. Dates and instants
are read and converted by ``functions.dates``."""

from __future__ import annotations

from flowactors.sdk.expression.language import Value, Call, register_function, to_number, render


@register_function("toString")
def _to_string(call: Call, subject: Value) -> Value:
    return None if subject is None else render(subject)


@register_function("toNumber")
def _to_number(call: Call, subject: Value) -> Value:
    """The subject as a number: whole (decimal digits, or hexadecimal after ``0x``) or decimal."""
    return None if subject is None else to_number(call, subject, "subject")


@register_function("toDecimal")
def _to_decimal(call: Call, subject: Value) -> Value:
    return None if subject is None else float(to_number(call, subject, "subject"))
