"""NiFi's distributed map cache: the server (``DistributedMapCacheServer``, NiFi 2's
``MapCacheServer``) and its client (``DistributedMapCacheClientService``, NiFi 2's
``MapCacheClientService``), which DetectDuplicate, Wait and Notify use (docs/map-cache.md).

The server is a service with state to share (``shared_state``): the engine hosts one instance of
it for the flow (an actor on Ray, an object in process) whose entries are a ``MapCacheStore``. A
client is an instance in each process that uses it; it reaches the flow's server whose Port is
its Server Port (``implied_references``: the engine enables that server before the client, and a
port no server of the flow has makes the flow invalid), and each of its methods is one call to
that server. Nothing goes over a network socket: Port and Server Port only pair a client with its
server, and an SSL Context Service is refused.
"""

from __future__ import annotations

from typing import Any, Mapping

from flowactors.sdk.map_cache import AtomicDistributedMapCacheClient, CacheEntry, MapCacheError
from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.relationships import reason
from flowactors.sdk.services import ControllerService, ServiceAPI, ServiceContext, ServiceNode
from flowactors.sdk.units import parse_data_size
from flowactors.services.map_cache_store import EVICTION_STRATEGIES, LFU, MapCacheStore

DEFAULT_PORT = "4557"
_NO_SSL = ("is not supported: a client reaches its server through the engine, never over a network socket; "
           "leave it empty")


def port_number(value: str) -> int | None:
    """``value`` as a port number (1 to 65535), or None when it is not one."""
    text = value.strip()
    number = int(text) if text.isascii() and text.isdigit() else 0   # '²' is a digit to isdigit, not to int
    return number if 1 <= number <= 65535 else None


def _port(value: str) -> str | None:
    return None if port_number(value) is not None else "must be a port number from 1 to 65535"


def _refuse_ssl(values: Mapping[str, str]) -> list[str]:
    return [f"property 'SSL Context Service' {_NO_SSL}"] if values.get("SSL Context Service") else []


class MapCacheServerAPI(ServiceAPI):
    """What a client asks of the server it found: its port, then NiFi's map cache operations
    (``MapCacheStore``'s, which the server forwards)."""

    api = True

    def port(self) -> int:
        raise NotImplementedError


_OPERATIONS = ("put_if_absent", "get_and_put_if_absent", "contains_key", "put", "get", "fetch", "replace", "remove",
               "remove_by_pattern", "keys")


