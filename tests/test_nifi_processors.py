"""NiFi 2 Python processors driven by flowactors (``flowactors.nifi``), in this process.

The example processors (examples/nifi_python/) and small processors written here for one
behaviour each run through ``ProcessorRunner``; tests/test_nifi_on_ray.py runs the examples in a
flow on Ray.
"""

from __future__ import annotations

import json
import logging
import os
import textwrap
from pathlib import Path

import pytest

from flowactors import run_flow
from flowactors import Flow, FlowValidationError
from flowactors.engine.errors import FlowStartError
from flowactors.engine.placement import ExecutorPlan, plan, runtime_env_of
from flowactors.driver.loading import load_definition
from flowactors.nifi import add_python_processor, python_processor_type, resolve_type_name
from flowactors.nifi.extensions import ProcessorNotFound, discover, discover_versions, find_processor, requirements
from flowactors.nifi.host import ComponentLog
from flowactors.nifi.inspection import inspect_file
from flowactors.nifi.loader import ProcessorLoadError, missing_imports
from flowactors.processors import GenerateFlowFile
from flowactors.services import CSVReader, CSVRecordSetWriter, JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import ProcessorRunner
from flowactors.engine.cluster.cluster_state import ClusterState, ClusterStateService

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "nifi_python"
HEADER = """\
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.flowfilesource import FlowFileSource, FlowFileSourceResult
from nifiapi.properties import ExpressionLanguageScope, PropertyDescriptor, StandardValidators, TimeUnit
from nifiapi.relationship import Relationship
"""


def example(name: str, **kwargs):
    return python_processor_type(name, extensions=EXAMPLES, **kwargs)


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def attributes(flowfile, *names):
    return {n: flowfile.attributes.get(n) for n in names}


# ---------------------------------------------------------------------------------- reading the source
def test_a_processor_is_read_from_its_source_without_importing_it(tmp_path):
    path = write(tmp_path, "Fancy.py", '''
        import numpy_that_is_not_here
        from nifiapi.documentation import use_case

        VERSION = "2." + "1"

        @use_case(description="""
                Does fancy things.
            """, keywords=["fancy"])
        class Fancy(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            class ProcessorDetails:
                version = VERSION
                description = "Fancy."
                tags = ["a", "b"]
                dependencies = ["numpy_that_is_not_here==1.0"]

            MODE = PropertyDescriptor(name="Mode", description="m", required=True, allowable_values=["x", "y"],
                                      expression_language_scope=ExpressionLanguageScope.FLOWFILE_ATTRIBUTES)
            def __init__(self, **kwargs):
                self.level = PropertyDescriptor(name="Level", description="l", default_value=3,
                                                validators=[StandardValidators.POSITIVE_INTEGER_VALIDATOR],
                                                dependencies=[PropertyDependency(MODE, "y")])
            def getRelationships(self):
                return [Relationship(name="fancy", description="f"), Relationship("plain", "p", True)]
            def transform(self, context, flowFile):
                pass

        class NotAProcessor:
            pass

        class Trailing(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            class ProcessorDetails:
                version = '0.0.1',
    ''')
    fancy, trailing = inspect_file(path)
    assert (fancy.class_name, fancy.interface, fancy.version, fancy.tags) == ("Fancy", "FlowFileTransform", "2.1",
                                                                               ["a", "b"])
    assert fancy.dependencies == ["numpy_that_is_not_here==1.0"]
    assert fancy.use_cases == [{"description": "Does fancy things.", "keywords": ["fancy"]}]
    assert [(p.name, p.required, p.expression_language_scope, p.dependencies) for p in fancy.properties] == [
        ("Mode", True, "FLOWFILE_ATTRIBUTES", []), ("Level", False, "NONE", [("MODE", ["y"])])]
    assert fancy.relationships == [("fancy", "f", False), ("plain", "p", True)]
    assert trailing.version == "Unknown"  # a tuple, as the trailing comma makes it: NiFi says Unknown too
    assert missing_imports(fancy) == ["numpy_that_is_not_here"]

    processor = python_processor_type(path)  # the first processor class by name, as NiFi picks
    assert processor.info.class_name == "Fancy" and processor.runtime_env == {"pip": ["numpy_that_is_not_here==1.0"]}
    # not importable here: properties and relationships as the source names them
    assert processor.relationship_names({"Mode": "x"}) == ["original", "failure", "fancy", "plain"]
    assert processor.validate_properties({}) == ["property 'Mode' is required"]
    assert processor.validate_properties({"Mode": "y", "Level": "0"}) == ["property 'Level': '0' must be at least 1"]
    assert processor.validate_properties({"Mode": "x", "Level": "0"}) == []  # Level does not apply
    assert processor.validate_properties({"Mode": "${m}"}) == []  # known only per FlowFile


