"""LookupRecord: each record's coordinates, found by RecordPaths, looked up in a lookup service;
the result put into the record, and the record routed by whether it matched (NiFi's LookupRecord).

Records are looked up as Python dicts (RecordPath works on dicts), a batch at a time; the columns
a lookup changed are made Arrow again and the others kept as read (``_io.rebuild_batch``).
The schema written is, as NiFi's, the one of the first records a lookup matched (a field the
result adds is added, one whose values no longer fit its type widens); when the first batch has
no match, the content is read on until one does, then read again from its start (NiFi reads
ahead the same way); with no match at all it is the reader's. With Route to 'matched' or
'unmatched', the matched records stream into their FlowFile and the unmatched ones are written as
they come into a spool (memory, then a temporary file: ``SpooledRecords``), so a
FlowFile of any size is enriched in bounded memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flowactors.processors.records._io import (RECORD_READER, RECORD_WRITER, Records, is_flowfile_error,
                                               named_top_field, open_records, reader_and_writer, rebuild_batch,
                                               record_path_problem, record_path_problems, remove_all, route_failure,
                                               scalar_top_field, set_aside, top_field_name, write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.record_path import FieldValue, RecordPath, RecordPathError, compile_path
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.records import RecordSetWriterFactory
from flowactors.sdk.records.schema import conform, merge_types
from flowactors.sdk.records.spooling import SpooledRecords
from flowactors.sdk.relationships import FAILURE
from flowactors.sdk.services import LookupService

TO_SUCCESS, TO_MATCHED = "Route to 'success'", "Route to 'matched' or 'unmatched'"
ENTIRE_RECORD, RECORD_FIELDS = "Insert Entire Record", "Insert Record Fields"
USE_PROPERTY, REPLACE_EXISTING = 'Use "Result RecordPath" Property', "Replace Existing Values"

SUCCESS = Relationship("success", "Every record, with Route to 'success'")
MATCHED = Relationship("matched", "The records the lookup found a value for, with Route to 'matched' or 'unmatched'")
UNMATCHED = Relationship("unmatched", "The records the lookup found no value for, with Route to 'matched' or "
                                      "'unmatched'")
FAILED = Relationship(FAILURE.name, "FlowFiles whose records could not be read, looked up or written, unchanged")

#: NiFi's internal names and values of these properties (for the NiFi import)
NIFI_PROPERTY_NAMES = {"record-reader": "Record Reader", "record-writer": "Record Writer",
                       "lookup-service": "Lookup Service", "result-contents": "Record Result Contents",
                       "routing-strategy": "Routing Strategy", "record-update-strategy": "Record Update Strategy",
                       "result-record-path": "Result RecordPath",
                       "record-path-lookup-miss-result-cache-size": "Cache Size"}
NIFI_VALUES = {"Routing Strategy": {"route-to-success": TO_SUCCESS, "route-to-matched-unmatched": TO_MATCHED},
               "Record Result Contents": {"insert-entire-record": ENTIRE_RECORD, "record-fields": RECORD_FIELDS},
               "Record Update Strategy": {"use-property": USE_PROPERTY, "replace-existing-values": REPLACE_EXISTING}}

#: how each record's lookups came out (NiFi's MatchResult)
ALL_MATCH, NONE_MATCH, SOME_MATCH = "all", "none", "some"


@dataclass(frozen=True)
class Settings:
    """What every FlowFile's lookups share."""

    service: LookupService
    key: str | None            # the one coordinate Replace Existing Values looks each value up as
    record_fields: bool
    cache_size: int


