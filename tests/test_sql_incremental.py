"""QueryDatabaseTable, QueryDatabaseTableRecord and GenerateTableFetch against the session's real
PostgreSQL (tests/real_services.py) and real SQLite files: the first trigger fetches every row, the
next only newer ones, the maxima kept under NiFi's state keys, a restarted flow going on from them,
initial.maxvalue.*, the Initial Load Strategy, Custom Query, fragments and Output Batch Size,
GenerateTableFetch's pages run as queries, a database that is down, and NiFi 1's property names through
the NiFi import."""

from __future__ import annotations

import io
import json
import uuid
from datetime import datetime, timedelta

import fastavro
import pytest
import sqlalchemy as sa

from flowactors import Flow, run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import (ExecuteSQL, GenerateTableFetch, PutFile, QueryDatabaseTable,
                                   QueryDatabaseTableRecord)
from flowactors.processors.sql.incremental import DatabaseFetchError, greater, render, state_key
from flowactors.sdk.services import DatabaseUnavailableError
from flowactors.services import DBCPConnectionPool, JsonRecordSetWriter
from flowactors.testing import ProcessorRunner
from nifi_flows import group, processor, snapshot
from real_services import free_port

POOL = "Database Connection Pooling Service"


class Database:
    """One database for one test: a SQLite file, or a schema of its own in the session's PostgreSQL
    (so tests share the server, not their tables). ``services`` is what a runner is given."""

    def __init__(self, kind: str, request, tmp_path):
        if kind == "sqlite":
            self.url = f"sqlite:///{tmp_path / 'test.db'}"
            self.nifi_url = f"jdbc:sqlite:{tmp_path / 'test.db'}"
            self.engine = sa.create_engine(self.url)
            self.properties = {"Database Connection URL": self.nifi_url}
        else:
            server = request.getfixturevalue("postgresql")
            schema = f"t_{uuid.uuid4().hex[:10]}"
            admin = sa.create_engine(server.url)
            with admin.begin() as connection:
                connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
            admin.dispose()
            self.nifi_url = f"{server.jdbc_url}?currentSchema={schema}"
            self.properties = {"Database Connection URL": self.nifi_url, "Database User": server.user,
                               "Password": server.password}
            self.engine = sa.create_engine(server.url, connect_args={"options": f"-csearch_path={schema}"})
        self.kind = kind
        self.services = {"db": (DBCPConnectionPool, self.properties)}

    def sql(self, *statements: str) -> None:
        with self.engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)

    def rows(self, query: str) -> list[tuple]:
        with self.engine.connect() as connection:
            return [tuple(row) for row in connection.exec_driver_sql(query)]


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    database = Database(request.param, request, tmp_path)
    yield database
    database.engine.dispose()


@pytest.fixture
def sqlite(request, tmp_path):
    database = Database("sqlite", request, tmp_path)
    yield database
    database.engine.dispose()


def people(db: Database, rows: int = 3) -> None:
    """NiFi's test table, with ``rows`` rows (ids from 0)."""
    db.sql("CREATE TABLE people (id INTEGER NOT NULL, name VARCHAR(100), scale FLOAT, created_on TIMESTAMP, "
           "bignum BIGINT DEFAULT 0)")
    add_people(db, range(rows))


def add_people(db: Database, ids, start: datetime = datetime(2000, 1, 1)) -> None:
    for i in ids:
        db.sql(f"INSERT INTO people (id, name, scale, created_on) VALUES ({i}, 'person {i}', {i}.5, "
               f"'{(start + timedelta(minutes=i)).isoformat(sep=' ')}')")


def qdt(db: Database, kind=QueryDatabaseTable, name: str = "fetch", **properties) -> ProcessorRunner:
    values = {POOL: "db", "Table Name": "people", **properties}
    services = dict(db.services)
    if kind is QueryDatabaseTableRecord:
        services["writer"] = (JsonRecordSetWriter, {"Output Grouping": "One Line Per Object"})
        values.setdefault("Record Writer", "writer")
    return ProcessorRunner(kind, values, services=services, name=name)


