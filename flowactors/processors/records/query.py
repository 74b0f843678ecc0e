"""QueryRecord: SQL over a FlowFile's records (the table ``FLOWFILE``), run by DuckDB.

Each dynamic property is a query and the relationship its results go to. The FlowFile's records
reach DuckDB as an Arrow stream (``Table``) that DuckDB scans as it reads it, of only the fields
the query reads (the reader decodes no other: ``QueryRecord._fields_read``), and the results
come back as Arrow batches written by the Record Writer as they come: a query that filters or
projects runs in about one batch of memory; one that sorts or aggregates holds what DuckDB
needs for that (and DuckDB's own memory limit). docs/records/query-record.md says how
DuckDB's SQL differs from NiFi's (Calcite's).
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator, Mapping, Sequence

import duckdb
import pyarrow as pa

from flowactors.processors._common import boolean_property
from flowactors.processors.records._io import (INCLUDE_ZERO_RECORDS, RECORD_READER, RECORD_WRITER, Records,
                                               is_flowfile_error, open_records, reader_and_writer, reason, remove_all,
                                               route_failure, write_records)
from flowactors.sdk import FlowFile
from flowactors.sdk.expression import ExpressionError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyValue, Relationship
from flowactors.sdk.records import BATCH_RECORDS, RecordError, RecordReaderFactory, RecordSetWriterFactory, WriteResult
from flowactors.sdk.relationships import FAILURE

#: NiFi 1's property (NiFi 2 removed it), taken so that a NiFi 1 flow's value is not read as a query
CACHE_SCHEMA = boolean_property(
    "Cache Schema", True, "NiFi 1's choice of keeping the first FlowFile's schema for every query; it changes nothing "
    "here: DuckDB plans each query against each FlowFile's own schema")

#: the table the queries read, as NiFi names it
TABLE = "FLOWFILE"
#: the attribute saying where QueryRecord sent a FlowFile (NiFi's ``QueryRecord.Route``)
ROUTE_ATTRIBUTE = "QueryRecord.Route"


class QueryError(RecordError):
    """A query could not run over a FlowFile's records (a column it names is not there, a value
    its expressions cannot convert); the message names the query and gives DuckDB's reason."""


