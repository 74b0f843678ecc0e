"""What the SQL writing processors share (PutDatabaseRecord, ConvertJSONToSQL, PutSQL; docs/sql.md,
"Writing"): a table's columns as the database describes them, cached; NiFi's translation of field
names to column names; quoting; the statements built for a set of fields; the ``?`` placeholders
of a statement turned into the driver's; and whether a database error may pass when tried again.

**Columns.** ``read_table`` asks SQLAlchemy's inspector (PostgreSQL's catalog, SQLite's pragmas)
for the columns of ``schema.table``: name, type, nullability, default, autoincrement, and the
primary key. A column is *required* when it is not nullable, has no default and is not generated
(NiFi's rule). A table name not found as given is looked up once more in lower case (PostgreSQL
folds unquoted names so); ``TableNotFound`` when neither exists. ``SchemaCache`` keeps the last
``size`` tables read, keyed by catalog, schema and table (NiFi's Table Schema Cache Size).

**Statements.** ``build_statement`` gives the SQL (with ``?`` placeholders) and, for each
placeholder, which field's value it takes: INSERT of every field that has a column; UPDATE setting
the fields that are not keys, WHERE the keys (Update Keys, else the primary key); DELETE WHERE
every field (or the Delete Keys), a nullable column matching a null too (PostgreSQL's ``IS NOT
DISTINCT FROM``, SQLite's ``IS``, elsewhere NiFi's ``(c = ? OR (c IS NULL AND ? IS NULL))``);
UPSERT as ``INSERT ... ON CONFLICT (keys) DO UPDATE SET`` the other columns from ``EXCLUDED`` and
INSERT_IGNORE as ``INSERT ... ON CONFLICT DO NOTHING`` (the same text on PostgreSQL and SQLite
3.24+). On MySQL and MariaDB (NiFi's MySQL adapter): UPSERT as ``INSERT ... ON DUPLICATE KEY
UPDATE c = VALUES(c)`` (any unique key of the table, not only the Update Keys, decides what is a
duplicate), INSERT_IGNORE as ``INSERT IGNORE``, DELETE matching a null with ``<=>``, names quoted
with backticks, the Catalog (or the Schema) naming the database, an AUTO_INCREMENT column
generated (not required) and a TINYINT(1) (BOOLEAN) column a boolean, BIT, as Connector/J
describes it. Unmatched fields and columns are treated as NiFi's Unmatched Field / Column
Behavior says; a problem is a ``StatementError`` whose message says what to change.

**Properties.** Those ConvertJSONToSQL and PutDatabaseRecord both declare (Unmatched Field and
Column Behavior, Update Keys, the quoting, Table Schema Cache Size) are defined here once, and
``settings_of`` reads them into the ``Settings``.

**Errors.** Every SQL processor reports an error as one line with the SDK's
``database_error_text``; the reading processors use ``split_statements`` here too, for their pre-
and post-queries. ``is_transient``
says whether an error may pass when tried again: by SQLSTATE class (PostgreSQL), SQLite's result
code, or MySQL's error number (``MYSQL_TRANSIENT``: a deadlock, a lock wait or statement timeout, a
lost or refused connection, a server shutting down); a constraint violated (1062 duplicate key,
1452 foreign key) and any other error will fail again.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from flowactors.processors._common import boolean_property
from flowactors.sdk.processor import ProcessContext, PropertyDescriptor, validators

log = logging.getLogger(__name__)

INSERT, UPDATE, DELETE, UPSERT, INSERT_IGNORE, SQL = "INSERT", "UPDATE", "DELETE", "UPSERT", "INSERT_IGNORE", "SQL"
#: the statement types a table's statements are built for
BUILT_TYPES = (INSERT, UPDATE, DELETE, UPSERT, INSERT_IGNORE)

IGNORE_FIELD, FAIL_FIELD = "Ignore Unmatched Fields", "Fail on Unmatched Fields"
IGNORE_COLUMN, WARN_COLUMN, FAIL_COLUMN = "Ignore Unmatched Columns", "Warn on Unmatched Columns", \
    "Fail on Unmatched Columns"

#: Column Name Translation Strategy: what is taken out of a name before it is upper-cased
TRANSLATIONS: dict[str, str | None] = {
    "REMOVE_UNDERSCORE": "_", "REMOVE_SPACE": " ", "REMOVE_UNDERSCORE_AND_SPACE": "[_ ]",
    "REMOVE_ALL_SPECIAL_CHAR": "[^a-zA-Z0-9]", "PATTERN": None}

# JDBC's type numbers (java.sql.Types), as NiFi's sql.args.N.type attributes carry them (the one
# definition of them: result_sets and the other SQL modules import these)
BIT, TINYINT, SMALLINT, INTEGER, BIGINT = -7, -6, 5, 4, -5
FLOAT, REAL, DOUBLE, NUMERIC, DECIMAL = 6, 7, 8, 2, 3
CHAR, VARCHAR, LONGVARCHAR, NCHAR, NVARCHAR, LONGNVARCHAR, CLOB, NCLOB = 1, 12, -1, -15, -9, -16, 2005, 2011
DATE, TIME, TIMESTAMP, TIME_WITH_TIMEZONE, TIMESTAMP_WITH_TIMEZONE = 91, 92, 93, 2013, 2014
BINARY, VARBINARY, LONGVARBINARY, BLOB = -2, -3, -4, 2004
BOOLEAN, OTHER, NULL, SQLXML, ARRAY, ROWID = 16, 1111, 0, 2009, 2003, -8
#: SQLAlchemy's dialect names of MySQL and MariaDB
MYSQL_DIALECTS = ("mysql", "mariadb")


class StatementError(ValueError):
    """The records or the configuration do not make a statement for the table (the FlowFile's
    problem: failure); the message says what to change."""


class TableNotFound(StatementError):
    """No table of the name given (in the schema given)."""


@dataclass(frozen=True)
class Column:
    """One column as the database describes it; ``kind`` is a category of its type (``string``,
    ``integer``, ``float``, ``decimal``, ``boolean``, ``date``, ``time``, ``timestamp``,
    ``binary``, ``json``, ``other``), ``jdbc_type`` JDBC's type number for it."""

    name: str
    kind: str
    jdbc_type: int
    nullable: bool
    required: bool
    size: int | None = None


