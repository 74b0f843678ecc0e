"""DetectDuplicate: routes a FlowFile by whether its Cache Entry Identifier is already in the
flow's distributed map cache (NiFi's ``DetectDuplicate``; docs/map-cache.md)."""

from __future__ import annotations

import logging
import struct
import time
from typing import Callable

from flowactors.sdk.map_cache import DistributedMapCacheClient, MapCacheError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators

log = logging.getLogger(__name__)

DUPLICATE = Relationship("duplicate", "FlowFiles whose Cache Entry Identifier the cache has")
NON_DUPLICATE = Relationship("non-duplicate", "FlowFiles whose Cache Entry Identifier the cache did not have")
FAILURE = Relationship("failure", "FlowFiles with no Cache Entry Identifier, or met while the cache failed "
                                  "(penalized)")
ORIGINAL_DESCRIPTION = "original.flowfile.description"
#: a cached value: the entry time (ms since the epoch, 8 bytes, big-endian) then the description
#: in UTF-8, as NiFi's DetectDuplicate stores it (so either reads the other's entries)
_TIME = struct.Struct(">q")


def cache_value(entered_ms: int, description: str) -> bytes:
    return _TIME.pack(entered_ms) + description.encode()


def read_cache_value(value: bytes) -> tuple[int, str]:
    """(entry time in ms, description) of a cached value; a value shorter than its time reads as
    entered at 0 with its bytes as the description."""
    if len(value) < _TIME.size:
        return 0, value.decode(errors="replace")
    return _TIME.unpack_from(value)[0], value[_TIME.size:].decode(errors="replace")


class DetectDuplicate(Processor):
    """Caches each FlowFile's Cache Entry Identifier (with its FlowFile Description and the time)
    and routes it to non-duplicate when the cache did not have it, to duplicate (with the first
    FlowFile's description in ``original.flowfile.description``) when it did. An entry older than
    Age Off Duration counts as absent and is replaced. Cache The Entry Identifier = false only
    looks, leaving the caching to another processor.

    Provenance: a ROUTE event per FlowFile (to duplicate with the details
    'Duplicate of: original.flowfile.description', the attribute's name, as NiFi writes them); the
    session's ATTRIBUTES_MODIFIED for the description attribute.
    """

    description = "Routes FlowFiles by whether their identifier is already in a distributed map cache"
    NIFI_TYPE = "org.apache.nifi.processors.standard.DetectDuplicate"
    properties = (
        PropertyDescriptor("Cache Entry Identifier", "The value identifying duplicates: it is what is cached",
                           required=True, default="${hash.value}", expression_language=True),
        PropertyDescriptor("FlowFile Description", "Cached with the identifier; a later duplicate gets it in "
                           f"'{ORIGINAL_DESCRIPTION}'", required=True, default="", expression_language=True),
        PropertyDescriptor("Age Off Duration", "How long a cached identifier counts (none: for ever)",
                           validator=validators.DURATION),
        PropertyDescriptor("Distributed Cache Service", "The map cache client holding the identifiers", required=True,
                           service=DistributedMapCacheClient),
        PropertyDescriptor("Cache The Entry Identifier", "false: only look for duplicates, cache nothing",
                           default="true", allowable_values=("true", "false")),
    )
    relationships = (DUPLICATE, NON_DUPLICATE, FAILURE)

    #: the clock the entry times are read from (seconds since the epoch); tests replace it
    clock: Callable[[], float] = staticmethod(time.time)

    def on_trigger(self, context: ProcessContext, session) -> None:
        cache = context.service("Distributed Cache Service", DistributedMapCacheClient)
        age_off = context.property("Age Off Duration").as_duration()
        caching = context.property("Cache The Entry Identifier").as_bool()
        for flowfile in session.get_batch():
            key = context.property("Cache Entry Identifier").evaluate(flowfile) or ""
            if not key.strip():
                log.error("%s: FlowFile %s has no Cache Entry Identifier (it evaluates to nothing)", context.name,
                          flowfile.uuid)
                session.transfer(session.penalize(flowfile), FAILURE)
                continue
            now = int(self.clock() * 1000)
            value = cache_value(now, context.property("FlowFile Description").evaluate(flowfile) or "")
            try:
                original = self._original(cache, key, value, caching, now, age_off)
            except MapCacheError as err:
                log.error("%s: cannot use the map cache for %s: %s", context.name, flowfile.uuid, err)
                session.transfer(session.penalize(flowfile), FAILURE)
                continue
            if original is None:
                session.provenance.route(flowfile, NON_DUPLICATE.name)
                session.transfer(flowfile, NON_DUPLICATE)
                continue
            flowfile = session.put_attribute(flowfile, ORIGINAL_DESCRIPTION, original)
            session.provenance.route(flowfile, DUPLICATE.name, f"Duplicate of: {ORIGINAL_DESCRIPTION}")
            session.transfer(flowfile, DUPLICATE)

    @staticmethod
    def _original(cache: DistributedMapCacheClient, key: str, value: bytes, caching: bool, now: int,
                  age_off: float | None) -> str | None:
        """The description of the FlowFile first cached under ``key``, or None when this one is
        not a duplicate (caching it when ``caching``)."""
        found = cache.get_and_put_if_absent(key, value) if caching else cache.get(key)
        if found is None:
            return None
        entered, description = read_cache_value(found)
        if age_off is not None and now >= entered + age_off * 1000:
            cache.remove(key)
            duplicate = not cache.put_if_absent(key, value) if caching else cache.contains_key(key)
            if not duplicate:
                return None
        return description
