"""Scenarios 1 and 2: small FlowFiles through a durable flow, and how it scales.

The flow: GenerateFlowFile (1 KiB, the same content for every FlowFile) -> UpdateAttribute (one
attribute from an expression) -> RouteOnAttribute (one route on it; matched and unmatched both
auto-terminated), with the FlowFile WAL, the content repository and provenance on, run by
``flowactors.driver.running.run_flow`` on a fresh repository.

What is timed: from the creation of the first FlowFile (the smallest ``lineage_start_date`` of
the first events) to the newest provenance event (the last DROP), both read back from the
provenance repository after the run. That leaves out Ray and actor start-up, the runner's
idle detection (three looks 0.1 s apart) and the stop. Provenance events/s is the number of
events registered (max event id + 1) over the same time.

Scenario 2 also profiles: cProfile cannot follow a FlowFile across Ray actors, so the same flow
runs in one process over ``flowactors.testing.LocalBackend`` with the durable repositories (the
session, processors and repositories are the same code; only the actor calls are gone), next to
the bare loop, and the hottest functions of each are listed.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import shutil
import sys
import time
from pathlib import Path

from bench import (PROBE_BYTES, PROBE_FILES, BusyCores, PeakRss, StolenTime, claim_file_cost, each_run, median_run, mib,
                   ray_session, retire, row, stolen, with_steal)
from bench.baselines import bare_durable_flow, measure_bare_flow, ray_data_transform
from flowactors.sdk.flow import Flow
from flowactors.engine import gc_policy
from flowactors.engine.task import make_context
from flowactors.processors import GenerateFlowFile, RouteOnAttribute, UpdateAttribute
from flowactors.driver.running import processor_totals, run_flow
from flowactors.sdk.settings import flow_settings
from flowactors.engine.queues.connection import ConnectionQueue, QueueConfig
from flowactors.sdk.session import ProcessSession
from flowactors.sdk.session_contract import IdAllocator
from flowactors.testing import LocalBackend
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.provenance import WriteAheadProvenanceRepository

S1 = "1 small FlowFiles"
S2 = "2 scaling"
EDGE_EVENTS = 50_000  # events read at each end of the provenance to find the flow's time window


def small_flow(flowfiles: int, batch: int, tasks: int = 1, always_sync: bool = False, name: str = "bench-small",
               isolated: bool = False) -> Flow:
    """Scenario 1's flow; ``batch`` is GenerateFlowFile's Batch Size and every processor's batch size;
    ``isolated`` gives every task a process of its own (``placement.needs_own_actor``)."""
    flow = Flow(name, settings={"always_sync": always_sync})
    generate = flow.add(GenerateFlowFile, "generate", concurrent_tasks=tasks, isolated=isolated, properties={
        "File Size": "1 KB", "Batch Size": batch, "Max FlowFiles": flowfiles, "Unique FlowFiles": False})
    update = flow.add(UpdateAttribute, "update", concurrent_tasks=tasks, batch_size=batch, isolated=isolated,
                      properties={"size.class": "${fileSize:ge(1024):ifElse('large','small')}"})
    route = flow.add(RouteOnAttribute, "route", concurrent_tasks=tasks, batch_size=batch, isolated=isolated,
                     properties={"large": "${size.class:equals('large')}"}, auto_terminate=("large", "unmatched"))
    flow.connect(generate, update, name="generated")
    flow.connect(update, route, name="updated")
    return flow


def flow_edges(root: Path) -> tuple[int, int, int]:
    """From a repository's provenance: when its first FlowFile was created, its newest event (ms),
    and how many events it holds."""
    repo = WriteAheadProvenanceRepository(root / "provenance")
    try:
        events = repo.stats()["max_event_id"] + 1
        head = repo.events(0, min(events, EDGE_EVENTS))
        tail = repo.events(max(0, events - EDGE_EVENTS), EDGE_EVENTS)
    finally:
        repo.close()
    return min(e.lineage_start_date for e in head), max(e.timestamp for e in tail), events


def flow_window(root: Path) -> dict:
    """The flow's own time from its provenance: first FlowFile created to the newest event."""
    first, last, events = flow_edges(root)
    return {"events": events, "seconds": max(last - first, 1) / 1000.0, "first": first / 1000.0, "last": last / 1000.0}


