"""Regular expressions and replacement strings written in Java's syntax, read with Python's ``re``.

NiFi's functions take Java patterns; Python's agree for the common constructs. What people use
and Python spells differently (named groups, back references by name, ``$1`` in replacements) is
translated; a construct Python lacks is refused with the pattern index at fault.
"""

from __future__ import annotations

import functools
import re

from flowactors.sdk.expression.language import DYNAMIC, Value, ArgumentError, render


def _python_regex(pattern: str) -> str:
    """Accept Java's named groups ``(?<name>...)`` and ``\\k<name>`` as well as Python's, and a
    quantified word boundary (``\\b??``)."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\k<", i) and (end := pattern.find(">", i)) > 0:
                out.append(f"(?P={pattern[i + 3:end]})")
                i = end + 1
            elif pattern[i + 1 : i + 2] in ("b", "B") and pattern[i + 2 : i + 3] in ("?", "*", "+", "{"):
                out.append(f"(?:{pattern[i : i + 2]})")   # Java quantifies a boundary (\b??), Python a group
                i += 2
            else:
                out.append(pattern[i : i + 2])
                i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def java_regex(pattern: str) -> re.Pattern[str]:
    """A Java pattern compiled with Python's ``re`` (cached); ValueError naming the pattern index
    at fault when it is not valid."""
    try:
        return re.compile(_python_regex(pattern))
    except re.error as exc:
        where = f" (pattern index {exc.pos})" if exc.pos is not None else ""
        raise ValueError(f"invalid regular expression {pattern!r}: {exc.msg}{where}") from None


@functools.lru_cache(maxsize=512)
def java_replacement(pattern: re.Pattern[str], replacement: str) -> tuple[str | int, ...]:
    """Parse a Java replacement string: ``$1``, ``${name}`` are groups, ``\\x`` is a literal x."""
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 == n:
                raise ValueError("the replacement ends with a lone '\\'")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        i += 1
        if i < n and replacement[i] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 1 : end] if end > 0 else ""
            if end < 0 or name not in pattern.groupindex:
                raise ValueError(f"no group named {name!r} in the regular expression")
            group = pattern.groupindex[name]
            i = end + 1
        elif i < n and "0" <= replacement[i] <= "9":
            group = int(replacement[i])
            if group > pattern.groups:
                raise ValueError(f"no group {group} in the regular expression")
            i += 1
            # As Java: further digits belong to the reference while it still names a group.
            while i < n and "0" <= replacement[i] <= "9" and group * 10 + int(replacement[i]) <= pattern.groups:
                group = group * 10 + int(replacement[i])
                i += 1
        else:
            raise ValueError("'$' in the replacement must be followed by a group number or {name}; "
                             "write \\$ for a literal '$'")
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(group)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def check_regex(values: tuple[Value, ...]) -> None:
    """Parse-time check of a literal pattern (argument 0) and replacement (argument 1)."""
    if values[0] is not DYNAMIC:
        try:
            pattern = java_regex(render(values[0]))
        except ValueError as exc:
            raise ArgumentError(0, str(exc)) from None
        if len(values) > 1 and values[1] is not DYNAMIC:
            try:
                java_replacement(pattern, render(values[1]))
            except ValueError as exc:
                raise ArgumentError(1, str(exc)) from None
