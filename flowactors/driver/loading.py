"""Loading a flow from where users keep it: a ``flow.py``, a flowactors JSON definition, or a
definition exported from NiFi (``nifi_export``), with the processor types they name resolved.

``load_flow`` reads a file (what ``flowactors run|validate|graph`` and the cluster job load);
``load_definition`` reads a definition's text or object of either kind (processor types named as
``flowactors.sdk.flow.resolve_processor_type`` resolves them).
A file or definition that cannot be loaded is one ``FlowLoadError`` or ``FlowValidationError``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Sequence

from flowactors.driver.errors import FlowLoadError
from flowactors.driver.nifi_export import flow_from_nifi, is_nifi_definition
from flowactors.sdk.flow import Flow, read_definition


def load_definition(text: str | bytes | dict, *, extensions: Sequence[str | Path] | None = None) -> Flow:
    """A flow from a definition's JSON text (or its object): a flowactors definition, or one
    exported from NiFi, whose Python processors are looked for in ``extensions`` (folders)."""
    data = text if isinstance(text, dict) else read_definition(text)
    if is_nifi_definition(data):
        return flow_from_nifi(data, extensions=extensions)
    return Flow.from_dict(data)


def load_flow(path: str | Path, extensions: Sequence[str] | None = None) -> Flow:
    """A Flow from a ``.json`` definition (a NiFi one too, its Python processors found in
    ``extensions``) or a ``.py`` file (its ``flow`` variable or ``build_flow()``).

    As ``python`` does for a script, the flow file's folder (and, for a definition, the current
    folder) comes first on ``sys.path``, so a definition saved by a script finds the processors
    it names (``shout_flow.Shout``); a ``.py`` flow is imported under its own name when that
    name finds this file, so a flow it saves names its processors as any process imports them.
    Processors from modules outside the installed packages travel to the actors by value."""
    path = Path(path)
    if not path.is_file():
        raise FlowLoadError(f"no flow file at {path}")
    if path.suffix == ".json":
        folders = _importable_first(path.parent.resolve(), Path.cwd())
        flow = load_definition(path.read_bytes(), extensions=extensions)
        _by_value(node.type.__module__ for node in flow.processors.values() if _defined_in(node.type, folders))
        return flow
    if path.suffix != ".py":
        raise FlowLoadError(f"{path}: a flow is a .py or .json file")
    folder = path.parent.resolve()
    _importable_first(folder)
    module_name = path.stem
    found = importlib.util.find_spec(module_name) if module_name.isidentifier() else None
    if found is None or found.origin is None or Path(found.origin).resolve() != path.resolve():
        module_name = f"flowactors_user_flow_{path.stem}"   # its own name finds another module
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # a .py file always has both: a spec names its loader
        raise FlowLoadError(f"{path}: Python cannot load this file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _by_value([module_name])  # processors defined in the file reach the actors
    return _flow_of(module, path)


def _importable_first(*folders: Path) -> tuple[Path, ...]:
    """Put ``folders`` first on ``sys.path`` (once each); returns them."""
    for folder in reversed(folders):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    return folders


#: flowactors' own packages: every actor imports them, so they are never sent by value (a class
#: sent by value is another class there: ``isinstance`` checks against ours would fail)
OWN_PACKAGES = ("flowactors", "nifiapi", "repositories")


def _defined_in(processor_type: type, folders: Sequence[Path]) -> bool:
    """Whether ``processor_type``'s module is a user's file below one of ``folders`` (not installed,
    not one of flowactors' own packages, which a checkout run from its root also holds)."""
    if processor_type.__module__.partition(".")[0] in OWN_PACKAGES:
        return False
    module = sys.modules.get(processor_type.__module__)
    source = getattr(module, "__file__", None)
    return source is not None and any(Path(source).resolve().is_relative_to(f) for f in folders)


def _by_value(module_names) -> None:
    """Let Ray pickle these modules' classes by value: an actor need not import them."""
    import ray.cloudpickle  # Ray, heavy: only when a flow from a user's file is loaded

    for name in set(module_names):
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])


def _flow_of(module, path: Path) -> Flow:
    """The flow a ``.py`` file defines: its ``flow``, ``build_flow()``, or its only Flow."""
    if isinstance(getattr(module, "flow", None), Flow):
        return module.flow
    if callable(getattr(module, "build_flow", None)):
        flow = module.build_flow()
        if isinstance(flow, Flow):
            return flow
    flows = [v for v in vars(module).values() if isinstance(v, Flow)]
    if len(flows) == 1:
        return flows[0]
    raise FlowLoadError(f"{path} defines no flow: give it a variable 'flow' or a function 'build_flow()' "
                        f"returning a flowactors.Flow")
