"""Flow-control processors, as NiFi's: LogMessage, DuplicateFlowFile, RetryFlowFile, DistributeLoad.

ControlRate lives in ``rate.py`` and MonitorActivity in ``monitor.py``; docs/flow-control.md
describes all six and where they differ from NiFi.
"""

from __future__ import annotations

import logging
import re
from typing import Mapping, Sequence

from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.processors._common import boolean_property
from flowactors.processors.attributes import LOG_LEVELS

_STANDARD = "org.apache.nifi.processors.standard."


def _level_problem(value: str) -> str | None:
    return None if value.lower() in LOG_LEVELS else f"{value!r} is not a log level: one of {', '.join(LOG_LEVELS)}"


_WHOLE = re.compile(r"[+-]?[0-9]+")


def whole_number(text: str | None) -> int | None:
    """The whole number ``text`` spells (signs and spaces around allowed, as Java's parseInt
    after a trim), or None."""
    text = (text or "").strip()
    return int(text) if _WHOLE.fullmatch(text) else None


class LogMessage(Processor):
    """Logs a message (Log Prefix then Log Message, both evaluated against the FlowFile) at Log
    Level, and passes the FlowFile on to success unchanged.

    The log goes to the Python logger ``flowactors.processors.LogMessage``; Log Level may be an
    expression and is read case-insensitively (one of trace, debug, info, warn, error; "trace" is
    level 5). Nothing is evaluated when the logger would drop the message. A level that evaluates to
    something else fails the trigger with a message naming the value (the FlowFile stays queued,
    penalized). A warn or error message is a log line, not a bulletin: bulletins here are the
    errors of triggers. Provenance: none beyond the session's.
    """

    description = "Logs a message built with expressions at a chosen level"
    logger = logging.getLogger("flowactors.processors.LogMessage")
    properties = (
        PropertyDescriptor("Log Level", "The level to log at: trace, debug, info, warn or error (any case)",
                           required=True, default="info", validator=_level_problem, expression_language=True),
        PropertyDescriptor("Log Prefix", "Text put before the message, to tell LogMessage processors apart",
                           validator=validators.NON_EMPTY, expression_language=True),
        PropertyDescriptor("Log Message", "The message to log", validator=validators.NON_EMPTY,
                           expression_language=True),
    )
    relationships = (SUCCESS,)
    NIFI_TYPE = _STANDARD + "LogMessage"
    NIFI_PROPERTY_NAMES = {"log-level": "Log Level", "log-prefix": "Log Prefix", "log-message": "Log Message"}

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()
        level_value, prefix, message = (context.property(name) for name in ("Log Level", "Log Prefix", "Log Message"))
        for flowfile in flowfiles:
            level_name = level_value.evaluate(flowfile) or ""
            level = LOG_LEVELS.get(level_name.lower())
            if level is None:
                raise ValueError(f"Log Level is {level_name!r} for FlowFile {flowfile.uuid}; it must be one of "
                                 f"{', '.join(LOG_LEVELS)}")
            if self.logger.isEnabledFor(level):
                before = prefix.evaluate(flowfile) or ""
                self.logger.log(level, "%s%s", before if before.strip() else "", message.evaluate(flowfile) or "")
        session.transfer_batch(flowfiles, SUCCESS)


