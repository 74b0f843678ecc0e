"""Loading a flow from where users keep it: a ``flow.py``, a flowactors JSON definition, or a
flow NiFi wrote (a definition downloaded from NiFi or exported from NiFi Registry, a NiFi
instance's ``flow.json.gz``: ``nifi_formats``, ``nifi_export``), with the processor types they
name resolved.

``load_flow`` reads a file (what ``flowactors run|validate|graph`` and the cluster job load);
``load_definition`` reads a definition's text or object of either kind (processor types named as
``flowactors.sdk.flow.resolve_processor_type`` resolves them).
A file or definition that cannot be loaded is one ``FlowLoadError`` or ``FlowValidationError``,
whose message a user can act on: a file that is not JSON, not gzip or not Python is one line
naming the file, the line and what is wrong there, never a Python traceback.
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
import traceback
import zlib
from pathlib import Path
from typing import Any, Sequence

import orjson

from flowactors.driver.errors import FlowLoadError
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.driver.nifi_formats import nifi_definition
from flowactors.sdk.flow import Flow, read_definition

#: the first bytes of a gzip file (a NiFi instance's flow.json.gz)
GZIP_MAGIC = b"\x1f\x8b"


def load_definition(text: str | bytes | dict, *, extensions: Sequence[str | Path] | None = None,
                    command: str | None = None) -> Flow:
    """A flow from a definition's JSON text (or its object): a flowactors definition, or one NiFi
    wrote (``nifi_formats``), whose Python processors are looked for in ``extensions`` (folders;
    ``command``, the CLI command loading it, is what a problem says to give them to)."""
    data = text if isinstance(text, dict) else read_definition(text)
    nifi = nifi_definition(data)
    if nifi is not None:
        return flow_from_nifi(nifi, extensions=extensions, command=command)
    return Flow.from_dict(data)


def load_flow(path: str | Path, extensions: Sequence[str] | None = None, *, command: str | None = None) -> Flow:
    """A Flow from a ``.json`` definition (a NiFi one too, its Python processors found in
    ``extensions``), a gzipped one (``.gz``: a NiFi instance's flow.json.gz) or a ``.py`` file
    (its ``flow`` variable or ``build_flow()``); ``command`` as ``load_definition`` takes it.

    As ``python`` does for a script, the flow file's folder (and, for a definition, the current
    folder) comes first on ``sys.path``, so a definition saved by a script finds the processors
    it names (``shout_flow.Shout``); a ``.py`` flow is imported under its own name when that
    name finds this file, so a flow it saves names its processors as any process imports them.
    Processors from modules outside the installed packages travel to the actors by value."""
    path = Path(path)
    if not path.is_file():
        raise FlowLoadError(f"no flow file at {path}")
    if path.suffix in (".json", ".gz"):
        folders = _importable_first(path.parent.resolve(), Path.cwd())
        flow = load_definition(_read_json(path), extensions=extensions, command=command)
        _by_value(node.type.__module__ for node in flow.processors.values() if _defined_in(node.type, folders))
        return flow
    if path.suffix != ".py":
        raise FlowLoadError(f"{path}: a flow is a .py or .json file (or a NiFi instance's flow.json.gz)")
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
    try:
        spec.loader.exec_module(module)
    except Exception as err:   # the user's code: one line saying where, not a traceback
        del sys.modules[module_name]
        raise FlowLoadError(_failed_at(path, err)) from None
    _by_value([module_name])  # processors defined in the file reach the actors
    return _flow_of(module, path)


def _read_json(path: Path) -> Any:
    """The JSON object a definition file holds (gunzipped first when it is gzip)."""
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise FlowLoadError(f"{path}: not a readable gzip file ({err})") from None
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise FlowLoadError(f"{path}: line {err.lineno}, column {err.colno}: not valid JSON ({err.msg})") from None
    if not isinstance(parsed, dict):
        raise FlowLoadError(f"{path}: a flow definition is a JSON object, not {type(parsed).__name__}")
    return parsed


def _failed_at(path: Path, err: Exception) -> str:
    """One line: where in the flow file ``path`` loading it failed, and why."""
    if isinstance(err, SyntaxError) and err.lineno is not None:
        return f"{err.filename or path}, line {err.lineno}: {err.msg} (the file is not valid Python)"
    source = str(path.resolve())
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if frame.filename == source]
    where = f"{path}, line {lines[-1]}" if lines else str(path)
    return f"{where}: {type(err).__name__}: {err} (python {path} shows the traceback)"


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
