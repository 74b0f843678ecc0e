"""Where an engine runs a flow's components: the one thing the engines' lifecycle leaves to them.

The controller (``flowactors.engine.controller``) decides what a flow needs (repositories, the
executors of its placement plan, queues of their own) and in which order; a ``Hosting`` creates
each component where its engine runs things and hands back a link to it
(``flowactors.engine.transport``). Two exist: ``RayHosting`` (an actor a component, on the
controller's node: ``flowactors.engine.actors.ray_hosting``) and ``InProcessHosting`` (objects in
this process: ``flowactors.engine.in_process``).
"""

from __future__ import annotations

from typing import Protocol

from flowactors.engine.placement import ExecutorPlan, Placement
from flowactors.engine.queues.connection import QueueConfig
from flowactors.engine.transport import Link
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import Settings

def repository_name(flow: str, kind: str) -> str:
    """The name of a flow's repository service (its Ray actor's name, its threads' prefix)."""
    return f"{flow}.{kind}-repository"


class Hosting(Protocol):
    engine: str  # one of flowactors.engine.ENGINES

    def cpus(self) -> int:
        """CPUs this engine may use on its node: the default number of shared executors."""

    def check(self, placement: Placement) -> None:
        """Refuse (``FlowStartError``) a placement this engine cannot honour, before anything starts."""

    def repository(self, kind: str, root: str, settings: Settings, flow: str) -> Link:
        """The ``kind`` ("flowfile", "content" or "provenance") repository service of flow ``flow``
        over ``root`` (``flowactors.engine.repository_services``), named ``repository_name``."""

    def queue(self, name: str, config: QueueConfig, root: str, flowfile_repository: Link) -> Link:
        """A connection's queue in a component of its own (the isolated placement)."""

    def executor(self, name: str, plan: ExecutorPlan, flow: Flow, root: str, settings: Settings,
                 queue_configs: dict[str, QueueConfig], flowfile_repository: Link,
                 provenance_repository: Link | None, cluster: dict | None = None) -> Link:
        """An ``Executor`` for ``plan``, not yet wired (``cluster``: its node's ``ClusterView``
        fields, on a flow across several nodes)."""

    def shared_service(self, name: str, flow: Flow, path: str) -> Link:
        """The flow's one instance of the controller service at ``path`` (a ``SharedService`` of
        ``flowactors.engine.services``: a service with state to share), named ``name``."""

    def start_problem(self, plan: ExecutorPlan, error: BaseException) -> str | None:
        """What to tell the user when the executor of ``plan`` could not start, where the engine
        knows better than the error (the Ray engine: packages that did not install); else None."""

    def close(self) -> None:
        """End every component this hosting created (after the controller stopped them)."""


class Watched(Protocol):
    """What the controller asks every component it watches (executors, queues of their own,
    repository services): which build answers and what its tasks could not carry out."""

    def health(self) -> dict:
        """``{"incarnation": ..., ...}``: a restarted component answers with a new incarnation."""


class Resettable(Protocol):
    """A component a repair starts afresh, empty (executors, queues of their own)."""

    def reset(self) -> None:
        """Drop everything held in memory; the controller refills it from the log."""
