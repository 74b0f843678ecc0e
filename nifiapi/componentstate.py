"""A processor's state: a map of strings kept across triggers and restarts (NiFi 2.1+)."""

from __future__ import annotations

from enum import Enum


class Scope(Enum):
    """``LOCAL``: this node's; ``CLUSTER``: shared by the nodes of a cluster."""

    CLUSTER = 1
    LOCAL = 2


#: the scopes under NiFi's names for the Java constants
CLUSTER_SCOPE = Scope.CLUSTER
LOCAL_SCOPE = Scope.LOCAL


def convert_pyscope_to_jscope(scope):
    """NiFi maps a Python scope to a Java one; anything but LOCAL counts as CLUSTER."""
    return Scope.LOCAL if scope == Scope.LOCAL else Scope.CLUSTER


def convert_pydict_to_jmap(dictionary):
    return dict(dictionary)


class StateException(Exception):
    """Reading or writing the state failed."""


class StateManager:
    """Reads and writes the processor's state; every failure is a ``StateException`` whose
    message is NiFi's ("Set state failed", "Get state failed", ...), the reason its ``__cause__``."""

    _java_state_manager = None

    def __init__(self, java_state_manager):
        self._java_state_manager = java_state_manager

    def setState(self, state, scope):
        """Replace the whole state with ``state`` (a dict of strings)."""
        self._call("Set state", "setState", convert_pydict_to_jmap(state), convert_pyscope_to_jscope(scope))

    def getState(self, scope):
        """The state as a ``StateMap``."""
        return StateMap(self._call("Get state", "getState", convert_pyscope_to_jscope(scope)))

    def replace(self, oldValue, newValue, scope):
        """Replace the state with ``newValue`` if it is still what ``oldValue`` was read as.
        NiFi returns None; here the outcome (True when replaced) is returned."""
        return self._call("Replace state", "replace", oldValue.get_java_statemap(), convert_pydict_to_jmap(newValue),
                          convert_pyscope_to_jscope(scope))

    def clear(self, scope):
        self._call("Clear state", "clear", convert_pyscope_to_jscope(scope))

    def _call(self, what, method, *args):
        try:
            return getattr(self._java_state_manager, method)(*args)
        except StateException:
            raise
        except Exception as exception:
            raise StateException(f"{what} failed") from exception   # NiFi's message; the reason is its cause


class StateMap:
    """The state as it was read."""

    _java_statemap = None
    _state_version = None

    def __init__(self, java_statemap):
        self._java_statemap = java_statemap
        self._state_version = java_statemap.getStateVersion()

    def getStateVersion(self):
        """The version the state was read at (a string, as NiFi 2's), or None if none was stored."""
        return self._state_version

    def get(self, key):
        return self._java_statemap.get(key)

    def toMap(self):
        return dict(self._java_statemap.toMap())

    def get_java_statemap(self):
        return self._java_statemap
