"""The Spark bridge: records in and out through reader and writer services, Spark jobs on a real
Spark on RayDP, lineage and failure, and definitions from before services.

One Spark starts for the whole test session (the ``spark_session`` fixture); every Spark test
sends its jobs to that service. Outputs are compared record by record, exactly.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import pyarrow as pa
import pytest
import ray.cloudpickle

from flowactors import Flow
from flowactors.processors import FetchFile, ListFile, PutFile
from flowactors.driver.running import processor_totals, run_flow
from flowactors.sdk.record_formats import CSV, JSON_LINES, PARQUET, parse_schema, reader_service, writer_service
from flowactors.sdk.records import MalformedRecordError
from flowactors.sdk.records.schema import avro_text
from flowactors.sdk.services import resolve_service_type
from flowactors.services import (AvroReader, AvroRecordSetWriter, CSVReader, CSVRecordSetWriter, JsonRecordSetWriter,
                                 JsonTreeReader, ParquetReader, ParquetRecordSetWriter, XMLReader, XMLRecordSetWriter)
from flowactors.spark import ExecuteSparkSQL, TransformWithSpark
from flowactors.spark.processors import ResultCursor, write_part
from flowactors.spark.service import (SparkServiceActor, SparkServiceError, SparkSettings, SparkSettingsError,
                                      SparkStartError, check_java, stop_service)
from flowactors.testing import ProcessorRunner, enable_service
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
                   b'{"region":"south","items":5,"revenue":2.75}')
ONE_LINE = {"Output Grouping": "One Line Per Object"}
#: the services the Spark processors below name: CSV in (what 'Input Format' read by default),
#: JSON lines and JSON in, Parquet out (what 'Output Format' wrote by default), JSON lines and CSV out
SERVICES = {"csv-in": (CSVReader, {}), "json-in": (JsonTreeReader, {}), "parquet-in": (ParquetReader, {}),
            "parquet-out": (ParquetRecordSetWriter, {}), "json-lines": (JsonRecordSetWriter, ONE_LINE),
            "csv-out": (CSVRecordSetWriter, {})}


def spark_runner(kind, spark, services=None, **properties) -> ProcessorRunner:
    values = {"Spark Service": spark.name, "Record Reader": "csv-in", "Record Writer": "parquet-out", **properties}
    return ProcessorRunner(kind, {k: v for k, v in values.items() if v is not None},
                           services={**SERVICES, **(services or {})})


def sql_runner(spark, query: str, services=None, **properties) -> ProcessorRunner:
    return spark_runner(ExecuteSparkSQL, spark, services, **{"SQL Query": query, **properties})


def read_with(service, content: bytes, properties=None) -> list[dict]:
    reader = enable_service(service, properties or {})
    return reader.create_reader({}, io.BytesIO(content), len(content)).read_all().to_pylist()


def write_with(service, table: pa.Table, properties=None) -> bytes:
    factory = enable_service(service, properties or {})
    out = io.BytesIO()
    writer = factory.create_writer(factory.write_schema({}, table.schema), out, {})
    for batch in table.to_batches():
        writer.write_batch(batch)
    writer.finish()
    return out.getvalue()


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
    [problem] = ExecuteSparkSQL.validate_properties({"SQL Query": "SELECT 1", "Schema": "id", "Record Writer": "w"})
    assert "the Schema 'id' does not read as Spark DDL: cannot read 'id' as 'name TYPE' (e.g. 'amount DOUBLE')" \
        in problem


def read_as_before(content: bytes, fmt: str, **options) -> list[dict]:
    """The records the reader service standing for a record format of before reads."""
    definition = reader_service(fmt, **options)
    return read_with(resolve_service_type(definition.type), content, definition.properties)


def test_the_services_standing_for_the_formats_of_before_read_as_they_did():
    """The reader 'reader_service' gives for an old configuration reads what the format read:
    CSV's delimiter and header, a Spark DDL schema (as the reader's Avro Schema Text: exactly those
    columns, missing ones null), JSON lines inferred or with a schema, empty contents."""
    csv = b"id;name\n1;a\n2;\n"
    assert read_as_before(csv, CSV) == [{"id;name": "1;a"}, {"id;name": "2;"}]  # the delimiter matters
    options = {"delimiter": ";", "schema": "name STRING, id INT, extra DOUBLE"}
    definition = reader_service(CSV, **options)
    assert definition.properties == {"Schema Access Strategy": "Use 'Schema Text' Property",
                                     "Schema Text": avro_text(parse_schema(options["schema"])),
                                     "Treat First Line as Header": "true", "Value Separator": ";"}
    table = enable_service(CSVReader, definition.properties).create_reader({}, io.BytesIO(csv), len(csv)).read_all()
    assert table.schema == parse_schema("name STRING, id INT, extra DOUBLE")
    assert table.to_pylist() == [{"name": "a", "id": 1, "extra": None}, {"name": None, "id": 2, "extra": None}]
    lines = b'{"id": 1, "tags": "x"}\n{"id": 2}\n'
    assert read_as_before(lines, JSON_LINES) == [{"id": 1, "tags": "x"}, {"id": 2, "tags": None}]
    assert read_as_before(lines, JSON_LINES, schema="id BIGINT") == [{"id": 1}, {"id": 2}]
    assert read_as_before(b"", CSV, schema="id BIGINT") == [] and read_as_before(b"", JSON_LINES) == []
    # dates were ISO text: the reader is given that pattern (read in Arrow, not a value at a time)
    assert reader_service(CSV, schema="id INT, day DATE").properties["Date Format"] == "yyyy-MM-dd"
    dated = [{"id": 1, "day": datetime.date(2024, 2, 29)}, {"id": 2, "day": None}]
    assert read_as_before(b"id,day\n1,2024-02-29\n2,\n", CSV, schema="id INT, day DATE") == dated
    assert read_as_before(b'{"id": 1, "day": "2024-02-29"}\n{"id": 2}\n', JSON_LINES,
                          schema="id INT, day DATE") == dated
    assert "Date Format" not in reader_service(CSV, schema="id INT, at TIMESTAMP").properties
    assert read_as_before(b"a,b\n", CSV, header=True) == []
    with pytest.raises(MalformedRecordError, match="not valid CSV"):
        read_as_before(b'a,b\n"1,2\n', CSV)
    with pytest.raises(MalformedRecordError, match="not a Parquet file"):
        read_as_before(b"PAR1 but not really", PARQUET)
    # a headerless CSV without a schema had columns f0, f1, ...: no reader does that, and it is said
    with pytest.raises(ValueError, match="CSV without a header line was read with columns named f0, f1"):
        reader_service(CSV, header=False)
    assert reader_service(CSV, header=False, schema="a INT").properties["Treat First Line as Header"] == "false"
    assert reader_service(PARQUET, schema="a INT").note.startswith("a Parquet file's own schema is read")
    with pytest.raises(ValueError, match="'XML' was never a record format"):
        reader_service("XML")
    # one configuration, one name; the format's own one, a plain name
    assert reader_service(CSV).name == "CSV reader" and writer_service(JSON_LINES).name == "JSON Lines writer"
    assert reader_service(CSV, delimiter=";").name == reader_service(CSV, delimiter=";").name != \
        reader_service(CSV, delimiter="|").name
    assert writer_service(JSON_LINES).properties == ONE_LINE


def test_a_definition_from_before_services_is_told_what_to_add_and_runs_once_it_did(tmp_path):
    """A definition that chose formats (or left their defaults) is refused with the exact service
    entries to add and the properties to set; doing what the problems say makes it valid."""
    old = {"SQL Query": "SELECT 1", "Input Format": JSON_LINES, "Schema": "id BIGINT, day DATE",
           "Output Format": CSV, "Minimum Number of Entries": "1"}
    problems = ExecuteSparkSQL.validate_properties(old)
    assert len(problems) == 2
    reader, writer = reader_service(JSON_LINES, schema="id BIGINT, day DATE"), writer_service(CSV)
    assert problems[0].startswith("property 'Record Reader' is required: the controller service that reads the "
                                  "records, in place of 'Input Format' and 'Schema', which are gone (remove them). "
                                  "To read as before, add the controller service " + json.dumps(
                                      reader.to_dict(), separators=(",", ":")))
    assert f"set 'Record Reader' to '{reader.name}'" in problems[0]
    assert problems[1].startswith("property 'Record Writer' is required: the controller service that writes the "
                                  "results, in place of 'Output Format', which is gone (remove it). To write as "
                                  "before, add the controller service "
                                  '{"name":"CSV writer","type":"CSVRecordSetWriter","properties":{}}')
    # no format property at all: the defaults of before (CSV in, Parquet out)
    defaults = ExecuteSparkSQL.validate_properties({"SQL Query": "SELECT 1"})
    assert "in place of 'Input Format' (CSV by default), which is gone" in defaults[0]
    assert '{"name":"Parquet writer","type":"ParquetRecordSetWriter","properties":{}}' in defaults[1]
    # a service named, a former property still there: drop it
    assert ExecuteSparkSQL.validate_properties({"SQL Query": "SELECT 1", "Record Reader": "r", "Record Writer": "w",
                                                "CSV Header": "true"}) == [
        "property 'CSV Header' is gone: records are read and written by the controller services 'Record Reader' "
        "and 'Record Writer' name; remove it"]
    # done as said: a valid flow
    flow = Flow("migrated")
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(tmp_path)})
    for definition in (reader, writer):
        flow.add_service(resolve_service_type(definition.type), definition.name, properties=definition.properties)
    new = {k: v for k, v in old.items() if k not in ("Input Format", "Schema", "Output Format")}
    sql = flow.add(ExecuteSparkSQL, "sql", properties={**new, "Record Reader": reader.name,
                                                       "Record Writer": writer.name, "Spark Service": "shared"},
                   auto_terminate=["success", "original", "failure"])
    flow.connect(listing, sql)
    flow.validate()


WRITERS = {  # writer, its properties, the reader that reads it back, its properties, bytes a record may go over
    "CSV": (CSVRecordSetWriter, {}, CSVReader, {}, 40),
    "JSON lines": (JsonRecordSetWriter, ONE_LINE, JsonTreeReader, {}, 40),
    "JSON array": (JsonRecordSetWriter, {}, JsonTreeReader, {}, 40),
    "XML": (XMLRecordSetWriter, {"Name of Root Tag": "rows", "Name of Record Tag": "row"}, XMLReader,
            {"Expect Records as Array": "true"}, 60),
    "Avro": (AvroRecordSetWriter, {}, AvroReader, {}, None),
    "Parquet": (ParquetRecordSetWriter, {}, ParquetReader, {}, None),
}


@pytest.mark.parametrize("name", WRITERS)
def test_results_are_split_by_records_and_by_size_without_losing_one(name):
    writer_type, writer_properties, reader_type, reader_properties, over = WRITERS[name]
    factory = enable_service(writer_type, writer_properties)
    table = pa.table({"id": list(range(1000)), "text": [f"row number {i}" for i in range(1000)]})
    schema = factory.write_schema({}, table.schema)

    def parts(**limits) -> list[tuple[int, bytes]]:
        cursor, made = ResultCursor(table), []
        while cursor.remaining:
            out = io.BytesIO()
            result = write_part(out, cursor, factory.create_writer(schema, out, {}), **limits)
            made.append((result.record_count, out.getvalue()))
        return made

    sized = parts(max_bytes=6000)
    read = [read_with(reader_type, data, reader_properties) for _, data in sized]
    assert [r for records in read for r in records] == table.to_pylist()
    assert [len(records) for records in read] == [count for count, _ in sized]
    # a writer that writes as it goes: at most about one record over; one that holds records back
    # (Parquet's row groups, Avro's blocks): sized by an estimate, corrected as contents are made
    allowed = 6000 + over if over is not None else 6000 * 1.25
    assert all(len(data) <= allowed for _, data in sized), [len(d) for _, d in sized]
    assert len(sized) >= 2
    assert [count for count, _ in parts(max_records=300)] == [300, 300, 300, 100]


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
    services = {"Record Reader": "r", "Record Writer": "w"}
    assert TransformWithSpark.validate_properties({"Function": "not a path", **services}) == [
        "property 'Function': 'not a path' is not 'package.module:function'"]
    assert TransformWithSpark.validate_properties({"Function": "json:dumps", **services}) == []
    assert TransformWithSpark.validate_properties(services) == [
        "set 'Function' to 'package.module:function', or subclass TransformWithSpark and override "
        "transform(self, frame)"]


@pytest.mark.ray
def test_without_a_spark_service_the_flowfiles_stay_queued(ray_session):
    runner = ProcessorRunner(ExecuteSparkSQL, {"SQL Query": "SELECT * FROM flowfiles", "Record Reader": "csv-in",
                                               "Record Writer": "parquet-out"}, services=SERVICES)
    runner.enqueue(ORDERS[0].encode())
    runner.run(raise_errors=False)
    assert isinstance(runner.errors[0], SparkServiceError)
    assert "no Spark service named 'test.spark'" in str(runner.errors[0])
    assert runner.input_count == 1 and runner.output("failure") == []


# ---------------------------------------------------------------------------------- real Spark
@pytest.mark.spark
def test_sql_over_a_bin_gives_exact_records_and_lineage_through_spark(spark_session):
    runner = sql_runner(spark_session, BY_REGION, **{"Minimum Number of Entries": 3, "Record Writer": "json-lines"})
    inputs = [runner.enqueue(text.encode(), {"filename": f"orders-{i}.csv", "batch": "b1"})
              for i, text in enumerate(ORDERS)]
    runner.run()
    [result] = runner.output("success")
    assert runner.read(result) == BY_REGION_LINES
    attrs = result.attributes
    assert attrs["record.count"] == "3" and attrs["spark.input.count"] == "3" and attrs["spark.input.records"] == "5"
    assert attrs["mime.type"] == "application/json" and attrs["batch"] == "b1"  # common attributes kept
    assert attrs["filename"] == f"{attrs['spark.job.id']}.json"
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


CROSSING = "id BIGINT, name STRING, amount DECIMAL(10,2), day DATE, ok BOOLEAN"
#: each reader and writer pair of the test below, with what it needs: the schema (as Avro) for the
#: text readers, the date as text for the text formats
DAYS = {"Date Format": "yyyy-MM-dd"}
TYPED = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": avro_text(parse_schema(CROSSING))}
CROSSINGS = {"CSV": (CSVRecordSetWriter, DAYS, CSVReader, {**TYPED, **DAYS, "Treat First Line as Header": "true"}),
             "JSON Lines": (JsonRecordSetWriter, {**ONE_LINE, **DAYS}, JsonTreeReader, {**TYPED, **DAYS}),
             "Parquet": (ParquetRecordSetWriter, {}, ParquetReader, {})}


@pytest.mark.spark
@pytest.mark.parametrize("source,target", [(CSV, PARQUET), (JSON_LINES, CSV), (PARQUET, JSON_LINES)])
def test_records_cross_spark_unchanged_in_every_format(spark_session, source, target):
    expected = pa.Table.from_pylist([
        {"id": 1, "name": "anna, the first", "amount": "12.50", "day": "2024-02-29", "ok": True},
        {"id": 2, "name": "bo \"quoted\"", "amount": "-0.05", "day": "2023-12-31", "ok": False},
        {"id": 3, "name": None, "amount": None, "day": None, "ok": None},
    ], schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.string()),
                         ("day", pa.string()), ("ok", pa.bool_())])).cast(parse_schema(CROSSING))
    source_writer, source_writing, source_reader, source_reading = CROSSINGS[source]
    target_writer, target_writing, target_reader, target_reading = CROSSINGS[target]
    runner = sql_runner(spark_session, "SELECT * FROM flowfiles ORDER BY id", services={
        "in": (source_reader, source_reading), "out": (target_writer, target_writing)},
        **{"Record Reader": "in", "Record Writer": "out"})
    runner.enqueue(write_with(source_writer, expected, source_writing))
    runner.run()
    [result] = runner.contents("success")
    if target == JSON_LINES:
        assert result.splitlines() == [
            b'{"id":1,"name":"anna, the first","amount":12.50,"day":"2024-02-29","ok":true}',
            b'{"id":2,"name":"bo \\"quoted\\"","amount":-0.05,"day":"2023-12-31","ok":false}',
            b'{"id":3,"name":null,"amount":null,"day":null,"ok":null}']
    else:
        assert read_with(target_reader, result, target_reading) == expected.to_pylist()


@pytest.mark.spark
def test_a_large_result_is_split_into_flowfiles_of_the_configured_size(spark_session):
    rows = "".join(f"{i},item {i:04d}\n" for i in range(2000))
    typed = {"in": (CSVReader, {"Schema Access Strategy": "Use 'Schema Text' Property", "Treat First Line as Header":
                                "true", "Schema Text": avro_text(parse_schema("id BIGINT, name STRING"))})}
    runner = sql_runner(spark_session, "SELECT id, upper(name) AS name FROM flowfiles ORDER BY id", typed, **{
        "Record Reader": "in", "Record Writer": "csv-out", "Max Records Per FlowFile": 600})
    runner.enqueue(b"id,name\n" + rows.encode())
    runner.run()
    outputs = runner.output("success")
    assert [f.attributes["record.count"] for f in outputs] == ["600", "600", "600", "200"]
    assert [f.attributes["fragment.index"] for f in outputs] == ["0", "1", "2", "3"]
    assert {f.attributes["fragment.count"] for f in outputs} == {"4"}
    assert len({f.attributes["filename"] for f in outputs}) == 4
    back = [r for f in outputs for r in read_with(CSVReader, runner.read(f))]
    assert back == [{"id": i, "name": f"ITEM {i:04d}"} for i in range(2000)]

    sized = sql_runner(spark_session, "SELECT * FROM flowfiles ORDER BY id", typed, **{
        "Record Reader": "in", "Record Writer": "json-lines", "Max FlowFile Size": "8 KB"})
    sized.enqueue(b"id,name\n" + rows.encode())
    sized.run()
    contents = sized.contents("success")
    line = len(b'{"id":1999,"name":"item 1999"}\n')
    assert len(contents) > 5 and all(len(c) <= 8 * 1024 + line for c in contents)
    assert b"\n".join(contents) == b"\n".join(orjson.dumps({"id": i, "name": f"item {i:04d}"}) for i in range(2000))


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
        "Record Reader": "json-in", "Minimum Number of Entries": 2, "Record Writer": "json-lines"})
    good = runner.enqueue(b'{"a": 1}\n{"a": 2}\n')
    bad = runner.enqueue(b'{"a": ')
    runner.run()
    [failed] = runner.output("failure")
    assert failed.uuid == bad.uuid
    assert failed.attributes["spark.error"].startswith("not valid JSON: ")   # the reader's reason
    assert runner.contents("success") == [b'{"n":2}']
    assert [f.uuid for f in runner.output("original")] == [good.uuid]

    # a result the writer cannot write (text where its schema wants a number): the whole bin fails
    strict = {"Schema Access Strategy": "Use 'Schema Text' Property",
              "Schema Text": '{"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}'}
    runner = sql_runner(spark_session, "SELECT 'many' AS n FROM flowfiles", {"strict": (JsonRecordSetWriter, strict)},
                        **{"Record Writer": "strict", "Minimum Number of Entries": 2})
    inputs = [runner.enqueue(text.encode()) for text in ORDERS[:2]]
    runner.run()
    failed = runner.output("failure")
    assert sorted(f.uuid for f in failed) == sorted(f.uuid for f in inputs)
    assert all(f.attributes["spark.error"].startswith("the result could not be written: ") and "'many'" in
               f.attributes["spark.error"] for f in failed)
    assert runner.output("success") == [] and runner.output("original") == []
    assert not [e for e in runner.events() if e.event_type in (T.JOIN, T.FORK)]


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
    runner = spark_runner(TransformWithSpark, spark_session, **{
        "Function": f"{__name__}:add_total", "Record Writer": "json-lines", "Minimum Number of Entries": 2})
    for text in ORDERS[:2]:
        runner.enqueue(text.encode())
    runner.run()
    assert runner.contents("success") == [
        b'{"order_id":1,"region":"north","product":"apple","qty":3,"price":0.5,"total":1.5}\n'
        b'{"order_id":2,"region":"south","product":"pear","qty":1,"price":0.75,"total":0.75}\n'
        b'{"order_id":3,"region":"north","product":"pear","qty":2,"price":0.75,"total":1.5}\n'
        b'{"order_id":4,"region":"east","product":"apple","qty":10,"price":0.5,"total":5.0}']

    runner = spark_runner(BigOrders, spark_session, **{
        "Record Writer": "csv-out", "Attribute Columns": "filename", "Minimum Number of Entries": 3})
    for i, text in enumerate(ORDERS):
        runner.enqueue(text.encode(), {"filename": f"f{i}.csv"})
    runner.run()
    assert runner.contents("success") == [b"order_id,product\n1,apple\n4,apple\n5,apple\n"]

    runner = spark_runner(Exploding, spark_session)
    runner.enqueue(ORDERS[0].encode())
    runner.run()
    [failed] = runner.output("failure")
    assert failed.attributes["spark.error"] == "ValueError: the user's function gave up"


@pytest.mark.spark
def test_attribute_columns_let_sql_tell_records_apart(spark_session):
    runner = sql_runner(spark_session, "SELECT filename, count(*) AS n FROM flowfiles GROUP BY filename ORDER BY 1",
                        **{"Attribute Columns": "filename, missing", "Minimum Number of Entries": 3,
                           "Record Writer": "json-lines"})
    for i, text in enumerate(ORDERS):
        runner.enqueue(text.encode(), {"filename": f"f{i}.csv"})
    runner.run()
    assert runner.contents("success") == [b'{"filename":"f0.csv","n":2}\n{"filename":"f1.csv","n":2}\n'
                                          b'{"filename":"f2.csv","n":1}']


@pytest.mark.spark
def test_a_spark_that_cannot_start_leaves_the_flowfiles_queued(spark_session):
    """A failed start (here: a JVM option the app master's Java refuses) is an error naming the
    cause; the trigger rolls back, and the service remembers the cause instead of retrying."""
    name = "flowactors-tests.broken-spark"
    broken = SparkSettings(configs={"spark.ray.raydp_app_master.extraJavaOptions": "-XX:+FlowactorsNoSuchOption"})
    actor = SparkServiceActor.options(name=name).remote(name, broken)
    try:
        runner = sql_runner(SimpleNamespace(name=name), "SELECT 1")
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
    flow.add_service(CSVReader, "csv-in")
    flow.add_service(JsonRecordSetWriter, "json-lines", properties=ONE_LINE)
    sql = flow.add(ExecuteSparkSQL, "sql", properties={
        "Spark Service": spark_session.name, "SQL Query": BY_REGION, "Record Reader": "csv-in",
        "Record Writer": "json-lines", "Minimum Number of Entries": 3, "Max Bin Age": "20 sec"},
        auto_terminate=["original"])
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
    flow.add_service(CSVReader, "csv-in")
    flow.add_service(ParquetRecordSetWriter, "parquet-out")
    flow.add(ExecuteSparkSQL, "sql", properties={"SQL Query": "SELECT 1", "Record Reader": "csv-in",
                                                 "Record Writer": "parquet-out"},
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
