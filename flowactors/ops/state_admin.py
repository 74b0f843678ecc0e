"""Processor state of a stopped flow: what each processor keeps, and clearing it (NiFi's "View
state" and "Clear state"; ``flowactors state list|clear``).

Works on the repository folder under the repository lock, as the queue tools do: while a flow
runs there it refuses and names the flow. Listing only reads (the lock shared, the log opened
read-only): it changes nothing in the folder. Clearing writes an empty map at the next version, in
one transaction of the write-ahead log, so a processor that reads its state next starts over
(ListFile lists every file again).
"""

from __future__ import annotations

import os
from pathlib import Path

from flowactors.ops.queue_admin import stopped_log
from repositories.flowfile import FlowFileRepositoryError
from repositories.model import StateChange, StateMap


class NoSuchStateError(LookupError):
    """No processor with stored state answers to the name given; the message lists those that do."""


def list_states(repository: str | os.PathLike) -> dict[str, StateMap | str]:
    """Every processor's stored state, by component id (``<flow>/<processor>``); a damaged one as
    the error that says what is wrong with it (``clear`` repairs it)."""
    with stopped_log(repository, "flowactors state list", readonly=True) as wal:
        states: dict[str, StateMap | str] = {}
        for component in wal.state_ids():
            try:
                states[component] = wal.get_state(component)
            except FlowFileRepositoryError as err:
                states[component] = str(err)
        return states


def clear_state(repository: str | os.PathLike, processor: str) -> tuple[str, StateMap | None]:
    """Clear the state of ``processor`` (a component id, or a processor name that only one flow in
    the folder has); returns the component id and the state as it was (None: it was damaged, and
    the clear repaired it)."""
    root = Path(repository)
    with stopped_log(root, "flowactors state clear") as wal:
        states = wal.state_ids()
        matches = [c for c in states if c == processor] or [c for c in states if c.split("/", 1)[-1] == processor]
        if len(matches) != 1:
            known = ", ".join(sorted(states)) or "none"
            how = "no processor" if not matches else "several processors"
            raise NoSuchStateError(f"{how} with stored state named '{processor}' in {root} (stored: {known}); "
                                   f"give the full <flow>/<processor> id")
        component = matches[0]
        try:
            before: StateMap | None = wal.get_state(component)
        except FlowFileRepositoryError:
            before = None
        wal.commit([], [], state=StateChange(component, {}))
        return component, before