def test_extensions_folders_are_searched_as_nifi_searches_them(tmp_path):
    body = '''
        class {name}(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            class ProcessorDetails:
                version = "{version}"
                dependencies = ["six==1.16.0"]
            def transform(self, context, flowFile):
                return FlowFileTransformResult("success", contents="{version}")
    '''
    first, second = tmp_path / "first", tmp_path / "second"
    write(first, "Alpha.py", body.format(name="Alpha", version="1"))
    write(first, "pkg/__init__.py", "")
    write(first, "pkg/Beta.py", body.format(name="Beta", version="1"))
    (first / "pkg" / "requirements.txt").write_text("# shared\nhumanize>=4  # comment\n\nsix==1.16.0\n")
    write(first, "plain_folder/Gamma.py", body.format(name="Gamma", version="1"))  # no __init__.py: not seen
    write(first, "pkg/deeper/__init__.py", "")
    write(first, "pkg/deeper/Delta.py", body.format(name="Delta", version="1"))  # too deep
    write(second, "Alpha.py", body.format(name="Alpha", version="2"))
    (second / "Broken.py").write_text("class (:\n")  # skipped, as NiFi skips it
    found = discover([first, second])
    assert sorted(found) == ["Alpha", "Beta"] and found["Alpha"].version == "1"  # the first one wins
    assert find_processor("Alpha", [second, first]).version == "2"
    assert requirements(found["Beta"]) == ["humanize>=4", "six==1.16.0"]
    assert requirements(found["Alpha"]) == ["six==1.16.0"]  # a single file: its own dependencies only
    with pytest.raises(ProcessorNotFound, match=r"no NiFi Python processor named 'Gamma'.*\(processors there: "
                                                r"Alpha, Beta\)"):
        find_processor("Gamma", [first])
    with pytest.raises(ProcessorNotFound, match="name its extensions folder too"):
        python_processor_type("Alpha")


def test_two_versions_of_a_processor_are_listed_and_chosen_by_version(tmp_path):
    """NiFi's PythonControllerInteractionIT.testMultipleVersions: WriteMessage 0.0.1 and 0.0.2 in
    two files of one folder are two processors, each created by type and version."""
    body = """
        class WriteMessage(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            class ProcessorDetails:
                version = '{version}'
            def transform(self, context, flowFile):
                return FlowFileTransformResult("success", contents="{message}")
    """
    write(tmp_path, "WriteMessage.py", body.format(version="0.0.1-SNAPSHOT", message="Hello, World"))
    write(tmp_path, "WriteMessageV2.py", body.format(version="0.0.2-SNAPSHOT", message="Hello, World 2"))
    listed = discover_versions([tmp_path])["WriteMessage"]
    assert [info.version for info in listed] == ["0.0.1-SNAPSHOT", "0.0.2-SNAPSHOT"]
    outputs = {}
    for version in ("0.0.1-SNAPSHOT", "0.0.2-SNAPSHOT", None):
        kind = python_processor_type("WriteMessage", extensions=tmp_path, version=version)
        assert resolve_type_name(kind.type_name()) is kind   # a definition names the version it chose
        runner = ProcessorRunner(kind, auto_terminate=("original",))
        runner.enqueue(b"x")
        runner.run()
        outputs[version] = runner.read(runner.output("success")[0])
    assert outputs == {"0.0.1-SNAPSHOT": b"Hello, World", "0.0.2-SNAPSHOT": b"Hello, World 2",
                       None: b"Hello, World"}   # no version: the first found, as NiFi
    with pytest.raises(ProcessorNotFound, match=r"no version 9 of .*'WriteMessage'.*\(versions there: "
                                                r"0.0.1-SNAPSHOT, 0.0.2-SNAPSHOT\)"):
        find_processor("WriteMessage", [tmp_path], "9")
    (tmp_path / "WriteMessageV2.py").unlink()
    # one version there: it stands in for any other asked for, as NiFi takes the only bundle of a type
    assert find_processor("WriteMessage", [tmp_path], "0.0.2-SNAPSHOT").version == "0.0.1-SNAPSHOT"
    with pytest.raises(ValueError, match="a version .* chooses among the processors of an extensions folder"):
        python_processor_type(tmp_path / "WriteMessage.py", version="0.0.1-SNAPSHOT")


