"""The SQL processors (docs/sql.md)."""

from flowactors.processors.sql.execute import ExecuteSQL, ExecuteSQLRecord

__all__ = [
    "ExecuteSQL",
    "ExecuteSQLRecord",
]
