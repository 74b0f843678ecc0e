"""QueryDatabaseTable and QueryDatabaseTableRecord: sources that fetch a table's rows beyond the
maxima kept in their state (NiFi's ``QueryDatabaseTable`` / ``QueryDatabaseTableRecord``;
docs/sql.md, "Incremental fetch").

Each trigger runs ``SELECT <Columns to Return> FROM <Table Name> WHERE <past the kept maxima>
AND (<Additional WHERE clause>)`` (or the Custom Query wrapped as a sub-query) and writes the rows
as QueryDatabaseTable an Avro container file (``result_sets.write_avro``, as NiFi's JdbcCommon),
QueryDatabaseTableRecord through its Record Writer: one FlowFile, or one every Max Rows Per Flow
File rows (``fragment.*``), at most Maximum Number of Fragments of them. The greatest values of
the Maximum-value Columns among the rows fetched become the state, written with the FlowFiles
(``incremental``'s docstring): a restart fetches only newer rows. A trigger that finds no row
sends nothing and yields.

Attributes: ``tablename``, ``querydbtable.row.count``, ``maxvalue.<column>`` (each kept maximum)
and, with Max Rows Per Flow File, ``fragment.identifier``, ``fragment.index`` and
``fragment.count``; with Output Batch Size set, neither ``maxvalue.*`` nor ``fragment.count``
(the FlowFiles leave before the last is known), as NiFi. The Record one adds ``mime.type`` and
``record.count``. Provenance: RECEIVE from the database's URL (without its password).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Callable

from flowactors.processors._common import boolean_property
from flowactors.processors.records._io import RECORD_WRITER
from flowactors.processors.sql import result_sets as rs
from flowactors.processors.sql.execute import (AUTO_COMMIT, DBCP_SERVICE, DEFAULT_PRECISION, DEFAULT_SCALE,
                                               FETCH_SIZE, LOGICAL_TYPES, MAX_ROWS, OUTPUT_BATCH, QUERY_TIMEOUT)
from flowactors.processors.sql.incremental import (COLUMN_NAMES, DB_TYPE, MAX_VALUE_COLUMNS, NIFI_FETCH_NAMES,
                                                   SQL_QUERY, TABLE_NAME, WHERE_CLAUSE, ColumnTypes,
                                                   DatabaseFetchError, MaxTracker, base_select, first_row, greater,
                                                   initial_values, max_positions, max_value_attributes, run,
                                                   split_columns, state_key, stored_maximum, where_clauses,
                                                   with_initial_values)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordSetWriterFactory
from flowactors.sdk.records.spooling import written_attributes
from flowactors.sdk.services import DBCPService, database_error_text

log = logging.getLogger(__name__)

SUCCESS = Relationship("success", "The rows fetched")
START_AT_BEGINNING, START_AT_MAXIMUM = "Start at Beginning", "Start at Current Maximum Values"
#: NiFi's Transaction Isolation Level values (JDBC's constants, as a flow stores them) and SQLAlchemy's names
ISOLATION_LEVELS = {"TRANSACTION_NONE": "AUTOCOMMIT", "TRANSACTION_READ_UNCOMMITTED": "READ UNCOMMITTED",
                    "TRANSACTION_READ_COMMITTED": "READ COMMITTED", "TRANSACTION_REPEATABLE_READ": "REPEATABLE READ",
                    "TRANSACTION_SERIALIZABLE": "SERIALIZABLE"}
_JDBC_ISOLATION = {"0": "TRANSACTION_NONE", "1": "TRANSACTION_READ_UNCOMMITTED", "2": "TRANSACTION_READ_COMMITTED",
                   "4": "TRANSACTION_REPEATABLE_READ", "8": "TRANSACTION_SERIALIZABLE"}


INITIAL_LOAD = PropertyDescriptor(
    "Initial Load Strategy", "What the first trigger (or one after the state was cleared) fetches: every row, or only "
    "rows added later (the current maxima are kept first); initial.maxvalue.* properties win over it",
    required=True, default=START_AT_BEGINNING, allowable_values=(START_AT_BEGINNING, START_AT_MAXIMUM))
MAX_FRAGMENTS = PropertyDescriptor(
    "Maximum Number of Fragments", "The most FlowFiles a trigger makes (0: no limit); the rows past them are not "
    "fetched until newer ones come, since the results are not ordered", required=True, default="0",
    expression_language=True, validator=validators.NON_NEGATIVE_INTEGER)
ISOLATION = PropertyDescriptor("Transaction Isolation Level", "The isolation of the query's transaction (unset: the "
                               "connection's own)", allowable_values=tuple(ISOLATION_LEVELS))

#: the NiFi 1 names AbstractQueryDatabaseTable.migrateProperties renames, and JdbcProperties' old ones
_NIFI_NAMES = {**NIFI_FETCH_NAMES, "qdbt-max-rows": MAX_ROWS.name, "Max Rows Per Flow File": MAX_ROWS.name,
               "qdbt-output-batch-size": OUTPUT_BATCH.name, "qdbt-max-frags": MAX_FRAGMENTS.name,
               "transaction-isolation-level": ISOLATION.name, "initial-load-strategy": INITIAL_LOAD.name,
               "dbf-user-logical-types": LOGICAL_TYPES.name, "dbf-default-precision": DEFAULT_PRECISION.name,
               "dbf-default-scale": DEFAULT_SCALE.name}
#: NiFi 2's Database Dialect Service (Database Type 'Database Dialect Service') is not there
_NIFI_FIXED = {"Database Dialect Service": None}


class _QueryTable(Processor):
    """What the two share: the trigger (see the module docstring); a subclass writes the rows."""

    input_required = False
    dynamic_properties = True   # initial.maxvalue.<column>
    relationships = (SUCCESS,)
    NIFI_VALUES = {ISOLATION.name: _JDBC_ISOLATION}
    NIFI_FIXED = _NIFI_FIXED

    def custom_validate(self, values) -> list[str]:
        if values.get(INITIAL_LOAD.name) == START_AT_MAXIMUM and not values.get(MAX_VALUE_COLUMNS.name):
            return [f"'{START_AT_MAXIMUM}' needs Maximum-value Columns"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._types = ColumnTypes()

    def on_trigger(self, context: ProcessContext, session) -> None:
        state = context.state.get()
        table = context.property(TABLE_NAME.name).evaluate() or ""
        custom = context.property(SQL_QUERY.name).evaluate()
        columns = split_columns(context.property(MAX_VALUE_COLUMNS.name).evaluate())
        kept = with_initial_values(state.values, table, initial_values(context))
        service = context.service(DBCP_SERVICE.name, DBCPService)
        with service.connection() as connection:
            level = context.property(ISOLATION.name).raw
            if level:
                connection = connection.execution_options(isolation_level=ISOLATION_LEVELS[level])
            if columns:
                self._types.ensure(connection, table, custom, columns)
            if columns and not kept and context.property(INITIAL_LOAD.name).raw == START_AT_MAXIMUM:
                self._start_at_maximum(context, connection, table, custom, columns, kept)
            query = base_select(table, split_columns(context.property(COLUMN_NAMES.name).evaluate()), custom)
            clauses = where_clauses(kept, table, columns, self._types, context.property(WHERE_CLAUSE.name).evaluate())
            query += f" WHERE {' AND '.join(clauses)}" if clauses else ""
            made = self._fetch(context, session, connection, query, table, columns, kept)
        if made and context.property(OUTPUT_BATCH.name).as_int() == 0:
            extra = max_value_attributes(kept)
            if context.property(MAX_ROWS.name).as_int():
                extra["fragment.count"] = str(len(made))
            made = [session.put_all_attributes(flowfile, extra) for flowfile in made]
        session.transfer_batch(made, SUCCESS)
        if kept != dict(state.values) and not context.state.replace(state, kept):
            session.rollback()   # another task moved the maxima meanwhile: fetch again at the next trigger

    def _start_at_maximum(self, context: ProcessContext, connection, table: str, custom: str | None,
                          columns: list[str], kept: dict[str, str]) -> None:
        """Keep the columns' current maxima, so the first fetch takes only rows added later."""
        source = f"({custom}) AS {table}" if custom else table
        query = f"SELECT {', '.join(f'MAX({c}) {c}' for c in columns)} FROM {source}"
        row = first_row(connection, query, context.property(QUERY_TIMEOUT.name).as_duration())
        for value, column in zip(row, columns):
            new = greater(value, stored_maximum(kept, table, column))
            if new is not None:
                kept[state_key(table, column)] = new

    def _fetch(self, context: ProcessContext, session, connection, query: str, table: str, columns: list[str],
               kept: dict[str, str]) -> list[FlowFile]:
        """Run ``query`` and write its rows into FlowFiles (committing every Output Batch Size of
        them); ``kept`` is raised to the maxima of the rows written. The FlowFiles not yet sent."""
        max_rows = context.property(MAX_ROWS.name).as_int() or 0
        batch = context.property(OUTPUT_BATCH.name).as_int() or 0
        fragments = context.property(MAX_FRAGMENTS.name).as_int() or 0
        auto_commit = context.property(AUTO_COMMIT.name).raw != "false"
        fragment_id, started = str(uuid.uuid4()), time.monotonic()
        uri = connection.engine.url.render_as_string(hide_password=True)
        pending: list[FlowFile] = []
        try:
            with run(connection, query, fetch_size=context.property(FETCH_SIZE.name).as_int() or 0,
                     timeout_seconds=int(context.property(QUERY_TIMEOUT.name).as_duration() or 0),
                     auto_commit=auto_commit) as ran:
                result = next(ran.results())
                tracker = MaxTracker(max_positions([c.label for c in result.columns], table, columns), kept)
                writer = self._writer(context, result, table)
                index = 0
                while True:
                    if result.exhausted():   # no row (left): no FlowFile, and no commit
                        if index == 0:
                            context.yield_()
                        break
                    flowfile, count = self._write(session, writer, result, max_rows, tracker)
                    attributes = {"querydbtable.row.count": str(count), "tablename": table}
                    if max_rows > 0:
                        attributes.update({"fragment.identifier": fragment_id, "fragment.index": str(index)})
                    flowfile = session.put_all_attributes(flowfile, attributes)
                    session.provenance.receive(flowfile, uri, duration=round((time.monotonic() - started) * 1000))
                    pending.append(flowfile)
                    if batch and len(pending) >= batch:
                        session.transfer_batch(pending, SUCCESS)
                        session.commit()   # the state waits for the trigger's last commit
                        pending = []
                    index += 1
                    if (fragments and index >= fragments) or (not fragments and not max_rows) or \
                            (max_rows and count < max_rows):
                        break
        except connection.dialect.dbapi.Error as err:
            raise DatabaseFetchError(f"the database refused {query!r}: {database_error_text(err)}") from None
        kept.update(tracker.maxima())
        return pending

    def _writer(self, context: ProcessContext, result: rs.ResultSet, table: str) -> Any:
        """What writes the next rows of ``result`` into a stream (``_write`` calls it)."""
        raise NotImplementedError

    @staticmethod
    def _write(session, writer, result: rs.ResultSet, max_rows: int,
               on_row: Callable[[tuple], None]) -> tuple[FlowFile, int]:
        """A new FlowFile holding the next ``max_rows`` rows (0: all), and how many it holds."""
        written: list[tuple[int, dict]] = []
        flowfile = session.write(session.create(), lambda out: written.append(writer(out, max_rows, on_row)))
        count, attributes = written[0]
        return (session.put_all_attributes(flowfile, attributes) if attributes and count else flowfile), count


