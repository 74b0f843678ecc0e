"""Processor state, as NiFi's StateManager (local scope): ``context.state``.

A processor keeps a few strings across triggers and restarts here: a listing's timestamp and the
names it listed, a source's offset. **During a trigger a change belongs to the trigger's
session**: it is written in the session's commit (on the durable engines, in the same LMDB
transaction as the session's FlowFiles) and rolled back with it, so a source's bookmark and the
FlowFiles it produced are never apart. Outside a trigger (``on_scheduled``, ``on_stopped``) a
change is written at once, in a commit of its own.

Every task of a processor shares its state. ``replace(old, values)`` is a compare-and-set on the
version ``old`` was read at: it returns False at once when the state changed since, and the
session's commit is refused (and rolled back, so the trigger runs again later) if another task
changed it between the call and the commit. ``set`` writes whatever is stored. Versions only grow
(a clear is an empty map at the next version; only the repair of a damaged value starts over), so
a version identifies what was read.

Where state is kept is the engine's business (``StateStore``): the FlowFile repository on the
durable engines (docs/formats/flowfile-repository.md, ``state``), memory or a store the caller
hands in on the stateless one.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping, NamedTuple, Protocol

from repositories.flowfile.records import encode_state
from repositories.model import StateChange, StateMap


class StateStore(Protocol):
    """Where an engine keeps processor state. A store may also offer ``commit_states(changes)``,
    every change or none: the stateless engine keeps a trigger's changes together through it when
    it is there (``InMemoryStateStore`` has it)."""

    def get_state(self, component_id: str) -> StateMap:
        """The stored state (version -1 and no values when there is none)."""

    def commit_state(self, change: StateChange) -> None:
        """Write a change now, in a commit of its own (``CommitError`` if refused)."""


class PendingState(NamedTuple):
    """A session's change of its processor's state, made while the state is bound to the session:
    ``change`` is what the session's commit writes, ``state`` the state as the change makes it
    (what ``ProcessorState.get`` answers until then)."""

    change: StateChange
    state: StateMap


class StatefulSession(Protocol):
    """What ``ProcessorState`` needs of the session it is bound to (``ProcessSession`` has it): the
    session's pending change, which the session commits with its FlowFiles and forgets when it
    commits or rolls back."""

    pending_state: PendingState | None


class ProcessorState:
    """One processor's state as its tasks see it (``context.state``); see the module docstring."""

    def __init__(self, component_id: str, store: StateStore):
        self.component_id = component_id
        self._store = store
        self._session: StatefulSession | None = None

    @contextmanager
    def bound_to(self, session: StatefulSession) -> Iterator[None]:
        """Changes made while inside belong to ``session`` (the engine binds each trigger's)."""
        self._session = session
        try:
            yield
        finally:
            self._session = None

    def get(self) -> StateMap:
        """The state: this trigger's change if it made one, else the stored state."""
        pending = self._session.pending_state if self._session is not None else None
        if pending is not None:
            return pending.state
        return self._store.get_state(self.component_id)

    def set(self, values: Mapping[str, str]) -> None:
        """Replace the whole map, whatever is stored."""
        self._change(values, None)

    def replace(self, old: StateMap, values: Mapping[str, str]) -> bool:
        """Replace the map if the state is still at ``old``'s version (False, nothing changed,
        if not); the commit checks the version again."""
        current = self.get()
        if current.version != old.version:
            return False
        self._change(values, current.version)
        return True

    def clear(self) -> None:
        """Remove every key (the version still grows)."""
        self._change({}, None)

    def _change(self, values: Mapping[str, str], expected: int | None) -> None:
        values = dict(values)
        try:
            encode_state(0, values)  # the limits of every engine's store: strings, at most 4 MiB
        except ValueError as err:
            raise ValueError(f"{self.component_id}: {err}") from None
        session = self._session
        if session is None:
            self._store.commit_state(StateChange(self.component_id, values, expected))
            return
        pending = session.pending_state
        if pending is not None:  # a second change in one session: still checked against what it first read
            expected = pending.change.expected
            base = pending.state.version - 1
        else:
            base = self._store.get_state(self.component_id).version if expected is None else expected
        session.pending_state = PendingState(StateChange(self.component_id, values, expected),
                                             StateMap.of(base + 1, values))
