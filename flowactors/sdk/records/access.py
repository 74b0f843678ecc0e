"""Where a reader or writer finds the schema, and what a writer says of it: NiFi's schema access
strategies and schema write strategies, as properties every record service shares.

Properties are named and valued as NiFi shows them (the import maps NiFi's internal names, such as
``schema-access-strategy`` / ``infer-schema``, onto these: ``NIFI_NAMES``, ``NIFI_VALUES``).

Readers: ``Infer Schema`` (the reader infers it from the records; JSON, CSV and XML readers),
``Use 'Schema Name' Property`` (a name, default ``${schema.name}``, looked up in the ``Schema
Registry`` service), ``Use 'Schema Text' Property`` (an Avro schema as JSON text, default
``${avro.schema}``), and reader-specific ones (``Use Embedded Avro Schema``, ``Use String Fields
From Header``). Writers: ``Inherit Record Schema`` (the records' own), the name and text
strategies; and a ``Schema Write Strategy``: ``Do Not Write Schema``, ``Set 'schema.name'
Attribute``, ``Set 'avro.schema' Attribute`` (``Embed Avro Schema`` for Avro's writer).

Schemas given as text are parsed once per distinct text (``SchemaCache``): a schema text of
``${avro.schema}`` differs per FlowFile only when the attribute does.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Callable, ClassVar, Mapping

import pyarrow as pa

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records.api import (SCHEMA_NAME_KEY, RecordSchemaCacheService, RecordSetWriterFactory,
                                        SchemaNotFoundError, SchemaRegistry)
from flowactors.sdk.records.schema import avro_text
from flowactors.sdk.services import ServiceContext

INFER = "Infer Schema"
SCHEMA_NAME = "Use 'Schema Name' Property"
SCHEMA_TEXT = "Use 'Schema Text' Property"
INHERIT = "Inherit Record Schema"
EMBEDDED_AVRO = "Use Embedded Avro Schema"
HEADER_DERIVED = "Use String Fields From Header"

NO_SCHEMA = "Do Not Write Schema"
WRITE_SCHEMA_NAME = "Set 'schema.name' Attribute"
WRITE_AVRO_SCHEMA = "Set 'avro.schema' Attribute"
EMBED_AVRO_SCHEMA = "Embed Avro Schema"

#: NiFi's internal names of these properties and values -> the names here (the NiFi import's table)
NIFI_NAMES = {"schema-access-strategy": "Schema Access Strategy", "schema-registry": "Schema Registry",
              "schema-name": "Schema Name", "schema-version": "Schema Version", "schema-branch": "Schema Branch",
              "schema-text": "Schema Text", "Schema Write Strategy": "Schema Write Strategy",
              "schema-write-strategy": "Schema Write Strategy", "schema-cache": "Schema Cache",
              "schema-inference-cache": "Schema Inference Cache"}
NIFI_VALUES = {"Schema Access Strategy": {
    "infer-schema": INFER, "schema-name": SCHEMA_NAME, "schema-text-property": SCHEMA_TEXT,
    "inherit-record-schema": INHERIT, "embedded-avro-schema": EMBEDDED_AVRO, "csv-header-derived": HEADER_DERIVED},
    "Schema Write Strategy": {"no-schema": NO_SCHEMA, "schema-name": WRITE_SCHEMA_NAME,
                              "full-schema-attribute": WRITE_AVRO_SCHEMA, "avro-embedded": EMBED_AVRO_SCHEMA}}

#: the attribute names NiFi's strategies read and write
SCHEMA_NAME_ATTRIBUTE = "schema.name"
AVRO_SCHEMA_ATTRIBUTE = "avro.schema"
#: where a writer with a Schema Cache says which cached schema it wrote (NiFi's name)
CACHE_IDENTIFIER_ATTRIBUTE = "schema.cache.identifier"


def access_strategy(strategies: tuple[str, ...], default: str) -> PropertyDescriptor:
    """A service's ``Schema Access Strategy`` property, offering ``strategies``."""
    return PropertyDescriptor("Schema Access Strategy", "How the schema of the records is found",
                              required=True, default=default, allowable_values=strategies)


SCHEMA_REGISTRY = PropertyDescriptor(
    "Schema Registry", "The schema registry service that holds the schema named by 'Schema Name'",
    service=SchemaRegistry)
