"""How RecordPath reads values as text, numbers, instants, time zones, character sets and regular
expressions, as NiFi's record utilities (``DataTypeUtils``) and Java do.

Values are those of a record as Python holds them: str, bool, int, float, Decimal, bytes,
datetime/date/time, UUID, lists, dicts and None.
"""

from __future__ import annotations

import calendar
import codecs
import functools
import re
import uuid
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any, Callable

from flowactors.sdk.expression.functions.dates import time_zone   # IANA names, UTC/GMT/Z (shared with the EL)
from flowactors.sdk.expression.language import java_double  # NiFi renders decimals as Java does in both
from flowactors.sdk.expression.regex import java_regex

#: Java's long range, which whole-number arithmetic wraps around
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
_INTEGRAL = re.compile(r"[+-]?[0-9]+")
# NiFi's floating-point text: [sign] (Infinity | NaN | digits[.digits][exponent] | .digits[exponent])
_FLOATING = re.compile(r"[+-]?(?:Infinity|NaN|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)")


def java_text(value: Any) -> str | None:
    """``value`` as NiFi's records write it as text: None stays None, numbers as Java writes them,
    booleans ``true``/``false``, bytes decoded as UTF-8, an array ``[a, b]``, a record or a map
    ``{k=v}``, dates in ISO form."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_element_text(element) for element in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={_element_text(item)}" for key, item in value.items()) + "}"
    return str(value)


def _element_text(value: Any) -> str:
    text = java_text(value)
    return "null" if text is None else text


def is_number(value: Any) -> bool:
    """Whether ``value`` is a number (a bool is not, as in Java)."""
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def number_in_text(text: str) -> int | float | None:
    """The number written in ``text`` as NiFi reads one: a whole number in Java's long range, else
    a floating-point number; None when it is neither (no blanks around it)."""
    if _INTEGRAL.fullmatch(text):
        whole = int(text)
        if LONG_MIN <= whole <= LONG_MAX:
            return whole
    if _FLOATING.fullmatch(text):
        return float(text)
    return None


def numeric(value: Any) -> int | float | Decimal | None:
    """``value`` as a number for a comparison or arithmetic: a number, text holding one, a date
    (milliseconds since the epoch); None for anything else."""
    if is_number(value):
        return value
    if isinstance(value, str):
        return number_in_text(value)
    if isinstance(value, (datetime, date)):
        return epoch_millis(value)
    return None


def java_long(whole: int) -> int:
    """``whole`` wrapped into Java's long range, as Java's long arithmetic overflows."""
    return ((whole - LONG_MIN) & 0xFFFFFFFFFFFFFFFF) + LONG_MIN


def epoch_millis(moment: datetime | date) -> int:
    """Milliseconds since the epoch of ``moment``: an aware datetime's instant, a naive one read as
    UTC (Arrow's timestamps without a zone), a date's midnight UTC."""
    if isinstance(moment, datetime):
        return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000
    return calendar.timegm(moment.timetuple()) * 1000


def whole_argument(value: Any) -> int | None:
    """A function's whole-number argument (an index, a length) as NiFi takes one: a number or text
    of a whole number in Java's int range; None otherwise."""
    if isinstance(value, str):
        value = number_in_text(value)
        if not isinstance(value, int):
            return None
    if not is_number(value):
        return None
    whole = int(value)
    return whole if -(1 << 31) <= whole < (1 << 31) else None


# --- time zones ---

#: Java's three-letter time zone IDs (``ZoneId.SHORT_IDS``), which NiFi's functions accept
_SHORT_ZONE_IDS = {
    "ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago", "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris", "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia", "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}
_FIXED_SHORT_ZONES = {"EST": -5, "MST": -7, "HST": -10}
_CUSTOM_ZONE = re.compile(r"(?:GMT|UTC|UT)?([+-])([0-9]{1,2})(?::?([0-9]{2}))?")


@functools.lru_cache(maxsize=128)
def zone_of(name: str) -> tzinfo:
    """The time zone ``name`` names as Java's ``TimeZone.getTimeZone`` reads it: an IANA name
    (``America/Phoenix``), ``UTC``/``GMT``, an offset (``GMT+8:00``, ``+08:00``, ``UTC-0530``) or
    one of Java's three-letter IDs (``PST``). ValueError for any other (where Java would quietly
    use GMT)."""
    custom = _CUSTOM_ZONE.fullmatch(name)
    if custom is not None:
        sign, hours, minutes = custom.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if offset > timedelta(hours=18):
            raise ValueError(f"time zone offset {name!r} is beyond 18 hours")
        return timezone(-offset if sign == "-" else offset)
    if name in _FIXED_SHORT_ZONES:
        return timezone(timedelta(hours=_FIXED_SHORT_ZONES[name]))
    return time_zone(_SHORT_ZONE_IDS.get(name, name))


# --- character sets ---

def _utf16_encode(text: str) -> bytes:
    return codecs.BOM_UTF16_BE + text.encode("utf-16-be")


def _utf16_decode(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF16_LE) or data.startswith(codecs.BOM_UTF16_BE):
        return data.decode("utf-16")
    return data.decode("utf-16-be")


def charset_codec(name: str) -> tuple[Callable[[str], bytes], Callable[[bytes], str]]:
    """How to encode text to bytes and decode bytes to text in the character set ``name`` (Java's
    names: ``UTF-8``, ``UTF-16`` big-endian with a byte-order mark, ``UTF-16LE``, ``ISO-8859-1``,
    ``US-ASCII``...); undecodable bytes become U+FFFD, as in Java. ValueError for an unknown name."""
    try:
        codec = codecs.lookup(name)
    except LookupError:
        raise ValueError(f"unknown character set {name!r}") from None
    if codec.name == "utf-16":
        return _utf16_encode, _utf16_decode
    return (lambda text: text.encode(codec.name, errors="replace"),
            lambda data: data.decode(codec.name, errors="replace"))


# --- regular expressions ---

_JAVA_LINE_ENDS = "[^\n\r\u0085\u2028\u2029]"
_LEADING_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")


@functools.lru_cache(maxsize=512)
def java_pattern(text: str) -> re.Pattern[str]:
    """A Java regular expression, with Java's meaning of ``.`` (any character but a line end: \\n,
    \\r, U+0085, U+2028, U+2029, unless the pattern sets (?s)) and of ``\\w``, ``\\d``, ``\\s``,
    ``\\b`` (ASCII only, unless it sets (?U)), over the expression language's translation
    (``java_regex``: named groups). ValueError naming the pattern index at fault when it is not
    valid."""
    flags, body = "", text
    leading = _LEADING_FLAGS.match(text)
    if leading is not None:
        flags, body = leading.group(1), text[leading.end():]
    translated = body if "s" in flags or re.search(r"\(\?[a-zA-Z]*s[a-zA-Z]*[:)]", body) else _java_dots(body)
    flags = flags.replace("u", "")
    flags = flags.replace("U", "") if "U" in flags else flags + "a"
    try:
        return java_regex(f"(?{flags}){translated}" if flags else translated)
    except ValueError:
        java_regex(text)   # a mistake is reported at its index in the text as written
        raise


#: what ``_java_dots`` steps over or replaces: an escape (a lone backslash at the end included), a
#: character class to its ']' or the end (a ']' first in it literal, after '[' or '[^'), a dot
_DOTS_AND_SKIPPED = re.compile(r"\\.?|\[\^?\]?(?:\\.?|[^\]\\])*\]?|\.", re.S)


def _java_dots(text: str) -> str:
    """``text`` with each ``.`` outside a character class written as Java reads it."""
    return _DOTS_AND_SKIPPED.sub(lambda m: _JAVA_LINE_ENDS if m.group() == "." else m.group(), text)


def describe_type(value: Any) -> str:
    """The kind of ``value`` as messages name it."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a record or map"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    if isinstance(value, (datetime, date, time)):
        return "a date/time"
    if isinstance(value, uuid.UUID):
        return "a UUID"
    return type(value).__name__
