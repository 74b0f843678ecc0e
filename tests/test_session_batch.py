"""The session's batch calls against the per-FlowFile calls they stand for.

Each test makes the same changes twice, once a FlowFile at a time and once a batch at a time, on
two runners fed the same input, and asserts that what comes out is the same: the FlowFiles on each
relationship (attributes, content, order), the provenance events, and the errors.
"""

from __future__ import annotations

import re
import uuid

import pytest

from flowactors import FlowFileHandlingError, Processor, Relationship
from flowactors.sdk.expression import compile_value
from flowactors.testing import ProcessorRunner
from repositories.model import new_flowfile_uuid, new_flowfile_uuids, now_millis

RELATIONSHIPS = ("success", "other")
UUID_7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class TwoWay(Processor):
    relationships = [Relationship(name) for name in RELATIONSHIPS]

    def on_trigger(self, context, session):
        raise AssertionError("tests drive the session directly")


def fed(count: int) -> ProcessorRunner:
    runner = ProcessorRunner(TwoWay)
    for i in range(count):
        runner.enqueue(f"content {i}".encode(), {"n": str(i), "parity": ("even", "odd")[i % 2]})
    return runner


def anonymous(attributes) -> dict:
    """Attributes without those a new FlowFile draws at random (its uuid, and filename from it)."""
    return {k: v for k, v in attributes.items() if k not in ("uuid", "filename")}


def outcome(runner: ProcessorRunner) -> dict:
    """What a runner's session left: the FlowFiles on each relationship, the events, the queue."""
    flows = {r: [(anonymous(f.attributes), runner.read(f)) for f in runner.output(r)]
             for r in RELATIONSHIPS if r in runner.queues}   # an auto-terminated one has no queue
    events = [(e.event_type, e.relationship, e.details, anonymous(e.previous_attributes),
               anonymous(e.updated_attributes), e.previous_size, e.updated_size) for e in runner.events()]
    return {"flows": flows, "events": events, "left": runner.input_count}


def relationships(session, flowfiles) -> list:
    """The relationship each FlowFile has in the session, read from its per-FlowFile records
    (a batch held as a run is turned into records first, as a per-FlowFile call would)."""
    session._explode()
    return [session._records[f.uuid].relationship for f in flowfiles]


def test_new_flowfiles_made_as_a_batch_are_the_ones_made_one_at_a_time():
    one, batch = fed(0), fed(0)
    session = one.new_session()
    for i in range(5):
        flowfile = session.create()
        flowfile = session.write_bytes(flowfile, b"same" if i < 3 else f"own {i}".encode())
        flowfile = session.put_all_attributes(flowfile, {"k": "v", "i": i})
        session.transfer(flowfile, "success" if i % 2 else "other")
    session.commit()

    session = batch.new_session()
    made = session.create_batch(5)
    assert all(UUID_7.match(f.uuid) and f.attributes["uuid"] == f.uuid == f.attributes["filename"] for f in made)
    assert len({f.uuid for f in made}) == 5 and len({f.id for f in made}) == 5
    made = session.write_bytes_batch(made[:3], b"same") + session.write_bytes_batch(made[3:], [b"own 3", b"own 4"])
    made = session.put_attributes_batch(made, [{"k": "v", "i": i} for i in range(5)])
    session.transfer_batch(made, ["success" if i % 2 else "other" for i in range(5)])
    session.commit()
    assert outcome(batch) == outcome(one)
    assert [e.event_type.value for e in batch.events()] == ["CREATE"] * 5


