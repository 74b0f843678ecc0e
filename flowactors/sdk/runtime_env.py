"""What a processor's Ray ``runtime_env`` may install: never another version of a package
flowactors itself runs with.

A ``runtime_env``'s ``pip`` list is installed into a virtualenv layered over flowactors' own
environment, and the processor runs in one Python process with flowactors, Ray and (for a record
transform) pyarrow. Packages that environment does not have are added freely; but a requirement
that excludes the installed version of a package flowactors depends on would replace it under the
framework, which then dies as its process starts (a NiFi processor pinning ``numpy==1.25.0``:
``pyarrow requires NumPy 2.0 or newer``). So such a requirement is a validation problem naming the
package, the versions and what to do, before anything starts.

"Packages flowactors runs with" are the closure of its installed distribution's own requirements
(Ray and what Ray needs, LMDB, orjson, ...) and, where installed, pyarrow, which flowactors' record
formats load in the processor's process, with numpy, which pyarrow loads (its metadata does not
say so). Not the rest of the ``spark`` extra: RayDP and PySpark run in Spark's processes. The
versions are the ones installed where the flow is validated: on a cluster, the driver's
environment stands for the workers' (they are one image).
"""

from __future__ import annotations

import importlib.metadata as metadata
from functools import cache
from typing import Any, Mapping

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

DISTRIBUTION = "flowactors"


#: what flowactors loads in a processor's process beyond its own requirements, where installed
LOADED_OPTIONALLY = ("pyarrow", "numpy")


@cache
def framework_packages() -> dict[str, str]:
    """Canonical name -> installed version of every distribution flowactors runs with."""
    found: dict[str, str] = {}

    def add(name: str) -> None:
        key = canonicalize_name(name)
        if key in found:
            return
        try:
            found[key] = metadata.version(name)
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            return
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                add(requirement.name)

    for name in (DISTRIBUTION, *LOADED_OPTIONALLY):
        add(name)
    return found


def pip_conflicts(runtime_env: Mapping[str, Any] | None) -> list[str]:
    """A problem for each requirement of ``runtime_env``'s ``pip`` that asks for another version of
    a package flowactors runs with (lines that are not requirements, e.g. options, are left to pip)."""
    if not runtime_env:
        return []
    pip = runtime_env.get("pip")
    lines = pip.get("packages", []) if isinstance(pip, Mapping) else pip
    if not isinstance(lines, (list, tuple)):
        return []
    packages = framework_packages()
    problems = []
    for line in lines:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        installed = packages.get(canonicalize_name(requirement.name))
        if installed is not None and not requirement.specifier.contains(installed, prereleases=True):
            problems.append(
                f"its dependency '{line}' asks for another {requirement.name} than the {installed} flowactors "
                f"runs with in the same process (a runtime_env adds packages over flowactors' own; it cannot "
                f"replace them without breaking the process as it starts): drop the pin, or allow {installed}")
    return problems
