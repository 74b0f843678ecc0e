"""``python -m bench [--quick] [--only SCENARIO ...] [--out DIR]``: run the benchmarks, write the results.

Each scenario runs in a fresh child process (its own Ray, its own memory, a crash stays its
own), with its working files under bench/scratch/<scenario>/, deleted afterwards. A scenario whose
module is not there yet gets a 'not built' row; one that fails gets its error as a row, and the
others still run. RESULTS.md and results.json are rewritten after every scenario, so an
interrupted run still leaves what it measured. With ``--only``, the other scenarios of the
results already in ``--out`` (same mode, same machine) are kept, each with the date and commit
of the run that measured it: the issue that builds a feature fills in its own scenario. With
``--against REVISION``, scenario 1's table also compares its flow at this tree with the same flow
at that git revision, measured in the same invocation (bench/against.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shlex
import shutil
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path

import orjson
import psutil  # type: ignore[import-untyped]  # psutil ships no type hints; no stubs among the dependencies

from bench import against, not_built, report, retire, row, run_scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Scenario:
    key: str
    number: int
    title: str
    module: str
    function: str = "run"


SCENARIOS = (
    Scenario("small", 1, "Small FlowFiles, durable", "bench.small_flowfiles"),
    Scenario("scaling", 2, "Scaling: batch size x concurrent tasks, and where the time goes",
             "bench.small_flowfiles", "run_scaling"),
    Scenario("large_content", 3, "Large content", "bench.large_content"),
    Scenario("deep_queue", 4, "Deep queue", "bench.deep_queue"),
    Scenario("provenance", 5, "Provenance", "bench.provenance"),
    Scenario("recovery", 6, "Recovery", "bench.recovery"),
    Scenario("spark", 7, "Spark", "bench.spark"),
    Scenario("wal", 8, "FlowFile repository commits (issue 3)", "bench.wal_commit"),
    Scenario("flow_size", 9, "Flow size: processes, memory and time against processors (issue 13)",
             "bench.flow_size"),
    Scenario("profile", 10, "Where a FlowFile's time goes on Ray, layer by layer (issue 15)", "bench.hop_profile"),
    Scenario("stateless", 11, "The stateless engine: one process, and a Ray Data fan-out (issue 16)",
             "bench.stateless"),
    Scenario("nodes", 12, "One flow across Ray nodes: transfers, and spreading scenario 1 (issue 17)", "bench.nodes"),
    Scenario("lineage", 13, "Lineage of a split and merge, condensed and drawn (issue 19)", "bench.lineage"),
    Scenario("fuzz", 14, "Fuzzing every format's reader (issue 50)", "bench.fuzz"),
    Scenario("checksums", 15, "Content checksums: write and read with and without (issue 50)",
             "bench.content_checksums"),
    Scenario("records", 16, "Record processors against pyarrow, fastavro and DuckDB in one process", "bench.records"),
    Scenario("connectors", 17, "Connectors against bare aiohttp and psycopg (issue 53)", "bench.connectors"),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    names = [s.key for s in SCENARIOS] + [str(s.number) for s in SCENARIOS]
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every scenario small (CI: under 5 minutes)")
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", choices=names,
                        help=f"run only these scenarios ({', '.join(s.key for s in SCENARIOS)}, or their numbers)")
    parser.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md and results.json go (default: bench/)")
    parser.add_argument("--size", type=int, help="override each scenario's main size (FlowFiles, events or bytes); "
                                                 "for smoke tests of the harness, not for results")
    parser.add_argument("--against", metavar="REVISION", type=revision_argument,
                        help="also measure scenario 1's flow (always_sync off) at this git revision, in turns with "
                             "this tree's, and add both and their ratio to scenario 1's table")
    args = parser.parse_args(argv)
    if args.against and args.only and not {"small", "1"} & set(args.only):
        parser.error("--against compares scenario 1: add small to --only")
    return args


def revision_argument(name: str) -> against.Revision:
    """``--against``'s value: the commit it names, or argparse's error for it."""
    try:
        return against.resolve(name)
    except against.AgainstError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def git_state() -> dict:
    def git(*args: str) -> str:
        done = against.git(*args)
        return done.stdout.rstrip() if done.returncode == 0 else ""

    changes = [line for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "HEAD") or "unknown", "dirty": bool(changes), "changes": changes}


def machine() -> dict:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import ray
        ray_version = ray.__version__
    except ImportError:
        ray_version = "not installed"
    return {"cores": len(os.sched_getaffinity(0)), "memory_bytes": psutil.virtual_memory().total,
            "memory_gib": psutil.virtual_memory().total / 1024**3, "cpu": cpu,
            "python": platform.python_version(), "ray": ray_version, "hostname": platform.node()}


def execute(scenario: Scenario, quick: bool, size: int | None, workdir: Path) -> tuple[str, list[dict]]:
    """Run one scenario in a child process; ('ok' | 'not built' | 'failed', rows)."""
    name = f"{scenario.number} {scenario.title}"
    if importlib.util.find_spec(scenario.module) is None:
        return "not built", [not_built(name, f"{scenario.module} does not exist yet")]
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            rows = pool.submit(run_scenario, scenario.module, scenario.function, quick, str(workdir), size).result()
        return "ok", rows
    except Exception as err:  # the scenario's failure is a result too; the next scenario still runs
        return "failed", [failed_row(name, err)]
    finally:
        retire(workdir)


def execute_against(scenario: Scenario, revision: against.Revision, git: dict, quick: bool, size: int | None,
                    workdir: Path) -> tuple[str, list[dict]]:
    """Scenario 1's comparison with ``revision`` (``against.compare``); ('ok' | 'failed', rows)."""
    try:
        return "ok", against.compare(revision, git, quick, size, workdir)
    except Exception as err:  # a failed comparison is a row of the scenario; the next scenario still runs
        return "failed", [failed_row(f"{scenario.number} {scenario.title}", err)]


