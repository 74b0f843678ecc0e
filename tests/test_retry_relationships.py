"""Retried relationships (NiFi 1.16+): the ProcessorNode fields, their validation and their place
in a definition; what a commit does with a FlowFile routed to a retried relationship
(``flowactors.engine.retry``), on the in-process, stateless and Ray engines."""

from __future__ import annotations

import pytest

from flowactors import Flow, FlowValidationError
from flowactors.processors import CompressContent, GenerateFlowFile, UpdateAttribute


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
