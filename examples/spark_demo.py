"""The Spark demo: order files land in a folder; valid ones are enriched and aggregated on Spark.

examples/spark_data/incoming holds a few bakery order files (CSV), an inventory file that is not
an order file, and an order file with a broken line. The flow:

1. lists and fetches the files (ListFile, FetchFile);
2. validates them: a file whose header is not the orders header is routed to rejected/ (RouteOnContent);
3. enriches the orders on Spark (TransformWithSpark, the ``Enrich`` class below): joins each order
   with stores.csv to get city and region, computes revenue and day. A file whose records do not
   parse fails alone and goes to rejected/ with the reason in ``spark.error``;
4. writes the enriched records as Parquet to enriched/, and aggregates them on Spark
   (ExecuteSparkSQL): orders, units and revenue per region and day, written as Parquet to
   aggregates/.

The flow owns its Spark: the flow controller starts it at flow start (``"start": "flow-start"``
in the flow's ``spark`` settings) and stops it with the flow. Provenance links every aggregate
row's file back to the order files it came from, through both Spark jobs.

Run it with `make demo-spark` or `python examples/spark_demo.py` (Java 17 needed; about a minute,
most of it Spark starting).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from flowactors import Flow
from flowactors.processors import FetchFile, ListFile, PutFile, RouteOnContent, UpdateAttribute
from flowactors.sdk.record_formats import parse_schema
from flowactors.sdk.records.schema import avro_text
from flowactors.services import CSVReader, ParquetReader, ParquetRecordSetWriter
from flowactors.spark import ExecuteSparkSQL, TransformWithSpark

HERE = Path(__file__).resolve().parent
DATA = HERE / "spark_data"
STORES = str(DATA / "stores.csv")
OUT = Path("out/spark-demo")
ORDERS_HEADER = "order_id,store,product,qty,unit_price,ts"
ORDERS_SCHEMA = "order_id BIGINT, store STRING, product STRING, qty INT, unit_price DECIMAL(8,2), ts TIMESTAMP"


class Enrich(TransformWithSpark):
    """Orders -> orders with city, region (from the stores reference file), revenue and day.

    Defined here, in the flow script: the class travels to the Spark service with the job.
    """

    def transform(self, frame):
        from pyspark.sql import functions as F

        stores = frame.sparkSession.read.csv(STORES, header=True, schema="store STRING, city STRING, region STRING")
        return (frame.join(F.broadcast(stores), "store", "left")
                .withColumn("region", F.coalesce("region", F.lit("unknown")))
                .withColumn("revenue", F.col("qty") * F.col("unit_price"))
                .withColumn("day", F.to_date("ts"))
                .select("order_id", "day", "store", "city", "region", "product", "qty", "unit_price", "revenue")
                .orderBy("order_id"))


AGGREGATE = """
    SELECT region, day, COUNT(*) AS orders, SUM(qty) AS units, SUM(revenue) AS revenue
    FROM enriched GROUP BY region, day ORDER BY region, day
"""


def build_flow(data: Path = DATA / "incoming", out: Path = OUT) -> Flow:
    out = out.resolve()
    flow = Flow("spark-demo", settings={
        "checkpoint_interval": 5.0, "administrative_yield": 0.5,
        "spark": {"start": "flow-start", "executors": 1, "executor_cores": 1, "executor_memory": "1G"}})
    listing = flow.add(ListFile, "list orders", properties={"Input Directory": str(data), "File Filter": r".*\.csv"})
    fetch = flow.add(FetchFile, "fetch", auto_terminate=["not.found", "permission.denied", "failure"])
    flow.add_service(CSVReader, "orders", properties={
        "Treat First Line as Header": "true", "Schema Access Strategy": "Use 'Schema Text' Property",
        "Schema Text": avro_text(parse_schema(ORDERS_SCHEMA)), "Timestamp Format": "yyyy-MM-dd'T'HH:mm:ssX"})
    flow.add_service(ParquetReader, "parquet in")
    flow.add_service(ParquetRecordSetWriter, "parquet out")
    validate = flow.add(RouteOnContent, "validate header", properties={
        "Match Requirement": "content must contain match", "Content Buffer Size": "1 KB",
        "orders": f"^{ORDERS_HEADER}\\r?\\n"})
    enrich = flow.add(Enrich, "enrich on spark", properties={
        "Record Reader": "orders", "Record Writer": "parquet out", "Maximum Number of Entries": 100},
        auto_terminate=["original"])
    aggregate = flow.add(ExecuteSparkSQL, "aggregate on spark", properties={
        "SQL Query": AGGREGATE, "Table Name": "enriched", "Record Reader": "parquet in",
        "Record Writer": "parquet out",
        "Minimum Number of Entries": 100, "Max Bin Age": "3 sec"},
        auto_terminate=["original", "failure"])
    name_aggregate = flow.add(UpdateAttribute, "name aggregates", properties={
        "filename": "sales-by-region-day-${spark.job.id}.parquet"})
    write = {}
    for folder in ("rejected", "enriched", "aggregates"):
        write[folder] = flow.add(PutFile, f"write {folder}", properties={
            "Directory": str(out / folder), "Conflict Resolution Strategy": "replace"},
            auto_terminate=["success", "failure"])
    flow.connect(listing, fetch)
    flow.connect(fetch, validate)
    flow.connect(validate, enrich, "orders")
    flow.connect(validate, write["rejected"], "unmatched", name="not orders")
    flow.connect(enrich, write["rejected"], "failure", name="unreadable orders")
    flow.connect(enrich, write["enriched"], "success", name="enriched records")
    flow.connect(enrich, aggregate, "success", name="to aggregate")  # a clone: zero bytes copied
    flow.connect(aggregate, name_aggregate, "success")
    flow.connect(name_aggregate, write["aggregates"])
    return flow


flow = build_flow()


def summarize(final: dict, out: Path = OUT) -> str:
    """What went where, and the aggregate itself."""
    lines = [f"spark demo finished in {final['seconds']:.1f} s"]
    rejected = sorted(p.name for p in (out / "rejected").glob("*"))
    lines.append(f"  rejected ({len(rejected)}): {', '.join(rejected) or 'none'}")
    enriched = sorted((out / "enriched").glob("*.parquet"))
    lines.append(f"  enriched: {sum(pq.read_metadata(p).num_rows for p in enriched)} orders in "
                 f"{len(enriched)} Parquet file(s) under {out / 'enriched'}")
    for path in sorted((out / "aggregates").glob("*.parquet")):
        lines.append(f"  aggregate {path.name}:")
        lines.append(f"    {'region':<8} {'day':<10} {'orders':>6} {'units':>6} {'revenue':>9}")
        for row in pq.read_table(path).to_pylist():
            lines.append(f"    {row['region']:<8} {row['day'].isoformat():<10} {row['orders']:>6} {row['units']:>6} "
                         f"{row['revenue']:>9}")
    return "\n".join(lines)


if __name__ == "__main__":
    from demo_support import run_demo  # examples/ is on sys.path when this file runs as a script

    sys.exit(run_demo(flow, OUT, Path("repository/spark-demo"), summarize))
