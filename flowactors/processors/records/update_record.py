"""UpdateRecord: each dynamic property a RecordPath naming fields of every record, its value what
they become (NiFi's UpdateRecord).

The records are changed as Python dicts (RecordPath works on dicts), a batch at a time: the batch
goes ``to_pylist``, each record is updated, and the columns a path touched are made Arrow again
(``_io.rebuild_batch``: the others are kept as they were read, without a copy). The schema written is the first batch's
after its update: a field the properties create is added, a field whose values no longer fit its
type is widened (``merge_types``), as NiFi's ``incorporateInactiveFields``; later batches are
conformed to it.
"""

from __future__ import annotations

import copy
from itertools import chain
from typing import Any, Iterator

import pyarrow as pa

from flowactors.processors.records._io import (ARROW_FAILURES, RECORD_READER, RECORD_WRITER, Records,
                                               is_flowfile_error, open_records, reader_and_writer, rebuild_batch,
                                               record_path_problems, route_failure, top_field_name,
                                               write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.record_path import FieldValue, RecordPath, RecordPathError, compile_path
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.records.schema import conform, nifi_type_name
from flowactors.sdk.relationships import FAILURE

LITERAL_VALUE, RECORD_PATH_VALUE = "Literal Value", "Record Path Value"
REPLACEMENT_VALUE_STRATEGY = PropertyDescriptor(
    "Replacement Value Strategy", "How the dynamic properties' values are read: as the value itself (Expression "
    "Language may read field.name, field.value, field.type and record.index), or as a RecordPath giving it",
    required=True, default=LITERAL_VALUE, allowable_values=(LITERAL_VALUE, RECORD_PATH_VALUE))


class UpdateRecord(Processor):
    """Updates the fields of each record that each dynamic property's RecordPath (its name) selects.

    With Literal Value, the property's value (Expression Language against the FlowFile's attributes
    and ``field.name``, ``field.value``, ``field.type``, ``record.index``, 1-based) is the new value,
    cast to the field's type where it fits; with Record Path Value, it is a RecordPath whose result
    is the new value (a relative path evaluated from each field it updates; several values become a
    record of them; none, null). A path selecting the root record replaces the record. A field that
    does not exist is created. success: the FlowFile with its records rewritten, ``record.count``,
    ``mime.type`` and the writer's attributes (Provenance: CONTENT_MODIFIED); failure: unchanged,
    with ``record.error.message`` (a record that cannot be read, a replacement path that does not
    compile or evaluate, a value that does not fit the written schema).
    """

    description = "Updates the fields of records that RecordPaths select, with literal values or other fields"
    properties = (RECORD_READER, RECORD_WRITER, REPLACEMENT_VALUE_STRATEGY)
    dynamic_properties = True
    SUCCESS = Relationship("success", "FlowFiles whose records were updated")
    relationships = (SUCCESS, Relationship(FAILURE.name, "FlowFiles whose records could not be read, updated or "
                                                         "written, unchanged"))

    def custom_validate(self, values) -> list[str]:
        dynamic = [name for name in values if name not in self.descriptor_map()]
        if not dynamic:
            return ["at least one RecordPath must be given, as a dynamic property's name"]
        problems = record_path_problems({name: name for name in dynamic}, "its name")
        if values.get(REPLACEMENT_VALUE_STRATEGY.name) == RECORD_PATH_VALUE:
            problems += record_path_problems({name: values[name] for name in dynamic}, "its value")
        return problems

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        by_path = context.property(REPLACEMENT_VALUE_STRATEGY.name).raw == RECORD_PATH_VALUE
        dynamic = context.dynamic_properties
        for flowfile in session.get_batch():
            try:
                updates = _Updates(flowfile, dynamic, by_path)
                with open_records(session, flowfile, reader) as records:
                    batches = updates.batches(records)
                    first = next(batches, None)
                    read_schema = first.schema if first is not None else records.schema
                    schema = writer.write_schema(flowfile.attributes, read_schema)
                    flowfile, _ = write_records(session, flowfile, writer, schema,
                                                chain([first] if first is not None else [], batches),
                                                size_hint=flowfile.size)
            except Exception as err:
                if not (is_flowfile_error(err) or isinstance(err, RecordPathError)):
                    raise
                route_failure(context, session, flowfile, err)
                continue
            session.transfer(flowfile, self.SUCCESS)


class _Updates:
    """The updates of one FlowFile: each (destination path, replacement) in property order, the
    replacement a compiled expression (Literal Value) or a RecordPath (Record Path Value, its text
    the property's value evaluated against the FlowFile)."""

    def __init__(self, flowfile: FlowFile, dynamic: dict[str, str], by_path: bool) -> None:
        self.flowfile = flowfile
        self.attributes = flowfile.attributes
        self.by_path = by_path
        self.steps: list[tuple[RecordPath, Any]] = []
        for name, value in dynamic.items():
            compiled = compile_value(value)
            if by_path:
                self.steps.append((compile_path(name), compile_path(compiled.evaluate(flowfile=flowfile))))
            else:
                self.steps.append((compile_path(name), compiled))
        self._casts: dict[tuple[str, pa.DataType], Any] = {}
        self._index = 0
        self._schema: pa.Schema | None = None

    def batches(self, records: Records) -> Iterator[pa.RecordBatch]:
        """Each batch of ``records`` updated: the first with the schema its update gives, the rest
        conformed to it."""
        for batch in records:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            touched: set[str] | None = set()
            for position, row in enumerate(rows):
                self._index += 1
                updated = self.update(row, batch.schema, touched)
                if updated is not row:
                    rows[position] = updated
                    touched = None   # a record replaced: every column may have changed
            built = rebuild_batch(batch, rows, touched, self._schema)
            if self._schema is None:
                self._schema = built.schema
                yield built
            else:
                yield conform(built, self._schema)

    def update(self, row: dict, schema: pa.Schema, touched: set[str] | None) -> dict:
        """``row`` with every property applied (the same dict, or the record replacing it)."""
        for destination, replacement in self.steps:
            fields = destination.evaluate(row, schema)
            if not fields:
                continue
            if len(fields) == 1 and fields[0].parent is None and isinstance(fields[0].value, dict):
                row = self._replace_root(row, schema, fields[0], replacement)
                continue
            for fv in fields:
                fv.update(self._value(row, schema, fv, replacement))
                if touched is not None:
                    touched.add(top_field_name(fv))
        return row

    def _replace_root(self, row: dict, schema: pa.Schema, root: FieldValue, replacement: Any) -> dict:
        if not self.by_path:
            raise RecordPathError(f"the root record can only be replaced by a Record Path Value, not by the literal "
                                  f"{replacement.text!r}")
        selected = replacement.evaluate(row, schema, None if replacement.is_absolute else root)
        if not selected:
            return row
        if len(selected) == 1 and isinstance(selected[0].value, dict):
            return copy.deepcopy(selected[0].value)
        return {fv.name: copy.deepcopy(fv.value) for fv in selected}

    def _value(self, row: dict, schema: pa.Schema, fv: FieldValue, replacement: Any) -> Any:
        if self.by_path:
            selected = replacement.evaluate(row, schema, None if replacement.is_absolute else fv)
            if not selected:
                return None
            if len(selected) == 1:
                return copy.deepcopy(selected[0].value)
            return {s.name: copy.deepcopy(s.value) for s in selected}
        if replacement.is_literal:
            text = replacement.evaluate()
        else:
            variables = {**self.attributes, "field.name": fv.name or "", "field.value": java_text(fv.value) or "",
                         "field.type": _type_name(fv), "record.index": str(self._index)}
            text = replacement.evaluate(variables, flowfile=self.flowfile)
        return self._cast(text, fv.type)

    def _cast(self, text: str, arrow_type: pa.DataType | None) -> Any:
        """``text`` as a value of ``arrow_type`` when it reads as one (NiFi coerces a literal to its
        field's type), else the text itself (the field then widens)."""
        if arrow_type is None or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            return text
        key = (text, arrow_type)
        if key not in self._casts:
            try:
                self._casts[key] = pa.scalar(text, pa.string()).cast(arrow_type).as_py()
            except ARROW_FAILURES:
                self._casts[key] = text
        return self._casts[key]


def _type_name(fv: FieldValue) -> str:
    if fv.type is not None:
        return nifi_type_name(pa.field(fv.name or "value", fv.type))
    return "STRING" if fv.value is None else type(fv.value).__name__.upper()