class Lookups:
    """The lookups of one FlowFile: its coordinate paths (each dynamic property's value evaluated
    against the FlowFile), its Root and Result RecordPaths, and the results found so far (the
    most recent ``cache_size``). ``schema``, once a batch matched, is the schema written."""

    def __init__(self, context: ProcessContext, flowfile: FlowFile, settings: Settings):
        self.settings = settings
        self.coordinates = {name: compile_path(_path_text(context, name, flowfile))
                            for name in context.dynamic_properties}
        self.root = _optional_path(context, "Root Record Path", flowfile)
        self.result = _optional_path(context, "Result RecordPath", flowfile) if settings.key is None else None
        self.schema: pa.Schema | None = None
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._schemas: dict[pa.DataType, pa.Schema] = {}
        self._touched: set[str] | None = set()

    # ------------------------------------------------------------------ batches
    def batches(self, records: Records) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        """Each batch with its records looked up, and which of them matched; the first batch with
        a match fixes ``schema`` (earlier ones keep their own), later ones are conformed to it."""
        plan: tuple[str, str | None] | None = None
        for number, batch in enumerate(records):
            if number == 0:
                plan = self._column_plan(batch.schema)
            done = self._by_column(batch, *plan) if plan is not None else None
            built, matched = done if done is not None else self._by_record(batch)
            if self.schema is None:
                if matched.any():
                    self.schema = built.schema
                yield built, matched
            else:
                yield conform(built, self.schema), matched

    def _by_record(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray]:
        rows = batch.to_pylist(maps_as_pydicts="strict")
        self._touched = set()
        matched = np.fromiter((self.record(row, batch.schema) for row in rows), dtype=bool, count=len(rows))
        return rebuild_batch(batch, rows, self._touched, self.schema), matched

    def _column_plan(self, schema: pa.Schema) -> tuple[str, str | None] | None:
        """(the key column, the result column or None) when the lookups can be made a column at a
        time: one coordinate, a top-level field of a scalar type; a result, if any, into a top-level
        field that is not nested; no Root Record Path, no Insert Record Fields, no replacing."""
        if self.settings.key is not None or self.root is not None or self.settings.record_fields \
                or len(self.coordinates) != 1:
            return None
        key = scalar_top_field(next(iter(self.coordinates.values())), schema)
        if key is None or self.result is None:
            return None if key is None else (key, None)
        result = named_top_field(self.result)
        if result is None:
            return None
        index = schema.get_field_index(result)
        return (key, result) if index < 0 or not pa.types.is_nested(schema.field(index).type) else None

    def _by_column(self, batch: pa.RecordBatch, key: str, result: str | None
                   ) -> tuple[pa.RecordBatch, np.ndarray] | None:
        """The batch looked up a column at a time: each distinct key once, the results taken to
        the records (None when the results or the field they go to need the record by record way)."""
        keys = batch.column(key)
        distinct = pc.unique(keys).drop_null()
        [name] = self.coordinates
        try:
            found = pa.array([self._lookup({name: value}) for value in distinct.to_pylist()])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None   # results of several kinds
        taken = found.take(pc.index_in(keys, value_set=distinct))
        matched = taken.is_valid().to_numpy(zero_copy_only=False)
        if result is None or not matched.any():
            return batch, matched
        index = batch.schema.get_field_index(result)
        if index < 0:
            return batch.append_column(pa.field(result, taken.type), taken), matched
        field, column = batch.schema.field(index), batch.column(index)
        target = taken.type if pa.types.is_null(field.type) else merge_types(field.type, taken.type)
        if target is None or pa.types.is_nested(target) or pa.types.is_nested(taken.type):
            return None
        try:
            merged = pc.if_else(pa.array(matched), taken.cast(target), column.cast(target))
        except pa.ArrowException:
            return None
        kept = field if target == field.type else pa.field(result, target, metadata=field.metadata)
        return batch.set_column(index, kept, merged), matched

    def record(self, row: dict, schema: pa.Schema) -> bool:
        """Look ``row`` up (changing it in place); whether it matched: every sub-record did."""
        if self.root is None:
            results = {self._one(row, schema, None)}
        else:
            results = {self._one(sub, sub_schema, top) for sub, sub_schema, top in self._sub_records(row, schema)}
        return results == {ALL_MATCH}

    def _sub_records(self, row: dict, schema: pa.Schema) -> Iterator[tuple[dict, pa.Schema | None, str | None]]:
        """The records the Root Record Path selects (an array's records each), with their schema
        and the field of ``row`` they are in."""
        assert self.root is not None
        for fv in self.root.evaluate(row, schema):
            top = None if fv.parent is None else top_field_name(fv)
            values = fv.value if isinstance(fv.value, list) else [fv.value]
            item_type = fv.type.value_type if fv.type is not None and pa.types.is_list(fv.type) else fv.type
            for value in values:
                if isinstance(value, dict):
                    yield value, self._schema_of(item_type), top

    def _schema_of(self, data_type: pa.DataType | None) -> pa.Schema | None:
        if data_type is None or not pa.types.is_struct(data_type):
            return None
        found = self._schemas.get(data_type)
        if found is None:
            found = self._schemas[data_type] = pa.schema(list(data_type))
        return found

    # ------------------------------------------------------------------ one record
    def _one(self, record: dict, schema: pa.Schema | None, top: str | None) -> str:
        if self.settings.key is not None:
            return self._replace_each(record, schema, top)
        coordinates = {}
        for name, path in self.coordinates.items():
            found = [fv for fv in path.evaluate(record, schema) if fv.value is not None]
            if len(found) != 1:   # none, or several: no lookup (NiFi's rule)
                return NONE_MATCH
            coordinates[name] = found[0].value
        value = self._lookup(coordinates)
        if value is None:
            return NONE_MATCH
        if self.result is not None:
            for fv in self.result.evaluate(record, schema):
                self._put(fv, value, top)
        return ALL_MATCH

    def _put(self, fv: FieldValue, value: Any, top: str | None) -> None:
        """Put a lookup's result where ``fv`` is (its fields into it, with Insert Record Fields)."""
        if self.settings.record_fields and isinstance(value, dict) and isinstance(fv.value, dict):
            fv.value.update(value)
            if top is None and fv.parent is None:   # the record's own fields
                self._touch(*value)
        else:
            fv.update(dict(value) if isinstance(value, dict) else value)
            if top is None and fv.parent is None:   # the whole record replaced
                self._touched = None
        if top is not None:
            self._touch(top)
        elif fv.parent is not None:
            self._touch(top_field_name(fv))

    def _replace_each(self, record: dict, schema: pa.Schema | None, top: str | None) -> str:
        """Replace Existing Values: each value every path selects is looked up and replaced."""
        matched = unmatched = False
        for path in self.coordinates.values():
            selected = path.evaluate(record, schema)
            if not selected:
                continue   # an empty array: nothing to replace counts as a match, as NiFi
            found = [fv for fv in selected if fv.value is not None]
            if not found:
                return NONE_MATCH
            for fv in found:
                value = self._lookup({self.settings.key: fv.value})
                if value is None:
                    unmatched = True
                    continue
                matched = True
                fv.update(value)
                self._touch(top if top is not None else top_field_name(fv))
        if matched and unmatched:
            return SOME_MATCH
        return NONE_MATCH if unmatched else ALL_MATCH

    def _touch(self, *names: str) -> None:
        if self._touched is not None:
            self._touched.update(names)

    def _lookup(self, coordinates: dict[str, Any]) -> Any:
        """The service's value at ``coordinates`` (kept for the next records that ask, up to
        Cache Size); an error of the service is the FlowFile's: a ``LookupError`` saying so."""
        key = tuple((name, type(value).__name__, java_text(value)) for name, value in sorted(coordinates.items()))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            value = self.settings.service.lookup(coordinates)
        except Exception as err:
            shown = ", ".join(f"{name}={java_text(value)}" for name, value in coordinates.items())
            raise LookupFailed(f"the lookup of {{{shown}}} failed: {type(err).__name__}: {err}") from err
        if self.settings.cache_size > 0:
            self._cache[key] = value
            if len(self._cache) > self.settings.cache_size:
                self._cache.popitem(last=False)
        return value


