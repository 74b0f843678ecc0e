"""Placement: which executor hosts which processor task and which connection queue.

A pure function of the flow and two settings, so it is tested without Ray and the controller only
carries it out. The rules (docs/architecture.md, "Placement"):

* ``placement="shared"`` (the default): ``executors`` executor actors per node, each running many
  processor tasks on threads. Processors are taken in flow order (sources first, then each one
  after the processors feeding it) and cut into contiguous runs, one run an executor, so most hops
  of a pipeline stay inside one executor. When the runs cannot be equal, the later runs are the
  longer ones: the first run holds the sources, which do the most work a FlowFile (content, record
  and CREATE event of each one), and a source sharing its process with the next processor made
  that executor the flow's bottleneck (docs/performance.md, "which executor gets the longer
  run"). A processor's concurrent tasks are threads of the same executor, as NiFi's are threads of
  one JVM: their hops stay local calls. Spread over executors, every extra task made hops between
  processes, and two tasks a processor ran slower than one (docs/performance.md); a processor
  whose Python work needs cores of its own says ``isolated``.
* a processor with ``isolated=True``, a ``num_cpus`` request or a ``runtime_env`` gets an executor
  of its own per task (its own process: heavy native code, a crash risk, a CPU reservation, its
  own packages).
* ``placement="isolated"``: every processor task in an executor of its own and every queue in an
  actor of its own (the first version's mapping, for flows that want full isolation).
* A connection's queue lives beside its consumer: in the executor of the consumer's first task.
* A disabled processor (``ProcessorNode.disabled``) has no task anywhere; the queues of its
  incoming connections live beside their source instead (in the first executor when the source
  is disabled too), where FlowFiles wait for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowactors.sdk.flow import Flow, ProcessorNode

PLACEMENTS = ("shared", "isolated")


@dataclass
class ExecutorPlan:
    """What one executor actor hosts."""

    index: int
    name: str
    tasks: list[tuple[str, int]] = field(default_factory=list)  # (processor, instance)
    queues: list[str] = field(default_factory=list)
    #: CPUs the actor asks Ray for (an isolated processor's ``num_cpus``; shared executors ask none)
    num_cpus: float = 0.0
    #: the Ray ``runtime_env`` the actor starts in (an isolated processor's own), if any
    runtime_env: dict | None = None
    #: (connection, node): the partitions of load-balanced connections whose sender runs here
    #: (a flow on several nodes: ``flowactors.engine.cluster``), beside their queues
    senders: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Placement:
    executors: list[ExecutorPlan]
    #: queues in actors of their own (``placement="isolated"``)
    queue_actors: list[str] = field(default_factory=list)

    def queue_home(self) -> dict[str, int]:
        """Queue id -> index of the executor hosting it (queues in actors of their own left out)."""
        return {q: plan.index for plan in self.executors for q in plan.queues}

    def task_home(self) -> dict[tuple[str, int], int]:
        return {task: plan.index for plan in self.executors for task in plan.tasks}


def flow_order(flow: Flow) -> list[str]:
    """Processor names, each after every processor feeding it where the graph allows (cycles and
    ties keep the order the flow added them in)."""
    names = list(flow.processors)
    feeding: dict[str, set[str]] = {n: set() for n in names}
    for c in flow.connections:
        if c.source != c.destination:
            feeding[c.destination].add(c.source)
    ordered: list[str] = []
    placed: set[str] = set()
    while len(ordered) < len(names):
        ready = [n for n in names if n not in placed and feeding[n] <= placed]
        if not ready:  # a cycle: take the earliest unplaced one and go on
            ready = [next(n for n in names if n not in placed)]
        for n in ready:
            ordered.append(n)
            placed.add(n)
    return ordered


def runtime_env_of(node: ProcessorNode) -> dict | None:
    """The Ray ``runtime_env`` a processor's tasks start in: the one its type needs (a NiFi Python
    processor's dependencies) with the node's own over it, their ``pip`` lists joined."""
    needed, own = node.type.runtime_env, node.runtime_env
    if not (needed and own):
        return needed or own or None
    merged = {**needed, **own}
    if isinstance(needed.get("pip"), list) and isinstance(own.get("pip"), list):
        merged["pip"] = list(dict.fromkeys([*needed["pip"], *own["pip"]]))
    return merged


def runtime_env_refusal(processors: list[str]) -> str:
    """What an engine without Ray says to processors that need a ``runtime_env`` of their own."""
    return (f"{', '.join(processors)} ask(s) for a runtime_env of their own (a NiFi Python processor's "
            f"dependencies make one), which only the Ray engine can give: run with engine='ray', or drop runtime_env")


def needs_own_actor(node: ProcessorNode) -> bool:
    """Whether a processor's tasks get actors of their own whatever the placement."""
    return bool(node.isolated or node.num_cpus or runtime_env_of(node))


def plan(flow: Flow, placement: str = "shared", executors: int = 2) -> Placement:
    """Decide the executors for ``flow`` (see the module docstring)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    enabled = set(flow.enabled_processors())
    order = [name for name in flow_order(flow) if name in enabled]
    plans: list[ExecutorPlan] = []
    home: dict[str, int] = {}  # processor -> the executor of its first task (its queues go there)
    shared = [n for n in order if placement == "shared" and not needs_own_actor(flow.processors[n])]
    count = max(1, min(executors, len(shared)))
    if shared:
        plans.extend(ExecutorPlan(i, f"executor.{i}") for i in range(count))
        short, longer = divmod(len(shared), count)   # the last ``longer`` runs hold one more
        runs = [i for i in range(count) for _ in range(short + (i >= count - longer))]
        for name, first in zip(shared, runs):
            home[name] = first
            plans[first].tasks.extend((name, instance) for instance in range(flow.processors[name].concurrent_tasks))
    for name in (n for n in order if n not in home):  # actors of their own, one a task
        node = flow.processors[name]
        home[name] = len(plans)
        plans.extend(ExecutorPlan(len(plans) + i, f"processor.{name}.{i}", [(name, i)], num_cpus=node.num_cpus,
                                  runtime_env=runtime_env_of(node)) for i in range(node.concurrent_tasks))
    result = Placement(plans)
    for c in flow.connections:
        if placement == "isolated":
            result.queue_actors.append(c.id)
        else:
            if not plans:   # every processor disabled: one executor holds the queues
                plans.append(ExecutorPlan(0, "executor.0"))
            plans[home.get(c.destination, home.get(c.source, 0))].queues.append(c.id)
    return result
