"""The columnar path of a session's batch calls: FlowFiles a processor handles as one batch, kept
as columns, and the part of a commit built from those columns.

A ``Run`` is the FlowFiles taken by one ``get_batch`` or made by one ``create_batch``, changed
since only by batch calls given the whole batch, in order. ``Runs``, the session's set of them,
holds a run's records as one list a field, with no record a FlowFile, and the events a processor
reported for whole runs (``RunEvent``); at commit it adds the runs' queued FlowFiles,
acknowledgements, removals and events to the ``CommitBatch`` with no Python step a FlowFile where
it can. The first per-FlowFile call of a session turns every run into per-FlowFile records
(``Runs.release``), so a processor may mix both kinds of call and see the same effects
(tests/test_session_batch.py holds both paths side by side).

This is a helper object the session delegates to, not a mixin: the runs have state and invariants
of their own (a run's ``current`` is never changed in place; runs exist only while the session has
no per-FlowFile record) and the session reaches them only through the methods here.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence, TypeVar

from flowactors.sdk.session_contract import (F_DETAILS, F_LINEAGE_START, F_PREVIOUS_ATTRIBUTES, F_PREVIOUS_CLAIM,
                                             F_PREVIOUS_SIZE, F_SOURCE_QUEUE, F_UPDATED_ATTRIBUTES, F_UPDATED_CLAIM,
                                             F_UPDATED_SIZE, F_UUID, CommitBatch)
from repositories.model import FlowFile, FlowFileBatch, QueuedFlowFile, now_millis
from repositories.provenance.event import FIELD_INDEX, EventRun, ProvenanceEventType, new_event_fields

_T = ProvenanceEventType
_new_tuple = tuple.__new__
_CLAIM_LENGTH = itemgetter(2)
#: event types that stand for the creation of a FlowFile a session made (no implicit CREATE then)
CREATION_EVENTS = frozenset({"RECEIVE", "FETCH", "CREATE", "JOIN", "CLONE"})
#: event types that stand for a change of content (no implicit CONTENT_MODIFIED then)
CONTENT_EVENTS = frozenset({"CONTENT_MODIFIED", "FETCH", "RECEIVE"})

_Column = TypeVar("_Column", bound=list)


class QueueIndex:
    """Per-process one-up counter that orders FlowFiles entering queues in the same millisecond
    (``FlowFile.queue_index``): every FlowFile a session commits to a queue takes the next."""

    value = 0

    @classmethod
    def take(cls) -> int:
        cls.value += 1
        return cls.value

    @classmethod
    def take_many(cls, count: int) -> range:
        """``count`` values, as ``take`` would give them one after the other."""
        first = cls.value + 1
        cls.value += count
        return range(first, first + count)


class EventSource(NamedTuple):
    """The component a session's events name."""

    component_id: str
    component_name: str
    component_type: str


class Run:
    """FlowFiles a processor handles as one batch, as columns (see the module docstring).

    ``current`` is never changed in place (a batch call puts a new list there), and the session
    hands processors copies of it: a processor that reorders or trims its list cannot change the
    session's records."""

    __slots__ = ("current", "originals", "sources", "relationship", "removed", "attributes_modified",
                 "content_modified", "reported")

    def __init__(self, current: list[FlowFile], originals: list[FlowFile] | None, sources: list[str] | None):
        self.current = current
        self.originals = originals   # None: made in this session
        self.sources = sources       # the queue each was taken from
        self.relationship: str | list[str] | None = None   # one for all, or one a FlowFile
        self.removed = False
        self.attributes_modified = False
        self.content_modified = False
        self.reported: set[str] = set()   # event types the processor reported for the whole run

    def members(self) -> Iterator[tuple[FlowFile | None, FlowFile, str | None, str | None]]:
        """Each FlowFile's (as taken or None, as it is now, its source queue or None, its relationship)."""
        relationship, originals, sources = self.relationship, self.originals, self.sources
        for i, flowfile in enumerate(self.current):
            name = relationship[i] if isinstance(relationship, list) else relationship
            if originals is None or sources is None:
                yield None, flowfile, None, name
            else:
                yield originals[i], flowfile, sources[i], name

    def replace_claims(self, claims: Sequence[Any]) -> None:
        """The i-th FlowFile's content is now ``claims[i]`` (``write_bytes_batch``)."""
        self.current = [_new_tuple(FlowFile, (f[0], f[1], f[2], c, f[4], f[5], f[6], f[7], f[8]))
                        for f, c in zip(self.current, claims)]
        self.content_modified = True

    def put_attributes(self, values: dict[str, str] | list[dict[str, str]]) -> bool:
        """``put_attributes_batch`` on the whole run, values converted: one dict for all, or a list
        of one a FlowFile. False (nothing done) when some FlowFile already has every value, which
        the per-FlowFile path handles (no new version, no event for it)."""
        current = self.current
        if isinstance(values, dict):
            # a value no FlowFile has yet rules out a FlowFile that has them all (the usual case)
            if not any([f[2].get(k) for f in current].count(v) == 0 for k, v in values.items()):
                if any(all(f[2].get(k) == v for k, v in values.items()) for f in current):
                    return False
            self.current = [_new_tuple(FlowFile, (f[0], f[1], {**f[2], **values}, f[3], f[4], f[5], f[6], f[7], f[8]))
                            for f in current]
        else:
            if any(all(f[2].get(k) == v for k, v in w.items()) for f, w in zip(current, values)):
                return False
            self.current = [f.with_attributes({**f[2], **w}) for f, w in zip(current, values)]
        self.attributes_modified = True
        return True

    def remove(self) -> None:
        self.removed = True
        self.relationship = None

    def taken(self) -> list[tuple[str, FlowFile]]:
        """(source queue, FlowFile as taken) of each FlowFile, if the run was taken from queues."""
        if self.originals is None or self.sources is None:
            return []
        return list(zip(self.sources, self.originals))


