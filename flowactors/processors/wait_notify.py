"""Wait and Notify: FlowFiles held at Wait until Notify has signalled their Release Signal
Identifier enough times, through the flow's distributed map cache (NiFi's ``Wait``, ``Notify``
and ``WaitNotifyProtocol``; docs/map-cache.md).

A signal is a cache entry under its release signal identifier: JSON ``{"counts": {counter name:
count}, "attributes": {name: value}, "releasableCount": n}``, as NiFi stores it, so a flow may mix
NiFi's and these processors over one cache. Notify adds its deltas and attributes with fetch and
replace (compare-and-set on the entry's revision), trying again when another change came in
between (``notify``); Wait consumes counts the same way and removes the signal once nothing is
left of it (``complete``).
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from flowactors.sdk import FlowFile
from flowactors.sdk.map_cache import AtomicDistributedMapCacheClient, CacheEntry, MapCacheError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators

log = logging.getLogger(__name__)

DEFAULT_COUNTER = "default"
#: the counter Wait lowers when it consumes the total of every counter (no Signal Counter Name)
CONSUMED_COUNTER = "consumed"
WAIT_START = "wait.start.timestamp"
NOTIFIED = "notified"
#: how many times a change of a signal is tried, waiting 10 ms more before each next try
REPLACE_TRIES = 5

SUCCESS = Relationship("success", "Wait: FlowFiles released by their signal; Notify: FlowFiles whose signal "
                                  "was recorded")
WAIT = Relationship("wait", "FlowFiles whose signal has not released them yet")
EXPIRED = Relationship("expired", "FlowFiles that waited longer than the Expiration Duration")
FAILURE = Relationship("failure", "FlowFiles with no Release Signal Identifier or a value that does not parse, "
                                  "or met while the cache failed")


#: a whole number as Java's Long.parseLong reads one: a sign, then ASCII digits
_WHOLE = re.compile(r"[+-]?[0-9]+")


def whole_number(text: str) -> int | None:
    """``text`` as a whole number, or None when it is not one (``int`` alone would take spaces,
    underscores and other scripts' digits, and ``str.isdigit`` takes ``²``, which ``int`` refuses)."""
    return int(text) if _WHOLE.fullmatch(text) else None


class SignalConflict(MapCacheError):
    """A signal changed in the cache between reading and writing it, every time it was tried."""


@dataclass
class Signal:
    """A release signal as cached: counts by counter name, attributes, and how many FlowFiles it
    may still release; ``revision``: of the cache entry it was read from (None: not cached)."""

    identifier: str
    counts: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    releasable: int = 0
    revision: int | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def count(self, counter: str | None) -> int:
        """A counter's count; the total of all when ``counter`` is empty."""
        return self.counts.get(counter, 0) if counter else self.total

    def to_json(self) -> bytes:
        return json.dumps({"counts": self.counts, "attributes": self.attributes,
                           "releasableCount": self.releasable}).encode()

    def release(self, counter: str | None, target: int, per_target: int, candidates: int) -> int:
        """How many of ``candidates`` waiting FlowFiles are released: each ``target`` counts
        consumed make ``per_target`` more releasable (the rest of the counts stay; a target of 0
        releases them all, consuming nothing); the released ones are taken off ``releasable``."""
        if self.releasable < candidates and not target:
            self.releasable = candidates
        elif self.releasable < candidates:
            count = self.count(counter)
            self.releasable += count // target * per_target
            consumed = count - count % target
            if counter:
                self.counts[counter] = count - consumed
            else:
                self.counts[CONSUMED_COUNTER] = self.counts.get(CONSUMED_COUNTER, 0) - consumed
        released = min(self.releasable, candidates)
        self.releasable -= released
        return released


def get_signal(cache: AtomicDistributedMapCacheClient, identifier: str) -> Signal | None:
    """The signal cached under ``identifier``, or None; ``MapCacheError`` when the cached value
    is not a signal."""
    entry = cache.fetch(identifier)
    if entry is None:
        return None
    try:
        data = json.loads(entry.value)
        counts = {str(k): int(v) for k, v in data.get("counts", {}).items()}
        attributes = {str(k): str(v) for k, v in data.get("attributes", {}).items()}
        releasable = int(data.get("releasableCount", 0))
    except (ValueError, TypeError, AttributeError) as err:
        raise MapCacheError(f"the cached value of signal '{identifier}' is not a signal (JSON with counts, "
                            f"attributes and releasableCount): {err}") from None
    return Signal(identifier, counts, attributes, releasable, entry.revision)


def replace(cache: AtomicDistributedMapCacheClient, signal: Signal) -> None:
    """Write ``signal`` if its cache entry is still at the revision it was read at;
    ``SignalConflict`` otherwise."""
    if not cache.replace(CacheEntry(signal.identifier, signal.to_json(), signal.revision)):
        raise SignalConflict(f"signal '{signal.identifier}' was changed in the cache by another processor meanwhile")


def notify(cache: AtomicDistributedMapCacheClient, identifier: str, deltas: Mapping[str, int],
           attributes: Mapping[str, str], pause: Callable[[float], None] = time.sleep) -> Signal:
    """Add ``deltas`` to the signal's counters (a delta of 0 sets a counter to 0) and
    ``attributes`` to its attributes, tried ``REPLACE_TRIES`` times against concurrent changes."""
    for attempt in range(REPLACE_TRIES):
        signal = get_signal(cache, identifier) or Signal(identifier)
        signal.attributes.update(attributes)
        for counter, delta in deltas.items():
            signal.counts[counter] = 0 if delta == 0 else signal.counts.get(counter, 0) + delta
        try:
            replace(cache, signal)
            return signal
        except SignalConflict:
            pause(0.01 * (attempt + 1))
    raise SignalConflict(f"signal '{identifier}' could not be updated: other processors changed it each of "
                         f"{REPLACE_TRIES} times it was tried")


def complete(cache: AtomicDistributedMapCacheClient, signal: Signal) -> None:
    """Remove a used-up signal, unless it changed since it was read (``SignalConflict``)."""
    current = cache.fetch(signal.identifier)
    if current is None or (signal.revision is not None and current.revision != signal.revision) \
            or not cache.remove(signal.identifier):
        raise SignalConflict(f"signal '{signal.identifier}' was changed or removed by another processor meanwhile")


def _cache_property(what: str) -> PropertyDescriptor:
    return PropertyDescriptor("Distributed Cache Service", f"The map cache client {what}", required=True,
                              service=AtomicDistributedMapCacheClient)


_SIGNAL_ID = PropertyDescriptor("Release Signal Identifier", "The key of the signal in the cache", required=True,
                                expression_language=True)
_RENAMED = {"distributed-cache-service": "Distributed Cache Service",
            "release-signal-id": "Release Signal Identifier", "signal-counter-name": "Signal Counter Name"}
REPLACE_IF_PRESENT, KEEP_ORIGINAL = "Replace if present", "Keep original"
TRANSFER_TO_WAIT, KEEP_UPSTREAM = "Transfer to wait relationship", "Keep in the upstream connection"


@dataclass
class _Routing:
    """Where one Wait trigger's FlowFiles go."""

    failure: list[FlowFile] = field(default_factory=list)
    expired: list[FlowFile] = field(default_factory=list)
    wait: list[FlowFile] = field(default_factory=list)
    success: list[FlowFile] = field(default_factory=list)
    #: the first candidate's counter name, target count and releasable count
    counter: str | None = None
    target: int = 1
    per_target: int = 1


class Wait(Processor):
    """Holds FlowFiles until their signal is released (see the module docstring). Each trigger
    takes up to Wait Buffer Count FlowFiles of one signal (the others stay queued); a FlowFile is
    released when Notify has counted Target Signal Count for it (Signal Counter Name's count, or
    the total of all counters), each such count releasing Releasable FlowFile Count FlowFiles (0:
    all of them while the count is reached, the counts untouched: an open gate). A released or
    expired FlowFile loses ``wait.start.timestamp``; every routed FlowFile gets the signal's
    attributes (as Attribute Copy Mode says) and ``wait.counter.<name>`` of each counter.

    Provenance: none beyond the session's (ATTRIBUTES_MODIFIED where attributes change).
    """

    description = "Holds FlowFiles until a Notify processor signals their release"
    NIFI_TYPE = "org.apache.nifi.processors.standard.Wait"
    NIFI_PROPERTY_NAMES = {**_RENAMED, "target-signal-count": "Target Signal Count",
                           "wait-buffer-count": "Wait Buffer Count",
                           "releasable-flowfile-count": "Releasable FlowFile Count",
                           "expiration-duration": "Expiration Duration", "attribute-copy-mode": "Attribute Copy Mode",
                           "wait-mode": "Wait Mode", "wait-penalty-duration": "Wait Penalty Duration"}
    NIFI_VALUES = {"Attribute Copy Mode": {"replace": REPLACE_IF_PRESENT, "keeporiginal": KEEP_ORIGINAL},
                   "Wait Mode": {"wait": TRANSFER_TO_WAIT, "keep": KEEP_UPSTREAM}}
    properties = (
        _SIGNAL_ID,
        PropertyDescriptor("Target Signal Count", "The count that releases FlowFiles", required=True, default="1",
                           expression_language=True, validator=validators.NON_NEGATIVE_INTEGER),
        PropertyDescriptor("Signal Counter Name", "The counter compared with the target (none: the total of all)",
                           expression_language=True),
        PropertyDescriptor("Wait Buffer Count", "How many FlowFiles of one signal a trigger takes", required=True,
                           default="1", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Releasable FlowFile Count", "FlowFiles released per Target Signal Count reached (0: all, "
                           "counts kept)", required=True, default="1", expression_language=True,
                           validator=validators.NON_NEGATIVE_INTEGER),
        PropertyDescriptor("Expiration Duration", "How long a FlowFile may wait before going to 'expired'",
                           required=True, default="10 min", validator=validators.DURATION),
        _cache_property("holding the signals"),
        PropertyDescriptor("Attribute Copy Mode", "How the signal's attributes meet the FlowFile's", required=True,
                           default=KEEP_ORIGINAL, allowable_values=(REPLACE_IF_PRESENT, KEEP_ORIGINAL)),
        PropertyDescriptor("Wait Mode", "Where a waiting FlowFile goes", required=True, default=TRANSFER_TO_WAIT,
                           allowable_values=(TRANSFER_TO_WAIT, KEEP_UPSTREAM)),
        PropertyDescriptor("Wait Penalty Duration", "After a trigger released nothing of a signal, skip it this long",
                           validator=validators.DURATION),
    )
    relationships = (SUCCESS, WAIT, EXPIRED, FAILURE)

    #: the clock (seconds since the epoch); tests replace it
    clock: Callable[[], float] = staticmethod(time.time)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._penalties: dict[str, int] = {}   # signal -> ms until which it is skipped
        self._kept: dict[str, int] = {}        # Keep in the upstream connection: FlowFile uuid -> wait start (ms)

    def on_stopped(self, context: ProcessContext) -> None:
        self._penalties.clear()
        self._kept.clear()

    def on_trigger(self, context: ProcessContext, session) -> None:
        now = int(self.clock() * 1000)
        self._penalties = {signal: until for signal, until in self._penalties.items() if until >= now}
        routing = _Routing()
        target, chosen = self._choose(context, session, routing)
        signal = None
        if chosen:
            try:
                signal = get_signal(context.service("Distributed Cache Service"), target)
            except MapCacheError as err:
                log.error("%s: cannot read signal '%s': %s", context.name, target, err)
                routing.failure.extend(chosen)
                chosen = []
        original_counts = dict(signal.counts) if signal is not None else {}
        candidates = self._sort(context, session, chosen, signal, routing, now)
        done, progressed = self._release(signal, candidates, routing)
        penalty = context.property("Wait Penalty Duration").as_duration()
        if penalty is not None and chosen and not routing.success:
            self._penalties[target] = now + int(penalty * 1000)
        self._transfer(context, session, routing, signal, original_counts)
        if signal is not None and done:
            complete(context.service("Distributed Cache Service"), signal)
        elif signal is not None and progressed:
            replace(context.service("Distributed Cache Service"), signal)

    def _choose(self, context: ProcessContext, session, routing: _Routing) -> tuple[str | None, list[FlowFile]]:
        """The signal this trigger serves and up to Wait Buffer Count FlowFiles of it; FlowFiles
        with no signal go to ``routing.failure``, the others back to the queue."""
        buffer = context.property("Wait Buffer Count").as_int() or 1
        target, chosen, others = None, [], []
        for flowfile in session.get_batch():
            signal = context.property("Release Signal Identifier").evaluate(flowfile) or ""
            if not signal.strip():
                log.error("%s: FlowFile %s has no Release Signal Identifier", context.name, flowfile.uuid)
                routing.failure.append(flowfile)
            elif signal in self._penalties or (target is not None and signal != target) or len(chosen) >= buffer:
                others.append(flowfile)
            else:
                target = signal
                chosen.append(flowfile)
        _give_back(session, others)
        if others and not chosen:
            context.yield_()
        return target, chosen

    def _sort(self, context: ProcessContext, session, chosen: list[FlowFile], signal: Signal | None,
              routing: _Routing, now: int) -> list[FlowFile]:
        """Stamp each chosen FlowFile's wait start; route the expired, the unparsable and (no
        signal yet) the waiting ones; the rest are the candidates for release."""
        expiration = int((context.property("Expiration Duration").as_duration() or 600) * 1000)
        keep = context.property("Wait Mode").raw == KEEP_UPSTREAM
        candidates: list[FlowFile] = []
        for flowfile in chosen:
            start = flowfile.attributes.get(WAIT_START) or (str(self._kept[flowfile.uuid]) if keep and
                                                            flowfile.uuid in self._kept else None)
            if start is None:
                start = str(now)
                flowfile = session.put_attribute(flowfile, WAIT_START, start)
            if whole_number(start.strip()) is None:
                log.error("%s: FlowFile %s has '%s' in %s, not a number of milliseconds", context.name, flowfile.uuid,
                          start, WAIT_START)
                routing.failure.append(flowfile)
            elif now > int(start) + expiration:
                routing.expired.append(flowfile)
            elif signal is None:
                routing.wait.append(flowfile)
            elif candidates or self._targets(context, flowfile, routing):
                candidates.append(flowfile)
        return candidates

    @staticmethod
    def _targets(context: ProcessContext, flowfile: FlowFile, routing: _Routing) -> bool:
        """Read the first candidate's counter name, target and releasable counts into ``routing``;
        False (the FlowFile to failure) when one is not a whole number."""
        values = {}
        for name in ("Target Signal Count", "Releasable FlowFile Count"):
            text = (context.property(name).evaluate(flowfile) or "").strip()
            number = whole_number(text)
            if number is None or number < 0:
                log.error("%s: FlowFile %s: %s is '%s', not a whole number", context.name, flowfile.uuid, name, text)
                routing.failure.append(flowfile)
                return False
            values[name] = number
        routing.counter = context.property("Signal Counter Name").evaluate(flowfile) or None
        routing.target, routing.per_target = values["Target Signal Count"], values["Releasable FlowFile Count"]
        return True

    @staticmethod
    def _release(signal: Signal | None, candidates: list[FlowFile], routing: _Routing) -> tuple[bool, bool]:
        """Route the candidates to success or wait; (whether the signal is used up, whether it changed)."""
        if signal is None or not candidates:
            return False, False
        if routing.per_target == 0:
            reached = signal.count(routing.counter) >= routing.target
            (routing.success if reached else routing.wait).extend(candidates)
            return False, False
        released = signal.release(routing.counter, routing.target, routing.per_target, len(candidates))
        routing.success.extend(candidates[:released])
        routing.wait.extend(candidates[released:])
        return signal.total == 0 and signal.releasable == 0, released > 0

    def _transfer(self, context: ProcessContext, session, routing: _Routing, signal: Signal | None,
                  counts: Mapping[str, int]) -> None:
        replace_attributes = context.property("Attribute Copy Mode").raw == REPLACE_IF_PRESENT
        keep = context.property("Wait Mode").raw == KEEP_UPSTREAM
        if keep:
            for flowfile in routing.wait:
                if flowfile.uuid not in self._kept:   # its first look: _sort stamped it
                    self._kept[flowfile.uuid] = int(flowfile.attributes[WAIT_START])
            _give_back(session, routing.wait)
            if routing.wait and not (routing.failure or routing.expired or routing.success):
                context.yield_()   # all of them back where they were: nothing to do until time passes
        for relationship, flowfiles in ((FAILURE, routing.failure), (EXPIRED, routing.expired),
                                        (SUCCESS, routing.success), (WAIT, [] if keep else routing.wait)):
            for flowfile in flowfiles:
                self._kept.pop(flowfile.uuid, None)
                if relationship is not WAIT:
                    flowfile = session.remove_attribute(flowfile, WAIT_START)
                if relationship is FAILURE:
                    flowfile = session.penalize(flowfile)
                flowfile = _copy_signal(session, flowfile, signal, counts, replace_attributes)
                session.transfer(flowfile, relationship)


def _copy_signal(session, flowfile: FlowFile, signal: Signal | None, counts: Mapping[str, int],
                 replace_attributes: bool) -> FlowFile:
    """``flowfile`` with the signal's attributes and its counts as read (``wait.counter.*``)."""
    if signal is None:
        return flowfile
    copied = {k: v for k, v in signal.attributes.items()
              if (k != "uuid" if replace_attributes else k not in flowfile.attributes)}
    copied.update({f"wait.counter.{name}": str(count) for name, count in counts.items()})
    copied["wait.counter.total"] = str(sum(counts.values()))
    return session.put_all_attributes(flowfile, copied)


def _give_back(session, flowfiles: list[FlowFile]) -> None:
    """Return FlowFiles this session took to their queue, as they were taken."""
    if flowfiles:
        session.give_back([flowfile.uuid for flowfile in flowfiles], lambda taken, _now: taken)


class Notify(Processor):
    """Adds each FlowFile's Signal Counter Delta to the Signal Counter Name counter of the signal
    its Release Signal Identifier names (a delta of 0 resets the counter), with the attributes
    matching Attribute Cache Regular Expression; up to Signal Buffer Count FlowFiles are counted
    in one change of each signal. Each FlowFile gets ``notified`` (true on success, false on
    failure). A cache that fails, or a signal changed by others on every try, rolls the trigger
    back (the FlowFiles stay queued) and the error says why.

    Provenance: none beyond the session's (ATTRIBUTES_MODIFIED for ``notified``).
    """

    description = "Signals Wait processors to release FlowFiles, through a distributed map cache"
    NIFI_TYPE = "org.apache.nifi.processors.standard.Notify"
    NIFI_PROPERTY_NAMES = {**_RENAMED, "signal-counter-delta": "Signal Counter Delta",
                           "signal-buffer-count": "Signal Buffer Count",
                           "attribute-cache-regex": "Attribute Cache Regular Expression",
                           "Attribute Cache Regex": "Attribute Cache Regular Expression"}
    properties = (
        _SIGNAL_ID,
        PropertyDescriptor("Signal Counter Name", "The counter to change", required=True, default=DEFAULT_COUNTER,
                           expression_language=True),
        PropertyDescriptor("Signal Counter Delta", "What to add to the counter (0: reset it)", required=True,
                           default="1", expression_language=True, validator=validators.INTEGER),
        PropertyDescriptor("Signal Buffer Count", "How many FlowFiles one change of a signal counts", required=True,
                           default="1", validator=validators.POSITIVE_INTEGER),
        _cache_property("to keep the signals in"),
        PropertyDescriptor("Attribute Cache Regular Expression", "FlowFile attributes whose names match it whole "
                           "are kept with the signal", validator=validators.REGEX),
    )
    relationships = (SUCCESS, FAILURE)

    #: how a retry waits (seconds); tests replace it
    pause: Callable[[float], None] = staticmethod(time.sleep)

    def on_trigger(self, context: ProcessContext, session) -> None:
        pattern_text = context.property("Attribute Cache Regular Expression").raw
        pattern = re.compile(pattern_text) if pattern_text else None
        buffers: dict[str, tuple[dict[str, int], dict[str, str], list[FlowFile]]] = {}
        for flowfile in session.get_batch(context.property("Signal Buffer Count").as_int() or 1):
            signal = context.property("Release Signal Identifier").evaluate(flowfile) or ""
            delta = (context.property("Signal Counter Delta").evaluate(flowfile) or "").strip()
            if not signal.strip() or whole_number(delta) is None:
                log.error("%s: FlowFile %s: %s", context.name, flowfile.uuid,
                          f"Signal Counter Delta is '{delta}', not a whole number" if signal.strip()
                          else "it has no Release Signal Identifier")
                session.transfer(session.put_attribute(flowfile, NOTIFIED, "false"), FAILURE)
                continue
            counter = context.property("Signal Counter Name").evaluate(flowfile) or DEFAULT_COUNTER
            deltas, attributes, flowfiles = buffers.setdefault(signal, ({}, {}, []))
            deltas[counter] = 0 if int(delta) == 0 else deltas.get(counter, 0) + int(delta)
            if pattern is not None:
                attributes.update({k: v for k, v in flowfile.attributes.items()
                                   if k != "uuid" and pattern.fullmatch(k)})
            flowfiles.append(flowfile)
        cache = context.service("Distributed Cache Service") if buffers else None
        for signal, (deltas, attributes, flowfiles) in buffers.items():
            notify(cache, signal, deltas, attributes, self.pause)
            for flowfile in flowfiles:
                session.transfer(session.put_attribute(flowfile, NOTIFIED, "true"), SUCCESS)
