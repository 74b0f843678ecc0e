"""AttributesToJSON and AttributesToCSV: a FlowFile's attributes written as one JSON object or
one CSV line, into an attribute or the content."""

from __future__ import annotations

import re
from typing import Mapping

from flowactors.processors._common import REGEX_VALIDATOR, TO_ATTRIBUTE, TO_CONTENT, boolean_property
from flowactors.processors._common import route_failure
from flowactors.processors.json._document import DocumentError, depth_checked, parse_document, to_json
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor
from flowactors.sdk.relationships import FAILURE, SUCCESS

ESCAPED, NESTED = "Escaped", "Nested"
#: NiFi's core attributes (CoreAttributes), in its order
CORE_ATTRIBUTES = ("filename", "path", "absolute.path", "uuid", "priority", "mime.type", "discard.reason",
                   "alternate.identifier")
#: a comma outside double quotes (how AttributesToCSV splits its Attribute List)
_LIST_COMMA = re.compile(r',(?=(?:[^"]*"[^"]*")*[^"]*$)')


def _destination(attribute: str) -> PropertyDescriptor:
    return PropertyDescriptor("Destination", f"Whether the result goes into the attribute {attribute} or replaces "
                              "the content", required=True, default=TO_ATTRIBUTE,
                              allowable_values=(TO_ATTRIBUTE, TO_CONTENT))


_INCLUDE_CORE = boolean_property("Include Core Attributes", True, "Whether the core attributes (filename, path, "
                                 "uuid, mime.type, ...) are included")
_REGEX = PropertyDescriptor("Attributes Regular Expression", "The attributes whose whole name matches are included "
                            "(with those of the list)", expression_language=True, validator=REGEX_VALIDATOR)


class AttributesToJSON(Processor):
    """Writes attributes as one JSON object of texts, into the attribute JSONAttributes or as the
    content (Destination; the content then gets mime.type application/json).

    Which attributes: those of Attributes List (comma-separated; one the FlowFile lacks is written
    as an empty text, or null with Null Value true) and those whose whole name matches Attributes
    Regular Expression (evaluated once, without a FlowFile, as NiFi's environment scope); with
    neither, every attribute, the core ones only with Include Core Attributes. JSON Handling
    Strategy Nested writes a value that looks like a JSON object or array (``{...}`` / ``[...]``
    once trimmed) as that JSON rather than as a text; one that is not valid JSON then sends the
    FlowFile to failure with ``flowactors.failure.reason``. Pretty Print indents the content as
    Jackson's default printer. Provenance: ATTRIBUTES_MODIFIED / CONTENT_MODIFIED (session).
    """

    description = "Writes FlowFile attributes as a JSON object, into an attribute or the content"
    properties = (
        PropertyDescriptor("Attributes List", "Comma-separated attribute names to include (empty: every attribute)"),
        _REGEX,
        _destination("JSONAttributes"),
        _INCLUDE_CORE,
        boolean_property("Null Value", False, "Whether a listed attribute the FlowFile lacks is null (true) or an "
                         "empty text (false)"),
        PropertyDescriptor("JSON Handling Strategy", "Escaped: every value a text; Nested: values holding a JSON "
                           "object or array written as JSON", required=True, default=ESCAPED,
                           allowable_values=(ESCAPED, NESTED)),
        boolean_property("Pretty Print", False, "Whether the content is indented (Destination flowfile-content)"),
    )
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.AttributesToJSON"
    NIFI_PROPERTY_NAMES = {"attributes-to-json-regex": "Attributes Regular Expression"}
    NIFI_VALUES = {"JSON Handling Strategy": {"ESCAPED": ESCAPED, "NESTED": NESTED}}

    def on_scheduled(self, context: ProcessContext) -> None:
        listed = context.property("Attributes List").raw or ""
        self._listed = [name.strip() for name in listed.split(",") if name.strip()] if listed.strip() else None
        regex = context.property("Attributes Regular Expression")
        self._regex = _evaluated_regex(regex.evaluate() or "") if regex.is_set else None
        self._to_content = context.property("Destination").raw == TO_CONTENT
        self._core = context.property("Include Core Attributes").as_bool()
        self._null = context.property("Null Value").as_bool()
        self._nested = context.property("JSON Handling Strategy").raw == NESTED
        self._pretty = self._to_content and context.property("Pretty Print").as_bool()

    def selected(self, attributes: Mapping[str, str]) -> dict[str, str | None]:
        """The attributes written, in order (the class docstring)."""
        if self._listed is None and self._regex is None:
            return {k: v for k, v in attributes.items() if self._core or k not in CORE_ATTRIBUTES}
        chosen: dict[str, str | None] = {}
        for name in self._listed or ():
            chosen[name] = attributes.get(name, None if self._null else "")
        if self._regex is not None:
            chosen.update((k, v) for k, v in attributes.items() if self._regex.fullmatch(k))
        return chosen

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            values: dict[str, object] = dict(self.selected(flowfile.attributes))
            try:
                with depth_checked():
                    if self._nested:
                        values = {k: _nested(k, v) for k, v in values.items()}
                    text = to_json(values, self._pretty)
            except DocumentError as err:
                route_failure(context, session, flowfile, str(err))
                continue
            if self._to_content:
                flowfile = session.write_bytes(flowfile, text.encode("utf-8"))
                flowfile = session.put_attribute(flowfile, "mime.type", "application/json")
            else:
                flowfile = session.put_attribute(flowfile, "JSONAttributes", text)
            session.transfer(flowfile, SUCCESS)


