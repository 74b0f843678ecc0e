"""PutDatabaseRecord against the session's real PostgreSQL (tests/real_services.py) and SQLite
files: each statement type, the type from the statement.type attribute and from a RecordPath,
batches, what goes to failure and to retry, Rollback On Failure, a database that is down, a CSV
reader's text values, and a NiFi 1 flow's property names."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors.sql import PutDatabaseRecord
from flowactors.services import CSVReader, DBCPConnectionPool, JsonTreeReader
from flowactors.testing import ProcessorRunner
from nifi_flows import group, processor, snapshot, uses
from real_services import free_port
from repositories.provenance.event import ProvenanceEventType as T
from sql_helpers import engine_fixture, rows, table_fixture


engine = engine_fixture("postgresql")
table = table_fixture()


def put(url: str, reader=(JsonTreeReader, {}), **properties) -> ProcessorRunner:
    return ProcessorRunner(PutDatabaseRecord, {"Record Reader": "reader", "Database Connection Pooling Service": "db",
                                               **properties},
                           services={"reader": reader, "db": (DBCPConnectionPool, {"Database Connection URL": url})})


def records(*items) -> bytes:
    return json.dumps(list(items)).encode()


SQL_ENDS = ("success", "failure", "retry")
PEOPLE = "id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, code INTEGER, born DATE"


# ------------------------------------------------------------------------------ statement types
def test_insert_writes_every_record_with_typed_values_and_reports_send(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(8,2), born DATE, seen TIMESTAMP, "
                 "tags TEXT, raw BYTEA, extra_info JSONB")
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name})
    runner.enqueue(records({"id": 1, "name": "Ada", "price": 12.5, "born": "1815-12-10", "seen": "2024-01-02T03:04:05",
                            "tags": ["a", "b"], "raw": "hi", "extra_info": {"k": [1, 2]}},
                           {"id": 2, "name": "Bob", "price": None, "born": None, "seen": None, "tags": None,
                            "raw": None, "extra_info": None}))
    runner.run()
    [out] = runner.output("success")
    assert "putdatabaserecord.error" not in out.attributes
    assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [
        (1, "Ada", Decimal("12.50"), date(1815, 12, 10), datetime(2024, 1, 2, 3, 4, 5), '["a", "b"]', b"hi",
         {"k": [1, 2]}),
        (2, "Bob", None, None, None, None, None, None)]
    [event] = runner.events()
    assert event.event_type == T.SEND and event.transit_uri.startswith("postgresql+psycopg://flowactors:***@")


def test_update_by_primary_key_and_by_update_keys(postgresql, engine, table):
    name = table(PEOPLE)
    with engine.begin() as c:
        c.exec_driver_sql(f"INSERT INTO {name} VALUES (1, 'ada', 10, NULL), (2, 'bob', 20, NULL)")
    runner = put(postgresql.url, **{"Statement Type": "UPDATE", "Table Name": name})
    runner.enqueue(records({"id": 2, "name": "Bob", "code": 21}))
    runner.run()
    assert len(runner.output("success")) == 1
    by_code = put(postgresql.url, **{"Statement Type": "UPDATE", "Table Name": name, "Update Keys": "code"})
    by_code.enqueue(records({"code": 10, "name": "Ada"}))
    by_code.run()
    assert len(by_code.output("success")) == 1
    assert rows(engine, f"SELECT id, name, code FROM {name} ORDER BY id") == [(1, "Ada", 10), (2, "Bob", 21)]


def test_upsert_inserts_and_updates_and_insert_ignore_keeps_what_is_there(postgresql, engine, table):
    name = table(PEOPLE)
    with engine.begin() as c:
        c.exec_driver_sql(f"INSERT INTO {name} VALUES (1, 'ada', 10, NULL)")
    upsert = put(postgresql.url, **{"Statement Type": "UPSERT", "Table Name": name})
    upsert.enqueue(records({"id": 1, "name": "Ada", "code": 11}, {"id": 2, "name": "Bob", "code": 20}))
    upsert.run()
    ignore = put(postgresql.url, **{"Statement Type": "INSERT_IGNORE", "Table Name": name})
    ignore.enqueue(records({"id": 2, "name": "not written", "code": 0}, {"id": 3, "name": "Cy", "code": 30}))
    ignore.run()
    assert len(upsert.output("success")) == len(ignore.output("success")) == 1
    assert rows(engine, f"SELECT id, name, code FROM {name} ORDER BY id") == [(1, "Ada", 11), (2, "Bob", 20),
                                                                                (3, "Cy", 30)]


def test_delete_matches_every_field_a_null_matching_a_null_or_only_the_delete_keys(postgresql, engine, table):
    name = table(PEOPLE)
    with engine.begin() as c:
        c.exec_driver_sql(f"INSERT INTO {name} VALUES (1, 'a', NULL, NULL), (2, 'b', 5, NULL), (3, 'c', 6, NULL)")
    runner = put(postgresql.url, **{"Statement Type": "DELETE", "Table Name": name})
    runner.enqueue(records({"id": 1, "name": "a", "code": None}, {"id": 2, "name": "b", "code": 999}))
    runner.run()
    assert rows(engine, f"SELECT id FROM {name} ORDER BY id") == [(2,), (3,)]   # 2's code differs: kept
    keyed = put(postgresql.url, **{"Statement Type": "DELETE", "Table Name": name, "Delete Keys": "id",
                                   "Unmatched Column Behavior": "Ignore Unmatched Columns"})
    keyed.enqueue(records({"id": 2, "name": "whatever", "code": 999}))
    keyed.run()
    assert rows(engine, f"SELECT id FROM {name}") == [(3,)]


def test_the_statement_type_attribute_and_sql_in_a_field(postgresql, engine, table):
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "Use statement.type Attribute", "Table Name": name,
                                    "Field Containing SQL": "query", "Allow Multiple SQL Statements": "true"})
    runner.enqueue(records({"id": 1, "name": "a"}), {"statement.type": "insert"})
    runner.enqueue(records({"query": f"INSERT INTO {name} (id, name) VALUES (7, 'x\\;y'); "
                                     f"UPDATE {name} SET code = 70 WHERE id = 7"}), {"statement.type": "SQL"})
    runner.enqueue(records({"id": 9, "name": "z"}), {"statement.type": "MERGE"})
    runner.enqueue(records({"id": 9, "name": "z"}))
    runner.run()
    assert len(runner.output("success")) == 2
    errors = sorted(f.attributes["putdatabaserecord.error"] for f in runner.output("failure"))
    assert errors == ["Statement Type is 'Use statement.type Attribute' but the FlowFile has no 'statement.type' "
                      "attribute",
                      "the 'statement.type' attribute is 'MERGE', not one of INSERT, UPDATE, DELETE, UPSERT, "
                      "INSERT_IGNORE, SQL"]
    assert rows(engine, f"SELECT id, name, code FROM {name} ORDER BY id") == [(1, "a", None), (7, "x;y", 70)]


def test_a_record_path_gives_each_records_statement_type_in_order(postgresql, engine, table):
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "Use Record Path", "Statement Type Record Path": "/op",
                                    "Data Record Path": "/after", "Table Name": name,
                                    "Unmatched Column Behavior": "Ignore Unmatched Columns"})
    runner.enqueue(records({"op": "c", "after": {"id": 1, "name": "a"}}, {"op": "c", "after": {"id": 2, "name": "b"}},
                           {"op": "u", "after": {"id": 1, "name": "A"}}, {"op": "d", "after": {"id": 2, "name": "b"}}))
    runner.run()
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT id, name FROM {name}") == [(1, "A")]
    required = {"Record Reader": "r", "Database Connection Pooling Service": "d", "Table Name": name}
    assert PutDatabaseRecord.validate_properties({**required, "Statement Type": "Use Record Path",
                                                  "Statement Type Record Path": "/op[", "Data Record Path": "/a/"}) == [
        "property 'Statement Type Record Path': expected a path, a string, a number or a function, found the end of "
        "the path at position 4 in '/op['",
        "property 'Data Record Path': expected a field name, '*', '.' or '..' after '/', found the end of the path "
        "at position 3 in '/a/'"]


# ------------------------------------------------------------------------------ batches, names, readers
def test_records_go_in_batches_of_maximum_batch_size_in_one_transaction(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, name TEXT")
    with engine.begin() as c:
        c.exec_driver_sql(f"CREATE TABLE {name}_log (n INTEGER)")
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Maximum Batch Size": "7"})
    runner.enqueue(records(*({"id": i, "name": f"n{i}"} for i in range(50))))
    runner.run()
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT count(*), sum(id) FROM {name}") == [(50, sum(range(50)))]
    with engine.begin() as c:
        c.exec_driver_sql(f"DROP TABLE {name}_log")


def test_translated_field_names_and_quoted_identifiers(postgresql, engine, table):
    name = table('"Order Id" INTEGER PRIMARY KEY, "select" TEXT')
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Quote Column Identifiers": "true",
                                    "Column Name Translation Strategy": "REMOVE_UNDERSCORE_AND_SPACE"})
    runner.enqueue(records({"order_id": 1, "SELECT": "x"}))
    runner.run()
    assert len(runner.output("success")) == 1
    assert rows(engine, f'SELECT "Order Id", "select" FROM {name}') == [(1, "x")]


def test_csv_text_values_are_converted_to_the_columns_types(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, amount NUMERIC(6,2), born DATE, active BOOLEAN, note TEXT")
    runner = put(postgresql.url, reader=(CSVReader, {}), **{"Statement Type": "INSERT", "Table Name": name})
    runner.enqueue(b"id,amount,born,active,note\n1,3.25,2001-02-03,true,hello\n2,,,false,\n")
    runner.run()
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [
        (1, Decimal("3.25"), date(2001, 2, 3), True, "hello"), (2, None, None, False, None)]


def test_numbers_into_boolean_columns_booleans_into_numbers_and_epoch_millis_into_dates(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, active BOOLEAN, flag_count INTEGER, born DATE, seen TIMESTAMPTZ, "
                 "label TEXT")
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name})
    runner.enqueue(records({"id": 1, "active": 1, "flag_count": True, "born": 86_400_000, "seen": 0, "label": 12.5},
                           {"id": 2, "active": 0, "flag_count": False, "born": None, "seen": None, "label": False}))
    runner.run()
    assert len(runner.output("success")) == 1, runner.output("failure")
    assert rows(engine, f"SELECT id, active, flag_count, born, extract(epoch FROM seen), label FROM {name} "
                        f"ORDER BY id") == [(1, True, 1, date(1970, 1, 2), Decimal("0"), "12.5"),
                                            (2, False, 0, None, None, "false")]


# ------------------------------------------------------------------------------ failure, retry, rollback
def test_a_constraint_violation_fails_the_whole_flowfile_and_writes_none_of_it(postgresql, engine, table):
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Maximum Batch Size": "1"})
    runner.enqueue(records({"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 1, "name": "again"}))
    good = runner.enqueue(records({"id": 5, "name": "e"}))
    runner.run()
    [failed] = runner.output("failure")
    assert "duplicate key value violates unique constraint" in failed.attributes["putdatabaserecord.error"]
    assert [f.uuid for f in runner.output("success")] == [good.uuid]
    assert rows(engine, f"SELECT id FROM {name}") == [(5,)]      # the failed FlowFile's first records rolled back


@pytest.mark.parametrize("records_, properties, says", [
    ([{"id": 1}], {}, "the records have no value for the required column 'name' (Unmatched Column Behavior is "
                      "Fail on Unmatched Columns)"),
    ([{"id": 1, "name": "a", "colour": "red"}], {"Unmatched Field Behavior": "Fail on Unmatched Fields"},
     "the field 'colour' matches no column"),
    ([{"id": 1, "name": "a"}], {"Table Name": "no_such_table"}, "table no_such_table not found"),
    ([{"id": "one", "name": "a"}], {}, "invalid input syntax for type integer"),
])
def test_records_that_do_not_fit_go_to_failure_with_the_reason(postgresql, table, records_, properties, says):
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, **properties})
    runner.enqueue(records(*records_))
    runner.run()
    [failed] = runner.output("failure")
    assert says in failed.attributes["putdatabaserecord.error"]
    assert runner.output("retry") == []


def test_a_statement_past_max_wait_time_goes_to_retry_and_pre_post_sql_share_the_transaction(postgresql, engine,
                                                                                               table):
    """PostgreSQL cancels the statement at the timeout (SQLSTATE 57014): an error that may pass."""
    name = table(PEOPLE)
    slow = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Max Wait Time": "1 sec",
                                  "Pre-Processing SQL": "SELECT pg_sleep(3)"})
    slow.enqueue(records({"id": 1, "name": "a"}))
    slow.run()
    [retry] = slow.output("retry")
    assert "canceling statement due to statement timeout" in retry.attributes["putdatabaserecord.error"]
    assert retry.penalized_until > 0
    logged = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name,
                                    "Pre-Processing SQL": f"INSERT INTO {name} (id, name) VALUES (100, 'pre\\;')",
                                    "Post-Processing SQL": f"UPDATE {name} SET code = ${{code}}; "
                                                           f"DELETE FROM {name} WHERE id = 100"})
    logged.enqueue(records({"id": 2, "name": "b"}), {"code": "7"})
    logged.run()
    assert len(logged.output("success")) == 1
    assert rows(engine, f"SELECT id, code FROM {name}") == [(2, 7)]


def test_pre_post_and_field_sql_run_as_written_without_placeholders(postgresql, engine, table):
    """NiFi runs Pre-/Post-Processing SQL and a field's SQL as plain JDBC Statements: a ``?`` there is
    SQL's own (PostgreSQL's jsonb ``?`` operator), not a parameter, and a ``%`` is the modulo."""
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "Use statement.type Attribute", "Table Name": name,
                                    "Field Containing SQL": "query",
                                    "Pre-Processing SQL": f"INSERT INTO {name} (id, name) SELECT 100, 'pre' "
                                                          f"WHERE '{{\"a\": 1}}'::jsonb ? 'a'",
                                    "Post-Processing SQL": f"UPDATE {name} SET code = 7 % 4 WHERE id = 100"})
    runner.enqueue(records({"query": f"INSERT INTO {name} (id, name) SELECT 5, 'field' "
                                     f"WHERE '{{\"b\": 1}}'::jsonb ? 'b'"}), {"statement.type": "SQL"})
    runner.run()
    assert [f.attributes.get("putdatabaserecord.error") for f in runner.output("failure")] == []
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT id, name, code FROM {name} ORDER BY id") == [(5, "field", None), (100, "pre", 3)]


def test_binary_string_format_decodes_text_for_a_binary_column(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, raw BYTEA")
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Binary String Format": "Base64"})
    runner.enqueue(records({"id": 1, "raw": "AAEC"}))
    runner.enqueue(records({"id": 2, "raw": "not base64!"}))
    runner.run()
    assert rows(engine, f"SELECT raw FROM {name}") == [(b"\x00\x01\x02",)]
    [failed] = runner.output("failure")
    assert "is not Base64 (Binary String Format)" in failed.attributes["putdatabaserecord.error"]


def test_rollback_on_failure_keeps_the_flowfile_queued_and_yields(postgresql, engine, table):
    name = table(PEOPLE)
    runner = put(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, "Rollback On Failure": "true"})
    runner.enqueue(records({"id": 1, "name": None}))
    runner.run()
    assert runner.output("failure") == [] and runner.output("success") == []
    assert runner.input_count == 1 and runner.context.take_yield_request()
    assert rows(engine, f"SELECT count(*) FROM {name}") == [(0,)]


def test_a_database_that_is_down_sends_to_retry_penalized_and_loses_nothing():
    runner = put(f"jdbc:postgresql://127.0.0.1:{free_port()}/x", **{"Statement Type": "INSERT", "Table Name": "t"})
    sent = runner.enqueue(records({"id": 1}))
    runner.run()
    [retry] = runner.output("retry")
    assert retry.uuid == sent.uuid and retry.penalized_until > 0
    assert retry.attributes["putdatabaserecord.error"].startswith("cannot connect to postgresql+psycopg://")
    assert runner.read(retry) == records({"id": 1})
    rolled = put(f"jdbc:postgresql://127.0.0.1:{free_port()}/x", **{"Statement Type": "INSERT", "Table Name": "t",
                                                                    "Rollback On Failure": "true"})
    rolled.enqueue(records({"id": 1}))
    rolled.run()
    assert rolled.input_count == 1 and rolled.output("retry") == []


# ------------------------------------------------------------------------------ SQLite
@pytest.mark.parametrize("engine_name", ["in-process", "stateless"])
def test_sqlite_insert_upsert_and_delete(tmp_path, engine_name):
    path = tmp_path / "shop.db"
    db = sa.create_engine(f"sqlite:///{path}")
    with db.begin() as c:
        c.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL, price NUMERIC, "
                          "made DATE, note TEXT)")
    url = f"jdbc:sqlite:{path}"
    for kind, content in (("INSERT", records({"id": 1, "label": "a", "price": 1.5, "made": "2020-01-02"},
                                             {"id": 2, "label": "b", "price": None, "made": None, "note": "x"})),
                          ("UPSERT", records({"id": 2, "label": "B"}, {"id": 3, "label": "c"})),
                          ("DELETE", records({"id": 1, "label": "a", "note": None}))):
        runner = ProcessorRunner(PutDatabaseRecord, {"Record Reader": "reader", "Database Connection Pooling Service":
                                                     "db", "Statement Type": kind, "Table Name": "items"},
                                 services={"reader": (JsonTreeReader, {}),
                                           "db": (DBCPConnectionPool, {"Database Connection URL": url})},
                                 engine=engine_name)
        runner.enqueue(content)
        runner.run()
        assert len(runner.output("success")) == 1, runner.output("failure")
    assert rows(db, "SELECT id, label, note FROM items ORDER BY id") == [(2, "B", "x"), (3, "c", None)]
    db.dispose()


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_put_database_record_loads_under_nifi_2s_names(postgresql, engine, table):
    name = table(PEOPLE)
    put_node = processor("root", "Put", "org.apache.nifi.processors.standard.PutDatabaseRecord", {
        "put-db-record-record-reader": "reader", "db-type": "PostgreSQL", "put-db-record-statement-type": "INSERT",
        "put-db-record-dcbp-service": "db", "put-db-record-catalog-name": None, "put-db-record-schema-name": None,
        "put-db-record-table-name": "${table}", "put-db-record-translate-field-names": "true",
        "put-db-record-unmatched-field-behavior": "Ignore Unmatched Fields",
        "put-db-record-unmatched-column-behavior": "Fail on Unmatched Columns", "put-db-record-update-keys": None,
        "put-db-record-field-containing-sql": None, "put-db-record-allow-multiple-statements": "false",
        "put-db-record-quoted-identifiers": "false", "put-db-record-quoted-table-identifiers": "false",
        "put-db-record-query-timeout": "0 seconds", "rollback-on-failure": "false", "table-schema-cache-size": "100",
        "put-db-record-max-batch-size": "1000", "database-session-autocommit": "false"}, auto_terminate=SQL_ENDS)
    uses(put_node, "put-db-record-record-reader", "put-db-record-dcbp-service")
    root = group("root", "Load", None, None, processors=[put_node])
    root["controllerServices"] = [
        {"identifier": "reader", "name": "reader", "type": "org.apache.nifi.json.JsonTreeReader", "properties": {}},
        {"identifier": "db", "name": "db", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
         "properties": {"Database Connection URL": postgresql.jdbc_url, "Database User": postgresql.user,
                        "Password": postgresql.password}}]
    flow = flow_from_nifi(snapshot(root, {}))
    [node] = flow.processors.values()
    properties = {k: v for k, v in node.properties.items() if v is not None}
    assert properties["Table Name"] == "${table}" and properties["Maximum Batch Size"] == "1000"
    assert "Database Session AutoCommit" not in properties
    services = {s.name: (s.type, s.properties) for s in flow.services.values()}
    runner = ProcessorRunner(node.type, {**properties, "Record Reader": "reader",
                                         "Database Connection Pooling Service": "db"}, services=services)
    runner.enqueue(records({"id": 4, "name": "d"}), {"table": name})
    runner.run()
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT id, name FROM {name}") == [(4, "d")]
