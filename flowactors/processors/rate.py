"""ControlRate: lets FlowFiles through at most at a rate, per group, as NiFi's ControlRate.

The other flow-control processors are in ``flow_control.py``; docs/flow-control.md describes them.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from typing import Callable, Mapping, Sequence

from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.sdk.units import parse_data_size, parse_duration

DATA_RATE = "data rate"
FLOWFILE_RATE = "flowfile count"
ATTRIBUTE_RATE = "attribute value"
DATA_OR_FLOWFILE_RATE = "data rate or flowfile count"
HOLD = "Hold FlowFile"
ROUTE = "Route to 'rate exceeded'"
#: NiFi's ``0*[1-9][0-9]*``: the only attribute values an 'attribute value' rate counts
_POSITIVE_LONG = re.compile(r"0*[1-9][0-9]*")
#: the group of FlowFiles without a Grouping Attribute (or without the attribute it names)
_DEFAULT_GROUP = object()

log = logging.getLogger(__name__)


def _positive_long_problem(value: str) -> str | None:
    return None if _POSITIVE_LONG.fullmatch(value.strip()) else f"{value!r} must be a positive whole number"


def _time_duration_problem(value: str) -> str | None:
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        return str(err)
    return None if seconds >= 1 else f"{value!r} is less than the least Time Duration, 1 sec"


class Throttle:
    """What one group let through over the last ``period_ms``: NiFi's throttle.

    ``try_add`` lets an amount through while the sum of the window is under the maximum; the
    amount that takes the sum past the maximum still goes through, and the throttle then refuses
    everything for as long as that excess takes at the maximum rate (the period times the excess
    over the maximum), starting at the next attempt."""

    def __init__(self, maximum: int, period_ms: int):
        self.maximum = maximum
        self.period_ms = period_ms
        self.last_update = 0
        self._window: deque[tuple[int, int]] = deque()
        self._sum = 0
        self._penalty_ms = 0
        self._blocked_until = 0

    def _expire(self, now: int) -> None:
        window = self._window
        while window and window[0][0] <= now - self.period_ms:
            self._sum -= window.popleft()[1]

    def full(self, now: int) -> bool:
        """Whether ``try_add`` would refuse any amount now."""
        self._expire(now)
        return self._blocked_until > now or (bool(self._window) and self._sum >= self.maximum)

    def try_add(self, amount: int, now: int) -> bool:
        """Count ``amount`` and say True when the throttle lets it through (see the class)."""
        if amount < 0 or self.full(now):
            return False
        if self._penalty_ms > 0:
            self._blocked_until, self._penalty_ms = now + self._penalty_ms, 0
            return False
        self._window.append((now, amount))
        self._sum += amount
        if self._sum > self.maximum:
            self._penalty_ms = int(self.period_ms * (self._sum - self.maximum) / self.maximum)
        self.last_update = now
        return True


class ControlRate(Processor):
    """Lets FlowFiles through at most at Maximum Rate per Time Duration; the others wait in the
    queue (Hold FlowFile) or go to 'rate exceeded'.

    Rate Control Criteria says what is counted: bytes (data rate: Maximum Rate a data size),
    FlowFiles (flowfile count), the whole number in the attribute Rate Controlled Attribute
    (attribute value), or bytes and FlowFiles at once (data rate or flowfile count: Maximum Data
    Rate and Maximum FlowFile Rate, the first one reached holds the rest). With Grouping Attribute
    every value of that attribute has a rate of its own (FlowFiles without it share one). A
    FlowFile that takes the count past the maximum still goes, and the group then waits as long as
    the excess takes at the maximum rate. With attribute value, a FlowFile whose attribute is not a
    positive whole number goes to failure. Held FlowFiles are never taken for good: each trigger
    takes up to the batch size, keeps those the rate allows and gives the others back to the queue
    in their order, and yields when it let none through. The rate is kept in memory by one task
    (the others yield, as NiFi runs it serially) and starts over when the processor starts; the
    clock is ``clock`` (seconds, ``time.time``), which a test may replace. Provenance: a ROUTE
    event per FlowFile with Route to 'rate exceeded'.
    """

    description = "Throttles the rate at which FlowFiles pass, per group"
    properties = (
        PropertyDescriptor("Rate Control Criteria", "What is counted against the rate", required=True,
                           default=DATA_RATE,
                           allowable_values=(DATA_RATE, FLOWFILE_RATE, ATTRIBUTE_RATE, DATA_OR_FLOWFILE_RATE)),
        PropertyDescriptor("Time Duration", "The time the maximum rate is counted over", required=True,
                           default="1 min", validator=_time_duration_problem),
        PropertyDescriptor("Maximum Rate", "The most passed per Time Duration: a data size for data rate, a positive "
                           "whole number for flowfile count and attribute value"),
        PropertyDescriptor("Maximum Data Rate", "The most bytes passed per Time Duration (data rate or flowfile count)",
                           validator=validators.DATA_SIZE),
        PropertyDescriptor("Maximum FlowFile Rate", "The most FlowFiles passed per Time Duration (data rate or "
                           "flowfile count)", validator=_positive_long_problem),
        PropertyDescriptor("Rate Exceeded Strategy", "What becomes of a FlowFile over the rate", required=True,
                           default=HOLD, allowable_values=(HOLD, ROUTE)),
        PropertyDescriptor("Rate Controlled Attribute", "The attribute whose whole number is counted (attribute "
                           "value)", validator=validators.NON_EMPTY),
        PropertyDescriptor("Grouping Attribute", "The attribute whose every value has a rate of its own",
                           validator=validators.NON_EMPTY),
    )
    FAILED = Relationship(FAILURE.name, "FlowFiles whose Rate Controlled Attribute is missing or not a positive "
                                        "whole number")
    RATE_EXCEEDED = Relationship("rate exceeded", "FlowFiles over the rate, with Route to 'rate exceeded'")
    relationships = (SUCCESS, FAILED)
    NIFI_TYPE = "org.apache.nifi.processors.standard.ControlRate"
    #: the clock, in seconds (a test replaces it instead of waiting)
    clock: Callable[[], float] = staticmethod(time.time)

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        if values.get("Rate Exceeded Strategy", HOLD) == ROUTE:
            return (SUCCESS, cls.FAILED, cls.RATE_EXCEEDED)
        return cls.relationships

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        criteria = values.get("Rate Control Criteria", DATA_RATE)
        if criteria == DATA_OR_FLOWFILE_RATE:
            wanted = {"Maximum Data Rate": validators.DATA_SIZE, "Maximum FlowFile Rate": _positive_long_problem}
        else:
            wanted = {"Maximum Rate": validators.DATA_SIZE if criteria == DATA_RATE else _positive_long_problem}
        problems = []
        for name, check in wanted.items():
            value = values.get(name)
            problem = f"must be set with Rate Control Criteria '{criteria}'" if value is None else check(value)
            if problem:
                problems.append(f"property '{name}': {problem}")
        if criteria == ATTRIBUTE_RATE and values.get("Rate Controlled Attribute") is None:
            problems.append("property 'Rate Controlled Attribute' must be set with Rate Control Criteria "
                            f"'{ATTRIBUTE_RATE}'")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        criteria = context.property("Rate Control Criteria").evaluate()
        self._criteria = criteria
        self._period_ms = int(parse_duration(context.property("Time Duration").evaluate()) * 1000)
        both = criteria == DATA_OR_FLOWFILE_RATE
        maximum = context.property("Maximum Rate").evaluate()
        self._max_data = (parse_data_size(context.property("Maximum Data Rate").evaluate()) if both else
                          parse_data_size(maximum) if criteria == DATA_RATE else None)
        self._max_count = (int(context.property("Maximum FlowFile Rate").evaluate()) if both else
                           None if criteria == DATA_RATE else int(maximum))
        attribute = context.property("Rate Controlled Attribute").evaluate()
        self._attribute = attribute if criteria == ATTRIBUTE_RATE else None
        self._grouping = context.property("Grouping Attribute").evaluate()
        self._route = context.property("Rate Exceeded Strategy").evaluate() == ROUTE
        self._data_throttles: dict[object, Throttle] = {}
        self._count_throttles: dict[object, Throttle] = {}
        self._last_clear = self._now()

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def on_trigger(self, context: ProcessContext, session) -> None:
        if context.instance != 0:   # one task keeps the rate (NiFi triggers ControlRate serially)
            context.yield_()
            return
        now = self._now()
        self._clear_unused(now)
        if self._route:
            self._route_exceeding(context, session, now)
        else:
            self._hold_exceeding(context, session, now)

    def _route_exceeding(self, context: ProcessContext, session, now: int) -> None:
        flowfiles = session.get_batch()
        if not flowfiles:
            context.yield_()
            return
        targets = [self._target(f, now) or self.RATE_EXCEEDED.name for f in flowfiles]
        self._log_failures(context, flowfiles, targets)
        session.provenance.route_batch(flowfiles, targets)
        session.transfer_batch(flowfiles, targets)

    def _hold_exceeding(self, context: ProcessContext, session, now: int) -> None:
        """Keep what the rate allows; give the rest back to the queue untouched (a session of
        its own takes the candidates, so that rolling it back returns only those)."""
        if self._grouping is None and self._blocked(_DEFAULT_GROUP, now):
            context.yield_()
            return
        probe = session.new_session()
        passing, targets = [], []
        for flowfile in probe.get_batch():
            target = self._target(flowfile, now)
            if target is not None:
                passing.append(flowfile)
                targets.append(target)
                if target == self.FAILED.name:   # failure ends the batch (as NiFi's filter)
                    break
            elif self._grouping is None:   # one rate for all: nothing after it can pass either
                break
        probe.migrate(session, passing)
        probe.rollback()
        if not passing:
            context.yield_()
            return
        self._log_failures(context, passing, targets)
        session.transfer_batch(passing, targets)

    def _target(self, flowfile, now: int) -> str | None:
        """failure for an invalid FlowFile, success when the rate lets it through (counted then),
        None when the rate refuses it."""
        if not self._valid(flowfile):
            return self.FAILED.name
        return SUCCESS.name if self._allows(flowfile, now) else None

    def _log_failures(self, context: ProcessContext, flowfiles: list, targets: list[str]) -> None:
        for flowfile, target in zip(flowfiles, targets):
            if target == self.FAILED.name:
                log.error("%s: FlowFile %s routed to failure: its attribute '%s' is %r, not a positive whole number",
                          context.name, flowfile.uuid, self._attribute, flowfile.attributes.get(self._attribute))

    def _valid(self, flowfile) -> bool:
        if self._attribute is None:
            return True
        return _POSITIVE_LONG.fullmatch(flowfile.attributes.get(self._attribute, "")) is not None

    def _group(self, flowfile) -> object:
        if self._grouping is None:
            return _DEFAULT_GROUP
        return flowfile.attributes.get(self._grouping, _DEFAULT_GROUP)

    def _throttle(self, throttles: dict[object, Throttle], group: object, maximum: int) -> Throttle:
        throttle = throttles.get(group)
        if throttle is None:
            throttle = throttles[group] = Throttle(maximum, self._period_ms)
        return throttle

    def _blocked(self, group: object, now: int) -> bool:
        """Whether the group's rate refuses every FlowFile now (nothing need be taken to know)."""
        throttles = [t for t in (self._data_throttles.get(group), self._count_throttles.get(group)) if t is not None]
        return any(t.full(now) for t in throttles)

    def _allows(self, flowfile, now: int) -> bool:
        """Whether the rate lets a valid FlowFile through now (and counts it if so). As NiFi's, the
        bytes are counted before the FlowFile count is asked, so bytes of a FlowFile the count
        holds back count too."""
        group = self._group(flowfile)
        if self._max_data is not None:
            if not self._throttle(self._data_throttles, group, self._max_data).try_add(flowfile.size, now):
                return False
            if self._max_count is None:
                return True
        amount = 1 if self._attribute is None else int(flowfile.attributes[self._attribute])
        return self._throttle(self._count_throttles, group, self._max_count).try_add(amount, now)

    def _clear_unused(self, now: int) -> None:
        """Every two periods, forget the groups that let nothing through since the last time."""
        if now - self._last_clear <= 2 * self._period_ms:
            return
        for throttles in (self._data_throttles, self._count_throttles):
            for group in [g for g, t in throttles.items() if t.last_update < self._last_clear]:
                del throttles[group]
        self._last_clear = now