SCHEMA_NAME_PROPERTY = PropertyDescriptor(
    "Schema Name", "The schema's name in the registry", default="${schema.name}", expression_language=True)
SCHEMA_VERSION = PropertyDescriptor("Schema Version", "The schema's version in the registry (the latest when unset)",
                                    expression_language=True)
SCHEMA_BRANCH = PropertyDescriptor("Schema Branch", "The schema's branch in the registry", expression_language=True)
SCHEMA_TEXT_PROPERTY = PropertyDescriptor(
    "Schema Text", "The schema as Avro schema JSON", default="${avro.schema}", expression_language=True)


def write_strategy(strategies: tuple[str, ...] = (NO_SCHEMA, WRITE_SCHEMA_NAME, WRITE_AVRO_SCHEMA),
                   default: str = NO_SCHEMA) -> PropertyDescriptor:
    """A writer's ``Schema Write Strategy`` property."""
    return PropertyDescriptor("Schema Write Strategy", "What the writer says of the schema it wrote",
                              required=True, default=default, allowable_values=strategies)


SCHEMA_CACHE = PropertyDescriptor(
    "Schema Cache", "A schema cache the writer keeps each schema it writes in, saying its identifier in the "
    "'schema.cache.identifier' attribute (for a reader's Schema Inference Cache downstream)",
    service=RecordSchemaCacheService)
SCHEMA_INFERENCE_CACHE = PropertyDescriptor(
    "Schema Inference Cache", "A schema cache the reader takes a FlowFile's schema from, by its "
    "'schema.cache.identifier' attribute, instead of inferring it (inferring when the cache lacks it)",
    service=RecordSchemaCacheService)

#: the properties every reader with named and text strategies shares, after its access strategy
SCHEMA_PROPERTIES = (SCHEMA_REGISTRY, SCHEMA_NAME_PROPERTY, SCHEMA_VERSION, SCHEMA_BRANCH, SCHEMA_TEXT_PROPERTY)


class SchemaCache:
    """Schemas parsed from text, the most recently used ``size`` kept; safe across threads."""

    def __init__(self, parse: Callable[[str], pa.Schema], size: int = 64):
        self._parse = parse
        self._size = size
        self._schemas: OrderedDict[str, pa.Schema] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> pa.Schema:
        with self._lock:
            schema = self._schemas.get(text)
            if schema is not None:
                self._schemas.move_to_end(text)
                return schema
        schema = self._parse(text)
        with self._lock:
            self._schemas[text] = schema
            while len(self._schemas) > self._size:
                self._schemas.popitem(last=False)
        return schema


def given_schema(context: ServiceContext, attributes: Mapping[str, str], cache: SchemaCache) -> pa.Schema | None:
    """The schema the ``Schema Access Strategy`` names for a FlowFile with ``attributes``: a
    registry's (``Use 'Schema Name' Property``) or a text's (``Use 'Schema Text' Property``);
    None for the strategies that find it in the records (infer, inherit, embedded, header).
    ``SchemaNotFoundError`` says what is missing."""
    strategy = context.property("Schema Access Strategy").raw
    if strategy == SCHEMA_NAME:
        name = context.property("Schema Name").evaluate(attributes=attributes)
        if not name:
            raise SchemaNotFoundError("the schema name is empty (property 'Schema Name'; by default the "
                                      f"FlowFile's '{SCHEMA_NAME_ATTRIBUTE}' attribute, which it lacks)")
        registry = context.service("Schema Registry", SchemaRegistry)
        version = context.property("Schema Version").evaluate(attributes=attributes)
        branch = context.property("Schema Branch").evaluate(attributes=attributes)
        if version and not re.fullmatch(r"\s*[0-9]+\s*", version):
            raise SchemaNotFoundError(f"the schema version {version.strip()[:40]!r} is not a whole number (property "
                                      f"'Schema Version')")
        schema = registry.retrieve_schema(name, int(version) if version else None, branch or None)
        return with_name(schema, name)
    if strategy == SCHEMA_TEXT:
        text = context.property("Schema Text").evaluate(attributes=attributes)
        if not text:
            raise SchemaNotFoundError("the schema text is empty (property 'Schema Text'; by default the "
                                      f"FlowFile's '{AVRO_SCHEMA_ATTRIBUTE}' attribute, which it lacks)")
        return cache.get(text)
    return None


