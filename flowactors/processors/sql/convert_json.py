"""ConvertJSONToSQL: each object of a JSON FlowFile turned into a parameterized SQL statement for
PutSQL (NiFi 1's ConvertJSONToSQL; docs/sql.md, "Writing").

The content is one JSON object or an array of them. The table's columns are read from the
database through the connection pool (``table_schema``, cached); each object becomes a FlowFile
(routed to ``sql``) whose content is the statement with ``?`` placeholders, built as
PutDatabaseRecord builds it, and whose ``<prefix>.args.N.type`` / ``.value`` attributes give the
parameters: the column's JDBC type number, and the field's value as text (a null has no value
attribute; ``true``/``false`` for booleans, ``1``/``0`` for a boolean into a number column; text
cut to a character column's length; a nested object or array as JSON text). It also gets
``<prefix>.table``, ``<prefix>.catalog`` (when set), ``mime.type`` ``text/plain`` and
``fragment.identifier`` / ``.count`` / ``.index``, which the original (routed to ``original``) gets
too, so that PutSQL runs the statements of one FlowFile as one transaction.

A content that is not a JSON object or array of objects, a table that is not found, or an object
that does not make a statement (Unmatched Field / Column Behavior) sends the original to
``failure`` with ``flowactors.failure.reason``, and none of its statements go on. A database that
cannot be reached to read the table's columns leaves the FlowFile queued, penalized, and yields.
"""

from __future__ import annotations

import json
import logging
import uuid
from decimal import Decimal
from typing import Any

from flowactors.processors._common import boolean_property
from flowactors.processors._common import route_failure as common_route_failure
from flowactors.processors.sql import table_schema as ts
from flowactors.processors.sql.table_schema import (BUILT_TYPES, DELETE, INSERT, INSERT_IGNORE, UPDATE, UPSERT,
                                                    Column, SchemaCache, StatementError, build_statement)
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.relationships import reason
from flowactors.sdk.services import DatabaseUnavailableError, DBCPService
from repositories.model import now_millis

log = logging.getLogger(__name__)

USE_ATTRIBUTE = "Use statement.type Attribute"
FAIL_FIELD = "Fail"     # NiFi's ConvertJSONToSQL spells it so (PutDatabaseRecord: Fail on Unmatched Fields)
ORIGINAL = Relationship("original", "The FlowFiles whose objects became statements")
SQL_OUT = Relationship("sql", "One FlowFile a JSON object: its statement and parameters")
FAILURE = Relationship("failure", "FlowFiles whose content or table does not make statements")
_NUMBERS = {ts.BIT, ts.TINYINT, ts.SMALLINT, ts.INTEGER, ts.BIGINT, ts.REAL, ts.FLOAT, ts.DOUBLE, ts.DECIMAL,
            ts.NUMERIC}
_CHARACTERS = {ts.CHAR, ts.VARCHAR, ts.LONGVARCHAR, ts.NCHAR, ts.NVARCHAR, ts.LONGNVARCHAR}


