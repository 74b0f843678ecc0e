"""The background job thread shared by the controller, the cluster coordinator and the repository
services (``flowactors.engine.periodic``)."""

import threading
import time

from flowactors.engine.periodic import Periodic


def _until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_the_job_runs_every_interval_until_stopped_and_can_start_again():
    calls = []
    job = Periodic("test-job", 0.01, lambda: calls.append(1), lambda err: None)
    job.start()
    job.start()  # a second start is no second thread
    assert _until(lambda: len(calls) >= 3)
    assert sum(t.name == "test-job" for t in threading.enumerate()) == 1
    job.stop()
    assert not job.alive and not job.stopping
    stopped_at = len(calls)
    time.sleep(0.05)
    assert len(calls) == stopped_at
    job.start()
    assert _until(lambda: len(calls) > stopped_at)
    job.stop()


def test_a_failing_job_is_retried_after_retry_after_and_never_ends_the_thread():
    calls, errors = [], []

    def fails():
        calls.append(time.monotonic())
        raise OSError("the disk is full")

    job = Periodic("test-job", 0.01, fails, errors.append, retry_after=0.2)
    job.start()
    assert _until(lambda: len(calls) >= 2)
    job.stop()
    assert calls[1] - calls[0] >= 0.2  # not every interval
    assert [str(e) for e in errors] == ["the disk is full"] * len(calls)


def test_each_error_once_reports_a_repeated_error_once_until_a_call_succeeds():
    outcomes = iter(["a", "a", "a", "b", None, "a"])
    errors = []

    def job():
        outcome = next(outcomes, None)
        if outcome is not None:
            raise RuntimeError(outcome)

    job_thread = Periodic("test-job", 0.005, job, lambda err: errors.append(str(err)), each_error_once=True)
    job_thread.start()
    assert _until(lambda: len(errors) == 3)
    time.sleep(0.05)
    job_thread.stop()
    assert errors == ["a", "b", "a"]  # "a" again after the success in between


def test_stop_waits_for_the_job_under_way_and_a_looping_job_sees_it_stopping():
    started, seen_stopping = threading.Event(), []

    def job():
        started.set()
        while not periodic.stopping:
            time.sleep(0.005)
        time.sleep(0.05)  # the job's last work, done before stop returns
        seen_stopping.append(True)

    periodic = Periodic("test-job", 0.005, job, lambda err: None)
    periodic.start()
    assert started.wait(5)
    periodic.stop()
    assert seen_stopping == [True] and not periodic.alive


def test_a_stop_that_times_out_leaves_the_job_to_end_and_start_waits_for_it_or_says_why():
    """A job still running past ``join`` is not run twice at once: ``start`` waits for it up to
    ``join`` seconds again, then refuses with the job's name."""
    release = threading.Event()
    calls = []

    def stuck():
        calls.append(1)
        release.wait(5)

    periodic = Periodic("stuck-job", 0.005, stuck, lambda err: None, join=0.05)
    periodic.start()
    assert _until(lambda: calls)
    periodic.stop()  # returns after 0.05 s, the job still in its call
    assert periodic.alive and periodic.stopping
    try:
        periodic.start()
    except RuntimeError as err:
        assert "stuck-job cannot start again" in str(err)
    else:
        raise AssertionError("started a second thread beside the running job")
    release.set()
    assert _until(lambda: not periodic.alive)
    periodic.start()  # the old one ended: a new thread
    assert periodic.alive and not periodic.stopping
    periodic.stop()
    assert not periodic.alive
