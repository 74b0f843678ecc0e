"""The record processors: NiFi's ConvertRecord, QueryRecord, SplitRecord and ValidateRecord, each
reading records through a Record Reader service and writing them through a Record Writer
(``flowactors.sdk.records``); docs/records/processors.md describes them."""

from flowactors.processors.records.convert import ConvertRecord
from flowactors.processors.records.query import QueryRecord
from flowactors.processors.records.split import SplitRecord
from flowactors.processors.records.validate import ValidateRecord

__all__ = ["ConvertRecord", "QueryRecord", "SplitRecord", "ValidateRecord"]
