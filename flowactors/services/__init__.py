"""The standard controller services, importable by name (``flowactors.services.JsonTreeReader``).

A flow definition may name them without a module (``"type": "JsonTreeReader"``). Each family
lives in its own module, imported when a service of it is first named (Avro's and XML's
libraries load only for flows that use them); docs/services.md describes every service.
"""

from __future__ import annotations

import importlib
from typing import Any

#: each standard service -> the module that defines it
STANDARD_SERVICES = {
    "JsonTreeReader": "flowactors.services.records.json", "JsonRecordSetWriter": "flowactors.services.records.json",
    "CSVReader": "flowactors.services.records.csv", "CSVRecordSetWriter": "flowactors.services.records.csv",
    "AvroReader": "flowactors.services.records.avro", "AvroRecordSetWriter": "flowactors.services.records.avro",
    "ParquetReader": "flowactors.services.records.parquet",
    "ParquetRecordSetWriter": "flowactors.services.records.parquet",
    "XMLReader": "flowactors.services.records.xml", "XMLRecordSetWriter": "flowactors.services.records.xml",
    "FreeFormTextRecordSetWriter": "flowactors.services.records.freeform",
    "AvroSchemaRegistry": "flowactors.services.records.registry",
    "VolatileSchemaCache": "flowactors.services.records.schema_cache",
    "SimpleKeyValueLookupService": "flowactors.services.lookup",
    "SimpleCsvFileLookupService": "flowactors.services.lookup",
    "CSVRecordLookupService": "flowactors.services.lookup",
    "ScriptedLookupService": "flowactors.services.scripted_lookup",
    "DistributedMapCacheServer": "flowactors.services.map_cache",
    "DistributedMapCacheClientService": "flowactors.services.map_cache",
    "DBCPConnectionPool": "flowactors.services.database",
    "DatabaseRecordLookupService": "flowactors.services.database_lookup",
    "SimpleDatabaseLookupService": "flowactors.services.database_lookup",
    "StandardHttpContextMap": "flowactors.services.http_context_map",
    "StandardSSLContextService": "flowactors.services.ssl_context",
    "StandardRestrictedSSLContextService": "flowactors.services.ssl_context",
    "PEMEncodedSSLContextProvider": "flowactors.services.ssl_context",
}

__all__ = sorted(STANDARD_SERVICES)


def __getattr__(name: str) -> Any:
    module = STANDARD_SERVICES.get(name)
    if module is None:
        raise AttributeError(f"module 'flowactors.services' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
