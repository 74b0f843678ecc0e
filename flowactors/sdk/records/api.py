"""The record APIs: what a record reader, a record writer and a schema registry provide, as
NiFi's ``RecordReaderFactory``, ``RecordSetWriterFactory`` and ``SchemaRegistry`` do, with records
as Arrow record batches instead of one Java object a record.

A processor that works on records asks its ``Record Reader`` property for a reader of one
FlowFile's content (``create_reader``) and iterates its batches; it asks its ``Record Writer``
for the schema it will write (``write_schema``) and a writer onto an output stream
(``create_writer``), writes batches, and finishes it, which gives the record count and the
attributes to put on the FlowFile (``mime.type``, a schema's name or text as the writer's schema
write strategy says). Readers stream: a batch holds at most about ``BATCH_RECORDS`` records or
``BATCH_BYTES`` of input, so a FlowFile larger than memory is read in bounded memory.

Every schema is an Arrow schema whose fields carry NiFi's field type where Arrow has no exact
one (``flowactors.sdk.records.schema``: UUID, enum, choice, char, big integers); its metadata may
name the schema (``SCHEMA_NAME_KEY``) as NiFi's ``RecordSchema.getSchemaName`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO, Iterator, Mapping, Sequence

import pyarrow as pa

from flowactors.sdk.services import ServiceAPI

#: the most records, and about the most bytes of input, a reader puts in one batch
BATCH_RECORDS = 64 * 1024
BATCH_BYTES = 4 << 20
#: schema metadata key holding the schema's name (a registry's name, an Avro record's full name)
SCHEMA_NAME_KEY = b"nifi.schema.name"


class RecordError(ValueError):
    """Records could not be read or written; the message says why, and where when known."""


class MalformedRecordError(RecordError):
    """The content is not valid in the reader's format. ``record`` is the (0-based) index of the
    first record that could not be read, when known, ``offset`` the byte offset, when known."""

    def __init__(self, message: str, *, record: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.record = record
        self.offset = offset

    def attributes(self) -> dict[str, str]:
        """What a processor puts on the FlowFile it sends to failure (``record.error.*``)."""
        found = {"record.error.message": str(self)}
        if self.record is not None:
            found["record.error.index"] = str(self.record)
        if self.offset is not None:
            found["record.error.offset"] = str(self.offset)
        return found


class SchemaNotFoundError(RecordError):
    """The schema a reader or writer was told to use cannot be found (a name the registry lacks,
    an attribute the FlowFile lacks)."""


class SchemaMismatchError(RecordError):
    """A record does not fit the schema it must have (a value of the wrong type, a missing
    required field)."""


class RecordReader:
    """The records of one content, batch by batch (a reader is used once, by one thread)."""

    def schema(self) -> pa.Schema:
        """The schema of the records: known before the first batch when the schema is given
        (text, registry, embedded), else inferred by the reader before its first batch (the JSON,
        CSV and XML readers read the whole content once to infer it, as NiFi does)."""
        raise NotImplementedError

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Each batch of records in order, every one with ``schema()``'s schema. Raises
        ``MalformedRecordError`` at the first record it cannot read (batches already given stand)."""
        raise NotImplementedError

    def projected_batches(self, names: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """The batches of ``batches()`` with only the fields ``names`` (fields of ``schema()``, each
        once), in that order: what a consumer that uses some fields reads (QueryRecord gives the
        columns its query reads). This default selects them from each whole batch; a reader that
        can skip decoding the others overrides it (Parquet reads only their column chunks, CSV
        converts only their values)."""
        for batch in self.batches():
            yield batch.select(list(names))

    def read_all(self) -> pa.Table:
        """Every record as one table (for small contents: the whole content in memory)."""
        return pa.Table.from_batches(list(self.batches()), schema=self.schema())


class RecordReaderFactory(ServiceAPI):
    """A service that reads records (NiFi's ``RecordReaderFactory``): JsonTreeReader, CSVReader,
    AvroReader, ParquetReader, XMLReader."""

    api = True

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        """A reader of ``stream``, a FlowFile's content of ``size`` bytes (seekable: the session's
        content stream), whose schema comes as the service's schema access strategy says (the
        FlowFile's ``attributes`` may name it). Raises ``SchemaNotFoundError`` when the schema
        cannot be found, ``MalformedRecordError`` when the content's start does not parse."""
        raise NotImplementedError


@dataclass
class WriteResult:
    """What a finished writer wrote: ``record_count`` records, and the ``attributes`` to put on the
    FlowFile (``mime.type``; a schema name or text, as the schema write strategy says)."""

    record_count: int
    attributes: dict[str, str] = field(default_factory=dict)


class RecordSetWriter:
    """Writes one content's records (a writer is used once, by one thread)."""

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Write these records (their schema is the writer's, or one ``conform`` can cast to it)."""
        raise NotImplementedError

    def finish(self) -> WriteResult:
        """Complete the content (an array's ``]``, a file's footer); the stream stays open."""
        raise NotImplementedError


class RecordSetWriterFactory(ServiceAPI):
    """A service that writes records (NiFi's ``RecordSetWriterFactory``): JsonRecordSetWriter,
    CSVRecordSetWriter, AvroRecordSetWriter, ParquetRecordSetWriter, XMLRecordSetWriter,
    FreeFormTextRecordSetWriter."""

    api = True

    def mime_type(self) -> str:
        raise NotImplementedError

    def write_schema(self, attributes: Mapping[str, str], read_schema: pa.Schema | None) -> pa.Schema:
        """The schema records are written with, as the writer's schema access strategy says:
        ``read_schema`` (the records' own: NiFi's "Inherit Record Schema"), a schema text, a name
        in a registry. Raises ``SchemaNotFoundError`` when it cannot be found."""
        raise NotImplementedError

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        """A writer of records with ``schema`` onto ``out`` (written from its current position)."""
        raise NotImplementedError


class SchemaRegistry(ServiceAPI):
    """Schemas by name (NiFi's ``SchemaRegistry``): AvroSchemaRegistry."""

    api = True

    def schema_names(self) -> list[str]:
        raise NotImplementedError

    def retrieve_schema(self, name: str, version: int | None = None, branch: str | None = None) -> pa.Schema:
        """The schema registered as ``name``; ``SchemaNotFoundError`` naming what it has when none is."""
        raise NotImplementedError


class RecordLookupService(ServiceAPI):
    """A lookup whose values are records (NiFi's ``LookupService<Record>``): LookupRecord can put
    their fields into the record looked up for. ``lookup`` returns a dict of field values or None."""

    api = True


class RecordSchemaCacheService(ServiceAPI):
    """Schemas kept by an identifier (NiFi's ``RecordSchemaCacheService``): a writer with a
    'Schema Cache' caches the schema it wrote and puts its identifier in the FlowFile's
    ``schema.cache.identifier`` attribute; a reader that infers its schema, given a 'Schema
    Inference Cache', takes the schema of that identifier instead of inferring it again.
    VolatileSchemaCache."""

    api = True

    def cache_schema(self, schema: pa.Schema) -> str:
        """Keep ``schema``; its identifier (the same schema always gets the same one)."""
        raise NotImplementedError

    def get_schema(self, identifier: str) -> pa.Schema | None:
        """The schema kept under ``identifier``, or None (never kept, or evicted since)."""
        raise NotImplementedError