def test_taken_flowfiles_changed_as_a_batch_match_the_same_changes_one_at_a_time():
    """Shared values (one already set on some FlowFiles: no change, no event for those), values
    a FlowFile, a relationship a FlowFile, removals, and ROUTE events reported for a batch."""
    one, batch = fed(8), fed(8)
    session = one.new_session()
    taken = session.get_batch(8)
    for i, flowfile in enumerate(taken):
        if i == 7:
            session.remove(flowfile)
            continue
        if i < 6:
            flowfile = session.put_all_attributes(flowfile, {"parity": "even", "tag": 1} if i < 4 else {"parity": "even"})
        flowfile = session.put_all_attributes(flowfile, {"seen": f"#{i}", "uuid": "ignored"})
        if i == 6:
            session.provenance.route(flowfile, "other", details="sixth")
        session.transfer(flowfile, "other" if i in (2, 6) else "success")
    session.commit()

    session = batch.new_session()
    taken = session.get_batch(8)
    kept, doomed = taken[:7], taken[7:]
    changed = session.put_attributes_batch(kept[:4], {"parity": "even", "tag": 1})
    changed += session.put_attributes_batch(kept[4:6], {"parity": "even"})
    assert changed[4] is kept[4] and changed[5] is not kept[5]   # 4 is even already: the same version
    changed = session.put_attributes_batch(changed + kept[6:], [{"seen": f"#{i}", "uuid": "ignored"} for i in range(7)])
    session.provenance.route_batch(changed[6:], "other", details="sixth")
    session.transfer_batch(changed, [Relationship("other") if i in (2, 6) else "success" for i in range(7)])
    session.remove_batch(doomed)
    session.commit()
    assert outcome(batch) == outcome(one)
    kinds = [e.event_type.value for e in batch.events()]
    assert kinds.count("ATTRIBUTES_MODIFIED") == 6 and kinds.count("ROUTE") == 1 and kinds.count("DROP") == 1


def test_batch_calls_refuse_what_the_per_flowfile_calls_refuse():
    runner = fed(3)
    session = runner.new_session()
    taken = session.get_batch(3)
    with pytest.raises(FlowFileHandlingError, match="has no relationship 'nowhere'") as per_flowfile:
        session.transfer(taken[0], "nowhere")
    with pytest.raises(FlowFileHandlingError) as batched:
        session.transfer_batch(taken, ["success", "nowhere", "success"])
    assert str(batched.value) == str(per_flowfile.value)
    assert relationships(session, taken) == [None, None, None]   # none was routed
    with pytest.raises(ValueError, match="2 relationships for 3 FlowFiles"):
        session.transfer_batch(taken, ["success", "other"])
    with pytest.raises(ValueError, match="1 attribute maps for 3 FlowFiles"):
        session.put_attributes_batch(taken, [{"a": "1"}])
    with pytest.raises(ValueError, match="2 contents for 3 FlowFiles"):
        session.write_bytes_batch(taken, [b"a", b"b"])
    with pytest.raises(ValueError, match="1 relationships for 3 FlowFiles"):
        session.provenance.route_batch(taken, ["success"])
    stranger = fed(1).new_session().get()
    with pytest.raises(FlowFileHandlingError, match=f"FlowFile {stranger.uuid} does not belong to this session"):
        session.put_attributes_batch([taken[0], stranger], {"a": "1"})
    assert taken[0].attributes.get("a") is None and session._records[taken[0].uuid].current is taken[0]
    session.remove_batch(taken[:1])
    with pytest.raises(FlowFileHandlingError, match="was already removed"):
        session.transfer_batch(taken, "success")
    session.rollback()
    assert runner.input_count == 3


@pytest.mark.parametrize("count", [1, 63, 64, 2000])   # formatted one by one, laid out by columns
def test_flowfile_uuids_made_in_a_batch_are_version_7_unique_and_time_ordered(count):
    before = now_millis()
    first = new_flowfile_uuids(count)
    assert all(UUID_7.match(u) for u in first) and len(set(first)) == count
    assert all(uuid.UUID(u).version == 7 and uuid.UUID(u).variant == uuid.RFC_4122 for u in first)
    stamps = {int(u[:8] + u[9:13], 16) for u in first}   # the 48-bit milliseconds: all of one
    assert len(stamps) == 1 and before <= stamps.pop() <= now_millis()
    later = new_flowfile_uuid()
    assert UUID_7.match(later) and later[:13] >= first[0][:13]   # the millisecond prefix never goes back


@pytest.mark.parametrize("text, volatile", [
    ("${fileSize:ge(8):ifElse('large','small')}", False),
    ("${parity:append('-'):append(${missing:isNull()})}", False),
    ("n=${n:toNumber():plus(1)} of ${filename:substringBefore('.')}", False),
    ("${literal(3):plus(1)}", False),   # reads nothing: evaluated once for the batch
    ("${now():format('yyyy')}-${parity}", True),
    ("${UUID()}", True),
])
def test_a_value_evaluated_over_a_batch_is_each_flowfiles_own_value(text, volatile):
    runner = fed(0)
    session = runner.new_session()
    flowfiles = session.create_batch(6)
    flowfiles = session.write_bytes_batch(flowfiles, [b"x" * (4 * i) for i in range(6)])
    flowfiles = session.put_attributes_batch(flowfiles, [{"n": str(i), "parity": ("even", "odd")[i % 2]}
                                                         for i in range(6)])
    value = compile_value(text)
    results = value.evaluate_each(flowfiles)
    if text == "${UUID()}":
        assert len(set(results)) == 6   # drawn for every FlowFile, never shared
    else:
        assert results == [value.evaluate(flowfile=f) for f in flowfiles]
    assert (value._inputs is None) == volatile
    session.rollback()


