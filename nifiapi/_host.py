"""The seam between this package and the runtime that drives processors.

Where NiFi hands ``ProcessContext(java_context)``, ``StateManager(java_state_manager)`` and
``StateMap(java_statemap)`` Java objects, a runtime hands objects of the classes below. They are
written as abstract classes so that what a runtime must supply is in one place; flowactors'
implementations are in ``flowactors.nifi.host``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


class Host:
    """What ``nifiapi.properties.ProcessContext`` / ``ValidationContext`` read (NiFi: the Java context)."""

    def getName(self) -> str | None:
        """The processor's name in the flow."""
        raise NotImplementedError

    def getPropertyDescriptors(self) -> Sequence[Any]:
        """Every ``PropertyDescriptor`` of the processor: its own and those of the dynamic
        properties it was configured with, in the processor's order."""
        raise NotImplementedError

    def getConfiguredValues(self) -> Mapping[str, str]:
        """The configured value of each property, by name (no defaults applied)."""
        raise NotImplementedError

    def isExpressionLanguagePresent(self, value: str) -> bool:
        """Whether ``value`` holds an expression (``${...}``) to evaluate."""
        raise NotImplementedError

    def evaluateExpressions(self, value: str, attributeMap: Any, flowfileScope: bool) -> str:
        """``value`` with its expressions evaluated. ``attributeMap``: None, a mapping, or an object
        with ``getAttributes()`` (a FlowFile, an attribute map); ``flowfileScope``: whether the
        property may read FlowFile attributes (else only the environment)."""
        raise NotImplementedError

    def yieldResources(self) -> None:
        """Ask not to be triggered again for the processor's yield duration."""
        raise NotImplementedError

    def getStateManager(self) -> "HostStateManager":
        raise NotImplementedError

    def getControllerService(self, reference: str) -> Any:
        """The enabled controller service a property's value names, as a processor calls it
        (NiFi: a py4j proxy of the Java service)."""
        raise NotImplementedError


class HostStateMap:
    """A stored state as read (NiFi: Java ``StateMap``)."""

    def getStateVersion(self) -> str | None:
        """The version the state was read at, or None when nothing was ever stored."""
        raise NotImplementedError

    def get(self, key: str) -> str | None:
        raise NotImplementedError

    def toMap(self) -> dict[str, str]:
        raise NotImplementedError


class HostStateManager:
    """The processor's state (NiFi: Java ``StateManager``); ``scope`` is ``nifiapi.componentstate.Scope``."""

    def getState(self, scope: Any) -> HostStateMap:
        raise NotImplementedError

    def setState(self, state: Mapping[str, str], scope: Any) -> None:
        raise NotImplementedError

    def replace(self, oldValue: HostStateMap, newValue: Mapping[str, str], scope: Any) -> bool:
        """Store ``newValue`` only if the state is still as ``oldValue`` was read; whether it was."""
        raise NotImplementedError

    def clear(self, scope: Any) -> None:
        raise NotImplementedError
