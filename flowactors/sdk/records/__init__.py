"""Records: NiFi's record model on Arrow (schemas, the reader, writer and registry APIs, schema
access strategies). Readers and writers themselves are controller services
(``flowactors.services``); the processors that use them are in ``flowactors.processors``."""

from flowactors.sdk.records.api import (BATCH_BYTES, BATCH_RECORDS, SCHEMA_NAME_KEY, MalformedRecordError,
                                        RecordError, RecordLookupService, RecordReader, RecordReaderFactory,
                                        RecordSchemaCacheService, RecordSetWriter, RecordSetWriterFactory, SchemaMismatchError,
                                        SchemaNotFoundError, SchemaRegistry, WriteResult)

__all__ = ["BATCH_BYTES", "BATCH_RECORDS", "SCHEMA_NAME_KEY", "MalformedRecordError", "RecordError",
           "RecordLookupService", "RecordReader", "RecordReaderFactory", "RecordSchemaCacheService", "RecordSetWriter", "RecordSetWriterFactory",
           "SchemaMismatchError", "SchemaNotFoundError", "SchemaRegistry", "WriteResult"]
