"""NiFi's ``sql.args.N.type`` / ``sql.args.N.value`` / ``sql.args.N.format`` parameters read as
the Python values a driver binds: the one reading of them ExecuteSQL, ExecuteSQLRecord and PutSQL
share, as NiFi's ExecuteSQL and PutSQL share JdbcCommon's ``setParameter``.

**The contract.** ``sql.args.N.type`` is a JDBC type number (java.sql.Types; a text that is not a
whole number is an error); ``sql.args.N.value`` the value as text (absent: NULL);
``sql.args.N.format`` how a date, time, timestamp or binary value is written. By type:

- BIT: true for ``1``, ``t`` or ``true`` (any case); BOOLEAN: true for ``true`` (any case); else
  false.
- TINYINT, SMALLINT, INTEGER, BIGINT: ``int``; REAL, FLOAT, DOUBLE: ``float``; DECIMAL,
  NUMERIC: ``Decimal`` (as written, its scale kept).
- DATE, TIME, TIMESTAMP without a format: a whole number of 1 to 19 digits is milliseconds since
  the epoch, read in the machine's time zone (as java.sql's Date, Time and Timestamp of a long
  are); any other text is ISO (``2024-01-31``, ``03:04:05.678``, ``2024-01-31 03:04:05.678``; the
  ``T`` separator, fewer fraction digits and an offset are taken too). With a format: one of
  java.time's formatter names (``ISO_LOCAL_DATE``, ``ISO_OFFSET_DATE_TIME``, ``BASIC_ISO_DATE``...)
  or a DateTimeFormatter pattern (``dd/MM/yyyy HH:mm``), read as the wall-clock time it writes.
  DATE gives a ``date``, TIME a ``time``, TIMESTAMP a ``datetime`` (with its offset when the text
  gives one).
- BINARY, VARBINARY, LONGVARBINARY: ``bytes`` of the format ``ascii`` (also when unset), ``hex``
  or ``base64``; another format is an error.
- Any other type (CHAR, VARCHAR, OTHER, ...): the text itself.

A parameter that cannot be read raises ``ParameterError`` (a ``StatementError``: the FlowFile's
problem) naming the attribute, its value and what it should be.
"""

from __future__ import annotations

import base64
import re
from datetime import date, datetime, time, timezone
from decimal import Decimal
from typing import Any, Mapping

from flowactors.processors.sql import table_schema as ts
from flowactors.processors.sql.table_schema import StatementError
from flowactors.sdk.expression.functions.dates import parse_date

_TYPE_ATTRIBUTE = re.compile(r"sql\.args\.(\d+)\.type")
_NUMBER = re.compile(r"-?\d+")
#: JdbcCommon's LONG_PATTERN: what is read as milliseconds since the epoch
_EPOCH_MILLIS = re.compile(r"-?\d{1,19}")
#: java.time's formatter names that read as ISO text
_ISO = {"ISO_LOCAL_DATE", "ISO_DATE", "ISO_LOCAL_TIME", "ISO_TIME", "ISO_LOCAL_DATE_TIME", "ISO_DATE_TIME",
        "ISO_OFFSET_DATE_TIME", "ISO_OFFSET_DATE", "ISO_OFFSET_TIME", "ISO_ZONED_DATE_TIME", "ISO_INSTANT"}


class ParameterError(StatementError):
    """A ``sql.args.N.*`` attribute that cannot be a parameter: the message names it."""


def parameter_types(values: Mapping[str, str]) -> dict[int, str]:
    """The ``sql.args.N.type`` texts of ``values`` (attributes, dynamic properties), by N."""
    return {int(m.group(1)): text for key, text in values.items() if (m := _TYPE_ATTRIBUTE.fullmatch(key))}