def avro_rows(runner: ProcessorRunner, flowfile) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(runner.read(flowfile))))


def ids(runner: ProcessorRunner) -> list[list[int]]:
    return [[row["id"] for row in avro_rows(runner, f)] for f in runner.output("success")]


# ------------------------------------------------------------------------------ QueryDatabaseTable
def test_the_first_trigger_fetches_every_row_and_the_next_only_newer_ones(db):
    people(db)
    runner = qdt(db, **{"Maximum-value Columns": "ID", "Max Rows Per FlowFile": 2})
    runner.run()
    first, second = runner.output("success")
    assert ids(runner) == [[0, 1], [2]]
    assert {k: first.attributes[k] for k in ("tablename", "querydbtable.row.count", "maxvalue.id", "fragment.index",
                                             "fragment.count", "mime.type")} == {
        "tablename": "people", "querydbtable.row.count": "2", "maxvalue.id": "2", "fragment.index": "0",
        "fragment.count": "2", "mime.type": "application/avro-binary"}
    assert second.attributes["fragment.identifier"] == first.attributes["fragment.identifier"]
    assert dict(runner.context.state.get().values) == {"people@!@id": "2"}
    assert [e.event_type.value for e in runner.events()] == ["RECEIVE", "RECEIVE"]
    assert "flowactors-test" not in runner.events()[0].transit_uri   # no password in the provenance

    runner.run()   # nothing new: nothing sent, and the processor yields
    assert len(runner.output("success")) == 2
    add_people(db, [3])
    runner.run()
    assert ids(runner)[2:] == [[3]]
    assert runner.output("success")[2].attributes["maxvalue.id"] == "3"


def test_several_maximum_value_columns_follow_nifis_partitions(db):
    """The first column ``>`` its maximum, the next ``>=`` (NiFi's testMultiplePartitions)."""
    db.sql("CREATE TABLE buckets (id INTEGER NOT NULL, bucket INTEGER NOT NULL)",
           "INSERT INTO buckets VALUES (0, 0), (1, 0)")
    runner = ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": "buckets",
                                                  "Maximum-value Columns": "ID, BUCKET"}, services=db.services)
    counts = []
    for insert in ("(2, 0)", "(3, 1)", "(4, 0)", "(5, 1)"):
        runner.run()
        counts.append(sum(int(f.attributes["querydbtable.row.count"]) for f in runner.output("success")))
        db.sql(f"INSERT INTO buckets VALUES {insert}")
    runner.run()
    counts.append(sum(int(f.attributes["querydbtable.row.count"]) for f in runner.output("success")))
    assert counts == [2, 3, 4, 4, 5]   # row 4 (an old bucket) is never fetched
    assert dict(runner.context.state.get().values) == {"buckets@!@id": "5", "buckets@!@bucket": "1"}


def test_maxima_of_each_type_are_kept_as_nifi_writes_them(db):
    people(db, 2)
    runner = qdt(db, **{"Maximum-value Columns": "name, scale, created_on"})
    runner.run()
    state = dict(runner.context.state.get().values)
    assert state["people@!@name"] == "person 1"
    assert state["people@!@scale"] == "1.5"
    # SQLite keeps the timestamp as the text it was given; PostgreSQL's is Java's Timestamp text
    assert state["people@!@created_on"] == ("2000-01-01 00:01:00" if db.kind == "sqlite" else "2000-01-01 00:01:00.0")
    add_people(db, [2])
    runner.run()
    assert ids(runner)[1:] == [[2]]
    assert (render(datetime(2024, 1, 2, 3, 4, 5, 120000)), render(1e7), render(2.0)) == (
        "2024-01-02 03:04:05.12", "1.0E7", "2.0")
    kept_by_nifi = "2000-01-01 03:23:34.000123456"   # Java's nanoseconds: compared to the microsecond
    assert greater(datetime(2000, 1, 1, 3, 23, 34, 123), kept_by_nifi) is None
    assert greater(datetime(2000, 1, 1, 3, 23, 34, 124), kept_by_nifi) == "2000-01-01 03:23:34.000124"
    assert greater(datetime(2000, 1, 2), "2000-01-01") == "2000-01-02 00:00:00.0"   # a date kept for a timestamp
    with pytest.raises(ValueError, match="the kept maximum 'abc' does not read as a whole number, the column's type: clear"):
        greater(5, "abc")


