"""The bench harness runs end to end (CI checks that it runs; it does not judge the numbers).

The full `make bench` takes about half an hour and is not run here. One test runs the harness
for real on the recovery scenario at a tiny size (a real WAL, a real Ray in the harness's child
process); the others feed the report writer made-up rows, only to check the format it writes.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bench import NOT_BUILT, ROW_KEYS, against, not_built, report, row

ROOT = Path(__file__).resolve().parent.parent


def fake_run(rows: list[dict]) -> dict:
    """A run record around writer-test rows (never written anywhere but a temporary folder)."""
    return {"command": "python -m bench --quick", "mode": "quick", "date": "2026-01-01T00:00:00+00:00",
            "seconds": 1.0, "python_executable": sys.executable,
            "machine": {"cores": 2, "memory_gib": 4.0, "memory_bytes": 4 << 30, "cpu": "test CPU",
                        "python": "3.11", "ray": "2.60.0", "hostname": "test"},
            "git": {"commit": "0" * 40, "dirty": True, "changes": [" M x.py"]},
            "scenarios": [{"key": "small", "number": 1, "title": "Small FlowFiles, durable", "status": "ok",
                           "seconds": 1.0, "command": "python -m bench --quick --only small", "rows": rows}]}


def test_report_writes_one_table_row_per_result_with_its_ratio(tmp_path):
    rows = [row("1 small", "FlowFiles/s", 3_500.0, 44_000.0, "bare loop", "FlowFiles/s", "a | b"),
            row("1 small", "bytes copied", 0, 0, "must be 0", "bytes"),
            not_built("4 deep queue", "bench.deep_queue does not exist yet")]
    rows[0]["details"] = "profile table here"
    md_path, json_path = report.write(fake_run(rows), tmp_path)
    text = md_path.read_text()
    assert "| metric | flowactors | baseline | ratio | unit | baseline is | notes |" in text
    assert "| FlowFiles/s | 3,500 | 44,000 | 0.0795x | FlowFiles/s | bare loop | a \\| b |" in text
    assert "| bytes copied | 0 | 0 |  | bytes | must be 0 |  |" in text
    assert f"| {NOT_BUILT} | {NOT_BUILT} |" in text
    assert "`" + "0" * 40 + "` (dirty: 1 changed file(s))" in text and "2 cores" in text
    assert "profile table here" in text
    saved = json.loads(json_path.read_text())
    assert saved["scenarios"][0]["rows"][0]["ratio"] == pytest.approx(3_500 / 44_000)
    assert all(set(ROW_KEYS) <= set(r) for r in saved["scenarios"][0]["rows"])


def test_only_keeps_the_other_scenarios_of_comparable_results(tmp_path):
    from bench.__main__ import SCENARIOS, kept_scenarios

    earlier = fake_run([row("1 small", "FlowFiles/s", 1.0, 2.0, "bare loop", "FlowFiles/s")])
    report.write(earlier, tmp_path)
    recovery = [s for s in SCENARIOS if s.key == "recovery"]
    now = {"mode": "quick", "machine": earlier["machine"]}
    kept = kept_scenarios(tmp_path, now, recovery)
    assert [s["key"] for s in kept] == ["small"] and kept[0]["commit"] == "0" * 40
    assert kept_scenarios(tmp_path, {**now, "mode": "full"}, recovery) == []
    assert kept_scenarios(tmp_path, now, [s for s in SCENARIOS if s.key == "small"]) == []


def test_a_failing_scenario_is_a_failed_row_and_fails_the_command(tmp_path, monkeypatch):
    """CI runs `make bench-quick`: a scenario that raises must turn the command red, not just a row."""
    import bench.__main__ as harness

    broken = harness.Scenario("broken", 9, "Broken on purpose", "bench.report", "no_such_scenario_function")
    monkeypatch.setattr(harness, "SCENARIOS", (broken,))
    assert harness.main(["--quick", "--out", str(tmp_path)]) == 1
    saved = json.loads((tmp_path / "results.json").read_text())
    (scenario,) = saved["scenarios"]
    assert scenario["status"] == "failed"
    assert scenario["rows"][0]["metric"] == "FAILED"
    assert "no_such_scenario_function" in scenario["rows"][0]["notes"]
    assert "FAILED" in (tmp_path / "RESULTS.md").read_text()
    assert not (ROOT / "bench" / "scratch" / "broken").exists()


def test_report_refuses_a_row_without_the_contract_keys(tmp_path):
    with pytest.raises(ValueError, match="lacks"):
        report.write(fake_run([{"scenario": "1", "metric": "x"}]), tmp_path)


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_quick_harness_runs_a_scenario_and_writes_both_files(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "recovery", "--size", "500",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["mode"] == "quick" and saved["machine"]["cores"] >= 1 and len(saved["git"]["commit"]) == 40
    recovery = next(s for s in saved["scenarios"] if s["key"] == "recovery")
    assert recovery["status"] == "ok"
    assert {r["metric"] for r in recovery["rows"]} == {"library recovery of 500 FlowFiles",
                                                       "controller start with 500 FlowFiles",
                                                       "queue of 500 FlowFiles back after its executor's SIGKILL"}
    assert all(r["flowactors"] > 0 and r["baseline"] > 0 and r["ratio"] > 0 for r in recovery["rows"])
    assert "PROBLEM" not in json.dumps(recovery["rows"])
    assert "## 6. Recovery" in (tmp_path / "RESULTS.md").read_text()
    assert not (ROOT / "bench" / "scratch" / "recovery").exists()


def test_a_retired_run_directory_is_set_aside_not_deleted(tmp_path):
    """``retire`` renames a finished run's directory to a hidden sibling (deleting thousands of
    claim files would tax the next run's file creations on this file system); the bench deletes
    the scratch folder at its end."""
    from bench import retire

    run = tmp_path / "flow-1000"
    (run / "content").mkdir(parents=True)
    (run / "content" / "claim").write_bytes(b"x")
    retire(run)
    retire(tmp_path / "never-made")
    assert not run.exists()
    [kept] = list(tmp_path.iterdir())
    assert kept.name.startswith(".retired-flow-1000-") and (kept / "content" / "claim").read_bytes() == b"x"


def test_the_claim_file_probe_times_real_files_and_sets_them_aside(tmp_path):
    """``claim_file_cost`` creates ``PROBE_FILES`` claim-sized files and keeps them (retired, not
    deleted, for the same reason as a run's); its figure is a time, in µs, of real creations."""
    from bench import PROBE_BYTES, PROBE_FILES, claim_file_cost

    cost = claim_file_cost(tmp_path)
    [kept] = list(tmp_path.iterdir())
    assert kept.name.startswith(".retired-claim-probe-")
    files = list(kept.iterdir())
    assert len(files) == PROBE_FILES and all(f.stat().st_size == PROBE_BYTES for f in files)
    assert 0 < cost < 1_000_000  # a creation takes some time, and not a second


def test_stolen_time_reads_the_machines_steal_share_around_a_block():
    """``StolenTime`` is the hypervisor's share of the CPU time between entering and leaving,
    read from the kernel's counters; ``stolen`` lists it for a side's runs, in their order."""
    from bench import StolenTime, stolen, with_steal

    with StolenTime() as steal:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:   # CPU time passes, so the share has a denominator
            pass
    assert isinstance(steal.percent, float) and 0.0 <= steal.percent <= 100.0
    assert stolen([{"steal_percent": 0.4}, {"steal_percent": 12.6}]) == "0 / 13 %"
    assert stolen([{"steal_percent": 3.0}, {}]) == "not measured"
    measured = with_steal(lambda: {"flowfiles_per_s": 7.0})
    assert measured["flowfiles_per_s"] == 7.0 and 0.0 <= measured["steal_percent"] <= 100.0


def test_scaling_takes_the_closest_cells_in_turns_and_reports_their_medians(tmp_path, monkeypatch):
    """Full mode: from batch 1,000 up each cell runs TIMED_RUNS times, the task counts in turns
    (1, 2, 4, 1, 2, 4, ...) so drift reaches all of them alike, and its row is the median run;
    smaller batches run once. At ISOLATED_BATCH one and two tasks run again with every processor
    isolated (a process a task). The flow runs are stubbed: this checks the grid, not the numbers."""
    import contextlib

    from bench import small_flowfiles as scaling

    order = []
    isolated = {}
    rates = iter(range(1000, 100_000, 1000))

    def fake_flow(flow, flowfiles, root, timeout):
        order.append(flow.name)
        isolated[flow.name] = {node.isolated for node in flow.processors.values()}
        return {"flowfiles_per_s": float(next(rates)), "seconds": 1.0, "busy": "generate 1.0 s",
                "problems": [], "steal_percent": 1.0}

    monkeypatch.setattr(scaling, "FULL_GRID", {10: 100, 1000: 2000})
    monkeypatch.setattr(scaling, "measure_flow", fake_flow)
    monkeypatch.setattr(scaling, "measure_bare_flow", lambda *a, **k: {"flowfiles_per_s": 1000.0})
    monkeypatch.setattr(scaling, "ray_session", contextlib.nullcontext)
    monkeypatch.setattr(scaling, "_profile_rows", lambda *a: [])
    rows = scaling.run_scaling(quick=False, workdir=tmp_path)
    rounds = scaling.TIMED_RUNS
    assert order == ["bench-b10-t1-r0", "bench-b10-t2-r0", "bench-b10-t4-r0"] + [
        f"bench-b1000-t{tasks}-r{turn}" for turn in range(rounds) for tasks in (1, 2, 4)] + [
        f"bench-b1000-t{tasks}-isolated-r{turn}" for turn in range(rounds) for tasks in (1, 2)]
    assert {name: kinds for name, kinds in isolated.items() if kinds != {"isolated" in name}} == {}
    by_metric = {r["metric"]: r for r in rows}
    one_task = by_metric["FlowFiles/s, batch 1,000, 1 task(s)"]
    # its runs were the 4th, 7th and 10th flows: rates 4,000 / 7,000 / 10,000, median 7,000
    assert one_task["flowactors"] == 7000.0
    assert f"the median of {rounds} runs (4,000 / 7,000 / 10,000 FlowFiles/s)" in one_task["notes"]
    assert "steal during each run: 1 / 1 / 1 %" in one_task["notes"]
    assert "median" not in by_metric["FlowFiles/s, batch 10, 2 task(s)"]["notes"]
    # the isolated cell's runs were the 13th to 18th flows: one task 13,000 / 15,000 / 17,000,
    # two tasks 14,000 / 16,000 / 18,000
    alone = by_metric["FlowFiles/s, batch 1,000, 1 task(s), each task in a process of its own"]
    assert alone["flowactors"] == 15000.0 and "per processor, each task in a process of its own" in alone["notes"]
    versus = by_metric["two tasks vs one, batch 1,000, each task in a process of its own"]
    assert (versus["flowactors"], versus["baseline"]) == (16000.0, 15000.0)
    assert "FlowFiles/s, batch 10, 1 task(s), each task in a process of its own" not in by_metric


def test_process_cpu_gives_each_child_the_cpu_it_burned_inside_the_window():
    """``ProcessCpu.between`` is a child process's CPU time between the first and last samples
    inside a window (not what it burned before), and the window's length; ``BusyCores.between``
    sees the core it kept busy.
    Scenario 10's rows by process and scenario 2's "cores busy" rest on these two."""
    from bench import BusyCores, ProcessCpu

    burn = "import time\nend = time.time() + 1.2\nwhile time.time() < end: pass\ntime.sleep(5)"
    with ProcessCpu(interval=0.05) as cpu, BusyCores(interval=0.05) as cores:
        child = subprocess.Popen([sys.executable, "-c", burn])
        try:
            time.sleep(0.5)   # it burns before the window: that CPU is not the window's
            began = time.time()
            time.sleep(0.4)   # and all through it
            ended = time.time()
        finally:
            child.kill()
            child.wait()
    seconds, by_pid = cpu.between(began, ended)
    assert 0.25 <= seconds <= 0.4
    assert 0.1 <= by_pid[child.pid] <= seconds + 0.05   # at most a core, and only the window's share
    assert 0.5 <= cores.between(began, ended) <= os.cpu_count()
    assert cpu.between(ended + 100, ended + 200) is None and cores.between(ended + 100, ended + 200) is None


def test_scenario_10_states_each_process_s_cpu_a_flowfile_and_its_share_of_a_core():
    """The rows by process: µs of CPU a FlowFile (all processes, then each, busiest first) and the
    share of a core over the window; a PROBLEM row when the window had too few samples."""
    import collections

    from bench.hop_profile import _process_rows

    measured = {"seconds": 2.0, "cpu": collections.Counter({"executor.1": 0.5, "executor.0": 1.0})}
    rows = _process_rows(measured, 100_000, 10.0)
    assert [(r["metric"], r["flowactors"], r["ratio"]) for r in rows] == [
        ("CPU per FlowFile, all processes (/proc)", 15.0, 1.5),
        ("CPU per FlowFile in process: executor.0", 10.0, 1.0),
        ("CPU per FlowFile in process: executor.1", 5.0, 0.5)]
    assert rows[0]["notes"].endswith("0.75 cores busy") and rows[1]["notes"] == "0.50 of a core busy"
    missing = _process_rows(None, 100_000, 10.0)
    assert len(missing) == 1 and missing[0]["notes"].startswith("PROBLEM:")


def worktrees() -> set[str]:
    """The worktrees git records for this repository (the main one included)."""
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    return {line.removeprefix("worktree ") for line in listed.splitlines() if line.startswith("worktree ")}


def test_against_runs_the_two_sides_in_turns_and_rates_this_commit_against_the_other(tmp_path, monkeypatch):
    """``--against``: the other revision's runs and this tree's alternate (before first), each side's
    row is its median with every run listed, the third row is after / before, the commits are named,
    and the worktree the other side ran from is gone afterwards. The runs are stubbed (no Ray):
    this checks the order and the rows, not the numbers."""
    head = against.resolve("HEAD")
    calls = []
    rates = iter([1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0])

    def fake_run(checkout, flowfiles, root):
        calls.append((checkout, flowfiles))
        assert (checkout / "bench" / "small_flowfiles.py").exists()   # a checkout of the repository
        return {"flowfiles_per_s": next(rates), "problems": [], "steal_percent": 2.0}

    monkeypatch.setattr(against, "timed_run", fake_run)
    before = worktrees()
    rows = against.compare(head, {"commit": "c" * 40, "dirty": True}, quick=False, size=500, workdir=tmp_path / "w")
    other = calls[0][0]
    assert [checkout for checkout, _ in calls] == [other, against.ROOT] * against.TIMED_RUNS
    assert other != against.ROOT and {n for _, n in calls} == {500}
    assert not other.exists() and worktrees() == before
    old, new, versus = rows
    assert (old["flowactors"], new["flowactors"]) == (3000.0, 4000.0)   # medians of 1/3/5 and 2/4/6 thousand
    assert "the median of 3 run(s) (1,000 / 3,000 / 5,000 FlowFiles/s" in old["notes"]
    assert "2,000 / 4,000 / 6,000" in new["notes"]
    assert "steal during each run, in the order run: 2 / 2 / 2 %" in new["notes"]
    assert (versus["flowactors"], versus["baseline"]) == (4000.0, 3000.0)
    assert versus["ratio"] == pytest.approx(4 / 3) and versus["metric"].startswith("this commit vs HEAD")
    assert f"`{head.commit[:12]}`" in versus["baseline_name"] and f"`{'c' * 12}`" in versus["notes"]
    assert "uncommitted changes included" in new["notes"] and "PROBLEM" not in json.dumps(rows)


def test_against_removes_its_worktree_when_a_run_fails(tmp_path, monkeypatch):
    seen = []

    def failing_run(checkout, flowfiles, root):
        seen.append(checkout)
        raise against.AgainstError("the run failed on purpose")

    monkeypatch.setattr(against, "timed_run", failing_run)
    before = worktrees()
    with pytest.raises(against.AgainstError, match="on purpose"):
        against.compare(against.resolve("HEAD"), {"commit": "c" * 40, "dirty": False}, quick=True, size=None,
                        workdir=tmp_path / "w")
    assert len(seen) == 1 and not seen[0].exists() and worktrees() == before


def test_an_unknown_against_revision_is_one_error_before_anything_runs(tmp_path, capsys):
    import bench.__main__ as harness

    with pytest.raises(SystemExit) as stopped:
        harness.main(["--quick", "--only", "small", "--against", "no-such-revision-zz", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == ("python -m bench: error: argument --against: unknown revision 'no-such-revision-zz': "
                     f"it names no commit of the repository at {ROOT}")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit):
        harness.parse_args(["--only", "recovery", "--against", "HEAD"])   # it compares scenario 1 only
    assert "add small to --only" in capsys.readouterr().err


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_quick_against_head_measures_both_sides_in_child_processes_and_removes_the_worktree(tmp_path, monkeypatch):
    """``--quick --only small --against HEAD`` for real, but cheaper: scenario 1's own rows are
    stubbed, its comparison runs (a worktree of HEAD, one child process a side, each with its own
    Ray and the code of its checkout) at 1,000 FlowFiles."""
    import bench.__main__ as harness

    monkeypatch.setattr(harness, "execute", lambda scenario, *args: ("ok", [row("1 small", "stub", 1.0, 1.0, "", "")]))
    temporary = os.path.join(tempfile.gettempdir(), against.WORKTREE_PREFIX + "*")
    before = worktrees(), set(glob.glob(temporary))
    assert harness.main(["--quick", "--only", "small", "--size", "1000", "--against", "HEAD",
                         "--out", str(tmp_path)]) == 0
    assert (worktrees(), set(glob.glob(temporary))) == before
    (small,) = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    commit = small["against"]["commit"]
    assert small["status"] == "ok" and small["against"]["revision"] == "HEAD" and len(commit) == 40
    assert small["command"] == "python -m bench --quick --only small --size 1000 --against HEAD"
    assert [r["metric"] for r in small["rows"]] == [
        "stub", "FlowFiles/s, always_sync off, before: HEAD", "FlowFiles/s, always_sync off, after: this commit",
        "this commit vs HEAD, FlowFiles/s, always_sync off"]
    assert all(r["flowactors"] > 0 for r in small["rows"][1:]) and small["rows"][3]["ratio"] > 0
    assert "PROBLEM" not in json.dumps(small["rows"]) and commit[:12] in small["rows"][3]["baseline_name"]
    assert "this commit vs HEAD" in (tmp_path / "RESULTS.md").read_text()
    assert not (ROOT / "bench" / "scratch" / "small-against").exists()
