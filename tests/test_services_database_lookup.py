"""DatabaseRecordLookupService and SimpleDatabaseLookupService against the session's real
PostgreSQL (tests/real_services.py) and real SQLite files: rows by key, LookupRecord enriching
records with them, the cache (size, expiration, clear on enable), a lookup the database refuses, a
database that is down, and NiFi 1's property names through the NiFi import."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import sqlalchemy as sa

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import LookupRecord
from flowactors.services import (DatabaseRecordLookupService, DBCPConnectionPool, JsonRecordSetWriter, JsonTreeReader,
                                 SimpleDatabaseLookupService)
from flowactors.sdk.services import ServiceContext
from flowactors.services.lookup import LookupFailureError
from flowactors.testing import ProcessorRunner, enable_service
from nifi_flows import group, snapshot
from real_services import free_port

POOL = "Database Connection Pooling Service"


@pytest.fixture(params=["sqlite", "postgresql"])
def pool(request, tmp_path):
    """The connection pool's properties, over a database holding a ``sports`` table."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'lookup.db'}"
        properties = {"Database Connection URL": f"jdbc:sqlite:{tmp_path / 'lookup.db'}"}
        engine = sa.create_engine(url)
    else:
        server = request.getfixturevalue("postgresql")
        schema = f"l_{uuid.uuid4().hex[:10]}"
        engine = sa.create_engine(server.url, connect_args={"options": f"-csearch_path={schema}"})
        with engine.begin() as connection:
            connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
        properties = {"Database Connection URL": f"{server.jdbc_url}?currentSchema={schema}",
                      "Database User": server.user, "Password": server.password}
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE sports (name VARCHAR(40), sport VARCHAR(40), rank INTEGER)")
        connection.exec_driver_sql("INSERT INTO sports VALUES ('John Doe', 'Soccer', 1), ('Jane Doe', 'Basketball', 2),"
                                   " ('Jane Doe', 'Golf', 3)")
    yield properties, engine
    engine.dispose()


def service(kind, pool, **properties):
    values = {POOL: "db", "Table Name": "sports", "Lookup Key Column": "name", **properties}
    return enable_service(kind, values, services={"db": (DBCPConnectionPool, pool[0])})


def test_a_row_by_key_as_a_record_and_a_value_as_text(pool):
    records = service(DatabaseRecordLookupService, pool)
    assert records.lookup({"key": "John Doe"}) == {"name": "John Doe", "sport": "Soccer", "rank": 1}
    assert records.lookup({"key": "Jane Doe"})["sport"] in ("Basketball", "Golf")   # the first row found
    assert records.lookup({"key": "Nobody"}) is None
    assert records.lookup({"key": "  "}) is None and records.lookup({}) is None
    some = service(DatabaseRecordLookupService, pool, **{"Lookup Value Columns": "sport, rank, sport"})
    assert some.lookup({"key": "John Doe"}) == {"sport": "Soccer", "rank": 1}
    simple = service(SimpleDatabaseLookupService, pool, **{"Lookup Value Column": "rank"})
    assert simple.lookup({"key": "John Doe"}) == "1" and simple.lookup({"key": "Nobody"}) is None


def test_the_cache_keeps_found_rows_until_they_expire(pool):
    _, engine = pool
    cached = service(DatabaseRecordLookupService, pool, **{"Cache Size": 1, "Cache Expiration": "200 millis"})
    uncached = service(DatabaseRecordLookupService, pool)
    assert cached.lookup({"key": "John Doe"})["sport"] == "Soccer"
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE sports SET sport = 'Chess' WHERE name = 'John Doe'")
    assert cached.lookup({"key": "John Doe"})["sport"] == "Soccer"       # from the cache
    assert uncached.lookup({"key": "John Doe"})["sport"] == "Chess"      # Cache Size 0: always asked
    time.sleep(0.25)
    assert cached.lookup({"key": "John Doe"})["sport"] == "Chess"        # expired, asked again


def test_clear_cache_on_enabled_false_keeps_what_was_cached(pool):
    _, engine = pool
    connections = enable_service(DBCPConnectionPool, pool[0])
    values = {POOL: "db", "Table Name": "sports", "Lookup Key Column": "name", "Lookup Value Column": "sport",
              "Cache Size": "10", "Clear Cache on Enabled": "false"}
    lookup = SimpleDatabaseLookupService()

    def enable(**changed) -> None:   # as an engine enables it again, on the same instance
        lookup.on_disabled(None)
        lookup.on_enabled(ServiceContext("lookup", "SimpleDatabaseLookupService", lookup.descriptor_map(),
                                         {**values, **changed}, services={"db": connections}))

    enable()
    assert lookup.lookup({"key": "John Doe"}) == "Soccer"
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE sports SET sport = 'Chess' WHERE name = 'John Doe'")
    enable()
    assert lookup.lookup({"key": "John Doe"}) == "Soccer"   # kept
    enable(**{"Clear Cache on Enabled": "true"})
    assert lookup.lookup({"key": "John Doe"}) == "Chess"
    connections.on_disabled(None)


