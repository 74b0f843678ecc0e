"""Controller services where an engine runs processors: enabled before the processors that use
them start, disabled after they stopped (``flowactors.sdk.services``).

A ``ServiceHost`` holds the instances one executor's processors use (the in-process and Ray
engines: each executor its own; the stateless engine and the test runner: one for the flow): a
service with no state to share has an instance in each process that uses it, as a reader or a
writer costs nothing to create and a call to it stays in the process. Services are enabled in
dependency order (a reader after the schema registry it names) and disabled in reverse. A
service whose ``on_enabled`` raises stops the enabling: the ones enabled before it are disabled,
and ``ServiceEnableError`` names the service and gives its reason in one line.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from flowactors.sdk.processor import ProcessContext
from flowactors.sdk.services import (ControllerService, ServiceContext, ServiceEnableError, ServiceNode, group_of,
                                     visible_services)

log = logging.getLogger(__name__)


class ServiceHost:
    """The enabled instances of some services of a flow (see the module docstring)."""

    def __init__(self, services: Iterable[ServiceNode], all_services: Iterable[ServiceNode]):
        #: the services to enable, in dependency order (``Flow.services_used_by``)
        self.nodes = list(services)
        self._all = list(all_services)
        self.instances: dict[str, ControllerService] = {}   # by path
        self._contexts: dict[str, ServiceContext] = {}

    def enable(self) -> None:
        """Enable every service, in order; ``ServiceEnableError`` (after disabling those enabled)
        when one refuses."""
        for node in self.nodes:
            if node.path in self.instances:
                continue
            context = ServiceContext(node.path, node.type.__name__, node.type.descriptor_map(), node.property_values,
                                     self.visible(node.group))
            instance = node.type()
            try:
                instance.on_enabled(context)
            except Exception as err:
                self.disable()
                reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise ServiceEnableError(f"controller service '{node.path}' ({node.type.__name__}) could not be "
                                         f"enabled: {reason}") from err
            self.instances[node.path] = instance
            self._contexts[node.path] = context

    def disable(self) -> None:
        """Disable every enabled service, the last enabled first; never raises (logs instead)."""
        for path in reversed(list(self.instances)):
            instance = self.instances.pop(path)
            try:
                instance.on_disabled(self._contexts.pop(path))
            except Exception:
                log.exception("controller service '%s' failed in on_disabled", path)

    def visible(self, group: str) -> dict[str, Any]:
        """The enabled instances a component of ``group`` reaches, by every name that reaches them."""
        return {reference: self.instances[node.path] for reference, node in visible_services(self._all, group).items()
                if node.path in self.instances}

    def give_to(self, context: ProcessContext) -> None:
        """Let a processor's context reach the services of its group."""
        context.services = self.visible(group_of(context.name))

    def status(self) -> list[dict]:
        """One row a service: its path, type and whether it is enabled here."""
        return [{"name": node.path, "type": node.type.__name__, "enabled": node.path in self.instances}
                for node in self.nodes]
