"""A FlowFile whose content cannot be read (its claim file gone) goes to failure with one line
saying so, and the others of its batch are processed: every processor of the JSON family and
JoltTransformJSON."""

from __future__ import annotations

import pytest

from flowactors.processors import (
    EvaluateJsonPath, FlattenJson, JoltTransformJSON, SplitJson, ValidateJson,
)
from flowactors.testing import ProcessorRunner

REASON = "the content cannot be read: "
CASES = {
    "ValidateJson FlowFile": (ValidateJson, {"JSON Schema": '{"type": "object"}'}, "valid"),
    "ValidateJson JSON Lines": (ValidateJson, {"JSON Schema": '{"type": "object"}', "Input Format": "JSON Lines"},
                                "valid"),
    "FlattenJson": (FlattenJson, {}, "success"),
    "EvaluateJsonPath": (EvaluateJsonPath, {"a": "$.a[0]", "Destination": "flowfile-attribute"}, "matched"),
    "SplitJson": (SplitJson, {"JsonPath Expression": "$.a"}, "original"),
    "JoltTransformJSON": (JoltTransformJSON, {"Jolt Transform": "Sort"}, "success"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_content_that_cannot_be_read_goes_to_failure_and_the_batch_goes_on(case):
    kind, properties, done = CASES[case]
    runner = ProcessorRunner(kind, properties)
    runner.enqueue(b'{"a": [1]}', {"filename": "good"})
    runner.lose_content(runner.enqueue(b'{"a": [2]}', {"filename": "lost"}))
    runner.run()
    assert [f.attributes["filename"] for f in runner.output(done)] == ["good"]
    [failed] = runner.output("failure")
    assert failed.attributes["filename"] == "lost"
    assert failed.attributes["flowactors.failure.reason"].startswith(REASON)
    assert "\n" not in failed.attributes["flowactors.failure.reason"]
    assert runner.input_count == 0
