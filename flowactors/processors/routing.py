"""Routing processors: RouteOnAttribute, RouteOnContent (the funnel is an SDK component: sdk/ports.py)."""

from __future__ import annotations

import functools
import logging
import re
from typing import Mapping, Sequence

from flowactors.sdk import FlowFile
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.processors._common import charset_property, decode_prefix, dynamic_regexes, read_prefix

log = logging.getLogger(__name__)

UNMATCHED = Relationship("unmatched", "FlowFiles that match none of the conditions")
MATCHED = Relationship("matched", "FlowFiles that match the conditions")


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _dynamic(cls: type[Processor], values: Mapping[str, str]) -> dict[str, str]:
    declared = {d.name for d in cls.properties}
    return {k: v for k, v in values.items() if k not in declared}


def _route_all(session, flowfile: FlowFile, relationships: Sequence[str], attribute: str | None = None) -> None:
    """Transfer to every relationship (clones for all but the first), a ROUTE event for each copy."""
    copies = [flowfile] + [session.clone(flowfile) for _ in relationships[1:]]
    for copy, relationship in zip(copies, relationships):
        if attribute is not None:
            copy = session.put_attribute(copy, attribute, relationship)
        session.provenance.route(copy, relationship)
        session.transfer(copy, relationship)


class RouteOnAttribute(Processor):
    """Routes FlowFiles by boolean expressions over their attributes, one per dynamic property.

    With Routing Strategy "Route to Property name" every dynamic property is a relationship of
    its own (the processor's relationships depend on its configuration: see ``relationships_for``)
    and a FlowFile goes to each relationship whose expression is true - cloned when more than one
    is - or to unmatched. With "Route to 'matched' if all match" / "... if any matches" there are
    only matched and unmatched. The attribute ``RouteOnAttribute.Route`` is set to the
    relationship's name. Provenance: a ROUTE event per FlowFile (and a CLONE for each extra copy).
    """

    description = "Routes FlowFiles by expressions over their attributes"
    dynamic_properties = True
    PROPERTY_NAME = "Route to Property name"
    ALL_MATCH = "Route to 'matched' if all match"
    ANY_MATCH = "Route to 'matched' if any matches"
    ROUTE_ATTRIBUTE = "RouteOnAttribute.Route"
    properties = (
        PropertyDescriptor("Routing Strategy", "How to use the dynamic properties' expressions", required=True,
                           default=PROPERTY_NAME, allowable_values=(PROPERTY_NAME, ALL_MATCH, ANY_MATCH)),
    )
    relationships = (UNMATCHED,)

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        strategy = values.get("Routing Strategy", cls.PROPERTY_NAME)
        if strategy != cls.PROPERTY_NAME:
            return (MATCHED, UNMATCHED)
        dynamic = [Relationship(name, f"FlowFiles for which '{value}' is true")
                   for name, value in _dynamic(cls, values).items() if name != UNMATCHED.name]
        return (*dynamic, UNMATCHED)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        dynamic = _dynamic(type(self), values)
        if not dynamic:
            return ["RouteOnAttribute needs at least one dynamic property (name -> boolean expression)"]
        if values.get("Routing Strategy", self.PROPERTY_NAME) == self.PROPERTY_NAME and UNMATCHED.name in dynamic:
            return ["a dynamic property cannot be named 'unmatched' (that relationship always exists)"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._strategy = context.property("Routing Strategy").evaluate()
        self._conditions = {name: compile_value(value) for name, value in context.dynamic_properties.items()}

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()
        if not flowfiles:
            return
        # each condition over the batch, evaluated once per distinct input; a route decided once
        # per distinct row of verdicts
        results = []
        for condition in self._conditions.values():
            column = condition.evaluate_each(flowfiles)
            verdict = {value: value.strip().lower() == "true" for value in set(column)}
            results.append(list(map(verdict.__getitem__, column)))
        names = list(self._conditions)
        decided: dict[tuple, list[str]] = {}
        routes = []
        for row in zip(*results):
            targets = decided.get(row)
            if targets is None:
                targets = decided[row] = self._targets(names, row)
            routes.append(targets)
        if any(len(targets) > 1 for targets in routes):   # clones: one FlowFile at a time
            for flowfile, targets in zip(flowfiles, routes):
                _route_all(session, flowfile, targets, self.ROUTE_ATTRIBUTE)
            return
        relationships = [targets[0] for targets in routes]
        marks = {r: {self.ROUTE_ATTRIBUTE: r} for r in set(relationships)}
        flowfiles = session.put_attributes_batch(flowfiles, [marks[r] for r in relationships])
        session.provenance.route_batch(flowfiles, relationships)
        session.transfer_batch(flowfiles, relationships)

    def _targets(self, names: list[str], verdicts: tuple[bool, ...]) -> list[str]:
        """The relationships a FlowFile goes to, given each condition's verdict."""
        matched = [name for name, true in zip(names, verdicts) if true]
        if self._strategy == self.PROPERTY_NAME:
            return matched or [UNMATCHED.name]
        if self._strategy == self.ALL_MATCH:
            return [MATCHED.name if len(matched) == len(names) else UNMATCHED.name]
        return [MATCHED.name if matched else UNMATCHED.name]


class RouteOnContent(Processor):
    """Routes FlowFiles by regular expressions over their content, one relationship per dynamic property.

    The first Content Buffer Size bytes of the content, decoded with Character Set, are tested
    against each dynamic property's regular expression (which may hold attribute expressions,
    evaluated per FlowFile first). Match Requirement "content must match exactly" needs the
    expression to match the whole (buffered) text, "content must contain match" a match anywhere.
    A FlowFile goes to every relationship that matched (cloned when more than one did) or to
    unmatched. Provenance: a ROUTE event per FlowFile (and a CLONE for each extra copy).
    """

    description = "Routes FlowFiles by regular expressions over their content"
    dynamic_properties = True
    MATCH_ALL = "content must match exactly"
    CONTAIN = "content must contain match"
    properties = (
        PropertyDescriptor("Match Requirement", "Whether the expression must match the whole content or a part",
                           required=True, default=MATCH_ALL, allowable_values=(MATCH_ALL, CONTAIN)),
        charset_property(),
        PropertyDescriptor("Content Buffer Size", "The most content bytes read and tested", required=True,
                           default="1 MB", validator=validators.DATA_SIZE),
    )
    relationships = (UNMATCHED,)

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        dynamic = [Relationship(name, f"FlowFiles whose content matches {value!r}")
                   for name, value in _dynamic(cls, values).items() if name != UNMATCHED.name]
        return (*dynamic, UNMATCHED)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        dynamic = _dynamic(type(self), values)
        if not dynamic:
            return ["RouteOnContent needs at least one dynamic property (relationship -> regular expression)"]
        if UNMATCHED.name in dynamic:
            return ["a dynamic property cannot be named 'unmatched' (that relationship always exists)"]
        return dynamic_regexes(dynamic)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._whole = context.property("Match Requirement").evaluate() == self.MATCH_ALL
        self._charset = context.property("Character Set").evaluate()
        self._buffer = context.property("Content Buffer Size").as_data_size()
        self._patterns: dict[str, re.Pattern | object] = {}
        for name, value in context.dynamic_properties.items():
            compiled = compile_value(value)
            self._patterns[name] = re.compile(compiled.evaluate()) if compiled.is_literal else compiled

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            with session.read(flowfile) as stream:
                data = read_prefix(stream, self._buffer)
            text = decode_prefix(data, self._charset, truncated=len(data) == self._buffer)
            matched = []
            for name, pattern in self._patterns.items():
                if not isinstance(pattern, re.Pattern):
                    text_pattern = pattern.evaluate(flowfile.attributes, flowfile=flowfile)
                    try:
                        pattern = _compiled(text_pattern)
                    except re.error as err:
                        log.warning("%s: property '%s' evaluated to an invalid regular expression %r for %s "
                                    "(%s); treated as no match", context.name, name, text_pattern, flowfile.uuid, err)
                        continue
                found = pattern.fullmatch(text) if self._whole else pattern.search(text)
                if found:
                    matched.append(name)
            _route_all(session, flowfile, matched or [UNMATCHED.name])
