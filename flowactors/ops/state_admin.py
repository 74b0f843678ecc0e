"""Processor state of a stopped flow: what each processor keeps, and clearing it (NiFi's "View
state" and "Clear state"; ``flowactors state list|clear``).

Works on the repository folder under the repository lock, as the queue tools do: while a flow
runs there it refuses and names the flow. Clearing writes an empty map at the next version, in
one transaction of the write-ahead log, so a processor that reads its state next starts over
(ListFile lists every file again).
"""

from __future__ import annotations

import os
from pathlib import Path

from flowactors.ops.queue_admin import check_repository, open_log
from repositories.lock import RepositoryLock
from repositories.model import StateChange, StateMap


class NoSuchStateError(LookupError):
    """No processor with stored state answers to the name given; the message lists those that do."""


def list_states(repository: str | os.PathLike) -> dict[str, StateMap]:
    """Every processor's stored state, by component id (``<flow>/<processor>``)."""
    root = Path(repository)
    check_repository(root)
    with RepositoryLock(root, "flowactors state list"):
        with open_log(root) as wal:
            return wal.states()


def clear_state(repository: str | os.PathLike, processor: str) -> tuple[str, StateMap]:
    """Clear the state of ``processor`` (a component id, or a processor name that only one flow in
    the folder has); returns the component id and the state as it was."""
    root = Path(repository)
    check_repository(root)
    with RepositoryLock(root, "flowactors state clear"):
        with open_log(root) as wal:
            states = wal.states()
            matches = [c for c in states if c == processor] or [c for c in states if c.split("/", 1)[-1] == processor]
            if len(matches) != 1:
                known = ", ".join(sorted(states)) or "none"
                how = "no processor" if not matches else "several processors"
                raise NoSuchStateError(f"{how} with stored state named '{processor}' in {root} (stored: {known}); "
                                       f"give the full <flow>/<processor> id")
            component = matches[0]
            wal.commit([], [], state=StateChange(component, {}))
            return component, states[component]
