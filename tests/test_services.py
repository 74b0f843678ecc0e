"""Controller services, the component kind: references checked when a flow validates (reach,
API, scope of process groups, circles), definitions that keep them, and the engines enabling them
before the processors that use them start and disabling them after they stopped."""

from __future__ import annotations

import pytest

from flowactors import Flow
from flowactors.driver.running import run_flow
from flowactors.engine.errors import FlowStartError
from flowactors.processors import GenerateFlowFile, UpdateAttribute
from flowactors.sdk.flow import FlowValidationError
from flowactors.sdk.services import ServiceEnableError
from flowactors.stateless import StatelessFlow
from flowactors.testing import ProcessorRunner, enable_service
from flowactors.sdk.services import LookupService
from tests.service_components import KeyValues, LookUp, NotALookup, Refuses


def lookup_flow(service=KeyValues, service_properties=None, *, reference="keys", group="", processor="look",
                journal=None):
    flow = Flow("lookups")
    flow.add_service(service, "keys", properties={"a": "apple"} if service_properties is None else service_properties, group=group)
    source = flow.add(GenerateFlowFile, "source", properties={"Batch Size": "3"}, run_schedule="10 min")
    key = flow.add(UpdateAttribute, "key", properties={"key": "a"})
    look = flow.add(LookUp, processor, properties={"Lookup": reference, **({"Journal": journal} if journal else {})},
                    auto_terminate=["success"])
    flow.connect(source, key)
    flow.connect(key, look)
    return flow


def looked_up(count):
    """A run's ``until``: the processor 'look' took ``count`` FlowFiles."""
    return lambda status: any(p["name"] == "look" and p["flowfiles_in"] >= count for p in status["processors"])


def test_a_processor_reaches_its_service_by_name():
    runner = ProcessorRunner(LookUp, {"Lookup": "keys"}, services={"keys": (KeyValues, {"a": "apple"})})
    runner.enqueue(b"", {"key": "a"})
    runner.enqueue(b"", {"key": "b"})
    runner.run()
    assert [f.attributes["value"] for f in runner.output("success")] == ["apple", "None"]


def test_a_reference_to_a_service_the_flow_lacks_names_what_it_has():
    with pytest.raises(FlowValidationError) as caught:
        lookup_flow(reference="kyes").validate()
    assert ("processor 'look': property 'Lookup' names controller service 'kyes', which the flow does not have "
            "in reach (a LookupService it has: keys)") in caught.value.problems


def test_a_service_of_the_wrong_kind_is_refused_naming_both_apis():
    with pytest.raises(FlowValidationError) as caught:
        lookup_flow(NotALookup, {}).validate()
    assert caught.value.problems == [
        "processor 'look': property 'Lookup' needs a LookupService, but controller service 'keys' is a "
        "NotALookup (SSLContextService)"]


def test_services_of_a_group_are_seen_inside_it_and_not_outside():
    assert lookup_flow(group="Main", processor="Main/Inner/look").problems() == []
    with pytest.raises(FlowValidationError, match="'keys', which the flow does not have in reach"):
        lookup_flow(group="Main", processor="Other/look").validate()
    assert lookup_flow(group="Main", reference="Main/keys", processor="Main/Inner/look").problems() == []  # by path


def test_the_innermost_service_of_a_name_wins():
    flow = lookup_flow(processor="Main/look")
    flow.add_service(KeyValues, "keys", properties={"a": "avocado"}, group="Main")
    assert flow.services_used_by(["Main/look"])[0].group == "Main"
    assert flow.services_used_by(["key"]) == []


def test_services_that_use_each_other_in_a_circle_are_refused():
    flow = lookup_flow(service_properties={"Fallback": "other"})
    flow.add_service(KeyValues, "other", properties={"Fallback": "keys"})
    with pytest.raises(FlowValidationError, match="controller services use each other in a circle: "
                                                  "keys -> other -> keys"):
        flow.validate()


def test_a_service_property_problem_names_the_service():
    flow = lookup_flow(service_properties={"Fallback": "missing"})
    with pytest.raises(FlowValidationError, match="controller service 'keys': property 'Fallback' names "
                                                  "controller service 'missing'"):
        flow.validate()


