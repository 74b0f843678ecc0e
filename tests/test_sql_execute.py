"""ExecuteSQL and ExecuteSQLRecord against the session's real PostgreSQL (tests/real_services.py)
and SQLite files: NiFi's Avro type mapping read back with fastavro (both logical-types modes),
fragments, output batches, the record writer, sql.args parameters, pre- and post-queries,
several result sets, errors (a syntax error, a timeout, a database that is down) and NiFi 1's
property names through the NiFi import."""

from __future__ import annotations

import datetime as dt
import io
import json
import sqlite3
import tracemalloc
import uuid
from decimal import Decimal

import fastavro
import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import ExecuteSQL, ExecuteSQLRecord
from flowactors.processors.sql.jdbc_parameters import statement_parameters
from flowactors.processors.sql.result_sets import normalize_name, run_query
from flowactors.processors.sql.table_schema import driver_sql
from flowactors.services import DBCPConnectionPool
from flowactors.services.records.json import JsonRecordSetWriter
from flowactors.testing import ProcessorRunner, enable_service
from nifi_flows import STANDARD, connection, group, processor, snapshot, uses
from real_services import free_port
from repositories.content import FileSystemContentRepository

POOL = "Database Connection Pooling Service"
TYPES_TABLE = """CREATE TABLE nifi_types (
    id int4 PRIMARY KEY, small int2, big int8, amount numeric(8,3), loose numeric, ratio float4, exact float8,
    flag bool, name varchar(20), note text, raw bytea, day date, at_time time, stamp timestamp,
    stamp_tz timestamptz, doc json, ident uuid, tags int4[])"""
TYPES_ROW = """INSERT INTO nifi_types VALUES (1, 7, 9000000000, 12.5, 2.675, 1.5, 2.25, true, 'café', 'long text',
    '\\x00ff', '2024-02-29', '13:45:30.250', '2024-02-29 13:45:30.25', '2024-02-29 13:45:30+00', '{"a": [1, 2]}',
    '6f1d4c7e-2b8a-4c7e-9f00-0a1b2c3d4e5f', '{1,2,3}'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"""


