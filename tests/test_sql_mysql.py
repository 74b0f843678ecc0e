"""The SQL processors against the session's real MariaDB (tests/real_services.py) through PyMySQL:
the JDBC URL mapping and its TLS modes, ExecuteSQL's Avro types (as MySQL Connector/J reports them) read back with
fastavro, ExecuteSQLRecord, PutDatabaseRecord's statement types and routing by MySQL's error
numbers, PutSQL with sql.args, ConvertJSONToSQL into PutSQL, QueryDatabaseTable fetching only new
rows and GenerateTableFetch's pages. Each test has a table of its own."""

from __future__ import annotations

import datetime as dt
import io
import json
import threading
import time
from decimal import Decimal

import fastavro
import pytest

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import ExecuteSQL, ExecuteSQLRecord
from flowactors.processors.sql import (ConvertJSONToSQL, GenerateTableFetch, PutDatabaseRecord, PutSQL,
                                      QueryDatabaseTable)
from flowactors.processors.sql.result_sets import run_query
from flowactors.processors.sql.table_schema import is_transient
from flowactors.sdk.services import DatabaseUnavailableError
from flowactors.services import DBCPConnectionPool, JsonTreeReader
from flowactors.services.database import sqlalchemy_url
from flowactors.services.records.json import JsonRecordSetWriter
from flowactors.testing import ProcessorRunner, enable_service
from nifi_flows import group, processor, snapshot, uses
from real_services import free_port
from sql_helpers import engine_fixture, rows, table_fixture

POOL = "Database Connection Pooling Service"


engine = engine_fixture("mariadb")
table = table_fixture()


def sql(engine, *statements: str) -> None:
    with engine.begin() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)


def services(mariadb) -> dict:
    """The pool as a NiFi flow names it: the JDBC URL, the driver's class, the user and password."""
    return {"db": (DBCPConnectionPool, {"Database Connection URL": mariadb.jdbc_url + "?characterEncoding=UTF-8",
                                        "Database Driver Class Name": "org.mariadb.jdbc.Driver",
                                        "Database User": mariadb.user, "Password": mariadb.password})}


def avro(content: bytes) -> tuple[dict, list[dict]]:
    reader = fastavro.reader(io.BytesIO(content))
    return reader.writer_schema, list(reader)


def field_types(schema: dict) -> dict[str, object]:
    return {f["name"]: f["type"][1] for f in schema["fields"]}


# ------------------------------------------------------------------------------ the JDBC URL
@pytest.mark.parametrize("jdbc, expected", [
    ("jdbc:mysql://db.example:3307/shop?connectTimeout=1500&characterEncoding=UTF-8&useSSL=false",
     "mysql+pymysql://db.example:3307/shop?charset=utf8mb4&connect_timeout=2&ssl_disabled=true"),
    ("jdbc:mariadb://db.example/shop?user=nifi&password=s&sslMode=verify-full",
     "mysql+pymysql://nifi:s@db.example/shop?ssl_verify_identity=true"),
    ("jdbc:mysql://db.example/shop?useSSL=true&sslMode=REQUIRED&useUnicode=true",
     "mysql+pymysql://db.example/shop?ssl_check_hostname=false"),
    ("jdbc:mysql://[::1]:3306/shop?sslMode=VERIFY_CA&connectTimeout=0",
     "mysql+pymysql://[::1]:3306/shop?ssl_verify_cert=true"),
    ("mysql://u:p@h/d", "mysql+pymysql://u:p@h/d"),
])
def test_a_mysql_or_mariadb_jdbc_url_maps_to_pymysqls(jdbc, expected):
    assert sqlalchemy_url(jdbc).render_as_string(hide_password=False) == expected


