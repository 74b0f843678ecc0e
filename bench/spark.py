"""Scenario 7: records/s through the Spark processor vs PySpark reading the same files from disk.

Both sides use the same Spark (one Spark service on one local Ray, started once), the same
order CSV files, the same SQL (a per-record projection and filter, so both produce the same
records) and write Parquet:

* flowactors: ListFile -> FetchFile -> ExecuteSparkSQL (bins of ``BIN`` files, records to Spark
  as Arrow through Ray's object store, results back as Arrow, written as Parquet FlowFiles) ->
  PutFile, with the FlowFile WAL, content repository and provenance on. Timed from the first
  provenance event (ListFile's CREATE) to the last (PutFile's SEND): Ray and Spark start-up,
  idle detection and stop are left out.
* baseline: ``spark.read.csv(files)`` -> the same SQL -> ``DataFrame.write.parquet``, run in the
  Spark service's driver; timed around that call.

A second row puts the Spark step alone against the baseline: the records over the summed
seconds of the Spark jobs (``spark.job.seconds``; they include the Arrow hand-over both ways).
"""

from __future__ import annotations

import random
import shutil
import sys
import time
from pathlib import Path

import ray.cloudpickle

from bench import ray_session, row
from flowactors.sdk.flow import Flow
from flowactors.processors import FetchFile, ListFile, PutFile
from flowactors.driver.running import run_flow
from flowactors.sdk.record_formats import parse_schema
from flowactors.sdk.records.schema import avro_text
from flowactors.services import CSVReader, ParquetRecordSetWriter
from flowactors.spark import ExecuteSparkSQL
from flowactors.spark.service import start_service, stop_service
from repositories.provenance import WriteAheadProvenanceRepository
from repositories.provenance.event import ProvenanceEventType

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # baseline_job runs in the Spark service

SCENARIO = "spark"
SERVICE = "bench.spark"
SCHEMA = "order_id BIGINT, store STRING, product STRING, qty INT, unit_price DOUBLE, day DATE"
QUERY = ("SELECT order_id, store, product, qty, unit_price, qty * unit_price AS amount, day "
         "FROM flowfiles WHERE qty > 1")
BIN = 20  # files per Spark job


def write_files(folder: Path, files: int, rows: int) -> int:
    """``files`` order CSVs of ``rows`` rows; returns how many rows pass the query's filter."""
    folder.mkdir(parents=True)
    rng = random.Random(7)
    products = ("coffee", "tea", "croissant", "baguette", "jam")
    passing = 0
    order = 0
    for index in range(files):
        lines = ["order_id,store,product,qty,unit_price,day"]
        for _ in range(rows):
            order += 1
            qty = rng.randint(1, 6)
            passing += qty > 1
            lines.append(f"{order},S{rng.randint(1, 40):02d},{rng.choice(products)},{qty},"
                         f"{rng.randint(50, 900) / 100},2025-03-{rng.randint(1, 28):02d}")
        (folder / f"orders-{index:04d}.csv").write_text("\n".join(lines) + "\n")
    return passing


def baseline_job(spark, paths: list[str], out: str, schema: str, query: str) -> None:
    """PySpark on its own: read the files, run the query, write Parquet (runs in the service)."""
    session = spark.newSession()
    session.read.csv(paths, header=True, schema=schema).createOrReplaceTempView("flowfiles")
    session.sql(query).write.mode("overwrite").parquet(out)


def count_parquet(spark, path: str) -> int:
    return spark.read.parquet(path).count()


