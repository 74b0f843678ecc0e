"""ValidateRecord: each record checked against a schema, the valid ones and the invalid ones
written to FlowFiles of their own.

Records are checked a batch at a time, column by column (``RecordCheck``): which records lack a
required field, hold a field the schema does not have, or hold a value that does not fit its
field's type, found with Arrow's casts and masks rather than record by record in Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flowactors.processors._common import boolean_property
from flowactors.processors.records._io import (RECORD_READER, RECORD_WRITER, Records, is_flowfile_error,
                                               open_records, positive_count, reader_and_writer, remove_all,
                                               route_failure, set_aside, write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory, SchemaMismatchError, access
from flowactors.sdk.records.schema import AVRO_DEFAULT, ENUM_SYMBOLS, NIFI_TYPE, avro_to_arrow, conform
from flowactors.sdk.records.spooling import SpooledRecords
from flowactors.sdk.relationships import FAILURE

READER_SCHEMA = "Use Reader's Schema"
SCHEMA_ACCESS_STRATEGY = PropertyDescriptor(
    "Schema Access Strategy", "Where the schema the records are validated against comes from", required=True,
    default=READER_SCHEMA, allowable_values=(READER_SCHEMA, access.SCHEMA_NAME, access.SCHEMA_TEXT))
INVALID_RECORD_WRITER = PropertyDescriptor(
    "Record Writer for Invalid Records", "The controller service that writes the invalid records (with the schema "
    "they were read with); the Record Writer when not set", service=RecordSetWriterFactory)
ALLOW_EXTRA_FIELDS = boolean_property(
    "Allow Extra Fields", True, "Whether a record holding a field the schema does not have is valid")
STRICT_TYPE_CHECKING = boolean_property(
    "Strict Type Checking", True, "Whether a value must be of its field's type (true), or only convertible to it "
    "(false: the text \"1\" fits an int field, and is written as 1)")
FORCE_TYPES = boolean_property(
    "Force Types From Reader Schema", False, "NiFi's choice of reading values as the reader's schema types them "
    "(true) or as they are (false); readers here always give their schema's types, so either value reads as true")
DETAILS_ATTRIBUTE = PropertyDescriptor(
    "Validation Details Attribute Name", "An attribute of the invalid FlowFile to hold why its records are invalid "
    "(none when not set)", expression_language=True)
DETAILS_LENGTH = PropertyDescriptor(
    "Maximum Validation Details Length", "The most characters of the validation details put in that attribute",
    default="1024", validator=validators.POSITIVE_INTEGER, expression_language=True)

_INTEGER_TEXT = r"^\s*[+-]?\d+\s*$"
_NUMBER_TEXT = r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|[Nn]a[Nn]|[Ii]nf(inity)?)\s*$"
_UUID_TEXT = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


@dataclass
class Problems:
    """The fields (``/a/b`` paths) found missing, extra, or with values of the wrong type."""

    missing: set[str] = field(default_factory=set)
    extra: set[str] = field(default_factory=set)
    invalid: set[str] = field(default_factory=set)

    def details(self) -> str:
        """Why the records were invalid, in NiFi's words (without its stray ``; ``)."""
        parts = []
        for found, what in ((self.missing, "were missing"),
                            (self.extra, "were present in the Record but not in the schema"),
                            (self.invalid, "had values whose type did not match the schema")):
            if found:
                parts.append(f"The following {len(found)} fields {what}: [{', '.join(sorted(found))}]")
        return "Records in this FlowFile were invalid for the following reasons: " + "; ".join(parts)


