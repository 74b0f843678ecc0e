"""What QueryDatabaseTable, QueryDatabaseTableRecord and GenerateTableFetch share (NiFi's
``AbstractDatabaseFetchProcessor`` and ``AbstractQueryDatabaseTable``): their common properties,
the SQL they build, and the maximum values they keep in the processor's state (docs/sql.md,
"Incremental fetch").

**State.** Each Maximum-value Column's greatest value seen is kept under NiFi's key
``<table>@!@<column>`` (both lower-cased, quotes ``"`` `` ` `` ``[`` ``]`` taken off:
``state_key``), as text NiFi would write (``render``: ``1.5`` as Java's ``Double.toString``, a
timestamp as ``java.sql.Timestamp.toString``, ``2024-01-02 03:04:05.0``). A value stored by an
older NiFi under the plain column name is read when the qualified key is missing, and the next
maximum is written under the qualified key. ``initial.maxvalue.<column>`` dynamic properties give
a column's starting maximum when the state has none.

**The WHERE clause** (``where_clauses``): the first column ``> `` its stored maximum, each later
one ``>=`` (NiFi's rule: later columns increase more slowly, within a partition of the first),
then ``(Additional WHERE Clause)``; the literal is quoted or bare by the column's type, read once
from the database (``ColumnTypes``: PostgreSQL's types as ``result_sets`` maps them to JDBC's,
the declared column types on SQLite) and kept for the processor's life.

**SQL.** One dialect for the Database Types flowactors has (Generic, PostgreSQL, MySQL): ANSI
``SELECT ... FROM ... WHERE ... ORDER BY ... LIMIT n OFFSET m``, as NiFi's Generic adapter writes
it (``select_statement``); a Custom Query is wrapped as ``SELECT * FROM (<query>) AS <Table
Name>``.

**When the state is written.** In the session of the trigger that fetched the rows, so in the
same commit as the FlowFiles holding them: a trigger that fails or a process killed before the
commit leaves the state as it was and the rows are fetched again; after it, never. With Output
Batch Size the trigger commits every that many FlowFiles and the state only with the last, so a
crash in between sends the rows of the batches already committed again (at most that trigger's
rows, duplicated; never a row lost).

The pool, Max Wait Time and the Avro and fetching properties are ExecuteSQL's (``execute``).
"""

from __future__ import annotations

import decimal
import re
from datetime import date, datetime, time, timezone
from typing import Any, Mapping, Sequence

from flowactors.processors.sql import result_sets as rs
from flowactors.processors.sql import table_schema as ts
from flowactors.sdk.expression.language import java_double
from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.services import database_error_text

#: NiFi's separator of the table and the column in a state key
NAMESPACE = "@!@"
#: the prefix of the dynamic properties giving a column's first maximum
INITIAL_MAX = "initial.maxvalue."
#: the Database Types flowactors writes SQL for (the same ANSI SQL with LIMIT / OFFSET for each)
DATABASE_TYPES = ("Generic", "PostgreSQL", "MySQL")

# ---------------------------------------------------------------------------------- properties
DB_TYPE = PropertyDescriptor("Database Type", "Which SQL dialect the statements are written in: each writes "
                             "ANSI SQL with LIMIT and OFFSET", required=True, default="Generic",
                             allowable_values=DATABASE_TYPES)
TABLE_NAME = PropertyDescriptor("Table Name", "The table to query; with a Custom Query, the query's alias and the "
                                "tablename attribute", required=True, expression_language=True,
                                validator=validators.NON_EMPTY)
COLUMN_NAMES = PropertyDescriptor("Columns to Return", "Comma-separated columns to select (none: every column); "
                                  "keep them the same for a table, or the incremental fetch goes wrong",
                                  expression_language=True, validator=validators.NON_EMPTY)
MAX_VALUE_COLUMNS = PropertyDescriptor(
    "Maximum-value Columns", "Comma-separated columns whose greatest values are kept, so that only rows beyond them "
    "are fetched next time; each later column is expected to grow more slowly than the one before (none: every "
    "row each time)", expression_language=True, validator=validators.NON_EMPTY)
WHERE_CLAUSE = PropertyDescriptor("Additional WHERE Clause", "A condition added to the query's WHERE clause",
                                  expression_language=True, validator=validators.NON_EMPTY)
SQL_QUERY = PropertyDescriptor("Custom Query", "A query used instead of the table, wrapped as a sub-query aliased "
                               "Table Name (it must have no ORDER BY)", expression_language=True,
                               validator=validators.NON_EMPTY)

#: what every fetch processor's NiFi 1 flow calls these (AbstractDatabaseFetchProcessor.migrateProperties)
NIFI_FETCH_NAMES = {"db-fetch-db-type": DB_TYPE.name, "db-fetch-where-clause": WHERE_CLAUSE.name,
                    "db-fetch-sql-query": SQL_QUERY.name}

