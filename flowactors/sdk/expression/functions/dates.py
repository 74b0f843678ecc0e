"""Date manipulation (NiFi guide: Date Manipulation): dates written and read with Java's
``SimpleDateFormat`` letters (``format``, ``toDate``) and ``DateTimeFormatter``'s common ones
(``formatInstant``, ``toInstant``: ``u`` is the year there too).

A date is ``Date``: milliseconds since the epoch, and for an instant the nanoseconds within the
millisecond it was read or moved with (NiFi's instants count nanoseconds). Only the
letters listed in ``_DATE_LETTERS`` are known, so a typo in a pattern is an error rather than
silent output; names of months and days are English.
"""

from __future__ import annotations

import email.utils
import functools
import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flowactors.sdk.expression.cache import text_cache
from flowactors.sdk.expression.language import (
    OMITTED, Value, Call, Date, register_function, literal_check, to_millis, parse_number, render)

_DATE_LETTERS = "yuMdDHhmsSaEzZX"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_DateToken = str | tuple[str, int]  # literal text, or (pattern letter, repeat count)


@text_cache(256)
def date_pattern(pattern: str) -> tuple[_DateToken, ...]:
    """Split a SimpleDateFormat pattern into literal text and (letter, count) fields."""
    tokens: list[_DateToken] = []
    literal: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if pattern.startswith("''", i):
                literal.append("'")
                i += 2
                continue
            i += 1
            while True:  # quoted text, where '' is one quote
                end = pattern.find("'", i)
                if end < 0:
                    raise ValueError(f"unclosed quote in date pattern {pattern!r}")
                literal.append(pattern[i:end])
                if pattern.startswith("''", end):
                    literal.append("'")
                    i = end + 2
                    continue
                i = end + 1
                break
        elif "a" <= c <= "z" or "A" <= c <= "Z":
            if c not in _DATE_LETTERS:
                raise ValueError(f"unsupported letter {c!r} in date pattern {pattern!r} (supported: "
                                 f"{' '.join(_DATE_LETTERS)}; quote literal text, as in 'T')")
            end = i
            while end < n and pattern[end] == c:
                end += 1
            if c == "X" and end - i > 3:
                raise ValueError(f"at most 3 X in date pattern {pattern!r}")
            if literal:
                tokens.append("".join(literal))
                literal = []
            tokens.append((c, end - i))
            i = end
        else:
            literal.append(c)
            i += 1
    if literal:
        tokens.append("".join(literal))
    return tuple(tokens)


