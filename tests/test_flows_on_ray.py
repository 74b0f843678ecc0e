"""Whole flows of standard processors on real Ray with the durable repositories."""

from __future__ import annotations

import gzip
import hashlib
import random
import sys
from pathlib import Path

import pytest

from flowactors import Flow
from flowactors.processors import (CompressContent, ExtractText, Funnel, GetFile, HashContent, LogAttribute,
                                   PutFile, ReplaceText, RouteOnAttribute, RouteOnContent, SplitText,
                                   UpdateAttribute)
from flowactors.driver.running import processor_totals, run_flow
from repositories.provenance import WriteAheadProvenanceRepository

pytestmark = pytest.mark.ray
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_demo_flow_puts_every_line_where_it_belongs(ray_session, tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import demo
    finally:
        sys.path.remove(str(EXAMPLES))
    out = tmp_path / "out"
    final = run_flow(demo.build_flow(out=out), tmp_path / "repository", timeout=240)
    lines = [l for f in sorted((EXAMPLES / "data").glob("*.log")) for l in f.read_text().splitlines()]
    expected = {"error": sorted(l for l in lines if " ERROR " in l),
                "warn": sorted(l for l in lines if " WARN " in l),
                "info": sorted(l for l in lines if " ERROR " not in l and " WARN " not in l)}
    for severity, wanted in expected.items():
        files = list((out / severity).glob(f"{severity}-*.log.gz"))
        got = sorted(l for f in files for l in gzip.decompress(f.read_bytes()).decode().splitlines())
        assert got == wanted, severity
        assert all(len(gzip.decompress(f.read_bytes()).splitlines()) <= 1000 for f in files)
    assert [len(expected[s]) for s in ("error", "warn", "info")] == [185, 501, 3814]
    assert sum(p["errors"] for p in final["processors"]) == 0


def test_every_other_standard_processor_on_ray(ray_session, tmp_path):
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    rng = random.Random(3)
    scores = {f"player{i:02d}.txt": rng.randint(0, 100) for i in range(40)}
    for name, score in scores.items():
        (source / name).write_text(f"name={name[:-4]}\nscore={score}\n")
    flow = Flow("all-processors", settings={"checkpoint_interval": 1.0})
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source), "Batch Size": 7})
    hashing = flow.add(HashContent, "hash", auto_terminate=["failure"])
    extract = flow.add(ExtractText, "extract", properties={"score": r"score=(\d+)"})
    replace = flow.add(ReplaceText, "replace", properties={
        "Search Value": r"score=(\d+)", "Replacement Value": "points=$1", "Replacement Strategy": "Regex Replace"},
        auto_terminate=["failure"])
    route = flow.add(RouteOnAttribute, "route", properties={"high": "${score.1:gt(50)}"})
    escape = flow.add(UpdateAttribute, "escape", properties={"filename": "../escape-${filename}"})
    log = flow.add(LogAttribute, "log")
    funnel = flow.add(Funnel, "funnel")
    squeeze = flow.add(CompressContent, "squeeze", properties={"Mode": "compress", "Compression Format": "zstd"},
                       auto_terminate=["failure"])
    unsqueeze = flow.add(CompressContent, "unsqueeze", properties={"Mode": "decompress", "Compression Format": "zstd"},
                         auto_terminate=["failure"])
    put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success"],
                   penalty_duration="50 ms")  # PutFile penalizes failures, as NiFi does
    rejected = flow.add(LogAttribute, "rejected", auto_terminate=["success"])
    flow.connect(get, hashing)
    flow.connect(hashing, extract)
    flow.connect(extract, replace, "matched")
    flow.connect(extract, log, "unmatched")
    flow.connect(replace, route)
    flow.connect(route, escape, "high")
    flow.connect(route, log, "unmatched")
    flow.connect(escape, funnel)
    flow.connect(log, funnel)
    flow.connect(funnel, squeeze)
    flow.connect(squeeze, unsqueeze)
    flow.connect(unsqueeze, put)
    flow.connect(put, rejected, "failure")
    final = run_flow(flow, tmp_path / "repository", timeout=240)

    low = {n for n, s in scores.items() if s <= 50}
    assert {p.name for p in out.iterdir()} == low
    for name in low:
        assert (out / name).read_text() == f"name={name[:-4]}\npoints={scores[name]}\n"
    assert not list(tmp_path.glob("escape-*")), "PutFile wrote outside its directory"
    totals = processor_totals(final)
    assert totals["rejected"]["flowfiles_in"] == len(scores) - len(low)
    assert totals["get"]["flowfiles_out"] == len(scores) and not list(source.iterdir())
    provenance = WriteAheadProvenanceRepository(tmp_path / "repository" / "provenance")
    try:
        sends = provenance.search(event_type="SEND", limit=None)
    finally:
        provenance.close()
    assert len(sends) == len(low)
    for event in sends:
        name = event.updated_attributes["filename"]
        original = f"name={name[:-4]}\nscore={scores[name]}\n".encode()
        assert event.updated_attributes["hash.value"] == hashlib.sha256(original).hexdigest()


def test_splitting_100_mb_into_lines_and_routing_copies_no_content(ray_session, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    line_count, width = 10_240, 10 * 1024
    with open(source / "big.txt", "wb") as f:
        for i in range(line_count):
            f.write(f"line-{i} ".encode().ljust(width - 1, b".") + b"\n")
    size = line_count * width
    assert size >= 100 * 1024 * 1024
    flow = Flow("split-100mb", settings={"checkpoint_interval": 1.0})
    get = flow.add(GetFile, "get", properties={"Input Directory": str(source)})
    split = flow.add(SplitText, "split", properties={"Line Split Count": 1}, auto_terminate=["original", "failure"],
                     batch_size=1)
    route = flow.add(RouteOnContent, "route", properties={"Match Requirement": "content must contain match",
                                                          "even": r"line-\d*[02468] "},
                     auto_terminate=["even", "unmatched"], batch_size=2000)
    flow.connect(get, split)
    flow.connect(split, route, "splits")
    final = run_flow(flow, tmp_path / "repository", timeout=300)
    totals = processor_totals(final)
    assert totals["split"]["flowfiles_out"] == line_count
    assert totals["route"]["flowfiles_in"] == line_count
    assert totals["get"]["bytes_written"] == size  # the one copy: into the content repository
    assert totals["split"]["bytes_written"] == 0 and totals["route"]["bytes_written"] == 0
    assert totals["route"]["bytes_read"] >= size * 0.99  # it did read every line


def test_a_ray_flowactors_starts_passes_a_commits_batches_inline(tmp_path):
    """A commit's offer and provenance batch (up to ~1 MB) are over Ray's default inline limit
    (100 KiB); the Ray flowactors starts raises it, so they skip the object store and the raylet."""
    import json
    import os
    import subprocess

    from flowactors.driver.running import RAY_SYSTEM_CONFIG

    script = ("import json, ray\n"
              "from flowactors.driver.running import ensure_ray\n"
              "assert ensure_ray(num_cpus=1, configure_logging=False, log_to_driver=False)\n"
              "from ray._private.state import state\n"
              "print(json.dumps(state.get_system_config()))\n"
              "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    answer = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                            env=env, cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr[-2000:]
    config = json.loads(answer.stdout.strip().splitlines()[-1])
    assert config["max_direct_call_object_size"] == RAY_SYSTEM_CONFIG["max_direct_call_object_size"] > 1024**2