@pytest.mark.parametrize("url, says", [
    ("jdbc:mysql://h/d?serverTimezone=UTC", "the JDBC parameter serverTimezone='UTC'"),
    ("jdbc:mysql://h/d?characterEncoding=UTF-16", "the JDBC parameter characterEncoding='UTF-16'"),
    ("jdbc:mysql://a:3306,b:3306/d", "names several hosts"),
    ("jdbc:mysql:loadbalance://a/d", "load balancing, replication"),
])
def test_a_mysql_url_it_cannot_map_is_one_sentence(url, says):
    with pytest.raises(ValueError) as caught:
        enable_service(DBCPConnectionPool, {"Database Connection URL": url})
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_mariadb_sqlalchemy_url_runs_the_processors_too(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, name VARCHAR(10)")
    url = mariadb.url.replace("mysql+pymysql://", "mariadb://")   # PyMySQL, SQLAlchemy's mariadb dialect
    pool = {"db": (DBCPConnectionPool, {"Database Connection URL": url})}
    writer = ProcessorRunner(PutDatabaseRecord, {"Record Reader": "reader", POOL: "db", "Statement Type": "UPSERT",
                                                 "Table Name": name, "Quote Column Identifiers": "true"},
                             services={**pool, "reader": (JsonTreeReader, {})})
    for content in (b'[{"id": 1, "name": "a"}]', b'[{"id": 1, "name": "b"}, {"id": 2, "name": "c"}]'):
        writer.enqueue(content)
    writer.run(2)
    assert len(writer.output("success")) == 2
    reader = ProcessorRunner(ExecuteSQL, {POOL: "db", "SQL Query": f"SELECT * FROM {name} ORDER BY id"},
                             services=pool, incoming_connection=False)
    reader.run()
    assert avro(reader.read(reader.output("success")[0]))[1] == [{"id": 1, "name": "b"}, {"id": 2, "name": "c"}]


def test_the_pool_connects_with_the_jdbc_url_user_and_password(mariadb):
    service = enable_service(DBCPConnectionPool, services(mariadb)["db"][1])
    try:
        with service.connection() as connection:
            assert connection.exec_driver_sql("SELECT CURRENT_USER(), @@character_set_client").first() == (
                f"{mariadb.user}@%", "utf8mb4")
    finally:
        service.on_disabled(None)


def cipher(url: str, **dynamic: str) -> str:
    """The TLS cipher of a connection the pool makes to ``url`` ('' without TLS)."""
    service = enable_service(DBCPConnectionPool, {"Database Connection URL": url, **dynamic})
    try:
        with service.connection() as connection:
            return connection.exec_driver_sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'").first()[1]
    finally:
        service.on_disabled(None)


def test_ssl_modes_reach_the_server_as_connector_j_means_them(mariadb):
    base = f"{mariadb.jdbc_url}?user={mariadb.user}&password={mariadb.password}"
    assert cipher(base + "&sslMode=DISABLED") == "" and cipher(base + "&useSSL=false") == ""
    assert cipher(base) != ""   # PREFERRED: the server offers TLS
    assert cipher(base + "&sslMode=REQUIRED") != ""   # the test CA's certificate, not checked
    assert cipher(base + "&sslMode=VERIFY_CA", ssl_ca=str(mariadb.tls.ca_pem)) != ""
    assert cipher(base + "&sslMode=VERIFY_IDENTITY", ssl_ca=str(mariadb.tls.ca_pem)) != ""   # 127.0.0.1 is its name
    with pytest.raises(DatabaseUnavailableError) as caught:   # the test CA is not one the system trusts
        cipher(base + "&sslMode=VERIFY_CA")
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value) and "flowactors-test" not in str(caught.value)


# ------------------------------------------------------------------------------ reading
TYPES = """id INT PRIMARY KEY, tiny TINYINT, flag TINYINT(1), flag_bool BOOLEAN, small SMALLINT,
    small_u SMALLINT UNSIGNED, medium MEDIUMINT, int_u INT UNSIGNED, big BIGINT, big_u BIGINT UNSIGNED,
    ratio FLOAT, exact DOUBLE, amount DECIMAL(8,3), day DATE, at_time TIME, stamp DATETIME(3), ts TIMESTAMP NULL,
    yr YEAR, name VARCHAR(20), code CHAR(3), note TEXT, raw BLOB, bin VARBINARY(4), doc JSON,
    size ENUM('S','M','L'), bit1 BIT(1)"""
