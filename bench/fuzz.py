"""Scenario 14: every reader of every format flowactors owns, fuzzed for minutes a format.

``python -m bench --only fuzz`` (part of ``make bench``: ``MINUTES`` a format; ``--quick``:
``QUICK_SECONDS``; ``--size``: seconds a format) and the long run, ``python -m bench.fuzz``
(``--minutes``, default ``LONG_MINUTES``; ``--results bench`` writes its figures into
bench/RESULTS.md as this scenario), feed each format's public reader the damaged inputs of
tests/fuzz_formats.py (valid files made by the real writer, then mutated; arbitrary bytes) with
Hypothesis, one format at a time; the record readers' targets of tests/fuzz_records.py (every
reader service, the Avro schema text, RecordPath, the lookup services' CSV files) follow. Unlike the test
(tests/test_fuzz_formats.py), a run does not stop at the first unexpected exception: it counts
the examples, keeps one example of each different finding (by the exception's type and the
reader's line it came from) and goes on. A format's row says how many examples ran and how many
different unexpected exceptions they found, which must be 0 (the known ones are the test's
``xfail`` examples, each naming its finding).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import orjson
from hypothesis import HealthCheck, Phase, given, settings

from bench import row
from tests.fuzz_formats import Finding, Format, check, formats
from tests.fuzz_records import record_formats

SCENARIO = "14 Fuzzing every format's reader (issue 50)"
MINUTES = 2
LONG_MINUTES = 5
QUICK_SECONDS = 10
#: characters of a finding's example kept in the results
EXAMPLE_CHARACTERS = 600


#: examples of one Hypothesis run; runs follow one another (each its own random seed) until the time is up
ROUND = 200


def all_formats() -> list[Format]:
    """The formats' readers, then the record readers' targets."""
    return [*formats(), *record_formats()]


def fuzz(fmt: Format, workdir: Path, seconds: float) -> tuple[int, dict[str, tuple[str, str]]]:
    """Run ``fmt``'s examples for ``seconds``: ``(examples run, {signature: (message, example)})``."""
    strategy = fmt.examples(workdir)
    deadline = time.monotonic() + seconds
    examples = 0
    findings: dict[str, tuple[str, str]] = {}

    @settings(max_examples=ROUND, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(example) -> None:
        nonlocal examples
        if time.monotonic() > deadline:   # the rest of the round only draws its examples
            return
        examples += 1
        try:
            check(fmt, workdir, example)
        except Finding as finding:
            findings.setdefault(finding.signature, (str(finding)[:EXAMPLE_CHARACTERS], repr(example)[:EXAMPLE_CHARACTERS]))

    while time.monotonic() < deadline:
        one()
    return examples, findings


def run(quick: bool, workdir: Path, size: int | None = None, only: list[str] | None = None,
        after: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """One row of examples and one of unexpected exceptions a format (``size``: seconds a format);
    ``after`` is given the rows so far after each format."""
    seconds = size if size is not None else QUICK_SECONDS if quick else MINUTES * 60
    rows = []
    for fmt in all_formats():
        if only and fmt.name not in only:
            continue
        started = time.monotonic()
        examples, findings = fuzz(fmt, workdir, seconds)
        took = time.monotonic() - started
        print(f"    {fmt.name}: {examples:,} examples in {took:.0f} s, {len(findings)} unexpected exception(s)",
              file=sys.stderr, flush=True)
        rows.append(row(SCENARIO, f"{fmt.name}: examples", examples, None, "", "examples",
                        f"{took:.0f} s of Hypothesis examples, {examples / took:,.0f}/s"))
        found = row(SCENARIO, f"{fmt.name}: unexpected exceptions", len(findings), None, "", "findings (must be 0)",
                    "; ".join(sorted(findings)) or "none")
        for signature, (message, example) in sorted(findings.items()):
            print(f"      {signature}: {message}\n        example: {example}", file=sys.stderr, flush=True)
        if findings:
            found["details"] = "\n".join(f"- `{signature}`: {message}\n  - example: `{example}`"
                                         for signature, (message, example) in sorted(findings.items()))
        rows.append(found)
        if after is not None:
            after(rows)
    return rows


def record(rows: list[dict], argv: list[str], seconds: float, out_dir: Path) -> None:
    """Write this run's rows as scenario 14 of the results in ``out_dir`` (RESULTS.md and
    results.json, as ``python -m bench`` does), keeping the rows of formats this run left out
    (``--only``) and every other scenario; each row's notes end with the command, date and
    commit of the run that measured it."""
    from bench import report   # not bench.__main__: it imports every scenario, this needs none

    path = out_dir / report.JSON
    git = _git_state()
    run = orjson.loads(path.read_bytes()) if path.exists() else {
        "command": "python -m bench.fuzz", "python_executable": sys.executable, "mode": "full",
        "date": "", "machine": {"cores": os.cpu_count(), "memory_gib": 0.0, "cpu": "", "python": sys.version.split()[0],
                                "ray": "", "hostname": ""}, "git": git, "seconds": 0.0, "scenarios": []}
    previous = next((s for s in run["scenarios"] if s.get("key") == "fuzz"), {"rows": []})
    redone = {r["metric"] for r in rows}
    kept = [r for r in previous["rows"] if r["metric"] not in redone]
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    command = shlex.join(["python", "-m", "bench.fuzz", *argv])
    rows = [{**r, "notes": f"{r['notes']}; `{command}`, {date}, commit {git['commit'][:12]}"} for r in rows]
    scenario = {"key": "fuzz", "number": 14, "title": SCENARIO.split(" ", 1)[1], "status": "ok", "seconds": seconds,
                "command": command, "date": date, "commit": git["commit"], "dirty": git["dirty"],
                "rows": kept + rows}   # each row's notes say the run that measured it
    run["scenarios"] = sorted([s for s in run["scenarios"] if s.get("key") != "fuzz"] + [scenario],
                              key=lambda s: s["number"])
    report.write(run, out_dir)


def _git_state() -> dict:
    """The commit of this checkout and whether its tree has changes (as the harness records it)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).resolve().parent)
        return done.stdout.strip() if done.returncode == 0 else ""

    changes = [line for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "HEAD") or "unknown", "dirty": bool(changes), "changes": changes}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=LONG_MINUTES, help="minutes a format (default: %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="FORMAT", help="these formats only: "
                        + ", ".join(f.name for f in all_formats()))
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / "scratch" / "fuzz-long",
                        help="where the seeds and the examples are written (not make bench's own scratch/fuzz)")
    parser.add_argument("--results", type=Path, metavar="DIR",
                        help="also write the figures as scenario 14 of DIR/RESULTS.md and results.json")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def after(rows: list[dict]) -> None:   # each format's figures kept as soon as it is done
        if args.results:
            record(rows, argv, time.monotonic() - started, args.results)

    rows = run(False, args.workdir, size=int(args.minutes * 60), only=args.only, after=after)
    for r in rows:
        print(f"{r['metric']}: {r['flowactors']:,} ({r['notes']})")
        if r.get("details"):
            print(r["details"])
    return 1 if any(r["metric"].endswith("unexpected exceptions") and r["flowactors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
