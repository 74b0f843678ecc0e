"""Controller services: components a flow's processors share, configured once (NiFi's controller
services: record readers and writers, schema registries, lookups, connection pools, SSL contexts).

A service is a ``ControllerService`` subclass that declares ``properties`` (as a processor does)
and provides one or more *APIs*: the abstract classes a processor asks for, such as
``flowactors.sdk.records.RecordReaderFactory`` or ``LookupService`` below. It provides an API by
subclassing it (``class JsonTreeReader(ControllerService, RecordReaderFactory)``), as a NiFi
service implements an interface. A processor property that names a service declares the API it
needs (``PropertyDescriptor(service=RecordReaderFactory)``); the flow checks, when it validates,
that the name is a service the processor can see and that it provides that API.

**Scope.** A service belongs to a process group (``ServiceNode.group``: ``""`` for the flow's own,
``"Main/Ingest"`` for a group inside ``Main``; a NiFi import flattens groups into processor names
``Main/Ingest/<name>``, so a processor's group is its name up to the last ``/``). A processor or
service sees the services of its own group and of every group around it, the innermost first:
``visible_services``. A reference is a service's name, or its full path ``<group>/<name>``.

**Lifecycle.** The engine enables (``on_enabled``) the services a processor uses, and the services
those use, before the processor's first ``on_scheduled``, and disables them (``on_disabled``) after
its last ``on_stopped``. Where: a service with no state to share (``shared_state = False``, every
standard service) has an instance in each executor that hosts a processor using it (so a processor
reaches its reader with a plain call, no actor in between); one with ``shared_state = True`` has one
instance for the flow, which processors reach through a proxy; ``flowactors.engine.services`` says how.
A processor reaches an enabled service with ``context.service("Record Reader")``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

from flowactors.sdk.processor import Component, PropertyDescriptor, PropertyLookup, PropertyValue, resolve_component


class ControllerService(Component):
    """Base class of every controller service (see the module docstring).

    ``on_enabled`` may raise to refuse (a schema that does not parse, a file that cannot be read):
    the flow does not start, and says which service and why.
    """

    #: True when the service owns state every process must share (a cache, a sequence): the engine
    #: then hosts one instance for the flow, reached through a proxy whose every public method is a
    #: call to it; False (the default): an instance in each executor using it
    shared_state: ClassVar[bool] = False

    def on_enabled(self, context: "ServiceContext") -> None:
        """Called once in each process that hosts the service, before any processor uses it."""

    def on_disabled(self, context: "ServiceContext") -> None:
        """Called once in each process that hosts the service, after every processor using it stopped."""

    @classmethod
    def implied_references(cls, values: Mapping[str, str], visible: Mapping[str, "ServiceNode"]
                           ) -> tuple[list[str], list[str]]:
        """The services this one uses that no property of it names, found among ``visible`` (those
        in its reach) from its ``values`` (a map cache client uses the server whose Port is its
        Server Port), as (references, problems): the engine enables them before this one, and
        each problem (one sentence: none matches) makes the flow invalid. None by default."""
        return [], []

    @classmethod
    def apis(cls) -> list[type]:
        """The service APIs this class provides (``ServiceAPI`` subclasses it derives from)."""
        return [base for base in cls.__mro__ if issubclass(base, ServiceAPI) and base is not ServiceAPI
                and base.__dict__.get("api", False)]


class ServiceAPI:
    """Base of every service API: an abstract class a processor asks for by name. A class that
    defines an API sets ``api = True`` in its own body (its subclasses, the services, do not)."""

    api: ClassVar[bool] = False


class ServiceEnableError(Exception):
    """A controller service could not be enabled; the message names it and says why."""


@dataclass
class ServiceContext(PropertyLookup):
    """What a service knows when enabled: its name, configuration, and the services it may use."""

    name: str
    service_type: str
    descriptors: Mapping[str, PropertyDescriptor]
    values: Mapping[str, str]
    #: the enabled services this one may use, by the names its properties give them
    services: Mapping[str, Any] = field(default_factory=dict, repr=False)
    _properties: dict[str, PropertyValue] = field(default_factory=dict, repr=False)



# ---------------------------------------------------------------------------------- the standard APIs
class LookupService(ServiceAPI):
    """Looks a value up by coordinates (NiFi's ``LookupService``): ``LookupRecord`` and NiFi 2
    Python processors use it."""

    api = True

    def required_keys(self) -> set[str]:
        """The coordinate names every lookup must give (NiFi's ``getRequiredKeys``)."""
        return {"key"}

    def lookup(self, coordinates: Mapping[str, Any]) -> Any:
        """The value at ``coordinates``, or None when there is none."""
        raise NotImplementedError


class StringLookupService(LookupService):
    """A lookup whose values are strings (NiFi's ``StringLookupService``)."""

    api = True


class SSLContextService(ServiceAPI):
    """Gives TLS settings to the processors that connect somewhere (NiFi's ``SSLContextService``)."""

    api = True

    def create_context(self, server_side: bool = False, client_auth: str = "NONE") -> ssl.SSLContext:
        """A new context: a client's (``server_side`` False: the peer's certificate verified
        against the truststore, or the system's CAs without one, and its host name checked; the
        keystore's key and chain sent when asked) or a server's (the keystore's key and chain;
        ``client_auth`` as NiFi's ClientAuth: ``NONE``, ``WANT`` (a client certificate asked
        for and verified when sent) or ``REQUIRED`` (a handshake without one fails)). A server
        context of a service without a keystore raises ``ValueError`` saying so."""
        raise NotImplementedError

    def has_keystore(self) -> bool:
        """Whether the service has a key and certificate chain to present (a server needs one)."""
        raise NotImplementedError

    def has_truststore(self) -> bool:
        """Whether the service names the certificates it trusts (else a client trusts the system's)."""
        raise NotImplementedError


class DBCPService(ServiceAPI):
    """Lends connections to a SQL database (NiFi's ``DBCPService``): the SQL processors ask for it.

    ``connection()`` is a context manager giving a SQLAlchemy ``Connection`` from the service's
    pool, given back at the end of the block; it raises ``DatabaseUnavailableError`` (one line:
    where, and why) when none can be had within the service's wait."""

    api = True

    def connection(self) -> Any:
        raise NotImplementedError


class DatabaseUnavailableError(Exception):
    """No connection to the database could be had: unreachable, refused, or the pool stayed full."""


def database_error_text(err: BaseException) -> str:
    """One line saying what went wrong, what the database services and SQL processors report: for a
    SQLAlchemy error the driver's message (without SQLAlchemy's statement and parameter dump), for
    any other error its own message; the error type's name when it has none."""
    original = getattr(err, "orig", None)
    text = str(original) if original is not None else str(err)
    return " ".join(text.split()) or type(err).__name__


class HttpContextMap(ServiceAPI):
    """Holds HTTP requests waiting for their responses (NiFi's ``HttpContextMap``), and owns the
    servers that take them, so a request and its socket live in one place whichever processes
    HandleHttpRequest and HandleHttpResponse run in (the service is shared: every call is one
    call to the flow's instance). Bodies travel in bounded chunks, never whole.

    HandleHttpRequest: ``listen`` (a server on its port, for ``owner``), then ``take`` requests
    (each registered: it now waits for its response, or is answered 503 once the map's expiry
    passes), ``read`` their bodies and ``release`` them, ``fail`` those its commit lost, and
    ``unlisten`` when it stops. HandleHttpResponse: ``respond`` (status and headers; False when
    the request is gone or expired), ``write`` the body a chunk at a time, then ``complete``
    (sends it; False when the request went meanwhile) or ``discard`` (forget what was staged,
    the request still waits)."""

    api = True

    def listen(self, owner: str, settings: Mapping[str, Any]) -> int:
        """Serve ``settings`` (port, host, methods, paths, TLS...) for ``owner``; the port bound."""
        raise NotImplementedError

    def unlisten(self, owner: str) -> None:
        raise NotImplementedError

    def take(self, owner: str, most: int, wait: float, room: bool) -> list[dict[str, Any]]:
        """Up to ``most`` waiting requests of ``owner``'s server (waiting up to ``wait`` seconds
        for the first), each ``{"id", "attributes", "parts": [(size, attributes)]}``; ``room``
        False answers every waiting request 503 and takes none."""
        raise NotImplementedError

    def read(self, identifier: str, part: int, offset: int, size: int) -> bytes:
        raise NotImplementedError

    def release(self, identifier: str) -> None:
        """The request's body is no longer needed."""
        raise NotImplementedError

    def fail(self, identifier: str, status: int) -> None:
        """Answer the request ``status`` now and forget it."""
        raise NotImplementedError

    def respond(self, identifier: str, status: int, headers: Mapping[str, str]) -> bool:
        raise NotImplementedError

    def write(self, identifier: str, chunk: bytes) -> None:
        raise NotImplementedError

    def complete(self, identifier: str) -> bool:
        raise NotImplementedError

    def discard(self, identifier: str) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------- services in a flow
@dataclass
class ServiceNode:
    """A controller service placed in a flow: its name, type, properties and process group."""

    name: str
    type: type[ControllerService]
    properties: dict[str, str] = field(default_factory=dict)
    #: the process group it belongs to (``""``: the flow's own); see the module docstring
    group: str = ""
    #: the property values with parameters resolved, set when the flow validates (never saved)
    resolved: dict[str, str] | None = field(default=None, compare=False, repr=False)
    #: a disabled service is kept but never enabled, and a processor using one is refused unless
    #: it is disabled too (as NiFi keeps it invalid)
    disabled: bool = False

    @property
    def path(self) -> str:
        """The name that reaches it from anywhere: ``<group>/<name>``, or its name in the flow's group."""
        return f"{self.group}/{self.name}" if self.group else self.name

    @property
    def property_values(self) -> dict[str, str]:
        return self.properties if self.resolved is None else self.resolved

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.type_name(), "properties": dict(self.properties),
                "group": self.group, "disabled": self.disabled}


def group_of(processor_name: str) -> str:
    """The process group of a processor named as a NiFi import names it (``Main/Ingest/<name>``)."""
    return processor_name.rpartition("/")[0]


def enclosing_groups(group: str) -> list[str]:
    """``group`` and every group around it, innermost first (``"a/b"`` -> ``a/b``, ``a``, ``""``)."""
    groups = [group]
    while group:
        group = group.rpartition("/")[0]
        groups.append(group)
    return groups


def visible_services(services: Iterable[ServiceNode], group: str) -> dict[str, ServiceNode]:
    """The services a component of ``group`` sees (those of its group and the groups around it,
    as NiFi scopes them), by each name that reaches them: the service's full path, and its plain
    name when no service of that name is further in."""
    services = list(services)
    visible: dict[str, ServiceNode] = {}
    for outer in reversed(enclosing_groups(group)):   # outermost first, so inner names win
        visible.update({s.name: s for s in services if s.group == outer})
        visible.update({s.path: s for s in services if s.group == outer})
    return visible


def references(component: type[Component], values: Mapping[str, str]) -> dict[str, str]:
    """The properties of ``component`` that name a service (declared with ``service=``) and are
    set: property name -> the reference."""
    found = {}
    for name, descriptor in component.descriptor_map().items():
        value = values.get(name, descriptor.default)
        if descriptor.service is not None and value:
            found[name] = value
    return found


def reference_problems(component: type[Component], values: Mapping[str, str],
                       visible: Mapping[str, ServiceNode]) -> list[str]:
    """Every property of ``component`` naming a service that is not visible, or that does not
    provide the API the property declares: one sentence each."""
    problems = []
    descriptors = component.descriptor_map()
    for name, reference in references(component, values).items():
        api = descriptors[name].service
        assert api is not None
        node = visible.get(reference)
        if node is None:
            offered = sorted(k for k, s in visible.items() if issubclass(s.type, api) and "/" not in k)
            problems.append(f"property '{name}' names controller service '{reference}', which the flow does not "
                            f"have in reach (a {api.__name__} it has: {', '.join(offered) or 'none'})")
        elif not issubclass(node.type, api):
            provided = ", ".join(a.__name__ for a in node.type.apis()) or "no API"
            problems.append(f"property '{name}' needs a {api.__name__}, but controller service '{reference}' is a "
                            f"{node.type.__name__} ({provided})")
    return problems


def dependency_order(wanted: Iterable[ServiceNode], all_services: Iterable[ServiceNode]) -> list[ServiceNode]:
    """``wanted`` and every service they name, transitively, each after the services it uses
    (the order to enable them in; disable in reverse). A cycle raises ``ServiceEnableError``."""
    services = list(all_services)
    order: list[ServiceNode] = []
    visiting: list[str] = []

    def visit(node: ServiceNode) -> None:
        if any(n is node for n in order):
            return
        if node.path in visiting:
            cycle = " -> ".join([*visiting[visiting.index(node.path):], node.path])
            raise ServiceEnableError(f"controller services use each other in a circle: {cycle}")
        visiting.append(node.path)
        visible = visible_services(services, node.group)
        implied = node.type.implied_references(node.property_values, visible)[0]
        for reference in [*references(node.type, node.property_values).values(), *implied]:
            if reference in visible:
                visit(visible[reference])
        visiting.pop()
        order.append(node)

    for node in wanted:
        visit(node)
    return order


def resolve_service_type(type_name: Any) -> type[ControllerService]:
    """The ControllerService class named ``package.module.Class``; a standard service may be named
    alone (``JsonTreeReader``: looked up in ``flowactors.services``, by name at run time)."""
    found: type[ControllerService] = resolve_component(type_name, ControllerService, "flowactors.services",
                                                       "controller service")
    return found


def flow_problems(services: Mapping[str, ServiceNode], processors: Iterable[tuple[str, type[Component], Mapping[str, str]]]
                  ) -> list[str]:
    """Every problem with a flow's services and the references to them: each service's own
    properties, and each reference (of a service or of a processor, given as (name, type,
    values)) to a service out of reach or of the wrong kind; one sentence each."""
    problems = []
    nodes = list(services.values())
    for node in nodes:
        label = f"controller service '{node.path}'"
        problems.extend(f"{label}: {p}" for p in node.type.validate_properties(node.property_values))
        visible = visible_services(nodes, node.group)
        problems.extend(f"{label}: {p}" for p in reference_problems(node.type, node.property_values, visible))
        problems.extend(f"{label}: {p}" for p in node.type.implied_references(node.property_values, visible)[1])
    for name, component, values in processors:
        problems.extend(f"processor '{name}': {p}"
                        for p in reference_problems(component, values, visible_services(nodes, group_of(name))))
    try:
        dependency_order(nodes, nodes)
    except ServiceEnableError as err:
        problems.append(str(err))
    return problems
