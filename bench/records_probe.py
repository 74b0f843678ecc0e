"""Records probe: ConvertRecord (CSV -> Parquet) and QueryRecord on the in-process engine, against
pyarrow and DuckDB doing the same work directly in one process.

Data: about ``total`` bytes of CSV (id, name, amount, category, flag; a header each file), in
FlowFiles of 1 MiB and of 100 MiB. The CSV reader is given the schema (as pyarrow is given the
column types); the Parquet writer writes snappy, as pyarrow's default.

* **convert**: GetFile -> ConvertRecord (CSVReader -> ParquetRecordSetWriter). The figure is
  ConvertRecord's own task time (``task_seconds``: ``on_trigger`` plus commit) against pyarrow
  streaming each file (``pyarrow.csv.open_csv`` -> ``ParquetWriter.write_batch``). The ratio is
  throughput: flowactors' MB/s over the baseline's (1.0 = as fast).
* **query**: GetFile -> QueryRecord (``SELECT id, name, amount FROM FLOWFILE WHERE amount > 500``,
  ParquetReader -> ParquetRecordSetWriter) over the same records as Parquet (the files the
  ``convert`` baseline wrote), against DuckDB running the same query on the same files
  (``COPY (SELECT ... FROM read_parquet(...)) TO ...``).
  A second pair reads the CSV files (CSVReader) against DuckDB's own ``read_csv``.
* **rss** (``--rss``): one FlowFile of ``--rss-size`` (2 GiB) converted CSV -> Parquet in a child
  process; its peak RSS (``VmHWM``; the target: under 600 MiB).

Each row's notes split the task's time: the same parts done directly, file by file, outside any
flow (the reader service, DuckDB over its batches in memory, the writer service), and the rest
(the session, the content repository, the processor, DuckDB's scan of a stream).

``python -m bench.records_probe [--total MB] [--rss] [--rss-size MB]``; prints the rows as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from bench import row
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GetFile
from flowactors.processors.records import ConvertRecord, QueryRecord
from flowactors.processors.records.query import connect
from flowactors.sdk.flow import Flow
from flowactors.services import CSVReader, ParquetReader, ParquetRecordSetWriter
from flowactors.testing import enable_service

SCENARIO = "records"
MIB = 1 << 20
COLUMNS = {"id": pa.int64(), "name": pa.string(), "amount": pa.float64(), "category": pa.string(), "flag": pa.bool_()}
AVRO_SCHEMA = json.dumps({"type": "record", "name": "sale", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "category", "type": "string"}, {"name": "flag", "type": "boolean"}]})
QUERY = "SELECT id, name, amount FROM FLOWFILE WHERE amount > 500"
CSV_READER = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": AVRO_SCHEMA,
              "Treat First Line as Header": "true"}


# ---------------------------------------------------------------------------------- data
def csv_rows(count: int, start: int, rng: np.random.Generator) -> bytes:
    """``count`` CSV lines (no header) of ids from ``start``."""
    ids = np.arange(start, start + count)
    names = rng.choice(np.array(["alice", "bob", "carol", "dave", "erin", "frank"]), count)
    amounts = np.round(rng.random(count) * 1000, 2)
    categories = rng.choice(np.array(["books", "games", "music", "tools"]), count)
    flags = rng.random(count) < 0.5
    table = pa.table({"id": ids, "name": names, "amount": amounts, "category": categories, "flag": flags})
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue().to_pybytes()


def write_files(folder: Path, total: int, each: int, seed: int = 7) -> list[Path]:
    """CSV files of about ``each`` bytes, ``total`` bytes in all, a header line each."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per_row = len(csv_rows(1000, 0, rng)) / 1000
    paths, start = [], 0
    for index in range(max(1, total // each)):
        path = folder / f"part-{index:05d}.csv"
        with open(path, "wb") as out:
            out.write(b"id,name,amount,category,flag\n")
            written = 0
            while written < each:
                count = max(1, min(200_000, int((each - written) / per_row)))
                data = csv_rows(count, start, rng)
                out.write(data)
                written += len(data)
                start += count
        paths.append(path)
    return paths


def staged(paths: list[Path], folder: Path) -> Path:
    """A copy of ``paths`` in ``folder`` (GetFile deletes what it takes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        shutil.copyfile(path, folder / path.name)
    return folder


# ---------------------------------------------------------------------------------- flowactors
def record_flow(source: Path, name: str, processor, properties: dict, reader, reader_properties: dict) -> Flow:
    flow = Flow(name)
    flow.add_service(reader, "reader", properties=reader_properties)
    flow.add_service(ParquetRecordSetWriter, "writer")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 10,
                                               "Minimum File Age": "0 sec"})
    work = flow.add(processor, "work", batch_size=10, properties={
        "Record Reader": "reader", "Record Writer": "writer", **properties},
        auto_terminate=tuple(processor.relationship_names(properties)))
    flow.connect(get, work, name="taken")
    return flow


def run_records(flow: Flow, repository: Path) -> dict:
    started = time.perf_counter()
    final = run_flow(flow, repository, engine="in-process", timeout=3600)
    wall = time.perf_counter() - started
    work = processor_totals(final)["work"]
    return {"wall": wall, "task_seconds": work["task_seconds"], "status": work}


# ---------------------------------------------------------------------------------- baselines
def pyarrow_convert(paths: list[Path], out: Path) -> float:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for path in paths:
        reader = pa_csv.open_csv(path, convert_options=pa_csv.ConvertOptions(column_types=COLUMNS),
                                 read_options=pa_csv.ReadOptions(block_size=4 * MIB))
        with pq.ParquetWriter(out / (path.stem + ".parquet"), reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    return time.perf_counter() - started


def duckdb_query(paths: list[Path], out: Path, source: str) -> float:
    out.mkdir(parents=True, exist_ok=True)
    connection = duckdb.connect()
    started = time.perf_counter()
    for path in paths:
        scan = f"read_parquet('{path}')" if source == "parquet" else \
            f"read_csv('{path}', header=true, columns={{'id': 'BIGINT', 'name': 'VARCHAR', 'amount': 'DOUBLE', " \
            f"'category': 'VARCHAR', 'flag': 'BOOLEAN'}})"
        connection.execute(f"COPY ({QUERY.replace('FLOWFILE', scan)}) TO '{out / (path.stem + '.parquet')}' "
                           "(FORMAT parquet)")
    connection.close()
    return time.perf_counter() - started


def where_it_goes(paths: list[Path], reader_type, reader_properties: dict, query: str | None = None) -> dict:
    """The parts of the work done directly, file by file, outside any flow (seconds): the reader
    service alone reading every batch, DuckDB running ``query`` over those batches in memory
    (with ``query``), and the Parquet writer service alone writing the result to /dev/null."""
    reader = enable_service(reader_type, reader_properties)
    writer = enable_service(ParquetRecordSetWriter)
    times = {"reader": 0.0, "duckdb": 0.0, "writer": 0.0}
    connection = connect()
    for path in paths:
        started = time.perf_counter()
        with open(path, "rb") as stream:
            records = reader.create_reader({}, stream, path.stat().st_size)
            result = pa.Table.from_batches(list(records.batches()), schema=records.schema())
        times["reader"] += time.perf_counter() - started
        if query:
            started = time.perf_counter()
            connection.register("FLOWFILE", result)
            result = connection.sql(query).to_arrow_table()
            connection.unregister("FLOWFILE")
            times["duckdb"] += time.perf_counter() - started
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            out = writer.create_writer(writer.write_schema({}, result.schema), sink, {})
            for batch in result.to_batches(max_chunksize=65536):
                out.write_batch(batch)
            out.finish()
        times["writer"] += time.perf_counter() - started
    connection.close()
    return times if query else {k: v for k, v in times.items() if k != "duckdb"}


def breakdown(task_seconds: float, parts: dict) -> str:
    rest = task_seconds - sum(parts.values())
    return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in {**parts, "the rest": rest}.items())


# ---------------------------------------------------------------------------------- scenarios
def convert_rows(workdir: Path, total: int, each: int) -> tuple[list[dict], list[Path]]:
    label = f"{each // MIB} MiB FlowFiles"
    paths = write_files(workdir / f"csv-{each}", total, each)
    nbytes = sum(p.stat().st_size for p in paths)
    baseline = pyarrow_convert(paths, workdir / f"pyarrow-{each}")
    parquet = sorted((workdir / f"pyarrow-{each}").glob("*.parquet"))
    ours = run_records(record_flow(staged(paths, workdir / f"in-{each}"), f"records-convert-{each}", ConvertRecord,
                                   {}, CSVReader, CSV_READER), workdir / f"repo-convert-{each}")
    parts = where_it_goes(paths, CSVReader, CSV_READER)
    mbs = nbytes / MIB
    rows = [row(SCENARIO, f"ConvertRecord CSV -> Parquet, {label}", round(mbs / ours["task_seconds"], 1),
                round(mbs / baseline, 1), "pyarrow open_csv -> ParquetWriter", "MiB/s",
                f"{len(paths)} files, {mbs:.0f} MiB; task {ours['task_seconds']:.2f} s (wall {ours['wall']:.2f} s "
                f"with GetFile), pyarrow {baseline:.2f} s; the task's parts done alone: "
                f"{breakdown(ours['task_seconds'], parts)}")]
    return rows, parquet


def query_rows(workdir: Path, csv_paths: list[Path], parquet: list[Path], each: int) -> list[dict]:
    label = f"{each // MIB} MiB FlowFiles"
    rows = []
    for source, paths, reader, properties in (("parquet", parquet, ParquetReader, {}),
                                              ("csv", csv_paths, CSVReader, CSV_READER)):
        nbytes = sum(p.stat().st_size for p in paths)
        baseline = duckdb_query(paths, workdir / f"duckdb-{source}-{each}", source)
        ours = run_records(record_flow(staged(paths, workdir / f"qin-{source}-{each}"), f"records-query-{source}-{each}",
                                       QueryRecord, {"big": QUERY}, reader, properties),
                           workdir / f"repo-query-{source}-{each}")
        parts = where_it_goes(paths, reader, properties, QUERY)
        mbs = nbytes / MIB
        rows.append(row(SCENARIO, f"QueryRecord {source} -> Parquet, {label}", round(mbs / ours["task_seconds"], 1),
                        round(mbs / baseline, 1), f"DuckDB COPY (query over read_{source}) TO parquet", "MiB/s",
                        f"{len(paths)} files, {mbs:.0f} MiB of {source}; task {ours['task_seconds']:.2f} s (wall "
                        f"{ours['wall']:.2f} s), DuckDB {baseline:.2f} s; the task's parts done alone: "
                        f"{breakdown(ours['task_seconds'], parts)}"))
    return rows


def rss_row(workdir: Path, size: int) -> dict:
    """Peak RSS of a child process converting one CSV FlowFile of ``size`` bytes to Parquet."""
    paths = write_files(workdir / "rss-csv", size, size)
    child = subprocess.run([sys.executable, "-m", "bench.records_probe", "--rss-child", str(paths[0].parent),
                            str(workdir / "repo-rss")], capture_output=True, text=True, check=True)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    return row(SCENARIO, f"ConvertRecord peak RSS, one {size // MIB} MiB CSV FlowFile", round(result["peak_mib"]),
               600, "target", "MiB", f"task {result['task_seconds']:.1f} s; the whole process (Python, pyarrow, "
                                      "the in-process engine) at its peak")


def _rss_child(source: Path, repository: Path) -> None:
    ours = run_records(record_flow(source, "records-rss", ConvertRecord, {}, CSVReader, CSV_READER), repository)
    print(json.dumps({"peak_mib": peak_rss_mib(), "task_seconds": ours["task_seconds"]}))


def peak_rss_mib() -> float:
    """This process's peak RSS since its exec (``VmHWM``; ``ru_maxrss`` would count the parent's
    RSS at the fork, which a child keeps across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run(quick: bool, workdir: Path, total: int | None = None, rss_size: int | None = None) -> list[dict]:
    total = total or (20 if quick else 200) * MIB
    rows = []
    for each in (1 * MIB, min(100 * MIB, total)):
        converted, parquet = convert_rows(workdir, total, each)
        rows += converted
        rows += query_rows(workdir, sorted((workdir / f"csv-{each}").glob("*.csv")), parquet, each)
    if rss_size:
        rows.append(rss_row(workdir, rss_size))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=200, help="MiB of CSV for convert and query")
    parser.add_argument("--rss", action="store_true", help="also the peak RSS of one large FlowFile")
    parser.add_argument("--rss-size", type=int, default=2048, help="MiB of that FlowFile")
    parser.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help="where the files go (a temporary folder by default, removed after)")
    options = parser.parse_args()
    if options.rss_child:
        _rss_child(Path(options.rss_child[0]), Path(options.rss_child[1]))
        return
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="records-probe-"))
    try:
        for result in run(False, workdir, options.total * MIB, options.rss_size * MIB if options.rss else None):
            print(json.dumps(result), flush=True)
    finally:
        if not options.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