@dataclass
class TableSchema:
    """A table's columns (in the table's order) and primary key, as read from the database."""

    catalog: str | None
    schema: str | None
    table: str
    columns: list[Column]
    primary_key: list[str]
    dialect: str

    def by_name(self, naming: "Naming") -> dict[str, Column]:
        """The columns by their names as ``naming`` normalizes them."""
        return {naming.normalize(c.name): c for c in self.columns}


@dataclass(frozen=True)
class Naming:
    """How a field's name finds its column (NiFi's Translate Field Names): as it is, or upper-cased
    with what ``remove`` matches taken out (``Column Name Translation Strategy``)."""

    translate: bool = True
    remove: str | None = "_"

    def normalize(self, name: str) -> str:
        if not self.translate:
            return name
        return (re.sub(self.remove, "", name) if self.remove else name).strip().upper()


@dataclass(frozen=True)
class Settings:
    """What shapes the statements besides the table: naming, the unmatched behaviours, the keys,
    and quoting."""

    naming: Naming = field(default_factory=Naming)
    unmatched_field: str = IGNORE_FIELD
    unmatched_column: str = FAIL_COLUMN
    update_keys: tuple[str, ...] | None = None
    delete_keys: tuple[str, ...] | None = None
    quote_columns: bool = False
    quote_table: bool = False


@dataclass(frozen=True)
class Statement:
    """A statement with ``?`` placeholders; ``params[i]`` is the index (in the fields it was built
    for) of the field whose value the i-th placeholder takes, ``columns[i]`` that field's column."""

    sql: str
    params: tuple[int, ...]
    columns: tuple[Column, ...]


