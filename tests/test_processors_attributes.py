"""UpdateAttribute, LogAttribute and ExtractText."""

from __future__ import annotations

import logging

import pytest

from flowactors.processors import ExtractText, LogAttribute, UpdateAttribute
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines


# ---------------------------------------------------------------------------------- UpdateAttribute
def test_update_attribute_sets_values_from_expressions_in_one_batch():
    runner = ProcessorRunner(UpdateAttribute, {"greeting": "hello ${name:toUpper()}", "copy": "${other}",
                                               "other": "changed"})
    for name in ("ann", "bob", "cy"):
        runner.enqueue(b"", {"name": name, "other": "before"})
    runner.run()
    out = runner.output("success")
    assert [f.attributes["greeting"] for f in out] == ["hello ANN", "hello BOB", "hello CY"]
    # every property sees the attributes as they arrived
    assert all(f.attributes["copy"] == "before" and f.attributes["other"] == "changed" for f in out)
    assert runner.backend.commits == 1  # the whole batch in one session commit
    modified = [e for e in runner.events() if e.event_type == T.ATTRIBUTES_MODIFIED]
    assert sorted(e.flowfile_uuid for e in modified) == sorted(f.uuid for f in out)
    assert modified[0].previous_attributes["other"] == "before"
    assert modified[0].updated_attributes["other"] == "changed"


def test_update_attribute_delete_expression():
    runner = ProcessorRunner(UpdateAttribute, {"Delete Attributes Expression": "tmp\\..*|${drop}",
                                               "tmp.kept": "no", "fresh": "yes"})
    runner.enqueue(b"", {"tmp.a": "1", "tmp.kept": "old", "keep": "k", "drop": "keep2", "keep2": "x"})
    runner.run()
    [flowfile] = runner.output("success")
    attributes = flowfile.attributes
    assert "tmp.a" not in attributes and "keep2" not in attributes
    assert "tmp.kept" not in attributes  # deleted even though a property set it (as NiFi)
    assert attributes["keep"] == "k" and attributes["fresh"] == "yes"
    assert attributes["uuid"] == flowfile.uuid


def test_update_attribute_cannot_change_uuid_and_unchanged_flowfile_has_no_event():
    runner = ProcessorRunner(UpdateAttribute, {"Delete Attributes Expression": "uuid|nothing"})
    original = runner.enqueue(b"")
    runner.run()
    [flowfile] = runner.output("success")
    assert flowfile.uuid == original.uuid and flowfile.attributes["uuid"] == original.uuid
    assert not [e for e in runner.events() if e.event_type == T.ATTRIBUTES_MODIFIED]


def test_update_attribute_rejects_a_bad_regex():
    assert UpdateAttribute.validate_properties({"Delete Attributes Expression": "(unclosed"})


# ---------------------------------------------------------------------------------- LogAttribute
LOGGER = "flowactors.processors.LogAttribute"


def test_log_attribute_logs_selected_attributes_and_passes_on(caplog):
    runner = ProcessorRunner(LogAttribute, {"Attributes to Ignore": "secret", "Log prefix": "<<P>>"})
    original = runner.enqueue(b"payload", {"color": "red", "secret": "s3cr3t"})
    with caplog.at_level(logging.INFO, logger=LOGGER):
        runner.run()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO
    message = record.getMessage()
    assert "Key: 'color'" in message and "'red'" in message
    assert "s3cr3t" not in message and "payload" not in message and "<<P>>" in message
    [flowfile] = runner.output("success")
    assert flowfile.attributes == original.attributes
    assert runner.events() == []  # an unchanged FlowFile: nothing to report


def test_log_attribute_payload_level_and_selection(caplog):
    runner = ProcessorRunner(LogAttribute, {"Log Level": "warn", "Log Payload": True, "Attributes to Log": "a",
                                            "Maximum Payload Size": "4 B"})
    runner.enqueue("héllo".encode(), {"a": "A", "b": "B"})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        runner.run()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "Key: 'a'" in message and "Key: 'b'" not in message
    assert "hél" in message and "héllo" not in message and "truncated at 4 bytes" in message


