"""Processors about attributes: UpdateAttribute, LogAttribute, ExtractText."""

from __future__ import annotations

import logging
import re
from typing import Mapping

from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import SUCCESS
from flowactors.processors._common import (
    REGEX_VALIDATOR, boolean_property, charset_property, decode_prefix, dynamic_regexes, read_prefix,
)


class UpdateAttribute(Processor):
    """Sets attributes from its dynamic properties (name = attribute, value = expression) and deletes some.

    Every expression is evaluated against the FlowFile's attributes as they were when it arrived,
    so properties do not see each other's results. ``Delete Attributes Expression`` is a regular
    expression (it may itself hold expressions): the attributes the FlowFile had on arrival whose
    whole name matches it are removed, even one a property has just set (as NiFi); ``uuid`` is
    never changed. FlowFiles go to success in batches. Provenance: an ATTRIBUTES_MODIFIED event
    per changed FlowFile (from the session).
    """

    description = "Updates the attributes of FlowFiles with expressions"
    dynamic_properties = True
    properties = (
        PropertyDescriptor("Delete Attributes Expression", "A regular expression; existing attributes whose "
                           "name matches it are deleted", expression_language=True, validator=REGEX_VALIDATOR),
    )
    relationships = (SUCCESS,)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._updates = {name: compile_value(value) for name, value in context.dynamic_properties.items()}

    def on_trigger(self, context: ProcessContext, session) -> None:
        delete = context.property("Delete Attributes Expression")
        updates = self._updates
        if not delete.is_set:   # the batch path: each value evaluated once per distinct input
            flowfiles = session.get_batch()
            if updates and flowfiles:
                columns = {name: value.evaluate_each(flowfiles) for name, value in updates.items()}
                if all(column.count(column[0]) == len(column) for column in columns.values()):
                    values: dict | list = {name: column[0] for name, column in columns.items()}   # one for all
                else:
                    values = [dict(zip(columns, row)) for row in zip(*columns.values())]
                flowfiles = session.put_attributes_batch(flowfiles, values)
            session.transfer_batch(flowfiles, SUCCESS)
            return
        for flowfile in session.get_batch():
            attributes = flowfile.attributes
            pattern = re.compile(delete.evaluate(flowfile))
            doomed = [k for k in attributes if k != "uuid" and pattern.fullmatch(k)]
            if updates:
                values = {name: value.evaluate(attributes, flowfile=flowfile) for name, value in updates.items()}
                flowfile = session.put_all_attributes(flowfile, values)
            if doomed:
                flowfile = session.remove_all_attributes(flowfile, doomed)
            session.transfer(flowfile, SUCCESS)


#: NiFi's log level names and Python's levels for them ("trace" is level 5): LogAttribute's and LogMessage's
LOG_LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "error": logging.ERROR}


