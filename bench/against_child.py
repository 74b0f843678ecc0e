"""One timed run of scenario 1's flowactors flow by the code of one checkout: the child process
``python -m bench --against`` (bench/against.py) starts for each run of either side.

Run as ``python -P <this file> FLOWFILES BATCH WORKDIR`` with ``cwd`` and ``PYTHONPATH`` set to
the checkout to measure (this commit's tree, or a worktree of the other revision). ``-P`` keeps
this file's folder off ``sys.path``, so ``bench`` and ``flowactors`` below are imported from that
checkout, and Ray's workers, started from this process, inherit the same ``PYTHONPATH``. Only this
driver comes from the tree that runs the bench.

It calls the smallest entry points of scenario 1 that both sides have, with the same signatures
since 8af2906 (the revision before the refactoring): ``bench.ray_session`` (a new local Ray of
this process's own), ``bench.small_flowfiles.small_flow`` (the flow) and
``bench.small_flowfiles.measure_flow`` (one run to idle, timed from its provenance: the first
FlowFile's creation to the last event; Ray and actor start-up and the stop are outside). A
revision whose bench lacks them fails here with the import or call's error on stderr.

The last line of stdout is one JSON object: ``measure_flow``'s result (``flowfiles_per_s``,
``seconds``, ``problems``, ``steal_percent``, ...) and ``code``, the files ``flowactors`` and the
scenario were imported from, so the parent can check they are the checkout's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import flowactors
from bench import ray_session, small_flowfiles

#: seconds a run may take before ``run_flow`` gives up on it (scenario 1's own runs' bound)
TIMEOUT = 900


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flowfiles", type=int)
    parser.add_argument("batch", type=int)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)
    with ray_session():
        flow = small_flowfiles.small_flow(args.flowfiles, args.batch, always_sync=False, name="bench-against")
        result = small_flowfiles.measure_flow(flow, args.flowfiles, args.workdir, timeout=TIMEOUT)
    code = {"flowactors": flowactors.__file__, "scenario": small_flowfiles.__file__}
    print(json.dumps({**result, "code": code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
