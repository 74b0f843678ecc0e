"""NiFi's controller services that flowactors has, and how their configuration maps.

A NiFi flow definition names a service by its Java class and lists its properties by NiFi's
internal names (``schema-access-strategy``), values too (``infer-schema``). Each flowactors
service names its properties and values as NiFi *shows* them ("Schema Access Strategy",
"Infer Schema"), and says how NiFi's internal spellings map onto them in class attributes:
``NIFI_PROPERTY_NAMES`` (internal name -> name), ``NIFI_VALUES`` (name -> {internal value ->
value}) and ``NIFI_IGNORED`` (NiFi properties that tune NiFi's own libraries, accepted whatever
their value); the schema properties every record service shares map through
``flowactors.sdk.records.access.NIFI_NAMES`` / ``NIFI_VALUES``. ``fixed`` lists NiFi properties
flowactors has no such property for, as ``nifi_standard_processors`` does for processors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from flowactors.driver.nifi_standard_processors import ANY
from flowactors.sdk.records import access
from flowactors.sdk.services import ControllerService, resolve_service_type



@dataclass(frozen=True)
class StandardService:
    #: the flowactors service's name in ``flowactors.services``
    name: str
    fixed: Mapping[str, object] = field(default_factory=dict)

    def service(self) -> type[ControllerService]:
        return resolve_service_type(self.name)

    def ignored(self) -> dict[str, object]:
        """The NiFi properties accepted whatever their value: this table's ``fixed`` and the
        service's ``NIFI_IGNORED`` (tuning of NiFi's Java libraries that changes nothing here)."""
        return {**{name: ANY for name in getattr(self.service(), "NIFI_IGNORED", ())}, **self.fixed}

    def renamed(self) -> dict[str, str]:
        return {**access.NIFI_NAMES, **getattr(self.service(), "NIFI_PROPERTY_NAMES", {})}

    def values(self) -> dict[str, dict[str, str]]:
        own = getattr(self.service(), "NIFI_VALUES", {})
        return {name: {**access.NIFI_VALUES.get(name, {}), **own.get(name, {})}
                for name in {*access.NIFI_VALUES, *own}}


#: NiFi's schema caching and schema reference readers: flowactors caches parsed schemas itself
_SCHEMA_TUNING = {"schema-reference-reader": None, "Schema Reference Reader": None,
                  "schema-protocol-version": ANY, "cache-size": ANY, "Cache Size": ANY}

#: NiFi's JSON parser options: flowactors parses standard JSON (no comments: NiFi's Allow Comments
#: false, which NiFi 2 migrates to Parsing Strategy STANDARD) with no limit of its own on a string
#: (NiFi's Max String Length, accepted at its default)
_JSON_READING = {**_SCHEMA_TUNING, "Allow Comments": "false", "Parsing Strategy": "STANDARD",
                 "Max String Length": "20 MB"}

STANDARD_SERVICES: dict[str, StandardService] = {
    "org.apache.nifi.json.JsonTreeReader": StandardService("JsonTreeReader", _JSON_READING),
    "org.apache.nifi.json.JsonRecordSetWriter": StandardService("JsonRecordSetWriter", _SCHEMA_TUNING),
    "org.apache.nifi.csv.CSVReader": StandardService("CSVReader", _SCHEMA_TUNING),
    "org.apache.nifi.csv.CSVRecordSetWriter": StandardService("CSVRecordSetWriter", _SCHEMA_TUNING),
    "org.apache.nifi.avro.AvroReader": StandardService("AvroReader", _SCHEMA_TUNING),
    "org.apache.nifi.avro.AvroRecordSetWriter": StandardService("AvroRecordSetWriter", _SCHEMA_TUNING),
    "org.apache.nifi.parquet.ParquetReader": StandardService("ParquetReader", _SCHEMA_TUNING),
    "org.apache.nifi.parquet.ParquetRecordSetWriter": StandardService("ParquetRecordSetWriter", _SCHEMA_TUNING),
    "org.apache.nifi.xml.XMLReader": StandardService("XMLReader", _SCHEMA_TUNING),
    "org.apache.nifi.xml.XMLRecordSetWriter": StandardService("XMLRecordSetWriter", _SCHEMA_TUNING),
    "org.apache.nifi.text.FreeFormTextRecordSetWriter": StandardService("FreeFormTextRecordSetWriter"),
    "org.apache.nifi.schemaregistry.services.AvroSchemaRegistry": StandardService("AvroSchemaRegistry"),
    "org.apache.nifi.schema.inference.VolatileSchemaCache": StandardService("VolatileSchemaCache"),
    "org.apache.nifi.lookup.SimpleKeyValueLookupService": StandardService("SimpleKeyValueLookupService"),
    "org.apache.nifi.lookup.SimpleCsvFileLookupService": StandardService("SimpleCsvFileLookupService"),
    "org.apache.nifi.lookup.CSVRecordLookupService": StandardService("CSVRecordLookupService"),
    "org.apache.nifi.lookup.script.ScriptedLookupService": StandardService("ScriptedLookupService"),
    # NiFi 2 renamed the map cache server and client: both names load
    "org.apache.nifi.distributed.cache.server.map.DistributedMapCacheServer":
        StandardService("DistributedMapCacheServer"),
    "org.apache.nifi.distributed.cache.server.map.MapCacheServer": StandardService("DistributedMapCacheServer"),
    "org.apache.nifi.distributed.cache.client.DistributedMapCacheClientService":
        StandardService("DistributedMapCacheClientService"),
    "org.apache.nifi.distributed.cache.client.MapCacheClientService":
        StandardService("DistributedMapCacheClientService"),
    "org.apache.nifi.lookup.db.DatabaseRecordLookupService": StandardService("DatabaseRecordLookupService"),
    "org.apache.nifi.lookup.db.SimpleDatabaseLookupService": StandardService("SimpleDatabaseLookupService"),
    "org.apache.nifi.http.StandardHttpContextMap": StandardService("StandardHttpContextMap"),
    # Kerberos is not supported: accepted only unset
    "org.apache.nifi.dbcp.DBCPConnectionPool": StandardService("DBCPConnectionPool", {
        "Kerberos User Service": None, "kerberos-user-service": None, "kerberos-principal": None,
        "kerberos-password": None, "kerberos-credentials-service": None}),
    "org.apache.nifi.ssl.StandardSSLContextService": StandardService("StandardSSLContextService"),
    "org.apache.nifi.ssl.StandardRestrictedSSLContextService": StandardService("StandardRestrictedSSLContextService"),
    "org.apache.nifi.ssl.PEMEncodedSSLContextProvider": StandardService("PEMEncodedSSLContextProvider"),
}