_QUOTES = re.compile(r'["`\[\]]')


class DatabaseFetchError(RuntimeError):
    """A statement could not be run, or its result not used: one sentence naming the statement."""


def split_columns(text: str | None) -> list[str]:
    """A comma-separated list of column names, each trimmed; none for an empty value."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def state_key(table: str | None, column: str) -> str:
    """NiFi's state key of ``column`` of ``table``: ``table@!@column`` lower-cased without quotes
    (the plain column for no table: an older NiFi's key)."""
    name = _QUOTES.sub("", column.lower())
    return name if table is None else f"{_QUOTES.sub('', table.lower())}{NAMESPACE}{name}"


def stored_maximum(state: Mapping[str, str], table: str, column: str, legacy: bool = True) -> str | None:
    """The maximum kept for ``column`` of ``table``: under NiFi's key, else (with ``legacy``) an
    older NiFi's plain one (GenerateTableFetch reads that only when its Table Name is fixed)."""
    found = state.get(state_key(table, column))
    return found or (state.get(state_key(None, column)) if legacy else None) or None


def with_initial_values(state: Mapping[str, str], table: str, initial: Mapping[str, str]) -> dict[str, str]:
    """The state with each ``initial.maxvalue.<column>`` (``initial``: column -> value) where it
    keeps no value for the column: under the qualified key, taken from an older NiFi's plain key
    when that is there (NiFi's rule)."""
    merged = dict(state)
    for column, value in initial.items():
        key = state_key(table, column)
        if key not in merged:
            merged[key] = merged.get(state_key(None, column), value)
    return merged


def initial_values(context, flowfile=None) -> dict[str, str]:
    """The ``initial.maxvalue.<column>`` dynamic properties, evaluated: column -> value."""
    return {name[len(INITIAL_MAX):]: context.property(name).evaluate(flowfile) or ""
            for name in context.dynamic_properties if name.startswith(INITIAL_MAX)}


def max_value_attributes(state: Mapping[str, str]) -> dict[str, str]:
    """NiFi's ``maxvalue.<column>`` attributes: one for each key of the state."""
    return {f"maxvalue.{key.rpartition(NAMESPACE)[2]}": value for key, value in state.items()}


# ---------------------------------------------------------------------------------- values
#: how a maximum's literal is written in SQL, by the kind of its column
TEXT, NUMBER, UNKNOWN = "text", "number", "unknown"
#: the JDBC types (``result_sets``' mapping of the database's) whose maxima are numbers and text;
#: any other type cannot keep a maximum (boolean, binary, arrays, OTHER: NiFi refuses them too)
_NUMBERS = {ts.TINYINT, ts.SMALLINT, ts.INTEGER, ts.BIGINT, ts.FLOAT, ts.REAL, ts.DOUBLE, ts.NUMERIC, ts.DECIMAL}
_TEXTS = {ts.CHAR, ts.VARCHAR, ts.LONGVARCHAR, ts.NCHAR, ts.NVARCHAR, ts.LONGNVARCHAR, ts.ROWID, ts.DATE, ts.TIME,
          ts.TIMESTAMP, ts.TIMESTAMP_WITH_TIMEZONE}


def render(value: Any) -> str:
    """A column value as NiFi keeps it in the state (``ValueError`` for a type that cannot keep one)."""
    if isinstance(value, bool) or isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(f"a {type(value).__name__} column cannot keep a maximum value")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime):
        if value.tzinfo is not None:   # a time zone's timestamp: kept in UTC, with its offset
            value = value.astimezone(timezone.utc)
        fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
        text = f"{value.replace(microsecond=0, tzinfo=None).isoformat(sep=' ')}.{fraction}"
        return text + ("+00:00" if value.tzinfo is not None else "")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return f"{value.replace(microsecond=0, tzinfo=None).isoformat()}.{value.microsecond // 1000:03d}"
    if isinstance(value, str):
        return value
    raise ValueError(f"a {type(value).__name__} column cannot keep a maximum value")


#: a timestamp as kept: Java's Timestamp text (nanoseconds, or a date alone), a zone's offset after it
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d)(?:[ T](\d\d:\d\d:\d\d)(?:\.(\d+))?)?([+-]\d\d:?\d\d|Z)?")


