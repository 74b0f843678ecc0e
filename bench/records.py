"""Scenario 16: the record processors against pyarrow, fastavro and DuckDB doing the same work
directly, in one process.

**Data.** ``total`` bytes (1 GiB; 16 MiB with ``--quick``) of sales records (id, name, amount,
category, flag) as CSV (a header a file) and as JSON Lines, the same records in both, in FlowFiles
of 1 MiB and of 100 MiB (8 MiB with ``--quick``); as Parquet too, the files the CSV -> Parquet
baseline wrote. The readers are given the schema, as the baselines are given the column types.

**Rows** (a flow GetFile -> the processor on the in-process engine; the figure is the processor's
own task time, ``task_seconds``: ``on_trigger`` plus commit, as MiB/s of input; the ratio is
flowactors' MiB/s over the baseline's, 1.0 = as fast; each side measured ``ROUNDS`` times in turns,
the medians compared):

* ConvertRecord CSV -> Parquet (CSVReader -> ParquetRecordSetWriter, SNAPPY) against pyarrow
  streaming each file (``pyarrow.csv.open_csv`` -> ``ParquetWriter``, snappy: its default);
* ConvertRecord JSON -> Avro (JsonTreeReader -> AvroRecordSetWriter) against pyarrow's JSON reader
  and fastavro's writer (``pyarrow.json.read_json`` -> ``fastavro.writer``, a batch of rows at a time);
* QueryRecord (``SELECT id, name, amount FROM FLOWFILE WHERE amount > 500``) Parquet -> Parquet
  and CSV -> Parquet against DuckDB running the same query on the same files
  (``COPY (SELECT ... FROM read_parquet(...)) TO ... (FORMAT parquet)``, snappy: its default);
* the peak RSS (``VmHWM``) of a child process converting one CSV FlowFile of 2 GiB (64 MiB with
  ``--quick``) to Parquet, against the target of 600 MiB.

**Where the time goes**: each row's notes give the parts of the task done alone, file by file
outside any flow (the reader service reading every batch, of the fields the query reads for
QueryRecord; DuckDB running the query over those batches in memory; the writer service writing
the result to /dev/null), measured on at most ``PARTS_SAMPLE`` of the files and scaled to all of
them, and the rest (the session, the content repository, the processor, DuckDB's scan of a
stream, GetFile's imports running beside; less than nothing when the reader, reading a batch
ahead in a thread of its own, overlapped the rest). The QueryRecord rows also give DuckDB's time
with one thread (the baseline runs with the machine's cores), and the time of pyarrow's reader,
DuckDB's query and pyarrow's writer composed directly with no flowactors code
(``composed_query``): what the reader -> SQL -> writer design costs before any engine.

``python -m bench.records [--total MiB] [--rss] [--rss-size MiB]`` (or ``bench.records_probe``)
prints the rows as JSON lines, at a size of one's choosing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import duckdb
import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from bench import StolenTime, row
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GetFile
from flowactors.processors.records import ConvertRecord, QueryRecord
from flowactors.processors.records.query import connect, fields_read
from flowactors.sdk.flow import Flow
from flowactors.sdk.records import BATCH_RECORDS
from flowactors.services import (AvroRecordSetWriter, CSVReader, JsonTreeReader, ParquetReader,
                                 ParquetRecordSetWriter)
from flowactors.testing import enable_service

SCENARIO = "16 records"
MIB = 1 << 20
#: (total input bytes, FlowFile sizes, peak-RSS FlowFile size, rounds) of a full and a quick run
FULL = (1024 * MIB, (1 * MIB, 100 * MIB), 2048 * MIB, 3)
QUICK = (16 * MIB, (1 * MIB, 8 * MIB), 64 * MIB, 1)
#: the parts done alone are measured on at most this much of the files (the least of some rounds), and
#: scaled to all of them
PARTS_SAMPLE, PARTS_ROUNDS = 128 * MIB, 2
RSS_TARGET_MIB = 600

COLUMNS = {"id": pa.int64(), "name": pa.string(), "amount": pa.float64(), "category": pa.string(), "flag": pa.bool_()}
SCHEMA = pa.schema([pa.field(n, t, nullable=False) for n, t in COLUMNS.items()])
AVRO_SCHEMA = {"type": "record", "name": "sale", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "category", "type": "string"}, {"name": "flag", "type": "boolean"}]}
QUERY = "SELECT id, name, amount FROM FLOWFILE WHERE amount > 500"
GIVEN = {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": json.dumps(AVRO_SCHEMA)}
CSV_READER = (CSVReader, {**GIVEN, "Treat First Line as Header": "true"})
JSON_READER = (JsonTreeReader, GIVEN)
PARQUET_READER = (ParquetReader, {})
PARQUET_WRITER = (ParquetRecordSetWriter, {"Compression Type": "SNAPPY"})
AVRO_WRITER = (AvroRecordSetWriter, {})
DUCKDB_CSV = "{'id': 'BIGINT', 'name': 'VARCHAR', 'amount': 'DOUBLE', 'category': 'VARCHAR', 'flag': 'BOOLEAN'}"


# ---------------------------------------------------------------------------------- data
def sales(count: int, start: int, rng: np.random.Generator) -> pa.Table:
    """``count`` sales records, ids from ``start``."""
    return pa.table({"id": np.arange(start, start + count),
                     "name": rng.choice(np.array(["alice", "bob", "carol", "dave", "erin", "frank"]), count),
                     "amount": np.round(rng.random(count) * 1000, 2),
                     "category": rng.choice(np.array(["books", "games", "music", "tools"]), count),
                     "flag": rng.random(count) < 0.5})


def csv_lines(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue().to_pybytes()


def json_lines(table: pa.Table) -> bytes:
    """The records as JSON Lines, made by Arrow (the same text orjson would write for them)."""
    text = pc.binary_join_element_wise(
        '{"id":', table["id"].cast(pa.string()), ',"name":"', table["name"], '","amount":',
        table["amount"].cast(pa.string()), ',"category":"', table["category"], '","flag":',
        table["flag"].cast(pa.string()), "}\n", "").combine_chunks()
    return pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(text)], pa.int32()), text), "")[0].as_py().encode()


#: each format's file name suffix, header and text of records
FORMATS = {"csv": (b"id,name,amount,category,flag\n", csv_lines), "json": (b"", json_lines)}


#: records made at a time (each block from a generator seeded by its number: the same records in every format)
RECORD_BLOCK = 100_000


def write_data(folder: Path, kind: str, total: int, each: int, seed: int = 7) -> list[Path]:
    """Files of about ``each`` bytes of records in ``kind`` (csv, with a header each, or json:
    JSON Lines), ``total`` bytes in all; the same records, in order, in either."""
    folder.mkdir(parents=True, exist_ok=True)
    header, text = FORMATS[kind]
    per_row = len(text(sales(1000, 0, np.random.default_rng(seed)))) / 1000
    paths, block, start, pending = [], 0, 0, sales(0, 0, np.random.default_rng(seed))
    for index in range(max(1, total // each)):
        path = folder / f"part-{index:05d}.{kind}"
        with open(path, "wb") as out:
            written = out.write(header)
            while written < each:
                if not pending.num_rows:
                    pending = sales(RECORD_BLOCK, start, np.random.default_rng((seed, block)))
                    block, start = block + 1, start + RECORD_BLOCK
                count = min(pending.num_rows, max(1, int((each - written) / per_row)))
                written += (length := out.write(text(pending.slice(0, count))))
                pending, per_row = pending.slice(count), length / count   # ids grow longer
        paths.append(path)
    return paths


def linked(paths: list[Path], folder: Path) -> Path:
    """``paths`` hard-linked into a new ``folder`` (GetFile deletes what it takes)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in paths:
        os.link(path, folder / path.name)
    return folder