@functools.lru_cache(maxsize=64)
def time_zone(name: str) -> tzinfo:
    if name in ("UTC", "GMT", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _offset(moment: datetime, count: int, iso: bool) -> str:
    offset = moment.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    if iso and minutes == 0:
        return "Z"
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    if not iso:
        return f"{sign}{hours:02d}{minutes:02d}"
    return (f"{sign}{hours:02d}", f"{sign}{hours:02d}{minutes:02d}", f"{sign}{hours:02d}:{minutes:02d}")[count - 1]


def format_date(tokens: tuple[_DateToken, ...], millis: int, zone: tzinfo | None, nanos: int | None = None) -> str:
    """``millis`` written with a pattern's tokens, in ``zone`` (None: the machine's). ``S`` is the
    number of milliseconds (SimpleDateFormat's), or, given the ``nanos`` within the millisecond
    (``formatInstant``, DateTimeFormatter's), the fraction of the second to as many digits."""
    seconds, ms = divmod(millis, 1000)
    moment = datetime.fromtimestamp(seconds, timezone.utc).astimezone(zone)
    out: list[str] = []
    for token in tokens:
        if isinstance(token, str):
            out.append(token)
            continue
        letter, count = token
        if letter in "yu":
            out.append(f"{moment.year % 100:02d}" if count == 2 else str(moment.year).zfill(count))
        elif letter == "M":
            name = _MONTHS[moment.month - 1]
            out.append(str(moment.month).zfill(count) if count < 3 else name[:3] if count == 3 else name)
        elif letter == "E":
            name = _WEEKDAYS[moment.weekday()]
            out.append(name[:3] if count < 4 else name)
        elif letter == "a":
            out.append("AM" if moment.hour < 12 else "PM")
        elif letter == "z":
            out.append(moment.tzname() or "UTC")
        elif letter in "ZX":
            out.append(_offset(moment, count, iso=letter == "X"))
        elif letter == "S" and nanos is not None:
            out.append(f"{ms:03d}{nanos:06d}"[:count].ljust(count, "0"))
        else:
            number = {"d": moment.day, "D": moment.timetuple().tm_yday, "H": moment.hour, "h": moment.hour % 12 or 12,
                      "m": moment.minute, "s": moment.second, "S": ms}[letter]
            out.append(str(number).zfill(count))
    return "".join(out)


# --- reading dates ---

def _two_digit_year(value: int) -> int:
    """``yy``: the century that puts the year within 80 years before and 20 after now (Java's rule)."""
    now = datetime.now(timezone.utc).year
    year = now - now % 100 + value
    return year - 100 if year > now + 20 else year


@text_cache(256, size=lambda tokens: sum(len(t) if isinstance(t, str) else 1 for t in tokens))
def _date_reader(tokens: tuple[_DateToken, ...]) -> tuple[re.Pattern[str], tuple[tuple[str, int], ...]]:
    """A regular expression for text written with ``tokens``, and the field of each group."""
    parts, fields = [], []
    for index, token in enumerate(tokens):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        letter, count = token
        adjacent = index + 1 < len(tokens) and not isinstance(tokens[index + 1], str)
        digits = rf"(\d{{{count}}})" if adjacent or (letter in "yu" and count == 2) else r"(\d+)"
        if letter == "M" and count >= 3:
            digits = "(" + "|".join(m[:3] + ("[a-z]*" if count > 3 else "") for m in _MONTHS) + ")"
        elif letter == "E":
            digits = "(" + "|".join(d[:3] + "[a-z]*" for d in _WEEKDAYS) + ")"
        elif letter == "a":
            digits = "(AM|PM)"
        elif letter == "z":
            digits = r"([A-Za-z][A-Za-z0-9_/+-]*)"
        elif letter in "ZX":
            digits = r"(Z|[+-]\d{2}(?::?\d{2})?)"
        parts.append(digits)
        fields.append(token)
    return re.compile("".join(parts), re.IGNORECASE), tuple(fields)


def _read_offset(text: str) -> tzinfo:
    if text.upper() == "Z":
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0)))


def parse_date(text: str, pattern: str, zone: tzinfo | None, *, validating: bool = False) -> int:
    """Milliseconds since the epoch of ``text`` written with ``pattern``: ``read_date``'s."""
    return read_date(text, pattern, zone, validating=validating).millis


def read_date(text: str, pattern: str, zone: tzinfo | None, *, validating: bool = False) -> Date:
    """The moment of ``text`` written with ``pattern`` (in ``zone`` unless the
    text says its own offset or zone; else the machine's). ValueError when it is not such a date,
    including one the calendar lacks (``31-02-2026``). ``validating`` (isValidDate, as NiFi's): a
    pattern without a year reads a leap year (``29-02`` is a date), and a time a change to daylight
    saving time skips in ``zone`` is not one."""
    regex, fields = _date_reader(date_pattern(pattern))
    match = regex.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} does not match the date pattern {pattern!r}")
    parts = {"y": 2000 if validating else 1970, "M": 1, "d": 1, "H": 0, "m": 0, "s": 0, "S": 0}
    hour12, pm, nanos = None, None, 0
    for (letter, count), value in zip(fields, match.groups()):
        if letter in "yu":
            parts["y"] = _two_digit_year(int(value)) if count == 2 else int(value)
        elif letter == "M":
            parts["M"] = int(value) if count < 3 else 1 + [m[:3].lower() for m in _MONTHS].index(value[:3].lower())
        elif letter == "h":
            hour12 = int(value)
        elif letter == "a":
            pm = value.upper() == "PM"
        elif letter == "z":
            zone = time_zone(value)
        elif letter in "ZX":
            zone = _read_offset(value)
        elif letter == "S":   # more than 3 digits: a fraction of the second, to the nanosecond
            parts["S"] = int(value[:3].ljust(3, "0")) if count > 3 else int(value)
            nanos = int(value[3:9].ljust(6, "0")) if count > 3 else 0
        elif letter != "E":
            parts[letter] = int(value)
    if hour12 is not None:
        parts["H"] = hour12 % 12 + (12 if pm else 0)
    elif pm:
        parts["H"] = parts["H"] % 12 + 12
    try:
        moment = datetime(parts["y"], parts["M"], parts["d"], parts["H"], parts["m"], parts["s"])
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid date: {exc}") from None
    if "D" in parts:   # the day of the year
        moment = moment.replace(month=1, day=1) + timedelta(days=parts["D"] - 1)
    if validating and isinstance(zone, ZoneInfo) and moment.replace(tzinfo=zone).astimezone(
            timezone.utc).astimezone(zone).replace(tzinfo=None) != moment:
        raise ValueError(f"{text!r} is a time the change to daylight saving time skips in {zone}")
    moment = moment.replace(tzinfo=zone) if zone is not None else moment.astimezone()
    return Date(int(moment.timestamp()) * 1000 + parts["S"], nanos)