def connect() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for queries over FlowFiles: no access to files, the network or
    extensions (a query reads only ``FLOWFILE``), times in UTC, and its settings locked so that a
    query cannot change them."""
    connection = duckdb.connect(config={"enable_external_access": False})
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET lock_configuration = true")
    return connection


_parser: duckdb.DuckDBPyConnection | None = None
_parser_lock = threading.Lock()


def sql_problem(sql: str) -> str | None:
    """Why ``sql`` cannot be a query of QueryRecord (it does not parse, is not one statement, or
    is not a SELECT), or None. Only the syntax is checked: the columns are known per FlowFile."""
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = duckdb.connect(config={"enable_external_access": False})
        try:
            statements = _parser.extract_statements(sql)
        except duckdb.Error as err:
            return f"not a valid SQL query: {duckdb_reason(err)}"
    if len(statements) != 1:
        return f"must be one SQL query, not {len(statements)} statements"
    if statements[0].type != duckdb.StatementType.SELECT:
        return f"must be a SELECT query (this is a statement of type {statements[0].type.name})"
    return None


class QueryRecord(Processor):
    """Runs each dynamic property's SQL query over each FlowFile's records.

    A dynamic property's name is a relationship, its value a SELECT over the table ``FLOWFILE``
    (expressions are evaluated against the FlowFile first). For each query a new FlowFile (a child
    of the original) holds the query's results, written by the Record Writer with the schema its
    access strategy gives for the results (the results' own when it inherits: their columns, with
    the type of the input field of the same name where DuckDB changed only its unit), and gets
    ``record.count``, ``mime.type``, the writer's schema attributes and ``QueryRecord.Route``
    (the query's name); it goes to the query's relationship, and the original to original
    (``QueryRecord.Route`` = ``original``). With Include Zero Record FlowFiles false a query whose
    result is empty sends nothing. Provenance: a FORK from the original to the results, and a
    ROUTE event for each result. If a query fails (a column it names is not there, a value it
    cannot convert), or the records cannot be read or written, the results made for the FlowFile
    are dropped and the original goes to failure with ``QueryRecord.Route`` = ``failure`` and
    ``record.error.message`` saying which query and why. Each task has its own DuckDB connection,
    opened when the processor is scheduled and closed when it stops.
    """

    description = "Runs SQL queries (DuckDB) over each FlowFile's records, each query's results to a relationship"
    dynamic_properties = True
    properties = (RECORD_READER, RECORD_WRITER, INCLUDE_ZERO_RECORDS, CACHE_SCHEMA)
    ORIGINAL = Relationship("original", "The FlowFiles every query ran over")
    FAILURE = Relationship(FAILURE.name, "FlowFiles a query could not run over, or whose records could not be read "
                                         "or written")
    relationships = (ORIGINAL, FAILURE)

    def __init__(self) -> None:
        self._db: duckdb.DuckDBPyConnection | None = None
        self._flowfile = CurrentTable()
        #: the fields each query reads, by (query, schema): most FlowFiles of a flow share both
        self._read_fields: dict[tuple[str, pa.Schema], list[str] | None] = {}

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        declared = cls.descriptor_map()
        return (*cls.relationships, *(Relationship(name, "The results of the query of the property of this name")
                                      for name in values if name not in declared))

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        declared = self.descriptor_map()
        queries = {name: value for name, value in values.items() if name not in declared}
        for name, sql in queries.items():
            if name in (self.ORIGINAL.name, self.FAILURE.name):
                problems.append(f"query property '{name}' has the name of the relationship '{name}' the processor "
                                "already has; name the query otherwise")
            elif "${" not in sql.replace("$${", ""):   # else known only per FlowFile
                problem = sql_problem(PropertyValue(sql).evaluate() or "")
                if problem:
                    problems.append(f"query property '{name}': {problem}")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        self._connect()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """The task's connection, with ``FLOWFILE`` registered once: the records of the FlowFile
        being queried (``CurrentTable``), not a registration a query."""
        self._db = connect()
        self._db.register(TABLE, self._flowfile)
        return self._db

    def on_stopped(self, context: ProcessContext) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader, writer = reader_and_writer(context)
        include_empty = context.property(INCLUDE_ZERO_RECORDS.name).as_bool()
        queries = list(context.dynamic_properties)
        for original in session.get_batch():
            made: list[tuple[FlowFile, str]] = []
            try:
                for name in queries:
                    sql = context.property(name).evaluate(original) or ""
                    child = session.create(original)
                    made.append((child, name))
                    child, result = self._query(session, original, child, name, sql, reader, writer)
                    made[-1] = (child, name)
                    if result.record_count == 0 and not include_empty:
                        session.remove(made.pop()[0])
            except Exception as err:
                if not (is_flowfile_error(err) or isinstance(err, ExpressionError)):
                    raise
                remove_all(session, [child for child, _ in made])
                route_failure(context, session, original, err, {ROUTE_ATTRIBUTE: self.FAILURE.name}, self.FAILURE)
                continue
            if made:
                session.provenance.fork(original, [child for child, _ in made])
            for child, name in made:
                session.provenance.route(child, name)
                session.transfer(child, name)
            session.transfer(session.put_attribute(original, ROUTE_ATTRIBUTE, self.ORIGINAL.name), self.ORIGINAL)

    def _query(self, session, original: FlowFile, child: FlowFile, name: str, sql: str, reader: RecordReaderFactory,
               writer: RecordSetWriterFactory) -> tuple[FlowFile, WriteResult]:
        """``child`` holding the results of ``sql`` over ``original``'s records."""
        db = self._db or self._connect()   # triggered without on_scheduled: a test's own session
        with ExitStack() as scope:
            table = Table(session, original, reader, scope)
            if not table.schema.names:
                raise QueryError(f"query '{name}' has no table to read: the records have no fields (an empty "
                                 "content, its schema inferred from no record)")
            fields = self._fields_read(db, sql, table.schema)
            if fields is not None:
                table.project(fields)
            scope.enter_context(self._flowfile.holding(table))
            try:
                results = db.sql(sql)
                if results is None:
                    raise QueryError(f"query '{name}' gives no records (it must be a SELECT)")
                stream = results.to_arrow_reader(BATCH_RECORDS)
            except (duckdb.Error, pa.ArrowException, OSError) as err:
                raise table.failure(name, err) from None
            schema, restore = result_schema(stream.schema, table.schema)
            return write_records(session, child, writer, writer.write_schema(original.attributes, schema),
                                 _results(stream, restore, name, table), original.attributes,
                                 extra={ROUTE_ATTRIBUTE: name})

    def _fields_read(self, db: duckdb.DuckDBPyConnection, sql: str, schema: pa.Schema) -> list[str] | None:
        """The fields of ``schema`` that ``sql`` reads, in the schema's order, so that the reader
        decodes only those: the columns of DuckDB's plan's scans of ``FLOWFILE`` (the projections
        its optimizer pushed into each scan). A query that reads no column (``count(*)``) is given
        the first; one that reads a nested field, its column. None when it reads every field, or
        the plan cannot tell (the query does not bind: running it gives its error)."""
        key = (sql, schema)
        if key not in self._read_fields:
            if len(self._read_fields) >= FIELDS_CACHED:
                self._read_fields.clear()
            with self._flowfile.holding(schema.empty_table()):
                self._read_fields[key] = fields_read(db, sql, schema)
        return self._read_fields[key]


#: how many (query, schema) pairs a QueryRecord keeps the fields read of
FIELDS_CACHED = 64


def fields_read(db: duckdb.DuckDBPyConnection, sql: str, schema: pa.Schema) -> list[str] | None:
    """``QueryRecord._fields_read`` with ``FLOWFILE`` registered as a table of ``schema``."""
    names = schema.names
    if not names or len(set(names)) != len(names):
        return None
    try:
        plan = json.loads(db.sql("EXPLAIN (FORMAT JSON) " + sql).fetchall()[0][1])
    except (duckdb.Error, ValueError, IndexError, TypeError):
        return None
    used: set[str] = set()
    nodes = list(plan) if isinstance(plan, list) else [plan]
    while nodes:
        node = nodes.pop()
        if not isinstance(node, dict):
            return None
        nodes.extend(node.get("children", []))
        info = node.get("extra_info") or {}
        if "ARROW_SCAN" in str(info.get("Function", "")):
            projected = info.get("Projections", [])
            for column in [projected] if isinstance(projected, str) else projected:
                # a nested field pushed down is "s.p": its column is s (or one named "s.p")
                fields = {column[:i] for i, c in enumerate(column) if c == "."} | {column}
                if not fields & set(names):
                    return None
                used |= fields
    if used.issuperset(names):
        return None
    return [name for name in names if name in used] or names[:1]


class CurrentTable:
    """``FLOWFILE`` as registered with DuckDB once a connection: the ``Table`` of the FlowFile a
    query runs over while ``holding`` it (DuckDB binds each query to the schema it has then), an
    empty placeholder between queries. Registering each FlowFile's table costs DuckDB about as
    much as a small query."""

    _NONE = pa.table({"_": pa.array([], pa.int8())})

    def __init__(self) -> None:
        self._table: "Table | pa.Table" = self._NONE

    @property
    def schema(self) -> pa.Schema:
        return self._table.schema

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)

    @contextmanager
    def holding(self, table: "Table | pa.Table") -> Iterator[None]:
        self._table = table
        try:
            yield
        finally:
            self._table = self._NONE


