"""flowactors: Apache NiFi's dataflow model in Python on Ray.

The public surface is what this module exports; everything else may change between releases.
Importing it does not start or import Ray: ``run_flow`` (``flowactors.driver.running``), which
imports the engines and Ray, is imported when it is first used.
"""

from typing import Any

from flowactors.sdk.flow import Connection, Flow, FlowValidationError, ProcessorNode
from flowactors.sdk.processor import (ProcessContext, Processor, PropertyDescriptor, PropertyValue, Relationship,
                                      validators)
from flowactors.sdk.session import CommitError, FlowFileHandlingError, ProcessSession
from flowactors.sdk.settings import Settings
from repositories.model import ContentClaim, FlowFile, ResourceClaim

__all__ = [
    "Connection", "ContentClaim", "CommitError", "Flow", "FlowFile", "FlowFileHandlingError",
    "FlowValidationError", "ProcessContext", "ProcessSession", "Processor", "ProcessorNode",
    "PropertyDescriptor", "PropertyValue", "Relationship", "ResourceClaim", "Settings", "run_flow", "validators",
]


def __getattr__(name: str) -> Any:
    """``run_flow``, imported on first use: it brings the engines and Ray, which a processor's
    module importing ``flowactors`` for the SDK must not pay for."""
    if name == "run_flow":
        from flowactors.driver.running import run_flow  # Ray and the engines: heavy, only to run a flow

        return run_flow
    raise AttributeError(f"module 'flowactors' has no attribute {name!r}")
