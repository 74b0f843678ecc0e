"""An executor's task overlaps a commit's delivery with its next trigger (engine/session_backend.py).

The backend is driven here over links whose answers the test hands out, so each step of the
order can be seen: the offers go out and the commit returns; the input is acknowledged only after
the offers arrived; the next commit, a wait or a destination the offers may fill finishes the
delivery first; a failed delivery asks for a repair.
"""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from flowactors.engine.session_backend import EngineBackend
from flowactors.engine.task import ProcessorTask
from flowactors.engine.queues.connection import ConnectionQueue, QueueConfig, QueueState
from flowactors.processors.attributes import UpdateAttribute
from flowactors.sdk.flow import Flow
from flowactors.sdk.session_contract import CommitBatch, DeliveryError
from flowactors.sdk.settings import Settings
from repositories.model import ContentClaim, FlowFile, FlowFileBatch, ResourceClaim, new_flowfile_uuid


class HeldLink:
    """A queue whose offers are answered when the test says so; other calls at once."""

    def __init__(self, state: QueueState):
        self.state = state
        self.calls: list[str] = []
        self.offers: list[concurrent.futures.Future] = []

    def call(self, method, *args):
        """Records the method's name (a link is given the method itself, ``QueueHost.offer``)."""
        self.calls.append(method.__name__)
        future: concurrent.futures.Future = concurrent.futures.Future()
        if method.__name__ == "offer":
            self.offers.append(future)
        elif method.__name__ == "poll":
            future.set_result(([], []))
        else:
            future.set_result(self.state)
        return future

    def answer(self, state: QueueState | None = None) -> None:
        next(f for f in self.offers if not f.done()).set_result(state or self.state)


class NoLog:
    def record(self, batch: CommitBatch) -> None:
        pass


def flowfiles(count: int, size: int = 10) -> FlowFileBatch:
    claim = ContentClaim(ResourceClaim("default", "0", "c"), 0, size)
    return FlowFileBatch(FlowFile(i, new_flowfile_uuid(), {}, claim, 0, 0) for i in range(count))


def state(room: int) -> QueueState:
    return QueueState(0, 0, room, 1 << 40)


@pytest.fixture
def links():
    return {"in": HeldLink(state(1 << 40)), "out": HeldLink(state(5_000))}


def backend(links, overlap: bool = True) -> EngineBackend:
    return EngineBackend(content=None, queues=links, log=NoLog(), inputs=["in"], destinations={"ok": ["out"]},
                         overlap_delivery=overlap)


def batch(count: int) -> CommitBatch:
    taken = flowfiles(count)
    return CommitBatch(offers={"out": taken}, acknowledgements={"in": [f.uuid for f in taken]})


def test_a_commit_returns_while_its_offers_travel_and_acknowledges_only_after_they_arrived(links):
    b = backend(links)
    b.commit(batch(3))
    assert links["out"].calls == ["offer"] and links["in"].calls == []
    assert b.delivering
    links["out"].answer()
    b.finish_delivery()
    assert links["in"].calls == ["acknowledge"]
    assert not b.delivering


def test_without_overlap_a_commit_delivers_before_it_returns(links):
    b = backend(links, overlap=False)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (b.commit(batch(3)), done.set()))
    worker.start()
    assert not done.wait(0.2)  # waiting for its offer
    links["out"].answer()
    worker.join(5)
    assert done.is_set() and links["in"].calls == ["acknowledge"] and not b.delivering


def test_the_next_commit_first_finishes_the_delivery_before_it(links):
    b = backend(links)
    b.commit(batch(3))
    second = threading.Thread(target=b.commit, args=(batch(2),))
    second.start()
    second.join(0.2)
    assert second.is_alive() and links["in"].calls == []  # the first offer has not arrived
    links["out"].answer()
    second.join(5)
    assert not second.is_alive()
    assert links["out"].calls == ["offer", "offer"] and links["in"].calls == ["acknowledge"]
    assert b.delivering  # the second one's
    links["out"].answer()
    b.finish_delivery()
    assert links["in"].calls == ["acknowledge", "acknowledge"]


def test_waiting_for_input_finishes_the_delivery_first(links):
    b = backend(links)
    b.commit(batch(3))
    links["out"].answer()
    b.prefetch(10, wait=0.05)   # nothing there: the delivery is finished before the wait
    assert not b.delivering and links["in"].calls == ["poll", "acknowledge", "poll"]


def test_back_pressure_is_looked_at_again_when_the_offers_on_their_way_may_fill_a_destination(links):
    b = backend(links)
    b.commit(batch(1000))
    links["out"].answer(state(1500))
    b.finish_delivery()                       # room for 1,500 more, as the queue said
    b.commit(batch(1000))
    assert b.full_destinations() == []        # 1,000 on their way < 1,500: no need to ask
    assert b.delivering
    links_out = links["out"]
    links_out.answer(state(500))
    b.commit(batch(1000))                     # finishes the second: the queue said 500 left
    # the third's 1,000 may fill it: full_destinations waits for the answer, which says full
    answered = threading.Timer(0.1, lambda: links_out.answer(state(-500)))
    answered.start()
    assert b.full_destinations() == ["out"]
    answered.join()
    assert not b.delivering


def test_content_bytes_on_their_way_count_against_the_byte_threshold(links):
    b = backend(links)
    b.commit(batch(10))
    links["out"].answer(QueueState(0, 0, 1 << 40, 150))   # 150 bytes of room
    b.finish_delivery()
    b.commit(batch(20))                       # 20 x 10 bytes >= 150: may fill it
    links["out"].answer(QueueState(0, 0, 1 << 40, -50))
    assert b.full_destinations() == ["out"] and not b.delivering


def test_a_delivery_that_fails_asks_for_a_repair_and_is_not_retried(links):
    b = backend(links)
    b.commit(batch(3))
    links["out"].offers[0].set_exception(RuntimeError("queue gone"))
    with pytest.raises(DeliveryError, match="queue gone"):
        b.finish_delivery()
    assert b.lost and "queue gone" in b.lost
    assert not b.delivering and links["in"].calls == []   # never acknowledged: the log repairs it
    b.finish_delivery()  # nothing left to finish


def test_a_task_is_not_idle_while_its_delivery_is_under_way_and_delivers_before_it_pauses(links):
    flow = Flow("f")
    node = flow.add(UpdateAttribute, "update")
    task = ProcessorTask("f", node, 0, backend(links), Settings())
    task.backend.commit(batch(3))
    task.idle = True                      # its last trigger found nothing more to do
    assert task.status()["idle"] is False
    links["out"].answer()
    task._pause(0)                        # about to wait: the delivery goes first
    assert links["in"].calls == ["acknowledge"]
    assert task.status()["idle"] is True


def test_a_queue_reports_its_room_before_back_pressure():
    queue = ConnectionQueue(QueueConfig("q", back_pressure_objects=5, back_pressure_bytes=100))
    after = queue.offer(flowfiles(3, size=20))
    assert (after.count, after.size, after.full, after.room_objects, after.room_bytes) == (3, 60, False, 2, 40)
    full = queue.offer(flowfiles(2, size=20))
    assert full.full and full.room_objects == 0 and full.room_bytes == 0
    unbounded = ConnectionQueue(QueueConfig("u", back_pressure_objects=0, back_pressure_bytes=0)).offer(flowfiles(1))
    assert not unbounded.full and unbounded.room_objects > 1 << 60 and unbounded.room_bytes > 1 << 60
