"""How often ``run_flow`` looks at a running flow: each look is several Ray calls on the Ray engine
(the controller asks every executor), so a flow that keeps working is looked at every
``BUSY_POLL_INTERVAL``; one that went quiet, or a run waiting for its ``until``, every
``POLL_INTERVAL``, so ending idle still takes ``IDLE_CHECKS`` quick looks. Run on the in-process
engine, where the looks are the driver's own calls."""

from __future__ import annotations

import math
import time

import pytest

from flowactors import Flow, Processor, Relationship
from flowactors.driver import watch as watcher
from flowactors.driver.running import processor_totals, run_flow
from flowactors.driver.watch import BUSY_POLL_INTERVAL, IDLE_CHECKS, POLL_INTERVAL, next_look_in

COUNT = 60
#: a gap between two looks this long or longer is a busy wait; a quick one is far shorter
LONG_GAP = 0.8 * BUSY_POLL_INTERVAL


class Trickle(Processor):
    """A source that works for about two seconds: a FlowFile every 30 ms, ``COUNT`` in all."""

    relationships = [Relationship("success")]
    input_required = False

    def on_trigger(self, context, session):
        made = getattr(self, "made", 0)
        if made >= COUNT:
            context.yield_()
            return
        time.sleep(0.03)
        session.transfer(session.write_bytes(session.create(), b"x"), "success")
        self.made = made + 1


def trickle_flow(name: str) -> Flow:
    flow = Flow(name)
    flow.add(Trickle, "trickle", auto_terminate=["success"])
    return flow


@pytest.fixture
def looks(monkeypatch) -> list[float]:
    """When each look (the driver's ``status`` call) was made."""
    made: list[float] = []
    call_now = watcher.call_now

    def counting(link, method, *args):
        if method.__name__ == "status":
            made.append(time.monotonic())
        return call_now(link, method, *args)

    monkeypatch.setattr(watcher, "call_now", counting)
    return made


def gaps(looks: list[float]) -> list[float]:
    return [b - a for a, b in zip(looks, looks[1:])]


def test_a_working_flow_is_looked_at_every_busy_interval_and_found_idle_by_quick_looks(tmp_path, looks):
    final = run_flow(trickle_flow("looks-busy"), tmp_path / "repository", engine="in-process", timeout=120)
    assert processor_totals(final)["trickle"]["commits"] == COUNT and not final.get("timed_out")
    between = gaps(looks)
    assert sum(gap >= LONG_GAP for gap in between) >= 2, between  # the flow worked about two seconds
    # the look that saw the last work waits long; after it, quick looks until idle
    assert all(gap < LONG_GAP for gap in between[-(IDLE_CHECKS - 1):]), between
    assert len(looks) < 2.0 / POLL_INTERVAL, between


def test_a_run_with_until_is_looked_at_quickly_while_the_flow_works(tmp_path, looks):
    def all_made(status: dict) -> bool:
        return sum(p["commits"] for p in status["processors"]) >= COUNT

    final = run_flow(trickle_flow("looks-until"), tmp_path / "repository", engine="in-process", timeout=120,
                     until=all_made)
    assert processor_totals(final)["trickle"]["commits"] == COUNT and not final.get("timed_out")
    between = gaps(looks)
    assert len(between) >= 10 and all(gap < LONG_GAP for gap in between), between


def test_a_busy_wait_never_runs_past_the_runs_duration_or_timeout():
    assert next_look_in(True, math.inf) == BUSY_POLL_INTERVAL
    assert next_look_in(True, 0.25) == 0.25  # the run ends in 0.25 s: the last look is then
    assert next_look_in(True, -1.0) == POLL_INTERVAL  # past its end: looked at again at once, as before
    assert next_look_in(False, math.inf) == POLL_INTERVAL
