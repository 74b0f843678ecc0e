"""Finding NiFi Python processors in extensions folders, and what each needs installed.

An extensions folder holds processors as NiFi lays them out (docs/nifi-python-processors.md):

* a single file ``MyProcessor.py`` directly in the folder;
* a package: a sub-folder with an ``__init__.py``, whose every ``.py`` file may hold processors,
  beside helper modules they import by file name, and an optional ``requirements.txt`` shared by
  the package's processors.

Folders are searched in the order given, files in name order; the first processor class of a name
wins, as the first definition found does in NiFi. What a processor needs installed is its
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


def discover(folders: Iterable[str | Path]) -> dict[str, ProcessorInfo]:
    """Every processor in the folders by class name (the first of each name wins). A file that
    is not valid Python is skipped, as NiFi skips it."""
    found: dict[str, ProcessorInfo] = {}
    for folder in folders:
        if not Path(folder).is_dir():
            raise ProcessorNotFound(f"the extensions folder {folder} does not exist")
        for path in module_files(folder):
            try:
                processors = inspect_file(path)
            except InspectionError:
                continue
            for info in processors:
                found.setdefault(info.class_name, info)
    return found


def find_processor(class_name: str, folders: Sequence[str | Path]) -> ProcessorInfo:
    """The processor class named ``class_name`` in the extensions folders (``ProcessorNotFound`` if none)."""
    found = discover(folders)
    if class_name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise ProcessorNotFound(f"no NiFi Python processor named '{class_name}' in {', '.join(map(str, folders))} "
                          f"(processors there: {known})")
    return found[class_name]


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
