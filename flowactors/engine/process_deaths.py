"""FlowFiles that end their processor's process: found across restarts and set aside.

A processor that ends its own process on some FlowFile (``os._exit``, a crash in native code, the
kernel's OOM killer) takes every FlowFile the process held with it: nothing of them was committed,
so they are back in their queues when the process restarts (on Ray, ``max_restarts``; in process,
at the next run), and a task that took the same batch again would die again, forever.

So each task keeps, in a small file, the ids of the FlowFiles its running trigger holds
(``InHandRecord``: written as a session takes them, marked empty when the trigger ends; a process's
death leaves the file in the page cache, which is all this needs). The next build of the task
reads what the dead one held (``DeathGuard.open``): those FlowFiles are *suspects*. A suspect is
handed to the processor only alone, one FlowFile in its trigger, so the next death names the
FlowFile that causes it; a suspect whose trigger ends without a death is cleared. A FlowFile that
was alone in hand at ``DEATHS_TO_SET_ASIDE`` deaths is *set aside*: never given to ``on_trigger``
again, but routed to ``failure`` with the reason where the processor has one, else penalized in
its queue each time it comes up (``ProcessorTask``).

Two deaths, not one: a process killed from outside (an operator, a machine short of memory) while
one FlowFile was alone in hand does not make that FlowFile poison. Finding the FlowFile costs at
most three deaths whatever the batch size: the batch, then the FlowFile alone twice.

A process hosts several tasks (an executor on Ray; the whole flow in process), and one death ends
every trigger it runs. So a death is settled for the whole process at once (``open_tasks`` over
the tasks that shared it): it counts against a FlowFile only when that FlowFile was the one
FlowFile any trigger of the process held; when several triggers held FlowFiles, every one of them
is a suspect and none is counted. And while a task of the process has suspects, a suspect runs
alone in the process, not only in its trigger (``ProcessTriggers``): its trigger takes it only
when no other trigger there holds FlowFiles, and the others take nothing until it ends. A FlowFile
in hand beside another task's poison is never taken for the poison.

Both files are in ``<repository>/process-deaths/<flow>/``; their formats are docs/formats/process-deaths.md.
A damaged file is said once and read as empty: it only ever narrows what the next trigger takes.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
from array import array
from collections import deque
from itertools import islice
from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import quote

from repositories.model import FlowFile

log = logging.getLogger(__name__)

#: deaths with a FlowFile alone in hand after which it is set aside
DEATHS_TO_SET_ASIDE = 2
#: suspects kept per task at most (the oldest are forgotten first): a bound on a file whose
#: entries are cleared only when their FlowFile comes up again
MAX_SUSPECTS = 100_000
FOLDER = "process-deaths"

IN_HAND_MAGIC = b"FAIH"
IN_HAND_VERSION = 1
_HEADER = struct.Struct("<4sBBHI")  # magic, version, state, reserved, count
_STATE_OFFSET = 5
_IDLE, _HOLDING = 0, 1
SUSPECTS_FORMAT = "flowactors process-death suspects"
SUSPECTS_VERSION = 1


class InHandRecord:
    """The ids of the FlowFiles a task's running trigger holds, in a file of its own.

    ``add`` and ``clear`` are one or two ``pwrite`` calls each, on the task's own thread; nothing
    is synced (a process's death keeps what it wrote; a machine's crash ends every trigger anyway).
    """

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._count = 0
        self._abandoned = False

    @property
    def held(self) -> int:
        """How many FlowFiles the running trigger has taken (0 between triggers)."""
        return self._count

    def held_at_death(self) -> list[int]:
        """What a trigger held when its process ended without finishing it (empty if none)."""
        data = os.pread(self._fd, _HEADER.size, 0)
        if not data:
            return []
        try:
            magic, version, state, _, count = _HEADER.unpack(data)
        except struct.error:
            magic, version, state, count = b"", 0, _IDLE, 0
        if magic != IN_HAND_MAGIC or version != IN_HAND_VERSION or state not in (_IDLE, _HOLDING):
            log.warning("%s is not a version-%d in-hand record of flowactors; read as empty", self.path,
                        IN_HAND_VERSION)
            return []
        if state == _IDLE:
            return []
        data = os.pread(self._fd, 8 * count, _HEADER.size)
        ids = array("Q")
        ids.frombytes(data[:len(data) // 8 * 8])  # a record cut short: the ids it has
        return ids.tolist()

    def add(self, ids: Sequence[int]) -> None:
        """The running trigger took these too."""
        if self._abandoned:
            return
        packed = array("Q", ids).tobytes()
        header = _HEADER.pack(IN_HAND_MAGIC, IN_HAND_VERSION, _HOLDING, 0, self._count + len(ids))
        if self._count == 0:
            os.pwrite(self._fd, header + packed, 0)
        else:  # the ids first: a header never counts ids not written yet
            os.pwrite(self._fd, packed, _HEADER.size + 8 * self._count)
            os.pwrite(self._fd, header, 0)
        self._count += len(ids)

    def clear(self) -> None:
        """The trigger ended (committed or rolled back): it holds nothing now."""
        if self._count and not self._abandoned:
            self.reset()

    def reset(self) -> None:
        """Mark the record empty, whatever it held."""
        os.pwrite(self._fd, bytes([_IDLE]), _STATE_OFFSET)
        self._count = 0

    def abandon(self) -> None:
        """Mark the record empty and write nothing more (``DeathGuard.abandon``)."""
        self.reset()
        self._abandoned = True

    def close(self) -> None:
        os.close(self._fd)


class ProcessTriggers:
    """The triggers of one process that hold FlowFiles, as the guards of its tasks see them, and
    the one suspect trigger that runs alone in the process (the module docstring). Watched only
    while a task of the process has suspects; otherwise a guard never asks it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._suspicious: set[str] = set()   # the tasks with suspects
        self._holding: set[str] = set()      # the tasks whose running trigger holds FlowFiles
        self._alone: str | None = None       # the task whose trigger holds a suspect alone
        self._waiting: str | None = None     # the task waiting for the others to let go, to take one

    def watching(self) -> bool:
        return bool(self._suspicious)

    def suspicious(self, task_key: str, has_suspects: bool) -> None:
        with self._lock:
            if has_suspects:
                self._suspicious.add(task_key)
            else:
                self._suspicious.discard(task_key)
                if self._waiting == task_key:
                    self._waiting = None

    def may_take(self, task_key: str, alone: bool) -> bool:
        """Whether ``task_key``'s trigger, holding nothing yet, may take FlowFiles (``alone``: a
        suspect, which needs every other trigger of the process empty-handed); if so it holds."""
        with self._lock:
            if self._alone not in (None, task_key) or self._waiting not in (None, task_key):
                return False
            if alone:
                if self._holding - {task_key}:
                    self._waiting = task_key   # the others finish what they hold and take no more
                    return False
                self._alone, self._waiting = task_key, None
            self._holding.add(task_key)
            return True

    def ended(self, task_key: str) -> None:
        """``task_key``'s trigger holds nothing any more (it ended, or the task stopped)."""
        with self._lock:
            self._holding.discard(task_key)
            if self._alone == task_key:
                self._alone = None
            if self._waiting == task_key:
                self._waiting = None

    def forget(self, task_keys: Iterable[str]) -> None:
        """A new build of these tasks: nothing of their old one counts."""
        for key in task_keys:
            self.ended(key)
            self.suspicious(key, False)


