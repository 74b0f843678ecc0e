"""How large a FlowFile's attributes may be, and the session's check of what a processor puts.

Attributes are for small facts about the data (names, ids, sizes, a field or two); the data
itself belongs in content, as NiFi's guidance has it. A FlowFile's attributes are held in
memory with the FlowFile in every queue, written whole into the FlowFile log at every commit that
changes them, and copied into every provenance event about it (an event that changes them holds
them twice, before and after). Measured (docs/configuration.md, "Attribute limits"): one 50 MB
attribute through four processors wrote 800 MB to the FlowFile log, which grew to 400 MB, and the
process peaked at 1.4 GB. So a put is refused (``AttributeLimitError``) when it would make:

- one attribute, its name and value together, longer than ``MAX_ATTRIBUTE_CHARS``, or
- all of a FlowFile's attributes, names and values, longer than ``MAX_FLOWFILE_ATTRIBUTES_CHARS``
  (checked only when the put makes them longer: a FlowFile over the limit can still lose
  attributes or have them shortened).

Sizes are counted in characters (a ``str``'s length), which costs nothing to read; a character
takes 1 to 4 bytes in UTF-8. ``ProcessSession`` checks every put (``put_attribute``,
``put_all_attributes``, ``put_attributes_batch``, ``merge``'s attributes); what a session copies
from FlowFiles it already holds (a clone, a child's common attributes) is no larger than those.
"""

from __future__ import annotations

from itertools import chain
from operator import methodcaller
from typing import Mapping, Sequence

from flowactors.sdk.session_contract import FlowFileHandlingError
from repositories.model import FlowFile

#: The most characters one attribute may hold, its name and value together: 1 MiB, a thousand times
#: a usual attribute, and as much as NiFi's ExtractText reads of a content by default.
MAX_ATTRIBUTE_CHARS = 1024 * 1024
#: The most characters all of one FlowFile's attributes may hold, names and values: 4 MiB.
MAX_FLOWFILE_ATTRIBUTES_CHARS = 4 * 1024 * 1024

_WHAT_TO_DO = ("put large data in the FlowFile's content instead (docs/configuration.md, "
               "\"Attribute limits\")")
_values = methodcaller("values")


class AttributeLimitError(FlowFileHandlingError):
    """A put refused because it would make an attribute, or all of a FlowFile's attributes, longer
    than its limit; nothing was changed. ``flowfile`` is the FlowFile's uuid, ``attribute`` the
    attribute put (the longest, when several were), ``size`` the characters it would have made
    (the attribute's, or the FlowFile's in all), ``limit`` the limit it passes."""

    def __init__(self, message: str, flowfile: str, attribute: str, size: int, limit: int):
        super().__init__(message, flowfile, attribute, size, limit)
        self.flowfile = flowfile
        self.attribute = attribute
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return str(self.args[0])


def attributes_size(attributes: Mapping[str, str]) -> int:
    """The characters of a FlowFile's attributes, names and values."""
    return sum(map(len, attributes)) + sum(map(len, attributes.values()))


def check_values(processor: str, flowfile: FlowFile, values: Mapping[str, str]) -> int:
    """Refuse a put of ``values`` (as the session stores them) on ``flowfile`` when one of them is
    longer than ``MAX_ATTRIBUTE_CHARS``; else the characters they hold, names and values."""
    added = 0
    for name, value in values.items():
        size = len(name) + len(value)
        if size > MAX_ATTRIBUTE_CHARS:
            raise AttributeLimitError(
                f"{processor}: FlowFile {flowfile.uuid}: attribute {_name(name)} would be {size:,} characters "
                f"(name and value), more than the {MAX_ATTRIBUTE_CHARS:,} one attribute may hold "
                f"(MAX_ATTRIBUTE_CHARS); {_WHAT_TO_DO}", flowfile.uuid, name, size, MAX_ATTRIBUTE_CHARS)
        added += size
    return added


def check_total(processor: str, flowfile: FlowFile, values: Mapping[str, str], added: int) -> None:
    """Refuse the put of ``values`` (``added`` characters, ``check_values``' count) on ``flowfile``
    when it would make its attributes longer than ``MAX_FLOWFILE_ATTRIBUTES_CHARS`` in all."""
    attributes = flowfile.attributes
    before = attributes_size(attributes)
    if before + added <= MAX_FLOWFILE_ATTRIBUTES_CHARS:
        return
    after = before + sum(len(value) - len(attributes[name]) if name in attributes else len(name) + len(value)
                         for name, value in values.items())
    if after <= max(before, MAX_FLOWFILE_ATTRIBUTES_CHARS):
        return
    longest = max(values, key=lambda name: len(name) + len(values[name]))
    merged = {**attributes, **values}
    largest = sorted(merged, key=lambda name: -len(merged[name]))[:3]
    raise AttributeLimitError(
        f"{processor}: FlowFile {flowfile.uuid}: setting {_name(longest)} ({len(values[longest]):,} characters) "
        f"would make its attributes {after:,} characters in all (names and values), more than the "
        f"{MAX_FLOWFILE_ATTRIBUTES_CHARS:,} one FlowFile may hold (MAX_FLOWFILE_ATTRIBUTES_CHARS); the largest: "
        + ", ".join(f"{_name(name)} ({len(merged[name]):,})" for name in largest)
        + f"; remove attributes it no longer needs, or {_WHAT_TO_DO}",
        flowfile.uuid, longest, after, MAX_FLOWFILE_ATTRIBUTES_CHARS)


def check_batch(processor: str, flowfiles: Sequence[FlowFile],
                values: Mapping[str, str] | Sequence[Mapping[str, str]]) -> None:
    """``check_values`` and ``check_total`` for a batch put: ``values`` one mapping for every
    FlowFile, or one a FlowFile. The totals are read a FlowFile at a time only when the batch's
    attributes and what the put adds could pass the limit, which they seldom do."""
    if not flowfiles:
        return
    if isinstance(values, Mapping):
        each = [values] * len(flowfiles)
        added = [check_values(processor, flowfiles[0], values)] * len(flowfiles)
    else:
        each = list(values)
        counted: dict[int, int] = {}
        added = []
        for flowfile, mine in zip(flowfiles, each):
            if id(mine) not in counted:
                counted[id(mine)] = check_values(processor, flowfile, mine)
            added.append(counted[id(mine)])
    maps = [flowfile.attributes for flowfile in flowfiles]
    held = sum(map(len, chain.from_iterable(maps))) + sum(map(len, chain.from_iterable(map(_values, maps))))
    if held + max(added) <= MAX_FLOWFILE_ATTRIBUTES_CHARS:
        return
    for flowfile, mine, size in zip(flowfiles, each, added):
        check_total(processor, flowfile, mine, size)


def _name(name: str) -> str:
    """An attribute's name as a message quotes it (a long one cut)."""
    return repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
