"""GenerateTableFetch: SELECT statements that each fetch one page of a table's new rows, as
FlowFile contents for ExecuteSQL (NiFi's ``GenerateTableFetch``; docs/sql.md, "Incremental fetch").

Each trigger asks the database once how many rows lie beyond the kept maxima (and what the new
maxima are): ``SELECT COUNT(*), MAX(<column>) <column>, ... FROM <table> WHERE <past the maxima>``.
It then writes ``ceil(rows / Partition Size)`` statements, each bounded above by the new maxima
(``<column> <= <new maximum>``) so that rows inserted meanwhile wait for the next trigger, ordered
by the Maximum-value Columns (or Custom ORDER BY Column) and paged with LIMIT / OFFSET; or, with a
Column for Value Partitioning, by ranges of that column's values between its MIN and MAX. The new
maxima go into the state in the same commit as the statements (``incremental``'s docstring).

With an incoming connection it runs once per FlowFile, whose attributes its expressions read (and
does nothing when it finds none: another task took it);
the FlowFile is dropped once its statements are made (they are its children), or, when the
database refuses the count, sent to failure with ``generatetablefetch.sql.error`` (penalized).
Without one it is a source, run on its schedule.
"""

from __future__ import annotations

import logging
import uuid

from flowactors.processors.sql.execute import DBCP_SERVICE, QUERY_TIMEOUT
from flowactors.processors.sql.incremental import (COLUMN_NAMES, DB_TYPE, MAX_VALUE_COLUMNS, NIFI_FETCH_NAMES,
                                                   TABLE_NAME, WHERE_CLAUSE, ColumnTypes, DatabaseFetchError,
                                                   first_row, greater, initial_values, literal, select_statement,
                                                   split_columns, state_key, stored_maximum, where_clauses,
                                                   with_initial_values)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE
from flowactors.sdk.services import DatabaseUnavailableError, DBCPService

log = logging.getLogger(__name__)

SUCCESS = Relationship("success", "The SELECT statements, one page each")
SQL_ERROR = "generatetablefetch.sql.error"


def _single_column(value: str) -> str | None:
    return "must name a single column (it holds a comma)" if "," in value and "${" not in value else None


