"""``flowactors provenance search|show``, ``flowactors lineage`` and ``flowactors replay``.

"What happened to this file?" from the command line, on the repository folder of a stopped flow
(docs/provenance.md walks through it). The repositories are opened under the repository lock
(``repositories.lock``): while a flow runs on the folder these commands refuse, naming
the flow, because opening the provenance repository merges the journals the flow is writing.
Times are shown in UTC; ``--since``/``--until`` take ISO 8601 (UTC unless it has an offset) or
milliseconds since the epoch.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from flowactors.cli.main import CliError, _settings, load_flow
from flowactors.sdk.flow import Flow
from flowactors.engine.cluster.topology import TOPOLOGY_FILE
from flowactors.ops.cluster_lineage import cluster_lineage
from flowactors.ops.lineage_render import FORMATS, RenderError, write_picture
from flowactors.ops.provenance_tools import (ContentGoneError, NoSuchEventError, StoppedRepository, claim_state,
                                         open_event_content)
from flowactors.ops.replay import ReplayError, replay_stopped
from repositories.lock import RepositoryInUseError
from flowactors.sdk.settings import Settings
from flowactors.sdk.units import parse_data_size
from repositories.content import ContentRepositoryError
from repositories.flowfile import FlowFileRepositoryError
from repositories.provenance import ProvenanceEvent, ProvenanceEventType, ProvenanceFormatError
from repositories.provenance.event import event_to_dict

EVENT_TYPES = [t.value for t in ProvenanceEventType]
DEFAULT_LIMIT = 100

# ---------------------------------------------------------------------- parsers


def add_subcommands(sub: Any) -> None:
    """Register ``provenance``, ``lineage`` and ``replay`` on the ``flowactors`` command's subparsers."""
    provenance = sub.add_parser("provenance", help="search provenance events and show one, with its content")
    commands = provenance.add_subparsers(dest="provenance_command", required=True)

    search = commands.add_parser("search", help="events matching every filter, newest first")
    _repository_options(search)
    search.add_argument("--uuid", help="a FlowFile uuid (also matches events naming it as parent or child)")
    search.add_argument("--type", type=str.upper, choices=EVENT_TYPES, metavar="TYPE",
                        help=f"event type: {', '.join(EVENT_TYPES)}")
    search.add_argument("--component", help="component (processor) name")
    search.add_argument("--component-id", help="component id (<flow>/<processor>)")
    search.add_argument("--relationship")
    search.add_argument("--filename", help="the filename attribute")
    search.add_argument("--attribute", action="append", default=[], type=_pair, metavar="KEY=VALUE",
                        help="an indexed attribute (provenance_indexed_attributes); repeat for several")
    search.add_argument("--since", type=_time_ms, metavar="TIME", help="ISO 8601 (UTC unless offset) or epoch ms")
    search.add_argument("--until", type=_time_ms, metavar="TIME")
    search.add_argument("--min-size", type=_data_size, metavar="SIZE", help="content size after the event, e.g. 10 KB")
    search.add_argument("--max-size", type=_data_size, metavar="SIZE")
    search.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"most events shown (default {DEFAULT_LIMIT})")
    search.add_argument("--json", action="store_true", help="the events as a JSON array")
    search.set_defaults(handler=_guarded(cmd_search))

    show = commands.add_parser("show", help="one event in full, or the content it received or left")
    show.add_argument("event_id", type=int, metavar="EVENT_ID")
    _repository_options(show)
    show.add_argument("--content", choices=("input", "output"),
                      help="write the content the component received (input) or left (output) instead")
    show.add_argument("--out", metavar="FILE", help="with --content: write to FILE, not standard output")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_guarded(cmd_show))

    repair = commands.add_parser("repair", help="recover a stopped flow's provenance: read every journal, "
                                                "keep what can be read, say what could not")
    _repository_options(repair)
    repair.set_defaults(handler=_guarded(cmd_repair))

    lineage = sub.add_parser("lineage", help="the lineage of a FlowFile: a text tree, and a picture")
    lineage.add_argument("uuid", metavar="UUID")
    _repository_options(lineage)
    lineage.add_argument("--output", metavar="FILE", help=f"also draw it to FILE ({', '.join(FORMATS)})")
    lineage.set_defaults(handler=_guarded(cmd_lineage))

    replay = sub.add_parser("replay", help="queue a FlowFile again with an event's input (flow stopped)")
    replay.add_argument("event_id", type=int, metavar="EVENT_ID")
    _repository_options(replay)
    replay.set_defaults(handler=_guarded(cmd_replay))