# ---------------------------------------------------------------------------------- shared properties
def unmatched_field_property(fail: str) -> PropertyDescriptor:
    """Unmatched Field Behavior, whose failing value is ``fail`` (NiFi spells it ``Fail`` in
    ConvertJSONToSQL, ``Fail on Unmatched Fields`` in PutDatabaseRecord)."""
    return PropertyDescriptor("Unmatched Field Behavior", "A field with no column", default=IGNORE_FIELD,
                              allowable_values=(IGNORE_FIELD, fail))


UNMATCHED_COLUMN = PropertyDescriptor("Unmatched Column Behavior", "A required column (or key) no field gives",
                                      default=FAIL_COLUMN, allowable_values=(IGNORE_COLUMN, WARN_COLUMN, FAIL_COLUMN))
UPDATE_KEYS = PropertyDescriptor("Update Keys", "Comma-separated columns identifying a row for UPDATE and UPSERT "
                                 "(default: the primary key)", expression_language=True)
QUOTE_COLUMNS = boolean_property("Quote Column Identifiers", False, "Quote column names")
QUOTE_TABLE = boolean_property("Quote Table Identifiers", False, "Quote the table (and schema) name")
SCHEMA_CACHE_SIZE = PropertyDescriptor("Table Schema Cache Size", "How many tables' columns are kept", default="100",
                                       validator=validators.NON_NEGATIVE_INTEGER)


def settings_of(context: ProcessContext, flowfile: Any, remove: str | None,
                delete_keys: tuple[str, ...] | None = None) -> Settings:
    """The ``Settings`` the shared properties above (and Translate Field Names) give for
    ``flowfile``, names matched without what ``remove`` matches."""
    prop = context.property
    return Settings(naming=Naming(prop("Translate Field Names").as_bool(), remove),
                    unmatched_field=prop("Unmatched Field Behavior").evaluate() or IGNORE_FIELD,
                    unmatched_column=prop(UNMATCHED_COLUMN.name).evaluate() or FAIL_COLUMN,
                    update_keys=comma_list(prop(UPDATE_KEYS.name).evaluate(flowfile)), delete_keys=delete_keys,
                    quote_columns=prop(QUOTE_COLUMNS.name).as_bool(), quote_table=prop(QUOTE_TABLE.name).as_bool())


# ---------------------------------------------------------------------------------- reading a table
def _kind(sql_type: Any) -> tuple[str, int, int | None]:
    """The category, JDBC type number and length of a SQLAlchemy column type."""
    from sqlalchemy import types as t

    checks: Sequence[tuple[type, str, int]] = (
        (t.Boolean, "boolean", BOOLEAN), (t.SmallInteger, "integer", SMALLINT), (t.BigInteger, "integer", BIGINT),
        (t.Integer, "integer", INTEGER), (t.Float, "float", DOUBLE), (t.Numeric, "decimal", NUMERIC),
        (t.DateTime, "timestamp", TIMESTAMP), (t.Date, "date", DATE), (t.Time, "time", TIME),
        (t.JSON, "json", OTHER), (t.Uuid, "other", OTHER), (t.Text, "string", LONGVARCHAR),
        (t.String, "string", VARCHAR), (t._Binary, "binary", BINARY), (t.ARRAY, "other", ARRAY),
    )
    for kind_type, kind, jdbc in checks:
        if isinstance(sql_type, kind_type):
            if kind == "timestamp" and getattr(sql_type, "timezone", False):
                jdbc = TIMESTAMP_WITH_TIMEZONE
            return kind, jdbc, getattr(sql_type, "length", None) if kind == "string" else None
    name = type(sql_type).__name__.upper()
    if "JSON" in name:
        return "json", OTHER, None
    return "other", OTHER, None