def test_a_definition_keeps_the_services_and_their_groups():
    flow = lookup_flow(group="Main", processor="Main/look")
    again = Flow.from_json(flow.to_json())
    assert [(s.path, s.type, s.properties) for s in again.services.values()] == [("Main/keys", KeyValues, {"a": "apple"})]
    assert again.problems() == []


def test_a_definition_names_standard_services_without_a_module_and_says_what_it_does_not_know():
    data = lookup_flow().to_dict()
    data["controller_services"][0]["type"] = "NoSuchReader"
    with pytest.raises(FlowValidationError, match="controller service 'keys': 'NoSuchReader' is not a controller "
                                                  "service flowactors has \\(did you mean 'CSVReader'\\?\\)"):
        Flow.from_dict(data)


def test_enable_order_and_disable_order_around_the_processors_in_process(tmp_path):
    events = tmp_path / "events"
    flow = lookup_flow(service_properties={"Fallback": "fallback", "Journal": str(events)}, journal=str(events))
    flow.add_service(KeyValues, "fallback", properties={"b": "banana", "Journal": str(events)})
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60, until=looked_up(3))
    assert not final.get("timed_out") and final["processors"][-1]["flowfiles_in"] == 3
    assert events.read_text().split("\n")[:-1] == [
        "enabled fallback", "enabled keys", "scheduled look", "stopped look", "disabled keys", "disabled fallback"]
    assert final["services"] == [{"name": "keys", "type": "KeyValues", "enabled": 0},
                                 {"name": "fallback", "type": "KeyValues", "enabled": 0}]


def test_a_service_that_refuses_to_enable_stops_the_start_with_its_reason(tmp_path):
    with pytest.raises(FlowStartError) as caught:
        run_flow(lookup_flow(Refuses, {}), tmp_path / "repository", engine="in-process", timeout=60)
    assert str(caught.value) == ("controller service 'keys' (Refuses) could not be enabled: the lookup file "
                                 "/nowhere/keys.csv cannot be read")


def test_the_stateless_engine_enables_services_for_its_life(tmp_path):
    events = tmp_path / "events"
    flow = Flow("stateless-lookups")
    flow.add_service(KeyValues, "keys", properties={"a": "apple", "Journal": str(events)})
    entry = flow.add_input_port("in")
    look = flow.add(LookUp, "look", properties={"Lookup": "keys", "Journal": str(events)})
    out = flow.add_output_port("out")
    flow.connect(entry, look)
    flow.connect(look, out)
    with StatelessFlow(flow.validate()) as stateless:
        result = stateless.trigger([(b"", {"key": "a"})])
        assert [o.attributes["value"] for o in result.outputs["out"]] == ["apple"]
    assert events.read_text().split("\n")[:-1] == ["enabled keys", "scheduled look", "stopped look", "disabled keys"]
    with pytest.raises(ServiceEnableError, match="controller service 'keys' \\(Refuses\\) could not be enabled"):
        flow.services["keys"].type, flow.services["keys"].properties = Refuses, {}
        StatelessFlow(flow)


def test_enable_service_enables_what_a_service_names_first():
    service = enable_service(KeyValues, {"Fallback": "other"}, services={"other": (KeyValues, {"b": "banana"})})
    assert service.lookup({"key": "b"}) == "banana"
    with pytest.raises(ValueError, match="property 'Fallback' needs a LookupService, but controller service "
                                         "'other' is a NotALookup"):
        enable_service(KeyValues, {"Fallback": "other"}, services={"other": (NotALookup, {})})


@pytest.mark.ray
def test_on_ray_each_executor_enables_its_services_and_a_refusal_is_one_line(ray_session, tmp_path):
    events = tmp_path / "events"
    final = run_flow(lookup_flow(service_properties={"a": "apple", "Journal": str(events)}, journal=str(events)),
                     tmp_path / "repository", timeout=120, until=looked_up(3),
                     settings={"executors": 1})
    assert not final.get("timed_out") and final["processors"][-1]["flowfiles_in"] == 3
    assert events.read_text().split("\n")[:-1] == ["enabled keys", "scheduled look", "stopped look", "disabled keys"]
    with pytest.raises(FlowStartError) as caught:
        run_flow(lookup_flow(Refuses, {}), tmp_path / "refused", timeout=120)
    assert str(caught.value) == ("controller service 'keys' (Refuses) could not be enabled: the lookup file "
                                 "/nowhere/keys.csv cannot be read")