def test_a_flow_definition_names_python_processors_and_round_trips(tmp_path):
    flow = Flow("defs")
    source = add_python_processor(flow, EXAMPLES / "EmitGreetings.py", "greet", properties={"Names": "a"})
    route = add_python_processor(flow, "RouteOnField", "route", extensions=[EXAMPLES],
                                      properties={"Attribute": "x", "Routes": "r1, r2"},
                                      auto_terminate=["failure", "r1", "r2", "unmatched"])
    flow.connect(source, route)
    flow.validate()
    data = flow.to_dict()
    greet, routed = data["processors"]
    assert greet["type"] == f"nifi-python:EmitGreetings@{EXAMPLES}/EmitGreetings.py"
    assert greet["run_schedule"] == "1 min"  # a Python source's default schedule in NiFi
    assert routed["type"] == f"nifi-python:RouteOnField@{EXAMPLES}"
    assert routed["auto_terminate"] == ["failure", "r1", "r2", "unmatched", "original"]  # original: by default
    again = load_definition(flow.to_json())
    assert again.to_dict() == data == Flow.from_json(flow.to_json()).to_dict()  # the SDK names them too
    assert again.processors["route"].type.relationship_names(again.processors["route"].properties) == [
        "original", "failure", "r1", "r2", "unmatched"]
    flow.add_parameter_context("routing", {"routes": "r1, r3"})
    flow.processors["route"].properties["Routes"] = "#{routes}"  # parameters resolve before the processor sees them
    assert flow.problems() == ["processor 'route': cannot auto-terminate unknown relationship 'r2'",
                               "processor 'route': relationship 'r3' is neither connected nor auto-terminated"]
    data["processors"][1]["type"] = f"nifi-python:NoSuch@{EXAMPLES}"
    with pytest.raises(FlowValidationError, match="processor 'route': no NiFi Python processor named 'NoSuch'"):
        load_definition(data)
    with pytest.raises(FlowValidationError, match="processor 'route': no NiFi Python processor named 'NoSuch'"):
        Flow.from_dict(data)


# ---------------------------------------------------------------------------------- transforms
def test_a_transform_keeps_the_uuid_and_sends_an_untouched_copy_to_original_when_connected():
    runner = ProcessorRunner(example("NumberLines"), {"Prefix": "${filename}.${missing:replaceNull('x')}:",
                                                     "Start": 8})
    given = runner.enqueue(b"one\r\ntwo\nthree", {"filename": "f.txt"})
    runner.run()
    (done,), (original,) = runner.output("success"), runner.output("original")
    assert done.uuid == given.uuid and original.uuid != given.uuid
    assert runner.read(done) == b"f.txt.x:8 one\nf.txt.x:9 two\nf.txt.x:10 three\n"  # no NiFi prefix shortcut
    assert done.attributes["line.count"] == "3" and "line.count" not in original.attributes
    assert runner.read(original) == b"one\r\ntwo\nthree"
    padded = ProcessorRunner(example("NumberLines"), {"Numbering": "padded", "Width": 3},
                             auto_terminate=["original"])
    padded.enqueue(b"a\nb")
    padded.run()
    assert padded.contents("success") == [b"001 a\n002 b\n"]
    assert "original" not in padded.queues  # auto-terminated: no copy is made