TYPES_ROW = """(1, -5, 1, 0, 7, 65535, 8388607, 4294967295, 9000000000, 18446744073709551615, 1.5, 2.25, 12.5,
    '2024-02-29', '13:45:30', '2024-02-29 13:45:30.250', '2024-02-29 13:45:30', 2024, 'café', 'abc', 'long text',
    x'00ff', x'cafe', '{"a": [1, 2]}', 'M', b'1')"""


def test_mysql_types_map_to_the_avro_types_nifi_writes_with_connector_js_types(mariadb, engine, table):
    name = table(TYPES)
    sql(engine, f"INSERT INTO {name} VALUES {TYPES_ROW}", f"INSERT INTO {name} (id) VALUES (2)")
    run = ProcessorRunner(ExecuteSQL, {POOL: "db", "SQL Query": f"SELECT * FROM {name} ORDER BY id"},
                          services=services(mariadb), incoming_connection=False)
    run.run()
    [flowfile] = run.output("success")
    schema, records = avro(run.read(flowfile))
    assert schema["name"] in (name, f"any.data.{name}")
    assert field_types(schema) == {
        "id": "int", "tiny": "int", "flag": "boolean", "flag_bool": "boolean", "small": "int", "small_u": "int",
        "medium": "int", "int_u": "long", "big": "long", "big_u": "string", "ratio": "float", "exact": "double",
        "amount": "string", "day": "string", "at_time": "string", "stamp": "string", "ts": "string", "yr": "int",
        "name": "string", "code": "string", "note": "string", "raw": "bytes", "bin": "bytes", "doc": "string",
        "size": "string", "bit1": "boolean"}
    assert records[0] == {
        "id": 1, "tiny": -5, "flag": True, "flag_bool": False, "small": 7, "small_u": 65535, "medium": 8388607,
        "int_u": 4294967295, "big": 9000000000, "big_u": "18446744073709551615", "ratio": 1.5, "exact": 2.25,
        "amount": "12.500", "day": "2024-02-29", "at_time": "13:45:30", "stamp": "2024-02-29 13:45:30.25",
        "ts": "2024-02-29 13:45:30.0", "yr": 2024, "name": "café", "code": "abc", "note": "long text",
        "raw": b"\x00\xff", "bin": b"\xca\xfe", "doc": '{"a": [1, 2]}', "size": "M", "bit1": True}
    assert records[1] == {key: None for key in records[0]} | {"id": 2}
    assert flowfile.attributes["executesql.row.count"] == "2"


def test_logical_types_decimal_dates_and_times(mariadb, engine, table):
    name = table("amount DECIMAL(8,3), day DATE, at_time TIME, stamp DATETIME(3)")
    sql(engine, f"INSERT INTO {name} VALUES (12.5, '2024-02-29', '13:45:30.250', '2024-02-29 13:45:30.250')")
    run = ProcessorRunner(ExecuteSQL, {POOL: "db", "SQL Query": f"SELECT * FROM {name}",
                                       "Use Avro Logical Types": "true"}, services=services(mariadb),
                          incoming_connection=False)
    run.run()
    schema, [record] = avro(run.read(run.output("success")[0]))
    assert field_types(schema)["amount"] == {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 3}
    assert record["amount"] == Decimal("12.500") and record["day"] == dt.date(2024, 2, 29)
    assert record["at_time"] == dt.time(13, 45, 30)   # MariaDB's TIME without a fraction drops the millis
    assert record["stamp"] == dt.datetime(2024, 2, 29, 13, 45, 30, 250000).astimezone(dt.timezone.utc)


