"""Scenario 10: where a FlowFile's CPU time goes on Ray, layer by layer (issue 15).

cProfile cannot follow work across actors, so this samples them: scenario 1's flow runs on Ray
while ``py-spy record --gil`` (a sampling profiler that attaches to a running process; it comes
with ``ray[default]``) samples every actor of the flow from its start until it stops, only the
thread holding the GIL (so the samples are the Python CPU each process spends, not threads
waiting for their turn; native code that lets the GIL go, such as LMDB's own commit, is missed). Each sample's
stack is given to the first layer that claims one of its frames, leaf first (``LAYERS``), so a
provenance event built inside the session counts as provenance and the pickling of an actor call
as Ray. Samples of code that waits (``IDLE``) are left out. A layer's CPU time is
its samples over the sampling rate; divided by the FlowFiles, it is the cost of a FlowFile in that
layer across its three processors (three hops), compared with the whole cost of a FlowFile in the
bare durable loop of the same run.

py-spy sees only Python holding the GIL, so it cannot tell which process sets the flow's pace. A
second run without py-spy reads each process's CPU time (every thread, native code too) over the
flow's window (``ProcessCpu``): an executor near a whole core while the others idle is the
bottleneck (docs/performance.md, "which executor gets the longer run").
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench import ProcessCpu, named_actor_pids, ray_session, retire, row
from bench.baselines import measure_bare_flow
from bench.small_flowfiles import flow_window, small_flow

S10 = "10 where the time goes"
RATE = 100  # samples a second per thread
#: (layer, substrings of a py-spy frame "function (file:line)"); a stack goes to the first layer
#: with a frame matching, frames looked at from the leaf up
LAYERS = (
    ("provenance", ("repositories/provenance/", "provenance_reporter", "_emit (", "_complete_event (",
                    "_add_implicit_events (")),
    ("write-ahead log", ("repositories/flowfile/",)),
    ("content", ("repositories/content/",)),
    ("queues", ("engine/queues/",)),
    ("expression language", ("sdk/expression",)),
    ("session", ("sdk/session.py",)),
    ("processors", ("flowactors/processors/",)),
    ("Ray calls and pickling", ("/ray/", "cloudpickle", "pickle", "msgpack")),
    ("engine: task loop, executor log, links, metrics", ("flowactors/engine/",)),
)
#: leaves of stacks that wait rather than work (Ray's idle loop, a blocked thread, an event loop's select)
IDLE = ("Worker.main_loop", "Condition.wait", "Event.wait", "select (", "_wait_for_tstate_lock")


def layer_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for layer, needles in LAYERS:
            if any(n in frame for n in needles):
                return layer
    return "other (interpreter, threads, the standard library)"


def read_samples(path: Path) -> tuple[collections.Counter, collections.Counter]:
    """Samples per layer and per leaf function of one ``py-spy record --format raw`` file."""
    layers: collections.Counter = collections.Counter()
    leaves: collections.Counter = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not frames[-1].strip(" (") or any(idle in frames[-1] for idle in IDLE):
            continue
        layers[layer_of(frames)] += int(count)
        leaves[frames[-1]] += int(count)
    return layers, leaves


def profile_flow(flowfiles: int, workdir: Path) -> dict:
    """Run scenario 1's flow in the current Ray session with py-spy on every actor; samples per
    layer and per actor."""
    from flowactors.driver.running import run_flow

    spy_dir = workdir / "py-spy"
    spy_dir.mkdir(parents=True, exist_ok=True)
    spies: list[subprocess.Popen] = []
    failures: list[str] = []

    flow = small_flow(flowfiles, 1000, name="bench-profile")

    def attach() -> None:
        for name, pid in named_actor_pids(f"{flow.name}.").items():
            spies.append(subprocess.Popen(
                [shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
                 "--rate", str(RATE), "--format", "raw", "--nonblocking", "--gil",
                 "--output", str(spy_dir / f"{flow.name}.{name}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))

    attaching = threading.Thread(target=attach, daemon=True)  # the flow runs meanwhile

    root = workdir / "repository"
    shutil.rmtree(root, ignore_errors=True)
    final = run_flow(flow, root, timeout=900, on_started=lambda _controller: attaching.start())
    attaching.join()
    for spy in spies:  # the actors are gone: py-spy writes its file and exits
        try:
            _, err = spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.send_signal(signal.SIGINT)
            _, err = spy.communicate(timeout=30)
        if spy.returncode not in (0, None) and err.strip():
            failures.append(err.strip().splitlines()[-1])
    layers: collections.Counter = collections.Counter()
    leaves: collections.Counter = collections.Counter()
    actors = {}
    for path in sorted(spy_dir.glob("*.txt")):
        per_layer, per_leaf = read_samples(path)
        layers.update(per_layer)
        leaves.update(per_leaf)
        actors[path.stem] = sum(per_layer.values())
    retire(root)
    shutil.rmtree(spy_dir, ignore_errors=True)
    return {"layers": layers, "leaves": leaves, "actors": actors, "failures": failures,
            "seconds": final["seconds"], "routed": sum(p["flowfiles_in"] for p in final["processors"]
                                                       if p["name"] == "route")}


def cpu_by_process(flowfiles: int, workdir: Path) -> dict | None:
    """Scenario 1's flow in the current Ray session without py-spy; the CPU seconds of each of its
    actors' processes (by actor name, the flow's prefix dropped) and of Ray's other processes over
    the flow's window, and the window's length (None when fewer than two samples fell inside it)."""
    from flowactors.driver.running import run_flow

    flow = small_flow(flowfiles, 1000, name="bench-cpu")
    names: dict[int, str] = {}

    def name_processes() -> None:
        names.update((pid, name) for name, pid in named_actor_pids(f"{flow.name}.").items())

    naming = threading.Thread(target=name_processes, daemon=True)  # the flow runs meanwhile
    root = workdir / "repository-cpu"
    shutil.rmtree(root, ignore_errors=True)
    with ProcessCpu(interval=0.05) as cpu:
        run_flow(flow, root, timeout=900, on_started=lambda _controller: naming.start())
        naming.join()
    window = flow_window(root)
    retire(root)
    spent = cpu.between(window["first"], window["last"])
    if spent is None:
        return None
    seconds, by_pid = spent
    by_name: collections.Counter = collections.Counter()
    for pid, used in by_pid.items():
        by_name[names.get(pid, "Ray's own processes (raylet, GCS, dashboard, idle workers)")] += used
    return {"seconds": seconds, "cpu": by_name}


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    flowfiles = size or (20_000 if quick else 200_000)
    began = time.monotonic()
    with ray_session():  # one Ray start for both flows
        profiled = profile_flow(flowfiles, workdir)
        measured = cpu_by_process(flowfiles, workdir)
    bare = measure_bare_flow(flowfiles, 1000, workdir / "bare", sync=False)
    bare_us = 1e6 / bare["flowfiles_per_s"]
    per_ff = {layer: samples / RATE / flowfiles * 1e6 for layer, samples in profiled["layers"].items()}
    total = sum(per_ff.values())
    problems = [f"PROBLEM: py-spy: {f}" for f in profiled["failures"]]
    if profiled["routed"] != flowfiles:
        problems.append(f"PROBLEM: only {profiled['routed']} of {flowfiles} FlowFiles reached the end")
    what = (f"{flowfiles:,} FlowFiles of scenario 1's flow (Generate -> UpdateAttribute -> RouteOnAttribute, "
            f"batch 1000, always_sync off) on Ray, every actor sampled by py-spy at {RATE} Hz; flow time "
            f"{profiled['seconds']:.1f} s (slower while sampled)")
    rows = [row(S10, "CPU per FlowFile, all layers (3 hops)", total, bare_us, "bare loop: a FlowFile's whole cost",
                "µs", "; ".join([what, *problems]))]
    for layer, cost in sorted(per_ff.items(), key=lambda kv: -kv[1]):
        rows.append(row(S10, f"CPU per FlowFile: {layer}", cost, bare_us, "bare loop: a FlowFile's whole cost", "µs",
                        f"{100 * cost / total:.0f} % of the flow's CPU"))
    rows.extend(_process_rows(measured, flowfiles, bare_us))
    samples = sum(profiled["leaves"].values()) or 1
    lines = ["| function (leaf of the stack) | share of samples |", "|---|---:|"]
    for frame, count in profiled["leaves"].most_common(20):
        lines.append(f"| `{_short(frame)}` | {100 * count / samples:.1f} % |")
    actors = ", ".join(f"{name} {100 * n / samples:.0f} %" for name, n in
                       sorted(profiled["actors"].items(), key=lambda kv: -kv[1]))
    rows[0]["details"] = (f"Where the samples were taken, by actor: {actors}.\n\n**Hottest leaf functions, all actors**"
                          f"\n\n" + "\n".join(lines) + f"\n\nMeasured in {time.monotonic() - began:.0f} s.")
    return rows


def _process_rows(measured: dict | None, flowfiles: int, bare_us: float) -> list[dict]:
    """A row for all processes together and one a process: µs of CPU a FlowFile, and the share of
    a core each kept busy over the flow's window."""
    if measured is None:
        return [row(S10, "CPU per FlowFile, by process", None, bare_us, "bare loop: a FlowFile's whole cost", "µs",
                    "PROBLEM: fewer than two CPU samples fell inside the flow's window")]
    seconds, cpu = measured["seconds"], measured["cpu"]
    what = (f"scenario 1's flow again without py-spy, {flowfiles:,} FlowFiles; each process's CPU time (user + "
            f"system, every thread) over the flow's {seconds:.2f} s window")
    rows = [row(S10, "CPU per FlowFile, all processes (/proc)", sum(cpu.values()) / flowfiles * 1e6, bare_us,
                "bare loop: a FlowFile's whole cost", "µs", f"{what}: {sum(cpu.values()) / seconds:.2f} cores busy")]
    for name, used in cpu.most_common():
        rows.append(row(S10, f"CPU per FlowFile in process: {name}", used / flowfiles * 1e6, bare_us,
                        "bare loop: a FlowFile's whole cost", "µs", f"{used / seconds:.2f} of a core busy"))
    return rows


def _short(frame: str) -> str:
    """``function (path:line)`` with the path from the project or site-packages on."""
    function, _, where = frame.partition(" (")
    for marker in ("site-packages/", "lib/python3.11/"):
        if marker in where:
            return f"{function} ({where.split(marker, 1)[1]}"
    root = str(Path(__file__).resolve().parent.parent) + "/"
    return f"{function} ({where.replace(root, '')}"
