"""``flowactors state list|clear``: processor state of a stopped flow (``flowactors.ops.state_admin``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from flowactors.cli.main import CliError
from flowactors.cli.provenance import _guarded
from flowactors.ops.state_admin import NoSuchStateError, clear_state, list_states

#: keys shown a processor, characters shown a value (``--json`` shows everything)
SHOWN, WIDTH = 20, 120


def add_subcommands(sub: Any) -> None:
    """Register ``state list`` and ``state clear`` on the ``flowactors`` command's subparsers."""
    state = sub.add_parser("state", help="view or clear what processors keep in their state (stopped flow)")
    commands = state.add_subparsers(dest="state_command", required=True)

    listing = commands.add_parser("list", help="each processor's stored state")
    listing.add_argument("--repository", default="repository", help="the flow's repository folder")
    listing.add_argument("--json", action="store_true", help="the states as JSON")
    listing.set_defaults(handler=_guarded(cmd_list))

    clear = commands.add_parser("clear", help="clear one processor's state (it starts over)")
    clear.add_argument("processor", metavar="PROCESSOR", help="<flow>/<processor>, or a processor name")
    clear.add_argument("--repository", default="repository", help="the flow's repository folder")
    clear.set_defaults(handler=_guarded(cmd_clear))


def cmd_list(args: argparse.Namespace) -> int:
    states = list_states(args.repository)
    if args.json:
        print(json.dumps({c: {"damaged": s} if isinstance(s, str) else {"version": s.version, "values": dict(s.values)}
                          for c, s in states.items()}, indent=2))
        return 0
    if not states:
        print(f"no processor state in {args.repository}")
    for component, state in sorted(states.items()):
        if isinstance(state, str):
            print(f"{component}: DAMAGED ({state}); `flowactors state clear {component}` repairs it")
            continue
        print(f"{component}: version {state.version}, {len(state.values)} key(s)")
        for key, value in sorted(state.values.items())[:SHOWN]:
            print(f"  {key} = {value if len(value) <= WIDTH else value[:WIDTH] + '...'}")
        if len(state.values) > SHOWN:
            print(f"  ... {len(state.values) - SHOWN} more (--json shows every key and whole values)")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    try:
        component, before = clear_state(args.repository, args.processor)
    except NoSuchStateError as err:
        raise CliError(str(err), 2) from None
    if before is None:
        print(f"cleared the state of {component}, which was damaged (it starts over at version 0)")
    else:
        print(f"cleared the state of {component} ({len(before.values)} key(s) at version {before.version})")
    return 0
