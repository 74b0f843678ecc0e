"""ProcessSession: every operation, the events it emits, and what commit and rollback leave behind."""

from __future__ import annotations

import pytest

from flowactors import CommitError, FlowFileHandlingError, Processor, Relationship
from flowactors.testing import INPUT, ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.provenance.event import ProvenanceEventType as T


class TwoWay(Processor):
    relationships = [Relationship("success"), Relationship("other")]

    def on_trigger(self, context, session):
        raise AssertionError("tests drive the session directly")


@pytest.fixture
def runner():
    return ProcessorRunner(TwoWay)


def types(runner):
    return [e.event_type for e in runner.events()]


def test_get_batch_takes_in_order_and_commit_moves_them(runner):
    sent = [runner.enqueue(f"{i}".encode()) for i in range(5)]
    session = runner.new_session()
    batch = session.get_batch(3)
    assert [f.uuid for f in batch] == [f.uuid for f in sent[:3]]
    for flowfile in batch:
        session.transfer(flowfile, "success")
    session.commit()
    assert runner.contents("success") == [b"0", b"1", b"2"]
    assert runner.input_count == 2
    assert runner.flowfile_repository.queue_counts() == {INPUT: 2, "success": 3}


def test_rollback_returns_flowfiles_unchanged_and_deletes_new_content(tmp_path):
    content = FileSystemContentRepository(tmp_path / "content")
    runner = ProcessorRunner(TwoWay, content=content)
    original = runner.enqueue(b"keep me", {"a": "1"})
    session = runner.new_session()
    flowfile = session.get()
    flowfile = session.put_attribute(flowfile, "a", "2")
    flowfile = session.write_bytes(flowfile, b"changed")
    new_claim = flowfile.claim.resource
    session.rollback()
    assert not content.path_of(new_claim).exists()
    session = runner.new_session()
    again = session.get()
    assert again.attributes["a"] == "1" and session.read_bytes(again) == b"keep me"
    assert again.claim == original.claim
    assert runner.events() == []


def test_rollback_with_penalize_holds_the_flowfile_back(runner):
    runner.enqueue(b"x")
    session = runner.new_session()
    session.get()
    session.rollback(penalize=True)
    assert runner.new_session().get() is None  # penalized for 30 s
    assert runner.input_count == 1


def test_create_with_parents_inherits_common_attributes_and_emits_join(runner):
    a = runner.enqueue(b"a", {"k": "same", "x": "1"})
    b = runner.enqueue(b"b", {"k": "same", "x": "2"})
    session = runner.new_session()
    a, b = session.get_batch()
    child = session.create(parents=[a, b])
    assert child.attributes["k"] == "same" and "x" not in child.attributes
    assert child.lineage_start_date == min(a.lineage_start_date, b.lineage_start_date)
    for f in (a, b):
        session.remove(f)
    session.transfer(child, "success")
    session.commit()
    join = [e for e in runner.events() if e.event_type == T.JOIN]
    assert len(join) == 1 and sorted(join[0].parent_uuids) == sorted([a.uuid, b.uuid])
    assert join[0].flowfile_uuid == child.uuid
    assert types(runner).count(T.DROP) == 2


def test_create_from_one_parent_emits_fork(runner):
    runner.enqueue(b"p")
    session = runner.new_session()
    parent = session.get()
    kids = [session.create(parent) for _ in range(2)]
    for f in (parent, *kids):
        session.transfer(f, "success")
    session.commit()
    fork = [e for e in runner.events() if e.event_type == T.FORK]
    assert len(fork) == 1 and fork[0].flowfile_uuid == parent.uuid
    assert sorted(fork[0].child_uuids) == sorted(k.uuid for k in kids)


def test_new_flowfile_gets_create_event_with_committed_attributes(runner):
    session = runner.new_session()
    flowfile = session.create()
    flowfile = session.put_attribute(flowfile, "color", "red")
    flowfile = session.put_attribute(flowfile, "color", "blue")
    session.transfer(flowfile, "success")
    session.commit()
    (event,) = runner.events()
    assert event.event_type == T.CREATE
    assert event.updated_attributes["color"] == "blue"
    assert event.updated_attributes["uuid"] == flowfile.uuid
    assert {"filename", "path", "uuid"} <= set(flowfile.attributes)


