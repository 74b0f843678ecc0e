"""The relationships every engine and processor agree on, and what a FlowFile sent to ``failure``
by the engine carries.

A processor that declares ``FAILURE`` gets the FlowFile it raised on routed there by the engine
(``flowactors.engine.task``), with ``REASON_ATTRIBUTE`` (the error, at most ``MAX_REASON``
characters) and ``PROCESSOR_ATTRIBUTE`` (the processor's name); a processor that routes a failure
itself (ExecuteStateless) sets the same two attributes.
"""

from __future__ import annotations

from flowactors.sdk.processor import Relationship

SUCCESS = Relationship("success", "FlowFiles that were processed successfully")
FAILURE = Relationship("failure", "FlowFiles that could not be processed")

#: characters of an error kept in a failed FlowFile's ``flowactors.failure.reason``
MAX_REASON = 1000
#: the attributes a FlowFile sent to ``failure`` carries: why, and which processor
REASON_ATTRIBUTE, PROCESSOR_ATTRIBUTE = "flowactors.failure.reason", "flowactors.failure.processor"
