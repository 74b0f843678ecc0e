"""Driving a NiFi ``RecordTransform`` over one FlowFile, as NiFi's RecordTransformProxy does.

**Reading.** The FlowFile's records are read through the Record Reader controller service a
batch at a time (NiFi hands Python about 1 MB of records at a time); each record reaches
``transform`` as NiFi gives it: a dict of JSON values, the record as NiFi's JSON writer writes it
with no formats set and read back by Python's ``json`` (``json_records``), with the reader's
schema (an Arrow schema here, a Java RecordSchema in NiFi) and the input's attributes.

**Writing.** Results are grouped by relationship and partition. A group's records are written
through the Record Writer as each batch's results come, into a spool of the group's own (memory,
then a temporary file: NiFi writes each group straight into a FlowFile's content, which a
session here takes in one write), with the schema ``write_schema`` gives for the records' own
schema: the one the first result of the group hands back when it is an Arrow schema (a field
whose values in the group's first batch do not fit its type typed as those values are, as NiFi's
record keeps such a value and its JSON writer writes it as it is), else the one inferred from the
group's first batch of records (the first record's fields, as NiFi's writer keeps the first
record's schema; a field only ever null as STRING, as NiFi infers it). So
a FlowFile takes about one batch of records in memory plus what the spools hold in memory.

Each group becomes one new FlowFile (a child of the input, with its attributes), carrying the
writer's attributes, ``record.count``, ``mime.type`` and each partition key with its value as
text. The input goes to ``original``. If anything fails (a record the reader cannot read, the
transform raising, a record the writer cannot write), nothing is emitted and the input goes to
``failure``.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flowactors.sdk.processor import find_service
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory
from flowactors.sdk.records.schema import to_choice_storage
from flowactors.sdk.records.spooling import SpooledRecords
from nifiapi.properties import PropertyDescriptor
from nifiapi.recordtransform import CachingAttributeMap

READER, WRITER = "Record Reader", "Record Writer"


def record_descriptors() -> list[PropertyDescriptor]:
    """The two properties NiFi puts before a record transform's own: the reader and writer services."""
    return [
        PropertyDescriptor(READER, "The controller service that reads the incoming FlowFiles' records", required=True,
                           controller_service_definition="RecordReaderFactory"),
        PropertyDescriptor(WRITER, "The controller service that writes the outgoing FlowFiles' records",
                           required=True, controller_service_definition="RecordSetWriterFactory"),
    ]


class RecordAttributes:
    """The input FlowFile's attributes, as the attribute map a record transform receives."""

    def __init__(self, flowfile):
        self.flowfile = flowfile

    def getAttribute(self, name: str) -> str | None:
        return self.flowfile.attributes.get(name)

    def getAttributes(self) -> dict[str, str]:
        return dict(self.flowfile.attributes)


def partition_text(value: Any) -> str:
    """A partition value as an attribute, as Java's ``Objects.toString`` prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


class _Group:
    """The records of one relationship and partition: written into a spool of their own as they come."""

    def __init__(self, relationship: str, partition: dict | None, schema: pa.Schema, records: SpooledRecords):
        self.relationship = relationship
        self.partition = partition
        self.schema = schema
        self.records = records


def transform_records(processor: Any, context: Any, session: Any, flowfile: Any, reader: str, writer: str,
                      logger: Any) -> None:
    """Run ``processor`` over the records of ``flowfile`` and route the outcome (module docstring);
    ``reader`` and ``writer`` are the services the Record Reader and Record Writer properties
    name (a name that is not an enabled service of the API is ``ServiceNotFound``: the trigger's
    error, not the FlowFile's)."""
    services = session.context.services
    readers = find_service(services, reader, f"property '{READER}'", RecordReaderFactory)
    writers = find_service(services, writer, f"property '{WRITER}'", RecordSetWriterFactory)
    created: list = []
    try:
        with ExitStack() as spools:
            groups = _transform_all(processor, context, session, flowfile, readers, writers, spools)
            for group in groups.values():
                group.records.finish()
            for group in groups.values():
                created.append(session.create(flowfile))
                created[-1] = group.records.write_to(session, created[-1], {
                    str(k): partition_text(v) for k, v in (group.partition or {}).items()})
                session.transfer(created[-1], group.relationship)
        session.transfer(flowfile, "original")
    except Exception as err:
        logger.error("Failed to transform {}; routing to failure: {}", flowfile.uuid, err, err)
        for child in created:
            session.remove(child)
        session.transfer(flowfile, "failure")


def _transform_all(processor: Any, context: Any, session: Any, flowfile: Any, readers: RecordReaderFactory,
                   writers: RecordSetWriterFactory, spools: ExitStack) -> dict[tuple, _Group]:
    """Every record of ``flowfile`` through ``transform``, batch by batch, each batch's results
    written into their groups' writers: the groups, by (relationship, partition)."""
    groups: dict[tuple, _Group] = {}
    attributes = CachingAttributeMap(RecordAttributes(flowfile))
    with session.read(flowfile) as stream:
        records = readers.create_reader(flowfile.attributes, stream, flowfile.size)
        schema = records.schema()
        for batch in records.batches():
            found: dict[tuple, tuple[Any, list[dict]]] = {}
            for record in json_records(batch):
                result = processor.transform(context, record, schema, attributes)
                if result is None:
                    raise TypeError("transform returned None; it must return a RecordTransformResult")
                if result.getRecord() is None:
                    continue
                partition = result.getPartition()
                key = (result.getRelationship(), None if partition is None else
                       json.dumps(partition, sort_keys=True, default=str))
                found.setdefault(key, (result, []))[1].append(result.getRecord())
            for key, (first, rows) in found.items():
                group = groups.get(key)
                if group is not None:
                    group.records.write(records_batch(rows, group.schema))
                    continue
                given = first.getSchema()
                own = given if isinstance(given, pa.Schema) else inferred_schema(rows)
                batch = records_batch(rows, own, retype=True)
                own = pa.schema([field.with_type(t) for field, t in zip(own, batch.schema.types)], own.metadata)
                spooled = spools.enter_context(SpooledRecords(writers, writers.write_schema(flowfile.attributes, own),
                                                              flowfile.attributes))
                group = groups[key] = _Group(first.getRelationship(), first.getPartition(), own, spooled)
                group.records.write(batch)
    return groups


# ---------------------------------------------------------------------------------- records as JSON values
_MILLIS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}   # unit -> (times, divided by)
_DAY_MILLIS = 86_400_000


