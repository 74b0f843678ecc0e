"""The garbage collector's thresholds: tuned in the processes flowactors owns, lent to the
process an in-process flow runs in and given back (``flowactors.engine.gc_policy``). The Ray
actors' side is checked on a running flow in tests/test_placement.py."""

from __future__ import annotations

import gc

import pytest

from flowactors import Flow
from flowactors.engine import gc_policy
from flowactors.driver.running import processor_totals, run_flow
from flowactors.processors import GenerateFlowFile, UpdateAttribute


@pytest.fixture
def own_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_holds_nest_and_the_last_release_gives_the_thresholds_back(own_thresholds):
    gc_policy.hold()
    gc_policy.hold()
    assert gc.get_threshold() == gc_policy.THRESHOLDS
    gc_policy.release()
    assert gc.get_threshold() == gc_policy.THRESHOLDS  # another flow still runs
    gc_policy.release()
    assert gc.get_threshold() == own_thresholds
    gc_policy.release()  # one release too many changes nothing
    assert gc.get_threshold() == own_thresholds
    assert gc.isenabled()


def test_a_process_that_is_no_actor_keeps_its_thresholds(own_thresholds):
    gc_policy.tune_own_process()
    assert gc.get_threshold() == own_thresholds


def test_an_in_process_flow_runs_with_the_thresholds_and_gives_them_back(own_thresholds, tmp_path):
    seen = []
    flow = Flow("gc-in-process")
    flow.add(GenerateFlowFile, "generate", properties={"File Size": "10 B", "Batch Size": "50",
                                                         "Max FlowFiles": "200"})
    flow.add(UpdateAttribute, "update", properties={"seen": "yes"}, auto_terminate=["success"])
    flow.connect("generate", "update")
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=120,
                     on_status=lambda _status: seen.append(gc.get_threshold()))
    assert processor_totals(final)["update"]["flowfiles_in"] == 200
    assert seen and set(seen) == {gc_policy.THRESHOLDS}
    assert gc.get_threshold() == own_thresholds