def spark_flow(data: Path, out: Path, name: str = "bench-spark") -> Flow:
    flow = Flow(name, settings={"administrative_yield": 0.1})
    flow.add_service(CSVReader, "orders", properties={
        "Treat First Line as Header": "true", "Schema Access Strategy": "Use 'Schema Text' Property",
        "Schema Text": avro_text(parse_schema(SCHEMA)), "Date Format": "yyyy-MM-dd"})
    flow.add_service(ParquetRecordSetWriter, "parquet")
    listing = flow.add(ListFile, "list", properties={"Input Directory": str(data)})
    fetch = flow.add(FetchFile, "fetch", batch_size=BIN, auto_terminate=["not.found", "permission.denied", "failure"])
    sql = flow.add(ExecuteSparkSQL, "sql", batch_size=BIN, properties={
        "Spark Service": SERVICE, "SQL Query": QUERY, "Record Reader": "orders", "Record Writer": "parquet",
        "Minimum Number of Entries": BIN, "Maximum Number of Entries": BIN, "Max Bin Age": "2 sec"},
        auto_terminate=["original", "failure"])
    put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success", "failure"])
    flow.connect(listing, fetch)
    flow.connect(fetch, sql)
    flow.connect(sql, put, "success")
    return flow


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    files, rows = (40, 1_000) if quick else (200, 5_000)
    if size is not None:
        files, rows = max(1, size // 1000), min(size, 1000)
    workdir = Path(workdir)
    data = workdir / "orders"
    passing = write_files(data, files, rows)
    records = files * rows
    paths = sorted(str(p) for p in data.iterdir())
    with ray_session(num_cpus=2):
        service = start_service(SERVICE, {"executors": 1, "executor_cores": 1, "executor_memory": "2G"})
        try:
            # warm both paths up (JIT, Spark's first-job costs) on a few files
            ray_get(service.call.remote(baseline_job, paths[:2], str(workdir / "warm"), SCHEMA, QUERY))
            warm = spark_flow(workdir / "warm-in", workdir / "warm-out", "bench-spark-warm-up")
            write_files(workdir / "warm-in", 2, 100)
            run_flow(warm, workdir / "warm-repository", timeout=300)

            began = time.perf_counter()
            ray_get(service.call.remote(baseline_job, paths, str(workdir / "baseline-out"), SCHEMA, QUERY))
            baseline_seconds = time.perf_counter() - began
            baseline_count = ray_get(service.call.remote(count_parquet, str(workdir / "baseline-out")))

            repository = workdir / "repository"
            final = run_flow(spark_flow(data, workdir / "flow-out"), repository, timeout=1800)
        finally:
            stop_service(service)
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    try:
        events = provenance.search(limit=None)
    finally:
        provenance.close()
    first = min(e.timestamp for e in events)
    sends = [e for e in events if e.event_type == ProvenanceEventType.SEND]
    last = max(e.timestamp for e in sends)
    flow_seconds = max(1e-3, (last - first) / 1000)
    out_records = sum(int(e.attribute("record.count")) for e in sends)
    job_seconds = sum(float(e.attribute("spark.job.seconds")) for e in sends
                      if e.attribute("fragment.index") == "0")
    jobs = sum(1 for e in sends if e.attribute("fragment.index") == "0")
    shutil.rmtree(workdir / "baseline-out", ignore_errors=True)
    same = out_records == baseline_count == passing
    notes_common = (f"{files} CSV files x {rows} rows = {records:,} records; {passing:,} pass the filter "
                    f"(flowactors wrote {out_records:,}, PySpark {baseline_count:,}{'' if same else ' - MISMATCH'}); "
                    f"1 executor x 1 core on a 2-CPU Ray; same Spark for both. flowactors parses the CSV with "
                    f"pyarrow (multi-threaded, in the processor's actor) and Spark gets Arrow; PySpark parses "
                    f"CSV itself on its one executor core")
    baseline_rate = records / baseline_seconds
    return [
        row(SCENARIO, "records/s, CSV files -> Spark SQL -> Parquet, end to end", round(records / flow_seconds),
            round(baseline_rate), "PySpark spark.read.csv on the same files (same Spark on RayDP)", "records/s",
            f"{notes_common}; flowactors: ListFile -> FetchFile -> ExecuteSparkSQL (bins of {BIN} files, "
            f"{jobs} jobs) -> PutFile with WAL and provenance, first CREATE to last SEND "
            f"{flow_seconds:.1f} s (run {final.get('seconds', 0):.1f} s incl. start/stop); "
            f"PySpark {baseline_seconds:.1f} s"),
        row(SCENARIO, "records/s, the Spark step alone (Arrow to Spark, SQL, Arrow back)",
            round(records / max(job_seconds, 1e-3)), round(baseline_rate),
            "PySpark spark.read.csv on the same files (same Spark on RayDP)", "records/s",
            f"sum of the {jobs} jobs' spark.job.seconds = {job_seconds:.1f} s; the rest of the end-to-end time "
            f"is reading CSV into Arrow in the processor, writing Parquet FlowFiles, commits, provenance"),
    ]


def ray_get(ref):
    return ray.get(ref)
