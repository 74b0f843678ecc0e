"""Parameter contexts: #{name} references resolved when a flow validates, inheritance, sensitive
values never written, and a flow that runs with them (flowactors/sdk/parameters.py)."""

from __future__ import annotations

import orjson
import pytest

from flowactors import run_flow
from flowactors import Flow, FlowValidationError
from flowactors.processors import GenerateFlowFile, PutFile, RouteOnAttribute, UpdateAttribute
from flowactors.sdk.parameters import ParameterError, environment_variable, references, substitute
from flowactors.sdk.processor import Processor, PropertyDescriptor, Relationship

VALUES = {"p": "it's ${x}", "n": "5", "my param": "M", "dir": "/data/out"}


@pytest.mark.parametrize("text, expected", [
    ("a#{p}b", "ait's ${x}b"),                       # outside expressions: the value as written
    ("##{p}", "#{p}"),                               # escaped
    ("###{n}", "#5"),
    ("x#y #", "x#y #"),
    ("${#{n}:plus(1)}", "${literal('5'):plus(1)}"),  # the subject of an expression: a literal
    ("${a:equals(#{p})}", "${a:equals('it\\'s $${x}')}"),       # an argument: a quoted literal
    ("${a:append('-#{p}')}", "${a:append('-it\\'s $${x}')}"),   # inside a string of an expression
    ("${ #{my param} }", "${ literal('M') }"),
    ("$${#{n}}", "$${5}"),                           # an escaped ${ is text
])
def test_substitution(text, expected):
    assert substitute(text, VALUES) == expected


def test_substituted_expressions_evaluate_to_the_parameter_values():
    from flowactors.sdk.expression import compile_value

    assert compile_value(substitute("${#{n}:plus(1)}", VALUES)).evaluate({}) == "6"
    assert compile_value(substitute("${a:equals(#{p})}", VALUES)).evaluate({"a": "it's ${x}"}) == "true"
    assert compile_value(substitute("#{dir}/${filename}", VALUES)).evaluate({"filename": "f"}) == "/data/out/f"


def test_references_and_errors():
    assert references("#{a} ##{b} ${#{c}}") == ["a", "c"]
    with pytest.raises(ParameterError, match="not defined or has no value"):
        substitute("#{nope}", VALUES)
    with pytest.raises(ParameterError, match="write ##"):
        substitute("#{bad name!}", VALUES)


def parameterised_flow(tmp_path) -> Flow:
    flow = Flow("params")
    flow.add_parameter_context("base", {"size": "1 KB", "dir": str(tmp_path / "base-out"), "token": None},
                               sensitive=["token"])
    flow.add_parameter_context("app", {"dir": str(tmp_path / "out"), "label": "big"}, inherits=["base"])
    flow.parameter_context = "app"
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "File Size": "#{size}", "Batch Size": 3, "Max FlowFiles": 3})
    update = flow.add(UpdateAttribute, "update", properties={"label": "#{label}", "secret": "#{token}"})
    route = flow.add(RouteOnAttribute, "route", properties={"#{label}": "${label:equals(#{label})}"},
                     auto_terminate=["unmatched"])
    put = flow.add(PutFile, "put", properties={"Directory": "#{dir}"}, auto_terminate=["success", "failure"])
    flow.connect(generate, update)
    flow.connect(update, route)
    flow.connect(route, put, "#{label}")
    return flow


def test_parameters_resolve_with_inheritance_and_the_environment(tmp_path, monkeypatch):
    flow = parameterised_flow(tmp_path)
    with pytest.raises(FlowValidationError) as caught:
        flow.validate()
    assert any("#{token}" in p and environment_variable("token") in p for p in caught.value.problems)
    monkeypatch.setenv(environment_variable("token"), "s3cret")
    flow.validate()
    assert flow.processors["generate"].property_values["File Size"] == "1 KB"          # inherited from base
    assert flow.processors["put"].property_values["Directory"] == str(tmp_path / "out")  # app's own wins
    assert flow.processors["update"].property_values["secret"] == "s3cret"
    assert flow.processors["put"].properties["Directory"] == "#{dir}"                   # the reference is kept


def test_sensitive_values_are_never_written_and_the_definition_round_trips(tmp_path, monkeypatch):
    flow = parameterised_flow(tmp_path)
    flow.parameter_contexts["base"].parameters["token"].value = "given-in-code"
    text = flow.to_json()
    assert "given-in-code" not in text
    data = orjson.loads(text)
    assert data["flowactors_flow"] == 2 and data["parameter_context"] == "app"
    again = Flow.from_json(text)
    assert again.to_dict() == data
    assert again.parameter_contexts["base"].parameters["token"].value is None   # read from the environment then
    monkeypatch.setenv(environment_variable("token"), "x")
    again.validate()


