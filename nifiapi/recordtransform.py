"""Processors that transform the records of a FlowFile one record at a time.

The runtime reads the FlowFile with the configured Record Reader, calls ``transform`` once per
record (a dict), and writes the results with the Record Writer: one output FlowFile per
relationship and partition.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod

from nifiapi._processor import ProcessorBase


class RecordTransform(ProcessorBase, ABC):
    """Base class of a record transform; implement ``transform(context, record, schema, attributemap)``."""

    def transformRecord(self, jsonarray, schema, attributemap):
        """Transform each record of a JSON array (text); the results carry each record as JSON."""
        attributes = CachingAttributeMap(attributemap)
        results = []
        for record in json.loads(jsonarray):
            result = self.transform(self.process_context, record, schema, attributes)
            record_json = None if result.getRecord() is None else json.dumps(result.getRecord())
            results.append(__RecordTransformResult__(result, record_json))
        return results

    @abstractmethod
    def transform(self, context, record, schema, attributemap):
        """Return a ``RecordTransformResult`` for ``record`` (a dict)."""


class CachingAttributeMap:
    """The input FlowFile's attributes; each one looked up is remembered (misses too)."""

    def __init__(self, delegate):
        self.delegate = delegate
        self.cache = {}

    def getAttribute(self, attributeName):
        if attributeName not in self.cache:
            self.cache[attributeName] = self.delegate.getAttribute(attributeName)
        return self.cache[attributeName]

    def getAttributes(self):
        return self.delegate.getAttributes()


class __RecordTransformResult__:
    """A result as ``transformRecord`` hands it on: the record as JSON text."""

    class Java:
        implements = ['org.apache.nifi.python.processor.RecordTransformResult']

    def __init__(self, processor_result, recordJson):
        self.processor_result = processor_result
        self.recordJson = recordJson

    def getRecordJson(self):
        return self.recordJson

    def getSchema(self):
        return self.processor_result.getSchema()

    def getRelationship(self):
        return self.processor_result.getRelationship()

    def getPartition(self):
        partition = self.processor_result.getPartition()
        return None if partition is None else dict(partition)


class RecordTransformResult:
    """One record's outcome: the record (None drops it), an optional schema, the relationship
    and an optional partition (records of one relationship and partition share an output FlowFile)."""

    def __init__(self, record=None, schema=None, relationship="success", partition=None):
        self.record = record
        self.schema = schema
        self.relationship = relationship
        self.partition = partition

    def getRecord(self):
        return self.record

    def getSchema(self):
        return self.schema

    def getRelationship(self):
        return self.relationship

    def getPartition(self):
        return self.partition
