"""The limits on a FlowFile's attributes (flowactors/sdk/attribute_limits.py, docs/configuration.md,
"Attribute limits"): every put is checked, the error names the FlowFile, the attribute, its size
and the limit, and a processor that hits one loses nothing."""

from __future__ import annotations

import pickle

import pytest

from flowactors import FlowFileHandlingError, Flow, Processor, Relationship
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GenerateFlowFile, PutFile, UpdateAttribute
from flowactors.sdk.attribute_limits import MAX_ATTRIBUTE_CHARS, MAX_FLOWFILE_ATTRIBUTES_CHARS
from flowactors.sdk.session import AttributeLimitError
from flowactors.testing import ProcessorRunner

QUARTER = "q" * (MAX_FLOWFILE_ATTRIBUTES_CHARS // 4 - 100)   # four of these fit, with a FlowFile's usual few, five do not


class Pass(Processor):
    relationships = [Relationship("success")]

    def on_trigger(self, context, session):
        raise AssertionError("tests drive the session directly")


class Oversize(Processor):
    """Puts an attribute one character past the limit on each FlowFile."""

    relationships = [Relationship("success"), Relationship("failure")]

    def on_trigger(self, context, session):
        for flowfile in session.get_batch():
            session.transfer(session.put_attribute(flowfile, "big", "x" * MAX_ATTRIBUTE_CHARS), "success")


@pytest.fixture
def runner():
    return ProcessorRunner(Pass)


def test_an_attribute_past_its_limit_is_refused_naming_the_flowfile_the_attribute_its_size_and_the_limit(runner):
    runner.enqueue(b"data", {"a": "1"})
    session = runner.new_session()
    flowfile = session.get()
    with pytest.raises(AttributeLimitError) as caught:
        session.put_attribute(flowfile, "big", "x" * MAX_ATTRIBUTE_CHARS)
    error = caught.value
    assert isinstance(error, FlowFileHandlingError)
    assert (error.flowfile, error.attribute, error.size, error.limit) == (
        flowfile.uuid, "big", MAX_ATTRIBUTE_CHARS + 3, MAX_ATTRIBUTE_CHARS)
    assert str(error) == (
        f"Pass: FlowFile {flowfile.uuid}: attribute 'big' would be 1,048,579 characters (name and value), more "
        f"than the 1,048,576 one attribute may hold (MAX_ATTRIBUTE_CHARS); put large data in the FlowFile's "
        f"content instead (docs/configuration.md, \"Attribute limits\")")
    copy = pickle.loads(pickle.dumps(error))   # as Ray sends it between processes
    assert (str(copy), copy.flowfile, copy.attribute, copy.size) == (str(error), flowfile.uuid, "big", error.size)
    session.transfer(flowfile, "success")   # the session goes on with the FlowFile as it was
    session.commit()
    assert [f.attributes.get("big") for f in runner.output("success")] == [None]


def test_an_attribute_up_to_its_limit_is_kept(runner):
    runner.enqueue(b"data")
    session = runner.new_session()
    flowfile = session.put_attribute(session.get(), "big", "x" * (MAX_ATTRIBUTE_CHARS - 3))
    session.transfer(flowfile, "success")
    session.commit()
    assert len(runner.output("success")[0].attributes["big"]) == MAX_ATTRIBUTE_CHARS - 3


def test_attributes_past_the_flowfiles_limit_are_refused_naming_the_largest(runner):
    runner.enqueue(b"data")
    session = runner.new_session()
    flowfile = session.get()
    flowfile = session.put_all_attributes(flowfile, {f"part{i}": QUARTER for i in range(3)})
    flowfile = session.put_attribute(flowfile, "part3", QUARTER)   # four fit
    with pytest.raises(AttributeLimitError) as caught:
        session.put_attribute(flowfile, "part4", QUARTER)
    error = caught.value
    assert (error.attribute, error.limit) == ("part4", MAX_FLOWFILE_ATTRIBUTES_CHARS)
    assert error.size == sum(len(k) + len(v) for k, v in {**flowfile.attributes, "part4": QUARTER}.items())
    message = str(error)
    assert message.startswith(f"Pass: FlowFile {flowfile.uuid}: setting 'part4' (1,048,476 characters) would make "
                              f"its attributes {error.size:,} characters in all (names and values), more than the "
                              f"4,194,304 one FlowFile may hold (MAX_FLOWFILE_ATTRIBUTES_CHARS); the largest: ")
    assert message.endswith("; remove attributes it no longer needs, or put large data in the FlowFile's content "
                            "instead (docs/configuration.md, \"Attribute limits\")")


def test_a_flowfile_over_the_limit_may_still_lose_or_shorten_attributes(runner):
    """A FlowFile that came in over the limit (written before there was one) is not stuck."""
    runner.enqueue(b"data", {f"part{i}": QUARTER for i in range(6)})
    session = runner.new_session()
    flowfile = session.put_attribute(session.get(), "part0", "short")   # still over, but shorter
    with pytest.raises(AttributeLimitError):
        session.put_attribute(flowfile, "more", "x")   # over, and longer
    flowfile = session.remove_attribute(flowfile, "part1")
    session.transfer(flowfile, "success")
    session.commit()
    kept = runner.output("success")[0].attributes
    assert sorted(kept) == ["filename", "part0", "part2", "part3", "part4", "part5", "path", "uuid"]
    assert kept["part0"] == "short"


@pytest.mark.parametrize("whole_batch", [True, False], ids=["batch-held-whole", "per-flowfile"])
def test_a_batch_put_past_a_limit_changes_no_flowfile(runner, whole_batch):
    for _ in range(3):
        runner.enqueue(b"data")
    session = runner.new_session()
    flowfiles = session.get_batch() if whole_batch else [session.get() for _ in range(3)]
    values = [{"ok": "1"}, {"ok": "1", "big": "x" * MAX_ATTRIBUTE_CHARS}, {"ok": "1"}]
    with pytest.raises(AttributeLimitError) as caught:
        session.put_attributes_batch(flowfiles, values)
    assert (caught.value.flowfile, caught.value.attribute) == (flowfiles[1].uuid, "big")
    with pytest.raises(AttributeLimitError):
        session.put_attributes_batch(flowfiles, {f"part{i}": QUARTER for i in range(5)})
    session.transfer_batch(flowfiles, "success")
    session.commit()
    assert [sorted(f.attributes) for f in runner.output("success")] == [["filename", "path", "uuid"]] * 3


def test_a_processor_past_a_limit_is_rolled_back_and_its_input_kept():
    runner = ProcessorRunner(UpdateAttribute, {"big": "${literal('x'):repeat(1048576)}"})
    sent = runner.enqueue(b"keep me", {"a": "1"})
    runner.run(raise_errors=False)
    assert isinstance(runner.errors[0], AttributeLimitError)
    assert "attribute 'big' would be 1,048,579 characters" in str(runner.errors[0])
    assert runner.output("success") == [] and runner.input_count == 1
    session = runner.new_session()
    kept = session.get()
    assert (kept.uuid, kept.attributes, session.read_bytes(kept)) == (sent.uuid, sent.attributes, b"keep me")


def test_the_engine_routes_the_flowfile_to_failure_with_its_content_and_the_reason(tmp_path):
    """The in-process engine, as every engine: the session rolled back, the FlowFile that fails
    sent on to 'failure' unchanged but for the reason, which names the error."""
    out = tmp_path / "out"
    flow = Flow("oversize")
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": "payload", "Max FlowFiles": 1, "Data Format": "Text"})
    oversize = flow.add(Oversize, "oversize", auto_terminate=["success"])
    put = flow.add(PutFile, "put", auto_terminate=["success", "failure"], properties={
        "Directory": str(out) + "/${'flowactors.failure.reason':substringBefore(':')}"})
    flow.connect(generate, oversize)
    flow.connect(oversize, put, relationships=("failure",))
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60)
    assert not final.get("timed_out")
    assert [p.read_bytes() for p in (out / "AttributeLimitError").iterdir()] == [b"payload"]
    assert processor_totals(final)["oversize"]["errors"] == 1
