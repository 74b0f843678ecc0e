"""Processors' state in the FlowFile log (NiFi's local state): the ``state`` sub-database.

A processor's state is a versioned map of strings under its component id; a session's change of
it is written in the session's commit transaction (``put``), checked against the stored version,
so state and FlowFiles change together or not at all.
"""

from __future__ import annotations

from repositories.flowfile import records as rec
from repositories.flowfile.environment import CallerError, LogEnvironment, Txn
from repositories.flowfile.errors import StateConflictError
from repositories.model import StateChange, StateMap


def _state_key(component_id: str) -> bytes:
    key = component_id.encode()
    if not key or len(key) > rec.MAX_KEY_SIZE:
        raise ValueError(f"a component id of 1 to {rec.MAX_KEY_SIZE} UTF-8 bytes keys processor state, "
                         f"not {component_id!r}")
    return key


class StateStore:
    """The ``state`` sub-database of one log."""

    def __init__(self, environment: LogEnvironment) -> None:
        self.environment = environment

    def get(self, component_id: str) -> StateMap:
        """The stored state of a processor (version -1 and no values when it has none)."""
        with self.environment.read() as txn:
            raw = txn.get(_state_key(component_id), db=self.environment.state)
        if raw is None:
            return StateMap()
        try:
            version, values = rec.decode_state(raw)
        except rec.RecordError as e:
            raise self.environment.record_error(e, f"the state of {component_id}") from None
        return StateMap.of(version, values)

    def ids(self) -> list[str]:
        """The component ids that have stored state, without reading it (a damaged one included)."""
        environment = self.environment
        with environment.read() as txn:
            cursor = txn.cursor(db=environment.state)
            return [environment.text_key(key, "state") for key in cursor.iternext(keys=True, values=False)]

    def put(self, txn: Txn, change: StateChange) -> None:
        """Check ``change`` against the stored version and write it (``StateConflictError``
        when its ``expected`` version is not the stored one). Only the stored value's header is
        read: a value whose map is damaged is replaced by any write, and one whose header is
        damaged by a write that does not compare versions (set, clear: how it is repaired), its
        version starting over."""
        key = _state_key(change.component_id)
        raw = txn.get(key, db=self.environment.state)
        try:
            current = rec.state_version(raw) if raw is not None else -1
        except rec.RecordError as e:
            if change.expected is not None or isinstance(e, rec.RecordVersionError):  # never downgrade a newer one
                raise self.environment.record_error(e, f"the state of {change.component_id}") from None
            current = -1
        stored = change.applied_to(StateMap(current))
        if stored is None:
            assert change.expected is not None  # only a change that expects a version is refused
            raise StateConflictError(self.environment.path, change.component_id, change.expected, current)
        try:
            value = rec.encode_state(stored.version, stored.values)
        except ValueError as e:
            raise CallerError(f"{change.component_id}: {e}") from None
        txn.put(key, value, db=self.environment.state)
