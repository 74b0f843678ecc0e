"""flowactors: Apache NiFi's dataflow model in Python on Ray.

The public surface is what this module exports; everything else may change between releases.
Importing it does not start or import Ray: that happens when a flow runs.
"""

from flowactors.sdk.flow import Connection, Flow, FlowValidationError, ProcessorNode
from flowactors.sdk.processor import (ProcessContext, Processor, PropertyDescriptor, PropertyValue, Relationship,
                                  validators)
from flowactors.sdk.session import CommitError, FlowFileHandlingError, ProcessSession
from flowactors.sdk.settings import Settings
from repositories.model import ContentClaim, FlowFile, ResourceClaim

__all__ = [
    "Connection", "ContentClaim", "CommitError", "Flow", "FlowFile", "FlowFileHandlingError",
    "FlowValidationError", "ProcessContext", "ProcessSession", "Processor", "ProcessorNode",
    "PropertyDescriptor", "PropertyValue", "Relationship", "ResourceClaim", "Settings", "validators",
]