def test_sql_args_fetch_size_streaming_and_a_max_wait_time(mariadb, engine, table):
    name = table("n INT, label VARCHAR(10)")
    sql(engine, f"INSERT INTO {name} SELECT seq, CONCAT('n', seq) FROM seq_1_to_2500")
    run = ProcessorRunner(ExecuteSQL, {POOL: "db", "Fetch Size": "100", "Max Rows Per FlowFile": "1000",
                                       "Max Wait Time": "${timeout}"}, services=services(mariadb))
    run.enqueue(f"SELECT n FROM {name} WHERE label LIKE '%' AND n > ? ORDER BY n".encode(),
                {"sql.args.1.type": "4", "sql.args.1.value": "500", "timeout": "5 sec"})
    run.enqueue(b"SELECT SLEEP(3) AS s FROM DUAL", {"timeout": "1 sec"})
    run.enqueue(b"SELECT @@max_statement_time AS t", {"timeout": "0 sec"})
    run.run(3)
    made = run.output("success")
    assert [f.attributes["executesql.row.count"] for f in made[:2]] == ["1000", "1000"]
    assert [r["n"] for f in made[:2] for r in avro(run.read(f))[1]] == list(range(501, 2501))
    # MariaDB ends a statement past max_statement_time with an error (MySQL's SELECT with a 3024)
    [failed] = run.output("failure")
    assert "max_statement_time" in failed.attributes["executesql.error.message"]
    assert avro(run.read(made[2]))[1] == [{"t": 0.0}]   # the pooled connection's timeout put back


def test_fetch_size_streams_a_select_from_an_unbuffered_cursor(mariadb, engine, table):
    from pymysql.cursors import SSCursor

    name = table("n INT")
    sql(engine, f"INSERT INTO {name} SELECT seq FROM seq_1_to_25")
    with engine.connect() as connection:
        with run_query(connection, f"SELECT n FROM {name} ORDER BY n", fetch_size=10) as query:
            assert query.server_side and isinstance(query._cursor, SSCursor)
            [result] = list(query.results())
            assert [row[0] for row in result.rows()] == list(range(1, 26))
        with run_query(connection, "SHOW VARIABLES LIKE 'version'", fetch_size=10) as query:
            assert not query.server_side   # not a SELECT: buffered


@pytest.mark.parametrize("engine_name", ["in-process", "stateless"])
def test_execute_sql_record_writes_json(mariadb, engine, table, engine_name):
    name = table("id INT PRIMARY KEY, flag TINYINT(1), amount DECIMAL(6,2), name VARCHAR(10)")
    sql(engine, f"INSERT INTO {name} VALUES (1, 1, 2.5, 'Ada'), (2, NULL, NULL, NULL)")
    run = ProcessorRunner(ExecuteSQLRecord, {POOL: "db", "Record Writer": "writer",
                                             "SQL Query": f"SELECT * FROM {name} ORDER BY id"},
                          services={**services(mariadb), "writer": (JsonRecordSetWriter, {})},
                          incoming_connection=False,
                          engine=engine_name)
    run.run()
    [flowfile] = run.output("success")
    assert json.loads(run.read(flowfile)) == [{"id": 1, "flag": True, "amount": "2.50", "name": "Ada"},
                                              {"id": 2, "flag": None, "amount": None, "name": None}]


# ------------------------------------------------------------------------------ PutDatabaseRecord
def put(mariadb, engine_name: str = "in-process", **properties) -> ProcessorRunner:
    return ProcessorRunner(PutDatabaseRecord, {"Record Reader": "reader", POOL: "db", **properties},
                           services={**services(mariadb), "reader": (JsonTreeReader, {})}, engine=engine_name)


def put_records(mariadb, *items, engine_name: str = "in-process", **properties) -> ProcessorRunner:
    runner = put(mariadb, engine_name, **properties)
    runner.enqueue(json.dumps(list(items)).encode())
    runner.run()
    return runner


PEOPLE = "id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, code INT, born DATE, `select` VARCHAR(5)"