@pytest.fixture(scope="module")
def database(postgresql):
    """The session's PostgreSQL with this module's tables: nifi_types (every type, a row of values
    and a row of NULLs) and numbers (1..2500)."""
    import psycopg

    with psycopg.connect(postgresql.url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS nifi_types, numbers")
        connection.execute(TYPES_TABLE)
        connection.execute(TYPES_ROW)
        connection.execute("CREATE TABLE numbers (n int4, label text)")
        connection.execute("INSERT INTO numbers SELECT n, 'n' || n FROM generate_series(1, 2500) n")
    return postgresql


def runner(kind, url: str, engine: str = "in-process", incoming: bool = False, **properties) -> ProcessorRunner:
    """A runner of ``kind`` on the pool of ``url``; a source (no incoming connection) unless ``incoming``:
    a FlowFile enqueued is taken either way."""
    services = {"pool": (DBCPConnectionPool, {"Database Connection URL": url})}
    if kind is ExecuteSQLRecord:
        services["writer"] = (JsonRecordSetWriter, {})
        properties.setdefault("Record Writer", "writer")
    return ProcessorRunner(kind, {POOL: "pool", **properties}, services=services, engine=engine,
                           incoming_connection=incoming)


def avro(content: bytes) -> tuple[dict, list[dict]]:
    reader = fastavro.reader(io.BytesIO(content))
    return reader.writer_schema, list(reader)


def field_types(schema: dict) -> dict[str, object]:
    return {f["name"]: f["type"][1] if isinstance(f["type"], list) else f["type"] for f in schema["fields"]}


# ------------------------------------------------------------------------------ the Avro type mapping
def test_postgresql_types_map_to_nifis_avro_types_with_javas_text_for_dates_and_decimals(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT * FROM nifi_types ORDER BY id"})
    run.run()
    [flowfile] = run.output("success")
    schema, records = avro(run.read(flowfile))
    assert (schema["name"], schema.get("namespace")) == ("any.data.nifi_types", None) or \
        schema["name"] == "nifi_types" and schema["namespace"] == "any.data"
    assert all(f["type"][0] == "null" for f in schema["fields"])
    assert field_types(schema) == {
        "id": "int", "small": "int", "big": "long", "amount": "string", "loose": "string", "ratio": "float",
        "exact": "double", "flag": "boolean", "name": "string", "note": "string", "raw": "bytes", "day": "string",
        "at_time": "string", "stamp": "string", "stamp_tz": "string", "doc": "string", "ident": "string",
        "tags": {"type": "array", "items": "string"}}
    assert records[0] == {
        "id": 1, "small": 7, "big": 9000000000, "amount": "12.500", "loose": "2.675", "ratio": 1.5, "exact": 2.25,
        "flag": True, "name": "café", "note": "long text", "raw": b"\x00\xff", "day": "2024-02-29",
        "at_time": "13:45:30", "stamp": "2024-02-29 13:45:30.25",
        "stamp_tz": dt.datetime(2024, 2, 29, 13, 45, 30, tzinfo=dt.timezone.utc).astimezone().strftime(
            "%Y-%m-%d %H:%M:%S.0"),
        "doc": '{"a": [1, 2]}', "ident": "6f1d4c7e-2b8a-4c7e-9f00-0a1b2c3d4e5f", "tags": ["1", "2", "3"]}
    assert records[1] == {name: (1 if name == "id" else None) for name in records[0]} | {"id": 2}
    assert flowfile.attributes["executesql.row.count"] == "2"
    assert flowfile.attributes["mime.type"] == "application/avro-binary"
    assert flowfile.attributes["executesql.resultset.index"] == "0"
    times = {k: int(flowfile.attributes[f"executesql.query.{k}"]) for k in ("duration", "executiontime", "fetchtime")}
    assert times["duration"] == times["executiontime"] + times["fetchtime"] and min(times.values()) >= 0
    assert "input.flowfile.uuid" not in flowfile.attributes
    assert [e.event_type.value for e in run.events()] == ["RECEIVE"]


def test_avro_logical_types_give_decimal_date_time_and_timestamp_millis(database):
    run = runner(ExecuteSQL, database.url, **{
        "SQL Query": "SELECT amount, loose, day, at_time, stamp, stamp_tz FROM nifi_types WHERE id = 1",
        "Use Avro Logical Types": "true", "Default Decimal Precision": "12", "Default Decimal Scale": "2"})
    run.run()
    schema, [record] = avro(run.contents("success")[0])
    types = field_types(schema)
    assert types["amount"] == {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 3}
    assert types["loose"] == {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
    assert types["day"] == {"type": "int", "logicalType": "date"}
    assert types["at_time"] == {"type": "int", "logicalType": "time-millis"}
    assert types["stamp"] == types["stamp_tz"] == {"type": "long", "logicalType": "timestamp-millis"}
    assert record["amount"] == Decimal("12.500")
    assert record["loose"] == Decimal("2.68")   # 2.675 rounded half up to the default scale
    assert record["day"] == dt.date(2024, 2, 29)
    assert record["at_time"] == dt.time(13, 45, 30, 250000)
    local = dt.datetime(2024, 2, 29, 13, 45, 30, 250000).astimezone()   # a timestamp without zone: local time
    assert record["stamp"] == local.astimezone(dt.timezone.utc)
    assert record["stamp_tz"] == dt.datetime(2024, 2, 29, 13, 45, 30, tzinfo=dt.timezone.utc)


def test_names_are_normalized_for_avro_when_asked(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": 'SELECT 1 AS "1st value", 2 AS "odd-name"',
                                              "Normalize Table and Column Names": "true"})
    run.run()
    schema, [record] = avro(run.contents("success")[0])
    assert schema["name"] == "any.data.NiFi_ExecuteSQL_Record" or schema["name"] == "NiFi_ExecuteSQL_Record"
    assert record == {"_1st_value": 1, "odd_name": 2}
    assert normalize_name("9 lives.x") == "_9_lives_x"


def test_sqlite_columns_are_typed_by_their_values_and_the_codec_is_applied(tmp_path):
    path = tmp_path / "orders.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, price REAL, item TEXT, blob BLOB, missing TEXT)")
        connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, NULL)",
                               [(n, n * 1.5, f"item {n}", bytes([n])) for n in range(1, 6)])
    run = runner(ExecuteSQL, f"jdbc:sqlite:{path}", **{"SQL Query": "SELECT * FROM orders ORDER BY id",
                                                       "Compression Format": "DEFLATE", "Fetch Size": "2"})
    run.run()
    content = run.contents("success")[0]
    schema, records = avro(content)
    assert fastavro.reader(io.BytesIO(content)).codec == "deflate"
    assert field_types(schema) == {"id": "long", "price": "double", "item": "string", "blob": "bytes",
                                   "missing": "string"}
    assert records[4] == {"id": 5, "price": 7.5, "item": "item 5", "blob": b"\x05", "missing": None}
    assert len(records) == 5


