"""The function library of Jolt's Modify (``"=name(args)"``), on JSON values as Python has them.

Jolt's functions work on Java values; this module keeps the distinctions that change results: an
*int* is a JSON integer that fits 32 bits (Java's Integer), a *long* any other integer (Long),
a float is a Double. A function returns ``ABSENT`` when it has no result (Jolt's empty
Optional): Modify then writes nothing. Argument conventions, as Jolt's:

* single-value functions (toUpper, toInteger, abs...) map over a list, keeping the elements they
  cannot convert;
* list functions (concat, firstElement, avg, intSum...) take the arguments, or a single list
  argument, as their list; given one value that is no list they have no result;
* argument-driven functions take a first argument of a given kind (join's separator, split's
  separator, leftPad's source, elementAt's index, divideAndRound's digits), then the rest or a
  list.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Callable

from flowactors.sdk.record_path.conversions import java_pattern, java_text

#: no result (Jolt's empty Optional): nothing is written
ABSENT = object()

_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1
_LONG_MIN, _LONG_MAX = -2 ** 63, 2 ** 63 - 1


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and type(value) is not bool


def is_int(value: Any) -> bool:
    """A Java Integer: an integer that fits 32 bits."""
    return type(value) is int and _INT_MIN <= value <= _INT_MAX


def _wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _integral(value: Any, bits: int) -> int:
    """Java's Number.intValue()/longValue(): floats truncate and saturate, integers wrap."""
    if type(value) is float:
        if value != value:
            return 0
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return high if value >= high else low if value <= low else int(value)
    return _wrap(value, bits)


_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\Z")


