"""Type coercion (NiFi guide: Type Coercion): text, numbers, and a point in time as micro- or
nanoseconds. ``toDate`` and ``toInstant`` read dates from text: ``functions.dates``."""

from __future__ import annotations

from flowactors.sdk.expression.language import Value, _Call, _function, _millis, _number, _render


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


@_function("toMicros")
def _to_micros(call: _Call, subject: Value) -> Value:
    """Microseconds since the epoch of a date or instant (dates here have millisecond precision)."""
    return None if subject is None else _millis(call, subject) * 1000


@_function("toNanos")
def _to_nanos(call: _Call, subject: Value) -> Value:
    return None if subject is None else _millis(call, subject) * 1_000_000