# ------------------------------------------------------------------------------ fragments and batches
@pytest.mark.parametrize("rows, sizes", [(5, ["2", "2", "1"]), (4, ["2", "2"])])
def test_max_rows_per_flowfile_makes_fragments(database, rows, sizes):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": f"SELECT n FROM numbers WHERE n <= {rows} ORDER BY n",
                                              "Max Rows Per FlowFile": "2"})
    run.run()
    made = run.output("success")
    assert [f.attributes["executesql.row.count"] for f in made] == sizes
    assert [f.attributes["fragment.index"] for f in made] == [str(i) for i in range(len(sizes))]
    assert {f.attributes["fragment.count"] for f in made} == {str(len(sizes))}
    assert len({f.attributes["fragment.identifier"] for f in made}) == 1
    values = [r["n"] for f in made for r in avro(run.read(f))[1]]
    assert values == list(range(1, rows + 1))


def test_output_batch_size_commits_as_it_goes_without_a_fragment_count(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT n FROM numbers WHERE n <= 5 ORDER BY n",
                                              "Max Rows Per FlowFile": "2", "Output Batch Size": "1"})
    source = run.enqueue(b"", {"filename": "trigger"})
    run.run()
    made = run.output("success")
    assert len(made) == 3 and run.input_count == 0
    assert all("fragment.count" not in f.attributes for f in made)
    assert {f.attributes["input.flowfile.uuid"] for f in made} == {source.uuid}
    assert {f.attributes["filename"] for f in made} == {"trigger"}


def test_postgresql_fetches_in_steps_with_auto_commit_off(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT n, label FROM numbers ORDER BY n",
                                              "Fetch Size": "100", "Set Auto Commit": "false"})
    run.run()
    _, records = avro(run.contents("success")[0])
    assert len(records) == 2500 and records[-1] == {"n": 2500, "label": "n2500"}


@pytest.mark.parametrize("sql, fetch, auto_commit, server_side", [
    ("SELECT n FROM numbers", 100, False, True), ("(SELECT n FROM numbers)", 100, False, True),
    ("SELECT n FROM numbers", 0, False, False), ("SELECT n FROM numbers", 100, True, False),
    ("SELECT 1; SELECT 2", 100, False, False), ("WITH x AS (SELECT 1) SELECT * FROM x", 100, False, False)])
def test_a_server_side_cursor_is_used_as_postgresqls_jdbc_driver_fetches_in_steps(database, sql, fetch, auto_commit,
                                                                                  server_side):
    service = enable_service(DBCPConnectionPool, {"Database Connection URL": database.url})
    try:
        with service.connection() as connection:
            with run_query(connection, sql, fetch_size=fetch, auto_commit=auto_commit) as query:
                assert query.server_side is server_side
                assert sum(len(list(result.rows())) for result in query.results()) >= 1
    finally:
        service.on_disabled(None)


@pytest.mark.parametrize("kind", [ExecuteSQL, ExecuteSQLRecord])
def test_a_result_larger_than_the_fetch_size_is_written_in_bounded_memory(database, tmp_path, kind):
    """docs/sql.md's claim: with a server-side cursor the rows are fetched and written as they come,
    so the process never holds the result: about 25 MB written here (some 40 MB as Python rows),
    the peak of Python's allocations under 4 MiB for Avro (Fetch Size rows at a time) and 16 MiB
    through a record writer (an Arrow batch of result_sets.BATCH_ROWS rows at a time)."""
    services = {"pool": (DBCPConnectionPool, {"Database Connection URL": database.url}),
                "writer": (JsonRecordSetWriter, {})}
    properties = {POOL: "pool", "Fetch Size": "1000", "Set Auto Commit": "false",
                  "SQL Query": "SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 120000) g"}
    if kind is ExecuteSQLRecord:
        properties["Record Writer"] = "writer"
    run = ProcessorRunner(kind, properties, services=services,
                          content=FileSystemContentRepository(str(tmp_path / "content")), incoming_connection=False)
    tracemalloc.start()
    try:
        run.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [made] = run.output("success")
    assert made.attributes["executesql.row.count"] == "120000" and made.size > 24_000_000
    assert peak < (4 if kind is ExecuteSQL else 16) * 1024 * 1024, peak


