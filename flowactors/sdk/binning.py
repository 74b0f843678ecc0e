"""Bin-Packing across triggers, as MergeContent does it; the Spark processors bin the same way.

Both read the same properties (Correlation Attribute Name, Minimum/Maximum Number of Entries,
Minimum/Maximum Group Size, Max Bin Age, Maximum number of Bins) and apply the same rules, so
the rules live here once: ``BinPacker`` puts each trigger's FlowFiles in bins, holds them across
triggers in a second session, and hands back the bins that are ready with the reason why.
"""

from __future__ import annotations

import time
from typing import Mapping

from flowactors.sdk.processor import ProcessContext
from flowactors.sdk.units import parse_data_size
from repositories.model import FlowFile, now_millis


class Bin:
    """FlowFiles waiting to be processed together (held by the packer's holding session)."""

    __slots__ = ("key", "flowfiles", "size", "created", "created_ms")

    def __init__(self, key: str | None):
        self.key = key
        self.flowfiles: list[FlowFile] = []
        self.size = 0
        self.created = time.monotonic()
        self.created_ms = now_millis()

    def add(self, flowfile: FlowFile) -> None:
        self.flowfiles.append(flowfile)
        self.size += flowfile.size


def bin_limit_problems(values: Mapping[str, str]) -> list[str]:
    """The binning properties' problems for ``custom_validate``: a minimum larger than its maximum."""
    problems = []
    if int(values.get("Minimum Number of Entries", "1")) > int(values.get("Maximum Number of Entries", "1000")):
        problems.append("Minimum Number of Entries is larger than Maximum Number of Entries")
    if values.get("Maximum Group Size") and (parse_data_size(values.get("Minimum Group Size", "0 B"))
                                             > parse_data_size(values["Maximum Group Size"])):
        problems.append("Minimum Group Size is larger than Maximum Group Size")
    return problems


class BinPacker:
    """A processor's open bins and the session that holds their FlowFiles between triggers.

    A bin is ready when it is full (Maximum Number of Entries or Maximum Group Size reached), when
    it holds at least Minimum Number of Entries and Minimum Group Size, when it is older than Max
    Bin Age, or, oldest first, when a new bin is needed and Maximum number of Bins are open. A
    FlowFile that does not fit the room left in a bin starts a new one.
    """

    def __init__(self) -> None:
        self._bins: list[Bin] = []
        self._holding = None  # the session that holds the binned FlowFiles between triggers

    def configure(self, context: ProcessContext) -> None:
        """Read the binning properties (from ``on_scheduled``)."""
        p = context.property
        self._correlation = p("Correlation Attribute Name").evaluate() or None
        self._min_entries = p("Minimum Number of Entries").as_int()
        self._max_entries = p("Maximum Number of Entries").as_int()
        self._min_size = p("Minimum Group Size").as_data_size() or 0
        self._max_size = p("Maximum Group Size").as_data_size()
        self._max_age = p("Max Bin Age").as_duration()
        self._max_bins = p("Maximum number of Bins").as_int()

    def release(self) -> None:
        """Give every binned FlowFile back to its queue, unchanged (from ``on_stopped``)."""
        holding, self._holding = self._holding, None
        self._bins = []
        if holding is not None:
            holding.rollback()

    def take_ready(self, session) -> list[tuple[Bin, str]]:
        """Bin this trigger's batch; the bins now ready, with why, their FlowFiles back in ``session``."""
        if self._holding is None:
            self._holding = session.new_session()
        flowfiles = session.get_batch()
        # held first: from here on a rollback of this trigger cannot put them back in the queue
        # while a bin still refers to them
        if flowfiles:
            session.migrate(self._holding, flowfiles)
        ready = self._ready_bins(flowfiles)
        # back into this trigger's session: results, originals and acknowledgements in one commit;
        # should it roll back, the FlowFiles return to the queue and no bin refers to them any more
        for bin, _ in ready:
            self._holding.migrate(session, bin.flowfiles)
        return ready

    def _fits(self, bin: Bin, flowfile: FlowFile) -> bool:
        if len(bin.flowfiles) >= self._max_entries:
            return False
        return not bin.flowfiles or self._max_size is None or bin.size + flowfile.size <= self._max_size

    def _full(self, bin: Bin) -> str | None:
        if len(bin.flowfiles) >= self._max_entries:
            return "Maximum number of entries reached"
        if self._max_size is not None and bin.size >= self._max_size:
            return "Maximum group size reached"
        return None

    def _ready_bins(self, flowfiles: list[FlowFile]) -> list[tuple[Bin, str]]:
        ready: list[tuple[Bin, str]] = []
        for flowfile in flowfiles:
            key = flowfile.attributes.get(self._correlation) if self._correlation else None
            target = next((b for b in self._bins if b.key == key and self._fits(b, flowfile)), None)
            if target is None:
                if len(self._bins) >= self._max_bins:
                    oldest = min(self._bins, key=lambda b: b.created)
                    self._bins.remove(oldest)
                    ready.append((oldest, "Maximum number of bins reached"))
                target = Bin(key)
                self._bins.append(target)
            target.add(flowfile)
            reason = self._full(target)
            if reason:
                self._bins.remove(target)
                ready.append((target, reason))
        now = time.monotonic()
        for bin in list(self._bins):
            if self._max_age is not None and now - bin.created >= self._max_age:
                reason = "Max Bin Age reached"
            elif len(bin.flowfiles) >= self._min_entries and bin.size >= self._min_size:
                reason = "Minimum number of entries and minimum group size reached"
            else:
                continue
            self._bins.remove(bin)
            ready.append((bin, reason))
        return ready