def test_a_version_1_definition_still_reads():
    data = {"flowactors_flow": 1, "name": "old", "processors": [
        {"name": "g", "type": "GenerateFlowFile", "properties": {}, "auto_terminate": ["success"]}], "connections": []}
    assert Flow.from_dict(data).validate().processors["g"].property_values == {}


def test_problems_name_the_context_and_the_parameter(tmp_path):
    flow = Flow("bad")
    flow.add_parameter_context("a", {"x": "1"}, inherits=["b"])
    flow.add_parameter_context("b", {}, inherits=["a"])
    flow.add(GenerateFlowFile, "g", properties={"Batch Size": "#{x}", "File Size": "#{missing}"},
             auto_terminate=["success"], parameter_context="nosuch")
    flow.add(GenerateFlowFile, "h", properties={"Batch Size": "#{x}"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError) as caught:
        flow.validate()
    text = str(caught.value)
    assert "inherit in a cycle: a -> b -> a" in text
    assert "processor 'g': parameter context 'nosuch' is not defined" in text
    no_context = Flow("none")
    no_context.add(GenerateFlowFile, "g", properties={"Batch Size": "#{x}"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError, match="has no parameter context"):
        no_context.validate()


def test_resolved_values_are_validated_like_written_ones():
    flow = Flow("typed")
    flow.add_parameter_context("p", {"batch": "many"})
    flow.add(GenerateFlowFile, "g", properties={"Batch Size": "#{batch}"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError, match="Batch Size"):
        flow.validate()


def test_a_parameterised_flow_runs_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv(environment_variable("token"), "s3cret")
    final = run_flow(parameterised_flow(tmp_path), tmp_path / "repo", engine="in-process", timeout=60)
    out = sorted((tmp_path / "out").iterdir())
    assert len(out) == 3 and all(p.stat().st_size == 1024 for p in out)
    assert not (tmp_path / "base-out").exists()
    assert not final.get("timed_out")


def test_a_problem_never_shows_a_sensitive_value(monkeypatch):
    flow = Flow("secret")
    flow.add_parameter_context("p", {"batch": None}, sensitive=["batch"])
    flow.add(GenerateFlowFile, "g", properties={"Batch Size": "#{batch}"}, auto_terminate=["success"])
    monkeypatch.setenv(environment_variable("batch"), "hunter2-s3cret")
    with pytest.raises(FlowValidationError) as caught:
        flow.validate()
    text = str(caught.value)
    assert "Batch Size" in text and "********" in text and "hunter2" not in text


class _Signer(Processor):
    """A source with a sensitive property (a key checked for digits)."""

    properties = [PropertyDescriptor("Key", required=True, sensitive=True,
                                     validator=lambda v: None if v.isdigit() else f"must be digits, not {v!r}")]
    relationships = [Relationship("success")]
    input_required = False

    def on_trigger(self, context, session) -> None:
        return None


def test_a_sensitive_property_is_never_saved_nor_shown(monkeypatch):
    """NiFi's sensitive properties: a literal value is refused at save time (never written to a
    definition) and redacted from problems; a sensitive parameter reference saves as itself."""
    bad = Flow("keys")
    bad.add(_Signer, "sign", properties={"Key": "hunter2"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError) as caught:
        bad.validate()
    assert caught.value.problems == ["processor 'sign': property 'Key': must be digits, not '********'"]
    literal = Flow("keys")
    literal.add(_Signer, "sign", properties={"Key": "1234"}, auto_terminate=["success"])
    with pytest.raises(FlowValidationError) as caught:
        literal.to_json()
    assert "1234" not in str(caught.value)
    assert "property 'Key' is sensitive, and a definition never holds a sensitive value" in str(caught.value)
    referenced = Flow("keys")
    referenced.add_parameter_context("secrets", {"key": None}, sensitive=["key"])
    referenced.parameter_context = "secrets"
    referenced.add(_Signer, "sign", properties={"Key": "#{key}"}, auto_terminate=["success"])
    monkeypatch.setenv(environment_variable("key"), "9876")
    referenced.validate()
    saved = referenced.to_json()
    assert "9876" not in saved and orjson.loads(saved)["processors"][0]["properties"] == {"Key": "#{key}"}
