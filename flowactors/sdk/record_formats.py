"""The record formats flowactors had before record readers and writers were controller services,
and the standard services that read and write as each of them did.

ExecuteSparkSQL, TransformWithSpark and NiFi 2 Python record transforms once chose a record
*format* by name: ``CSV``, ``JSON Lines`` or ``Parquet`` (the Spark processors also took a schema
in Spark's DDL, a CSV delimiter and whether CSV has a header). They now name a reader and a writer
controller service (``flowactors.sdk.records``), as NiFi's record processors do. For a definition
saved before, ``reader_service`` and ``writer_service`` give the service that does what a format
did, as the entry a definition's ``controller_services`` takes, and ``add_service_text`` the
sentence that says what to add (the Spark processors' validation gives it; docs/spark.md and
docs/nifi-python-processors.md say what changed).

``parse_schema`` reads Spark's DDL (``id BIGINT, name STRING, amount DECIMAL(10,2)``): an old
'Schema' becomes the reader's 'Schema Text' (an Avro schema, ``avro_text``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import orjson
import pyarrow as pa

from flowactors.sdk.records.schema import avro_text

CSV, JSON_LINES, PARQUET = "CSV", "JSON Lines", "Parquet"
FORMATS = (CSV, JSON_LINES, PARQUET)

_READERS = {CSV: "CSVReader", JSON_LINES: "JsonTreeReader", PARQUET: "ParquetReader"}
_WRITERS = {CSV: ("CSVRecordSetWriter", {}),
            JSON_LINES: ("JsonRecordSetWriter", {"Output Grouping": "One Line Per Object"}),
            PARQUET: ("ParquetRecordSetWriter", {})}
#: the reader's properties that give it a schema as text (NiFi's names and value)
_SCHEMA_TEXT = {"Schema Access Strategy": "Use 'Schema Text' Property"}


# ---------------------------------------------------------------------------------- Spark DDL
_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(), "VARCHAR": pa.string(), "CHAR": pa.string(), "TEXT": pa.string(),
    "BOOLEAN": pa.bool_(), "BOOL": pa.bool_(),
    "TINYINT": pa.int8(), "BYTE": pa.int8(), "SMALLINT": pa.int16(), "SHORT": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "LONG": pa.int64(),
    "FLOAT": pa.float32(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
    "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", tz="UTC"), "TIMESTAMP_NTZ": pa.timestamp("us"),
    "BINARY": pa.binary(),
}
_FIELD = re.compile(r"\s*`?([A-Za-z_][A-Za-z0-9_ .-]*?)`?\s+([A-Za-z_]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def parse_schema(text: str) -> pa.Schema:
    """An Arrow schema from Spark-style DDL: ``name TYPE, ...`` (types: see ``_SIMPLE_TYPES``, DECIMAL(p,s)).

    Raises ValueError naming the part it could not read.
    """
    fields = []
    parts = [p for p in re.split(r",(?![^(]*\))", text) if p.strip()]
    if not parts:
        raise ValueError("the schema is empty; write it as 'name TYPE, name TYPE', e.g. 'id BIGINT, name STRING'")
    for part in parts:
        match = _FIELD.match(part)
        if match is None:
            raise ValueError(f"cannot read {part.strip()!r} as 'name TYPE' (e.g. 'amount DOUBLE')")
        name, type_name, precision, scale = match.groups()
        type_name = type_name.upper()
        if type_name in ("DECIMAL", "NUMERIC", "DEC"):
            data_type = pa.decimal128(int(precision or 10), int(scale or 0))
        elif type_name in _SIMPLE_TYPES and precision is None:
            data_type = _SIMPLE_TYPES[type_name]
        else:
            known = ", ".join(sorted(_SIMPLE_TYPES)) + ", DECIMAL(p,s)"
            raise ValueError(f"unknown type {type_name!r} for column {name!r} (known: {known})")
        if name in {f.name for f in fields}:
            raise ValueError(f"column {name!r} appears twice in the schema")
        fields.append(pa.field(name, data_type))
    return pa.schema(fields)


# ---------------------------------------------------------------------------------- the services
@dataclass(frozen=True)
class ServiceDefinition:
    """A controller service as a definition's ``controller_services`` entry names it: its
    ``name``, its standard ``type`` and its ``properties``; ``note`` says what of the old
    configuration it does not carry over, when something."""

    name: str
    type: str
    properties: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "properties": dict(self.properties)}


def reader_service(fmt: str, *, delimiter: str = ",", header: bool = True,
                   schema: str | None = None) -> ServiceDefinition:
    """The reader service that reads what the record format ``fmt`` read with these options
    (``schema``: Spark DDL). Raises ValueError for a format that never was one, a schema that
    does not parse, and CSV without a header and without a schema (whose columns were named
    ``f0``, ``f1``, ...: no reader names columns so)."""
    if fmt not in _READERS:
        raise ValueError(f"{fmt!r} was never a record format (they were {', '.join(FORMATS)})")
    properties: dict[str, str] = {}
    note = ""
    if schema and fmt != PARQUET:
        try:
            parsed = parse_schema(schema)
        except ValueError as err:
            raise ValueError(f"the Schema {schema!r} does not read as Spark DDL: {err}") from None
        properties.update({**_SCHEMA_TEXT, "Schema Text": avro_text(parsed)})
        if any(pa.types.is_date(t) for t in parsed.types):
            # the formats read dates as ISO text only; the pattern reads it so, in Arrow (without
            # one, the readers try epoch milliseconds and ISO forms a value at a time)
            properties["Date Format"] = "yyyy-MM-dd"
    elif schema:
        note = "a Parquet file's own schema is read: select the columns you want in the query"
    if fmt == CSV:
        if not header and not schema:
            raise ValueError("CSV without a header line was read with columns named f0, f1, ..., which no reader "
                             "service does (a CSVReader reads it given its columns as an Avro schema in 'Schema "
                             "Text', with 'Schema Access Strategy' \"Use 'Schema Text' Property\")")
        properties["Treat First Line as Header"] = "true" if header else "false"
        if delimiter != ",":
            properties["Value Separator"] = delimiter
    return ServiceDefinition(_name(fmt, "reader", properties), _READERS[fmt], properties, note)


def writer_service(fmt: str) -> ServiceDefinition:
    """The writer service that writes records as the record format ``fmt`` wrote them (ValueError
    for a format that never was one)."""
    if fmt not in _WRITERS:
        raise ValueError(f"{fmt!r} was never a record format (they were {', '.join(FORMATS)})")
    type_name, properties = _WRITERS[fmt]
    return ServiceDefinition(_name(fmt, "writer", {}), type_name, dict(properties))


def _name(fmt: str, role: str, options: dict[str, str]) -> str:
    """``CSV reader``; with options beyond the format's own, a suffix made from them, so that one
    configuration always gets one name and two get two."""
    name = f"{fmt} {role}"
    extra = {k: v for k, v in options.items() if k != "Treat First Line as Header" or v != "true"}
    if not extra:
        return name
    return f"{name} {hashlib.sha1(orjson.dumps(extra, option=orjson.OPT_SORT_KEYS)).hexdigest()[:6]}"


def add_service_text(definition: ServiceDefinition, prop: str) -> str:
    """What to do, in one sentence: add ``definition`` and name it in the property ``prop``."""
    entry = orjson.dumps(definition.to_dict()).decode()
    note = f" ({definition.note})" if definition.note else ""
    return (f"add the controller service {entry} (an entry of the definition's 'controller_services'; in Python "
            f"flow.add_service({definition.type}, {definition.name!r}, properties=...)) and set '{prop}' to "
            f"'{definition.name}'{note}")
