"""Benchmarks against baselines: ``make bench`` (``python -m bench``) writes bench/RESULTS.md.

Every scenario module exports ``run(quick: bool, workdir: Path) -> list[dict]`` (mine also take
``size=`` to shrink a run for smoke tests). A row says what flowactors did, what a baseline
measured *in the same run* did, and their ratio: absolute figures drift on shared machines, the
ratios are what we track. This module holds what the scenarios share: the row, the samplers (RSS,
busy cores, CPU by process), a Ray session of the scenario's own, and ``retire`` for a run's
directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import time
import uuid
from numbers import Real
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from flowactors.engine.periodic import Periodic
from flowactors.sdk.settings import Settings

ROW_KEYS = ("scenario", "metric", "flowactors", "baseline", "baseline_name", "unit", "ratio", "notes")
NOT_BUILT = "not built"


def row(scenario: str, metric: str, flowactors: Any, baseline: Any, baseline_name: str, unit: str,
        notes: str = "", **extra: Any) -> dict:
    """One result row; ``ratio`` is flowactors / baseline when both are numbers (else None)."""
    ratio = None
    if isinstance(flowactors, Real) and isinstance(baseline, Real) and baseline:
        ratio = flowactors / baseline
    return {"scenario": scenario, "metric": metric, "flowactors": flowactors, "baseline": baseline,
            "baseline_name": baseline_name, "unit": unit, "ratio": ratio, "notes": notes, **extra}


def not_built(scenario: str, notes: str = "") -> dict:
    """The row of a scenario whose feature is not built yet (the issue that builds it fills it in)."""
    return row(scenario, NOT_BUILT, NOT_BUILT, None, "", "", notes)


def _tree_sum(root: psutil.Process, measure) -> int:
    """``measure(process)`` summed over ``root`` and all its descendants (one that exits between
    listing and reading counts 0)."""
    total = 0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for process in processes:
        try:
            total += measure(process)
        except psutil.Error:
            pass
    return total


def cpu_seconds(process: psutil.Process) -> float:
    """The CPU time ``process`` has used so far, user + system, every thread."""
    times = process.cpu_times()
    return times.user + times.system


def process_tree_rss(root: psutil.Process) -> int:
    """Resident bytes of ``root`` and all its descendants (shared pages count once per process)."""
    return _tree_sum(root, lambda p: p.memory_info().rss)


def process_tree_pss(root: psutil.Process) -> int:
    """Proportional set size of ``root`` and all its descendants: each shared page counted once in
    all (split among the processes sharing it), so the sum is the memory they use together."""
    return _tree_sum(root, lambda p: p.memory_full_info().pss)


class Sampler:
    """Calls ``_sample()`` on entering, every ``interval`` seconds on a thread (``Periodic``) and
    on leaving the ``with`` block: what the bench's samplers share."""

    name = "sampler"

    def __init__(self, interval: float):
        self._sampler = Periodic(self.name, interval, self._sample, self._failed)

    def _sample(self) -> None:
        raise NotImplementedError

    def _failed(self, err: Exception) -> None:
        print(f"    {self.name}: a sample failed ({type(err).__name__}: {err}); sampling goes on", flush=True)

    def __enter__(self):
        self._sample()
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sampler.stop()
        self._sample()


class PeakRss(Sampler):
    """Samples the summed RSS of this process and its descendants every ``interval`` s in a thread.

    A Ray session started here (``ray_session``) has all its processes - GCS, raylet, workers,
    actors - below this process, so the sum is "all Ray processes together" plus this driver.
    """

    name = "peak-rss"

    def __init__(self, interval: float = 0.2):
        super().__init__(interval)
        self.peak = 0
        self.first = 0
        self.samples = 0
        self._root = psutil.Process(os.getpid())

    def _sample(self) -> None:
        value = process_tree_rss(self._root)
        if not self.samples:
            self.first = value
        self.samples += 1
        self.peak = max(self.peak, value)


