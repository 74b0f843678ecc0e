"""``flowactors types``: the types a flow can name, with the NiFi classes each imports as, and the
NiFi Python processors of extensions folders by class and version (as NiFi lists them)."""

from __future__ import annotations

import json

from cli_helpers import run_cli

TRANSFORM = """from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult

class WriteMessage(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']
    class ProcessorDetails:
        version = '{version}'
    def transform(self, context, flowFile):
        return FlowFileTransformResult("success")
"""


def test_types_lists_each_standard_type_with_the_nifi_classes_it_imports_as(capsys):
    status, out, err = run_cli(capsys, "types", "--json")
    listed = json.loads(out)
    assert status == 0 and err == ""
    assert listed["processors"]["JoltTransformJSON"] == ["org.apache.nifi.processors.jolt.JoltTransformJSON",
                                                         "org.apache.nifi.processors.standard.JoltTransformJSON"]
    assert listed["processors"]["ExecuteStateless"] == []   # flowactors' own
    assert "org.apache.nifi.distributed.cache.server.map.MapCacheServer" in listed["services"]["DistributedMapCacheServer"]
    assert listed["python processors"] == {}


def test_types_lists_python_processors_by_class_and_version(capsys, tmp_path):
    for file, version in (("WriteMessage.py", "0.0.1-SNAPSHOT"), ("WriteMessageV2.py", "0.0.2-SNAPSHOT")):
        (tmp_path / file).write_text(TRANSFORM.format(version=version))
    status, out, _ = run_cli(capsys, "types", "--extensions", str(tmp_path))
    assert status == 0
    assert out.splitlines()[-2:] == [f"NiFi Python processors in {tmp_path} (1):",
                                     "  WriteMessage  0.0.1-SNAPSHOT, 0.0.2-SNAPSHOT"]
    status, out, err = run_cli(capsys, "types", "--extensions", str(tmp_path / "nope"))
    assert (status, out) == (2, "") and err == f"flowactors: the extensions folder {tmp_path / 'nope'} does not exist\n"