def megabytes(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / MIB


# ---------------------------------------------------------------------------------- flowactors
def record_flow(source: Path, name: str, processor, properties: dict, reader: tuple, writer: tuple) -> Flow:
    """GetFile -> ``processor`` with ``reader`` and ``writer`` (a service type and its properties
    each); its failures go to the output port ``failed``, its other relationships end there.
    GetFile takes every file in one trigger, so the processor's tasks run after it, not beside it
    (in-process, the two would share the GIL: time that is GetFile's)."""
    flow = Flow(name)
    flow.add_service(reader[0], "reader", properties=reader[1])
    flow.add_service(writer[0], "writer", properties=writer[1])
    files = sum(1 for _ in source.iterdir())
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": max(10, files),
                                               "Minimum File Age": "0 sec"})
    work = flow.add(processor, "work", batch_size=10, properties={
        "Record Reader": "reader", "Record Writer": "writer", **properties},
        auto_terminate=tuple(r for r in processor.relationship_names(properties) if r != "failure"))
    flow.connect(get, work, name="taken")
    flow.connect(work, flow.add_output_port("failed"), "failure")
    return flow


def run_records(flow: Flow, repository: Path, files: int) -> dict:
    """Run ``flow`` until idle: the processor's task seconds and the wall time. Raises when the
    processor did not take all ``files``, or sent one to failure (a figure of failures is none)."""
    started = time.perf_counter()
    final = run_flow(flow, repository, engine="in-process", timeout=3600)
    wall = time.perf_counter() - started
    totals = processor_totals(final)
    shutil.rmtree(repository)   # GiBs of claims a run: set aside (``retire``), a full run's would fill the disk
    if totals["work"]["flowfiles_in"] != files or totals["failed"]["flowfiles_in"] or totals["work"]["errors"]:
        raise RuntimeError(f"{flow.name} did not convert its {files} files: {totals}")
    return {"wall": wall, "task_seconds": totals["work"]["task_seconds"]}