_processes: dict[tuple[str, str], ProcessTriggers] = {}
_processes_lock = threading.Lock()
#: seconds a trigger refused by the process's suspect rule waits before it finds nothing, so that
#: its task's loop does not spin while the suspect runs
REFUSED_WAIT = 0.01


def process_triggers(root: str | Path, flow: str) -> ProcessTriggers:
    """This process's triggers of ``flow`` over the repository at ``root`` (one object a process)."""
    with _processes_lock:
        return _processes.setdefault((str(root), flow), ProcessTriggers())


def settle_deaths(root: str | Path, flow: str, task_keys: Sequence[str]) -> dict[str, list[int]]:
    """What the tasks ``task_keys`` (every task of one process) held when that process died,
    counted into their suspects together: a death counts against a FlowFile only when it was the
    one FlowFile held in the whole process; otherwise each FlowFile held becomes a suspect. The
    records are marked empty afterwards, so a second call (another executor of the same process)
    finds nothing left to count. Returns the FlowFile ids each task held (tasks holding none left out)."""
    folder = Path(root) / FOLDER / quote(flow, safe="")
    held: dict[str, list[int]] = {}
    for key in task_keys:
        path = folder / f"{quote(key, safe='')}.inhand"
        if not path.exists():
            continue
        record = InHandRecord(path)
        ids = record.held_at_death()
        if ids:
            held[key] = ids
            record.reset()
        record.close()
    pinned = sum(map(len, held.values())) == 1
    for key, ids in held.items():
        suspects_path = folder / f"{quote(key, safe='')}.suspects"
        suspects = _read_suspects(suspects_path)
        for flowfile_id in ids:
            if pinned:
                suspects[flowfile_id] = suspects.get(flowfile_id, 0) + 1
            else:
                suspects.setdefault(flowfile_id, 0)
        _write_suspects(suspects_path, suspects)
        _say_death(flow, key, ids, suspects, pinned, len(held) > 1)
    return held