def test_clone_shares_content_and_emits_clone(tmp_path):
    content = FileSystemContentRepository(tmp_path / "content")
    runner = ProcessorRunner(TwoWay, content=content)
    runner.enqueue(b"shared bytes")
    session = runner.new_session()
    original = session.get()
    copy = session.clone(original)
    assert copy.claim == original.claim and copy.uuid != original.uuid
    assert copy.attributes["uuid"] == copy.uuid
    session.transfer(original, "success")
    session.transfer(copy, "other")
    session.commit()
    assert runner.flowfile_repository.claimant_count(original.claim.resource) == 2
    (clone_event,) = [e for e in runner.events() if e.event_type == T.CLONE]
    assert clone_event.flowfile_uuid == original.uuid and clone_event.child_uuids == [copy.uuid]


def test_clone_of_a_range_and_split_copy_no_bytes(tmp_path):
    content = FileSystemContentRepository(tmp_path / "content")
    runner = ProcessorRunner(TwoWay, content=content)
    runner.enqueue(b"line one\nline two\nline three\n")
    session = runner.new_session()
    parent = session.get()
    parts = session.split(parent, [(0, 9), (9, 9), (18, 11)])
    assert [session.read_bytes(p) for p in parts] == [b"line one\n", b"line two\n", b"line three\n"]
    tail = session.clone(parent, 23)
    assert session.read_bytes(tail) == b"three\n"
    for f in (parent, *parts, tail):
        session.transfer(f, "success")
    session.commit()
    assert session._writer is None  # nothing was written: the children are ranges of the parent's claim
    fork = [e for e in runner.events() if e.event_type == T.FORK]
    assert fork and sorted(fork[0].child_uuids) == sorted(p.uuid for p in parts)
    assert runner.flowfile_repository.claimant_count(parent.claim.resource) == 5


def test_range_outside_content_is_refused(runner):
    runner.enqueue(b"abc")
    session = runner.new_session()
    flowfile = session.get()
    with pytest.raises(ValueError):
        session.clone(flowfile, 2, 5)


def test_write_is_copy_on_write_and_old_version_stays_readable(runner):
    runner.enqueue(b"old")
    session = runner.new_session()
    old = session.get()
    new = session.write(old, lambda out: out.write(b"new content"))
    assert new.claim != old.claim and new.size == 11
    assert runner.content.read_bytes(old.claim) == b"old"
    session.transfer(new, "success")
    session.commit()
    assert runner.contents("success") == [b"new content"]
    (event,) = runner.events()
    assert event.event_type == T.CONTENT_MODIFIED
    assert event.previous_claim == old.claim and event.updated_claim == new.claim
    assert (event.previous_size, event.updated_size) == (3, 11)


def test_rewrite_and_append_stream_through(runner):
    runner.enqueue(b"abc")
    session = runner.new_session()
    flowfile = session.get()
    flowfile = session.rewrite(flowfile, lambda src, out: out.write(src.read().upper()))
    flowfile = session.append(flowfile, lambda out: out.write(b"!"))
    assert session.read_bytes(flowfile) == b"ABC!"
    with session.read(flowfile) as stream:
        assert stream.read(2) == b"AB"
    session.transfer(flowfile, "success")
    session.commit()
    assert runner.contents("success") == [b"ABC!"]


def test_attributes_put_and_remove_and_uuid_is_protected(runner):
    runner.enqueue(b"", {"a": "1", "b": "2"})
    session = runner.new_session()
    flowfile = session.get()
    flowfile = session.put_all_attributes(flowfile, {"c": 3, "uuid": "forged"})
    flowfile = session.remove_attribute(flowfile, "a")
    flowfile = session.remove_all_attributes(flowfile, ["b", "uuid"])
    assert flowfile.attributes["c"] == "3" and "a" not in flowfile.attributes and "b" not in flowfile.attributes
    assert flowfile.attributes["uuid"] == flowfile.uuid
    session.transfer(flowfile, "success")
    session.commit()
    (event,) = runner.events()
    assert event.event_type == T.ATTRIBUTES_MODIFIED
    assert event.previous_attributes["a"] == "1" and "a" not in event.updated_attributes


