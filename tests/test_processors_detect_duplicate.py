"""DetectDuplicate: NiFi's TestDetectDuplicate cases (the clock moved instead of sleeping), then
the cached value's layout, a missing identifier and a failing cache."""

from __future__ import annotations

import pytest

from flowactors.processors import DetectDuplicate
from flowactors.processors.detect_duplicate import cache_value, read_cache_value
from flowactors.sdk.map_cache import DistributedMapCacheClient, MapCacheError
from flowactors.sdk.services import ControllerService
from flowactors.services import DistributedMapCacheClientService, DistributedMapCacheServer
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

SERVICES = {"client": (DistributedMapCacheClientService, {"Server Hostname": "localhost"}),
            "server": (DistributedMapCacheServer, {})}
OUTCOMES = ("duplicate", "non-duplicate", "failure")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def detecting(services=SERVICES, **properties) -> tuple[ProcessorRunner, Clock]:
    runner = ProcessorRunner(DetectDuplicate, {"Cache Entry Identifier": "${hash.value}", "Distributed Cache Service":
                                               "client", "FlowFile Description": "The original flow file",
                                               **properties}, services=services)
    clock = runner.processor.clock = Clock()
    return runner, clock


def counts(runner: ProcessorRunner) -> tuple[int, ...]:
    return tuple(len(runner.output(r)) for r in OUTCOMES)


def test_the_second_flowfile_with_an_identifier_is_a_duplicate_of_the_first():
    runner, _ = detecting(**{"Age Off Duration": "48 hours"})
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    assert counts(runner) == (0, 1, 0)
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    assert counts(runner) == (1, 1, 0)
    [duplicate] = runner.output("duplicate")
    assert duplicate.attributes["original.flowfile.description"] == "The original flow file"
    assert [(e.event_type, e.details) for e in runner.events()] == [
        (T.ROUTE, None), (T.ROUTE, "Duplicate of: original.flowfile.description")]


def test_an_entry_older_than_the_age_off_duration_counts_as_absent_and_is_cached_again():
    runner, clock = detecting(**{"Age Off Duration": "2 secs"})
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    clock.now += 3
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    assert counts(runner) == (0, 2, 0)
    clock.now += 1                      # cached again 1 s ago: a duplicate now
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    assert counts(runner) == (1, 2, 0)


def test_not_caching_the_identifier_only_looks():
    runner, _ = detecting(**{"Age Off Duration": "48 hours", "Cache The Entry Identifier": "false"})
    for _ in range(2):
        runner.enqueue(b"", {"hash.value": "1000"})
        runner.run()
    assert counts(runner) == (0, 2, 0)
    caching, _ = detecting(**{"Cache The Entry Identifier": "true"})
    cache = caching.context.service("Distributed Cache Service")
    cache.put("1000", cache_value(0, "put by another processor"))
    caching.enqueue(b"", {"hash.value": "1000"})
    caching.run()
    assert caching.output("duplicate")[0].attributes["original.flowfile.description"] == "put by another processor"


def test_not_caching_with_age_off_finds_an_aged_entry_absent_and_leaves_it_gone():
    runner, clock = detecting(**{"Age Off Duration": "2 secs"})
    runner.enqueue(b"", {"hash.value": "1000"})
    runner.run()
    clock.now += 3
    looking = ProcessorRunner(DetectDuplicate, {"Distributed Cache Service": "client", "Age Off Duration": "2 secs",
                                                "Cache The Entry Identifier": "false"},
                              services={"client": (_Shared, {})})
    looking.processor.clock = clock
    _Shared.cache = runner.context.service("Distributed Cache Service")
    looking.enqueue(b"", {"hash.value": "1000"})
    looking.run()
    assert counts(looking) == (0, 1, 0)
    assert not _Shared.cache.contains_key("1000")


class _Shared(ControllerService, DistributedMapCacheClient):
    """Another runner's cache client, for what DetectDuplicate asks when it only looks (a runner
    enables services of its own)."""

    cache: DistributedMapCacheClient | None = None

    def get(self, key):
        return _Shared.cache.get(key)

    def remove(self, key):
        return _Shared.cache.remove(key)

    def contains_key(self, key):
        return _Shared.cache.contains_key(key)