# ------------------------------------------------------------------ whole batches held as runs
# A batch call given the whole batch a session handed out (``get_batch``, ``create_batch`` and the
# calls after them) works on the session's columns (``session_runs.Run``); these tests hold that path against
# the per-FlowFile calls, and check that it was the path taken.

def fed_to(count: int, auto_terminate=()) -> ProcessorRunner:
    runner = ProcessorRunner(TwoWay, auto_terminate=auto_terminate)
    for i in range(count):
        runner.enqueue(f"content {i}".encode(), {"n": str(i), "parity": ("even", "odd")[i % 2]})
    return runner


def held_as_runs(session) -> bool:
    return bool(session._runs) and not session._records


@pytest.mark.parametrize("auto_terminate", [(), ("other",)])
def test_a_whole_taken_batch_changed_routed_and_reported_as_a_run_matches_one_at_a_time(auto_terminate):
    one, batch = fed_to(6, auto_terminate), fed_to(6, auto_terminate)
    routes = ["other" if i % 3 == 0 else "success" for i in range(6)]
    session = one.new_session()
    for flowfile, route in zip(session.get_batch(6), routes):
        flowfile = session.put_all_attributes(flowfile, {"k": "v", "parity": "none"})
        session.provenance.route(flowfile, route, details="routed")
        session.transfer(flowfile, route)
    session.commit()

    session = batch.new_session()
    taken = session.get_batch(6)
    changed = session.put_attributes_batch(taken, {"k": "v", "parity": "none"})
    session.provenance.route_batch(changed, routes, details="routed")
    session.transfer_batch(changed, routes)
    assert held_as_runs(session)
    session.commit()
    assert outcome(batch) == outcome(one)
    kinds = [e.event_type.value for e in batch.events()]
    assert kinds == ["ROUTE"] * 6 + (["DROP"] * 2 if auto_terminate else [])
    assert batch.input_count == 0 and len(batch.output("success")) == 4


def test_new_flowfiles_made_as_a_run_match_the_ones_made_one_at_a_time():
    one, batch = fed_to(0, ("other",)), fed_to(0, ("other",))
    session = one.new_session()
    for i in range(5):
        flowfile = session.write_bytes(session.create(), b"same")
        flowfile = session.put_all_attributes(flowfile, {"i": i})
        session.transfer(flowfile, "other" if i == 4 else "success")
    session.commit()

    session = batch.new_session()
    made = session.create_batch(5)
    made = session.write_bytes_batch(made, b"same")
    made = session.put_attributes_batch(made, [{"i": i} for i in range(5)])
    session.transfer_batch(made, ["other" if i == 4 else "success" for i in range(5)])
    assert held_as_runs(session)
    session.commit()
    assert outcome(batch) == outcome(one)
    assert [e.event_type.value for e in batch.events()] == ["CREATE"] * 5 + ["DROP"]
    assert [e.details for e in batch.events()][-1] == "Auto-Terminated by other Relationship"


def test_a_per_flowfile_call_turns_the_runs_into_records_keeping_what_was_done():
    """The batch calls' changes and the events reported for the batch survive the switch."""
    one, batch = fed_to(4), fed_to(4)
    session = one.new_session()
    for i, flowfile in enumerate(session.get_batch(4)):
        flowfile = session.put_all_attributes(flowfile, {"k": "v"})
        session.provenance.route(flowfile, "success")
        if i == 0:
            flowfile = session.put_attribute(flowfile, "first", "yes")
        session.transfer(flowfile, "success")
    session.commit()

    session = batch.new_session()
    changed = session.put_attributes_batch(session.get_batch(4), {"k": "v"})
    session.provenance.route_batch(changed, "success")
    assert held_as_runs(session)
    changed[0] = session.put_attribute(changed[0], "first", "yes")
    assert not session._runs
    session.transfer_batch(changed, "success")
    session.commit()
    assert outcome(batch) == outcome(one)


