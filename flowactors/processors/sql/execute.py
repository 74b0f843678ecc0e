"""ExecuteSQL and ExecuteSQLRecord: NiFi's processors running a SQL query and writing its result
sets, as Avro (ExecuteSQL) or through a record writer (ExecuteSQLRecord) (docs/sql.md, "Reading").

Both allow input without needing it: with an incoming connection they run once per FlowFile
(whose attributes the properties' expressions read, whose content is the query when SQL Query is
empty, and whose ``sql.args.N.type`` / ``sql.args.N.value`` / ``sql.args.N.format`` attributes
are the ``?`` parameters, as are dynamic properties of those names); without one they are sources
run on their schedule. Each result set gives one FlowFile (or one per Max Rows Per FlowFile
rows, with ``fragment.*``); the input FlowFile is dropped when there was a result set, else sent
on empty (or unchanged: ExecuteSQL's Content Output Strategy ORIGINAL).

**Failure** follows NiFi's AbstractExecuteSQL: a SQL error (a syntax error, a missing table, a
query timeout), a database that cannot be reached (``DatabaseUnavailableError``), a parameter
that does not parse or a value that does not fit its column sends the input FlowFile, penalized,
to failure with ``executesql.error.message`` (one line), and the result FlowFiles not yet
committed are dropped. When Output Batch Size committed the input's removal already, a new
FlowFile with its attributes goes instead. With no input FlowFile the error is logged and the
processor yields. A full content repository is no FlowFile's problem: it fails the trigger.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pyarrow as pa

from flowactors.processors._common import boolean_property
from flowactors.processors.sql.jdbc_parameters import for_dialect, statement_parameters
from flowactors.processors.sql.result_sets import (CODECS, MIME_TYPE_AVRO, AvroOptions, ResultSet, record_batches,
                                                   record_schema, run_query, write_avro, write_empty_avro)
from flowactors.processors.sql.table_schema import prepared_sql, split_statements
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordSetWriterFactory
from flowactors.sdk.records.spooling import written_attributes
from flowactors.sdk.relationships import FAILURE
from flowactors.sdk.services import DatabaseUnavailableError, DBCPService, database_error_text
from flowactors.sdk.units import parse_duration

log = logging.getLogger(__name__)

SUCCESS = Relationship("success", "A result set's FlowFile (and the input when the query gave none)")
ROW_COUNT, DURATION = "executesql.row.count", "executesql.query.duration"
EXECUTION_TIME, FETCH_TIME = "executesql.query.executiontime", "executesql.query.fetchtime"
RESULTSET_INDEX, ERROR_MESSAGE = "executesql.resultset.index", "executesql.error.message"
INPUT_UUID = "input.flowfile.uuid"


def _sql_property(name: str, description: str) -> PropertyDescriptor:
    return PropertyDescriptor(name, description, expression_language=True, validator=validators.NON_EMPTY)


def _count_property(name: str, description: str) -> PropertyDescriptor:
    return PropertyDescriptor(name, description, required=True, default="0", expression_language=True,
                              validator=validators.NON_NEGATIVE_INTEGER)


DBCP_SERVICE = PropertyDescriptor("Database Connection Pooling Service", "The connection pool reaching the database",
                                  required=True, service=DBCPService)
PRE_QUERY = _sql_property("SQL Pre-Query", "Statements run before the query, separated by ';' (a '\\;' is a "
                          "semicolon in a statement); their results are discarded")
SQL_QUERY = _sql_property("SQL Query", "The query; when empty, the incoming FlowFile's content (UTF-8) is the query")
POST_QUERY = _sql_property("SQL Post-Query", "Statements run after the query, as SQL Pre-Query's")
QUERY_TIMEOUT = PropertyDescriptor("Max Wait Time", "The longest the query may run (0: no limit; under 1 second "
                                   "counts as 0)", required=True, default="0 seconds", expression_language=True,
                                   validator=validators.DURATION)
LOGICAL_TYPES = boolean_property("Use Avro Logical Types", False, "Write DECIMAL/NUMERIC, DATE, TIME and TIMESTAMP "
                                 "columns as Avro's decimal, date, time-millis and timestamp-millis, not as text")
DEFAULT_PRECISION = PropertyDescriptor("Default Decimal Precision", "A decimal's precision when the database gives "
                                       "none", required=True, default="10", expression_language=True,
                                       validator=validators.POSITIVE_INTEGER)
DEFAULT_SCALE = PropertyDescriptor("Default Decimal Scale", "A decimal's scale when the database gives none (values "
                                   "are rounded half up to it)", required=True, default="0", expression_language=True,
                                   validator=validators.NON_NEGATIVE_INTEGER)
MAX_ROWS = _count_property("Max Rows Per FlowFile", "The most rows a FlowFile holds (0: a result set's every row)")
OUTPUT_BATCH = _count_property("Output Batch Size", "Commit every this many result FlowFiles (0: once at the end; "
                               "set, fragment.count is not written)")
FETCH_SIZE = _count_property("Fetch Size", "Rows fetched from the database at a time (0: the default, 1000)")
AUTO_COMMIT = boolean_property("Set Auto Commit", True, "The connection's auto-commit; false lets PostgreSQL fetch a "
                               "SELECT's rows Fetch Size at a time (a server-side cursor), and commits at the end")
COMMON_PROPERTIES = (DBCP_SERVICE, PRE_QUERY, SQL_QUERY, POST_QUERY, QUERY_TIMEOUT)
#: AbstractExecuteSQL's migrateProperties, and the processors' own
NIFI_NAMES = {"sql-pre-query": PRE_QUERY.name, "SQL select query": SQL_QUERY.name, "sql-post-query": POST_QUERY.name,
              "esql-output-batch-size": OUTPUT_BATCH.name, "esql-fetch-size": FETCH_SIZE.name,
              "esql-auto-commit": AUTO_COMMIT.name, "esql-max-rows": MAX_ROWS.name,
              "Max Rows Per Flow File": MAX_ROWS.name, "dbf-user-logical-types": LOGICAL_TYPES.name,
              "dbf-default-precision": DEFAULT_PRECISION.name, "dbf-default-scale": DEFAULT_SCALE.name}


def _query_error(err: BaseException) -> bool:
    """Whether ``err`` is the query's problem (failure), not the trigger's: a database, driver or
    SQLAlchemy error, the database unreachable, or a value the processor could not use."""
    module = type(err).__module__ or ""
    return isinstance(err, (DatabaseUnavailableError, ValueError)) or \
        module.split(".")[0] in ("psycopg", "sqlite3", "pymysql", "sqlalchemy")


def whole(context: ProcessContext, descriptor: PropertyDescriptor, flowfile: FlowFile | None) -> int:
    """``descriptor``'s value for ``flowfile``, a whole number of 0 or more (a ``ValueError``
    naming the property and the value when it is not one)."""
    value = (context.property(descriptor.name).evaluate(flowfile) or "").strip()
    if not value.isdigit():
        raise ValueError(f"'{descriptor.name}' is {value!r} for this FlowFile, not a whole number of 0 or more")
    return int(value)


# ---------------------------------------------------------------------------------- the processors
class _Run:
    """One trigger's query: the result FlowFiles it made, and the input FlowFile while it holds it."""

    def __init__(self, processor: "_ExecuteSQLBase", context: ProcessContext, session, flowfile: FlowFile | None):
        self.processor, self.context, self.session = processor, context, session
        self.flowfile, self.had_input = flowfile, flowfile is not None
        self.input_attributes = {k: v for k, v in flowfile.attributes.items() if k != "uuid"} if flowfile else {}
        self.input_uuid = flowfile.uuid if flowfile else ""
        self.retained: dict[str, str] | None = None
        self.pending: list[FlowFile] = []
        self.query, self.uri = "", ""

    def _settings(self) -> None:
        context, flowfile = self.context, self.flowfile
        self.max_rows, self.batch = whole(context, MAX_ROWS, flowfile), whole(context, OUTPUT_BATCH, flowfile)
        self.fetch = whole(context, FETCH_SIZE, flowfile)
        timeout = context.property(QUERY_TIMEOUT.name).evaluate(flowfile) or "0 sec"
        try:
            self.timeout = int(parse_duration(timeout))
        except ValueError:
            raise ValueError(f"'{QUERY_TIMEOUT.name}' is {timeout!r} for this FlowFile, not a duration") from None
        self.pre = split_statements(context.property(PRE_QUERY.name).evaluate(flowfile))
        self.post = split_statements(context.property(POST_QUERY.name).evaluate(flowfile))
        self.options = self.processor.avro_options(context, flowfile)

    def statement(self) -> str:
        query = self.context.property(SQL_QUERY.name)
        if query.is_set:
            return query.evaluate(self.flowfile) or ""
        return self.session.read_bytes(self.flowfile).decode("utf-8")

    def execute(self) -> int:
        """Run the pre-queries, the query and the post-queries; the number of result sets."""
        context = self.context
        self._settings()
        sql = self.query = self.statement()
        values = {**context.dynamic_properties, **(self.flowfile.attributes if self.flowfile else {})}
        parameters = statement_parameters(values)
        auto_commit = context.property(AUTO_COMMIT.name).as_bool()
        service = context.service(DBCP_SERVICE.name, DBCPService)
        with service.connection() as connection:
            self.uri = connection.engine.url.render_as_string(hide_password=True)
            if auto_commit:
                connection.execution_options(isolation_level="AUTOCOMMIT")
            if parameters is not None:
                parameters = for_dialect(parameters, connection.dialect.name)
            self._configure(connection, self.pre)
            self.query = sql
            count = 0
            statement = sql if parameters is not None else prepared_sql(sql, connection.dialect.name)
            with run_query(connection, statement, parameters, fetch_size=self.fetch, timeout_seconds=self.timeout,
                           auto_commit=auto_commit) as query:
                for result in query.results():
                    self._fragments(result, count, query.execution_ms)
                    count += 1
            self._configure(connection, self.post)
            if not auto_commit:
                connection.connection.driver_connection.commit()
        return count

    def _configure(self, connection: Any, statements: list[str]) -> None:
        for statement in statements:
            self.query = statement
            run_query(connection, statement).close()

    def _fragments(self, result: ResultSet, index: int, execution_ms: int) -> None:
        """Write ``result`` into one FlowFile, or one per Max Rows Per FlowFile rows."""
        session, fragment_id, made = self.session, str(uuid.uuid4()), []
        while True:
            started = time.monotonic()
            target = session.create(self.flowfile) if self.flowfile is not None else session.create()
            try:
                target, rows, attributes = self.processor.write_result(self.context, session, target, result, self)
            except BaseException:
                session.remove(target)   # NiFi's too: the FlowFile being written goes with the error
                raise
            if self.max_rows > 0 and rows == 0 and made:
                session.remove(target)
                break
            fetch_ms = round((time.monotonic() - started) * 1000)
            attributes.update({ROW_COUNT: str(rows), DURATION: str(execution_ms + fetch_ms),
                               EXECUTION_TIME: str(execution_ms), FETCH_TIME: str(fetch_ms),
                               RESULTSET_INDEX: str(index)})
            if self.had_input:   # the input's attributes, also once an output batch removed it (as NiFi)
                attributes = {**self.input_attributes, **attributes, INPUT_UUID: self.input_uuid}
            if self.max_rows > 0:
                attributes.update({"fragment.identifier": fragment_id, "fragment.index": str(len(made))})
            target = session.put_all_attributes(target, attributes)
            report = session.provenance.fetch if self.had_input else session.provenance.receive
            report(target, self.uri, details=f"Retrieved {rows} rows", duration=execution_ms + fetch_ms)
            made.append(target)
            self.pending.append(target)
            if self.batch > 0 and len(self.pending) >= self.batch:
                self._commit_batch()
            if not (self.max_rows > 0 and rows == self.max_rows):
                break
        if self.batch == 0 and self.max_rows > 0:
            for flowfile in made:
                self.pending[self.pending.index(flowfile)] = session.put_attribute(
                    flowfile, "fragment.count", str(len(made)))

    def _commit_batch(self) -> None:
        for flowfile in self.pending:
            self.session.transfer(flowfile, SUCCESS)
        if self.flowfile is not None:
            self.retained = self.input_attributes
            self.session.remove(self.flowfile)
            self.flowfile = None
        self.session.commit()
        self.pending.clear()

    def fail(self, err: BaseException) -> None:
        """Route the input (or a FlowFile with its attributes) to failure, as the module docstring says."""
        session, message = self.session, database_error_text(err)
        for flowfile in self.pending:
            session.remove(flowfile)
        self.pending.clear()
        target = self.flowfile
        if target is None and self.retained is not None:
            target = session.put_all_attributes(session.create(), self.retained)
        if target is None:
            log.error("%s: unable to run the SQL query [%s], and no FlowFile to route to failure: %s",
                      self.context.name, self.query, message)
            self.context.yield_()
            return
        log.error("%s: unable to run the SQL query [%s]; routing %s to failure: %s", self.context.name,
                  self.query, target.uuid, message)
        if self.had_input:
            target = session.penalize(target)
        else:
            self.context.yield_()
        session.transfer(session.put_attribute(target, ERROR_MESSAGE, message), FAILURE)


