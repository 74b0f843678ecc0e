"""VolatileSchemaCache: record schemas kept in memory by an identifier, the least recently used
evicted first (NiFi's ``RecordSchemaCacheService`` of the same name).

A writer with a 'Schema Cache' keeps each schema it writes here and names it in the FlowFile's
``schema.cache.identifier``; a reader downstream with this cache as its 'Schema Inference Cache'
takes the schema by that identifier instead of reading the content once more to infer it
(``flowactors.sdk.records.access``). The cache holds state every executor must share, so the
engine runs one instance for the flow (``shared_state``). Nothing of it is kept on disk: a restart
empties it, and a reader that misses infers, as NiFi's does.

The identifier is the SHA-256 of the schema's Avro text (the schema's own text when it came from
Avro), base64 without padding, so the same schema always gets the same identifier; a different
schema that hashed alike (never seen) gets the identifier with a random suffix.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import uuid
from collections import OrderedDict

import pyarrow as pa

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.records.api import RecordSchemaCacheService
from flowactors.sdk.records.schema import avro_text
from flowactors.sdk.services import ControllerService, ServiceContext

__all__ = ["VolatileSchemaCache"]

MAX_SIZE = PropertyDescriptor("Maximum Cache Size", "The most schemas kept", required=True, default="100",
                              validator=validators.POSITIVE_INTEGER)


class VolatileSchemaCache(ControllerService, RecordSchemaCacheService):
    """Schemas in memory by identifier, least recently used evicted (see the module docstring)."""

    description = "Keeps record schemas in memory by identifier for readers that would infer them"
    properties = (MAX_SIZE,)
    shared_state = True
    NIFI_PROPERTY_NAMES = {"max-cache-size": MAX_SIZE.name}
    NIFI_VALUES: dict[str, dict[str, str]] = {}

    def on_enabled(self, context: ServiceContext) -> None:
        self._size = int(context.property(MAX_SIZE.name).raw or MAX_SIZE.default or 100)
        self._schemas: OrderedDict[str, pa.Schema] = OrderedDict()
        self._lock = threading.Lock()

    def cache_schema(self, schema: pa.Schema) -> str:
        identifier = base64.b64encode(hashlib.sha256(avro_text(schema).encode()).digest()).decode().rstrip("=")
        with self._lock:
            kept = self._schemas.get(identifier)
            if kept is not None and not kept.equals(schema, check_metadata=False):
                identifier = f"{identifier}-{uuid.uuid4()}"
            self._schemas[identifier] = schema
            self._schemas.move_to_end(identifier)
            while len(self._schemas) > self._size:
                self._schemas.popitem(last=False)
        return identifier

    def get_schema(self, identifier: str) -> pa.Schema | None:
        with self._lock:
            schema = self._schemas.get(identifier)
            if schema is not None:
                self._schemas.move_to_end(identifier)
            return schema
