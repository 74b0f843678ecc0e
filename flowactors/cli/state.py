"""``flowactors state list|clear``: processor state of a stopped flow (``flowactors.ops.state_admin``)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Annotated

import typer

from flowactors.cli.common import CliError, Repository, command_group, guarded, invoke
from flowactors.ops.state_admin import NoSuchStateError, clear_state, list_states

#: keys shown a processor, characters shown a value (``--json`` shows everything)
SHOWN, WIDTH = 20, 120


def add_commands(app: typer.Typer) -> None:
    """Register ``state list`` and ``state clear`` on the command group."""
    state = command_group(app, "state", "View or clear what processors keep in their state (stopped flow).")

    @state.command("list", help="Each processor's stored state.")
    def listing(repository: Repository = "repository",
                json: Annotated[bool, typer.Option("--json", help="the states as JSON")] = False) -> None:
        invoke(guarded(cmd_list), repository=repository, json=json)

    @state.command("clear", help="Clear one processor's state (it starts over).")
    def clear(processor: Annotated[str, typer.Argument(metavar="PROCESSOR", show_default=False,
                                                       help="flow/processor, or a processor name")],
              repository: Repository = "repository") -> None:
        invoke(guarded(cmd_clear), processor=processor, repository=repository)


def cmd_list(args: SimpleNamespace) -> int:
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


def cmd_clear(args: SimpleNamespace) -> int:
    try:
        component, before = clear_state(args.repository, args.processor)
    except NoSuchStateError as err:
        raise CliError(str(err), 2) from None
    if before is None:
        print(f"cleared the state of {component}, which was damaged (it starts over at version 0)")
    else:
        print(f"cleared the state of {component} ({len(before.values)} key(s) at version {before.version})")
    return 0
