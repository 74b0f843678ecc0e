"""``python -m bench --only small --against REVISION``: scenario 1's flowactors flow measured at
another git revision and at this tree in the same invocation, and the ratio of the two.

What is compared: the run behind scenario 1's row "FlowFiles/s, always_sync off (default)",
``small_flow`` (Generate -> UpdateAttribute -> Route, 1 KiB FlowFiles, batches of ``BATCH``,
always_sync off) run to idle by ``measure_flow`` and timed from its provenance, each side with
its own code: this tree as it is (uncommitted changes included, as the rest of the bench run)
and the other revision checked out with ``git worktree add --detach`` into a temporary folder.

How: every run, of either side, is a child process of its own (bench/against_child.py) with
``cwd`` and ``PYTHONPATH`` set to its side's checkout, so both sides pay the same start-up (a
new Python, a new local Ray) and neither inherits the other's imports; the child reports where
``flowactors`` and the scenario were imported from, and a run whose code came from elsewhere is
an error. The runs alternate, the other revision first (before, after, before, after, ...), so a
stretch of the hypervisor's steal falls on both sides; each side's figure is the median of its
runs. Both sides write their repositories under the same scratch folder (one file system).

The guarantees: the worktree and git's record of it are removed when the comparison ends, also
after a failed run or an interrupt; an unknown revision is an ``AgainstError`` before anything
runs (``resolve``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bench import median_run, retire, row, stolen
from bench.small_flowfiles import BATCH, S1, TIMED_RUNS, scenario_flowfiles, with_problems

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD = HERE / "against_child.py"
#: runs of each side in quick mode, a smoke test of the comparison (full mode: ``TIMED_RUNS``)
QUICK_RUNS = 1
#: seconds one child may take: its flow's own bound (``against_child.TIMEOUT``), Ray's start and stop
CHILD_TIMEOUT = 1200
#: the prefix of the worktree's temporary folder
WORKTREE_PREFIX = "bench-against-"


class AgainstError(Exception):
    """The comparison could not be made: an unknown revision, a checkout or a run that failed, or
    a run that imported its code from somewhere else than its side's checkout."""


@dataclass(frozen=True)
class Revision:
    """A revision as given on the command line and the commit it names (40 hex digits)."""

    name: str
    commit: str


def git(*args: str) -> subprocess.CompletedProcess[str]:
    """``git args`` in this repository, its output captured; the caller reads ``returncode``."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def resolve(name: str) -> Revision:
    """The commit ``name`` names in this repository; ``AgainstError`` if it names none."""
    done = None if name.startswith("-") else git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if done is None or done.returncode != 0:
        raise AgainstError(f"unknown revision {name!r}: it names no commit of the repository at {ROOT}")
    return Revision(name, done.stdout.strip())


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[Path]:
    """A detached checkout of ``commit`` in a new temporary folder; on leaving, however left,
    the folder and git's record of the worktree are removed."""
    path = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    try:
        added = git("worktree", "add", "--detach", str(path), commit)
        if added.returncode != 0:
            raise AgainstError(f"git worktree add {commit} failed: {added.stderr.strip()}")
        yield path
    finally:
        git("worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
        git("worktree", "prune")


def timed_run(checkout: Path, flowfiles: int, root: Path) -> dict:
    """One run of scenario 1's flow by the code of ``checkout``, in a child process
    (bench/against_child.py) whose flow repositories go to ``root``: ``measure_flow``'s result,
    once the child showed it imported ``flowactors`` and the scenario from ``checkout``."""
    done = subprocess.run([sys.executable, "-P", str(CHILD), str(flowfiles), str(BATCH), str(root)],
                          cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise AgainstError(f"the run of the code at {checkout} failed (exit {done.returncode}):\n"
                           f"{done.stderr.strip()[-3000:]}")
    try:
        result: dict = json.loads(lines[-1])
    except ValueError as err:
        raise AgainstError(f"the run of the code at {checkout} printed no result line: {lines[-1][:300]!r}") from err
    for what, file in result["code"].items():
        if not Path(file).resolve().is_relative_to(checkout.resolve()):
            raise AgainstError(f"the run of the code at {checkout} imported {what} from {file}")
    return result


def runs_in_turns(other: Path, runs: int, flowfiles: int, workdir: Path) -> tuple[list[dict], list[dict]]:
    """``runs`` runs of each side, in turns, the other revision's first: (before, after)."""
    before: list[dict] = []
    after: list[dict] = []
    for turn in range(runs):
        print(f"    --against: turn {turn + 1} of {runs}", file=sys.stderr, flush=True)
        before.append(timed_run(other, flowfiles, workdir / "before"))
        after.append(timed_run(ROOT, flowfiles, workdir / "after"))
    return before, after


def compare(revision: Revision, this: dict, quick: bool, size: int | None, workdir: Path) -> list[dict]:
    """Scenario 1's rows comparing this tree (``this``: the harness's git state, ``commit`` and
    ``dirty``) with ``revision``: each side's median and their ratio. ``workdir`` holds both
    sides' flow repositories and is set aside afterwards."""
    flowfiles = scenario_flowfiles(quick, size)
    runs = QUICK_RUNS if quick else TIMED_RUNS
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with worktree(revision.commit) as other:
            before, after = runs_in_turns(other, runs, flowfiles, workdir)
    finally:
        retire(workdir)
    return comparison_rows(revision, this, flowfiles, before, after)


def comparison_rows(revision: Revision, this: dict, flowfiles: int, before: list[dict],
                    after: list[dict]) -> list[dict]:
    """The three rows: the median of each side with its runs, and after / before."""
    old, old_rates = median_run(before)
    new, new_rates = median_run(after)
    old_name = f"{revision.name} (`{revision.commit[:12]}`)"
    new_name = f"this commit (`{this['commit'][:12]}`{', uncommitted changes included' if this['dirty'] else ''})"
    metric = "FlowFiles/s, always_sync off"

    def side(name: str, runs: list[dict], median: dict, rates: str) -> str:
        return with_problems(f"{name}: the median of {len(runs)} run(s) ({rates} FlowFiles/s, slowest first); "
                             f"the hypervisor's steal during each run, in the order run: {stolen(runs)}", median)

    return [
        row(S1, f"{metric}, before: {revision.name}", old["flowfiles_per_s"], None, "", "FlowFiles/s",
            side(old_name, before, old, old_rates)),
        row(S1, f"{metric}, after: this commit", new["flowfiles_per_s"], None, "", "FlowFiles/s",
            side(new_name, after, new, new_rates)),
        row(S1, f"this commit vs {revision.name}, {metric}", new["flowfiles_per_s"], old["flowfiles_per_s"],
            f"the same flow at {old_name}, same invocation", "FlowFiles/s",
            f"after / before, the two rows above: 1.0x = the same, above 1 this commit is faster; {new_name} "
            f"against {old_name}; {flowfiles:,} FlowFiles of 1 KiB, batches of {BATCH}, 1 task per processor, "
            f"always_sync off (the flow of the default row above); the runs in turns (before, after, before, "
            f"...), each a child process of its own with a new local Ray, importing flowactors and the bench's "
            f"scenario 1 from its side's checkout (a git worktree of {revision.commit[:12]}, or this tree): each "
            f"run is the first flow of its Ray, where the default row's runs share a session with the runs before "
            f"them, so these figures can differ from that row's"),
    ]
