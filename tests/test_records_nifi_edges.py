"""Two paths of the record services that the whole-flow test (test_records_end_to_end.py) does not
reach, each in a flow shaped as NiFi exports it: a JSON bytes field (json_bytes.py: an array of
numbers in, Java's signed bytes out) and a Parquet file range (parquet_footer.py: the row groups a
range holds, a damaged footer to failure without ending the process). GetFile -> the record
processor -> PutFile, failures to a second PutFile: every file comes out one side or the other."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from nifi_flows import STANDARD, connection, group, processor, snapshot
from nifi_record_flow import record_processor, service

JSON = "org.apache.nifi.json."


def flow(source: Path, out: Path, failed: Path, services: list[dict], steps: list[dict]) -> dict:
    """GetFile from ``source`` -> ``steps`` (each one's success to the next) -> PutFile into
    ``out``; every step's failure -> PutFile into ``failed``."""
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    store = processor(root, "store", STANDARD + "PutFile", {"Directory": str(out)}, auto_terminate=("success",
                                                                                                     "failure"))
    refused = processor(root, "refused", STANDARD + "PutFile", {"Directory": str(failed)},
                        auto_terminate=("success", "failure"))
    chain = [get, *steps, store]
    links = [connection(root, a, b, ("success",)) for a, b in zip(chain, chain[1:])]
    links += [connection(root, step, refused, ("failure",)) for step in steps if step["name"] != "range"]
    return snapshot(group(root, "edges", None, None, processors=[*chain, refused], connections=links,
                          controllerServices=services), {})


def run(definition: dict, tmp_path: Path, files: int) -> dict:
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"] in ("store", "refused")) >= files
    final = run_flow(flow_from_nifi(definition), tmp_path / "repository", engine="in-process", timeout=120,
                     until=stored)
    assert not final.get("timed_out"), final
    return final


def test_a_json_bytes_field_reads_arrays_of_numbers_and_writes_javas_signed_bytes(tmp_path):
    source, out, failed = (tmp_path / name for name in ("in", "out", "failed"))
    for folder in (source, out, failed):
        folder.mkdir()
    (source / "good.json").write_text('[{"id": 1, "b": [1, 255, -128, 0]}, {"id": 2, "b": null}]')
    (source / "bad.json").write_text('[{"id": 3, "b": [1, 300]}]')
    schema = {"type": "record", "name": "blob", "fields": [{"name": "id", "type": "long"},
                                                            {"name": "b", "type": ["null", "bytes"]}]}
    services = [service("json-in", "JsonTreeReader", JSON + "JsonTreeReader", {
                    "schema-access-strategy": "schema-text-property", "schema-text": json.dumps(schema)}, "root"),
                service("json-out", "JsonRecordSetWriter", JSON + "JsonRecordSetWriter", {
                    "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
                    "output-grouping": "output-array"}, "root")]
    convert = record_processor("root", "convert", "ConvertRecord", {"record-reader": "json-in",
                                                                   "record-writer": "json-out"},
                               ("record-reader", "record-writer"))
    run(flow(source, out, failed, services, [convert]), tmp_path, 2)
    assert json.loads((out / "good.json").read_text()) == [{"id": 1, "b": [1, -1, -128, 0]}, {"id": 2, "b": None}]
    assert (failed / "bad.json").read_text() == '[{"id": 3, "b": [1, 300]}]'   # unchanged, nothing lost
    assert sorted(p.name for p in out.iterdir()) == ["good.json"]


def test_a_parquet_file_range_reads_its_row_groups_and_a_damaged_footer_goes_to_failure(tmp_path):
    source, out, failed = (tmp_path / name for name in ("in", "out", "failed"))
    for folder in (source, out, failed):
        folder.mkdir()
    table = pa.table({"n": pa.array(range(3000), pa.int64())})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=1000)
    metadata = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata
    second, third = (metadata.row_group(i).column(0) for i in (1, 2))
    start = second.dictionary_page_offset or second.data_page_offset
    end = third.dictionary_page_offset or third.data_page_offset
    (source / "numbers.parquet").write_bytes(sink.getvalue())
    damaged = io.BytesIO()   # the fuzz finding whose column chunk metadata aborted pyarrow (std::terminate)
    pq.write_table(pa.table({"l": [[1, None]]}), damaged, store_schema=False)
    (source / "damaged.parquet").write_bytes(damaged.getvalue().replace(b"\x35\x02\x18\x01l", b"\x33\x02\x18\x01l", 1))
    services = [service("parquet-in", "ParquetReader", "org.apache.nifi.parquet.ParquetReader", {}, "root"),
                service("json-out", "JsonRecordSetWriter", JSON + "JsonRecordSetWriter", {
                    "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
                    "output-grouping": "output-oneline"}, "root")]
    whole = "${filename:startsWith('damaged'):ifElse(%s, %s)}"   # the damaged file's range holds all of it
    ranged = processor("root", "range", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "parquet.file.range.startOffset": whole % (0, start), "parquet.file.range.endOffset": whole % (1 << 30, end)})
    convert = record_processor("root", "convert", "ConvertRecord", {"record-reader": "parquet-in",
                                                                   "record-writer": "json-out"},
                               ("record-reader", "record-writer"))
    final = run(flow(source, out, failed, services, [ranged, convert]), tmp_path, 2)
    lines = (out / "numbers.parquet").read_text().splitlines()
    assert [json.loads(line)["n"] for line in lines] == list(range(1000, 2000))   # the second row group alone
    assert (failed / "damaged.parquet").exists()   # the process lived on; the file is whole
    [converter] = [p for p in final["processors"] if p["name"] == "convert"]
    assert converter["flowfiles_in"] == 2
