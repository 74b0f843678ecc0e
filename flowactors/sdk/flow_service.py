"""Flow services: what some processors of a flow share for one run (the flow's Spark session),
started by the engine before those processors and stopped after them.

A processor class names the services it may use in ``Processor.flow_services``; the engine asks
each service whether it can run the flow's processors that use it (``engine_problem``), and which
of them need the flow's own instance (``needed_by``): when any do, it starts it and, after the processors
stopped, stops it. The engine knows services only through this interface, so a component package
(``flowactors.spark``) brings its service without the engine importing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: the flow module imports the processor API, which names this one
    from flowactors.sdk.flow import Flow


class FlowServiceError(Exception):
    """A flow service could not start; the message says why and what to do."""


class FlowService(Protocol):
    """A service the engine starts for a flow (see the module docstring)."""

    #: a short name: the flow's instance is named after the flow and it (``<flow>.<name>``)
    name: str

    def needed_by(self, flow: "Flow") -> list[str]:
        """The names of the processors of ``flow`` that use the flow's own instance (none: the
        service is not started)."""

    def engine_problem(self, flow: "Flow", engine: str) -> str | None:
        """Why ``engine`` (``flowactors.engine.ENGINES``) cannot run ``flow``'s processors that use
        this service, as a message naming them and saying what to do; None if it can."""

    def start(self, flow: "Flow", settings: Any, name: str) -> Any:
        """Start the flow's instance, named ``name``; returns what ``stop`` takes. Raises
        ``FlowServiceError`` when it cannot start (the flow's start fails with that message)."""

    def stop(self, started: Any) -> None:
        """Stop what ``start`` returned; never raises (the service may be gone already)."""


def flow_services(flow: "Flow") -> list[FlowService]:
    """The services ``flow``'s processors name, each once, in the order they are first named."""
    found: list[FlowService] = []
    for node in flow.processors.values():
        found.extend(s for s in node.type.flow_services if not any(s is f for f in found))
    return found


def service_problems(flow: "Flow", engine: str) -> list[str]:
    """Why ``engine`` cannot run ``flow``'s services, one message a service (empty: it can)."""
    return [p for p in (service.engine_problem(flow, engine) for service in flow_services(flow)) if p is not None]