class _ExecuteSQLBase(Processor):
    """What ExecuteSQL and ExecuteSQLRecord share (see the module docstring)."""

    relationships = (SUCCESS, FAILURE)
    input_required = False
    input_allowed = True
    dynamic_properties = True   # sql.args.N.type / .value / .format

    def avro_options(self, context: ProcessContext, flowfile: FlowFile | None) -> AvroOptions:
        raise NotImplementedError

    def write_result(self, context: ProcessContext, session, target: FlowFile, result: ResultSet,
                     run: _Run) -> tuple[FlowFile, int, dict[str, str]]:
        """Write the next rows of ``result`` into ``target``: the FlowFile, the rows written and the
        attributes to add (``mime.type``, and the writer's)."""
        raise NotImplementedError

    def write_empty(self, context: ProcessContext, session, target: FlowFile) -> FlowFile:
        """``target`` with the content of no result set, ``executesql.row.count`` 0 and ``mime.type``."""
        raise NotImplementedError

    def keep_original(self, context: ProcessContext) -> bool:
        return False

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfile = session.get()
        if flowfile is None and context.has_incoming_connection:
            return   # another task took the FlowFiles: only a source runs its query with none
        if flowfile is None and not context.property(SQL_QUERY.name).is_set:
            log.error("%s: SQL Query is empty and there is no incoming FlowFile to read the query from: set SQL "
                      "Query, or connect a processor whose FlowFiles hold the queries", context.name)
            context.yield_()
            return
        run = _Run(self, context, session, flowfile)
        try:
            count = run.execute()
        except Exception as err:
            if not _query_error(err):
                raise
            run.fail(err)
            return
        self._finish(context, session, run, count)

    def _finish(self, context: ProcessContext, session, run: _Run, count: int) -> None:
        for flowfile in run.pending:
            session.transfer(flowfile, SUCCESS)
        if run.flowfile is not None:
            if count:
                session.remove(run.flowfile)
            elif self.keep_original(context):
                session.transfer(run.flowfile, SUCCESS)
            else:
                session.transfer(self.write_empty(context, session, run.flowfile), SUCCESS)
        elif count == 0 and not run.had_input:
            session.transfer(self.write_empty(context, session, session.create()), SUCCESS)

    @staticmethod
    def _decimals(context: ProcessContext, flowfile: FlowFile | None) -> dict[str, Any]:
        return {"logical_types": context.property(LOGICAL_TYPES.name).as_bool(),
                "default_precision": whole(context, DEFAULT_PRECISION, flowfile),
                "default_scale": whole(context, DEFAULT_SCALE, flowfile)}


