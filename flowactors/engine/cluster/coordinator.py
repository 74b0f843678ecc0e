"""The cluster's controller: one flow across several Ray nodes (seed 002).

Every node of the topology runs the whole flow under a ``FlowController`` of its own (an actor
placed by the node's resource, over ``<repository>/nodes/<name>`` on that node's disk, with its own
FlowFile repository, content and provenance). The ``ClusterController`` starts them, tells each
where the others take transfers (``FlowController.receivers``), and on every tick looks at the
cluster:

* a node whose Ray node is gone is *disconnected*: round-robin data waiting for it fails over,
  other strategies' data waits (``transfer``); if it was the primary, the next connected node of
  the topology becomes primary and starts the primary-node-only processors;
* a node that comes back: Ray starts its controller again (placed by the node's resource), which
  is found not started and started again: it recovers its queues from its own log, exactly as a
  flow on one node does after a restart, and the others learn its new receivers;
* its status is one status of the flow across the nodes, each processor and connection summed,
  with ``nodes`` breaking it down by node and ``waiting_for`` counting what waits for each node.

It runs where the driver runs (``run_flow(nodes=...)``), with the interface ``run_flow`` uses of a
controller (``start``, ``starting``, ``status``, ``is_idle``, ``stop``, ``note_restart``).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import ray

from flowactors.engine.cluster.topology import (RESOURCE_SHARE, ClusterNode, node_repository,
                                                ray_nodes, read_topology, resolve_nodes, write_topology)
from flowactors.engine.actors.ray_hosting import FlowControllerActor, RayHosting
from flowactors.engine.cluster.cluster_state import ClusterStateService
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, PROCESSOR_COUNTS, QUEUE_COUNTS, FlowController, cause_of
from flowactors.engine.errors import FlowStartError, TopologyError
from flowactors.engine.periodic import Periodic
from flowactors.engine.transport import P, R, ActorLink, Method, component_lost, finished, resolve
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import Settings

TICK = 0.5
#: seconds a node's controller may take to answer a status or news call before it counts as away
NODE_WAIT = 10.0
#: seconds to wait for a node controller's start (recovery of a large log takes a while)
START_WAIT = 600.0
_SUMMED = PROCESSOR_COUNTS + ("running", "task_seconds")
_QUEUE_SUMMED = QUEUE_COUNTS + ("in_memory", "swap_files")


class ClusterController:
    """See the module docstring. ``nodes``: ``"all"``, a count, or a list of node names
    (``flowactors.engine.cluster.topology.resolve_nodes``)."""

    def __init__(self, flow: Flow, repository: str, settings: Settings, nodes: Any = "all"):
        self.flow = flow
        self.root = repository
        self.settings = settings
        self.spec = nodes
        self.nodes: list[ClusterNode] = []
        self.controllers: dict[str, ActorLink] = {}
        self.connected: set[str] = set()
        self.primary: str | None = None
        self.started = False
        self.start_progress: list[dict] = []
        self.events: collections.deque[dict] = collections.deque(maxlen=50)  # node lost, back, primary moved
        self.restarts: collections.Counter = collections.Counter()
        self._statuses: dict[str, dict] = {}
        self._state_keeper = None  # the actor keeping cluster-scoped state (``cluster_state``)
        self._receivers: dict[str, dict] = {}
        self._restarting: set[str] = set()  # nodes whose flow is being started again (``_restart_node``)
        self._lock = threading.RLock()
        self._watch = Periodic("cluster-watch", TICK, self.look, self._look_failed, join=NODE_WAIT + 5)
        self.maintenance_errors: list[str] = []

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    # ------------------------------------------------------------------ start
    def start(self) -> dict:
        try:
            return self._start()
        except FlowStartError:
            self._end_controllers()
            raise
        except Exception as err:
            self._end_controllers()
            raise FlowStartError(f"flow '{self.flow.name}' could not start on the cluster: {cause_of(err)}") from None

    def _start(self) -> dict:
        try:
            self.nodes = resolve_nodes(self.spec, ray_nodes())
            previous = read_topology(self.root) or []
        except TopologyError as err:
            raise FlowStartError(str(err)) from None
        write_topology(self.root, self.flow.name, self.nodes)
        names = self.names
        self.primary = names[0]
        self.connected = set(names)
        self._state_keeper = self._cluster_state(self.nodes[0])
        partition_nodes = list(dict.fromkeys(names + [n.name for n in previous]))
        self._starting(f"nodes {', '.join(names)}", 0, len(names))
        for node in self.nodes:
            self.controllers[node.name] = self._controller(node, partition_nodes)
        pending = {name: link.call(FlowController.start) for name, link in self.controllers.items()}
        recovery: dict[str, dict] = {}
        for done, (name, call) in enumerate(pending.items(), 1):
            try:
                recovery[name] = resolve([call])[0]
            except Exception as err:
                raise FlowStartError(f"flow '{self.flow.name}' could not start on node {name}: {cause_of(err)}") from None
            self._starting("nodes started", done, len(names))
        self._spread_receivers()
        self.started = True
        self._watch.start()
        left = [n.name for n in previous if n.name not in names]
        joined = [n for n in names if previous and n not in {p.name for p in previous}]
        return {"nodes": names, "primary": self.primary, "left": left, "joined": joined,
                "restored": sum(r.get("restored", 0) for r in recovery.values()), "by_node": recovery}

    @property
    def state_keeper_name(self) -> str:
        return f"{self.flow.name}.cluster-state"

    def _cluster_state(self, node: ClusterNode):
        """The actor keeping cluster-scoped state, on ``node`` (restarted there by Ray if it dies)."""
        return ray.remote(ClusterStateService).options(
            name=self.state_keeper_name, resources={node.resource: RESOURCE_SHARE}, max_restarts=-1,
            max_concurrency=CONTROLLER_CONCURRENCY).remote(self.root)

    def _controller(self, node: ClusterNode, partition_nodes: list[str]) -> ActorLink:
        cluster = {"local": node.name, "nodes": self.names, "primary": self.primary,
                   "connected": sorted(self.connected), "partition_nodes": partition_nodes,
                   "cluster_state": self.state_keeper_name}
        name = f"{self.flow.name}.{node.name}.controller"
        handle = FlowControllerActor.options(
            name=name, resources={node.resource: RESOURCE_SHARE},
            max_concurrency=CONTROLLER_CONCURRENCY).remote(
            self.flow, node_repository(self.root, node.name), self.settings, RayHosting(node.resource), cluster)
        return ActorLink(handle, name)

    def _starting(self, step: str, done: int, total: int) -> None:
        self.start_progress.append({"step": step, "done": done, "total": total})

    def starting(self, since: int = 0) -> list[dict]:
        return self.start_progress[since:]

    def _spread_receivers(self) -> None:
        """Ask each connected node where it takes transfers; tell every node about all of them,
        with the cluster as it is now."""
        with self._lock:
            for name in sorted(self.connected):
                try:
                    self._receivers[name] = self._ask(name, FlowController.receivers)
                except Exception as err:
                    self._note(f"node {name} did not say where it takes transfers: {cause_of(err)}")
            self._tell_all()

    def _tell_all(self) -> None:
        for name in sorted(self.connected):
            if name not in self._restarting:
                try:
                    self._ask(name, FlowController.set_cluster, self.names, sorted(self.connected), self.primary, self._receivers)
                except Exception as err:
                    self._note(f"node {name} did not take the cluster's news: {cause_of(err)}")

    def _ask(self, name: str, method: Method[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        call = self.controllers[name].call(method, *args, **kwargs)
        if not finished(call, NODE_WAIT):
            raise TimeoutError(f"node {name}'s controller did not answer '{method.__name__}' within {NODE_WAIT:g} s")
        return resolve([call])[0]

    def _note(self, what: str) -> None:
        self.maintenance_errors = (self.maintenance_errors + [what])[-10:]

    # ------------------------------------------------------------------ watching the cluster
    def _look_failed(self, err: Exception) -> None:
        """Tried again next tick."""
        self._note(f"watching the cluster: {type(err).__name__}: {err}")

    def look(self) -> None:
        """One look at the cluster (see the module docstring). Ray says which nodes are alive; a
        node's controller that is slow to answer (a busy machine) keeps the state it had, so a
        busy node is not taken for a lost one (and the primary does not move for it)."""
        alive = {name for name, (_node, up) in ray_nodes().items() if up}
        with self._lock:
            connected = set()
            for name in self.names:
                if name not in alive or name in self._restarting:
                    continue
                running = self._controller_running(name)
                if running or (running is None and name in self.connected):
                    connected.add(name)
            primary = self.primary if self.primary in connected else next((n for n in self.names if n in connected),
                                                                            self.primary)
            if connected == self.connected and primary == self.primary:
                return
            for name in sorted(self.connected - connected):
                self.events.append({"at": time.time(), "event": f"node {name} lost"})
            for name in sorted(connected - self.connected):
                self.events.append({"at": time.time(), "event": f"node {name} connected"})
            if primary != self.primary:
                self.events.append({"at": time.time(), "event": f"primary node is now {primary}"})
            back = connected - self.connected
            self.connected, self.primary = connected, primary
            if back:
                self._spread_receivers()
            else:
                self._tell_all()

    def _controller_running(self, name: str) -> bool | None:
        """Whether a node's controller runs the flow: False when its actor is gone or was started
        again by Ray (its node came back: the flow is started there in the background, and the
        node counts as away until then), None when it did not answer in time."""
        try:
            status = self._ask(name, FlowController.starting, 0)
        except TimeoutError:
            return None
        except Exception as err:
            if not component_lost(err):
                raise
            return False
        if status and status[-1]["step"] == "running":
            return True
        if not status and name not in self._restarting:
            self._restarting.add(name)
            threading.Thread(target=self._restart_node, args=(name,), name=f"restart-{name}", daemon=True).start()
        return False

    def _restart_node(self, name: str) -> None:
        """A node's controller was started again by Ray: start the flow there (recovery from
        its own log), with the cluster as it is now."""
        try:
            self._ask(name, FlowController.set_cluster, self.names, sorted(self.connected), self.primary, self._receivers)
            resolve([self.controllers[name].call(FlowController.start)])
            self.restarts["node"] += 1
            self.events.append({"at": time.time(), "event": f"node {name} recovered its flow"})
        except Exception as err:
            self._note(f"starting the flow again on node {name}: {cause_of(err)}")
        finally:
            with self._lock:
                self._restarting.discard(name)

    # ------------------------------------------------------------------ status
    def status(self) -> dict:
        """The flow's status across the nodes (see the module docstring)."""
        if not self.started:
            return {"flow": self.flow.name, "processors": [], "queues": [], "started": False}
        pending = {name: self.controllers[name].call(FlowController.status) for name in self.names}
        deadline = time.monotonic() + NODE_WAIT
        fresh: set[str] = set()
        for name, call in pending.items():
            try:
                if finished(call, max(0.0, deadline - time.monotonic())):
                    self._statuses[name] = resolve([call])[0]
                    fresh.add(name)
            except Exception as err:
                if not component_lost(err):
                    raise
        merged = merge_statuses(self.flow, {n: self._statuses[n] for n in self.names if n in self._statuses})
        away = [n for n in self.names if n not in fresh or n not in self.connected]
        nodes = {n: {"connected": n in self.connected and n in fresh, "primary": n == self.primary,
                     **node_summary(self._statuses.get(n))} for n in self.names}
        status = {**merged, "started": True, "nodes": nodes, "primary": self.primary,
                  "cluster_events": list(self.events), "restarts": dict(self.restarts),
                  "maintenance_errors": list(self.maintenance_errors)}
        repairing = [f"{n}: {s['repairing']}" for n, s in self._statuses.items() if n in fresh and s.get("repairing")]
        if repairing:
            status["repairing"] = "; ".join(repairing)
        if away:
            status["nodes_away"] = away
        return status

    def is_idle(self, status: dict | None = None) -> bool:
        """Every node answers and is idle, nothing queued anywhere (data waiting for a node that
        is away is queued)."""
        status = status or self.status()
        if status.get("nodes_away") or status.get("repairing") or self._restarting:
            return False
        if any(q["count"] for q in status["queues"]):
            return False
        try:
            return all(self._ask(name, FlowController.is_idle) for name in self.names)
        except Exception:
            return False

    def note_restart(self, kind: str, count: int = 1) -> None:
        self.restarts[kind] += count

    # ------------------------------------------------------------------ stop
    def stop(self) -> dict:
        """Stop the flow on every node (each keeps what is queued in its own log), end the
        node controllers."""
        self._watch.stop()
        final: dict[str, Any] = (self.status() if self.started
                                 else {"flow": self.flow.name, "processors": [], "queues": []})
        stops = {name: link.call(FlowController.stop) for name, link in self.controllers.items()
                 if name in self.connected or not self.started}
        by_node = {}
        for name, call in stops.items():
            try:
                if finished(call, START_WAIT):
                    by_node[name] = resolve([call])[0]
            except Exception as err:
                self._note(f"stopping node {name}: {cause_of(err)}")
        if by_node:
            final = {**final, **merge_statuses(self.flow, {**self._statuses, **by_node})}
            final["nodes"] = {n: {**final.get("nodes", {}).get(n, {}), **node_summary(by_node.get(n) or
                                                                                   self._statuses.get(n))}
                              for n in self.names}
        self._end_controllers()
        self.started = False
        return final

    def _end_controllers(self) -> None:
        handles = [link.handle for link in self.controllers.values()] + [self._state_keeper]
        for handle in filter(None, handles):
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # already gone
                pass