def read_table(connection: Any, catalog: str | None, schema: str | None, table: str) -> TableSchema:
    """The columns and primary key of ``table`` (see the module docstring); ``TableNotFound``."""
    from sqlalchemy import inspect

    inspector = inspect(connection)
    name = table
    dialect = connection.dialect.name
    if dialect in MYSQL_DIALECTS:
        schema = schema or catalog   # MySQL's schema is its database, NiFi's Catalog there
    if not inspector.has_table(name, schema=schema):
        if table.lower() != table and inspector.has_table(table.lower(), schema=schema):
            name = table.lower()
        else:
            where = ".".join(p for p in (catalog, schema, table) if p)
            raise TableNotFound(f"table {where} not found: check that the Catalog, Schema and Table Name match the "
                                f"database's exactly")
    described = inspector.get_columns(name, schema=schema)
    primary_key = list(inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or [])
    columns = []
    for column in described:
        kind, jdbc, size = _kind(column["type"])
        generated = bool(column.get("identity") or column.get("computed") or column.get("default") is not None)
        if dialect == "sqlite" and primary_key == [column["name"]] and kind == "integer":
            generated = True    # SQLite's INTEGER PRIMARY KEY is the rowid, given when absent
        if dialect in MYSQL_DIALECTS:
            generated = generated or column.get("autoincrement") is True   # AUTO_INCREMENT
            if type(column["type"]).__name__ == "TINYINT" and getattr(column["type"], "display_width", 0) == 1:
                kind, jdbc = "boolean", BIT   # TINYINT(1), BOOLEAN: Connector/J's tinyInt1isBit
        nullable = bool(column.get("nullable", True)) and column["name"] not in primary_key
        columns.append(Column(column["name"], kind, jdbc, nullable, not nullable and not generated, size))
    return TableSchema(catalog, schema, name, columns, primary_key, dialect)


class SchemaCache:
    """The last ``size`` tables read (``read_table``), by catalog, schema and table; 0 keeps none."""

    def __init__(self, size: int):
        self.size = size
        self._tables: OrderedDict[tuple, TableSchema] = OrderedDict()

    def get(self, connection: Any, catalog: str | None, schema: str | None, table: str) -> TableSchema:
        key = (catalog, schema, table)
        found = self._tables.get(key)
        if found is not None:
            self._tables.move_to_end(key)
            return found
        found = read_table(connection, catalog, schema, table)
        if self.size > 0:
            self._tables[key] = found
            while len(self._tables) > self.size:
                self._tables.popitem(last=False)
        return found


# ---------------------------------------------------------------------------------- statements
def quote(name: str, dialect: str = "") -> str:
    """``name`` as a quoted SQL identifier of ``dialect`` (an embedded quote doubled): in backticks
    on MySQL and MariaDB, in double quotes elsewhere."""
    mark = "`" if dialect in MYSQL_DIALECTS else '"'
    return mark + name.replace(mark, mark * 2) + mark


def table_name(table: TableSchema, settings: Settings, catalog: str | None = None) -> str:
    """The table's qualified name as statements name it (each part quoted with Quote Table
    Identifiers). The catalog is named only when given and the database is not PostgreSQL or
    SQLite, whose connections reach one catalog (database) only; on MySQL the database is the
    Schema, else the Catalog."""
    if table.dialect in MYSQL_DIALECTS:
        parts = [p for p in (table.schema or catalog, table.table) if p]
    else:
        parts = [p for p in ((catalog if table.dialect not in ("postgresql", "sqlite") else None),
                             table.schema, table.table) if p]
    return ".".join(quote(p, table.dialect) if settings.quote_table else p for p in parts)


def _column_sql(column: Column, settings: Settings, dialect: str) -> str:
    return quote(column.name, dialect) if settings.quote_columns else column.name


def _check_required(table: TableSchema, fields: Mapping[str, int], settings: Settings) -> None:
    """NiFi's Unmatched Column Behavior for the required columns no field gives a value for."""
    for column in table.columns:
        if column.required and settings.naming.normalize(column.name) not in fields:
            _unmatched_column(f"the records have no value for the required column '{column.name}'", settings)


def _unmatched_column(message: str, settings: Settings) -> None:
    if settings.unmatched_column == FAIL_COLUMN:
        raise StatementError(message + " (Unmatched Column Behavior is Fail on Unmatched Columns)")
    if settings.unmatched_column == WARN_COLUMN:
        log.warning("%s", message)