class ExecuteSQL(_ExecuteSQLBase):
    """Runs a SQL query and writes each result set as an Avro file (see the module docstring).
    Provenance: FETCH of each result FlowFile from the database's URL (RECEIVE when it had no
    input FlowFile)."""

    description = "Executes a SQL query and writes each result set as Avro (NiFi's JdbcCommon mapping)"
    NIFI_TYPE = "org.apache.nifi.processors.standard.ExecuteSQL"
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "compression-format": "Compression Format",
                           "dbf-normalize": "Normalize Table and Column Names"}
    properties = (
        *COMMON_PROPERTIES,
        boolean_property("Normalize Table and Column Names", False, "Change the characters Avro refuses in names "
                         "into '_' (and put '_' before a leading digit)"),
        LOGICAL_TYPES,
        PropertyDescriptor("Compression Format", "The Avro file's compression codec (LZO writes xz, as NiFi does)",
                           required=True, default="NONE", allowable_values=tuple(sorted(CODECS))),
        DEFAULT_PRECISION, DEFAULT_SCALE, MAX_ROWS, OUTPUT_BATCH, FETCH_SIZE, AUTO_COMMIT,
        PropertyDescriptor("Content Output Strategy", "What an input FlowFile becomes when the query gives no result "
                           "set: EMPTY (an Avro file without records) or ORIGINAL (unchanged)", required=True,
                           default="EMPTY", allowable_values=("EMPTY", "ORIGINAL")),
    )

    def avro_options(self, context: ProcessContext, flowfile: FlowFile | None) -> AvroOptions:
        return AvroOptions(normalize_names=context.property("Normalize Table and Column Names").as_bool(),
                           codec=context.property("Compression Format").raw or "NONE",
                           **self._decimals(context, flowfile))

    def keep_original(self, context: ProcessContext) -> bool:
        return context.property("Content Output Strategy").raw == "ORIGINAL"

    def write_result(self, context, session, target, result, run):
        rows: list[int] = []
        target = session.write(target, lambda out: rows.append(write_avro(result, out, run.options,
                                                                          max_rows=run.max_rows)))
        return target, rows[0], {"mime.type": MIME_TYPE_AVRO}

    def write_empty(self, context, session, target):
        target = session.write(target, write_empty_avro)
        return session.put_all_attributes(target, {ROW_COUNT: "0", "mime.type": MIME_TYPE_AVRO})


