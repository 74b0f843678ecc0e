"""A SQL query's result sets turned into FlowFile content, as NiFi's ``JdbcCommon`` does: Avro
container files (ExecuteSQL, QueryDatabaseTable) and Arrow record batches for a record writer
(ExecuteSQLRecord, QueryDatabaseTableRecord), streamed in bounded memory.

**The contract** (what ExecuteSQL and QueryDatabaseTable call):

* ``run_query(connection, sql, parameters, fetch_size=, timeout_seconds=, auto_commit=)`` runs
  ``sql`` on a SQLAlchemy ``Connection`` (from ``DBCPService.connection()``) through its driver's
  own cursor and returns a ``Query`` (a context manager: leaving it closes the cursor and puts the
  session's statement timeout back). ``parameters`` is a list of Python values for the ``?``
  placeholders of ``sql`` (JDBC's, rewritten to the driver's), None for none. ``Query.execution_ms``
  is how long the execution took; ``Query.results()`` yields each ``ResultSet`` in order (a
  statement that returns no rows yields none). Errors are the driver's (``DBAPIError`` of psycopg
  or sqlite3), raised as they come; a query past ``timeout_seconds`` is cancelled by the database
  and is such an error.
* A ``ResultSet`` has ``columns`` (``Column``: the label, the JDBC type code NiFi's mapping keys on,
  precision, scale) and ``table_name`` (PostgreSQL: the table of the first column, when it is a
  table's; SQLite: None). Its rows are read ``fetch_size`` at a time (``DEFAULT_FETCH`` when 0);
  each writer below takes at most ``max_rows`` of them (0: all that are left) and may be called
  again on the same result set for the next fragment, ``ResultSet.exhausted()`` telling whether
  any row is left. ``on_row(row)``, when given, sees each raw row (a tuple of the driver's values,
  in column order) as it is written: QueryDatabaseTable's maximum-value tracking.
* ``avro_schema(result, options)`` is the Avro schema NiFi writes (``AvroOptions``: record name,
  Normalize names, Use Avro Logical Types, Default Decimal Precision/Scale, Compression Format);
  ``write_avro(result, out, options, max_rows=, on_row=)`` writes one Avro container file of the
  next rows to the binary stream ``out`` and returns how many; ``write_empty_avro(out)`` the file
  NiFi writes for no result set (no fields).
* ``record_schema(result, options)`` is the Arrow schema of the same fields (NiFi's record schema
  of that Avro schema; an ARRAY column is ``list<string>``), and ``record_batches(result, options,
  max_rows=, on_row=)`` yields the next rows as Arrow batches of it (``BATCH_ROWS`` rows at most).

**Types** (docs/sql.md, "The Avro type mapping"): each column's JDBC type is what PostgreSQL's JDBC
driver reports for its PostgreSQL type (``_PG_TYPES``); SQLite's driver declares no types to
Python, so a column's type is taken from the values of the first fetched rows (integer: BIGINT,
real: DOUBLE, text: VARCHAR, blob: BLOB; a column of only NULLs or of mixed text and numbers:
VARCHAR, every value written as text). Without logical types, DATE, TIME, TIMESTAMP and
DECIMAL/NUMERIC values are the strings Java's ``toString`` writes (``2024-01-31``, ``12:30:00``,
``2024-01-31 12:30:00.5``, ``12.50``); with them, Avro's ``date``, ``time-millis``,
``timestamp-millis`` and ``decimal`` (rounded half up to the column's scale). A timestamp with a
time zone is shown, and a timestamp without one is read, in this process's local time zone, as
NiFi does in the JVM's.

**MySQL and MariaDB** (PyMySQL): a column's JDBC type is the one MySQL Connector/J reports for the
field's MySQL type, sign and character set (``_mysql_column``): TINYINT(1) is BIT (a boolean, as
Connector/J's default tinyInt1isBit), other TINYINTs TINYINT, an unsigned SMALLINT INTEGER, an
unsigned INT BIGINT, an unsigned BIGINT BIGINT of precision 20 (written as text, as NiFi writes
it), FLOAT REAL, DECIMAL DECIMAL (its declared precision and scale), DATETIME and TIMESTAMP
TIMESTAMP, TEXT LONGVARCHAR, BLOB LONGVARBINARY, BINARY/VARBINARY their JDBC names, JSON
LONGVARCHAR, ENUM and SET CHAR, BIT(1) BIT, a longer BIT VARBINARY (its bytes). YEAR is SMALLINT
(Connector/J's yearIsDateType=false; its default gives a DATE of 1 January). The record name is the
first column's table. A timeout is MariaDB's ``max_statement_time`` or MySQL's
``max_execution_time`` (SELECTs only there) for the session, put back afterwards. Fetch Size above 0
reads a single SELECT through PyMySQL's unbuffered ``SSCursor`` (rows streamed from the server).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import time
from dataclasses import dataclass
from itertools import islice
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import fastavro
import pyarrow as pa

from flowactors.processors.sql.table_schema import (ARRAY, BIGINT, BINARY, BIT, BLOB, BOOLEAN, CHAR, DATE, DECIMAL,
                                                    DOUBLE, FLOAT, INTEGER, LONGVARBINARY, LONGVARCHAR, MYSQL_DIALECTS,
                                                    NUMERIC, OTHER, REAL, SMALLINT, SQL_TOKENS, SQLXML, TIME,
                                                    TIMESTAMP, TIMESTAMP_WITH_TIMEZONE, TINYINT, VARBINARY, VARCHAR,
                                                    driver_sql)
from flowactors.sdk.records.schema import avro_to_arrow

#: rows fetched at a time when Fetch Size is 0 (the driver's own hint is then "as it likes")
DEFAULT_FETCH = 1000
#: the most rows an Arrow batch of ``record_batches`` holds
BATCH_ROWS = 10_000
#: NiFi's record name when the result's table is unknown, and its namespace
DEFAULT_RECORD_NAME, NAMESPACE = "NiFi_ExecuteSQL_Record", "any.data"
MIME_TYPE_AVRO = "application/avro-binary"
#: NiFi's Compression Format values -> fastavro's codec (NiFi's LZO writes xz, as NiFi does)
CODECS = {"NONE": "null", "DEFLATE": "deflate", "BZIP2": "bzip2", "SNAPPY": "snappy", "LZO": "xz"}

#: PostgreSQL's type -> (JDBC type, precision) as its JDBC driver reports them
_PG_TYPES: dict[str, tuple[int, int]] = {
    "bool": (BIT, 1), "bit": (BIT, 1), "int2": (SMALLINT, 5), "int4": (INTEGER, 10), "int8": (BIGINT, 19),
    "oid": (BIGINT, 10), "float4": (REAL, 8), "float8": (DOUBLE, 17), "numeric": (NUMERIC, 0),
    "bpchar": (CHAR, 0), "char": (CHAR, 1), "varchar": (VARCHAR, 0), "text": (VARCHAR, 0), "name": (VARCHAR, 63),
    "bytea": (BINARY, 0), "date": (DATE, 13), "time": (TIME, 15), "timetz": (TIME, 21),
    "timestamp": (TIMESTAMP, 29), "timestamptz": (TIMESTAMP, 35), "xml": (SQLXML, 0)}
#: PostgreSQL types loaded as the server's text (JDBC gives them as a PGobject whose text is that)
_PG_AS_TEXT = ("json", "jsonb", "interval", "inet", "cidr", "macaddr", "macaddr8", "money", "point", "line",
               "lseg", "box", "path", "polygon", "circle", "tsvector", "tsquery", "int4range", "int8range",
               "numrange", "tsrange", "tstzrange", "daterange", "bit", "varbit")
_MAX_DIGITS_IN_BIGINT, _MAX_DIGITS_IN_INT = 19, 9
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class AvroOptions:
    """How a result set is written (NiFi's ``AvroConversionOptions``)."""

    record_name: str | None = None
    normalize_names: bool = False
    logical_types: bool = False
    default_precision: int = 10
    default_scale: int = 0
    #: NiFi's Compression Format: a key of ``CODECS``
    codec: str = "NONE"


@dataclass(frozen=True)
class Column:
    """One column of a result set, as JDBC's ``ResultSetMetaData`` describes it."""

    label: str
    jdbc_type: int
    type_name: str
    precision: int = 0
    scale: int = 0
    signed: bool = True


def normalize_name(name: str) -> str:
    """NiFi's ``normalizeNameForAvro``: every character but ``[A-Za-z0-9_]`` becomes ``_``, and a
    name starting with a digit gets ``_`` before it."""
    normalized = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + normalized if normalized[:1].isdigit() else normalized


# ---------------------------------------------------------------------------------- running a query
class ResultSet:
    """One result set of a cursor: its columns, and its rows fetched ``fetch_size`` at a time."""

    def __init__(self, cursor: Any, dialect: str, fetch_size: int):
        self._cursor = cursor
        self._fetch = fetch_size or DEFAULT_FETCH
        self._head: list[tuple] = []
        self._done = False
        self.table_name: str | None = None
        if dialect == "postgresql":
            self.columns = _pg_columns(cursor)
            self.table_name = _pg_table(cursor)
        elif dialect in MYSQL_DIALECTS:
            fields = cursor._result.fields   # PyMySQL's field packets: flags, character set, original table
            self.columns = [_mysql_column(field) for field in fields]
            self.table_name = (fields[0].org_table or None) if fields else None
        else:
            self._head = self._fetch_more()
            self.columns = _value_columns(cursor.description, self._head)

    def _fetch_more(self) -> list[tuple]:
        if self._done:
            return []
        rows = self._cursor.fetchmany(self._fetch)
        if len(rows) < self._fetch:
            self._done = True
        return [tuple(row) for row in rows]

    def exhausted(self) -> bool:
        """Whether no row is left (fetches the next rows to know, kept for the next read)."""
        if not self._head:
            self._head = self._fetch_more()
        return not self._head

    def rows(self, max_rows: int = 0) -> Iterator[tuple]:
        """The next ``max_rows`` rows (0: all that are left), fetched as they are needed."""
        left = max_rows if max_rows > 0 else -1
        while left != 0 and not self.exhausted():
            batch = self._head if left < 0 or len(self._head) <= left else self._head[:left]
            self._head = [] if batch is self._head else self._head[left:]
            left = left - len(batch) if left > 0 else left
            yield from batch


class Query:
    """A query run by ``run_query``: its result sets, in order (a context manager)."""

    def __init__(self, cursor: Any, dialect: str, fetch_size: int, restore: Callable[[], None]):
        self._cursor, self._dialect, self._fetch = cursor, dialect, fetch_size
        self._restore = restore
        self.execution_ms = 0
        #: whether the rows come from a server-side cursor (PostgreSQL, see ``run_query``)
        self.server_side = False

    def results(self) -> Iterator[ResultSet]:
        """Each result set in order; a statement without one (an update count) is passed over."""
        while True:
            if self._cursor.description is not None:
                yield ResultSet(self._cursor, self._dialect, self._fetch)
            nextset = getattr(self._cursor, "nextset", None)
            if nextset is None or self._dialect not in ("postgresql", *MYSQL_DIALECTS) or not nextset():
                return

    def close(self) -> None:
        try:
            self._cursor.close()
        finally:
            self._restore()

    def __enter__(self) -> "Query":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_query(connection: Any, sql: str, parameters: Sequence[Any] | None = None, *, fetch_size: int = 0,
              timeout_seconds: int = 0, auto_commit: bool = True) -> Query:
    """Run ``sql`` on ``connection`` (a SQLAlchemy ``Connection``); see the module docstring. With
    PostgreSQL, Fetch Size above 0 and auto-commit off (what PostgreSQL's JDBC driver asks for
    before it fetches rows in steps) a single SELECT runs in a server-side cursor, so the rows are
    fetched from the server ``fetch_size`` at a time; otherwise the driver holds the whole result
    and the writers take it ``fetch_size`` rows at a time. With MySQL, Fetch Size above 0 and a
    single SELECT, PyMySQL's unbuffered cursor streams the rows."""
    dialect = connection.dialect.name
    driver = connection.connection.driver_connection
    statement = sql if parameters is None else driver_sql(sql, connection.dialect.paramstyle, dialect)
    server_side = fetch_size > 0 and single_select(sql) and (
        dialect in MYSQL_DIALECTS or (dialect == "postgresql" and not auto_commit))
    if dialect in MYSQL_DIALECTS:
        from pymysql.cursors import SSCursor

        cursor = driver.cursor(SSCursor) if server_side else driver.cursor()
        restore = mysql_timeout(driver, timeout_seconds, getattr(connection.dialect, "is_mariadb", False))
    elif dialect == "postgresql":
        cursor = driver.cursor(name=f"flowactors_{id(connection):x}") if server_side else driver.cursor()
        _pg_text_loaders(cursor)
        if server_side:
            cursor.itersize = fetch_size
        restore = _pg_timeout(driver, timeout_seconds)
    else:
        cursor = driver.cursor()
        restore = _sqlite_timeout(driver, timeout_seconds)
    started = time.monotonic()
    try:
        if parameters is None:
            cursor.execute(statement)
        else:
            cursor.execute(statement, list(parameters))
    except BaseException:
        try:
            cursor.close()
        finally:
            restore()
        raise
    query = Query(cursor, dialect, fetch_size, restore)
    query.execution_ms = round((time.monotonic() - started) * 1000)
    query.server_side = server_side
    return query


def _pg_text_loaders(cursor: Any) -> None:
    from psycopg.types.string import TextLoader

    for name in _PG_AS_TEXT:
        info = cursor.adapters.types.get(name)
        if info is not None:
            cursor.adapters.register_loader(info.oid, TextLoader)


def _pg_timeout(driver: Any, seconds: int) -> Callable[[], None]:
    if seconds <= 0:
        return lambda: None
    driver.execute("SELECT set_config('statement_timeout', %s, false)", (f"{seconds}s",))

    def restore() -> None:
        if not driver.closed and driver.info.transaction_status in (0, 2):   # idle, or in a good transaction
            driver.execute("RESET statement_timeout")
    return restore


def mysql_timeout(driver: Any, seconds: int, mariadb: bool) -> Callable[[], None]:
    """Bound the session's statements to ``seconds``: MariaDB's ``max_statement_time`` (seconds, any
    statement) or MySQL's ``max_execution_time`` (milliseconds, SELECTs only); the function returned
    puts the server's default back (nothing when the connection was lost)."""
    if seconds <= 0:
        return lambda: None
    name, value = ("max_statement_time", seconds) if mariadb else ("max_execution_time", seconds * 1000)
    with driver.cursor() as cursor:
        cursor.execute(f"SET SESSION {name} = {int(value)}")

    def restore() -> None:
        if driver.open:
            with driver.cursor() as cursor:
                cursor.execute(f"SET SESSION {name} = DEFAULT")
    return restore


def _sqlite_timeout(driver: Any, seconds: int) -> Callable[[], None]:
    if seconds <= 0:
        return lambda: None
    deadline = time.monotonic() + seconds
    driver.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
    return lambda: driver.set_progress_handler(None, 0)


def single_select(sql: str) -> bool:
    """Whether ``sql`` is one SELECT, VALUES or TABLE statement (what a server-side cursor runs)."""
    parts = [part for part in _split_top(sql) if part.strip()]
    return len(parts) == 1 and re.match(r"\s*\(*\s*(select|values|table)\b", parts[0], re.I) is not None


def _split_top(sql: str) -> list[str]:
    parts, start = [], 0
    for match in SQL_TOKENS.finditer(sql):
        if match.group(0) == ";":
            parts.append(sql[start:match.start()])
            start = match.end()
    return [*parts, sql[start:]]


# ---------------------------------------------------------------------------------- columns and types
def _pg_columns(cursor: Any) -> list[Column]:
    columns = []
    for described in cursor.description:
        info = cursor.adapters.types.get(described.type_code)
        if info is not None and info.array_oid == described.type_code:
            columns.append(Column(described.name, ARRAY, "_" + info.name))
            continue
        name = info.name if info is not None else "unknown"
        jdbc, precision = _PG_TYPES.get(name, (OTHER, 0))
        if name == "numeric":
            precision = described.precision or 0
        elif jdbc in (CHAR, VARCHAR) and described.internal_size:
            precision = described.internal_size
        columns.append(Column(described.name, jdbc, name, precision, described.scale or 0))
    return columns


def _mysql_column(field: Any) -> Column:
    """The column Connector/J describes for a PyMySQL field (see the module docstring)."""
    from pymysql.constants import FIELD_TYPE as F

    kind, flags, length = field.type_code, field.flags, field.length
    unsigned, binary = bool(flags & 32), field.charsetnr == 63
    name = field.name
    if kind == F.TINY:
        return Column(name, BIT, "BIT", 1) if length == 1 else Column(name, TINYINT, "TINYINT", 3, 0, not unsigned)
    if kind == F.SHORT:
        return Column(name, INTEGER if unsigned else SMALLINT, "SMALLINT", 5, 0, not unsigned)
    if kind in (F.INT24, F.LONG):
        return Column(name, BIGINT if unsigned else INTEGER, "INT", 10, 0, not unsigned)
    if kind == F.LONGLONG:
        return Column(name, BIGINT, "BIGINT", 20 if unsigned else 19, 0, not unsigned)
    if kind in (F.DECIMAL, F.NEWDECIMAL):
        precision = length - (0 if unsigned else 1) - (1 if field.scale else 0)
        return Column(name, DECIMAL, "DECIMAL", precision, field.scale, not unsigned)
    simple = {F.FLOAT: (REAL, "FLOAT"), F.DOUBLE: (DOUBLE, "DOUBLE"), F.DATE: (DATE, "DATE"),
              F.NEWDATE: (DATE, "DATE"), F.TIME: (TIME, "TIME"), F.DATETIME: (TIMESTAMP, "DATETIME"),
              F.TIMESTAMP: (TIMESTAMP, "TIMESTAMP"), F.YEAR: (SMALLINT, "YEAR"), F.JSON: (LONGVARCHAR, "JSON"),
              F.GEOMETRY: (BINARY, "GEOMETRY"), F.NULL: (VARCHAR, "NULL")}
    if kind in simple:
        jdbc, type_name = simple[kind]
        return Column(name, jdbc, type_name, length)
    if kind == F.BIT:
        return Column(name, BIT, "BIT", 1) if length == 1 else Column(name, VARBINARY, "BIT", length)
    if flags & (256 | 2048):   # ENUM_FLAG, SET_FLAG
        return Column(name, CHAR, "ENUM" if flags & 256 else "SET", length)
    if kind in (F.TINY_BLOB, F.MEDIUM_BLOB, F.LONG_BLOB, F.BLOB):
        return Column(name, LONGVARBINARY, "BLOB", length) if binary else Column(name, LONGVARCHAR, "TEXT", length)
    if kind == F.STRING:
        return Column(name, BINARY, "BINARY", length) if binary else Column(name, CHAR, "CHAR", length)
    return Column(name, VARBINARY, "VARBINARY", length) if binary else Column(name, VARCHAR, "VARCHAR", length)


def _pg_table(cursor: Any) -> str | None:
    result = cursor.pgresult
    oid = result.ftable(0) if result is not None and result.nfields else 0
    if not oid:
        return None
    found = cursor.connection.execute("SELECT relname FROM pg_class WHERE oid = %s", (oid,)).fetchone()
    return found[0] if found else None


def _value_columns(description: Sequence[Any], rows: list[tuple]) -> list[Column]:
    """SQLite's columns: typed by the values of ``rows`` (see the module docstring)."""
    columns = []
    for index, described in enumerate(description):
        kinds = {type(row[index]) for row in rows if row[index] is not None}
        if kinds == {int}:
            column = Column(described[0], BIGINT, "INTEGER", _MAX_DIGITS_IN_BIGINT)
        elif kinds and kinds <= {int, float}:
            column = Column(described[0], DOUBLE, "REAL", 17)
        elif kinds == {bytes}:
            column = Column(described[0], BLOB, "BLOB")
        else:
            column = Column(described[0], VARCHAR, "TEXT")
        columns.append(column)
    return columns


def _decimal_shape(column: Column, options: AvroOptions) -> tuple[int, int]:
    if column.precision > 0:
        precision, scale = column.precision, column.scale if column.scale >= 0 else options.default_scale
    else:
        precision, scale = options.default_precision, column.scale if column.scale > 0 else options.default_scale
    return max(precision, scale), scale


def _avro_type(column: Column, options: AvroOptions) -> Any:
    """The Avro type (without its null) of ``column`` (NiFi's ``createSchema``)."""
    kind, logical = column.jdbc_type, options.logical_types
    if kind in (BIT, BOOLEAN):
        return "boolean"
    if kind == INTEGER:
        signed_int = column.signed or 0 < column.precision < _MAX_DIGITS_IN_INT
        return "int" if signed_int else "long"
    if kind in (SMALLINT, TINYINT):
        return "int"
    if kind == BIGINT:
        return "string" if not 0 <= column.precision <= _MAX_DIGITS_IN_BIGINT else "long"
    if kind in (FLOAT, REAL):
        return "float"
    if kind == DOUBLE:
        return "double"
    if kind in (DECIMAL, NUMERIC):
        if not logical:
            return "string"
        precision, scale = _decimal_shape(column, options)
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if kind == DATE:
        return {"type": "int", "logicalType": "date"} if logical else "string"
    if kind == TIME:
        return {"type": "int", "logicalType": "time-millis"} if logical else "string"
    if kind in (TIMESTAMP, TIMESTAMP_WITH_TIMEZONE):
        return {"type": "long", "logicalType": "timestamp-millis"} if logical else "string"
    if kind in (BINARY, VARBINARY, LONGVARBINARY, BLOB):
        return "bytes"
    if kind == ARRAY:
        return {"type": "array", "items": "string"}
    return "string"


def avro_schema(result: ResultSet, options: AvroOptions) -> dict:
    """The Avro schema NiFi writes for ``result``: a record named after its table (or the
    options' record name, or ``NiFi_ExecuteSQL_Record``) in ``any.data``, each column a union
    of null and its type. Two columns of one name are a ``ValueError`` naming it."""
    name = result.table_name or options.record_name or DEFAULT_RECORD_NAME
    fields, seen = [], set()
    for column in result.columns:
        field = normalize_name(column.label) if options.normalize_names else column.label
        if field in seen:
            raise ValueError(f"the result has two columns named {field!r}: give one an alias (AS another_name)")
        seen.add(field)
        fields.append({"name": field, "type": ["null", _avro_type(column, options)]})
    return {"type": "record", "name": normalize_name(name) if options.normalize_names else name,
            "namespace": NAMESPACE, "fields": fields}


# ---------------------------------------------------------------------------------- values
def _local_millis(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.astimezone()   # a timestamp without a zone is in the local zone, as in the JVM
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)   # whole milliseconds, floored as Java's getTime


def _java_timestamp(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone().replace(tzinfo=None)
    fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
    return f"{value:%Y-%m-%d %H:%M:%S}.{fraction}"


def _java_time(value: Any) -> str:
    if isinstance(value, dt.timedelta):   # a PostgreSQL time past 24:00:00, SQLite text
        seconds = int(value.total_seconds())
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return f"{value:%H:%M:%S}"


def _time_millis(value: Any) -> int:
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds() * 1000)
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _to_text(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _java_timestamp(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"   # Java's Boolean.toString
    return str(value)


def _converter(column: Column, avro_type: Any) -> Callable[[Any], Any]:
    """What a value of ``column`` becomes in a record of ``avro_type`` (never called with None)."""
    logical = avro_type.get("logicalType") if isinstance(avro_type, dict) else None
    if logical == "decimal":
        step = decimal.Decimal(1).scaleb(-avro_type["scale"])
        return lambda v: decimal.Decimal(v).quantize(step, rounding=decimal.ROUND_HALF_UP)
    if logical == "date":
        return lambda v: (v.date() if isinstance(v, dt.datetime) else v).toordinal() - _EPOCH_DAY
    if logical == "time-millis":
        return _time_millis
    if logical == "timestamp-millis":
        return _local_millis
    if column.jdbc_type == TIME:
        return _java_time
    if isinstance(avro_type, dict):   # an array: each element as text
        return lambda v: [None if e is None else _to_text(e) for e in v]
    return {"string": _to_text, "int": _number(column, (int,), int), "long": _number(column, (int,), int),
            "float": _number(column, (int, float, decimal.Decimal), float),
            "double": _number(column, (int, float, decimal.Decimal), float),
            "boolean": lambda v: bool(int.from_bytes(v, "big")) if isinstance(v, bytes) else bool(v),
            "bytes": lambda v: v if isinstance(v, bytes) else bytes(v) if not isinstance(v, str) else v.encode()
            }[avro_type]


def _number(column: Column, kinds: tuple[type, ...], cast: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A numeric column's values: a value of another kind (SQLite's columns hold any) is a
    ``ValueError`` saying to cast it, never a silent conversion."""
    def convert(value: Any) -> Any:
        if isinstance(value, kinds) and not isinstance(value, bool):
            return cast(value)
        held = "integers" if kinds == (int,) else "numbers"
        raise ValueError(f"the column {column.label!r} holds {value!r} where its first rows held {held}: CAST it "
                         f"in the query to one type")
    return convert


def _row_converters(result: ResultSet, schema: dict) -> list[Callable[[Any], Any]]:
    return [_converter(column, field["type"][1]) for column, field in zip(result.columns, schema["fields"])]


def _converted(result: ResultSet, schema: dict, max_rows: int, on_row: Callable[[tuple], None] | None
               ) -> Iterator[list[Any]]:
    converters = _row_converters(result, schema)
    for row in result.rows(max_rows):
        if on_row is not None:
            on_row(row)
        yield [None if value is None else convert(value) for convert, value in zip(converters, row)]


# ---------------------------------------------------------------------------------- writers
def write_avro(result: ResultSet, out: BinaryIO, options: AvroOptions, *, max_rows: int = 0,
               on_row: Callable[[tuple], None] | None = None) -> int:
    """Write the next ``max_rows`` rows of ``result`` (0: all) to ``out`` as one Avro container
    file of ``avro_schema``; the number of rows written."""
    schema = avro_schema(result, options)
    names = [field["name"] for field in schema["fields"]]
    count = 0

    def records() -> Iterator[dict]:
        nonlocal count
        for values in _converted(result, schema, max_rows, on_row):
            count += 1
            yield dict(zip(names, values))

    fastavro.writer(out, fastavro.parse_schema(schema), records(), codec=CODECS[options.codec])
    return count


def write_empty_avro(out: BinaryIO) -> None:
    """The Avro file NiFi writes when a query gave no result set: a record without fields."""
    schema = {"type": "record", "name": DEFAULT_RECORD_NAME, "namespace": NAMESPACE, "fields": []}
    fastavro.writer(out, fastavro.parse_schema(schema), [])


def record_schema(result: ResultSet, options: AvroOptions) -> pa.Schema:
    """The Arrow schema of ``result``'s records (see the module docstring)."""
    avro = avro_schema(result, options)
    arrays = {i for i, column in enumerate(result.columns) if column.jdbc_type == ARRAY}
    if arrays:   # NiFi's record schema keeps an array, not the Avro union of bytes and array
        avro = {**avro, "fields": [{**f, "type": ["null", "string"]} if i in arrays else f
                                   for i, f in enumerate(avro["fields"])]}
    schema = avro_to_arrow(avro, strict=False)
    for i in arrays:
        schema = schema.set(i, pa.field(schema.field(i).name, pa.list_(pa.string())))
    return schema


def record_batches(result: ResultSet, options: AvroOptions, *, max_rows: int = 0,
                   on_row: Callable[[tuple], None] | None = None) -> Iterator[pa.RecordBatch]:
    """The next ``max_rows`` rows of ``result`` (0: all) as Arrow batches of ``record_schema``."""
    schema = record_schema(result, options)
    rows = _converted(result, avro_schema(result, options), max_rows, on_row)
    while chunk := list(islice(rows, BATCH_ROWS)):
        columns = list(zip(*chunk))
        yield pa.RecordBatch.from_arrays([pa.array(list(values), type=field.type)
                                          for values, field in zip(columns, schema)], schema=schema)
