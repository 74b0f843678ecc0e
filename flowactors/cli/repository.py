"""``flowactors repository salvage``: the intact FlowFiles of a damaged FlowFile repository, in a new
repository folder (``repositories.flowfile.salvage``; docs/cli.md).

The damaged folder is only read (under its lock, shared, so no flow runs there meanwhile); the new
one is created, must not hold a repository yet, and gets the kept FlowFiles, the processors'
states and the content claims they reference (hard-linked, or copied across file systems).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import typer

from flowactors.cli.common import (CliError, FlowOption, Repository, SettingOption, command_group, guarded,
                                   invoke, optional_flow, resolve_settings)
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.flowfile.salvage import SalvageReport, salvage
from repositories.lock import RepositoryLock

#: lost FlowFile ids listed in the summary (``--json`` lists them all)
SHOWN = 20


def add_commands(app: typer.Typer) -> None:
    """Register ``repository salvage`` on the command group."""
    group = command_group(app, "repository", "Repair a stopped flow's repository folder.")

    @group.command("salvage", help="Copy every intact FlowFile of a damaged repository into a new one.")
    def salvage_command(
            to: Annotated[str, typer.Option("--to", metavar="NEW", show_default=False,
                                            help="the new repository folder (must not hold a repository)")],
            repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None,
            json: Annotated[bool, typer.Option("--json", help="the report as JSON, every lost id")] = False) -> None:
        invoke(guarded(cmd_salvage), repository=repository, to=to, flow=flow, setting=setting, json=json)


def cmd_salvage(args: SimpleNamespace) -> int:
    """Exit status 0: everything was kept; 1: something was lost (the report says what)."""
    source, target = Path(args.repository), Path(args.to)
    if not (source / "flowfile" / "data.mdb").is_file():
        raise CliError(f"no FlowFile repository in {source} (expected {source / 'flowfile' / 'data.mdb'})", 2)
    if target.resolve() == source.resolve():
        raise CliError(f"--to must be a new folder, not the damaged repository {source} itself", 2)
    if target.exists() and any(target.iterdir()):
        raise CliError(f"{target} is not empty: give a new folder (salvage writes a whole repository there)", 2)
    settings = resolve_settings(args, optional_flow(args))
    with RepositoryLock(source, "flowactors repository salvage", shared=True), \
            RepositoryLock(target, "flowactors repository salvage"):
        old_content = FileSystemContentRepository.from_settings(source, settings, create=False)
        new_content = FileSystemContentRepository.from_settings(target, settings)
        with WriteAheadFlowFileRepository.from_settings(target, settings) as log:
            report = salvage(source / "flowfile", log, lambda resource: new_content.adopt(old_content, resource))
    if args.json:
        print(json.dumps(_as_json(report), indent=2))
    else:
        _print(report, source, target)
    return 1 if report.lost_total or report.journal_lost or report.states_lost else 0


def _print(report: SalvageReport, source: Path, target: Path) -> None:
    queues = ", ".join(f"{count} in {queue}" for queue, count in sorted(report.kept.items())) or "none"
    print(f"salvaged {source} into {target}: kept {report.kept_total} FlowFiles ({queues}), "
          f"{report.claims} content claims, {len(report.states)} processor states")
    if report.lost_total:
        print(f"lost {report.lost_total} FlowFiles" + (f" ({report.lost_unnamed} of them with ids nothing readable "
                                                       f"names)" if report.lost_unnamed else "") + ":")
        for uuid, why in sorted(report.lost.items())[:SHOWN]:
            print(f"  {uuid}: {why}")
        if len(report.lost) > SHOWN:
            print(f"  ... {len(report.lost) - SHOWN} more (--json lists every id)")
    if report.journal_lost:
        print(f"lost the changes of {len(report.journal_lost)} commits whose journal entries are damaged "
              f"(sequences {', '.join(map(str, report.journal_lost[:SHOWN]))}): FlowFiles they removed may be "
              f"delivered again")
    for component, why in sorted(report.states_lost.items()):
        print(f"lost the state of {component}: {why} (it starts over)")
    if report.events_not_carried:
        print(f"{report.events_not_carried} provenance events that the provenance repository had not taken are "
              f"not carried over")
    for problem in report.problems:
        print(f"unreadable: {problem}")
    print(f"run the flow on {target} (--repository {target}); {source} is unchanged")


def _as_json(report: SalvageReport) -> dict:
    return {"kept": report.kept, "kept_total": report.kept_total, "lost": report.lost,
            "lost_unnamed": report.lost_unnamed, "lost_total": report.lost_total, "claims": report.claims,
            "states": report.states, "states_lost": report.states_lost, "journal_lost": report.journal_lost,
            "events_not_carried": report.events_not_carried, "problems": report.problems}
