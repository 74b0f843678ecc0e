"""Parsing of NiFi-style durations ("30 sec", "5 mins") and data sizes ("1 GB", "50 KB")."""

from __future__ import annotations

import re

_DURATION_UNITS = {
    "ns": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "ms": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_SIZE_UNITS = {
    "b": 1, "byte": 1, "bytes": 1,
    "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4,
}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration such as ``"30 sec"``; a bare number means seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _NUMBER_UNIT.match(value)
    unit = match.group(2).lower() if match else None
    if match is None or (unit and unit not in _DURATION_UNITS):
        raise ValueError(f"{value!r} is not a duration (examples: '30 sec', '5 mins', '250 ms')")
    return float(match.group(1)) * (_DURATION_UNITS[unit] if unit else 1.0)


def parse_data_size(value: str | int) -> int:
    """Bytes in a data size such as ``"1 GB"`` (binary units, as NiFi); a bare number means bytes."""
    if isinstance(value, int):
        return value
    match = _NUMBER_UNIT.match(value)
    unit = match.group(2).lower() if match else None
    if match is None or (unit and unit not in _SIZE_UNITS):
        raise ValueError(f"{value!r} is not a data size (examples: '1 GB', '50 KB', '0 B')")
    return int(float(match.group(1)) * (_SIZE_UNITS[unit] if unit else 1))
