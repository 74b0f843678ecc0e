"""A processor's dependencies cannot replace a package flowactors runs with in its process.

Issue 50, finding 4: a NiFi 2 Python processor pinning ``numpy==1.25.0`` had its runtime_env
installed, then its actor died on ``pyarrow requires NumPy 2.0 or newer`` and the user saw
``ActorUnavailableError``. Now such a pin is a validation problem naming the package, both
versions and what to do, before anything starts (``flowactors.sdk.runtime_env``).
"""

from __future__ import annotations

import importlib.metadata
import textwrap

import pytest

from flowactors import Flow, FlowValidationError
from flowactors.cli.main import main
from flowactors.nifi import add_python_processor
from flowactors.processors import GenerateFlowFile
from flowactors.sdk.runtime_env import framework_packages, pip_conflicts

NUMPY = importlib.metadata.version("numpy")
RAY = importlib.metadata.version("ray")

PROCESSOR = '''
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult

class OldNumpy(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']
    class ProcessorDetails:
        version = "1.0"
        dependencies = {dependencies!r}
    def transform(self, context, flowFile):
        import numpy
        return FlowFileTransformResult("success", contents=numpy.__version__)
'''


def test_the_packages_flowactors_runs_with_include_ray_its_needs_and_pyarrows_numpy():
    packages = framework_packages()
    assert packages["ray"] == RAY and packages["numpy"] == NUMPY and "lmdb" in packages and "requests" in packages
    assert "six" not in packages  # not loaded in a processor's process: a runtime_env may pin it


@pytest.mark.parametrize("line, conflicts", [
    ("numpy==1.25.0", True), (f"numpy=={NUMPY}", False), ("numpy>=2", False), ("numpy", False),
    ("ray<2", True), ("Ray_Cpp<2", False), ("six==1.16.0", False), ("some-package-not-here==1.0", False),
    ("--index-url https://example.org/simple", False), ("PyYAML<1", True),
])
def test_a_pin_conflicts_only_if_it_excludes_the_version_flowactors_runs_with(line, conflicts):
    assert bool(pip_conflicts({"pip": [line]})) is conflicts
    assert bool(pip_conflicts({"pip": {"packages": [line]}})) is conflicts  # Ray's other pip form


def test_a_processors_own_runtime_env_pin_is_a_validation_problem():
    flow = Flow("pins")
    flow.add(GenerateFlowFile, "generate", auto_terminate=["success"],
             runtime_env={"pip": ["numpy==1.25.0", "humanize>=4"]})
    with pytest.raises(FlowValidationError) as raised:
        flow.validate()
    assert raised.value.problems == [
        f"processor 'generate': its dependency 'numpy==1.25.0' asks for another numpy than the {NUMPY} flowactors "
        f"runs with in the same process (a runtime_env adds packages over flowactors' own; it cannot replace them "
        f"without breaking the process as it starts): drop the pin, or allow {NUMPY}"]


def test_a_nifi_processor_pinning_numpy_is_refused_by_validate_in_one_line(tmp_path, capsys):
    source = tmp_path / "OldNumpy.py"
    source.write_text(textwrap.dedent(PROCESSOR.format(dependencies=["numpy==1.25.0"])))
    flow = Flow("old-numpy")
    generate = flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 1})
    add_python_processor(flow, source, "old", auto_terminate=["success", "failure", "original"])
    flow.connect(generate, "old")
    flow.save(tmp_path / "flow.json")
    assert main(["validate", str(tmp_path / "flow.json")]) != 0
    err = capsys.readouterr().err
    assert "processor 'old': its dependency 'numpy==1.25.0' asks for another numpy than the" in err
    assert "Traceback" not in err

    source.write_text(textwrap.dedent(PROCESSOR.format(dependencies=[f"numpy>={NUMPY}"])))
    assert main(["validate", str(tmp_path / "flow.json")]) == 0