def _avro_options(context: ProcessContext, record_name: str | None, normalize: str) -> rs.AvroOptions:
    return rs.AvroOptions(record_name=record_name, normalize_names=context.property(normalize).as_bool(),
                          logical_types=context.property(LOGICAL_TYPES.name).as_bool(),
                          default_precision=context.property(DEFAULT_PRECISION.name).as_int() or 10,
                          default_scale=context.property(DEFAULT_SCALE.name).as_int() or 0)


class QueryDatabaseTable(_QueryTable):
    """Fetches a table's new rows as Avro (see the module docstring). Provenance: RECEIVE from the
    database's URL (without its password)."""

    description = "Fetches the rows of a table beyond the kept maxima, as Avro"
    NIFI_TYPE = "org.apache.nifi.processors.standard.QueryDatabaseTable"
    NIFI_PROPERTY_NAMES = {**_NIFI_NAMES, "dbf-normalize": "Normalize Table and Column Names"}
    properties = (DBCP_SERVICE, DB_TYPE, TABLE_NAME, COLUMN_NAMES, WHERE_CLAUSE, SQL_QUERY, MAX_VALUE_COLUMNS,
                  INITIAL_LOAD, QUERY_TIMEOUT, FETCH_SIZE, AUTO_COMMIT, MAX_ROWS, OUTPUT_BATCH, MAX_FRAGMENTS,
                  boolean_property("Normalize Table and Column Names", False, "Whether characters Avro does not "
                                   "allow in names become '_'"),
                  ISOLATION, LOGICAL_TYPES, DEFAULT_PRECISION, DEFAULT_SCALE)

    def _writer(self, context: ProcessContext, result: rs.ResultSet, table: str) -> Any:
        options = _avro_options(context, table, "Normalize Table and Column Names")

        def write(out, max_rows: int, on_row) -> tuple[int, dict]:
            return rs.write_avro(result, out, options, max_rows=max_rows, on_row=on_row), {
                "mime.type": rs.MIME_TYPE_AVRO}
        return write


