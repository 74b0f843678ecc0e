"""The in-process engine: a whole flow in this process, through the same controller as on Ray.

Every component the Ray engine puts in an actor is an object here: the repository services
behind ``ThreadedLink`` (served one call at a time, as an actor serves them), the executors and
any queue of its own on one event loop thread, the processor tasks on threads of their own. The
commit order, the trigger loop, recovery and the repositories on disk are the same code as on Ray,
so a flow and its repository move between the engines freely; what this engine gives up is
isolation (one process) and ``runtime_env``. It needs no Ray at all (nothing to start): for
tests, notebooks and small flows.
"""

from __future__ import annotations

import asyncio
import os
import threading

from flowactors.engine import gc_policy
from flowactors.engine.errors import FlowStartError
from flowactors.engine.executor import Executor
from flowactors.engine.task import flow_task_keys
from flowactors.engine.hosting import repository_name
from flowactors.engine.placement import ExecutorPlan, Placement, runtime_env_refusal
from flowactors.engine.queues.connection import QueueConfig, QueueHost
from flowactors.engine.services import SHARED_SERVICE_CONCURRENCY, SharedService
from flowactors.engine.repository_services import (PROVENANCE_CONCURRENCY, ContentRepositoryService,
                                                   FlowFileRepositoryService, ProvenanceRepositoryService)
from flowactors.engine.transport import Link, LoopLink, ThreadedLink
from flowactors.sdk.flow import Flow
from flowactors.sdk.settings import Settings

SERVICES = {"flowfile": (FlowFileRepositoryService, 1), "content": (ContentRepositoryService, 1),
            "provenance": (ProvenanceRepositoryService, PROVENANCE_CONCURRENCY)}


class InProcessHosting:
    """Components as objects in this process (see the module docstring)."""

    engine = "in-process"

    def __init__(self) -> None:
        gc_policy.hold()  # the collector's thresholds for FlowFile batches while the flow runs here
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="flow-event-loop", daemon=True)
        self._loop_thread.start()
        self._services: list[ThreadedLink] = []

    def cpus(self) -> int:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    def start_problem(self, plan, error: BaseException) -> str | None:
        return None  # an executor here is an object: its error says it all

    def check(self, placement: Placement) -> None:
        own_env = [name for p in placement.executors if p.runtime_env for name, _ in p.tasks]
        if own_env:
            raise FlowStartError(runtime_env_refusal(sorted(set(own_env))))

    def repository(self, kind: str, root: str, settings: Settings, flow: str) -> Link:
        service, workers = SERVICES[kind]
        link = ThreadedLink(service(root, settings, flow=flow), workers, name=repository_name(flow, kind))
        self._services.append(link)
        return link

    def queue(self, name: str, config: QueueConfig, root: str, flowfile_repository: Link) -> Link:
        return LoopLink(self._on_loop(lambda: QueueHost(config, root, flowfile_repository)), self.loop)

    def executor(self, name: str, plan: ExecutorPlan, flow: Flow, root: str, settings: Settings,
                 queue_configs: dict[str, QueueConfig], flowfile_repository: Link,
                 provenance_repository: Link | None, cluster: dict | None = None) -> Link:
        # every executor here is in this one process: a death ends all their triggers at once
        return LoopLink(self._on_loop(lambda: Executor(flow, plan, root, settings, queue_configs,
                                                       flowfile_repository, provenance_repository, cluster,
                                                       process_tasks=flow_task_keys(flow))),
                        self.loop)

    def shared_service(self, name: str, flow: Flow, path: str) -> Link:
        link = ThreadedLink(SharedService(flow, path), SHARED_SERVICE_CONCURRENCY, name=name)
        self._services.append(link)
        return link

    def _on_loop(self, make):
        """Build an async component on the loop's thread, where it will live."""
        async def build():
            return make()
        return asyncio.run_coroutine_threadsafe(build(), self.loop).result()

    def close(self) -> None:
        for link in self._services:
            link.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(30)
        self.loop.close()
        gc_policy.release()
