"""Placement: which executor hosts which processor task and queue, and both placements on real Ray."""

from __future__ import annotations

import gc
import os
import sys

import pytest
import ray.cloudpickle

from bench.flow_size import long_flow
from flowactors import Flow, Processor, Relationship
from flowactors.engine import gc_policy
from flowactors.engine.placement import flow_order, plan
from flowactors.processors import GenerateFlowFile, RouteOnAttribute, UpdateAttribute
from flowactors.driver.running import processor_totals, queue_totals, run_flow

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def branching_flow() -> Flow:
    flow = Flow("branching")
    # added out of order on purpose: placement follows the graph, not the order of ``add``
    route = flow.add(RouteOnAttribute, "route", properties={"big": "${fileSize:gt(10)}"},
                     auto_terminate=("unmatched",))
    tag = flow.add(UpdateAttribute, "tag", properties={"a": "1"}, concurrent_tasks=3)
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 10})
    heavy = flow.add(UpdateAttribute, "heavy", properties={"b": "2"}, isolated=True, auto_terminate=("success",))
    flow.connect(generate, tag, name="generated")
    flow.connect(tag, route, name="tagged")
    flow.connect(route, heavy, "big", name="big")
    return flow


def test_flow_order_puts_each_processor_after_those_feeding_it():
    assert flow_order(branching_flow()) == ["generate", "tag", "route", "heavy"]


def test_a_cycle_still_places_every_processor_once():
    flow = Flow("loop")
    a = flow.add(UpdateAttribute, "a", properties={"x": "1"})
    b = flow.add(UpdateAttribute, "b", properties={"x": "2"})
    flow.connect(a, b, name="ab")
    flow.connect(b, a, name="ba")
    assert sorted(flow_order(flow)) == ["a", "b"]


def test_shared_placement_cuts_the_pipeline_into_contiguous_runs():
    placement = plan(long_flow(60), "shared", executors=2)
    assert [p.name for p in placement.executors] == ["executor.0", "executor.1"]
    first, second = ([name for name, _ in p.tasks] for p in placement.executors)
    assert len(first) == len(second) == 30 and first[0] == "generate" and second[-1] == "last"
    # every queue beside its consumer: only the one hop between the runs leaves an executor
    home = placement.task_home()
    queue_home = placement.queue_home()
    consumers = {c.id: c.destination for c in long_flow(60).connections}
    producers = {c.id: c.source for c in long_flow(60).connections}
    assert all(queue_home[q] == home[(consumers[q], 0)] for q in consumers)
    assert sum(home[(producers[q], 0)] != queue_home[q] for q in producers) == 1
    assert placement.queue_actors == []


def test_runs_that_cannot_be_equal_leave_the_sources_the_shorter_one():
    def runs(processors: int, executors: int) -> list[list[str]]:
        return [[name for name, _ in p.tasks] for p in plan(long_flow(processors), "shared", executors).executors]

    # scenario 1's shape: the source alone, its two consumers together (docs/performance.md)
    assert runs(3, 2) == [["generate"], ["update0", "last"]]
    assert [len(r) for r in runs(5, 2)] == [2, 3]
    assert [len(r) for r in runs(7, 3)] == [2, 2, 3]
    for processors in range(2, 12):   # every executor gets a run, in flow order, sizes within one
        for executors in range(1, processors + 1):
            cut = runs(processors, executors)
            sizes = [len(r) for r in cut]
            assert len(cut) == executors and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes) and sum(cut, []) == flow_order(long_flow(processors))


def test_concurrent_tasks_share_their_executor_and_an_isolated_processor_gets_its_own():
    placement = plan(branching_flow(), "shared", executors=2)
    by_name = {p.name: p for p in placement.executors}
    assert set(by_name) == {"executor.0", "executor.1", "processor.heavy.0"}
    tag_homes = [(i, instance) for i, p in enumerate(placement.executors) for name, instance in p.tasks
                 if name == "tag"]
    home = placement.task_home()[("tag", 0)]
    assert tag_homes == [(home, 0), (home, 1), (home, 2)]  # three threads of one executor
    assert "generated" in placement.executors[home].queues  # its input queue beside all three
    assert by_name["processor.heavy.0"].tasks == [("heavy", 0)]
    assert by_name["processor.heavy.0"].queues == ["big"]  # its input queue lives beside it


def test_a_cpu_request_or_a_runtime_env_gives_a_processor_actors_of_its_own():
    flow = long_flow(4)
    flow.processors["update0"].num_cpus = 1
    flow.processors["update1"].runtime_env = {"env_vars": {"A": "1"}}
    flow.processors["update1"].concurrent_tasks = 2
    own = {p.name: p for p in plan(flow, "shared", executors=1).executors if p.name.startswith("processor.")}
    assert sorted(own) == ["processor.update0.0", "processor.update1.0", "processor.update1.1"]
    assert own["processor.update0.0"].num_cpus == 1 and own["processor.update0.0"].runtime_env is None
    assert own["processor.update1.1"].runtime_env == {"env_vars": {"A": "1"}}


