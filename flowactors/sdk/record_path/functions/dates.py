"""The date functions: toDate (text to an instant) and format (an instant to text), with Java's
date pattern letters (``yyyy-MM-dd'T'HH:mm:ss``) and an optional time zone (the machine's when not
given), as NiFi's.

A pattern that cannot be read, or text that does not match it, leaves the value unchanged (NiFi
does the same); a time zone that names none is an error (Java would quietly use GMT).
"""

from __future__ import annotations

from datetime import date, datetime, time, timezone, tzinfo
from decimal import Decimal
from typing import Sequence

from flowactors.sdk.expression.functions.dates import date_pattern, format_date, parse_date  # shared with the EL
from flowactors.sdk.record_path.conversions import epoch_millis, zone_of
from flowactors.sdk.record_path.functions.base import EachValue, text_argument
from flowactors.sdk.record_path.functions.registry import check_literal, register
from flowactors.sdk.record_path.nodes import Context, Node
from flowactors.sdk.record_path.shapes import STRING, TIMESTAMP
from flowactors.sdk.record_path.values import FieldValue, computed


class _DateCall(EachValue):
    """A date function: ``value, pattern, [zone]``."""

    __slots__ = ()

    def __init__(self, name: str, args: Sequence[Node], position: int) -> None:
        super().__init__(name, args, position)
        if len(args) > 2:
            check_literal(args[2], lambda v: zone_of(text_argument(v)) if text_argument(v) else None)

    def zone(self, ctx: Context) -> tzinfo | None:
        """The time zone argument (None when not given or empty: the machine's)."""
        name = self.text_of(2, ctx)
        if not name:
            return None
        try:
            return zone_of(name)
        except ValueError as exc:
            raise self.error(f"{self.name}: {exc}") from None


class _ToDate(_DateCall):
    """``toDate(text, pattern, [zone])``: the instant the text writes (an aware datetime in UTC),
    read in the zone unless the text has its own; any value that is not text, or text that does
    not match, unchanged."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        pattern = self.text_of(1, ctx)
        if not isinstance(fv.value, str) or not pattern:
            return fv
        zone = self.zone(ctx)
        try:
            millis = parse_date(fv.value, pattern, zone)
        except ValueError:
            return fv
        seconds, remainder = divmod(millis, 1000)
        moment = datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=remainder * 1000)
        return computed(moment, fv, TIMESTAMP)


class _Format(_DateCall):
    """``format(date, pattern, [zone])``: a date, a datetime or a number of milliseconds since the
    epoch written with the pattern in the zone (a date is that day's midnight there; a datetime
    without a zone is UTC, as Arrow's timestamps); any other value unchanged."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        pattern = self.text_of(1, ctx)
        value = fv.value
        if not pattern or len(self.args) > 2 and not self.text_of(2, ctx):
            return fv
        zone = self.zone(ctx)
        if isinstance(value, datetime):
            millis = epoch_millis(value)
        elif isinstance(value, date):
            midnight = datetime.combine(value, time())
            midnight = midnight.replace(tzinfo=zone) if zone is not None else midnight.astimezone()
            millis = int(midnight.timestamp()) * 1000
        elif isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            millis = int(value)
        else:
            return fv
        try:
            return computed(format_date(date_pattern(pattern), millis, zone), fv, STRING)
        except (ValueError, OverflowError, OSError):
            return fv


register("toDate", 2, 3)(lambda args, position: _ToDate("toDate", args, position))
register("format", 2, 3)(lambda args, position: _Format("format", args, position))
