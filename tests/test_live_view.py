"""``flowactors run`` on a real terminal (tmux): the live view refreshes in place, and a processor's
log line printed during the run stays above it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOG_LINE = "SLOW-PROCESSOR-SCHEDULED"

FLOW = textwrap.dedent(f'''
    import logging
    import time

    from flowactors import Flow, Processor, Relationship
    from flowactors.processors import GenerateFlowFile

    class Slow(Processor):
        """Takes a FlowFile at a time, slowly: the counts move while the view is up."""
        relationships = [Relationship("success")]

        taken = 0

        def on_trigger(self, context, session):
            flowfile = session.get()
            if flowfile is not None:
                time.sleep(0.25)
                self.taken += 1
                if self.taken == 3:  # while the live view is up
                    logging.getLogger("demo.slow").info("{LOG_LINE}")
                session.transfer(flowfile, "success")

    flow = Flow("live-view")
    generate = flow.add(GenerateFlowFile, "generate", properties={{"Batch Size": 1, "Max FlowFiles": 30}})
    slow = flow.add(Slow, "slow", auto_terminate=["success"])
    flow.connect(generate, slow)
''')


def capture(tmux: list[str]) -> list[str]:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", "run"], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def slow_row(lines: list[str]) -> str | None:
    return next((line for line in lines if line.startswith("│ slow ")), None)


@pytest.mark.ray
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_live_view_refreshes_in_place_below_the_log(tmp_path):
    (tmp_path / "flow.py").write_text(FLOW)
    tmux = ["tmux", "-L", f"flowactors-test-{os.getpid()}"]
    command = (f"cd {tmp_path} && PYTHONPATH={ROOT} {sys.executable} -m flowactors.cli run flow.py "
               f"--repository repo --timeout 200; echo EXIT=$?; sleep 60")
    # a user's terminal: its size is the pane's (pytest's environment says COLUMNS=80)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    subprocess.run([*tmux, "new-session", "-d", "-s", "run", "-x", "200", "-y", "60", command], check=True, env=env)
    try:
        rows: list[str] = []
        seen_log_with_table = False
        deadline = time.monotonic() + 250
        while time.monotonic() < deadline:
            lines = capture(tmux)
            if any(line.startswith("EXIT=") for line in lines):
                break
            row = slow_row(lines)
            if row is not None:
                # one table on the screen, however often it was redrawn: refreshed in place
                assert sum("┃ processor" in line for line in lines) == 1, "\n".join(lines)
                header = next(i for i, line in enumerate(lines) if "┃ processor" in line)
                logged = [i for i, line in enumerate(lines) if LOG_LINE in line]
                if logged:  # the processor's log line, printed while the view was up, is kept above it
                    assert len(logged) == 1 and logged[0] < header, "\n".join(lines)
                    seen_log_with_table = True
                if not rows or rows[-1] != row:
                    rows.append(row)
            time.sleep(0.7)
        assert len(rows) >= 3, f"the live view's counts did not change between captures: {rows}"
        assert seen_log_with_table, "the log line never showed above the live view:\n" + "\n".join(capture(tmux))
        final = capture(tmux)
        assert "EXIT=0" in final, "\n".join(final)
        # the live view is gone, the final table printed once, the log line still above it
        assert sum("┃ processor" in line for line in final) == 1, "\n".join(final)
        logged = [i for i, line in enumerate(final) if LOG_LINE in line]
        assert logged and logged[0] < next(i for i, line in enumerate(final) if "┃ processor" in line)
        taken = [int(row.split("│")[3]) for row in [*rows, slow_row(final)]]
        assert taken == sorted(taken) and taken[-1] > taken[0], rows
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
