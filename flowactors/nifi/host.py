"""flowactors' side of the ``nifiapi`` seam: what NiFi's Java context, state manager and logger
gave a Python processor (``nifiapi._host``), made from a flowactors processor's context.

* Expressions are evaluated by flowactors' expression language, fully: NiFi's shortcut for a
  value that starts with a single attribute reference (which drops the rest of the value) is
  not copied.
* ``Scope.LOCAL`` is the processor's state (``context.state``), committed with the trigger's
  session. ``Scope.CLUSTER`` is the same map when the flow runs on one node, as on a standalone
  NiFi; on several nodes it is the state every node shares (``context.cluster_state``, kept by
  the flow's cluster state actor), changed at once as NiFi's is (docs/nifi-python-processors.md).
* The logger takes NiFi's ``{}`` placeholders and Python's ``warning``/``exception`` too.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

from flowactors.sdk.expression import ExpressionError, compile_value
from flowactors.sdk.processor import find_service
from nifiapi.__jvm__ import Optional
from nifiapi._host import Host, HostStateManager, HostStateMap
from nifiapi.componentstate import Scope

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
_LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "WARNING": logging.WARNING, "ERROR": logging.ERROR}


class ComponentLog:
    """``self.logger`` of a NiFi Python processor: NiFi's ComponentLog over Python logging.

    ``msg`` may hold ``{}`` placeholders filled from ``args`` in order; an exception as the last
    argument is logged with its traceback. Messages name the processor.
    """

    def __init__(self, processor_name: str, identifier: str | None = None):
        self.name = processor_name
        self.identifier = identifier
        self._logger = logging.getLogger(f"flowactors.nifi.{processor_name}")

    def _log(self, level: int, msg: Any, args: tuple, exc_info: Any = None) -> None:
        if not self._logger.isEnabledFor(level):
            return
        args = list(args)
        if args and isinstance(args[-1], BaseException) and exc_info is None:
            exc_info = args.pop()
        text = str(msg)
        for arg in args:
            if "{}" not in text:
                break
            text = text.replace("{}", str(arg), 1)
        self._logger.log(level, "%s: %s", self.name, text, exc_info=exc_info)

    def trace(self, msg, *args):
        self._log(TRACE, msg, args)

    def debug(self, msg, *args):
        self._log(logging.DEBUG, msg, args)

    def info(self, msg, *args):
        self._log(logging.INFO, msg, args)

    def warn(self, msg, *args):
        self._log(logging.WARNING, msg, args)

    warning = warn

    def error(self, msg, *args):
        self._log(logging.ERROR, msg, args)

    def exception(self, msg, *args):
        self._log(logging.ERROR, msg, args, exc_info=True)

    def log(self, level, msg, *args):
        """``level``: a ``nifiapi.logging.LogLevel`` or its name."""
        self._log(_LEVELS.get(getattr(level, "name", str(level)).upper(), logging.INFO), msg, args)

    def isTraceEnabled(self):
        return self._logger.isEnabledFor(TRACE)

    def isDebugEnabled(self):
        return self._logger.isEnabledFor(logging.DEBUG)

    def isInfoEnabled(self):
        return self._logger.isEnabledFor(logging.INFO)

    def isWarnEnabled(self):
        return self._logger.isEnabledFor(logging.WARNING)

    def isErrorEnabled(self):
        return self._logger.isEnabledFor(logging.ERROR)

    def getName(self):
        return self._logger.name


# ---------------------------------------------------------------------------------- state
class ProcessorStateMap(HostStateMap):
    """A read of the processor's state (``repositories.model.StateMap``) as NiFi's StateMap."""

    def __init__(self, state_map):
        self.state_map = state_map

    def getStateVersion(self):
        return None if self.state_map.version < 0 else str(self.state_map.version)

    def get(self, key):
        return self.state_map.values.get(key)

    def toMap(self):
        return dict(self.state_map.values)


class ProcessorStateManager(HostStateManager):
    """NiFi's StateManager over the processor's state (``flowactors.sdk.state.ProcessorState``)."""

    def __init__(self, state, processor_name: str, cluster_state=None):
        self.state = state
        self.processor_name = processor_name
        self.cluster_state = cluster_state  # on several nodes only: one node's cluster scope is its local state

    def _state(self, scope):
        if scope == Scope.CLUSTER and self.cluster_state is not None:
            return self.cluster_state
        if self.state is None:
            raise RuntimeError(f"{self.processor_name} has no state here (state is kept only while it runs)")
        return self.state

    def getState(self, scope):
        return ProcessorStateMap(self._state(scope).get())

    def setState(self, state, scope):
        self._state(scope).set(dict(state))

    def replace(self, oldValue, newValue, scope):
        return self._state(scope).replace(oldValue.state_map, dict(newValue))

    def clear(self, scope):
        self._state(scope).clear()


# ---------------------------------------------------------------------------------- the context
def flowfile_of(attribute_map: Any):
    """The flowactors FlowFile behind an attribute map a processor passes for evaluation, if any
    (an input FlowFile, or an attribute map wrapping one, as RecordTransform's does)."""
    while attribute_map is not None:
        flowfile = getattr(attribute_map, "flowfile", None)
        if flowfile is not None:
            return flowfile
        attribute_map = getattr(attribute_map, "delegate", None)
    return None


def _attributes_of(attribute_map: Any) -> Mapping[str, str]:
    if attribute_map is None:
        return {}
    if isinstance(attribute_map, Mapping):
        return attribute_map
    return dict(attribute_map.getAttributes())


class FlowactorsHost(Host):
    """The context a NiFi Python processor's ``ProcessContext``/``ValidationContext`` reads.

    ``descriptors``: the processor's ``nifiapi`` descriptors (dynamic ones included); ``values``:
    the configured property values; ``state``: the processor's ``ProcessorState`` (None while
    validating); ``on_yield``: what ``yield_resources`` calls; ``services``: the enabled controller
    services the processor reaches (``ProcessContext.services``).
    """

    def __init__(self, name: str, descriptors: Sequence[Any], values: Mapping[str, str], *, state=None,
                 on_yield: Callable[[], None] | None = None, cluster_state=None,
                 services: Mapping[str, Any] | None = None):
        self.name = name
        self.services = dict(services or {})
        self.descriptors = list(descriptors)
        self.values = {k: v for k, v in values.items() if v is not None}
        self.state_manager = ProcessorStateManager(state, name, cluster_state)
        self.on_yield = on_yield

    def getName(self):
        return self.name

    def getPropertyDescriptors(self):
        return self.descriptors

    def getConfiguredValues(self):
        return self.values

    def isExpressionLanguagePresent(self, value):
        try:
            return not compile_value(value).is_literal
        except ExpressionError:
            return "${" in value

    def evaluateExpressions(self, value, attributeMap, flowfileScope):
        compiled = compile_value(value)
        if not flowfileScope:
            return compiled.evaluate({})  # the environment only
        flowfile = flowfile_of(attributeMap)
        if flowfile is not None:   # its own attributes, not a copy of them
            return compiled.evaluate(flowfile=flowfile)
        return compiled.evaluate(_attributes_of(attributeMap))

    def yieldResources(self):
        if self.on_yield is not None:
            self.on_yield()

    def getStateManager(self):
        return self.state_manager

    def getControllerService(self, reference):
        return JavaServiceView(find_service(self.services, reference, f"processor '{self.name}'", None))


class JavaServiceView:
    """A flowactors controller service as a NiFi Python processor calls it: with Java's types at
    the seam (a lookup takes a ``java.util.Map`` and answers a ``java.util.Optional``); any other
    method is the service's own."""

    def __init__(self, service: Any):
        self._service = service

    def lookup(self, coordinates, context=None):
        return Optional.ofNullable(self._service.lookup(dict(coordinates)))

    def getRequiredKeys(self):
        return set(self._service.required_keys())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)
