"""What the scripted components share: their four properties, checking them, reading and compiling
the script once, running it with NiFi's imports, and a script's error in one line."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Mapping

from flowactors.sdk.script_api.loader import ModuleCache, compiled, running, syntax_problem
from flowactors.sdk.processor import PropertyDescriptor, PropertyValue

#: the Script Engine flowactors runs: NiFi 1.x's name for its Jython engine, here Python 3
ENGINE = "python"
#: NiFi's other script engines, refused with a clear sentence
OTHER_ENGINES = ("Groovy", "ECMAScript", "Clojure", "lua", "ruby", "nashorn", "AWKScript")


def _engine_problem(value: str) -> str | None:
    if value == ENGINE:
        return None
    return (f"{value!r} scripts cannot run in flowactors: only Python scripts do (Script Engine 'python', run "
            f"by Python 3); rewrite the script in Python or keep this processor in NiFi")


SCRIPT_PROPERTIES = (
    PropertyDescriptor("Script Engine", "The language of the script: python (Python 3; NiFi 1.x's Jython engine "
                       "name)", required=True, default=ENGINE, validator=_engine_problem),
    PropertyDescriptor("Script File", "The file holding the script (only one of Script File and Script Body)",
                       expression_language=True),
    PropertyDescriptor("Script Body", "The script itself (only one of Script File and Script Body)"),
    PropertyDescriptor("Module Directory", "Comma-separated folders (or files, meaning their folder) the script "
                       "imports modules from", expression_language=True),
)
#: NiFi 2's name of Script Engine
NIFI_PROPERTY_NAMES = {"Script Language": "Script Engine"}


class ScriptError(RuntimeError):
    """A script failed (to compile, to run, or in a method flowactors called); one line."""


@dataclass
class Script:
    """A script's text, where it came from (``name``: the file, or ``<Script Body>``), its
    compiled code and the modules its Module Directory gives."""

    text: str
    name: str
    modules: ModuleCache = field(default_factory=ModuleCache)

    @property
    def code(self):
        return compiled(self.text, self.name)

    def run(self, bindings: dict[str, Any]) -> dict[str, Any]:
        """Execute the script over ``bindings`` (its globals, returned); a failure is a
        ``ScriptError`` saying what and where."""
        namespace = {"__name__": "__main__", **bindings}
        try:
            with running(self.modules):
                exec(self.code, namespace)
        except SyntaxError as err:
            raise ScriptError(syntax_problem(err, self.name)) from None
        except Exception as err:
            raise self.error(err) from err   # the script's traceback stays for the error log
        return namespace

    def call(self, method: Any, *args: Any) -> Any:
        """A method of an object the script made, with the script's imports; failures as ``run``."""
        try:
            with running(self.modules):
                return method(*args)
        except Exception as err:
            raise self.error(err) from err

    def error(self, err: BaseException) -> ScriptError:
        """``err`` in one line, with the script's line it came from when known."""
        lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if frame.filename == self.name]
        where = f" at line {lines[-1]} of {self.name}" if lines else f" in {self.name}"
        message = " ".join(str(err).split()) or "(no message)"
        return ScriptError(f"the script failed{where}: {type(err).__name__}: {message}")


def _value(values: Mapping[str, str], name: str) -> str | None:
    raw = values.get(name)
    return None if raw is None else PropertyValue(raw).evaluate()


def script_from(values: Mapping[str, str]) -> Script:
    """The script the property values name, read and compiled (``ScriptError`` otherwise)."""
    body, path = values.get("Script Body"), _value(values, "Script File")
    if bool(body) == bool(path):
        raise ScriptError("exactly one of Script File and Script Body must be set")
    directories = [os.path.dirname(p) if os.path.isfile(p) else p
                   for p in (s.strip() for s in (_value(values, "Module Directory") or "").split(",")) if p]
    if body:
        script = Script(body, "<Script Body>", ModuleCache(directories))
    else:
        try:
            with open(path, encoding="utf-8") as file:
                script = Script(file.read(), path, ModuleCache(directories))
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            raise ScriptError(f"cannot read Script File {path}: {reason}") from None
    try:
        script.code
    except SyntaxError as err:
        raise ScriptError(syntax_problem(err, script.name)) from None
    return script


def script_problems(values: Mapping[str, str]) -> list[str]:
    """What keeps the script from loading, one sentence (none when it compiles)."""
    if _engine_problem(values.get("Script Engine", ENGINE)):
        return []   # said by the property's own validation
    try:
        script_from(values)
    except ScriptError as err:
        return [str(err)]
    return []