def test_failure_takes_the_input_with_the_results_attributes_or_unchanged_when_transform_raises(caplog):
    runner = ProcessorRunner(example("ParseJson"), {}, auto_terminate=["original"])
    runner.enqueue(b'{"b": 1, "a": 2}')
    runner.enqueue(b"{nope", {"keep": "me"})
    runner.enqueue(b"", {"keep": "too"})
    with caplog.at_level(logging.ERROR, logger="flowactors.nifi"):
        runner.run()
    assert runner.contents("success") == [b'{\n  "a": 2,\n  "b": 1\n}']
    assert runner.output("success")[0].attributes["json.type"] == "dict"
    invalid, empty = runner.output("failure")
    assert runner.read(invalid) == b"{nope"  # the result's contents are ignored on failure
    assert invalid.attributes["keep"] == "me" and invalid.attributes["json.error"].startswith("Expecting property")
    assert "json.error" not in empty.attributes and empty.attributes["keep"] == "too" and empty.size == 0
    assert "Failed to transform FlowFile[id=" in caplog.text and "the content is empty" in caplog.text


def test_relationships_follow_the_configuration(tmp_path):
    route = example("RouteOnField")
    assert route.relationship_names({"Attribute": "c", "Routes": "red, blue"}) == [
        "original", "failure", "red", "blue", "unmatched"]
    assert route.validate_properties({"Attribute": "c", "Routes": "red,original"}) == [
        "Routes: 'original' is a relationship the processor has anyway"]
    assert route.validate_properties({"Attribute": "c"}) == ["property 'Routes' is required"]
    assert route.validate_properties({"Attribute": "c", "Routes": "r", "Color": "x"}) == [
        "'Color' is not a property of RouteOnField (its properties: Attribute, Routes)"]
    flow = Flow("routes")
    flow.add(GenerateFlowFile, "gen", properties={"Max FlowFiles": 1})
    add_python_processor(flow, "RouteOnField", "route", extensions=EXAMPLES,
                              properties={"Attribute": "c", "Routes": "red,blue"}, auto_terminate=["failure", "red"])
    flow.connect("gen", "route")
    assert flow.problems() == ["processor 'route': relationship 'blue' is neither connected nor auto-terminated",
                               "processor 'route': relationship 'unmatched' is neither connected nor auto-terminated"]
    runner = ProcessorRunner(route, {"Attribute": "c", "Routes": "red,blue"}, auto_terminate=["original"])
    for color in ("red", "green", "blue"):
        runner.enqueue(color.encode(), {"c": color})
    runner.run()
    assert [runner.contents(r) for r in ("red", "blue", "unmatched")] == [[b"red"], [b"blue"], [b"green"]]
    assert runner.output("unmatched")[0].attributes["route"] == "unmatched"


def test_a_source_makes_flowfiles_and_yields_when_create_returns_none():
    runner = ProcessorRunner(example("EmitGreetings"), {"Names": "ann, bob", "Greeting": "Hi"})
    runner.run(2, stop=False)
    assert not runner.context._yield_requested
    runner.run()
    assert runner.context._yield_requested  # the third create() returned None
    assert runner.contents("success") == [b"Hi\nann\n", b"Hi\nbob\n"]
    assert [f.attributes["greeting.name"] for f in runner.output("success")] == ["ann", "bob"]
    assert [e.event_type.value for e in runner.events()] == ["CREATE", "CREATE"]


def test_state_is_the_processors_and_cluster_scope_is_local_on_one_node():
    for scope in ("LOCAL", "CLUSTER"):
        runner = ProcessorRunner(example("StampSequence"), {"State Scope": scope}, auto_terminate=["original"])
        for _ in range(3):
            runner.enqueue(b"x")
        runner.run()
        runner.enqueue(b"x")
        runner.run()  # another session: the state was committed with the first
        assert [f.attributes["sequence.number"] for f in runner.output("success")] == ["1", "2", "3", "4"]
        assert runner.context.state.get().values == {"next": "5"}


class KeptHere(ClusterState):
    """``ClusterState`` answered by a keeper in this process instead of the flow's actor."""

    def __init__(self, keeper: ClusterStateService, component_id: str):
        super().__init__("unused", component_id)
        self.keeper = keeper

    def _call(self, method, *args):
        return getattr(self.keeper, method)(self.component_id, *args)


