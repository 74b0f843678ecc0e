"""The garbage collector's thresholds in the processes that move FlowFiles.

A batch of FlowFiles makes and drops tens of thousands of tuples, lists and dicts at every hop,
and CPython's default thresholds then collect often, mostly walking every live object of Ray and
of the flow; FlowFiles, records and batches form no cycles, so those collections find nothing to
free. ``THRESHOLDS`` makes young collections 14 times rarer, older ones 70 times and full ones
700 times: a cycle is still collected, only later. What it saves, and why the young generation
stays at 10,000, is measured in docs/performance.md (rows "the garbage collector ...").

Guarantees: the collector stays enabled; a process flowactors owns (a Ray actor of a flow) keeps
the thresholds for its life (``tune_own_process``); a process flowactors only runs in (a driver,
a notebook running an in-process flow) gets them while a flow runs and its own back after the last
one ends (``hold`` / ``release``).
"""

from __future__ import annotations

import gc
import threading

import ray

#: (young, older, full): a young collection every 10,000 new container objects, an older one
#: every 50 young ones, a full one every 100 older ones
THRESHOLDS = (10_000, 50, 100)

_lock = threading.Lock()
_holders = 0
_saved = gc.get_threshold()  # the process's own thresholds, taken at the first hold


def tune_own_process() -> None:
    """Apply ``THRESHOLDS`` for good when this process is a Ray actor's own; else do nothing."""
    if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
        gc.set_threshold(*THRESHOLDS)


def hold() -> None:
    """Apply ``THRESHOLDS`` until the matching ``release`` (nested and concurrent holds counted)."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*THRESHOLDS)
        _holders += 1


def release() -> None:
    """End one ``hold``; the last one puts back the thresholds the process had before the first."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            gc.set_threshold(*_saved)
