"""What the record services' tests share: reading a content through a reader service, a stream
that counts what a reader read, and NiFi's Avro schema of every logical type."""

from __future__ import annotations

import io

import pyarrow as pa

from flowactors.sdk.records import RecordReader
from flowactors.testing import enable_service

#: NiFi's test schema with a field of each Avro logical type
LOGICAL = {"namespace": "nifi", "name": "data_types", "type": "record", "fields": [
    {"name": "timeMillis", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "timeMicros", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "timestampMillis", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "timestampMicros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "decimal", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}}]}


def service_reader(service_type: type, data: bytes, properties: dict | None = None,
                   attributes: dict | None = None) -> RecordReader:
    """A reader of ``data`` made by an enabled ``service_type`` with ``properties``, given ``attributes``."""
    service = enable_service(service_type, properties or {})
    return service.create_reader(attributes or {}, io.BytesIO(data), len(data))


def read_records(service_type: type, data: bytes, properties: dict | None = None,
                 attributes: dict | None = None) -> tuple[pa.Schema, list]:
    """The schema and the records (as dicts) ``service_reader`` reads from ``data``."""
    records = service_reader(service_type, data, properties, attributes)
    return records.schema(), records.read_all().to_pylist()


class CountingStream(io.BytesIO):
    """A content stream that counts the bytes read from it (``read_bytes``)."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size=-1):
        data = super().read(size)
        self.read_bytes += len(data)
        return data

    def readinto(self, buffer) -> int:   # how pyarrow's Parquet reader reads
        count = super().readinto(buffer)
        self.read_bytes += count
        return count