def merge_statuses(flow: Flow, by_node: dict[str, dict]) -> dict:
    """One status of the flow from its nodes' statuses: processors and connections summed."""
    processors: dict[str, dict] = {}
    queues: dict[str, dict] = {}
    for node, status in by_node.items():
        for p in status.get("processors", []):
            into = processors.setdefault(p["name"], {"name": p["name"], "type": p["type"], "idle": True,
                                                     "back_pressure": False, "recent_errors": [],
                                                     **{k: 0 for k in _SUMMED}})
            for key in _SUMMED:
                into[key] += p.get(key, 0)
            into["idle"] = into["idle"] and p.get("idle", True)
            into["back_pressure"] = into["back_pressure"] or p.get("back_pressure", False)
            into["stuck_seconds"] = max(into.get("stuck_seconds", 0.0), p.get("stuck_seconds", 0.0))
            into["recent_errors"] += [{**e, "node": node} for e in p.get("recent_errors", [])]
        for q in status.get("queues", []):
            into = queues.setdefault(q["id"], {"id": q["id"], "source": q.get("source"),
                                               "destination": q.get("destination"), "back_pressure": False,
                                               "waiting_for": {}, **{k: 0 for k in _QUEUE_SUMMED}})
            for key in _QUEUE_SUMMED:
                into[key] += q.get(key, 0)
            into["back_pressure"] = into["back_pressure"] or q.get("back_pressure", False)
            for target, count in q.get("waiting_for", {}).items():
                into["waiting_for"][target] = into["waiting_for"].get(target, 0) + count
    for p in processors.values():
        p["task_seconds"] = round(p["task_seconds"], 3)
        p["recent_errors"] = sorted(p["recent_errors"], key=lambda e: e["at"])[-5:]
    ordered_processors = [processors[n] for n in flow.processors if n in processors]
    ordered_queues = [queues[c.id] for c in flow.connections if c.id in queues]
    return {"flow": flow.name, "processors": ordered_processors, "queues": ordered_queues,
            "waiting_for_node": _waiting(ordered_queues)}