# ---------------------------------------------------------------------------------- baselines
def pyarrow_csv_to_parquet(paths: list[Path], out: Path) -> float:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for path in paths:
        reader = pa_csv.open_csv(path, convert_options=pa_csv.ConvertOptions(column_types=COLUMNS),
                                 read_options=pa_csv.ReadOptions(block_size=4 * MIB))
        with pq.ParquetWriter(out / (path.stem + ".parquet"), reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    return time.perf_counter() - started


def pyarrow_json_to_avro(paths: list[Path], out: Path) -> float:
    out.mkdir(parents=True, exist_ok=True)
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    started = time.perf_counter()
    for path in paths:
        table = pa_json.read_json(path, parse_options=pa_json.ParseOptions(explicit_schema=SCHEMA))
        with open(out / (path.stem + ".avro"), "wb") as sink:
            fastavro.writer(sink, parsed, (r for batch in table.to_batches(65536) for r in batch.to_pylist()))
    return time.perf_counter() - started


def duckdb_query(paths: list[Path], out: Path, source: str, threads: int | None = None) -> float:
    """Seconds DuckDB takes to run the query over each of ``paths`` into Parquet files in ``out``,
    with its own threads (the machine's cores) or ``threads``."""
    out.mkdir(parents=True, exist_ok=True)
    connection = duckdb.connect(config={"threads": threads} if threads else {})
    started = time.perf_counter()
    for path in paths:
        scan = f"read_parquet('{path}')" if source == "parquet" else \
            f"read_csv('{path}', header=true, columns={DUCKDB_CSV})"
        connection.execute(f"COPY ({QUERY.replace('FLOWFILE', scan)}) TO '{out / (path.stem + '.parquet')}' "
                           "(FORMAT parquet)")
    connection.close()
    return time.perf_counter() - started


def composed_query(paths: list[Path], source: str) -> float:
    """Seconds the libraries behind QueryRecord take composed directly, one file after another
    with no flowactors code: pyarrow reads the fields the query reads (``iter_batches`` of a
    Parquet file, ``read_csv`` of a CSV file given the column types), DuckDB runs the query over
    them in memory, pyarrow writes the result as one snappy row group (dictionary-encoded where
    the Parquet writer service would: the text column ``name``) to /dev/null. What the reader ->
    SQL -> writer design costs before any engine, against DuckDB reading and writing the files
    itself."""
    connection = connect()
    fields = ["id", "name", "amount"]
    started = time.perf_counter()
    for path in paths:
        if source == "parquet":
            records = pa.Table.from_batches(list(pq.ParquetFile(path).iter_batches(BATCH_RECORDS, columns=fields)))
        else:
            records = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
                column_types=COLUMNS, include_columns=fields))
        connection.register("FLOWFILE", records)
        result = connection.sql(QUERY).to_arrow_table()
        connection.unregister("FLOWFILE")
        with open(os.devnull, "wb") as sink:
            pq.write_table(result, sink, compression="snappy", use_dictionary=["name"], row_group_size=1 << 40)
    connection.close()
    return time.perf_counter() - started


