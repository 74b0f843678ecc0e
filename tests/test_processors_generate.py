"""GenerateFlowFile, and the registry of standard processors."""

from __future__ import annotations

import importlib
import pkgutil
import string

import pytest

import flowactors.processors as processors
from flowactors.sdk.flow import resolve_processor_type
from flowactors.sdk.processor import Processor
from flowactors.processors import GenerateFlowFile
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

pytestmark = pytest.mark.usefixtures("processor_engine")  # each test on both engines

ALNUM = set((string.ascii_letters + string.digits).encode())


def test_every_processor_is_exported_by_name_and_documented():
    names = processors.__all__
    defined = {cls.__name__ for module in _processor_modules() for cls in vars(module).values()
               if isinstance(cls, type) and issubclass(cls, Processor) and cls.__module__ == module.__name__
               and not cls.__name__.startswith("_") and vars(cls).get("on_trigger")}
    assert defined <= set(names), f"processors not exported: {sorted(defined - set(names))}"
    assert len(names) == len(set(names))
    for name in names:
        cls = getattr(processors, name)
        assert issubclass(cls, Processor) and cls.__name__ == name
        assert resolve_processor_type(name) is cls
        assert cls.__doc__ and "Provenance" in cls.__doc__, name
        # a flow's exit has none; a scripted processor's are its script's
        assert cls.relationships or cls in (processors.OutputPort, processors.InvokeScriptedProcessor), name


def _processor_modules() -> list:
    """Every module of the ``flowactors.processors`` package, imported."""
    found = []
    for info in pkgutil.walk_packages(processors.__path__, prefix="flowactors.processors."):
        found.append(importlib.import_module(info.name))
    return found


def test_defaults_make_one_empty_flowfile_per_trigger_with_a_create_event():
    runner = ProcessorRunner(GenerateFlowFile)
    runner.run(3)
    out = runner.output("success")
    assert len(out) == 3
    assert all(f.size == 0 and f.claim is None for f in out)
    events = runner.events()
    assert [e.event_type for e in events] == [T.CREATE] * 3
    assert sorted(e.flowfile_uuid for e in events) == sorted(f.uuid for f in out)


def test_file_size_and_batch_size_text_data_shared_content():
    runner = ProcessorRunner(GenerateFlowFile, {"File Size": "1 KB", "Batch Size": "4"})
    runner.run(2)
    contents = runner.contents("success")
    assert len(contents) == 8
    assert all(len(c) == 1024 for c in contents)
    assert all(set(c) <= ALNUM for c in contents)
    assert len(set(contents)) == 1  # not unique: the same content every time
    assert runner.backend.commits == 2  # one commit per trigger, whatever the batch


def test_unique_flowfiles_differ_and_binary_format_is_not_text():
    runner = ProcessorRunner(GenerateFlowFile, {"File Size": "4 KB", "Batch Size": "3", "Unique FlowFiles": True,
                                                "Data Format": "Binary"})
    runner.run()
    contents = runner.contents("success")
    assert len(set(contents)) == 3
    assert all(len(c) == 4096 for c in contents)
    assert any(not set(c) <= ALNUM for c in contents)


def test_custom_text_with_expressions_and_character_set():
    runner = ProcessorRunner(GenerateFlowFile, {"Custom Text": "é-${filename}", "File Size": "1 MB",
                                                "Character Set": "ISO-8859-1", "Batch Size": "2"})
    runner.run()
    for flowfile in runner.output("success"):
        assert runner.read(flowfile) == ("é-" + flowfile.attributes["filename"]).encode("latin-1")


def test_dynamic_properties_become_attributes_and_mime_type():
    runner = ProcessorRunner(GenerateFlowFile, {"color": "blue", "id": "${uuid}", "Mime Type": "text/plain"})
    runner.run()
    [flowfile] = runner.output("success")
    assert flowfile.attributes["color"] == "blue"
    assert flowfile.attributes["id"] == flowfile.uuid
    assert flowfile.attributes["mime.type"] == "text/plain"


def test_max_flowfiles_stops_and_yields():
    runner = ProcessorRunner(GenerateFlowFile, {"Batch Size": "3", "Max FlowFiles": "5"})
    runner.run(4, stop=False)
    assert len(runner.output("success")) == 5
    assert runner.context._yield_requested
    runner.run(2)  # a later trigger in the same run still makes nothing
    assert len(runner.output("success")) == 5


@pytest.mark.parametrize("instance,expected", [(0, 4), (1, 3), (2, 3)])
def test_max_flowfiles_is_shared_between_concurrent_tasks(instance, expected):
    runner = ProcessorRunner(GenerateFlowFile, {"Batch Size": "100", "Max FlowFiles": "10"})
    runner.context.concurrent_tasks = 3
    runner.context.instance = instance
    runner.run(3)
    assert len(runner.output("success")) == expected


@pytest.mark.parametrize("properties", [
    {"File Size": "ten"}, {"Batch Size": "0"}, {"Data Format": "Hex"},
    {"Data Format": "Binary", "Custom Text": "x"}, {"Max FlowFiles": "-1"}, {"Unique FlowFiles": "yes"},
])
def test_invalid_configurations_are_refused(properties):
    assert GenerateFlowFile.validate_properties(properties)
