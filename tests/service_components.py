"""Controller services and processors for the tests of the service component kind
(tests/test_services.py): a key-value lookup, a service that refuses to enable, and a processor
that looks each FlowFile's key up. Every lifecycle call is written to the file their 'Journal'
property names, so a test sees the order on any engine (Ray's processes too)."""

from __future__ import annotations

import os
import threading

from flowactors.sdk.processor import Processor, PropertyDescriptor, Relationship
from flowactors.sdk.services import (ControllerService, LookupService, ServiceAPI, SSLContextService,
                                     StringLookupService)


JOURNAL = PropertyDescriptor("Journal", "A file each lifecycle call is written to")


def note(context, event: str) -> None:
    path = context.property("Journal").raw
    if path:
        with open(path, "a") as out:
            out.write(event + "\n")


class KeyValues(ControllerService, StringLookupService):
    """Each dynamic property a key and its value; 'Fallback' names another lookup asked for a
    key it lacks."""

    dynamic_properties = True
    properties = (PropertyDescriptor("Fallback", service=LookupService), JOURNAL)

    def on_enabled(self, context):
        self.values = dict(context.dynamic_properties)
        self.fallback = context.service("Fallback") if context.property("Fallback").is_set else None
        note(context, f"enabled {context.name}")

    def on_disabled(self, context):
        note(context, f"disabled {context.name}")

    def lookup(self, coordinates):
        key = coordinates["key"]
        if key in self.values:
            return self.values[key]
        return self.fallback.lookup(coordinates) if self.fallback is not None else None


class Refuses(ControllerService, LookupService):
    def on_enabled(self, context):
        raise OSError("the lookup file /nowhere/keys.csv cannot be read")


class NotALookup(ControllerService, SSLContextService):
    pass


class LookUp(Processor):
    """Puts the value the 'Lookup' service has for the 'key' attribute into 'value'."""

    properties = (PropertyDescriptor("Lookup", required=True, service=LookupService), JOURNAL)
    relationships = (Relationship("success"),)

    def on_scheduled(self, context):
        self.service = context.service("Lookup", LookupService)
        note(context, f"scheduled {context.name}")

    def on_stopped(self, context):
        note(context, f"stopped {context.name}")

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            value = self.service.lookup({"key": flowfile.attributes.get("key", "")})
            session.transfer(session.put_attribute(flowfile, "value", str(value)), "success")


class NumberSource(ServiceAPI):
    """Gives numbers, each once."""

    api = True

    def take(self, count: int) -> list[int]:
        raise NotImplementedError


class Sequence(ControllerService, NumberSource):
    """Numbers from 1, each given once across every process: state the flow's processors share."""

    shared_state = True
    properties = (JOURNAL,)

    def on_enabled(self, context):
        self.next = 1
        self.lock = threading.Lock()
        note(context, f"enabled {context.name} in {os.getpid()}")

    def on_disabled(self, context):
        note(context, f"disabled {context.name}")

    def take(self, count):
        with self.lock:
            first, self.next = self.next, self.next + count
        return list(range(first, first + count))


class Number(Processor):
    """Puts a number from the 'Numbers' service on each FlowFile ('number')."""

    properties = (PropertyDescriptor("Numbers", required=True, service=NumberSource),)
    relationships = (Relationship("success"),)

    def on_trigger(self, context, session):
        flowfiles = session.get_batch()
        numbers = context.service("Numbers", NumberSource).take(len(flowfiles))
        for flowfile, number in zip(flowfiles, numbers):
            session.transfer(session.put_attribute(flowfile, "number", str(number)), "success")
