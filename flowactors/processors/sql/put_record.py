"""PutDatabaseRecord: a FlowFile's records written to a database table (NiFi's PutDatabaseRecord;
docs/sql.md, "Writing").

**One transaction a FlowFile.** The records are read through the Record Reader a batch at a time
(Arrow batches, ``open_records``), turned into the table's statement (``table_schema``), and sent
with the driver's ``executemany`` in runs of at most Maximum Batch Size records, all in one
database transaction: every record of the FlowFile is written, or none.

**Values.** A column is given what its type takes: nested values (records, arrays, maps) as JSON
text (an array into a PostgreSQL array column as a list), text into a binary column decoded as
Binary String Format says, whole numbers into a date or timestamp column as milliseconds since the
epoch (UTC), text into a number, date or time column converted by Arrow when it can be (else sent as
text for the database to convert), a number into a boolean column as ``!= 0`` and a boolean into a
number column as 1 or 0, anything into a text column as text. SQLite is given decimals,
dates and times as text (its driver takes no other form of them).

**Routing** (NiFi's rule). A database error that may pass when tried again (``is_transient``: a
lost connection, a deadlock, a timeout) and a database that cannot be reached go to ``retry``,
penalized; any other problem (a constraint violated, bad data, a table or field that does not fit)
goes to ``failure``; both with ``putdatabaserecord.error``. With Rollback On Failure the session
is rolled back instead (the FlowFile stays queued) and the processor yields; it then takes one
FlowFile a trigger, as NiFi, so that a rollback never returns one already written.
"""

from __future__ import annotations

import base64
import json
import logging
from datetime import datetime
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from flowactors.processors._common import boolean_property
from flowactors.processors._common import route_failure as common_route_failure
from flowactors.processors.records._io import is_flowfile_error, open_records, record_path_problem
from flowactors.processors.sql.result_sets import mysql_timeout
from flowactors.processors.sql.table_schema import (ARRAY, BUILT_TYPES, DELETE, FAIL_FIELD, INSERT, INSERT_IGNORE,
                                                    MYSQL_DIALECTS, QUOTE_COLUMNS, QUOTE_TABLE, SCHEMA_CACHE_SIZE, SQL,
                                                    TRANSLATIONS, UNMATCHED_COLUMN, UPDATE, UPDATE_KEYS, UPSERT,
                                                    Column, SchemaCache, Statement, StatementError, build_statement,
                                                    comma_list, driver_sql, is_transient, run_as_written,
                                                    settings_of, split_statements, unmatched_field_property)
from flowactors.sdk import ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.record_path import RecordPathError, compile_path
from flowactors.sdk.records import RecordReaderFactory
from flowactors.sdk.services import DatabaseUnavailableError, DBCPService, database_error_text

log = logging.getLogger(__name__)

ERROR_ATTRIBUTE = "putdatabaserecord.error"
STATEMENT_TYPE_ATTRIBUTE = "statement.type"
USE_ATTRIBUTE, USE_RECORD_PATH = "Use statement.type Attribute", "Use Record Path"
#: Debezium's operation letters, which a Statement Type Record Path may give
_DEBEZIUM = {"r": INSERT, "c": INSERT, "u": UPDATE, "d": DELETE}
DATABASE_TYPES = ("Generic", "PostgreSQL", "MySQL", "Oracle", "Oracle 12+", "MS SQL 2012+", "MS SQL 2008", "Phoenix")

SUCCESS = Relationship("success", "FlowFiles whose records were all written")
FAILURE = Relationship("failure", "FlowFiles whose records cannot be written as they are (a constraint violated, "
                                  "bad data, a table or field that does not fit): retrying will fail again")
RETRY = Relationship("retry", "FlowFiles that met a database error that may pass (a lost connection, a deadlock, a "
                              "timeout, the database unreachable), penalized")