class Table:
    """``FLOWFILE`` as DuckDB reads it: an Arrow stream (``__arrow_c_stream__``) for each scan of
    a query (a UNION or a subquery scans it again), each a reader of its own over the content,
    opened when DuckDB first reads from it (asking for the schema opens nothing); the first scan
    takes the reader opened for the schema. Readers and streams are closed with ``scope``."""

    def __init__(self, session, flowfile: FlowFile, reader: RecordReaderFactory, scope: ExitStack):
        self._open = lambda: scope.enter_context(open_records(session, flowfile, reader))
        self._first: Records | None = self._open()
        self.schema = self._first.schema
        self._fields: list[str] | None = None
        #: the exception a scan's reading stopped at, if any (DuckDB reports it in its own words)
        self.error: BaseException | None = None

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return pa.RecordBatchReader.from_batches(self.schema, self._scan()).__arrow_c_stream__(requested_schema)

    def project(self, fields: list[str]) -> None:
        """Scan only ``fields`` (of ``schema``, in its order); ``schema`` becomes theirs. Before
        the first scan (the reader opened for the schema is projected too)."""
        assert self._first is not None, "projected after a scan"
        self._fields = fields
        self._first.project(fields)
        self.schema = self._first.schema

    def _opened(self) -> Records:
        """A reader of its own for a scan after the first, projected as the table is."""
        records = self._open()
        if self._fields is not None:
            records.project(self._fields)
        return records

    def _scan(self) -> Iterator[pa.RecordBatch]:
        records, self._first = self._first or self._opened(), None
        try:
            yield from records
        except Exception as err:   # not GeneratorExit: DuckDB closing a scan it read enough of
            self.error = self.error or err
            raise

    def failure(self, name: str, err: BaseException) -> BaseException:
        """The error to route the FlowFile with: the reader's, when reading the records is what
        failed under DuckDB, else the query's."""
        if self.error is not None:
            return self.error
        return QueryError(f"query '{name}' failed: {duckdb_reason(err)}")


