"""The Ray engine's hosting: each component an actor of its own on the controller's node.

The repository folder, its claim files and its lock are one node's (docs/cluster.md), so every
actor is pinned to the node the controller runs on. The controller itself is an actor too
(``FlowControllerActor``), so that a flow outlives the driver that submitted it.

Every actor restarts when its process dies (``max_restarts=ACTOR_RESTARTS``: Ray rebuilds it with
the same arguments, on the same node); the controller then repairs the flow from the log
(``FlowController.repair``). Calls are not retried by Ray (``max_task_retries=0``): a commit is
not idempotent, and a call cut short is reported to its caller, who knows what it means.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar, cast

import ray
from ray.actor import ActorClass
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from flowactors.engine import ACTOR_RESTARTS
from flowactors.engine.actors.repository_actors import (ContentRepositoryActor, FlowFileRepositoryActor,
                                                        ProvenanceRepositoryActor)
from flowactors.engine.cluster.topology import RESOURCE_SHARE
from flowactors.engine.controller import CONTROLLER_CONCURRENCY, FlowController
from flowactors.engine.executor import Executor
from flowactors.engine.hosting import repository_name
from flowactors.engine.placement import ExecutorPlan, Placement
from flowactors.engine.queues.connection import QueueActor, QueueConfig, QueueHost
from flowactors.engine.repository_services import Service
from flowactors.engine.services import SHARED_SERVICE_CONCURRENCY, SharedService
from flowactors.engine.transport import ActorLink, Link, causes
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import Settings

T = TypeVar("T")

#: seconds to wait for the name of a dead actor to become free (a controller restarted by Ray
#: starts its components again while Ray is still ending the ones of its previous process)
NAME_WAIT = 60.0


def actor_class(cls: type[T], **options: Any) -> ActorClass[T]:
    """``ray.remote(**options)(cls)``: ``cls`` as a Ray actor class with these default options
    (``**options``, not named keywords: Ray's stubs give ``ray.remote`` a task's options only, and
    an actor's ``max_concurrency`` is not among them)."""
    return ray.remote(**options)(cls)


ExecutorActor = actor_class(Executor, num_cpus=0, max_restarts=ACTOR_RESTARTS)
FlowControllerActor = actor_class(FlowController, num_cpus=0, max_concurrency=CONTROLLER_CONCURRENCY,
                                  max_restarts=ACTOR_RESTARTS)
# Classes decorated with ``@ray.remote`` are ``ActorClass`` objects, which a type checker cannot see (it
# keeps a decorated class's own type): the casts say what they are.
#: each repository service's actor class, by kind
ACTORS = cast(dict[str, ActorClass[Service]], {"flowfile": FlowFileRepositoryActor, "content": ContentRepositoryActor,
                                               "provenance": ProvenanceRepositoryActor})
#: a connection's queue in an actor of its own
QUEUE_ACTOR = cast(ActorClass[QueueHost], QueueActor)
#: a controller service with state to share, one for the flow (processors in every executor call it)
SHARED_SERVICE_ACTOR = actor_class(SharedService, num_cpus=0, max_concurrency=SHARED_SERVICE_CONCURRENCY,
                                   max_restarts=ACTOR_RESTARTS)


class RayHosting:
    """Components as Ray actors pinned to the node of the controller that uses this hosting; or,
    given a node's ``resource`` (a flow on several nodes: ``flowactors.engine.cluster.topology``),
    placed by that resource, so that Ray starts them again on the node when it comes back."""

    engine = "ray"

    def __init__(self, resource: str | None = None) -> None:
        self._node: str | None = None  # the node of the process that first uses it: the controller's
        self.resource = resource
        self._actors: list[Any] = []

    @property
    def node(self) -> str:
        if self._node is None:
            self._node = ray.get_runtime_context().get_node_id()
        return self._node

    def _here(self, name: str, **options: Any) -> dict[str, Any]:
        if self.resource is not None:
            return {"name": name, "resources": {self.resource: RESOURCE_SHARE}, **options}
        return {"name": name, "scheduling_strategy": NodeAffinitySchedulingStrategy(self.node, soft=False),
                **options}

    def _started(self, name: str, create: Callable[[], Any]) -> ActorLink:
        deadline = time.monotonic() + NAME_WAIT
        while True:
            try:
                handle = create()
                break
            except ValueError as err:  # the name is still held by an actor Ray is ending
                if "already taken" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self._actors.append(handle)
        return ActorLink(handle, name)

    def cpus(self) -> int:
        for entry in ray.nodes():
            if entry["NodeID"] == self.node:
                return max(1, int(entry["Resources"].get("CPU", 1)))
        return 1

    def check(self, placement: Placement) -> None:
        """Ray honours every placement."""

    def repository(self, kind: str, root: str, settings: Settings, flow: str) -> Link:
        name = repository_name(flow, kind)
        return self._started(name, lambda: ACTORS[kind].options(**self._here(name)).remote(root, settings, flow=flow))

    def queue(self, name: str, config: QueueConfig, root: str, flowfile_repository: Link) -> Link:
        return self._started(name, lambda: QUEUE_ACTOR.options(**self._here(name)).remote(config, root,
                                                                                       flowfile_repository))

    def executor(self, name: str, plan: ExecutorPlan, flow: Flow, root: str, settings: Settings,
                 queue_configs: dict[str, QueueConfig], flowfile_repository: Link,
                 provenance_repository: Link | None, cluster: dict | None = None) -> Link:
        own_env = {"runtime_env": plan.runtime_env} if plan.runtime_env else {}
        return self._started(name, lambda: ExecutorActor.options(
            **self._here(name, num_cpus=plan.num_cpus, **own_env)).remote(
            flow, plan, root, settings, queue_configs, flowfile_repository, provenance_repository, cluster))

    def shared_service(self, name: str, flow: Flow, path: str) -> Link:
        return self._started(name, lambda: SHARED_SERVICE_ACTOR.options(**self._here(name)).remote(flow, path))

    def start_problem(self, plan: ExecutorPlan, error: BaseException) -> str | None:
        setup = next((e for e in causes(error) if isinstance(e, ray.exceptions.RuntimeEnvSetupError)), None)
        return None if setup is None else runtime_env_problem(plan, str(setup))

    def close(self) -> None:
        for handle in self._actors:
            ray.kill(handle)
        self._actors.clear()


def runtime_env_problem(plan: ExecutorPlan, text: str) -> str:
    """One sentence for an executor whose Ray ``runtime_env`` could not be set up (``text``: Ray's
    error): which processor, which packages, pip's last error line, what to check."""
    processors = ", ".join(f"'{name}'" for name in sorted({name for name, _ in plan.tasks}))
    pip = (plan.runtime_env or {}).get("pip")
    errors = [line.strip()[len("ERROR:"):].strip() for line in text.splitlines() if line.strip().startswith("ERROR:")]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = errors[-1] if errors else lines[-1] if lines else "Ray gave no reason"
    wanted = f"its packages ({', '.join(map(str, pip))})" if isinstance(pip, list) and pip else "its runtime_env"
    return (f"processor {processors} could not start because {wanted} could not be installed ({reason}): check "
            f"their names and versions (for a NiFi Python processor, its ProcessorDetails.dependencies and "
            f"requirements.txt) and that this machine reaches the package index")
