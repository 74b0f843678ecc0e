"""Wait and Notify: NiFi's TestWait, TestNotify and TestWaitNotifyProtocol cases (the clock moved
instead of sleeping; Wait's signals made with ``notify`` as NiFi's tests make them with the
protocol), the retries on a concurrent change, and both in one NiFi-shaped flow imported and run."""

from __future__ import annotations

import json

import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import Notify, Wait
from flowactors.processors.wait_notify import Signal, SignalConflict, get_signal, notify
from flowactors.sdk.map_cache import AtomicDistributedMapCacheClient, MapCacheError
from flowactors.sdk.services import ControllerService
from flowactors.services import DistributedMapCacheClientService, DistributedMapCacheServer
from flowactors.testing import ProcessorRunner
from nifi_flows import STANDARD, connection, group, map_cache_services, processor, snapshot

SERVICES = {"client": (DistributedMapCacheClientService, {"Server Hostname": "localhost"}),
            "server": (DistributedMapCacheServer, {})}
WAIT_OUT = ("success", "wait", "expired", "failure")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def waiting(services=SERVICES, engine: str = "in-process", **properties) -> tuple[ProcessorRunner, Clock]:
    runner = ProcessorRunner(Wait, {"Release Signal Identifier": "${releaseSignalAttribute}",
                                    "Distributed Cache Service": "client", **properties}, services=services,
                             engine=engine)
    clock = runner.processor.clock = Clock()
    return runner, clock


def cache_of(runner: ProcessorRunner) -> AtomicDistributedMapCacheClient:
    return runner.context.service("Distributed Cache Service")


def counts(runner: ProcessorRunner, relationships=WAIT_OUT) -> tuple[int, ...]:
    return tuple(len(runner.output(r)) for r in relationships)


# ---------------------------------------------------------------------------------- the protocol
def test_release_turns_counts_into_releases_as_nifi_s_protocol_does():
    """NiFi's TestWaitNotifyProtocol.testReleaseCandidate: ten candidates, the default counter set
    to each count in turn; (count, target, per target) -> (released, count left, releasable left)."""
    signal = Signal("s")
    steps = [(None, 3, 1, 0, 0, 0), (1, 3, 1, 0, 1, 0), (3, 3, 1, 1, 0, 0), (6, 3, 1, 2, 0, 0), (11, 3, 1, 3, 2, 0),
             (6, 3, 2, 4, 0, 0), (50, 3, 2, 10, 2, 22)]
    for count, target, per_target, released, left, releasable in steps:
        if count is not None:
            signal.counts["default"] = count
        assert signal.release("default", target, per_target, 10) == released
        assert (signal.count("default"), signal.releasable) == (left, releasable)


def test_release_on_the_total_books_what_it_consumed_under_consumed():
    signal = Signal("s", {"a": 1, "b": 1})
    assert signal.release(None, 3, 1, 10) == 0 and signal.total == 2
    signal.counts["b"] = 5
    assert signal.release(None, 3, 1, 10) == 2
    assert signal.counts == {"a": 1, "b": 5, "consumed": -6} and signal.total == 0


def test_each_notify_is_one_revision_and_attributes_accumulate():
    runner = notifying()
    cache = cache_of(runner)
    notify(cache, "s", {"a": 1}, {"key1": "value1"})
    notify(cache, "s", {"a": 1}, {"key1": "again", "key2": "value2"})
    notify(cache, "s", {"a": 10, "b": 2}, {})
    entry = cache.fetch("s")
    assert entry.revision == 2
    assert json.loads(entry.value) == {"counts": {"a": 12, "b": 2}, "attributes": {"key1": "again", "key2": "value2"},
                                       "releasableCount": 0}


