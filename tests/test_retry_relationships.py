"""Retried relationships (NiFi 1.16+): the ProcessorNode fields, their validation and their place
in a definition; what a commit does with a FlowFile routed to a retried relationship
(``flowactors.engine.retry``), on the in-process, stateless and Ray engines."""

from __future__ import annotations

import pytest

from flowactors import Flow, FlowValidationError, Processor, run_flow
from flowactors.driver.loading import load_definition
from flowactors.engine.stateless_engine import StatelessTask
from flowactors.engine.task import ProcessorTask
from flowactors.processors import CompressContent, GenerateFlowFile, UpdateAttribute
from flowactors.sdk.flow import ProcessorNode
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.sdk.settings import Settings
from flowactors.ops.queue_admin import list_queue
from flowactors.testing import ProcessorRunner
from nifi_flows import STANDARD, connection, group, processor, snapshot
from repositories.model import now_millis


def retry_flow(**retry) -> Flow:
    flow = Flow("retrying")
    generate = flow.add(GenerateFlowFile, "generate")
    compress = flow.add(CompressContent, "compress", properties={"Compression Format": "gzip"},
                        auto_terminate=["success", "failure"], **retry)
    flow.connect(generate, compress)
    return flow


def test_retry_fields_default_as_nifi_and_round_trip_through_a_definition():
    node = retry_flow().processors["compress"]
    assert (node.retried_relationships, node.retry_count, node.backoff_mechanism, node.max_backoff_period) == (
        (), 10, "PENALIZE_FLOWFILE", "10 mins")
    flow = retry_flow(retried_relationships=["failure"], retry_count=3, backoff_mechanism="YIELD_PROCESSOR",
                      max_backoff_period="2 mins")
    again = Flow.from_json(flow.validate().to_json())
    node = again.processors["compress"]
    assert node.retried_relationships == ("failure",)
    assert (node.retry_count, node.backoff_mechanism, node.max_backoff_period) == (3, "YIELD_PROCESSOR", "2 mins")
    assert again.to_dict() == flow.to_dict()
    again.validate()


def test_one_retried_relationship_may_be_given_as_a_string():
    assert retry_flow(retried_relationships="failure").processors["compress"].retried_relationships == ("failure",)


@pytest.mark.parametrize("retry, problem", [
    ({"retried_relationships": ["oops"]}, "cannot retry unknown relationship 'oops' (it has: failure, success)"),
    ({"retry_count": -1}, "retry_count must be a whole number of 0 or more, not -1"),
    ({"backoff_mechanism": "WAIT"}, "backoff_mechanism must be one of PENALIZE_FLOWFILE, YIELD_PROCESSOR"),
    ({"max_backoff_period": "soon"}, "max_backoff_period:"),
])
def test_a_wrong_retry_setting_is_one_problem_naming_the_processor(retry, problem):
    with pytest.raises(FlowValidationError) as caught:
        retry_flow(**retry).validate()
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("processor 'compress': ")
    assert problem in caught.value.problems[0]


def test_a_definition_with_a_retry_field_of_the_wrong_kind_names_it():
    data = retry_flow().to_dict()
    data["processors"][1]["retried_relationships"] = "failure"
    data["processors"][1]["retry_count"] = "3"
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(data)
    assert caught.value.problems == [
        "processor 'compress': 'retried_relationships' must be a list of names, not 'failure'",
        "processor 'compress': 'retry_count' must be a whole number, not '3'"]


def test_an_older_definition_without_the_fields_takes_the_defaults():
    data = retry_flow().to_dict()
    for entry in data["processors"]:
        for key in ("retried_relationships", "retry_count", "backoff_mechanism", "max_backoff_period"):
            del entry[key]
    assert Flow.from_dict(data).processors["compress"].retry_count == 10


def test_update_attribute_may_retry_success():
    flow = Flow("f")
    generate = flow.add(GenerateFlowFile, "generate")
    update = flow.add(UpdateAttribute, "update", retried_relationships=["success"], auto_terminate=["success"])
    flow.connect(generate, update)
    assert flow.problems() == []


# ---------------------------------------------------------------------------------- the engine's retry
class Flaky(Processor):
    """Marks each FlowFile and sends it to failure when it has ``bad``, else to success; with
    ``children``, a clone of each goes to failure too; a ``made`` attribute: a FlowFile made
    from nothing goes to failure as well."""

    relationships = (SUCCESS, FAILURE)

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            flowfile = session.put_attribute(flowfile, "seen", "yes")
            if flowfile.attributes.get("children"):
                session.transfer(session.clone(flowfile), FAILURE)
            if flowfile.attributes.get("made"):
                session.transfer(session.create(), FAILURE)
            session.transfer(flowfile, FAILURE if flowfile.attributes.get("bad") else SUCCESS)


