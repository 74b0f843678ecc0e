"""PutSQL and ConvertJSONToSQL against the session's real PostgreSQL (tests/real_services.py) and
SQLite files: sql.args parameters of each JDBC type, batches, what goes to failure and to retry,
fragmented transactions (whole or not at all, waiting for every fragment, the timeout), Rollback
On Failure, generated keys, ConvertJSONToSQL's statements run by PutSQL, and NiFi 1's names."""

from __future__ import annotations

import json
import re
import time
from datetime import date, datetime
from datetime import time as dt_time
from decimal import Decimal

import pytest
import sqlalchemy as sa

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors.sql import ConvertJSONToSQL, PutSQL
from flowactors.processors.sql.jdbc_parameters import ParameterError, for_dialect, jdbc_value, statement_parameters
from flowactors.processors.sql.table_schema import StatementError
from flowactors.services import DBCPConnectionPool
from flowactors.testing import ProcessorRunner
from nifi_flows import group, processor, snapshot, uses
from real_services import free_port
from repositories.provenance.event import ProvenanceEventType as T
from sql_helpers import engine_fixture, rows, table_fixture


engine = engine_fixture("postgresql")
table = table_fixture()


def pool(url: str) -> dict:
    return {"db": (DBCPConnectionPool, {"Database Connection URL": url})}


def put_sql(url: str, **properties) -> ProcessorRunner:
    return ProcessorRunner(PutSQL, {"JDBC Connection Pool": "db", **properties}, services=pool(url))


def args(*typed) -> dict[str, str]:
    """sql.args attributes of (type, value[, format]) tuples, numbered from 1."""
    out = {}
    for number, (kind, value, *fmt) in enumerate(typed, start=1):
        out[f"sql.args.{number}.type"] = str(kind)
        if value is not None:
            out[f"sql.args.{number}.value"] = value
        if fmt:
            out[f"sql.args.{number}.format"] = fmt[0]
    return out


# ------------------------------------------------------------------------------ parameters
@pytest.mark.parametrize("kind, value, fmt, expected", [
    (4, "42", "", 42), (-5, "-9000000000", "", -9000000000), (8, "2.5", "", 2.5), (3, "12.30", "", Decimal("12.30")),
    (16, "TRUE", "", True), (-7, "t", "", True), (-7, "0", "", False), (12, "it's", "", "it's"),
    (91, "2024-02-29", "", date(2024, 2, 29)), (91, "86400000", "", date(1970, 1, 2)),
    (91, "29/02/2024", "dd/MM/yyyy", date(2024, 2, 29)),
    (93, "2024-01-02 03:04:05.678", "", datetime(2024, 1, 2, 3, 4, 5, 678000)),
    (93, "2024-01-02T03:04:05Z", "ISO_OFFSET_DATE_TIME", datetime.fromisoformat("2024-01-02T03:04:05+00:00")),
    (-2, "hi", "", b"hi"), (-3, "00FF", "hex", b"\x00\xff"), (-4, "aGk=", "base64", b"hi"),
    (1111, "{\"a\": 1}", "", "{\"a\": 1}"), (4, None, "", None),
    (91, "20240229", "BASIC_ISO_DATE", date(2024, 2, 29)), (92, "03:04:05.678", "", dt_time(3, 4, 5, 678000)),
    (93, "2024-01-02T03:04:05", "", datetime(2024, 1, 2, 3, 4, 5)),
    (93, "02 Jan 2024 03:04", "dd MMM yyyy HH:mm", datetime(2024, 1, 2, 3, 4)),
])
def test_each_jdbc_type_binds_its_python_value(kind, value, fmt, expected):
    assert jdbc_value(1, str(kind), value, fmt) == expected


@pytest.mark.parametrize("kind, value, says", [
    ("int", "1", "sql.args.1.type is 'int', which is not a JDBC type number"),
    ("4", "four", "sql.args.1.value is 'four', which is not a value of JDBC type 4"),
    ("93", "yesterday", "sql.args.1.value is 'yesterday'"),
])
def test_a_parameter_that_cannot_be_read_says_which_attribute(kind, value, says):
    with pytest.raises(StatementError, match=re.escape(says)):
        jdbc_value(1, kind, value, "")