def test_import_and_export(runner, tmp_path):
    source = tmp_path / "in.bin"
    source.write_bytes(b"\x00\x01" * 1000)
    session = runner.new_session()
    flowfile = session.import_from(source, session.create())
    target = tmp_path / "out.bin"
    assert session.export_to(flowfile, target) == 2000
    session.export_to(flowfile, target, append=True)
    assert target.read_bytes() == source.read_bytes() * 2
    session.transfer(flowfile, "success")
    session.commit()


def test_merge_joins_and_copies(runner):
    for text in (b"a", b"b", b"c"):
        runner.enqueue(text, {"group": "g"})
    session = runner.new_session()
    parts = session.get_batch()
    merged = session.merge(parts, header=b"[", footer=b"]", demarcator=b",", attributes={"merged": "yes"})
    assert session.read_bytes(merged) == b"[a,b,c]"
    assert merged.attributes["group"] == "g" and merged.attributes["merged"] == "yes"
    for part in parts:
        session.remove(part)
    session.transfer(merged, "success")
    session.commit()
    events = runner.events()
    (join,) = [e for e in events if e.event_type == T.JOIN]
    assert sorted(join.parent_uuids) == sorted(p.uuid for p in parts)
    assert [e.event_type for e in events].count(T.DROP) == 3


def test_remove_drops_and_releases_the_record(runner):
    flowfile = runner.enqueue(b"bye")
    session = runner.new_session()
    session.remove(session.get())
    session.commit()
    assert runner.flowfile_repository.queue_counts().get(INPUT, 0) == 0
    assert runner.flowfile_repository.claimant_count(flowfile.claim.resource) == 0
    assert types(runner) == [T.DROP]


def test_flowfile_without_destination_fails_the_commit(runner):
    runner.enqueue(b"x")
    session = runner.new_session()
    session.get()
    with pytest.raises(FlowFileHandlingError, match="neither transferred nor removed"):
        session.commit()


def test_unknown_relationship_is_refused(runner):
    session = runner.new_session()
    with pytest.raises(FlowFileHandlingError, match="no relationship 'nope'"):
        session.transfer(session.create(), "nope")


def test_using_a_removed_or_foreign_flowfile_is_refused(runner):
    runner.enqueue(b"x")
    session = runner.new_session()
    flowfile = session.get()
    session.remove(flowfile)
    with pytest.raises(FlowFileHandlingError, match="already removed"):
        session.put_attribute(flowfile, "a", "b")
    other = ProcessorRunner(TwoWay).new_session()
    with pytest.raises(FlowFileHandlingError, match="does not belong"):
        other.transfer(flowfile, "success")


def test_auto_terminated_relationship_drops_with_details():
    runner = ProcessorRunner(TwoWay, auto_terminate=["other"])
    session = runner.new_session()
    session.transfer(session.create(), "other")
    session.commit()
    events = runner.events()
    assert [e.event_type for e in events] == [T.CREATE, T.DROP]
    assert events[1].details == "Auto-Terminated by other Relationship"


def test_relationship_with_two_connections_clones_to_the_second(runner):
    runner.backend._destinations["success"] = ["success", "other"]
    session = runner.new_session()
    flowfile = session.write_bytes(session.create(), b"twice")
    session.transfer(flowfile, "success")
    session.commit()
    first, second = runner.output("success"), runner.output("other")
    assert len(first) == len(second) == 1 and first[0].uuid != second[0].uuid
    assert first[0].claim == second[0].claim


def test_send_keeps_attributes_as_emitted(runner):
    runner.enqueue(b"x", {"state": "before"})
    session = runner.new_session()
    flowfile = session.get()
    session.provenance.send(flowfile, "file:///tmp/x")
    flowfile = session.put_attribute(flowfile, "state", "after")
    session.provenance.route(flowfile, "success")
    session.transfer(flowfile, "success")
    session.commit()
    by_type = {e.event_type: e for e in runner.events()}
    assert by_type[T.SEND].updated_attributes["state"] == "before"
    assert by_type[T.SEND].transit_uri == "file:///tmp/x"
    assert by_type[T.ROUTE].updated_attributes["state"] == "after"
    assert T.ATTRIBUTES_MODIFIED not in by_type  # explicit events cover the change


def test_penalize_sets_a_future_time(runner):
    runner.enqueue(b"x")
    session = runner.new_session()
    flowfile = session.penalize(session.get())
    assert flowfile.is_penalized()
    session.transfer(flowfile, "success")
    session.commit()
    assert runner.queues["success"].status()["penalized"] == 1