def _parse_instant(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 instant (with ``Z`` or an offset) or an
    RFC-1123 date-time (``Tue, 04 Aug 2026 10:15:30 GMT``); ValueError otherwise."""
    text = text.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{text!r} is not a date: neither a number of milliseconds, an ISO-8601 instant "
                             f"nor an RFC-1123 date-time") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no offset or zone, so it is not an instant")
    return int(moment.timestamp() * 1000)


#: a literal pattern (argument 0) and time zone (argument 1) are checked when compiled
_check_format = literal_check(date_pattern, time_zone)


#: text NiFi reads as a date without a pattern: Java's ``Date.toString`` (``Tue Nov 14 22:13:20 UTC
#: 2023``) and ``yyyy/MM/dd HH:mm:ss[.SSS]`` (local time), with the patterns that read them
_IMPLICIT_DATES = ((re.compile(r"(?:[a-zA-Z]{3} ){2}\d{2} \d{2}:\d{2}:\d{2} .*? \d{4}"), "EEE MMM dd HH:mm:ss z yyyy"),
                   (re.compile(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}"), "yyyy/MM/dd HH:mm:ss"),
                   (re.compile(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}"), "yyyy/MM/dd HH:mm:ss.SSS"))


def _moment(call: Call, subject: Value) -> Date:
    """A date or instant subject: a date, a number of milliseconds, or text NiFi reads as a date
    (``_IMPLICIT_DATES``) or as an instant (ISO-8601, RFC-1123)."""
    if isinstance(subject, Date):
        return subject
    if isinstance(subject, str) and parse_number(subject) is None:
        text = subject.strip()
        for form, pattern in _IMPLICIT_DATES:
            if form.fullmatch(text):
                return read_date(text, pattern, None)
        return Date(_parse_instant(text))
    return Date(to_millis(call, subject))


def _write(call: Call, subject: Value, pattern: Value, zone: Value, instant: bool) -> Value:
    if subject is None:
        return None
    moment = _moment(call, subject)
    tokens = date_pattern(render(pattern))
    where = None if zone is OMITTED else time_zone(render(zone))
    try:
        return format_date(tokens, moment.millis, where, moment.nanos if instant else None)
    except (OverflowError, OSError, ValueError):
        call.fail(f"{moment.millis} is outside the supported range of dates")


def _read(call: Call, subject: Value, pattern: Value, zone: Value) -> Value:
    if subject is None:
        return None
    if pattern is OMITTED or isinstance(subject, (int, float, Date)):   # a number is milliseconds, as NiFi
        return _moment(call, subject)
    return read_date(render(subject), render(pattern), None if zone is OMITTED else time_zone(render(zone)))


@register_function("format", (1, 2), check=_check_format)
def _format(call: Call, subject: Value, pattern: Value, zone: Value = OMITTED) -> Value:
    """The date (or whole number of milliseconds) written with the pattern, in ``zone`` or local time."""
    return _write(call, subject, pattern, zone, instant=False)


@register_function("formatInstant", (1, 2), check=_check_format)
def _format_instant(call: Call, subject: Value, pattern: Value, zone: Value = "UTC") -> Value:
    """An instant (a date, milliseconds, or ISO-8601 / RFC-1123 text) written with the pattern, in UTC
    unless ``zone`` says otherwise; ``S`` is the fraction of the second, to the nanosecond."""
    return _write(call, subject, pattern, zone, instant=True)


@register_function("toDate", (0, 2), check=_check_format)
def _to_date(call: Call, subject: Value, pattern: Value = OMITTED, zone: Value = OMITTED) -> Value:
    """Text read with the pattern (in ``zone`` or local time) as a date; without a pattern, the
    subject is a number of milliseconds."""
    return _read(call, subject, pattern, zone)


@register_function("toInstant", (0, 2), check=_check_format)
def _to_instant(call: Call, subject: Value, pattern: Value = OMITTED, zone: Value = OMITTED) -> Value:
    """Text read with the pattern in ``zone`` as an instant; without arguments, milliseconds or an
    ISO-8601 / RFC-1123 instant."""
    if pattern is not OMITTED and zone is OMITTED:
        call.fail("toInstant takes a pattern and a time zone, or neither")
    return _read(call, subject, pattern, zone)


@register_function("isValidDate", (1, 2), check=_check_format)
def _is_valid_date(call: Call, subject: Value, pattern: Value, zone: Value = OMITTED) -> Value:
    """Whether ``toDate(pattern, zone)`` would read the subject (a real calendar date)."""
    if subject is None:
        return False
    try:
        parse_date(render(subject), render(pattern), None if zone is OMITTED else time_zone(render(zone)),
                   validating=True)
    except ValueError:
        return False
    return True


@register_function("isValidInstant")
def _is_valid_instant(call: Call, subject: Value) -> Value:
    """Whether the subject is an ISO-8601 instant or an RFC-1123 date-time."""
    if subject is None:
        return False
    try:
        _parse_instant(render(subject))
    except ValueError:
        return False
    return True


@register_function("toMicros")
def _to_micros(call: Call, subject: Value) -> Value:
    """Microseconds since the epoch of a date or instant."""
    if subject is None:
        return None
    moment = _moment(call, subject)
    return moment.millis * 1000 + moment.nanos // 1000


@register_function("toNanos")
def _to_nanos(call: Call, subject: Value) -> Value:
    if subject is None:
        return None
    moment = _moment(call, subject)
    return moment.millis * 1_000_000 + moment.nanos


# --- adding and subtracting durations: "<number> <unit>" ---

_UNITS = {"nanosecond": "ns", "second": "s", "minute": "min", "hour": "h", "day": "d", "week": "w", "month": "mo",
          "year": "y"}
_AMOUNT = re.compile(r"\s*([+-]?\d+)\s+([A-Za-z]+?)[sS]?\s*")


def _amount(text: str) -> tuple[int, str]:
    match = _AMOUNT.fullmatch(text)
    if match is None or match.group(2).lower() not in _UNITS:
        raise ValueError(f"a duration is '<number> <unit>' with a unit of {', '.join(_UNITS)}, not {text!r}")
    return int(match.group(1)), _UNITS[match.group(2).lower()]


def _add_months(moment: datetime, months: int) -> datetime:
    """Calendar months added, the day clamped to the month's last (Jan 31 + 1 month: Feb 28/29)."""
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    days = (datetime(year + (month == 11), (month + 1) % 12 + 1, 1) - datetime(year, month + 1, 1)).days
    return moment.replace(year=year, month=month + 1, day=min(moment.day, days))


def _shift(moment: Date, amount: str, zone: tzinfo | None, sign: int) -> Date:
    """``moment`` moved by the duration: nanoseconds to hours as elapsed time, days to years on the
    wall clock of ``zone`` (the machine's when None), so a day across a DST change stays a day."""
    number, unit = _amount(amount)
    number *= sign
    if unit == "ns":
        return Date(*divmod(moment.millis * 1_000_000 + moment.nanos + number, 1_000_000))
    exact = {"s": number * 1000, "min": number * 60_000, "h": number * 3_600_000}
    if unit in exact:
        return Date(moment.millis + exact[unit], moment.nanos)
    seconds, rest = divmod(moment.millis, 1000)
    if zone is None:
        wall = datetime.fromtimestamp(seconds)                 # naive local time; timestamp() reads it back
    else:
        wall = datetime.fromtimestamp(seconds, timezone.utc).astimezone(zone).replace(tzinfo=None)
    if unit in ("d", "w"):
        wall += timedelta(days=number * (7 if unit == "w" else 1))
    else:
        wall = _add_months(wall, number * (12 if unit == "y" else 1))
    moved = wall if zone is None else wall.replace(tzinfo=zone)
    return Date(int(moved.timestamp()) * 1000 + rest, moment.nanos)


def _duration_function(name: str, sign: int, instant: bool) -> None:
    def impl(call: Call, subject: Value, amount: Value, zone: Value = OMITTED) -> Value:
        if subject is None:
            return None
        where = timezone.utc if instant else (None if zone is OMITTED else time_zone(render(zone)))
        return _shift(_moment(call, subject), render(amount), where, sign)

    register_function(name, (1, 1) if instant else (1, 2), check=literal_check(_amount, time_zone))(impl)


_duration_function("plusDuration", 1, instant=False)
_duration_function("minusDuration", -1, instant=False)
_duration_function("plusInstantDuration", 1, instant=True)
_duration_function("minusInstantDuration", -1, instant=True)