def test_an_older_nifis_plain_column_key_is_read_and_the_qualified_key_written(sqlite, engine):
    people(sqlite, 5)
    runner = qdt(sqlite, **{"Maximum-value Columns": "id"})
    runner.context.state.set({"id": "2"})   # what NiFi before 1.2 kept
    runner.run()
    assert ids(runner) == [[3, 4]]
    assert runner.context.state.get().get("people@!@id") == "4"


def test_initial_max_values_start_the_first_fetch_past_them(db):
    people(db, 10)
    runner = qdt(db, **{"Maximum-value Columns": "id", "initial.maxvalue.ID": "5"})
    runner.run()
    assert ids(runner) == [[6, 7, 8, 9]]
    runner.run()
    assert len(runner.output("success")) == 1 and runner.context.state.get().get("people@!@id") == "9"


def test_start_at_current_maximum_values_fetches_only_rows_added_later(db):
    people(db, 4)
    runner = qdt(db, **{"Maximum-value Columns": "id", "Initial Load Strategy": "Start at Current Maximum Values"})
    runner.run()
    assert runner.output("success") == [] and runner.context.state.get().get("people@!@id") == "3"
    add_people(db, [4])
    runner.run()
    assert ids(runner) == [[4]]
    with pytest.raises(ValueError, match="'Start at Current Maximum Values' needs Maximum-value Columns"):
        qdt(db, **{"Initial Load Strategy": "Start at Current Maximum Values"})


def test_a_custom_query_is_a_sub_query_aliased_as_the_table_with_the_additional_where_clause(db):
    db.sql("CREATE TABLE orders (id INTEGER, kind VARCHAR(10), amount INTEGER)",
           "CREATE TABLE kinds (kind VARCHAR(10), label VARCHAR(20))",
           "INSERT INTO kinds VALUES ('a', 'Apples'), ('b', 'Bananas')",
           "INSERT INTO orders VALUES (1, 'a', 10), (2, 'b', 20), (3, 'a', 30)")
    runner = ProcessorRunner(QueryDatabaseTable, {
        POOL: "db", "Table Name": "labelled", "Maximum-value Columns": "id", "Additional WHERE Clause": "label = 'Apples'",
        "Custom Query": "SELECT o.id, k.label, o.amount FROM orders o JOIN kinds k ON o.kind = k.kind"},
        services=db.services)
    runner.run()
    [flowfile] = runner.output("success")
    assert [(r["id"], r["label"]) for r in avro_rows(runner, flowfile)] == [(1, "Apples"), (3, "Apples")]
    assert flowfile.attributes["tablename"] == "labelled"
    db.sql("INSERT INTO orders VALUES (4, 'b', 40), (5, 'a', 50)")
    runner.run()
    assert [r["id"] for r in avro_rows(runner, runner.output("success")[1])] == [5]
    assert runner.context.state.get().get("labelled@!@id") == "5"


def test_maximum_number_of_fragments_and_output_batch_size(sqlite, engine):
    people(sqlite, 25)
    limited = qdt(sqlite, name="limited", **{"Maximum-value Columns": "id", "Max Rows Per FlowFile": 4,
                                             "Maximum Number of Fragments": 3})
    limited.run()
    assert [len(x) for x in ids(limited)] == [4, 4, 4]
    assert {f.attributes["fragment.count"] for f in limited.output("success")} == {"3"}
    assert limited.context.state.get().get("people@!@id") == "11"

    batched = qdt(sqlite, name="batched", **{"Maximum-value Columns": "id", "Max Rows Per FlowFile": 4,
                                             "Output Batch Size": 2})
    batched.run()
    sent = batched.output("success")
    assert [len(x) for x in ids(batched)] == [4, 4, 4, 4, 4, 4, 1]
    assert [f.attributes["fragment.index"] for f in sent] == [str(i) for i in range(7)]
    assert all("fragment.count" not in f.attributes and "maxvalue.id" not in f.attributes for f in sent)
    assert batched.context.state.get().get("people@!@id") == "24"