def _waiting(queues: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for q in queues:
        for node, count in q["waiting_for"].items():
            out[node] = out.get(node, 0) + count
    return out


def node_summary(status: dict | None) -> dict:
    """One node's share: what each processor took in and sent out there, what is queued there,
    what its load-balance senders moved and how long they were busy."""
    if not status:
        return {"processors": {}, "queued": 0, "sent": {}, "sending_seconds": 0.0, "transfer_errors": [],
                "senders": {}, "views": [], "receivers": {}}
    return {"processors": {p["name"]: {"flowfiles_in": p["flowfiles_in"], "flowfiles_out": p["flowfiles_out"],
                                       "running": p["running"]} for p in status.get("processors", [])},
            "queued": sum(q["count"] for q in status.get("queues", [])),
            "sent": {t["name"]: t["flowfiles_in"] for t in status.get("transfers", [])},
            "sending_seconds": round(sum(t["task_seconds"] for t in status.get("transfers", [])), 3),
            "transfer_errors": sorted((dict(e, sender=t["name"]) for t in status.get("transfers", [])
                                       for e in t["recent_errors"]), key=lambda e: e["at"])[-5:],
            "senders": {t["name"]: {k: t[k] for k in ("flowfiles_in", "tasks", "running", "idle", "errors")}
                        for t in status.get("transfers", [])},
            "views": status.get("cluster_views", []), "receivers": status.get("receivers", {})}