def test_log_attribute_payload_character_set(caplog):
    runner = ProcessorRunner(LogAttribute, {"Log Payload": True, "Character Set": "ISO-8859-1"})
    runner.enqueue("grüß".encode("latin-1"))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        runner.run()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert "grüß" in record.getMessage()


def test_log_attribute_regex_selection_and_trace_level(caplog):
    runner = ProcessorRunner(LogAttribute, {"Log Level": "trace",
                                            "Attributes to Log by Regular Expression": "x\\..*",
                                            "Attributes to Ignore by Regular Expression": ".*\\.no"})
    runner.enqueue(b"", {"x.yes": "1", "x.no": "2", "y": "3"})
    with caplog.at_level(logging.INFO, logger=LOGGER):
        runner.run()  # trace is below INFO: nothing logged
    assert not [r for r in caplog.records if r.name == LOGGER]
    with caplog.at_level(1, logger=LOGGER):
        runner.enqueue(b"", {"x.yes": "1", "x.no": "2", "y": "3"})
        runner.run()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == 5
    message = record.getMessage()
    assert "x.yes" in message and "x.no" not in message and "Key: 'y'" not in message
    assert len(runner.output("success")) == 2


# ---------------------------------------------------------------------------------- ExtractText
def test_extract_text_captures_groups():
    runner = ProcessorRunner(ExtractText, {"version": r"v(\d+)\.(\d+)", "whole": r"name=\w+", "none": r"zzz(\d)"})
    runner.enqueue(b"app name=demo v12.3 and v4.5")
    runner.enqueue(b"nothing to see")
    runner.run()
    [matched] = runner.output("matched")
    a = matched.attributes
    assert a["version"] == "12" and a["version.0"] == "v12.3" and a["version.1"] == "12" and a["version.2"] == "3"
    assert a["whole.0"] == "name=demo" and "whole" not in a  # no group 1: only name.0 (as NiFi)
    assert not any(k.startswith("none") for k in a)
    [unmatched] = runner.output("unmatched")
    assert not any(k.startswith(("version", "whole")) for k in unmatched.attributes)
    assert [e.event_type for e in runner.events()] == [T.ATTRIBUTES_MODIFIED]


def test_extract_text_options():
    runner = ProcessorRunner(ExtractText, {"word": r"^(a\w+)", "Include Capture Group 0": False,
                                           "Enable Case-insensitive Matching": True,
                                           "Enable Multiline Mode": True, "Maximum Capture Group Length": "3",
                                           "Enable repeating capture group": True})
    runner.enqueue(b"xyz\nAbcdef\nalpha\n")
    runner.run()
    [flowfile] = runner.output("matched")
    a = flowfile.attributes
    assert a["word"] == "Abc" and a["word.1"] == "Abc" and a["word.2"] == "alp"
    assert "word.0" not in a


def test_extract_text_dotall():
    runner = ProcessorRunner(ExtractText, {"body": r"<b>(.*)</b>", "Enable DOTALL Mode": True})
    runner.enqueue(b"<b>one\ntwo</b>")
    runner.run()
    assert runner.output("matched")[0].attributes["body"] == "one\ntwo"


def test_extract_text_reads_at_most_the_buffer_size():
    runner = ProcessorRunner(ExtractText, {"tail": r"(END)", "Maximum Buffer Size": "1 KB"})
    runner.enqueue(b"x" * 1024 + b"END")
    runner.enqueue(b"x" * 1000 + b"END")
    runner.run()
    assert [f.size for f in runner.output("unmatched")] == [1027]
    assert [f.size for f in runner.output("matched")] == [1003]


def test_extract_text_character_set():
    runner = ProcessorRunner(ExtractText, {"word": r"(\w+)$", "Character Set": "UTF-16"})
    runner.enqueue("grüße".encode("utf-16"))
    runner.run()
    assert runner.output("matched")[0].attributes["word"] == "grüße"


@pytest.mark.parametrize("properties", [{}, {"x": "(unclosed"}, {"x": "a", "Character Set": "no-such-charset"}])
def test_extract_text_invalid_configurations(properties):
    assert ExtractText.validate_properties(properties)
