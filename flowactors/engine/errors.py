"""The errors the engine raises to its callers (the driver, the CLI, the page), each with a message
that says what went wrong and what to do."""

from __future__ import annotations


class FlowStartError(RuntimeError):
    """The flow could not start; the message says why and what to do. Nothing was changed on disk."""


class NoSuchQueueError(LookupError):
    """The queue is not in the flow (running) or holds nothing in the repository (stopped)."""


class NoSuchEventError(LookupError):
    """No provenance event has that id (never existed, or aged off the provenance repository)."""


class ReplayError(RuntimeError):
    """The event cannot be replayed; the message says why. Nothing was changed."""
