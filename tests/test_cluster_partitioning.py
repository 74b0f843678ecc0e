"""Load balancing's pure parts (flowactors.engine.cluster): the hash ring, the partitioners, the
transfer payload, the topology file, and a load-balanced connection in a flow definition.
The same parts on a real multi-node Ray: tests/test_cluster_nodes.py."""

from __future__ import annotations

import random
import string

import pytest

from flowactors.engine.cluster.hash_ring import HashRing
from flowactors.engine.cluster.partitioning import Partitioner, partition_batch
from flowactors.engine.cluster.topology import (ClusterNode, ClusterView, partition_id,
                                                partition_of, ray_nodes, read_topology, resolve_nodes,
                                                write_topology)
from flowactors.engine.cluster.transfer import decode_transfer, encode_transfer
from flowactors.engine.errors import TopologyError, TransferRefused
from flowactors.engine.controller import fold_partitions
from flowactors.processors import GenerateFlowFile, LogAttribute
from flowactors.sdk.flow import Flow, FlowValidationError
from flowactors.sdk.session_contract import CommitBatch
from repositories.model import FlowFile, FlowFileBatch, QueuedFlowFile

NODES = ("n0", "n1", "n2")


def _keys(count: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choices(string.ascii_letters, k=12)) for _ in range(count)]


def _flowfile(i: int, **attributes: str) -> FlowFile:
    return FlowFile(i, f"uuid-{i}", {"uuid": f"uuid-{i}", **attributes}, None, 0, 0)


# ---------------------------------------------------------------------------------- hash ring

def test_ring_spreads_keys_evenly_and_is_stable_across_instances():
    keys = _keys(30_000)
    ring = HashRing(NODES)
    shares = {n: 0 for n in NODES}
    for key in keys:
        shares[ring.node_for(key)] += 1
    for node, share in shares.items():
        assert abs(share / len(keys) - 1 / 3) < 0.06, shares
    again = HashRing(reversed(NODES))  # another process, another order: the same answers
    assert [ring.node_for(k) for k in keys[:500]] == [again.node_for(k) for k in keys[:500]]


def test_removing_a_node_moves_only_its_keys():
    keys = _keys(20_000)
    before = HashRing(NODES)
    after = HashRing(("n0", "n1"))
    moved = [k for k in keys if before.node_for(k) != after.node_for(k)]
    assert moved and all(before.node_for(k) == "n2" for k in moved)
    assert len(moved) == sum(before.node_for(k) == "n2" for k in keys)


def test_adding_a_node_takes_keys_only_for_itself():
    keys = _keys(20_000)
    before = HashRing(NODES)
    after = HashRing(NODES + ("n3",))
    moved = [k for k in keys if before.node_for(k) != after.node_for(k)]
    assert all(after.node_for(k) == "n3" for k in moved)
    assert 0.15 < len(moved) / len(keys) < 0.35  # about a quarter: the new node's share


def test_a_missing_attribute_is_a_key_of_its_own():
    from flowactors.engine.cluster.hash_ring import key_hash

    texts = ["", "None", "null", "missing", "\x00"] + _keys(1000)
    assert key_hash(None) not in {key_hash(t) for t in texts}
    ring = HashRing(NODES)
    assert ring.node_for(None) == HashRing(NODES).node_for(None)
    with pytest.raises(ValueError, match="at least one node"):
        HashRing(())


# ---------------------------------------------------------------------------------- partitioners

def test_round_robin_takes_nodes_in_turn_and_skips_those_away():
    view = ClusterView("n0", NODES, frozenset(NODES), "n0")
    p = Partitioner("c", "round-robin", view)
    assert p.assign([_flowfile(i) for i in range(7)]) == ["c", "c@n1", "c@n2", "c", "c@n1", "c@n2", "c"]
    view.update(connected=["n0", "n2"])
    assert set(p.assign([_flowfile(i) for i in range(6)])) == {"c", "c@n2"}
    view.update(connected=[])  # alone: everything stays here
    assert set(p.assign([_flowfile(i) for i in range(3)])) == {"c"}


def test_single_node_sends_everything_to_the_first_node_even_while_it_is_away():
    view = ClusterView("n1", NODES, frozenset({"n1", "n2"}), "n1")
    assert set(Partitioner("c", "single-node", view).assign([_flowfile(i) for i in range(5)])) == {"c@n0"}
    view = ClusterView("n0", NODES, frozenset(NODES), "n0")
    assert set(Partitioner("c", "single-node", view).assign([_flowfile(1)])) == {"c"}