def _repository_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repository", default="repository",
                        help="the flow's repository folder (default: ./repository)")
    parser.add_argument("--flow", help="the flow (.py/.json), for its settings and connections")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting the flow ran with (docs/configuration.md), e.g. content_containers")


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def _time_ms(text: str) -> int:
    """Epoch milliseconds from digits, or from ISO 8601 (a time without offset is UTC)."""
    if re.fullmatch(r"\d+", text.strip()):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give ISO 8601 (2024-05-01T12:00:00Z) or milliseconds since the epoch") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _data_size(text: str) -> int:
    try:
        return parse_data_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn the repositories' refusals into one-line messages (exit 2: bad input, 1: cannot)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (NoSuchEventError, FileNotFoundError, RenderError) as err:
            raise CliError(str(err), 2) from None
        except ValueError as err:   # a search filter the index cannot answer, a bad setting value
            if isinstance(err, ProvenanceFormatError):
                raise CliError(str(err), 1) from None
            raise CliError(str(err), 2) from None
        except (RepositoryInUseError, ContentGoneError, ReplayError, ContentRepositoryError,
                FlowFileRepositoryError) as err:
            raise CliError(str(err), 1) from None

    return run


def _open(args: argparse.Namespace, purpose: str) -> StoppedRepository:
    return StoppedRepository(args.repository, _resolve_settings(args, _flow(args)), purpose=purpose)


def _flow(args: argparse.Namespace) -> Flow | None:
    return load_flow(args.flow) if args.flow else None


def _resolve_settings(args: argparse.Namespace, flow: Flow | None) -> Settings:
    """The settings the flow ran with: the flow's own, then ``--setting`` overrides."""
    overrides = _settings(args.setting)
    if flow is not None:
        from flowactors.sdk.settings import flow_settings

        return flow_settings(flow, overrides)
    return Settings.from_dict(overrides)


# ---------------------------------------------------------------------- search


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1", 2)
    with _open(args, "flowactors provenance search") as repo:
        events = repo.provenance.search(
            flowfile_uuid=args.uuid, event_type=args.type, component_name=args.component,
            component_id=args.component_id, relationship=args.relationship, filename=args.filename,
            attributes=dict(args.attribute) or None, start_time=args.since, end_time=args.until,
            min_size=args.min_size, max_size=args.max_size, limit=args.limit + 1)
    more = len(events) > args.limit
    events = events[:args.limit]
    if args.json:
        print(json.dumps([event_to_dict(e) for e in events], indent=2))
        return 0
    if not events:
        print("no events match")
        return 0
    print(format_table(events))
    print(f"{len(events)} event(s), newest first" + ("; more match: raise --limit" if more else ""))
    return 0


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


def cmd_show(args: argparse.Namespace) -> int:
    if args.out and not args.content:
        raise CliError("--out goes with --content input|output", 2)
    with _open(args, "flowactors provenance show") as repo:
        event = repo.event(args.event_id)
        if args.content:
            return _write_content(repo, event, args.content, args.out)
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


def cmd_repair(args: argparse.Namespace) -> int:
    """Open the provenance repository offline: recovery reads every journal, steps over damaged
    records to the readable ones after them, merges what it read into an event file, and reports.
    Exit 0 when nothing was lost, 1 when events could not be read (named and counted)."""
    with _open(args, "flowactors provenance repair") as repo:
        recovery = repo.provenance.recovery
    lost, problems = recovery.get("events_lost", 0), recovery.get("problems", [])
    for problem in problems:
        print(f"  {problem}")
    merged = recovery.get("events_recovered", 0)
    if not problems:
        print(f"provenance in {args.repository}: intact ({merged} events merged from journals)")
        return 0
    print(f"provenance in {args.repository}: {merged} events read from journals and kept; {lost} could not be "
          f"read (counted where later events bound them)")
    return 1


def cmd_lineage(args: argparse.Namespace) -> int:
    if args.output and Path(args.output).suffix.lower() not in FORMATS:
        raise CliError(f"--output must end in one of {', '.join(FORMATS)}, not {args.output!r}", 2)
    if (Path(args.repository) / TOPOLOGY_FILE).exists():  # a flow run on several nodes: follow it across them
        lineage = cluster_lineage(args.repository, args.uuid, _resolve_settings(args, _flow(args)))
    else:
        with _open(args, "flowactors lineage") as repo:
            lineage = repo.provenance.lineage(args.uuid)
    if not lineage.nodes:
        raise CliError(f"no provenance events name FlowFile {args.uuid} in {args.repository} (find uuids with "
                       f"'flowactors provenance search'; events older than provenance_max_storage_time are "
                       f"aged off)", 2)
    print(lineage.to_text())
    if lineage.truncated:
        print("(truncated: the family has more events than were read)")
    if args.output:
        write_picture(lineage, args.output)
        print(f"lineage of {args.uuid}: {len(lineage.nodes)} nodes, {len(lineage.edges)} edges, drawn to "
              f"{args.output}", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    flow = _flow(args)
    connections = [c.id for c in flow.connections] if flow is not None else None
    result = replay_stopped(args.repository, args.event_id, _resolve_settings(args, flow), connections=connections)
    restored = " (its content was restored from the archive)" if result.restored_from_archive else ""
    print(f"replayed event {result.event_id}: FlowFile {result.flowfile_uuid} ({result.size} bytes) is queued "
          f"in connection '{result.queue_id}'{restored}; REPLAY event {result.replay_event_id} links it to "
          f"FlowFile {result.original_uuid}. It is processed the next time the flow runs on {args.repository}.")
    return 0