class DeathGuard:
    """One task's suspects and in-hand record; the task's backend asks it what a trigger may take."""

    def __init__(self, in_hand: InHandRecord, suspects_path: Path, suspects: dict[int, int],
                 held_at_death: list[int], task_key: str = "", process: ProcessTriggers | None = None):
        self.in_hand = in_hand
        self.suspects_path = suspects_path
        #: FlowFile id -> deaths while it was alone in hand in its process (0: in hand with others at a death)
        self.suspects = suspects
        #: what the previous process held when it died (empty if it did not die in a trigger)
        self.held_at_death = held_at_death
        self.task_key = task_key
        #: the triggers of the task's process (the module docstring); a guard of its own by default
        self.process = process if process is not None else ProcessTriggers()
        self.process.suspicious(task_key, bool(suspects))
        self._alone: int | None = None
        self._in_process = False   # this trigger counts among the process's holding triggers
        self._release = False

    @classmethod
    def open(cls, root: str | Path, flow: str, task_key: str) -> "DeathGuard":
        """The guard of task ``task_key`` of ``flow`` over the repository at ``root``, the task
        alone in its process (``open_tasks``)."""
        return cls.open_tasks(root, flow, [task_key], [task_key])[task_key]

    @classmethod
    def open_tasks(cls, root: str | Path, flow: str, task_keys: Sequence[str],
                   process_keys: Sequence[str]) -> dict[str, "DeathGuard"]:
        """The guards of tasks ``task_keys`` of ``flow`` over the repository at ``root``, whose
        process hosts the tasks ``process_keys`` (them included): a death of the process that
        nobody has settled yet is settled for all of them (``settle_deaths``)."""
        held = settle_deaths(root, flow, process_keys)
        process = process_triggers(root, flow)
        process.forget(task_keys)
        folder = Path(root) / FOLDER / quote(flow, safe="")
        guards = {}
        for key in task_keys:
            name = quote(key, safe="")
            suspects_path = folder / f"{name}.suspects"
            guards[key] = cls(InHandRecord(folder / f"{name}.inhand"), suspects_path, _read_suspects(suspects_path),
                              held.get(key, []), key, process)
        return guards

    def deaths(self, flowfile_id: int) -> int:
        return self.suspects.get(flowfile_id, 0)

    def set_aside(self, flowfile: FlowFile) -> bool:
        """Whether ``flowfile`` has ended the process often enough to be set aside."""
        return self.suspects.get(flowfile.id, 0) >= DEATHS_TO_SET_ASIDE

    def begin_trigger(self) -> None:
        self._alone = None

    def take(self, prefetched: deque[tuple[str, FlowFile]], max_count: int) -> list[tuple[str, FlowFile]]:
        """Take up to ``max_count`` of ``prefetched`` for the running trigger and record them in
        hand: a suspect only alone (the first and only FlowFile of its trigger), a FlowFile to be
        set aside never (but after ``release_set_aside``, only it: the task routes it)."""
        suspects = self.suspects
        if self._release:
            self._release = False
            return [prefetched.popleft()] if self.head_set_aside(prefetched) else []
        if self._alone is not None:
            return []
        count = min(max_count, len(prefetched))
        if suspects:   # up to the first suspect; a suspect only alone, first in its trigger
            count = next((i for i, (_, f) in enumerate(islice(prefetched, count)) if f.id in suspects), count)
            if count == 0 and prefetched and not self.in_hand.held:
                if suspects[prefetched[0][1].id] >= DEATHS_TO_SET_ASIDE:
                    return []
                count = 1
                self._alone = prefetched[0][1].id
        if count and not self._in_process and self.process.watching():
            if not self.process.may_take(self.task_key, self._alone is not None):
                self._alone = None
                time.sleep(REFUSED_WAIT)
                return []
            self._in_process = True
        taken = [prefetched.popleft() for _ in range(count)]
        if taken:
            self.in_hand.add([flowfile.id for _, flowfile in taken])
        return taken

    def head_set_aside(self, prefetched: deque[tuple[str, FlowFile]]) -> FlowFile | None:
        """The FlowFile at the head of ``prefetched`` if it is to be set aside, else None."""
        if self.suspects and prefetched and self.set_aside(prefetched[0][1]):
            return prefetched[0][1]
        return None

    def release_set_aside(self) -> None:
        """The next ``take`` hands out the FlowFile to be set aside at the head (and only it), for
        the task to route without ``on_trigger``."""
        self._release = True

    def end_trigger(self) -> None:
        """The trigger ended without its process dying: a suspect it held alone is cleared."""
        self.in_hand.clear()
        if self._in_process:
            self._in_process = False
            self.process.ended(self.task_key)
        if self._alone is not None:
            self.cleared(self._alone)
            self._alone = None

    def cleared(self, flowfile_id: int) -> None:
        """``flowfile_id`` is no suspect any more (it went through, or was routed to failure)."""
        if self.suspects.pop(flowfile_id, None) is not None:
            self._save()
            if not self.suspects:
                self.process.suspicious(self.task_key, False)

    def close(self) -> None:
        self.process.forget([self.task_key])
        self.in_hand.close()

    def abandon(self) -> None:
        """The task's trigger was left running at a stop: record nothing more for it (it is no
        process death), and leave the file open under its thread."""
        self.process.forget([self.task_key])
        self.in_hand.abandon()

    def _save(self) -> None:
        _write_suspects(self.suspects_path, self.suspects)