class RunEvent:
    """An event a processor reported for a whole run (``ProvenanceReporter.route_batch``),
    completed from the run's columns at commit."""

    __slots__ = ("event_type", "run", "shared", "each")

    def __init__(self, event_type: ProvenanceEventType, run: Run, shared: Mapping[str, Any],
                 each: Mapping[str, Sequence[Any]]):
        self.event_type = event_type
        self.run = run
        self.shared = {"timestamp": now_millis(), **shared}   # field name -> the value of every event
        self.each = each                                      # field name -> one value a FlowFile

    def per_flowfile(self) -> Iterator[tuple[FlowFile, dict[str, Any]]]:
        """Each FlowFile of the run with its event's fields by name."""
        for i, flowfile in enumerate(self.run.current):
            yield flowfile, {**self.shared, **{name: values[i] for name, values in self.each.items()}}


class Runs(list[Run]):
    """The runs a session holds (the list's items), and the events reported for them, in order.
    A list so that ``if runs:``, which the per-FlowFile calls ask each time, is the list's own test."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        super().__init__()
        self._events: list[RunEvent] = []

    def add(self, run: Run) -> None:
        self.append(run)

    def of(self, flowfiles: Sequence[FlowFile]) -> Run | None:
        """The run whose FlowFiles ``flowfiles`` are, all of them and in order, if there is one
        (a batch call's columnar path); None sends the call down the per-FlowFile path."""
        if not flowfiles or type(flowfiles) is not list:
            return None
        for run in self:
            if not run.removed and run.current == flowfiles:   # lengths first, then identity, in C
                return run
        return None

    def report(self, event_type: ProvenanceEventType, run: Run, shared: Mapping[str, Any],
               each: Mapping[str, Sequence[Any]]) -> None:
        """Record an event for every FlowFile of ``run``: ``shared`` and ``each`` by field name
        (a value for all, a list of one a FlowFile)."""
        self._events.append(RunEvent(event_type, run, shared, each))
        run.reported.add(event_type.value)

    def taken(self) -> list[tuple[str, FlowFile]]:
        """(source queue, FlowFile as taken) of each FlowFile the runs took from a queue."""
        return [pair for run in self for pair in run.taken()]

    def release(self) -> tuple[list[Run], list[RunEvent]]:
        """Every run and run event, in order, for the session to turn into per-FlowFile records and
        events; the set is empty after."""
        released = list(self), self._events
        self.clear()
        self._events = []
        return released

    def unhandled(self) -> list[str]:
        """The uuids of the FlowFiles neither transferred nor removed."""
        return [f.uuid for run in self if not run.removed and run.relationship is None for f in run.current]

    def needs_clones(self, destinations: Callable[[str], list[str]]) -> bool:
        """Whether a run goes to a relationship connected more than once (its FlowFiles then need
        clones, made one FlowFile at a time)."""
        for run in self:
            relationship = run.relationship
            names = () if relationship is None else [relationship] if isinstance(relationship, str) else set(relationship)
            if any(len(destinations(name)) > 1 for name in names):
                return True
        return False

    def commit_batch(self, destinations: Callable[[str], list[str]], source: EventSource) -> CommitBatch:
        """The commit of a session whose FlowFiles are all in runs, every one handled: the batch the
        per-FlowFile path would build (records, offers, acknowledgements, events in the same order)
        built from the runs' columns. The reported events come first, then the implicit ones (as
        ``RecordCommit``), then the drops."""
        commit = _RunCommit(destinations, source)
        for run in self:
            commit.add(run)
        batch = commit.batch
        batch.events = [commit.complete(e) for e in self._events] + commit.implicit + commit.drops
        return batch


class _RunCommit:
    """One ``Runs.commit_batch`` under way: the batch, the implicit and drop events so far, and each
    run's event columns (made once, shared by all the run's events)."""

    def __init__(self, destinations: Callable[[str], list[str]], source: EventSource):
        self.destinations = destinations
        self.source = source
        self.now = now_millis()
        self.batch = CommitBatch()
        self.implicit: list[EventRun] = []
        self.drops: list[EventRun] = []
        self._columns: dict[int, dict[int, list]] = {}

    def add(self, run: Run) -> None:
        """The run's acknowledgements, removals, events and queued FlowFiles."""
        current, originals, sources = run.current, run.originals, run.sources
        count = len(current)
        if originals is not None and sources is not None:
            _extend_by_queue(self.batch.acknowledgements, sources, [f[1] for f in originals], list)
        queues, dropped = self._routes(run)
        kept: Sequence[int] = range(count)
        if dropped:
            gone = set(dropped)
            kept = [i for i in range(count) if i not in gone]
        self._add_implicit(run, kept)
        if dropped:
            if originals is not None:
                self.batch.removals.extend(current[i][1] for i in dropped)
            self._add_drops(run, dropped)
        if kept and queues is not None:
            self._enqueue(run, kept, queues)

    def _routes(self, run: Run) -> tuple[list[str | None] | None, Sequence[int]]:
        """Where each FlowFile goes (a queue, or None when removed or auto-terminated: None for all
        when all are), and the positions of those that go nowhere."""
        count, relationship = len(run.current), run.relationship
        if run.removed or relationship is None:
            return None, range(count)
        if isinstance(relationship, str):
            destinations = self.destinations(relationship)
            if not destinations:
                return None, range(count)
            queues: list[str | None] = [destinations[0]] * count
            return queues, ()
        first: dict[str, str | None] = {}
        for name in set(relationship):
            found = self.destinations(name)
            first[name] = found[0] if found else None
        queues = [first[name] for name in relationship]
        return queues, [i for i, queue in enumerate(queues) if queue is None]

    def _add_implicit(self, run: Run, kept: Sequence[int]) -> None:
        """The events nobody reported (as ``RecordCommit`` adds them)."""
        reported = run.reported
        if run.originals is None:
            if not run.removed and not reported & CREATION_EVENTS:
                self.implicit.append(self._event_run(_T.CREATE, run, range(len(run.current))))
        elif kept:
            if run.content_modified and not reported & CONTENT_EVENTS:
                self.implicit.append(self._event_run(_T.CONTENT_MODIFIED, run, kept))
            elif run.attributes_modified and not reported:
                self.implicit.append(self._event_run(_T.ATTRIBUTES_MODIFIED, run, kept))

    def _add_drops(self, run: Run, dropped: Sequence[int]) -> None:
        """The DROP events of the FlowFiles that go nowhere (as ``RecordCommit`` adds them):
        auto-terminated ones say by which relationship; removed ones taken from a queue get one
        unless the processor reported it."""
        if not run.removed:
            drop = self._event_run(_T.DROP, run, dropped)
            relationship = run.relationship
            if isinstance(relationship, list):
                drop.each[F_DETAILS] = [f"Auto-Terminated by {relationship[i]} Relationship" for i in dropped]
            else:
                drop.shared[F_DETAILS] = f"Auto-Terminated by {relationship} Relationship"
            self.drops.append(drop)
        elif run.originals is not None and "DROP" not in run.reported:
            self.drops.append(self._event_run(_T.DROP, run, dropped))

    def _enqueue(self, run: Run, kept: Sequence[int], queues: list[str | None]) -> None:
        """The kept FlowFiles as they enter their queues: the log's records and the offers."""
        current, whole = run.current, len(kept) == len(run.current)
        kept_queues = queues if whole else [queues[i] for i in kept]
        moving = current if whole else [current[i] for i in kept]
        now = self.now
        queued = [_new_tuple(FlowFile, (f[0], f[1], f[2], f[3], f[4], f[5], f[6], now, index))
                  for f, index in zip(moving, QueueIndex.take_many(len(moving)))]
        self.batch.updates.extend([_new_tuple(QueuedFlowFile, pair) for pair in zip(queued, kept_queues)])
        _extend_by_queue(self.batch.offers, kept_queues, queued, FlowFileBatch)

    def complete(self, event: RunEvent) -> EventRun:
        """A reported run event with every field filled in from its run's columns."""
        completed = self._event_run(event.event_type, event.run, range(len(event.run.current)),
                                    event.shared["timestamp"])
        for name, value in event.shared.items():
            completed.shared[FIELD_INDEX[name]] = value
        for name, values in event.each.items():
            completed.each[FIELD_INDEX[name]] = values
        return completed

    def _event_run(self, event_type: ProvenanceEventType, run: Run, positions: Sequence[int],
                   timestamp: int | None = None) -> EventRun:
        """Events of ``event_type`` for the FlowFiles of ``run`` at ``positions``, completed as
        ``RecordCommit`` completes one."""
        source = self.source
        shared = new_event_fields(event_type, self.now if timestamp is None else timestamp, "", source.component_id,
                                  source.component_name, source.component_type, 0)
        shared[F_UUID] = shared[F_LINEAGE_START] = None   # each event's own, in ``each``
        made = self._run_columns(run)
        if len(positions) == len(run.current):
            each = dict(made)
        else:
            each = {position: [column[i] for i in positions] for position, column in made.items()}
        return EventRun(len(positions), shared, each)

    def _run_columns(self, run: Run) -> dict[int, list]:
        """The event fields a run's FlowFiles give every event about them, as columns (made once a
        commit, shared by all the run's events)."""
        made = self._columns.get(id(run))
        if made is None:
            current = run.current
            claims = [f[3] for f in current]
            made = {F_UUID: [f[1] for f in current], F_LINEAGE_START: [f[5] for f in current],
                    F_UPDATED_ATTRIBUTES: [f[2] for f in current], F_UPDATED_CLAIM: claims,
                    F_UPDATED_SIZE: _sizes(claims)}
            if run.originals is not None and run.sources is not None:
                made.update(_previous_columns(run.originals, current, made))
                made[F_SOURCE_QUEUE] = run.sources
            self._columns[id(run)] = made
        return made


def _previous_columns(originals: list[FlowFile], current: list[FlowFile], made: dict[int, list]) -> dict[int, list]:
    """The ``previous_*`` columns of a taken run's events, sharing ``made``'s ``updated_*`` lists
    where nothing changed."""
    if originals is current:
        return {F_PREVIOUS_ATTRIBUTES: made[F_UPDATED_ATTRIBUTES], F_PREVIOUS_CLAIM: made[F_UPDATED_CLAIM],
                F_PREVIOUS_SIZE: made[F_UPDATED_SIZE]}
    previous: dict[int, list] = {F_PREVIOUS_ATTRIBUTES: [f[2] for f in originals]}
    old = [f[3] for f in originals]
    if old == made[F_UPDATED_CLAIM]:   # content unchanged (compared by identity first): the same fields
        previous[F_PREVIOUS_CLAIM], previous[F_PREVIOUS_SIZE] = made[F_UPDATED_CLAIM], made[F_UPDATED_SIZE]
    else:
        previous[F_PREVIOUS_CLAIM], previous[F_PREVIOUS_SIZE] = old, _sizes(old)
    return previous


def _sizes(claims: list) -> list[int]:
    """Each claim's length, 0 for none: one C-level pass when every FlowFile has content."""
    if None in claims:
        return [0 if c is None else c[2] for c in claims]
    return list(map(_CLAIM_LENGTH, claims))


def _extend_by_queue(by_queue: dict[str, _Column], queues: Sequence[Any], values: Sequence[Any],
                     new: Callable[[], _Column]) -> None:
    """Append ``values[i]`` to ``by_queue[queues[i]]`` (in one step when all go to one queue);
    ``new`` makes a queue's list."""
    first = queues[0]
    if queues.count(first) == len(queues):
        by_queue.setdefault(first, new()).extend(values)
        return
    for queue, value in zip(queues, values):
        by_queue.setdefault(queue, new()).append(value)
