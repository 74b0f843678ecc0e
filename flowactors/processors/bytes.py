"""Byte-range processors: ModifyBytes (trim a FlowFile's content) and SegmentContent (cut it into
segments of a fixed size, by reference)."""

from __future__ import annotations

import uuid as uuid_module
from typing import Mapping

from flowactors.sdk import ContentRepositoryError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import SUCCESS
from flowactors.sdk.units import parse_data_size
from flowactors.processors._common import boolean_property, copy_bytes

_STANDARD = "org.apache.nifi.processors.standard."
#: parents SegmentContent takes per trigger: each may fan out to very many segments in one session
SEGMENT_PARENTS_PER_TRIGGER = 100


def _data_size(context: ProcessContext, name: str, flowfile) -> int:
    """The data size property ``name`` evaluated against ``flowfile``; ValueError, one line naming
    the property, when the value is not a data size."""
    value = context.property(name).evaluate(flowfile) or ""
    try:
        return parse_data_size(value)
    except ValueError as err:
        raise ValueError(f"{name} evaluated to {value!r}, which is not a data size (e.g. 12 B, 1 KB): {err}") from None


class ModifyBytes(Processor):
    """Removes Start Offset bytes from the start and End Offset bytes from the end of the content.

    Both are data sizes (``12 B``, ``1 KB``) and may be attribute expressions, evaluated per
    FlowFile. When they add up to the size or more, or Remove All Content is true, the content
    becomes empty; when both are 0 it is left as it is. The kept range is copied chunk by chunk
    into a new claim (the content is never whole in memory): the session offers a zero-copy range
    only as a new FlowFile (``clone``), and ModifyBytes keeps the FlowFile, as NiFi's does. An
    offset that does not evaluate to a data size raises ``ValueError`` (one line naming the
    property and the value): the session rolls back and the engine penalizes the FlowFile in its
    queue, as NiFi's ProcessException. Provenance: CONTENT_MODIFIED (from the session).
    """

    description = "Removes bytes from the start and the end of the content"
    properties = (
        PropertyDescriptor("Start Offset", "Number of bytes removed at the start of the content (a data size)",
                           required=True, default="0 B", validator=validators.DATA_SIZE, expression_language=True),
        PropertyDescriptor("End Offset", "Number of bytes removed at the end of the content (a data size)",
                           required=True, default="0 B", validator=validators.DATA_SIZE, expression_language=True),
        boolean_property("Remove All Content", False, "Remove the whole content, whatever the offsets"),
    )
    relationships = (SUCCESS,)
    NIFI_TYPE = _STANDARD + "ModifyBytes"

    def on_trigger(self, context: ProcessContext, session) -> None:
        remove_all = context.property("Remove All Content").as_bool()
        for flowfile in session.get_batch():
            start = _data_size(context, "Start Offset", flowfile)
            end = _data_size(context, "End Offset", flowfile)
            keep = 0 if remove_all else flowfile.size - start - end
            if keep <= 0:
                flowfile = session.write_bytes(flowfile, b"")
            elif keep < flowfile.size:
                flowfile = session.rewrite(flowfile, lambda source, out, start=start, keep=keep: _copy_range(
                    source, out, start, keep))
            session.transfer(flowfile, SUCCESS)


def _copy_range(source, out, start: int, length: int) -> None:
    """Copy ``length`` bytes from ``start`` of ``source`` to ``out``, a chunk at a time."""
    if start:
        source.seek(start)
    if copy_bytes(source, out, length) < length:
        raise ContentRepositoryError("the content ended early")


class SegmentContent(Processor):
    """Cuts the content into segments of Segment Size bytes (the last one shorter), **by reference**.

    Each segment is a new FlowFile referencing a byte range of the original's claim (no byte is
    copied, whatever the size), with the original's attributes and segment.original.filename,
    fragment.identifier, fragment.index (1-based) and fragment.count; the original goes to original
    with fragment.identifier and fragment.count. Content no larger than Segment Size gives one
    segment, a clone of the original, and the original gets all four attributes, as NiFi's. Segment
    Size may be an attribute expression; one that does not evaluate to a positive data size raises
    ``ValueError`` (one line): the session rolls back and the engine penalizes the FlowFile in its
    queue, as NiFi's ProcessException. Provenance: FORK from the original to its segments (CLONE
    for a single one).
    """

    description = "Cuts the content into segments of a fixed size (by reference)"
    properties = (
        PropertyDescriptor("Segment Size", "The largest size of a segment (a data size)", required=True,
                           validator=validators.DATA_SIZE, expression_language=True),
    )
    SEGMENTS = Relationship("segments", "The segments; content no larger than Segment Size gives one, a copy")
    ORIGINAL = Relationship("original", "The original FlowFile")
    relationships = (SEGMENTS, ORIGINAL)
    NIFI_TYPE = _STANDARD + "SegmentContent"

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        size = values.get("Segment Size", "")
        if "${" not in size and parse_data_size(size) <= 0:   # a data size: the validator checked it
            return ["property 'Segment Size' must be at least 1 B"]
        return []

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch(min(context.batch_size, SEGMENT_PARENTS_PER_TRIGGER)):
            size = _data_size(context, "Segment Size", flowfile)
            if size <= 0:
                raise ValueError(f"Segment Size evaluated to {size} bytes: a segment must hold at least one byte")
            self._segment(session, flowfile, size)

    def _segment(self, session, flowfile, size: int) -> None:
        identifier = str(uuid_module.uuid4())
        shared = {"segment.original.filename": flowfile.attributes.get("filename", ""),
                  "fragment.identifier": identifier}
        if flowfile.size <= size:
            flowfile = session.put_all_attributes(flowfile, {**shared, "fragment.index": "1", "fragment.count": "1"})
            session.transfer(session.clone(flowfile), self.SEGMENTS)
            session.transfer(flowfile, self.ORIGINAL)
            return
        ranges = [(offset, min(size, flowfile.size - offset)) for offset in range(0, flowfile.size, size)]
        count = str(len(ranges))
        for index, segment in enumerate(session.split(flowfile, ranges), start=1):
            segment = session.put_all_attributes(segment, {**shared, "fragment.index": str(index),
                                                           "fragment.count": count})
            session.transfer(segment, self.SEGMENTS)
        session.transfer(session.put_all_attributes(flowfile, {"fragment.identifier": identifier,
                                                               "fragment.count": count}), self.ORIGINAL)
