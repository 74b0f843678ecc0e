"""Controller services where an engine runs processors: enabled before the processors that use
them start, disabled after they stopped (``flowactors.sdk.services``).

A ``ServiceHost`` holds the instances one executor's processors use (the in-process and Ray
engines: each executor its own; the stateless engine and the test runner: one for the flow): a
service with no state to share has an instance in each process that uses it, as a reader or a
writer costs nothing to create and a call to it stays in the process. Services are enabled in
dependency order (a reader after the schema registry it names) and disabled in reverse. A
service whose ``on_enabled`` raises stops the enabling: the ones enabled before it are disabled,
and ``ServiceEnableError`` names the service and gives its reason in one line.

A service that owns state every process must share (``ControllerService.shared_state``) has one
instance for the flow instead: a ``SharedService`` the controller has its engine host (an actor
on Ray, an object served by threads of its own in process), enabled before the executors are
wired and disabled after they stopped. An executor's ``ServiceHost`` then holds a proxy of it
(``service_proxy``): an object providing the service's APIs whose every public method is one call
to the shared instance.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Mapping

from flowactors.engine.transport import Link, call_now
from flowactors.sdk.flow import Flow
from flowactors.sdk.processor import ProcessContext
from flowactors.sdk.relationships import reason
from flowactors.sdk.services import (ControllerService, ServiceContext, ServiceEnableError, ServiceNode,
                                     dependency_order, group_of, visible_services)

log = logging.getLogger(__name__)
#: calls a shared service takes at once (the processors of every executor call it)
SHARED_SERVICE_CONCURRENCY = 8


class ServiceHost:
    """The enabled instances of some services of a flow (see the module docstring)."""

    def __init__(self, services: Iterable[ServiceNode], all_services: Iterable[ServiceNode],
                 shared: Mapping[str, Link] | None = None):
        #: the services to enable, in dependency order (``Flow.services_used_by``)
        self.nodes = list(services)
        self._all = list(all_services)
        #: the links to the flow's shared instances, by path: reached through a proxy, never enabled here
        self.shared = dict(shared or {})
        self.instances: dict[str, Any] = {}   # by path: an instance, or a shared one's proxy
        self._contexts: dict[str, ServiceContext] = {}

    def enable(self) -> None:
        """Enable every service, in order; ``ServiceEnableError`` (after disabling those enabled)
        when one refuses."""
        for node in self.nodes:
            if node.path in self.instances:
                continue
            if node.path in self.shared:
                self.instances[node.path] = service_proxy(node, self.shared[node.path])
                continue
            context = ServiceContext(node.path, node.type.__name__, node.type.descriptor_map(), node.property_values,
                                     self.visible(node.group))
            instance = node.type()
            try:
                instance.on_enabled(context)
            except Exception as err:
                self.disable()
                raise ServiceEnableError(f"controller service '{node.path}' ({node.type.__name__}) could not be "
                                         f"enabled: {reason(err)}") from err
            self.instances[node.path] = instance
            self._contexts[node.path] = context

    def disable(self) -> None:
        """Disable every enabled service, the last enabled first; never raises (logs instead)."""
        for path in reversed(list(self.instances)):
            instance = self.instances.pop(path)
            if path not in self._contexts:   # a shared one's proxy: its instance is disabled where it lives
                continue
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


class SharedService:
    """The flow's one instance of a service with state to share, and the services it uses, in the
    process that hosts it (see the module docstring). It enables itself at its first call (``enable``,
    which the controller makes at start, so a refusal stops the start; or any call after the engine
    restarted its process), and ``invoke`` calls one of its methods by name."""

    def __init__(self, flow: Flow, path: str):
        nodes = list(flow.services.values())
        self.path = path
        self._host = ServiceHost(dependency_order([flow.services[path]], nodes), nodes)
        self._lock = threading.Lock()

    def enable(self) -> None:
        """Enable the service (and those it uses) unless it is already; ``ServiceEnableError``."""
        self._instance()

    def invoke(self, method: str, args: tuple, kwargs: dict) -> Any:
        return getattr(self._instance(), method)(*args, **kwargs)

    def _instance(self) -> Any:
        instance = self._host.instances.get(self.path)
        if instance is None:   # only the first calls take the lock
            with self._lock:
                if self.path not in self._host.instances:
                    self._host.enable()
                instance = self._host.instances[self.path]
        return instance

    def disable(self) -> None:
        with self._lock:
            self._host.disable()


class ServiceProxy:
    """A shared service as a processor reaches it (``service_proxy`` makes one per service type)."""

    def __init__(self, link: Link, path: str):
        self._link = link
        self._path = path

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of controller service '{self._path}'>"


def service_proxy(node: ServiceNode, link: Link) -> Any:
    """An object providing ``node``'s service APIs (so ``find_service`` accepts it), each public
    method of its type one call to the shared instance behind ``link``."""
    hidden = set(dir(ControllerService))
    names = [name for name in dir(node.type) if not name.startswith("_") and name not in hidden
             and callable(getattr(node.type, name))]
    methods = {name: _forwarder(name) for name in names}
    proxy_type = type(f"{node.type.__name__}Proxy", (ServiceProxy, *node.type.apis()), methods)
    return proxy_type(link, node.path)


def _forwarder(method: str) -> Callable[..., Any]:
    def forward(self: ServiceProxy, *args: Any, **kwargs: Any) -> Any:
        return call_now(self._link, SharedService.invoke, method, args, kwargs)

    forward.__name__ = method
    return forward