def failed_row(name: str, err: Exception) -> dict:
    """The row of a scenario (or a part of one) that raised ``err``, its traceback in the details."""
    detail = "".join(traceback.format_exception(err)).strip()
    print(detail, file=sys.stderr)
    failed = row(name, "FAILED", None, None, "", "", f"{type(err).__name__}: {err}")
    failed["details"] = f"```\n{detail[-4000:]}\n```"
    return failed


def kept_scenarios(out_dir: Path, run: dict, selected: list[Scenario]) -> list[dict]:
    """The scenarios of the results in ``out_dir`` that this run does not redo, if comparable."""
    try:
        previous = orjson.loads((out_dir / report.JSON).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    same = (previous.get("mode") == run["mode"]
            and previous.get("machine", {}).get("hostname") == run["machine"]["hostname"]
            and previous.get("machine", {}).get("cores") == run["machine"]["cores"])
    if not same:
        return []
    redone = {s.key for s in selected}
    kept = [s for s in previous.get("scenarios", []) if s.get("key") not in redone]
    for scenario in kept:  # results written before scenarios carried their own date and commit
        scenario.setdefault("date", previous.get("date", "unknown"))
        scenario.setdefault("commit", previous.get("git", {}).get("commit", "unknown"))
        scenario.setdefault("dirty", previous.get("git", {}).get("dirty", True))
    return kept


def measure(scenario: Scenario, args: argparse.Namespace, git: dict, work: Path) -> dict:
    """Run one scenario (and scenario 1's comparison with ``--against``'s revision): its record
    in the results, with the command that redoes it alone."""
    started = time.monotonic()
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    status, rows = execute(scenario, args.quick, args.size, work / scenario.key)
    one = ["python", "-m", "bench", *(["--quick"] if args.quick else []), "--only", scenario.key]
    if args.size is not None:
        one += ["--size", str(args.size)]
    record = {"key": scenario.key, "number": scenario.number, "title": scenario.title}
    if args.against and scenario.key == "small":
        compared, more = execute_against(scenario, args.against, git, args.quick, args.size,
                                         work / f"{scenario.key}-against")
        status = status if compared == "ok" else compared
        rows = rows + more
        one += ["--against", args.against.name]
        record["against"] = {"revision": args.against.name, "commit": args.against.commit}
    return {**record, "status": status, "seconds": time.monotonic() - started, "command": shlex.join(one),
            "date": date, "commit": git["commit"], "dirty": git["dirty"], "rows": rows}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    selected = [s for s in SCENARIOS if not args.only or s.key in args.only or str(s.number) in args.only]
    mode = "quick" if args.quick else "full"
    began = time.monotonic()
    git = git_state()
    run = {"command": shlex.join(["python", "-m", "bench", *argv]), "python_executable": sys.executable,
           "mode": mode, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "git": git, "seconds": 0.0, "scenarios": []}
    kept = kept_scenarios(args.out, run, selected) if args.only else []
    done: list[dict] = []
    work = HERE / "scratch"
    for scenario in selected:
        print(f"==> {scenario.number}. {scenario.title} ({mode})", file=sys.stderr, flush=True)
        done.append(measure(scenario, args, git, work))
        run["scenarios"] = sorted(kept + done, key=lambda s: s["number"])
        run["seconds"] = time.monotonic() - began
        report.write(run, args.out)
        for r in done[-1]["rows"]:
            print(f"    {r['metric']}: {report.number(r['flowactors'])} vs {report.number(r['baseline'])} "
                  f"{r['unit']} ({report.ratio(r['ratio']) or '-'})", file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)  # every run's directory, set aside until now (``retire``)
    md_path, _ = report.write(run, args.out)
    print(f"wrote {md_path} and {args.out / report.JSON} in {run['seconds']:.0f} s"
          + (f" (kept {len(kept)} scenario(s) of earlier runs)" if kept else ""), file=sys.stderr)
    return 1 if any(s["status"] == "failed" for s in done) else 0


if __name__ == "__main__":
    sys.exit(main())