def test_epoch_milliseconds_are_read_in_the_machines_time_zone_as_javas_sql_types(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")   # UTC+9, no daylight saving time
    time.tzset()
    try:
        assert jdbc_value(1, "93", "0", "") == datetime(1970, 1, 1, 9, 0)
        assert jdbc_value(1, "92", "3600000", "") == dt_time(10, 0)
        assert jdbc_value(1, "91", "86400000", "") == date(1970, 1, 2)
        assert jdbc_value(1, "93", "1970-01-01 00:00:00.000", "") == datetime(1970, 1, 1)   # text: as written
    finally:
        monkeypatch.undo()
        time.tzset()


def test_statement_parameters_read_every_sql_arg_in_order_and_sqlite_takes_them_as_text():
    values = {"sql.args.2.type": "91", "sql.args.2.value": "31/01/2024", "sql.args.2.format": "dd/MM/yyyy",
              "sql.args.1.type": "3", "sql.args.1.value": "1.50", "sql.args.3.type": "12", "other": "x"}
    parameters = statement_parameters(values)
    assert parameters == [Decimal("1.50"), date(2024, 1, 31), None]
    assert for_dialect(parameters, "sqlite") == ["1.50", "2024-01-31", None]
    assert for_dialect(parameters, "postgresql") == parameters
    assert for_dialect([datetime(2024, 1, 2, 3, 4, 5), dt_time(3, 4)], "sqlite") == ["2024-01-02 03:04:05", "03:04:00"]
    with pytest.raises(ParameterError, match=re.escape("sql.args.1.value is '12345678901234567890'")):
        jdbc_value(1, "93", "12345678901234567890", "")   # 20 digits: not milliseconds (JdbcCommon's LONG_PATTERN)
    with pytest.raises(ParameterError, match=re.escape("'x' is not a binary format (ascii, hex, base64)")):
        jdbc_value(1, "-2", "00", "x")


def test_statements_run_with_their_parameters_content_or_property(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, note TEXT, amount NUMERIC(6,2), day DATE, raw BYTEA")
    runner = put_sql(postgresql.url)
    statement = f"INSERT INTO {name} (id, note, amount, day, raw) VALUES (?, ?, ?, ?, ?)".encode()
    runner.enqueue(statement, args((4, "1"), (12, "50% off, '?' kept"), (3, "9.99"), (91, "2024-01-31"),
                                   (-3, "CAFE", "hex")))
    runner.enqueue(statement, args((4, "2"), (12, None), (3, None), (91, None), (-3, None)))
    runner.enqueue(f"UPDATE {name} SET note = 'literal ? and %' WHERE id = 2; UPDATE {name} SET amount = 1 "
                   f"WHERE id = 2".encode())   # several statements without parameters, as PostgreSQL's driver takes
    runner.run()
    assert len(runner.output("success")) == 3
    assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [
        (1, "50% off, '?' kept", Decimal("9.99"), date(2024, 1, 31), b"\xca\xfe"),
        (2, "literal ? and %", Decimal("1.00"), None, None)]
    assert {e.event_type for e in runner.events()} == {T.SEND}
    by_property = put_sql(postgresql.url, **{"SQL Statement": f"DELETE FROM {name} WHERE id = ${{doomed}}"})
    by_property.enqueue(b"ignored content", {"doomed": "1"})
    by_property.run()
    assert rows(engine, f"SELECT id FROM {name}") == [(2,)]


def test_a_double_question_mark_is_postgresqls_question_mark_operator_as_its_jdbc_driver_reads_it(postgresql, engine,
                                                                                                     table):
    """PostgreSQL's JDBC driver reads ``??`` in a prepared statement as the ``?`` operator (jsonb's
    has-key), not as two parameters: the first statement has one parameter, the second none."""
    name = table("id INTEGER PRIMARY KEY, doc JSONB")
    runner = put_sql(postgresql.url)
    runner.enqueue(f"INSERT INTO {name} (id, doc) SELECT ?, '{{\"a\": 1}}' WHERE '{{\"a\": 1}}'::jsonb ?? 'a'"
                   .encode(), args((4, "1")))
    runner.enqueue(f"INSERT INTO {name} (id) SELECT 2 WHERE '{{\"b\": 1}}'::jsonb ?? 'b'".encode())   # none
    runner.run()
    assert [f.attributes.get("error.message") for f in runner.output("failure")] == []
    assert rows(engine, f"SELECT id, doc FROM {name} ORDER BY id") == [(1, {"a": 1}), (2, None)]


def test_a_batch_with_one_bad_flowfile_sends_only_that_one_to_failure(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY")
    runner = put_sql(postgresql.url)
    insert = f"INSERT INTO {name} (id) VALUES (?)".encode()
    for value in ("1", "2", "1", "3", "x"):
        runner.enqueue(insert, args((4, value)))
    runner.run()
    assert sorted(f.attributes["sql.args.1.value"] for f in runner.output("success")) == ["1", "2", "3"]
    failed = sorted(runner.output("failure"), key=lambda f: f.attributes["sql.args.1.value"])
    assert [f.attributes["sql.args.1.value"] for f in failed] == ["1", "x"]
    assert failed[0].attributes["error.sql.state"] == "23505"
    assert "duplicate key" in failed[0].attributes["error.message"]
    assert "which is not a value of JDBC type 4" in failed[1].attributes["error.message"]
    assert rows(engine, f"SELECT id FROM {name} ORDER BY id") == [(1,), (2,), (3,)]


def test_obtain_generated_keys_writes_sql_generated_key(postgresql, engine, table):
    name = table("id SERIAL PRIMARY KEY, note TEXT")
    runner = put_sql(postgresql.url, **{"Obtain Generated Keys": "true"})
    for note in ("a", "b"):
        runner.enqueue(f"INSERT INTO {name} (note) VALUES (?)".encode(), args((12, note)))
    runner.run()
    assert sorted(f.attributes["sql.generated.key"] for f in runner.output("success")) == ["1", "2"]


# ------------------------------------------------------------------------------ fragmented transactions
def fragments(runner, name: str, values: list[str], identifier: str = "tx", count: int | None = None) -> None:
    for index, value in enumerate(values):
        runner.enqueue(f"INSERT INTO {name} (id) VALUES (?)".encode(),
                       {**args((4, value)), "fragment.identifier": identifier,
                        "fragment.count": str(count or len(values)), "fragment.index": str(index)})


def test_a_fragmented_transaction_commits_whole_or_not_at_all(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY")
    runner = put_sql(postgresql.url)
    fragments(runner, name, ["1", "2", "3"], "good")
    fragments(runner, name, ["4", "5", "4"], "bad")
    runner.run()
    assert sorted(f.attributes["fragment.identifier"] for f in runner.output("success")) == ["good"] * 3
    assert sorted(f.attributes["fragment.identifier"] for f in runner.output("failure")) == ["bad"] * 3
    assert rows(engine, f"SELECT id FROM {name} ORDER BY id") == [(1,), (2,), (3,)]


def test_an_incomplete_transaction_waits_penalized_then_times_out_to_failure(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY")
    runner = ProcessorRunner(PutSQL, {"JDBC Connection Pool": "db", "Transaction Timeout": "200 millis"},
                             services=pool(postgresql.url), penalty_duration=0.05)
    fragments(runner, name, ["1", "2"], count=3)
    runner.run()
    assert runner.output("success") == [] and runner.output("failure") == []
    assert runner.input_count == 2 and all(f.penalized_until > 0 for f in runner.queues["input"].listing(10))
    time.sleep(0.3)
    runner.run()
    assert len(runner.output("failure")) == 2
    assert "incomplete (2 of 3 FlowFiles) after the Transaction Timeout" in \
        runner.output("failure")[0].attributes["error.message"]
    assert rows(engine, f"SELECT count(*) FROM {name}") == [(0,)]


def test_a_transaction_larger_than_the_batch_is_gathered_and_run_in_index_order(postgresql, engine, table):
    name = table("seq SERIAL PRIMARY KEY, id INTEGER")
    runner = put_sql(postgresql.url, **{"Batch Size": "2"})
    values = [str(i) for i in (6, 5, 4, 3, 2, 1, 0)]
    for index in (3, 0, 6, 1, 5, 2, 4):                   # queued out of order
        runner.enqueue(f"INSERT INTO {name} (id) VALUES (?)".encode(),
                       {**args((4, values[index])), "fragment.identifier": "tx", "fragment.count": "7",
                        "fragment.index": str(index)})
    runner.run()
    assert len(runner.output("success")) == 7
    assert rows(engine, f"SELECT id FROM {name} ORDER BY seq") == [(int(v),) for v in values]


def test_rollback_on_failure_keeps_every_flowfile_queued(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY")
    runner = put_sql(postgresql.url, **{"Rollback On Failure": "true"})
    for value in ("1", "1"):
        runner.enqueue(f"INSERT INTO {name} (id) VALUES (?)".encode(), args((4, value)))
    runner.run()
    assert runner.input_count == 2 and runner.output("failure") == [] and runner.output("success") == []
    assert runner.context.take_yield_request()
    assert rows(engine, f"SELECT count(*) FROM {name}") == [(0,)]


def test_a_database_that_is_down_sends_to_retry_and_loses_nothing():
    runner = put_sql(f"jdbc:postgresql://127.0.0.1:{free_port()}/x")
    runner.enqueue(b"INSERT INTO t VALUES (1)")
    runner.run()
    [retry] = runner.output("retry")
    assert retry.penalized_until > 0 and retry.attributes["error.message"].startswith("cannot connect to")
    assert runner.read(retry) == b"INSERT INTO t VALUES (1)"


# ------------------------------------------------------------------------------ ConvertJSONToSQL -> PutSQL
def convert(url: str, **properties) -> ProcessorRunner:
    return ProcessorRunner(ConvertJSONToSQL, {"JDBC Connection Pool": "db", **properties}, services=pool(url))


def through_put_sql(url: str, converted: ProcessorRunner) -> ProcessorRunner:
    runner = put_sql(url)
    for flowfile in converted.output("sql"):
        runner.enqueue(converted.read(flowfile), flowfile.attributes)
    runner.run()
    return runner


def test_convert_json_to_sql_then_put_sql_inserts_updates_and_deletes(postgresql, engine, table):
    name = table("id INTEGER PRIMARY KEY, full_name VARCHAR(5) NOT NULL, active BOOLEAN, score INTEGER, "
                 "joined TIMESTAMP, extra JSONB")
    documents = [("INSERT", [{"id": 1, "FullName": "Ada Lovelace", "active": True, "score": True,
                              "joined": "2024-01-02 03:04:05", "extra": {"k": [1]}, "ignored": 1},
                             {"id": 2, "full_name": "Bob", "active": None, "score": 7}]),
                 ("UPDATE", {"id": 2, "full_name": "Robert", "score": 8}),
                 ("DELETE", [{"id": 1}])]
    sent = []
    for kind, document in documents:
        converter = convert(postgresql.url, **{"Statement Type": kind, "Table Name": name,
                                               "Unmatched Column Behavior": "Ignore Unmatched Columns"})
        converter.enqueue(json.dumps(document).encode())
        converter.run()
        [original] = converter.output("original")
        statements = converter.output("sql")
        assert original.attributes["fragment.count"] == str(len(statements))
        assert {s.attributes["fragment.identifier"] for s in statements} == {original.attributes["fragment.identifier"]}
        sent.append(converter)
        runner = through_put_sql(postgresql.url, converter)
        assert len(runner.output("success")) == len(statements), runner.output("failure")
        if kind == "INSERT":
            assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [
                (1, "Ada L", True, 1, datetime(2024, 1, 2, 3, 4, 5), {"k": [1]}), (2, "Bob", None, 7, None, None)]
    first = sent[0].output("sql")[0]
    assert sent[0].read(first).decode() == (f"INSERT INTO {name} (id, full_name, active, score, joined, extra) "
                                            f"VALUES (?, ?, ?, ?, ?, ?)")
    assert {k: v for k, v in first.attributes.items() if k.startswith("sql.")} == {
        "sql.args.1.type": "4", "sql.args.1.value": "1", "sql.args.2.type": "12", "sql.args.2.value": "Ada L",
        "sql.args.3.type": "16", "sql.args.3.value": "true", "sql.args.4.type": "4", "sql.args.4.value": "1",
        "sql.args.5.type": "93", "sql.args.5.value": "2024-01-02 03:04:05", "sql.args.6.type": "1111",
        "sql.args.6.value": '{"k": [1]}', "sql.table": name}
    assert rows(engine, f"SELECT id, full_name, score FROM {name}") == [(2, "Rober", 8)]


@pytest.mark.parametrize("content, properties, says", [
    (b"not json", {}, "the content is not JSON"),
    (b"[1, 2]", {}, "not a JSON object or an array of JSON objects"),
    (b'{"id": 1}', {}, "the records have no value for the required column 'note'"),
    (b'{"id": 1, "note": "a", "x": 2}', {"Unmatched Field Behavior": "Fail"}, "the field 'x' matches no column"),
    (b'{"id": 1}', {"Table Name": "nowhere"}, "table nowhere not found"),
])
def test_convert_json_to_sql_failures_keep_the_original_and_emit_nothing(postgresql, table, content, properties,
                                                                         says):
    name = table("id INTEGER PRIMARY KEY, note TEXT NOT NULL")
    converter = convert(postgresql.url, **{"Statement Type": "INSERT", "Table Name": name, **properties})
    converter.enqueue(content)
    converter.run()
    [failed] = converter.output("failure")
    assert says in failed.attributes["flowactors.failure.reason"]
    assert converter.output("sql") == [] and converter.output("original") == []


@pytest.mark.parametrize("engine_name", ["in-process", "stateless"])
def test_convert_json_to_sql_then_put_sql_on_sqlite_upsert(tmp_path, engine_name):
    path = tmp_path / "shop.db"
    db = sa.create_engine(f"sqlite:///{path}")
    with db.begin() as c:
        c.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL, price NUMERIC)")
        c.exec_driver_sql("INSERT INTO items VALUES (1, 'old', 1)")
    url = f"jdbc:sqlite:{path}"
    converter = ProcessorRunner(ConvertJSONToSQL, {"JDBC Connection Pool": "db", "Statement Type": "UPSERT",
                                                   "Table Name": "items"}, services=pool(url), engine=engine_name)
    converter.enqueue(json.dumps([{"id": 1, "label": "new", "price": 2.5}, {"id": 2, "label": "two"}]).encode())
    converter.run()
    runner = through_put_sql(url, converter)
    assert len(runner.output("success")) == 2
    assert rows(db, "SELECT * FROM items ORDER BY id") == [(1, "new", 2.5), (2, "two", None)]
    db.dispose()


# ------------------------------------------------------------------------------ NiFi flows
def test_nifi_1_put_sql_and_convert_json_to_sql_load_under_current_names(postgresql):
    put = processor("root", "Put", "org.apache.nifi.processors.standard.PutSQL", {
        "JDBC Connection Pool": "db", "putsql-sql-statement": None, "Support Fragmented Transactions": "true",
        "database-session-autocommit": "false", "Transaction Timeout": None, "Batch Size": "100",
        "Obtain Generated Keys": "false", "rollback-on-failure": "false"}, auto_terminate=("success", "failure",
                                                                                          "retry"))
    make = processor("root", "Convert", "org.apache.nifi.processors.standard.ConvertJSONToSQL", {
        "JDBC Connection Pool": "db", "Statement Type": "INSERT", "Table Name": "t", "Catalog Name": None,
        "Schema Name": None, "Translate Field Names": "true", "Unmatched Field Behavior": "Ignore Unmatched Fields",
        "Unmatched Column Behavior": "Fail on Unmatched Columns", "Update Keys": None,
        "jts-quoted-identifiers": "false", "jts-quoted-table-identifiers": "true", "jts-sql-param-attr-prefix": "sql",
        "table-schema-cache-size": "10"}, auto_terminate=("original", "sql", "failure"))
    for node in (put, make):
        uses(node, "JDBC Connection Pool")
    root = group("root", "Load", None, None, processors=[put, make])
    root["controllerServices"] = [{"identifier": "db", "name": "db", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
                                   "properties": {"Database Connection URL": postgresql.jdbc_url}}]
    flow = flow_from_nifi(snapshot(root, {}))
    by_name = {node.name: node.properties for node in flow.processors.values()}
    assert by_name["Put"]["Batch Size"] == "100" and by_name["Put"]["Rollback On Failure"] == "false"
    assert "database-session-autocommit" not in by_name["Put"]
    assert by_name["Convert"]["Quote Table Identifiers"] == "true"
    assert by_name["Convert"]["SQL Parameter Attribute Prefix"] == "sql"
    assert by_name["Convert"]["Table Schema Cache Size"] == "10"


def test_a_nifi_1_flow_of_convert_json_to_sql_into_put_sql_runs_on_the_engine(postgresql, engine, table, tmp_path):
    """GenerateFlowFile -> ConvertJSONToSQL -> PutSQL as NiFi 1 exports it, run in-process until
    PutSQL took the five statements (its Batch Size 2: it gathers the fragmented transaction) and
    committed them in one trigger."""
    from flowactors import run_flow
    from nifi_flows import STANDARD, connection

    name = table("id INTEGER PRIMARY KEY, item_name TEXT NOT NULL")
    objects = [{"id": i, "ItemName": f"item {i}"} for i in range(5)]
    generate = processor("root", "orders", STANDARD + "GenerateFlowFile", {
        "Custom Text": json.dumps(objects), "Batch Size": "1", "Max FlowFiles": "1"}, schedule="10 min")
    make = processor("root", "Convert", STANDARD + "ConvertJSONToSQL", {
        "JDBC Connection Pool": "db", "Statement Type": "INSERT", "Table Name": name,
        "jts-sql-param-attr-prefix": "sql"}, auto_terminate=("original", "failure"))
    put = processor("root", "Put", STANDARD + "PutSQL", {
        "JDBC Connection Pool": "db", "putsql-sql-statement": None, "rollback-on-failure": "false",
        "Batch Size": "2"}, auto_terminate=("success", "failure", "retry"))
    for node in (put, make):
        uses(node, "JDBC Connection Pool")
    root = group("root", "Load", None, None, processors=[generate, make, put], connections=[
        connection("root", generate, make, ("success",)), connection("root", make, put, ("sql",))])
    root["controllerServices"] = [{"identifier": "db", "name": "db", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
                                   "properties": {"Database Connection URL": postgresql.jdbc_url,
                                                  "Database User": postgresql.user, "Password": postgresql.password}}]
    final = run_flow(flow_from_nifi(snapshot(root, {})), tmp_path / "repository", engine="in-process", timeout=30,
                     until=lambda s: [p["flowfiles_in"] for p in s["processors"] if p["name"] == "Put"] == [5])
    assert not final.get("timed_out"), final
    [put_status] = [p for p in final["processors"] if p["name"] == "Put"]
    assert (put_status["commits"], put_status["errors"]) == (1, 0)
    assert rows(engine, f"SELECT id, item_name FROM {name} ORDER BY id") == [(i, f"item {i}") for i in range(5)]