def duckdb_baseline(out: Path, source: str) -> Callable[[list[Path]], float]:
    return lambda paths: duckdb_query(paths, out, source)


def parts_alone(paths: list[Path], reader: tuple, writer: tuple, query: str | None = None) -> dict[str, float]:
    """The parts of the work done directly, file by file, outside any flow, in seconds for all of
    ``paths`` (measured on the first ``PARTS_SAMPLE`` bytes of them, the least of ``PARTS_ROUNDS``
    rounds, scaled): the reader service alone reading every batch (of the fields ``query`` reads,
    as QueryRecord reads them), DuckDB running ``query`` over those batches in memory (with
    ``query``), the writer service alone writing the result to /dev/null. (A first round pays what is done once in a process, which scaling would multiply.)"""
    reading, writing = enable_service(*reader), enable_service(*writer)
    sample, size = [], 0
    for path in paths:
        if sample and size + path.stat().st_size > PARTS_SAMPLE:
            break
        sample.append(path)
        size += path.stat().st_size
    rounds = [_parts(sample, reading, writing, query) for _ in range(PARTS_ROUNDS)]
    scale = sum(p.stat().st_size for p in paths) / size
    return {name: min(r[name] for r in rounds) * scale for name in rounds[0]}


def _parts(sample: list[Path], reading, writing, query: str | None) -> dict[str, float]:
    times = {"reader": 0.0, "duckdb": 0.0, "writer": 0.0}
    connection = connect()
    fields_read_for: dict[pa.Schema, list[str] | None] = {}   # as QueryRecord, once a schema
    for path in sample:
        started = time.perf_counter()
        with open(path, "rb") as stream:
            records = reading.create_reader({}, stream, path.stat().st_size)
            schema = records.schema()
            fields = None
            if query:
                if schema not in fields_read_for:
                    planned = time.perf_counter()
                    fields_read_for[schema] = _fields_read(connection, query, schema)
                    started += time.perf_counter() - planned
                fields = fields_read_for[schema]
            if fields is None:
                result = pa.Table.from_batches(list(records.batches()), schema=schema)
            else:
                result = pa.Table.from_batches(list(records.projected_batches(fields)),
                                               schema=pa.schema([schema.field(f) for f in fields]))
        times["reader"] += time.perf_counter() - started
        if query:
            started = time.perf_counter()
            connection.register("FLOWFILE", result)
            result = connection.sql(query).to_arrow_table()
            connection.unregister("FLOWFILE")
            times["duckdb"] += time.perf_counter() - started
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            out = writing.create_writer(writing.write_schema({}, result.schema), sink, {})
            for batch in result.to_batches(max_chunksize=65536):
                out.write_batch(batch)
            out.finish()
        times["writer"] += time.perf_counter() - started
    connection.close()
    return times if query else {k: v for k, v in times.items() if k != "duckdb"}


def _fields_read(connection, query: str, schema: pa.Schema) -> list[str] | None:
    """The fields QueryRecord reads for ``query`` over records of ``schema``."""
    connection.register("FLOWFILE", schema.empty_table())
    try:
        return fields_read(connection, query, schema)
    finally:
        connection.unregister("FLOWFILE")