class LookupFailed(RuntimeError):
    """The lookup service could not answer (the FlowFile goes to failure)."""


def _path_text(context: ProcessContext, name: str, flowfile: FlowFile) -> str:
    text = context.property(name).evaluate(flowfile)
    if not text or not text.strip():
        raise RecordPathError(f"property '{name}' gives no RecordPath for this FlowFile")
    return text


def _optional_path(context: ProcessContext, name: str, flowfile: FlowFile) -> RecordPath | None:
    return compile_path(_path_text(context, name, flowfile)) if context.property(name).raw else None


class LookupRecord(Processor):
    """Looks each record up in the Lookup Service and puts the result into it (NiFi's LookupRecord).

    Each dynamic property is a coordinate: its name the coordinate's key, its value a RecordPath
    (Expression Language against the FlowFile) giving the coordinate's value. A record whose path
    selects no value that is not null, or several, is not looked up (unmatched). With Use "Result
    RecordPath" Property, a result is put where Result RecordPath points (added when the field is
    missing; with Insert Record Fields a record result's fields are put into the record there);
    without a Result RecordPath the result only decides the routing. With Replace Existing Values,
    every value each path selects is looked up (the service's one key) and replaced by its result
    where there is one (an empty array counts as matched). With Root Record Path, the lookups are
    made in each record it selects (the records of an array each), and a record matched when all
    of them did. A record never has a value overwritten with null when nothing is found.

    Route to 'success': one FlowFile of every record; Route to 'matched' or 'unmatched': a FlowFile
    of the matched records and one of the others (each only when it has records). Each is a child
    of the original with ``record.count``, ``mime.type`` and the writer's schema attributes, the
    original is dropped. Provenance: a ROUTE event for each child. failure: the original, unchanged, with
    ``record.error.message`` (records that cannot be read or written, a path that does not compile
    or evaluate, a lookup service that fails).
    """

    description = "Looks records up in a lookup service by RecordPaths, enriching and routing them"
    properties = (
        RECORD_READER, RECORD_WRITER,
        PropertyDescriptor("Lookup Service", "The lookup service each record is looked up in", required=True,
                           service=LookupService),
        PropertyDescriptor("Root Record Path", "A RecordPath to records inside each record (an array's records each) "
                           "in which the lookups are made instead", expression_language=True),
        PropertyDescriptor("Routing Strategy", "Whether every record goes to success, or the matched and unmatched "
                           "ones apart", required=True, default=TO_SUCCESS, allowable_values=(TO_SUCCESS, TO_MATCHED)),
        PropertyDescriptor("Record Result Contents", "Whether a record result is put as it is, or its fields are "
                           "put into the record the Result RecordPath points to", required=True,
                           default=ENTIRE_RECORD, allowable_values=(ENTIRE_RECORD, RECORD_FIELDS)),
        PropertyDescriptor("Record Update Strategy", "Put each result where Result RecordPath points, or replace each "
                           "value the dynamic properties' paths select by its own result", required=True,
                           default=USE_PROPERTY, allowable_values=(USE_PROPERTY, REPLACE_EXISTING)),
        PropertyDescriptor("Result RecordPath", "Where the result goes (Use \"Result RecordPath\" Property); unset: "
                           "the result only decides the routing", expression_language=True),
        PropertyDescriptor("Cache Size", "How many lookup results of a FlowFile are kept for its later records "
                           "(0: every record asks the service)", required=True, default="0",
                           validator=validators.NON_NEGATIVE_INTEGER, expression_language=True),
    )
    dynamic_properties = True
    relationships = (SUCCESS, MATCHED, UNMATCHED, FAILED)
    NIFI_TYPE = "org.apache.nifi.processors.standard.LookupRecord"
    NIFI_PROPERTY_NAMES = NIFI_PROPERTY_NAMES
    NIFI_VALUES = NIFI_VALUES

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> tuple[Relationship, ...]:
        if values.get("Routing Strategy", TO_SUCCESS) == TO_MATCHED:
            return (MATCHED, UNMATCHED, FAILED)
        return (SUCCESS, FAILED)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        declared = self.descriptor_map()
        dynamic = {name: value for name, value in values.items() if name not in declared}
        if not dynamic:
            return ["at least one coordinate must be given, as a dynamic property (its name the coordinate's key, "
                    "its value a RecordPath)"]
        problems = record_path_problems(dynamic, "its value")
        for name in ("Root Record Path", "Result RecordPath"):
            problem = record_path_problem(values[name]) if values.get(name) else None
            if problem is not None:
                problems.append(f"property '{name}' is not a valid RecordPath: {problem}")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        service = context.service("Lookup Service", LookupService)
        required = service.required_keys()
        replace = context.property("Record Update Strategy").raw == REPLACE_EXISTING
        if replace and len(required) != 1:
            raise ValueError(f"Replace Existing Values needs a lookup service of one key, but "
                             f"'{context.property('Lookup Service').raw}' requires {len(required)}: "
                             f"{', '.join(sorted(required))}")
        missing = sorted(required - set(context.dynamic_properties))
        if missing and not replace:
            raise ValueError(f"lookup service '{context.property('Lookup Service').raw}' requires the coordinate(s) "
                             f"{', '.join(missing)}: add a dynamic property of that name whose value is a RecordPath")
        self._settings = Settings(service, next(iter(required)) if replace else None,
                                  context.property("Record Result Contents").raw == RECORD_FIELDS,
                                  context.property("Cache Size").as_int() or 0)
        self._split = context.property("Routing Strategy").raw == TO_MATCHED

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        for flowfile in session.get_batch():
            made: list[tuple[FlowFile, Relationship]] = []
            try:
                lookups = Lookups(context, flowfile, self._settings)
                made = self._enrich(session, flowfile, reader, writer, lookups)
            except Exception as err:
                if not (is_flowfile_error(err) or isinstance(err, (RecordPathError, LookupFailed))):
                    raise
                route_failure(context, session, flowfile, err)
                continue
            for child, relationship in made:
                session.provenance.route(child, relationship.name)
                session.transfer(child, relationship)
            session.remove(flowfile)

    # ------------------------------------------------------------------ one FlowFile
    def _enrich(self, session, flowfile: FlowFile, reader, writer: RecordSetWriterFactory,
                lookups: Lookups) -> list[tuple[FlowFile, Relationship]]:
        """The children made of ``flowfile``'s records looked up (removed again on an error)."""
        with open_records(session, flowfile, reader) as records:
            batches = lookups.batches(records)
            first = next(batches, None)
            if first is None:
                return []   # no record: nothing to send, as NiFi
            if lookups.schema is not None or records.exhausted():
                lookups.schema = lookups.schema or first[0].schema
                return self._write(session, flowfile, writer, lookups, chain([first], batches))
            for _ in batches:   # read ahead for the first match (NiFi's pre-pass), then from the start
                if lookups.schema is not None:
                    break
        lookups.schema = lookups.schema or first[0].schema   # no match at all: the records' own
        with open_records(session, flowfile, reader) as again:
            return self._write(session, flowfile, writer, lookups, lookups.batches(again))

    def _write(self, session, flowfile: FlowFile, writer: RecordSetWriterFactory, lookups: Lookups,
               batches: Iterator[tuple[pa.RecordBatch, np.ndarray]]) -> list[tuple[FlowFile, Relationship]]:
        assert lookups.schema is not None
        schema = writer.write_schema(flowfile.attributes, lookups.schema)
        made: list[tuple[FlowFile, Relationship]] = []
        try:
            if not self._split:
                made.append((session.create(flowfile), SUCCESS))
                made[0] = (write_records(session, made[0][0], writer, schema, (b for b, _ in batches))[0], SUCCESS)
                return made
            with SpooledRecords(writer, schema, flowfile.attributes) as unmatched:
                made.append((session.create(flowfile), MATCHED))
                child, result = write_records(session, made[0][0], writer, schema, _matched(batches, unmatched))
                made[0] = (child, MATCHED)
                if result.record_count == 0:
                    session.remove(made.pop()[0])
                if unmatched.finish() is not None:
                    made.append((session.create(flowfile), UNMATCHED))
                    made[-1] = (unmatched.write_to(session, made[-1][0]), UNMATCHED)
            return made
        except BaseException:
            remove_all(session, [child for child, _ in made])
            raise


def _matched(batches: Iterator[tuple[pa.RecordBatch, np.ndarray]], unmatched: SpooledRecords) -> Iterator[pa.RecordBatch]:
    """The matched records of each batch; the others go to ``unmatched`` as they come."""
    for batch, matched in batches:
        kept = set_aside(batch, matched, unmatched)
        if kept is not None:
            yield kept
