"""Writing a bench run down: bench/RESULTS.md for people, bench/results.json for tools.

The markdown has one table per scenario (flowactors, baseline, ratio = flowactors / baseline),
the run's command, date, machine and commit on top, and each scenario's details (profiles)
under its table. The JSON holds the same run, numbers unrounded.
"""

from __future__ import annotations

from numbers import Real
from pathlib import Path
from typing import Any

import orjson

from bench import ROW_KEYS

MARKDOWN = "RESULTS.md"
JSON = "results.json"


def number(value: Any) -> str:
    """A figure for a table: thousands separated, about three significant digits, never 1e+03."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    magnitude = abs(float(value))
    if magnitude == 0 or magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if magnitude >= 1 else f"{value:.3g}"


def ratio(value: Any) -> str:
    return "" if value is None else f"{number(value)}x"


def cell(text: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict]) -> str:
    lines = ["| metric | flowactors | baseline | ratio | unit | baseline is | notes |",
             "|---|---:|---:|---:|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(cell(v) for v in (
            r["metric"], number(r["flowactors"]), number(r["baseline"]), ratio(r["ratio"]), r["unit"],
            r["baseline_name"], r["notes"])) + " |")
    return "\n".join(lines)


def markdown(run: dict) -> str:
    machine, git = run["machine"], run["git"]
    dirty = f"dirty: {len(git['changes'])} changed file(s)" if git["dirty"] else "clean tree"
    out = [
        "# flowactors benchmarks",
        "",
        f"Written by `{run['command']}` ({run['mode']} mode) on {run['date']}, in {run['seconds']:.0f} s. "
        f"Each scenario shows the date and commit of the run that measured it (`--only` keeps the others).",
        "",
        f"- machine: {machine['cores']} cores (nproc), {machine['memory_gib']:.1f} GiB memory, {machine['cpu']}; "
        f"Python {machine['python']}, Ray {machine['ray']}",
        f"- commit of this invocation: `{git['commit']}` ({dirty})",
        "- ratio = flowactors / baseline, both measured in the same run on this machine. Absolute figures drift on "
        "shared machines; the ratios are what we track. For rates (/s) a higher ratio is better; for times "
        "(s, ms), memory and bytes a lower one is.",
        "",
    ]
    for scenario in run["scenarios"]:
        out.append(f"## {scenario['number']}. {scenario['title']}")
        out.append("")
        measured = f", {scenario['date']}, commit `{scenario['commit'][:12]}`" if "date" in scenario else ""
        dirty = " (dirty tree)" if scenario.get("dirty") else ""
        out.append(f"`{scenario['command']}` - {scenario['status']}, {scenario['seconds']:.0f} s{measured}{dirty}")
        out.append("")
        out.append(table(scenario["rows"]))
        out.append("")
        for r in scenario["rows"]:
            if r.get("details"):
                out.append(f"### {r['metric']}")
                out.append("")
                out.append(r["details"])
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def check_rows(rows: list[dict]) -> None:
    """Every row has the contract's keys (a scenario module that forgets one fails loudly)."""
    for r in rows:
        missing = [k for k in ROW_KEYS if k not in r]
        if missing:
            raise ValueError(f"result row {r!r} lacks {missing}")


def write(run: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write RESULTS.md and results.json for ``run`` into ``out_dir``; return their paths."""
    for scenario in run["scenarios"]:
        check_rows(scenario["rows"])
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / MARKDOWN, out_dir / JSON
    md_path.write_text(_relative(markdown(run)))
    json_path.write_text(_relative(orjson.dumps(run, option=orjson.OPT_INDENT_2).decode()) + "\n")
    return md_path, json_path


def _relative(text: str) -> str:
    """Paths inside the checkout written relative to it: results name no machine's folders."""
    root = str(Path(__file__).resolve().parent.parent)
    return text.replace(root + "/", "").replace(root, ".")