def duckdb_reason(err: BaseException) -> str:
    """DuckDB's message on one line, without the excerpt of the query it may add (``LINE 1: ...``)."""
    return reason(str(err).split("\nLINE ")[0]) if str(err).strip() else type(err).__name__


def _results(stream: pa.RecordBatchReader, restore: Callable[[pa.RecordBatch], pa.RecordBatch], name: str,
             table: Table) -> Iterator[pa.RecordBatch]:
    try:
        for batch in stream:
            yield restore(batch)
    except (duckdb.Error, pa.ArrowException, OSError) as err:
        raise table.failure(name, err) from None


def result_schema(result: pa.Schema, source: pa.Schema) -> tuple[pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]]:
    """The schema of a query's results, and what makes its batches have it: a column named as one
    input field whose type DuckDB kept, or changed only in unit (timestamps and times come back in
    microseconds, in DuckDB's UTC zone), gets that field's type and metadata back (NiFi's types:
    UUID, ENUM, CHAR, CHOICE; Avro names); every other column is DuckDB's."""
    fields = []
    for field in result:
        index = source.get_field_index(field.name)
        original = source.field(index) if index >= 0 else None
        if original is not None and (original.type == field.type or _same_unit_kind(original.type, field.type)):
            field = original.with_nullable(field.nullable)
        fields.append(field)
    schema = pa.schema(fields)   # no name: as NiFi's, the results' schema is not the input's
    casts = [i for i, (old, new) in enumerate(zip(result, schema)) if old.type != new.type]

    def restore(batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = list(batch.columns)
        for i in casts:
            columns[i] = columns[i].cast(schema.field(i).type, safe=False)   # a finer time truncated
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    return schema, restore


def _same_unit_kind(a: pa.DataType, b: pa.DataType) -> bool:
    return (pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and (a.tz is None) == (b.tz is None)) or \
        (pa.types.is_time(a) and pa.types.is_time(b))