class LogAttribute(Processor):
    """Logs each FlowFile's attributes (and optionally its content) and passes it on to success.

    The log goes to the Python logger ``flowactors.processors.LogAttribute`` at Log Level ("trace"
    is level 5). Which attributes are logged: those named in Attributes to Log and those matching
    Attributes to Log by Regular Expression, minus Attributes to Ignore and those matching
    Attributes to Ignore by Regular Expression. With Log Payload the content is logged too, decoded
    with Character Set, at most Maximum Payload Size bytes of it (a flowactors addition; NiFi logs
    the whole content). Nothing is read when the logger would drop the message. Provenance: none
    beyond the session's (the FlowFile is unchanged).
    """

    description = "Logs FlowFile attributes and optionally content"
    logger = logging.getLogger("flowactors.processors.LogAttribute")
    properties = (
        PropertyDescriptor("Log Level", "The level to log at", required=True, default="info",
                           allowable_values=tuple(LOG_LEVELS)),
        boolean_property("Log Payload", False, "Whether to log the content too"),
        PropertyDescriptor("Attributes to Log", "Comma-separated attribute names to log (empty: all that "
                           "match the regular expression)"),
        PropertyDescriptor("Attributes to Log by Regular Expression", "Attributes whose name matches are logged",
                           default=".*", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Attributes to Ignore", "Comma-separated attribute names not to log"),
        PropertyDescriptor("Attributes to Ignore by Regular Expression", "Attributes whose name matches are "
                           "not logged", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Log prefix", "Text put in the separator lines, to find the messages in the log"),
        charset_property("The character set to decode the content with"),
        PropertyDescriptor("Maximum Payload Size", "The most content bytes logged", required=True,
                           default="1 MB", validator=validators.DATA_SIZE),
    )
    relationships = (SUCCESS,)

    def on_scheduled(self, context: ProcessContext) -> None:
        def names(prop: str) -> set[str]:
            raw = context.property(prop).evaluate() or ""
            return {n.strip() for n in raw.split(",") if n.strip()}

        self._level = LOG_LEVELS[context.property("Log Level").evaluate()]
        self._payload = context.property("Log Payload").as_bool()
        self._include = names("Attributes to Log")
        include_regex = context.property("Attributes to Log by Regular Expression").evaluate()
        self._include_regex = re.compile(include_regex) if include_regex else None
        self._ignore = names("Attributes to Ignore")
        ignore_regex = context.property("Attributes to Ignore by Regular Expression").evaluate()
        self._ignore_regex = re.compile(ignore_regex) if ignore_regex else None
        self._prefix = context.property("Log prefix").evaluate() or ""
        self._charset = context.property("Character Set").evaluate()
        self._max_payload = context.property("Maximum Payload Size").as_data_size()

    def _logged(self, name: str) -> bool:
        if name in self._ignore or (self._ignore_regex is not None and self._ignore_regex.fullmatch(name)):
            return False
        if name in self._include:
            return True
        if self._include and self._include_regex is not None and self._include_regex.pattern == ".*":
            return False  # explicit names given and the regex left at its default: only those
        return self._include_regex is not None and bool(self._include_regex.fullmatch(name))

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()
        if self.logger.isEnabledFor(self._level):
            for flowfile in flowfiles:
                self.logger.log(self._level, "%s", self._message(session, flowfile))
        for flowfile in flowfiles:
            session.transfer(flowfile, SUCCESS)

    def _message(self, session, flowfile) -> str:
        dashes = "-" * 50
        lines = [f"{dashes}{self._prefix}", "Standard FlowFile Attributes",
                 f"Key: 'entryDate'{' ' * 8}Value: '{flowfile.entry_date}'",
                 f"Key: 'lineageStartDate'{' ' * 1}Value: '{flowfile.lineage_start_date}'",
                 f"Key: 'fileSize'{' ' * 9}Value: '{flowfile.size}'",
                 "FlowFile Attribute Map Content"]
        for name in sorted(flowfile.attributes):
            if self._logged(name):
                lines.append(f"Key: '{name}'\n  Value: '{flowfile.attributes[name]}'")
        lines.append(f"{dashes}{self._prefix}")
        if self._payload:
            with session.read(flowfile) as stream:
                data = read_prefix(stream, self._max_payload + 1)
            truncated = len(data) > self._max_payload
            text = decode_prefix(data[: self._max_payload], self._charset, truncated)
            lines.append(text + (f"\n... (content truncated at {self._max_payload} bytes)" if truncated else ""))
        return "\n".join(lines)


class ExtractText(Processor):
    """Evaluates a regular expression per dynamic property against the content and keeps the captures.

    For a property ``name`` whose expression matches, group 1 goes into ``name`` and every group
    ``i`` into ``name.i`` (``name.0`` is the whole match when Include Capture Group 0 is true);
    empty or unmatched groups are skipped and values are cut at Maximum Capture Group Length. With
    Enable repeating capture group, every match of the expression is captured and the index keeps
    counting across matches (``name.j``, j one-up over every group of every match). Regular
    expressions are Python's. Only the first Maximum Buffer Size bytes of
    the content are read (decoded with Character Set). A FlowFile goes to matched when at least one
    expression matched, else to unmatched. Provenance: ATTRIBUTES_MODIFIED for matched FlowFiles
    (from the session).
    """

    description = "Extracts text from content into attributes with regular expressions"
    dynamic_properties = True
    properties = (
        charset_property(),
        PropertyDescriptor("Maximum Buffer Size", "The most content bytes read and searched", required=True,
                           default="1 MB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Maximum Capture Group Length", "The longest value kept for a capture group",
                           required=True, default="1024", validator=validators.POSITIVE_INTEGER),
        boolean_property("Enable Case-insensitive Matching", False, "Python's re.IGNORECASE"),
        boolean_property("Enable DOTALL Mode", False, "'.' matches newlines too (re.DOTALL)"),
        boolean_property("Enable Multiline Mode", False, "'^' and '$' match at every line (re.MULTILINE)"),
        boolean_property("Include Capture Group 0", True, "Whether the whole match goes into name.0"),
        boolean_property("Enable repeating capture group", False, "Whether to capture every match, not just the first"),
    )
    MATCHED = Relationship("matched", "At least one expression matched")
    UNMATCHED = Relationship("unmatched", "No expression matched")
    relationships = (MATCHED, UNMATCHED)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        dynamic = {k: v for k, v in values.items() if k not in self.descriptor_map()}
        if not dynamic:
            return ["ExtractText needs at least one dynamic property (attribute name -> regular expression)"]
        return dynamic_regexes(dynamic)

    def on_scheduled(self, context: ProcessContext) -> None:
        flags = 0
        if context.property("Enable Case-insensitive Matching").as_bool():
            flags |= re.IGNORECASE
        if context.property("Enable DOTALL Mode").as_bool():
            flags |= re.DOTALL
        if context.property("Enable Multiline Mode").as_bool():
            flags |= re.MULTILINE
        self._patterns = {name: re.compile(value, flags) for name, value in context.dynamic_properties.items()}
        self._charset = context.property("Character Set").evaluate()
        self._buffer = context.property("Maximum Buffer Size").as_data_size()
        self._max_length = context.property("Maximum Capture Group Length").as_int()
        self._group_zero = context.property("Include Capture Group 0").as_bool()
        self._repeat = context.property("Enable repeating capture group").as_bool()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            with session.read(flowfile) as stream:
                data = read_prefix(stream, self._buffer)
            text = decode_prefix(data, self._charset, truncated=len(data) == self._buffer)
            results: dict[str, str] = {}
            for name, pattern in self._patterns.items():
                results.update(self._captures(name, pattern, text))
            if results:
                session.transfer(session.put_all_attributes(flowfile, results), self.MATCHED)
            else:
                session.transfer(flowfile, self.UNMATCHED)

    def _captures(self, name: str, pattern: re.Pattern, text: str) -> dict[str, str]:
        """``name.j`` for every group of the first match (of every match when repeating), j one-up."""
        start = 0 if self._group_zero else 1
        out: dict[str, str] = {}
        matches = pattern.finditer(text) if self._repeat else filter(None, [pattern.search(text)])
        j = start
        for number, match in enumerate(matches):
            for group in range(start, pattern.groups + 1):
                value = match.group(group)
                if value:
                    value = value[: self._max_length]
                    out[f"{name}.{j}"] = value
                    if group == 1 and number == 0:
                        out[name] = value
                j += 1
        return out