def measure_flow(flow: Flow, flowfiles: int, root: Path, timeout: float, sample_rss: bool = False) -> dict:
    """Run ``flow`` in the current Ray session to idle; FlowFiles/s, events/s, peak RSS, checks."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with PeakRss() if sample_rss else contextlib.nullcontext() as sampler, StolenTime() as steal, BusyCores() as cores:
        final = run_flow(flow, root, timeout=timeout)
    totals = processor_totals(final)
    window = flow_window(root)
    routed = totals["route"]["flowfiles_in"]
    errors = sum(p["errors"] for p in totals.values())
    problems = []
    if routed != flowfiles:
        problems.append(f"only {routed} of {flowfiles} FlowFiles reached the end")
    if errors:
        problems.append(f"{errors} processor errors")
    if final.get("timed_out"):
        problems.append("timed out")
    retire(root)
    busy = ", ".join(f"{name} {p['task_seconds']:.1f} s" for name, p in totals.items())
    return {"flowfiles_per_s": flowfiles / window["seconds"], "events_per_s": window["events"] / window["seconds"],
            "seconds": window["seconds"], "events": window["events"], "problems": problems, "busy": busy,
            "peak_rss": sampler.peak if sampler else None, "rss_before": sampler.first if sampler else None,
            "steal_percent": steal.percent, "busy_cores": cores.between(window["first"], window["last"])}


def with_problems(notes: str, result: dict) -> str:
    """A row's ``notes`` followed by a "PROBLEM: ..." for each of ``result``'s ``problems``."""
    return "; ".join([notes, *(f"PROBLEM: {p}" for p in result["problems"])]) if result["problems"] else notes


# ---------------------------------------------------------------------------------- scenario 1
#: runs of each side of the always_sync off rows (flowactors, the bare loop, Ray Data); each row
#: compares the medians: one run of a side drifts by 15 % on these shared machines
TIMED_RUNS = 3
#: GenerateFlowFile's Batch Size and every processor's batch size in scenario 1
BATCH = 1000


def scenario_flowfiles(quick: bool, size: int | None) -> int:
    """How many FlowFiles scenario 1's flows make: ``size`` if given, else 10,000 in quick mode
    and 200,000 in full mode."""
    return size or (10_000 if quick else 200_000)


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    flowfiles = scenario_flowfiles(quick, size)
    rows = []
    claim_before = claim_file_cost(workdir)
    with ray_session():
        durable = measure_flow(small_flow(flowfiles, BATCH, always_sync=True, name="bench-small-sync"),
                               flowfiles, workdir / "sync", timeout=900, sample_rss=True)
        with PeakRss() as warm_up_rss:
            # Ray Data's first run at full size is much slower than the next ones (its workers and
            # operators warm up: 91k FlowFiles/s, then 152k-166k, in one session on this machine),
            # so one full-size run is not timed and the median of three is the baseline
            ray_data_transform(flowfiles, BATCH)
        data_peak = warm_up_rss.peak  # the highest of all Ray Data's runs, the warm-up's included
        # the two sides' runs alternate, so that a minute of the hypervisor's steal (StolenTime)
        # falls on both rather than on whichever side ran then
        flow_runs, data_runs = [], []
        for i in range(TIMED_RUNS):
            flow_runs.append(measure_flow(small_flow(flowfiles, BATCH, always_sync=False, name=f"bench-small-{i}"),
                                          flowfiles, workdir / "default", timeout=900))
            with PeakRss() as run_rss:
                data_runs.append(with_steal(lambda: ray_data_transform(flowfiles, BATCH)))
            data_peak = max(data_peak, run_rss.peak)
        default, default_rates = median_run(flow_runs)
        data, data_rates = median_run(data_runs)
        claim_after = claim_file_cost(workdir)
    bare_sync = measure_bare_flow(flowfiles, BATCH, workdir / "bare-sync", sync=True)
    bare_runs = [with_steal(lambda: measure_bare_flow(flowfiles, BATCH, workdir / "bare", sync=False))
                 for _ in range(TIMED_RUNS)]
    bare, bare_rates = median_run(bare_runs)
    what = f"{flowfiles:,} FlowFiles of 1 KiB, batches of {BATCH}, 1 task per processor"
    rows.append(row(S1, "FlowFiles/s, always_sync on", durable["flowfiles_per_s"], bare_sync["flowfiles_per_s"],
                    "bare durable loop (fdatasync + LMDB sync a batch)", "FlowFiles/s",
                    with_problems(f"{what}; power-loss safe on both sides; flow time {durable['seconds']:.2f} s; "
                                  f"task time (on_trigger + commit, summed over tasks): {durable['busy']}", durable)))
    rows.append(row(S1, "provenance events/s, always_sync on", durable["events_per_s"], bare_sync["events_per_s"],
                    "bare durable loop (journal append)", "events/s",
                    f"{durable['events']:,} events registered (4 a FlowFile)"))
    rows.append(row(S1, "FlowFiles/s, always_sync off (default)", default["flowfiles_per_s"], bare["flowfiles_per_s"],
                    "bare loop without fsync (LMDB sync off)", "FlowFiles/s",
                    with_problems(f"{what}; both survive a process kill, not a power loss; the median of "
                                  f"{TIMED_RUNS} runs on each side (flowactors {default_rates}, bare loop "
                                  f"{bare_rates} FlowFiles/s); median run's flow time {default['seconds']:.2f} s, "
                                  f"task time: {default['busy']}; a claim-sized file ({PROBE_BYTES // 1024} KiB) "
                                  f"cost {claim_before:.0f} µs to create here before the flow runs and "
                                  f"{claim_after:.0f} µs after them (the median of {PROBE_FILES}; the flow makes one "
                                  f"for every {PROBE_BYTES // 1024} KiB of content, the bare loop none); the "
                                  f"hypervisor's steal during each run, in the same order as run: flowactors "
                                  f"{stolen(flow_runs)}, bare loop {stolen(bare_runs)}",
                                  default)))
    rows.append(row(S1, "provenance events/s, always_sync off", default["events_per_s"], bare["events_per_s"],
                    "bare loop without fsync", "events/s", f"{default['events']:,} events registered"))
    rows.append(row(S1, "FlowFiles/s vs Ray Data, always_sync off", default["flowfiles_per_s"], data["flowfiles_per_s"],
                    "Ray Data, same transform, nothing durable", "FlowFiles/s",
                    f"Ray Data: range -> 3 map_batches (fused); the median of {TIMED_RUNS} runs ({data_rates} "
                    f"FlowFiles/s) after one full-size warm-up run, each after one of flowactors' runs; content rides "
                    f"the object store; steal during the runs: flowactors {stolen(flow_runs)}, Ray Data "
                    f"{stolen(data_runs)}"))
    rows.append(row(S1, "peak RSS of all Ray processes", mib(durable["peak_rss"]), mib(data_peak),
                    "Ray Data run, same sampling", "MiB",
                    f"sum of RSS over the Ray session's processes and the driver, sampled every 0.2 s (shared pages "
                    f"counted per process); idle session before the flow: {mib(durable['rss_before']):.0f} MiB; "
                    f"bare loop process peak (/usr/bin/time -v): {_mib_or_na(bare_sync['peak_rss'])}"))
    return rows


def _mib_or_na(value: int | None) -> str:
    return f"{mib(value):.0f} MiB" if value else "n/a"


# ---------------------------------------------------------------------------------- scenario 2
FULL_GRID = {1: 2_000, 10: 10_000, 100: 40_000, 1000: 100_000, 10_000: 200_000}
QUICK_GRID = {1: 300, 100: 5_000, 1000: 10_000}
#: from this batch size up (full mode) each cell is the median of TIMED_RUNS runs, the task
#: counts in turns: there one task against two is within one run's drift (docs/performance.md)
ROUNDS_FROM_BATCH = 100
#: the batch size (full mode) at which one and two tasks also run with every task in a process of
#: its own (``isolated``): the other way a second task could add a core, measured beside the grid
ISOLATED_BATCH = 1000


def run_scaling(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    grid = QUICK_GRID if quick else FULL_GRID
    if size:
        grid = {b: max(size // 1000 * b, b) if b < 1000 else size for b in grid}
    tasks_list = (1, 2) if quick else (1, 2, 4)
    rows = []
    bare_by_batch = {batch: measure_bare_flow(n, batch, workdir / f"bare-{batch}", sync=False)
                     for batch, n in grid.items()}
    with ray_session():
        for batch, flowfiles in grid.items():
            rounds = TIMED_RUNS if not quick and batch >= ROUNDS_FROM_BATCH else 1
            rows.extend(_cell_rows(batch, flowfiles, tasks_list, rounds, bare_by_batch[batch], workdir))
        if not quick and ISOLATED_BATCH in grid:
            rows.extend(_cell_rows(ISOLATED_BATCH, grid[ISOLATED_BATCH], (1, 2), TIMED_RUNS,
                                   bare_by_batch[ISOLATED_BATCH], workdir, isolated=True))
    profile_n = size or (5_000 if quick else 50_000)
    rows.extend(_profile_rows(profile_n, 1000, workdir))
    return rows


def _cell_rows(batch: int, flowfiles: int, tasks_list: tuple[int, ...], rounds: int, bare: dict, workdir: Path,
               isolated: bool = False) -> list[dict]:
    """One batch size of the grid: a row a task count (the median of ``rounds`` runs, the task
    counts in turns) and one of two tasks against one. ``isolated``: every task in a process of its
    own, where a second task has a GIL of its own and pays for it with an actor call for each poll,
    offer and acknowledgement (docs/performance.md, "2026-11-29 (fifth session)")."""
    where = ", each task in a process of its own" if isolated else ""
    variant = "-isolated" if isolated else ""
    runs: dict[int, list[dict]] = {tasks: [] for tasks in tasks_list}
    for turn in range(rounds):
        for tasks in tasks_list:
            runs[tasks].append(measure_flow(
                small_flow(flowfiles, batch, tasks, name=f"bench-b{batch}-t{tasks}{variant}-r{turn}", isolated=isolated),
                flowfiles, workdir / f"flow-{batch}-{tasks}{variant}-{turn}", timeout=900))
    rows, medians = [], {}
    for tasks in tasks_list:
        result, rates = median_run(runs[tasks])
        medians[tasks] = result
        repeated = (f"the median of {rounds} runs ({rates} FlowFiles/s), the task counts in turns; "
                    f"the median run's " if rounds > 1 else "")
        rows.append(row(S2, f"FlowFiles/s, batch {batch:,}, {tasks} task(s){where}", result["flowfiles_per_s"],
                        bare["flowfiles_per_s"], f"bare loop, batch {batch:,}, no fsync",
                        "FlowFiles/s", with_problems(f"{flowfiles:,} FlowFiles; always_sync off; {tasks} task(s) "
                                                     f"per processor{where}; {repeated}flow time "
                                                     f"{result['seconds']:.1f} s, task time: {result['busy']}; the "
                                                     f"hypervisor's steal during each run: {stolen(runs[tasks])}",
                                                     result)))
    rows.append(row(S2, f"two tasks vs one, batch {batch:,}{where}", medians[2]["flowfiles_per_s"],
                    medians[1]["flowfiles_per_s"], f"1 task per processor{where}, same run", "FlowFiles/s",
                    f"the two rows above ({'medians, the task counts in turns' if rounds > 1 else 'one run each'}); "
                    f"cores busy during the flow (all processes): {_busy(runs[1])} with one task, "
                    f"{_busy(runs[2])} with two (a second task can only add what the first leaves idle"
                    f"{', and its process costs actor calls' if isolated else ''})"))
    return rows


def _busy(runs: list[dict]) -> str:
    """How many cores were busy during each run's flow (``BusyCores``), "a / b of N"."""
    return each_run(runs, "busy_cores", ".2f", f" of {os.cpu_count()}")


