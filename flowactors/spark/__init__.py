"""The Spark bridge: heavy record processing on a Spark that RayDP starts on the flow's Ray cluster.

flowactors moves, routes, records and delivers data; SQL, joins and aggregations over many
FlowFiles' records run on Spark. ``service`` owns the flow's one Spark session (a Ray actor),
``processors`` holds ExecuteSparkSQL and TransformWithSpark, which read FlowFiles' records into
Arrow through a Record Reader service and write results through a Record Writer service.
docs/spark.md describes the whole bridge.
"""

from flowactors.spark.processors import ExecuteSparkSQL, SparkRecordProcessor, TransformWithSpark
from flowactors.spark.service import (SparkError, SparkServiceActor, SparkServiceError, SparkSettings,
                                      SparkSettingsError, SparkStartError, check_java, service_name, start_service,
                                      stop_service)

__all__ = [
    "ExecuteSparkSQL", "SparkError", "SparkRecordProcessor", "SparkServiceActor", "SparkServiceError",
    "SparkSettings", "SparkSettingsError", "SparkStartError", "TransformWithSpark", "check_java", "service_name",
    "start_service", "stop_service",
]