# ---------------------------------------------------------------------------------- Wait
def test_a_flowfile_without_a_signal_waits_stamped_with_its_start():
    runner, clock = waiting()
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    [flowfile] = runner.output("wait")
    assert counts(runner) == (0, 1, 0, 0)
    assert flowfile.attributes["wait.start.timestamp"] == str(int(clock.now * 1000))


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_keep_in_the_upstream_connection_leaves_it_queued_and_expires_it_from_its_first_look(engine):
    runner, clock = waiting(engine=engine, **{"Wait Mode": "Keep in the upstream connection",
                                              "Expiration Duration": "10 sec"})
    runner.enqueue(b"held", {"releaseSignalAttribute": "1"})
    runner.run(stop=False)
    assert counts(runner) == (0, 0, 0, 0) and runner.input_count == 1
    assert runner.context.take_yield_request()          # nothing to do until time passes
    clock.now += 11
    runner.run()
    assert counts(runner) == (0, 0, 1, 0) and runner.contents("expired") == [b"held"]
    assert "wait.start.timestamp" not in runner.output("expired")[0].attributes


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_keep_in_the_upstream_connection_looks_again_and_again_without_an_error(engine):
    """A kept FlowFile comes back as it was taken (without wait.start.timestamp): its later looks
    take the start Wait remembers (they once raised KeyError on it at each trigger)."""
    runner, clock = waiting(engine=engine, **{"Wait Mode": "Keep in the upstream connection",
                                              "Expiration Duration": "10 sec", "Target Signal Count": "5"})
    notify(cache_of(runner), "1", {"default": 1}, {})                 # a signal, short of its target
    runner.enqueue(b"held", {"releaseSignalAttribute": "1"})
    for _ in range(3):
        runner.run(stop=False)
        clock.now += 4
    assert counts(runner) == (0, 0, 0, 0) and runner.input_count == 1 and runner.errors == []
    runner.run()                                                      # 12 s after its first look
    assert counts(runner) == (0, 0, 1, 0) and runner.contents("expired") == [b"held"]


def test_a_flowfile_waiting_longer_than_the_expiration_duration_expires():
    runner, clock = waiting(**{"Expiration Duration": "100 ms"})
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    started = runner.output("wait")[0].attributes
    clock.now += 0.2
    runner.enqueue(b"", started)
    runner.run()
    [expired] = runner.output("expired")
    assert "wait.start.timestamp" not in expired.attributes


def test_the_counters_of_an_expired_flowfile_s_signal_are_copied():
    runner, clock = waiting(**{"Expiration Duration": "100 ms", "Target Signal Count": "5"})
    notify(cache_of(runner), "1", {"a": 1, "b": 2}, {})
    runner.enqueue(b"", {"releaseSignalAttribute": "1", "wait.start.timestamp": str(int(clock.now * 1000) - 500)})
    runner.run()
    [expired] = runner.output("expired")
    assert {k: v for k, v in expired.attributes.items() if k.startswith("wait.")} == {
        "wait.counter.a": "1", "wait.counter.b": "2", "wait.counter.total": "3"}


@pytest.mark.parametrize("start", ["blue bunny", "--5", "\u00b2"])   # the last two once raised ValueError
def test_a_wait_start_that_is_not_a_number_goes_to_failure_penalized(start):
    runner, _ = waiting()
    runner.enqueue(b"", {"releaseSignalAttribute": "1", "wait.start.timestamp": start})
    runner.run()
    assert counts(runner) == (0, 0, 0, 1) and runner.output("failure")[0].penalized_until > 0


def test_a_flowfile_without_a_release_signal_goes_to_failure():
    runner, _ = waiting()
    runner.enqueue(b"", {})
    runner.run()
    assert counts(runner) == (0, 0, 0, 1)


class Failing(ControllerService, AtomicDistributedMapCacheClient):
    def fetch(self, key):
        raise MapCacheError("the map cache server on port 4557 could not be reached: gone")


def test_a_failing_cache_sends_the_flowfiles_to_failure(caplog):
    runner, _ = waiting(services={"client": (Failing, {})})
    runner.enqueue(b"", {"releaseSignalAttribute": "2"})
    runner.run()
    assert counts(runner) == (0, 0, 0, 1) and "could not be reached: gone" in caplog.text


def test_the_wait_penalty_skips_a_signal_that_released_nothing_until_it_passes():
    runner, clock = waiting(**{"Wait Penalty Duration": "1 sec", "Wait Buffer Count": "5"})
    runner.enqueue(b"a1", {"releaseSignalAttribute": "a"})
    runner.run(stop=False)
    assert runner.contents("wait") == [b"a1"]
    runner.enqueue(b"a2", {"releaseSignalAttribute": "a"})
    runner.enqueue(b"b1", {"releaseSignalAttribute": "b"})
    runner.run(stop=False)                                          # a is penalized: b is served
    assert runner.contents("wait") == [b"a1", b"b1"] and runner.input_count == 1
    clock.now += 2
    runner.run()
    assert runner.contents("wait") == [b"a1", b"b1", b"a2"]