def test_on_several_nodes_cluster_scope_is_the_state_every_node_shares(tmp_path):
    keeper = ClusterStateService(str(tmp_path))
    nodes = []
    for _ in range(2):   # two nodes' tasks of the same processor
        runner = ProcessorRunner(example("StampSequence"), {"State Scope": "CLUSTER"}, auto_terminate=["original"])
        runner.context.cluster_state = KeptHere(keeper, "flow/stamp")
        nodes.append(runner)
    for runner, count in zip(nodes, (3, 2)):
        for _ in range(count):
            runner.enqueue(b"x")
        runner.run()
    numbers = [[f.attributes["sequence.number"] for f in runner.output("success")] for runner in nodes]
    assert numbers == [["1", "2", "3"], ["4", "5"]]
    assert keeper.get("flow/stamp") == (4, {"next": "6"})
    assert all(runner.context.state.get().values == {} for runner in nodes)   # each node's own state untouched


#: the reader and writer services the record transforms below name (NiFi's CSVReader, JsonTreeReader,
#: JsonRecordSetWriter one object a line, CSVRecordSetWriter)
RECORD_SERVICES = {"csv-in": (CSVReader, {}), "json-in": (JsonTreeReader, {}),
                   "json-out": (JsonRecordSetWriter, {"Output Grouping": "One Line Per Object"}),
                   "csv-out": (CSVRecordSetWriter, {})}


def test_a_record_transform_writes_one_flowfile_per_relationship_and_partition():
    properties = {"Record Reader": "csv-in", "Record Writer": "json-out", "Partition Field": "team",
                  "source": "${filename}"}
    runner = ProcessorRunner(example("TagRecords"), properties, services=RECORD_SERVICES)
    runner.enqueue(b"id,team,amount,drop\n1,red,5,\n2,blue,3,\n3,red,-2,\n4,blue,1,true\n5,red,0,\n",
                   {"filename": "in.csv", "kept": "yes"})
    runner.enqueue(b"id,team\n1,red\n", {"filename": "empty-partition-free.csv"})
    runner.run()
    outputs = {(f.attributes.get("team"), f.attributes["record.count"], f.attributes["filename"]):
               [json.loads(line) for line in runner.read(f).splitlines()] for f in runner.output("success")}
    assert sorted(outputs) == [("blue", "1", "in.csv"), ("red", "1", "empty-partition-free.csv"),
                               ("red", "2", "in.csv")]
    assert outputs[("red", "2", "in.csv")] == [
        {"id": 1, "team": "red", "amount": 5, "drop": None, "source": "in.csv"},
        {"id": 5, "team": "red", "amount": 0, "drop": None, "source": "in.csv"}]
    (rejected,) = runner.output("rejected")
    assert json.loads(runner.read(rejected))["id"] == 3 and "team" not in rejected.attributes  # no partition
    assert {f.attributes["mime.type"] for f in runner.output("success")} == {"application/json"}  # the writer's
    assert all(f.attributes["kept"] == "yes" for f in runner.output("success") if f.attributes["filename"] == "in.csv")
    assert len(runner.output("original")) == 2 and runner.output("failure") == []


def test_a_record_transform_that_fails_emits_nothing_and_fails_the_input():
    runner = ProcessorRunner(example("TagRecords"), {"Record Reader": "json-in", "Record Writer": "csv-out",
                                                    "Partition Field": "team"}, services=RECORD_SERVICES)
    runner.enqueue(b'{"team": "red", "amount": "lots"}\n', {"filename": "bad"})  # str < 0 raises
    runner.enqueue(b"not json\n", {"filename": "unreadable"})
    runner.run()
    assert [f.attributes["filename"] for f in runner.output("failure")] == ["bad", "unreadable"]
    assert runner.output("success") == [] and runner.output("original") == []
    with pytest.raises(ValueError, match="property 'Record Reader' needs a RecordReaderFactory, but controller "
                                         "service 'json-out' is a JsonRecordSetWriter"):
        ProcessorRunner(example("TagRecords"), {"Record Reader": "json-out", "Record Writer": "csv-out",
                                                "Partition Field": "x"}, services=RECORD_SERVICES)