def test_several_result_sets_each_make_a_flowfile(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT 1 AS a; UPDATE numbers SET n = n WHERE n = 0; "
                                                           "SELECT 'two' AS b"})
    run.run()
    made = run.output("success")
    assert [f.attributes["executesql.resultset.index"] for f in made] == ["0", "1"]
    assert [avro(run.read(f))[1] for f in made] == [[{"a": 1}], [{"b": "two"}]]


# ------------------------------------------------------------------------------ input FlowFiles
def test_the_query_comes_from_the_content_and_the_input_is_dropped(database):
    run = runner(ExecuteSQL, database.url)
    source = run.enqueue(b"SELECT count(*) AS total FROM numbers", {"filename": "q.sql"})
    run.run()
    [made] = run.output("success")
    assert avro(run.read(made))[1] == [{"total": 2500}]
    assert made.attributes["input.flowfile.uuid"] == source.uuid and made.attributes["filename"] == "q.sql"
    assert run.input_count == 0
    assert [e.event_type.value for e in run.events() if e.event_type.value in ("FETCH", "RECEIVE")] == ["FETCH"]


@pytest.mark.parametrize("strategy, expected", [("EMPTY", None), ("ORIGINAL", b"keep me")])
def test_a_statement_without_a_result_set_sends_the_input_on(database, strategy, expected):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "UPDATE numbers SET label = label WHERE n = 1",
                                              "Content Output Strategy": strategy})
    run.enqueue(b"keep me")
    run.run()
    [made] = run.output("success")
    if expected is None:
        schema, records = avro(run.read(made))
        assert records == [] and schema["fields"] == []
        assert made.attributes["executesql.row.count"] == "0"
    else:
        assert run.read(made) == expected


def test_sql_args_are_the_statements_parameters(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT n, label FROM numbers WHERE n = ? AND label = ? "
                                                           "AND '?' = '?'"})
    run.enqueue(b"", {"sql.args.1.type": "4", "sql.args.1.value": "42", "sql.args.2.type": "12",
                      "sql.args.2.value": "n42"})
    run.run()
    assert avro(run.contents("success")[0])[1] == [{"n": 42, "label": "n42"}]


def test_parameters_parse_as_nifi_reads_them():
    assert statement_parameters({"sql.args.1.type": "93", "sql.args.1.value": "2024-01-02 03:04:05.678",
                                 "sql.args.2.type": "-3", "sql.args.2.value": "00FF", "sql.args.2.format": "hex",
                                 "sql.args.3.type": "-7", "sql.args.3.value": "t", "sql.args.4.type": "3",
                                 "sql.args.4.value": "1.50", "sql.args.5.type": "91"}) == [
        dt.datetime(2024, 1, 2, 3, 4, 5, 678000), b"\x00\xff", True, Decimal("1.50"), None]
    assert statement_parameters({"other": "x"}) is None
    assert driver_sql("SELECT ? , '?', 5 % 2, a ?? b -- ?", "pyformat", "postgresql") == \
        "SELECT %s , '?', 5 %% 2, a ? b -- ?"


def test_a_double_question_mark_is_postgresqls_question_mark_operator_with_or_without_parameters(database):
    """NiFi's query is a prepared statement: PostgreSQL's JDBC driver reads its ``??`` as the ``?``
    operator (jsonb's has-key) whether or not the query has parameters."""
    query = """SELECT '{"a": 1}'::jsonb ?? 'a' AS has, ? AS n"""
    with_one = runner(ExecuteSQL, database.url, **{"SQL Query": query, "sql.args.1.type": "4",
                                                   "sql.args.1.value": "5"})
    without = runner(ExecuteSQL, database.url, **{"SQL Query": query.replace(", ? AS n", "")})
    with_one.run()
    without.run()
    assert [avro(r.read(f))[1] for r in (with_one, without) for f in r.output("success")] == [
        [{"has": True, "n": 5}], [{"has": True}]]