class GenerateTableFetch(Processor):
    """Writes SELECT statements fetching a table's new rows a page at a time (see the module docstring).
    Provenance: the session's CREATE (a FORK child of an incoming FlowFile)."""

    description = "Generates SQL SELECT statements fetching pages of a table's rows beyond the kept maxima"
    NIFI_TYPE = "org.apache.nifi.processors.standard.GenerateTableFetch"
    NIFI_PROPERTY_NAMES = {**NIFI_FETCH_NAMES, "gen-table-fetch-partition-size": "Partition Size",
                           "gen-table-column-for-val-partitioning": "Column for Value Partitioning",
                           "gen-table-output-flowfile-on-zero-results": "Output Empty FlowFile on Zero Results",
                           "gen-table-custom-orderby-column": "Custom ORDER BY Column"}
    #: NiFi 2's Database Dialect Service (Database Type 'Database Dialect Service') is not there
    NIFI_FIXED = {"Database Dialect Service": None}
    input_required = False
    input_allowed = True
    dynamic_properties = True   # initial.maxvalue.<column>
    properties = (
        DBCP_SERVICE, DB_TYPE, TABLE_NAME, COLUMN_NAMES, MAX_VALUE_COLUMNS, QUERY_TIMEOUT,
        PropertyDescriptor("Partition Size", "Rows per statement (0: one statement fetching every row)",
                           required=True, default="10000", expression_language=True,
                           validator=validators.NON_NEGATIVE_INTEGER),
        PropertyDescriptor("Column for Value Partitioning", "A whole-number column whose values page the rows instead "
                           "of LIMIT / OFFSET (dense, evenly spread values)", expression_language=True,
                           validator=_single_column),
        WHERE_CLAUSE,
        PropertyDescriptor("Custom ORDER BY Column", "The column ordering the pages when there is no Maximum-value "
                           "Column (without either, pages may overlap or miss rows)", expression_language=True,
                           validator=validators.NON_EMPTY),
        PropertyDescriptor("Output Empty FlowFile on Zero Results", "Whether a trigger that makes no statement "
                           "sends one empty FlowFile on", required=True, default="false",
                           allowable_values=("true", "false")),
    )
    relationships = (SUCCESS, FAILURE)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._types = ColumnTypes()

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfile = session.get()
        if flowfile is None and context.has_incoming_connection:
            return   # another task took the FlowFile: only a source works without one (NiFi's rule)
        state = context.state.get()
        table = context.property(TABLE_NAME.name).evaluate(flowfile) or ""
        kept = with_initial_values(state.values, table, initial_values(context, flowfile))
        try:
            made = self._fetches(context, session, flowfile, table, kept)
        except (DatabaseFetchError, DatabaseUnavailableError) as err:
            if flowfile is None:
                raise
            log.error("%s: routing %s to failure: %s", context.name, flowfile.uuid, err)
            flowfile = session.put_attribute(flowfile, SQL_ERROR, str(err))
            session.transfer(session.penalize(flowfile), FAILURE)
        else:
            session.transfer_batch(made, SUCCESS)
            if flowfile is not None:
                session.remove(flowfile)   # its statements are its children
        if kept != dict(state.values) and not context.state.replace(state, kept):
            session.rollback()   # another task moved the maxima meanwhile: count again at the next trigger

    def _fetches(self, context: ProcessContext, session, flowfile: FlowFile | None, table: str,
                 kept: dict[str, str]) -> list[FlowFile]:
        """The statements of one trigger, as FlowFiles (children of ``flowfile`` when there is one);
        ``kept`` is raised to the new maxima."""
        def value(name: str) -> str | None:
            return context.property(name).evaluate(flowfile)

        columns = split_columns(value(MAX_VALUE_COLUMNS.name))
        partition_size = int(value("Partition Size") or "0")
        by_column = value("Column for Value Partitioning")
        custom_where = value(WHERE_CLAUSE.name)
        selected = ["-1" if by_column or partition_size == 0 else "COUNT(*)", *(f"MAX({c}) {c}" for c in columns)]
        if by_column:
            if "," in by_column:
                raise DatabaseFetchError(f"Column for Value Partitioning must name a single column, not {by_column!r}")
            selected += [f"MAX({by_column}) {by_column}", f"MIN({by_column}) MIN_{by_column}"]
        service = context.service(DBCP_SERVICE.name, DBCPService)
        with service.connection() as connection:
            if columns:
                self._types.ensure(connection, table, None, columns)
            # an older NiFi's plain key is read only for a fixed table (NiFi's rule)
            legacy = "${" not in (context.property(TABLE_NAME.name).raw or "")
            clauses = where_clauses(kept, table, columns, self._types, custom_where, legacy)
            count_query = f"SELECT {', '.join(selected)} FROM {table}" + (
                f" WHERE {' AND '.join(clauses)}" if clauses else "")
            row = first_row(connection, count_query, context.property(QUERY_TIMEOUT.name).as_duration(flowfile))
            for index, column in enumerate(columns, start=1):
                new = greater(row[index], stored_maximum(kept, table, column, legacy))
                if new is not None:
                    kept[state_key(table, column)] = new
        for column in columns:
            stored = stored_maximum(kept, table, column, legacy)
            if stored:
                clauses.append(f"{column} <= {literal(self._types.kind(table, column), stored)}")
        bounds = (row[len(columns) + 1], row[len(columns) + 2]) if by_column else None
        return self._statements(context, session, flowfile, table, columns, row[0], clauses, bounds, value)

    def _statements(self, context: ProcessContext, session, parent: FlowFile | None, table: str, columns: list[str],
                    row_count: int, clauses: list[str], bounds: tuple | None, value) -> list[FlowFile]:
        """The page statements (NiFi's: LIMIT / OFFSET pages, or ranges of the partitioning column
        ``bounds`` = (max, min)), or one empty FlowFile when there is none and one is wanted."""
        partition_size = int(value("Partition Size") or "0")
        by_column = value("Column for Value Partitioning")
        custom_where = value(WHERE_CLAUSE.name)
        if bounds is not None:
            high, low = (int(b) if b is not None else None for b in bounds)
            span = 0 if high is None else high - low + 1
        else:
            high = low = None
            span = row_count
        fetches = 1 if partition_size == 0 else -(-span // partition_size)
        names = value(COLUMN_NAMES.name)
        base = {"generatetablefetch.tableName": table, "fragment.identifier": str(uuid.uuid4()),
                "fragment.count": str(fetches)}
        if names is not None:
            base["generatetablefetch.columnNames"] = names
        if columns:
            base["generatetablefetch.maxColumnNames"] = ", ".join(columns)
        if fetches == 0:
            if context.property("Output Empty FlowFile on Zero Results").as_bool():
                empty = session.create(parent)
                return [session.put_all_attributes(empty, {
                    **base, "generatetablefetch.whereClause": " AND ".join(clauses) or "1=1", "fragment.index": "0"})]
            return []
        made = []
        limit = partition_size or None
        order_by = None if partition_size == 0 else (", ".join(columns) or value("Custom ORDER BY Column"))
        for index in range(fetches):
            if index == fetches - 1 and by_column and (not clauses or custom_where is not None):
                clauses = [*clauses, f"{by_column} <= {high}"]
                limit = None
            where = " AND ".join(clauses) or "1=1"
            offset = None if partition_size == 0 else index * partition_size + ((low or 0) if by_column else 0)
            statement = select_statement(table, names, where, order_by, limit, offset, by_column)
            page = session.write_bytes(session.create(parent), statement.encode())
            attributes = {**base, "generatetablefetch.whereClause": where, "fragment.index": str(index)}
            if limit is not None:
                attributes["generatetablefetch.limit"] = str(limit)
            if offset is not None:
                attributes["generatetablefetch.offset"] = str(offset)
            made.append(session.put_all_attributes(page, attributes))
        return made