def json_type(t: pa.DataType) -> pa.DataType:
    """The type of a column's values as NiFi's JSON writer (no formats) writes them: dates, times
    and timestamps as epoch milliseconds (int64), decimals as numbers (whole ones int64, others
    float64), float32 as float64 (its shortest text), bytes as arrays of signed bytes; inside
    records, arrays and maps too."""
    if pa.types.is_dictionary(t):
        return json_type(t.value_type)
    if pa.types.is_temporal(t):
        return pa.int64()
    if pa.types.is_decimal(t):
        return pa.int64() if t.scale == 0 and t.precision <= 18 else pa.float64() if t.scale else t
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return pa.float64()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.large_list(pa.int16())
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(json_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_type, t.item_field.with_type(json_type(t.item_type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(json_type(t.value_type)))
    return t


def json_records(batch: pa.RecordBatch) -> list[dict]:
    """The batch's records as NiFi hands them to a record transform: dicts of JSON values
    (``json_type``; a map a dict, a record a dict, an array a list)."""
    columns = [_to_json(column) if json_type(column.type) != column.type else column for column in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names).to_pylist(maps_as_pydicts="lossy")


def _to_json(array: pa.Array) -> pa.Array:
    t = array.type
    if json_type(t) == t:
        return array
    if pa.types.is_dictionary(t):
        return _to_json(array.dictionary_decode())
    if pa.types.is_date32(t):
        return pc.multiply(array.cast(pa.int32()).cast(pa.int64()), _DAY_MILLIS)
    if pa.types.is_date64(t):
        return array.cast(pa.int64())
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        times, divided = _MILLIS[t.unit]
        raw = array.cast(pa.int64() if pa.types.is_timestamp(t) or pa.types.is_time64(t) else pa.int32())
        return _floor_divide(pc.multiply(raw.cast(pa.int64()), times), divided)
    if pa.types.is_decimal(t) or pa.types.is_floating(t):
        wanted = json_type(t)
        return array.cast(pa.string()).cast(wanted) if pa.types.is_floating(t) else array.cast(wanted)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _bytes_as_lists(array.cast(pa.large_binary()))
    if pa.types.is_struct(t):
        children = [_to_json(array.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=[f.with_type(c.type) for f, c in zip(t, children)],
                                          mask=_mask(array))
    if pa.types.is_fixed_size_list(t):
        return _to_json(array.cast(pa.list_(t.value_field)))
    offsets, start, end = _rebased(array)
    if pa.types.is_map(t):
        items = _to_json(array.items.slice(start, end - start))
        return pa.MapArray.from_arrays(offsets, array.keys.slice(start, end - start), items, mask=_mask(array))
    values = _to_json(array.values.slice(start, end - start))
    return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, mask=_mask(array))


def _floor_divide(values: pa.Array, divisor: int) -> pa.Array:
    """Integer division rounding down, as Java's millisecond of an instant before 1970 is."""
    if divisor == 1:
        return values
    quotient = pc.divide(values, divisor)
    return pc.if_else(pc.less(pc.subtract(values, pc.multiply(quotient, divisor)), 0),
                      pc.subtract(quotient, 1), quotient)


def _mask(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None


def _rebased(array: Any) -> tuple[pa.Array, int, int]:
    """A list's or map's offsets made to start at 0, and the range of its values they cover."""
    offsets = array.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, start), start, end


def _bytes_as_lists(array: pa.Array) -> pa.Array:
    """Each value of a large_binary array as a list of its bytes, signed as Java's are."""
    validity, offset_buffer, data = array.buffers()
    offsets = pa.Array.from_buffers(pa.int64(), len(array) + 1, [None, offset_buffer], offset=array.offset)
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    values = (pa.Array.from_buffers(pa.int8(), end, [None, data]).slice(start, end - start) if data is not None
              else pa.array([], pa.int8()))
    return pa.LargeListArray.from_arrays(pc.subtract(offsets, start), values.cast(pa.int16()), mask=_mask(array))


# ---------------------------------------------------------------------------------- results back into records
def inferred_schema(rows: list[dict]) -> pa.Schema:
    """The schema of a group's records: the first record's fields, each typed by Arrow from every
    record's value; a field whose values are of several JSON kinds is text (JSON text for those
    that are not strings), one only ever null STRING."""
    return pa.schema([pa.field(name, _inferred_type([row.get(name) for row in rows])) for name in rows[0]])


def _inferred_type(values: list) -> pa.DataType:
    """The type Arrow gives JSON values (text when they are of several kinds, STRING when all null)."""
    try:
        data_type = pa.array(values).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        data_type = pa.string()
    return _strings_for_nulls(data_type)


def _strings_for_nulls(t: pa.DataType) -> pa.DataType:
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_strings_for_nulls(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_strings_for_nulls(t.value_type)))
    return t


def records_batch(rows: list[dict], schema: pa.Schema, *, retype: bool = False) -> pa.RecordBatch:
    """Records (dicts of JSON values, as ``json_records`` gives them) as a batch of ``schema``:
    each value read as its field's type as NiFi reads JSON (``json_type`` backwards: epoch
    milliseconds into dates, times and timestamps; arrays of bytes into bytes) or, when the
    transform put Python's own there (a datetime, a Decimal, bytes), as those; a value that is not
    text written as its JSON text into a text field, a field a record lacks null. Raises Arrow's
    error for a value that does not fit its field; with ``retype``, such a field takes the type
    the values have instead (as ``inferred_schema`` types them): NiFi's record keeps a value its
    schema does not describe, and NiFi's JSON writer writes it as the transform made it (a hash
    put into an INT field stays text)."""
    columns = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        try:
            columns.append(_column(values, field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            if not retype:
                raise
            columns.append(_column(values, _inferred_type(values)))
    return pa.RecordBatch.from_arrays(columns, names=schema.names)


def _column(values: list, t: pa.DataType) -> pa.Array:
    """JSON values as an array of ``t`` (``records_batch``)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        values = to_choice_storage(values, pa.string())
    try:
        return _from_json(pa.array(values, json_type(t)), t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        if json_type(t) == t:
            raise
        return pa.array(values, t)


def _from_json(array: pa.Array, t: pa.DataType) -> pa.Array:
    if array.type == t:
        return array
    if pa.types.is_dictionary(t):
        return _from_json(array, t.value_type).cast(t)
    if pa.types.is_date32(t):
        return _floor_divide(array, _DAY_MILLIS).cast(pa.int32()).cast(t)
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        divided, times = _MILLIS[t.unit]   # backwards: milliseconds into the unit
        raw = _floor_divide(pc.multiply(array, times), divided)
        return raw.cast(pa.int32() if pa.types.is_time32(t) else pa.int64()).cast(t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        data = array.values.cast(pa.int8(), safe=False)   # 0..255 as Java's signed bytes too
        joined = pa.Array.from_buffers(pa.large_binary(), len(array),
                                       [array.buffers()[0], array.buffers()[1], data.buffers()[1]])
        return joined.cast(t)
    if pa.types.is_struct(t):
        children = [_from_json(array.field(i), f.type) for i, f in enumerate(t)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=_mask(array))
    if pa.types.is_map(t):
        items = _from_json(array.items, t.item_type)
        return pa.MapArray.from_arrays(array.offsets, array.keys, items, type=t, mask=_mask(array))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = _from_json(array.values, t.value_type)
        return pa.ListArray.from_arrays(array.offsets, values, mask=_mask(array)).cast(t)
    return array.cast(t)