def test_query_database_table_record_writes_through_its_record_writer(db):
    people(db, 3)
    runner = qdt(db, QueryDatabaseTableRecord, **{"Maximum-value Columns": "id", "Columns to Return": "id, name"})
    runner.run()
    [flowfile] = runner.output("success")
    assert [json.loads(line) for line in runner.read(flowfile).decode().splitlines()] == [
        {"id": i, "name": f"person {i}"} for i in range(3)]
    assert {k: flowfile.attributes[k] for k in ("record.count", "querydbtable.row.count", "mime.type", "maxvalue.id")} == {
        "record.count": "3", "querydbtable.row.count": "3", "mime.type": "application/json", "maxvalue.id": "2"}
    add_people(db, [3])
    runner.run()
    assert runner.read(runner.output("success")[1]) == b'{"id":3,"name":"person 3"}'


def test_the_stateless_engine_keeps_the_maxima_of_a_trigger_that_succeeded(sqlite):
    people(sqlite, 2)
    runner = ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": "people", "Maximum-value Columns": "id"},
                             services=sqlite.services, engine="stateless")
    runner.run()
    add_people(sqlite, [2])
    runner.run()
    assert ids(runner) == [[0, 1], [2]]


def test_a_column_that_is_not_there_or_a_table_that_is_not_is_one_sentence(sqlite):
    people(sqlite, 1)
    with pytest.raises(DatabaseFetchError, match=r"^column 'nope' is not in the table or query 'people' \(its columns"):
        qdt(sqlite, **{"Maximum-value Columns": "nope"}).run()
    with pytest.raises(DatabaseFetchError, match="^the database refused 'SELECT \\* FROM missing': no such table"):
        ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": "missing"}, services=sqlite.services).run()


def test_a_maximum_value_column_of_mixed_types_says_so(sqlite):
    sqlite.sql("CREATE TABLE loose (id)", "INSERT INTO loose VALUES (1), ('x')")   # SQLite keeps either
    runner = ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": "loose", "Maximum-value Columns": "id"},
                             services=sqlite.services)
    with pytest.raises(ValueError, match=r"holds values that do not compare \('x' and 1\): CAST it to one type"):
        runner.run()
    assert runner.output("success") == [] and runner.context.state.get().values == {}


def test_a_database_that_is_down_is_one_sentence_and_changes_no_state_nor_loses_a_flowfile():
    down = {"db": (DBCPConnectionPool, {"Database Connection URL": f"jdbc:postgresql://127.0.0.1:{free_port()}/x"})}
    query = ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": "people", "Maximum-value Columns": "id"},
                            services=down)
    with pytest.raises(DatabaseUnavailableError, match=r"^cannot connect to postgresql\+psycopg://[^\n]*$"):
        query.run()
    assert query.output("success") == [] and query.context.state.get().values == {}
    fetch = ProcessorRunner(GenerateTableFetch, {POOL: "db", "Table Name": "${table}", "Maximum-value Columns": "id"},
                            services=down)
    sent = fetch.enqueue(b"kept", {"table": "people"})
    fetch.run()
    [failed] = fetch.output("failure")
    assert failed.uuid == sent.uuid and fetch.read(failed) == b"kept" and failed.penalized_until > 0
    assert failed.attributes["generatetablefetch.sql.error"].startswith("cannot connect to postgresql+psycopg://")
    assert fetch.output("success") == [] and fetch.context.state.get().values == {}