def _parsed(text: str, like: Any) -> Any:
    """A stored maximum read as a value of ``like``'s type, to compare with it."""
    if isinstance(like, int):
        return int(decimal.Decimal(text))
    if isinstance(like, float):
        return float(text)
    if isinstance(like, decimal.Decimal):
        return decimal.Decimal(text)
    if isinstance(like, datetime):
        parts = _TIMESTAMP.fullmatch(text.strip())
        if parts is None:
            raise ValueError(text)
        day, clock, fraction, zone = parts.groups()
        found = datetime.fromisoformat(f"{day} {clock or '00:00:00'}.{(fraction or '')[:6].ljust(6, '0')}"
                                       f"{zone or ''}")
        if (found.tzinfo is None) != (like.tzinfo is None):   # a kept value without zone read as UTC
            found = found.replace(tzinfo=timezone.utc) if found.tzinfo is None else found.replace(tzinfo=None)
        return found
    if isinstance(like, date):
        return date.fromisoformat(text[:10])
    if isinstance(like, time):
        return time.fromisoformat(text)
    return text


#: what a column's values are, in words (the first that fits)
_KINDS = ((bool, "a boolean"), (int, "a whole number"), (float, "a number"), (decimal.Decimal, "a decimal"),
          (datetime, "a timestamp"), (date, "a date"), (time, "a time"))


def greater(value: Any, stored: str | None) -> str | None:
    """``value`` rendered when it is beyond the ``stored`` maximum (or none is stored), else None;
    a null value never is. ``ValueError`` when the stored text does not read as the column's type."""
    if value is None:
        return None
    text = render(value)
    if stored is None:
        return text
    try:
        beyond = value > _parsed(stored, value)
    except (ValueError, TypeError, decimal.InvalidOperation, ArithmeticError):
        kind = next((words for kind, words in _KINDS if isinstance(value, kind)), type(value).__name__)
        raise ValueError(f"the kept maximum {stored!r} does not read as {kind}, the column's type: clear the "
                         f"processor's state if the column's type changed") from None
    return text if beyond else None


def literal(kind: str, text: str) -> str:
    """A stored maximum as a SQL literal for a column of ``kind``: quoted text, a bare number, or,
    when the type is unknown (a Custom Query on SQLite), bare if it reads as a number."""
    if kind == NUMBER or (kind == UNKNOWN and re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text)):
        return text
    return "'" + text.replace("'", "''") + "'"


class ColumnTypes:
    """The literal kind of each Maximum-value Column, by state key, read from the database the
    first time a table (or Custom Query) is used and kept for the processor's life (NiFi reads
    them once a schedule)."""

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}

    def kind(self, table: str, column: str) -> str:
        return self._kinds.get(state_key(table, column), UNKNOWN)

    def ensure(self, connection, table: str, custom_query: str | None, columns: Sequence[str]) -> None:
        """Read the kinds of ``columns`` unless known; ``DatabaseFetchError`` when the table or
        query lacks one of them."""
        if all(state_key(table, c) in self._kinds for c in columns):
            return
        query = f"{base_select(table, (), custom_query)} WHERE 1 = 0"
        with run(connection, query) as ran:
            described = next(ran.results()).columns
        found = {state_key(table, c.label): c.jdbc_type for c in described}
        # SQLite's driver gives no types: the declared ones (none for a Custom Query)
        sqlite = connection.dialect.name == "sqlite"
        declared = _declared_kinds(connection, table) if sqlite and not custom_query else {}
        for column in columns:
            key = state_key(table, column)
            if key not in found:
                raise DatabaseFetchError(f"column '{column}' is not in the table or query '{table}' (its columns: "
                                         f"{', '.join(c.label for c in described)})")
            kind = declared.get(key, UNKNOWN) if sqlite else (
                NUMBER if found[key] in _NUMBERS else TEXT if found[key] in _TEXTS else "")
            if not kind:
                raise DatabaseFetchError(f"column '{column}' of '{table}' is of a type that cannot keep a maximum "
                                         f"value (boolean, binary, arrays and the like)")
            self._kinds[key] = kind


def _declared_kinds(connection, table: str) -> dict[str, str]:
    """The literal kind of each column of ``table`` from its declared type (SQLAlchemy's inspector:
    what a driver without type codes, SQLite, offers); none when it cannot tell."""
    import sqlalchemy
    from sqlalchemy import types

    schema, _, name = _QUOTES.sub("", table).rpartition(".")
    try:
        columns = sqlalchemy.inspect(connection).get_columns(name, schema=schema or None)
    except sqlalchemy.exc.SQLAlchemyError:
        return {}
    kinds = {}
    for column in columns:
        kind = column["type"]
        if isinstance(kind, (types.Boolean, types.LargeBinary)):
            kinds[state_key(table, column["name"])] = ""
        elif isinstance(kind, (types.Integer, types.Numeric)):
            kinds[state_key(table, column["name"])] = NUMBER
        elif not isinstance(kind, types.NullType):
            kinds[state_key(table, column["name"])] = TEXT
    return kinds


