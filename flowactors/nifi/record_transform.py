"""Driving a NiFi ``RecordTransform`` over one FlowFile, as NiFi's RecordTransformProxy does.

The FlowFile's records are read with the Record Reader (a format of ``flowactors.sdk.record_formats``:
CSV, JSON Lines or Parquet, where NiFi names a reader service), each handed to ``transform`` as a
JSON-like dict with the input schema (an Arrow schema here, a Java RecordSchema in NiFi) and the
input's attributes. Results are grouped by relationship and partition; each group becomes one
new FlowFile (a child of the input, with its attributes) written with the Record Writer, carrying
``record.count``, ``mime.type`` and each partition key with its value as text. The input goes to
``original``. If anything fails, nothing is emitted and the input goes to ``failure``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from nifiapi.properties import PropertyDescriptor
from nifiapi.recordtransform import CachingAttributeMap

READER, WRITER = "Record Reader", "Record Writer"


def record_descriptors() -> list[PropertyDescriptor]:
    """The two properties NiFi puts before a record transform's own: the record formats."""
    try:
        from flowactors.sdk import record_formats as records  # pyarrow: an optional dependency (spark extra)
    except ImportError as err:
        raise RuntimeError(f"NiFi Python record transforms read and write records with pyarrow, which is not "
                           f"installed ({err}): pip install 'flowactors[spark]'") from None

    return [
        PropertyDescriptor(READER, "The format the incoming FlowFiles' records are in", required=True,
                           allowable_values=list(records.FORMATS)),
        PropertyDescriptor(WRITER, "The format the outgoing FlowFiles' records are written in", required=True,
                           allowable_values=list(records.FORMATS)),
    ]


class RecordAttributes:
    """The input FlowFile's attributes, as the attribute map a record transform receives."""

    def __init__(self, flowfile):
        self.flowfile = flowfile

    def getAttribute(self, name: str) -> str | None:
        return self.flowfile.attributes.get(name)

    def getAttributes(self) -> dict[str, str]:
        return dict(self.flowfile.attributes)


class _Group:
    __slots__ = ("relationship", "partition", "schema", "records")

    def __init__(self, relationship: str, partition: dict | None, schema: Any):
        self.relationship = relationship
        self.partition = partition
        self.schema = schema
        self.records: list[dict] = []


def partition_text(value: Any) -> str:
    """A partition value as an attribute, as Java's ``Objects.toString`` prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def transform_records(processor: Any, context: Any, session: Any, flowfile: Any, reader: str, writer: str,
                      logger: Any) -> None:
    """Run ``processor`` over the records of ``flowfile`` and route the outcome (module docstring)."""
    from flowactors.sdk import record_formats as records  # pyarrow: only for a record transform

    try:
        with session.read(flowfile) as stream:
            table = records.read_table(stream, records.ReadOptions(format=reader))
        rows = orjson.loads(orjson.dumps(table.to_pylist(), default=records.json_default))
        schema = records.json_schema(table.schema)   # what the rows hold: JSON's values
        attributes = CachingAttributeMap(RecordAttributes(flowfile))
        groups: dict[tuple, _Group] = {}
        for row in rows:
            result = processor.transform(context, row, schema, attributes)
            if result is None:
                raise TypeError("transform returned None; it must return a RecordTransformResult")
            record = result.getRecord()
            if record is None:
                continue
            partition = result.getPartition()
            key = (result.getRelationship(), None if partition is None else json.dumps(partition, sort_keys=True,
                                                                                        default=str))
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(result.getRelationship(), partition, result.getSchema())
            group.records.append(record)
        tables = [(group, _table(group)) for group in groups.values()]
    except Exception as err:
        logger.error("Failed to transform the records of {}: {}", flowfile.uuid, err, err)
        session.transfer(flowfile, "failure")
        return
    created = []
    try:
        for group, out in tables:
            child = session.create(flowfile)
            created.append(child)
            child = session.write(child, lambda stream, out=out: records.write_part(
                stream, records.RecordCursor(out), writer))
            child = session.put_all_attributes(child, {
                "record.count": str(out.num_rows), "mime.type": records.MIME_TYPES[writer],
                **{str(k): partition_text(v) for k, v in (group.partition or {}).items()}})
            session.transfer(child, group.relationship)
        session.transfer(flowfile, "original")
    except Exception as err:
        logger.error("Failed to write the records of {}: {}", flowfile.uuid, err, err)
        for child in created:
            session.remove(child)
        session.transfer(flowfile, "failure")


def _table(group: _Group):
    """The group's records as a table: the schema the processor gave, else the one of the group's
    first record (as NiFi's writer takes it), types inferred from every record."""
    import pyarrow as pa  # optional (spark extra): only for a record transform

    schema = group.schema if isinstance(group.schema, pa.Schema) else None
    return pa.Table.from_pylist(group.records, schema=schema)
