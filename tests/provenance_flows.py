"""Flows whose provenance the provenance CLI, lineage and replay tests read (run on real Ray)."""

from __future__ import annotations

import sys
from pathlib import Path

import ray.cloudpickle

from flowactors import Flow, Processor, PropertyDescriptor, Relationship, validators
from flowactors.processors import Funnel, GenerateFlowFile, MergeContent, PutFile, SplitText
from repositories.provenance import ProvenanceEvent, WriteAheadProvenanceRepository

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

LETTERS = "alpha\nbeta\ngamma\n"
#: the archive keeps what these tests read back however full the host's disk is (at NiFi's 90 % a
#: fuller CI disk ages every archived claim off at once and the past content is gone)
FAST = {"checkpoint_interval": 1.0, "administrative_yield": 0.1, "archive_max_usage_percent": 100.0}


def split_merge_clone_flow() -> Flow:
    """generate (3 lines) -> split (1 line each) -> fan -> merge (all 3) and -> keep (a clone each).

    ``fan``'s success goes to two connections, so each split is cloned (CLONE) for ``keep``;
    ``merge`` joins the three splits (JOIN); everything ends auto-terminated (DROP).
    """
    flow = Flow("lineage-test", settings=FAST)
    generate = flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": LETTERS, "Max FlowFiles": 1, "filename": "letters.txt"})
    split = flow.add(SplitText, "split", properties={"Line Split Count": 1},
                     auto_terminate=["original", "failure"])
    fan = flow.add(Funnel, "fan")
    merge = flow.add(MergeContent, "merge", properties={
        "Minimum Number of Entries": 3, "Maximum Number of Entries": 3, "Max Bin Age": "20 sec"},
        auto_terminate=["merged", "original", "failure"])
    keep = flow.add(Funnel, "keep", auto_terminate=["success"])
    flow.connect(generate, split)
    flow.connect(split, fan, "splits")
    flow.connect(fan, merge, name="to-merge")
    flow.connect(fan, keep, name="to-keep")
    return flow


class EmitText(Processor):
    """Emits Count FlowFiles with Text as content and Filename as filename, once per run."""

    input_required = False
    properties = [PropertyDescriptor("Text", required=True),
                  PropertyDescriptor("Filename", required=True),
                  PropertyDescriptor("Count", default="1", validator=validators.NON_NEGATIVE_INTEGER)]
    relationships = [Relationship("success")]

    def on_scheduled(self, context):
        self.left = context.property("Count").as_int()

    def on_trigger(self, context, session):
        if self.left <= 0:
            context.yield_()
            return
        flowfile = session.write_bytes(session.create(), context.property("Text").as_str().encode())
        session.transfer(session.put_attribute(flowfile, "filename", context.property("Filename").as_str()),
                         "success")
        session.commit()
        self.left -= 1


PUT_QUEUE = "emit.success.put"


def send_flow(out: Path, count: int, name: str = "replay-test") -> Flow:
    """emit -> put (PutFile, replace): each FlowFile is sent once (SEND) and then dropped (DROP)."""
    flow = Flow(name, settings=FAST)
    emit = flow.add(EmitText, "emit", properties={"Text": "the same bytes, again\n", "Filename": "sent.txt",
                                                  "Count": count})
    put = flow.add(PutFile, "put", properties={"Directory": str(out), "Conflict Resolution Strategy": "replace"},
                   auto_terminate=["success", "failure"])
    flow.connect(emit, put)
    return flow


def all_events(repository: Path) -> list[ProvenanceEvent]:
    with WriteAheadProvenanceRepository(repository / "provenance") as provenance:
        return provenance.events(0, 10_000)


def only(events: list[ProvenanceEvent], **match: str) -> ProvenanceEvent:
    """The one event whose fields (event_type by name) equal ``match``; fails if not exactly one."""
    found = [e for e in events if all(str(getattr(e, k)) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]
