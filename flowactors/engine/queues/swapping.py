"""The I/O half of a queue's swapping: swap files on disk and the FlowFile repository's registry.

``Swapper`` carries out what ``QueuePartition`` decides (write the lowest-priority batch out, read a
run back in, fall back to the log when a file is damaged) and drives it for the queue actor:
``poll`` swaps in where the order requires it, ``maintain`` swaps out and reads ahead in the
background. ``SwapRegistry`` is the registry as the queue needs it, through a link to the flow's
FlowFile repository service (``LinkedSwapRegistry``: an actor on Ray, an object in process) or a
repository library open in this process (``LocalSwapRegistry``, the unit tests).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from flowactors.engine.repository_services import FlowFileRepositoryService
from flowactors.engine.transport import Link, awaited

from flowactors.engine.queues.partition import QueuePartition, SwapRun, fifo_key, order_tag
from repositories.flowfile import swapfile
from repositories.flowfile.records import SWAP_QUEUE_PREFIX, key_position
from repositories.flowfile.swapfile import SwapFileError
from repositories.model import FlowFile

if TYPE_CHECKING:
    from flowactors.engine.queues.connection import ConnectionQueue


# ---------------------------------------------------------------------------------- swapping I/O


class SwapRegistry(Protocol):
    """The FlowFile repository's swap-file registry, as the queue needs it (awaitable)."""

    async def register(self, queue: str, location: str, flowfiles: list[FlowFile], size: int) -> None:
        """Record the file; move the FlowFiles' records to ``swap:<location>`` (one transaction)."""

    async def unregister(self, location: str) -> int:
        """Forget the file; move records still under ``swap:<location>`` back to the queue."""

    async def swapped(self, location: str) -> list[FlowFile]:
        """The records still under ``swap:<location>``, in log order."""

    async def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int
                   ) -> tuple[list[FlowFile], bytes | None]:
        """A page of the queue's own records in the log (``WriteAheadFlowFileRepository.page``)."""

    async def last_key(self, queue: str) -> bytes | None:
        """The order-index key of the queue's last record in the log."""


class LinkedSwapRegistry:
    """The registry through a link to the ``FlowFileRepositoryService``."""

    def __init__(self, link: Link):
        self.link = link

    async def register(self, queue: str, location: str, flowfiles: list[FlowFile], size: int) -> None:
        await awaited(self.link.call(FlowFileRepositoryService.register_swap_file, queue, location, len(flowfiles), size, flowfiles))

    async def unregister(self, location: str) -> int:
        return await awaited(self.link.call(FlowFileRepositoryService.unregister_swap_file, location))

    async def swapped(self, location: str) -> list[FlowFile]:
        return await awaited(self.link.call(FlowFileRepositoryService.swapped_flowfiles, location))

    async def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int
                   ) -> tuple[list[FlowFile], bytes | None]:
        return await awaited(self.link.call(FlowFileRepositoryService.page, queue, start, stop, count))

    async def last_key(self, queue: str) -> bytes | None:
        return await awaited(self.link.call(FlowFileRepositoryService.last_key, queue))


class LocalSwapRegistry:
    """The registry of a ``WriteAheadFlowFileRepository`` open in this process."""

    def __init__(self, repository: Any):
        self.repository = repository

    async def register(self, queue: str, location: str, flowfiles: list[FlowFile], size: int) -> None:
        self.repository.register_swap_file(queue, location, len(flowfiles), size, flowfiles=flowfiles)

    async def unregister(self, location: str) -> int:
        return self.repository.unregister_swap_file(location)

    async def swapped(self, location: str) -> list[FlowFile]:
        out: list[FlowFile] = []
        for batch in self.repository.iter_queue(SWAP_QUEUE_PREFIX + location):
            out.extend(batch)
        return out

    async def page(self, queue: str, start: bytes | None, stop: bytes | None, count: int
                   ) -> tuple[list[FlowFile], bytes | None]:
        return self.repository.page(queue, start, stop, count)

    async def last_key(self, queue: str) -> bytes | None:
        return self.repository.last_key(queue)