def test_the_cached_value_is_nifi_s_entry_time_then_description():
    assert cache_value(1_700_000_000_123, "désc") == (1_700_000_000_123).to_bytes(8, "big") + "désc".encode()
    assert read_cache_value(cache_value(5, "x")) == (5, "x")
    runner, clock = detecting(**{"FlowFile Description": "${filename}"})
    runner.enqueue(b"", {"hash.value": "k", "filename": "first.txt"})
    runner.run()
    stored = runner.context.service("Distributed Cache Service").get("k")
    assert read_cache_value(stored) == (int(clock.now * 1000), "first.txt")


def test_a_flowfile_without_an_identifier_goes_to_failure_penalized():
    runner, _ = detecting()
    runner.enqueue(b"", {})                         # ${hash.value} is empty
    runner.enqueue(b"", {"hash.value": "   "})
    runner.run()
    failed = runner.output("failure")
    assert counts(runner) == (0, 0, 2) and all(f.penalized_until > 0 for f in failed)


class Broken(ControllerService, DistributedMapCacheClient):
    def get_and_put_if_absent(self, key, value):
        raise MapCacheError("the map cache server on port 4557 could not be reached: gone")


def test_a_failing_cache_sends_the_flowfile_to_failure_penalized(caplog):
    runner, _ = detecting(services={"client": (Broken, {})})
    runner.enqueue(b"", {"hash.value": "1"})
    runner.run()
    assert counts(runner) == (0, 0, 1) and runner.output("failure")[0].penalized_until > 0
    assert "could not be reached: gone" in caplog.text


@pytest.mark.parametrize("engine", ["in-process", "stateless"])
def test_a_batch_with_repeats_routes_each_after_the_one_before(engine):
    runner = ProcessorRunner(DetectDuplicate, {"Cache Entry Identifier": "${id}", "Distributed Cache Service": "client"},
                             services=SERVICES, engine=engine)
    for identifier in "abacba":
        runner.enqueue(identifier.encode(), {"id": identifier})
    runner.run()
    assert sorted(runner.contents("non-duplicate")) == [b"a", b"b", b"c"]
    assert sorted(runner.contents("duplicate")) == [b"a", b"a", b"b"]


def test_detect_duplicate_in_a_nifi_1_flow_routes_the_second_of_a_batch_to_duplicate(tmp_path):
    """GenerateFlowFile makes two FlowFiles with one identifier; DetectDuplicate, over the map
    cache services as NiFi 1 names them (every property as NiFi exports it), sends the first to
    non-duplicate and the second to duplicate."""
    from flowactors import run_flow
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, connection, group, map_cache_services, processor, snapshot

    root = "root"
    generate = processor(root, "orders", STANDARD + "GenerateFlowFile", {
        "Custom Text": "order", "Batch Size": "2", "Max FlowFiles": "2", "order.id": "42"}, schedule="10 min")
    detect = processor(root, "dedupe", STANDARD + "DetectDuplicate", {
        "Cache Entry Identifier": "${order.id}", "FlowFile Description": "order ${order.id}",
        "Age Off Duration": None, "Distributed Cache Service": "svc-client", "Cache The Entry Identifier": "true"},
        auto_terminate=("failure",))
    detect["propertyDescriptors"]["Distributed Cache Service"]["identifiesControllerService"] = True
    ends = {name: processor(root, name, "org.apache.nifi.processors.attributes.UpdateAttribute", {"seen": name},
                            auto_terminate=("success",)) for name in ("first", "again")}
    flow = flow_from_nifi(snapshot(group(root, "dedupe", None, None, processors=[generate, detect, *ends.values()],
                                         controllerServices=map_cache_services(nifi2_names=False), connections=[
                                             connection(root, generate, detect, ("success",)),
                                             connection(root, detect, ends["first"], ("non-duplicate",)),
                                             connection(root, detect, ends["again"], ("duplicate",))]), {}))
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
                     until=lambda s: sum(p["flowfiles_in"] for p in s["processors"] if p["name"] in ends) == 2)
    assert not final.get("timed_out"), final
    assert {p["name"]: p["flowfiles_in"] for p in final["processors"] if p["name"] in ends} == {"first": 1, "again": 1}