def test_a_restarted_flow_fetches_only_rows_added_since(sqlite, tmp_path):
    people(sqlite, 3)
    out = tmp_path / "out"

    def flow() -> Flow:
        built = Flow("incremental")
        built.add_service(DBCPConnectionPool, "db", properties=sqlite.properties)
        built.add(QueryDatabaseTable, "fetch", properties={POOL: "db", "Table Name": "people",
                                                          "Maximum-value Columns": "id"})
        built.add(PutFile, "write", properties={"Directory": str(out), "Conflict Resolution Strategy": "replace"},
                  auto_terminate=["success", "failure"])
        built.connect("fetch", "write")
        return built

    def written() -> list[int]:
        return sorted(row["id"] for f in out.iterdir() for row in fastavro.reader(io.BytesIO(f.read_bytes())))

    run_flow(flow(), tmp_path / "repository", engine="in-process", timeout=60)
    assert written() == [0, 1, 2]
    for f in out.iterdir():
        f.unlink()
    add_people(sqlite, [3, 4])
    run_flow(flow(), tmp_path / "repository", engine="in-process", timeout=60)
    assert written() == [3, 4]


# ------------------------------------------------------------------------------ GenerateTableFetch
def gtf(db: Database, **properties) -> ProcessorRunner:
    return ProcessorRunner(GenerateTableFetch, {POOL: "db", "Table Name": "people", **properties},
                           services=db.services, incoming_connection=False)   # a source


def fetched(db: Database, runner: ProcessorRunner, start: int = 0) -> list[list[int]]:
    """The ids each statement the runner made fetches, run by ExecuteSQL as in NiFi's flow."""
    execute = ProcessorRunner(ExecuteSQL, {POOL: "db"}, services=db.services)
    pages = runner.output("success")[start:]
    for page in pages:
        execute.enqueue(runner.read(page), page.attributes)
    execute.run(len(pages))
    assert execute.output("failure") == []
    return [[row["id"] for row in avro_rows(execute, f)] for f in execute.output("success")]


def test_generate_table_fetch_pages_the_new_rows_and_keeps_the_maxima(db):
    people(db, 7)
    runner = gtf(db, **{"Maximum-value Columns": "id", "Partition Size": 3, "Columns to Return": "id, name"})
    runner.run()
    assert fetched(db, runner) == [[0, 1, 2], [3, 4, 5], [6]]
    pages = runner.output("success")
    assert runner.read(pages[1]) == b"SELECT id, name FROM people WHERE id <= 6 ORDER BY id LIMIT 3 OFFSET 3"
    assert {k: pages[1].attributes[k] for k in pages[1].attributes if k.startswith(("generatetablefetch", "fragment."))
            and k != "fragment.identifier"} == {
        "generatetablefetch.tableName": "people", "generatetablefetch.columnNames": "id, name",
        "generatetablefetch.maxColumnNames": "id", "generatetablefetch.whereClause": "id <= 6",
        "generatetablefetch.limit": "3", "generatetablefetch.offset": "3", "fragment.index": "1",
        "fragment.count": "3"}
    assert dict(runner.context.state.get().values) == {"people@!@id": "6"}
    add_people(db, [7, 8])
    runner.run()
    assert fetched(db, runner, 3) == [[7, 8]]
    assert runner.read(runner.output("success")[3]) == (
        b"SELECT id, name FROM people WHERE id > 6 AND id <= 8 ORDER BY id LIMIT 3")
    runner.run()   # nothing new: no statement
    assert len(runner.output("success")) == 4


def test_generate_table_fetch_bounds_pages_by_a_timestamps_maximum(db):
    people(db, 3)
    runner = gtf(db, **{"Maximum-value Columns": "created_on", "Partition Size": 2})
    runner.run()
    kept = "2000-01-01 00:02:00" + ("" if db.kind == "sqlite" else ".0")   # SQLite's text as stored
    assert runner.read(runner.output("success")[1]) == (
        f"SELECT * FROM people WHERE created_on <= '{kept}' ORDER BY created_on LIMIT 2 OFFSET 2".encode())
    assert fetched(db, runner) == [[0, 1], [2]]
    add_people(db, [3])
    runner.run()
    assert fetched(db, runner, 2) == [[3]]