class RecordCheck:
    """Checks batches of records against ``schema``: which records are invalid and why.

    A record is invalid when a field the schema requires (not nullable, no default) is null or
    absent; when, without ``allow_extra``, it holds a non-null value in a field the schema does not
    have; or when a value does not fit its field's type. Strict checking (NiFi's) wants the
    field's own type or a narrower one of its kind (an int for a long, a float for a double, any
    integer for a double or a decimal) with the value in range, and text for text; otherwise a
    value fits when Arrow casts it to the field's type (the text ``"12"`` fits an int, anything
    fits a string). An enum's value must be one of its symbols, a UUID's text a UUID, a char's
    text one character. Records inside records, lists and maps are checked field by field; a
    list or map is invalid when one of its values is. A column read as a CHOICE (held as text,
    whatever its members were) is always checked by conversion."""

    def __init__(self, schema: pa.Schema, allow_extra: bool, strict: bool):
        self.schema = schema
        self.allow_extra = allow_extra
        self.strict = strict
        self.problems = Problems()

    def invalid_rows(self, batch: pa.RecordBatch) -> np.ndarray:
        """One bool a record of ``batch``: True where it is invalid (its reasons noted in ``problems``)."""
        columns = {f.name: (column, f) for f, column in zip(batch.schema, batch.columns)}
        return self._record(columns, list(self.schema), batch.num_rows, "", None)

    def _record(self, columns: Mapping[str, tuple[pa.Array, pa.Field]], fields: list[pa.Field], rows: int,
                prefix: str, present: np.ndarray | None) -> np.ndarray:
        """Invalid rows of records whose fields are ``columns`` (``present``: the rows that are
        records, not nulls, when they are nested)."""
        bad = np.zeros(rows, dtype=bool)
        here = np.ones(rows, dtype=bool) if present is None else present
        for wanted in fields:
            path = f"{prefix}/{wanted.name}"
            required = not wanted.nullable and AVRO_DEFAULT not in (wanted.metadata or {})
            if wanted.name not in columns:
                if required and here.any():
                    self.problems.missing.add(path)
                    bad |= here
                continue
            array, read = columns[wanted.name]
            if pa.types.is_dictionary(array.type):
                array = array.dictionary_decode()
            valid = _valid(array) & here
            if required and (here & ~valid).any():
                self.problems.missing.add(path)
                bad |= here & ~valid
            wrong = self._wrong(array, read, wanted, path) & valid
            if wrong.any():
                self.problems.invalid.add(path)
                bad |= wrong
            bad |= self._nested(array, read, wanted, path, valid & ~wrong)
        if not self.allow_extra:
            known = {f.name for f in fields}
            for name, (array, _) in columns.items():
                extra = _valid(array) & here if name not in known else None
                if extra is not None and extra.any():
                    self.problems.extra.add(f"{prefix}/{name}")
                    bad |= extra
        return bad

    def _nested(self, array: pa.Array, read: pa.Field, wanted: pa.Field, path: str, rows: np.ndarray) -> np.ndarray:
        """Among ``rows``, those whose records inside (a record's fields, a list's or map's
        records) are invalid."""
        if pa.types.is_struct(array.type) and pa.types.is_struct(wanted.type):
            children = {read.type.field(i).name: (array.field(i), read.type.field(i)) for i in range(read.type.num_fields)}
            return self._record(children, list(wanted.type), len(array), path, rows)
        if not _same_container(array.type, wanted.type):
            return np.zeros(len(array), dtype=bool)
        items, read_item, wanted_item = _items(array, read, wanted)
        inner = self._nested(items, read_item, wanted_item, f"{path}[]", _valid(items))
        return _rows_holding(array, inner) & rows

    def _wrong(self, array: pa.Array, read: pa.Field, wanted: pa.Field, path: str) -> np.ndarray:
        """Rows whose value does not fit ``wanted``'s type (the fields of records inside aside:
        ``_nested``); nulls are not looked at."""
        source, target = array.type, wanted.type
        kind = (wanted.metadata or {}).get(NIFI_TYPE)
        lenient = not self.strict or (read.metadata or {}).get(NIFI_TYPE) == b"CHOICE"
        rows = len(array)
        if pa.types.is_struct(source) and pa.types.is_struct(target):
            return np.zeros(rows, dtype=bool)
        if pa.types.is_struct(source) and pa.types.is_map(target):   # a record read where a map is wanted
            item_bad = np.zeros(rows, dtype=bool)
            for i, child in enumerate(source):
                values = array.field(i)
                item_bad |= self._wrong(values, child, target.item_field, f"{path}/{child.name}") & _valid(values)
            return item_bad
        if _same_container(source, target):
            items, read_item, wanted_item = _items(array, read, wanted)
            item_bad = self._wrong(items, read_item, wanted_item, f"{path}[]") & _valid(items)
            if not wanted_item.nullable:
                item_bad |= ~_valid(items)
            return _rows_holding(array, item_bad)
        if kind in (b"ENUM", b"UUID", b"CHAR"):
            return _wrong_text(array, wanted, kind, lenient)
        if source == target or pa.types.is_null(source):
            return np.zeros(rows, dtype=bool)
        if lenient:
            return np.zeros(rows, dtype=bool) if _is_text(target) else _uncastable(array, target)
        if not _strictly_fits(source, target):
            return np.ones(rows, dtype=bool)
        return np.zeros(rows, dtype=bool) if _widens(source, target) else _uncastable(array, target)


def _same_container(source: pa.DataType, target: pa.DataType) -> bool:
    """Both lists, or both maps."""
    if pa.types.is_map(source) or pa.types.is_map(target):
        return pa.types.is_map(source) and pa.types.is_map(target)
    lists = (pa.types.is_list, pa.types.is_large_list)
    return any(t(source) for t in lists) and any(t(target) for t in lists)


