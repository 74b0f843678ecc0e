"""Queue ordering, swapping and recovery rules, driven in-process over the real write-ahead log and
real swap files (``Swapper`` with a ``LocalSwapRegistry``). The same code runs inside the queue
actor; tests/test_queue_actor.py repeats the essential cases on real Ray."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from queue_helpers import expected_order, make

from flowactors.engine.queues.connection import ConnectionQueue, LocalSwapRegistry, QueueConfig, Swapper, prioritizer_key
from repositories.flowfile import SWAP_QUEUE_PREFIX, WriteAheadFlowFileRepository
from repositories.flowfile.swapfile import swap_directory
from repositories.model import FlowFile, QueuedFlowFile, now_millis

PRIORITIZERS = [(), ("FIFO",), ("OldestFlowFileFirst",), ("NewestFlowFileFirst",), ("PriorityAttribute",),
                ("PriorityAttribute", "NewestFlowFileFirst")]


class Harness:
    """A queue with swapping over a real log and swap directory in ``tmp_path``."""

    def __init__(self, tmp_path: Path, prioritizers=(), threshold=100, batch=50, expiration_ms=0, wal=None):
        self.root = tmp_path
        self.wal = wal or WriteAheadFlowFileRepository(tmp_path / "flowfile")
        self.config = QueueConfig("q", back_pressure_objects=0, prioritizers=tuple(prioritizers),
                                  swap_threshold=threshold, swap_batch_size=batch, expiration_ms=expiration_ms)
        self.queue = ConnectionQueue(self.config, swapping=True)
        self.swapper = Swapper(self.queue, swap_directory(tmp_path), LocalSwapRegistry(self.wal))
        self.part = self.queue.local

    def commit(self, flowfiles):
        self.wal.commit([QueuedFlowFile(f, "q") for f in flowfiles], [])

    async def offer(self, flowfiles):
        self.queue.offer(flowfiles)
        await self.swapper.hold_memory()
        await self.swapper.maintain()

    async def take(self, n):
        taken, expired = await self.swapper.poll(n)
        self.queue.acknowledge([f.uuid for f in taken + expired])
        await self.swapper.maintain()
        return taken, expired

    async def drain(self, n=37):
        out = []
        while self.queue.count:
            taken, expired = await self.take(n)
            assert taken or expired, "the queue holds FlowFiles but gave none"
            out += taken
        return out

    def swap_files_on_disk(self):
        return sorted(p.name for p in swap_directory(self.root).glob("*.swap"))


@pytest.mark.parametrize("prioritizers", PRIORITIZERS, ids=lambda p: "+".join(p) or "none")
def test_every_poll_returns_the_next_in_order_while_swapping_out_and_in(tmp_path, prioritizers):
    """Random offers and polls against a model of the queue: each poll must give exactly the first
    FlowFiles of everything queued, in memory or swapped; memory stays near threshold + batch."""
    rng = random.Random(7)
    h = Harness(tmp_path, prioritizers)
    flowfiles = make(1500, rng)
    h.commit(flowfiles)
    arrivals = list(flowfiles)
    rng.shuffle(arrivals)
    fifo = not any(p != "FIFO" for p in prioritizers)
    queued: list[FlowFile] = []
    peak = 0

    async def scenario():
        nonlocal queued, peak
        i = 0
        while i < len(arrivals) or queued:
            if i < len(arrivals) and rng.random() < 0.6:
                batch = arrivals[i:i + rng.randint(1, 60)]
                i += len(batch)
                await h.offer(batch)
                queued += batch
            else:
                k = rng.randint(1, 80)
                taken, _ = await h.take(k)
                expected = (queued if fifo else expected_order(prioritizers, queued))[:min(k, len(queued))]
                assert [f.uuid for f in taken] == [f.uuid for f in expected]
                gone = {f.uuid for f in taken}
                queued = [f for f in queued if f.uuid not in gone]
            assert h.queue.count == len(queued)
            peak = max(peak, h.part.memory)

    asyncio.run(scenario())
    status = h.swapper.status()
    assert status["swap_files_written"] >= 10 and status["swap_files_read"] == status["swap_files_written"]
    assert peak <= 100 + 2 * 50 + 60  # threshold + two batches + one offer
    assert h.wal.swap_files() == [] and h.swap_files_on_disk() == []
    assert h.wal.queue_counts() == {"q": 1500}  # every record back in its queue, none lost or doubled


@pytest.mark.parametrize("prioritizers", [("PriorityAttribute",), ("NewestFlowFileFirst",),
                                          ("OldestFlowFileFirst", "PriorityAttribute")], ids=lambda p: "+".join(p))
def test_deep_queue_with_overlapping_runs_drains_in_exact_order_within_bounded_memory(tmp_path, prioritizers):
    """~100 swap files whose priorities all overlap: the merge reads them a few entries at a time."""
    rng = random.Random(3)
    h = Harness(tmp_path, prioritizers)
    flowfiles = make(5000, rng)
    h.commit(flowfiles)
    rng.shuffle(flowfiles)

    async def scenario():
        for i in range(0, len(flowfiles), 100):
            await h.offer(flowfiles[i:i + 100])
        assert h.part.run_count >= 90 and h.part.memory <= 100 + 50
        written = h.swapper.files_out
        out = await h.drain()
        return out, h.swapper.files_out - written

    out, rewritten = asyncio.run(scenario())
    assert [f.uuid for f in out] == [f.uuid for f in expected_order(prioritizers, flowfiles)]
    assert rewritten < 60  # runs read in chunks: little is swapped out a second time
    assert h.wal.swap_files() == [] and h.swap_files_on_disk() == []


def test_swapped_flowfiles_sit_under_swap_queues_in_the_log_and_come_back(tmp_path):
    h = Harness(tmp_path, threshold=100, batch=50)
    flowfiles = make(400, random.Random(1))
    h.commit(flowfiles)

    async def scenario():
        await h.offer(flowfiles)
        counts = h.wal.queue_counts()
        swapped = {q: n for q, n in counts.items() if q.startswith(SWAP_QUEUE_PREFIX)}
        assert sum(swapped.values()) == h.part.swapped == 400 - h.part.memory
        assert counts["q"] == h.part.memory
        assert len(h.wal.swap_files()) == len(swapped) == len(h.swap_files_on_disk())
        status = h.queue.status()
        assert status["count"] == 400 and status["swapped"] + status["in_memory"] == 400
        assert status["bytes"] == sum(f.size for f in flowfiles)
        return await h.drain()

    assert asyncio.run(scenario()) == flowfiles
    assert h.wal.queue_counts() == {"q": 400}


def test_penalized_flowfiles_are_skipped_without_blocking_the_others(tmp_path):
    h = Harness(tmp_path, threshold=20, batch=10)
    later = now_millis() + 600
    flowfiles = make(60, random.Random(2))
    flowfiles = [f._replace(penalized_until=later) if i < 5 else f for i, f in enumerate(flowfiles)]
    h.commit(flowfiles)

    async def scenario():
        await h.offer(flowfiles)
        first, _ = await h.take(100)
        assert [f.uuid for f in first] == [f.uuid for f in flowfiles[5:]]
        assert h.queue.status()["penalized"] == 5
        assert await h.take(100) == ([], [])
        await asyncio.sleep(0.7)
        back, _ = await h.take(100)
        assert [f.uuid for f in back] == [f.uuid for f in flowfiles[:5]]
        assert all(f.penalized_until == 0 for f in back)

    asyncio.run(scenario())


def test_expired_flowfiles_come_back_separately(tmp_path):
    h = Harness(tmp_path, threshold=20, batch=10, expiration_ms=60_000)
    fresh = make(30, random.Random(4))
    now = now_millis()
    fresh = [f._replace(entry_date=now) for f in fresh]
    old = [f._replace(entry_date=now - 120_000) for f in fresh[::3]]
    flowfiles = [old[i // 3] if i % 3 == 0 else f for i, f in enumerate(fresh)]
    h.commit(flowfiles)

    async def scenario():
        await h.offer(flowfiles)
        taken, expired = [], []
        while h.queue.count:
            t, e = await h.take(7)
            taken += t
            expired += e
        return taken, expired

    taken, expired = asyncio.run(scenario())
    assert [f.uuid for f in expired] == [f.uuid for f in old]
    assert len(taken) == 20


def test_a_damaged_swap_file_is_set_aside_and_its_flowfiles_read_from_the_log(tmp_path):
    h = Harness(tmp_path, threshold=100, batch=50)
    flowfiles = make(300, random.Random(5))
    h.commit(flowfiles)

    async def scenario():
        await h.offer(flowfiles)
        files = h.swap_files_on_disk()
        assert len(files) >= 2
        damaged = swap_directory(tmp_path) / files[1]
        raw = bytearray(damaged.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        damaged.write_bytes(bytes(raw))
        out = await h.drain()
        return damaged, out

    damaged, out = asyncio.run(scenario())
    assert out == flowfiles  # nothing lost, FIFO order kept
    errors = h.swapper.status()["swap_errors"]
    assert len(errors) == 1 and str(damaged) in errors[0] and "Read its 50 FlowFiles from the FlowFile repository" in errors[0]
    assert damaged.with_name(damaged.name + ".corrupt").exists()
    assert h.wal.swap_files() == [] and h.wal.queue_counts() == {"q": 300}


@pytest.mark.parametrize("prioritizers", [(), ("PriorityAttribute",)], ids=["fifo", "priority"])
def test_start_up_adopts_swap_files_and_reads_unusable_ones_from_the_log(tmp_path, prioritizers):
    """What recovery does after a crash: swap files stay on disk, counted. One file is missing, one
    truncated, and one holds a FlowFile that an ordinary commit removed from the log meanwhile:
    all three are read from the log (the removed FlowFile does not come back); order holds."""
    rng = random.Random(6)
    first = Harness(tmp_path, prioritizers)
    flowfiles = make(600, rng)
    first.commit(flowfiles)
    asyncio.run(first.offer(flowfiles))
    entries = first.wal.swap_files()
    assert len(entries) >= 8
    (swap_directory(tmp_path) / entries[2]["location"]).unlink()
    damaged = swap_directory(tmp_path) / entries[4]["location"]
    damaged.write_bytes(damaged.read_bytes()[:-100])
    removed = next(iter(first.wal.iter_queue(SWAP_QUEUE_PREFIX + entries[6]["location"])))[0]
    first.wal.commit([], [removed.uuid])
    flowfiles = [f for f in flowfiles if f.uuid != removed.uuid]
    sizes = first.wal.queue_sizes()

    h = Harness(tmp_path, prioritizers, wal=first.wal)  # a new queue: nothing in memory

    async def scenario():
        report = await h.swapper.adopt(h.part, [
            {**e, "remaining": sizes[SWAP_QUEUE_PREFIX + e["location"]][0],
             "remaining_size": sizes[SWAP_QUEUE_PREFIX + e["location"]][1]} for e in entries])
        assert report == {"swap_files": len(entries), "from_log": 2, "empty": 0}  # missing, count differs
        assert h.queue.count == sum(e["count"] for e in entries) - 1
        for batch in h.wal.recover(64):
            h.queue.restore(batch[1])
        assert h.queue.count == 599
        return await h.drain()

    out = asyncio.run(scenario())
    expected = flowfiles if not prioritizers else expected_order(prioritizers, flowfiles)
    assert [f.uuid for f in out] == [f.uuid for f in expected]
    assert h.wal.swap_files() == [] and h.swap_files_on_disk() == []
    assert any(str(damaged) in e for e in h.swapper.status()["swap_errors"])  # found when its turn came


def test_without_swapping_the_queue_keeps_everything_in_memory(tmp_path):
    queue = ConnectionQueue(QueueConfig("q", 0, 0, swap_threshold=10, swap_batch_size=5))
    flowfiles = make(100, random.Random(8))
    queue.offer(flowfiles)
    assert queue.local.memory == 100 and not queue.local.needs_spill()
    taken, _ = queue.poll(1000)
    assert taken == flowfiles


def test_unknown_prioritizer_is_refused():
    with pytest.raises(ValueError, match="unknown prioritizer"):
        ConnectionQueue(QueueConfig("q", prioritizers=("Fastest",)))
    with pytest.raises(ValueError, match="unknown prioritizer"):
        prioritizer_key(["Fastest"])


def test_a_run_damaged_after_its_first_read_comes_back_at_the_next_start(tmp_path):
    """The one case the swap registry cannot cover: a prioritized run read in chunks is already
    unregistered when its file is damaged. Its unread FlowFiles stay in the log under the queue,
    the status says so, and a restart restores them."""
    rng = random.Random(9)
    h = Harness(tmp_path, ("NewestFlowFileFirst",), threshold=100, batch=100)
    flowfiles = make(2000, rng)
    h.commit(flowfiles)

    async def take_and_commit(n):
        taken, _ = await h.take(n)
        h.wal.commit([], [f.uuid for f in taken])  # what the consuming processor's commit does
        return taken

    async def scenario():
        for i in range(0, len(flowfiles), 100):  # runs that overlap: read in chunks when memory is full
            await h.offer(flowfiles[i:i + 100])
        out = []
        detached = []
        while not detached and h.queue.count:
            out += await take_and_commit(5)
            detached = [r for r in h.part.runs() if not r.registered and r.remaining > 1]
        assert detached, "no run was read in chunks"
        path = swap_directory(tmp_path) / detached[0].location
        path.write_bytes(path.read_bytes()[:-10])
        while h.queue.count:
            out += await take_and_commit(50)
        return out, detached[0]

    out, run = asyncio.run(scenario())
    got = {f.uuid for f in out}  # what did come out came out in order
    assert [f.uuid for f in out] == [f.uuid for f in expected_order(("NewestFlowFileFirst",), flowfiles) if f.uuid in got]
    assert len(out) < 2000 and len({f.uuid for f in out}) == len(out)
    errors = h.swapper.status()["swap_errors"]
    assert any(run.location in e and "come back at the next start" in e for e in errors)
    lost = 2000 - len(out)
    restarted = Harness(tmp_path, ("NewestFlowFileFirst",), wal=h.wal)
    for _queue, batch in h.wal.recover(100):
        restarted.queue.restore(batch)
    assert restarted.queue.count == lost
    back = asyncio.run(restarted.drain())
    assert {f.uuid for f in back} | {f.uuid for f in out} == {f.uuid for f in flowfiles}


def test_a_fifo_queue_takes_over_its_log_and_pages_it_in_within_bounded_memory(tmp_path):
    """A restart with 3,000 FlowFiles in the log and no swap file: the queue reads none of them at
    once, counts them all, then hands them out in the log's order a batch at a time; arrivals after
    the restart come behind them, and one whose clock stepped back (its FIFO position falls inside
    the log's range) comes out once, not twice."""
    rng = random.Random(21)
    first = Harness(tmp_path, threshold=100, batch=50)
    flowfiles = make(3000, rng)
    first.commit(flowfiles)
    h = Harness(tmp_path, threshold=100, batch=50, wal=first.wal)
    count, size = h.wal.queue_sizes()["q"]
    arrivals = make(20, rng, start=3001)
    early = make(1, rng, start=5000)[0]._replace(queue_date=flowfiles[0].queue_date - 10**7)

    async def scenario():
        assert await h.swapper.adopt_log(h.part, count, size)
        assert (h.queue.count, h.queue.size, h.part.memory) == (3000, sum(f.size for f in flowfiles), 0)
        h.commit(arrivals + [early])
        await h.offer(arrivals + [early])
        out, peak = [], 0
        while h.queue.count:
            taken, _expired = await h.take(37)
            assert taken, "the queue holds FlowFiles but gave none"
            out += taken
            peak = max(peak, h.part.memory)
        return out, peak

    out, peak = asyncio.run(scenario())
    assert [f.uuid for f in out] == [f.uuid for f in flowfiles + arrivals + [early]]
    assert peak <= 100 + 2 * 50
    assert h.part.fence is None and h.part.early == set()  # the log runs are done