def test_generate_table_fetch_by_a_columns_values(db):
    people(db, 10)
    runner = gtf(db, **{"Partition Size": 4, "Column for Value Partitioning": "id", "Additional WHERE Clause": "id >= 2"})
    runner.run()
    assert fetched(db, runner) == [[2, 3, 4, 5], [6, 7, 8, 9]]
    assert runner.read(runner.output("success")[1]) == (
        b"SELECT * FROM people WHERE (id >= 2) AND id <= 9 AND id >= 6")


def test_generate_table_fetch_takes_its_table_from_incoming_flowfiles_and_sends_a_failing_one_to_failure(sqlite, engine):
    people(sqlite, 3)
    sqlite.sql("CREATE TABLE pets (id INTEGER)", "INSERT INTO pets VALUES (7)")
    runner = ProcessorRunner(GenerateTableFetch, {POOL: "db", "Table Name": "${table}", "Maximum-value Columns": "id",
                                                  "Partition Size": 0}, services=sqlite.services)
    runner.run()   # connected, and no FlowFile (another task took it): nothing done
    assert runner.output("success") == [] and runner.context.state.get().values == {}
    for table in ("people", "pets", "nope"):
        runner.enqueue(b"", {"table": table})
    runner.run(3)
    assert [runner.read(f) for f in runner.output("success")] == [b"SELECT * FROM people WHERE id <= 2",
                                                                 b"SELECT * FROM pets WHERE id <= 7"]
    assert [f.attributes["table"] for f in runner.output("success")] == ["people", "pets"]   # the input's
    [failed] = runner.output("failure")
    assert failed.attributes["generatetablefetch.sql.error"].startswith("the database refused")
    assert failed.penalized_until > 0 and runner.input_count == 0
    assert dict(runner.context.state.get().values) == {"people@!@id": "2", "pets@!@id": "7"}


def test_generate_table_fetch_reads_an_older_nifis_plain_key_only_for_a_fixed_table(sqlite):
    people(sqlite, 3)
    statements = []
    for table in ("people", "${table}"):
        runner = ProcessorRunner(GenerateTableFetch, {POOL: "db", "Table Name": table, "Maximum-value Columns": "id"},
                                 services=sqlite.services)
        runner.context.state.set({"id": "0"})   # what NiFi before 1.2 kept
        runner.enqueue(b"", {"table": "people"})
        runner.run()
        statements += [runner.read(f) for f in runner.output("success")]
    assert statements == [b"SELECT * FROM people WHERE id > 0 AND id <= 2 ORDER BY id LIMIT 10000",
                          b"SELECT * FROM people WHERE id <= 2 ORDER BY id LIMIT 10000"]


def test_generate_table_fetch_can_send_an_empty_flowfile_when_there_is_nothing_to_fetch(sqlite):
    people(sqlite, 0)
    runner = gtf(sqlite, **{"Output Empty FlowFile on Zero Results": "true"})
    runner.run()
    [empty] = runner.output("success")
    assert runner.read(empty) == b"" and empty.attributes["generatetablefetch.whereClause"] == "1=1"


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_query_database_table_loads_under_nifi_2s_names(sqlite):
    people(sqlite, 3)
    fetch = processor("root", "Fetch people", "org.apache.nifi.processors.standard.QueryDatabaseTable", {
        "Database Connection Pooling Service": "db", "db-fetch-db-type": "Generic", "Table Name": "people",
        "Columns to Return": None, "db-fetch-where-clause": "id > 0", "db-fetch-sql-query": None,
        "Maximum-value Columns": "id", "Max Wait Time": "0 seconds", "Fetch Size": "0", "qdbt-max-rows": "1",
        "qdbt-output-batch-size": "0", "qdbt-max-frags": "0", "dbf-normalize": "false",
        "transaction-isolation-level": "8", "dbf-user-logical-types": "false", "dbf-default-precision": "10",
        "dbf-default-scale": "0", "initial.maxvalue.id": "0"}, auto_terminate=["success"])
    root = group("root", "Tables", None, None, processors=[fetch])
    root["controllerServices"] = [{"identifier": "db", "name": "Orders DB", "type": "org.apache.nifi.dbcp.DBCPConnectionPool",
                                   "properties": {"Database Connection URL": sqlite.nifi_url}}]
    flow = flow_from_nifi(snapshot(root, {}))
    properties = flow.processors["Fetch people"].properties
    assert {k: properties[k] for k in ("Database Type", "Additional WHERE Clause", "Max Rows Per FlowFile",
                                       "Transaction Isolation Level", "initial.maxvalue.id")} == {
        "Database Type": "Generic", "Additional WHERE Clause": "id > 0", "Max Rows Per FlowFile": "1",
        "Transaction Isolation Level": "TRANSACTION_SERIALIZABLE", "initial.maxvalue.id": "0"}
    runner = ProcessorRunner(QueryDatabaseTable, {**properties, POOL: "db"}, services=sqlite.services)
    runner.run()
    assert ids(runner) == [[1], [2]]
    assert state_key('"People"', "[ID]") == "people@!@id"


