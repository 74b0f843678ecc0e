"""JoltTransformJSON: NiFi's processor that rewrites JSON content with a Jolt specification."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Any, Callable, Mapping

from flowactors.processors._common import boolean_property, route_failure
from flowactors.processors.jolt.chain import OPERATIONS, Chain
from flowactors.processors.jolt.paths import JoltSpecError, JoltTransformError
from flowactors.processors.jolt.sort import Sort
from flowactors.processors.json._document import DocumentError, depth_checked, parse_document, read_contents
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS, reason

TRANSFORM, SPEC, CACHE_SIZE, PRETTY = "Jolt Transform", "Jolt Specification", "Transform Cache Size", "Pretty Print"
CUSTOM, SORT = "Custom", "Sort"

#: Jolt Transform's values (NiFi's display names) but Chain: the chain operation each runs alone
_OPERATION_OF = {"Shift": "shift", "Default": "default", "Remove": "remove", "Cardinality": "cardinality",
                 SORT: "sort", "Modify - Default": "modify-default-beta",
                 "Modify - Overwrite": "modify-overwrite-beta", "Modify - Define": "modify-define-beta"}
#: Jolt Transform's values -> compile(spec) -> a transform with .apply(document)
TRANSFORMS: dict[str, Callable[[Any], Any]] = {
    "Chain": Chain, **{name: OPERATIONS[operation][1] for name, operation in _OPERATION_OF.items()}}

#: NiFi's internal values of Jolt Transform (what a NiFi export holds)
_NIFI_TRANSFORMS = {
    "jolt-transform-chain": "Chain", "jolt-transform-shift": "Shift", "jolt-transform-default": "Default",
    "jolt-transform-remove": "Remove", "jolt-transform-card": "Cardinality", "jolt-transform-sort": SORT,
    "jolt-transform-modify-default": "Modify - Default", "jolt-transform-modify-overwrite": "Modify - Overwrite",
    "jolt-transform-modify-define": "Modify - Define", "jolt-transform-custom": CUSTOM,
}


def read_spec_text(value: str) -> str:
    """The spec a Jolt Specification value holds: its text, or, as NiFi allows, the contents of the
    file it names (a value that does not start as JSON and is the path of a file)."""
    stripped = value.strip()
    if stripped[:1] not in ("{", "[") and os.path.isfile(stripped):
        with open(stripped, encoding="utf-8") as spec_file:
            return spec_file.read()
    return value


def compile_spec(transform: str, spec_text: str | None) -> Any:
    """A compiled transform; JoltSpecError with one line saying what is wrong."""
    if transform == SORT:
        return Sort()
    if not spec_text or not spec_text.strip():
        raise JoltSpecError(f"'{SPEC}' must be set, or the transform must be 'Sort'")
    try:
        return TRANSFORMS[transform](json.loads(read_spec_text(spec_text)))
    except json.JSONDecodeError as err:
        if spec_text.strip()[:1] not in ("{", "[", '"') and err.pos == 0:
            raise JoltSpecError(f"the specification is neither JSON nor the path of a file: "
                                f"{spec_text.strip()[:80]!r}") from None
        raise JoltSpecError(f"the specification is not valid JSON: {err.msg} at line {err.lineno}, "
                            f"column {err.colno}") from None
    except OSError as err:
        raise JoltSpecError(f"the specification file can not be read: {err}") from None
    except RecursionError:
        raise JoltSpecError("the specification is nested too deeply") from None


def to_json(document: Any, pretty: bool) -> bytes:
    """JSON as NiFi writes it: compact, or indented by two with ``"key" : value``."""
    if pretty:
        return json.dumps(document, ensure_ascii=False, indent=2, separators=(",", " : ")).encode()
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


class JoltTransformJSON(Processor):
    """Transforms the JSON content of each FlowFile with a Jolt specification.

    The spec is compiled once per distinct text (a spec without expressions once, when
    scheduled; one with ``${...}`` per FlowFile's evaluated text, the last Transform Cache Size
    kept) and then only applied. Each FlowFile's content is parsed whole, transformed and written
    back as JSON (compact, or indented with Pretty Print), with ``mime.type`` set to
    ``application/json``. Content that is not JSON (read as the JSON processors read it:
    ``_document.parse_document``), a spec that does not compile for that FlowFile (its expressions
    evaluated) and a transform that fails go to failure unchanged but for
    ``flowactors.failure.reason`` saying why (also logged as a warning). The Custom transform (a Java class) can not run here: validation refuses it.

    Provenance: the session's CONTENT_MODIFIED for each FlowFile transformed.
    """

    description = "Transforms JSON content with a Jolt specification"
    properties = (
        PropertyDescriptor(TRANSFORM, "The Jolt transformation the specification is for", required=True,
                           default="Chain", allowable_values=(*TRANSFORMS, CUSTOM)),
        PropertyDescriptor(SPEC, "The Jolt specification (JSON text, or the path of a file holding it); "
                           "not needed for Sort", expression_language=True),
        PropertyDescriptor(CACHE_SIZE, "How many compiled specifications to keep (more than one helps only when "
                           "the specification holds expressions)", required=True, default="1",
                           validator=validators.POSITIVE_INTEGER),
        boolean_property(PRETTY, False, "Whether to write the JSON indented"),
    )
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.jolt.JoltTransformJSON"
    #: NiFi 1's class (NiFi 2 moved it out of the standard bundle)
    NIFI_FORMER_TYPES = ("org.apache.nifi.processors.standard.JoltTransformJSON",)
    NIFI_PROPERTY_NAMES = {"jolt-transform": TRANSFORM, "Jolt Transformation DSL": TRANSFORM, "jolt-spec": SPEC,
                           "pretty_print": PRETTY}
    NIFI_VALUES = {TRANSFORM: _NIFI_TRANSFORMS}
    NIFI_FIXED = {"JSON Source": "FLOW_FILE", "JSON Source Attribute": None, "Custom Transformation Class Name": None,
                  "jolt-custom-class": None, "Custom Module Directory": None, "jolt-custom-modules": None,
                  "Retain Unicode Escape Sequences": "false"}
    NIFI_IGNORED = ("Max String Length",)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        transform = values.get(TRANSFORM, "Chain")
        if transform == CUSTOM:
            return [f"property '{TRANSFORM}': Custom runs a Java transformation class, which flowactors can not "
                    f"load; write the transformation as a Chain of Jolt's operations instead"]
        spec = values.get(SPEC)
        if transform != SORT and (spec is None or not spec.strip()):
            return [f"property '{SPEC}' must be set, or '{TRANSFORM}' must be 'Sort'"]
        if transform == SORT or not compile_value(spec).is_literal:
            return []   # a spec with expressions is known only per FlowFile
        try:
            compile_spec(transform, compile_value(spec).evaluate())
        except JoltSpecError as err:
            return [f"property '{SPEC}': {err}"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._transform_name = context.property(TRANSFORM).evaluate()
        self._spec = context.property(SPEC)
        self._pretty = context.property(PRETTY).as_bool()
        self._cache_size = context.property(CACHE_SIZE).as_int()
        self._cache: OrderedDict[str | None, Any] = OrderedDict()
        self._constant = self._spec.raw is None or compile_value(self._spec.raw).is_literal

    def _compiled(self, spec_text: str | None) -> Any:
        """The transform for this spec text, compiled once while it stays in the cache."""
        cached = self._cache.get(spec_text)
        if cached is not None:
            self._cache.move_to_end(spec_text)
            return cached
        transform = compile_spec(self._transform_name, spec_text)
        self._cache[spec_text] = transform
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return transform

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()
        if not flowfiles:
            return
        if self._constant:
            texts = [self._spec.evaluate()] * len(flowfiles)
        else:
            texts = compile_value(self._spec.raw).evaluate_each(flowfiles)
        done, outputs = [], []
        for flowfile, text, content in zip(flowfiles, texts, read_contents(session, flowfiles)):
            try:
                if isinstance(content, DocumentError):
                    raise content
                with depth_checked():
                    output = to_json(self._compiled(text).apply(parse_document(content, allow_null=True)),
                                     self._pretty)
            except ValueError as err:   # the content's, the spec's and the transform's errors are ValueErrors
                route_failure(context, session, flowfile, _reason(err))
                continue
            done.append(flowfile)
            outputs.append(output)
        if done:
            done = session.write_bytes_batch(done, outputs)
            done = session.put_attributes_batch(done, {"mime.type": "application/json"})
            session.transfer_batch(done, SUCCESS)


def _reason(err: ValueError) -> str:
    if isinstance(err, DocumentError):
        return str(err)
    if isinstance(err, (JoltSpecError, JoltTransformError)):
        return f"the Jolt transform failed: {reason(err)}"
    return f"the transform failed: {reason(err)}"
