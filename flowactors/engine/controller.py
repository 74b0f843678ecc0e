"""The flow controller: builds a flow's components, recovers its FlowFiles, runs background jobs, stops.

One lifecycle for every engine: where components run is its ``Hosting``'s business (Ray actors,
``flowactors.engine.actors.ray_hosting``; or this process, ``flowactors.engine.in_process``), and
the controller reaches each of them through a link (``flowactors.engine.transport``).

Start-up order matters for durability: the FlowFile repository opens first (claimant counts
rebuilt, never-committed content deleted), then every queue is refilled from the write-ahead log in
its order, and only then do processors start. Background jobs (checkpoint and the claim release
that must follow it, provenance rollover and age-off, archive age-off) run on one maintenance
thread here, off every processor's commit path.

A flow heals (``watch``, ``repair``). On Ray every component's actor restarts when its process
dies (``max_restarts``); the same thread looks at every component each tick, and when one was
restarted or is gone, or a task could not carry out a commit the log had decided, it repairs
the flow from the log: every task stops (its session ends: committed or rolled back), claim
files no FlowFile in the log references are deleted (what a session cut short wrote; a restarted
FlowFile repository reopens, as at start),
every queue starts afresh and is refilled from the log, the tasks start again. Nothing is read
from a queue's memory, so nothing a dead process held is lost, and nothing a living task held is
duplicated (it stopped first). Restarts are counted per kind of component, in the status and as
a metric.
"""

from __future__ import annotations

import collections
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from flowactors.engine.cluster.partitioning import plan_partitions
from flowactors.engine.cluster.topology import partition_of
from flowactors.engine.errors import FlowStartError, NoSuchEventError, NoSuchQueueError, ReplayError
from flowactors.engine.flow_operations import ReplayResult, describe, drop_events, missing_event_message, replay_event
from flowactors.engine.executor import Executor
from flowactors.engine.services import SharedService
from flowactors.engine.hosting import Hosting, Resettable, Watched
from flowactors.engine.placement import Placement, plan
from flowactors.engine.queues.connection import QueueConfig, QueueHost, restore_queues, unknown_queues
from flowactors.engine.repository_services import (ContentRepositoryService, FlowFileRepositoryService, OpenedRepository,
                                                   ProvenanceRepositoryService, renamed_queue_moves)
from flowactors.engine.metrics import RestartMetrics
from flowactors.engine.periodic import Periodic
from flowactors.engine import STOP_TIMEOUT
from flowactors.engine.transport import (HostedLink, Link, call_now, causes, component_lost, finished,
                                         remote_error_line, resolve)
from flowactors.sdk.flow import Flow
from flowactors.sdk.flow_service import FlowService, FlowServiceError, flow_services, service_problems
from flowactors.sdk.services import ServiceEnableError
from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.content.errors import ContentRepositoryError
from repositories.flowfile import FlowFileRepositoryError
from repositories.lock import RepositoryInUseError, RepositoryLock
from repositories.model import QueuedFlowFile, now_millis, total_size
from repositories.provenance.event import EncodedBatch, ProvenanceEvent, encode_batch, event_fields
from repositories.provenance.outbox import register_anew_if_late

MAINTENANCE_TICK = 0.5
#: calls a controller serves at once (status polls and queue operations while it starts or stops)
CONTROLLER_CONCURRENCY = 8
#: seconds a repair waits for every component to answer again (Ray restarting the dead ones)
REPAIR_WAIT = 120.0
#: seconds a component may take to answer the watch before it is looked at again next tick
HEALTH_WAIT = 30.0


def cause_of(error: BaseException) -> str:
    """What went wrong, in one line: the innermost error of a chain of remote calls (a Ray error
    carries the remote one as ``cause``), by its own message when it is one of the repositories'
    (they name the file and what to do), else with its type."""
    error = causes(error)[-1]
    if isinstance(error, (FlowFileRepositoryError, ContentRepositoryError, FlowStartError)):
        return str(error)
    return remote_error_line(error) or f"{type(error).__name__}: {error}"


#: a processor's counts that add up over its tasks (and over a cluster's nodes)
PROCESSOR_COUNTS = ("tasks", "flowfiles_in", "flowfiles_out", "bytes_read", "bytes_written", "commits", "errors",
                    "expired", "state_conflicts")
#: a queue's counts that add up over its partitions (and over a cluster's nodes)
QUEUE_COUNTS = ("queued", "in_flight", "count", "bytes", "penalized", "swapped", "swapped_bytes", "total_in",
                "total_out", "bytes_in")


def stuck_seconds(tasks: list[dict], threshold: float) -> float:
    """How long the longest running ``on_trigger`` of a processor's tasks has taken, if that is
    ``threshold`` seconds or more (``long_trigger_seconds``); else 0."""
    longest = max((t.get("trigger_seconds", 0.0) for t in tasks), default=0.0)
    return longest if longest >= threshold else 0.0