def breakdown(task_seconds: float, parts: dict[str, float]) -> str:
    rest = task_seconds - sum(parts.values())
    shown = {**parts, "the rest": rest}
    return ", ".join(f"{name} {seconds:.2f} s ({100 * seconds / task_seconds:.0f} %)"
                     for name, seconds in shown.items())


# ---------------------------------------------------------------------------------- rows
def compared(metric: str, label: str, paths: list[Path], rounds: int, ours: Callable[[list[Path], str], dict],
             baseline: Callable[[list[Path]], float], baseline_name: str, parts: dict[str, float],
             context: Callable[[list[Path]], str] | None = None) -> dict:
    """The row of ``ours`` (a flow run over some of ``paths``: ``run_records``' result) against
    ``baseline`` (seconds), each run ``rounds`` times in turns over all of ``paths`` after a run
    of each over the first file (what a first run pays once: imports, DuckDB's extensions), the
    medians compared as MiB/s. ``context``, run once after, adds a note (another figure)."""
    ours(paths[:1], "warm")
    baseline(paths[:1])
    mine, theirs = [], []
    load = os.getloadavg()[0]
    with StolenTime() as steal:
        for number in range(rounds):
            mine.append(ours(paths, str(number))["task_seconds"])
            theirs.append(baseline(paths))
    size = megabytes(paths)
    task, base = statistics.median(mine), statistics.median(theirs)
    each = lambda values: " / ".join(f"{v:.2f}" for v in values)   # noqa: E731
    stolen = "" if steal.percent is None else f", {steal.percent:.0f} % stolen"
    return row(SCENARIO, f"{metric}, {label}", round(size / task, 1), round(size / base, 1), baseline_name, "MiB/s",
               f"{len(paths)} files, {size:.0f} MiB; task {task:.2f} s (rounds {each(mine)}), baseline {base:.2f} s "
               f"({each(theirs)}); load {load:.1f} at the start{stolen}; the task's parts done alone: "
               f"{breakdown(task, parts)}" + (f"; {context(paths)}" if context else ""))


def size_rows(workdir: Path, total: int, each: int, rounds: int) -> list[dict]:
    """The convert and query rows for FlowFiles of ``each`` bytes."""
    label = f"{each // MIB} MiB FlowFiles"
    data = workdir / f"data-{each}"
    csv_paths, json_paths = write_data(data, "csv", total, each), write_data(data, "json", total, each)
    parquet_out = workdir / f"pyarrow-{each}"

    def flow(kind: str, processor, properties: dict, reader: tuple, writer: tuple) -> Callable[[list[Path], str], dict]:
        def one_run(paths: list[Path], name: str) -> dict:
            source = linked(paths, workdir / f"in-{kind}-{each}-{name}")
            return run_records(record_flow(source, f"{kind}-{each}-{name}", processor, properties, reader, writer),
                               workdir / f"repo-{kind}-{each}-{name}", len(paths))
        return one_run

    rows = [compared("ConvertRecord CSV -> Parquet", label, csv_paths, rounds,
                     flow("csv-parquet", ConvertRecord, {}, CSV_READER, PARQUET_WRITER),
                     lambda paths: pyarrow_csv_to_parquet(paths, parquet_out), "pyarrow open_csv -> ParquetWriter",
                     parts_alone(csv_paths, CSV_READER, PARQUET_WRITER)),
            compared("ConvertRecord JSON -> Avro", label, json_paths, rounds,
                     flow("json-avro", ConvertRecord, {}, JSON_READER, AVRO_WRITER),
                     lambda paths: pyarrow_json_to_avro(paths, workdir / f"fastavro-{each}"),
                     "pyarrow read_json -> fastavro writer", parts_alone(json_paths, JSON_READER, AVRO_WRITER))]
    parquet_paths = sorted(parquet_out.glob("*.parquet"))
    for source, paths, reader in (("parquet", parquet_paths, PARQUET_READER), ("csv", csv_paths, CSV_READER)):
        rows.append(compared(f"QueryRecord {source} -> Parquet", label, paths, rounds,
                             flow(f"query-{source}", QueryRecord, {"big": QUERY}, reader, PARQUET_WRITER),
                             duckdb_baseline(workdir / f"duckdb-{source}-{each}", source),
                             f"DuckDB COPY (the query over read_{source}) TO parquet",
                             parts_alone(paths, reader, PARQUET_WRITER, QUERY),
                             lambda paths, source=source: "the baseline with one DuckDB thread "
                             f"{duckdb_query(paths, workdir / f'duckdb1-{source}-{each}', source, threads=1):.2f} s; "
                             f"pyarrow -> DuckDB -> pyarrow composed directly {composed_query(paths, source):.2f} s"))
    for folder in (data, parquet_out, workdir / f"fastavro-{each}", *(workdir / f"{engine}-{source}-{each}"
                   for engine in ("duckdb", "duckdb1") for source in ("parquet", "csv"))):
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def rss_row(workdir: Path, size: int) -> dict:
    """Peak RSS of a child process converting one CSV FlowFile of ``size`` bytes to Parquet."""
    paths = write_data(workdir / "rss-data", "csv", size, size)
    source = linked(paths, workdir / "rss-in")
    command = [sys.executable, "-m", "bench.records", "--rss-child", str(source), str(workdir / "repo-rss")]
    child = subprocess.run(command, capture_output=True, text=True, check=True)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    shutil.rmtree(workdir / "rss-data", ignore_errors=True)
    shutil.rmtree(workdir / "repo-rss", ignore_errors=True)
    return row(SCENARIO, f"ConvertRecord CSV -> Parquet peak RSS, one {size // MIB:,} MiB FlowFile",
               round(result["peak_mib"]), RSS_TARGET_MIB, "target", "MiB",
               f"task {result['task_seconds']:.1f} s; the whole process at its peak (VmHWM), "
               f"{result['start_mib']:.0f} MiB before the flow started (Python, pyarrow, DuckDB, the engine "
               "imported); the CSV reader holds two windows of four 4 MiB blocks (one parsed while the other's "
               "batches are taken), the Parquet writer a row group (128 MiB of Arrow memory, parquet-mr's default) "
               "before writing it")


