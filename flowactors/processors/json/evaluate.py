"""EvaluateJsonPath: JsonPath expressions evaluated against a FlowFile's JSON content."""

from __future__ import annotations

import logging
from typing import Mapping

from flowactors.processors._common import TO_ATTRIBUTE, TO_CONTENT, path_count_problems
from flowactors.processors._common import route_failure
from flowactors.processors.json._document import (
    MAX_STRING_LENGTH, NULL_REPRESENTATION, NULL_TEXTS, DocumentError, depth_checked, is_scalar, read_document, result_text,
)
from flowactors.processors.json.jsonpath import JsonPathError, PathNotFound, compile_path
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.relationships import FAILURE

log = logging.getLogger(__name__)

AUTO, JSON, SCALAR = "auto-detect", "json", "scalar"
IGNORE, WARN, SKIP = "ignore", "warn", "skip"


def path_problems(paths: Mapping[str, str]) -> list[str]:
    """One sentence per property whose value is not a JsonPath."""
    problems = []
    for name, text in paths.items():
        try:
            compile_path(text)
        except JsonPathError as err:
            problems.append(f"property '{name}': {err}")
    return problems


class EvaluateJsonPath(Processor):
    """Evaluates each dynamic property's JsonPath (its value; the property name is the attribute)
    against the FlowFile's content, read whole as one JSON document.

    Destination flowfile-attribute: each result goes into the attribute named after its property,
    and the FlowFile goes to matched; a definite path that finds nothing gives an empty attribute
    (Path Not Found Behavior ignore; warn also logs a warning) or none (skip). Destination
    flowfile-content: exactly one path, whose result replaces the content (matched), or unmatched
    when a definite path finds nothing. Return Type auto-detect is json for the content and scalar
    for attributes; with scalar, a result that is an object or an array sends the FlowFile to
    failure. Results are written as NiFi does (``_document.result_text``): objects and arrays as
    compact JSON, texts as they are, null as Null Value Representation says. Content that is not
    JSON, holds a text longer than Max String Length, or a path that cannot be evaluated (a
    function given what it cannot take) sends the FlowFile to failure unchanged, with
    ``flowactors.failure.reason``. Provenance: CONTENT_MODIFIED / ATTRIBUTES_MODIFIED (session).
    """

    description = "Evaluates JsonPath expressions against JSON content, into attributes or the content"
    dynamic_properties = True
    properties = (
        PropertyDescriptor("Destination", "Whether the results go to attributes (one per dynamic property) or "
                           "replace the content (exactly one dynamic property)", required=True,
                           default=TO_CONTENT, allowable_values=(TO_CONTENT, TO_ATTRIBUTE)),
        PropertyDescriptor("Return Type", "json: any result, written as JSON; scalar: only texts, numbers, booleans "
                           "and null; auto-detect: json for the content, scalar for attributes", required=True,
                           default=AUTO, allowable_values=(AUTO, JSON, SCALAR)),
        PropertyDescriptor("Path Not Found Behavior", "With attributes: what a path that finds nothing does: an empty "
                           "attribute (ignore), the same and a warning logged (warn), no attribute (skip)",
                           required=True, default=IGNORE, allowable_values=(WARN, IGNORE, SKIP)),
        NULL_REPRESENTATION,
        MAX_STRING_LENGTH,
    )
    MATCHED = Relationship("matched", "The paths were evaluated and the FlowFile changed by their results")
    UNMATCHED = Relationship("unmatched", "With the content as destination: the path found nothing")
    relationships = (MATCHED, UNMATCHED, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.EvaluateJsonPath"

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        declared = self.descriptor_map()
        paths = {name: value for name, value in values.items() if name not in declared}
        problems = path_problems(paths)
        return problems + path_count_problems(paths, values.get("Destination", TO_CONTENT), "JsonPath")

    def on_scheduled(self, context: ProcessContext) -> None:
        self._to_attributes = context.property("Destination").raw == TO_ATTRIBUTE
        kind = context.property("Return Type").raw
        self._scalar = kind == SCALAR or (kind == AUTO and self._to_attributes)
        self._not_found = context.property("Path Not Found Behavior").raw if self._to_attributes else IGNORE
        self._null = NULL_TEXTS[context.property("Null Value Representation").raw]
        self._max_string = context.property("Max String Length").as_data_size()
        self._paths = {name: compile_path(text) for name, text in context.dynamic_properties.items()}

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            try:
                with depth_checked():
                    results = self._evaluate(context, flowfile, read_document(session, flowfile, self._max_string))
            except (DocumentError, JsonPathError) as err:
                route_failure(context, session, flowfile, str(err))
                continue
            if results is None:
                session.transfer(flowfile, self.UNMATCHED)
            elif self._to_attributes:
                session.transfer(session.put_all_attributes(flowfile, results) if results else flowfile, self.MATCHED)
            else:
                [text] = results.values()
                session.transfer(session.write_bytes(flowfile, text.encode("utf-8")), self.MATCHED)

    def _evaluate(self, context: ProcessContext, flowfile, document) -> dict[str, str] | None:
        """Each property's result as text; None: the content's one path found nothing."""
        results: dict[str, str] = {}
        for name, path in self._paths.items():
            try:
                value = path.read(document)
            except PathNotFound:
                if self._not_found == WARN:
                    log.warning("%s: FlowFile %s: path %s (attribute %s) found nothing", context.name,
                                flowfile.uuid, path.text, name)
                if not self._to_attributes:
                    return None
                if self._not_found != SKIP:
                    results[name] = ""
                continue
            if self._scalar and not is_scalar(value):
                kind = "an object" if isinstance(value, dict) else "an array"
                raise JsonPathError(f"path {path.text} (property '{name}') found {kind}, not a scalar: set Return Type "
                                    f"to json to write it as JSON")
            results[name] = result_text(value, self._null)
        return results
