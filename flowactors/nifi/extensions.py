"""Finding NiFi Python processors in extensions folders, and what each needs installed.

An extensions folder holds processors as NiFi lays them out (docs/nifi-python-processors.md):

* a single file ``MyProcessor.py`` directly in the folder;
* a package: a sub-folder with an ``__init__.py``, whose every ``.py`` file may hold processors,
  beside helper modules they import by file name, and an optional ``requirements.txt`` shared by
  the package's processors.

Folders are searched in the order given, files in name order. As NiFi, a processor is known by its
class name and its ``ProcessorDetails.version``: two versions of a class (``WriteMessage`` 0.0.1 in
one file, 0.0.2 in another) are two processors, listed and chosen by version; asked for a class
without a version, the first found wins, as the first definition found does in NiFi; asked for
a version no file holds, the one version there is stands in when there is only one (NiFi's
choice of the only bundle of a type), and otherwise the error lists the versions. What a processor needs installed is its
``ProcessorDetails.dependencies`` plus its package's ``requirements.txt``: that list becomes the
``pip`` of its Ray ``runtime_env``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from flowactors.nifi.inspection import InspectionError, ProcessorInfo, inspect_file

REQUIREMENTS = "requirements.txt"


class ProcessorNotFound(ValueError):
    """No processor file, folder or class by the name given."""


def module_files(folder: str | Path) -> list[Path]:
    """The files of a folder that may hold processors, as NiFi finds them: its top-level ``.py``
    files, and every ``.py`` file of its sub-folders that are packages (hold ``__init__.py``);
    deeper folders are not searched."""
    folder = Path(folder)
    files: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.is_file() and entry.suffix == ".py" and entry.name != "__init__.py":
            files.append(entry)
        elif entry.is_dir() and (entry / "__init__.py").is_file():
            files.extend(sorted(entry.glob("*.py"), key=lambda p: p.name))
    return files


def discover_versions(folders: Iterable[str | Path]) -> dict[str, list[ProcessorInfo]]:
    """Every processor in the folders by class name, each version once (the first found of a
    class and version), in the order found. A file that is not valid Python is skipped, as NiFi
    skips it."""
    found: dict[str, list[ProcessorInfo]] = {}
    for folder in folders:
        if not Path(folder).is_dir():
            raise ProcessorNotFound(f"the extensions folder {folder} does not exist")
        for path in module_files(folder):
            try:
                processors = inspect_file(path)
            except InspectionError:
                continue
            for info in processors:
                versions = found.setdefault(info.class_name, [])
                if all(known.version != info.version for known in versions):
                    versions.append(info)
    return found


def discover(folders: Iterable[str | Path]) -> dict[str, ProcessorInfo]:
    """Every processor in the folders by class name: the first found of each name."""
    return {name: versions[0] for name, versions in discover_versions(folders).items()}


def find_processor(class_name: str, folders: Sequence[str | Path], version: str | None = None) -> ProcessorInfo:
    """The processor class named ``class_name`` in the extensions folders, of ``version`` when
    given (the module docstring says which stands in); ``ProcessorNotFound`` if none."""
    every = discover_versions(folders)
    found = every.get(class_name)
    if not found:
        known = ", ".join(sorted(every)) or "none"
        raise ProcessorNotFound(f"no NiFi Python processor named '{class_name}' in {', '.join(map(str, folders))} "
                                f"(processors there: {known})")
    if version is None:
        return found[0]
    chosen = [info for info in found if info.version == version]
    if chosen or len(found) == 1:
        return (chosen or found)[0]
    raise ProcessorNotFound(f"no version {version} of the NiFi Python processor '{class_name}' in "
                            f"{', '.join(map(str, folders))} (versions there: "
                            f"{', '.join(info.version for info in found)})")


def processor_in_file(path: str | Path, class_name: str | None = None) -> ProcessorInfo:
    """The processor class of a file: the one named, or else the first by name as NiFi picks it."""
    path = Path(path)
    if not path.is_file():
        raise ProcessorNotFound(f"the processor file {path} does not exist (to find a processor by its class name, "
                                f"name its extensions folder too)")
    processors = {info.class_name: info for info in inspect_file(path)}
    if class_name is not None:
        if class_name not in processors:
            raise ProcessorNotFound(f"{path} has no NiFi Python processor class '{class_name}' "
                              f"(it has: {', '.join(sorted(processors)) or 'none'})")
        return processors[class_name]
    if not processors:
        raise ProcessorNotFound(f"{path} holds no NiFi Python processor (a class with a nested 'class Java' whose "
                          f"'implements' names FlowFileTransform, RecordTransform or FlowFileSource)")
    return processors[min(processors)]


def requirements(info: ProcessorInfo) -> list[str]:
    """The pip requirements of a processor: its package's ``requirements.txt`` lines, then its
    ``ProcessorDetails.dependencies`` (duplicates once)."""
    lines: list[str] = []
    package = info.package_dir
    if package is not None and (Path(package) / REQUIREMENTS).is_file():
        for line in (Path(package) / REQUIREMENTS).read_text().splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return list(dict.fromkeys([*lines, *info.dependencies]))


def runtime_env(info: ProcessorInfo) -> dict | None:
    """The Ray ``runtime_env`` the processor needs: ``{"pip": [...]}``, or None with nothing to install."""
    needed = requirements(info)
    return {"pip": needed} if needed else None
