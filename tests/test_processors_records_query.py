"""QueryRecord: NiFi's TestQueryRecord cases that DuckDB's SQL answers, SQL errors, bad input,
validation, and the types a query keeps."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from flowactors.processors.records import QueryRecord
from flowactors.processors.records.query import connect, fields_read, sql_problem
from flowactors.sdk.records import RecordReader, RecordReaderFactory
from flowactors.sdk.services import ControllerService
from flowactors.services import (AvroReader, AvroRecordSetWriter, CSVReader, CSVRecordSetWriter, JsonRecordSetWriter,
                                 JsonTreeReader)
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

JSON_SERVICES = {"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {})}
PEOPLE = [{"name": "Tom", "age": 49}, {"name": "", "age": 3}, {"name": "Alice", "age": None}]


def runner(queries: dict, services=None, **properties) -> ProcessorRunner:
    return ProcessorRunner(QueryRecord, {"Record Reader": "reader", "Record Writer": "writer", **queries, **properties},
                           services=services or JSON_SERVICES)


def records(content: bytes) -> list:
    return json.loads(content)


def run(queries: dict, rows, **properties) -> ProcessorRunner:
    query = runner(queries, **properties)
    query.enqueue(json.dumps(rows).encode())
    query.run()
    return query


@pytest.mark.usefixtures("processor_engine")
def test_each_query_goes_to_its_relationship_and_the_original_to_original():
    # NiFi's testSimple and testNullValueInSingleField: two queries, two relationships
    query = runner({"adults": "select name, age from FLOWFILE WHERE name <> '' AND age >= 18",
                    "count": "select count(*) as c from flowfile where age is null"})
    original = query.enqueue(json.dumps(PEOPLE).encode())
    query.run()
    [adults] = query.output("adults")
    assert records(query.read(adults)) == [{"name": "Tom", "age": 49}]
    assert adults.attributes["QueryRecord.Route"] == "adults"
    assert adults.attributes["record.count"] == "1"
    assert adults.attributes["mime.type"] == "application/json"
    assert query.contents("count") == [b'[{"c":1}]']
    [kept] = query.output("original")
    assert kept.uuid == original.uuid and kept.attributes["QueryRecord.Route"] == "original"
    events = query.events()
    [fork] = [e for e in events if e.event_type == T.FORK]
    assert fork.flowfile_uuid == original.uuid and len(fork.child_uuids) == 2
    assert sorted(e.relationship for e in events if e.event_type == T.ROUTE) == ["adults", "count"]


@pytest.mark.usefixtures("processor_engine")
def test_a_sql_error_sends_the_original_to_failure_with_the_reason():
    # NiFi's testHandlingWithInvalidSchema: one query fails, so no query's results are sent
    query = runner({"rel1": "select * from FLOWFILE where name IS NOT NULL",
                    "rel2": "select name, CAST(name AS DOUBLE) AS num from FLOWFILE"})
    content = json.dumps(PEOPLE).encode()
    query.enqueue(content)
    query.run()
    [failed] = query.output("failure")
    assert query.read(failed) == content
    assert failed.attributes["QueryRecord.Route"] == "failure"
    message = failed.attributes["record.error.message"]
    assert message.startswith("query 'rel2' failed: Conversion Error")
    assert "'Tom'" in message and "\n" not in message
    assert query.output("rel1") == [] and query.output("rel2") == [] and query.output("original") == []


def test_a_column_the_records_lack_is_named_in_the_failure():
    query = run({"q": "select nme from FLOWFILE"}, PEOPLE)
    [failed] = query.output("failure")
    assert failed.attributes["record.error.message"] == (
        "query 'q' failed: Binder Error: Referenced column \"nme\" not found in FROM clause! "
        "Candidate bindings: \"name\", \"age\"")


def test_a_malformed_record_sends_the_original_to_failure():
    query = runner({"q": "select * from FLOWFILE"})
    query.enqueue(b'[{"name": "a"}, {"name": "b"}, {oops}]')
    query.run()
    [failed] = query.output("failure")
    assert failed.attributes["record.error.index"] == "2"
    assert "not valid JSON" in failed.attributes["record.error.message"]
    assert query.output("q") == []


def test_aggregates_order_by_and_aliases():
    # NiFi's testAggregateFunction
    query = run({"q": "select name, sum(points) as points from FLOWFILE GROUP BY name ORDER BY points DESC"},
                [{"name": "Tom", "points": 1}, {"name": "Jerry", "points": 2}, {"name": "Tom", "points": 99}])
    assert records(query.contents("q")[0]) == [{"name": "Tom", "points": 100}, {"name": "Jerry", "points": 2}]


def test_calculations_over_columns():
    # NiFi's testTransformCalc
    rows = [{"ID": 8, "AMOUNT1": 10.05, "AMOUNT2": 15.45, "AMOUNT3": 89.99},
            {"ID": 100, "AMOUNT1": 20.25, "AMOUNT2": 25.25, "AMOUNT3": 45.25}]
    query = run({"q": "select ID, AMOUNT1+AMOUNT2+AMOUNT3 as TOTAL from FLOWFILE where ID=100"}, rows)
    assert records(query.contents("q")[0]) == [{"ID": 100, "TOTAL": 90.75}]


def test_columns_come_in_the_order_selected():
    # NiFi's testSelectOrderRespected and testColumnNames
    row = {"ArticleCode": "12345", "ProductCode": "10101", "ArticleName": "Credit Card", "Country": "RO"}
    query = run({"q": "SELECT ArticleCode, ArticleName, ProductCode, Country FROM FLOWFILE",
                 "all": "select *, Country AS FAV from FLOWFILE"}, [row])
    assert list(records(query.contents("q")[0])[0]) == ["ArticleCode", "ArticleName", "ProductCode", "Country"]
    assert list(records(query.contents("all")[0])[0]) == [*row, "FAV"]


def test_union_all_of_two_projections():
    # NiFi's testUnionAllWithProjection
    row = {"employeeId": "1234", "email": "x@y.com", "englishTrainingTime": 114828,
           "englishLevel": "B2.1", "frenchTrainingTime": 406, "frenchLevel": None}
    sql = """(SELECT employeeId, 'en' AS lovCode, CAST(englishTrainingTime AS INTEGER) AS timeSpent,
                     englishLevel AS proficiencyLevel FROM FLOWFILE WHERE CAST(englishTrainingTime AS INTEGER) <> 0)
             UNION ALL
             (SELECT employeeId, 'fr' AS lovCode, CAST(frenchTrainingTime AS INTEGER) AS timeSpent,
                     frenchLevel AS proficiencyLevel FROM FLOWFILE WHERE CAST(frenchTrainingTime AS INTEGER) <> 0)"""
    query = run({"q": sql}, [row])
    out = sorted(records(query.contents("q")[0]), key=lambda r: r["lovCode"])
    assert out == [{"employeeId": "1234", "lovCode": "en", "timeSpent": 114828, "proficiencyLevel": "B2.1"},
                   {"employeeId": "1234", "lovCode": "fr", "timeSpent": 406, "proficiencyLevel": None}]


def test_arrays_indexed_and_unnested():
    # NiFi's testArrayColumnWithIndex (DuckDB's len() where Calcite says CARDINALITY) and
    # testCollectionFunctionsWithWhereClause
    rows = [{"id": "1", "tags": ["a", "d", "g"]}, {"id": "2", "tags": ["b", "e"]}, {"id": "3", "tags": ["c", "f", "h"]}]
    query = run({"index": 'SELECT id, tags[1] as first, tags[2] as "second", tags[len(tags)] as last FROM FLOWFILE',
                 "unnest": "SELECT id, tags FROM FLOWFILE CROSS JOIN UNNEST(FLOWFILE.tags) AS f(tag) "
                           "WHERE tag IN ('a','b')"}, rows)
    assert records(query.contents("index")[0]) == [{"id": "1", "first": "a", "second": "d", "last": "g"},
                                                   {"id": "2", "first": "b", "second": "e", "last": "e"},
                                                   {"id": "3", "first": "c", "second": "f", "last": "h"}]
    assert records(query.contents("unnest")[0]) == rows[:2]


def test_nested_fields_by_name():
    rows = [{"name": "John", "address": {"city": "New York", "state": "NY"}},
            {"name": "Jane", "address": {"city": "Los Angeles", "state": "CA"}}]
    query = run({"q": "SELECT name, address.city AS city FROM FLOWFILE WHERE address['state'] = 'CA'"}, rows)
    assert records(query.contents("q")[0]) == [{"name": "Jane", "city": "Los Angeles"}]


def test_record_paths_become_list_functions():
    # NiFi's testCompareResultsOfTwoRecordPathsAgainstArray and the documentation's RPATH example,
    # in DuckDB's words (docs/records/query-record.md)
    rows = [{"name": "John", "title": "SE", "addresses": [{"label": "home", "state": "NY"}, {"label": "work", "state": "CA"}]},
            {"name": "Jane", "title": "PM", "addresses": [{"label": "home", "state": "NY"}, {"label": "work", "state": "NY"}]}]
    state = "list_filter(addresses, lambda a: a.label = '{}')[1].state"
    query = run({"q": f"SELECT title, name FROM FLOWFILE WHERE {state.format('home')} <> {state.format('work')}"}, rows)
    assert records(query.contents("q")[0]) == [{"title": "SE", "name": "John"}]


def test_column_names_are_case_insensitive_and_keep_the_records_spelling():
    query = run({"q": "SELECT NAME FROM flowfile WHERE Age > 18 LIMIT 1 OFFSET 0"}, PEOPLE)
    assert records(query.contents("q")[0]) == [{"name": "Tom"}]


def test_an_empty_result_is_sent_unless_told_not_to():
    # NiFi's testReturnsNoResultWithArrayColumn and testNoRecordsInput
    row = {"status": "starting", "myArray": [{"foo": "foo"}]}
    query = run({"q": "SELECT * from FLOWFILE WHERE status = 'failure'"}, [row])
    [out] = query.output("q")
    assert query.read(out) == b"[]" and out.attributes["record.count"] == "0"
    no_records = io.BytesIO()
    fastavro.writer(no_records, {"type": "record", "name": "r", "fields": [{"name": "name", "type": "string"}]}, [])
    empty_input = runner({"q": "select name from FLOWFILE"},
                         services={"reader": (AvroReader, {}), "writer": (JsonRecordSetWriter, {})})
    empty_input.enqueue(no_records.getvalue())
    empty_input.run()
    assert empty_input.contents("q") == [b"[]"]
    dropped = run({"q": "SELECT * from FLOWFILE WHERE status = 'failure'", "all": "SELECT * FROM FLOWFILE"}, [row],
                  **{"Include Zero Record FlowFiles": "false"})
    assert dropped.output("q") == [] and len(dropped.output("all")) == 1
    assert len(dropped.output("original")) == 1


def test_records_without_fields_have_no_table_to_query():
    query = run({"q": "select * from FLOWFILE"}, [])
    [failed] = query.output("failure")
    assert failed.attributes["record.error.message"] == (
        "query 'q' has no table to read: the records have no fields (an empty content, its schema inferred from "
        "no record)")


def test_a_query_may_read_the_records_more_than_once():
    # the example of NiFi's QueryRecord documentation: a subquery scans FLOWFILE again
    query = run({"younger": "SELECT name FROM FLOWFILE WHERE age < (SELECT AVG(age) FROM FLOWFILE)",
                 "twice": "SELECT name FROM FLOWFILE UNION ALL SELECT name FROM FLOWFILE"},
                [{"name": "John", "age": 34}, {"name": "Jane", "age": 30}, {"name": "Jacob", "age": 45}])
    assert records(query.contents("younger")[0]) == [{"name": "John"}, {"name": "Jane"}]
    assert len(records(query.contents("twice")[0])) == 6


class ProjectionSpy(ControllerService, RecordReaderFactory):
    """Reads every content as the same three records (a, b, c), recording the fields each read
    is projected to (None: all of them)."""

    description = "test reader"
    properties = ()
    reads: list = []
    TABLE = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0.5, 1.5, 2.5]})

    def create_reader(self, attributes, stream, size) -> RecordReader:
        spy = self

        class Reader(RecordReader):
            def schema(self):
                return spy.TABLE.schema

            def batches(self):
                spy.reads.append(None)
                return iter(spy.TABLE.to_batches())

            def projected_batches(self, names):
                spy.reads.append(list(names))
                return iter(spy.TABLE.select(list(names)).to_batches())

        return Reader()


def test_the_reader_decodes_only_the_fields_a_query_reads():
    ProjectionSpy.reads = []
    query = runner({"filtered": "SELECT a FROM FLOWFILE WHERE c > 1", "all": "SELECT * FROM FLOWFILE",
                    "counted": "SELECT count(*) AS n FROM FLOWFILE",
                    "twice": "SELECT b FROM FLOWFILE WHERE a = (SELECT max(a) FROM FLOWFILE)"},
                   services={"reader": (ProjectionSpy, {}), "writer": (JsonRecordSetWriter, {})})
    query.enqueue(b"")
    query.run()
    assert [records(query.contents(name)[0]) for name in ("filtered", "all", "counted", "twice")] == [
        [{"a": 2}, {"a": 3}], [{"a": 1, "b": "x", "c": 0.5}, {"a": 2, "b": "y", "c": 1.5}, {"a": 3, "b": "z", "c": 2.5}],
        [{"n": 3}], [{"b": "z"}]]
    assert ProjectionSpy.reads == [["a", "c"], None, ["a"], ["a", "b"], ["a", "b"]]


@pytest.mark.parametrize("sql, fields", [
    ("SELECT a FROM FLOWFILE WHERE c > 1", ["a", "c"]),
    ("SELECT c, a FROM FLOWFILE", ["a", "c"]),                      # in the schema's order
    ("SELECT * FROM FLOWFILE", None),                               # every field: no projection
    ("SELECT 1 FROM FLOWFILE", ["a"]),                              # none: the first
    ("SELECT s.p FROM FLOWFILE", ["s"]),                            # a nested field: its whole column
    ("SELECT b FROM FLOWFILE UNION ALL SELECT CAST(a AS VARCHAR) FROM FLOWFILE", ["a", "b"]),
    ("SELECT missing FROM FLOWFILE", None),                         # does not bind: the query's own error
    ("SELECT 42", ["a"]),
])
def test_fields_read_are_those_duckdb_scans(sql, fields):
    db = connect()
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64()),
                        ("s", pa.struct([("p", pa.int64()), ("q", pa.int64())]))])
    db.register("FLOWFILE", schema.empty_table())
    assert fields_read(db, sql, schema) == fields
    db.close()


@pytest.mark.parametrize("strategy", ["Use String Fields From Header", "Infer Schema"])
def test_csv_in_and_out(strategy):
    # NiFi's testNullable and testNoRecordsInput (a header and no record: the header's fields, as STRING fields
    # when inferred too, so the query has a table to read)
    services = {"reader": (CSVReader, {"Schema Access Strategy": strategy}),
                "writer": (CSVRecordSetWriter, {})}
    query = runner({"q": "select name, age from FLOWFILE WHERE name IS NULL OR CAST(age AS INTEGER) > 23"},
                   services=services)
    query.enqueue(b"name,age\nTom,49\nAlice,\n,36\nJerry,3\n")
    query.enqueue(b"name,age\n")
    query.run()
    assert query.contents("q") == [b"name,age\nTom,49\n,36\n", b"name,age\n"]


def test_each_flowfile_is_queried_with_its_own_fields():
    # FLOWFILE is registered once a connection: each query binds to the FlowFile it runs over
    query = runner({"q": "SELECT * FROM FLOWFILE"})
    query.enqueue(json.dumps([{"a": 1, "b": "x"}]).encode())
    query.enqueue(json.dumps([{"c": 2.5}]).encode())
    query.enqueue(json.dumps([{"a": 3, "b": "y"}]).encode())
    query.run()
    assert [records(c) for c in query.contents("q")] == [[{"a": 1, "b": "x"}], [{"c": 2.5}], [{"a": 3, "b": "y"}]]
    bad = runner({"q": "SELECT a FROM FLOWFILE"})
    bad.enqueue(json.dumps([{"a": 1}]).encode())
    bad.enqueue(json.dumps([{"c": 2}]).encode())
    bad.run()
    assert records(bad.contents("q")[0]) == [{"a": 1}]
    assert '"a" not found' in bad.output("failure")[0].attributes["record.error.message"]


def test_a_query_with_expressions_is_evaluated_against_each_flowfile():
    query = runner({"q": "SELECT name FROM FLOWFILE WHERE age > ${minimum}"})
    query.enqueue(json.dumps(PEOPLE).encode(), {"minimum": "40"})
    query.enqueue(json.dumps(PEOPLE).encode(), {"minimum": "1"})
    query.run()
    assert [records(c) for c in query.contents("q")] == [[{"name": "Tom"}], [{"name": "Tom"}, {"name": ""}]]


def test_a_query_reads_nothing_but_the_flowfile(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    query = run({"q": f"SELECT * FROM read_csv('{secret}')"}, PEOPLE)
    [failed] = query.output("failure")
    assert "file system operations are disabled" in failed.attributes["record.error.message"]


def test_types_of_the_input_survive_a_query():
    schema = {"type": "record", "name": "event", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}, {"name": "n", "type": "int"}]}
    content = io.BytesIO()
    fastavro.writer(content, schema, [{"at": 1_000, "kind": "A", "n": 1}, {"at": 2_500, "kind": "B", "n": 2}])
    query = runner({"q": "SELECT * FROM FLOWFILE WHERE n > 1", "total": "SELECT kind, sum(n) AS total FROM FLOWFILE "
                                                                      "GROUP BY kind ORDER BY kind"},
                   services={"reader": (AvroReader, {}), "writer": (AvroRecordSetWriter, {})})
    query.enqueue(content.getvalue())
    query.run()
    [out] = query.output("q")
    reader = fastavro.reader(io.BytesIO(query.read(out)))
    fields = {f["name"]: f["type"] for f in reader.writer_schema["fields"]}
    assert "timestamp-millis" in json.dumps(fields["at"])   # DuckDB's microseconds made milliseconds again
    assert "enum" in json.dumps(fields["kind"])
    [row] = list(reader)
    assert (row["kind"], row["n"], row["at"].timestamp()) == ("B", 2, 2.5)
    totals = list(fastavro.reader(io.BytesIO(query.contents("total")[0])))
    assert [(r["kind"], int(r["total"])) for r in totals] == [("A", 1), ("B", 2)]


def test_queries_are_checked_when_the_flow_validates():
    assert sql_problem("SELECT * FROM FLOWFILE WHERE a = 1") is None
    assert sql_problem("selec 1").startswith("not a valid SQL query: Parser Error: syntax error at or near \"selec\"")
    assert sql_problem("DELETE FROM FLOWFILE") == "must be a SELECT query (this is a statement of type DELETE)"
    assert sql_problem("SELECT 1; SELECT 2") == "must be one SQL query, not 2 statements"
    with pytest.raises(ValueError) as problems:
        runner({"bad": "selec 1", "original": "SELECT 1", "later": "SELECT ${x} FROM FLOWFILE"})
    message = str(problems.value)
    assert "query property 'bad': not a valid SQL query" in message
    assert "query property 'original' has the name of the relationship 'original'" in message
    assert "later" not in message   # an expression is known only per FlowFile
    with pytest.raises(ValueError, match="needs a RecordSetWriterFactory, but controller service 'reader' is a "
                                         "JsonTreeReader"):
        ProcessorRunner(QueryRecord, {"Record Reader": "reader", "Record Writer": "reader", "q": "SELECT 1"},
                        services=JSON_SERVICES)


def test_relationships_follow_the_queries():
    assert QueryRecord.relationship_names({"Record Reader": "r", "big": "SELECT 1", "small": "SELECT 2"}) == [
        "original", "failure", "big", "small"]


def test_each_task_opens_its_connection_when_scheduled_and_closes_it_when_stopped():
    query = runner({"q": "SELECT * FROM FLOWFILE"})
    query.enqueue(json.dumps(PEOPLE).encode())
    query.run(stop=False)
    connection = query.processor._db
    assert connection is not None and len(query.output("q")) == 1
    query.run(stop=True)
    assert query.processor._db is None
    with pytest.raises(Exception, match="closed"):
        connection.execute("SELECT 1")