class PutDatabaseRecord(Processor):
    """Writes each FlowFile's records to a table with INSERT, UPDATE, UPSERT, INSERT_IGNORE or
    DELETE statements (or runs the SQL a field holds), in one transaction a FlowFile (see the
    module docstring). Provenance: SEND to the database's URL (without its password)."""

    description = "Writes a FlowFile's records to a database table in one transaction"
    NIFI_TYPE = "org.apache.nifi.processors.standard.PutDatabaseRecord"
    properties = (
        PropertyDescriptor("Record Reader", "The service that reads the records", required=True,
                           service=RecordReaderFactory),
        PropertyDescriptor("Database Type", "The kind of database (UPSERT and INSERT_IGNORE take the form of the "
                           "database actually connected to)", default="Generic", allowable_values=DATABASE_TYPES),
        PropertyDescriptor("Statement Type", "The statement each record becomes", required=True,
                           allowable_values=(UPDATE, INSERT, UPSERT, INSERT_IGNORE, DELETE, USE_ATTRIBUTE,
                                             USE_RECORD_PATH)),
        PropertyDescriptor("Statement Type Record Path", "With Use Record Path: the RecordPath giving each record's "
                           "statement type (INSERT, UPDATE, UPSERT, INSERT_IGNORE, DELETE; Debezium's r, c, u, d)",
                           validator=record_path_problem),
        PropertyDescriptor("Data Record Path", "A RecordPath to the record(s) to write instead of each whole record",
                           validator=record_path_problem),
        PropertyDescriptor("Pre-Processing SQL", "Statements (separated by ';', '\\;' for a literal one) run in the "
                           "FlowFile's transaction before its records", expression_language=True),
        PropertyDescriptor("Post-Processing SQL", "Statements run in the FlowFile's transaction after its records",
                           expression_language=True),
        PropertyDescriptor("Database Connection Pooling Service", "The connection pool to the database",
                           required=True, service=DBCPService),
        PropertyDescriptor("Database Name", "The catalog (database) of the table, when the database has several",
                           expression_language=True),
        PropertyDescriptor("Schema Name", "The schema of the table", expression_language=True),
        PropertyDescriptor("Table Name", "The table the records are written to", expression_language=True),
        PropertyDescriptor("Binary String Format", "How text values for binary columns are decoded", default="UTF-8",
                           allowable_values=("UTF-8", "Hexadecimal", "Base64")),
        boolean_property("Translate Field Names", True, "Match field names to column names upper-cased and without "
                         "what the Column Name Translation Strategy removes"),
        PropertyDescriptor("Column Name Translation Strategy", "What is removed from names before they are "
                           "matched", default="REMOVE_UNDERSCORE", allowable_values=tuple(TRANSLATIONS)),
        PropertyDescriptor("Column Name Translation Pattern", "With the PATTERN strategy: the regular expression "
                           "removed from names", validator=validators.REGEX),
        unmatched_field_property(FAIL_FIELD), UNMATCHED_COLUMN, UPDATE_KEYS,
        PropertyDescriptor("Delete Keys", "Comma-separated fields identifying a row for DELETE (default: every "
                           "field)", expression_language=True),
        PropertyDescriptor("Field Containing SQL", "With statement type SQL: the field holding the statement",
                           expression_language=True),
        boolean_property("Allow Multiple SQL Statements", False, "With statement type SQL: split the field's value "
                         "at semicolons and run each statement"),
        QUOTE_COLUMNS, QUOTE_TABLE,
        PropertyDescriptor("Max Wait Time", "The longest a statement may run (PostgreSQL's statement_timeout, "
                           "MariaDB's max_statement_time; not applied on MySQL; 0: no limit)", default="0 seconds",
                           validator=validators.DURATION),
        boolean_property("Rollback On Failure", False, "On an error roll the session back (the FlowFile stays "
                         "queued) and yield, instead of routing to failure or retry"),
        SCHEMA_CACHE_SIZE,
        PropertyDescriptor("Maximum Batch Size", "The most records sent in one executemany (0: a reader batch's)",
                           default="1000", validator=validators.NON_NEGATIVE_INTEGER),
    )
    relationships = (SUCCESS, FAILURE, RETRY)
    NIFI_PROPERTY_NAMES = {
        "put-db-record-record-reader": "Record Reader", "db-type": "Database Type",
        "put-db-record-statement-type": "Statement Type",
        "put-db-record-dcbp-service": "Database Connection Pooling Service",
        "put-db-record-catalog-name": "Database Name", "Catalog Name": "Database Name",
        "put-db-record-schema-name": "Schema Name", "put-db-record-table-name": "Table Name",
        "put-db-record-binary-format": "Binary String Format",
        "put-db-record-translate-field-names": "Translate Field Names",
        "put-db-record-unmatched-field-behavior": "Unmatched Field Behavior",
        "put-db-record-unmatched-column-behavior": "Unmatched Column Behavior",
        "put-db-record-update-keys": "Update Keys", "put-db-record-field-containing-sql": "Field Containing SQL",
        "put-db-record-allow-multiple-statements": "Allow Multiple SQL Statements",
        "put-db-record-quoted-identifiers": "Quote Column Identifiers",
        "put-db-record-quoted-table-identifiers": "Quote Table Identifiers",
        "put-db-record-query-timeout": "Max Wait Time", "table-schema-cache-size": "Table Schema Cache Size",
        "put-db-record-max-batch-size": "Maximum Batch Size", "rollback-on-failure": "Rollback On Failure"}
    #: the transaction a FlowFile is always explicit; no dialect service (the database connected to decides)
    NIFI_FIXED = {"Database Session AutoCommit": "false", "database-session-autocommit": "false",
                  "Database Dialect Service": None}

    def __init__(self) -> None:
        self._cache = SchemaCache(100)

    def custom_validate(self, values) -> list[str]:
        problems = []
        if values.get("Statement Type") == USE_RECORD_PATH and not values.get("Statement Type Record Path"):
            problems.append("Statement Type Record Path is required when Statement Type is Use Record Path")
        if values.get("Column Name Translation Strategy") == "PATTERN" and \
                not values.get("Column Name Translation Pattern"):
            problems.append("Column Name Translation Pattern is required with the PATTERN strategy")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        self._cache = SchemaCache(context.property("Table Schema Cache Size").as_int() or 0)

    def on_trigger(self, context: ProcessContext, session) -> None:
        reader = context.service("Record Reader", RecordReaderFactory)
        pool = context.service("Database Connection Pooling Service", DBCPService)
        rollback = context.property("Rollback On Failure").as_bool()
        flowfiles = [f for f in [session.get()] if f is not None] if rollback else session.get_batch()
        for flowfile in flowfiles:
            try:
                url = self._put(context, session, flowfile, reader, pool)
            except Exception as err:
                relationship = _relationship_of(err)
                message = database_error_text(err)
                if rollback:
                    log.error("%s: %s; rolling the session back, %s stays queued", context.name, message,
                              flowfile.uuid)
                    session.rollback()
                    context.yield_()
                    return
                if relationship is RETRY:
                    flowfile = session.penalize(flowfile)
                common_route_failure(context, session, flowfile, message, {ERROR_ATTRIBUTE: message}, relationship)
                continue
            session.provenance.send(flowfile, url)
            session.transfer(flowfile, SUCCESS)

    def _put(self, context: ProcessContext, session, flowfile: FlowFile, reader: RecordReaderFactory,
             pool: DBCPService) -> str:
        """Write ``flowfile``'s records in one transaction; returns the database's URL."""
        kind = _statement_type(context, flowfile)
        table_text = context.property("Table Name").evaluate(flowfile)
        if kind != SQL and not (table_text or "").strip():
            raise StatementError("Table Name is empty for this FlowFile: set it (or the attribute it names)")
        pre = split_statements(context.property("Pre-Processing SQL").evaluate(flowfile) or "")
        post = split_statements(context.property("Post-Processing SQL").evaluate(flowfile) or "")
        timeout = context.property("Max Wait Time").as_duration() or 0
        with pool.connection() as connection:
            url = connection.engine.url.render_as_string(hide_password=True)
            restore = None
            if timeout >= 1 and connection.dialect.name in MYSQL_DIALECTS:
                restore = mysql_timeout(connection.connection.driver_connection, int(timeout),
                                        getattr(connection.dialect, "is_mariadb", False))
            try:
                with connection.begin():
                    if timeout >= 1 and connection.dialect.name == "postgresql":
                        connection.exec_driver_sql(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")
                    for sql in pre:
                        run_as_written(connection, sql)
                    with open_records(session, flowfile, reader) as records:
                        if kind == SQL:
                            self._run_sql_field(context, flowfile, connection, records)
                        else:
                            writer = _Writer(context, flowfile, connection, self._cache, table_text.strip())
                            writer.write(kind, records)
                    for sql in post:
                        run_as_written(connection, sql)
            finally:
                if restore is not None:
                    restore()
        return url

    def _run_sql_field(self, context: ProcessContext, flowfile: FlowFile, connection: Any, records) -> None:
        """Statement type SQL: run the statement(s) each record's Field Containing SQL holds."""
        name = context.property("Field Containing SQL").evaluate(flowfile)
        if not name or not name.strip():
            raise StatementError("the statement type is SQL but Field Containing SQL is not set")
        if name not in records.schema.names:
            raise StatementError(f"the records have no field '{name}' (Field Containing SQL)")
        several = context.property("Allow Multiple SQL Statements").as_bool()
        for batch in records:
            for text in batch.column(name).to_pylist():
                if text is None or not str(text).strip():
                    raise StatementError(f"a record has no SQL in its field '{name}'")
                for sql in (split_statements(str(text)) if several else [str(text)]):
                    run_as_written(connection, sql)


def _relationship_of(err: Exception) -> Relationship:
    """Where a FlowFile that met ``err`` goes; an error that is not the FlowFile's (a full content
    repository, a bug) is raised again, failing the trigger."""
    from sqlalchemy import exc

    if isinstance(err, ContentRepositoryFullError):
        raise err
    if isinstance(err, DatabaseUnavailableError):
        return RETRY
    if isinstance(err, exc.DBAPIError):
        return RETRY if is_transient(err) else FAILURE
    if isinstance(err, (StatementError, exc.StatementError, RecordPathError, ValueError, TypeError, OverflowError,
                        pa.ArrowException)) or is_flowfile_error(err):
        return FAILURE
    raise err


def _statement_type(context: ProcessContext, flowfile: FlowFile) -> str:
    """The FlowFile's statement type: the property's, its ``statement.type`` attribute's, or
    ``USE_RECORD_PATH`` (decided per record)."""
    kind = context.property("Statement Type").evaluate(flowfile) or ""
    if kind == USE_ATTRIBUTE:
        kind = (flowfile.attributes.get(STATEMENT_TYPE_ATTRIBUTE) or "").strip()
        if not kind:
            raise StatementError(f"Statement Type is '{USE_ATTRIBUTE}' but the FlowFile has no "
                                 f"'{STATEMENT_TYPE_ATTRIBUTE}' attribute")
        if kind.upper() not in (*BUILT_TYPES, SQL):
            raise StatementError(f"the '{STATEMENT_TYPE_ATTRIBUTE}' attribute is '{kind}', not one of "
                                 f"{', '.join((*BUILT_TYPES, SQL))}")
        return kind.upper()
    return kind


class _Writer:
    """One FlowFile's records written to its table on ``connection`` (see the module docstring)."""

    def __init__(self, context: ProcessContext, flowfile: FlowFile, connection: Any, cache: SchemaCache,
                 table: str):
        prop = context.property
        strategy = prop("Column Name Translation Strategy").evaluate() or "REMOVE_UNDERSCORE"
        remove = TRANSLATIONS.get(strategy) or prop("Column Name Translation Pattern").evaluate()
        self.settings = settings_of(context, flowfile, remove, comma_list(prop("Delete Keys").evaluate(flowfile)))
        self.catalog = (prop("Database Name").evaluate(flowfile) or "").strip() or None
        schema = (prop("Schema Name").evaluate(flowfile) or "").strip() or None
        self.connection = connection
        self.table = cache.get(connection, self.catalog, schema, table)
        self.binary_format = prop("Binary String Format").evaluate() or "UTF-8"
        self.max_batch = prop("Maximum Batch Size").as_int() or 0
        type_path = prop("Statement Type Record Path").evaluate()
        data_path = prop("Data Record Path").evaluate()
        self.type_path = compile_path(type_path) if type_path else None
        self.data_path = compile_path(data_path) if data_path else None
        self.style = connection.dialect.paramstyle
        self._statements: dict[tuple[str, tuple[str, ...]], tuple[Statement, str]] = {}
        self._pending_sql: str | None = None
        self._pending: list[tuple] = []

    def write(self, kind: str, records) -> None:
        """Send every record, in runs of Maximum Batch Size."""
        for batch in records:
            for run_kind, run in (self._runs(batch) if kind == USE_RECORD_PATH else [(kind, batch)]):
                self._add(run_kind, run if self.data_path is None else self._data_records(run))
        self._flush()

    def _statement(self, kind: str, names: Sequence[str]) -> tuple[Statement, str]:
        key = (kind, tuple(names))
        found = self._statements.get(key)
        if found is None:
            statement = build_statement(kind, self.table, names, self.settings, self.catalog)
            found = self._statements[key] = (statement, driver_sql(statement.sql, self.style))
        return found

    def _add(self, kind: str, batch: pa.RecordBatch) -> None:
        statement, sql = self._statement(kind, batch.schema.names)
        if sql != self._pending_sql:
            self._flush()
            self._pending_sql = sql
        columns = {index: bind_values(batch.column(index), column, self.binary_format, self.table.dialect)
                   for index, column in zip(statement.params, statement.columns)}
        self._pending.extend(zip(*(columns[index] for index in statement.params)))
        while self.max_batch and len(self._pending) >= self.max_batch:
            rows, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            self.connection.exec_driver_sql(sql, rows)
        if not self.max_batch:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self.connection.exec_driver_sql(self._pending_sql, self._pending)
        self._pending = []

    def _runs(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
        """The batch cut into runs of consecutive records of one statement type (the Statement Type
        Record Path's, evaluated on the whole record)."""
        kinds = []
        for record in batch.to_pylist():
            found = [fv.value for fv in self.type_path.evaluate(record, batch.schema)]
            text = str(found[0]).strip() if found and found[0] is not None else ""
            kind = _DEBEZIUM.get(text.lower(), text.upper())
            if kind not in BUILT_TYPES:
                raise StatementError(f"the Statement Type Record Path {self.type_path.text} gives {text!r} for a "
                                     f"record, not one of {', '.join(BUILT_TYPES)} (or r, c, u, d)")
            kinds.append(kind)
        start = 0
        for index in range(1, len(kinds) + 1):
            if index == len(kinds) or kinds[index] != kinds[start]:
                yield kinds[start], batch.slice(start, index - start)
                start = index

    def _data_records(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The records the Data Record Path selects in each record of ``batch`` (a record, or each
        record of an array)."""
        rows: list[dict] = []
        for record in batch.to_pylist():
            found = self.data_path.evaluate(record, batch.schema)
            if not found:
                raise StatementError(f"the Data Record Path {self.data_path.text} selects nothing in a record")
            for fv in found:
                values = fv.value if isinstance(fv.value, list) else [fv.value]
                if not all(isinstance(v, dict) for v in values):
                    raise StatementError(f"the Data Record Path {self.data_path.text} selects a value that is not a "
                                         f"record")
                rows.extend(values)
        return pa.RecordBatch.from_pylist(rows)


# ---------------------------------------------------------------------------------- values
_TEMPORAL = ("date", "time", "timestamp")


def bind_values(array: pa.Array, column: Column, binary_format: str, dialect: str) -> list:
    """The values of ``array`` (a field's) as the driver binds them for ``column`` (see the module
    docstring); ``ValueError`` (bad data: failure) when they cannot be."""
    data_type = array.type
    if pa.types.is_dictionary(data_type):
        array = array.dictionary_decode()
        data_type = array.type
    if pa.types.is_nested(data_type):
        if column.jdbc_type == ARRAY and (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)):
            return array.to_pylist()
        return [None if v is None else json.dumps(v, default=str) for v in array.to_pylist()]
    kind = column.kind
    if kind == "binary" and (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)):
        return [None if v is None else _decode_binary(v, binary_format) for v in array.to_pylist()]
    if kind == "string" and not (pa.types.is_string(data_type) or pa.types.is_large_string(data_type)):
        return [None if v is None else _text(v) for v in array.to_pylist()]
    if kind in _TEMPORAL and pa.types.is_integer(data_type):
        array = pc.cast(array, pa.int64()).cast(pa.timestamp("ms", "UTC"))   # NiFi: milliseconds since the epoch
        if kind == "date":
            array = array.cast(pa.date32())
    elif kind in ("integer", "float", "decimal", "boolean", *_TEMPORAL) and pa.types.is_string(data_type):
        array = _cast_text(array, kind)
    elif kind == "boolean" and pa.types.is_integer(data_type):
        array = pc.not_equal(array, 0)
    elif kind in ("integer", "float", "decimal") and pa.types.is_boolean(data_type):
        array = array.cast(pa.int64())
    if dialect == "sqlite" and (pa.types.is_decimal(array.type) or pa.types.is_temporal(array.type)):
        return [None if v is None else _sqlite_text(v) for v in array.to_pylist()]
    return array.to_pylist()


_TEXT_CASTS = {"integer": pa.int64(), "float": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(),
               "timestamp": pa.timestamp("us"), "time": pa.time64("us")}


def _cast_text(array: pa.Array, kind: str) -> pa.Array:
    """Text values cast to ``kind`` by Arrow when every one reads as such; else left as text (for
    the database to convert, or to refuse)."""
    target = _TEXT_CASTS.get(kind)
    if target is None:
        return array
    try:
        return pc.cast(pc.utf8_trim_whitespace(array), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return array


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value.isoformat(sep=" ") if isinstance(value, datetime) else str(value)


def _sqlite_text(value: Any) -> str:
    return value.isoformat(sep=" ") if isinstance(value, datetime) else str(value)


def _decode_binary(value: str, binary_format: str) -> bytes:
    """A text value for a binary column, decoded as Binary String Format says."""
    try:
        if binary_format == "Base64":
            return base64.b64decode(value, validate=True)
        if binary_format == "Hexadecimal":
            return bytes.fromhex(value)
    except ValueError as err:
        raise ValueError(f"{value[:40]!r} is not {binary_format} (Binary String Format): {err}") from None
    return value.encode("utf-8")
