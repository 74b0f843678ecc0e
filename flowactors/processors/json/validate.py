"""ValidateJson: a FlowFile's JSON content validated against a JSON Schema, with the jsonschema
library (every draft NiFi offers)."""

from __future__ import annotations

import json
import os
from typing import Any, BinaryIO, Iterator, Mapping

from referencing.exceptions import Unresolvable

from flowactors.processors._common import CHUNK, iter_chunks
from flowactors.processors._common import route_failure
from flowactors.processors.json._document import (
    MAX_STRING_LENGTH, DocumentError, depth_checked, parse_document, read_document, reading_content,
)
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.relationships import FAILURE

#: NiFi's JSON Schema Version choices (display names) and the name of jsonschema's validator of each
DRAFTS = {"Draft 4": "Draft4Validator", "Draft 6": "Draft6Validator", "Draft 7": "Draft7Validator",
          "Draft 2019-09": "Draft201909Validator", "Draft 2020-12": "Draft202012Validator"}
FLOWFILE, JSON_LINES = "FlowFile", "JSON Lines"
ERRORS_ATTRIBUTE = "json.validation.errors"


class SchemaProblem(ValueError):
    """A JSON Schema property that does not give a schema of its draft (one line saying why)."""


def load_schema(text: str, draft: str) -> Any:
    """The validator of JSON Schema ``text`` (the schema itself, or the path of a file holding
    it) for ``draft``; ``SchemaProblem`` when it is not JSON or not a schema of that draft."""
    source = text.strip()
    if source[:1] not in ("{", "[") and source not in ("true", "false") and os.path.isfile(source):
        try:
            with open(source, "rb") as handle:
                source = handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise SchemaProblem(f"the schema file {text.strip()!r} cannot be read: {err}") from None
    try:
        schema = json.loads(source)
    except ValueError as err:
        raise SchemaProblem(f"JSON schema not valid: it is neither JSON nor a file path ({err})") from None
    # jsonschema is imported here, where a schema is compiled: it is a fifth of the time every
    # process takes to import the standard processors, and only ValidateJson needs it
    import jsonschema
    validator = getattr(jsonschema, DRAFTS[draft])
    try:
        validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as err:
        where = err.json_path if hasattr(err, "json_path") else "$"
        raise SchemaProblem(f"JSON schema not valid for {draft}: {where}: {err.message}") from None
    return validator(schema)


