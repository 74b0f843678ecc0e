"""PartitionRecord: a FlowFile's records grouped by the values each dynamic property's RecordPath
gives them, one FlowFile a group (NiFi's PartitionRecord).

Where every path is a plain top-level field of a scalar type (``/name``), Arrow groups the
records (``Table.group_by``, the order of first appearance); otherwise each record is a dict and
each path is evaluated on it. A group's records are taken out of the FlowFile's records with
``Table.take`` and written a FlowFile each.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

from flowactors.processors.records._io import (RECORD_READER, RECORD_WRITER, is_flowfile_error, open_records,
                                               reader_and_writer, record_path_problems, remove_all, route_failure,
                                               scalar_top_field, write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, Relationship
from flowactors.sdk.record_path import RecordPath, RecordPathError, compile_path
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.relationships import FAILURE

_ROW = "__flowactors_partition_row"


class PartitionRecord(Processor):
    """Groups each FlowFile's records by the values of the dynamic properties' RecordPaths (each
    property's value a path; its name the attribute that holds the group's value).

    success: one FlowFile a group, a child of the original, holding the group's records in their
    order, with an attribute a property when its path gave one scalar value that is not null
    (``java_text`` of it), ``record.count``, ``mime.type``, the writer's attributes, and
    ``fragment.identifier`` / ``fragment.index`` (groups in the order of their first record) /
    ``fragment.count`` / ``segment.original.filename``. original: the FlowFile as it came.
    failure: the original, unchanged, with ``record.error.message``, when its records cannot be
    read or written or a path does not compile or evaluate (no group is sent then). Provenance:
    the session's FORK of the original into the groups, each group's CONTENT_MODIFIED.
    """

    description = "Splits a FlowFile's records into groups of records sharing the values of RecordPaths"
    properties = (RECORD_READER, RECORD_WRITER)
    dynamic_properties = True
    SUCCESS = Relationship("success", "A FlowFile for each group of records")
    ORIGINAL = Relationship("original", "The FlowFile whose records were partitioned")
    relationships = (SUCCESS, ORIGINAL, Relationship(FAILURE.name, "FlowFiles whose records could not be read, "
                                                                   "partitioned or written, unchanged"))

    def custom_validate(self, values) -> list[str]:
        dynamic = {name: value for name, value in values.items() if name not in self.descriptor_map()}
        if not dynamic:
            return ["at least one RecordPath must be given, as a dynamic property's value"]
        return record_path_problems(dynamic, "its value")

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        dynamic = context.dynamic_properties
        for flowfile in session.get_batch():
            made: list[FlowFile] = []
            try:
                paths = {name: compile_path(compile_value(value).evaluate(flowfile=flowfile))
                         for name, value in dynamic.items()}
                with open_records(session, flowfile, reader) as records:
                    table = pa.Table.from_batches(list(records), schema=records.schema)
                groups = _groups(table, paths)
                schema = writer.write_schema(flowfile.attributes, table.schema)
                fragment = str(uuid.uuid4())
                for index, (rows, attributes) in enumerate(groups):
                    child = session.create(flowfile)
                    made.append(child)
                    extra = {**attributes, "fragment.identifier": fragment, "fragment.index": str(index),
                             "fragment.count": str(len(groups)),
                             "segment.original.filename": flowfile.attributes.get("filename", "")}
                    part = table.take(rows)
                    made[-1], _ = write_records(session, child, writer, schema, part.to_batches(),
                                                flowfile.attributes, extra=extra)
            except Exception as err:
                if not (is_flowfile_error(err) or isinstance(err, RecordPathError)):
                    raise
                remove_all(session, made)
                route_failure(context, session, flowfile, err)
                continue
            for child in made:
                session.transfer(child, self.SUCCESS)
            session.transfer(flowfile, self.ORIGINAL)


def _groups(table: pa.Table, paths: dict[str, RecordPath]) -> list[tuple[pa.Array, dict[str, str]]]:
    """The groups of ``table``'s records: (their row numbers, the attributes they share), in the
    order of each group's first record."""
    if table.num_rows == 0:
        return []
    columns = {name: scalar_top_field(path, table.schema) for name, path in paths.items()}
    if all(column is not None for column in columns.values()):
        return _arrow_groups(table, columns)
    return _record_groups(table, paths)


def _arrow_groups(table: pa.Table, columns: dict[str, str | None]) -> list[tuple[pa.Array, dict[str, str]]]:
    keys = list(dict.fromkeys(c for c in columns.values() if c is not None))
    indexed = table.select(keys).append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    grouped = indexed.group_by(keys, use_threads=False).aggregate([(_ROW, "list")])
    values = {key: grouped.column(key).to_pylist() for key in keys}
    found = []
    for index, rows in enumerate(grouped.column(_ROW + "_list").combine_chunks()):
        attributes = {name: java_text(values[column][index]) for name, column in columns.items()
                      if values[column][index] is not None}
        found.append((rows.values, attributes))
    return found


def _record_groups(table: pa.Table, paths: dict[str, RecordPath]) -> list[tuple[pa.Array, dict[str, str]]]:
    groups: dict[tuple, tuple[list[int], dict[str, str]]] = {}
    row_number = 0
    for batch in table.to_batches():
        for row in batch.to_pylist(maps_as_pydicts="strict"):
            selected = {name: [fv.value for fv in path.evaluate(row, table.schema)] for name, path in paths.items()}
            key = tuple(_frozen(values) for values in selected.values())
            group = groups.get(key)
            if group is None:
                group = groups[key] = ([], _attributes(selected))
            group[0].append(row_number)
            row_number += 1
    return [(pa.array(rows, pa.int64()), attributes) for rows, attributes in groups.values()]


def _attributes(selected: dict[str, list]) -> dict[str, str]:
    """An attribute for each path that gave one scalar value that is not null (as NiFi)."""
    return {name: java_text(values[0]) for name, values in selected.items()
            if len(values) == 1 and values[0] is not None and not isinstance(values[0], (dict, list, tuple))}


def _frozen(value: Any) -> Any:
    """``value`` made hashable (lists as tuples, dicts as tuples of items), equal when equal."""
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _frozen(v)) for k, v in value.items()))
    return (type(value).__name__, value) if isinstance(value, bool) else value
