"""Cluster-scoped processor state: one map a component that every node of a flow shares (NiFi's
``Scope.CLUSTER``, which NiFi keeps in ZooKeeper).

One actor keeps it (``ClusterStateService``, named ``<flow>.cluster-state``, placed on the first
node of the topology and restarted there by Ray), in ``<repository>/cluster-state.json``
(docs/formats/cluster-state.md). Tasks on every node reach it through ``ClusterState``.

Guarantees: a change is on disk (a new file written, flushed and renamed over the old one, the
folder flushed) before the call returns, so an answered change survives any crash, and a file is
always whole. ``replace`` is a compare-and-set on the version the caller read: among tasks on
different nodes racing for the same version, exactly one wins. Versions only grow. Unlike local
state (``flowactors.sdk.state``), a change is not part of the session's commit, as NiFi's cluster
state is not: it takes effect at once and stays if the session rolls back.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping

import orjson
import ray
from ray.actor import ActorHandle

from flowactors.engine.errors import ClusterStateError
from repositories.model import StateMap

FORMAT = 1
FILE_NAME = "cluster-state.json"
#: seconds a task waits for the keeper before the call fails (its node may be away)
CALL_WAIT = 30.0


class ClusterStateService:
    """Keeps every component's cluster-scoped state in one file (see the module docstring)."""

    def __init__(self, root: str):
        self.path = Path(root) / FILE_NAME
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, Any]] = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except orjson.JSONDecodeError as err:
            raise ClusterStateError(f"{self.path} is damaged ({err}); restore it from a backup or remove it "
                                    f"to start every processor's cluster state over") from None
        if not isinstance(data, dict) or data.get("flowactors_cluster_state") != FORMAT:
            found = data.get("flowactors_cluster_state") if isinstance(data, dict) else None
            raise ClusterStateError(f"{self.path} is not cluster state of format {FORMAT} (found {found!r})")
        states = data.get("components")
        if not isinstance(states, dict) or not all(map(_well_formed, states.values())):
            raise ClusterStateError(f"{self.path} is damaged: 'components' must map each component to a version "
                                    f"(a whole number, 0 or more) and values (an object of strings); restore it "
                                    f"from a backup or remove it to start every processor's cluster state over")
        return states

    def _write(self) -> None:
        temporary = self.path.with_suffix(".tmp")
        data = orjson.dumps({"flowactors_cluster_state": FORMAT, "components": self._states},
                            option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    def get(self, component: str) -> tuple[int, dict[str, str]]:
        """``(version, values)``: version -1 and no values when nothing was ever stored."""
        with self._lock:
            state = self._states.get(component)
            return (-1, {}) if state is None else (state["version"], dict(state["values"]))

    def set(self, component: str, values: Mapping[str, str]) -> int:
        """Store ``values`` whatever is there; the new version."""
        with self._lock:
            return self._store(component, values)

    def replace(self, component: str, version: int, values: Mapping[str, str]) -> bool:
        """Store ``values`` if the state is still at ``version``; whether it did."""
        with self._lock:
            current = self._states.get(component, {"version": -1})["version"]
            if current != version:
                return False
            self._store(component, values)
            return True

    def _store(self, component: str, values: Mapping[str, str]) -> int:
        version = self._states.get(component, {"version": -1})["version"] + 1
        previous = self._states.get(component)
        self._states[component] = {"version": version, "values": {str(k): str(v) for k, v in values.items()}}
        try:
            self._write()
        except BaseException:
            if previous is None:   # not on disk: not stored
                del self._states[component]
            else:
                self._states[component] = previous
            raise
        return version


def _well_formed(state: Any) -> bool:
    """Whether a component's entry is as docs/formats/cluster-state.md says."""
    if not isinstance(state, dict):
        return False
    version, values = state.get("version"), state.get("values")
    return (type(version) is int and version >= 0 and isinstance(values, dict)
            and all(isinstance(v, str) for v in values.values()))


class ClusterState:
    """One component's cluster-scoped state, as a task sees it (``context.cluster_state``): the
    same calls as ``context.state``, answered by the flow's ``ClusterStateService`` actor."""

    def __init__(self, actor_name: str, component_id: str):
        self.actor_name = actor_name
        self.component_id = component_id
        self._handle: ActorHandle | None = None  # found at the first call

    def _call(self, method: str, *args: Any) -> Any:
        try:
            if self._handle is None:
                self._handle = ray.get_actor(self.actor_name)
            return ray.get(getattr(self._handle, method).remote(self.component_id, *args), timeout=CALL_WAIT)
        except (ValueError, ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            # no such actor yet, or its node is away (Ray starts it again there when the node is back)
            raise ClusterStateError(f"the cluster state keeper '{self.actor_name}' cannot be reached: "
                                    f"{type(err).__name__}") from None

    def get(self) -> StateMap:
        version, values = self._call("get")
        return StateMap(version, values)

    def set(self, values: Mapping[str, str]) -> None:
        self._call("set", dict(values))

    def replace(self, old: StateMap, values: Mapping[str, str]) -> bool:
        return self._call("replace", old.version, dict(values))

    def clear(self) -> None:
        self._call("set", {})
