"""The relationships every engine and processor agree on, and what a FlowFile sent to ``failure``
by the engine carries.

A processor that declares ``FAILURE`` gets the FlowFile it raised on routed there by the engine
(``flowactors.engine.task``), with ``REASON_ATTRIBUTE`` (the error, at most ``MAX_REASON``
characters) and ``PROCESSOR_ATTRIBUTE`` (the processor's name); a processor that routes a failure
itself (ExecuteStateless, a content it cannot read) sets the same two (``failure_attributes``).
"""

from __future__ import annotations

from flowactors.sdk.processor import Relationship

SUCCESS = Relationship("success", "FlowFiles that were processed successfully")
FAILURE = Relationship("failure", "FlowFiles that could not be processed")

#: characters of an error kept in a failed FlowFile's ``flowactors.failure.reason``
MAX_REASON = 1000
#: the attributes a FlowFile sent to ``failure`` carries: why, and which processor
REASON_ATTRIBUTE, PROCESSOR_ATTRIBUTE = "flowactors.failure.reason", "flowactors.failure.processor"


def failure_attributes(processor: str, error: BaseException | str) -> dict[str, str]:
    """What a FlowFile sent to ``failure`` carries: the error (``Type: message``, or the text
    given), cut to ``MAX_REASON`` characters, and the processor's name."""
    reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {REASON_ATTRIBUTE: reason[:MAX_REASON], PROCESSOR_ATTRIBUTE: processor}


def reason(error: BaseException | str) -> str:
    """An error's message (or a text) on one line, its lines joined; the error type's name when
    it has no message: what a message to a user or a failure attribute quotes."""
    text = " ".join(line.strip() for line in str(error).strip().splitlines() if line.strip())
    return text or type(error).__name__
