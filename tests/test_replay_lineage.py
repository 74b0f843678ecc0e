"""Lineage of a real flow that splits, clones and merges; replay of a SEND, offline and while running.

Every flow runs on real Ray with the durable repositories; the expected graphs are built from the
uuids and event ids the run produced (found through the provenance repository), never hard-coded.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter

import pytest
import ray

from flowactors.engine.controller import FlowController
from flowactors.cli.main import main
from flowactors.engine.flow_operations import claim_state
from repositories.lock import RepositoryLock
from flowactors.driver.running import run_flow
from flowactors.engine.errors import FlowStartError
from flowactors.engine.transport import call_now
from flowactors.sdk.settings import Settings
from provenance_flows import PUT_QUEUE, all_events, only, send_flow, split_merge_clone_flow
from repositories.content import FileSystemContentRepository
from repositories.flowfile import WriteAheadFlowFileRepository
from repositories.provenance import WriteAheadProvenanceRepository

pytestmark = pytest.mark.ray


def test_split_clone_merge_lineage_is_exact(ray_session, repository):
    run_flow(split_merge_clone_flow(), repository, timeout=60)
    events = all_events(repository)
    assert Counter(e.event_type.value for e in events) == {"CREATE": 1, "FORK": 1, "CLONE": 3, "JOIN": 1,
                                                          "DROP": 8}
    create = only(events, event_type="CREATE")
    fork = only(events, event_type="FORK")
    join = only(events, event_type="JOIN")
    original, merged, splits = create.flowfile_uuid, join.flowfile_uuid, fork.child_uuids
    assert fork.flowfile_uuid == original and len(splits) == 3
    assert sorted(join.parent_uuids) == sorted(splits)
    clone_of = {s: only(events, event_type="CLONE", flowfile_uuid=s) for s in splits}
    kept = {s: clone_of[s].child_uuids[0] for s in splits}
    drop = {e.flowfile_uuid: e for e in events if e.event_type.value == "DROP"}
    assert set(drop) == {original, merged, *splits, *kept.values()}
    assert {drop[u].component_name for u in splits} == {"merge"}
    assert {drop[u].component_name for u in kept.values()} == {"keep"}

    def ev(e):
        return f"event:{e.event_id}"

    def ff(uuid):
        return f"flowfile:{uuid}"

    expected_nodes = {ff(original), ff(merged), *map(ff, splits), *map(ff, kept.values()), *map(ev, events)}
    expected_edges = {(ff(original), ev(create), original), (ev(create), ev(fork), original),
                      (ev(fork), ev(drop[original]), original), (ev(join), ff(merged), merged),
                      (ff(merged), ev(drop[merged]), merged)}
    for s in splits:
        expected_edges |= {(ev(fork), ff(s), s), (ff(s), ev(clone_of[s]), s),
                           (ev(clone_of[s]), ff(kept[s]), kept[s]), (ff(kept[s]), ev(drop[kept[s]]), kept[s]),
                           (ev(clone_of[s]), ev(join), s), (ev(join), ev(drop[s]), s)}
    assert len(expected_nodes) == 22 and len(expected_edges) == 23
    with WriteAheadProvenanceRepository(repository / "provenance") as provenance:
        for start in (original, merged, splits[1], kept[splits[2]]):   # the same family from any member
            lineage = provenance.lineage(start)
            assert {n.id for n in lineage.nodes} == expected_nodes and len(lineage.nodes) == 22
            assert {(e.source, e.target, e.flowfile_uuid) for e in lineage.edges} == expected_edges
            assert len(lineage.edges) == 23 and not lineage.truncated
    # the merged content is the splits' contents in the JOIN's order: past versions are readable
    content = FileSystemContentRepository.from_settings(repository, Settings())
    pieces = {s: content.read_bytes(clone_of[s].updated_claim) for s in splits}
    assert sorted(pieces.values()) == [b"alpha", b"beta", b"gamma"]
    assert content.read_bytes(join.updated_claim) == b"".join(pieces[p] for p in join.parent_uuids)


def test_replaying_a_send_offline_sends_the_same_bytes_again(ray_session, repository, tmp_path, capsys):
    out = tmp_path / "out"
    run_flow(send_flow(out, count=1), repository, timeout=60)
    sent = (out / "sent.txt").read_bytes()
    assert sent == b"the same bytes, again\n"
    first = all_events(repository)
    send = only(first, event_type="SEND")
    original = send.flowfile_uuid
    content = FileSystemContentRepository.from_settings(repository, Settings())
    # the FlowFile was dropped and the stop's checkpoint released its claim: it is in the archive
    assert claim_state(content, send.previous_claim) == "archived"
    (out / "sent.txt").unlink()

    assert main(["replay", str(send.event_id), "--repository", str(repository)]) == 0
    said = capsys.readouterr().out
    assert f"replayed event {send.event_id}" in said and f"queued in connection '{PUT_QUEUE}'" in said
    assert "restored from the archive" in said
    assert claim_state(content, send.previous_claim) == "live"
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {PUT_QUEUE: 1}
        assert wal.claimant_count(send.previous_claim.resource) == 1

    second = run_flow(send_flow(out, count=0), repository, timeout=60)
    assert second["recovery"]["restored"] == 1
    assert (out / "sent.txt").read_bytes() == sent
    events = all_events(repository)
    replay = only(events, event_type="REPLAY")
    replayed = replay.child_uuids[0]
    assert (replay.flowfile_uuid, replay.parent_uuids, replay.source_queue_id) == (original, [original], PUT_QUEUE)
    assert replay.component_name == "put" and replay.updated_attributes["uuid"] == replayed
    send_again = only(events, event_type="SEND", flowfile_uuid=replayed)
    assert send_again.updated_claim == send.updated_claim and send_again.transit_uri == send.transit_uri
    create = only(events, event_type="CREATE")
    drop, drop_again = (only(events, event_type="DROP", flowfile_uuid=u) for u in (original, replayed))
    with WriteAheadProvenanceRepository(repository / "provenance") as provenance:
        for start in (original, replayed):
            lineage = provenance.lineage(start)
            assert {n.id for n in lineage.nodes} == {
                f"flowfile:{original}", f"flowfile:{replayed}",
                *(f"event:{e.event_id}" for e in (create, send, drop, replay, send_again, drop_again))}
            assert {(e.source, e.target) for e in lineage.edges} == {
                (f"flowfile:{original}", f"event:{create.event_id}"),
                (f"event:{create.event_id}", f"event:{send.event_id}"),
                (f"event:{send.event_id}", f"event:{drop.event_id}"),
                (f"event:{drop.event_id}", f"event:{replay.event_id}"),
                (f"event:{replay.event_id}", f"flowfile:{replayed}"),
                (f"flowfile:{replayed}", f"event:{send_again.event_id}"),
                (f"event:{send_again.event_id}", f"event:{drop_again.event_id}")}


def test_replay_refusals_change_nothing(ray_session, repository, tmp_path, capsys):
    run_flow(send_flow(tmp_path / "out", count=1), repository, timeout=60)
    events = all_events(repository)
    create, send = only(events, event_type="CREATE"), only(events, event_type="SEND")

    assert main(["replay", str(create.event_id), "--repository", str(repository)]) == 1
    err = capsys.readouterr().err
    assert f"cannot replay event {create.event_id} (CREATE by emit): it has no input connection" in err
    assert "Traceback" not in err

    assert main(["replay", "4242", "--repository", str(repository)]) == 2
    newest = max(e.event_id for e in events)
    assert f"no provenance event 4242 in {repository}: the newest event is {newest}" in capsys.readouterr().err

    # the archive's age-off removes the content: replay and show refuse, saying so
    content = FileSystemContentRepository.from_settings(repository, Settings())
    assert content.age_off_archive(now=time.time() + 4 * 3600)["removed"] >= 1
    assert claim_state(content, send.previous_claim) == "gone"
    assert main(["replay", str(send.event_id), "--repository", str(repository)]) == 1
    err = capsys.readouterr().err
    assert f"cannot replay event {send.event_id} (SEND by put): its input content (22 bytes" in err
    assert "was aged off the content repository's archive" in err
    assert main(["provenance", "show", str(send.event_id), "--content", "input", "--repository",
                 str(repository)]) == 1
    assert "is no longer available: it was aged off" in capsys.readouterr().err
    assert all_events(repository) == events                       # no REPLAY event
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {}


def test_replay_while_the_flow_runs(ray_session, repository, tmp_path, capsys):
    out = tmp_path / "out"
    seen = {}

    def during_run(controller):
        provenance = call_now(controller, FlowController.repositories)["provenance"]
        sends = _wait_for(lambda: ray.get(provenance.handle.search_with.remote({"event_type": "SEND"}, 1000)))
        (out / "sent.txt").unlink()
        # the CLI must not open the repositories under a running flow
        assert main(["provenance", "search", "--repository", str(repository)]) == 1
        seen["cli"] = capsys.readouterr().err
        seen["result"] = call_now(controller, FlowController.replay, sends[0].event_id, "tester")
        seen["send"] = sends[0]
        _wait_for(lambda: (out / "sent.txt").exists())

    run_flow(send_flow(out, count=1, name="replay-online"), repository, timeout=60, on_started=during_run)
    assert "the repository" in seen["cli"] and "is in use by flow 'replay-online' (pid" in seen["cli"]
    result, send = seen["result"], seen["send"]
    assert (result.event_id, result.original_uuid, result.queue_id, result.size) == (
        send.event_id, send.flowfile_uuid, PUT_QUEUE, 22)
    assert (out / "sent.txt").read_bytes() == b"the same bytes, again\n"
    events = all_events(repository)
    replay = only(events, event_type="REPLAY")
    assert replay.event_id == result.replay_event_id and replay.child_uuids == [result.flowfile_uuid]
    assert replay.details == f"Replay of event {send.event_id} (SEND) requested by tester"
    assert only(events, event_type="SEND", flowfile_uuid=result.flowfile_uuid).updated_size == 22
    with WriteAheadFlowFileRepository(repository / "flowfile", create=False) as wal:
        assert wal.queue_counts() == {}


def test_a_flow_does_not_start_on_a_repository_in_use(ray_session, repository, tmp_path):
    with RepositoryLock(repository, "flowactors replay"):
        with pytest.raises(FlowStartError) as refused:
            run_flow(send_flow(tmp_path / "out", count=1), repository, timeout=30)
    assert (f"the repository {repository} is in use by flowactors replay (pid {os.getpid()} on "
            in str(refused.value)) and "flow 'replay-test' needs it to itself" in str(refused.value)
    assert "Traceback" not in str(refused.value)   # the controller's own error, not Ray's wrapping of it
    assert not (tmp_path / "out").exists()


def _wait_for(probe, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_a_flowfiles_events_get_ids_in_the_order_they_happened_however_slow_provenance_is(tmp_path, monkeypatch):
    """The first provenance call of the run is held for a second; the next processor's session
    runs meanwhile (no task waits for provenance) and its events reach provenance first: they
    still get the later ids, reserved in the log's transaction after the first commit's, and
    provenance shows them in id order (in process, where provenance takes calls concurrently)."""
    import threading

    from flowactors import Flow
    from flowactors.engine.repository_services import ProvenanceRepositoryService
    from flowactors.processors import GenerateFlowFile, UpdateAttribute

    held = threading.Event()
    register = ProvenanceRepositoryService.register_numbered

    @functools.wraps(register)  # links call a method by its name: the stand-in keeps it
    def slow_first(self, numbered):
        if not held.is_set():
            held.set()
            time.sleep(1.0)
        return register(self, numbered)

    monkeypatch.setattr(ProvenanceRepositoryService, "register_numbered", slow_first)
    flow = Flow("ordered-events")
    flow.add(GenerateFlowFile, "generate", properties={"Max FlowFiles": 3, "Batch Size": 3})
    flow.add(UpdateAttribute, "tag", properties={"tagged": "yes"}, auto_terminate=["success"])
    flow.connect("generate", "tag")
    run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60)
    events = all_events(tmp_path / "repository")
    assert held.is_set() and len({e.flowfile_uuid for e in events}) == 3
    for uuid in {e.flowfile_uuid for e in events}:
        kinds = [e.event_type.value for e in sorted(events, key=lambda e: e.event_id) if e.flowfile_uuid == uuid]
        assert kinds == ["CREATE", "DROP"], kinds  # DROP: auto-terminated by the next processor
