"""The Flow SDK: building, validating (every problem at once) and the JSON definition."""

from __future__ import annotations

import orjson
import pytest

from flowactors import Flow, FlowValidationError, Processor, PropertyDescriptor, Relationship
from flowactors.processors import (GenerateFlowFile, MergeContent, PutFile, RouteOnAttribute, SplitText,
                                   UpdateAttribute)


def valid_flow() -> Flow:
    flow = Flow("valid", settings={"checkpoint_interval": 5.0})
    generate = flow.add(GenerateFlowFile, "generate", properties={"File Size": "1 KB", "Batch Size": 10})
    route = flow.add(RouteOnAttribute, "route", properties={"big": "${fileSize:gt(100)}"},
                     auto_terminate=["unmatched"], concurrent_tasks=2, batch_size=500)
    put = flow.add(PutFile, "put", properties={"Directory": "/tmp/out"}, auto_terminate=["success", "failure"])
    flow.connect(generate, route, back_pressure_object_threshold=50, prioritizers=["PriorityAttribute"])
    flow.connect(route, put, "big", flowfile_expiration="5 mins")
    return flow


def test_valid_flow_validates():
    assert valid_flow().validate().problems() == []


def test_one_error_lists_every_problem():
    flow = Flow("broken")
    generate = flow.add(GenerateFlowFile, "generate", properties={"File Size": "lots", "Colour": "${a:nope()}"})
    split = flow.add(SplitText, "split", properties={}, run_schedule="soon", concurrent_tasks=0)
    flow.add(UpdateAttribute, "orphan")
    flow.connect(generate, split, "success")
    flow.connect(split, "nowhere", ["splits", "bogus"])
    with pytest.raises(FlowValidationError) as caught:
        flow.validate()
    problems = caught.value.problems
    text = str(caught.value)
    expected = [
        "processor 'generate': property 'File Size'",
        "'Colour'",                                          # dynamic property: the expression is bad
        "processor 'split': property 'Line Split Count' is required",
        "processor 'split': run_schedule",
        "processor 'split': concurrent_tasks",
        "its destination 'nowhere' is not a processor",
        "'split' has no relationship 'bogus'",
        "processor 'split': relationship 'original' is neither connected nor auto-terminated",
        "processor 'split': relationship 'failure' is neither connected nor auto-terminated",
        "processor 'orphan' needs an incoming connection",
        "processor 'orphan': relationship 'success' is neither connected nor auto-terminated",
    ]
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert f"{len(problems)} problem(s)" in text and all(p in text for p in problems)