class ExecuteSQLRecord(_ExecuteSQLBase):
    """Runs a SQL query and writes each result set through a record writer (see the module docstring).
    Provenance: FETCH of each result FlowFile from the database's URL (RECEIVE when it had no
    input FlowFile)."""

    description = "Executes a SQL query and writes each result set with a Record Writer"
    NIFI_TYPE = "org.apache.nifi.processors.standard.ExecuteSQLRecord"
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "esqlrecord-record-writer": "Record Writer",
                           "esqlrecord-normalize": "Normalize Table/Column Names"}
    properties = (
        *COMMON_PROPERTIES,
        PropertyDescriptor("Record Writer", "The controller service writing the records", required=True,
                           service=RecordSetWriterFactory),
        boolean_property("Normalize Table/Column Names", False, "Change the characters Avro refuses in names into "
                         "'_' (and put '_' before a leading digit)"),
        LOGICAL_TYPES, DEFAULT_PRECISION, DEFAULT_SCALE, MAX_ROWS, OUTPUT_BATCH, FETCH_SIZE, AUTO_COMMIT,
    )

    def avro_options(self, context: ProcessContext, flowfile: FlowFile | None) -> AvroOptions:
        return AvroOptions(normalize_names=context.property("Normalize Table/Column Names").as_bool(),
                           **self._decimals(context, flowfile))

    def write_result(self, context, session, target, result, run):
        factory = context.service("Record Writer", RecordSetWriterFactory)
        attributes = run.flowfile.attributes if run.flowfile is not None else {}
        schema = factory.write_schema(attributes, record_schema(result, run.options))
        results = []

        def write(out: Any) -> None:
            writer = factory.create_writer(schema, out, attributes)
            for batch in record_batches(result, run.options, max_rows=run.max_rows):
                writer.write_batch(batch)
            results.append(writer.finish())

        target = session.write(target, write)
        return target, results[0].record_count, written_attributes(factory, results[0])

    def write_empty(self, context, session, target):
        factory = context.service("Record Writer", RecordSetWriterFactory)
        schema = factory.write_schema(target.attributes, pa.schema([]))
        results = []

        def write(out: Any) -> None:
            results.append(factory.create_writer(schema, out, target.attributes).finish())

        target = session.write(target, write)
        return session.put_all_attributes(target, {**written_attributes(factory, results[0]), ROW_COUNT: "0"})

