"""The SQL processors (docs/sql.md)."""

from flowactors.processors.sql.execute import ExecuteSQL, ExecuteSQLRecord
from flowactors.processors.sql.convert_json import ConvertJSONToSQL
from flowactors.processors.sql.put_record import PutDatabaseRecord
from flowactors.processors.sql.put_sql import PutSQL

__all__ = [
    "ExecuteSQL",
    "ExecuteSQLRecord",
    "ConvertJSONToSQL", "PutDatabaseRecord", "PutSQL",
]
