"""NiFi's FreeFormTextRecordSetWriter as a controller service (docs/records/freeform.md): each
record written as one line, the ``Text`` property evaluated with the expression language where
``${field}`` is the record's field value (as text) and the FlowFile's attributes are there too
(a field wins over an attribute of its name, unless the field is null, as in NiFi)."""

from __future__ import annotations

from collections import ChainMap
from typing import BinaryIO, Mapping

import pyarrow as pa

from flowactors.sdk.expression import ExpressionError, compile_value
from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.records.api import RecordError, RecordSetWriter, RecordSetWriterFactory, WriteResult
from flowactors.sdk.services import ControllerService, ServiceContext
from flowactors.services.records.textual import TemporalFormats, as_text

__all__ = ["FreeFormTextRecordSetWriter"]

MIME_TYPE = "text/plain"


TEXT = PropertyDescriptor("Text", "What is written for each record (a line): ${field} is the record's field, FlowFile "
                          "attributes can be named too", required=True, expression_language=True,
                          validator=validators.NON_EMPTY)
CHARACTER_SET = PropertyDescriptor("Character Set", "The character set the text is written in", required=True,
                                   default="UTF-8", validator=validators.CHARSET)


class _FreeFormWriter(RecordSetWriter):
    """One content's text: the Text evaluated for each record, a line each."""

    def __init__(self, out: BinaryIO, text: str, charset: str, attributes: Mapping[str, str]):
        self._out, self._text, self._charset = out, compile_value(text), charset
        self._attributes = dict(attributes)
        self._formats = TemporalFormats()
        self._count = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        columns = [as_text(c, self._formats).to_pylist() for c in batch.columns]
        lines = []
        for row in zip(*columns) if columns else [()] * batch.num_rows:
            fields = {n: v for n, v in zip(names, row) if v is not None}
            try:
                lines.append(self._text.evaluate(ChainMap(fields, self._attributes)))
            except ExpressionError as err:
                raise RecordError(f"'Text' cannot be evaluated for record {self._count + len(lines)}: {err}") from None
        if lines:
            self._out.write(("\n".join(lines) + "\n").encode(self._charset))
        self._count += batch.num_rows

    def finish(self) -> WriteResult:
        return WriteResult(self._count, {"mime.type": MIME_TYPE})


class FreeFormTextRecordSetWriter(ControllerService, RecordSetWriterFactory):
    """Writes each record as a line of free-form text; NiFi's FreeFormTextRecordSetWriter."""

    description = "Writes each record as a line of text made with the expression language"
    properties = (TEXT, CHARACTER_SET)
    NIFI_PROPERTY_NAMES: dict[str, str] = {}
    NIFI_VALUES: dict[str, dict[str, str]] = {}

    def on_enabled(self, context: ServiceContext) -> None:
        self._text = context.property(TEXT.name).raw or ""
        self._charset = context.property(CHARACTER_SET.name).raw or "UTF-8"

    def mime_type(self) -> str:
        return MIME_TYPE

    def write_schema(self, attributes: Mapping[str, str], read_schema: pa.Schema | None) -> pa.Schema:
        """The records' own schema (the text names the fields it writes)."""
        return read_schema if read_schema is not None else pa.schema([])

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        return _FreeFormWriter(out, self._text, self._charset, attributes)