def test_commit_async_runs_callback_only_after_commit(runner):
    calls = []
    session = runner.new_session()
    session.transfer(session.create(), "success")
    session.commit_async(on_success=lambda: calls.append(runner.queues["success"].count))
    assert calls == [1]


def test_commit_async_reports_failure_instead_of_success(runner):
    runner.enqueue(b"x")
    calls = []
    session = runner.new_session()
    session.get()  # never transferred: the commit fails
    session.commit_async(on_success=lambda: calls.append("ok"), on_failure=lambda e: calls.append(type(e).__name__))
    assert calls == ["FlowFileHandlingError"]


def test_migrate_moves_flowfiles_to_a_held_session(runner):
    runner.enqueue(b"held")
    session = runner.new_session()
    held = session.new_session()
    flowfile = session.get()
    session.migrate(held, [flowfile])
    session.commit()  # nothing left in this session
    assert runner.input_count == 1  # still in flight from the input queue
    held.transfer(flowfile, "success")
    held.commit()
    assert runner.input_count == 0 and runner.contents("success") == [b"held"]


def test_ids_are_one_up_and_unique(runner):
    session = runner.new_session()
    ids = [session.create().id for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_a_delivery_failure_after_the_log_accepted_rolls_nothing_back(tmp_path, monkeypatch):
    """The commit is decided at the write-ahead log: a queue that fails afterwards must not make the
    session delete the content the log references or return the input to its queue."""
    from flowactors.sdk.session import DeliveryError

    content = FileSystemContentRepository(tmp_path / "content")
    runner = ProcessorRunner(TwoWay, content=content)
    original = runner.enqueue(b"input")
    session = runner.new_session()
    flowfile = session.write_bytes(session.get(), b"new content")
    session.transfer(flowfile, "success")

    def dead_queue(flowfiles):
        raise RuntimeError("the queue's actor died")

    monkeypatch.setattr(runner.queues["success"].link.target, "offer", dead_queue)  # the ConnectionQueue
    with pytest.raises(DeliveryError, match="nothing was rolled back"):
        session.commit()
    stored = runner.flowfile_repository.get(flowfile.uuid)
    assert stored is not None and stored.queue == "success"  # the log is the truth at the next start
    assert content.read_bytes(stored.flowfile.claim) == b"new content"  # its claim was not discarded
    assert original.uuid == flowfile.uuid  # the same FlowFile, moved to 'success' by the log ...
    assert runner.queues[INPUT].queued == 0  # ... and not requeued to its input
    session.rollback()  # what a task does after any error: nothing left to undo
    assert content.read_bytes(stored.flowfile.claim) == b"new content" and runner.queues[INPUT].queued == 0


def test_a_failure_before_the_log_rolls_everything_back(tmp_path, monkeypatch):
    content = FileSystemContentRepository(tmp_path / "content")
    runner = ProcessorRunner(TwoWay, content=content)
    runner.enqueue(b"input")

    def claim_files():
        return {p for p in (tmp_path / "content").rglob("*") if p.is_file() and p.stat().st_size}

    before = claim_files()
    session = runner.new_session()
    flowfile = session.write_bytes(session.get(), b"new content")
    session.transfer(flowfile, "success")

    def refuse(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(runner.flowfile_repository, "commit", refuse)
    with pytest.raises(CommitError, match="No space left on device"):
        session.commit()
    assert runner.queues[INPUT].queued == 1 and runner.queues["success"].count == 0
    assert claim_files() == before  # the session's content was discarded


def test_a_delivery_failure_still_runs_the_success_callback(tmp_path, monkeypatch):
    """A commit the log accepted is durable even when handing it on fails: a source's ``on_success``
    runs (it deletes what the log now holds), then the error is raised."""
    from flowactors.sdk.session import DeliveryError

    runner = ProcessorRunner(TwoWay, content=FileSystemContentRepository(tmp_path / "content"))
    runner.enqueue(b"input")
    session = runner.new_session()
    session.transfer(session.get(), "success")

    def dead_queue(flowfiles):
        raise RuntimeError("the queue's actor died")

    monkeypatch.setattr(runner.queues["success"].link.target, "offer", dead_queue)  # the ConnectionQueue
    succeeded = []
    with pytest.raises(DeliveryError):
        session.commit_async(on_success=lambda: succeeded.append(True))
    assert succeeded == [True]