@pytest.mark.parametrize("attributes, says", [
    ({"sql.args.1.type": "INTEGER", "sql.args.1.value": "1"}, "is 'INTEGER', which is not a JDBC type number"),
    ({"sql.args.1.type": "4", "sql.args.1.value": "one"},
     "sql.args.1.value is 'one', which is not a value of JDBC type 4"),
    ({"sql.args.2.type": "4", "sql.args.2.value": "1"}, "sql.args.1.type is missing"),
])
def test_a_parameter_that_does_not_parse_sends_the_input_to_failure(database, attributes, says):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT n FROM numbers WHERE n = ?"})
    run.enqueue(b"", attributes)
    run.run()
    [failed] = run.output("failure")
    assert says in failed.attributes["executesql.error.message"]


def test_pre_and_post_queries_run_on_the_same_connection(database):
    run = runner(ExecuteSQL, database.url, **{
        "SQL Pre-Query": "CREATE TEMP TABLE pre_made (v text); INSERT INTO pre_made VALUES ('a\\;b')",
        "SQL Query": "SELECT v FROM pre_made", "SQL Post-Query": "DROP TABLE pre_made"})
    run.run()
    assert avro(run.contents("success")[0])[1] == [{"v": "a;b"}]


def test_a_failing_post_query_drops_the_results_and_fails_the_input(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT 1 AS a", "SQL Post-Query": "DROP TABLE missing_x"})
    run.enqueue(b"")
    run.run()
    assert run.output("success") == []
    [failed] = run.output("failure")
    assert 'table "missing_x" does not exist' in failed.attributes["executesql.error.message"]


# ------------------------------------------------------------------------------ errors
def test_a_syntax_error_sends_the_input_to_failure_penalized(database):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELEC nothing"})
    run.enqueue(b"", {"filename": "bad"})
    run.run()
    [failed] = run.output("failure")
    message = failed.attributes["executesql.error.message"]
    assert 'syntax error at or near "SELEC"' in message and "\n" not in message
    assert failed.penalized_until > 0 and failed.attributes["filename"] == "bad"
    assert run.output("success") == []


def test_without_input_a_syntax_error_is_logged_and_nothing_is_made(database, caplog):
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELEC nothing"})
    run.run()
    assert run.output("success") == [] and run.output("failure") == []
    assert "unable to run the SQL query [SELEC nothing]" in caplog.text


def test_a_query_past_max_wait_time_is_cancelled_and_the_pooled_connection_keeps_no_timeout(database):
    run = runner(ExecuteSQL, database.url, **{"Max Wait Time": "${timeout}"})
    run.enqueue(b"SELECT pg_sleep(5)", {"timeout": "1 sec"})
    run.enqueue(b"SELECT current_setting('statement_timeout') AS t", {"timeout": "0 sec"})
    run.run(2)
    [failed] = run.output("failure")
    assert "statement timeout" in failed.attributes["executesql.error.message"]
    assert avro(run.contents("success")[0])[1] == [{"t": "0"}]   # the same pool's connection, reset


def test_a_sqlite_value_of_another_kind_than_the_first_rows_fails_in_one_sentence(tmp_path):
    path = tmp_path / "mixed.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE mixed (v)")
        connection.executemany("INSERT INTO mixed VALUES (?)", [(1,), (2,), (2.5,)])
    run = runner(ExecuteSQL, f"jdbc:sqlite:{path}", **{"SQL Query": "SELECT v FROM mixed ORDER BY rowid",
                                                       "Fetch Size": "2"})
    run.enqueue(b"")
    run.run()
    [failed] = run.output("failure")
    assert failed.attributes["executesql.error.message"] == (
        "the column 'v' holds 2.5 where its first rows held integers: CAST it in the query to one type")
    assert run.output("success") == []


