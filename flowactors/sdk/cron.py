"""Cron expressions of a CRON_DRIVEN processor's schedule, read as NiFi 2 reads them.

NiFi 2 parses a processor's cron schedule with Spring's ``CronExpression`` (its user guide calls
them Quartz expressions, the syntax NiFi 1 used). Six fields, separated by spaces:

    second  minute  hour  day-of-month  month  day-of-week  [year]

* second, minute 0-59; hour 0-23; day-of-month 1-31; month 1-12 or JAN-DEC; day-of-week 0-7 or
  SUN-SAT (0 and 7 are Sunday, 1 is Monday: NiFi 2's numbering; Quartz, in NiFi 1, counted
  1 = Sunday, so write days by name where a flow may come from either); year 1970-2099, optional
  (Quartz's seventh field, which Spring refuses; accepted here so that NiFi 1 schedules load).
* ``*`` every value; ``?`` the same in day-of-month and day-of-week (no specific value);
  ``a-b`` a range; ``a,b`` a list; ``a/n`` and ``a-b/n`` and ``*/n`` every n-th value from a.
* day-of-month: ``L`` the month's last day, ``L-3`` three days before it, ``15W`` the weekday
  nearest the 15th (in the same month), ``LW`` the month's last weekday.
* day-of-week: ``5L`` / ``FRIL`` the month's last Friday, ``5#3`` / ``FRI#3`` its third Friday.
* ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

Day-of-month and day-of-week must both match (as Spring's do; Unix cron takes either). Fire
times are in the machine's local time. ``parse`` raises ``CronError``, one line naming the field
and what is wrong; ``CronSchedule.next_after`` gives the next fire time.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTH_NAMES = {name: i for i, name in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1)}
DAY_NAMES = {name: i for i, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
MACROS = {"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
          "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *"}
#: (name, lowest, highest, names) of each field, in order
FIELDS = (("second", 0, 59, {}), ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day-of-month", 1, 31, {}),
          ("month", 1, 12, MONTH_NAMES), ("day-of-week", 0, 7, DAY_NAMES), ("year", 1970, 2099, {}))
#: years looked through for a fire time when the expression names none (a Gregorian cycle)
SEARCH_YEARS = 400


class CronError(ValueError):
    """A cron expression that does not parse; the message is one line."""


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression (``parse``): the values each field allows."""

    text: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    years: frozenset[int] | None
    #: plain days of the month, and the special ones: ("L", offset), ("W", day), ("LW", 0)
    days: frozenset[int] | None
    special_days: tuple[tuple[str, int], ...]
    #: plain weekdays (0 = Sunday), and ("L", weekday) for the last, ("#", weekday * 10 + n) the n-th
    weekdays: frozenset[int] | None
    special_weekdays: tuple[tuple[str, int], ...]

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after ``moment`` (a naive local time), or None if there is
        none (a day that never comes, e.g. 30 February, or years past)."""
        start = moment.replace(microsecond=0) + timedelta(seconds=1)
        last_year = max(self.years) if self.years else start.year + SEARCH_YEARS
        year, month = start.year, start.month
        while year <= last_year:
            if (self.years is None or year in self.years) and month in self.months:
                first = start.day if (year, month) == (start.year, start.month) else 1
                for day in self._days_of(year, month):
                    if day < first:
                        continue
                    found = self._time_on(date(year, month, day), start)
                    if found is not None:
                        return found
            month += 1
            if month > 12:
                year, month = year + 1, 1
        return None

    def _time_on(self, day: date, start: datetime) -> datetime | None:
        """The first fire time on ``day`` at or after ``start``."""
        for hour in self.hours:
            for minute in self.minutes:
                for second in self.seconds:
                    moment = datetime(day.year, day.month, day.day, hour, minute, second)
                    if moment >= start:
                        return moment
        return None

    def _days_of(self, year: int, month: int) -> list[int]:
        """The days of ``month`` both day fields allow, in order."""
        length = calendar.monthrange(year, month)[1]
        by_month = set(range(1, length + 1)) if self.days is None and not self.special_days else set(
            d for d in self.days or () if d <= length)
        for kind, value in self.special_days:
            if kind == "L" and length - value >= 1:
                by_month.add(length - value)
            elif kind == "W":
                by_month.add(_nearest_weekday(year, month, min(value, length)))
            elif kind == "LW":
                by_month.add(_nearest_weekday(year, month, length))
        if self.weekdays is None and not self.special_weekdays:
            return sorted(by_month)
        allowed = set()
        for day in by_month:
            weekday = (date(year, month, day).weekday() + 1) % 7   # 0 = Sunday
            if weekday in (self.weekdays or ()):
                allowed.add(day)
            for kind, value in self.special_weekdays:
                if kind == "L" and weekday == value and day + 7 > length:
                    allowed.add(day)
                elif kind == "#" and weekday == value // 10 and (day - 1) // 7 + 1 == value % 10:
                    allowed.add(day)
        return sorted(allowed)


def _nearest_weekday(year: int, month: int, day: int) -> int:
    """The weekday (Monday to Friday) nearest ``day``, never leaving the month (Quartz's ``W``)."""
    weekday = date(year, month, day).weekday()   # 0 = Monday
    length = calendar.monthrange(year, month)[1]
    if weekday == 5:   # Saturday: the Friday before, or the Monday after on the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 6:   # Sunday: the Monday after, or the Friday before on the last day
        return day + 1 if day < length else day - 2
    return day


def parse(text: str) -> CronSchedule:
    """The schedule ``text`` describes (see the module docstring); ``CronError`` if it is not one."""
    if not isinstance(text, str):
        raise CronError(f"a cron expression is text, not {type(text).__name__}")
    fields = MACROS.get(text.strip().lower(), text).split()
    if len(fields) not in (6, 7):
        raise CronError(f"'{text}' is not a cron expression: it has {len(fields)} field(s), and takes 6 (second "
                        f"minute hour day-of-month month day-of-week) or 7 (a year after them)")
    try:
        values = [_plain(part, spec) for part, spec in zip(fields[:3], FIELDS[:3])]
        days, special_days = _days_of_month(fields[3])
        months = _plain(fields[4], FIELDS[4])
        weekdays, special_weekdays = _days_of_week(fields[5])
        years = _plain(fields[6], FIELDS[6]) if len(fields) == 7 else None
    except CronError as err:
        raise CronError(f"'{text}' is not a cron expression: {err}") from None
    return CronSchedule(text, *(tuple(sorted(v)) for v in values), frozenset(months),
                        None if years is None or len(years) == 2099 - 1970 + 1 else frozenset(years),
                        days, special_days, weekdays, special_weekdays)


def _plain(field_text: str, spec: tuple) -> set[int]:
    """The values of a field made of ``*``, numbers, names, ranges, lists and steps."""
    name, low, high, names = spec
    found: set[int] = set()
    for part in field_text.split(","):
        found |= _part(part, name, low, high, names)
    return found


def _part(part: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    """One item of a field's list: ``*``, ``?``, ``a``, ``a-b``, each with an optional ``/step``."""
    base, slash, step_text = part.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            raise CronError(f"{name} field '{part}': the step after '/' must be a whole number of at least 1")
        step = int(step_text)
    if base in ("*", "?"):
        if base == "?" and name not in ("day-of-month", "day-of-week"):
            raise CronError(f"{name} field '{part}': '?' is only for day-of-month and day-of-week")
        first, last = low, high
    else:
        first_text, dash, last_text = base.partition("-")
        first = _value(first_text, part, name, low, high, names)
        last = _value(last_text, part, name, low, high, names) if dash else (high if slash else first)
        if last < first:
            raise CronError(f"{name} field '{part}': the range runs backwards (write {last_text}-{first_text}, "
                            f"or a list)")
    return set(range(first, last + 1, step))


def _value(text: str, part: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    word = text.upper()
    if word in names:
        return names[word]
    if not text.isdigit():
        known = f" or a name ({', '.join(names)})" if names else ""
        raise CronError(f"{name} field '{part}': '{text}' is not a number from {low} to {high}{known}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{name} field '{part}': {value} is outside {low}-{high}")
    return value


def _days_of_month(field_text: str) -> tuple[frozenset[int] | None, tuple[tuple[str, int], ...]]:
    """Day-of-month: plain values (None: any day) and the ``L``/``W`` ones."""
    name, low, high, _ = FIELDS[3]
    if field_text in ("*", "?"):
        return None, ()
    plain: set[int] = set()
    special = []
    for part in field_text.split(","):
        upper = part.upper()
        if upper == "LW":
            special.append(("LW", 0))
        elif upper == "L" or upper.startswith("L-"):
            offset = upper[2:] or "0"
            if not offset.isdigit() or int(offset) > 30:
                raise CronError(f"{name} field '{part}': 'L-n' takes n from 0 to 30 (days before the month's last)")
            special.append(("L", int(offset)))
        elif upper.endswith("W"):
            special.append(("W", _value(part[:-1], part, name, low, high, {})))
        else:
            plain |= _part(part, name, low, high, {})
    return frozenset(plain), tuple(special)


def _days_of_week(field_text: str) -> tuple[frozenset[int] | None, tuple[tuple[str, int], ...]]:
    """Day-of-week (7 read as 0, Sunday): plain values (None: any day) and the ``L``/``#`` ones."""
    name, low, high, names = FIELDS[5]
    if field_text in ("*", "?"):
        return None, ()
    plain: set[int] = set()
    special = []
    for part in field_text.split(","):
        upper = part.upper()
        if "#" in upper:
            day_text, _, nth = upper.partition("#")
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                raise CronError(f"{name} field '{part}': the n of 'day#n' is 1 to 5 (the n-th such day of the month)")
            special.append(("#", _value(day_text, part, name, low, high, names) % 7 * 10 + int(nth)))
        elif upper.endswith("L") and len(upper) > 1:
            special.append(("L", _value(upper[:-1], part, name, low, high, names) % 7))
        else:
            plain |= {d % 7 for d in _part(part, name, low, high, names)}
    return frozenset(plain), tuple(special)
