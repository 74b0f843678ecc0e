"""NiFi 2 Python record transforms on reader and writer services (flowactors/nifi/record_transform.py).

The values a transform gets are NiFi's JSON writer's (dates as epoch milliseconds, bytes as
signed bytes) and go back into the schema's types; records are read and transformed a batch at a
time; the writer service decides the schema written and its attributes reach the FlowFile; a
definition naming one of the record formats of before says what it misses.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from flowactors import Flow, FlowValidationError
from flowactors.nifi import add_python_processor, python_processor_type
from flowactors.nifi.record_transform import inferred_schema, json_records, records_batch
from flowactors.processors import GenerateFlowFile
from flowactors.sdk.records import RecordReader, RecordReaderFactory
from flowactors.sdk.services import ControllerService
from flowactors.services import CSVReader, JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import ProcessorRunner

ONE_LINE = {"Output Grouping": "One Line Per Object"}
TRANSFORM = '''
from nifiapi.recordtransform import RecordTransform, RecordTransformResult


class {name}(RecordTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.RecordTransform']

    class ProcessorDetails:
        version = '1.0.0'

    def __init__(self, **kwargs):
        pass

    def transform(self, context, record, schema, attributemap):
{body}
'''


def transform_type(folder: Path, name: str, body: str):
    path = folder / f"{name}.py"
    path.write_text(TRANSFORM.format(name=name, body=textwrap.indent(textwrap.dedent(body), " " * 8)))
    return python_processor_type(path)


# ---------------------------------------------------------------------------------- values
SCHEMA = pa.schema([
    ("i", pa.int32()), ("f", pa.float32()), ("d", pa.decimal128(10, 2)), ("day", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")), ("t", pa.time32("ms")), ("b", pa.binary()),
    ("s", pa.struct([("at", pa.timestamp("ms")), ("x", pa.string())])), ("l", pa.list_(pa.date32())),
    ("m", pa.map_(pa.string(), pa.timestamp("ms"))), ("e", pa.dictionary(pa.int32(), pa.string())),
])
ROW = {"i": 1, "f": 1.1, "d": Decimal("12.50"), "day": dt.date(2024, 2, 29),
       "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 998000, tzinfo=dt.timezone.utc), "t": dt.time(3, 4, 5, 6000),
       "b": b"\x01\xff", "s": {"at": dt.datetime(2024, 1, 2, 3, 4, 5), "x": "y"}, "l": [dt.date(1970, 1, 2), None],
       "m": [("k", dt.datetime(1970, 1, 1, 0, 0, 1))], "e": "red"}
AS_JSON = {"i": 1, "f": 1.1, "d": 12.5, "day": 1709164800000, "ts": -2, "t": 11045006, "b": [1, -1],
           "s": {"at": 1704164645000, "x": "y"}, "l": [86400000, None], "m": {"k": 1000}, "e": "red"}


def test_records_reach_a_transform_as_nifis_json_writer_writes_them_and_go_back_into_their_types():
    """NiFi writes the records as JSON with no formats (WriteJsonResult) and Python parses it: dates,
    times and timestamps are epoch milliseconds (rounded down), decimals numbers, float32 its
    shortest text, bytes arrays of signed bytes, maps objects; nested values likewise."""
    empty = {name: None for name in SCHEMA.names}
    batch = pa.RecordBatch.from_pylist([empty, ROW, empty], schema=SCHEMA)
    assert json_records(batch) == [empty, AS_JSON, empty]
    assert json_records(batch.slice(1, 2)) == [AS_JSON, empty]   # a reader's batch may be a slice
    back = records_batch([AS_JSON, empty], SCHEMA)
    assert back.schema.equals(SCHEMA) and back.to_pylist() == batch.slice(1, 2).to_pylist()
    # microseconds are lost as NiFi loses them: its records hold milliseconds
    stamp = pa.RecordBatch.from_pylist([{"ts": dt.datetime(2024, 1, 1, 0, 0, 0, 1500)}],
                                       schema=pa.schema([("ts", pa.timestamp("us"))]))
    assert json_records(stamp) == [{"ts": 1704067200001}]
    # values a transform put as Python's own (a datetime, bytes) are taken too; 0..255 as bytes
    assert records_batch([{"ts": dt.datetime(2024, 1, 1), "b": [200, 1]}, {"ts": 0, "b": b"ok"}],
                         pa.schema([("ts", pa.timestamp("us")), ("b", pa.binary())])).to_pylist() == [
        {"ts": dt.datetime(2024, 1, 1), "b": b"\xc8\x01"}, {"ts": dt.datetime(1970, 1, 1), "b": b"ok"}]


def test_a_result_without_a_schema_is_typed_from_its_records():
    """The first record's fields (NiFi's writer keeps the first record's schema), each typed from
    every record's value; a field only ever null is STRING, as NiFi infers it; a field of several
    JSON kinds is text."""
    rows = [{"n": 1, "none": None, "mixed": 1, "nested": {"x": None}, "list": [None]},
            {"n": 2.5, "none": None, "mixed": "two", "nested": {"x": None}, "list": [], "later": True}]
    schema = inferred_schema(rows)
    assert schema == pa.schema([("n", pa.float64()), ("none", pa.string()), ("mixed", pa.string()),
                                ("nested", pa.struct([("x", pa.string())])), ("list", pa.list_(pa.string()))])
    assert records_batch(rows, schema).to_pylist() == [
        {"n": 1.0, "none": None, "mixed": "1", "nested": {"x": None}, "list": [None]},
        {"n": 2.5, "none": None, "mixed": "two", "nested": {"x": None}, "list": []}]


# ---------------------------------------------------------------------------------- streaming
class ThreeBatches(ControllerService, RecordReaderFactory):
    """Reads any content as three batches of two records (ids 0..5), noting each batch in the
    file the FlowFile's 'journal' attribute names as it is read."""

    def create_reader(self, attributes, stream, size):
        return _ThreeBatches(attributes["journal"])