def run_in_process(flow: Flow, root: Path) -> dict:
    """Run ``flow`` to completion in this process: each processor triggered in turn over a
    ``LocalBackend`` with the durable repositories at ``root`` (no Ray, one task each), with the
    garbage collector's thresholds the in-process engine runs a flow with (``gc_policy``)."""
    gc_policy.hold()
    try:
        return _run_in_process(flow, root)
    finally:
        gc_policy.release()


def _run_in_process(flow: Flow, root: Path) -> dict:
    settings = flow_settings(flow)
    flowfile_repository = WriteAheadFlowFileRepository.from_settings(root, settings)
    content = FileSystemContentRepository.from_settings(root, settings)
    provenance = WriteAheadProvenanceRepository.from_settings(root, settings)
    queues = {c.id: ConnectionQueue(QueueConfig(c.id, 0, 0)) for c in flow.connections}
    tasks = []
    for node in flow.processors.values():
        backend = LocalBackend(
            content=content, flowfile_repository=flowfile_repository, provenance_repository=provenance,
            queues=queues, inputs=[c.id for c in flow.connections_to(node.name)],
            destinations=flow.destinations(node.name),
            always_sync=settings.always_sync)
        context = make_context(node, settings)
        processor = node.type()
        processor.on_scheduled(context)
        tasks.append((node, context, backend, processor, IdAllocator(backend)))
    started = time.perf_counter()
    try:
        busy = True
        while busy:
            busy = False
            for node, context, backend, processor, ids in tasks:
                if backend.inputs and not any(queues[q].queued for q in backend.inputs):
                    continue
                session = ProcessSession(context, backend, component_id=f"{flow.name}/{node.name}", ids=ids)
                processor.on_trigger(context, session)
                session.commit()
                if not context.take_yield_request():  # a source yields once it reached Max FlowFiles
                    busy = True
        seconds = time.perf_counter() - started
        events = provenance.stats()["max_event_id"] + 1
    finally:
        flowfile_repository.close()
        provenance.close()
    return {"seconds": seconds, "events": events}


