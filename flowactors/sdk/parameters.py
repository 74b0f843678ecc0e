"""Parameters, as NiFi's parameter contexts: named values that property values refer to as ``#{name}``.

A flow holds parameter contexts (``Flow.add_parameter_context``); the flow and each processor
name the context they use (a processor's own, else the flow's). A context may inherit others:
its own parameters win, then each inherited context's, in the order given. A property value is
resolved once, when the flow is validated, so every engine and every processor sees plain
values; the definition keeps the references, so a saved flow stays parameterised.

Reference syntax (NiFi's): ``#{name}`` where the name holds letters, digits, blanks, ``-``, ``_``
and ``.``; ``##{`` stands for a literal ``#{`` (pairs of ``#`` before ``{`` halve, an odd one left
over opens a reference). Outside expressions a reference is replaced by the value as written
(a value holding ``${...}`` is then evaluated as an expression, as in NiFi). Inside an expression
``${...}`` the value is a literal: ``${#{prefix}:toUpper()}`` upper-cases the parameter's value,
``${a:equals(#{expected})}`` compares with it.

A sensitive parameter's value is never written to a flow definition (``to_dict``), nor shown in
an error. Its value is given in code, or at run time by the environment variable
``FLOWACTORS_PARAMETER_<NAME>`` (the name upper-cased, other characters than letters and digits
as ``_``), which is also where a flow exported from NiFi (whose sensitive values are left out)
gets them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

ENV_PREFIX = "FLOWACTORS_PARAMETER_"
_NAME = re.compile(r"[A-Za-z0-9 ._-]+")


class ParameterError(ValueError):
    """A reference that cannot be resolved, or a context that is not well formed."""


def environment_variable(name: str) -> str:
    """The environment variable that may hold the value of the parameter ``name``."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