class DuplicateFlowFile(Processor):
    """Sends each FlowFile and Number of Copies copies of it to success (for load tests).

    The copies share the original's content (no byte is copied) and get ``copy.index`` 1 to N, the
    original ``copy.index`` 0. Number of Copies may be an expression, evaluated per FlowFile; a
    value that is not a whole number of zero or more fails the trigger with a message naming it
    (the FlowFile stays queued, penalized). Provenance: a CLONE event per copy (from the session).
    """

    description = "Sends each FlowFile and a number of copies of it (sharing its content) to success"
    COPY_INDEX = "copy.index"
    properties = (
        PropertyDescriptor("Number of Copies", "How many copies of each FlowFile are made", required=True,
                           default="100", validator=validators.NON_NEGATIVE_INTEGER, expression_language=True),
    )
    relationships = (SUCCESS,)
    NIFI_TYPE = _STANDARD + "DuplicateFlowFile"

    def on_trigger(self, context: ProcessContext, session) -> None:
        copies_value = context.property("Number of Copies")
        for flowfile in session.get_batch():
            text = copies_value.evaluate(flowfile)
            copies = whole_number(text)
            if copies is None or copies < 0:
                raise ValueError(f"Number of Copies is {text!r} for FlowFile {flowfile.uuid}; it must be a whole "
                                 f"number of zero or more")
            for index in range(1, copies + 1):
                session.transfer(session.put_attribute(session.clone(flowfile), self.COPY_INDEX, str(index)), SUCCESS)
            session.transfer(session.put_attribute(flowfile, self.COPY_INDEX, "0"), SUCCESS)


FAIL_ON_REUSE = "Fail on Reuse"
WARN_ON_REUSE = "Warn on Reuse"
RESET_ON_REUSE = "Reset Reuse"


def _max_retries_problem(value: str) -> str | None:
    number = whole_number(value)
    if number is None or not 1 <= number <= 2**31 - 1:
        return f"{value!r} must be a whole number from 1 to {2**31 - 1}"
    return None