@pytest.mark.parametrize("engine_name", ["in-process", "stateless"])
def test_put_database_record_insert_update_upsert_insert_ignore_and_delete(mariadb, engine, table, engine_name):
    name = table(PEOPLE)
    done = put_records(mariadb, {"id": 1, "name": "Ada", "code": 5, "born": "1815-12-10", "select": "x"},
                       {"id": 2, "name": "Bob", "code": None, "born": None, "select": None},
                       **{"Statement Type": "INSERT", "Table Name": name, "Quote Column Identifiers": "true"})
    assert len(done.output("success")) == 1
    put_records(mariadb, {"id": 2, "name": "Robert", "code": 7},
                engine_name=engine_name, **{"Statement Type": "UPDATE", "Table Name": name})
    put_records(mariadb, {"id": 1, "name": "Ada L", "code": 6}, {"id": 3, "name": "Cy", "code": 3},
                engine_name=engine_name, **{"Statement Type": "UPSERT", "Table Name": name})
    put_records(mariadb, {"id": 3, "name": "kept?", "code": 0}, {"id": 4, "name": "Di", "code": 4},
                engine_name=engine_name, **{"Statement Type": "INSERT_IGNORE", "Table Name": name})
    assert rows(engine, f"SELECT id, name, code, born, `select` FROM {name} ORDER BY id") == [
        (1, "Ada L", 6, dt.date(1815, 12, 10), "x"), (2, "Robert", 7, None, None), (3, "Cy", 3, None, None),
        (4, "Di", 4, None, None)]
    deleted = put_records(mariadb, {"id": 2, "name": "Robert", "code": 7, "born": None},
                          {"id": 4, "name": "Di", "code": 5, "born": None},
                          **{"Statement Type": "DELETE", "Table Name": name})   # a null matches a null (<=>)
    assert len(deleted.output("success")) == 1
    assert [r[0] for r in rows(engine, f"SELECT id FROM {name} ORDER BY id")] == [1, 3, 4]


def test_an_auto_increment_column_is_not_required_and_a_tinyint_1_takes_booleans(mariadb, engine, table):
    name = table("id INT AUTO_INCREMENT PRIMARY KEY, active BOOLEAN NOT NULL, level TINYINT NOT NULL")
    done = put_records(mariadb, {"active": 5, "level": True}, {"active": 0, "level": False},
                       **{"Statement Type": "INSERT", "Table Name": name})
    assert len(done.output("success")) == 1, done.output("failure")
    assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [(1, 1, 1), (2, 0, 0)]


