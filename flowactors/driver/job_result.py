"""The line a cluster job prints last, which the CLI reads back from the job's logs: Ray-free, so
the CLI's cluster commands need not import the job (and Ray) to read it."""

from __future__ import annotations

import json

RESULT_PREFIX = "FLOWACTORS-RESULT "


def result(payload: dict) -> None:
    """Print ``payload`` as the job's result line."""
    print(RESULT_PREFIX + json.dumps(payload, default=str), flush=True)