class QueryDatabaseTableRecord(_QueryTable):
    """Fetches a table's new rows through a Record Writer (see the module docstring). Provenance:
    RECEIVE from the database's URL (without its password)."""

    description = "Fetches the rows of a table beyond the kept maxima, written by a record writer"
    NIFI_TYPE = "org.apache.nifi.processors.standard.QueryDatabaseTableRecord"
    NIFI_PROPERTY_NAMES = {**_NIFI_NAMES, "qdbtr-record-writer": RECORD_WRITER.name,
                           "qdbtr-normalize": "Normalize Table/Column Names"}
    properties = (DBCP_SERVICE, DB_TYPE, TABLE_NAME, COLUMN_NAMES, WHERE_CLAUSE, SQL_QUERY, RECORD_WRITER,
                  MAX_VALUE_COLUMNS, INITIAL_LOAD, QUERY_TIMEOUT, FETCH_SIZE, AUTO_COMMIT, MAX_ROWS,
                  OUTPUT_BATCH, MAX_FRAGMENTS,
                  boolean_property("Normalize Table/Column Names", False, "Whether characters Avro does not allow "
                                   "in names become '_' in the records' schema"),
                  ISOLATION, LOGICAL_TYPES, DEFAULT_PRECISION, DEFAULT_SCALE)

    def _writer(self, context: ProcessContext, result: rs.ResultSet, table: str) -> Any:
        options = _avro_options(context, None, "Normalize Table/Column Names")
        factory = context.service(RECORD_WRITER.name, RecordSetWriterFactory)
        schema = factory.write_schema({}, rs.record_schema(result, options))

        def write(out, max_rows: int, on_row) -> tuple[int, dict]:
            writer = factory.create_writer(schema, out, {})
            for batch in rs.record_batches(result, options, max_rows=max_rows, on_row=on_row):
                writer.write_batch(batch)
            done = writer.finish()
            return done.record_count, written_attributes(factory, done)
        return write