def test_a_database_that_is_down_fails_the_input_in_one_sentence():
    url = f"jdbc:postgresql://127.0.0.1:{free_port()}/nowhere"
    run = runner(ExecuteSQL, url, **{"SQL Query": "SELECT 1"})
    run.enqueue(b"kept", {"filename": "x"})
    run.run()
    [failed] = run.output("failure")
    message = failed.attributes["executesql.error.message"]
    assert message.startswith("cannot connect to postgresql+psycopg://127.0.0.1:") and "\n" not in message
    assert run.read(failed) == b"kept"


def test_without_input_a_database_that_is_down_is_logged_and_nothing_is_made(caplog):
    run = runner(ExecuteSQL, f"jdbc:postgresql://127.0.0.1:{free_port()}/nowhere", **{"SQL Query": "SELECT 1"})
    run.run()
    assert run.output("success") == [] and run.output("failure") == []
    assert "no FlowFile to route to failure: cannot connect to postgresql+psycopg://127.0.0.1:" in caplog.text


def test_a_failure_after_an_output_batch_was_committed_fails_a_copy_of_the_input(tmp_path):
    path = tmp_path / "late.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE late (v)")
        connection.executemany("INSERT INTO late VALUES (?)", [(1,), (2,), (2.5,)])
    run = runner(ExecuteSQL, f"jdbc:sqlite:{path}", **{"SQL Query": "SELECT v FROM late ORDER BY rowid",
                                                       "Fetch Size": "2", "Max Rows Per FlowFile": "1",
                                                       "Output Batch Size": "1"})
    source = run.enqueue(b"query", {"filename": "late.sql"})
    run.run()
    assert [avro(run.read(f))[1] for f in run.output("success")] == [[{"v": 1}], [{"v": 2}]]
    [failed] = run.output("failure")
    assert failed.uuid != source.uuid and failed.attributes["filename"] == "late.sql"
    assert "holds 2.5 where its first rows held integers" in failed.attributes["executesql.error.message"]
    assert run.input_count == 0


def test_no_query_and_no_input_yields():
    run = runner(ExecuteSQL, "sqlite://")
    run.run()
    assert run.output("success") == [] and run.output("failure") == []


# ------------------------------------------------------------------------------ ExecuteSQLRecord
@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_execute_sql_record_writes_json_through_the_writer(database, engine):
    run = runner(ExecuteSQLRecord, database.url, engine, **{
        "SQL Query": "SELECT id, amount, flag, name, tags FROM nifi_types ORDER BY id", "Max Rows Per FlowFile": "1"})
    run.run()
    made = run.output("success")
    assert [f.attributes["record.count"] for f in made] == ["1", "1"]
    assert {f.attributes["mime.type"] for f in made} == {"application/json"}
    assert json.loads(run.read(made[0])) == [{"id": 1, "amount": "12.500", "flag": True, "name": "café",
                                              "tags": ["1", "2", "3"]}]
    assert json.loads(run.read(made[1])) == [{"id": 2, "amount": None, "flag": None, "name": None, "tags": None}]