@pytest.mark.parametrize("mode, both", [("Replace if present", "notifyValue"), ("Keep original", "flowFileValue")])
def test_the_signal_s_attributes_are_copied_as_the_attribute_copy_mode_says(mode, both):
    runner, _ = waiting(**{"Attribute Copy Mode": mode})
    notify(cache_of(runner), "1", {"default": 1}, {"both": "notifyValue", "notify.only": "notifyValue",
                                                   "uuid": "notifyUuid"})
    flowfile = runner.enqueue(b"", {"releaseSignalAttribute": "1", "both": "flowFileValue",
                                    "wait.only": "waitValue"})
    runner.run()
    [released] = runner.output("success")
    assert released.attributes["both"] == both and released.attributes["uuid"] == flowfile.uuid
    assert released.attributes["notify.only"] == "notifyValue" and released.attributes["wait.only"] == "waitValue"
    assert released.attributes["wait.counter.default"] == "1" and "wait.start.timestamp" not in released.attributes
    assert cache_of(runner).fetch("1") is None                     # used up: removed


def test_the_total_of_all_counters_reaching_the_target_releases():
    runner, _ = waiting(**{"Target Signal Count": "3"})
    cache = cache_of(runner)
    notify(cache, "1", {"counter-A": 1}, {})
    notify(cache, "1", {"counter-B": 1}, {})
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    assert counts(runner) == (0, 1, 0, 0)
    notify(cache, "1", {"counter-C": 1}, {})
    runner.enqueue(b"", runner.output("wait")[0].attributes)
    runner.run()
    [released] = runner.output("success")
    assert {k: v for k, v in released.attributes.items() if k.startswith("wait.")} == {
        "wait.counter.counter-A": "1", "wait.counter.counter-B": "1", "wait.counter.counter-C": "1",
        "wait.counter.total": "3"}
    assert cache.fetch("1") is None


def test_a_named_counter_reaching_the_target_releases_and_keeps_the_other_counts():
    runner, _ = waiting(**{"Target Signal Count": "2", "Signal Counter Name": "counter-B"})
    cache = cache_of(runner)
    notify(cache, "1", {"counter-A": 1, "counter-B": 1}, {})
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    assert counts(runner) == (0, 1, 0, 0)
    notify(cache, "1", {"counter-B": 1}, {})
    runner.enqueue(b"", runner.output("wait")[0].attributes)
    runner.run()
    assert counts(runner) == (1, 1, 0, 0)
    signal = get_signal(cache, "1")
    assert (signal.counts, signal.releasable) == ({"counter-A": 1, "counter-B": 0}, 0)


def test_a_named_counter_is_consumed_then_its_releasable_count_then_the_signal_is_removed():
    """NiFi's TestWait.testDecrementCache: a counter of 2, target 1: the first FlowFile consumes
    both counts (one releasable left), the second uses that and the signal is gone."""
    runner, _ = waiting(**{"Signal Counter Name": "${signalCounterName}", "Target Signal Count": "1"})
    cache = cache_of(runner)
    for _ in range(2):
        notify(cache, "key", {"counter": 1}, {"both": "notifyValue", "uuid": "notifyUuid",
                                              "notify.only": "notifyValue"})
    attributes = {"releaseSignalAttribute": "key", "signalCounterName": "counter", "wait.only": "waitValue",
                  "both": "waitValue"}
    runner.enqueue(b"content", attributes)
    runner.run(stop=False)
    [first] = runner.output("success")
    assert "wait.start.timestamp" not in first.attributes and first.attributes["wait.counter.counter"] == "2"
    assert first.attributes["both"] == "waitValue" and first.attributes["notify.only"] == "notifyValue"
    signal = get_signal(cache, "key")
    assert (signal.count("counter"), signal.releasable) == (0, 1)
    runner.enqueue(b"content", attributes)
    runner.run()
    second = runner.output("success")[1]
    assert second.attributes["wait.counter.counter"] == "0" and cache.fetch("key") is None


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_the_wait_buffer_count_bounds_a_trigger_and_other_signals_stay_queued(engine):
    runner, _ = waiting(engine=engine, **{"Wait Buffer Count": "2"})
    notify(cache_of(runner), "1", {"default": 3}, {})
    for name in ("one", "other", "two", "three"):
        runner.enqueue(name.encode(), {"releaseSignalAttribute": "x" if name == "other" else "1"})
    runner.run(stop=False)
    assert sorted(runner.contents("success")) == [b"one", b"two"] and runner.input_count == 2
    runner.run(2)
    assert sorted(runner.contents("success")) == [b"one", b"three", b"two"]
    assert runner.contents("wait") == [b"other"]
    assert cache_of(runner).fetch("1") is None