class RetryFlowFile(Processor):
    """Counts the times a FlowFile came round a retry loop, in Retry Attribute, and ends the loop
    after Maximum Retries.

    The count is the attribute's value plus one (1 when the attribute is missing). Up to Maximum
    Retries the FlowFile goes to retry with the count and ``<Retry Attribute>.uuid`` (this
    processor's id) set, penalized when Penalize Retries is true. Past it, both attributes are
    removed, every dynamic property whose value (an expression) is not blank is set as an
    attribute, and it goes to retries_exceeded. A value that is not a number is reset to a count of
    1, or sends the FlowFile to failure with Fail on Nonnumerical Overwrite. A FlowFile whose
    ``.uuid`` attribute names another processor was retried by another RetryFlowFile with the same
    attribute: Reuse Mode sends it to failure (an error logged), or resets the count to 1 (a
    warning, or a debug line, logged). Maximum Retries may be an expression: one that is not a
    whole number for a FlowFile sends it to failure (a warning logged). Provenance: none beyond
    the session's.
    """

    description = "Counts the retries of a FlowFile in an attribute and ends a retry loop after a maximum"
    dynamic_properties = True
    log = logging.getLogger("flowactors.processors.RetryFlowFile")
    properties = (
        PropertyDescriptor("Retry Attribute", "The attribute holding the retry count (its value with '.uuid' added "
                           "names the attribute holding the id of the processor that counted)", required=True,
                           default="flowfile.retries", validator=validators.NON_EMPTY, expression_language=True),
        PropertyDescriptor("Maximum Retries", "How many times a FlowFile may go to retry", required=True,
                           default="3", validator=_max_retries_problem, expression_language=True),
        boolean_property("Penalize Retries", True, "Whether FlowFiles sent to retry are penalized"),
        boolean_property("Fail on Nonnumerical Overwrite", False, "Whether a FlowFile whose retry attribute is "
                         "not a number goes to failure instead of having the count reset to 1"),
        PropertyDescriptor("Reuse Mode", "What to do with a FlowFile another RetryFlowFile counted with the same "
                           "attribute", required=True, default=FAIL_ON_REUSE,
                           allowable_values=(FAIL_ON_REUSE, WARN_ON_REUSE, RESET_ON_REUSE)),
    )
    RETRY = Relationship("retry", "FlowFiles under the maximum: connect it back to the processor to retry")
    RETRIES_EXCEEDED = Relationship("retries_exceeded", "FlowFiles past the maximum")
    FAILED = Relationship(FAILURE.name, "FlowFiles whose count or maximum is not a number (as configured), or "
                                        "counted by another RetryFlowFile (Reuse Mode 'Fail on Reuse')")
    relationships = (RETRY, RETRIES_EXCEEDED, FAILED)
    NIFI_TYPE = _STANDARD + "RetryFlowFile"
    NIFI_PROPERTY_NAMES = {"retry-attribute": "Retry Attribute", "maximum-retries": "Maximum Retries",
                           "penalize-retries": "Penalize Retries", "reuse-mode": "Reuse Mode",
                           "Fail on Non-numerical Overwrite": "Fail on Nonnumerical Overwrite"}
    NIFI_VALUES = {"Reuse Mode": {"fail": FAIL_ON_REUSE, "warn": WARN_ON_REUSE, "reset": RESET_ON_REUSE}}

    def on_scheduled(self, context: ProcessContext) -> None:
        self._attribute = context.property("Retry Attribute").evaluate() or ""
        if not self._attribute.strip():
            raise ValueError(f"Retry Attribute {context.property('Retry Attribute').raw!r} names no attribute: it "
                             f"evaluates to nothing without a FlowFile (its expressions see no attributes)")
        self._by = self._attribute + ".uuid"
        self._penalize = context.property("Penalize Retries").as_bool()
        self._fail_on_text = context.property("Fail on Nonnumerical Overwrite").as_bool()
        self._reuse = context.property("Reuse Mode").evaluate()
        self._exceeded = {name: context.property(name) for name in context.dynamic_properties}

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            self._retry(context, session, flowfile)

    def _retry(self, context: ProcessContext, session, flowfile) -> None:
        attributes = flowfile.attributes
        count_text = attributes.get(self._attribute)
        previous = whole_number(count_text)
        if previous is not None:
            count = previous + 1
        elif count_text is not None and self._fail_on_text:
            session.transfer(flowfile, self.FAILED)
            return
        else:
            count = 1
        counted_by = attributes.get(self._by, "")
        if counted_by.strip() and counted_by != session.component_id:
            if self._reuse == FAIL_ON_REUSE:
                self.log.error("%s: FlowFile %s was retried with '%s' by another processor (%s); routed to failure",
                               context.name, flowfile.uuid, self._attribute, counted_by)
                session.transfer(flowfile, self.FAILED)
                return
            self.log.log(logging.WARNING if self._reuse == WARN_ON_REUSE else logging.DEBUG,
                         "%s: FlowFile %s was retried with '%s' by another processor (%s); its count starts again "
                         "at 1 (give this processor a retry attribute of its own)", context.name, flowfile.uuid,
                         self._attribute, counted_by)
            count = 1
        maximum_text = context.property("Maximum Retries").evaluate(flowfile)
        maximum = whole_number(maximum_text)
        if maximum is None:
            self.log.warning("%s: Maximum Retries is %r for FlowFile %s, not a whole number; routed to failure",
                             context.name, maximum_text, flowfile.uuid)
            session.transfer(flowfile, self.FAILED)
            return
        if count > maximum:
            extra = {name: value.evaluate(flowfile) or "" for name, value in self._exceeded.items()}
            flowfile = session.put_all_attributes(flowfile, {k: v for k, v in extra.items() if v.strip()})
            flowfile = session.remove_all_attributes(flowfile, [self._attribute, self._by])
            session.transfer(flowfile, self.RETRIES_EXCEEDED)
            return
        if self._penalize:
            flowfile = session.penalize(flowfile)
        flowfile = session.put_all_attributes(flowfile, {self._attribute: str(count), self._by: session.component_id})
        session.transfer(flowfile, self.RETRY)


ROUND_ROBIN = "round robin"
NEXT_AVAILABLE = "next available"
OVERFLOW = "overflow"


def _relationship_count(values: Mapping[str, str]) -> int:
    """Number of Relationships as configured (1 while it is not a positive whole number)."""
    number = whole_number(values.get("Number of Relationships", "1"))
    return number if number is not None and number > 0 else 1


