"""Issue 53's connectors in one flow shaped as NiFi exports it, imported and run on real Ray
against a real PostgreSQL (their behaviour is tested on the in-process and stateless engines in
their own modules; this is the run where they live in executor actors: each executor's own
connection pool, the HTTP context map as the one actor holding HandleHttpRequest's socket and
its waiting requests, reached by HandleHttpResponse from another task).

CSV files -> PutDatabaseRecord (CSVReader, INSERT) into a table; QueryDatabaseTableRecord
(Maximum-value Column ``id``, JsonRecordSetWriter) -> InvokeHTTP POSTs each page of rows to
HandleHttpRequest in the same flow -> HandleHttpResponse echoes the body back (status 200; its
header from a dynamic property is configured as NiFi exports it, and checked in
test_http_handle) -> PutFile; InvokeHTTP's Response -> PutFile. Every row of every CSV file must
come back through both, and nothing may go to a failure route.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.driver.running import processor_totals, run_flow
from nifi_flows import STANDARD, connection, group, processor, service, snapshot, uses
from real_services import free_port

pytestmark = pytest.mark.ray

ROOT = "root"
TABLE = "ray_orders"
ROWS = [(i, f"customer {i % 7}", round(i * 1.25, 2)) for i in range(1, 121)]


def definition(postgresql, inputs: Path, out: Path, port: int) -> dict:
    services = [
        service("csv", "org.apache.nifi.csv.CSVReader", {"schema-access-strategy": "infer-schema"}),
        service("json", "org.apache.nifi.json.JsonRecordSetWriter", {"Pretty Print JSON": "false"}),
        service("db", "org.apache.nifi.dbcp.DBCPConnectionPool", {
            "Database Connection URL": postgresql.jdbc_url, "Database Driver Class Name": "org.postgresql.Driver",
            "Database User": postgresql.user, "Password": postgresql.password, "Max Total Connections": "4"}),
        service("contexts", "org.apache.nifi.http.StandardHttpContextMap",
                {"Maximum Outstanding Requests": "100", "Request Expiration": "1 min"}),
    ]

    def put(name: str, folder: str) -> dict:
        return processor(ROOT, name, STANDARD + "PutFile", {"Directory": str(out / folder)},
                         auto_terminate=("success", "failure"))

    p = {
        "get": processor(ROOT, "Get CSV", STANDARD + "GetFile", {"Input Directory": str(inputs)}),
        "load": uses(processor(ROOT, "Load", STANDARD + "PutDatabaseRecord", {
            "put-db-record-record-reader": "csv", "db-type": "PostgreSQL", "put-db-record-statement-type": "INSERT",
            "put-db-record-dcbp-service": "db", "put-db-record-table-name": TABLE},
            auto_terminate=("success",)), "put-db-record-record-reader", "put-db-record-dcbp-service"),
        "fetch": uses(processor(ROOT, "Fetch", STANDARD + "QueryDatabaseTableRecord", {
            "Database Connection Pooling Service": "db", "db-fetch-db-type": "PostgreSQL", "Table Name": TABLE,
            "Maximum-value Columns": "id", "qdbtr-record-writer": "json", "qdbt-max-rows": "50"},
            schedule="1 sec"), "Database Connection Pooling Service", "qdbtr-record-writer"),
        "post": processor(ROOT, "Post", STANDARD + "InvokeHTTP", {
            "HTTP Method": "POST", "Remote URL": f"http://127.0.0.1:{port}/orders",
            "Content-Type": "application/json"}, auto_terminate=("Original",)),
        "receive": uses(processor(ROOT, "Receive", STANDARD + "HandleHttpRequest", {
            "Listening Port": str(port), "Hostname": "127.0.0.1", "HTTP Context Map": "contexts",
            "Allowed Paths": "/orders"}), "HTTP Context Map"),
        "answer": uses(processor(ROOT, "Answer", STANDARD + "HandleHttpResponse", {
            "HTTP Status Code": "200", "HTTP Context Map": "contexts", "X-Rows": "${record.count}"}),
            "HTTP Context Map"),
        "responses": put("Responses", "responses"),
        "received": put("Received", "received"),
        "failed": put("Failed", "failed"),
    }
    p["answer"]["propertyDescriptors"]["X-Rows"]["dynamic"] = True
    links = [(p["get"], p["load"], "success"), (p["load"], p["failed"], "failure"), (p["load"], p["failed"], "retry"),
             (p["fetch"], p["post"], "success"), (p["post"], p["responses"], "Response"),
             (p["post"], p["failed"], "Retry"), (p["post"], p["failed"], "No Retry"), (p["post"], p["failed"], "Failure"),
             (p["receive"], p["answer"], "success"), (p["answer"], p["received"], "success"),
             (p["answer"], p["failed"], "failure")]
    root = group(ROOT, "connectors", None, None, processors=list(p.values()), controllerServices=services,
                 connections=[connection(ROOT, source, target, (relationship,)) for source, target, relationship in links])
    return snapshot(root, {})


def write_csv(inputs: Path) -> None:
    inputs.mkdir()
    for number in range(3):
        lines = ["id,customer,amount"] + [f"{i},{name},{amount}" for i, name, amount in ROWS[number * 40:(number + 1) * 40]]
        (inputs / f"orders-{number}.csv").write_text("\n".join(lines) + "\n")


def rows_in(folder: Path) -> list[tuple]:
    found = []
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        records = json.loads(path.read_text())
        # without Use Avro Logical Types a NUMERIC column is a string field, as NiFi's ResultSetRecordSet makes it
        assert all(isinstance(r["amount"], str) for r in records), records[:3]
        found += [(r["id"], r["customer"], float(r["amount"])) for r in records]
    return sorted(found)


def test_csv_to_database_to_http_and_back_runs_on_ray(tmp_path, ray_session, postgresql):
    engine = sa.create_engine(postgresql.url)
    with engine.begin() as c:
        c.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
        c.exec_driver_sql(f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, customer text NOT NULL, amount numeric(10, 2))")
    inputs, out = tmp_path / "in", tmp_path / "out"
    write_csv(inputs)
    flow = flow_from_nifi(definition(postgresql, inputs, out, free_port()))

    def done(_status: dict) -> bool:
        return len(rows_in(out / "responses")) == len(ROWS) and len(rows_in(out / "received")) == len(ROWS)

    final = run_flow(flow, tmp_path / "repository", engine="ray", address=ray_session, timeout=180, until=done,
                     until_idle=False)
    totals = processor_totals(final)
    assert done(final), {name: (t["flowfiles_in"], t["errors"], t["recent_errors"]) for name, t in totals.items()}
    with engine.connect() as c:
        stored = [(i, name, float(amount)) for i, name, amount in c.exec_driver_sql(f"SELECT * FROM {TABLE} ORDER BY id")]
    engine.dispose()
    assert stored == ROWS
    assert rows_in(out / "responses") == rows_in(out / "received") == ROWS   # each row fetched once, echoed back
    assert not (out / "failed").exists()
    assert totals["Post"]["flowfiles_in"] == totals["Receive"]["flowfiles_out"] == totals["Answer"]["flowfiles_in"]
