"""The distributed map cache: the server's entries (NiFi's TestSimpleMapCache and MapCacheTest
cases: put, put-if-absent, revisions, eviction), their durable folder (reopened, after a kill -9,
damaged), and the client reaching its server by port in a flow."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap

import lmdb
import pytest

from flowactors import Flow, run_flow
from flowactors.processors import DetectDuplicate, GenerateFlowFile, UpdateAttribute
from flowactors.sdk.flow import FlowValidationError
from flowactors.sdk.map_cache import CacheEntry, MapCacheError
from flowactors.sdk.services import ServiceEnableError, ServiceNode
from flowactors.services import DistributedMapCacheClientService, DistributedMapCacheServer
from flowactors.services.map_cache_store import FIFO, FOLDER_NAME, LFU, LRU, MapCacheStore, MapCacheStoreError
from flowactors.testing import enable_service

MB = 1 << 20


def store(max_entries: int = 100, eviction: str = FIFO, directory=None, max_read_size: int = MB) -> MapCacheStore:
    return MapCacheStore(max_entries, eviction, max_read_size, None if directory is None else str(directory))


def client(server: dict | None = None, **properties) -> DistributedMapCacheClientService:
    return enable_service(DistributedMapCacheClientService, {"Server Hostname": "localhost", **properties},
                          services={"cache-server": (DistributedMapCacheServer, server or {})})


# ---------------------------------------------------------------------------------- the operations
def test_put_if_absent_and_get_and_put_if_absent():
    cache = store()
    assert cache.put_if_absent("a", b"1") is True
    assert cache.put_if_absent("a", b"2") is False
    assert cache.get("a") == b"1"
    assert cache.get_and_put_if_absent("a", b"3") == b"1"
    assert cache.get_and_put_if_absent("b", b"4") is None
    assert cache.get("b") == b"4"
    assert cache.get("missing") is None


def test_put_replaces_and_counts_revisions_from_zero():
    cache = store()
    cache.put("k", b"one")
    assert cache.fetch("k") == (b"one", 0)
    cache.put("k", b"two")
    assert cache.fetch("k") == (b"two", 1)
    assert cache.fetch("other") is None


def test_replace_is_a_compare_and_set_on_the_revision():
    cache = store()
    assert cache.replace("k", b"first", None) is True          # absent: stored
    assert cache.replace("k", b"again", None) is False         # present now: a None revision loses
    assert cache.replace("k", b"second", 0) is True
    assert cache.replace("k", b"stale", 0) is False            # someone else's revision 0 was replaced
    assert cache.fetch("k") == (b"second", 1)


def test_remove_remove_by_pattern_and_keys():
    cache = store()
    for key in ("user.1", "user.2", "order.1", "user.10"):
        cache.put(key, b"x")
    assert cache.remove("order.1") is True
    assert cache.remove("order.1") is False
    assert cache.remove_by_pattern(r"user\.\d") == 2            # matched whole: not user.10
    assert cache.keys() == {"user.10"}
    assert cache.contains_key("user.10") and not cache.contains_key("user.1")
    with pytest.raises(MapCacheError, match="not a regular expression"):
        cache.remove_by_pattern("(")


def test_a_key_or_value_over_the_maximum_read_size_is_refused_and_nothing_changes():
    cache = store(max_read_size=8)
    with pytest.raises(MapCacheError, match=r"value of 9 bytes is over the map cache server's Maximum Read Size \(8"):
        cache.put("k", b"123456789")
    with pytest.raises(MapCacheError, match="a key of 9 bytes"):
        cache.put("123456789", b"v")
    assert cache.keys() == set()


# ---------------------------------------------------------------------------------- eviction
@pytest.mark.parametrize("eviction, evicted", [(FIFO, "a"), (LRU, "b"), (LFU, "c")])
def test_a_full_cache_evicts_by_its_strategy(eviction, evicted):
    """a, b, c put in that order; then b, b, a, a and c read: FIFO evicts the first put (a), LRU
    the least recently used (b), LFU the least used (c)."""
    cache = store(3, eviction)
    for key in "abc":
        cache.put(key, key.encode())
    cache.get("b")
    cache.contains_key("b")
    cache.get("a")
    cache.fetch("a")
    cache.get("c")
    cache.put("d", b"d")
    assert cache.keys() == {"a", "b", "c", "d"} - {evicted}


def test_replacing_a_key_of_a_full_cache_evicts_nothing():
    cache = store(2)
    cache.put("a", b"1")
    cache.put("b", b"2")
    cache.put("a", b"3")
    assert cache.keys() == {"a", "b"}


def test_fifo_orders_by_the_last_put():
    cache = store(2, FIFO)
    cache.put("a", b"1")
    cache.put("b", b"2")
    cache.put("a", b"3")        # a is now the newest
    cache.put("c", b"4")
    assert cache.keys() == {"a", "c"}



def test_lfu_evicts_the_fewest_hits_then_the_oldest_entry_through_many_changes():
    """Random puts, hits and removes on a small LFU cache: each eviction takes the entry a look at
    every entry would (fewest hits, then entered first), though the cache keeps a heap instead."""
    import random
    chosen = random.Random(7)
    cache = store(20, LFU)
    evictions = 0
    for step in range(3000):
        key = str(chosen.randrange(60))
        action = chosen.random()
        if action < 0.5:
            cache.contains_key(key)
        elif action < 0.9:
            full = len(cache.keys()) == cache.max_entries and key not in cache.keys()
            expected = full and min(cache._entries.items(), key=lambda item: (item[1].hits, item[1].order))[0]
            cache.put(key, b"v")
            if full:
                assert expected not in cache.keys() and key in cache.keys(), step
                evictions += 1
        else:
            cache.remove(key)
        assert len(cache._frequencies) <= 2 * cache.max_entries + 65
    assert evictions > 100

# ---------------------------------------------------------------------------------- durable
def test_a_persistent_cache_reopens_with_its_entries_revisions_and_order(tmp_path):
    cache = store(3, FIFO, tmp_path)
    cache.put("a", b"1")
    cache.put("b", b"2")
    cache.put("b", b"3")
    cache.put("gone", b"x")
    cache.remove("gone")
    cache.put("long" * 200, b"a key longer than LMDB's")
    cache.close()
    again = store(3, FIFO, tmp_path)
    assert again.keys() == {"a", "b", "long" * 200}
    assert again.fetch("b") == (b"3", 1)
    again.put("c", b"4")                                         # the oldest put, a, goes first
    assert again.keys() == {"b", "c", "long" * 200}
    again.close()
    smaller = store(1, FIFO, tmp_path)                           # a lower maximum evicts on opening
    assert smaller.keys() == {"c"}
    smaller.close()


def test_every_acknowledged_put_survives_a_kill_9(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from flowactors.services.map_cache_store import MapCacheStore
        cache = MapCacheStore(1000, "First In, First Out", 1 << 20, {str(tmp_path)!r})
        for i in range(200):
            cache.put(f"key-{{i}}", str(i).encode())
        cache.replace("key-7", b"seven", 0)
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=os.getcwd())
    assert done.returncode == -signal.SIGKILL and done.stdout.strip() == "acknowledged", done.stderr
    cache = store(1000, FIFO, tmp_path)
    assert len(cache.keys()) == 200
    assert cache.get("key-199") == b"199" and cache.fetch("key-7") == (b"seven", 1)
    cache.close()


def _damage(tmp_path, change) -> None:
    env = lmdb.open(str(tmp_path / FOLDER_NAME), max_dbs=2)
    change(env)
    env.close()


def test_a_damaged_record_is_refused_naming_the_folder(tmp_path):
    cache = store(directory=tmp_path)
    cache.put("a", b"value")
    cache.close()

    def flip(env):
        db = env.open_db(b"entries")
        with env.begin(write=True) as txn:
            key, raw = next(iter(txn.cursor(db)))
            txn.put(key, raw[:-5] + bytes([raw[-5] ^ 1]) + raw[-4:], db=db)

    _damage(tmp_path, flip)
    with pytest.raises(MapCacheStoreError, match=f"the map cache in {tmp_path / FOLDER_NAME} is damaged: record 1 "
                                                 "fails its checksum"):
        store(directory=tmp_path)
    with pytest.raises(ServiceEnableError, match=r"'cache-server' \(DistributedMapCacheServer\) could not be "
                                                 r"enabled: .* fails its checksum"):
        client({"Persistence Directory": str(tmp_path)})


@pytest.mark.parametrize("stamp, message", [(b"FAMC" + struct.pack(">H", 7), "has format version 7; this flowactors "
                                                                               "reads version 1 only"),
                                            (b"something else", "is not a flowactors map cache")])
def test_another_format_version_or_a_foreign_environment_is_refused(tmp_path, stamp, message):
    store(directory=tmp_path).close()

    def restamp(env):
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            txn.put(b"format", stamp, db=meta)

    _damage(tmp_path, restamp)
    with pytest.raises(MapCacheStoreError, match=message):
        store(directory=tmp_path)


# ---------------------------------------------------------------------------------- client and server
def test_the_client_reaches_the_server_of_its_port_with_nifi_s_operations():
    cache = client({"Port": "4600", "Maximum Cache Entries": "2"}, **{"Server Port": "4600"})
    assert cache.put_if_absent("a", b"1") and not cache.put_if_absent("a", b"2")
    assert cache.get_and_put_if_absent("b", b"2") is None
    entry = cache.fetch("a")
    assert entry == CacheEntry("a", b"1", 0)
    assert cache.replace(CacheEntry("a", b"new", 0)) and not cache.replace(CacheEntry("a", b"late", 0))
    assert cache.get("a") == b"new" and cache.contains_key("b")
    cache.put("c", b"3")                                        # two at most: one went
    assert len(cache.keys()) == 2
    assert cache.remove_by_pattern(".*") == 2 and cache.keys() == set()


def test_a_client_whose_port_no_server_has_makes_the_flow_invalid_naming_the_port():
    flow = Flow("dedup")
    flow.add_service(DistributedMapCacheServer, "server", properties={"Port": "4557"})
    flow.add_service(DistributedMapCacheClientService, "client",
                     properties={"Server Hostname": "localhost", "Server Port": "4558"})
    source = flow.add(GenerateFlowFile)
    flow.add(DetectDuplicate, properties={"Distributed Cache Service": "client"}, auto_terminate=[
        "duplicate", "non-duplicate", "failure"])
    flow.connect(source, "DetectDuplicate")
    with pytest.raises(FlowValidationError) as raised:
        flow.validate()
    assert raised.value.problems == [
        "controller service 'client': property 'Server Port' is 4558, but no DistributedMapCacheServer of the flow "
        "in reach listens on port 4558 (its servers: 'server' on 4557)"]


def test_the_server_a_client_uses_is_enabled_before_it_though_no_property_names_it():
    flow = Flow("dedup")
    flow.add_service(DistributedMapCacheClientService, "client", properties={"Server Hostname": "localhost"})
    flow.add_service(DistributedMapCacheServer, "server")
    flow.add_service(DistributedMapCacheServer, "unused", properties={"Port": "4999"})
    source = flow.add(GenerateFlowFile)
    flow.add(DetectDuplicate, properties={"Distributed Cache Service": "client"}, auto_terminate=[
        "duplicate", "non-duplicate", "failure"])
    flow.connect(source, "DetectDuplicate")
    assert [node.path for node in flow.validate().services_used_by(["DetectDuplicate"])] == ["server", "client"]


@pytest.mark.parametrize("port", ["0", "65536", "http", "\u00b2", " 4557x"])   # "\u00b2" once raised ValueError
def test_a_port_that_is_not_a_port_number_is_refused_in_one_sentence(port):
    for kind, values in ((DistributedMapCacheServer, {"Port": port}),
                         (DistributedMapCacheClientService, {"Server Hostname": "localhost", "Server Port": port})):
        name = "Port" if kind is DistributedMapCacheServer else "Server Port"
        assert kind.validate_properties(values) == [f"property '{name}': must be a port number from 1 to 65535"]
    visible = {"server": ServiceNode("server", DistributedMapCacheServer, {"Port": port})}
    assert DistributedMapCacheClientService.implied_references({"Server Port": "4557"}, visible)[0] == []


def test_an_ssl_context_service_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="property 'SSL Context Service' is not supported: a client reaches its "
                                         "server through the engine, never over a network socket; leave it empty"):
        client({"SSL Context Service": "ssl"})


def test_on_ray_the_server_is_one_actor_whose_entries_the_executors_clients_share(ray_session, tmp_path):
    """Three FlowFiles of one identifier: the first is the original, the other two duplicates,
    the server (an actor) keeping the identifier in its Persistence Directory."""
    flow = Flow("dedup-on-ray")
    flow.add_service(DistributedMapCacheServer, "server", properties={"Persistence Directory": str(tmp_path / "cache")})
    flow.add_service(DistributedMapCacheClientService, "client", properties={"Server Hostname": "localhost"})
    source = flow.add(GenerateFlowFile, properties={"Custom Text": "x", "Batch Size": 3, "Max FlowFiles": 3,
                                                    "id": "same"})
    dedup = flow.add(DetectDuplicate, properties={"Cache Entry Identifier": "${id}",
                                                  "Distributed Cache Service": "client"}, auto_terminate=["failure"])
    originals = flow.add(UpdateAttribute, "originals", auto_terminate=["success"])
    duplicates = flow.add(UpdateAttribute, "duplicates", auto_terminate=["success"])
    flow.connect(source, dedup)
    flow.connect(dedup, originals, "non-duplicate")
    flow.connect(dedup, duplicates, "duplicate")
    final = run_flow(flow, tmp_path / "repository", timeout=60)
    taken = {p["name"]: p["flowfiles_in"] for p in final["processors"]}
    assert (taken["originals"], taken["duplicates"]) == (1, 2)
    kept = store(directory=tmp_path / "cache")
    assert kept.keys() == {"same"}
    kept.close()
