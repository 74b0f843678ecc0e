"""GenerateFlowFile: a source of test data for demos and benchmarks."""

from __future__ import annotations

import codecs
import os
from typing import Mapping

from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, validators
from flowactors.sdk.relationships import SUCCESS
from flowactors.processors._common import boolean_property, charset_property
_ALPHANUMERIC = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: maps every byte value to an alphanumeric character (a slightly uneven but fast random text)
_TEXT_TABLE = bytes(_ALPHANUMERIC[i % len(_ALPHANUMERIC)] for i in range(256))


def random_data(size: int, text: bool) -> bytes:
    data = os.urandom(size)
    return data.translate(_TEXT_TABLE) if text else data


class GenerateFlowFile(Processor):
    """Creates FlowFiles with random or custom content, ``Batch Size`` per trigger.

    Without ``Unique FlowFiles`` the content is generated once when the processor is scheduled and
    every FlowFile gets a copy of it; with it every FlowFile gets fresh random bytes. With Data
    Format Text and Custom Text set, the content is that text (expressions evaluated for each
    FlowFile) and File Size is ignored. Every dynamic property becomes an attribute (its value may
    hold expressions, evaluated against the new FlowFile's attributes). ``Max FlowFiles``
    (a flowactors addition) bounds the total this processor generates in a run so demos and
    benchmarks terminate; once reached the processor yields. The total is shared out over the
    processor's concurrent tasks, so the flow as a whole generates exactly that many. Provenance:
    one CREATE event per FlowFile (emitted by the session).
    """

    description = "Creates FlowFiles with random or custom content (a source for tests and benchmarks)"
    input_required = False
    dynamic_properties = True
    properties = (
        PropertyDescriptor("File Size", "The size of each FlowFile's content (ignored with Custom Text)",
                           required=True, default="0 B", validator=validators.DATA_SIZE),
        PropertyDescriptor("Batch Size", "FlowFiles created per trigger", required=True, default="1",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Data Format", "Random alphanumeric text or random bytes", required=True,
                           default="Text", allowable_values=("Text", "Binary")),
        boolean_property("Unique FlowFiles", False,
                         "Whether every FlowFile gets fresh random content (slower) or a copy of the same"),
        PropertyDescriptor("Custom Text", "Content to use instead of random data (Data Format Text only)",
                           expression_language=True),
        charset_property("The character set used to encode Custom Text"),
        PropertyDescriptor("Mime Type", "The value of the mime.type attribute of the FlowFiles"),
        PropertyDescriptor("Max FlowFiles", "FlowFiles to generate over the whole run; 0 means no limit "
                           "(a flowactors addition so that demos and benchmarks terminate)",
                           required=True, default="0", validator=validators.NON_NEGATIVE_INTEGER),
    )
    relationships = (SUCCESS,)

    def __init__(self) -> None:
        self._generated = 0
        self._data: bytes | None = None

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get("Custom Text") and values.get("Data Format", "Text") != "Text":
            return ["Custom Text can only be used with Data Format Text"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._size = context.property("File Size").as_data_size() or 0
        self._batch = context.property("Batch Size").as_int()
        self._text = context.property("Data Format").evaluate() == "Text"
        self._unique = context.property("Unique FlowFiles").as_bool()
        self._custom = context.property("Custom Text") if context.property("Custom Text").is_set else None
        self._charset = codecs.lookup(context.property("Character Set").evaluate()).name
        self._mime = context.property("Mime Type").evaluate()
        total = context.property("Max FlowFiles").as_int() or 0
        tasks = max(1, context.concurrent_tasks)
        # this task's share of the total, so that all tasks together make exactly ``total``
        self._limit = total // tasks + (1 if context.instance < total % tasks else 0) if total else 0
        self._unlimited = total == 0
        self._attributes = {name: compile_value(value) for name, value in context.dynamic_properties.items()}
        if self._data is None and self._custom is None and not self._unique:
            self._data = random_data(self._size, self._text)

    def on_trigger(self, context: ProcessContext, session) -> None:
        count = self._batch
        if not self._unlimited:
            count = min(count, self._limit - self._generated)
            if count <= 0:
                context.yield_()
                return
        if self._custom is None:
            self._generate_batch(session, count)
        else:
            self._generate_custom(session, count)
        session.commit_async(on_success=lambda: self._count_generated(count))

    def _generate_batch(self, session, count: int) -> None:
        """Random or repeated content: the whole batch through the session's batch calls."""
        flowfiles = session.create_batch(count)
        if self._unique and self._size:
            flowfiles = session.write_bytes_batch(flowfiles, [random_data(self._size, self._text)
                                                              for _ in range(count)])
        elif not self._unique and self._data:
            flowfiles = session.write_bytes_batch(flowfiles, self._data)
        if self._attributes or self._mime:
            columns = {name: value.evaluate_each(flowfiles) for name, value in self._attributes.items()}
            values = [dict(zip(columns, row)) for row in zip(*columns.values())] if columns else [{}] * count
            if self._mime:
                values = [{**v, "mime.type": self._mime} for v in values]
            flowfiles = session.put_attributes_batch(flowfiles, values)
        session.transfer_batch(flowfiles, SUCCESS)

    def _generate_custom(self, session, count: int) -> None:
        """Custom Text, its expressions evaluated for each new FlowFile."""
        for _ in range(count):
            flowfile = session.create()
            data = (self._custom.evaluate(flowfile) or "").encode(self._charset)
            if data:
                flowfile = session.write_bytes(flowfile, data)
            extra = {name: value.evaluate(flowfile.attributes, flowfile=flowfile)
                     for name, value in self._attributes.items()}
            if self._mime:
                extra["mime.type"] = self._mime
            if extra:
                flowfile = session.put_all_attributes(flowfile, extra)
            session.transfer(flowfile, SUCCESS)

    def _count_generated(self, count: int) -> None:
        """Counted only once the commit is durable: a failed commit makes them again."""
        self._generated += count