def fold_partitions(queue_status: dict[str, dict], load_balanced: set[str]) -> None:
    """Count a load-balanced connection's partitions (``<connection>@<node>``) in the
    connection's own status, as NiFi shows one connection: ``waiting_for`` says how many wait for
    each node (seed 002's requirement 9). Other queues, whatever their names, are left alone."""
    partitions = {q: p for q in queue_status if (p := partition_of(q)) is not None and p[0] in load_balanced}
    for queue_id, (connection, node) in partitions.items():
        whole = queue_status.get(connection)
        if whole is None:
            continue
        part = queue_status.pop(queue_id)
        for key in QUEUE_COUNTS:
            whole[key] = whole.get(key, 0) + part.get(key, 0)
        whole["back_pressure"] = whole.get("back_pressure", False) or part.get("back_pressure", False)
        whole.setdefault("waiting_for", {})[node] = part.get("count", 0)


#: seconds a caller that reads its events next waits for them to become visible
VISIBLE_WAIT = 5.0


def register_numbered_now(reserve: Callable[[int], int], provenance_repository: Link,
                          numbered: list[tuple[int, EncodedBatch]], visible: bool = False) -> None:
    """Register numbered events over a link and wait (``register_anew_if_late``: those that came
    after provenance gave their ids up get new ids from ``reserve``). ``visible``: also wait (a
    moment at most) until search sees them, as a caller that reads them next needs."""
    last = register_anew_if_late(
        lambda batches: call_now(provenance_repository, ProvenanceRepositoryService.register_numbered, batches),
        reserve, numbered)
    if visible and last >= 0:
        call_now(provenance_repository, ProvenanceRepositoryService.wait_visible, last, VISIBLE_WAIT)


