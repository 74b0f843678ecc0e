"""NiFi 2 Python processors, unmodified, as flowactors processors (flows exported from NiFi are
loaded by ``flowactors.driver.nifi_export``).

``add_python_processor`` places a Python processor in a flow; ``python_processor_type`` makes its
processor type (``python_processor``). The modules for them, one a concept: ``inspection`` reads a
processor's source without importing it, ``extensions`` finds processors by name in extensions
folders and says what each needs installed, ``loader`` imports and constructs one, ``host`` is
flowactors' side of the ``nifiapi`` package (contexts, state, logger), ``flowfile`` the FlowFile
a transform receives, ``validation`` NiFi's property checks, ``record_transform`` the records of
a RecordTransform. docs/nifi-python-processors.md is the user's guide.
"""

from pathlib import Path
from typing import Any, Sequence

from flowactors.nifi.python_processor import NiFiPythonProcessor, python_processor_type, resolve_type_name
from flowactors.sdk.flow import Flow, ProcessorNode

__all__ = ["NiFiPythonProcessor", "add_python_processor", "python_processor_type", "resolve_type_name"]


def add_python_processor(flow: Flow, source: str | Path, name: str | None = None, *,
                         extensions: str | Path | Sequence[str | Path] | None = None,
                         properties: dict[str, Any] | None = None, version: str | None = None,
                         **scheduling: Any) -> ProcessorNode:
    """Place a NiFi 2 Python processor, unmodified, in ``flow``: ``source`` is its file, or with
    ``extensions`` (a folder or several) its class name, and ``version`` its
    ``ProcessorDetails.version`` among several of that name. Takes ``Flow.add``'s keywords; its
    dependencies become its Ray ``runtime_env`` (docs/nifi-python-processors.md)."""
    processor_type = python_processor_type(source, extensions=extensions, version=version)
    return flow.add(processor_type, name, properties=properties,
                    **processor_type.scheduling_defaults(properties or {}, scheduling))
