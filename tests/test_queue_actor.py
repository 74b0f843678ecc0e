"""The queue actor on real Ray with the real FlowFile repository actor: prioritizers across swap out
and swap in, penalized FlowFiles, listing and emptying, and recovery after kill -9 of both actors'
processes with FlowFiles in memory, in flight and swapped out."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
import ray
from queue_helpers import expected_order, make

from flowactors.engine.queues.connection import QueueActor, QueueConfig, restore_queues
from flowactors.engine.actors.repository_actors import FlowFileRepositoryActor
from flowactors.engine.transport import ActorLink
from flowactors.sdk.settings import Settings
from repositories.flowfile.swapfile import swap_directory, write_swap_file
from repositories.model import QueuedFlowFile, now_millis

pytestmark = pytest.mark.ray


class Actors:
    """A FlowFile repository actor and one queue actor ``q`` (swap threshold 100, batch 50)."""

    def __init__(self, root, prioritizers=(), threshold=100, batch=50):
        self.root = str(root)
        self.config = QueueConfig("q", back_pressure_objects=0, prioritizers=tuple(prioritizers),
                                  swap_threshold=threshold, swap_batch_size=batch)
        self.repo = FlowFileRepositoryActor.remote(self.root, Settings())
        self.open_report = ray.get(self.repo.open.remote())
        self.queue = QueueActor.remote(self.config, self.root, ActorLink(self.repo))

    def commit(self, flowfiles):
        ray.get(self.repo.commit.remote([QueuedFlowFile(f, "q") for f in flowfiles], []))

    def take(self, n, ack=True):
        taken, expired = ray.get(self.queue.poll.remote(n))
        assert not expired
        if ack:
            ray.get(self.queue.acknowledge.remote([f.uuid for f in taken]))
        return taken

    def drain(self, n=40):
        out = []
        while ray.get(self.queue.state.remote()).count:
            taken = self.take(n)
            assert taken, "the queue counts FlowFiles but gives none"
            out += taken
        return out

    def pids(self):
        return (ray.get(self.queue.pid.remote()),
                ray.get(self.repo.__ray_call__.remote(lambda actor: os.getpid())))

    def kill(self):
        for actor in (self.queue, self.repo):
            ray.kill(actor)


@pytest.fixture
def actors(ray_session, tmp_path):
    made = []

    def start(*args, **kwargs):
        a = Actors(tmp_path / "repository", *args, **kwargs)
        made.append(a)
        return a

    yield start
    for a in made:
        a.kill()


@pytest.mark.parametrize("prioritizers", [("FIFO",), ("OldestFlowFileFirst",), ("NewestFlowFileFirst",),
                                          ("PriorityAttribute",), ("PriorityAttribute", "OldestFlowFileFirst")],
                         ids=lambda p: "+".join(p))
def test_drained_order_under_each_prioritizer_with_swap_out_and_swap_in(actors, prioritizers):
    rng = random.Random(11)
    a = actors(prioritizers)
    flowfiles = make(800, rng)
    a.commit(flowfiles)
    arrivals = list(flowfiles)
    rng.shuffle(arrivals)
    fifo = prioritizers == ("FIFO",)
    queued = []
    for start in range(0, 600, 60):  # offers with polls between them: both directions of swapping
        batch = arrivals[start:start + 60]
        ray.get(a.queue.offer.remote(batch))
        queued += batch
        if start % 120 == 0:
            taken = a.take(25)
            expected = (queued if fifo else expected_order(prioritizers, queued))[:25]
            assert [f.uuid for f in taken] == [f.uuid for f in expected]
            gone = {f.uuid for f in taken}
            queued = [f for f in queued if f.uuid not in gone]
    ray.get(a.queue.offer.remote(arrivals[600:]))
    queued += arrivals[600:]
    status = ray.get(a.queue.settle.remote())
    assert status["swapped"] > 500 and status["in_memory"] <= 100 + 2 * 50
    out = a.drain()
    assert [f.uuid for f in out] == [f.uuid for f in (queued if fifo else expected_order(prioritizers, queued))]
    status = ray.get(a.queue.status.remote())
    assert status["swap_files_written"] >= 10 and status["swap_files_read"] == status["swap_files_written"]
    assert status["count"] == 0 and status["swap_errors"] == []
    assert ray.get(a.repo.swap_files.remote()) == []
    assert ray.get(a.repo.queue_counts.remote()) == {"q": 800}
    assert list(swap_directory(a.root).glob("*.swap")) == []


def test_penalized_flowfiles_do_not_block_the_others_on_the_actor(actors):
    a = actors(threshold=100, batch=50)
    flowfiles = make(300, random.Random(12))
    penalty_end = now_millis() + 2500
    flowfiles[:3] = [f._replace(penalized_until=penalty_end) for f in flowfiles[:3]]
    a.commit(flowfiles)
    ray.get(a.queue.offer.remote(flowfiles))
    first = a.take(1000)
    assert [f.uuid for f in first] == [f.uuid for f in flowfiles[3:]]  # swapped ones too, none waiting
    assert ray.get(a.queue.status.remote())["penalized"] == 3
    taken, _ = ray.get(a.queue.poll.remote(10, 0.1))
    assert taken == []
    time.sleep(max(0.0, (penalty_end - now_millis()) / 1000) + 0.05)
    back = a.take(10)
    assert [f.uuid for f in back] == [f.uuid for f in flowfiles[:3]]


def test_listing_includes_swapped_flowfiles_in_delivery_order(actors):
    a = actors(("PriorityAttribute",))
    flowfiles = make(400, random.Random(13))
    a.commit(flowfiles)
    ray.get(a.queue.offer.remote(flowfiles))
    ray.get(a.queue.settle.remote())
    listed = ray.get(a.queue.list_flowfiles.remote(150))
    assert [f.uuid for f, _s in listed] == [f.uuid for f in expected_order(("PriorityAttribute",), flowfiles)[:150]]
    assert any(swapped for _f, swapped in listed) and any(not swapped for _f, swapped in listed)
    assert ray.get(a.queue.state.remote()).count == 400  # listing takes nothing


@pytest.mark.parametrize("prioritizers", [(), ("PriorityAttribute",)], ids=["fifo", "priority"])
def test_recovery_after_kill_9_with_flowfiles_in_memory_in_flight_and_swapped(actors, prioritizers):
    rng = random.Random(14)
    a = actors(prioritizers)
    flowfiles = make(1000, rng)
    a.commit(flowfiles)
    for i in range(0, 1000, 100):
        ray.get(a.queue.offer.remote(flowfiles[i:i + 100]))
    done = a.take(20)                       # a processor took these and committed them elsewhere
    ray.get(a.repo.commit.remote([], [f.uuid for f in done]))
    in_flight = a.take(30, ack=False)       # taken, never committed: must come back
    status = ray.get(a.queue.settle.remote())
    assert status["in_flight"] == 30 and status["swapped"] >= 500 and status["in_memory"] >= 50
    assert len(list(swap_directory(a.root).glob("*.swap"))) == status["swap_files"]

    for pid in a.pids():
        os.kill(pid, signal.SIGKILL)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(a.queue.status.remote(), timeout=30)

    b = actors(prioritizers)
    report = restore_queues(ActorLink(b.repo), {"q": ActorLink(b.queue)}, b.root)
    assert report["swap_files"] == status["swap_files"] and report["swapped"] == status["swapped"]
    assert report["restored"] + report["swapped"] == 980 and report["orphan_swap_files_removed"] == []
    assert ray.get(b.queue.state.remote()).count == 980
    out = b.drain()
    survivors = [f for f in flowfiles if f.uuid not in {d.uuid for d in done}]
    expected = survivors if not prioritizers else expected_order(prioritizers, survivors)
    assert [f.uuid for f in out] == [f.uuid for f in expected]
    assert {f.uuid for f in in_flight} <= {f.uuid for f in out}
    assert ray.get(b.repo.swap_files.remote()) == []
    assert ray.get(b.repo.queue_counts.remote()) == {"q": 980}
    assert list(swap_directory(b.root).glob("*.swap")) == []


def test_a_swap_file_whose_registration_never_committed_is_deleted_at_start(actors):
    """Kill -9 between writing a swap file and registering it: the FlowFiles are still in their
    queue in the log; the file is an orphan and must not bring them back a second time."""
    a = actors()
    flowfiles = make(120, random.Random(15))
    a.commit(flowfiles)
    ray.get(a.repo.close.remote())
    a.kill()
    orphan = write_swap_file(swap_directory(a.root), "q-orphan.local.1-1-1.swap", "q", flowfiles[60:110])
    b = actors()
    report = restore_queues(ActorLink(b.repo), {"q": ActorLink(b.queue)}, b.root)
    assert report["orphan_swap_files_removed"] == [orphan.location] and not orphan.path.exists()
    assert [f.uuid for f in b.drain()] == [f.uuid for f in flowfiles]
