"""``flowactors queue list|empty``: what waits in a connection of a stopped flow, and dropping it.

Works on the repository folder under the repository lock (``flowactors.ops.queue_admin``); while a
flow runs there it refuses and names the flow (use ``FlowController.list_queue``/``empty_queue``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from flowactors.cli.main import CliError
from flowactors.cli.provenance import _flow, _guarded, _repository_options, _resolve_settings
from flowactors.ops.queue_admin import DEFAULT_LIMIT, NoSuchQueueError, empty_queue, list_queue


def add_subcommands(sub: Any) -> None:
    """Register ``queue list`` and ``queue empty`` on the ``flowactors`` command's subparsers."""
    queue = sub.add_parser("queue", help="list or empty a connection's queue (stopped flow)")
    commands = queue.add_subparsers(dest="queue_command", required=True)

    listing = commands.add_parser("list", help="the first FlowFiles waiting in a queue")
    listing.add_argument("queue", metavar="QUEUE", help="the connection's name")
    _repository_options(listing)
    listing.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"most shown (default {DEFAULT_LIMIT})")
    listing.add_argument("--json", action="store_true", help="the FlowFiles as a JSON array")
    listing.set_defaults(handler=_guarded(_queue_errors(cmd_list)))

    empty = commands.add_parser("empty", help="drop every FlowFile of a queue (DROP events recorded)")
    empty.add_argument("queue", metavar="QUEUE", help="the connection's name")
    _repository_options(empty)
    empty.add_argument("--json", action="store_true")
    empty.set_defaults(handler=_guarded(_queue_errors(cmd_empty)))


def _queue_errors(handler):
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except NoSuchQueueError as err:
            raise CliError(str(err), 2) from None
    return run


def cmd_list(args: argparse.Namespace) -> int:
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


def cmd_empty(args: argparse.Namespace) -> int:
    settings = _resolve_settings(args, _flow(args))
    result = empty_queue(args.repository, args.queue, settings)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"queue '{args.queue}': dropped {result['dropped']} FlowFile(s), {result['bytes']} bytes "
              f"({result['swap_files_removed']} swap file(s) removed, {result['claims_released']} "
              f"content claim(s) released)")
    return 0
