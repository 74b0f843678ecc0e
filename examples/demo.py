"""The demo flow: sort application logs by severity.

examples/data holds three services' log files. The flow lists and fetches them, splits them into
lines (by reference: no content is copied), routes each line on its content (ERROR / WARN / the
rest), tags it with its severity and service, merges the lines of each severity into files of up
to 1,000 lines, gzips them and writes them to out/demo/<severity>/. It prints what went where.

Run it with `make demo`, `python examples/demo.py`, or `flowactors run examples/demo.py`.
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

from flowactors import Flow
from flowactors.processors import (CompressContent, FetchFile, ListFile, MergeContent, PutFile, RouteOnContent,
                                   SplitText, UpdateAttribute)

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
#: where the sorted logs go; FLOWACTORS_DEMO_OUT moves them (e.g. for `flowactors submit --env`)
OUT = Path(os.environ.get("FLOWACTORS_DEMO_OUT", "out/demo"))
SEVERITIES = ("error", "warn", "info")


def build_flow(data: Path = DATA, out: Path = OUT) -> Flow:
    flow = Flow("demo", settings={"checkpoint_interval": 5.0})
    listing = flow.add(ListFile, "list logs", properties={"Input Directory": str(data), "File Filter": r".*\.log"})
    fetch = flow.add(FetchFile, "fetch", auto_terminate=["not.found", "permission.denied", "failure"])
    split = flow.add(SplitText, "split lines", properties={"Line Split Count": 1, "Remove Trailing Newlines": "false"},
                     auto_terminate=["original", "failure"])
    route = flow.add(RouteOnContent, "route by level", properties={
        "Match Requirement": "content must contain match", "error": r" ERROR ", "warn": r" WARN "})
    merge = flow.add(MergeContent, "merge by severity", properties={
        "Correlation Attribute Name": "severity", "Minimum Number of Entries": 1000,
        "Maximum Number of Entries": 1000, "Max Bin Age": "2 sec"},
        auto_terminate=["original", "failure"])
    for severity, relationship in (("error", "error"), ("warn", "warn"), ("info", "unmatched")):
        tag = flow.add(UpdateAttribute, f"tag {severity}", properties={
            "severity": severity, "service": "${segment.original.filename:substringBefore('.')}"})
        flow.connect(route, tag, relationship)
        flow.connect(tag, merge)
    name = flow.add(UpdateAttribute, "name files", properties={"filename": "${severity}-${UUID()}.log"})
    compress = flow.add(CompressContent, "gzip", properties={"Mode": "compress", "Compression Format": "gzip",
                                                     "Update Filename": "true"},
                        auto_terminate=["failure"])
    put = flow.add(PutFile, "write", properties={"Directory": f"{out.resolve()}/${{severity}}",
                                                 "Conflict Resolution Strategy": "replace"},
                   auto_terminate=["success", "failure"])
    flow.connect(listing, fetch)
    flow.connect(fetch, split)
    flow.connect(split, route, "splits")
    flow.connect(merge, name, "merged")
    flow.connect(name, compress)
    flow.connect(compress, put)
    return flow


flow = build_flow()


def summarize(final: dict, out: Path = OUT) -> str:
    """What went where: lines per severity from the written files, and the flow's throughput."""
    totals = {p["name"]: p for p in final["processors"]}
    lines = [f"demo finished in {final['seconds']:.1f} s"]
    total_lines = 0
    for severity in SEVERITIES:
        files = sorted((out / severity).glob("*.gz"))
        count = sum(len(gzip.decompress(f.read_bytes()).splitlines()) for f in files)
        total_lines += count
        lines.append(f"  {severity:<5} {count:>5} lines in {len(files)} gzip file(s) under {out / severity}")
    split = totals["split lines"]["flowfiles_out"]
    busy = sum(p["task_seconds"] for p in final["processors"])
    lines.append(f"  {split} line FlowFiles split from {totals['fetch']['flowfiles_out']} files; "
                 f"{total_lines} lines delivered")
    lines.append(f"  {split / final['seconds']:.0f} line FlowFiles/s end to end (including Ray start-up), "
                 f"{busy:.1f} s of processor time")
    return "\n".join(lines)


if __name__ == "__main__":
    from demo_support import run_demo  # examples/ is on sys.path when this file runs as a script

    sys.exit(run_demo(flow, OUT, Path("repository/demo"), summarize))