def _write_suspects(path: Path, suspects: dict[int, int]) -> None:
    """Replace the suspects file with ``suspects`` (the oldest past ``MAX_SUSPECTS`` forgotten)."""
    while len(suspects) > MAX_SUSPECTS:
        del suspects[next(iter(suspects))]
    document = {"format": SUSPECTS_FORMAT, "version": SUSPECTS_VERSION,
                "suspects": [[flowfile_id, deaths] for flowfile_id, deaths in suspects.items()]}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(json.dumps(document))
    os.replace(temporary, path)


def _say_death(flow: str, task_key: str, held: list[int], suspects: dict[int, int], pinned: bool,
               others: bool) -> None:
    """One log line for a death found at a task's start: not a processor error (a process killed
    from outside is one too), but what a user looking for a crash loop wants to read."""
    shown = ", ".join(map(str, held[:5])) + (", ..." if len(held) > 5 else "")
    if pinned:
        then = (f"FlowFile {held[0]} has now been alone in hand at {suspects[held[0]]} death(s) "
                f"(set aside at {DEATHS_TO_SET_ASIDE})")
    elif len(held) == 1 and others:
        then = ("other triggers of the process held FlowFiles too, so the death is not counted against it; "
                "it runs alone in the process now")
    else:
        then = "each of them runs alone now, until the one that ends the process is found"
    log.warning("%s/%s: the process ended while the task's trigger held %d FlowFile(s) (ids %s); %s",
                flow, task_key, len(held), shown, then)


def _read_suspects(path: Path) -> dict[int, int]:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        log.warning("%s cannot be read (%s); read as empty", path, err)
        return {}
    if not isinstance(document, dict) or document.get("format") != SUSPECTS_FORMAT:
        log.warning("%s is not a flowactors process-death suspects file; read as empty", path)
        return {}
    if document.get("version") != SUSPECTS_VERSION:
        log.warning("%s is version %r of the process-death suspects, this flowactors reads %d; read as empty",
                    path, document.get("version"), SUSPECTS_VERSION)
        return {}
    entries = document.get("suspects")
    if not isinstance(entries, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(type(v) is int and v >= 0 for v in e) for e in entries):
        log.warning("%s has damaged entries; read as empty", path)
        return {}
    return {flowfile_id: deaths for flowfile_id, deaths in entries}
