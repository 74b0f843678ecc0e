"""Type coercion (NiFi guide: Type Coercion): a value as text or as a number. Dates and instants
are read and converted by ``functions.dates``."""

from __future__ import annotations

from flowactors.sdk.expression.language import Value, _Call, _function, _number, _render


@_function("toString")
def _to_string(call: _Call, subject: Value) -> Value:
    return None if subject is None else _render(subject)


@_function("toNumber")
def _to_number(call: _Call, subject: Value) -> Value:
    """The subject as a number: whole (decimal digits, or hexadecimal after ``0x``) or decimal."""
    return None if subject is None else _number(call, subject, "subject")


@_function("toDecimal")
def _to_decimal(call: _Call, subject: Value) -> Value:
    return None if subject is None else float(_number(call, subject, "subject"))
