"""The Spark bridge: heavy record processing on a Spark that RayDP starts on the flow's Ray cluster.

flowactors moves, routes, records and delivers data; SQL, joins and aggregations over many
FlowFiles' records run on Spark. ``service`` owns the flow's one Spark session (a Ray actor),
``flowactors.sdk.record_formats`` turns content into Arrow and back, ``processors`` holds ExecuteSparkSQL and
TransformWithSpark. docs/spark.md describes the whole bridge.
"""

from flowactors.spark.processors import ExecuteSparkSQL, SparkRecordProcessor, TransformWithSpark
from flowactors.sdk.record_formats import CSV, JSON_LINES, PARQUET, ReadOptions, RecordFormatError, parse_schema
from flowactors.spark.service import (SparkError, SparkServiceActor, SparkServiceError, SparkSettings,
                                      SparkSettingsError, SparkStartError, check_java, service_name, start_service,
                                      stop_service)

__all__ = [
    "CSV", "ExecuteSparkSQL", "JSON_LINES", "PARQUET", "ReadOptions", "RecordFormatError", "SparkError",
    "SparkRecordProcessor", "SparkServiceActor", "SparkServiceError", "SparkSettings", "SparkSettingsError",
    "SparkStartError", "TransformWithSpark", "check_java", "parse_schema", "service_name", "start_service",
    "stop_service",
]
