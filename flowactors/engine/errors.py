"""The errors the engine raises to its callers (the driver, the CLI, the page, a stateless
trigger's caller), each with a message that says what went wrong and what to do."""

from __future__ import annotations


class FlowStartError(RuntimeError):
    """The flow could not start; the message says why and what to do. Nothing was changed on disk."""


class NoSuchQueueError(LookupError):
    """The queue is not in the flow (running) or holds nothing in the repository (stopped)."""


class NoSuchEventError(LookupError):
    """No provenance event has that id (never existed, or aged off the provenance repository)."""


class ReplayError(RuntimeError):
    """The event cannot be replayed; the message says why. Nothing was changed."""


class TriggerFailed(Exception):
    """Why a trigger failed: ``kind`` is "exception" (``processor`` raised), "failure port"
    (``port`` received a FlowFile), "timeout" or "left over" (FlowFiles no processor took). The
    held ``on_failure`` callbacks get this exception."""

    def __init__(self, reason: str, kind: str, *, processor: str | None = None, port: str | None = None):
        super().__init__(reason)
        self.reason, self.kind, self.processor, self.port = reason, kind, processor, port


class ClusterStateError(RuntimeError):
    """The cluster state file is damaged or of another format, or its keeper cannot be reached."""


class TransferRefused(RuntimeError):
    """The receiving node did not take the transfer (nothing was committed there)."""


class TopologyError(ValueError):
    """The nodes asked for are not in the cluster, or the topology file is damaged; says which."""


class ProcessKilledByFlowFile(RuntimeError):
    """A FlowFile was alone in a trigger each time the processor's process ended, often enough to
    be set aside (``flowactors.engine.process_deaths``); its text is the FlowFile's failure reason."""
