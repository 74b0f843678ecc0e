"""The database lookup services: a table's row, or one of its values, by key, for LookupRecord and
NiFi 2 Python processors (NiFi's ``DatabaseRecordLookupService`` and ``SimpleDatabaseLookupService``;
docs/sql.md, "Looking rows up").

A lookup takes the coordinate ``key`` and runs ``SELECT <Lookup Value Columns, or *> FROM <Table
Name> WHERE <Lookup Key Column> = ?`` with the key as its parameter, on a connection of the
``Database Connection Pooling Service``. The first row found is the answer: the record service's
is the row as a record (a dict of column -> value, the driver's values: int, str, Decimal,
datetime...), the simple service's the Lookup Value Column's value as text (Java's ``toString``:
``1.5``, ``true``); none found, or a null value, is None. A missing or blank key finds nothing
without a query. A statement the database refuses (a table or column that is not there) is the
lookup's failure (``LookupFailureError``: LookupRecord sends that FlowFile to failure), one line
naming the statement and the key.

**The cache.** With ``Cache Size`` above 0, found answers are kept (the least recently used
dropped past that many, each for at most ``Cache Expiration`` when set) by table and key, so a
key looked up again costs no query; nothing is kept for a key not found. A change in the table
is seen once the entry expires or leaves. ``Clear Cache on Enabled`` false keeps what a disabled
service had cached when it is enabled again. The cache lives in each process that hosts the
service, as NiFi's lives in each node.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Mapping

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.records import RecordLookupService
from flowactors.sdk.services import (ControllerService, DatabaseUnavailableError, DBCPService, LookupService,
                                     ServiceContext, StringLookupService, database_error_text)
from flowactors.services.lookup import KEY, LookupFailureError

DBCP_SERVICE = PropertyDescriptor("Database Connection Pooling Service", "The connection pool reaching the database",
                                  required=True, service=DBCPService)
TABLE_NAME = PropertyDescriptor("Table Name", "The table looked in (case may matter, as the database says)",
                                required=True, expression_language=True, validator=validators.NON_EMPTY)
KEY_COLUMN = PropertyDescriptor("Lookup Key Column", "The column the lookup's key is compared with", required=True,
                                expression_language=True, validator=validators.NON_EMPTY)
CACHE_SIZE = PropertyDescriptor("Cache Size", "How many answers are kept (0: none; every lookup queries the table)",
                                required=True, default="0", expression_language=True,
                                validator=validators.NON_NEGATIVE_INTEGER)
CLEAR_CACHE = PropertyDescriptor("Clear Cache on Enabled", "Whether enabling the service empties its cache",
                                 required=True, default="true", allowable_values=("true", "false"))
CACHE_EXPIRATION = PropertyDescriptor("Cache Expiration", "How long an answer is kept at most (unset: until it is "
                                      "the least recently used one past Cache Size)", expression_language=True,
                                      validator=validators.DURATION)

#: NiFi 1's names of the shared properties (AbstractDatabaseLookupService.migrateProperties)
_NIFI_NAMES = {"dbrecord-lookup-dbcp-service": DBCP_SERVICE.name, "dbrecord-lookup-table-name": TABLE_NAME.name,
               "dbrecord-lookup-key-column": KEY_COLUMN.name, "dbrecord-lookup-cache-size": CACHE_SIZE.name,
               "dbrecord-lookup-clear-cache-on-enabled": CLEAR_CACHE.name}


class AnswerCache:
    """Answers by key, at most ``size`` (least recently used dropped), each for at most
    ``lifetime`` seconds (None: no limit); thread-safe."""

    def __init__(self, size: int, lifetime: float | None):
        self.size, self.lifetime = size, lifetime
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if self.lifetime is not None and time.monotonic() - found[0] >= self.lifetime:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[key] = (time.monotonic(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


class _DatabaseLookup(ControllerService):
    """What the two services share: the query, the cache; a subclass says which columns it selects
    (``_columns``) and what a row's answer is (``_answer``)."""

    def __init__(self) -> None:
        self._cache: AnswerCache | None = None

    def on_enabled(self, context: ServiceContext) -> None:
        self._pool = context.service(DBCP_SERVICE.name, DBCPService)
        self._table = context.property(TABLE_NAME.name)
        self._key_column = context.property(KEY_COLUMN.name).evaluate() or ""
        size = context.property(CACHE_SIZE.name).as_int() or 0
        if self._cache is None or (size > 0 and context.property(CLEAR_CACHE.name).as_bool()):
            self._cache = AnswerCache(size, context.property(CACHE_EXPIRATION.name).as_duration())
        self._configure(context)

    def _configure(self, context: ServiceContext) -> None:
        """Read the subclass's own properties."""

    def _columns(self) -> str:
        raise NotImplementedError

    def _answer(self, names: list[str], row: tuple) -> Any:
        raise NotImplementedError

    def lookup(self, coordinates: Mapping[str, Any]) -> Any:
        key = coordinates.get(KEY) if coordinates else None
        if key is None or not str(key).strip():
            return None
        table = self._table.evaluate() or ""
        assert self._cache is not None, f"{type(self).__name__} is not enabled"
        found = self._cache.get((table, key))
        if found is not None:
            return found
        from sqlalchemy import exc, text

        statement = f"SELECT {self._columns()} FROM {table} WHERE {self._key_column} = :key"
        try:
            with self._pool.connection() as connection:
                result = connection.execute(text(statement), {"key": key})
                row = result.first()
                found = None if row is None else self._answer(list(result.keys()), tuple(row))
        except (exc.SQLAlchemyError, DatabaseUnavailableError) as err:
            raise LookupFailureError(f"the lookup of {key!r} by {statement!r} failed: "
                                     f"{database_error_text(err)}") from None
        if found is not None:
            self._cache.put((table, key), found)
        return found


