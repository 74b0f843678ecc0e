"""``flowactors queue list|empty``: what waits in a connection of a stopped flow, and dropping it.

Works on the repository folder under the repository lock (``flowactors.ops.queue_admin``); while a
flow runs there it refuses and names the flow (use ``FlowController.list_queue``/``empty_queue``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Annotated

import typer

from flowactors.cli.common import (CliError, FlowOption, Repository, SettingOption, command_group, guarded, invoke,
                                   optional_flow, resolve_settings)
from flowactors.engine.errors import NoSuchQueueError
from flowactors.ops.queue_admin import DEFAULT_LIMIT, empty_queue, list_queue


QueueName = Annotated[str, typer.Argument(metavar="QUEUE", help="the connection's name", show_default=False)]


def add_commands(app: typer.Typer) -> None:
    """Register ``queue list`` and ``queue empty`` on the command group."""
    queue = command_group(app, "queue", "List or empty a connection's queue (stopped flow).")

    @queue.command("list", help="The first FlowFiles waiting in a queue.")
    def listing(name: QueueName, repository: Repository = "repository",
                limit: Annotated[int, typer.Option(help="most shown")] = DEFAULT_LIMIT,
                json: Annotated[bool, typer.Option("--json", help="the FlowFiles as a JSON array")] = False) -> None:
        invoke(guarded(_queue_errors(cmd_list)), queue=name, repository=repository, limit=limit, json=json)

    @queue.command("empty", help="Drop every FlowFile of a queue (DROP events recorded).")
    def empty(name: QueueName, repository: Repository = "repository", flow: FlowOption = None,
              setting: SettingOption = None,
              json: Annotated[bool, typer.Option("--json", help="what was dropped, as JSON")] = False) -> None:
        invoke(guarded(_queue_errors(cmd_empty)), queue=name, repository=repository, flow=flow,
               setting=setting, json=json)


def _queue_errors(handler):
    def run(args: SimpleNamespace) -> int:
        try:
            return handler(args)
        except NoSuchQueueError as err:
            raise CliError(str(err), 2) from None
    return run


def cmd_list(args: SimpleNamespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be at least 1", 2)
    rows = list_queue(args.repository, args.queue, args.limit)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"queue '{args.queue}': first {len(rows)} FlowFile(s)")
    print(f"{'#':>5}  {'uuid':36}  {'size':>10}  {'queued':>9}  {'flags':9}  filename")
    for row in rows:
        flags = ",".join(f for f in ("penalized", "swapped") if row[f]) or "-"
        queued = f"{row['queued_for_ms'] / 1000:.1f}s" if row["queued_for_ms"] is not None else "?"
        print(f"{row['position']:>5}  {row['uuid']:36}  {row['size']:>10}  {queued:>9}  {flags:9}  "
              f"{row['filename'] or ''}")
    return 0


def cmd_empty(args: SimpleNamespace) -> int:
    settings = resolve_settings(args, optional_flow(args))
    result = empty_queue(args.repository, args.queue, settings)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"queue '{args.queue}': dropped {result['dropped']} FlowFile(s), {result['bytes']} bytes "
              f"({result['swap_files_removed']} swap file(s) removed, {result['claims_released']} "
              f"content claim(s) released)")
    return 0