class RegexError(ValueError):
    """Attributes Regular Expression, its expressions evaluated, is no regular expression."""


def _evaluated_regex(text: str) -> re.Pattern[str]:
    """Attributes Regular Expression once its expressions are evaluated; ``RegexError`` naming the
    property when that is no regular expression."""
    try:
        return re.compile(text)
    except re.error as err:
        raise RegexError(f"Attributes Regular Expression {text!r} is not a regular expression once evaluated: "
                         f"{err}") from None


def _nested(name: str, value: str | None) -> object:
    trimmed = (value or "").strip()
    if (trimmed.startswith("{") and trimmed.endswith("}")) or (trimmed.startswith("[") and trimmed.endswith("]")):
        try:
            return parse_document(trimmed)
        except DocumentError as err:
            raise DocumentError(f"attribute '{name}' cannot be written as nested JSON: {err}") from None
    return value


def escape_csv(value: str) -> str:
    """A CSV field as commons-text's escapeCsv writes it: quoted (quotes doubled) when it holds a
    comma, a quote, a carriage return or a line feed."""
    if any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _unescape_csv(field: str) -> str:
    if len(field) >= 2 and field.startswith('"') and field.endswith('"'):
        inner = field[1:-1]
        if any(c in inner for c in ',"\r\n'):
            return inner.replace('""', '"')
    return field


class AttributesToCSV(Processor):
    """Writes attributes as one CSV line (values, and with Include Schema a line of their names),
    into the attributes CSVData (and CSVSchema) or as the content (names line, a line feed, values;
    mime.type text/csv).

    Which attributes: those of Attribute List (expression language; names separated by commas
    outside double quotes, so ``"a,b"`` names the attribute ``a,b``), an absent or empty one
    written as an empty field or ``null`` (Null Value), and those whose whole name matches
    Attributes Regular Expression (evaluated per FlowFile); with neither, every attribute. Include
    Core Attributes true writes the core attributes the FlowFile has too (their new ones at the
    end); false leaves out those the list does not name. Fields are quoted as commons-text's
    escapeCsv does (``escape_csv``). Provenance: ATTRIBUTES_MODIFIED / CONTENT_MODIFIED (session).
    """

    description = "Writes FlowFile attributes as a CSV line, into an attribute or the content"
    properties = (
        PropertyDescriptor("Attribute List", "Comma-separated attribute names to include (a name holding a comma in "
                           "double quotes; empty: every attribute)", expression_language=True),
        _REGEX,
        _destination("CSVData"),
        _INCLUDE_CORE,
        boolean_property("Null Value", False, "Whether an absent or empty listed attribute is written null (true) "
                         "or as an empty field (false)"),
        boolean_property("Include Schema", False, "Whether the attribute names are written too: into CSVSchema, or "
                         "as the first line of the content"),
    )
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.AttributesToCSV"
    NIFI_PROPERTY_NAMES = {"attribute-list": "Attribute List", "attributes-regex": "Attributes Regular Expression",
                           "destination": "Destination", "include-core-attributes": "Include Core Attributes",
                           "null-value": "Null Value", "include-schema": "Include Schema"}

    def on_scheduled(self, context: ProcessContext) -> None:
        self._to_content = context.property("Destination").raw == TO_CONTENT
        self._core = context.property("Include Core Attributes").as_bool()
        self._null = "null" if context.property("Null Value").as_bool() else ""
        self._schema = context.property("Include Schema").as_bool()

    def selected(self, context: ProcessContext, flowfile) -> dict[str, str]:
        """The attributes written, in order (the class docstring)."""
        attributes = flowfile.attributes
        listed_text = context.property("Attribute List").evaluate(flowfile) or ""
        listed = [_unescape_csv(part.strip()) for part in _LIST_COMMA.split(listed_text)] if listed_text.strip() else []
        regex_text = context.property("Attributes Regular Expression").evaluate(flowfile)
        regex = _evaluated_regex(regex_text) if regex_text else None
        if not listed and regex is None:
            chosen = dict(attributes)
        else:
            chosen = {name: attributes.get(name) or self._null for name in listed}
            if regex is not None:
                chosen.update((k, v) for k, v in attributes.items() if regex.fullmatch(k))
        for core in CORE_ATTRIBUTES:
            if self._core and core in attributes:
                chosen[core] = attributes[core] or self._null
            elif not self._core and core not in listed:
                chosen.pop(core, None)
        return chosen

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            try:
                chosen = self.selected(context, flowfile)
            except RegexError as err:
                route_failure(context, session, flowfile, str(err))
                continue
            values = ",".join(escape_csv(v) for v in chosen.values())
            names = ",".join(escape_csv(k) for k in chosen)
            if self._to_content:
                content = f"{names}\n{values}" if self._schema else values
                flowfile = session.write_bytes(flowfile, content.encode("utf-8"))
                flowfile = session.put_attribute(flowfile, "mime.type", "text/csv")
            else:
                flowfile = session.put_all_attributes(
                    flowfile, {"CSVData": values, **({"CSVSchema": names} if self._schema else {})})
            session.transfer(flowfile, SUCCESS)