def test_a_list_the_processor_reordered_is_handled_one_flowfile_at_a_time():
    one, batch = fed_to(3), fed_to(3)
    session = one.new_session()
    taken = session.get_batch(3)
    for flowfile, route in zip(reversed(taken), ["other", "success", "success"]):
        session.transfer(flowfile, route)
    session.commit()

    session = batch.new_session()
    taken = session.get_batch(3)
    taken.reverse()   # the session's own list is a copy: its records stay in queue order
    session.transfer_batch(taken, ["other", "success", "success"])
    session.commit()
    assert outcome(batch) == outcome(one)
    assert [f.attributes["n"] for f in batch.output("other")] == ["2"]


def test_a_run_that_is_not_routed_refuses_to_commit_as_records_do():
    errors = []
    for as_batch in (False, True):
        runner = fed_to(3)
        session = runner.new_session()
        taken = session.get_batch(3)
        if as_batch:
            session.put_attributes_batch(taken, {"k": "v"})
            assert held_as_runs(session)
        with pytest.raises(FlowFileHandlingError) as failed:
            session.commit()
        errors.append(str(failed.value).split(", e.g.")[0])
        session.rollback()
        assert [f.attributes.get("k") for f in runner.new_session().get_batch(3)] == [None] * 3
    assert errors[0] == errors[1] == "TwoWay: 3 FlowFile(s) were neither transferred nor removed"


def test_a_removed_run_drops_what_was_taken_and_rollback_returns_it():
    one, batch = fed_to(3), fed_to(3)
    session = one.new_session()
    for flowfile in session.get_batch(3):
        session.remove(flowfile)
    session.commit()
    session = batch.new_session()
    session.remove_batch(session.get_batch(3))
    assert held_as_runs(session)
    session.commit()
    assert outcome(batch) == outcome(one)
    assert [e.event_type.value for e in batch.events()] == ["DROP"] * 3

    again = fed_to(2)
    session = again.new_session()
    session.remove_batch(session.put_attributes_batch(session.get_batch(2), {"k": "v"}))
    session.rollback()
    assert [f.attributes.get("k") for f in again.queues["input"].listing(10)] == [None, None]


def test_reading_a_batch_is_reading_each_flowfile():
    one, batch = fed(5), fed(5)
    session = one.new_session()
    flowfiles = session.get_batch(5)
    expected = [session.read_bytes(f) for f in flowfiles]
    session.rollback()
    session = batch.new_session()
    flowfiles = session.get_batch(5)
    assert session.read_bytes_batch(flowfiles) == expected == [f"content {i}".encode() for i in range(5)]
    assert session._runs  # read without a record a FlowFile
    written = session.write_bytes_batch(flowfiles, [b"new"] * 5)  # this session's own claims are flushed first
    assert session.read_bytes_batch(written) == [b"new"] * 5
    session.rollback()


def test_send_and_receive_as_a_batch_are_the_events_made_one_at_a_time():
    one, batch = fed(3), fed(3)
    session = one.new_session()
    for flowfile in session.get_batch(3):
        session.provenance.send(flowfile, "flowactors://n1/f/c", duration=7)
        session.remove(flowfile)
    session.commit()
    session = one.new_session()
    made = [session.create() for _ in range(2)]
    for flowfile, source in zip(made, ("a", "b")):
        session.provenance.receive(flowfile, "flowactors://n2/f/c", source_system_flowfile_id=source)
        session.transfer(flowfile, "success")
    session.commit()
    session = batch.new_session()
    taken = session.get_batch(3)
    session.provenance.send_batch(taken, "flowactors://n1/f/c", duration=7)
    session.remove_batch(taken)
    session.commit()
    session = batch.new_session()
    made = session.create_batch(2)
    session.provenance.receive_batch(made, "flowactors://n2/f/c", source_system_flowfile_ids=["a", "b"])
    session.transfer_batch(made, "success")
    session.commit()
    fields = [(e.event_type, e.transit_uri, e.source_system_flowfile_id, e.duration) for e in one.events()]
    assert fields == [(e.event_type, e.transit_uri, e.source_system_flowfile_id, e.duration) for e in batch.events()]
    assert [f[0] for f in fields] == ["SEND"] * 3 + ["DROP"] * 3 + ["RECEIVE"] * 2
    assert outcome(one) == outcome(batch)
    with pytest.raises(ValueError, match="2 source ids for 1 FlowFiles"):
        batch.new_session().provenance.receive_batch([made[0]], "x", source_system_flowfile_ids=["a", "b"])
