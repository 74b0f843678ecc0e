"""VolatileSchemaCache (NiFi's TestVolatileSchemaCache cases) and the shared cache a writer fills
and a reader downstream takes a schema from (flowactors.sdk.records.access)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flowactors.sdk.records import RecordSchemaCacheService
from flowactors.sdk.records.access import (CACHE_IDENTIFIER_ATTRIBUTE, SCHEMA_CACHE, SCHEMA_INFERENCE_CACHE,
                                           cache_attributes, cached_inference)
from flowactors.sdk.services import ServiceContext
from flowactors.services import VolatileSchemaCache
from flowactors.testing import enable_service

STRINGS = pa.schema([("a", pa.string()), ("b", pa.string())])
INTS = pa.schema([("a", pa.int32()), ("b", pa.int32())])


def test_equal_schemas_get_the_same_identifier():
    cache = enable_service(VolatileSchemaCache)
    assert cache.cache_schema(STRINGS) == cache.cache_schema(pa.schema([("a", pa.string()), ("b", pa.string())]))


def test_different_schemas_get_different_identifiers_and_each_comes_back():
    cache = enable_service(VolatileSchemaCache)
    first, second = cache.cache_schema(STRINGS), cache.cache_schema(INTS)
    assert first != second
    assert cache.get_schema(first).equals(STRINGS) and cache.get_schema(second).equals(INTS)
    assert cache.get_schema("never-cached") is None


def test_a_colliding_identifier_gets_a_suffix_and_both_schemas_stay(monkeypatch):
    import flowactors.services.records.schema_cache as module
    cache = enable_service(VolatileSchemaCache)
    monkeypatch.setattr(module, "avro_text", lambda schema: "the same text")   # two schemas, one hash
    first, second = cache.cache_schema(STRINGS), cache.cache_schema(INTS)
    assert second.startswith(first + "-")
    assert cache.get_schema(first).equals(STRINGS) and cache.get_schema(second).equals(INTS)


def test_the_least_recently_used_schema_is_evicted_first():
    cache = enable_service(VolatileSchemaCache, {"Maximum Cache Size": "2"})
    first = cache.cache_schema(STRINGS)
    second = cache.cache_schema(INTS)
    assert cache.get_schema(first) is not None    # first used last now
    third = cache.cache_schema(pa.schema([("c", pa.float64())]))
    assert cache.get_schema(second) is None and cache.get_schema(first) is not None
    assert cache.get_schema(third) is not None


def test_a_maximum_size_that_is_not_a_positive_number_is_refused():
    with pytest.raises(ValueError, match="property 'Maximum Cache Size'"):
        enable_service(VolatileSchemaCache, {"Maximum Cache Size": "0"})


def test_a_writer_names_the_schema_it_cached_and_a_reader_takes_it_back():
    cache = enable_service(VolatileSchemaCache)
    descriptors = {d.name: d for d in (SCHEMA_CACHE, SCHEMA_INFERENCE_CACHE)}
    writer = ServiceContext("writer", "JsonRecordSetWriter", descriptors, {"Schema Cache": "cache"}, {"cache": cache})
    reader = ServiceContext("reader", "JsonTreeReader", descriptors,
                            {"Schema Inference Cache": "cache", "Schema Access Strategy": "Infer Schema"}, {"cache": cache})
    attributes = cache_attributes(writer, INTS)
    assert list(attributes) == [CACHE_IDENTIFIER_ATTRIBUTE]
    assert cached_inference(reader, attributes).equals(INTS)
    assert cached_inference(reader, {}) is None                                  # no identifier: infer
    assert cached_inference(reader, {CACHE_IDENTIFIER_ATTRIBUTE: "evicted"}) is None
    unset = ServiceContext("reader", "JsonTreeReader", descriptors, {}, {})
    assert cached_inference(unset, attributes) is None and cache_attributes(unset, INTS) == {}


def test_the_cache_is_one_instance_for_the_flow():
    assert VolatileSchemaCache.shared_state and issubclass(VolatileSchemaCache, RecordSchemaCacheService)


def test_a_reader_downstream_takes_the_schema_a_writer_cached_instead_of_inferring_it(tmp_path):
    """JSON written with a Schema Cache is read by a JsonTreeReader with it as its Schema Inference
    Cache: a field written as an Avro float keeps that type, where inferring the content would find a
    double (as NiFi infers a JSON decimal number)."""
    from flowactors import Flow, run_flow
    from flowactors.processors import ConvertRecord, GenerateFlowFile, PutFile
    from flowactors.services import AvroRecordSetWriter, JsonRecordSetWriter, JsonTreeReader
    schema = '{"type": "record", "name": "r", "fields": [{"name": "amount", "type": "float"}]}'
    flow = Flow("cached")
    flow.add_service(VolatileSchemaCache, "cache")
    flow.add_service(JsonTreeReader, "given", properties={"Schema Access Strategy": "Use 'Schema Text' Property",
                                                           "Schema Text": schema})
    flow.add_service(JsonRecordSetWriter, "json-out", properties={"Schema Cache": "cache"})
    flow.add_service(JsonTreeReader, "inferring", properties={"Schema Inference Cache": "cache"})
    flow.add_service(AvroRecordSetWriter, "avro-out", properties={"Schema Write Strategy": "Set 'avro.schema' Attribute"})
    source = flow.add(GenerateFlowFile, "source", properties={"Custom Text": '[{"amount": 1.5}]'},
                      run_schedule="10 min")
    first = flow.add(ConvertRecord, "first", properties={"Record Reader": "given", "Record Writer": "json-out"},
                     auto_terminate=["failure"])
    second = flow.add(ConvertRecord, "second", properties={"Record Reader": "inferring", "Record Writer": "avro-out"},
                      auto_terminate=["failure"])
    store = flow.add(PutFile, "store", properties={"Directory": str(tmp_path / "out")}, auto_terminate=["success", "failure"])
    flow.connect(source, first)
    flow.connect(first, second)
    flow.connect(second, store)
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
                     until=lambda status: any(p["name"] == "store" and p["flowfiles_in"] for p in status["processors"]))
    assert not final.get("timed_out") and sum(p["errors"] for p in final["processors"]) == 0
    from repositories.provenance import WriteAheadProvenanceRepository
    with WriteAheadProvenanceRepository(tmp_path / "repository" / "provenance") as provenance:
        stored = [e for e in provenance.events(0, 1000) if e.component_id.endswith("/store")]
    written = stored[-1].updated_attributes or stored[-1].attributes
    assert '"float"' in written["avro.schema"] and '"double"' not in written["avro.schema"]
    assert CACHE_IDENTIFIER_ATTRIBUTE in written
