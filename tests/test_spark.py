"""The Spark bridge: record formats, Spark jobs on a real Spark on RayDP, lineage and failure.

One Spark starts for the whole test session (the ``spark_session`` fixture); every Spark test
sends its jobs to that service. Outputs are compared record by record, exactly.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
import ray.cloudpickle

from flowactors import Flow
from flowactors.processors import FetchFile, ListFile, PutFile
from flowactors.driver.running import processor_totals, run_flow
from flowactors.spark import ExecuteSparkSQL, TransformWithSpark
from flowactors.sdk import record_formats as records
from flowactors.sdk.record_formats import CSV, JSON_LINES, PARQUET, ReadOptions, RecordCursor, parse_schema
from flowactors.spark.service import (SparkServiceActor, SparkServiceError, SparkSettings, SparkSettingsError,
                                      SparkStartError, check_java, stop_service)
from flowactors.testing import ProcessorRunner
from repositories.provenance import WriteAheadProvenanceRepository
from repositories.provenance.event import ProvenanceEventType as T

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # functions below travel to Spark by value

HEADER = "order_id,region,product,qty,price\n"
ORDERS = [
    HEADER + "1,north,apple,3,0.5\n2,south,pear,1,0.75\n",
    HEADER + "3,north,pear,2,0.75\n4,east,apple,10,0.5\n",
    HEADER + "5,south,apple,4,0.5\n",
]
BY_REGION = ("SELECT region, SUM(qty) AS items, SUM(qty * price) AS revenue "
             "FROM flowfiles GROUP BY region ORDER BY region")
BY_REGION_LINES = (b'{"region":"east","items":10,"revenue":5.0}\n'
                   b'{"region":"north","items":5,"revenue":3.0}\n'
                   b'{"region":"south","items":5,"revenue":2.75}\n')


def sql_runner(spark, query: str, **properties) -> ProcessorRunner:
    values = {k: v for k, v in {"Spark Service": spark.name, "SQL Query": query, **properties}.items() if v is not None}
    return ProcessorRunner(ExecuteSparkSQL, values)


def read_records(data: bytes, fmt: str, schema: str | None = None) -> list[dict]:
    options = ReadOptions(format=fmt, schema=parse_schema(schema) if schema else None)
    return records.read_table(io.BytesIO(data), options).to_pylist()


def reachable(lineage, source: str, target: str) -> bool:
    following: dict[str, list[str]] = {}
    for edge in lineage.edges:
        following.setdefault(edge.source, []).append(edge.target)
    seen, frontier = set(), [source]
    while frontier:
        node = frontier.pop()
        if node == target:
            return True
        if node not in seen:
            seen.add(node)
            frontier.extend(following.get(node, []))
    return False


# ---------------------------------------------------------------------------------- no Spark needed
def test_schema_text_reads_like_spark_ddl_and_says_what_is_wrong():
    schema = parse_schema("id BIGINT, name STRING, amount DECIMAL(10, 2), day DATE, ok BOOLEAN")
    assert schema == pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                                ("day", pa.date32()), ("ok", pa.bool_())])
    with pytest.raises(ValueError, match="unknown type 'NUMBERISH' for column 'x'"):
        parse_schema("x NUMBERISH")
    with pytest.raises(ValueError, match="cannot read 'id' as 'name TYPE'"):
        parse_schema("id")
    assert ExecuteSparkSQL.validate_properties({"SQL Query": "SELECT 1", "Schema": "id"}) == [
        "property 'Schema': cannot read 'id' as 'name TYPE' (e.g. 'amount DOUBLE')"]


def test_each_format_reads_with_inferred_or_given_schema():
    csv = b"id;name\n1;a\n2;\n"
    assert read_records(csv, CSV) == [{"id;name": "1;a"}, {"id;name": "2;"}]  # the delimiter matters
    options = ReadOptions(format=CSV, delimiter=";", schema=parse_schema("name STRING, id INT, extra DOUBLE"))
    table = records.read_table(io.BytesIO(csv), options)
    assert table.schema == parse_schema("name STRING, id INT, extra DOUBLE")
    assert table.to_pylist() == [{"name": "a", "id": 1, "extra": None}, {"name": None, "id": 2, "extra": None}]
    lines = b'{"id": 1, "tags": "x"}\n{"id": 2}\n'
    assert read_records(lines, JSON_LINES) == [{"id": 1, "tags": "x"}, {"id": 2, "tags": None}]
    assert read_records(lines, JSON_LINES, "id BIGINT") == [{"id": 1}, {"id": 2}]
    assert read_records(b"", CSV, "id BIGINT") == [] and read_records(b"", JSON_LINES) == []
    with pytest.raises(records.RecordFormatError, match="not valid CSV: CSV parse error"):
        read_records(b"a,b\n1\n", CSV)
    with pytest.raises(records.RecordFormatError, match="not valid Parquet"):
        read_records(b"PAR1 but not really", PARQUET)


def test_results_are_split_by_records_and_by_size_without_losing_one():
    table = pa.table({"id": list(range(1000)), "text": [f"row number {i}" for i in range(1000)]})
    for fmt in records.FORMATS:
        cursor, parts = RecordCursor(table), []
        while cursor.remaining:
            out = io.BytesIO()
            count = records.write_part(out, cursor, fmt, max_bytes=6000)
            parts.append((count, out.getvalue()))
        back = [r for _, data in parts for r in read_records(data, fmt)]
        assert back == table.to_pylist(), fmt
        assert [len(read_records(data, fmt)) for _, data in parts] == [count for count, _ in parts]
        # text formats: at most about one record over; Parquet's compressed size is an estimate
        allowed = 6000 + 40 if fmt != PARQUET else 6000 * 1.25
        assert all(len(data) <= allowed for _, data in parts), (fmt, [len(d) for _, d in parts])
        assert len(parts) >= 2
    cursor = RecordCursor(table)
    counts = []
    while cursor.remaining:
        counts.append(records.write_part(io.BytesIO(), cursor, CSV, max_records=300))
    assert counts == [300, 300, 300, 100]


def test_java_checks_name_the_cause(tmp_path):
    with pytest.raises(SparkStartError, match="Java was not found"):
        check_java({"PATH": str(tmp_path)})
    fake = tmp_path / "bin"
    fake.mkdir()
    java = fake / "java"
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(SparkStartError, match=r'Java 11 found at .*/bin/java .*needs Java 17'):
        check_java({"PATH": str(fake)})
    java.write_text('#!/bin/sh\necho \'java version "1.8.0_402"\' >&2\n')
    with pytest.raises(SparkStartError, match="Java 8 found"):
        check_java({"PATH": str(fake)})
    with pytest.raises(SparkStartError, match="JAVA_HOME is .* does not exist"):
        check_java({"PATH": os.environ["PATH"], "JAVA_HOME": str(tmp_path / "nowhere")})
    java.write_text('#!/bin/sh\necho \'openjdk version "17.0.15" 2025-04-15\' >&2\n')
    assert check_java({"PATH": str(fake)}).startswith('openjdk version "17.0.15"')


def test_spark_settings_are_checked():
    assert SparkSettings.from_dict({"executors": 2, "configs": {"spark.sql.shuffle.partitions": "4"}}).executors == 2
    with pytest.raises(SparkSettingsError, match=r"unknown Spark settings \['workers'\]"):
        SparkSettings.from_dict({"workers": 2})
    with pytest.raises(SparkSettingsError, match="'executor_memory' is 'lots'"):
        SparkSettings.from_dict({"executor_memory": "lots"})
    configs = SparkSettings.from_dict({"configs": {"spark.driver.extraJavaOptions": "-Dx=1"}}).spark_configs()
    assert configs["spark.driver.extraJavaOptions"].endswith("-Dx=1")
    for key in ("spark.executor.extraJavaOptions", "spark.driver.extraJavaOptions",
                "spark.ray.raydp_app_master.extraJavaOptions"):
        assert "--add-opens=java.base/java.nio=ALL-UNNAMED" in configs[key]


def test_transform_needs_a_function():
    assert TransformWithSpark.validate_properties({"Function": "not a path"}) == [
        "property 'Function': 'not a path' is not 'package.module:function'"]
    assert TransformWithSpark.validate_properties({"Function": "json:dumps"}) == []


@pytest.mark.ray
def test_without_a_spark_service_the_flowfiles_stay_queued(ray_session):
    runner = ProcessorRunner(ExecuteSparkSQL, {"SQL Query": "SELECT * FROM flowfiles"})
    runner.enqueue(ORDERS[0].encode())
    runner.run(raise_errors=False)
    assert isinstance(runner.errors[0], SparkServiceError)
    assert "no Spark service named 'test.spark'" in str(runner.errors[0])
    assert runner.input_count == 1 and runner.output("failure") == []


# ---------------------------------------------------------------------------------- real Spark
@pytest.mark.spark
def test_sql_over_a_bin_gives_exact_records_and_lineage_through_spark(spark_session):
    runner = sql_runner(spark_session, BY_REGION, **{"Minimum Number of Entries": 3, "Output Format": JSON_LINES})
    inputs = [runner.enqueue(text.encode(), {"filename": f"orders-{i}.csv", "batch": "b1"})
              for i, text in enumerate(ORDERS)]
    runner.run()
    [result] = runner.output("success")
    assert runner.read(result) == BY_REGION_LINES
    attrs = result.attributes
    assert attrs["record.count"] == "3" and attrs["spark.input.count"] == "3" and attrs["spark.input.records"] == "5"
    assert attrs["mime.type"] == "application/x-ndjson" and attrs["batch"] == "b1"  # common attributes kept
    assert attrs["filename"] == f"{attrs['spark.job.id']}.jsonl"
    assert sorted(f.uuid for f in runner.output("original")) == sorted(f.uuid for f in inputs)
    assert runner.output("failure") == [] and runner.input_count == 0
    assert runner.backend.commits == 1  # results, originals and acknowledgements in one commit

    events = runner.events()
    [join] = [e for e in events if e.event_type == T.JOIN]
    [fork] = [e for e in events if e.event_type == T.FORK]
    job = attrs["spark.job.id"]
    assert join.flowfile_uuid == job and sorted(join.parent_uuids) == sorted(f.uuid for f in inputs)
    assert fork.flowfile_uuid == job and fork.child_uuids == [result.uuid]
    assert "Spark SQL: SELECT region" in join.details
    lineage = runner.provenance_repository.lineage(result.uuid)
    for flowfile in inputs:
        assert reachable(lineage, f"flowfile:{flowfile.uuid}", f"event:{join.event_id}")
    assert reachable(lineage, f"event:{join.event_id}", f"event:{fork.event_id}")
    assert reachable(lineage, f"event:{fork.event_id}", f"flowfile:{result.uuid}")


@pytest.mark.spark
@pytest.mark.parametrize("source,target", [(CSV, PARQUET), (JSON_LINES, CSV), (PARQUET, JSON_LINES)])
def test_records_cross_spark_unchanged_in_every_format(spark_session, source, target):
    schema = "id BIGINT, name STRING, amount DECIMAL(10,2), day DATE, ok BOOLEAN"
    expected = pa.Table.from_pylist([
        {"id": 1, "name": "anna, the first", "amount": "12.50", "day": "2024-02-29", "ok": True},
        {"id": 2, "name": "bo \"quoted\"", "amount": "-0.05", "day": "2023-12-31", "ok": False},
        {"id": 3, "name": None, "amount": None, "day": None, "ok": None},
    ], schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.string()),
                         ("day", pa.string()), ("ok", pa.bool_())])).cast(parse_schema(schema))
    content = io.BytesIO()
    records.write_part(content, RecordCursor(expected), source)
    runner = sql_runner(spark_session, "SELECT * FROM flowfiles ORDER BY id", **{
        "Input Format": source, "Schema": schema if source != PARQUET else None, "Output Format": target})
    runner.enqueue(content.getvalue())
    runner.run()
    [result] = runner.contents("success")
    if target == JSON_LINES:
        assert result.splitlines() == [
            b'{"id":1,"name":"anna, the first","amount":"12.50","day":"2024-02-29","ok":true}',
            b'{"id":2,"name":"bo \\"quoted\\"","amount":"-0.05","day":"2023-12-31","ok":false}',
            b'{"id":3,"name":null,"amount":null,"day":null,"ok":null}']
    else:
        options = ReadOptions(format=target, schema=parse_schema(schema) if target == CSV else None)
        assert records.read_table(io.BytesIO(result), options).to_pylist() == expected.to_pylist()


@pytest.mark.spark
def test_a_large_result_is_split_into_flowfiles_of_the_configured_size(spark_session):
    rows = "".join(f"{i},item {i:04d}\n" for i in range(2000))
    runner = sql_runner(spark_session, "SELECT id, upper(name) AS name FROM flowfiles ORDER BY id", **{
        "Schema": "id BIGINT, name STRING", "Output Format": CSV, "Max Records Per FlowFile": 600})
    runner.enqueue(b"id,name\n" + rows.encode())
    runner.run()
    outputs = runner.output("success")
    assert [f.attributes["record.count"] for f in outputs] == ["600", "600", "600", "200"]
    assert [f.attributes["fragment.index"] for f in outputs] == ["0", "1", "2", "3"]
    assert {f.attributes["fragment.count"] for f in outputs} == {"4"}
    assert len({f.attributes["filename"] for f in outputs}) == 4
    back = [r for f in outputs for r in read_records(runner.read(f), CSV)]
    assert back == [{"id": i, "name": f"ITEM {i:04d}"} for i in range(2000)]

    sized = sql_runner(spark_session, "SELECT * FROM flowfiles ORDER BY id", **{
        "Schema": "id BIGINT, name STRING", "Output Format": JSON_LINES, "Max FlowFile Size": "8 KB"})
    sized.enqueue(b"id,name\n" + rows.encode())
    sized.run()
    contents = sized.contents("success")
    line = len(b'{"id":1999,"name":"item 1999"}\n')
    assert len(contents) > 5 and all(len(c) <= 8 * 1024 + line for c in contents)
    assert b"".join(contents) == b"".join(
        orjson.dumps({"id": i, "name": f"item {i:04d}"}) + b"\n" for i in range(2000))


@pytest.mark.spark
def test_failed_jobs_send_every_input_to_failure_once_with_the_error(spark_session):
    cases = {
        "SELECT nope FROM flowfiles": "nope",                           # analysis error, before any task
        "SELECT assert_true(qty < 0) FROM flowfiles": "is not true",    # a task fails on the executor
    }
    for query, expected in cases.items():
        runner = sql_runner(spark_session, query, **{"Minimum Number of Entries": 2})
        inputs = [runner.enqueue(text.encode(), {"filename": f"o{i}.csv"}) for i, text in enumerate(ORDERS[:2])]
        runner.run()
        failed = runner.output("failure")
        assert sorted(f.uuid for f in failed) == sorted(f.uuid for f in inputs)
        for before, after in zip(sorted(inputs, key=lambda f: f.uuid), sorted(failed, key=lambda f: f.uuid)):
            assert after.claim == before.claim  # content untouched
            assert {k: v for k, v in after.attributes.items() if k != "spark.error"} == before.attributes
            assert expected in after.attributes["spark.error"]
        assert runner.output("success") == [] and runner.output("original") == [] and runner.input_count == 0
        assert not [e for e in runner.events() if e.event_type in (T.JOIN, T.FORK)]

    # a content that does not parse fails alone; the rest of the bin still runs
    runner = sql_runner(spark_session, "SELECT count(*) AS n FROM flowfiles", **{
        "Input Format": JSON_LINES, "Minimum Number of Entries": 2, "Output Format": JSON_LINES})
    good = runner.enqueue(b'{"a": 1}\n{"a": 2}\n')
    bad = runner.enqueue(b'{"a": ')
    runner.run()
    [failed] = runner.output("failure")
    assert failed.uuid == bad.uuid and "not valid JSON Lines" in failed.attributes["spark.error"]
    assert runner.contents("success") == [b'{"n":2}\n']
    assert [f.uuid for f in runner.output("original")] == [good.uuid]


def add_total(frame):
    """A user's function: what TransformWithSpark's Function property names."""
    from pyspark.sql import functions as F

    return frame.withColumn("total", F.col("qty") * F.col("price")).orderBy("order_id")


class BigOrders(TransformWithSpark):
    """A user's subclass: the transform is shipped to the Spark service with the class."""

    def transform(self, frame):
        return frame.where("qty >= 3").select("order_id", "product").orderBy("order_id")