def test_isolated_placement_is_an_actor_per_task_and_per_queue():
    placement = plan(branching_flow(), "isolated", executors=2)
    assert sorted(p.name for p in placement.executors) == [
        "processor.generate.0", "processor.heavy.0", "processor.route.0",
        "processor.tag.0", "processor.tag.1", "processor.tag.2"]
    assert all(len(p.tasks) == 1 and not p.queues for p in placement.executors)
    assert sorted(placement.queue_actors) == ["big", "generated", "tagged"]


def test_more_executors_than_processors_starts_only_as_many_as_needed():
    placement = plan(long_flow(3), "shared", executors=8)
    assert len(placement.executors) == 3


def test_an_unknown_placement_is_refused():
    with pytest.raises(ValueError, match="placement must be one of shared, isolated"):
        plan(long_flow(3), "everywhere")


@pytest.mark.ray
@pytest.mark.parametrize("placement", ["shared", "isolated"])
def test_both_placements_deliver_everything_with_the_actors_they_promise(ray_session, tmp_path, placement):
    import ray

    flow = long_flow(12, flowfiles=500, placement=placement)
    flow.name = f"placement-{placement}"
    seen: dict[str, str] = {}

    thresholds: dict[str, tuple] = {}

    def look(controller):
        for name in ray.util.list_named_actors():
            if name.startswith(flow.name + "."):
                actor = ray.get_actor(name)
                seen[name] = actor._ray_actor_creation_function_descriptor.class_name
                thresholds[name] = ray.get(actor.__ray_call__.remote(lambda _self: gc.get_threshold()))

    driver_thresholds = gc.get_threshold()
    final = run_flow(flow, tmp_path / "repository", timeout=120, on_started=look)
    assert not final.get("timed_out")
    # every actor moving FlowFiles collects garbage less often (gc_policy); the driver is left alone
    movers = {n: t for n, t in thresholds.items() if not n.endswith(".controller")}
    assert movers and set(movers.values()) == {gc_policy.THRESHOLDS}, thresholds
    assert gc.get_threshold() == driver_thresholds
    assert processor_totals(final)["last"]["flowfiles_in"] == 500
    assert all(q["count"] == 0 and q["total_in"] == 500 for q in queue_totals(final).values())
    kinds = {name.split(".")[1] for name in seen}
    if placement == "shared":
        assert {n for n in seen if ".executor." in n} == {f"{flow.name}.executor.0", f"{flow.name}.executor.1"}
        assert {seen[f"{flow.name}.executor.0"], seen[f"{flow.name}.executor.1"]} == {"Executor"}
        assert "processor" not in kinds and "queue" not in kinds
    else:
        assert sum(".processor." in n for n in seen) == 12 and sum(".queue." in n for n in seen) == 11
        assert "executor" not in kinds


class CheckEnvironment(Processor):
    """Routes each FlowFile to 'own' when its task runs with FLOWACTORS_TEST_ENV set, else 'missing'."""

    relationships = [Relationship("own"), Relationship("missing")]

    def on_trigger(self, context, session):
        where = "own" if os.environ.get("FLOWACTORS_TEST_ENV") == "own" else "missing"
        for flowfile in session.get_batch():
            session.transfer(flowfile, where)


@pytest.mark.ray
def test_a_processor_with_a_runtime_env_runs_in_an_actor_of_its_own_in_that_environment(ray_session, tmp_path):
    import ray

    flow = Flow("placement-env")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 10, "Batch Size": 10})
    isolated = flow.add(CheckEnvironment, "check isolated",
                        runtime_env={"env_vars": {"FLOWACTORS_TEST_ENV": "own"}}, auto_terminate=("missing",))
    shared = flow.add(CheckEnvironment, "check shared", auto_terminate=("own",))
    sink = flow.add(UpdateAttribute, "sink", properties={"seen": "yes"}, auto_terminate=("success",))
    flow.connect(generate, isolated, name="generated")
    flow.connect(isolated, shared, "own", name="isolated-own")
    flow.connect(shared, sink, "missing", name="shared-missing")
    names: list[str] = []
    final = run_flow(flow, tmp_path / "repository", timeout=120,
                     on_started=lambda controller: names.extend(ray.util.list_named_actors()))
    queues = queue_totals(final)
    assert queues["isolated-own"]["total_in"] == 10 and queues["shared-missing"]["total_in"] == 10
    assert "placement-env.processor.check isolated.0" in names
    assert not any(n.startswith("placement-env.processor.check shared") for n in names)