def test_expression_syntax_error_names_the_position():
    flow = Flow("el")
    flow.add(GenerateFlowFile, "g", properties={"attr": "${filename:toUpper(}"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError, match="position"):
        flow.validate()


def test_duplicate_names_and_source_with_input_are_problems():
    flow = Flow("dupes")
    a = flow.add(GenerateFlowFile, "same", auto_terminate=["success"])
    b = flow.add(GenerateFlowFile, "same", auto_terminate=["success"])
    flow.connect(a, b)
    flow.connect(a, b)
    problems = flow.problems()
    assert any("two processors are named 'same'" in p for p in problems)
    assert any("two connections are named" in p for p in problems)
    assert any("is a source and accepts no incoming connection" in p for p in problems)


def test_bad_queue_settings_are_problems():
    flow = valid_flow()
    flow.connections[0].prioritizers = ("Loudest",)
    flow.connections[0].back_pressure_data_size_threshold = "a lot"
    problems = flow.problems()
    assert any("unknown prioritizer 'Loudest'" in p for p in problems)
    assert any("back_pressure_data_size_threshold" in p for p in problems)


def test_unknown_scheduling_setting_is_refused_at_once():
    with pytest.raises(TypeError) as caught:
        Flow("x").add(GenerateFlowFile, "g", run_shedule="1 sec")
    assert str(caught.value) == "processor 'g': 'run_shedule' is not a processor field; did you mean 'run_schedule'?"
    with pytest.raises(TypeError) as caught:
        Flow("x").connect("a", "b", prioritiser=["FIFO"])
    assert str(caught.value) == "connection 'a.success.b': 'prioritiser' is not a connection field; " \
                                "did you mean 'prioritizers'?"
    with pytest.raises(TypeError, match="not a Processor"):
        Flow("x").add(dict, "g")


def test_json_round_trip_is_exact():
    flow = valid_flow()
    again = Flow.from_json(flow.to_json())
    assert again.to_dict() == flow.to_dict()
    assert again.processors["route"].type is RouteOnAttribute
    assert again.processors["route"].concurrent_tasks == 2
    assert again.connections[0].prioritizers == ("PriorityAttribute",)
    again.validate()


def test_json_with_bare_type_names_and_save(tmp_path):
    data = valid_flow().to_dict()
    data["processors"][0]["type"] = "GenerateFlowFile"
    flow = Flow.from_dict(data)
    assert flow.processors["generate"].type is GenerateFlowFile
    path = tmp_path / "flow.json"
    flow.save(path)
    assert Flow.from_json(path.read_text()).to_dict() == flow.to_dict()


def test_bad_json_definitions_give_clear_errors():
    with pytest.raises(FlowValidationError, match="not valid JSON"):
        Flow.from_json("{nope")
    with pytest.raises(FlowValidationError, match="definition versions 1, 2"):
        Flow.from_json('{"flowactors_flow": 99, "name": "x"}')
    data = valid_flow().to_dict()
    data["processors"][0]["type"] = "no.such.module.Proc"
    data["processors"][1]["type"] = "flowactors.sdk.flow.Flow"
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(data)
    assert len(caught.value.problems) == 2
    assert "cannot import 'no.such.module'" in caught.value.problems[0]
    assert "'flowactors.sdk.flow.Flow' is a class, but not a processor (a subclass of " \
           "flowactors.sdk.processor.Processor)" in caught.value.problems[1]
    data["processors"][0]["type"], data["processors"][1]["type"] = "GenerateFlowFil", "NoSuchThing"
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(data)
    assert "'GenerateFlowFil' is not a processor flowactors has (did you mean 'GenerateFlowFile'?)" \
        in caught.value.problems[0]
    assert "'NoSuchThing' is not a processor flowactors has (the docs list them)" in caught.value.problems[1]


def test_dynamic_relationships_come_from_properties():
    flow = Flow("dyn")
    g = flow.add(GenerateFlowFile, "g")
    r = flow.add(RouteOnAttribute, "r", properties={"small": "${fileSize:lt(10)}"}, auto_terminate=["unmatched"])
    m = flow.add(MergeContent, "m", auto_terminate=["merged", "original", "failure"])
    flow.connect(g, r)
    flow.connect(r, m, "small")
    assert flow.problems() == []
    flow.connect(r, m, "large", name="large")
    assert any("no relationship 'large'" in p for p in flow.problems())


def test_custom_processor_declares_everything():
    class Shout(Processor):
        properties = [PropertyDescriptor("Level", required=True, allowable_values=("loud", "louder"))]
        relationships = [Relationship("success")]

        def on_trigger(self, context, session):
            pass

    assert Shout.validate_properties({"Level": "quiet"}) == ["property 'Level' is 'quiet'; allowed: loud, louder"]
    assert Shout.validate_properties({"Level": "loud"}) == []
    assert Shout.validate_properties({"Level": "loud", "Extra": "x"}) == [
        "'Extra' is not a property of Shout (its properties: Level)"]


def test_bad_settings_are_problems_of_the_flow():
    flow = valid_flow()
    flow.settings.update(checkpoint_intervall=5, always_sync="yes")
    problems = flow.problems()
    assert "unknown setting 'checkpoint_intervall'; did you mean 'checkpoint_interval'?" in problems
    assert "setting 'always_sync' must be true or false, not 'yes'" in problems


def test_a_definitions_mistakes_name_the_processor_and_property():
    data = valid_flow().to_dict()
    data["procesors"] = []
    data["settings"] = ["always_sync"]
    data["processors"][0]["properties"].update({"Batch Size": None, "Data Format": ["Text"]})
    data["processors"][0]["batch_sise"] = 5
    data["processors"][1]["properties"] = "big"
    data["connections"][0]["prioritiser"] = ["FIFO"]
    del data["connections"][1]["destination"]
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_json(orjson.dumps(data))
    assert caught.value.problems == [
        "'procesors' is not a field of the flow definition; did you mean 'processors'?",
        "'settings' must be an object of setting names and values, not a list",
        "processor 'generate': 'batch_sise' is not a processor field; did you mean 'batch_size'?",
        "processor 'route': 'properties' must be an object of property names and values, not 'big'",
        "connection 'generate.success.route': 'prioritiser' is not a connection field; did you mean 'prioritizers'?",
        "connection 'route.big.put': 'destination' is missing",
        "processor 'generate': property 'Batch Size' is null; give its value as a string "
        "(\"Batch Size\": \"...\"), or leave it out to take its default ('1')",
        "processor 'generate': property 'Data Format' is a list; give its value as a string "
        "(\"Data Format\": \"...\"), or leave it out to take its default ('Text')",
    ]
    assert str(caught.value).startswith("flow 'valid' is not valid (8 problem(s)):\n  - 'procesors' is not")


def test_a_misspelt_property_gets_a_suggestion():
    data = valid_flow().to_dict()
    data["processors"][2]["properties"]["Conflict Resolution Stratgy"] = "replace"
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_json(orjson.dumps(data)).validate()
    assert caught.value.problems == ["processor 'put': 'Conflict Resolution Stratgy' is not a property of "
                                     "PutFile; did you mean 'Conflict Resolution Strategy'?"]


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["processors"][0].update(auto_terminate=5),
     "processor 'generate': 'auto_terminate' must be a list of names, not 5"),
    (lambda d: d["connections"][0].update(relationships=5),
     "connection 'generate.success.route': 'relationships' must be a list of names, not 5"),
    (lambda d: d["connections"][0].update(prioritizers=[1]),
     "connection 'generate.success.route': 'prioritizers' must be a list of names, not a list"),
    (lambda d: d["connections"][0].update(source=["generate"]),
     "connection 'generate.success.route': 'source' must be a string, not a list"),
    (lambda d: d.update(processors="abc"), "'processors' must be a list of objects, not 'abc'"),
    (lambda d: d["connections"][0].update(relationships=None),
     "connection 'generate.success.route': 'relationships' must be a list of names, not null"),
    (lambda d: d["connections"][0].update(load_balance=["x"]),
     "connection 'generate.success.route': 'load_balance' must be a string, not a list"),
    (lambda d: d["connections"][0].update(partition_attribute=3),
     "connection 'generate.success.route': 'partition_attribute' must be a string, not 3"),
    (lambda d: d["processors"][0].update(run_schedule=5),
     "processor 'generate': 'run_schedule' must be a string, not 5"),
    (lambda d: d["processors"][0].update(concurrent_tasks=True),
     "processor 'generate': 'concurrent_tasks' must be a whole number, not True"),
])
def test_a_field_of_the_wrong_kind_is_one_problem_not_a_traceback(change, problem):
    data = valid_flow().to_dict()
    change(data)
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_json(orjson.dumps(data))
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_null_in_a_field_with_a_default_takes_the_default():
    data = valid_flow().to_dict()
    data["processors"][1].update(auto_terminate=None, run_schedule=None, batch_size=None)
    data["connections"][0].update(load_balance=None, prioritizers=None, name=None)
    flow = Flow.from_json(orjson.dumps(data))
    route, first = flow.processors["route"], flow.connections[0]
    assert (route.auto_terminate, route.run_schedule, route.batch_size) == ((), "0 sec", None)
    assert (first.load_balance, first.prioritizers, first.name) == ("none", (), "generate.success.route")


@pytest.mark.parametrize("former, now", sorted(__import__("flowactors.sdk.flow", fromlist=["MOVED_TYPES"]).MOVED_TYPES.items()))
def test_a_definition_naming_a_moved_type_by_its_former_name_still_loads(former, now):
    from flowactors.sdk.flow import resolve_processor_type

    assert resolve_processor_type(former).type_name() == now


def test_flow_from_json_refuses_a_nifi_export_naming_what_reads_it():
    with pytest.raises(FlowValidationError, match="exported from NiFi: load it with flowactors.driver.loading"):
        Flow.from_json('{"flowContents": {"name": "orders"}}')