class Exploding(TransformWithSpark):
    def transform(self, frame):
        raise ValueError("the user's function gave up")


@pytest.mark.spark
def test_transform_applies_the_users_function(spark_session):
    runner = ProcessorRunner(TransformWithSpark, {"Spark Service": spark_session.name, "Function": f"{__name__}:add_total",
                                                  "Output Format": JSON_LINES, "Minimum Number of Entries": 2})
    for text in ORDERS[:2]:
        runner.enqueue(text.encode())
    runner.run()
    assert runner.contents("success") == [
        b'{"order_id":1,"region":"north","product":"apple","qty":3,"price":0.5,"total":1.5}\n'
        b'{"order_id":2,"region":"south","product":"pear","qty":1,"price":0.75,"total":0.75}\n'
        b'{"order_id":3,"region":"north","product":"pear","qty":2,"price":0.75,"total":1.5}\n'
        b'{"order_id":4,"region":"east","product":"apple","qty":10,"price":0.5,"total":5.0}\n']

    runner = ProcessorRunner(BigOrders, {"Spark Service": spark_session.name, "Output Format": CSV,
                                         "Attribute Columns": "filename", "Minimum Number of Entries": 3})
    for i, text in enumerate(ORDERS):
        runner.enqueue(text.encode(), {"filename": f"f{i}.csv"})
    runner.run()
    assert runner.contents("success") == [b'"order_id","product"\n1,"apple"\n4,"apple"\n5,"apple"\n']

    runner = ProcessorRunner(Exploding, {"Spark Service": spark_session.name})
    runner.enqueue(ORDERS[0].encode())
    runner.run()
    [failed] = runner.output("failure")
    assert failed.attributes["spark.error"] == "ValueError: the user's function gave up"


