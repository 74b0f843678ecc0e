"""CRON_DRIVEN scheduling: cron expressions as NiFi 2 reads them (``flowactors.sdk.cron``), their
validation in a flow, and the trigger loop firing once at each fire time (a clock injected)."""

from __future__ import annotations

from datetime import datetime

import pytest

from flowactors import Flow, FlowValidationError
from flowactors.engine.task import ProcessorTask
from flowactors.processors import GenerateFlowFile, UpdateAttribute
from flowactors.sdk.cron import CronError, parse
from flowactors.sdk.flow import ProcessorNode
from flowactors.sdk.settings import Settings
from flowactors.testing import ProcessorRunner

MONDAY = datetime(2026, 12, 7, 14, 0, 0)   # a Monday


def fires(expression: str, after: datetime = MONDAY, count: int = 3) -> list[datetime]:
    schedule, found, moment = parse(expression), [], after
    for _ in range(count):
        moment = schedule.next_after(moment)
        found.append(moment)
    return found


@pytest.mark.parametrize("expression, expected", [
    ("0 0 12 * * ?", [datetime(2026, 12, 8, 12), datetime(2026, 12, 9, 12)]),          # noon every day
    ("0 15 10 ? * *", [datetime(2026, 12, 8, 10, 15), datetime(2026, 12, 9, 10, 15)]),
    ("0 0/5 14 * * ?", [datetime(2026, 12, 7, 14, 5), datetime(2026, 12, 7, 14, 10)]),
    ("0 0-2 14 * * ?", [datetime(2026, 12, 7, 14, 1), datetime(2026, 12, 7, 14, 2)]),
    ("0 10,44 14 ? 3 WED", [datetime(2027, 3, 3, 14, 10), datetime(2027, 3, 3, 14, 44)]),
    ("0 15 10 ? * MON-FRI", [datetime(2026, 12, 8, 10, 15), datetime(2026, 12, 9, 10, 15)]),
    ("0 15 10 15 * ?", [datetime(2026, 12, 15, 10, 15), datetime(2027, 1, 15, 10, 15)]),
    ("0 15 10 L * ?", [datetime(2026, 12, 31, 10, 15), datetime(2027, 1, 31, 10, 15)]),
    ("0 15 10 L-2 * ?", [datetime(2026, 12, 29, 10, 15), datetime(2027, 1, 29, 10, 15)]),
    ("0 15 10 ? * 5L", [datetime(2026, 12, 25, 10, 15), datetime(2027, 1, 29, 10, 15)]),       # last Friday
    ("0 15 10 ? * FRI#3", [datetime(2026, 12, 18, 10, 15), datetime(2027, 1, 15, 10, 15)]),    # third Friday
    ("0 0 12 1/5 * ?", [datetime(2026, 12, 11, 12), datetime(2026, 12, 16, 12)]),
    ("0 11 11 11 11 ?", [datetime(2027, 11, 11, 11, 11), datetime(2028, 11, 11, 11, 11)]),
    ("0 0 9 15W * ?", [datetime(2026, 12, 15, 9), datetime(2027, 1, 15, 9)]),
    ("0 0 9 1W 8 ?", [datetime(2027, 8, 2, 9), datetime(2028, 8, 1, 9)]),        # 1 Aug 2027 is a Sunday
    ("0 0 9 LW 1 ?", [datetime(2027, 1, 29, 9), datetime(2028, 1, 31, 9)]),      # 31 Jan 2027 is a Sunday
    ("0 0 0 29 2 ?", [datetime(2028, 2, 29), datetime(2032, 2, 29)]),
    ("0 15 10 ? * 6L 2027-2028", [datetime(2027, 1, 30, 10, 15), datetime(2027, 2, 27, 10, 15)]),
    ("*/20 * * * * *", [datetime(2026, 12, 7, 14, 0, 20), datetime(2026, 12, 7, 14, 0, 40)]),
    ("0 0 8 ? * 0", [datetime(2026, 12, 13, 8), datetime(2026, 12, 20, 8)]),     # 0 and 7 are Sunday
    ("0 0 8 ? * 7", [datetime(2026, 12, 13, 8), datetime(2026, 12, 20, 8)]),
    ("0 0 8 ? * 1", [datetime(2026, 12, 14, 8), datetime(2026, 12, 21, 8)]),     # 1 is Monday (NiFi 2)
    ("@hourly", [datetime(2026, 12, 7, 15), datetime(2026, 12, 7, 16)]),
])
def test_fire_times_of_documented_examples(expression, expected):
    assert fires(expression, count=2) == expected


def test_a_day_that_never_comes_has_no_fire_time():
    assert parse("0 0 0 30 2 ?").next_after(MONDAY) is None
    assert parse("0 0 0 * * ? 2020").next_after(MONDAY) is None


