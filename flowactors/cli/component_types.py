"""``flowactors types``: the component types a flow can name, as NiFi lists its processor and
controller service types: each standard processor and service with the NiFi classes a NiFi flow
names it by, and the NiFi 2 Python processors of extensions folders by class and version.

``add_commands(app)`` adds the command to the Typer application; a mistake is a ``CliError``
(one line, exit status 2), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import typer

import flowactors.processors as standard_processors
from flowactors.cli.common import CliError, ExtensionsOption, invoke
from flowactors.driver.nifi_export import environment_extensions
from flowactors.driver.nifi_standard_processors import STANDARD_PROCESSORS
from flowactors.driver.nifi_standard_services import STANDARD_SERVICES
from flowactors.nifi.extensions import ProcessorNotFound, discover_versions
from flowactors.services import STANDARD_SERVICES as SERVICE_MODULES


def listing(folders: list[str]) -> dict[str, dict[str, list[str]]]:
    """``processors`` and ``services``: each flowactors type by name with the NiFi classes that
    import as it (none: flowactors' own); ``python processors``: each NiFi Python processor class
    in ``folders`` with its versions, in the order found."""
    processors: dict[str, list[str]] = {name: [] for name in standard_processors.__all__}
    for java_type, mapping in STANDARD_PROCESSORS.items():
        processors.setdefault(mapping.processor.__name__, []).append(java_type)
    services: dict[str, list[str]] = {name: [] for name in SERVICE_MODULES}
    for java_type, service in STANDARD_SERVICES.items():
        services.setdefault(service.name, []).append(java_type)
    python = {name: [info.version for info in versions]
              for name, versions in discover_versions(folders).items()} if folders else {}
    return {"processors": {k: sorted(v) for k, v in sorted(processors.items())},
            "services": {k: sorted(v) for k, v in sorted(services.items())},
            "python processors": dict(sorted(python.items()))}


def types(extensions: ExtensionsOption = None,
          as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False) -> None:
    """The processor and controller service types a flow can name; with --extensions (or
    FLOWACTORS_PYTHON_EXTENSIONS), the NiFi Python processors there with their versions."""
    invoke(cmd_types, extensions=extensions, json=as_json)


def cmd_types(args: SimpleNamespace) -> int:
    folders = list(args.extensions or environment_extensions())
    try:
        found = listing(folders)
    except ProcessorNotFound as err:   # a folder that does not exist
        raise CliError(str(err), 2) from None
    if args.json:
        typer.echo(json.dumps(found))
        return 0
    for title, kind in (("processors", "processors"), ("controller services", "services")):
        typer.echo(f"{title} ({len(found[kind])}):")
        width = max(map(len, found[kind]))
        for name, java_types in found[kind].items():
            typer.echo(f"  {name:<{width}}  {', '.join(java_types) or '-'}")
    if folders:
        where = ", ".join(str(Path(f)) for f in folders)
        python = found["python processors"]
        typer.echo(f"NiFi Python processors in {where} ({len(python)}):")
        width = max(map(len, python), default=0)
        for name, versions in python.items():
            typer.echo(f"  {name:<{width}}  {', '.join(versions)}")
    return 0


def add_commands(app: typer.Typer) -> None:
    app.command("types", help="The processor and controller service types a flow can name, with the NiFi "
                              "classes each imports as; NiFi Python processors by class and version.")(types)