def _timed_in_process(flowfiles: int, batch: int, root: Path) -> dict:
    """One timed in-process run of scenario 1's flow (``run_in_process``) with its rate and the
    steal it met; its repositories are set aside afterwards, as the bench does with a flow's."""
    result = with_steal(lambda: run_in_process(small_flow(flowfiles, batch, name="bench-in-process"), root))
    retire(root)
    return {**result, "flowfiles_per_s": flowfiles / result["seconds"]}


def _profile_rows(flowfiles: int, batch: int, workdir: Path) -> list[dict]:
    root = workdir / "in-process"
    # the two sides in turns, the median of each: one run of a side drifts by 15 % (TIMED_RUNS)
    flow_runs, bare_runs = [], []
    for _ in range(TIMED_RUNS):
        flow_runs.append(_timed_in_process(flowfiles, batch, root))
        bare_runs.append(with_steal(lambda: measure_bare_flow(flowfiles, batch, workdir / "bare-timed", sync=False)))
    timed, flow_rates = median_run(flow_runs)
    bare, bare_rates = median_run(bare_runs)
    profiler = cProfile.Profile()
    profiler.enable()
    run_in_process(small_flow(flowfiles, batch, name="bench-in-process"), root)
    profiler.disable()
    retire(root)
    bare_profiler = cProfile.Profile()
    bare_profiler.enable()
    bare_durable_flow(flowfiles, batch, workdir / "bare-profiled", sync=False)
    bare_profiler.disable()
    shutil.rmtree(workdir / "bare-profiled", ignore_errors=True)
    details = (
        f"The flow of scenario 1 ({flowfiles:,} FlowFiles, batch {batch}, always_sync off) run in one process over "
        f"`LocalBackend` with the durable repositories, under cProfile (in-process because cProfile cannot follow "
        f"work across Ray actors; on Ray the same session, processor and repository code runs, plus the actor calls). "
        f"Paths are shortened; times include cProfile's overhead.\n\n"
        f"**In-process flow, top 15 by cumulative time**\n\n{top_functions(profiler, 'cumulative')}\n\n"
        f"**In-process flow, top 15 by own time**\n\n{top_functions(profiler, 'tottime')}\n\n"
        f"**Bare loop, top 15 by own time**\n\n{top_functions(bare_profiler, 'tottime')}")
    return [row(S2, "FlowFiles/s in one process (LocalBackend, no Ray)", timed["flowfiles_per_s"],
                bare["flowfiles_per_s"], "bare loop, batch 1,000, no fsync", "FlowFiles/s",
                f"{flowfiles:,} FlowFiles, {timed['events']:,} events; the framework's cost without actors "
                f"(profile below); the events are journaled, not indexed, in the timed window (the bare loop "
                f"indexes nothing either; on Ray the provenance actor indexes during the flow); the median of "
                f"{TIMED_RUNS} runs on each side, in turns (in one process {flow_rates}, bare loop {bare_rates} "
                f"FlowFiles/s, slowest first); the steal each run met, in the order run: in one process "
                f"{stolen(flow_runs)}, bare loop {stolen(bare_runs)}", details=details)]


