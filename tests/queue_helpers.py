"""Test data for the queue tests: FlowFiles with varied dates and priorities, and the order each
prioritizer promises, written out independently of the queue's own sort key."""

from __future__ import annotations

import math
import random

from repositories.model import ContentClaim, FlowFile, ResourceClaim, new_flowfile_uuid, now_millis

PRIORITIES = ["1", "2", "10", "-3", "2.5", "1e3", "a", "b", "B", "nan", "inf", None]


def make(n: int, rng: random.Random, start: int = 1) -> list[FlowFile]:
    """FlowFiles with shuffled dates and priorities (numbers, strings, none), content on 3 claims."""
    now = now_millis()
    out = []
    for i in range(start, start + n):
        uuid = new_flowfile_uuid()
        attrs = {"uuid": uuid, "n": str(i)}
        priority = rng.choice(PRIORITIES)
        if priority is not None:
            attrs["priority"] = priority
        claim = ContentClaim(ResourceClaim("default", "1", f"claim-{i % 3}"), i, 1 + i % 7)
        out.append(FlowFile(i, uuid, attrs, claim, now - rng.randint(0, 10**6), now - rng.randint(0, 10**6),
                            0, now, i))
    return out


def expected_order(prioritizers, flowfiles):
    """The drain order each prioritizer promises, written out independently of the queue's key."""
    def priority(f):
        v = f.attributes.get("priority")
        if v is None:
            return (2, 0.0, "")
        try:
            number = float(v)
        except ValueError:
            return (1, 0.0, v)
        return (0, number, "") if math.isfinite(number) else (1, 0.0, v)  # "nan", "inf": strings
    parts = {"FIFO": lambda f: (f.queue_date, f.queue_index),
             "OldestFlowFileFirst": lambda f: (f.lineage_start_date, f.entry_date),
             "NewestFlowFileFirst": lambda f: (-f.lineage_start_date, -f.entry_date),
             "PriorityAttribute": priority}
    return sorted(flowfiles, key=lambda f: sum((parts[p](f) for p in prioritizers), ()) + (
        f.queue_date, f.queue_index, f.id))