def test_one_target_reached_releases_the_releasable_flowfile_count():
    runner, _ = waiting(**{"Wait Buffer Count": "5", "Releasable FlowFile Count": "3"})
    notify(cache_of(runner), "1", {"default": 1}, {})
    for _ in range(5):
        runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    assert counts(runner) == (3, 2, 0, 0)
    assert cache_of(runner).fetch("1") is None


def test_a_releasable_count_of_zero_is_a_gate_open_while_the_target_is_reached():
    runner, _ = waiting(**{"Wait Buffer Count": "5", "Releasable FlowFile Count": "0"})
    cache = cache_of(runner)
    notify(cache, "1", {"default": 1}, {})
    for _ in range(3):
        runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run(stop=False)
    assert counts(runner) == (3, 0, 0, 0)
    assert get_signal(cache, "1").counts == {"default": 1}         # the gate stays open
    notify(cache, "1", {"default": 0}, {})                           # a delta of 0 closes it
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    assert counts(runner) == (3, 1, 0, 0)


@pytest.mark.parametrize("target", ["many", "-1", "\u00b2"])   # "\u00b2" (2 superscript) once raised ValueError
def test_a_target_count_that_is_not_a_number_goes_to_failure(target):
    runner, _ = waiting(**{"Target Signal Count": "${target}"})
    notify(cache_of(runner), "1", {"default": 1}, {})
    runner.enqueue(b"", {"releaseSignalAttribute": "1", "target": target})
    runner.run()
    assert counts(runner) == (0, 0, 0, 1)


@pytest.mark.parametrize("kind, properties, problem", [
    (Wait, {"Target Signal Count": "many"}, "property 'Target Signal Count'"),
    (Wait, {"Releasable FlowFile Count": "-1"}, "property 'Releasable FlowFile Count'"),
    (Notify, {"Signal Counter Delta": "one"}, "property 'Signal Counter Delta'"),
    (Notify, {"Attribute Cache Regular Expression": "("}, "property 'Attribute Cache Regular Expression'")])
def test_a_literal_count_or_regex_that_does_not_parse_is_refused_when_the_flow_is_validated(kind, properties,
                                                                                             problem):
    with pytest.raises(ValueError, match=problem):
        ProcessorRunner(kind, {"Release Signal Identifier": "${id}", "Distributed Cache Service": "client",
                               **properties}, services=SERVICES)


class Racing(DistributedMapCacheClientService):
    """A client whose replace and remove always lose to another processor's change."""

    def replace(self, entry):
        return False

    def remove(self, key):
        return False


@pytest.mark.parametrize("releasable", ["1", "2"])   # 1: the signal used up (removed); 2: progressed (replaced)
def test_a_signal_changed_meanwhile_rolls_the_trigger_back(releasable):
    services = {**SERVICES, "client": (Racing, {"Server Hostname": "localhost"})}
    runner, _ = waiting(services=services, **{"Releasable FlowFile Count": releasable})
    cache_of(runner).put("1", Signal("1", {"default": 1}).to_json())
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    with pytest.raises(SignalConflict, match="signal '1' was changed"):
        runner.run()
    assert counts(runner) == (0, 0, 0, 0) and runner.input_count == 1