class DistributeLoad(Processor):
    """Spreads FlowFiles over relationships ``1`` to Number of Relationships.

    A dynamic property named after a relationship's number gives it a weight (default 1): it takes
    that many FlowFiles in a row in each round. round robin goes round the weighted list and, when
    any relationship is unavailable, takes nothing and yields; next available goes round it skipping
    unavailable ones; overflow sends each FlowFile to the first available relationship in number
    order. A relationship is unavailable while a queue it feeds is under back pressure, as the
    engine last saw it (``session.available_relationships``); the processor is triggered while
    any relationship is available (``trigger_when_any_destination_available``, NiFi's
    ``@TriggerWhenAnyDestinationAvailable``), and when none is, it takes nothing and yields. The attribute
    ``distribute.load.relationship`` names the relationship. Provenance: a ROUTE event per
    FlowFile.
    """

    description = "Distributes FlowFiles over numbered relationships (round robin, next available, overflow)"
    dynamic_properties = True
    trigger_when_any_destination_available = True
    ATTRIBUTE = "distribute.load.relationship"
    properties = (
        PropertyDescriptor("Number of Relationships", "How many relationships the load is spread over", required=True,
                           default="1", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Distribution Strategy", "How the load is spread; relationship 1 weighs most in order",
                           required=True, default=ROUND_ROBIN,
                           allowable_values=(ROUND_ROBIN, NEXT_AVAILABLE, OVERFLOW)),
    )
    relationships = (Relationship("1", "Where to route FlowFiles for this relationship index"),)
    NIFI_TYPE = _STANDARD + "DistributeLoad"
    #: NiFi 1's load distribution service strategy, which flowactors has not: accepted only unset
    NIFI_FIXED = {"Hostnames": None, "Load Distribution Service ID": None}

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        return tuple(Relationship(str(number), "Where to route FlowFiles for this relationship index")
                     for number in range(1, _relationship_count(values) + 1))

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        count = _relationship_count(values)
        problems = []
        declared = self.descriptor_map()
        for name, value in ((k, v) for k, v in values.items() if k not in declared):
            number = whole_number(name)
            if number is None or not 1 <= number <= count or name != str(number):
                problems.append(f"dynamic property '{name}' must be named after a relationship, a number from 1 to "
                                f"{count} (Number of Relationships)")
            elif validators.POSITIVE_INTEGER(value):
                problems.append(f"the weight of relationship {name} is {value!r}; it must be a positive whole number")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        count = context.property("Number of Relationships").as_int()
        weights = {number: 1 for number in range(1, count + 1)}
        weights.update({int(name): int(value) for name, value in context.dynamic_properties.items()})
        self._names = [str(number) for number in range(1, count + 1)]
        self._weighted = [str(number) for number, weight in weights.items() for _ in range(weight)]
        self._strategy = context.property("Distribution Strategy").evaluate()
        self._counter = 0

    def on_trigger(self, context: ProcessContext, session) -> None:
        available = session.available_relationships()
        if not available or (self._strategy == ROUND_ROBIN and len(available) < len(self._names)):
            context.yield_()
            return
        flowfiles = session.get_batch()
        if not flowfiles:
            return
        targets = [self._target(available) for _ in flowfiles]
        marks = {name: {self.ATTRIBUTE: name} for name in set(targets)}
        flowfiles = session.put_attributes_batch(flowfiles, [marks[name] for name in targets])
        session.provenance.route_batch(flowfiles, targets)
        session.transfer_batch(flowfiles, targets)

    def _target(self, available: set[str]) -> str:
        """The relationship of the next FlowFile (``available`` holds at least one)."""
        if self._strategy == OVERFLOW:
            return next(name for name in self._names if name in available)
        while True:
            name = self._weighted[self._counter % len(self._weighted)]
            self._counter += 1
            if name in available:
                return name
