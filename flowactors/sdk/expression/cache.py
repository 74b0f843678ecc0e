"""The caches of what the expression language derives from text: parsed property values, compiled
regular expressions, JSONPaths, date patterns.

Such text may come from a FlowFile (``evaluateELString`` parses an attribute's value, a pattern
may be an attribute), so a cache bounded by its number of entries alone could hold thousands of
values each as large as an attribute, and what was derived from them (a parsed value takes about
15 bytes a character). ``text_cache`` bounds both: at most ``entries`` results, from at most
``MAX_CACHED_CHARS`` characters of text in all, the least recently used going first; a result
from more text than that is made each time and not kept.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any, Callable, TypeVar

#: The most characters of text (the keys) one cache keeps results for.
MAX_CACHED_CHARS = 1024 * 1024

_Result = TypeVar("_Result")


def text_cache(entries: int, size: Callable[..., int] = len
               ) -> Callable[[Callable[..., _Result]], Callable[..., _Result]]:
    """A decorator caching its function's results by its (positional) arguments, as
    ``functools.lru_cache(maxsize=entries)`` does (thread-safe; an exception is not cached), and
    keeping at most ``MAX_CACHED_CHARS`` characters of arguments, as ``size(*arguments)`` counts them."""

    def decorate(function: Callable[..., _Result]) -> Callable[..., _Result]:
        kept: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        lock = threading.Lock()
        held = 0

        @functools.wraps(function)
        def cached(*arguments: Any) -> _Result:
            nonlocal held
            with lock:
                if arguments in kept:
                    kept.move_to_end(arguments)
                    return kept[arguments][0]
            result = function(*arguments)
            weight = size(*arguments)
            if weight <= MAX_CACHED_CHARS:
                with lock:
                    if arguments not in kept:
                        kept[arguments] = (result, weight)
                        held += weight
                        while len(kept) > entries or held > MAX_CACHED_CHARS:
                            held -= kept.popitem(last=False)[1][1]
            return result

        return cached

    return decorate