def _schema_problem(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


class ValidateJson(Processor):
    """Validates the JSON content against JSON Schema (the schema's text, or the path of a file
    holding it) of JSON Schema Version, with the jsonschema library.

    Input Format FlowFile reads the whole content as one document; JSON Lines reads each non-blank
    line as one (the first invalid line decides). A valid FlowFile goes to valid; an invalid one to
    invalid with ``json.validation.errors``: each error as ``location: message`` in brackets (with
    JSON Lines, ``JSON at line N is invalid: [...]``). Content that is not JSON (or holds a text
    longer than Max String Length) goes to failure with ``flowactors.failure.reason``. A schema
    that is not JSON or not a schema of its draft makes the processor not valid. Formats
    (``"format": "email"``) are annotations, not checked. Provenance: a ROUTE event a FlowFile,
    as NiFi's.
    """

    description = "Validates JSON content against a JSON Schema"
    properties = (
        PropertyDescriptor("JSON Schema", "The JSON Schema the content must match: its text, or the path of a file "
                           "holding it", required=True, validator=_schema_problem),
        PropertyDescriptor("JSON Schema Version", "The JSON Schema specification the schema follows", required=True,
                           default="Draft 2020-12", allowable_values=tuple(DRAFTS)),
        PropertyDescriptor("Input Format", "FlowFile: the content is one JSON document; JSON Lines: each line is one",
                           required=True, default=FLOWFILE, allowable_values=(FLOWFILE, JSON_LINES)),
        MAX_STRING_LENGTH,
    )
    VALID = Relationship("valid", "The content matches the schema")
    INVALID = Relationship("invalid", "The content does not match the schema (json.validation.errors says how)")
    relationships = (VALID, INVALID, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.ValidateJson"
    NIFI_PROPERTY_NAMES = {"Schema Version": "JSON Schema Version"}
    NIFI_VALUES = {"JSON Schema Version": {"DRAFT_4": "Draft 4", "DRAFT_6": "Draft 6", "DRAFT_7": "Draft 7",
                                           "DRAFT_2019_09": "Draft 2019-09", "DRAFT_2020_12": "Draft 2020-12"},
                   "Input Format": {"FLOW_FILE": FLOWFILE, "JSON_LINES": JSON_LINES}}
    NIFI_FIXED = {"Schema Access Strategy": "SCHEMA_CONTENT_PROPERTY", "JSON Schema Registry": None}
    NIFI_IGNORED = ("Schema Name",)   # NiFi exports its default, ${schema.name}, though only a registry reads it

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        text, draft = values.get("JSON Schema"), values.get("JSON Schema Version", "Draft 2020-12")
        if not text or not text.strip() or draft not in DRAFTS:
            return []   # reported by the properties' own checks
        try:
            load_schema(text, draft)
        except SchemaProblem as err:
            return [f"property 'JSON Schema': {err}"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._validator = load_schema(context.property("JSON Schema").raw, context.property("JSON Schema Version").raw)
        self._lines = context.property("Input Format").raw == JSON_LINES
        self._max_string = context.property("Max String Length").as_data_size()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            try:
                with depth_checked():
                    errors = self._lines_errors(session, flowfile) if self._lines else \
                        _errors(self._validator, read_document(session, flowfile, self._max_string, allow_null=True))
            except DocumentError as err:
                session.provenance.route(flowfile, FAILURE.name, str(err))
                route_failure(context, session, flowfile, str(err))
                continue
            if errors:
                flowfile = session.put_attribute(flowfile, ERRORS_ATTRIBUTE, errors)
                session.provenance.route(flowfile, self.INVALID.name)
                session.transfer(flowfile, self.INVALID)
            else:
                session.provenance.route(flowfile, self.VALID.name)
                session.transfer(flowfile, self.VALID)

    def _lines_errors(self, session, flowfile) -> str:
        """The errors of the first JSON line that does not match (empty: every line matches);
        ``DocumentError`` when a line is not JSON or the content cannot be read."""
        with reading_content(), session.read(flowfile) as stream:
            for number, line in enumerate(_lines(stream), start=1):
                if not line.strip():
                    continue
                try:
                    document = parse_document(line, self._max_string, allow_null=True)
                except DocumentError as err:
                    raise DocumentError(f"JSON Lines: line {number}: {err}") from None
                errors = _errors(self._validator, document)
                if errors:
                    return f"JSON at line {number} is invalid: {errors}"
        return ""


def _lines(stream: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    """The stream's lines (without their line feed), read ``size`` bytes at a time; a line over
    many chunks is joined once, not copied again with each chunk."""
    pending: list[bytes] = []
    for chunk in iter_chunks(stream, size):
        first, *rest = chunk.split(b"\n")
        pending.append(first)
        if rest:
            yield b"".join(pending)
            yield from rest[:-1]
            pending = [rest[-1]]
    if any(pending):
        yield b"".join(pending)


def _errors(validator: Any, document: Any) -> str:
    """``[location: message, ...]`` for each way the document fails the schema; empty when none.
    ``DocumentError`` when the schema refers to a document it does not hold."""
    try:
        found = sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except Unresolvable as err:   # a $ref to a document not in the schema: nothing is fetched
        raise DocumentError(f"the schema's $ref cannot be resolved (only references inside the schema are): "
                            f"{err}") from None
    return "[" + ", ".join(f"{e.json_path}: {e.message}" for e in found) + "]" if found else ""