def _items(array: pa.Array, read: pa.Field, wanted: pa.Field) -> tuple[pa.Array, pa.Field, pa.Field]:
    """A list's values or a map's values, with the fields read and wanted for them."""
    if pa.types.is_map(array.type):
        items, read_item, wanted_item = array.items, read.type.item_field, wanted.type.item_field
    else:
        items, read_item, wanted_item = array.values, read.type.value_field, wanted.type.value_field
    offsets = array.offsets   # of this slice of the column, into every value of the column
    first = offsets[0].as_py()
    items = items.slice(first, offsets[-1].as_py() - first)
    return (items.dictionary_decode() if pa.types.is_dictionary(items.type) else items), read_item, wanted_item


def _rows_holding(array: pa.Array, item_rows: np.ndarray) -> np.ndarray:
    """Rows of a list or map column holding at least one of the values ``item_rows`` marks."""
    if not item_rows.any():
        return np.zeros(len(array), dtype=bool)
    offsets = np.asarray(array.offsets)
    counts = np.concatenate([[0], np.cumsum(item_rows)])
    return counts[offsets[1:] - offsets[0]] - counts[offsets[:-1] - offsets[0]] > 0


def _wrong_text(array: pa.Array, wanted: pa.Field, kind: bytes, lenient: bool) -> np.ndarray:
    """Rows of an ENUM, UUID or CHAR field whose value is not one of its symbols, a UUID, or one
    character (lenient: once written as text; strict: the value must be text)."""
    if not _is_text(array.type):
        if not lenient:
            return np.ones(len(array), dtype=bool)
        try:
            array = pc.cast(array, pa.string())
        except pa.ArrowException:
            return np.ones(len(array), dtype=bool)
    if kind == b"ENUM":
        symbols = pa.array(json.loads((wanted.metadata or {})[ENUM_SYMBOLS]), pa.string())
        fits = pc.is_in(array, value_set=symbols)
    else:
        fits = pc.match_substring_regex(array, _UUID_TEXT if kind == b"UUID" else r"^.$")
    return ~np.asarray(fits.fill_null(True))


