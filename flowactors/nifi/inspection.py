"""Reading a NiFi Python processor from its source, without importing it.

A processor file names packages that may not be installed where the flow is built (they are
installed in the processor's own Ray ``runtime_env``), so, like NiFi, everything needed before a
processor runs is read with ``ast``: which classes are processors (a nested ``class Java`` whose
``implements`` names a processor interface), their ``ProcessorDetails`` (version, description,
tags, dependencies), use cases, the ``PropertyDescriptor(...)`` and ``Relationship(...)`` calls in
the class body, which optional methods they define, and which modules the file imports (so that
``flowactors.nifi.loader`` can tell whether the file is importable here).

Values are read where they are literals (also names of module- or class-level constants,
``X.attr`` read as ``'attr'`` as NiFi does for enum members, and ``+`` of strings); anything else
reads as None.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INTERFACES = {
    "org.apache.nifi.python.processor.FlowFileTransform": "FlowFileTransform",
    "org.apache.nifi.python.processor.RecordTransform": "RecordTransform",
    "org.apache.nifi.python.processor.FlowFileSource": "FlowFileSource",
}
#: the optional methods a processor may define, which change how it is driven
OPTIONAL_METHODS = ("getPropertyDescriptors", "getRelationships", "getDynamicPropertyDescriptor", "customValidate",
                    "onScheduled", "onStopped")


@dataclass
class PropertyInfo:
    """A ``PropertyDescriptor(...)`` call read from the source (keyword arguments only, as NiFi)."""

    variable: str
    name: str | None
    description: str | None = None
    display_name: str | None = None
    required: bool = False
    sensitive: bool = False
    default_value: str | None = None
    allowable_values: list[str] | None = None
    expression_language_scope: str = "NONE"
    validators: list[str] = field(default_factory=list)
    #: (variable of the property depended on, dependent values)
    dependencies: list[tuple[str, list[str]]] = field(default_factory=list)
    controller_service_definition: str | None = None
    dynamic: bool = False


@dataclass
class ProcessorInfo:
    """What the source says about one processor class."""

    class_name: str
    interface: str                      # FlowFileTransform, RecordTransform or FlowFileSource
    path: str                           # the module file, absolute
    version: str = "Unknown"
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    use_cases: list[dict] = field(default_factory=list)
    multi_processor_use_cases: list[dict] = field(default_factory=list)
    properties: list[PropertyInfo] = field(default_factory=list)
    #: (name, description, auto_terminated) of each ``Relationship(...)`` call in the class body
    relationships: list[tuple[str, str, bool]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    #: the top-level module names the file imports (relative imports left out)
    imports: list[str] = field(default_factory=list)

    @property
    def package_dir(self) -> str | None:
        """The processor's package folder (holding ``__init__.py``), if it is in one."""
        folder = Path(self.path).parent
        return str(folder) if (folder / "__init__.py").is_file() else None

    def defines(self, method: str) -> bool:
        return method in self.methods


class InspectionError(ValueError):
    """A file could not be read as Python."""


def inspect_file(path: str | Path) -> list[ProcessorInfo]:
    """Every processor class in a Python file, in the file's order. A file is parsed once for as
    long as it is not changed (a flow's processors found in one folder would parse it each)."""
    path = Path(path).resolve()
    try:
        changed = path.stat().st_mtime_ns
    except OSError as err:
        raise InspectionError(f"cannot read {path} as Python: {err}") from None
    return list(_inspect(path, changed))


@functools.lru_cache(maxsize=512)
def _inspect(path: Path, changed: int) -> tuple[ProcessorInfo, ...]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as err:
        raise InspectionError(f"cannot read {path} as Python: {err}") from None
    constants = _constants(tree.body, {})
    imports = _imports(tree)
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            interface = _interface(node, constants)
            if interface is not None:
                found.append(_processor(node, interface, str(path), constants, imports))
    return tuple(found)


def _interface(node: ast.ClassDef, constants: dict) -> str | None:
    for inner in node.body:
        if isinstance(inner, ast.ClassDef) and inner.name == "Java":
            implements = _assignments(inner.body, constants).get("implements")
            for name in implements if isinstance(implements, list) else []:
                if name in INTERFACES:
                    return INTERFACES[name]
    return None


def _processor(node: ast.ClassDef, interface: str, path: str, constants: dict, imports: list[str]) -> ProcessorInfo:
    info = ProcessorInfo(node.name, interface, path, imports=imports)
    class_constants = _constants(node.body, constants)
    for inner in node.body:
        if isinstance(inner, ast.ClassDef) and inner.name == "ProcessorDetails":
            details = _assignments(inner.body, class_constants)
            version = details.get("version", "Unknown")
            info.version = version if isinstance(version, str) else "Unknown"
            info.description = _text(details.get("description"))
            info.tags = _strings(details.get("tags"))
            info.dependencies = _strings(details.get("dependencies"))
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name in OPTIONAL_METHODS:
            info.methods.append(inner.name)
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _callee(decorator) in ("use_case", "multi_processor_use_case"):
            case = {k.arg: _use_case_value(k.value, class_constants) for k in decorator.keywords if k.arg}
            target = info.use_cases if _callee(decorator) == "use_case" else info.multi_processor_use_cases
            target.append(case)
    for call, target in _calls(node, class_constants):
        kind = _callee(call)
        if kind == "PropertyDescriptor":
            info.properties.append(_property(call, target, class_constants))
        elif kind == "Relationship":
            relationship = _relationship(call, class_constants)
            if relationship is not None and relationship[0] not in [r[0] for r in info.relationships]:
                info.relationships.append(relationship)
    return info