def _matched(table: TableSchema, names: Sequence[str], settings: Settings) -> list[tuple[int, Column]]:
    """(field index, column) of each field that has a column; an unmatched field fails under Fail."""
    columns = table.by_name(settings.naming)
    matched = []
    for index, name in enumerate(names):
        column = columns.get(settings.naming.normalize(name))
        if column is None:
            if settings.unmatched_field != IGNORE_FIELD:
                raise StatementError(f"the field '{name}' matches no column of {table.table} (its columns"
                                     f"{' normalized' if settings.naming.translate else ''}: {', '.join(columns)}); "
                                     f"Unmatched Field Behavior is Fail")
            continue
        matched.append((index, column))
    if not matched:
        raise StatementError(f"none of the fields ({', '.join(names)}) matches a column of {table.table} (its columns"
                             f"{' normalized' if settings.naming.translate else ''}: {', '.join(columns)})")
    return matched


def _keys(table: TableSchema, matched: list[tuple[int, Column]], keys: tuple[str, ...] | None, settings: Settings,
          what: str) -> set[str]:
    """The normalized names of the key columns (``keys``, else the primary key); a key no field
    gives is an unmatched column."""
    names = list(keys) if keys else table.primary_key
    if not names:
        raise StatementError(f"{table.table} has no primary key and no {what} were given: set {what}")
    normalize = settings.naming.normalize
    wanted = {normalize(n.strip()) for n in names}
    present = {normalize(c.name) for _, c in matched}
    for name in sorted(wanted - present):
        _unmatched_column(f"the records have no value for the key column '{name}'", settings)
    return wanted


def build_statement(kind: str, table: TableSchema, names: Sequence[str], settings: Settings,
                    catalog: str | None = None) -> Statement:
    """The ``kind`` statement (one of ``BUILT_TYPES``) for records with the fields ``names`` (see
    the module docstring); ``StatementError`` when they cannot make one."""
    fields = {settings.naming.normalize(n): i for i, n in enumerate(names)}
    if kind != UPDATE:
        _check_required(table, fields, settings)
    matched = _matched(table, names, settings)
    target = table_name(table, settings, catalog)
    normalize = settings.naming.normalize

    def sql_name(column: Column) -> str:
        return _column_sql(column, settings, table.dialect)
    if kind in (INSERT, UPSERT, INSERT_IGNORE):
        mysql = table.dialect in MYSQL_DIALECTS
        sql = (f"INSERT{' IGNORE' if mysql and kind == INSERT_IGNORE else ''} INTO {target} "
               f"({', '.join(sql_name(c) for _, c in matched)}) "
               f"VALUES ({', '.join('?' for _ in matched)})")
        if mysql and kind == UPSERT:
            sql += _on_duplicate_key(table, matched, settings)
        elif kind == INSERT_IGNORE and not mysql:
            sql += " ON CONFLICT DO NOTHING"
        elif kind == UPSERT:
            keys = _keys(table, matched, settings.update_keys, settings, "Update Keys")
            others = [c for _, c in matched if normalize(c.name) not in keys]
            key_sql = ", ".join(sql_name(c) for c in table.columns if normalize(c.name) in keys)
            sql += f" ON CONFLICT ({key_sql}) " + ("DO UPDATE SET " + ", ".join(
                f"{sql_name(c)} = EXCLUDED.{sql_name(c)}" for c in others)
                if others else "DO NOTHING")
        return Statement(sql, tuple(i for i, _ in matched), tuple(c for _, c in matched))
    if kind == UPDATE:
        keys = _keys(table, matched, settings.update_keys, settings, "Update Keys")
        setting = [(i, c) for i, c in matched if normalize(c.name) not in keys]
        where = [(i, c) for i, c in matched if normalize(c.name) in keys]
        if not setting:
            raise StatementError(f"the records have no field to update besides the keys of {table.table}")
        sql = (f"UPDATE {target} SET " + ", ".join(f"{sql_name(c)} = ?" for _, c in setting) +
               " WHERE " + " AND ".join(f"{sql_name(c)} = ?" for _, c in where))
        both = setting + where
        return Statement(sql, tuple(i for i, _ in both), tuple(c for _, c in both))
    if kind == DELETE:
        if settings.delete_keys:
            wanted = {k.strip() for k in settings.delete_keys}
            matched = [(i, c) for i, c in matched if names[i] in wanted]
            if not matched:
                raise StatementError(f"none of the Delete Keys ({', '.join(sorted(wanted))}) is a field of the records")
        conditions, params, columns = [], [], []
        for index, column in matched:
            name = sql_name(column)
            if column.nullable and table.dialect in ("postgresql", "sqlite", *MYSQL_DIALECTS):
                operator = {"postgresql": "IS NOT DISTINCT FROM", "sqlite": "IS"}.get(table.dialect, "<=>")
                conditions.append(f"{name} {operator} ?")     # a null matches a null, one parameter
                params.append(index)
                columns.append(column)
            elif column.nullable:
                conditions.append(f"({name} = ? OR ({name} IS NULL AND ? IS NULL))")
                params += [index, index]
                columns += [column, column]
            else:
                conditions.append(f"{name} = ?")
                params.append(index)
                columns.append(column)
        return Statement(f"DELETE FROM {target} WHERE " + " AND ".join(conditions), tuple(params), tuple(columns))
    raise StatementError(f"'{kind}' is not a statement type a table's statement is built for "
                         f"({', '.join(BUILT_TYPES)})")


