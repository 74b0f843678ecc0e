"""What a processor may ask of the stateless engine: a flow run as one transaction a trigger, from
inside a processor (ExecuteStateless, NiFi's processor of the same name).

The SDK declares the interface; the engine that runs the processor implements it and hands it over
in ``ProcessContext.stateless_engine`` (None where no engine offers one), as NiFi's ExecuteStateless
reaches its engine through the stateless API rather than the engine's classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

if TYPE_CHECKING:  # annotations only: the flow module imports the processor API, which names this one
    from flowactors.sdk.flow import Flow


class TriggerFailure(Protocol):
    """Why a trigger failed: ``kind`` is "exception", "failure port", "timeout" or "left over";
    ``processor`` the processor that raised, if one did."""

    reason: str
    kind: str
    processor: str | None


class TriggerOutput(Protocol):
    """A FlowFile that reached an output port: its attributes and content."""

    @property
    def attributes(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...


class TriggerOutcome(Protocol):
    """What one trigger did. A successful trigger taken with ``acknowledge=False`` is kept only by
    ``acknowledge`` (after the caller's own commit) and thrown away by ``abandon``."""

    @property
    def success(self) -> bool: ...

    @property
    def failure(self) -> TriggerFailure | None: ...

    @property
    def outputs(self) -> Mapping[str, Sequence[TriggerOutput]]: ...

    def acknowledge(self) -> None: ...

    def abandon(self, reason: str = ...) -> None: ...


#: a trigger's input: content, or content and attributes
TriggerInput = bytes | str | tuple[bytes | str, Mapping[str, str]]


class StatelessDataflow(Protocol):
    """A flow ready to be triggered, one transaction a trigger."""

    def trigger(self, inputs: Sequence[TriggerInput] | Mapping[str, Sequence[TriggerInput]] | None = None, *,
                acknowledge: bool = True) -> TriggerOutcome:
        """Run one trigger with ``inputs`` at the input port (or at each port named)."""

    def close(self) -> None:
        """Stop the flow's processors (``on_stopped``)."""


class StatelessEngine(Protocol):
    """Builds stateless dataflows."""

    def dataflow(self, flow: "Flow", *, failure_ports: Sequence[str] = (),
                 timeout: float | None = None) -> StatelessDataflow:
        """``flow`` ready to trigger: ``failure_ports`` fail a trigger that reaches them, and a
        trigger may take ``timeout`` seconds."""
