"""Scenario 4: a deep queue. 10 million FlowFiles (quick: 200,000) queued in one real queue actor.

The FlowFiles are committed to a real write-ahead log (10,000 a commit, by this process, as the
processors would) and offered to one ``QueueActor`` in batches of 10,000 per call; the actor swaps
everything past 20,000 FlowFiles out to swap files (batches of 10,000), registering each file with
the real ``FlowFileRepositoryActor``. Then the queue is drained completely (poll 10,000 and
acknowledge), checking that every FlowFile comes out exactly once and in FIFO order.

Measured:

* the queue actor's peak resident memory (``VmHWM`` of its process, and the largest RSS sample;
  also the RSS with everything queued), against the 300 MB target;
* enqueue and dequeue rates at 10 thousand, 1 million and 10 million queued (quick: 10 k, 100 k,
  200 k) over a window of 100,000 FlowFiles ending (enqueue) or starting (dequeue) at that depth:
  the rate a producer or consumer sees (FlowFiles per second of actor-call time), and the queue
  actor's own capacity (FlowFiles per second of its CPU time from one call to the next, so the
  swapping it does in the background between calls is included);
* the baseline for the rates: a plain ``collections.deque`` in one process doing the same
  enqueue (``extend`` of each batch) and dequeue (10,000 ``popleft``) at the same depths.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psutil

from bench import Sampler, cpu_seconds, mib, ray_session, row
from flowactors.engine.queues.connection import QueueActor, QueueConfig
from flowactors.engine.actors.repository_actors import FlowFileRepositoryActor
from flowactors.engine.transport import ActorLink
from flowactors.sdk.settings import Settings
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, ResourceClaim, new_flowfile_uuid, now_millis

S4 = "4 deep queue"
BATCH = 10_000
WINDOW = 100_000
PER_CLAIM = 100
QUEUE = "deep"
TARGET_MB = 300


def flowfiles(first: int, count: int) -> list[FlowFile]:
    """FlowFiles ``first .. first+count-1``: 1 KiB of content each, 100 to a resource claim."""
    now = now_millis()
    out = []
    claim = None
    for i in range(first, first + count):
        if claim is None or i % PER_CLAIM == 0:
            claim = ResourceClaim("default", str((i // PER_CLAIM) % 1024), f"bench-{i // PER_CLAIM}")
        uuid = new_flowfile_uuid()
        attributes = {"filename": f"file-{i}.dat", "path": "./", "uuid": uuid}
        out.append(FlowFile(i, uuid, attributes, ContentClaim(claim, (i % PER_CLAIM) * 1024, 1024),
                            now, now, 0, now, i))
    return out


class ActorMemory(Sampler):
    """Samples the RSS of one process in a thread; ``peak`` is the largest sample."""

    name = "actor-rss"

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(interval)
        self.process = psutil.Process(pid)
        self.peak = 0

    def sample(self) -> int:
        rss = self.process.memory_info().rss
        self.peak = max(self.peak, rss)
        return rss

    _sample = sample

    def high_water_mark(self) -> int:
        """The kernel's peak RSS of the process (``VmHWM``), which no sampling can miss."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    def cpu(self) -> float:
        return cpu_seconds(self.process)


class Windows:
    """Per-batch timings, summed over the windows that end (or start) at each measured depth."""

    def __init__(self, depths: list[int], window: int, ending: bool):
        self.spans = {d: ((max(0, d - window), d) if ending else (d - window, d)) for d in depths}
        self.ending = ending
        self.totals = {d: [0, 0.0, 0.0] for d in depths}  # FlowFiles, call seconds, actor CPU seconds

    def add(self, depth_before: int, depth_after: int, n: int, seconds: float, cpu: float) -> None:
        for d, (low, high) in self.spans.items():
            inside = low <= depth_before < high if self.ending else low < depth_before <= high
            if inside:
                t = self.totals[d]
                t[0] += n
                t[1] += seconds
                t[2] += cpu

    def rates(self, depth: int) -> tuple[float, float]:
        n, seconds, cpu = self.totals[depth]
        return n / seconds if seconds else 0.0, n / cpu if cpu else 0.0


