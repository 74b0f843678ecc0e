"""The distributed map cache as processors reach it (NiFi's ``DistributedMapCacheClient`` and
``AtomicDistributedMapCacheClient``): a service API a processor names in a property
(``PropertyDescriptor("Distributed Cache Service", service=AtomicDistributedMapCacheClient)``) and
reaches with ``context.service(...)``; ``flowactors.services.map_cache`` provides it.

Keys are text (NiFi's processors serialize theirs as UTF-8); values are bytes, serialized by the
caller as it likes. A method that cannot reach the cache, or that the cache refuses (a value over
its Maximum Read Size), raises ``MapCacheError`` with a sentence saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowactors.sdk.services import ServiceAPI


class MapCacheError(Exception):
    """The cache could not do what was asked; the message says why, in one line."""


@dataclass(frozen=True)
class CacheEntry:
    """A value with its revision (NiFi's ``AtomicCacheEntry``): ``fetch`` gives one, and ``replace``
    stores a new value only while the key's revision is still ``revision``."""

    key: str
    value: bytes
    #: the entry's revision: 0 when first put, one more at each later put or replace
    revision: int | None = None


class DistributedMapCacheClient(ServiceAPI):
    """A map cache that every processor of the flow shares (NiFi's ``DistributedMapCacheClient``)."""

    api = True

    def put_if_absent(self, key: str, value: bytes) -> bool:
        """Store ``value`` unless ``key`` has one; whether it stored it."""
        raise NotImplementedError

    def get_and_put_if_absent(self, key: str, value: bytes) -> bytes | None:
        """The value of ``key``; when it has none, None, and ``value`` is stored."""
        raise NotImplementedError

    def contains_key(self, key: str) -> bool:
        raise NotImplementedError

    def put(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing any value it had."""
        raise NotImplementedError

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None."""
        raise NotImplementedError

    def remove(self, key: str) -> bool:
        """Remove ``key``; whether it was there."""
        raise NotImplementedError

    def remove_by_pattern(self, regex: str) -> int:
        """Remove every key the regular expression matches whole; how many were removed."""
        raise NotImplementedError

    def keys(self) -> set[str]:
        raise NotImplementedError


class AtomicDistributedMapCacheClient(DistributedMapCacheClient):
    """A map cache with compare-and-set (NiFi's ``AtomicDistributedMapCacheClient``)."""

    api = True

    def fetch(self, key: str) -> CacheEntry | None:
        """The value of ``key`` with its revision, or None."""
        raise NotImplementedError

    def replace(self, entry: CacheEntry) -> bool:
        """Store ``entry.value`` if the key's revision is still ``entry.revision`` (an entry whose
        revision is None: if the key has no value); whether it stored it."""
        raise NotImplementedError