@pytest.mark.spark
def test_attribute_columns_let_sql_tell_records_apart(spark_session):
    runner = sql_runner(spark_session, "SELECT filename, count(*) AS n FROM flowfiles GROUP BY filename ORDER BY 1",
                        **{"Attribute Columns": "filename, missing", "Minimum Number of Entries": 3,
                           "Output Format": JSON_LINES})
    for i, text in enumerate(ORDERS):
        runner.enqueue(text.encode(), {"filename": f"f{i}.csv"})
    runner.run()
    assert runner.contents("success") == [b'{"filename":"f0.csv","n":2}\n{"filename":"f1.csv","n":2}\n'
                                          b'{"filename":"f2.csv","n":1}\n']


@pytest.mark.spark
def test_a_spark_that_cannot_start_leaves_the_flowfiles_queued(spark_session):
    """A failed start (here: a JVM option the app master's Java refuses) is an error naming the
    cause; the trigger rolls back, and the service remembers the cause instead of retrying."""
    name = "flowactors-tests.broken-spark"
    broken = SparkSettings(configs={"spark.ray.raydp_app_master.extraJavaOptions": "-XX:+FlowactorsNoSuchOption"})
    actor = SparkServiceActor.options(name=name).remote(name, broken)
    try:
        runner = ProcessorRunner(ExecuteSparkSQL, {"Spark Service": name, "SQL Query": "SELECT 1"})
        runner.enqueue(ORDERS[0].encode())
        runner.run(iterations=2, raise_errors=False)
        assert len(runner.errors) == 2 and all(isinstance(e, SparkStartError) for e in runner.errors)
        assert str(runner.errors[0]).startswith("Spark did not start through RayDP (openjdk version")
        assert "Java gateway process exited" in str(runner.errors[0])
        assert str(runner.errors[1]) == str(runner.errors[0])
        assert runner.input_count == 1 and runner.output("failure") == [] and runner.output("success") == []
    finally:
        stop_service(actor)
    for _ in range(50):  # nothing of the failed start is left: RayDP's master actor is gone too
        try:
            ray.get_actor(f"{name}_SPARK_MASTER")
        except ValueError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("RayDP's master actor of the failed start is still there")
    # the session's Spark is untouched
    assert ray.get(spark_session.actor.status.remote())["started"]