def writer_schema(context: ServiceContext, attributes: Mapping[str, str], read_schema: pa.Schema | None,
                  cache: SchemaCache) -> pa.Schema:
    """The schema a writer writes with: the records' own for ``Inherit Record Schema``, else the
    one its access strategy names (``given_schema``)."""
    given = given_schema(context, attributes, cache)
    if given is not None:
        return given
    if read_schema is None:
        raise SchemaNotFoundError("the writer inherits the records' schema, but no records were read")
    return read_schema


def schema_name(schema: pa.Schema) -> str | None:
    """The name the schema carries (``SCHEMA_NAME_KEY``), if any."""
    value = (schema.metadata or {}).get(SCHEMA_NAME_KEY)
    return value.decode() if value else None


def with_name(schema: pa.Schema, name: str) -> pa.Schema:
    return schema.with_metadata({**(schema.metadata or {}), SCHEMA_NAME_KEY: name.encode()})


def schema_attributes(context: ServiceContext, schema: pa.Schema,
                      to_text: Callable[[pa.Schema], str]) -> dict[str, str]:
    """The attributes a writer's ``Schema Write Strategy`` puts on the FlowFile for ``schema``
    (``to_text``: the schema as Avro schema JSON)."""
    strategy = context.property("Schema Write Strategy").raw
    if strategy == WRITE_SCHEMA_NAME:
        name = schema_name(schema)
        if name is None:
            raise SchemaNotFoundError("the 'Schema Write Strategy' sets 'schema.name', but the schema written has "
                                      "no name (give the writer a schema by name, or choose another strategy)")
        return {SCHEMA_NAME_ATTRIBUTE: name}
    if strategy == WRITE_AVRO_SCHEMA:
        return {AVRO_SCHEMA_ATTRIBUTE: to_text(schema)}
    return {}


def cached_inference(context: ServiceContext, attributes: Mapping[str, str]) -> pa.Schema | None:
    """For a reader that infers: the schema its 'Schema Inference Cache' keeps under the FlowFile's
    ``schema.cache.identifier``; None (infer it) without a cache, an identifier, or that schema."""
    identifier = attributes.get(CACHE_IDENTIFIER_ATTRIBUTE)
    if (not identifier or not context.property(SCHEMA_INFERENCE_CACHE.name).raw
            or context.property("Schema Access Strategy").raw != INFER):
        return None
    cache: RecordSchemaCacheService = context.service(SCHEMA_INFERENCE_CACHE.name, RecordSchemaCacheService)
    return cache.get_schema(identifier)


def cache_attributes(context: ServiceContext, schema: pa.Schema) -> dict[str, str]:
    """For a writer: the ``schema.cache.identifier`` of ``schema`` kept in its 'Schema Cache'
    (nothing without a cache)."""
    if not context.property(SCHEMA_CACHE.name).raw:
        return {}
    cache: RecordSchemaCacheService = context.service(SCHEMA_CACHE.name, RecordSchemaCacheService)
    return {CACHE_IDENTIFIER_ATTRIBUTE: cache.cache_schema(schema)}


class SchemaWriter(RecordSetWriterFactory):
    """What every record writer service does alike with schemas (a base, not an API): its
    ``mime_type`` is the class's ``MIME_TYPE``; ``write_schema`` is the schema its Schema Access
    Strategy names (``writer_schema``), texts parsed by ``self._schemas``; ``result_attributes``
    are the ``WriteResult.attributes`` of a content it writes with a schema. ``on_enabled`` sets ``_context`` and
    ``_schemas``."""

    MIME_TYPE: ClassVar[str]
    _context: ServiceContext
    _schemas: SchemaCache

    def mime_type(self) -> str:
        return self.MIME_TYPE

    def write_schema(self, attributes: Mapping[str, str], read_schema: pa.Schema | None) -> pa.Schema:
        return writer_schema(self._context, attributes, read_schema, self._schemas)

    def result_attributes(self, schema: pa.Schema) -> dict[str, str]:
        """``mime.type``, what the Schema Write Strategy says of ``schema`` (``schema_attributes``,
        the schema as Avro schema JSON) and its identifier in the Schema Cache, when the writer has
        one (``cache_attributes``)."""
        return {"mime.type": self.MIME_TYPE, **schema_attributes(self._context, schema, avro_text),
                **cache_attributes(self._context, schema)}
