"""Jolt's Chain (Chainr) and the compiling of a spec for any of the transforms.

A chain spec is a list of ``{"operation": ..., "spec": ...}``, applied in order, each to what the
one before made. Operations: ``shift``, ``default``, ``remove``, ``cardinality``, ``sort``,
``modify-overwrite-beta``, ``modify-default-beta``, ``modify-define-beta`` (Jolt's names; the
Java class names of these transforms, e.g. ``com.bazaarvoice.jolt.Shiftr``, are accepted too).
Custom Java transforms cannot run here: naming another class is a spec error.
"""

from __future__ import annotations

from typing import Any, Callable

from flowactors.processors.jolt.cardinality import Cardinality
from flowactors.processors.jolt.default import Default
from flowactors.processors.jolt.modify import DEFAULT, DEFINE, OVERWRITE, Modify
from flowactors.processors.jolt.paths import JoltSpecError
from flowactors.processors.jolt.remove import Remove
from flowactors.processors.jolt.shift import Shift
from flowactors.processors.jolt.sort import Sort

_JOLT = "com.bazaarvoice.jolt."

#: operation name -> (Java class name, compile(spec) -> transform with .apply(document))
OPERATIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "shift": ("Shiftr", Shift),
    "default": ("Defaultr", Default),
    "remove": ("Removr", Remove),
    "cardinality": ("CardinalityTransform", Cardinality),
    "sort": ("Sortr", Sort),
    "modify-overwrite-beta": ("Modifier$Overwritr", lambda spec: Modify(spec, OVERWRITE)),
    "modify-default-beta": ("Modifier$Defaultr", lambda spec: Modify(spec, DEFAULT)),
    "modify-define-beta": ("Modifier$Definr", lambda spec: Modify(spec, DEFINE)),
}
_BY_CLASS = {_JOLT + java: name for name, (java, _) in OPERATIONS.items()}
_BY_CLASS.update({_JOLT + java.replace("$", "."): name for name, (java, _) in OPERATIONS.items()})


class Chain:
    """A compiled chain: each entry's transform compiled once; ``apply`` runs them in order."""

    def __init__(self, spec: Any):
        if not isinstance(spec, list):
            raise JoltSpecError(f"a Chain spec is a JSON array of {{\"operation\", \"spec\"}} entries, "
                                f"not {type(spec).__name__}")
        if not spec:
            raise JoltSpecError("a Chain spec needs at least one {\"operation\", \"spec\"} entry")
        self.transforms = [_entry(index, entry) for index, entry in enumerate(spec)]

    def apply(self, document: Any) -> Any:
        for transform in self.transforms:
            document = transform.apply(document)
        return document


def _entry(index: int, entry: Any) -> Any:
    where = f"chain entry {index}"
    if not isinstance(entry, dict):
        raise JoltSpecError(f"{where}: an entry is a JSON object with \"operation\" and \"spec\"")
    operation = entry.get("operation")
    if not isinstance(operation, str) or not operation.strip():
        raise JoltSpecError(f"{where}: \"operation\" must be one of {', '.join(OPERATIONS)}")
    name = _BY_CLASS.get(operation, operation)
    if name not in OPERATIONS:
        raise JoltSpecError(f"{where}: unknown operation {operation!r} (custom Java transforms can not run "
                            f"here; use one of {', '.join(OPERATIONS)})")
    if name != "sort" and "spec" not in entry:
        raise JoltSpecError(f"{where}: operation {operation!r} needs a \"spec\"")
    try:
        return OPERATIONS[name][1](entry.get("spec"))
    except JoltSpecError as err:
        raise JoltSpecError(f"{where} ({name}): {err}") from None