def test_a_service_of_another_group_is_out_of_reach_even_by_its_path():
    with pytest.raises(FlowValidationError, match="names controller service 'Main/keys', which the flow does not "
                                                  "have in reach"):
        lookup_flow(group="Main", reference="Main/keys", processor="Other/look").validate()


def test_validate_lists_each_service_and_who_uses_it(tmp_path, capsys):
    from flowactors.cli.main import main
    flow = lookup_flow(service_properties={"Fallback": "spare"})
    flow.add_service(KeyValues, "spare", properties={})
    flow.add_service(KeyValues, "unused", properties={})
    path = tmp_path / "flow.json"
    path.write_text(flow.to_json())
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "flow 'lookups' is valid: 3 processors, 2 connections, 3 controller services",
        "  service keys (KeyValues): used by look",
        "  service spare (KeyValues): used by look",
        "  service unused (KeyValues): used by no processor"]


def numbered_flow(out, journal, *, sources=2, count=20):
    """Sources of ``count`` FlowFiles each, numbered by their own Number processor from one shared
    Sequence, stored as a file named by the number (a number given twice would fail its store)."""
    from flowactors.processors import PutFile
    from tests.service_components import Number, Sequence
    flow = Flow("numbers", {"executors": 2})
    flow.add_service(Sequence, "numbers", properties={"Journal": str(journal)})
    store = flow.add(PutFile, "store", properties={"Directory": str(out), "Conflict Resolution Strategy": "fail"},
                     auto_terminate=["success", "failure"])
    for i in range(sources):
        source = flow.add(GenerateFlowFile, f"source-{i}", properties={"Batch Size": str(count)},
                          run_schedule="10 min")
        number = flow.add(Number, f"number-{i}", properties={"Numbers": "numbers"})
        naming = flow.add(UpdateAttribute, f"name-{i}", properties={"filename": "${number}"})
        flow.connect(source, number)
        flow.connect(number, naming)
        flow.connect(naming, store)
    return flow


def stored(count):
    return lambda status: any(p["name"] == "store" and p["flowfiles_in"] >= count for p in status["processors"])


@pytest.mark.parametrize("engine", ["in-process", pytest.param("ray", marks=pytest.mark.ray)])
def test_a_service_with_state_to_share_is_one_instance_for_every_executor(engine, tmp_path, request):
    if engine == "ray":
        request.getfixturevalue("ray_session")
    out, journal = tmp_path / "out", tmp_path / "journal"
    final = run_flow(numbered_flow(out, journal), tmp_path / "repository", engine=engine, timeout=120, until=stored(40))
    assert not final.get("timed_out") and sum(p["errors"] for p in final["processors"]) == 0
    assert sorted(int(f.name) for f in out.iterdir()) == list(range(1, 41))   # each number given once
    lines = journal.read_text().splitlines()
    assert [line.split(" in ")[0] for line in lines] == ["enabled numbers", "disabled numbers"]
    assert final["services"] == [{"name": "numbers", "type": "Sequence", "enabled": 0}]   # after the stop


def test_a_definition_never_holds_a_services_sensitive_value():
    from flowactors.sdk.processor import PropertyDescriptor
    from flowactors.sdk.services import ControllerService

    class Vault(ControllerService, LookupService):
        properties = (PropertyDescriptor("Password", sensitive=True),)

    flow = lookup_flow()
    flow.add_service(Vault, "vault", properties={"Password": "hunter2"})
    with pytest.raises(FlowValidationError, match="controller service 'vault': property 'Password' is sensitive, "
                                                  "and a definition never holds a sensitive value"):
        flow.to_json()
    flow.services["vault"].properties["Password"] = "#{vault.password}"   # a parameter's name is fine
    assert "#{vault.password}" in flow.to_json()