def _valid(array: pa.Array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    return np.asarray(array.is_valid())


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _strictly_fits(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` may be of ``target``'s type in NiFi's strict sense (the values
    themselves then decide: ``_widens``, else a cast)."""
    if pa.types.is_integer(target):
        return pa.types.is_integer(source)
    if pa.types.is_floating(target):
        return pa.types.is_integer(source) or pa.types.is_floating(source)
    if pa.types.is_decimal(target):
        return pa.types.is_integer(source) or pa.types.is_decimal(source) or pa.types.is_floating(source)
    kinds = (pa.types.is_boolean, pa.types.is_date, pa.types.is_time, pa.types.is_timestamp,
             _is_text,
             lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))
    return any(kind(source) and kind(target) for kind in kinds) or pa.types.is_null(source)


def _widens(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of ``source`` is one of ``target`` (no value needs looking at)."""
    if pa.types.is_null(source):
        return True
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return pa.types.is_signed_integer(target) and (
            target.bit_width > source.bit_width if not pa.types.is_signed_integer(source)
            else target.bit_width >= source.bit_width)
    if pa.types.is_integer(source) and pa.types.is_floating(target):
        return True
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return target.bit_width >= source.bit_width
    return not (pa.types.is_decimal(target) or pa.types.is_integer(target) or pa.types.is_floating(target))


def _uncastable(array: pa.Array, target: pa.DataType) -> np.ndarray:
    """Rows of ``array`` whose value Arrow cannot cast to ``target`` (nulls cast). Text bound for a
    number is first matched against a number's shape; what is left is found by halving the rows
    whose cast fails, so a cast is tried about twice a bad value times the halvings."""
    bad = np.zeros(len(array), dtype=bool)
    if (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)) and \
            (pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target)):
        shape = _INTEGER_TEXT if pa.types.is_integer(target) else _NUMBER_TEXT
        bad = ~np.asarray(pc.match_substring_regex(array, shape).fill_null(True))
        array = pc.utf8_trim_whitespace(array)
    pending = [(0, len(array))]
    while pending:
        start, stop = pending.pop()
        if bad[start:stop].all():
            continue
        part = array.slice(start, stop - start)
        if bad[start:stop].any():
            part = pc.if_else(pa.array(bad[start:stop]), pa.nulls(stop - start, part.type), part)
        try:
            part.cast(target)
        except pa.ArrowNotImplementedError:
            return _valid(array)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            if stop - start == 1:
                bad[start] = True
            else:
                middle = (start + stop) // 2
                pending += [(start, middle), (middle, stop)]
    return bad


# ---------------------------------------------------------------------------------- the processor
class ValidateRecord(Processor):
    """Validates each FlowFile's records against a schema: the valid ones to valid, the others to invalid.

    The schema is the reader's (Use Reader's Schema), a registry's or a text's, as Schema Access
    Strategy says; records are checked as ``RecordCheck`` says, with Allow Extra Fields and Strict
    Type Checking. The valid records are written by the Record Writer with the validation schema
    (converted to it: without strict checking the text ``"1"`` of an int field is written as 1; a
    required field left empty gets its default), into a new FlowFile to valid; the invalid ones,
    as they were read, by the Record Writer for Invalid Records (else the Record Writer) into a
    new FlowFile to invalid. Both are children of the original and get ``record.count``,
    ``mime.type`` and their writer's schema attributes; the invalid one also gets the validation
    details in the attribute Validation Details Attribute Name names, when set (at most Maximum
    Validation Details Length characters). The original is dropped; with no record, nothing is
    sent. Provenance: a FORK to the children, a ROUTE event for each (the invalid one's details
    say why its records are invalid), the original's DROP. A FlowFile whose records cannot be read
    (a value the reader cannot read as its own schema's type included), whose validation schema
    cannot be found, or whose records cannot be written, goes to failure unchanged.
    """

    description = "Validates records against a schema, routing valid and invalid records to FlowFiles of their own"
    properties = (RECORD_READER, RECORD_WRITER, INVALID_RECORD_WRITER, SCHEMA_ACCESS_STRATEGY, *access.SCHEMA_PROPERTIES,
                  ALLOW_EXTRA_FIELDS, STRICT_TYPE_CHECKING, FORCE_TYPES, DETAILS_ATTRIBUTE, DETAILS_LENGTH)
    VALID = Relationship("valid", "The records that are valid, a FlowFile of them for each original")
    INVALID = Relationship("invalid", "The records that are not valid, a FlowFile of them for each original")
    relationships = (VALID, INVALID, Relationship(FAILURE.name, "FlowFiles whose records could not be read, "
                                                                "validated or written, unchanged"))

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get(SCHEMA_ACCESS_STRATEGY.name) == access.SCHEMA_NAME and not values.get(access.SCHEMA_REGISTRY.name):
            return [f"property '{access.SCHEMA_REGISTRY.name}' must name a schema registry when "
                    f"'{SCHEMA_ACCESS_STRATEGY.name}' is \"{access.SCHEMA_NAME}\""]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._schemas = access.SchemaCache(avro_to_arrow)

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        invalid_writer = context.service(INVALID_RECORD_WRITER.name, RecordSetWriterFactory) \
            if context.property(INVALID_RECORD_WRITER.name).raw else writer
        for flowfile in session.get_batch():
            try:
                limit = positive_count(context, DETAILS_LENGTH, flowfile)
                valid, invalid, details = self._validate(context, session, flowfile,
                                                         _Services(reader, writer, invalid_writer))
            except Exception as err:
                if not is_flowfile_error(err):
                    raise
                route_failure(context, session, flowfile, err)
                continue
            if valid is not None:
                session.provenance.route(valid, self.VALID.name)
                session.transfer(valid, self.VALID)
            if invalid is not None:
                name = context.property(DETAILS_ATTRIBUTE.name).evaluate(flowfile)
                if name:
                    invalid = session.put_attribute(invalid, name, details[:limit])
                session.provenance.route(invalid, self.INVALID.name, details)
                session.transfer(invalid, self.INVALID)
            session.remove(flowfile)

    def _validate(self, context: ProcessContext, session, flowfile: FlowFile, services: "_Services"
                  ) -> tuple[FlowFile | None, FlowFile | None, str]:
        """The FlowFile of valid records, the one of invalid records (None for one with no record),
        and the details of why those are invalid; on an error, what was made is removed."""
        made: list[FlowFile] = []
        try:
            with open_records(session, flowfile, services.reader) as records, \
                    SpooledRecords(services.invalid, records.schema, flowfile.attributes) as invalid_records:
                schema = records.schema if context.property(SCHEMA_ACCESS_STRATEGY.name).raw == READER_SCHEMA \
                    else access.given_schema(context, flowfile.attributes, self._schemas)
                check = RecordCheck(schema, context.property(ALLOW_EXTRA_FIELDS.name).as_bool(),
                                    context.property(STRICT_TYPE_CHECKING.name).as_bool())
                made.append(session.create(flowfile))
                valid, result = write_records(session, made[-1], services.valid, schema,
                                              _valid_batches(records, check, invalid_records))
                made[-1] = valid
                invalid = None
                if invalid_records.finish() is not None:
                    made.append(session.create(flowfile))
                    invalid = made[-1] = invalid_records.write_to(session, made[-1])
        except BaseException:
            remove_all(session, made)
            raise
        if result.record_count == 0:
            session.remove(valid)
            return None, invalid, check.problems.details()
        return valid, invalid, check.problems.details()


@dataclass(frozen=True)
class _Services:
    """The reader and the writers ValidateRecord uses."""

    reader: RecordReaderFactory
    valid: RecordSetWriterFactory
    invalid: RecordSetWriterFactory


def _valid_batches(records: Records, check: RecordCheck, invalid: SpooledRecords) -> Iterator[pa.RecordBatch]:
    """The valid records of each batch, converted to the validation schema; the invalid ones go
    to ``invalid`` as they come."""
    for batch in records:
        valid = set_aside(batch, ~check.invalid_rows(batch), invalid)
        if valid is not None:
            yield _conformed(valid, check.schema)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` as ``schema``'s records, a record read where a map is wanted made a map, a
    required field that is null given its default."""
    names = set(batch.schema.names)
    columns = [_as_maps(batch.column(f.name), f.type) if f.name in names else None for f in schema]
    if any(c is not None and c is not batch.column(f.name) for c, f in zip(columns, schema)):
        kept = [(c, f.with_type(c.type)) for c, f in zip(columns, schema) if c is not None]
        batch = pa.RecordBatch.from_arrays([c for c, _ in kept], schema=pa.schema([f for _, f in kept]))
    defaulted = {i for i, f in enumerate(schema) if not f.nullable and AVRO_DEFAULT in (f.metadata or {})}
    if not defaulted:
        return conform(batch, schema)
    loose = conform(batch, pa.schema([f.with_nullable(True) if i in defaulted else f for i, f in enumerate(schema)]))
    columns = list(loose.columns)
    for i in defaulted:
        if columns[i].null_count:
            default = json.loads(schema.field(i).metadata[AVRO_DEFAULT])
            try:
                columns[i] = pc.fill_null(columns[i], pa.scalar(default, columns[i].type))
            except (pa.ArrowException, TypeError, ValueError) as err:
                raise SchemaMismatchError(f"field '{schema.field(i).name}' has the default {json.dumps(default)}, "
                                          f"which cannot be written as its type ({err})") from None
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _as_maps(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` with each record (struct) where ``target`` wants a map made that map (its fields
    that are not null as entries), inside records and lists too; anything else as it is."""
    source = array.type
    if pa.types.is_struct(source) and pa.types.is_map(target):
        rows, names = len(array), [f.name for f in source]
        present = np.stack([_valid(array.field(i)) for i in range(len(names))], axis=1) if names \
            else np.zeros((rows, 0), dtype=bool)
        present &= _valid(array)[:, None]
        offsets = np.concatenate([[0], np.cumsum(present.sum(axis=1))]).astype(np.int32)
        values = pa.concat_arrays([_as_maps(array.field(i), target.item_type).cast(target.item_type)
                                   for i in range(len(names))]) if names else pa.nulls(0, target.item_type)
        order = (np.arange(len(names))[None, :] * rows + np.arange(rows)[:, None])[present]
        keys = pa.array(np.array(names, dtype=object)[np.nonzero(present)[1]] if names else [], pa.string())
        return pa.MapArray.from_arrays(pa.array(offsets), keys, values.take(pa.array(order, pa.int64())),
                                       type=target, mask=pa.array(~_valid(array)))
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        wanted = {f.name: f.type for f in target}
        children = [_as_maps(array.field(i), wanted[f.name]) if f.name in wanted else array.field(i)
                    for i, f in enumerate(source)]
        if all(c is array.field(i) for i, c in enumerate(children)):
            return array
        return pa.StructArray.from_arrays(children, names=[f.name for f in source], mask=pa.array(~_valid(array)))
    if _same_container(source, target) and not pa.types.is_map(source):
        values = array.values.slice(array.offsets[0].as_py(), array.offsets[-1].as_py() - array.offsets[0].as_py())
        adapted = _as_maps(values, target.value_type)
        if adapted is values:
            return array
        offsets = pc.subtract(array.offsets, array.offsets[0])
        return pa.ListArray.from_arrays(offsets, adapted, mask=pa.array(~_valid(array)))
    return array