@pytest.mark.parametrize("expression, problem", [
    ("0 0 12 * *", "it has 5 field(s), and takes 6"),
    ("0 0 25 * * ?", "hour field '25': 25 is outside 0-23"),
    ("0 0 12 ? * FUN", "day-of-week field 'FUN': 'FUN' is not a number from 0 to 7 or a name"),
    ("0 0 12 ? JANUARY *", "month field 'JANUARY'"),
    ("? 0 12 * * *", "second field '?': '?' is only for day-of-month and day-of-week"),
    ("0 0/0 12 * * *", "the step after '/' must be a whole number of at least 1"),
    ("0 50-10 * * * *", "the range runs backwards"),
    ("0 0 12 ? * 5#6", "the n of 'day#n' is 1 to 5"),
    ("0 0 12 L-40 * ?", "'L-n' takes n from 0 to 30"),
])
def test_a_bad_expression_is_one_line_naming_the_field(expression, problem):
    with pytest.raises(CronError) as caught:
        parse(expression)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"'{expression}' is not a cron expression: ")
    assert problem in message


def cron_flow(schedule: str, strategy: str = "CRON_DRIVEN") -> Flow:
    flow = Flow("cron")
    generate = flow.add(GenerateFlowFile, "generate", scheduling_strategy=strategy, run_schedule=schedule)
    update = flow.add(UpdateAttribute, "update", auto_terminate=["success"])
    flow.connect(generate, update)
    return flow


def test_a_cron_driven_processor_validates_and_round_trips():
    flow = cron_flow("0 0/5 * * * ?").validate()
    again = Flow.from_json(flow.to_json())
    node = again.processors["generate"]
    assert (node.scheduling_strategy, node.run_schedule) == ("CRON_DRIVEN", "0 0/5 * * * ?")
    assert again.processors["update"].scheduling_strategy == "TIMER_DRIVEN"
    assert again.to_dict() == flow.to_dict()


def test_a_bad_cron_schedule_or_strategy_is_one_problem():
    with pytest.raises(FlowValidationError) as caught:
        cron_flow("0 0 12 * *").validate()
    assert caught.value.problems == ["processor 'generate': run_schedule (CRON_DRIVEN): '0 0 12 * *' is not a cron "
                                     "expression: it has 5 field(s), and takes 6 (second minute hour day-of-month "
                                     "month day-of-week) or 7 (a year after them)"]
    with pytest.raises(FlowValidationError) as caught:
        cron_flow("1 sec", strategy="EVENT_DRIVEN").validate()
    assert caught.value.problems == ["processor 'generate': scheduling_strategy must be one of TIMER_DRIVEN, "
                                     "CRON_DRIVEN, not 'EVENT_DRIVEN'"]
    with pytest.raises(FlowValidationError) as caught:   # a timer's schedule is a duration
        cron_flow("0 0 12 * * ?", strategy="TIMER_DRIVEN").validate()
    assert caught.value.problems[0].startswith("processor 'generate': run_schedule: ")


# ---------------------------------------------------------------------------------- the trigger loop
class FakeClock:
    """The task's clock and wait: waiting moves the time on at once (never stopped)."""

    def __init__(self, start: datetime):
        self.now = start.timestamp()
        self.waited: list[float] = []

    def time(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waited.append(seconds)
        self.now += seconds
        return False


def cron_task(processor_type, schedule: str, properties: dict | None = None, start: datetime = MONDAY):
    runner = ProcessorRunner(processor_type, properties or {}, name="cron")
    node = ProcessorNode("cron", processor_type, dict(properties or {}), scheduling_strategy="CRON_DRIVEN",
                         run_schedule=schedule)
    task = ProcessorTask("test", node, 0, runner.backend, Settings())
    task.processor.on_scheduled(task.context)   # as the task's thread does first (``cycle`` is its loop)
    clock = FakeClock(start)
    task.clock, task.wait = clock.time, clock.wait
    fired: list[datetime] = []
    trigger = task.trigger
    task.trigger = lambda: (fired.append(datetime.fromtimestamp(clock.now)), trigger())
    return runner, task, fired


def test_a_cron_driven_source_triggers_once_at_each_fire_time():
    runner, task, fired = cron_task(GenerateFlowFile, "0/10 * * * * ?", {"Batch Size": "2"},
                                    start=datetime(2026, 12, 7, 14, 0, 3))
    for _ in range(3):
        task.cycle()
    # once a fire time, though it found work each time (a timer-driven one would go on at once)
    assert fired == [datetime(2026, 12, 7, 14, 0, s) for s in (10, 20, 30)]
    task.backend.finish_delivery()
    assert len(runner.output("success")) == 6


def test_a_cron_driven_processor_without_input_skips_the_fire_time():
    runner, task, fired = cron_task(UpdateAttribute, "0 0 * * * ?")
    task.cycle()   # 15:00: nothing queued, not triggered
    runner.enqueue(b"x")
    task.cycle()   # 16:00
    assert fired == [datetime(2026, 12, 7, 16)]
    task.backend.finish_delivery()
    assert len(runner.output("success")) == 1


def test_an_expression_with_no_fire_time_left_never_triggers_and_says_so_once():
    runner, task, fired = cron_task(GenerateFlowFile, "0 0 0 30 2 ?")
    task.cycle()
    task.cycle()
    assert fired == []
    [error] = list(task.errors)
    assert error["where"] == "schedule"
    assert "the cron expression '0 0 0 30 2 ?' has no fire time after 2026-12-07 14:00:00" in error["error"]