def _rss_child(source: Path, repository: Path) -> None:
    start = rss_mib("VmRSS")
    ours = run_records(record_flow(source, "records-rss", ConvertRecord, {}, CSV_READER, PARQUET_WRITER), repository,
                       len(list(source.iterdir())))
    print(json.dumps({"start_mib": start, "peak_mib": rss_mib("VmHWM"), "task_seconds": ours["task_seconds"]}))


def rss_mib(key: str) -> float:
    """This process's RSS now (``VmRSS``) or at its peak since its exec (``VmHWM``; ``ru_maxrss``
    would count the parent's RSS at the fork, which a child keeps across exec), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def measure(workdir: Path, total: int, sizes: tuple[int, ...], rounds: int, rss_size: int | None) -> list[dict]:
    """The rows of ``total`` bytes of input in FlowFiles of each of ``sizes`` (at most ``total``),
    and, with ``rss_size``, the peak RSS row."""
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for each in sizes:
        rows += size_rows(workdir, total, min(each, total), rounds)
    if rss_size:
        rows.append(rss_row(workdir, rss_size))
    return rows


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """The scenario's rows (``FULL`` or ``QUICK``); ``size``: the total input in MiB instead."""
    total, sizes, rss_size, rounds = QUICK if quick else FULL
    return measure(workdir, size * MIB if size else total, sizes, rounds, rss_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=200, help="MiB of input for convert and query")
    parser.add_argument("--rss", action="store_true", help="also the peak RSS of one large FlowFile")
    parser.add_argument("--rss-size", type=int, default=2048, help="MiB of that FlowFile")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each side, in turns")
    parser.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help="where the files go (a temporary folder by default, removed after)")
    options = parser.parse_args()
    if options.rss_child:
        _rss_child(Path(options.rss_child[0]), Path(options.rss_child[1]))
        return
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="records-"))
    try:
        for result in measure(workdir, options.total * MIB, FULL[1], options.rounds,
                              options.rss_size * MIB if options.rss else None):
            print(json.dumps(result), flush=True)
    finally:
        if not options.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
