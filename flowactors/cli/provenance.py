"""``flowactors provenance search|show``, ``flowactors lineage`` and ``flowactors replay``.

"What happened to this file?" from the command line, on the repository folder of a stopped flow
(docs/provenance.md walks through it). The repositories are opened under the repository lock
(``repositories.lock``; shared by the read-only commands, which change nothing): while a flow
runs on the folder these commands refuse, naming the flow, because what they read is being written.
Times are shown in UTC; ``--since``/``--until`` take ISO 8601 (UTC unless it has an offset) or
milliseconds since the epoch.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Optional

import typer

from flowactors.cli.common import (CliError, FlowOption, Repository, SettingOption, command_group, guarded, invoke, key_value,
                                   one_of, optional_flow, resolve_settings)
from flowactors.engine.cluster.topology import TOPOLOGY_FILE
from flowactors.ops.cluster_lineage import cluster_lineage
from flowactors.ops.lineage_render import FORMATS, RenderError, check_output, write_picture
from flowactors.ops.lineage_view import condense, to_text
from flowactors.engine.flow_operations import claim_state
from flowactors.ops.provenance_tools import StoppedRepository, open_event_content
from flowactors.ops.replay import replay_stopped
from flowactors.sdk.units import parse_data_size
from repositories.provenance import ProvenanceEvent, ProvenanceEventType
from repositories.provenance.event import event_to_dict

EVENT_TYPES = [t.value for t in ProvenanceEventType]
DEFAULT_LIMIT = 100

# ---------------------------------------------------------------------- commands

def add_commands(app: typer.Typer) -> None:
    """Register ``provenance search|show|repair``, ``lineage`` and ``replay`` on the command group."""
    provenance = command_group(app, "provenance",
                               "Search provenance events and show one, with its content (stopped flow).")

    @provenance.command("search", help="Events matching every filter, newest first.")
    def search(repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None,
               uuid: Annotated[Optional[str], typer.Option(help="a FlowFile uuid (also matches events naming it "
                                                              "as parent or child)")] = None,
               type: Annotated[Optional[str], typer.Option(parser=one_of(EVENT_TYPES, str.upper), metavar="TYPE",
                                                           help=f"event type: {', '.join(EVENT_TYPES)}")] = None,
               component: Annotated[Optional[str], typer.Option(help="component (processor) name")] = None,
               component_id: Annotated[Optional[str], typer.Option(help="component id (flow/processor)")] = None,
               relationship: Annotated[Optional[str], typer.Option(help="the relationship it went to")] = None,
               filename: Annotated[Optional[str], typer.Option(help="the filename attribute")] = None,
               attribute: Annotated[Optional[list[str]], typer.Option(
                   parser=key_value, metavar="KEY=VALUE", help="an indexed attribute (provenance_indexed_attributes); repeatable")] = None,
               since: Annotated[Optional[int], typer.Option(parser=_time_ms, metavar="TIME", help=(
                   "ISO 8601 (UTC unless it has an offset) or milliseconds since the epoch"))] = None,
               until: Annotated[Optional[int], typer.Option(parser=_time_ms, metavar="TIME",
                                                            help="as --since")] = None,
               min_size: Annotated[Optional[int], typer.Option(parser=_data_size, metavar="SIZE", help=(
                   "content size after the event, e.g. '10 KB'"))] = None,
               max_size: Annotated[Optional[int], typer.Option(parser=_data_size, metavar="SIZE",
                                                               help="as --min-size")] = None,
               limit: Annotated[int, typer.Option(help="most events shown")] = DEFAULT_LIMIT,
               json: Annotated[bool, typer.Option("--json", help="the events as a JSON array")] = False) -> None:
        invoke(guarded(cmd_search), repository=repository, flow=flow, setting=setting, uuid=uuid, type=type,
               component=component, component_id=component_id, relationship=relationship, filename=filename,
               attribute=attribute or [], since=since, until=until, min_size=min_size,
               max_size=max_size, limit=limit, json=json)

    @provenance.command("show", help="One event in full, or the content it received or left.")
    def show(event_id: Annotated[int, typer.Argument(metavar="EVENT_ID", show_default=False)],
             repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None,
             content: Annotated[Optional[str], typer.Option(parser=one_of(("input", "output")), metavar="input|output",
                                                            help="write the content the component received (input) "
                                                                 "or left (output) instead")] = None,
             out: Annotated[Optional[str], typer.Option(metavar="FILE", help="with --content: write to FILE, not "
                                                                             "standard output")] = None,
             json: Annotated[bool, typer.Option("--json", help="the event as JSON")] = False) -> None:
        invoke(guarded(cmd_show), event_id=event_id, repository=repository, flow=flow, setting=setting,
               content=content, out=out, json=json)

    @provenance.command("repair", help="Recover a stopped flow's provenance: read every journal, keep what can "
                                       "be read, say what could not.")
    def repair(repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None) -> None:
        invoke(guarded(cmd_repair), repository=repository, flow=flow, setting=setting)

    @app.command("lineage", help="The lineage of a FlowFile: a text tree, and a picture.")
    def lineage(uuid: Annotated[str, typer.Argument(metavar="UUID", show_default=False)],
                repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None,
                output: Annotated[Optional[str], typer.Option(metavar="FILE", help=(
                    f"also draw it to FILE ({', '.join(FORMATS)})"))] = None,
                expand: Annotated[Optional[list[str]], typer.Option(metavar="GROUP", help=(
                    "show a collapsed group of forks or joins in full (its id, from --json or the picture); "
                    "repeatable"))] = None,
                json: Annotated[bool, typer.Option("--json", help="the condensed lineage as JSON (nodes, edges, "
                                                                  "groups with their members)")] = False) -> None:
        invoke(guarded(cmd_lineage), uuid=uuid, repository=repository, flow=flow, setting=setting,
               output=output, expand=expand or [], json=json)

    @app.command("replay", help="Queue a FlowFile again with an event's input (flow stopped).")
    def replay(event_id: Annotated[int, typer.Argument(metavar="EVENT_ID", show_default=False)],
               repository: Repository = "repository", flow: FlowOption = None, setting: SettingOption = None) -> None:
        invoke(guarded(cmd_replay), event_id=event_id, repository=repository, flow=flow, setting=setting)


def _time_ms(text: str) -> int:
    """Epoch milliseconds from digits, or from ISO 8601 (a time without offset is UTC)."""
    if re.fullmatch(r"\d+", text.strip()):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a time: give ISO 8601 (2024-05-01T12:00:00Z) or milliseconds since the epoch") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _data_size(text: str) -> int:
    try:
        return parse_data_size(text)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None


def _open(args: SimpleNamespace, purpose: str, writable: bool = False) -> StoppedRepository:
    """The stopped repository, read-only unless ``writable`` (repair): a read changes nothing."""
    return StoppedRepository(args.repository, resolve_settings(args, optional_flow(args)), purpose=purpose,
                             writable=writable)


# ---------------------------------------------------------------------- search


def cmd_search(args: SimpleNamespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1", 2)
    with _open(args, "flowactors provenance search") as repo:
        events = repo.provenance.search(
            flowfile_uuid=args.uuid, event_type=args.type, component_name=args.component,
            component_id=args.component_id, relationship=args.relationship, filename=args.filename,
            attributes=dict(args.attribute) or None, start_time=args.since, end_time=args.until,
            min_size=args.min_size, max_size=args.max_size, limit=args.limit + 1)
        warnings = repo.warnings()
    more = len(events) > args.limit
    events = events[:args.limit]
    if args.json:
        print(json.dumps([event_to_dict(e) for e in events], indent=2))
    elif not events:
        print("no events match")
    else:
        print(format_table(events))
        print(f"{len(events)} event(s), newest first" + ("; more match: raise --limit" if more else ""))
    warn(warnings)
    return 0


def warn(warnings: list[str]) -> None:
    """What a read could not read (damaged event files), one line each on standard error."""
    for warning in warnings:
        print(f"flowactors: warning: {warning}", file=sys.stderr)


def format_table(events: list[ProvenanceEvent]) -> str:
    """One line per event: id, time, type, component, uuid, filename, size (bytes)."""
    header = ("id", "time (UTC)", "type", "component", "uuid", "filename", "size")
    rows = [(str(e.event_id), format_time(e.timestamp), e.event_type.value, e.component_name or e.component_id,
             e.flowfile_uuid, e.filename or "", str(e.updated_size)) for e in events]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {0, 6}

    def line(row: tuple[str, ...]) -> str:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), *map(line, rows)])


def format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


# ---------------------------------------------------------------------- show


def cmd_show(args: SimpleNamespace) -> int:
    if args.out and not args.content:
        raise CliError("--out goes with --content input|output", 2)
    with _open(args, "flowactors provenance show") as repo:
        event = repo.event(args.event_id)
        warnings = repo.warnings()
        if args.content:
            status = _write_content(repo, event, args.content, args.out)
            warn(warnings)
            return status
        states = {side: claim_state(repo.content, claim)
                  for side, claim in (("input", event.previous_claim), ("output", event.updated_claim))}
    if args.json:
        data = event_to_dict(event)
        data["content_available"] = states
        data["attribute_changes"] = [{"name": n, "change": c, "before": b, "after": a}
                                     for c, n, b, a in attribute_changes(event)]
        print(json.dumps(data, indent=2))
    else:
        print(format_event(event, states))
    warn(warnings)
    return 0


def _write_content(repo: StoppedRepository, event: ProvenanceEvent, side: str, out: str | None) -> int:
    with open_event_content(repo.content, event, side) as stream:
        if out is None:
            sys.stdout.flush()
            shutil.copyfileobj(stream, sys.stdout.buffer, 1 << 20)
            sys.stdout.buffer.flush()
            return 0
        with open(out, "wb") as target:
            shutil.copyfileobj(stream, target, 1 << 20)
            written = target.tell()
    print(f"wrote {written} bytes, the {side} content of event {event.event_id}, to {out}", file=sys.stderr)
    return 0


_STATE_TEXT = {"none": "no content", "live": "available", "archived": "available (archived)",
               "gone": "aged off: no longer available"}


def format_event(event: ProvenanceEvent, states: dict[str, str]) -> str:
    """Every field of the event, then its attributes before and after (changes marked)."""
    e = event
    fields = [
        ("time", f"{format_time(e.timestamp)} ({e.timestamp})"),
        ("duration", f"{e.duration} ms"),
        ("component", f"{e.component_name} ({e.component_type}, id {e.component_id})"),
        ("FlowFile", e.flowfile_uuid),
        ("parents", ", ".join(e.parent_uuids) or "-"),
        ("children", ", ".join(e.child_uuids) or "-"),
        ("relationship", e.relationship or "-"),
        ("source queue", e.source_queue_id or "- (not replayable: no input connection)"),
        ("transit uri", e.transit_uri or "-"),
        ("details", e.details or "-"),
        ("alternate id", e.alternate_identifier or "-"),
        ("source system id", e.source_system_flowfile_id or "-"),
        ("lineage start", format_time(e.lineage_start_date)),
        ("input content", _content_line(e.previous_claim, e.previous_size, states["input"])),
        ("output content", _content_line(e.updated_claim, e.updated_size, states["output"])),
    ]
    lines = [f"event {e.event_id}: {e.event_type}"]
    lines += [f"  {name:<17} {value}" for name, value in fields]
    changes = attribute_changes(e)
    lines.append("attributes (before -> after; + added, - removed, ~ changed):")
    width = max((len(name) for _, name, _, _ in changes), default=0)
    for change, name, before, after in changes:
        if change == "~":
            value = f"{before} -> {after}"
        else:
            value = before if change == "-" else after
        lines.append(f"  {change} {name:<{width}}  {value}")
    return "\n".join(lines)


def _content_line(claim, size: int, state: str) -> str:
    if claim is None:
        return f"{size} bytes, {_STATE_TEXT['none']}"
    r = claim.resource
    return f"{size} bytes, {_STATE_TEXT[state]} (claim {r.container}/{r.section}/{r.id} at {claim.offset})"


def attribute_changes(event: ProvenanceEvent) -> list[tuple[str, str, str | None, str | None]]:
    """(mark, name, before, after) for every attribute, by name; mark is ' ', '+', '-' or '~'.

    An event with no previous attributes (the FlowFile was made by it) lists every attribute as
    it left, unmarked.
    """
    before, after = event.previous_attributes, event.updated_attributes
    if not before:
        return [(" ", name, None, after[name]) for name in sorted(after)]
    out = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        mark = "+" if old is None else "-" if new is None else "~" if old != new else " "
        out.append((mark, name, old, new))
    return out


# ---------------------------------------------------------------------- lineage and replay


def cmd_repair(args: SimpleNamespace) -> int:
    """Open the provenance repository offline: recovery reads every journal, steps over damaged
    records to the readable ones after them, merges what it read into an event file, takes the
    events a killed run left in the FlowFile repository's outbox; then every block of every event
    file is read, and a damaged file loses its damaged blocks and keeps the rest (the index made to
    match). Reports each; exit 0 when everything was intact, 1 when damage was found (named,
    counted, and repaired: what could be read is kept)."""
    with _open(args, "flowactors provenance repair", writable=True) as repo:
        recovery = repo.provenance.recovery
        taken, damaged = repo.take_outbox()
        repairs = repo.provenance.repair_event_files()
        files = repo.provenance.stats()["event_files"]
    at_open = [p for p in recovery.get("problems", []) if p not in recovery.get("damaged_event_files", [])]
    problems = at_open + damaged
    for line in problems + [repair.describe() for repair in repairs]:
        print(f"  {line}")
    if taken:
        print(f"provenance in {args.repository}: {taken} events of the last commits of a run that did not stop "
              f"cleanly were taken from the FlowFile repository's outbox")
    merged = recovery.get("events_recovered", 0)
    if not problems and not repairs:
        print(f"provenance in {args.repository}: intact ({merged} events merged from journals; every block of "
              f"{files} event file{'' if files == 1 else 's'} read)")
        return 0
    if problems:
        print(f"provenance in {args.repository}: {merged} events read from journals and kept; "
              f"{recovery.get('events_lost', 0)} could not be read (counted where later events bound them)")
    if repairs:
        lost = sum(r.events_lost or 0 for r in repairs)
        unknown = sum(r.events_lost is None for r in repairs)
        print(f"provenance in {args.repository}: {len(repairs)} damaged event file{'' if len(repairs) == 1 else 's'} "
              f"repaired: {lost} events lost{f' (and those of {unknown} unreadable files)' if unknown else ''}, "
              f"{sum(r.events_kept for r in repairs)} kept; search, show and lineage read them without warnings now")
    return 1


def cmd_lineage(args: SimpleNamespace) -> int:
    """The condensed lineage (``flowactors.ops.lineage_view``) as a text tree from the FlowFile
    asked for, or as JSON; ``--output`` also draws it, refused before any work when it cannot be."""
    if args.output:
        check_output(args.output)
    if (Path(args.repository) / TOPOLOGY_FILE).exists():  # a flow run on several nodes: follow it across them
        lineage = cluster_lineage(args.repository, args.uuid, resolve_settings(args, optional_flow(args)))
    else:
        with _open(args, "flowactors lineage") as repo:
            lineage = repo.provenance.lineage(args.uuid)
            lineage.warnings += repo.warnings()
    if not lineage.nodes:
        raise CliError(f"no provenance events name FlowFile {args.uuid} in {args.repository} (find uuids with "
                       f"'flowactors provenance search'; events older than provenance_max_storage_time are "
                       f"aged off)", 2)
    view = condense(lineage, args.uuid, expand=args.expand)
    print(json.dumps(view.to_dict(), indent=2) if args.json else to_text(view))
    warn(lineage.warnings)
    if args.output:
        try:
            write_picture(view, args.output)
        except RenderError as err:
            raise CliError(str(err), 1) from None
        print(f"lineage of {args.uuid}: {len(view.nodes)} of {view.lineage_nodes} nodes drawn to {args.output}",
              file=sys.stderr)
    return 0


def cmd_replay(args: SimpleNamespace) -> int:
    flow = optional_flow(args)
    connections = [c.id for c in flow.connections] if flow is not None else None
    result = replay_stopped(args.repository, args.event_id, resolve_settings(args, flow), connections=connections)
    restored = " (its content was restored from the archive)" if result.restored_from_archive else ""
    print(f"replayed event {result.event_id}: FlowFile {result.flowfile_uuid} ({result.size} bytes) is queued "
          f"in connection '{result.queue_id}'{restored}; REPLAY event {result.replay_event_id} links it to "
          f"FlowFile {result.original_uuid}. It is processed the next time the flow runs on {args.repository}.")
    return 0
