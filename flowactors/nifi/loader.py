"""Importing a NiFi Python processor's module by its file, and constructing the processor.

As in NiFi, the module is imported from its file under its file name (``WriteMessage`` for
``WriteMessage.py``) unless that name is taken by another module, and a package's helper modules
are imported by their file names (``import ProcessorUtil``): the package folder is put on
``sys.path``. A module is imported once per process and file version (its modification time): an
edited file is imported again by the next flow that uses it.

The processor is constructed as NiFi constructs it, ``cls(jvm=...)``, or ``cls()`` when its
constructor takes no ``jvm`` (NiFi would refuse such a class; here it runs).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from nifiapi.__jvm__ import JvmHolder
from flowactors.nifi.inspection import ProcessorInfo

_modules: dict[tuple[str, int], ModuleType] = {}
_lock = threading.RLock()


class ProcessorLoadError(RuntimeError):
    """A processor's module could not be imported or its class constructed."""


def local_modules(info: ProcessorInfo) -> set[str]:
    """The module names a processor's package provides beside it (its helpers)."""
    package = info.package_dir
    return {p.stem for p in Path(package).glob("*.py")} if package else set()


def missing_imports(info: ProcessorInfo) -> list[str]:
    """The modules the processor's file imports that this Python cannot find (its dependencies,
    when they are installed only in its own runtime_env)."""
    local = local_modules(info) | {"nifiapi"}
    missing = []
    for name in info.imports:
        if name in local or name in sys.modules:
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def load_class(info: ProcessorInfo) -> type:
    """The processor class, its module imported in this process if it was not yet."""
    path = Path(info.path)
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError as err:
        raise ProcessorLoadError(f"cannot read the NiFi Python processor file {path}: {err}") from None
    with _lock:
        module = _modules.get(key)
        if module is None:
            module = _modules[key] = _import(info, path)
    cls = getattr(module, info.class_name, None)
    if not isinstance(cls, type):
        raise ProcessorLoadError(f"{path} defines no class '{info.class_name}' when imported")
    return cls


def _import(info: ProcessorInfo, path: Path) -> ModuleType:
    package = info.package_dir
    if package is not None and package not in sys.path:
        sys.path.insert(0, package)
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as err:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        if isinstance(err, Exception):
            raise ProcessorLoadError(f"cannot import the NiFi Python processor '{info.class_name}' from {path}: "
                                     f"{type(err).__name__}: {err}") from err
        raise
    return module


def _module_name(path: Path) -> str:
    """The file's stem, as NiFi names the module, unless another module holds that name."""
    stem = path.stem
    held = sys.modules.get(stem)
    if held is not None:
        if getattr(held, "__file__", None) == str(path):
            return stem
    else:
        try:
            spec = importlib.util.find_spec(stem)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin == str(path):
            return stem
    return f"_nifi_python_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{stem}"


def instantiate(cls: type, **injected: Any) -> Any:
    """A new processor, constructed with ``jvm=`` when it accepts it; then the attributes NiFi
    injects after construction (``logger``, ``identifier``) are set."""
    try:
        inspect.signature(cls).bind(jvm=JvmHolder.jvm)
        arguments = {"jvm": JvmHolder.jvm}
    except (TypeError, ValueError):
        arguments = {}
    try:
        processor = cls(**arguments)
    except Exception as err:
        raise ProcessorLoadError(f"constructing the NiFi Python processor '{cls.__name__}' failed: "
                                 f"{type(err).__name__}: {err}") from err
    for name, value in injected.items():
        setattr(processor, name, value)
    return processor