def test_the_transaction_isolation_level_is_the_querys(request, tmp_path):
    db = Database("postgresql", request, tmp_path)
    runner = ProcessorRunner(QueryDatabaseTable, {
        POOL: "db", "Table Name": "settings", "Transaction Isolation Level": "TRANSACTION_SERIALIZABLE",
        "Custom Query": "SELECT 1 AS id, current_setting('transaction_isolation') AS level"}, services=db.services)
    runner.run()
    assert [row["level"] for row in avro_rows(runner, runner.output("success")[0])] == ["serializable"]
    db.engine.dispose()


def test_a_time_zones_timestamp_is_kept_in_utc_and_rows_come_fetch_size_at_a_time(request, tmp_path):
    db = Database("postgresql", request, tmp_path)
    db.sql("CREATE TABLE events (id INTEGER, at TIMESTAMPTZ)",
           *(f"INSERT INTO events VALUES ({i}, '2024-01-01 0{i}:00:00+02:00')" for i in range(1, 8)))
    runner = ProcessorRunner(QueryDatabaseTable, {
        POOL: "db", "Table Name": "events", "Maximum-value Columns": "at", "Fetch Size": 2, "Set Auto Commit": "false",
        "Max Rows Per FlowFile": 3}, services=db.services)
    runner.run()
    assert ids(runner) == [[1, 2, 3], [4, 5, 6], [7]]
    assert runner.context.state.get().get("events@!@at") == "2024-01-01 05:00:00.0+00:00"
    db.sql("INSERT INTO events VALUES (8, '2024-01-01 05:00:00.5+00:00'), (9, '2024-01-01 06:00:00+02:00')")
    runner.run()
    assert ids(runner)[3:] == [[8]]
    db.engine.dispose()


def test_a_failure_after_output_batches_were_committed_sends_those_rows_again_and_loses_none(request, tmp_path):
    """The duplicates bound of docs/sql.md: the maxima are written with the trigger's last commit,
    so rows of batches committed before a failure come again, and no row is skipped."""
    db = Database("postgresql", request, tmp_path)
    people(db, 5)
    db.sql("CREATE TABLE divisor (d INTEGER)", "INSERT INTO divisor VALUES (0)")
    runner = ProcessorRunner(QueryDatabaseTable, {
        POOL: "db", "Table Name": "rows", "Maximum-value Columns": "id", "Max Rows Per FlowFile": 1,
        "Output Batch Size": 1, "Fetch Size": 1, "Set Auto Commit": "false",   # row by row from the server
        "Custom Query": "SELECT id, 10 / (CASE WHEN id = 3 THEN (SELECT d FROM divisor) ELSE 1 END) AS x "
                        "FROM people"}, services=db.services)
    with pytest.raises(DatabaseFetchError, match="division by zero"):
        runner.run()
    assert ids(runner) == [[0], [1], [2]] and runner.context.state.get().values == {}
    db.sql("UPDATE divisor SET d = 1")
    runner.run()
    assert ids(runner) == [[0], [1], [2], [0], [1], [2], [3], [4]]
    assert runner.context.state.get().get("rows@!@id") == "4"
    db.engine.dispose()