ATTRIBUTE = "retryCount.Flaky"


def runner_and_task(engine: str = "in-process", task_type: type[ProcessorTask] = ProcessorTask, **retry):
    runner = ProcessorRunner(Flaky, name="Flaky", engine=engine)
    retry.setdefault("retried_relationships", ("failure",))
    node = ProcessorNode("Flaky", Flaky, {}, **retry)
    return runner, task_type("test", node, 0, runner.backend, Settings())


def queued(runner: ProcessorRunner) -> list:
    return runner.queues["input"].listing(100)


def test_a_retried_flowfile_returns_as_taken_penalized_ever_longer_then_goes_as_routed():
    runner, task = runner_and_task(retry_count=3, penalty_duration="1 sec", max_backoff_period="3 sec")
    for retries in ("0", "1", "2", "3"):   # retried so far: the count is the attribute's
        runner.enqueue(retries.encode(), {"bad": "1", ATTRIBUTE: retries})
    before = now_millis()
    task.trigger()
    back = {runner.read(f): f for f in queued(runner)}
    assert sorted(back) == [b"0", b"1", b"2"]
    assert [back[k].attributes[ATTRIBUTE] for k in sorted(back)] == ["1", "2", "3"]
    assert all("seen" not in f.attributes for f in back.values())   # as taken: the trigger's change undone
    # 1 s, doubled at each retry, then capped by max_backoff_period
    assert [round((back[k].penalized_until - before) / 1000) for k in sorted(back)] == [1, 2, 3]
    [routed] = runner.output("failure")   # retried three times already: goes as routed
    assert runner.read(routed) == b"3" and ATTRIBUTE not in routed.attributes and routed.attributes["seen"] == "yes"
    assert {e.flowfile_uuid for e in runner.events()} == {routed.uuid}   # a retry leaves no trace in provenance


class Rewrite(Processor):
    """Gives each FlowFile new content, then sends it to failure (retried) or, marked ``keep``, to success."""

    relationships = (SUCCESS, FAILURE)

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            flowfile = session.write_bytes(flowfile, b"rewritten " + session.read_bytes(flowfile))
            session.transfer(flowfile, SUCCESS if flowfile.attributes.get("keep") else FAILURE)


def test_content_written_for_a_retried_flowfile_is_deleted_or_released_at_the_next_checkpoint(tmp_path):
    """On the write-ahead log: the new content a retried FlowFile was given goes with it (the
    FlowFile returns with its own content): deleted at once when the retry empties the session,
    as a rollback's; released by the next checkpoint when the session commits other FlowFiles;
    never kept until a restart."""
    from repositories.content import FileSystemContentRepository
    from repositories.flowfile import WriteAheadFlowFileRepository
    content = FileSystemContentRepository(tmp_path / "content")
    with WriteAheadFlowFileRepository(tmp_path / "flowfile") as wal:
        runner = ProcessorRunner(Rewrite, name="Rewrite", content=content, flowfile_repository=wal)
        node = ProcessorNode("Rewrite", Rewrite, {}, retried_relationships=("failure",), penalty_duration="0 sec")
        task = ProcessorTask("test", node, 0, runner.backend, Settings())
        runner.enqueue(b"x")
        task.trigger()
        [back] = queued(runner)
        assert runner.read(back) == b"x" and back.attributes["retryCount.Rewrite"] == "1"
        assert claim_files(tmp_path) == {b"x"}   # the session held nothing more: deleted as a rollback's
        runner.enqueue(b"y", {"keep": "1"})
        task.trigger()   # the retried one again, beside one that goes through, in one claim or two
        [passed] = runner.output("success")
        assert runner.read(passed) == b"rewritten y" and runner.read(queued(runner)[0]) == b"x"
        # the retried content is in a claim a committed FlowFile references (the session's claims
        # are shared), or in one of its own that nothing references and a checkpoint releases
        written = {passed.claim.resource} | set(wal.checkpoint()) | set(wal.checkpoint())
        assert b"rewritten x" in b"".join(content.path_of(r).read_bytes() for r in written)


def claim_files(root) -> set[bytes]:
    return {p.read_bytes() for p in (root / "content").rglob("*") if p.is_file()}


def test_the_other_flowfiles_of_the_session_commit_as_usual():
    runner, task = runner_and_task(penalty_duration="0 sec")
    runner.enqueue(b"good")
    runner.enqueue(b"bad", {"bad": "1"})
    task.trigger()
    assert runner.contents("success") == [b"good"]
    [back] = queued(runner)
    assert back.attributes[ATTRIBUTE] == "1"
    assert [e.flowfile_uuid for e in runner.events()] == [runner.output("success")[0].uuid]


