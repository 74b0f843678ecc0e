"""Scenario 9: what a flow's size costs: Ray processes, peak memory and time against processors.

The flow: GenerateFlowFile (2,000 FlowFiles of 1 KiB, 100 a trigger) -> N-2 UpdateAttribute (one
attribute each) -> RouteOnAttribute (auto-terminated), for N = 10, 60, 200, run to idle by
``flowactors.driver.running.run_flow`` on a fresh repository, with the shared placement (a few executor
actors, the default) and with the isolated one (an actor per processor task and per queue, the
first version's mapping; at 10 and 60 only: at 200 it would need about 400 processes; in quick
mode at 10 only), and on the in-process engine (the same flow in one process, no Ray; at 60 only
in quick mode).

Each run is a child process of its own that starts its own local Ray (2 CPUs), so what is
measured is everything a user waits for and pays: time from before ``ray.init`` to the end of
the stop ("end to end, start-up included"), the most processes alive at once in the child's tree
(the driver and every Ray process), and the peak of their summed PSS (shared pages counted once:
the memory they use together; summed RSS, which counts each shared page once per process, is shown
beside it). The baseline is Ray's own
floor, measured the same way: a child that only calls ``ray.init`` and waits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from bench import mib, process_tree_pss, process_tree_rss, ray_session, row

S9 = "9 flow size"
FLOWFILES = 2_000
IDLE_SECONDS = 5.0


def long_flow(processors: int, flowfiles: int = FLOWFILES, placement: str = "shared"):
    """GenerateFlowFile -> ``processors - 2`` UpdateAttribute -> RouteOnAttribute (auto-terminated)."""
    from flowactors.sdk.flow import Flow
    from flowactors.processors import GenerateFlowFile, RouteOnAttribute, UpdateAttribute

    flow = Flow(f"size{processors}", settings={"placement": placement})
    previous = flow.add(GenerateFlowFile, "generate", properties={
        "File Size": "1 KB", "Batch Size": 100, "Max FlowFiles": flowfiles, "Unique FlowFiles": False})
    for i in range(processors - 2):
        step = flow.add(UpdateAttribute, f"update{i}", properties={f"step{i}": "${filename:length()}"})
        flow.connect(previous, step, name=f"to-update{i}")
        previous = step
    last = flow.add(RouteOnAttribute, "last", properties={"long": "${step0:gt(1)}"},
                    auto_terminate=("long", "unmatched"))
    flow.connect(previous, last, name="to-last")
    return flow


def child(processors: int, placement: str, root: str) -> dict:
    """In the child process: start Ray, run the flow (or idle, for 0 processors), report.
    ``placement`` "in-process" runs the flow on the in-process engine, with no Ray at all."""
    began = time.monotonic()
    from flowactors.driver.running import processor_totals, run_flow

    if placement == "in-process":
        final = run_flow(long_flow(processors), root, timeout=600, engine="in-process")
        return {"seconds": time.monotonic() - began, "run_seconds": final["seconds"],
                "delivered": processor_totals(final)["last"]["flowfiles_in"], "timed_out": bool(final.get("timed_out"))}
    with ray_session(num_cpus=2):
        if processors == 0:
            time.sleep(IDLE_SECONDS)
            return {"seconds": time.monotonic() - began}
        final = run_flow(long_flow(processors, placement=placement), root, timeout=600)
        delivered = processor_totals(final)["last"]["flowfiles_in"]
        return {"seconds": time.monotonic() - began, "run_seconds": final["seconds"], "delivered": delivered,
                "timed_out": bool(final.get("timed_out"))}


def measure(processors: int, placement: str, workdir: Path) -> dict:
    """Run ``child`` in a process of its own; its report plus peak processes and peak RSS."""
    root = workdir / f"{placement}-{processors}"
    command = [sys.executable, "-m", "bench.flow_size", str(processors), placement, str(root)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    peak_rss = peak_pss = peak_processes = looks = 0
    while process.poll() is None:
        looks += 1
        try:
            peak_processes = max(peak_processes, 1 + len(watched.children(recursive=True)))
        except psutil.Error:
            pass
        peak_rss = max(peak_rss, process_tree_rss(watched))
        if looks % 4 == 1:  # reading every process's smaps costs more: every 0.4 s
            peak_pss = max(peak_pss, process_tree_pss(watched))
        time.sleep(0.1)
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{placement} flow of {processors} processors failed (exit {process.returncode}):\n"
                           f"{err[-3000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    return {**report, "wall": time.monotonic() - started, "peak_rss": peak_rss, "peak_pss": peak_pss,
            "processes": peak_processes}


def run(quick: bool, workdir: Path) -> list[dict]:
    sizes = {"shared": (10, 60) if quick else (10, 60, 200),
             # the isolated placement takes minutes and GBs at 60 (the point of this scenario)
             "isolated": (10,) if quick else (10, 60),
             "in-process": (60,) if quick else (10, 60, 200)}
    floor = measure(0, "shared", workdir)
    rows = [row(S9, "Ray's floor: an idle ray.init (processes / peak PSS MiB / peak RSS MiB)",
                f"{floor['processes']} / {mib(floor['peak_pss']):,.0f} / {mib(floor['peak_rss']):,.0f}",
                None, "", "",
                f"a child that starts a local Ray with 2 CPUs and waits {IDLE_SECONDS:.0f} s")]
    measured: dict[tuple[str, int], dict] = {}
    for placement, counts in sizes.items():
        for n in counts:
            m = measured[placement, n] = measure(n, placement, workdir)
            if m.get("timed_out") or m["delivered"] != FLOWFILES:
                raise RuntimeError(f"{placement} flow of {n} processors delivered {m['delivered']} of {FLOWFILES}")
            startup = "no Ray" if placement == "in-process" else "Ray start-up included"
            notes = f"{FLOWFILES:,} FlowFiles of 1 KiB; start to stop, {startup}; run_flow itself {m['run_seconds']:.1f} s"
            label = f"{n} processors, " + ("in-process engine (no Ray)" if placement == "in-process"
                                           else f"{placement} placement")
            rows.append(row(S9, f"{label}: seconds end to end", round(m["seconds"], 2), None, "", "s", notes))
            rows.append(row(S9, f"{label}: processes (peak)", m["processes"], floor["processes"],
                            "idle ray.init", "processes", "the driver and every Ray process, most at once"))
            rows.append(row(S9, f"{label}: peak memory (MiB)", round(mib(m["peak_pss"])),
                            round(mib(floor["peak_pss"])), "idle ray.init", "MiB",
                            "summed PSS of the driver and every Ray process (shared pages once: the memory "
                            "they use together)"))
            rows.append(row(S9, f"{label}: peak summed RSS (MiB)", round(mib(m["peak_rss"])),
                            round(mib(floor["peak_rss"])), "idle ray.init", "MiB",
                            "summed RSS: shared pages (libraries, Ray's object store) counted once per process"))
    for n in sizes["isolated"]:
        shared, isolated = measured["shared", n], measured["isolated", n]
        for what, key, unit in (("seconds end to end", "seconds", "s"), ("processes", "processes", "processes"),
                                ("peak memory (MiB)", "peak_pss", "MiB")):
            value = (lambda m: round(mib(m[key]))) if key == "peak_pss" else (lambda m: round(m[key], 2))
            rows.append(row(S9, f"{n} processors, shared vs isolated placement: {what}", value(shared),
                            value(isolated), "isolated placement", unit, "the same flow, the same run"))
    return rows


if __name__ == "__main__":
    print(json.dumps(child(int(sys.argv[1]), sys.argv[2], sys.argv[3])))