def test_the_catalog_names_the_database_and_quoted_table_names_take_backticks(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, `full name` VARCHAR(10)")
    done = put_records(mariadb, {"id": 1, "full name": "Ada"}, **{
        "Statement Type": "INSERT", "Database Name": mariadb.database, "Table Name": name,
        "Quote Table Identifiers": "true", "Quote Column Identifiers": "true", "Translate Field Names": "false"})
    assert len(done.output("success")) == 1, done.output("failure")
    assert rows(engine, f"SELECT * FROM {name}") == [(1, "Ada")]


def test_a_duplicate_key_or_a_missing_parent_goes_to_failure_and_writes_nothing(mariadb, engine, table):
    parent = table("id INT PRIMARY KEY", "_p")
    name = table(f"id INT PRIMARY KEY, parent INT, FOREIGN KEY (parent) REFERENCES {parent} (id)")
    sql(engine, f"INSERT INTO {parent} VALUES (1)", f"INSERT INTO {name} VALUES (1, 1)")
    for items, says in (([{"id": 2, "parent": 1}, {"id": 1, "parent": 1}], "Duplicate entry"),
                        ([{"id": 3, "parent": 9}], "foreign key constraint fails")):
        runner = put_records(mariadb, *items, **{"Statement Type": "INSERT", "Table Name": name})
        [failed] = runner.output("failure")
        assert not runner.output("retry")
        assert says in failed.attributes["putdatabaserecord.error"]
    assert rows(engine, f"SELECT id FROM {name}") == [(1,)]


def test_a_lock_wait_timeout_goes_to_retry(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, code INT")
    sql(engine, f"INSERT INTO {name} VALUES (1, 0)")
    with engine.connect() as holder:
        holder.exec_driver_sql(f"UPDATE {name} SET code = 1 WHERE id = 1")   # holds the row's lock, uncommitted
        runner = put_records(mariadb, {"id": 1, "code": 2}, **{
            "Statement Type": "UPDATE", "Table Name": name,
            "Pre-Processing SQL": "SET SESSION innodb_lock_wait_timeout = 1"})
        [retried] = runner.output("retry")
        assert "Lock wait timeout" in retried.attributes["putdatabaserecord.error"]
        holder.rollback()
    assert rows(engine, f"SELECT code FROM {name}") == [(0,)]


def test_a_statement_past_max_wait_time_goes_to_retry(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, t DOUBLE")
    runner = put(mariadb, **{"Statement Type": "INSERT", "Table Name": name, "Max Wait Time": "1 sec",
                             "Pre-Processing SQL": "${pre}", "Post-Processing SQL": "${post}"})
    runner.enqueue(json.dumps([{"id": 1}]).encode(), {"pre": "SELECT SLEEP(3)"})
    runner.enqueue(json.dumps([{"id": 2}]).encode(), {"post": f"UPDATE {name} SET t = @@max_statement_time"})
    runner.run(2)
    [retried] = runner.output("retry")
    assert "max_statement_time exceeded" in retried.attributes["putdatabaserecord.error"]
    assert len(runner.output("success")) == 1
    assert rows(engine, f"SELECT id, t FROM {name} ORDER BY id") == [(2, 1.0)]   # MariaDB's limit, in seconds


def test_a_deadlock_goes_to_retry(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, code INT")
    sql(engine, f"INSERT INTO {name} SELECT seq, 0 FROM seq_1_to_50")
    runner = put(mariadb, **{"Statement Type": "UPDATE", "Table Name": name, "Maximum Batch Size": "1"})
    runner.enqueue(json.dumps([{"id": 1, "code": 1}, {"id": 2, "code": 1}]).encode())
    with engine.connect() as holder:
        # the heavier transaction (49 rows), so InnoDB makes the processor's the deadlock's victim
        holder.exec_driver_sql(f"UPDATE {name} SET code = 2 WHERE id >= 2")
        writing = threading.Thread(target=runner.run)
        writing.start()   # updates row 1, then waits for row 2
        deadline = time.monotonic() + 20
        while not rows(engine, f"SELECT 1 FROM information_schema.processlist WHERE info LIKE 'UPDATE {name} %%'"):
            assert time.monotonic() < deadline, "the processor never waited for the row's lock"
            time.sleep(0.02)
        holder.exec_driver_sql(f"UPDATE {name} SET code = 2 WHERE id = 1")   # closes the cycle
        holder.commit()
        writing.join(30)
    [retried] = runner.output("retry")
    assert "Deadlock found" in retried.attributes["putdatabaserecord.error"]
    assert rows(engine, f"SELECT DISTINCT code FROM {name}") == [(2,)]   # nothing of the FlowFile's kept


def test_error_numbers_decide_retry_or_failure():
    import pymysql

    for code, transient in ((1213, True), (1205, True), (2013, True), (1969, True), (1062, False), (1452, False)):
        assert is_transient(pymysql.err.OperationalError(code, "x")) is transient


# ------------------------------------------------------------------------------ PutSQL, ConvertJSONToSQL
def test_put_sql_binds_sql_args_and_gives_the_generated_key(mariadb, engine, table):
    name = table("id INT AUTO_INCREMENT PRIMARY KEY, note TEXT, amount DECIMAL(6,2), day DATE, raw BLOB")
    runner = ProcessorRunner(PutSQL, {"JDBC Connection Pool": "db", "Obtain Generated Keys": "true"},
                             services=services(mariadb))
    statement = f"INSERT INTO {name} (note, amount, day, raw) VALUES (?, ?, ?, ?)".encode()
    runner.enqueue(statement, {"sql.args.1.type": "12", "sql.args.1.value": "50% off, '?' kept",
                               "sql.args.2.type": "3", "sql.args.2.value": "9.99", "sql.args.3.type": "91",
                               "sql.args.3.value": "2024-01-31", "sql.args.4.type": "-3",
                               "sql.args.4.value": "CAFE", "sql.args.4.format": "hex"})
    runner.run()
    runner.enqueue(f"INSERT INTO {name} (id, note) VALUES (1, 'again')".encode())   # a duplicate key
    runner.run()
    [done] = runner.output("success")
    assert done.attributes["sql.generated.key"] == "1"
    [failed] = runner.output("failure")
    assert failed.attributes["error.code"] == "1062" and "Duplicate entry" in failed.attributes["error.message"]
    assert rows(engine, f"SELECT * FROM {name}") == [
        (1, "50% off, '?' kept", Decimal("9.99"), dt.date(2024, 1, 31), b"\xca\xfe")]


def test_convert_json_to_sql_then_put_sql(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, full_name VARCHAR(20) NOT NULL, active BOOLEAN, joined DATETIME")
    for kind, document in (("INSERT", [{"id": 1, "FullName": "Ada", "active": True, "joined": "2024-01-02 03:04:05"},
                                       {"id": 2, "full_name": "Bob", "active": False}]),
                           ("UPDATE", {"id": 2, "full_name": "Robert"}), ("DELETE", {"id": 1})):
        converter = ProcessorRunner(ConvertJSONToSQL, {"JDBC Connection Pool": "db", "Statement Type": kind,
                                                       "Table Name": name, "Quote Column Identifiers": "true",
                                                       "Unmatched Column Behavior": "Ignore Unmatched Columns"},
                                    services=services(mariadb))
        converter.enqueue(json.dumps(document).encode())
        converter.run()
        putter = ProcessorRunner(PutSQL, {"JDBC Connection Pool": "db"}, services=services(mariadb))
        for flowfile in converter.output("sql"):
            putter.enqueue(converter.read(flowfile), flowfile.attributes)
        putter.run()
        assert len(putter.output("success")) == len(converter.output("sql")) > 0, putter.output("failure")
        if kind == "INSERT":
            first = converter.output("sql")[0]
            assert converter.read(first).decode().startswith(f"INSERT INTO {name} (`id`, ")
            assert (first.attributes["sql.args.3.type"], first.attributes["sql.args.3.value"]) == ("-7", "1")
            assert rows(engine, f"SELECT * FROM {name} ORDER BY id") == [
                (1, "Ada", 1, dt.datetime(2024, 1, 2, 3, 4, 5)), (2, "Bob", 0, None)]
    assert rows(engine, f"SELECT * FROM {name}") == [(2, "Robert", 0, None)]


# ------------------------------------------------------------------------------ incremental fetch
def test_query_database_table_fetches_only_new_rows(mariadb, engine, table):
    name = table("id INT NOT NULL, name VARCHAR(20), created DATETIME")
    sql(engine, f"INSERT INTO {name} VALUES (0, 'a', '2024-01-01 00:00:00'), (1, 'b', '2024-01-01 00:01:00')")
    runner = ProcessorRunner(QueryDatabaseTable, {POOL: "db", "Table Name": name,
                                                  "Maximum-value Columns": "id, created", "Fetch Size": "1",
                                                  "Database Type": "MySQL",
                                                  "Transaction Isolation Level": "TRANSACTION_READ_COMMITTED"},
                             services=services(mariadb))
    runner.run()
    sql(engine, f"INSERT INTO {name} VALUES (2, 'c', '2024-01-01 00:02:00')")
    runner.run()
    runner.run()   # nothing new
    fetched = [[r["id"] for r in avro(runner.read(f))[1]] for f in runner.output("success")]
    assert fetched == [[0, 1], [2]]
    assert dict(runner.context.state.get().values) == {f"{name}@!@id": "2",
                                                       f"{name}@!@created": "2024-01-01 00:02:00.0"}


def test_generate_table_fetch_pages_run_by_execute_sql(mariadb, engine, table):
    name = table("id INT NOT NULL, name VARCHAR(20)")
    sql(engine, f"INSERT INTO {name} SELECT seq, CONCAT('p', seq) FROM seq_0_to_6")
    runner = ProcessorRunner(GenerateTableFetch, {POOL: "db", "Table Name": name, "Maximum-value Columns": "id",
                                                  "Partition Size": "3", "Database Type": "MySQL"},
                             services=services(mariadb), incoming_connection=False)
    runner.run()
    pages = runner.output("success")
    assert runner.read(pages[1]).decode() == f"SELECT * FROM {name} WHERE id <= 6 ORDER BY id LIMIT 3 OFFSET 3"
    execute = ProcessorRunner(ExecuteSQL, {POOL: "db"}, services=services(mariadb))
    for page in pages:
        execute.enqueue(runner.read(page), page.attributes)
    execute.run(len(pages))
    assert [[r["id"] for r in avro(execute.read(f))[1]] for f in execute.output("success")] == [
        [0, 1, 2], [3, 4, 5], [6]]


def test_a_procedures_result_sets_each_make_a_flowfile(mariadb, engine, table):
    name = table("n INT")
    sql(engine, f"INSERT INTO {name} VALUES (1), (2)", f"DROP PROCEDURE IF EXISTS {name}_p",
        f"CREATE PROCEDURE {name}_p() BEGIN SELECT n FROM {name} ORDER BY n; SELECT 'x' AS s; END")
    try:
        run = ProcessorRunner(ExecuteSQL, {POOL: "db", "SQL Query": f"CALL {name}_p()"}, services=services(mariadb),
                              incoming_connection=False)
        run.run()
        made = run.output("success")
        assert [avro(run.read(f))[1] for f in made] == [[{"n": 1}, {"n": 2}], [{"s": "x"}]]
        assert [f.attributes["executesql.resultset.index"] for f in made] == ["0", "1"]
    finally:
        sql(engine, f"DROP PROCEDURE {name}_p")


def test_a_server_that_is_down_sends_to_retry_in_one_sentence(mariadb):
    url = f"jdbc:mysql://127.0.0.1:{free_port()}/{mariadb.database}?connectTimeout=2000"
    runner = ProcessorRunner(PutDatabaseRecord, {"Record Reader": "reader", POOL: "db", "Statement Type": "INSERT",
                                                 "Table Name": "t"},
                             services={"db": (DBCPConnectionPool, {"Database Connection URL": url, "Database User": "u",
                                                                   "Password": "secret-pw"}),
                                       "reader": (JsonTreeReader, {})})
    runner.enqueue(b'[{"id": 1}]')
    runner.run()
    [retried] = runner.output("retry")
    message = retried.attributes["putdatabaserecord.error"]
    assert message.startswith("cannot connect to mysql+pymysql://u:***@127.0.0.1:") and "Can't connect" in message
    assert "secret-pw" not in message and "\n" not in message


def test_a_nifi_flow_with_a_mysql_pool_imports_and_runs(mariadb, engine, table):
    name = table("id INT PRIMARY KEY, name VARCHAR(10)")
    node = processor("root", "Put", "org.apache.nifi.processors.standard.PutDatabaseRecord", {
        "put-db-record-record-reader": "reader", "db-type": "MySQL", "put-db-record-statement-type": "UPSERT",
        "put-db-record-dcbp-service": "db", "put-db-record-table-name": name},
        auto_terminate=("success", "failure", "retry"))
    uses(node, "put-db-record-record-reader", "put-db-record-dcbp-service")
    root = group("root", "Load", None, None, processors=[node])
    root["controllerServices"] = [
        {"identifier": "reader", "name": "reader", "type": "org.apache.nifi.json.JsonTreeReader", "properties": {}},
        {"identifier": "db", "name": "db", "type": "org.apache.nifi.dbcp.DBCPConnectionPool", "properties": {
            "Database Connection URL": mariadb.jdbc_url + "?useSSL=false&characterEncoding=UTF-8",
            "Database Driver Class Name": "com.mysql.cj.jdbc.Driver",
            "database-driver-locations": "/opt/nifi/drivers/mysql-connector-j-8.3.0.jar",
            "Database User": mariadb.user, "Password": mariadb.password}}]
    flow = flow_from_nifi(snapshot(root, {}))
    [put_node] = flow.processors.values()
    properties = {k: v for k, v in put_node.properties.items() if v is not None}
    runner = ProcessorRunner(put_node.type, {**properties, "Record Reader": "reader", POOL: "db"},
                             services={s.name: (s.type, s.properties) for s in flow.services.values()})
    runner.enqueue(b'[{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]')
    runner.run()
    assert len(runner.output("success")) == 1, runner.output("failure")
    assert rows(engine, f"SELECT * FROM {name}") == [(1, "b")]