def test_execute_sql_record_with_logical_types_and_no_result_set(database):
    run = runner(ExecuteSQLRecord, database.url, **{"SQL Query": "SELECT day, amount FROM nifi_types WHERE id = 1",
                                                    "Use Avro Logical Types": "true"})
    run.run()
    # the JSON writer without a Date Format writes a date as its epoch milliseconds, as NiFi's
    assert json.loads(run.contents("success")[0]) == [{"day": 1709164800000, "amount": 12.5}]
    empty = runner(ExecuteSQLRecord, database.url, **{"SQL Query": "UPDATE numbers SET n = n WHERE n = 0"})
    empty.enqueue(b"x")
    empty.run()
    [made] = empty.output("success")
    assert json.loads(empty.read(made)) == [] and made.attributes["executesql.row.count"] == "0"


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_flow_with_both_processors_imports_and_runs(database, tmp_path):
    out = tmp_path / "out"
    pool = {"identifier": "db", "name": "DB", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
            "properties": {"Database Connection URL": database.jdbc_url, "Database User": database.user,
                           "Password": database.password}}
    writer = {"identifier": "w", "name": "JSON", "type": "org.apache.nifi.json.JsonRecordSetWriter", "properties": {}}
    queries = processor("root", "queries", STANDARD + "GenerateFlowFile", {
        "generate-ff-custom-text": "SELECT n, label FROM numbers WHERE n < 4 ORDER BY n", "Data Format": "Text",
        "File Size": "0B", "Batch Size": "1"}, schedule="1 hour")
    avro_one = processor("root", "avro", STANDARD + "ExecuteSQL", {
        "Database Connection Pooling Service": "db", "SQL select query": None, "esql-max-rows": "2",
        "esql-output-batch-size": "0", "esql-fetch-size": "10", "dbf-normalize": "true",
        "dbf-user-logical-types": "false", "compression-format": "SNAPPY", "sql-pre-query": None,
        "sql-post-query": None, "esql-auto-commit": "true", "dbf-default-precision": "10",
        "dbf-default-scale": "0", "Max Wait Time": "0 seconds"})
    record_one = processor("root", "records", STANDARD + "ExecuteSQLRecord", {
        "Database Connection Pooling Service": "db", "SQL select query": None, "esqlrecord-record-writer": "w",
        "esqlrecord-normalize": "false", "Max Rows Per Flow File": "0"})
    names = processor("root", "names", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "filename": "${fragment.index:replaceNull('all')}.out"})
    store = processor("root", "store", STANDARD + "PutFile", {"Directory": str(out)},
                      auto_terminate=("success", "failure"))
    uses(avro_one, POOL)
    uses(record_one, POOL, "esqlrecord-record-writer")
    links = [connection("root", queries, avro_one, ("success",)), connection("root", queries, record_one, ("success",)),
             connection("root", avro_one, names, ("success", "failure")),
             connection("root", record_one, names, ("success", "failure")),
             connection("root", names, store, ("success",))]
    root = group("root", "SQL", None, None, processors=[queries, avro_one, record_one, names, store],
                 connections=links, controllerServices=[pool, writer])
    flow = flow_from_nifi(snapshot(root, {}))
    avro_properties = flow.processors["avro"].properties
    assert {k: avro_properties[k] for k in ("Max Rows Per FlowFile", "Fetch Size", "Compression Format",
                                            "Normalize Table and Column Names", "Set Auto Commit")} == {
        "Max Rows Per FlowFile": "2", "Fetch Size": "10", "Compression Format": "SNAPPY",
        "Normalize Table and Column Names": "true", "Set Auto Commit": "true"}
    assert "SQL Query" not in avro_properties or avro_properties["SQL Query"] is None
    assert flow.processors["records"].properties["Max Rows Per FlowFile"] == "0"
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"] == "store") >= 3
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=120, until=stored)
    assert not final.get("timed_out"), final
    written = {path.name: path.read_bytes() for path in out.iterdir()}
    assert sorted(written) == ["0.out", "1.out", "all.out"]
    assert [avro(written[name])[1] for name in ("0.out", "1.out")] == [
        [{"n": 1, "label": "n1"}, {"n": 2, "label": "n2"}], [{"n": 3, "label": "n3"}]]
    assert fastavro.reader(io.BytesIO(written["0.out"])).codec == "snappy"
    assert json.loads(written["all.out"]) == [{"n": 1, "label": "n1"}, {"n": 2, "label": "n2"},
                                              {"n": 3, "label": "n3"}]


def test_a_uuid_parameter_reaches_postgresql_as_text(database):
    ident = str(uuid.UUID("6f1d4c7e-2b8a-4c7e-9f00-0a1b2c3d4e5f"))
    run = runner(ExecuteSQL, database.url, **{"SQL Query": "SELECT id FROM nifi_types WHERE ident = ?::uuid"})
    run.enqueue(b"", {"sql.args.1.type": "12", "sql.args.1.value": ident})
    run.run()
    assert avro(run.contents("success")[0])[1] == [{"id": 1}]


@pytest.mark.parametrize("kind", [ExecuteSQL, ExecuteSQLRecord])
def test_with_an_incoming_connection_a_trigger_finding_no_flowfile_runs_no_query(database, kind):
    """NiFi's AbstractExecuteSQL: with an incoming connection only a FlowFile runs the query (a
    concurrent task that found the queue emptied by another does nothing); without one it is a source."""
    query = {"SQL Query": "SELECT 1 AS one"}
    connected = runner(kind, database.url, incoming=True, **query)
    connected.run()
    assert connected.output("success") == [] and connected.output("failure") == []
    source = runner(kind, database.url, **query)
    source.run()
    assert len(source.output("success")) == 1