class DistributedMapCacheServer(ControllerService, MapCacheServerAPI):
    """The flow's map cache: entries in memory, at most Maximum Cache Entries of them (evicted by
    the Eviction Strategy), kept in the Persistence Directory when one is given."""

    description = "Holds the map cache that the flow's DistributedMapCacheClientServices with its Port use."
    shared_state = True
    properties = (
        PropertyDescriptor("Port", "Pairs this server with the clients whose Server Port is the same", required=True,
                           default=DEFAULT_PORT, validator=_port),
        PropertyDescriptor("Maximum Cache Entries", required=True, default="10000",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Eviction Strategy", required=True, default=LFU, allowable_values=EVICTION_STRATEGIES),
        PropertyDescriptor("Persistence Directory", "A folder keeping the entries across restarts (created if "
                           "missing); none: in memory only"),
        PropertyDescriptor("SSL Context Service", f"Refused: it {_NO_SSL}"),
        PropertyDescriptor("Maximum Read Size", "The largest key or value the cache takes", default="1 MB",
                           validator=validators.DATA_SIZE),
    )
    NIFI_PROPERTY_NAMES = {"maximum-read-size": "Maximum Read Size"}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return _refuse_ssl(values)

    def on_enabled(self, context: ServiceContext) -> None:
        self._port = int(context.property("Port").raw or DEFAULT_PORT)
        self.store = MapCacheStore(context.property("Maximum Cache Entries").as_int() or 10000,
                                   context.property("Eviction Strategy").raw or LFU,
                                   context.property("Maximum Read Size").as_data_size() or parse_data_size("1 MB"),
                                   context.property("Persistence Directory").raw or None)

    def on_disabled(self, context: ServiceContext) -> None:
        self.store.close()

    def port(self) -> int:
        return self._port

    def call(self, operation: str, *args: Any) -> Any:
        """One of NiFi's map cache operations (``MapCacheStore``'s methods of ``_OPERATIONS``)."""
        if operation not in _OPERATIONS:
            raise MapCacheError(f"the map cache server has no operation '{operation}'")
        return getattr(self.store, operation)(*args)


class DistributedMapCacheClientService(ControllerService, AtomicDistributedMapCacheClient):
    """The flow's map cache as processors use it: each method one call to the server whose Port is
    this client's Server Port."""

    description = "Reaches the flow's DistributedMapCacheServer whose Port is this client's Server Port."
    properties = (
        PropertyDescriptor("Server Hostname", "Accepted for NiFi's sake: the flow's own server is used",
                           required=True, validator=validators.NON_EMPTY),
        PropertyDescriptor("Server Port", "The Port of the flow's DistributedMapCacheServer to use", required=True,
                           default=DEFAULT_PORT, validator=_port),
        PropertyDescriptor("SSL Context Service", f"Refused: it {_NO_SSL}"),
        PropertyDescriptor("Communications Timeout", "Accepted for NiFi's sake (calls wait for the engine)",
                           required=True, default="30 secs", validator=validators.DURATION),
    )

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return _refuse_ssl(values)

    @classmethod
    def implied_references(cls, values: Mapping[str, str], visible: Mapping[str, ServiceNode]
                           ) -> tuple[list[str], list[str]]:
        """The server in reach whose Port is this client's Server Port; a problem when there is
        none, or more than one."""
        wanted = port_number(values.get("Server Port", DEFAULT_PORT))
        if wanted is None:
            return [], []   # the property's own validation says so
        servers = {node.path: node for node in visible.values() if issubclass(node.type, MapCacheServerAPI)}
        ports = {path: node.property_values.get("Port", DEFAULT_PORT).strip() for path, node in servers.items()}
        matching = sorted(path for path, port in ports.items() if port_number(port) == wanted)
        if len(matching) == 1:
            return matching, []
        if matching:
            return [], [f"property 'Server Port' is {wanted}, which several map cache servers of the flow listen on "
                        f"({', '.join(matching)}); give each server a port of its own"]
        listening = ", ".join(f"'{path}' on {port}" for path, port in sorted(ports.items())) or "none"
        return [], [f"property 'Server Port' is {wanted}, but no DistributedMapCacheServer of the flow in reach "
                    f"listens on port {wanted} (its servers: {listening})"]

    def on_enabled(self, context: ServiceContext) -> None:
        self._port = int(context.property("Server Port").raw or DEFAULT_PORT)
        servers = {id(s): s for s in context.services.values() if isinstance(s, MapCacheServerAPI)}
        found = [server for server in servers.values() if server.port() == self._port]
        if not found:
            raise MapCacheError(f"no DistributedMapCacheServer of the flow listens on port {self._port}")
        self._server = found[0]

    def _call(self, operation: str, *args: Any) -> Any:
        try:
            return self._server.call(operation, *args)
        except MapCacheError:
            raise
        except Exception as err:   # the server's process gone, a transport failure
            raise MapCacheError(f"the map cache server on port {self._port} could not be reached: "
                                f"{reason(err)}") from err

    def put_if_absent(self, key: str, value: bytes) -> bool:
        return bool(self._call("put_if_absent", key, value))

    def get_and_put_if_absent(self, key: str, value: bytes) -> bytes | None:
        return self._call("get_and_put_if_absent", key, value)

    def contains_key(self, key: str) -> bool:
        return bool(self._call("contains_key", key))

    def put(self, key: str, value: bytes) -> None:
        self._call("put", key, value)

    def get(self, key: str) -> bytes | None:
        return self._call("get", key)

    def remove(self, key: str) -> bool:
        return bool(self._call("remove", key))

    def remove_by_pattern(self, regex: str) -> int:
        return int(self._call("remove_by_pattern", regex))

    def keys(self) -> set[str]:
        return set(self._call("keys"))

    def fetch(self, key: str) -> CacheEntry | None:
        found = self._call("fetch", key)
        return None if found is None else CacheEntry(key, found[0], found[1])

    def replace(self, entry: CacheEntry) -> bool:
        return bool(self._call("replace", entry.key, entry.value, entry.revision))