# ---------------------------------------------------------------------------------- properties and lifecycle
PROBE = '''
    class Probe(FlowFileTransform):
        class Java:
            implements = ['org.apache.nifi.python.processor.FlowFileTransform']
        class ProcessorDetails:
            version = "1"

        calls = []
        FLOWFILE = PropertyDescriptor(name="FlowFile", description="",
                                      expression_language_scope=ExpressionLanguageScope.FLOWFILE_ATTRIBUTES)
        ENVIRONMENT = PropertyDescriptor(name="Environment", description="",
                                         expression_language_scope=ExpressionLanguageScope.ENVIRONMENT)
        LITERAL = PropertyDescriptor(name="Literal", description="")
        PERIOD = PropertyDescriptor(name="Period", description="", default_value="1.5 sec",
                                    validators=[StandardValidators.TIME_PERIOD_VALIDATOR])

        def __init__(self, jvm):
            self.calls.append(("init", self.logger, jvm.__class__.__name__))

        def getPropertyDescriptors(self):
            return [self.FLOWFILE, self.ENVIRONMENT, self.LITERAL, self.PERIOD]

        def customValidate(self, context):
            self.calls.append(("validate", context.getProperty(self.LITERAL).getValue()))
            return []

        def onScheduled(self, context):
            self.calls.append(("scheduled", context.getName(), self.identifier is not None))

        def onStopped(self, context):
            self.calls.append(("stopped",))

        def transform(self, context, flowFile):
            self.logger.info("seen {} of {} bytes", flowFile.getAttribute("filename"), flowFile.getSize())
            evaluate = lambda d: context.getProperty(d).evaluateAttributeExpressions(flowFile).getValue()
            return FlowFileTransformResult("success", attributes={
                "flowfile": evaluate(self.FLOWFILE), "environment": evaluate(self.ENVIRONMENT),
                "literal": evaluate(self.LITERAL), "ms": str(context.getProperty(self.PERIOD).asTimePeriod(
                    TimeUnit.MILLISECONDS))})
'''