class Swapper:
    """Moves one queue's FlowFiles between memory and swap files: the I/O half of swapping.

    Order of operations, so that a kill -9 at any point loses and duplicates nothing:
    swap out = write ``<file>.partial``, rename, register (the log moves the records to
    ``swap:<location>``), forget from memory; swap in = read and verify the file, unregister (the
    log moves the records back), take into memory, delete the file once read to its end. A file
    the log does not list is deleted at start-up (``swapfile.remove_orphans``). A file that cannot
    be read is set aside and its FlowFiles are read from the log instead."""

    def __init__(self, queue: ConnectionQueue, directory: str | Path, registry: SwapRegistry):
        self.queue = queue
        self.directory = Path(directory)
        self.registry = registry
        self.lock = asyncio.Lock()
        self.order = order_tag(queue.config.prioritizers)
        self.errors: deque[str] = deque(maxlen=10)
        self.files_out = self.files_in = 0
        self.flowfiles_out = self.flowfiles_in = 0
        self.retry_at = 0.0

    @property
    def queue_id(self) -> str:
        return self.queue.config.queue_id

    def _error(self, message: str, backoff: bool = True) -> None:
        """Remember a problem for the status; after a failure, background swapping pauses 1 s."""
        self.errors.append(f"{time.strftime('%H:%M:%S')} {message}")
        if backoff:
            self.retry_at = time.monotonic() + 1.0

    # ------------------------------------------------------------------ out
    async def spill(self, part: QueuePartition) -> bool:
        """Write one batch to a swap file and register it; False if nothing was (or could be) done."""
        if time.monotonic() < self.retry_at:
            return False
        plan = part.spill_plan()
        if plan is None:
            return False
        sid, batch = plan
        location = swapfile.new_location(self.queue_id, part.name)
        try:
            info = await asyncio.to_thread(
                swapfile.write_swap_file, self.directory, location, self.queue_id, batch,
                partition=part.name, order=self.order, sync=self.queue.config.sync_swap_files)
        except Exception as err:
            part.spill_failed(sid, batch)
            self._error(f"swap-out to {self.directory / location} failed: {err}")
            return False
        try:
            await self.registry.register(self.queue_id, location, batch, info.size)
        except Exception as err:
            part.spill_failed(sid, batch)
            (self.directory / location).unlink(missing_ok=True)
            self._error(f"registering swap file {location} failed: {err}")
            return False
        part.spill_done(sid, location, batch)
        self.files_out += 1
        self.flowfiles_out += len(batch)
        return True

    # ------------------------------------------------------------------ in
    def _reader(self, run: SwapRun) -> swapfile.SwapFileReader:
        """A reader at ``run``'s next entry, after checking the file holds what the queue expects."""
        reader = swapfile.SwapFileReader(self.directory / run.location, run.offset, run.index)
        if reader.header.count - run.index != run.remaining:
            reader.close()
            raise SwapFileError(reader.path, f"it holds {reader.header.count - run.index} FlowFiles "
                                             f"from entry {run.index}, the queue expected {run.remaining}")
        return reader

    def _verify(self, run: SwapRun) -> None:
        with self._reader(run) as reader:
            reader.verify()

    def _read(self, run: SwapRun, n: int) -> tuple[list[FlowFile], tuple | None, int, int]:
        """``n`` FlowFiles of ``run`` from its file, the key of the one after, and where it starts."""
        with self._reader(run) as reader:
            flowfiles = reader.read(n)
            offset, index = reader.offset, reader.index
            next_key = None
            if reader.remaining:
                head = reader.read(1)[0]
                next_key = self._key(head)
        return flowfiles, next_key, offset, index

    def _key(self, flowfile: FlowFile) -> tuple:
        key = self.queue.local.key
        return fifo_key(flowfile) if key is None else key(flowfile)

    async def load(self, part: QueuePartition, run: SwapRun, whole: bool = False) -> bool:
        """Swap in (part of) ``run``; False only if nothing could be read.

        A registered file is verified entry by entry first (a damaged one is read from the log
        instead), then unregistered while its entries are decoded."""
        path = self.directory / run.location
        if run.in_log:
            return await self._page_in(part, run)
        if run.from_log:
            return await self._load_from_log(part, run, None)
        n = part.load_size(run, whole)
        unregistering = None
        if run.registered:
            try:
                await asyncio.to_thread(self._verify, run)
            except (SwapFileError, OSError) as err:
                return await self._load_from_log(part, run, err)
            unregistering = asyncio.ensure_future(self.registry.unregister(run.location))
        try:
            flowfiles, next_key, offset, index = await asyncio.to_thread(self._read, run, n)
            error = None
        except (SwapFileError, OSError) as err:
            error = err
        if unregistering is not None:
            try:
                await unregistering
            except Exception as err:
                self._error(f"unregistering swap file {run.location} failed: {err}")
                return False  # still registered and on disk: nothing changed
            run.registered = False
        if error is not None:
            # Unregistered: its records are back in the queue's own place in the log.
            unread = run.remaining
            part.loaded(run, [], None, None, 0)
            swapfile.set_aside(path)
            self._error(f"{error} The {unread} FlowFiles not yet read are in the FlowFile "
                        f"repository under queue '{self.queue_id}' and come back at the next start.")
            return False
        part.loaded(run, flowfiles, next_key, offset, index)
        if next_key is None:
            path.unlink(missing_ok=True)
            self.files_in += 1
        self.flowfiles_in += len(flowfiles)
        return True

    async def _load_from_log(self, part: QueuePartition, run: SwapRun, err: BaseException | None) -> bool:
        """The file is unusable: take the run's FlowFiles from the log (where they still are)."""
        try:
            flowfiles = await self.registry.swapped(run.location)
            await self.registry.unregister(run.location)
        except Exception as log_err:
            self._error(f"reading swap file {run.location} from the FlowFile repository failed: {log_err}")
            return False
        run.registered = False
        if err is not None:
            moved = swapfile.set_aside(self.directory / run.location)
            self._error(f"{err} Read its {len(flowfiles)} FlowFiles from the FlowFile repository"
                        + (f"; the file is now {moved}." if moved else "."), backoff=False)
        else:
            (self.directory / run.location).unlink(missing_ok=True)
        run.ordered = False
        part.loaded(run, flowfiles, None, None, 0)
        self.files_in += 1
        self.flowfiles_in += len(flowfiles)
        return True

    async def _page_in(self, part: QueuePartition, run: SwapRun) -> bool:
        """The next batch of a log run, read from the log (where the records stay: they are
        this queue's own; nothing is written)."""
        try:
            flowfiles, run.start = await self.registry.page(self.queue_id, run.start, run.stop,
                                                            part.load_size(run))
        except Exception as err:
            self._error(f"paging queued FlowFiles in from the FlowFile repository failed: {err}")
            return False
        if part.early:
            flowfiles = [f for f in flowfiles if f.uuid not in part.early]
        part.loaded(run, flowfiles, None if run.start is None else (), None, 0)
        self.flowfiles_in += len(flowfiles)
        return True

    # ------------------------------------------------------------------ driving
    def has_work(self) -> bool:
        """Whether background swapping has something to do now."""
        part = self.queue.local
        return time.monotonic() >= self.retry_at and (part.needs_spill() or part.prefetch_run() is not None)

    async def maintain(self) -> None:
        """Swap out while memory is over the threshold, swap in ahead while it is well under."""
        part = self.queue.local
        async with self.lock:
            while True:
                if part.needs_spill():
                    done = await self.spill(part)
                else:
                    run = part.prefetch_run()
                    done = run is not None and await self.load(part, run)
                if not done:
                    break

    async def hold_memory(self) -> None:
        """Producers wait here while memory is two batches past the threshold (swap-out behind)."""
        part = self.queue.local
        if part.threshold is None:
            return
        limit = part.threshold + 2 * part.batch
        while part.memory >= limit and part.needs_spill():
            async with self.lock:
                if not await self.spill(part):
                    return

    async def poll(self, max_count: int) -> tuple[list[FlowFile], list[FlowFile]]:
        """``ConnectionQueue.poll``, swapping in first wherever the order requires it."""
        taken, expired = self.queue.poll(max_count)
        part = self.queue.local
        for _ in range(256):
            if len(taken) + len(expired) >= max_count or not part.blocked():
                break
            async with self.lock:  # also waits for a swap-out being written
                run = part.urgent_run()
                if run is not None and not await self.load(part, run):
                    break
            more, more_expired = self.queue.poll(max_count - len(taken) - len(expired))
            taken += more
            expired += more_expired
        return taken, expired

    async def take_for_drop(self, max_count: int) -> list[FlowFile]:
        """``ConnectionQueue.take_for_drop``, reading swap files back when memory is empty."""
        part = self.queue.local
        async with self.lock:
            out = self.queue.take_for_drop(max_count)
            while not out:
                run = part.any_run()
                if run is None or not await self.load(part, run, whole=True):
                    break
                out = self.queue.take_for_drop(max_count)
        return out

    # ------------------------------------------------------------------ start-up
    def _inspect(self, location: str, remaining: int) -> tuple[tuple | None, bool, str | None]:
        """(key of the first FlowFile, ordered, problem) of a registered file found at start-up."""
        path = self.directory / location
        try:
            with swapfile.SwapFileReader(path) as reader:
                h = reader.header
                if h.queue != self.queue_id:
                    return None, False, f"swap file {path} belongs to queue {h.queue!r}, not {self.queue_id!r}"
                if h.count != remaining:
                    # partly consumed before a crash, or damaged: the log knows exactly which remain
                    return None, False, None
                head = reader.read(1)
                return (self._key(head[0]) if head else None), h.order == self.order, None
        except (SwapFileError, OSError) as err:
            swapfile.set_aside(path)
            return None, False, str(err)

    async def adopt(self, part: QueuePartition, entries: Sequence[dict]) -> dict:
        """Start-up: take over this queue's registered swap files (oldest first) as runs on disk.

        ``entries`` are ``swap_files()`` entries with ``remaining``/``remaining_size``: what the log
        still holds under ``swap:<location>``. A file whose header or count disagrees with the log
        is read from the log when its turn comes (NIFI-5997: counts come from the log)."""
        report = {"swap_files": 0, "from_log": 0, "empty": 0}
        async with self.lock:
            for entry in entries:
                location = entry["location"]
                remaining = int(entry.get("remaining", entry["count"]))
                size = int(entry.get("remaining_size", entry["size"]))
                if remaining == 0:
                    await self.registry.unregister(location)
                    (self.directory / location).unlink(missing_ok=True)
                    report["empty"] += 1
                    continue
                key, ordered, problem = await asyncio.to_thread(self._inspect, location, remaining)
                if problem:
                    self._error(problem, backoff=False)
                from_log = key is None
                run = SwapRun(location, remaining, size, key=key if key is not None else (),
                              from_log=from_log, ordered=ordered and not from_log)
                if not run.ordered and part.key is not None:
                    run.key = ()  # not sorted by today's prioritizers: read it whole, first
                part.add_run(run)
                report["swap_files"] += 1
                report["from_log"] += from_log
        return report

    async def adopt_log(self, part: QueuePartition, count: int, size: int) -> bool:
        """Start-up or restart of a FIFO queue with no swap files: take over its ``count``
        FlowFiles (``size`` bytes) in the log as one log run, paged in a batch at a time, without
        reading them through. False when the queue has swap files: then the log holds only what
        it had in memory (a bounded number, to be streamed), and a swap file read back would move
        its records into the run's range."""
        async with self.lock:
            if part.run_count:
                return False
            last = await self.registry.last_key(self.queue_id)
            if last is not None and count > 0:
                # up to just past the last one: arrivals from now on are not in the run
                part.add_run(SwapRun(f"log:{self.queue_id}", count, size, log_range=(None, last + b"\x00")))
                part.fence = key_position(last)
            return True

    # ------------------------------------------------------------------ looking
    async def listing(self, part: QueuePartition, limit: int) -> list[tuple[FlowFile, bool]]:
        """The first ``limit`` queued FlowFiles in the order they would be taken, swapped ones
        included (``True``), then the penalized ones set aside."""
        async with self.lock:
            head, tail, penalized = part.memory_listing(limit)
            runs = part.runs()
            if part.key is None:
                out = [(f, False) for f in head]
                for run in runs:
                    if len(out) >= limit:
                        break
                    out += [(f, True) for f in await self._peek(run, limit - len(out))]
                out += [(f, False) for f in tail[: max(0, limit - len(out))]]
            else:
                key = part.key
                cands = [(key(f), f, False) for f in head]
                for run in runs:
                    if len(cands) >= limit and run.key and run.key > cands[limit - 1][0]:
                        break
                    cands += [(key(f), f, True) for f in await self._peek(run, limit)]
                    cands.sort(key=lambda c: c[0])
                    del cands[limit:]
                out = [(f, swapped) for _k, f, swapped in cands]
            out += [(f, False) for f in penalized]
            return out[:limit]

    async def _peek(self, run: SwapRun, n: int) -> list[FlowFile]:
        if run.in_log:
            flowfiles, _more = await self.registry.page(self.queue_id, run.start, run.stop, max(1, n))
            return [f for f in flowfiles if f.uuid not in self.queue.local.early]
        if not run.from_log:
            try:
                def read() -> list[FlowFile]:
                    with swapfile.SwapFileReader(self.directory / run.location, run.offset, run.index) as r:
                        return r.read(n)
                return await asyncio.to_thread(read)
            except (SwapFileError, OSError):
                pass
        if not run.registered:
            return []
        flowfiles = await self.registry.swapped(run.location)
        return sorted(flowfiles, key=self._key)[:n]

    def status(self) -> dict:
        return {"swap_files_written": self.files_out, "swap_files_read": self.files_in,
                "swapped_out_total": self.flowfiles_out, "swapped_in_total": self.flowfiles_in,
                "swap_errors": list(self.errors)}