class ConvertJSONToSQL(Processor):
    """Turns each object of a JSON FlowFile into an INSERT, UPDATE, DELETE, UPSERT or INSERT_IGNORE
    statement with ``sql.args`` attributes, for PutSQL (see the module docstring). Provenance: the
    session's FORK of the statements from the original."""

    description = "Converts JSON objects into parameterized SQL statements for PutSQL"
    NIFI_TYPE = "org.apache.nifi.processors.standard.ConvertJSONToSQL"
    properties = (
        PropertyDescriptor("JDBC Connection Pool", "The connection pool the table's columns are read through",
                           required=True, service=DBCPService),
        PropertyDescriptor("Statement Type", "The statement each object becomes", required=True,
                           allowable_values=(UPDATE, INSERT, DELETE, UPSERT, INSERT_IGNORE, USE_ATTRIBUTE)),
        PropertyDescriptor("Table Name", "The table the statements change", required=True, expression_language=True),
        PropertyDescriptor("Catalog Name", "The catalog of the table", expression_language=True),
        PropertyDescriptor("Schema Name", "The schema of the table", expression_language=True),
        boolean_property("Translate Field Names", True, "Match field names to column names upper-cased and without "
                         "underscores"),
        ts.unmatched_field_property(FAIL_FIELD), ts.UNMATCHED_COLUMN, ts.UPDATE_KEYS, ts.QUOTE_COLUMNS, ts.QUOTE_TABLE,
        PropertyDescriptor("SQL Parameter Attribute Prefix", "The prefix of the parameter attributes "
                           "(<prefix>.args.N.type)", required=True, default="sql", expression_language=True),
        ts.SCHEMA_CACHE_SIZE,
    )
    relationships = (ORIGINAL, SQL_OUT, FAILURE)
    NIFI_PROPERTY_NAMES = {"jts-quoted-identifiers": "Quote Column Identifiers",
                           "jts-quoted-table-identifiers": "Quote Table Identifiers",
                           "jts-sql-param-attr-prefix": "SQL Parameter Attribute Prefix",
                           "table-schema-cache-size": "Table Schema Cache Size"}

    def __init__(self) -> None:
        self._cache = SchemaCache(100)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._cache = SchemaCache(context.property("Table Schema Cache Size").as_int() or 0)

    def on_trigger(self, context: ProcessContext, session) -> None:
        pool = context.service("JDBC Connection Pool", DBCPService)
        for flowfile in session.get_batch():
            try:
                statements = self._convert(context, session, flowfile, pool)
            except DatabaseUnavailableError as err:
                log.warning("%s: %s; %s stays queued", context.name, err, flowfile.uuid)
                until = now_millis() + int(session.penalty_duration * 1000)
                session.give_back([flowfile.uuid], lambda taken, _now: taken._replace(penalized_until=until))
                context.yield_()
                return
            except Exception as err:
                from sqlalchemy import exc

                if not isinstance(err, (StatementError, exc.SQLAlchemyError)):
                    raise
                common_route_failure(context, session, flowfile, reason(err), None, FAILURE)
                continue
            self._emit(session, flowfile, statements)

    def _convert(self, context: ProcessContext, session, flowfile: FlowFile,
                 pool: DBCPService) -> list[tuple[str, dict[str, str]]]:
        """Each object's statement and parameter attributes."""
        prop = context.property
        kind = prop("Statement Type").evaluate() or ""
        if kind == USE_ATTRIBUTE:
            kind = (flowfile.attributes.get("statement.type") or "").strip().upper()
        if kind not in BUILT_TYPES:
            raise StatementError(f"the statement type is {kind!r}, not one of {', '.join(BUILT_TYPES)} (Statement "
                                 f"Type, or the statement.type attribute)")
        table_text = (prop("Table Name").evaluate(flowfile) or "").strip()
        if not table_text:
            raise StatementError("Table Name is empty for this FlowFile")
        catalog = (prop("Catalog Name").evaluate(flowfile) or "").strip() or None
        schema = (prop("Schema Name").evaluate(flowfile) or "").strip() or None
        settings = ts.settings_of(context, flowfile, "_")
        prefix = prop("SQL Parameter Attribute Prefix").evaluate(flowfile) or "sql"
        objects = _objects(session.read_bytes(flowfile))
        with pool.connection() as connection:
            table = self._cache.get(connection, catalog, schema, table_text)
        statements = []
        for item in objects:
            names = list(item)
            statement = build_statement(kind, table, names, settings, catalog)
            attributes = {}
            for number, (index, column) in enumerate(zip(statement.params, statement.columns), start=1):
                attributes[f"{prefix}.args.{number}.type"] = str(column.jdbc_type)
                value = item[names[index]]
                if value is not None:
                    attributes[f"{prefix}.args.{number}.value"] = sql_text(value, column)
            attributes[f"{prefix}.table"] = table_text
            if catalog is not None:
                attributes[f"{prefix}.catalog"] = catalog
            statements.append((statement.sql, attributes))
        return statements

    def _emit(self, session, flowfile: FlowFile, statements: list[tuple[str, dict]]) -> None:
        """One FlowFile a statement to ``sql``, the original to ``original``, sharing fragment attributes."""
        fragment = {"fragment.identifier": str(uuid.uuid4()), "fragment.count": str(len(statements))}
        for index, (sql, attributes) in enumerate(statements):
            child = session.create(flowfile)
            child = session.write_bytes(child, sql.encode("utf-8"))
            child = session.put_all_attributes(child, {**attributes, **fragment, "fragment.index": str(index),
                                                       "mime.type": "text/plain"})
            session.transfer(child, SQL_OUT)
        session.transfer(session.put_all_attributes(flowfile, fragment), ORIGINAL)


def _objects(content: bytes) -> list[dict[str, Any]]:
    """The JSON objects of ``content`` (one object, or an array of them); numbers kept as written."""
    try:
        root = json.loads(content, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError) as err:
        raise StatementError(f"the content is not JSON: {err}") from None
    items = root if isinstance(root, list) else [root]
    if not all(isinstance(item, dict) for item in items):
        raise StatementError("the content is not a JSON object or an array of JSON objects")
    return items


def sql_text(value: Any, column: Column) -> str:
    """A JSON value as the text of a ``sql.args.N.value`` for ``column`` (see the module docstring)."""
    if isinstance(value, bool):
        return ("1" if value else "0") if column.jdbc_type in _NUMBERS else ("true" if value else "false")
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    text = str(value)
    if column.jdbc_type in _CHARACTERS and column.size is not None and len(text) > column.size:
        return text[:column.size]
    return text
