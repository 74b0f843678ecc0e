""""Did you mean": the known name closest to a misspelt one, for every message that refuses a
name (settings, flow definition keys, processor properties)."""

from __future__ import annotations

import difflib
from typing import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most probably meant, or None when none is close (difflib's
    similarity of at least 0.6, the threshold its ``get_close_matches`` uses)."""
    matches = difflib.get_close_matches(name, list(known), n=1)
    return matches[0] if matches else None


def did_you_mean(name: str, known: Iterable[str], listing: str) -> str:
    """``"did you mean 'x'?"``, or when nothing is close, ``listing`` followed by every known name."""
    known = list(known)
    match = closest(name, known)
    if match is not None:
        return f"did you mean '{match}'?"
    return f"{listing}: {', '.join(known) or 'none'}"