def test_partition_by_attribute_follows_the_ring_whoever_is_connected():
    ring = HashRing(NODES)
    view = ClusterView("n0", NODES, frozenset({"n0"}), "n0")
    p = Partitioner("c", "partition-by-attribute", view, "key")
    flowfiles = [_flowfile(i, key=k) for i, k in enumerate(_keys(300))] + [_flowfile(999)]
    expected = [{"n0": "c"}.get(n, f"c@{n}") for n in (ring.node_for(f.attributes.get("key")) for f in flowfiles)]
    assert p.assign(flowfiles) == expected
    view.update(nodes=("n0", "n1"))  # n2 left the topology: only its keys move
    after = p.assign(flowfiles)
    assert all(a == b for a, b in zip(expected, after) if b != "c@n2" and a != "c@n2")
    assert "c@n2" not in after


def test_partition_batch_moves_offers_and_log_records_together():
    view = ClusterView("n0", NODES, frozenset(NODES), "n0")
    flowfiles = [_flowfile(i) for i in range(6)]
    batch = CommitBatch(updates=[QueuedFlowFile(f, "c") for f in flowfiles] + [QueuedFlowFile(_flowfile(9), "d")],
                        offers={"c": FlowFileBatch(flowfiles), "d": FlowFileBatch([_flowfile(9)])})
    partition_batch(batch, {"c": Partitioner("c", "round-robin", view)})
    assert {q: [f.uuid for f in fs] for q, fs in batch.offers.items()} == {
        "d": ["uuid-9"], "c": ["uuid-0", "uuid-3"], "c@n1": ["uuid-1", "uuid-4"], "c@n2": ["uuid-2", "uuid-5"]}
    assert {u.flowfile.uuid: u.queue for u in batch.updates} == {
        "uuid-0": "c", "uuid-1": "c@n1", "uuid-2": "c@n2", "uuid-3": "c", "uuid-4": "c@n1", "uuid-5": "c@n2",
        "uuid-9": "d"}


def test_partition_ids_name_their_connection_and_node():
    assert partition_id("a:success->b", "n2") == "a:success->b@n2"
    assert partition_of("a:success->b@n2") == ("a:success->b", "n2")
    assert partition_of("a:success->b") is None


def test_a_connections_status_counts_its_partitions():
    statuses = {"c": {"id": "c", "count": 2, "queued": 2, "bytes": 10, "total_in": 5, "back_pressure": False},
                "c@n1": {"count": 3, "queued": 3, "bytes": 30, "total_in": 3, "back_pressure": True},
                "c@n2": {"count": 0, "queued": 0, "bytes": 0, "total_in": 2, "back_pressure": False},
                "mail@home": {"count": 4}}  # a connection whose name has an '@': not a partition
    fold_partitions(statuses, {"c"})
    assert list(statuses) == ["c", "mail@home"] and statuses["mail@home"] == {"count": 4}
    assert statuses["c"]["count"] == 5 and statuses["c"]["bytes"] == 40 and statuses["c"]["total_in"] == 10
    assert statuses["c"]["waiting_for"] == {"n1": 3, "n2": 0} and statuses["c"]["back_pressure"]


# ---------------------------------------------------------------------------------- transfer payload

@pytest.mark.parametrize("compression", ["none", "attributes", "attributes-and-content"])
def test_a_transfer_round_trips(compression):
    flowfiles = [_flowfile(i, filename=f"f{i}", key="x" * 50) for i in range(20)]
    contents = [bytes([i]) * (i * 100) for i in range(20)]
    sender, records = decode_transfer(encode_transfer("n1", compression, flowfiles, contents))
    assert sender == "n1"
    assert [r[0] for r in records] == [f.uuid for f in flowfiles]
    assert [r[1] for r in records] == [dict(f.attributes) for f in flowfiles]
    assert [r[2] for r in records] == contents


def test_compression_shrinks_what_travels():
    flowfiles = [_flowfile(i, text="the same words " * 20) for i in range(100)]
    contents = [b"repetitive content " * 50] * 100
    plain = encode_transfer("n1", "none", flowfiles, contents)
    squeezed = encode_transfer("n1", "attributes-and-content", flowfiles, contents)
    assert len(squeezed[3]) < len(plain[3]) / 5 and len(squeezed[4]) < len(plain[4]) / 20


def test_a_transfer_of_another_version_is_refused_by_name():
    payload = encode_transfer("n1", "none", [_flowfile(1)], [b""])
    with pytest.raises(TransferRefused, match="payload version 99.*same flowactors"):
        decode_transfer((99,) + payload[1:])


# ---------------------------------------------------------------------------------- topology

def _ray_entry(name: str | None, address: str, alive: bool = True) -> dict:
    resources = {"CPU": 1.0, f"node:{address}": 1.0}
    if name:
        resources[f"flowactors-node:{name}"] = 1.0
    return {"Alive": alive, "NodeManagerAddress": address, "Resources": resources}