# ---------------------------------------------------------------------------------- Notify
def notifying(services=SERVICES, engine: str = "in-process", **properties) -> ProcessorRunner:
    return ProcessorRunner(Notify, {"Release Signal Identifier": "${releaseSignalAttribute}",
                                    "Distributed Cache Service": "client", **properties}, services=services,
                           engine=engine)


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_notify_counts_the_default_counter_and_marks_the_flowfile(engine):
    runner = notifying(engine=engine)
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    [notified] = runner.output("success")
    assert notified.attributes["notified"] == "true"
    cached = cache_of(runner).fetch("1")
    assert json.loads(cached.value) == {"counts": {"default": 1}, "attributes": {}, "releasableCount": 0}


def test_notify_counts_each_counter_named_by_an_attribute_one_trigger_each():
    runner = notifying(**{"Signal Counter Name": "${status}"})
    for status in ("success", "success", "failure"):
        runner.enqueue(b"", {"releaseSignalAttribute": "1", "status": status})
    runner.run(3)
    assert get_signal(cache_of(runner), "1").counts == {"success": 2, "failure": 1}


def test_a_signal_buffer_counts_a_batch_in_one_change():
    runner = notifying(**{"Signal Counter Name": "${status}", "Signal Buffer Count": "4"})
    for signal, status in (("1", "success"), ("1", "failure"), ("2", "success"), ("1", "success")):
        runner.enqueue(b"", {"releaseSignalAttribute": signal, "status": status})
    runner.run()
    cache = cache_of(runner)
    assert get_signal(cache, "1").counts == {"success": 2, "failure": 1}
    assert get_signal(cache, "2").counts == {"success": 1}
    assert cache.fetch("1").revision == 0                             # one change of signal 1


def test_the_delta_comes_from_an_attribute_and_zero_resets_the_counter():
    runner = notifying(**{"Signal Counter Delta": "${delta}", "Signal Buffer Count": "3"})
    for delta in ("5", "-2", "0"):
        runner.enqueue(b"", {"releaseSignalAttribute": "1", "delta": delta})
        runner.run(stop=False)
    runner.enqueue(b"", {"releaseSignalAttribute": "1", "delta": "4"})
    runner.run()
    assert get_signal(cache_of(runner), "1").counts == {"default": 4}


@pytest.mark.parametrize("attributes", [{"releaseSignalAttribute": "1", "delta": "a"}, {"delta": "1"}])
def test_a_delta_that_is_not_a_number_or_no_signal_goes_to_failure_not_notified(attributes):
    runner = notifying(**{"Signal Counter Delta": "${delta}"})
    runner.enqueue(b"", attributes)
    runner.run()
    assert [f.attributes["notified"] for f in runner.output("failure")] == ["false"]
    assert cache_of(runner).keys() == set()


def test_an_illegal_delta_in_a_buffer_fails_alone_and_the_others_are_counted():
    """NiFi's TestNotify.testIllegalDelta, with deltas Java's parseInt refuses though their
    characters pass a sign-stripped isdigit ("+-5", "\u00b2": they once raised ValueError)."""
    runner = notifying(**{"Attribute Cache Regular Expression": ".*", "Signal Counter Name": "${status}",
                          "Signal Counter Delta": "${record.count}", "Signal Buffer Count": "10"})
    for key, status, count in (("data1", "success", "1024"), ("data2", "success", "2048 records"),
                               ("data4", "success", "+-5"), ("data5", "success", "\u00b2"),
                               ("data3", "failure", "512")):
        runner.enqueue(b"", {"releaseSignalAttribute": "someDataProcessing", "key": key, "status": status,
                             "record.count": count})
    runner.run()
    assert [f.attributes["notified"] for f in runner.output("success")] == ["true", "true"]
    assert [f.attributes["notified"] for f in runner.output("failure")] == ["false"] * 3
    signal = get_signal(cache_of(runner), "someDataProcessing")
    assert signal.attributes["key"] == "data3"          # the latest FlowFile's attribute wins
    assert signal.counts == {"success": 1024, "failure": 512} and signal.total == 1536


def test_the_attributes_matching_the_regex_are_kept_with_the_signal_but_never_the_uuid():
    runner = notifying(**{"Attribute Cache Regular Expression": ".*"})
    runner.enqueue(b"", {"releaseSignalAttribute": "1", "key1": "value1", "key2": "value2"})
    runner.run()
    attributes = get_signal(cache_of(runner), "1").attributes
    assert attributes["key1"] == "value1" and attributes["releaseSignalAttribute"] == "1"
    assert "uuid" not in attributes