def _on_duplicate_key(table: TableSchema, matched: list[tuple[int, Column]], settings: Settings) -> str:
    """MySQL's UPSERT clause: the fields that are not keys set from the row that was refused (a
    key set to itself when every field is a key, so that a duplicate changes nothing)."""
    keys = _keys(table, matched, settings.update_keys, settings, "Update Keys")
    names = [_column_sql(c, settings, table.dialect) for _, c in matched
             if settings.naming.normalize(c.name) not in keys]
    if not names:
        first = _column_sql(matched[0][1], settings, table.dialect)
        return f" ON DUPLICATE KEY UPDATE {first} = {first}"
    return " ON DUPLICATE KEY UPDATE " + ", ".join(f"{n} = VALUES({n})" for n in names)


# ---------------------------------------------------------------------------------- placeholders
#: what the placeholder functions scan for: a literal, a quoted name or a comment (passed over),
#: ``??``, ``?``, ``%`` and ``;``
SQL_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\?\?|\?|%|;", re.S)


def placeholder_count(sql: str, dialect: str = "") -> int:
    """How many ``?`` placeholders ``sql`` has outside its literals, quoted names and comments (a
    ``??`` is PostgreSQL's ``?`` operator there, as its JDBC driver reads it, elsewhere two)."""
    return sum(1 if m.group() == "?" else 0 if dialect == "postgresql" else 2
               for m in SQL_TOKENS.finditer(sql) if m.group() in ("?", "??"))


def driver_sql(sql: str, paramstyle: str, dialect: str = "") -> str:
    """``sql`` with its ``?`` placeholders (outside literals, quoted names and comments) written
    as the driver's ``paramstyle`` wants them (``qmark``: unchanged; ``format``/``pyformat``:
    ``%s``, every ``%`` doubled; ``numeric``: ``:1``, ``:2``...); on PostgreSQL a ``??`` is its
    ``?`` operator (as its JDBC driver reads it), elsewhere two placeholders."""
    if paramstyle == "qmark":
        return sql
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        text = match.group()
        if text == "??" and dialect == "postgresql":
            return "?"
        if text in ("?", "??"):
            marks = []
            for _ in text:
                count += 1
                marks.append(":%d" % count if paramstyle == "numeric" else "%s")
            return "".join(marks)
        # the driver reads every % as its own, even in a literal or a comment
        return text.replace("%", "%%") if paramstyle in ("format", "pyformat") else text

    return SQL_TOKENS.sub(replace, sql)


