"""NiFi interoperability: flows exported from NiFi (``flow_definition``) and the standard processors
they may use (``standard_processors``); NiFi 2 Python processors, unmodified, as flowactors processors.

``Flow.add_python_processor`` places a Python processor; ``python_processor_type`` makes its
processor type (``python_processor``). The modules for them, one a concept: ``inspection`` reads a
processor's source without importing it, ``extensions`` finds processors by name in extensions
folders and says what each needs installed, ``loader`` imports and constructs one, ``host`` is
flowactors' side of the ``nifiapi`` package (contexts, state, logger), ``flowfile`` the FlowFile
a transform receives, ``validation`` NiFi's property checks, ``record_transform`` the records of
a RecordTransform. docs/nifi-python-processors.md is the user's guide.
"""

from flowactors.nifi.python_processor import NiFiPythonProcessor, python_processor_type, resolve_type_name

__all__ = ["NiFiPythonProcessor", "python_processor_type", "resolve_type_name"]