def _calls(node: ast.ClassDef, constants: dict) -> list[tuple[ast.Call, str | None]]:
    """Each call in the class body with the name it is assigned to (``X = ...`` or ``self.x = ...``)."""
    targets: dict[int, str] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call) and len(sub.targets) == 1:
            target = sub.targets[0]
            if isinstance(target, ast.Name):
                targets[id(sub.value)] = target.id
            elif isinstance(target, ast.Attribute):
                targets[id(sub.value)] = target.attr
    return [(sub, targets.get(id(sub))) for sub in ast.walk(node) if isinstance(sub, ast.Call)]


def _property(call: ast.Call, variable: str | None, constants: dict) -> PropertyInfo:
    args = {k.arg: k.value for k in call.keywords if k.arg}
    value = {k: _value(v, constants) for k, v in args.items() if k != "dependencies"}
    positional = [_value(a, constants) for a in call.args]
    name = value.get("name", positional[0] if positional else None)
    info = PropertyInfo(
        variable=variable or str(name), name=name if isinstance(name, str) else None,
        description=_text(value.get("description", positional[1] if len(positional) > 1 else None)),
        display_name=_text(value.get("display_name")), required=value.get("required") is True,
        sensitive=value.get("sensitive") is True,
        default_value=None if value.get("default_value") is None else str(value["default_value"]),
        allowable_values=None if value.get("allowable_values") is None else [str(v) for v in value["allowable_values"]],
        expression_language_scope=str(value.get("expression_language_scope") or "NONE"),
        validators=_strings(value.get("validators")),
        controller_service_definition=_text(value.get("controller_service_definition")),
        dynamic=value.get("dynamic") is True)
    dependencies = args.get("dependencies")
    for dependency in dependencies.elts if isinstance(dependencies, ast.List) else []:
        if isinstance(dependency, ast.Call) and _callee(dependency) == "PropertyDependency" and dependency.args:
            other = dependency.args[0]
            other_name = other.id if isinstance(other, ast.Name) else other.attr if isinstance(other, ast.Attribute) else None
            if other_name is not None:
                info.dependencies.append((other_name, [str(_value(v, constants)) for v in dependency.args[1:]]))
    return info


def _relationship(call: ast.Call, constants: dict) -> tuple[str, str, bool] | None:
    args = {k.arg: _value(k.value, constants) for k in call.keywords if k.arg}
    positional = [_value(a, constants) for a in call.args]
    name = args.get("name", positional[0] if positional else None)
    if not isinstance(name, str):
        return None
    description = args.get("description", positional[1] if len(positional) > 1 else "")
    auto = args.get("auto_terminated", positional[2] if len(positional) > 2 else False)
    return name, description if isinstance(description, str) else "", auto is True


def _use_case_value(node: ast.AST, constants: dict) -> Any:
    if isinstance(node, ast.List):
        return [_use_case_value(e, constants) for e in node.elts]
    if isinstance(node, ast.Call) and _callee(node) == "ProcessorConfiguration":
        return {k.arg: _use_case_value(k.value, constants) for k in node.keywords if k.arg}
    value = _value(node, constants)
    return textwrap.dedent(value).strip() if isinstance(value, str) else value


# ---------------------------------------------------------------------------------- values
def _constants(body: list[ast.stmt], inherited: dict) -> dict:
    """Simple ``NAME = literal`` assignments of a module or class body (their later uses resolve)."""
    constants = dict(inherited)
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _value(node.value, constants)
            if value is not None:
                constants[node.targets[0].id] = value
    return constants


def _assignments(body: list[ast.stmt], constants: dict) -> dict:
    return {node.targets[0].id: _value(node.value, constants) for node in body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def _value(node: ast.AST, constants: dict) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_value(e, constants) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
        return {_value(k, constants): _value(v, constants) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, constants), _value(node.right, constants)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, list) and isinstance(right, list):
            return left + right
    return None


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _text(value: Any) -> str | None:
    return textwrap.dedent(value).strip() if isinstance(value, str) else None


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value if v is not None] if isinstance(value, list) else []


class _ImportFinder(ast.NodeVisitor):
    """The modules a file imports when it is imported (function bodies left out: they import later)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        self.names.extend(alias.name.split(".")[0] for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level and node.module:
            self.names.append(node.module.split(".")[0])

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        pass

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass


def _imports(tree: ast.Module) -> list[str]:
    finder = _ImportFinder()
    finder.visit(tree)
    return list(dict.fromkeys(finder.names))