@dataclass
class Parameter:
    name: str
    value: str | None = None
    sensitive: bool = False
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As a definition stores it: a sensitive value is never written."""
        return {"name": self.name, "value": None if self.sensitive else self.value, "sensitive": self.sensitive,
                "description": self.description}


@dataclass
class ParameterContext:
    name: str
    parameters: dict[str, Parameter] = field(default_factory=dict)
    #: contexts whose parameters this one also offers, in precedence order (after its own)
    inherits: tuple[str, ...] = ()
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inherits": list(self.inherits),
                "parameters": [p.to_dict() for p in self.parameters.values()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ParameterContext":
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ParameterError(f"a parameter context needs a name, got {name!r}")
        parameters = {}
        for entry in data.get("parameters") or []:
            value = entry.get("value")
            if isinstance(value, bool):   # as a property's value: JSON's true and false, and numbers, as text
                value = "true" if value else "false"
            elif isinstance(value, (int, float)):
                value = str(value)
            elif value is not None and not isinstance(value, str):
                raise ParameterError(f"parameter context '{name}': parameter {entry.get('name')!r} has the value "
                                     f"{value!r}; give it as a string (or null for a sensitive one)")
            parameter = Parameter(str(entry.get("name", "")), value, bool(entry.get("sensitive", False)),
                                  entry.get("description") or "")
            if not _NAME.fullmatch(parameter.name):
                raise ParameterError(f"parameter context '{name}': {parameter.name!r} is not a parameter name "
                                     f"(letters, digits, blanks, '-', '_', '.')")
            parameters[parameter.name] = parameter
        inherits = data.get("inherits") or ()
        if not isinstance(inherits, (list, tuple)) or not all(isinstance(i, str) for i in inherits):
            raise ParameterError(f"parameter context '{name}': 'inherits' must be a list of context names, "
                                 f"not {inherits!r}")
        return cls(name, parameters, tuple(inherits), data.get("description") or "")


def lookup(contexts: Mapping[str, ParameterContext], name: str | None) -> dict[str, Parameter]:
    """Every parameter the context ``name`` offers, its own first, then its inherited contexts'
    (depth first, in order). Raises ParameterError for an unknown context or an inheritance cycle."""
    found: dict[str, Parameter] = {}
    if name is None:
        return found

    def visit(context_name: str, path: tuple[str, ...]) -> None:
        if context_name in path:
            raise ParameterError(f"parameter contexts inherit in a cycle: {' -> '.join(path + (context_name,))}")
        context = contexts.get(context_name)
        if context is None:
            raise ParameterError(f"parameter context '{context_name}' is not defined"
                                 + (f" (inherited by '{path[-1]}')" if path else ""))
        for parameter in context.parameters.values():
            found.setdefault(parameter.name, parameter)
        for inherited in context.inherits:
            visit(inherited, path + (context_name,))

    visit(name, ())
    return found


def value_of(parameter: Parameter) -> str | None:
    """A parameter's value: its own, else (a sensitive one) the environment's."""
    if parameter.value is not None:
        return parameter.value
    if parameter.sensitive:
        return os.environ.get(environment_variable(parameter.name))
    return None


def references(text: str) -> list[str]:
    """The parameter names ``text`` refers to, in order (escaped ``##{`` left out)."""
    names: list[str] = []
    _scan(text, lambda name, _where: names.append(name) or "")
    return names


def _named(text: str) -> list[str]:
    """The parameters ``text`` refers to; none when a ``#{`` in it starts no reference (a problem
    ``resolve`` reports)."""
    try:
        return references(text)
    except ParameterError:
        return []


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every reference replaced (see the module docstring); ParameterError naming
    the first parameter that has no value."""
    def replace(name: str, where: str) -> str:
        if name not in values:
            raise ParameterError(f"#{{{name}}} refers to a parameter that is not defined or has no value")
        return _literal(values[name], where)

    return _scan(text, replace)


def _literal(value: str, where: str) -> str:
    """The value written so that it reads as itself where it stands (see ``_scan``)."""
    if where == "text":
        return value
    escaped = value.replace("\\", "\\\\").replace("${", "$${")
    if where in ("'", '"'):  # inside a quoted string of an expression
        return escaped.replace(where, "\\" + where)
    quoted = "'" + escaped.replace("'", "\\'") + "'"
    return f"literal({quoted})" if where == "subject" else quoted


def _scan(text: str, replace: Callable[[str, str], str]) -> str:
    """Walk ``text``, replacing each reference by ``replace(name, where)``: ``where`` is "text"
    outside expressions, "subject" where an expression starts, "argument" elsewhere inside one,
    or the quote character of the expression string it is in."""
    out: list[str] = []
    i, n = 0, len(text)
    depth = 0               # expressions open
    quote: str | None = None
    subject = False         # just after '${' (blanks aside)
    while i < n:
        c = text[i]
        if c == "#" or (c == "$" and quote is None):
            run = i
            while run < n and text[run] == c:
                run += 1
            count = run - i
            if run < n and text[run] == "{":
                if c == "$":
                    # '$$' before '{' is an escaped '$'; an odd one left over opens an expression
                    out.append("$" * count + "{")
                    if count % 2:
                        depth += 1
                        subject = True
                    i = run + 1
                    continue
                out.append("#" * (count // 2))
                if count % 2 == 0:   # '##{' is the text '#{'
                    out.append("{")
                    i = run + 1
                    continue
                end = text.find("}", run)
                name = text[run + 1:end] if end > 0 else ""
                if end < 0 or not _NAME.fullmatch(name):
                    raise ParameterError(f"'#{{' at index {run - 1} does not start a reference #{{name}} "
                                         f"(write ##{{ for the text #{{)")
                where = "text" if not depth else (quote or ("subject" if subject else "argument"))
                out.append(replace(name, where))
                subject = False
                i = end + 1
                continue
            out.append(text[i:run])
            i = run
            continue
        if depth:
            if quote is not None:
                if c == "\\" and i + 1 < n:
                    out.append(text[i:i + 2])
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
                subject = False
            elif c == "}":
                depth -= 1
            elif not c.isspace():
                subject = False
        out.append(c)
        i += 1
    return "".join(out)


def resolve(properties: Mapping[str, str], parameters: Mapping[str, Parameter]) -> tuple[dict[str, str], list[str]]:
    """Each property with its references replaced, and one problem a property that cannot be
    (the message names the parameter, never a sensitive value)."""
    values = {name: v for name, p in parameters.items() if (v := value_of(p)) is not None}
    resolved, problems = {}, []
    for key, text in properties.items():
        try:
            resolved[key] = substitute(text, values) if "#{" in text else text
        except ParameterError as err:
            missing = [r for r in _named(text) if r not in values]
            hint = ""
            if missing and missing[0] in parameters and parameters[missing[0]].sensitive:
                hint = f" (it is sensitive: give its value in {environment_variable(missing[0])})"
            problems.append(f"property '{key}': {err}{hint}")
            resolved[key] = text
    return resolved, problems


def context_from_values(name: str, values: Mapping[str, str | None], sensitive: Iterable[str] = (),
                        inherits: Iterable[str] = (), description: str = "") -> ParameterContext:
    """A context from a plain mapping (``Flow.add_parameter_context``)."""
    secret = set(sensitive)
    unknown = secret - set(values)
    if unknown:
        raise ParameterError(f"parameter context '{name}': {sorted(unknown)} are marked sensitive but not given "
                             f"(give them with the value None to read them from the environment)")
    return ParameterContext.from_dict({
        "name": name, "description": description, "inherits": list(inherits),
        "parameters": [{"name": key, "value": None if value is None else str(value), "sensitive": key in secret}
                       for key, value in values.items()]})


def sensitive_values(properties: Mapping[str, str], parameters: Mapping[str, Parameter]) -> list[str]:
    """The values of the sensitive parameters ``properties`` refer to (what ``redact`` hides)."""
    names = {name for text in properties.values() if "#{" in text for name in _named(text)}
    return [v for name in names if name in parameters and parameters[name].sensitive
            and (v := value_of(parameters[name]))]


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` written as ``********`` (longest first)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "********")
    return text
