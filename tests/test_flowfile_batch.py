"""A batch of FlowFiles as one value (``FlowFileBatch``): it pickles as columns and comes back
equal, and it round-trips unchanged through a queue in another process (swapping part of it to a
swap file and back), the write-ahead log and provenance."""

from __future__ import annotations

import pickle

import pytest
import ray
import ray.cloudpickle

from flowactors.engine.actors.repository_actors import FlowFileRepositoryActor
from flowactors.engine.queues.connection import QueueActor, QueueConfig
from flowactors.engine.transport import ActorLink
from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.model import ContentClaim, FlowFile, FlowFileBatch, QueuedFlowFile, ResourceClaim, new_flowfile_uuids
from repositories.provenance import WriteAheadProvenanceRepository
from repositories.provenance.event import FIELD_INDEX, EventRun, ProvenanceEventType, claim_field, encode_batch, \
    new_event_fields


def made(count: int, claims: list[ContentClaim | None] | None = None) -> FlowFileBatch:
    """FlowFiles as a session makes them: some without content, an attribute map shared by several
    FlowFiles, penalized ones, each its own queue position."""
    shared = {"kind": "shared", "ü": "ß"}
    claims = claims or [None if i % 4 == 0 else ContentClaim(ResourceClaim("default", str(i // 5), f"17-{i // 5}"),
                                                             (i % 5) * 10, 10) for i in range(count)]
    out = FlowFileBatch()
    for i, (uuid, claim) in enumerate(zip(new_flowfile_uuids(count), claims)):
        attributes = shared if i % 3 == 0 else {"uuid": uuid, "filename": f"f-{i}", "n": str(i)}
        out.append(FlowFile(10 + i, uuid, attributes, claim, 1_700_000_000_000 + i, 1_700_000_000_000 - i,
                            (i % 2) * 1_700_000_100_000, 1_700_000_000_500, i))
    return out


def same_types(flowfiles) -> bool:
    return all(type(f) is FlowFile and (f.claim is None or (type(f.claim) is ContentClaim
                                                            and type(f.claim.resource) is ResourceClaim))
               for f in flowfiles)


@pytest.mark.parametrize("dumps", [pickle.dumps, ray.cloudpickle.dumps])
def test_a_batch_pickles_as_columns_and_comes_back_equal(dumps):
    batch = made(40)
    back = pickle.loads(dumps(batch))
    assert type(back) is FlowFileBatch and back == batch and same_types(back)
    assert back[0].attributes is back[3].attributes   # a map shared in the batch is stored once
    assert pickle.loads(dumps(FlowFileBatch())) == []
    assert b"FlowFile\x94" not in dumps(batch)          # no FlowFile tuple pickled one by one


def test_a_batch_round_trips_through_a_queue_elsewhere_its_swap_file_the_log_and_provenance(ray_session, tmp_path):
    root = tmp_path / "repository"
    content = FileSystemContentRepository(root / "content")
    writer = content.writer()
    claims = [None if i % 4 == 0 else writer.write_bytes(f"content {i}".encode()) for i in range(60)]
    writer.flush(sync=False)
    batch = made(60, claims)
    repo = FlowFileRepositoryActor.remote(str(root), Settings())
    ray.get(repo.open.remote())
    # a queue in an actor of its own, which swaps past 20 FlowFiles, 10 a swap file
    queue = QueueActor.remote(QueueConfig("q", back_pressure_objects=0, swap_threshold=20, swap_batch_size=10),
                              str(root), ActorLink(repo))
    try:
        ray.get(repo.commit.remote([QueuedFlowFile(f, "q") for f in batch], [], writer.created()))
        ray.get(queue.offer.remote(batch))
        assert ray.get(queue.status.remote())["swap_files"] > 0
        logged, _ = ray.get(repo.page.remote("q", None, None, 1000))
        swapped = sum(len(ray.get(repo.page.remote(q, None, None, 1000))[0])
                      for q in ray.get(repo.queue_sizes.remote()) if q.startswith("swap:"))
        assert len(logged) + swapped == 60
        back = []
        while len(back) < 60:
            taken, expired = ray.get(queue.poll.remote(7))
            assert taken and not expired
            back += taken
        assert type(taken) is FlowFileBatch and back == batch and same_types(back)
        logged, _ = ray.get(repo.page.remote("q", None, None, 1000))
        assert logged == batch   # every record back in its queue, as written
    finally:
        ray.kill(queue)
        ray.kill(repo)

    provenance = WriteAheadProvenanceRepository(root / "provenance")
    try:
        shared = new_event_fields(ProvenanceEventType.ROUTE, 1_700_000_000_900, None, "c", "n", "T", None)
        shared[FIELD_INDEX["relationship"]] = "success"
        columns = {"flowfile_uuid": [f.uuid for f in batch], "lineage_start_date": [f.lineage_start_date for f in batch],
                   "previous_attributes": [f.attributes for f in batch], "updated_attributes": [f.attributes for f in batch],
                   "previous_claim": [claim_field(f.claim) for f in batch], "updated_claim": [claim_field(f.claim) for f in batch],
                   "previous_size": [f.size for f in batch], "updated_size": [f.size for f in batch]}
        provenance.register_batches([encode_batch([EventRun(60, shared, {FIELD_INDEX[k]: v for k, v in columns.items()})])])
        events = provenance.events(0, 100)
        assert [(e.flowfile_uuid, e.updated_attributes, e.updated_claim, e.updated_size, e.lineage_start_date)
                for e in events] == [(f.uuid, dict(f.attributes), f.claim, f.size, f.lineage_start_date) for f in batch]
        assert all(e.previous_attributes == e.updated_attributes and e.relationship == "success" for e in events)
    finally:
        provenance.close()