def baseline_rates(total: int, depths: list[int], window: int) -> dict[str, dict[int, float]]:
    """A plain deque in this process: the same batches extended in, then popped 10,000 at a time.

    The batch objects are reused (references are what a deque holds), so 10 million entries cost
    80 MB here rather than the 10 GB of 10 million distinct FlowFiles."""
    from collections import deque

    batch = flowfiles(0, BATCH)
    queue: deque = deque()
    enq = Windows(depths, window, ending=True)
    deq = Windows(depths, window, ending=False)
    for depth in range(0, total, BATCH):
        t0 = time.perf_counter()
        queue.extend(batch)
        enq.add(depth, depth + BATCH, BATCH, time.perf_counter() - t0, 0.0)
    depth = len(queue)
    popleft = queue.popleft
    while depth:
        t0 = time.perf_counter()
        taken = [popleft() for _ in range(min(BATCH, depth))]
        deq.add(depth, depth - len(taken), len(taken), time.perf_counter() - t0, 0.0)
        depth -= len(taken)
    return {"enqueue": {d: enq.rates(d)[0] for d in depths}, "dequeue": {d: deq.rates(d)[0] for d in depths}}


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k"


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    total = size or (200_000 if quick else 10_000_000)
    total -= total % BATCH
    depths = sorted({min(10_000, total), total // 2 if quick or size else min(1_000_000, total), total})
    window = min(WINDOW, max(BATCH, total // 10))
    root = Path(workdir) / "deep-queue"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    settings = Settings()
    try:
        with ray_session(num_cpus=2) as ray:
            measured = _measure(ray, root, settings, total, depths, window)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    baseline = baseline_rates(total, depths, window)
    return _rows(measured, baseline, total, depths, window, settings)


def _measure(ray, root: Path, settings: Settings, total: int, depths: list[int], window: int) -> dict:
    repository = FlowFileRepositoryActor.remote(str(root), settings)
    ray.get(repository.open.remote())
    config = QueueConfig(QUEUE, back_pressure_objects=0, back_pressure_bytes=0,
                         swap_threshold=settings.swap_threshold, swap_batch_size=settings.swap_batch_size)
    queue = QueueActor.remote(config, str(root), ActorLink(repository))
    log = WriteAheadFlowFileRepository.from_settings(root, settings)  # this process plays the producers
    enq = Windows(depths, window, ending=True)
    deq = Windows(depths, window, ending=False)
    started = time.perf_counter()
    try:
        memory = ActorMemory(ray.get(queue.pid.remote()))
        with memory:
            baseline_rss = memory.sample()
            previous = None  # the actor's CPU from one call to the next: background swap-outs included
            for first in range(0, total, BATCH):
                batch = flowfiles(first, BATCH)
                log.commit([QueuedFlowFile(f, QUEUE) for f in batch], [])
                cpu0 = memory.cpu()
                if previous is not None:
                    enq.add(*previous[:4], cpu0 - previous[4])
                t0 = time.perf_counter()
                ray.get(queue.offer.remote(batch))
                previous = (first, first + BATCH, BATCH, time.perf_counter() - t0, cpu0)
            status = ray.get(queue.settle.remote())
            enq.add(*previous[:4], memory.cpu() - previous[4])
            filled = time.perf_counter() - started
            full_rss = memory.sample()
            assert status["count"] == total, status

            expected = 0
            depth = total
            drain_started = time.perf_counter()
            previous = None
            while depth:
                cpu0 = memory.cpu()
                if previous is not None:
                    deq.add(*previous[:4], cpu0 - previous[4])
                t0 = time.perf_counter()
                taken, expired = ray.get(queue.poll.remote(BATCH))
                ray.get(queue.acknowledge.remote([f.uuid for f in taken]))
                previous = (depth, depth - len(taken), len(taken), time.perf_counter() - t0, cpu0)
                if expired or not taken:
                    raise AssertionError(f"the queue gave {len(taken)} FlowFiles and {len(expired)} expired "
                                         f"with {depth} still queued")
                for f in taken:  # FIFO: ids come out consecutive, so none is lost, doubled or out of order
                    if f.id != expected:
                        raise AssertionError(f"FlowFile id {f.id} came out where {expected} was due")
                    expected += 1
                depth -= len(taken)
            deq.add(*previous[:4], memory.cpu() - previous[4])
            drained = time.perf_counter() - drain_started
            final = ray.get(queue.status.remote())
            hwm = memory.high_water_mark()
        swap_files_left = ray.get(repository.swap_files.remote())
        assert final["count"] == 0 and not swap_files_left and not list((root / "flowfile" / "swap").glob("*.swap"))
    finally:
        log.close()
        ray.kill(queue)
        ray.get(repository.close.remote())
        ray.kill(repository)
    return {"enqueue": enq, "dequeue": deq, "peak_rss": max(hwm, memory.peak), "sampled_peak": memory.peak,
            "hwm": hwm, "baseline_rss": baseline_rss, "full_rss": full_rss, "status": status, "final": final,
            "drained": expected, "fill_seconds": filled, "drain_seconds": drained}


def _rows(m: dict, baseline: dict, total: int, depths: list[int], window: int, settings: Settings) -> list[dict]:
    status, final = m["status"], m["final"]
    swap_note = (f"swap threshold {settings.swap_threshold:,}, batches of {settings.swap_batch_size:,}; "
                 f"{final['swap_files_written']} swap files written and read back")
    rows = [
        row(S4, f"queue actor peak RSS, {label(total)} FlowFiles queued", round(mib(m["peak_rss"]), 1),
            TARGET_MB, "target (issue 5)", "MiB",
            f"VmHWM of the actor's process {mib(m['hwm']):.1f} MiB (largest 0.1 s sample "
            f"{mib(m['sampled_peak']):.1f}); RSS at start {mib(m['baseline_rss']):.1f} MiB, with all "
            f"{total:,} queued {mib(m['full_rss']):.1f} MiB ({status['in_memory']:,} in memory, "
            f"{status['swapped']:,} swapped). {swap_note}"),
        row(S4, "FlowFiles drained, each once and in FIFO order", m["drained"], total, "FlowFiles queued",
            "FlowFiles", f"filled in {m['fill_seconds']:.0f} s (including this process generating them and "
                         f"committing them to the write-ahead log), drained in {m['drain_seconds']:.0f} s"),
    ]
    for kind, windows in (("enqueue", m["enqueue"]), ("dequeue", m["dequeue"])):
        for depth in depths:
            rate, capacity = windows.rates(depth)
            side = "ending" if kind == "enqueue" else "starting"
            rows.append(row(
                S4, f"{kind} rate at {label(depth)} queued", round(rate), round(baseline[kind][depth]),
                "collections.deque in one process", "FlowFiles/s",
                f"batches of {BATCH:,} per actor call ({'offer' if kind == 'enqueue' else 'poll + acknowledge'}),"
                f" window of {min(window, depth):,} FlowFiles {side} at that depth; the queue actor's own CPU "
                f"(swapping included) allows {capacity:,.0f} FlowFiles/s"))
    return rows


if __name__ == "__main__":
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--size", type=int)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        for r in run(args.quick, Path(work), args.size):
            print(json.dumps(r))
