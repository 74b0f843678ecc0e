"""ScriptedLookupService: a lookup service a Python script defines (NiFi's).

The script (Script File or Script Body, Script Engine ``python``, Module Directory: the scripted
processors' properties, ``flowactors.sdk.script_api.script``) runs when the service is
enabled and assigns ``lookupService``: an object with ``lookup(coordinates)`` (the value, or None
when there is none; a ``java.util.Optional`` from the shim is unwrapped) and, optionally,
``getRequiredKeys()`` (default: none required), ``setLogger(log)``, ``initialize(context)``,
``onEnabled(context)`` and ``onDisabled(context)``, each called when present as NiFi does. Its
dynamic properties are the script's to read through ``context.getProperty(name)``. A script that
does not load, or assigns no ``lookupService``, keeps the service from enabling, with one line
saying why; a lookup that raises fails as a ``LookupFailureError`` (the FlowFile goes to failure).
Scripts run in the executor's process with the flow's rights, as in NiFi.
"""

from __future__ import annotations

from typing import Any, Mapping

from flowactors.sdk.script_api.java import Optional
from flowactors.sdk.script_api.script import NIFI_PROPERTY_NAMES, SCRIPT_PROPERTIES, ScriptError, script_from, \
    script_problems
from flowactors.sdk.script_api.session import ComponentLog, ScriptContext
from flowactors.sdk.services import ControllerService, LookupService, ServiceContext, ServiceEnableError
from flowactors.services.lookup import LookupFailureError


class ScriptedLookupService(ControllerService, LookupService):
    """Looks values up with a Python script's ``lookupService`` (see the module docstring)."""

    description = "Looks values up with a lookup service a Python script defines"
    properties = SCRIPT_PROPERTIES
    dynamic_properties = True
    NIFI_PROPERTY_NAMES = NIFI_PROPERTY_NAMES
    NIFI_VALUES: dict[str, dict[str, str]] = {}

    def __init__(self) -> None:
        self._script = None
        self._service: Any = None
        self._context: ScriptContext | None = None

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return script_problems(values)

    def on_enabled(self, context: ServiceContext) -> None:
        try:
            script = script_from(context.values)
            logger = ComponentLog(context.name)
            service = script.run({"log": logger}).get("lookupService")
            if service is None:
                raise ScriptError(f"the script ({script.name}) assigns no 'lookupService' "
                                  f"(e.g. lookupService = MyLookupService())")
            self._context = ScriptContext(context)
            for method, argument in (("setLogger", logger), ("initialize", self._context),
                                     ("onEnabled", self._context)):
                if hasattr(service, method):
                    script.call(getattr(service, method), argument)
        except ScriptError as err:
            raise ServiceEnableError(f"{context.name}: {err}") from None
        self._script, self._service = script, service

    def on_disabled(self, context: ServiceContext) -> None:
        if self._service is not None and hasattr(self._service, "onDisabled"):
            self._script.call(self._service.onDisabled, self._context)
        self._script = self._service = None

    def required_keys(self) -> set[str]:
        if not hasattr(self._service, "getRequiredKeys"):
            return set()
        return {str(key) for key in self._script.call(self._service.getRequiredKeys) or ()}

    def lookup(self, coordinates: Mapping[str, Any]) -> Any:
        try:
            found = self._script.call(self._service.lookup, dict(coordinates))
        except ScriptError as err:
            raise LookupFailureError(str(err)) from None
        return found.orElse(None) if isinstance(found, Optional) else found
