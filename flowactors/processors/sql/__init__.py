"""The SQL processors (docs/sql.md)."""

from flowactors.processors.sql.execute import ExecuteSQL, ExecuteSQLRecord
from flowactors.processors.sql.convert_json import ConvertJSONToSQL
from flowactors.processors.sql.put_record import PutDatabaseRecord
from flowactors.processors.sql.put_sql import PutSQL
from flowactors.processors.sql.query_table import QueryDatabaseTable, QueryDatabaseTableRecord
from flowactors.processors.sql.table_fetch import GenerateTableFetch

__all__ = [
    "ExecuteSQL",
    "ExecuteSQLRecord",
    "ConvertJSONToSQL", "PutDatabaseRecord", "PutSQL",
    "GenerateTableFetch", "QueryDatabaseTable", "QueryDatabaseTableRecord",
]