class FlowController:
    """``cluster``: on a flow across several nodes (``flowactors.engine.cluster``), this node's
    part: ``local`` (its name), ``nodes`` (the topology), ``primary``, ``connected`` and
    ``partition_nodes`` (the nodes this node keeps load-balance partitions for)."""

    def __init__(self, flow: Flow, repository: str, settings: Settings, hosting: Hosting,
                 cluster: dict | None = None):
        self.flow = flow
        self.cluster = dict(cluster) if cluster else None
        self.root = str(Path(repository).resolve())
        self.settings = settings
        self.hosting = hosting
        self.queues: dict[str, Link] = {}
        self.executors: list[Link] = []  # the executors, which host every processor task
        self.start_progress: list[dict] = []
        self.flowfile_repository: Link | None = None
        self.content_repository: Link | None = None
        self.provenance_repository: Link | None = None
        self.recovery: dict = {}
        self._opened: list[Link] = []  # repository services opened so far (closed by stop)
        self._maintenance = Periodic("maintenance", MAINTENANCE_TICK, self._maintain, self._maintenance_failed,
                                     join=REPAIR_WAIT + 60)
        self._last = {"checkpoint": time.monotonic(), "archive": time.monotonic()}
        self.maintenance_errors: list[str] = []
        self.started = False
        #: the flow services started (``flowactors.sdk.flow_service``) and what each start returned
        self.services: list[tuple[FlowService, Any]] = []
        #: the flow's shared controller services by path (``_start_shared_services``), each enabled once
        self.shared_services: dict[str, Link] = {}
        self._claims_lock = threading.Lock()  # a replay's new claimant vs. checkpoint + release
        self._repository_lock = RepositoryLock(self.root, f"flow '{flow.name}'")
        self.placement: Placement | None = None  # the plan ``start`` carries out
        self.restarts: collections.Counter = collections.Counter()  # kind of component -> restarts
        self.repairs: list[dict] = []  # the last repairs: when, why, how long
        self.repairing: str | None = None  # why, while a repair runs
        self._repair_due: list[str] = []  # reasons of a repair that has not succeeded yet
        self._repair_generation = 0  # moves at each repair's start and end (``status``)
        self._incarnations: dict[str, str] = {}  # component -> the build of it last seen
        #: the log's run the executors commit under; a new one each time the log is opened
        #: (``WriteAheadFlowFileRepository.begin_run``)
        self.run: int | None = None
        self._last_status: dict | None = None
        self._restart_metrics = RestartMetrics(flow.name)

    def _name(self, component: str) -> str:
        return f"{self.instance}.{component}"

    @property
    def instance(self) -> str:
        """The name this controller's components are named after: the flow's, and on several
        nodes the node's too (every node runs the whole flow)."""
        return f"{self.flow.name}.{self.cluster['local']}" if self.cluster else self.flow.name

    # ------------------------------------------------------------------ start
    def start(self) -> dict:
        """Start the flow (see the module docstring); returns the recovery report. Any failure is
        one ``FlowStartError`` whose message is the cause's own (a damaged repository names its
        file and what to do); ``stop`` then undoes what was started."""
        try:
            return self._start()
        except FlowStartError:
            raise
        except Exception as err:
            raise FlowStartError(f"flow '{self.flow.name}' could not start: {cause_of(err)}") from None

    def _start(self) -> dict:
        Path(self.root).mkdir(parents=True, exist_ok=True)
        try:
            self._repository_lock.acquire()  # no second flow or offline tool on these repositories
        except RepositoryInUseError as err:
            raise FlowStartError(str(err)) from None
        s, hosting = self.settings, self.hosting
        placement = self.placement = plan(self.flow, s.placement, s.executors or hosting.cpus())
        hosting.check(placement)
        configs = {c.id: QueueConfig.for_connection(c, self.settings, self.flow.name) for c in self.flow.connections}
        if self.cluster:
            configs.update(plan_partitions(self.flow, placement, self.cluster, configs, s))
        self._starting("repositories", 0, 3)
        flowfiles = self.flowfile_repository = hosting.repository("flowfile", self.root, s, self.instance)
        self.content_repository = hosting.repository("content", self.root, s, self.instance)
        if s.provenance_enabled:
            self.provenance_repository = hosting.repository("provenance", self.root, s, self.instance)
        # every component is asked for now, so that their start-up overlaps the log's recovery
        for queue_id in placement.queue_actors:
            self.queues[queue_id] = hosting.queue(self._name(f"queue.{queue_id}"), configs[queue_id], self.root,
                                                  flowfiles)
        for executor_plan in placement.executors:
            executor = hosting.executor(
                self._name(executor_plan.name), executor_plan, self.flow, self.root, s,
                {q: configs[q] for q in executor_plan.queues}, flowfiles, self.provenance_repository,
                self._view())
            self.executors.append(executor)
            for queue_id in executor_plan.queues:
                self.queues[queue_id] = HostedLink(executor, queue_id)
        self._starting("recovering the FlowFile repository", 1, 3)
        self.recovery = call_now(flowfiles, FlowFileRepositoryService.open)
        self._opened.append(flowfiles)
        # FlowFiles an older version queued under a connection's former default name move to it
        moves = renamed_queue_moves(self.flow.renamed_queues(), self.recovery)
        if moves:
            self.recovery.update(call_now(flowfiles, FlowFileRepositoryService.rename_queues, moves))
        unknown = unknown_queues(self.recovery, set(configs))
        if unknown:
            listing = ", ".join(f"'{q}' ({n} FlowFiles)" for q, n in sorted(unknown.items()))
            raise FlowStartError(
                f"the repository {self.root} holds FlowFiles queued in connections that flow "
                f"'{self.flow.name}' does not have: {listing}. Run the flow these FlowFiles belong to, "
                f"or add connections with these names; nothing was dropped.")
        if self.provenance_repository is not None:
            self._starting("opening the provenance repository", 2, 3)
            opened = call_now(self.provenance_repository, ProvenanceRepositoryService.open)
            self._opened.append(self.provenance_repository)
            if opened["problems"]:  # damaged journals: said, never silent (issue 14)
                self.recovery["provenance_problems"] = opened["problems"]
                self.recovery["provenance_events_lost"] = opened["events_lost"]
            damaged = self._align_event_ids()
            if damaged:  # damaged outbox entries a run that died left in the log: said the same way
                self.recovery["provenance_problems"] = self.recovery.get("provenance_problems", []) + damaged
        self.run = self.recovery["run"]
        self._start_shared_services()
        self._wire_executors(placement)
        self._starting("restoring queued FlowFiles", 0, sum(self.recovery.get("queues", {}).values()))
        self._restore_queues()
        self._start_services()
        tasks = sum(len(p.tasks) for p in placement.executors)
        self._starting("processor tasks", 0, tasks)
        resolve([e.call(Executor.start) for e in self.executors])
        self._incarnations = {name: health["incarnation"]
                              for name, health in self._health(self._components()).items()}
        self._starting("running", tasks, tasks)
        self._maintenance.start()
        self.started = True
        return self.recovery

    def _wire_executors(self, placement: Placement) -> None:
        """Have each executor create its tasks (``Executor.wire``), the start failing with one
        line for a controller service that refused to enable or what the engine knows better."""
        self._starting("executors", 0, len(self.executors))
        wired = [e.call(Executor.wire, self.queues, self.run, self.shared_services) for e in self.executors]
        for done, (executor_plan, pending) in enumerate(zip(placement.executors, wired), 1):
            try:
                resolve([pending])
            except Exception as err:
                problem = service_refusal(err) or self.hosting.start_problem(executor_plan, err)
                if problem is None:
                    raise
                raise FlowStartError(problem) from None
            self._starting("executors", done, len(self.executors))

    def _starting(self, step: str, done: int, total: int) -> None:
        self.start_progress.append({"step": step, "done": done, "total": total})

    def starting(self, since: int = 0) -> list[dict]:
        """What ``start`` has done since its ``since``-th step: ``{"step", "done", "total"}`` each,
        the last one what it is doing now (answered while it runs)."""
        return self.start_progress[since:]

    def _start_services(self) -> None:
        """Start the flow services the flow's processors need (``flowactors.sdk.flow_service``:
        the flow's Spark session, docs/spark.md), each once, in the order the processors name them."""
        problems = service_problems(self.flow, self.hosting.engine)
        if problems:
            raise FlowStartError("; ".join(problems))
        for service in flow_services(self.flow):
            if not service.needed_by(self.flow):
                continue
            try:
                self.services.append((service, service.start(self.flow, self.settings, self._name(service.name))))
            except FlowServiceError as err:
                raise FlowStartError(str(err)) from None

    def _stop_services(self) -> None:
        """Stop the flow services, the last started first (after the processors: none is mid-job),
        and disable the shared controller services."""
        while self.services:
            service, started = self.services.pop()
            service.stop(started)
        for path, link in list(self.shared_services.items()):
            del self.shared_services[path]
            try:
                call_now(link, SharedService.disable)
            except Exception as err:   # its process may be gone: nothing of it to disable
                self.maintenance_errors.append(f"controller service '{path}' could not be disabled: {err}")

    def _start_shared_services(self) -> None:
        """The flow's one instance of each controller service with state to share that a
        processor uses (``flowactors.engine.services``), enabled before any executor is wired."""
        for node in self.flow.services_used_by(self.flow.enabled_processors()):
            if not node.type.shared_state or node.path in self.shared_services:
                continue
            link = self.hosting.shared_service(self._name(f"service.{node.path}"), self.flow, node.path)
            self.shared_services[node.path] = link
            try:
                call_now(link, SharedService.enable)
            except Exception as err:
                refused = service_refusal(err)
                if refused is None:
                    raise
                raise FlowStartError(refused) from None

    def _restore_queues(self) -> None:
        """Swap files back to their queues (kept on disk), then the log's queued FlowFiles."""
        self.recovery.update(restore_queues(self._flowfile_service, self.queues, self.root))

    # ------------------------------------------------------------------ background jobs
    def _maintain(self) -> None:
        """Every ``MAINTENANCE_TICK``: repair what the watch found dead, then the periodic jobs."""
        self._repair_due = self._repair_due or self.watch()
        if self._repair_due:
            self.repair(self._repair_due)
            self._repair_due = []
        self.maintenance_once()

    def _maintenance_failed(self, err: Exception) -> None:
        """A failed job is retried next tick (NiFi bug NIFI-4322); the last ten errors are kept."""
        self.maintenance_errors = (self.maintenance_errors + [f"{type(err).__name__}: {err}"])[-10:]

    # ------------------------------------------------------------------ healing
    def _components(self) -> dict[str, tuple[str, Link]]:
        """Every component the watch looks after: name -> (kind, link)."""
        out: dict[str, tuple[str, Link]] = {}
        for kind, link in (("flowfile-repository", self.flowfile_repository),
                           ("content-repository", self.content_repository),
                           ("provenance-repository", self.provenance_repository)):
            if link is not None:
                out[kind] = (kind, link)
        for executor_plan, link in zip(self._placed.executors, self.executors):
            out[executor_plan.name] = ("executor", link)
        for queue_id, link in self.queues.items():
            if not isinstance(link, HostedLink):
                out[f"queue.{queue_id}"] = ("queue", link)
        return out

    def _health(self, components: dict[str, tuple[str, Link]], wait: float = HEALTH_WAIT) -> dict[str, dict]:
        """The ``health`` answers of these components within ``wait`` seconds; one that died (or
        is restarting) or did not answer in time is missing."""
        pending = {name: link.call(Watched.health) for name, (_kind, link) in components.items()}
        deadline = time.monotonic() + wait
        answers: dict[str, dict] = {}
        for name, call in pending.items():
            if not finished(call, max(0.0, deadline - time.monotonic())):
                continue
            try:
                answers[name] = resolve([call])[0]
            except Exception as err:
                if not component_lost(err):
                    raise
        return answers

    def watch(self) -> list[str]:
        """Look at every component once: the reasons to repair the flow (a component that died or
        was restarted, a task that could not carry out a decided commit); none when all is well."""
        components = self._components()
        answers = self._health(components)
        reasons = [f"{name} died" for name in components if name not in answers]
        for name, health in answers.items():
            if health["incarnation"] != self._incarnations.get(name):
                reasons.append(f"{name} was restarted")
            reasons += [f"{name}: {lost}" for lost in health["lost"]]
        return reasons

    def repair(self, reasons: list[str]) -> dict:
        """Repair the flow from the log (see the module docstring); returns what was done."""
        began = time.monotonic()
        self._repair_generation += 1
        self.repairing = "; ".join(reasons)[:1000]
        try:
            with self._claims_lock:  # no replay adds a claimant meanwhile
                self._stop_tasks()
                restarted = self._wait_for_components()
                if "flowfile-repository" in restarted:  # its open also deletes orphan content
                    reopened = call_now(self._flowfile_service, FlowFileRepositoryService.open)
                    orphans, self.run = reopened["orphans_removed"], reopened["run"]
                else:  # what a session cut short wrote
                    orphans = call_now(self._flowfile_service, FlowFileRepositoryService.remove_orphans)
                if "provenance-repository" in restarted:
                    call_now(self._provenance_service, ProvenanceRepositoryService.open)
                own = [link for link in self.queues.values() if not isinstance(link, HostedLink)]
                resolve([link.call(Resettable.reset) for link in self.executors + own])
                resolve([e.call(Executor.wire, self.queues, self.run, self.shared_services) for e in self.executors])
                self._align_event_ids()  # a restarted provenance actor follows the log again
                restored = restore_queues(self._flowfile_service, self.queues, self.root)
                resolve([e.call(Executor.start) for e in self.executors])
        finally:
            self.repairing = None
            self._repair_generation += 1
        done = {"at": time.time(), "reasons": reasons, "restarted": restarted, "seconds": time.monotonic() - began,
                "restored": restored["restored"], "orphans_removed": orphans}
        self.repairs = (self.repairs + [done])[-20:]
        return done

    def _stop_tasks(self) -> None:
        """Stop every task where it runs (a dead executor runs none). A task that does not stop
        (in ``STOP_TIMEOUT``) could still commit or give FlowFiles back: the repair waits for it,
        tried again at the next tick."""
        running = 0
        for executor in self.executors:
            try:
                running += sum(t["running"] for t in call_now(executor, Executor.stop))
            except Exception as err:
                if not component_lost(err):
                    raise
        if running:
            raise RuntimeError(f"{running} task(s) did not stop within {STOP_TIMEOUT:g} s; the repair waits for them")

    def _wait_for_components(self) -> list[str]:
        """Wait until every component answers again; count and return those that were restarted."""
        components = self._components()
        waiting = set(components)
        restarted = []
        deadline = time.monotonic() + REPAIR_WAIT
        while waiting:
            for name, health in self._health({n: components[n] for n in waiting}, wait=5.0).items():
                waiting.discard(name)
                if health["incarnation"] != self._incarnations.get(name):
                    self._incarnations[name] = health["incarnation"]
                    restarted.append(name)
                    self.note_restart(components[name][0])
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"{', '.join(sorted(waiting))} did not come back within {REPAIR_WAIT:g} s; "
                                   f"the repair is tried again")
            if waiting:
                time.sleep(0.2)
        return restarted

    def note_restart(self, kind: str, count: int = 1) -> None:
        """Count a component's restart (the driver counts the controller's own)."""
        self.restarts[kind] += count
        self._restart_metrics.restarted(kind, count)

    def maintenance_once(self, force: bool = False) -> dict:
        now = time.monotonic()
        done: dict[str, Any] = {}
        if force or now - self._last["checkpoint"] >= self.settings.checkpoint_interval:
            done["released"] = self.checkpoint()
            self._last["checkpoint"] = now
        if self.provenance_repository is not None:
            done["rollover"] = call_now(self.provenance_repository, ProvenanceRepositoryService.rollover if force
                                                 else ProvenanceRepositoryService.maybe_rollover)
        if force or now - self._last["archive"] >= self.settings.archive_check_interval:
            done["archive"] = call_now(self._content_service, ContentRepositoryService.age_off_archive)
            if self.provenance_repository is not None:
                done["provenance_age_off"] = call_now(self.provenance_repository, ProvenanceRepositoryService.age_off)
            self._last["archive"] = now
        return done

    def checkpoint(self) -> int:
        """Checkpoint the write-ahead log, then release the claims it says nobody references."""
        with self._claims_lock:
            released = call_now(self._flowfile_service, FlowFileRepositoryService.checkpoint)
            if released:
                call_now(self._content_service, ContentRepositoryService.release, released)
        return len(released)

    def replay(self, event_id: int, requested_by: str | None = None) -> ReplayResult:
        """Queue a FlowFile again with a provenance event's input (``flow_operations.replay_event``)
        through the running flow's components, holding the claims lock, so a checkpoint cannot
        release the claim between the commit that adds the claimant and the move back out of the
        archive."""
        if not self.started:
            raise ReplayError(f"flow '{self.flow.name}' is not running: replay into its stopped repository "
                              f"with flowactors replay (replay_stopped)")
        if self.provenance_repository is None:
            raise ReplayError("provenance is disabled for this flow (provenance_enabled): there is nothing to replay")
        provenance, flowfiles = self.provenance_repository, self._flowfile_service
        event = call_now(provenance, ProvenanceRepositoryService.get, event_id)
        if event is None:
            stats = call_now(provenance, ProvenanceRepositoryService.stats)
            raise NoSuchEventError(missing_event_message(event_id, stats, f"flow '{self.flow.name}'"))
        with self._claims_lock:
            return replay_event(
                event, FileSystemContentRepository.from_settings(self.root, self.settings), connections=self.queues,
                requested_by=requested_by,
                reserve_id=lambda: call_now(flowfiles, FlowFileRepositoryService.reserve_ids, 1),
                commit=lambda flowfile, queue: call_now(flowfiles, FlowFileRepositoryService.commit,
                                                        [QueuedFlowFile(flowfile, queue)], []),
                remove=lambda uuid: call_now(flowfiles, FlowFileRepositoryService.commit, [], [uuid]),
                register=self.record_events,
                offer=lambda queue, flowfile: call_now(self.queues[queue], QueueHost.offer, [flowfile]))

    # ------------------------------------------------------------------ on several nodes
    def _view(self) -> dict | None:
        """What this node's executors start knowing of the cluster (``ClusterView``)."""
        if not self.cluster:
            return None
        c = self.cluster
        nodes: list[str] = c["nodes"]
        return {"local": c["local"], "nodes": tuple(nodes), "connected": frozenset(c.get("connected", nodes)),
                "primary": c.get("primary"), "cluster_state": c.get("cluster_state")}

    def receivers(self) -> dict[str, Link]:
        """Where other nodes send this node's share of each load-balanced connection: the
        executor hosting the connection's queue (``Executor.receive_transfer``)."""
        if not self.cluster:
            return {}
        home = self._placed.queue_home()
        return {c.id: self.executors[home[c.id]] for c in self.flow.connections if c.load_balanced}

    def set_cluster(self, nodes: list[str] | None = None, connected: list[str] | None = None,
                    primary: str | None = None, receivers: dict | None = None) -> None:
        """The coordinator's news of the cluster, passed to every executor (``Executor.set_cluster``)."""
        if self.cluster is None:
            raise RuntimeError(f"flow '{self.flow.name}' does not run on several nodes")
        for key, value in (("nodes", nodes), ("connected", connected), ("primary", primary)):
            if value is not None:
                self.cluster[key] = value
        resolve([e.call(Executor.set_cluster, nodes, connected, primary, receivers) for e in self.executors])

    # ------------------------------------------------------------------ status
    def status(self) -> dict:
        """The flow's status; while a repair runs (or a component is gone), the last one seen with
        ``repairing`` saying why (a flow being repaired is never idle). ``started`` is False before
        ``start`` (and in a controller Ray restarted, which must be started again)."""
        generation = self._repair_generation
        status = None
        if not self.started:
            status = {"flow": self.flow.name, "processors": [], "queues": []}
        elif self.repairing is None:
            try:
                status = self._status()
            except Exception as err:
                if not component_lost(err):
                    raise
        if status is None or (self.started and (self.repairing is not None
                                                or generation != self._repair_generation)):
            last = self._last_status or {"flow": self.flow.name, "processors": [], "queues": []}
            status = {**last, "repairing": self.repairing or "a component is gone; a repair is due"}
        elif self.started:
            self._last_status = status
        return {**status, "started": self.started, "restarts": dict(self.restarts), "repairs": self.repairs[-5:],
                "maintenance_errors": list(self.maintenance_errors)}

    def _status(self) -> dict | None:
        """The status the executors and queues give, or None if one of them answered as a new
        build (Ray restarted it, not yet repaired): empty, it must not read as an idle flow."""
        own = [qid for qid, q in self.queues.items() if not isinstance(q, HostedLink)]
        answers = resolve([e.call(Executor.statuses) for e in self.executors]  # one call an executor
                          + [self.queues[qid].call(QueueHost.status) for qid in own])
        hosted = answers[:len(self.executors)]
        queue_status = dict(zip(own, answers[len(self.executors):]))
        builds = {**{p.name: s["incarnation"] for p, s in zip(self._placed.executors, hosted)},
                  **{f"queue.{q}": s["incarnation"] for q, s in queue_status.items()}}
        if any(build != self._incarnations.get(name) for name, build in builds.items()):
            return None
        by_name: dict[str, list[dict]] = {name: [] for name in self.flow.processors}
        transfers = []  # the engine's own tasks: load-balance senders (a flow on several nodes)
        views = [statuses["cluster"] for statuses in hosted if "cluster" in statuses]
        for statuses in hosted:
            for task in statuses["tasks"]:
                by_name[task["name"]].append(task) if task["name"] in by_name else transfers.append(task)
            queue_status.update(statuses["queues"])
        if self.cluster:
            fold_partitions(queue_status, {c.id for c in self.flow.connections if c.load_balanced})
        processors = []
        for name, tasks in by_name.items():
            total = {k: sum(t[k] for t in tasks) for k in PROCESSOR_COUNTS}
            total["task_seconds"] = round(sum(t["task_seconds"] for t in tasks), 3)
            processors.append({
                "name": name, "type": self.flow.processors[name].type.__name__, **total,
                "disabled": self.flow.processors[name].disabled,
                "running": sum(t["running"] for t in tasks), "idle": all(t["idle"] for t in tasks),
                "back_pressure": any(t["back_pressure"] for t in tasks),
                "stuck_seconds": stuck_seconds(tasks, self.settings.long_trigger_seconds),
                "recent_errors": sorted((e for t in tasks for e in t["recent_errors"]), key=lambda e: e["at"])[-5:],
            })
        queues = [dict(queue_status[c.id], source=c.source, destination=c.destination)
                  for c in self.flow.connections if c.id in queue_status]  # all, once started
        status: dict[str, Any] = {"flow": self.flow.name, "processors": processors, "queues": queues,
                                  "services": services_status(self.flow, hosted)}
        if self.cluster:
            status.update(node=self.cluster["local"], transfers=transfers, cluster_views=views,
                          receivers={c: getattr(e, "name", "") or repr(e) for c, e in self.receivers().items()})
        return status

    def is_idle(self, status: dict | None = None) -> bool:
        """Nothing queued (but before a disabled processor, where FlowFiles wait for it to be
        enabled), no processor found work, and every component is the one the flow was wired
        with (a repository that died a moment ago is not an idle flow: ``watch``)."""
        status = status or self.status()
        waiting = set(self.flow.processors) - set(self.flow.enabled_processors())
        return (status["started"] and not status.get("repairing") and all(p["idle"] or not p["running"] for p in status["processors"])
                and all(q["count"] == 0 or q["destination"] in waiting for q in status["queues"]) and not self.watch())

    def queue(self, queue_id: str) -> Link:
        return self.queues[queue_id]

    # ------------------------------------------------------------------ queue operations
    def _queue_link(self, queue_id: str) -> Link:
        if queue_id not in self.queues:
            raise NoSuchQueueError(f"flow '{self.flow.name}' has no connection '{queue_id}'; "
                                   f"its connections: {', '.join(sorted(self.queues)) or 'none'}")
        return self.queues[queue_id]

    def list_queue(self, queue_id: str, limit: int = 100) -> list[dict]:
        """The first ``limit`` queued FlowFiles in the order they would be delivered (swapped ones
        included): uuid, size, attributes, age, penalized (``flow_operations.describe``)."""
        entries = call_now(self._queue_link(queue_id), QueueHost.list_flowfiles, limit)
        now = now_millis()
        return [describe(f, position=i, swapped=swapped, now=now) for i, (f, swapped) in enumerate(entries, 1)]

    def empty_queue(self, queue_id: str, requested_by: str | None = None) -> dict:
        """Drop every queued FlowFile of a connection (not those being processed): removed from
        the write-ahead log and a DROP event each; their content goes at the next checkpoint."""
        queue = self._queue_link(queue_id)
        dropped = size = 0
        while True:
            batch = call_now(queue, QueueHost.take_for_drop, self.settings.swap_batch_size)
            if not batch:
                break
            uuids = [f.uuid for f in batch]
            events = drop_events(batch, queue_id, requested_by) if self.provenance_repository is not None else []
            try:  # the events' ids reserved with the removal, counted from the events themselves
                first = call_now(self._flowfile_service, FlowFileRepositoryService.commit, [], uuids, (), len(events))
            except Exception:
                call_now(queue, QueueHost.requeue, batch)
                raise
            if events:
                self.record_events(events, first)
            call_now(queue, QueueHost.acknowledge, uuids)
            dropped += len(batch)
            size += total_size(batch)
        return {"queue": queue_id, "dropped": dropped, "bytes": size}

    def record_events(self, events: list[ProvenanceEvent], first_id: int | None = None) -> int:
        """Record events made outside a session (a queue emptied, a replay) with ids from the log,
        as a commit's are (``first_id`` if its commit reserved them); returns the first id."""
        flowfiles = self._flowfile_service

        def reserve(count: int) -> int:
            return call_now(flowfiles, FlowFileRepositoryService.reserve_event_ids, count)

        encoded = encode_batch([event_fields(e) for e in events])
        first = reserve(encoded.count) if first_id is None else first_id
        register_numbered_now(reserve, self._provenance_service, [(first, encoded)], visible=True)
        return first

    def _align_event_ids(self) -> list[str]:
        """Have provenance take the commits' events from the log's outbox from now on (those a
        run that died left there first), then start its numbering where the log's is: event ids
        below the log's next one that never arrived (reserved outside a commit by a process that
        died before registering them) are not waited for, and the log never hands out an id
        provenance already holds. Returns the problems of damaged outbox entries taken now."""
        if self.provenance_repository is None:
            return []
        damaged = call_now(self.provenance_repository, ProvenanceRepositoryService.follow_log)["problems"]
        call_now(self.provenance_repository, ProvenanceRepositoryService.settle)
        held = call_now(self.provenance_repository, ProvenanceRepositoryService.stats)["next_event_id"]
        call_now(self.provenance_repository, ProvenanceRepositoryService.continue_from,
                 call_now(self._flowfile_service, FlowFileRepositoryService.raise_event_ids, held))
        return damaged

    def repositories(self) -> dict[str, Link | None]:
        return {"flowfile": self.flowfile_repository, "content": self.content_repository,
                "provenance": self.provenance_repository}

    # What ``start`` creates before anything uses it: the calls below come only after it.
    @property
    def _flowfile_service(self) -> Link:
        assert self.flowfile_repository is not None, f"flow '{self.flow.name}' has not started"
        return self.flowfile_repository

    @property
    def _content_service(self) -> Link:
        assert self.content_repository is not None, f"flow '{self.flow.name}' has not started"
        return self.content_repository

    @property
    def _provenance_service(self) -> Link:
        """Called for only while provenance is on (``provenance_enabled``)."""
        assert self.provenance_repository is not None, f"flow '{self.flow.name}' records no provenance"
        return self.provenance_repository

    @property
    def _placed(self) -> Placement:
        assert self.placement is not None, f"flow '{self.flow.name}' has not started"
        return self.placement

    # ------------------------------------------------------------------ stop
    def stop(self) -> dict:
        """Stop processors gracefully; queued FlowFiles stay in the write-ahead log for the next run.
        After a start that failed part-way, undo what it did instead (``_abandon_start``)."""
        if not self.started:
            return self._abandon_start()
        self._maintenance.stop()  # a repair under way finishes first
        left_running = self._stop_executors()
        self._stop_services()
        final = self.status()
        if left_running:
            final["left_running"] = left_running
        if self.flowfile_repository is not None:
            self.maintenance_once(force=True)
        if self.provenance_repository is not None:  # first: it takes the last events from the log
            call_now(self.provenance_repository, ProvenanceRepositoryService.close)
        if self.flowfile_repository is not None:
            call_now(self.flowfile_repository, FlowFileRepositoryService.close)
        self.hosting.close()
        self._repository_lock.release()
        self.started = False
        return final

    def _stop_executors(self) -> list[dict]:
        """Stop every executor, each task given ``stop_grace_seconds`` to end its trigger; the
        tasks left behind in ``on_trigger`` (name, instance, seconds in it), each also said in
        ``maintenance_errors``. An executor whose process died (or is restarting) has nothing
        left to stop: what its tasks held is in the log, where the next start finds it."""
        grace = self.settings.stop_grace_seconds
        pending = [e.call(Executor.stop, grace) for e in self.executors]
        left_running = []
        for executor, call in zip(self.executors, pending):
            try:
                statuses = resolve([call])[0]
            except Exception as err:
                if not component_lost(err):
                    raise
                self.maintenance_errors.append(f"executor {executor!r} was not running at stop "
                                               f"({type(err).__name__}); what it held is in the log")
                continue
            for task in statuses:
                if task["running"] and task["name"] in self.flow.processors:
                    left_running.append({"processor": task["name"], "instance": task["instance"],
                                         "trigger_seconds": task["trigger_seconds"]})
                    self.maintenance_errors.append(
                        f"processor '{task['name']}' was still in on_trigger {grace:g} s after the stop began "
                        f"({task['trigger_seconds']:g} s in it): left behind; the FlowFiles it holds were never "
                        f"committed and stay queued for the next run")
        return left_running

    def _abandon_start(self) -> dict:
        """Undo a start that failed part-way, so its own error is the one the user sees: stop the
        executors created, close the repositories that opened (a log that did not open is left
        as it is: never checkpointed), end the components, let go of the repository folder.
        Nothing here may raise over that error; what fails is kept in ``maintenance_errors``."""
        steps: list[Callable[[], object]] = [lambda: resolve([e.call(Executor.stop) for e in self.executors])]
        steps.append(self._stop_services)
        # newest first: provenance takes the log's last events before the log closes
        steps += [partial(call_now, link, OpenedRepository.close) for link in reversed(self._opened)]
        steps += [self.hosting.close, self._repository_lock.release]
        for step in steps:
            try:
                step()
            except Exception as err:  # the start's error is the one to report
                self.maintenance_errors.append(f"while undoing the failed start: {type(err).__name__}: {err}")
        self._opened.clear()
        return {}


def services_status(flow: Flow, hosted: list[dict]) -> list[dict]:
    """One row a controller service of the flow: its name, type, and in how many executors it is
    enabled (0: no running processor uses it)."""
    enabled: collections.Counter[str] = collections.Counter(
        row["name"] for statuses in hosted for row in statuses.get("services", []) if row["enabled"])
    return [{"name": node.path, "type": node.type.__name__, "enabled": enabled[node.path]}
            for node in flow.services.values()]


def service_refusal(error: BaseException) -> str | None:
    """The one line of a controller service that refused to enable (``ServiceEnableError``),
    wherever it was raised (Ray wraps it in each call that passed it on); None for another error."""
    refused = next((e for e in causes(error) if type(e) is ServiceEnableError), None)
    return None if refused is None else str(refused)
