"""Bin-Packing across triggers, as MergeContent does it; MergeRecord and the Spark processors bin
the same way.

``BinPacker`` puts each trigger's FlowFiles in bins, holds them across triggers in a second
session, and hands back the bins that are ready with the reason why. Its limits are
``BinSettings``: ``configure`` reads them from MergeContent's properties (Correlation Attribute
Name, Minimum/Maximum Number of Entries, Minimum/Maximum Group Size, Max Bin Age, Maximum number
of Bins), which the Spark processors share. A processor with rules of its own (MergeRecord, whose
limits count records) subclasses it, sets ``settings`` itself and overrides the hooks: ``key``
(which FlowFiles may share a bin), ``admit`` (whether a FlowFile is binned at all), ``fits``,
``full``, ``enough`` and ``enough_only_when_idle``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from flowactors.sdk.processor import ProcessContext
from flowactors.sdk.units import parse_data_size
from repositories.model import FlowFile, now_millis

#: why a bin is ready (``BinPacker.take_ready``'s reasons of its own rules)
MAX_ENTRIES_REACHED, MAX_SIZE_REACHED = "Maximum number of entries reached", "Maximum group size reached"
MIN_REACHED = "Minimum number of entries and minimum group size reached"
MAX_AGE_REACHED, MAX_BINS_REACHED = "Max Bin Age reached", "Maximum number of bins reached"
#: the reason of a FlowFile ``admit`` refused, given back alone in a bin of its own
REJECTED = "Not admitted to a bin"


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


@dataclass(frozen=True)
class BinSettings:
    """A packer's limits (None: no limit). Entries are FlowFiles, sizes their content bytes, the
    age seconds since a bin's first FlowFile; ``correlation`` names the attribute whose value is
    the default bin key (None: one key for all)."""

    correlation: str | None = None
    min_entries: int = 1
    max_entries: int | None = None
    min_size: int = 0
    max_size: int | None = None
    max_age: float | None = None
    max_bins: int = 5

    @classmethod
    def of(cls, context: ProcessContext) -> "BinSettings":
        """The settings MergeContent's binning properties give (the Spark processors have them too)."""
        p = context.property
        return cls(p("Correlation Attribute Name").evaluate() or None, p("Minimum Number of Entries").as_int(),
                   p("Maximum Number of Entries").as_int(), p("Minimum Group Size").as_data_size() or 0,
                   p("Maximum Group Size").as_data_size(), p("Max Bin Age").as_duration(),
                   p("Maximum number of Bins").as_int())