class DatabaseRecordLookupService(_DatabaseLookup, LookupService, RecordLookupService):
    """A table's row by key, as a record (see the module docstring)."""

    description = "Looks rows up by key in a database table (the row as a record)"
    properties = (DBCP_SERVICE, TABLE_NAME, KEY_COLUMN,
                  PropertyDescriptor("Lookup Value Columns", "Comma-separated columns the record holds (none: every "
                                     "column)", expression_language=True, validator=validators.NON_EMPTY),
                  CACHE_SIZE, CLEAR_CACHE, CACHE_EXPIRATION)
    NIFI_PROPERTY_NAMES = {**_NIFI_NAMES, "dbrecord-lookup-value-columns": "Lookup Value Columns"}
    #: the scale and precision NiFi's record of a DECIMAL takes when the column has none: the
    #: values here are the driver's Decimals, as precise as the database's
    NIFI_IGNORED = ("Default Decimal Precision", "Default Decimal Scale", "dbf-default-precision", "dbf-default-scale")

    def _configure(self, context: ServiceContext) -> None:
        self._value_columns = context.property("Lookup Value Columns")

    def _columns(self) -> str:
        names = [c.strip() for c in (self._value_columns.evaluate() or "").split(",") if c.strip()]
        return ",".join(dict.fromkeys(names)) or "*"

    def _answer(self, names: list[str], row: tuple) -> dict[str, Any]:
        return dict(zip(names, row))


class SimpleDatabaseLookupService(_DatabaseLookup, StringLookupService):
    """One column of a table's row by key, as text (see the module docstring)."""

    description = "Looks values up by key in a database table (one column's value, as text)"
    properties = (DBCP_SERVICE, TABLE_NAME, KEY_COLUMN,
                  PropertyDescriptor("Lookup Value Column", "The column whose value is the answer", required=True,
                                     expression_language=True, validator=validators.NON_EMPTY),
                  CACHE_SIZE, CLEAR_CACHE, CACHE_EXPIRATION)
    NIFI_PROPERTY_NAMES = {**_NIFI_NAMES, "lookup-value-column": "Lookup Value Column"}

    def _configure(self, context: ServiceContext) -> None:
        self._value_column = context.property("Lookup Value Column").evaluate() or ""

    def _columns(self) -> str:
        return self._value_column

    def _answer(self, names: list[str], row: tuple) -> str | None:
        return None if row[0] is None else java_text(row[0])
