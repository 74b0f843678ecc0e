"""Scenario 3: large content. A 1 GiB FlowFile through a copy-on-write processor, and the bytes a
pass-through flow copies.

Copy-on-write: GetFile takes a 1 GiB file (imported with a kernel copy) -> ReplaceText (Append,
Entire text: it streams the old content into a new claim, 1 MiB at a time, and appends one byte)
-> auto-terminated, with ``always_sync`` on so the new claim is fdatasynced at commit. The
figure is ReplaceText's own task time (``task_seconds``: ``on_trigger`` plus commit, from the
processor's status), against dd copying the same source file on the same disk (``dd if=source
bs=1M conv=fdatasync``: read from the page cache, write, fdatasync - the work a copy-on-write
does), run just before and just after the flow; the faster dd is the baseline, since this shared
disk's write speed wanders by tens of percent from one minute to the next.

Pass-through: GetFile -> UpdateAttribute -> RouteOnAttribute -> auto-terminated. Bytes copied =
what the two downstream processors wrote plus any growth of the content repository beyond what
GetFile imported (archived claims included). It must be 0: FlowFiles move by reference.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bench import mib, ray_session, row
from bench.baselines import dd_write
from flowactors.sdk.flow import Flow
from flowactors.processors import GetFile, ReplaceText, RouteOnAttribute, UpdateAttribute
from flowactors.driver.running import processor_totals, run_flow

S3 = "3 large content"
BLOCK = 1024**2


def write_file(path: Path, nbytes: int) -> None:
    """A file of ``nbytes`` random-looking bytes (one random MiB repeated), flushed to disk."""
    block = os.urandom(BLOCK)
    with open(path, "wb") as out:
        for start in range(0, nbytes, BLOCK):
            out.write(block[: min(BLOCK, nbytes - start)])
        out.flush()
        os.fsync(out.fileno())


def copy_flow(source: Path) -> Flow:
    flow = Flow("bench-large-copy", settings={"always_sync": True})
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 1})
    copy = flow.add(ReplaceText, "copy", batch_size=1, auto_terminate=("success", "failure"), properties={
        "Replacement Strategy": "Append", "Evaluation Mode": "Entire text", "Replacement Value": "!"})
    flow.connect(get, copy, name="taken")
    return flow


def pass_through_flow(source: Path) -> Flow:
    flow = Flow("bench-large-pass")
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 100})
    update = flow.add(UpdateAttribute, "update", properties={"size.class": "${fileSize:ge(1048576):ifElse('large','small')}"})
    route = flow.add(RouteOnAttribute, "route", properties={"large": "${size.class:equals('large')}"},
                     auto_terminate=("large", "unmatched"))
    flow.connect(get, update, name="taken")
    flow.connect(update, route, name="updated")
    return flow


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """``size``: bytes of the large FlowFile (default 1 GiB, quick 64 MiB)."""
    nbytes = size or (64 if quick else 1024) * BLOCK
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "source"
    source.mkdir()
    write_file(source / "large.bin", nbytes)
    write_file(workdir / "for-dd.bin", nbytes)  # GetFile deletes the file it takes: dd copies this one
    mebibytes = max(1, nbytes // BLOCK)
    dd_runs = [dd_write(workdir / "dd.out", mebibytes, workdir / "for-dd.bin")]
    os.unlink(workdir / "dd.out")
    pass_source = workdir / "pass-source"
    pass_source.mkdir()
    pass_files, pass_size = (10, BLOCK) if quick else (20, 5 * BLOCK)
    for i in range(pass_files):
        write_file(pass_source / f"f{i}.bin", pass_size)
    with ray_session():
        copy = processor_totals(run_flow(copy_flow(source), workdir / "repo-copy", timeout=1800))
        shutil.rmtree(workdir / "repo-copy", ignore_errors=True)
        dd_runs.append(dd_write(workdir / "dd.out", mebibytes, workdir / "for-dd.bin"))
        os.unlink(workdir / "dd.out")
        passed = processor_totals(run_flow(pass_through_flow(pass_source), workdir / "repo-pass", timeout=600))
        content_bytes = tree_bytes(workdir / "repo-pass" / "content")
    dd = max(dd_runs, key=lambda d: d["bytes_per_s"])
    speeds = " and ".join(f"{mib(d['bytes_per_s']):.0f}" for d in dd_runs)
    copied_bytes = copy["copy"]["bytes_written"]
    copy_seconds = copy["copy"]["task_seconds"]
    problems = [] if copy["copy"]["flowfiles_in"] == 1 and copied_bytes == nbytes + 1 else [
        f"PROBLEM: copy processor took {copy['copy']['flowfiles_in']} FlowFiles, wrote {copied_bytes:,} bytes"]
    imported = passed["get"]["bytes_written"]
    copied = passed["update"]["bytes_written"] + passed["route"]["bytes_written"] + (content_bytes - imported)
    if imported != pass_files * pass_size:
        problems.append(f"PROBLEM: pass-through imported {imported:,} bytes, expected {pass_files * pass_size:,}")
    return [
        row(S3, f"copy-on-write of a {mib(nbytes):,.0f} MiB FlowFile", mib(nbytes) / copy_seconds,
            mib(dd["bytes_per_s"]), "dd copy of a file as large, conv=fdatasync, same disk (faster of 2)",
            "MiB/s",
            "; ".join([f"ReplaceText (Append, Entire text) task time {copy_seconds:.2f} s incl. read, write, fdatasync, "
                       f"commit; always_sync on; dd before and after the flow: {speeds} MiB/s "
                       f"(`{dd['command']}`)", *problems])),
        row(S3, "content bytes copied by a pass-through flow", copied, 0, "must be 0", "bytes",
            f"GetFile -> UpdateAttribute -> RouteOnAttribute over {pass_files} files of {mib(pass_size):.0f} MiB; "
            f"content repository {content_bytes:,} bytes = {imported:,} imported + {content_bytes - imported:,}"),
    ]