def test_nodes_are_named_by_label_else_by_address():
    known = ray_nodes([_ray_entry("east", "10.0.0.1"), _ray_entry(None, "10.0.0.2"),
                       _ray_entry("gone", "10.0.0.3", alive=False)])
    assert known["east"][0] == ClusterNode("east", "flowactors-node:east")
    assert known["10.0.0.2"][0] == ClusterNode("10.0.0.2", "node:10.0.0.2")
    assert [n.name for n in resolve_nodes("all", known)] == ["10.0.0.2", "east"]
    assert [n.name for n in resolve_nodes(1, known)] == ["10.0.0.2"]
    assert [n.name for n in resolve_nodes(["east"], known)] == ["east"]
    with pytest.raises(TopologyError, match="gone are not alive"):
        resolve_nodes(["east", "gone"], known)
    with pytest.raises(TopologyError, match="asks for 3 node"):
        resolve_nodes(3, known)
    with pytest.raises(TopologyError, match="'all', a number of nodes or a list"):
        resolve_nodes("some", known)


def test_a_node_listed_twice_by_ray_is_alive_if_one_entry_is():
    known = ray_nodes([_ray_entry("n1", "10.0.0.1", alive=False), _ray_entry("n1", "10.0.0.1")])
    assert known["n1"][1]


def test_the_topology_file_round_trips_and_refuses_damage(tmp_path):
    assert read_topology(tmp_path) is None
    nodes = [ClusterNode("n0", "flowactors-node:n0"), ClusterNode("10.0.0.2", "node:10.0.0.2")]
    write_topology(tmp_path, "demo", nodes)
    assert read_topology(tmp_path) == nodes
    (tmp_path / "cluster.json").write_text('{"flowactors_cluster": 2, "nodes": []}')
    with pytest.raises(TopologyError, match="format version 2.*reads version 1"):
        read_topology(tmp_path)
    (tmp_path / "cluster.json").write_text('{"flowactors_cluster": 1, "nod')
    with pytest.raises(TopologyError, match="is damaged.*delete it"):
        read_topology(tmp_path)


# ---------------------------------------------------------------------------------- flow definition

def _flow(**connection) -> Flow:
    flow = Flow("lb")
    gen = flow.add(GenerateFlowFile, "gen", primary_node_only=True)
    log = flow.add(LogAttribute, "log", auto_terminate=["success"])
    flow.connect(gen, log, **connection)
    return flow


def test_a_load_balanced_connection_round_trips_in_json():
    flow = _flow(load_balance="partition-by-attribute", partition_attribute="customer",
                 load_balance_compression="attributes")
    again = Flow.from_json(flow.to_json())
    c = again.connections[0]
    assert (c.load_balance, c.partition_attribute, c.load_balance_compression) == (
        "partition-by-attribute", "customer", "attributes")
    assert again.processors["gen"].primary_node_only
    assert _flow(load_balance="ROUND_ROBIN").connections[0].load_balance == "round-robin"  # NiFi's spelling


@pytest.mark.parametrize("settings, problem", [
    ({"load_balance": "random"}, "load_balance must be one of none, round-robin"),
    ({"load_balance": "partition-by-attribute"}, "needs partition_attribute"),
    ({"load_balance_compression": "gzip"}, "load_balance_compression must be one of"),
    ({"load_balance": "round-robin", "name": "a@b"}, "may not contain '@'"),
])
def test_a_wrong_load_balance_setting_is_named(settings, problem):
    with pytest.raises(FlowValidationError, match=problem):
        _flow(**settings).validate()


def test_partitions_sit_beside_their_connection_and_swap_early():
    """A partition for another node keeps at most partition_swap_threshold records in memory
    (docs/cluster.md): its queue config says so, in the executor hosting the connection."""
    from flowactors.engine.cluster.partitioning import plan_partitions
    from flowactors.engine.placement import plan
    from flowactors.engine.queues.connection import QueueConfig
    from flowactors.sdk.settings import Settings

    flow = _flow(load_balance="round-robin", name="spread")
    settings = Settings.from_dict({"partition_swap_threshold": 500, "partition_swap_batch_size": 250})
    placement = plan(flow, "shared", 2)
    configs = {c.id: QueueConfig.for_connection(c, settings) for c in flow.connections}
    cluster = {"local": "n0", "nodes": ["n0", "n1"], "partition_nodes": ["n0", "n1", "n2"]}
    partitions = plan_partitions(flow, placement, cluster, configs, settings)
    assert sorted(partitions) == ["spread@n1", "spread@n2"]  # n2 left the topology: drained, still hosted
    assert all((p.swap_threshold, p.swap_batch_size) == (500, 250) for p in partitions.values())
    assert configs["spread"].swap_threshold == settings.swap_threshold  # the connection's own as before
    home = placement.executors[placement.queue_home()["spread"]]
    assert {"spread@n1", "spread@n2"} <= set(home.queues)
    assert home.senders == [("spread", "n1"), ("spread", "n2")]