def statement_parameters(values: Mapping[str, str]) -> list[Any] | None:
    """The parameters ``values`` give, in the order of N (see the module docstring); None when
    there is none. ``ParameterError`` when one cannot be read or a number in 1..N is missing."""
    types = parameter_types(values)
    if not types:
        return None
    missing = sorted(set(range(1, max(types) + 1)) - set(types))
    if missing:
        raise ParameterError(f"sql.args.{missing[0]}.type is missing: the parameters are numbered from 1 with none "
                             f"left out")
    return [jdbc_value(index, types[index], values.get(f"sql.args.{index}.value"),
                       values.get(f"sql.args.{index}.format") or "") for index in sorted(types)]


def jdbc_value(index: int, kind: str, value: str | None, fmt: str) -> Any:
    """Parameter ``index``'s Python value: ``value`` read as the JDBC type ``kind`` in the format
    ``fmt`` says (see the module docstring); ``ParameterError`` naming the attribute when it cannot be."""
    if not _NUMBER.fullmatch(kind.strip()):
        raise ParameterError(f"sql.args.{index}.type is {kind!r}, which is not a JDBC type number")
    if value is None:
        return None
    jdbc = int(kind)
    try:
        return _convert(jdbc, value, fmt)
    except (ValueError, ArithmeticError, OSError) as err:   # binascii.Error is a ValueError
        raise ParameterError(f"sql.args.{index}.value is {value[:60]!r}, which is not a value of JDBC type {jdbc}"
                             f"{f' in the format {fmt!r}' if fmt else ''}: {err}") from None


def _convert(jdbc: int, value: str, fmt: str) -> Any:
    if jdbc == ts.BIT:
        return value == "1" or value.lower() in ("t", "true")
    if jdbc == ts.BOOLEAN:
        return value.lower() == "true"
    if jdbc in (ts.TINYINT, ts.SMALLINT, ts.INTEGER, ts.BIGINT):
        return int(value)
    if jdbc in (ts.REAL, ts.FLOAT, ts.DOUBLE):
        return float(value)
    if jdbc in (ts.DECIMAL, ts.NUMERIC):
        return Decimal(value)
    if jdbc in (ts.DATE, ts.TIME, ts.TIMESTAMP):
        return _temporal(jdbc, value, fmt)
    if jdbc in (ts.BINARY, ts.VARBINARY, ts.LONGVARBINARY):
        if fmt in ("", "ascii"):
            return value.encode("ascii")
        if fmt == "hex":
            return bytes.fromhex(value)
        if fmt == "base64":
            return base64.b64decode(value, validate=True)
        raise ValueError(f"'{fmt}' is not a binary format (ascii, hex, base64)")
    return value


def _temporal(jdbc: int, value: str, fmt: str) -> date | time | datetime:
    """A DATE, TIME or TIMESTAMP parameter: epoch milliseconds, ISO text, or ``fmt``."""
    if not fmt and _EPOCH_MILLIS.fullmatch(value):
        moment = datetime.fromtimestamp(int(value) / 1000)   # the machine's zone, as java.sql's types
    elif fmt == "BASIC_ISO_DATE":
        moment = datetime.strptime(value.strip(), "%Y%m%d")
    elif not fmt or fmt in _ISO:
        text = value.strip().replace("Z", "+00:00")
        if jdbc == ts.TIME:
            return time.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    else:   # the wall-clock time the pattern writes
        moment = datetime.fromtimestamp(parse_date(value, fmt, timezone.utc) / 1000, timezone.utc).replace(tzinfo=None)
    if jdbc == ts.DATE:
        return moment.date()
    if jdbc == ts.TIME:
        return moment.time()
    return moment


def for_dialect(values: list[Any], dialect: str) -> list[Any]:
    """``values`` as the driver of ``dialect`` takes them: SQLite's, which takes no dates, times or
    decimals, gets them as their ISO text; any other driver the values unchanged."""
    if dialect != "sqlite":
        return values
    return [_for_sqlite(value) for value in values]


def _for_sqlite(value: Any) -> Any:
    if isinstance(value, (date, time)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    return str(value) if isinstance(value, Decimal) else value
