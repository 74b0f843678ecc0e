"""SplitJson: one FlowFile per element of the array a JsonPath finds in the content."""

from __future__ import annotations

import uuid as uuid_module
from typing import Mapping

from flowactors.processors._common import route_failure
from flowactors.processors.json._document import (
    MAX_STRING_LENGTH, NULL_REPRESENTATION, NULL_TEXTS, DocumentError, depth_checked, read_document, result_text,
)
from flowactors.processors.json.evaluate import path_problems
from flowactors.processors.json.jsonpath import JsonPathError, PathNotFound, compile_path
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE

#: parents taken a trigger: each may fan out to very many children in one session
SPLIT_PARENTS_PER_TRIGGER = 100


class SplitJson(Processor):
    """Splits the array that JsonPath Expression finds in the content (read whole as one JSON
    document) into one FlowFile per element.

    Each split holds its element as NiFi writes a JsonPath result (objects and arrays as compact
    JSON, texts as they are, null as Null Value Representation says) and gets fragment.identifier,
    fragment.index (0-based, as NiFi's SplitJson), fragment.count and segment.original.filename;
    the original goes to original with fragment.identifier, fragment.count and
    segment.original.filename. Content that is not JSON (or holds a text longer than Max String
    Length), a definite path that finds nothing, or a result that is not an array sends the
    FlowFile to failure unchanged, with ``flowactors.failure.reason``; nothing then goes to
    original. An empty array gives no split (fragment.count 0). Provenance: a FORK event from the
    original to its splits.
    """

    description = "Splits a JSON array, found with a JsonPath, into one FlowFile per element"
    properties = (
        PropertyDescriptor("JsonPath Expression", "A JsonPath to the array to split", required=True,
                           validator=validators.NON_EMPTY),
        NULL_REPRESENTATION,
        MAX_STRING_LENGTH,
    )
    ORIGINAL = Relationship("original", "The original FlowFile, once split")
    SPLIT = Relationship("split", "One FlowFile per element of the array")
    relationships = (ORIGINAL, SPLIT, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.SplitJson"

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        text = values.get("JsonPath Expression")
        return path_problems({"JsonPath Expression": text}) if text and text.strip() else []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._path = compile_path(context.property("JsonPath Expression").raw)
        self._null = NULL_TEXTS[context.property("Null Value Representation").raw]
        self._max_string = context.property("Max String Length").as_data_size()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch(min(context.batch_size, SPLIT_PARENTS_PER_TRIGGER)):
            try:
                with depth_checked():
                    contents = self._elements(read_document(session, flowfile, self._max_string))
            except (DocumentError, JsonPathError) as err:
                route_failure(context, session, flowfile, str(err))
                continue
            identifier, count = str(uuid_module.uuid4()), str(len(contents))
            original_name = flowfile.attributes.get("filename", "")
            children = [session.create(parent=flowfile) for _ in contents]
            if children:
                children = session.write_bytes_batch(children, contents)
                children = session.put_attributes_batch(children, [
                    {"fragment.identifier": identifier, "fragment.index": str(index), "fragment.count": count,
                     "segment.original.filename": original_name} for index in range(len(children))])
                session.provenance.fork(flowfile, children)
                session.transfer_batch(children, self.SPLIT)
            flowfile = session.put_all_attributes(flowfile, {
                "fragment.identifier": identifier, "fragment.count": count, "segment.original.filename": original_name})
            session.transfer(flowfile, self.ORIGINAL)

    def _elements(self, document) -> list[bytes]:
        """The content of each split; ``JsonPathError`` when the path finds no array."""
        try:
            found = self._path.read(document)
        except PathNotFound:
            raise JsonPathError(f"JsonPath {self._path.text} found nothing to split") from None
        if not isinstance(found, list):
            kind = "an object" if isinstance(found, dict) else "a single value"
            raise JsonPathError(f"JsonPath {self._path.text} found {kind}, not an array: nothing to split")
        return [result_text(item, self._null).encode("utf-8") for item in found]