# ---------------------------------------------------------------------------------- SQL
def base_select(table: str, columns: Sequence[str], custom_query: str | None) -> str:
    """``SELECT <columns or *> FROM <table>``, or the Custom Query wrapped and aliased as the table."""
    if custom_query:
        return f"SELECT * FROM ({custom_query}) AS {table}"
    return f"SELECT {', '.join(columns) or '*'} FROM {table}"


def where_clauses(state: Mapping[str, str], table: str, columns: Sequence[str], types: ColumnTypes,
                  custom_where: str | None, legacy: bool = True) -> list[str]:
    """The conditions past the kept maxima (the first column ``>``, later ones ``>=``) and the
    Additional WHERE clause, in NiFi's order."""
    clauses = []
    for index, column in enumerate(columns):
        stored = stored_maximum(state, table, column, legacy)
        if stored:
            clauses.append(f"{column} {'>' if index == 0 else '>='} {literal(types.kind(table, column), stored)}")
    if custom_where:
        clauses.append(f"({custom_where})")
    return clauses


def select_statement(table: str, columns: str | None, where: str | None, order_by: str | None, limit: int | None,
                     offset: int | None, partition_column: str | None = None) -> str:
    """One page as NiFi's Generic adapter writes it: by LIMIT / OFFSET, or, with a column for
    value partitioning, by that column's range ``[offset, offset + limit)``."""
    query = f"SELECT {columns if columns and columns.strip() != '*' else '*'} FROM {table}"
    if where:
        query += f" WHERE {where}"
        if partition_column:
            query += f" AND {partition_column} >= {offset if offset is not None else 0}"
            if limit is not None:
                query += f" AND {partition_column} < {(offset or 0) + limit}"
    if order_by and not partition_column:
        query += f" ORDER BY {order_by}"
    if not partition_column:
        if limit is not None:
            query += f" LIMIT {limit}"
        if offset:
            query += f" OFFSET {offset}"
    return query


def run(connection, statement: str, **options: Any) -> rs.Query:
    """``result_sets.run_query`` of ``statement`` (``options``: its fetch size, timeout and
    auto-commit); ``DatabaseFetchError`` (one line, naming the statement) when the database
    refuses it."""
    try:
        return rs.run_query(connection, statement, None, **options)
    except connection.dialect.dbapi.Error as err:
        raise DatabaseFetchError(f"the database refused {statement!r}: {database_error_text(err)}") from None


def first_row(connection, statement: str, timeout: float | None) -> tuple:
    """The first row of ``statement``'s result (``DatabaseFetchError`` when there is none)."""
    with run(connection, statement, timeout_seconds=int(timeout or 0)) as ran:
        try:
            found = next(next(ran.results()).rows(1), None)
        except connection.dialect.dbapi.Error as err:
            raise DatabaseFetchError(f"the database refused {statement!r}: {database_error_text(err)}") from None
    if found is None:
        raise DatabaseFetchError(f"{statement!r} returned no row")
    return found


class MaxTracker:
    """A row callback (``result_sets``' ``on_row``) following the greatest values of the columns at
    ``positions`` (state key -> column index) beyond the maxima kept in ``kept`` (NiFi's
    MaxValueResultSetRowCollector). A kept maximum is read once, then the rows' values are
    compared as they are; ``maxima()`` renders the new ones, state key -> text."""

    def __init__(self, positions: Mapping[str, int], kept: Mapping[str, str]):
        self._positions = dict(positions)
        self._kept = kept
        self._best: dict[str, Any] = {}
        self._raised: set[str] = set()

    def __call__(self, row: Sequence[Any]) -> None:
        for key, index in self._positions.items():
            value = row[index]
            if value is None:
                continue
            if key not in self._best:
                self._best[key] = value
                if greater(value, self._kept.get(key) or self._kept.get(key.rpartition(NAMESPACE)[2]) or None):
                    self._raised.add(key)
                else:   # the kept one stands until a row passes it: compare with it as a value
                    self._best[key] = _parsed(self._kept.get(key) or self._kept[key.rpartition(NAMESPACE)[2]], value)
                continue
            try:
                beyond = value > self._best[key]
            except TypeError:
                raise ValueError(f"the column of {key!r} holds values that do not compare ({value!r} and "
                                 f"{self._best[key]!r}): CAST it to one type in the query") from None
            if beyond:
                self._best[key] = value
                self._raised.add(key)

    def maxima(self) -> dict[str, str]:
        """The maxima the rows raised, rendered as kept."""
        return {key: render(self._best[key]) for key in self._raised}


def max_positions(names: Sequence[str], table: str, columns: Sequence[str]) -> dict[str, int]:
    """Where each Maximum-value Column is in a result whose columns are ``names``: state key -> index."""
    wanted = {state_key(table, c) for c in columns}
    return {key: index for index, key in enumerate(state_key(table, n) for n in names) if key in wanted}
