"""Group commit (flowactors/engine/group_commit.py) against the real FlowFile repository actor:
sessions sent together are still accepted or refused one by one, and a failed call refuses all."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from flowactors.engine.actors.repository_actors import FlowFileRepositoryActor
from flowactors.engine.group_commit import GroupLog
from flowactors.engine.transport import ActorLink
from flowactors.sdk.session import CommitBatch, CommitError, CommitInDoubt
from flowactors.sdk.settings import Settings
from repositories.model import FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis

pytestmark = pytest.mark.ray


def flowfile(n: int, uuid: str | None = None) -> FlowFile:
    now = now_millis()
    return FlowFile(n, uuid or new_flowfile_uuid(), {"n": str(n)}, None, now, now, queue_date=now, queue_index=n)


@pytest.fixture
def wal(ray_session, tmp_path):
    import ray

    actor = FlowFileRepositoryActor.remote(str(tmp_path), Settings())
    ray.get(actor.open.remote())
    yield actor
    ray.get(actor.close.remote())
    ray.kill(actor)


def test_sessions_sent_together_are_accepted_or_refused_one_by_one(wal):
    import ray

    twice = new_flowfile_uuid()
    good = [CommitBatch(updates=[QueuedFlowFile(flowfile(i), "q")]) for i in range(20)]
    bad = CommitBatch(updates=[QueuedFlowFile(flowfile(100, twice), "q")], removals=[twice])
    log = GroupLog(ActorLink(wal), None)
    start = threading.Barrier(len(good) + 1)

    def commit(batch):
        start.wait()  # all at once, so that they share groups
        return log.record(batch)

    with concurrent.futures.ThreadPoolExecutor(len(good) + 1) as pool:
        results = [pool.submit(commit, b) for b in [*good[:10], bad, *good[10:]]]
    log.close()
    outcomes = [r.exception() for r in results]
    assert isinstance(outcomes[10], CommitError) and "more than once" in str(outcomes[10])
    assert [o for i, o in enumerate(outcomes) if i != 10] == [None] * 20
    assert ray.get(wal.queue_counts.remote()) == {"q": 20}  # the refused one wrote nothing
    with pytest.raises(CommitError, match="stopping"):
        log.record(good[0])  # a closed log takes nothing more


def test_a_call_cut_by_the_logs_death_leaves_every_session_of_the_group_in_doubt(ray_session, tmp_path):
    """The log's process died during the call: whether the commits landed is unknown, so none of
    the sessions may roll back (``CommitInDoubt``, a ``DeliveryError``); the flow is repaired from
    the log instead."""
    import ray

    dead = FlowFileRepositoryActor.remote(str(tmp_path), Settings())
    ray.kill(dead)  # the call itself fails (an actor that died), not one commit in it
    log = GroupLog(ActorLink(dead), None)
    with pytest.raises(CommitInDoubt, match="may or may not be in the log"):
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))
    log.close()


def test_a_failed_call_the_log_answered_refuses_every_session_of_the_group(ray_session, tmp_path):
    import ray

    unopened = FlowFileRepositoryActor.remote(str(tmp_path), Settings())  # answers, but cannot commit
    log = GroupLog(ActorLink(unopened), None)
    with pytest.raises(CommitError, match="the FlowFile repository refused the commit") as refused:
        log.record(CommitBatch(updates=[QueuedFlowFile(flowfile(1), "q")]))
    assert not isinstance(refused.value, CommitInDoubt)
    log.close()
    ray.kill(unopened)


def test_events_provenance_did_not_take_are_kept_and_sent_again(wal, tmp_path):
    """The provenance call of a group fails (its process died): the commits stand, and their events
    wait in ``unrecorded`` until the next log (after the repair) sends them again."""
    from flowactors.engine.repository_services import ProvenanceRepositoryService
    from flowactors.engine.transport import ObjectLink, resolve
    from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType

    class DiesOnce(ProvenanceRepositoryService):
        died = False

        def register_encoded(self, unregistered, timestamps):
            if not self.died:
                self.died = True
                raise RuntimeError("the provenance repository's process died")
            return super().register_encoded(unregistered, timestamps)

    provenance = DiesOnce(str(tmp_path / "prov"), Settings())
    provenance.open()
    ff = flowfile(1)
    event = ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=now_millis(), flowfile_uuid=ff.uuid,
                            component_id="t/p", component_name="p", component_type="T")
    log = GroupLog(ActorLink(wal), ObjectLink(provenance))
    pending = log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=[event]))
    with pytest.raises(RuntimeError, match="died"):
        resolve(pending)
    log.close()
    assert len(log.unrecorded) == 1 and provenance.stats()["max_event_id"] == -1  # kept, not recorded
    again = GroupLog(ActorLink(wal), ObjectLink(provenance))
    again.resend(log.unrecorded)
    again.close()
    assert [e.flowfile_uuid for e in provenance.events(0, 10)] == [ff.uuid]
    provenance.close()