def prepared_sql(sql: str, dialect: str) -> str:
    """``sql`` as PostgreSQL's JDBC driver sends a prepared statement that has no parameters (NiFi's
    ExecuteSQL query, PutSQL's statement): a ``??`` outside literals, quoted names and comments is
    the ``?`` operator; another database's statement is unchanged."""
    if dialect != "postgresql":
        return sql
    return SQL_TOKENS.sub(lambda match: "?" if match.group() == "??" else match.group(), sql)


def run_as_written(connection: Any, sql: str) -> None:
    """Run ``sql`` on ``connection`` (a SQLAlchemy ``Connection``) without parameters, as a JDBC
    ``Statement`` runs it: a ``?`` or ``%`` in it is SQL's own (PostgreSQL's jsonb ``?``, modulo),
    not a placeholder (NiFi's Pre-/Post-Processing SQL, a field's SQL, PutSQL without parameters)."""
    connection.exec_driver_sql(sql, execution_options={"no_parameters": True})


def split_statements(text: str | None) -> list[str]:
    """The statements of ``text`` separated by semicolons (a ``\\;`` is a semicolon kept in the
    statement), blank ones left out; none for None (NiFi's Allow Multiple SQL Statements,
    Pre-/Post-Processing SQL, ExecuteSQL's SQL Pre-/Post-Query)."""
    parts = re.split(r"(?<!\\);", text or "")
    return [p.replace("\\;", ";").strip() for p in parts if p.strip()]


# ---------------------------------------------------------------------------------- errors
#: SQLSTATE classes of errors that may pass when tried again, as JDBC's SQLTransientException
#: subclasses map them: connection (08), transaction rollback: deadlock, serialization (40),
#: insufficient resources (53), operator intervention: query canceled by a timeout, shutdown (57),
#: lock not available (55P03)
_TRANSIENT_STATES = ("08", "40", "53", "57", "55P03")
#: SQLite's result codes that may pass when tried again
_TRANSIENT_SQLITE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_INTERRUPT")
#: MySQL's and MariaDB's error numbers that may pass when tried again: too many connections (1040),
#: shutdown in progress (1053), lock wait timeout (1205), deadlock (1213), query interrupted (1317),
#: MariaDB's max_statement_time (1969) and killed connection (1927), MySQL's max_execution_time
#: (3024), the client's lost or refused connections (2002, 2003, 2006, 2013, 2055)
MYSQL_TRANSIENT = frozenset((1040, 1053, 1205, 1213, 1317, 1927, 1969, 3024, 2002, 2003, 2006, 2013, 2055))


def is_transient(err: BaseException) -> bool:
    """Whether the database error ``err`` (a SQLAlchemy ``DBAPIError`` or a driver's error) may
    pass when the same statements are tried again: NiFi's ``SQLTransientException`` (retry); any
    other (a constraint violated, bad data, a syntax error) will fail again (failure)."""
    original = getattr(err, "orig", None) or err
    code = mysql_error_number(err)
    if code is not None:   # before the SQLSTATE, which MySQL gives as HY000 to most errors
        return code in MYSQL_TRANSIENT
    state = getattr(original, "sqlstate", None) or getattr(getattr(original, "diag", None), "sqlstate", None)
    if state:
        return state.startswith(_TRANSIENT_STATES)
    name = getattr(original, "sqlite_errorname", None)
    if name:
        return name.startswith(_TRANSIENT_SQLITE)
    return bool(getattr(err, "connection_invalidated", False))


def mysql_error_number(err: BaseException) -> int | None:
    """MySQL's error number of the database error ``err`` when PyMySQL raised it, else None."""
    original = getattr(err, "orig", None) or err
    if not type(original).__module__.startswith("pymysql") or not original.args:
        return None
    return original.args[0] if isinstance(original.args[0], int) else None


def sql_state(err: BaseException) -> str | None:
    """The SQLSTATE of the database error ``err``, when the driver gives one."""
    original = getattr(err, "orig", None) or err
    return getattr(original, "sqlstate", None)


def comma_list(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated list of names (Update Keys, Delete Keys), None when unset or blank."""
    if value is None or not value.strip():
        return None
    return tuple(n.strip() for n in value.split(",") if n.strip())