def test_a_flowfile_leaving_through_another_relationship_loses_its_retry_count():
    runner, task = runner_and_task()
    runner.enqueue(b"x", {ATTRIBUTE: "4"})
    task.trigger()
    [passed] = runner.output("success")
    assert ATTRIBUTE not in passed.attributes


def test_children_and_parents_are_retried_together_and_leave_no_events():
    runner, task = runner_and_task(penalty_duration="0 sec")
    original = runner.enqueue(b"parent", {"children": "1"})   # the clone goes to failure, the parent to success
    task.trigger()
    assert runner.output("success") == [] and runner.output("failure") == []
    [back] = queued(runner)
    assert back.uuid == original.uuid and back.attributes[ATTRIBUTE] == "1"
    assert runner.events() == []


def test_a_flowfile_made_from_nothing_is_never_retried():
    runner, task = runner_and_task(penalty_duration="0 sec")
    runner.enqueue(b"x", {"made": "1"})
    task.trigger()
    [made] = runner.output("failure")
    assert made.size == 0 and runner.output("success") != []
    assert queued(runner) == []


def test_yield_processor_yields_ever_longer_and_penalizes_nothing():
    runner, task = runner_and_task(backoff_mechanism="YIELD_PROCESSOR", yield_duration="2 sec",
                                   max_backoff_period="5 sec", retry_count=5)
    paused: list[float] = []
    task._pause = paused.append   # record the yields instead of waiting them out
    runner.enqueue(b"x", {"bad": "1"})
    for _ in range(3):
        task.cycle()
        assert queued(runner)[0].penalized_until == 0
    assert paused == [2.0, 4.0, 5.0]


def test_retry_count_zero_never_retries():
    runner, task = runner_and_task(retry_count=0)
    runner.enqueue(b"x", {"bad": "1"})
    task.trigger()
    assert len(runner.output("failure")) == 1


def test_on_the_stateless_engine_a_retry_waits_for_nothing():
    """Stateless NiFi's queues ignore penalties: the FlowFile is retried at once, in the same trigger."""
    runner, task = runner_and_task("stateless", StatelessTask, retry_count=2, penalty_duration="30 sec")
    runner.enqueue(b"x", {"bad": "1"})
    task.trigger()
    [back] = queued(runner)
    assert back.attributes[ATTRIBUTE] == "1" and back.penalized_until == 0
    task.trigger()
    task.trigger()
    [routed] = runner.output("failure")
    assert ATTRIBUTE not in routed.attributes


def test_retry_on_ray(ray_session):
    runner, task = runner_and_task("ray", retry_count=1, penalty_duration="0 sec")
    runner.enqueue(b"x", {"bad": "1"})
    task.trigger()
    [back] = queued(runner)
    assert back.attributes[ATTRIBUTE] == "1"
    task.trigger()
    [routed] = runner.output("failure")
    assert ATTRIBUTE not in routed.attributes and runner.read(routed) == b"x"


def test_a_nifi_flow_with_a_retried_relationship_a_cron_source_and_a_disabled_processor_runs(tmp_path):
    """Exported from NiFi: a CRON-driven source, a RouteOnAttribute retrying 'unmatched' twice,
    and a disabled UpdateAttribute the FlowFile then waits before."""
    main = "g-0001-0000-0000-000000000000"
    generate = processor(main, "Generate", STANDARD + "GenerateFlowFile", {"Batch Size": "1"},
                         schedule="* * * * * ?", strategy="CRON_DRIVEN")
    route = processor(main, "Route", STANDARD + "RouteOnAttribute",
                      {"Routing Strategy": "Route to Property name", "never": "${literal('no'):equals('yes')}"},
                      auto_terminate=("never",), retriedRelationships=["unmatched"], retryCount=2,
                      penaltyDuration="0 sec")
    update = processor(main, "Update", "org.apache.nifi.processors.attributes.UpdateAttribute", {},
                       scheduledState="DISABLED")
    flow = load_definition(snapshot(group(main, "Main", None, None, processors=[generate, route, update],
                                          connections=[connection(main, generate, route, ("success",)),
                                                       connection(main, route, update, ("unmatched",),
                                                                  name="waiting")]), {}))
    assert flow.processors["Generate"].scheduling_strategy == "CRON_DRIVEN"
    repository = tmp_path / "repository"
    final = run_flow(flow, repository, engine="in-process", timeout=30,
                     until=lambda status: any(q["count"] for q in status["queues"] if q["id"] == "waiting"))
    routes = {p["name"]: p for p in final["processors"]}
    assert routes["Route"]["tasks"] >= 3 and routes["Update"]["disabled"]   # two retries, then routed
    [waiting] = list_queue(repository, "waiting", 1)
    assert not any(key.startswith("retryCount.") for key in waiting["attributes"])