class NotifyFails(ControllerService, AtomicDistributedMapCacheClient):
    def fetch(self, key):
        raise MapCacheError("the map cache server on port 4557 could not be reached: gone")


def test_a_failing_cache_rolls_notify_back_keeping_the_flowfile():
    runner = notifying(services={"client": (NotifyFails, {})})
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    with pytest.raises(MapCacheError, match="could not be reached"):
        runner.run()
    assert runner.input_count == 1 and not runner.output("success")


class LosesTwice(DistributedMapCacheClientService):
    """A client whose first two replaces lose to another processor's change."""

    lost = 0

    def replace(self, entry):
        if LosesTwice.lost < 2:
            LosesTwice.lost += 1
            return False
        return super().replace(entry)


def test_notify_tries_again_after_a_concurrent_change_then_gives_up():
    runner = notifying(services={**SERVICES, "client": (LosesTwice, {"Server Hostname": "localhost"})})
    pauses = []
    runner.processor.pause = pauses.append
    runner.enqueue(b"", {"releaseSignalAttribute": "1"})
    runner.run()
    assert pauses == [0.01, 0.02] and len(runner.output("success")) == 1
    racing = {**SERVICES, "client": (Racing, {"Server Hostname": "localhost"})}
    never = notifying(services=racing)
    never.processor.pause = pauses.append
    never.enqueue(b"", {"releaseSignalAttribute": "1"})
    with pytest.raises(SignalConflict, match="could not be updated: other processors changed it each of 5 times"):
        never.run()
    assert never.input_count == 1


def test_a_cached_value_that_is_not_a_signal_is_named():
    runner, _ = waiting()
    cache_of(runner).put("1", b"not json")
    with pytest.raises(MapCacheError, match="the cached value of signal '1' is not a signal"):
        get_signal(cache_of(runner), "1")


# ---------------------------------------------------------------------------------- a NiFi flow
def test_wait_and_notify_in_a_nifi_flow_release_the_waiting_flowfile(tmp_path):
    """GenerateFlowFile's FlowFile goes both to Wait (looping on 'wait') and to Notify, whose
    signal releases it to the 'released' UpdateAttribute; the services as NiFi 2 names them."""
    root = "root"
    generate = processor(root, "orders", STANDARD + "GenerateFlowFile", {
        "Custom Text": "order", "Batch Size": "1", "Max FlowFiles": "1", "batch": "42"}, schedule="10 min")
    wait = processor(root, "hold", STANDARD + "Wait", {
        "release-signal-id": "${batch}", "target-signal-count": "1", "signal-counter-name": None,
        "wait-buffer-count": "1", "releasable-flowfile-count": "1", "expiration-duration": "10 min",
        "distributed-cache-service": "svc-client", "attribute-copy-mode": "keeporiginal", "wait-mode": "wait",
        "wait-penalty-duration": None}, auto_terminate=("expired", "failure"))
    tell = processor(root, "signal", STANDARD + "Notify", {
        "release-signal-id": "${batch}", "signal-counter-name": "default", "signal-counter-delta": "1",
        "signal-buffer-count": "1", "distributed-cache-service": "svc-client",
        "attribute-cache-regex": "batch"}, auto_terminate=("success", "failure"))
    for component in (wait, tell):
        component["propertyDescriptors"]["distributed-cache-service"]["identifiesControllerService"] = True
    released = processor(root, "released", "org.apache.nifi.processors.attributes.UpdateAttribute",
                         {"done": "yes"}, auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group(root, "wait-notify", None, None, processors=[generate, wait, tell, released],
                                         controllerServices=map_cache_services(nifi2_names=True), connections=[
                                             connection(root, generate, wait, ("success",)),
                                             connection(root, generate, tell, ("success",)),
                                             connection(root, wait, wait, ("wait",)),
                                             connection(root, wait, released, ("success",))]), {}))
    assert flow.processors["hold"].properties["Attribute Copy Mode"] == "Keep original"
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
                     until=lambda s: any(p["name"] == "released" and p["flowfiles_in"] for p in s["processors"]))
    assert not final.get("timed_out")
    assert [p["flowfiles_in"] for p in final["processors"] if p["name"] == "released"] == [1]
