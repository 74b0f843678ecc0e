"""The record processors: NiFi's ConvertRecord, QueryRecord, SplitRecord, ValidateRecord, UpdateRecord,
PartitionRecord, MergeRecord and LookupRecord, each
reading records through a Record Reader service and writing them through a Record Writer
(``flowactors.sdk.records``); docs/records/processors.md describes them."""

from flowactors.processors.records.convert import ConvertRecord
from flowactors.processors.records.lookup_record import LookupRecord
from flowactors.processors.records.merge_record import MergeRecord
from flowactors.processors.records.partition_record import PartitionRecord
from flowactors.processors.records.query import QueryRecord
from flowactors.processors.records.split import SplitRecord
from flowactors.processors.records.update_record import UpdateRecord
from flowactors.processors.records.validate import ValidateRecord

__all__ = ["ConvertRecord", "LookupRecord", "MergeRecord", "PartitionRecord", "QueryRecord", "SplitRecord",
           "UpdateRecord", "ValidateRecord"]
