"""The function registry: each function of the language registered by name, with how many
arguments it takes and how it is built from its compiled arguments.

A standalone function builds a ``Node`` (it evaluates to values); a filter function builds a
``Filter`` (usable as a predicate, or as a value: true or false for each value of its subject).
Building checks what can be checked before any record is seen (a literal regular expression, hash
algorithm, character set, time zone) and raises RecordPathError at the argument at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.nodes import Filter, Literal, Node

Built = Union[Node, Filter]
Builder = Callable[[Sequence[Any], int], Built]


@dataclass(frozen=True)
class FunctionSpec:
    """A registered function: ``least``..``most`` arguments (``most`` None: no limit), ``build``
    makes the compiled call from the arguments and the position of the name, ``conditions`` says
    its arguments are conditions (``not``), ``filter`` that it is a filter function."""
    name: str
    least: int
    most: int | None
    build: Builder
    filter: bool = False
    conditions: bool = False

    def arity(self) -> str:
        """How many arguments it takes, in words."""
        if self.most == self.least:
            return f"{self.least} argument{'s' if self.least != 1 else ''}"
        if self.most is None:
            return f"at least {self.least} argument{'s' if self.least != 1 else ''}"
        return f"{self.least} to {self.most} arguments"


#: every function, by name
FUNCTIONS: dict[str, FunctionSpec] = {}


def register(name: str, least: int, most: int | None = -1, *, filter: bool = False,
             conditions: bool = False) -> Callable[[Builder], Builder]:
    """Register the decorated builder as function ``name`` taking ``least`` to ``most`` arguments
    (``most`` defaults to ``least``; None is no limit)."""

    def decorate(build: Builder) -> Builder:
        FUNCTIONS[name] = FunctionSpec(name, least, least if most == -1 else most, build, filter, conditions)
        return build

    return decorate


def check_literal(argument: Any, check: Callable[[Any], Any], what: str | None = None) -> Any:
    """When ``argument`` is a literal, ``check(value)``'s result (a compiled pattern, a codec...);
    RecordPathError at the literal when ``check`` raises ValueError (its message, after "invalid
    ``what``: " when the message does not say what it checked). None for any other argument
    (checked when evaluated)."""
    if not isinstance(argument, Literal):
        return None
    try:
        return check(argument.value)
    except ValueError as exc:
        raise RecordPathError(f"invalid {what}: {exc}" if what else str(exc), argument.position) from None