def test_expressions_scopes_conversions_and_the_lifecycle(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PROBE_HOME", "/home/probe")
    probe = python_processor_type(write(tmp_path, "Probe.py", PROBE))
    runner = ProcessorRunner(probe, {"FlowFile": "${filename}.txt-${a}", "Environment": "${PROBE_HOME}:${a}",
                                     "Literal": "${a}"}, auto_terminate=["original"])
    runner.enqueue(b"abc", {"filename": "f", "a": "1"})
    with caplog.at_level(logging.INFO, logger="flowactors.nifi"):
        runner.run()
    (done,) = runner.output("success")
    assert attributes(done, "flowfile", "environment", "literal", "ms") == {
        "flowfile": "f.txt-1", "environment": "/home/probe:", "literal": "${a}", "ms": "1500"}
    assert "Probe: seen f of 3 bytes" in caplog.text
    calls = runner.processor.processor.calls
    init = [c for c in calls if c[0] == "init"][-1]
    assert init == ("init", None, "_NoJvm")  # constructed with jvm=, logger injected only after
    assert calls[-3:] == [("validate", "${a}"), ("scheduled", "Probe", True), ("stopped",)]
    assert probe.validate_properties({"Period": "soon"}) == [
        "property 'Period': 'soon' is not a time period such as '30 sec' or '5 mins'"]
    assert probe.validate_properties({"FlowFile": "${a:nope()}"})[0].startswith("property 'FlowFile': ")


def test_a_processor_without_getRelationships_has_success_and_problems_stop_its_start(tmp_path):
    path = write(tmp_path, "Odd.py", '''
        class Odd(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            def __init__(self):  # no jvm: constructed without it
                super().__init__()
            def customValidate(self, context):
                return None
            def transform(self, context, flowFile):
                return None
    ''')
    odd = python_processor_type(path)
    assert odd.relationship_names({}) == ["original", "failure", "success"]
    assert odd.validate_properties({}) == [
        "customValidate failed: TypeError: it returned None; it must return a list of ValidationResult "
        "(empty when valid)"]
    runner = ProcessorRunner(odd, {}, validate=False)
    with pytest.raises(RuntimeError, match="Odd is not valid: customValidate failed"):
        runner.run()
    raising = python_processor_type(write(tmp_path, "Raising.py", '''
        class Raising(FlowFileSource):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileSource']
            def __init__(self, **kwargs):
                pass
            def getPropertyDescriptors(self):
                raise KeyError("descriptors")
            def getRelationships(self):
                return 1 / 0
            def create(self, context):
                return None
    '''))
    assert raising.relationship_names({}) == ["success"]
    assert raising.validate_properties({}) == ["getPropertyDescriptors failed: KeyError: 'descriptors'",
                                               "getRelationships failed: ZeroDivisionError: division by zero"]
    with pytest.raises(ProcessorNotFound, match="is a folder: name the processor's class"):
        python_processor_type(tmp_path)


def test_a_processor_whose_dependencies_are_not_here_says_so_when_it_starts():
    pluralize = python_processor_type(EXAMPLES / "Pluralize.py")
    assert pluralize.validate_properties({}) == []  # read from the source
    runner = ProcessorRunner(pluralize, {})
    with pytest.raises(ProcessorLoadError, match="cannot import the NiFi Python processor 'Pluralize' from .*"
                                                 "ModuleNotFoundError: No module named 'inflection'"):
        runner.run()


def test_dependencies_become_the_runtime_env_joined_with_the_nodes_own(tmp_path):
    flow = Flow("envs")
    flow.add(GenerateFlowFile, "gen", properties={"Max FlowFiles": 1})
    add_python_processor(flow, EXAMPLES / "Pluralize.py", "plural", auto_terminate=["success", "failure"],
                              runtime_env={"pip": ["six", "inflection==0.5.0"], "env_vars": {"A": "1"}})
    add_python_processor(flow, "Titleize", "title", extensions=EXAMPLES, auto_terminate=["success", "failure"])
    flow.connect("gen", "plural")
    flow.connect("gen", "title")
    assert runtime_env_of(flow.processors["plural"]) == {"pip": ["inflection==0.5.0", "six"], "env_vars": {"A": "1"}}
    assert runtime_env_of(flow.processors["title"]) == {"pip": ["inflection==0.5.1"]}
    assert runtime_env_of(flow.processors["gen"]) is None
    placed = {p.name: p.runtime_env for p in plan(flow).executors}
    assert placed == {"executor.0": None, "processor.plural.0": runtime_env_of(flow.processors["plural"]),
                      "processor.title.0": {"pip": ["inflection==0.5.1"]}}
    assert flow.to_dict()["processors"][2]["runtime_env"] is None  # the definition keeps only what was given
    with pytest.raises(FlowStartError, match=r"plural, title ask\(s\) for a runtime_env of their own \(a NiFi "
                                             r"Python processor's dependencies make one\)"):
        run_flow(flow, tmp_path / "repository", engine="in-process")


def test_a_failed_install_is_one_sentence_naming_the_processor_and_pips_reason():
    from flowactors.engine.actors.ray_hosting import runtime_env_problem

    text = ("Failed to set up runtime environment.\nCould not create the actor...\n"
            "    ERROR: Could not find a version that satisfies the requirement inflection==9.9 (from versions: none)\n"
            "    ERROR: No matching distribution found for inflection==9.9\n")
    message = runtime_env_problem(ExecutorPlan(3, "processor.plural.0", [("plural", 0)],
                                               runtime_env={"pip": ["inflection==9.9"]}), text)
    assert message == (
        "processor 'plural' could not start because its packages (inflection==9.9) could not be installed (No "
        "matching distribution found for inflection==9.9): check their names and versions (for a NiFi Python "
        "processor, its ProcessorDetails.dependencies and requirements.txt) and that this machine reaches the "
        "package index")
    # the Ray engine finds Ray's setup error inside the error a start call raised, and only that one
    from ray.exceptions import RayTaskError, RuntimeEnvSetupError

    from flowactors.engine.actors.ray_hosting import RayHosting

    plan = ExecutorPlan(3, "processor.plural.0", [("plural", 0)], runtime_env={"pip": ["inflection==9.9"]})
    wrapped = RayTaskError("wire", "traceback", RuntimeEnvSetupError(text))
    assert RayHosting().start_problem(plan, wrapped) == message
    assert RayHosting().start_problem(plan, RayTaskError("wire", "traceback", ValueError("other"))) is None


def test_the_component_log_takes_nifis_placeholders_and_pythons_names(caplog):
    log = ComponentLog("proc", "id-1")
    with caplog.at_level(logging.DEBUG, logger="flowactors.nifi"):
        log.info("{} of {}", 1, 2)
        log.warning("plain {}")
        try:
            raise KeyError("k")
        except KeyError as err:
            log.error("failed: {}", err, err)
            log.exception("again")
        log.log("WARN", "by level {}", "name")
        assert log.isDebugEnabled() and not log.isTraceEnabled()
    messages = [(r.levelname, r.getMessage(), r.exc_info is not None and r.exc_info[0] is not None)
                for r in caplog.records]
    assert messages == [("INFO", "proc: 1 of 2", False), ("WARNING", "proc: plain {}", False),
                        ("ERROR", "proc: failed: 'k'", True), ("ERROR", "proc: again", True),
                        ("WARNING", "proc: by level name", False)]
    assert log.getName() == "flowactors.nifi.proc"


def test_a_record_transform_gets_json_values_and_a_schema_it_hands_back_reads_them_again(tmp_path):
    """Records reach a transform as NiFi's JSON writer gives them (a timestamp as epoch
    milliseconds) with the reader's schema; a transform handing that schema back has its values
    read as that schema's types again, one handing none back has them typed as they are."""
    path = write(tmp_path, "Echo.py", """
        from nifiapi.recordtransform import RecordTransform, RecordTransformResult

        class Echo(RecordTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.RecordTransform']
            class ProcessorDetails:
                version = '1.0.0'
            def __init__(self, **kwargs):
                pass
            def transform(self, context, record, schema, attributemap):
                given = schema if attributemap.getAttribute('schema') == 'back' else None
                return RecordTransformResult(record=record, schema=given, relationship='success')
        """)
    stamps = {"Timestamp Format": "yyyy-MM-dd'T'HH:mm:ss"}
    runner = ProcessorRunner(python_processor_type(path), {"Record Reader": "in", "Record Writer": "out"},
                             services={"in": (CSVReader, stamps),
                                       "out": (JsonRecordSetWriter, {"Output Grouping": "One Line Per Object",
                                                                     **stamps})},
                             auto_terminate=["original"])
    runner.enqueue(b"id,at\n1,2024-01-02T03:04:05\n", {"schema": "back"})
    runner.enqueue(b"id,at\n1,2024-01-02T03:04:05\n", {"schema": "none"})
    runner.run()
    assert runner.output("failure") == []
    assert {f.attributes["schema"]: json.loads(runner.read(f)) for f in runner.output("success")} == {
        "back": {"id": 1, "at": "2024-01-02T03:04:05"}, "none": {"id": 1, "at": 1704164645000}}


def test_a_changed_processor_file_is_read_again(tmp_path):
    body = """
        class Probe(FlowFileTransform):
            class Java:
                implements = ['org.apache.nifi.python.processor.FlowFileTransform']
            class ProcessorDetails:
                version = '1.0.0'
                description = '{}'
            def transform(self, context, flowfile):
                return FlowFileTransformResult(relationship='success')
        """
    path = write(tmp_path, "Probe.py", body.format("first"))
    assert python_processor_type(path).description == "first"
    assert python_processor_type(path) is python_processor_type(path)   # read once while unchanged
    path.write_text(HEADER + textwrap.dedent(body.format("second")))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert python_processor_type(path).description == "second"


def test_a_processor_reaches_a_controller_service_as_nifis_python_api_gives_it():
    from tests.service_components import KeyValues, NotALookup
    fill = example("FillFromLookup")
    runner = ProcessorRunner(fill, {"Lookup Service": "addresses"},
                             services={"addresses": (KeyValues, {"ada": "12 Baker St"})})
    runner.enqueue(b'{"key": "ada"}')
    runner.enqueue(b'{"key": "bob"}')
    runner.run()
    assert [json.loads(c) for c in runner.contents("success")] == [
        {"key": "ada", "found": "12 Baker St"}, {"key": "bob", "found": None}]
    with pytest.raises(ValueError, match="property 'Lookup Service' needs a StringLookupService, but controller "
                                         "service 'addresses' is a NotALookup"):
        ProcessorRunner(fill, {"Lookup Service": "addresses"}, services={"addresses": (NotALookup, {})})
