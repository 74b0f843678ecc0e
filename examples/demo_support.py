"""What the example scripts share: run the flow from a clean slate and print what it did."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from flowactors import Flow, run_flow


def run_demo(flow: Flow, out: Path, repository: Path, summarize: Callable[[dict], str]) -> int:
    """Run ``flow`` with ``out`` and ``repository`` emptied first; print ``summarize(final)`` and the
    processors' recent errors. The exit code: 1 if the run timed out, else 0."""
    for folder in (out, repository):
        if folder.exists():
            shutil.rmtree(folder)
    started = time.monotonic()
    final = run_flow(flow, repository=repository, show_status=sys.stdout.isatty(), timeout=300)
    final["seconds"] = time.monotonic() - started
    lines = [summarize(final)]
    errors = [f"  {p['name']}: {e['error']}" for p in final["processors"] for e in p["recent_errors"]]
    if errors:
        lines += ["errors:", *errors]
    print("\n".join(lines))
    return 1 if final.get("timed_out") else 0