def write_orders(folder: Path) -> None:
    folder.mkdir()
    for i, text in enumerate(ORDERS):
        (folder / f"orders-{i}.csv").write_text(text)


@pytest.mark.spark
def test_a_flow_on_ray_actors_runs_sql_on_spark_with_lineage_from_the_files(spark_session, repository, tmp_path):
    data, out = tmp_path / "in", tmp_path / "out"
    write_orders(data)
    flow = Flow("spark-flow", settings={"administrative_yield": 0.1, "checkpoint_interval": 1.0})
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(data)})
    fetch = flow.add(FetchFile, "fetch", auto_terminate=["not.found", "permission.denied", "failure"])
    sql = flow.add(ExecuteSparkSQL, "sql", properties={
        "Spark Service": spark_session.name, "SQL Query": BY_REGION, "Output Format": JSON_LINES,
        "Minimum Number of Entries": 3, "Max Bin Age": "20 sec"}, auto_terminate=["original"])
    put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success", "failure"])
    flow.connect(listing, fetch)
    flow.connect(fetch, sql)
    flow.connect(sql, put, "success")
    flow.connect(sql, put, "failure", name="sql-failed")
    final = run_flow(flow, repository, timeout=120)
    assert not final.get("timed_out")
    [written] = list(out.iterdir())
    assert written.read_bytes() == BY_REGION_LINES
    assert processor_totals(final)["sql"]["errors"] == 0

    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        [send] = provenance.search(event_type="SEND", limit=10)
        [join] = provenance.search(event_type="JOIN", limit=10)
        lineage = provenance.lineage(send.flowfile_uuid)
    finally:
        provenance.close()
    listed = {e.flowfile_uuid: e.attribute("filename") for e in lineage.events if e.event_type == T.CREATE}
    assert sorted(listed.values()) == ["orders-0.csv", "orders-1.csv", "orders-2.csv"]
    assert sorted(join.parent_uuids) == sorted(listed)
    for uuid in listed:  # from each listed file, through the Spark job, to the file written
        assert reachable(lineage, f"flowfile:{uuid}", f"event:{send.event_id}")


@pytest.mark.ray
def test_the_flow_owns_its_spark_service_from_start_to_stop(ray_session, repository, tmp_path):
    """Without 'Spark Service' the controller creates '<flow>.spark' (Spark starts on first use,
    so this flow, which never has data, never starts one) and removes it at stop."""
    (tmp_path / "empty").mkdir()
    flow = Flow("owns-spark", settings={"spark": {"start": "first-use", "executor_memory": "512M"}})
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(tmp_path / "empty")})
    flow.add(ExecuteSparkSQL, "sql", properties={"SQL Query": "SELECT 1"},
             auto_terminate=["success", "original", "failure"])
    flow.connect(listing, "sql")
    seen = {}

    def look(controller):
        seen.update(ray.get(ray.get_actor("owns-spark.spark").status.remote()))

    run_flow(flow, repository, timeout=60, on_started=look)
    assert seen["name"] == "owns-spark.spark" and seen["started"] is False
    with pytest.raises(ValueError):
        ray.get_actor("owns-spark.spark")

    flow.settings["spark"] = {"executors": 0}
    with pytest.raises(Exception, match="'executors' and 'executor_cores' must be 1 or more"):
        run_flow(flow, tmp_path / "second", timeout=60)