def test_a_lookup_the_database_refuses_is_one_line(pool):
    broken = service(DatabaseRecordLookupService, pool, **{"Table Name": "no_such_table"})
    with pytest.raises(LookupFailureError) as caught:
        broken.lookup({"key": "John Doe"})
    message = str(caught.value)
    assert message.startswith("the lookup of 'John Doe' by 'SELECT * FROM no_such_table WHERE name = :key' failed:")
    assert "no_such_table" in message and "\n" not in message


def test_a_database_that_is_down_fails_the_lookup_in_one_line_and_lookup_record_loses_nothing():
    down = {"Database Connection URL": f"jdbc:postgresql://127.0.0.1:{free_port()}/x"}
    lookup = service(DatabaseRecordLookupService, (down,))
    with pytest.raises(LookupFailureError) as caught:
        lookup.lookup({"key": "John Doe"})
    message = str(caught.value)
    assert message.startswith("the lookup of 'John Doe' by 'SELECT * FROM sports WHERE name = :key' failed: cannot "
                              "connect to postgresql+psycopg://") and "\n" not in message
    runner = ProcessorRunner(LookupRecord, {
        "Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "lookup", "key": "/name",
        "Result RecordPath": "/found"},
        services={"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {}), "db": (DBCPConnectionPool, down),
                  "lookup": (DatabaseRecordLookupService, {POOL: "db", "Table Name": "sports",
                                                          "Lookup Key Column": "name"})})
    content = json.dumps([{"name": "John Doe"}]).encode()
    sent = runner.enqueue(content)
    runner.run()
    [failed] = runner.output("failure")
    assert failed.uuid == sent.uuid and runner.read(failed) == content
    assert "cannot connect to postgresql+psycopg://" in failed.attributes["flowactors.failure.reason"]
    assert runner.output("success") == []


def test_lookup_record_enriches_records_with_rows(pool, engine):
    runner = ProcessorRunner(LookupRecord, {
        "Record Reader": "reader", "Record Writer": "writer", "Lookup Service": "lookup",
        "Routing Strategy": "Route to 'matched' or 'unmatched'", "key": "/name", "Result RecordPath": "/found"},
        services={"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {}),
                  "db": (DBCPConnectionPool, pool[0]),
                  "lookup": (DatabaseRecordLookupService, {POOL: "db", "Table Name": "sports",
                                                          "Lookup Key Column": "name",
                                                          "Lookup Value Columns": "sport, rank"})})
    runner.enqueue(json.dumps([{"name": "John Doe", "age": 48}, {"name": "Nobody", "age": 1}]).encode())
    runner.run()
    [matched] = [json.loads(runner.read(f)) for f in runner.output("matched")]
    [unmatched] = [json.loads(runner.read(f)) for f in runner.output("unmatched")]
    assert matched == [{"name": "John Doe", "age": 48, "found": {"sport": "Soccer", "rank": 1}}]
    assert unmatched == [{"name": "Nobody", "age": 1, "found": None}]   # the schema written has the field


def test_nifi_1_names_of_the_lookup_services_load():
    root = group("root", "Enrich", None, None)
    root["controllerServices"] = [
        {"identifier": "db", "name": "DB", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
         "properties": {"Database Connection URL": "jdbc:sqlite:/tmp/x.db"}},
        {"identifier": "records", "name": "Rows", "type": "org.apache.nifi.lookup.db.DatabaseRecordLookupService",
         "properties": {"dbrecord-lookup-dbcp-service": "db", "dbrecord-lookup-table-name": "sports",
                        "dbrecord-lookup-key-column": "name", "dbrecord-lookup-value-columns": "sport",
                        "dbrecord-lookup-cache-size": "5", "dbrecord-lookup-clear-cache-on-enabled": "false",
                        "Cache Expiration": "5 mins", "dbf-default-precision": "10", "dbf-default-scale": "0"}},
        {"identifier": "values", "name": "Values", "type": "org.apache.nifi.lookup.db.SimpleDatabaseLookupService",
         "properties": {"dbrecord-lookup-dbcp-service": "db", "dbrecord-lookup-table-name": "sports",
                        "dbrecord-lookup-key-column": "name", "lookup-value-column": "rank"}}]
    flow = flow_from_nifi(snapshot(root, {}))
    rows, values = flow.services["Rows"], flow.services["Values"]
    assert rows.type is DatabaseRecordLookupService and values.type is SimpleDatabaseLookupService
    assert rows.properties == {POOL: "DB", "Table Name": "sports", "Lookup Key Column": "name",
                               "Lookup Value Columns": "sport", "Cache Size": "5", "Clear Cache on Enabled": "false",
                               "Cache Expiration": "5 mins"}
    assert values.properties["Lookup Value Column"] == "rank"
