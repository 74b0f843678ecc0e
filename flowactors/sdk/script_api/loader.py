"""Compiling scripts once, and the imports they see while they run.

``compiled`` compiles a script's text once (cached by text and name). A script written for
Jython (Python 2) may hold ``print x`` statements and ``except E, e:`` clauses: when the text does
not compile as Python 3, those two forms are rewritten (``print(x)``, ``except E as e:``) and it is
compiled again; if that fails too, the first ``SyntaxError`` stands.

``running(module_dirs)`` makes, on this thread only and until it ends, two kinds of module
importable through a meta path finder (nothing is put on ``sys.path``):

* the Java packages of ``java.MODULES`` and ``nifi.MODULES`` (and the packages above them): an
  import of any other name under ``java``, ``javax``, ``org`` or ``jarray`` raises ``ImportError``
  naming the Java class and saying it is not offered;
* the modules found in the script's Module Directory (``module_dirs``), each loaded once and kept
  by the ``ModuleCache`` the caller gives.

When the last script running in the process ends, those modules leave ``sys.modules`` again, so
code outside scripts never sees them.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from flowactors.sdk.script_api import java, nifi

#: the top-level names of Java packages: what is not offered under them is refused clearly
JAVA_ROOTS = ("java", "javax", "org", "jarray")
OFFERED: dict[str, dict[str, Any]] = {**java.MODULES, **nifi.MODULES}

_PRINT = re.compile(r"^(?P<indent>[ \t]*)print\b(?![ \t]*[(=.\[])[ \t]*(?P<rest>[^#\n]*?)[ \t]*(?P<comment>#.*)?$",
                    re.MULTILINE)
_EXCEPT = re.compile(r"^(?P<head>[ \t]*except[ \t]+)(?P<kind>[\w.]+|\([^)\n]*\))[ \t]*,[ \t]*(?P<name>\w+)[ \t]*:",
                     re.MULTILINE)


def python2_rewritten(text: str) -> str:
    """``text`` with Python 2's ``print x`` statements and ``except E, e:`` clauses in Python 3's
    spelling (nothing else changes)."""
    text = _PRINT.sub(lambda m: f"{m['indent']}print({m['rest']}){(' ' + m['comment']) if m['comment'] else ''}",
                      text)
    return _EXCEPT.sub(lambda m: f"{m['head']}{m['kind']} as {m['name']}:", text)


@functools.lru_cache(maxsize=128)
def compiled(text: str, name: str) -> types.CodeType:
    """The script compiled (once per text and name); ``SyntaxError`` when it is not Python 3, even
    with Python 2's print statements and except clauses rewritten (see the module docstring)."""
    try:
        return compile(text, name, "exec")
    except SyntaxError as first:
        rewritten = python2_rewritten(text)
        if rewritten != text:
            try:
                return compile(rewritten, name, "exec")
            except SyntaxError:
                pass
        raise first from None


def syntax_problem(err: SyntaxError, script: str) -> str:
    """A ``SyntaxError`` of ``script`` (its name), or of a module it imports, in one line."""
    what = f"the script ({script})" if err.filename in (None, script) else f"module {err.filename}"
    return f"{what} does not compile: " + (f"line {err.lineno}: {err.msg}" if err.lineno else str(err.msg))


class ModuleCache:
    """The modules one script's Module Directory gave, by name (loaded once, kept for its runs)."""

    def __init__(self, directories: Sequence[str] = ()):
        self.directories = [d for d in directories if d]
        self.modules: dict[str, types.ModuleType] = {}


class _Cached(importlib.abc.Loader):
    """Gives back a module made before (a shim, or a module a Module Directory gave)."""

    def __init__(self, module: types.ModuleType):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        """Already executed."""


class _Keeping(importlib.abc.Loader):
    """Loads a Module Directory's module and keeps it in the cache; Python source is compiled as
    a script is (``compiled``: Python 2's print statements and except clauses allowed)."""

    def __init__(self, loader: importlib.abc.Loader, cache: ModuleCache, name: str):
        self.loader, self.cache, self.name = loader, cache, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.cache.modules[self.name] = module   # before: its own imports may name its submodules
        try:
            source = self.loader.get_source(self.name) if isinstance(self.loader, importlib.abc.SourceLoader) else None
            if source is None:
                self.loader.exec_module(module)
            else:
                exec(compiled(source, module.__file__), module.__dict__)
        except BaseException:
            del self.cache.modules[self.name]
            raise


class _Finder(importlib.abc.MetaPathFinder):
    """The finder ``running`` activates (see the module docstring)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.shims: dict[str, types.ModuleType] = {}
        self.lock = threading.Lock()
        self.active = 0
        self.served: set[str] = set()

    def find_spec(self, name: str, path=None, target=None):
        cache: ModuleCache | None = getattr(self.local, "cache", None)
        if cache is None:
            return None
        if name.split(".")[0] in JAVA_ROOTS:
            return self._java(name)
        module = cache.modules.get(name)
        if module is not None:
            return self._serve(name, _Cached(module), is_package=hasattr(module, "__path__"))
        if not cache.directories:
            return None
        parent = name.rpartition(".")[0]
        if parent and parent not in cache.modules:
            return None   # a submodule of a module that is not the directory's
        # a top-level name is looked for in the directories, then in their packages' folders
        # (Jython's implicit relative imports: ``from compress import Compress`` in a package)
        search = cache.modules[parent].__path__ if parent else [
            *cache.directories, *(p for m in list(cache.modules.values()) for p in getattr(m, "__path__", ()))]
        spec = importlib.machinery.PathFinder.find_spec(name, list(search))
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Keeping(spec.loader, cache, name)
        with self.lock:
            self.served.add(name)
        return spec

    def _java(self, name: str):
        module = self.shims.get(name)
        if module is None:
            if name not in (*OFFERED, *JAVA_ROOTS) and not any(known.startswith(name + ".") for known in OFFERED):
                raise ImportError(f"the Java class or package '{name}' is not offered to Python scripts in "
                                  f"flowactors (docs/scripting.md lists the ones that are)", name=name)
            module = self.shims[name] = _shim_module(name)
        return self._serve(name, _Cached(module), is_package=True)

    def _serve(self, name: str, loader: importlib.abc.Loader, is_package: bool):
        with self.lock:
            self.served.add(name)
        return importlib.util.spec_from_loader(name, loader, is_package=is_package)

    def enter(self, cache: ModuleCache) -> Any:
        previous = getattr(self.local, "cache", None)
        self.local.cache = cache
        with self.lock:
            self.active += 1
        return previous

    def leave(self, previous: Any) -> None:
        self.local.cache = previous
        with self.lock:
            self.active -= 1
            if self.active:
                return
            for name in self.served:
                sys.modules.pop(name, None)
            self.served.clear()


def _shim_module(name: str) -> types.ModuleType:
    """The module of a Java package: its offered classes; any other name is refused clearly."""
    module = types.ModuleType(name, f"Java package {name}, as flowactors offers it to Python scripts")
    module.__path__ = []   # a package: ``from package import Name`` asks the finder for what it lacks
    module.__dict__.update(OFFERED.get(name, {}))
    return module


_FINDER = _Finder()


@contextmanager
def running(cache: ModuleCache) -> Iterator[None]:
    """While a script runs on this thread: its imports as the module docstring says (the finder
    joins ``sys.meta_path`` at the first script's run, not when the processors are imported)."""
    if _FINDER not in sys.meta_path:
        with _FINDER.lock:
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
    previous = _FINDER.enter(cache)
    try:
        yield
    finally:
        _FINDER.leave(previous)