def named_actor_pids(prefix: str) -> dict[str, int]:
    """The process id of each named actor of the current Ray session whose name starts with
    ``prefix`` (a flow's ``"<name>."``), by its name without it: a flow run before in the same
    session may still be taking its actors down."""
    import ray

    return {name.removeprefix(prefix): ray.get(ray.get_actor(name).__ray_call__.remote(lambda self: os.getpid()))
            for name in ray.util.list_named_actors() if name.startswith(prefix)}


@contextlib.contextmanager
def ray_session(**options: Any) -> Iterator[Any]:
    """A new local Ray of this process's own (never someone else's cluster), shut down after."""
    import ray

    from flowactors.driver.running import start_local_ray

    start_local_ray(**{"log_to_driver": False, "configure_logging": False, **options})
    try:
        yield ray
    finally:
        ray.shutdown()


def median_run(runs: list[dict]) -> tuple[dict, str]:
    """Of timed runs (dicts with ``flowfiles_per_s``): the run with the median rate, carrying the
    ``problems`` of every run, and every run's rate ("a / b / c", slowest first) for a row's notes."""
    ordered = sorted(runs, key=lambda run: run["flowfiles_per_s"])
    median = {**ordered[len(ordered) // 2], "problems": [p for run in runs for p in run.get("problems", ())]}
    return median, " / ".join(f"{run['flowfiles_per_s']:,.0f}" for run in ordered)


class StolenTime:
    """The share of the machine's CPU time the hypervisor gave to others (``steal`` in
    ``/proc/stat``) between entering and leaving, in % (None where there is no ``/proc/stat``).

    On the shared 2-core VMs the bench runs on it swings from 0 to 30 % within minutes and a run
    meeting it is that much slower, whichever side it measures: scenario 1 notes it for every
    timed run so that a ratio can be read against the state each side met."""

    def __init__(self) -> None:
        self.percent: float | None = None
        self._start: list[int] | None = None

    @staticmethod
    def _read() -> list[int] | None:
        try:
            with open("/proc/stat") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        return [int(v) for v in fields[1:9]] if fields and fields[0] == "cpu" and len(fields) >= 9 else None

    def __enter__(self) -> "StolenTime":
        self._start = self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._read()
        if self._start is None or end is None:
            return
        spent = [b - a for a, b in zip(self._start, end)]
        self.percent = 100.0 * spent[7] / sum(spent) if sum(spent) > 0 else 0.0


class BusyCores(Sampler):
    """How many of the machine's cores were busy (not idle, not waiting for I/O, not stolen) over
    a stretch of wall-clock time inside the ``with`` block: ``/proc/stat`` sampled every
    ``interval`` seconds on a thread. A flow's own window (from its provenance) is where the
    question "could another task have used an idle core?" is answered; ``between`` gives it."""

    name = "busy-cores"

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(interval)
        self.samples: list[tuple[float, int, int]] = []  # (time.time(), busy ticks, all ticks)

    def _sample(self) -> None:
        fields = StolenTime._read()
        if fields is not None:
            busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
            self.samples.append((time.time(), busy, sum(fields)))

    def between(self, start: float, end: float) -> float | None:
        """Busy cores on average from ``start`` to ``end`` (``time.time()`` seconds); None when
        fewer than two samples fall inside."""
        edges = _edges(self.samples, start, end)
        if edges is None or edges[1][2] == edges[0][2]:
            return None
        (_, busy0, all0), (_, busy1, all1) = edges
        return (os.cpu_count() or 1) * (busy1 - busy0) / (all1 - all0)


def _edges(samples: list[tuple], start: float, end: float) -> tuple[tuple, tuple] | None:
    """The first and the last of ``samples`` (each starting with its ``time.time()``) taken from
    ``start`` to ``end``; None when fewer than two were."""
    inside = [s for s in samples if start <= s[0] <= end]
    return (inside[0], inside[-1]) if len(inside) >= 2 else None


class ProcessCpu(Sampler):
    """The CPU time (user + system, every thread: native code too, which ``py-spy --gil`` does
    not see) of each process below this one, sampled every ``interval`` seconds: how busy each
    Ray process was over a flow's window, so a process that sets the pace shows. A sample costs
    this process about 2 ms (listing the process tree), none of the processes it measures."""

    name = "process-cpu"

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(interval)
        self.samples: list[tuple[float, dict[int, float]]] = []  # (time.time(), {pid: CPU seconds})
        self._root = psutil.Process(os.getpid())

    def _sample(self) -> None:
        cpu = {}
        for process in self._root.children(recursive=True):
            try:
                cpu[process.pid] = cpu_seconds(process)
            except psutil.Error:
                continue
        self.samples.append((time.time(), cpu))

    def between(self, start: float, end: float) -> tuple[float, dict[int, float]] | None:
        """``(seconds, {pid: CPU seconds})`` from the first to the last sample taken between
        ``start`` and ``end`` (``time.time()`` seconds); None when fewer than two were."""
        edges = _edges(self.samples, start, end)
        if edges is None:
            return None
        (began, first), (ended, last) = edges
        return ended - began, {pid: cpu - first.get(pid, 0.0) for pid, cpu in last.items()}


def with_steal(measure: Callable[[], dict]) -> dict:
    """``measure()``'s result with the steal it met (``steal_percent``, ``StolenTime``)."""
    with StolenTime() as steal:
        result = measure()
    return {**result, "steal_percent": steal.percent}


def each_run(runs: list[dict], key: str, spec: str, unit: str) -> str:
    """One value of each run (``run[key]``), "a / b / c<unit>" in their order; "not measured" when
    a run lacks it (no ``/proc/stat`` here)."""
    values = [run.get(key) for run in runs]
    if any(v is None for v in values):
        return "not measured"
    return " / ".join(format(v, spec) for v in values) + unit


def stolen(runs: list[dict]) -> str:
    """The steal each of these runs met (``steal_percent``), "a / b / c %" in their order."""
    return each_run(runs, "steal_percent", ".0f", " %")


def mib(nbytes: float) -> float:
    return nbytes / 1024**2


def run_scenario(module: str, function: str, quick: bool, workdir: str, size: int | None) -> list[dict]:
    """Import and run one scenario (in the child process the harness gives every scenario)."""
    import importlib
    import inspect
    from pathlib import Path

    target = getattr(importlib.import_module(module), function)
    options = {}
    if size is not None and "size" in inspect.signature(target).parameters:
        options["size"] = size
    return target(quick, Path(workdir), **options)


def retire(path: Path) -> None:
    """Set a finished flow run's directory aside (renamed to a hidden sibling) instead of deleting
    its thousands of claim files; ``python -m bench`` deletes its whole scratch folder after the
    last scenario. Directories of a few files (a bare loop's, an LMDB environment) are deleted.

    On this machine's file system (ext4 without a journal) a file created within minutes of
    thousands of deletions costs several times as much: the inode allocator skips recently
    deleted inodes one by one, so deleting one run's claim files would tax the next run's
    (24-31 µs a claim file against 93-182 µs right after deleting earlier runs: the decision
    table of docs/performance.md)."""
    path = Path(path)
    if not path.exists():
        return
    try:
        path.rename(path.with_name(f".retired-{path.name}-{uuid.uuid4().hex[:8]}"))
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


#: files the claim-file probe creates, each as large as a claim file with the default settings
PROBE_FILES = 200
PROBE_BYTES = Settings.model_fields["max_appendable_claim_size"].default


def claim_file_cost(workdir: Path) -> float:
    """What creating, writing and closing one claim-sized file costs in ``workdir`` now, in µs
    (the median of ``PROBE_FILES``).

    A flow makes one claim file for every ``PROBE_BYTES`` of content and the baselines make none,
    so this cost is in the flow's side of every ratio, and on this machine it swings several-fold
    with what was deleted in the minutes before (``retire``): scenario 1 notes it beside its
    ratios. The probe's own files are set aside like a run's, not deleted."""
    directory = Path(workdir) / f"claim-probe-{uuid.uuid4().hex[:8]}"
    directory.mkdir(parents=True)
    data = bytes(PROBE_BYTES)
    times = []
    for i in range(PROBE_FILES):
        started = time.perf_counter()
        fd = os.open(directory / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        times.append(time.perf_counter() - started)
    retire(directory)
    return statistics.median(times) * 1e6