class _ThreeBatches(RecordReader):
    def __init__(self, journal: str):
        self.journal = journal

    def schema(self) -> pa.Schema:
        return pa.schema([("id", pa.int64())])

    def batches(self):
        for number in range(3):
            with open(self.journal, "a") as out:
                out.write(f"read {number}\n")
            yield pa.record_batch({"id": [2 * number, 2 * number + 1]}, schema=self.schema())


def test_records_are_read_and_transformed_a_batch_at_a_time(tmp_path):
    """Each batch is transformed before the next is read (NiFi hands Python its records in
    pieces too); a group's records from every batch are written into one FlowFile."""
    journal = tmp_path / "journal"
    kind = transform_type(tmp_path, "Parity", """
        with open(attributemap.getAttribute('journal'), 'a') as out:
            out.write(f"transform {record['id']}\\n")
        return RecordTransformResult(record=record, partition={'odd': record['id'] % 2 == 1})
        """)
    runner = ProcessorRunner(kind, {"Record Reader": "three", "Record Writer": "out"}, auto_terminate=["original"],
                             services={"three": (ThreeBatches, {}), "out": (JsonRecordSetWriter, ONE_LINE)})
    runner.enqueue(b"", {"journal": str(journal)})
    runner.run()
    assert journal.read_text().splitlines() == [
        "read 0", "transform 0", "transform 1", "read 1", "transform 2", "transform 3",
        "read 2", "transform 4", "transform 5"]
    outputs = {f.attributes["odd"]: [json.loads(line)["id"] for line in runner.read(f).splitlines()]
               for f in runner.output("success")}
    assert outputs == {"false": [0, 2, 4], "true": [1, 3, 5]}
    assert {f.attributes["record.count"] for f in runner.output("success")} == {"3"}


# ---------------------------------------------------------------------------------- the writer service
def test_the_writer_services_schema_and_attributes_make_the_output(tmp_path):
    """The writer's own schema (Schema Text here) is the one written, and what the writer says of
    what it wrote (its schema as 'avro.schema') is on the FlowFile, with record.count and
    mime.type; NiFi's write_schema gets the records' schema (the writer inherits it by default)."""
    kind = transform_type(tmp_path, "Keep", "return RecordTransformResult(record=record)")
    schema_text = json.dumps({"type": "record", "name": "kept", "fields": [{"name": "id", "type": "long"}]})
    writer = {**ONE_LINE, "Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": schema_text,
              "Schema Write Strategy": "Set 'avro.schema' Attribute"}
    runner = ProcessorRunner(kind, {"Record Reader": "in", "Record Writer": "out"}, auto_terminate=["original"],
                             services={"in": (JsonTreeReader, {}), "out": (JsonRecordSetWriter, writer)})
    runner.enqueue(b'{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n')
    runner.run()
    [out] = runner.output("success")
    assert runner.read(out) == b'{"id":1}\n{"id":2}'
    assert out.attributes["record.count"] == "2" and out.attributes["mime.type"] == "application/json"
    assert json.loads(out.attributes["avro.schema"])["name"] == "kept"


def test_a_record_the_writer_cannot_write_fails_the_input_and_emits_nothing(tmp_path):
    kind = transform_type(tmp_path, "Keep", "return RecordTransformResult(record=record)")
    schema_text = json.dumps({"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]})
    writer = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": schema_text}
    runner = ProcessorRunner(kind, {"Record Reader": "in", "Record Writer": "out"},
                             services={"in": (JsonTreeReader, {}), "out": (JsonRecordSetWriter, writer)})
    runner.enqueue(b'{"id": 1}\n{"id": "many"}\n', {"filename": "mixed"})   # 'many' is no long
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("failure")] == ["mixed"]
    assert runner.output("success") == [] and runner.output("original") == []


# ---------------------------------------------------------------------------------- definitions of before
def test_a_definition_naming_a_record_format_of_before_names_what_it_misses(tmp_path):
    """A record transform's Record Reader and Record Writer once took 'CSV', 'JSON Lines' or
    'Parquet'; they name services now. Such a definition is refused naming the service it lacks
    (docs/nifi-python-processors.md says what to add), and runs once the flow has services of
    those names."""
    kind = transform_type(tmp_path, "Keep", "return RecordTransformResult(record=record)")
    flow = Flow("old")
    source = flow.add(GenerateFlowFile, "gen", properties={"Custom Text": "id,name\n1,a\n", "Batch Size": "1"})
    keep = add_python_processor(flow, kind.info.path, "keep", properties={
        "Record Reader": "CSV", "Record Writer": "JSON Lines"}, auto_terminate=["success", "failure"])
    flow.connect(source, keep)
    with pytest.raises(FlowValidationError) as refused:
        flow.validate()
    assert "processor 'keep': property 'Record Reader' names controller service 'CSV', which the flow does not " \
           "have in reach (a RecordReaderFactory it has: none)" in str(refused.value)
    assert "property 'Record Writer' names controller service 'JSON Lines'" in str(refused.value)
    flow.add_service(CSVReader, "CSV", properties={"Treat First Line as Header": "true"})
    flow.add_service(JsonRecordSetWriter, "JSON Lines", properties=ONE_LINE)
    flow.validate()