def top_functions(profiler: cProfile.Profile, key: str, limit: int = 15) -> str:
    """A markdown table of the ``limit`` hottest functions by ``key`` ('cumulative' or 'tottime')."""
    stats = pstats.Stats(profiler)
    # total_tt and stats: attributes every Stats has, which the standard library's stubs omit
    total = stats.total_tt or 1e-9  # type: ignore[attr-defined]
    entries = sorted(stats.stats.items(),  # type: ignore[attr-defined]
                     key=lambda kv: kv[1][3 if key == "cumulative" else 2], reverse=True)
    lines = ["| function | calls | own s | cumulative s | own % |", "|---|---:|---:|---:|---:|"]
    for (filename, line, name), (_cc, calls, own, cumulative, _callers) in entries[:limit]:
        lines.append(f"| `{_short(filename)}:{line}({name})` | {calls:,} | {own:.3f} | {cumulative:.3f} | "
                     f"{100 * own / total:.1f} |")
    return "\n".join(lines)


def _short(filename: str) -> str:
    root = str(Path(__file__).resolve().parent.parent) + os.sep
    if filename.startswith(root):
        return filename[len(root):]
    marker = "site-packages" + os.sep
    if marker in filename:
        return filename.split(marker, 1)[1]
    if filename.startswith(sys.base_prefix):
        return "stdlib/" + Path(filename).name
    return filename