def to_number(value: Any) -> Any:
    """Jolt's toNumber: a number as it is; text parsed as an int, a long, else a double."""
    if is_number(value):
        return value
    if isinstance(value, str):
        if _JAVA_INT.match(value):
            number = int(value)
            if _LONG_MIN <= number <= _LONG_MAX:
                return number
        text = value.strip("".join(chr(c) for c in range(33)))
        if _JAVA_DOUBLE.match(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    return ABSENT


def _to_int(value: Any) -> Any:
    number = to_number(value)
    return ABSENT if number is ABSENT else _integral(number, 32)


def _to_long(value: Any) -> Any:
    number = to_number(value)
    return ABSENT if number is ABSENT else _integral(number, 64)


def _to_double(value: Any) -> Any:
    number = to_number(value)
    return ABSENT if number is ABSENT else float(number)


def _to_boolean(value: Any) -> Any:
    if type(value) is bool:
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return ABSENT


def _to_string(value: Any) -> Any:
    return "null" if value is None else java_text(value)


def _java_trim(text: str) -> str:
    return text.strip("".join(chr(c) for c in range(33)))


def _string_only(convert: Callable[[str], str]) -> Callable[[Any], Any]:
    return lambda value: convert(value) if isinstance(value, str) else ABSENT


# ------------------------------------------------------------------------ calling conventions
def single(convert: Callable[[Any], Any]) -> Callable[..., Any]:
    """A function of one value, mapped over a list (elements it cannot convert stay)."""
    def call(*args: Any) -> Any:
        if not args:
            return ABSENT
        if len(args) == 1:
            value = args[0]
            if isinstance(value, list):
                return [_keep(convert(item), item) for item in value] if value else ABSENT
            return ABSENT if value is None else convert(value)
        return [_keep(convert(item), item) for item in args]
    return call


def _keep(result: Any, original: Any) -> Any:
    return original if result is ABSENT else result


def of_list(compute: Callable[[list], Any], one: Callable[[Any], Any] = lambda value: ABSENT) -> Callable[..., Any]:
    """A function of a list: the arguments, or one list argument (``one`` handles one non-list)."""
    def call(*args: Any) -> Any:
        if not args:
            return ABSENT
        if len(args) == 1:
            value = args[0]
            if isinstance(value, list):
                return compute(value) if value else ABSENT
            return ABSENT if value is None else one(value)
        return compute(list(args))
    return call


def arg_driven(accepts: Callable[[Any], bool], on_list: Callable[[Any, list], Any],
               on_one: Callable[[Any, Any], Any] | None = None) -> Callable[..., Any]:
    """A function whose first argument is special (a separator, an index...): with one more
    argument, that value (``on_one``) or that list (``on_list``); with more, the rest as a list."""
    def call(*args: Any) -> Any:
        if len(args) == 1 and isinstance(args[0], list):
            args = tuple(args[0])
        if len(args) < 2 or not accepts(args[0]):
            return ABSENT
        special = args[0]
        if len(args) == 2:
            if isinstance(args[1], list):
                return on_list(special, args[1])
            return on_one(special, args[1]) if on_one else ABSENT
        return on_list(special, list(args[1:]))
    return call


def squash(compute: Callable[[Any], Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if not args:
            return ABSENT
        if len(args) == 1:
            value = args[0]
            if value is None or (isinstance(value, list) and not value):
                return ABSENT
            return compute(value)
        return compute(list(args))
    return call


# --------------------------------------------------------------------------------- strings
def _concat(values: list) -> str:
    return "".join(_to_string(value) for value in values if value is not None)


def _join(separator: str, values: list) -> str:
    out = []
    for i, value in enumerate(values):
        if value is None:
            continue
        text = _to_string(value)
        if text:
            out.append(text)
            if i < len(values) - 1:
                out.append(separator)
    return "".join(out)


def _split(separator: str, source: Any) -> Any:
    if not isinstance(source, str):
        return ABSENT
    parts = java_pattern(separator).split(source) if source else [""]
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _split_each(separator: str, sources: list) -> list:
    return [_keep(_split(separator, source), source) for source in sources]


def _substring(values: list) -> Any:
    if len(values) != 3 or not (isinstance(values[0], str) and is_int(values[1]) and is_int(values[2])):
        return ABSENT
    text, start, end = values
    if start >= end or start < 0 or end < 1 or end > len(text):
        return ABSENT
    return text[start:end]


def _pad(left: bool) -> Callable[[str, list], Any]:
    def pad(source: str, args: list) -> Any:
        if len(args) < 2 or not (is_int(args[0]) and isinstance(args[1], str)):
            return ABSENT
        width, filler = args[0], args[1]
        if not 0 < width <= 500 or len(filler) != 1:
            return ABSENT
        if width <= len(source):
            return source
        padding = filler * (width - len(source))
        return padding + source if left else source + padding
    return pad


# ------------------------------------------------------------------------------------ math
def _kind(value: Any) -> str | None:
    """int, long or double: the Java class of a number (text parsed as Jolt parses it)."""
    if isinstance(value, str):
        value = to_number(value)
    if type(value) is float:
        return "double"
    if type(value) is int:
        return "int" if is_int(value) else "long"
    return None


def _extreme(values: list, pick: Callable, start: dict) -> Any:
    best = dict(start)
    found = False
    for value in values:
        kind = _kind(value)
        if kind is not None:
            number = to_number(value)
            best[kind] = pick(best[kind], number)
            found = True
    if not found:
        return ABSENT
    as_long = {kind: _integral(number, 64) for kind, number in best.items()}
    if pick is max:
        if as_long["int"] >= as_long["double"] and as_long["int"] >= as_long["long"]:
            return best["int"]
        return best["long"] if as_long["long"] >= as_long["double"] else best["double"]
    if as_long["int"] <= as_long["double"] and as_long["int"] <= as_long["long"]:
        return best["int"]
    return best["long"] if as_long["long"] <= as_long["double"] else best["double"]


def _max(values: list) -> Any:
    return _extreme(values, max, {"int": _INT_MIN, "double": -1.7976931348623157e308, "long": _LONG_MIN})


def _min(values: list) -> Any:
    return _extreme(values, min, {"int": _INT_MAX, "double": 1.7976931348623157e308, "long": _LONG_MAX})


def _number_itself(value: Any) -> Any:
    return value if is_number(value) else ABSENT


def _abs(value: Any) -> Any:
    number = to_number(value) if isinstance(value, str) else value
    return abs(number) if is_number(number) else ABSENT


def _avg(values: list) -> Any:
    numbers = [float(n) for n in map(to_number, values) if n is not ABSENT]
    return sum(numbers) / len(numbers) if numbers else ABSENT


def _sum(convert: Callable[[Any], Any], bits: int | None) -> Callable[[list], Any]:
    def total(values: list) -> Any:
        result = 0.0 if bits is None else 0
        for value in values:
            number = convert(value)
            if number is not ABSENT:
                result = result + number if bits is None else _wrap(result + number, bits)
        return result
    return total


def _subtract(accepts: Callable[[Any], bool], bits: int | None) -> Callable[[list], Any]:
    def subtract(values: list) -> Any:
        if len(values) != 2 or not (accepts(values[0]) and accepts(values[1])):
            return ABSENT
        difference = values[0] - values[1]
        return difference if bits is None else _wrap(difference, bits)
    return subtract


def _divide(values: list) -> Any:
    if len(values) != 2:
        return ABSENT
    numerator, denominator = to_number(values[0]), to_number(values[1])
    if numerator is ABSENT or denominator is ABSENT or float(denominator) == 0:
        return ABSENT
    return float(numerator) / float(denominator)


def _divide_and_round(digits: int, values: list) -> Any:
    quotient = _divide(values)
    if quotient is ABSENT or math.isinf(quotient) or math.isnan(quotient):
        return ABSENT
    return float(Decimal(quotient).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


# ------------------------------------------------------------------------- lists and objects
def _size(*args: Any) -> Any:
    if not args:
        return ABSENT
    if len(args) > 1:
        return len(args)
    value = args[0]
    return len(value) if isinstance(value, (list, str, dict)) else ABSENT


def _squash_nulls(value: Any) -> Any:
    if isinstance(value, list):
        value[:] = [item for item in value if item is not None]
    elif isinstance(value, dict):
        for key in [key for key, item in value.items() if item is None]:
            del value[key]
    return value


def _squash_nulls_deep(value: Any) -> Any:
    _squash_nulls(value)
    for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _squash_nulls_deep(item)
    return value


def _squash_duplicates(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    distinct: list = []
    for item in value:
        if not any(item == seen and type(item) is type(seen) for seen in distinct):
            distinct.append(item)
    return distinct


def _element_at(index: int, values: list) -> Any:
    return values[index] if 0 <= index < len(values) else ABSENT


def _index_of(values: list) -> Any:
    """flowactors' indexOf(source, item): the first position of item in a list or a text, -1 if none."""
    if len(values) != 2:
        return ABSENT
    source, item = values
    if isinstance(source, str) and isinstance(item, str):
        return source.find(item)
    if isinstance(source, list):
        for position, element in enumerate(source):
            if element == item and type(element) is type(item):
                return position
        return -1
    return ABSENT


def _sort(values: list) -> Any:
    kinds = {_kind(value) if is_number(value) else type(value).__name__ for value in values}
    if len(kinds) != 1 or not kinds <= {"int", "long", "double", "str", "bool"}:
        return ABSENT   # Java cannot compare mixed or unordered values
    return sorted(values)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toLower": single(_string_only(str.lower)),
    "toUpper": single(_string_only(str.upper)),
    "trim": single(_string_only(_java_trim)),
    "concat": of_list(_concat),
    "join": arg_driven(lambda s: isinstance(s, str), _join),
    "split": arg_driven(lambda s: isinstance(s, str), _split_each, _split),
    "substring": of_list(_substring),
    "leftPad": arg_driven(lambda s: isinstance(s, str), _pad(True)),
    "rightPad": arg_driven(lambda s: isinstance(s, str), _pad(False)),
    "min": of_list(_min, _number_itself),
    "max": of_list(_max, _number_itself),
    "abs": single(_abs),
    "avg": of_list(_avg),
    "intSum": of_list(_sum(_to_int, 32)),
    "longSum": of_list(_sum(_to_long, 64)),
    "doubleSum": of_list(_sum(_to_double, None)),
    "intSubtract": of_list(_subtract(is_int, 32)),
    "longSubtract": of_list(_subtract(lambda v: type(v) is int and not is_int(v), 64)),
    "doubleSubtract": of_list(_subtract(lambda v: type(v) is float, None)),
    "divide": of_list(_divide),
    "divideAndRound": arg_driven(is_int, _divide_and_round),
    "toInteger": single(_to_int),
    "toLong": single(_to_long),
    "toDouble": single(_to_double),
    "toBoolean": single(_to_boolean),
    "toString": single(_to_string),
    "size": _size,
    "squashNulls": squash(_squash_nulls),
    "recursivelySquashNulls": squash(_squash_nulls_deep),
    "squashDuplicates": squash(_squash_duplicates),
    "noop": lambda *args: ABSENT,
    "isPresent": lambda *args: args[0] if args else ABSENT,
    "notNull": lambda *args: args[0] if args and args[0] is not None else ABSENT,
    "isNull": lambda *args: args[0] if args and args[0] is None else ABSENT,
    "firstElement": of_list(lambda values: values[0]),
    "lastElement": of_list(lambda values: values[-1]),
    "elementAt": arg_driven(is_int, _element_at),
    "indexOf": of_list(_index_of),
    "toList": of_list(lambda values: values, lambda value: [value]),
    "sort": of_list(_sort, lambda value: value),
}