class BinPacker:
    """A processor's open bins and the session that holds their FlowFiles between triggers.

    Each FlowFile of a trigger is first ``admit``-ted (or given back alone, ``REJECTED``), then
    goes into the first open bin of its ``key`` it ``fits``, or starts a new one. A bin is ready
    when it is ``full`` (at the FlowFile that filled it), when it is older than Max Bin Age, when
    it holds ``enough`` (at the end of every trigger, or with ``enough_only_when_idle`` of a
    trigger that found no input), or, oldest first, when a new bin is needed and Maximum number
    of Bins are open. The defaults are MergeContent's rules.
    """

    #: whether ``enough`` makes a bin ready only at a trigger that found no input (NiFi's
    #: MergeRecord: while FlowFiles keep coming, bins fill up)
    enough_only_when_idle = False

    def __init__(self) -> None:
        self.settings = BinSettings()
        #: whether the last ``take_ready`` found input
        self.found_input = False
        self._bins: list[Bin] = []
        self._holding = None  # the session that holds the binned FlowFiles between triggers

    def configure(self, context: ProcessContext) -> None:
        """Read the binning properties (from ``on_scheduled``): ``BinSettings.of``."""
        self.settings = BinSettings.of(context)

    def release(self) -> None:
        """Give every binned FlowFile back to its queue, unchanged (from ``on_stopped``)."""
        holding, self._holding = self._holding, None
        self._bins = []
        if holding is not None:
            holding.rollback()

    def take_ready(self, session) -> list[tuple[Bin, str]]:
        """Bin this trigger's batch; the bins now ready, with why, their FlowFiles back in
        ``session``: first each FlowFile not admitted, then the others in the order they became
        ready."""
        if self._holding is None:
            self._holding = session.new_session()
        flowfiles = session.get_batch()
        self.found_input = bool(flowfiles)
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

    # ------------------------------------------------------------------ the hooks
    def key(self, flowfile: FlowFile) -> str | None:
        """The bin key of ``flowfile``: FlowFiles share a bin only when their keys are equal. By
        default the value of the ``settings.correlation`` attribute (None without one)."""
        correlation = self.settings.correlation
        return flowfile.attributes.get(correlation) if correlation else None

    def admit(self, holding, flowfile: FlowFile) -> bool:
        """Whether ``flowfile`` is binned, asked once as it arrives (``holding``: the session
        that holds it, to read its content). False: it is given back at once, alone in a bin of
        its own, reason ``REJECTED``. By default every FlowFile is."""
        return True

    def fits(self, bin: Bin, flowfile: FlowFile) -> bool:
        """Whether ``flowfile`` may join ``bin`` (same key): by default when the bin has room for
        one more entry and, unless it is empty, for its size."""
        limits = self.settings
        if limits.max_entries is not None and len(bin.flowfiles) >= limits.max_entries:
            return False
        return not bin.flowfiles or limits.max_size is None or bin.size + flowfile.size <= limits.max_size

    def full(self, bin: Bin) -> str | None:
        """Why ``bin`` is ready as soon as a FlowFile joined it, or None: by default Maximum Number
        of Entries or Maximum Group Size reached."""
        limits = self.settings
        if limits.max_entries is not None and len(bin.flowfiles) >= limits.max_entries:
            return MAX_ENTRIES_REACHED
        if limits.max_size is not None and bin.size >= limits.max_size:
            return MAX_SIZE_REACHED
        return None

    def enough(self, bin: Bin) -> str | None:
        """Why ``bin`` may be taken at the end of a trigger, or None: by default it holds Minimum
        Number of Entries and Minimum Group Size."""
        limits = self.settings
        if len(bin.flowfiles) >= limits.min_entries and bin.size >= limits.min_size:
            return MIN_REACHED
        return None

    # ------------------------------------------------------------------ the rules
    def _ready_bins(self, flowfiles: list[FlowFile]) -> list[tuple[Bin, str]]:
        rejected: list[tuple[Bin, str]] = []
        ready: list[tuple[Bin, str]] = []
        for flowfile in flowfiles:
            if not self.admit(self._holding, flowfile):
                alone = Bin(None)
                alone.add(flowfile)
                rejected.append((alone, REJECTED))
                continue
            key = self.key(flowfile)
            target = next((b for b in self._bins if b.key == key and self.fits(b, flowfile)), None)
            if target is None:
                if len(self._bins) >= self.settings.max_bins:
                    oldest = min(self._bins, key=lambda b: b.created)
                    self._bins.remove(oldest)
                    ready.append((oldest, MAX_BINS_REACHED))
                target = Bin(key)
                self._bins.append(target)
            target.add(flowfile)
            reason = self.full(target)
            if reason:
                self._bins.remove(target)
                ready.append((target, reason))
        now, max_age = time.monotonic(), self.settings.max_age

        def aged_or_enough(bin: Bin) -> str | None:
            if max_age is not None and now - bin.created >= max_age:
                return MAX_AGE_REACHED
            return None if self.enough_only_when_idle else self.enough(bin)

        ready += self._take(aged_or_enough)
        if self.enough_only_when_idle and not flowfiles:   # after the aged ones, as NiFi's MergeRecord
            ready += self._take(self.enough)
        return rejected + ready

    def _take(self, why: Callable[[Bin], str | None]) -> list[tuple[Bin, str]]:
        """The open bins ``why`` gives a reason for, with it, taken out of the open ones."""
        taken = []
        for bin in list(self._bins):
            reason = why(bin)
            if reason:
                self._bins.remove(bin)
                taken.append((bin, reason))
        return taken
