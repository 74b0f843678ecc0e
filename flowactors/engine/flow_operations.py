"""What an operator does to a flow's data, on a running flow (through ``FlowController``) and on a
stopped flow's repository (``flowactors.ops``) alike: replay a provenance event, list a queue, empty
it (NiFi's "Replay", "List queue" and "Empty queue").

Replay, as in NiFi: replaying event *E* makes a new FlowFile with *E*'s **input** (the event's
previous attributes and previous claim, so a SEND is sent again with the same bytes) and queues it
in the connection *E* took the FlowFile from (``source_queue_id``); a REPLAY event records it, the
original FlowFile as parent, the new one as child. The new FlowFile shares the content claim (no
bytes copied); a claim released meanwhile is moved back from the archive, so the archive's age-off
cannot delete bytes a queued FlowFile references. Events with no input queue, and content already
aged off, cannot be replayed. ``replay_event`` is the one procedure; ``FlowController.replay`` gives it a
running controller's components, ``flowactors.ops.replay.replay_stopped`` a stopped repository's.

Emptying a queue drops only queued FlowFiles (as NiFi), with a DROP event each (``drop_events``).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from flowactors.engine.errors import ReplayError
from repositories.content import FileSystemContentRepository
from repositories.fsutil import fsync_dir
from repositories.model import ContentClaim, FlowFile, new_flowfile_uuid, now_millis
from repositories.provenance import ProvenanceEvent, ProvenanceEventType


def requester() -> str:
    """Who asked, when the caller does not say: this process's user."""
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (e.g. a container without a passwd entry)
        return f"uid {os.getuid()}"


# ---------------------------------------------------------------------------------- queues


def describe(flowfile: FlowFile, *, position: int, swapped: bool = False, now: int | None = None) -> dict:
    """One row of a queue listing: what NiFi's "List queue" shows."""
    now = now_millis() if now is None else now
    return {
        "position": position,
        "uuid": flowfile.uuid,
        "filename": flowfile.attributes.get("filename"),
        "size": flowfile.size,
        "attributes": dict(flowfile.attributes),
        "queued_for_ms": max(0, now - flowfile.queue_date) if flowfile.queue_date else None,
        "age_ms": max(0, now - flowfile.entry_date),
        "lineage_age_ms": max(0, now - flowfile.lineage_start_date),
        "penalized": flowfile.penalized_until > now,
        "swapped": swapped,
    }


def drop_events(flowfiles: Sequence[FlowFile], queue_id: str, requested_by: str | None = None) -> list[ProvenanceEvent]:
    """A DROP event per FlowFile removed by emptying ``queue_id`` (the connection is the component)."""
    who = requested_by or requester()
    now = now_millis()
    return [
        ProvenanceEvent(
            event_type=ProvenanceEventType.DROP, timestamp=now, flowfile_uuid=f.uuid,
            component_id=queue_id, component_name=queue_id, component_type="Connection",
            lineage_start_date=f.lineage_start_date, source_queue_id=queue_id,
            previous_attributes=dict(f.attributes), updated_attributes=dict(f.attributes),
            previous_claim=f.claim, updated_claim=f.claim, previous_size=f.size, updated_size=f.size,
            details=f"FlowFile Queue emptied by {who}")
        for f in flowfiles
    ]


# ---------------------------------------------------------------------------------- replay


def claim_state(content: FileSystemContentRepository, claim: ContentClaim | None) -> str:
    """``"none"`` (no content: empty), ``"live"``, ``"archived"`` or ``"gone"`` (aged off)."""
    if claim is None:
        return "none"
    if content.path_of(claim.resource).exists():
        return "live"
    if content.archive_path_of(claim.resource).exists():
        return "archived"
    return "gone"


def missing_event_message(event_id: int, stats: dict, where: Any) -> str:
    """Why ``get(event_id)`` found nothing, from the repository's ``stats()``."""
    oldest, newest = stats["oldest_event_id"], stats["max_event_id"]
    if newest < 0:
        held = "it holds no events"
    elif event_id > newest:
        held = f"the newest event is {newest}"
    elif oldest is not None and event_id < oldest:
        held = (f"events before {oldest} were aged off (provenance_max_storage_time, "
                f"provenance_max_storage_size)")
    else:
        held = "that id was aged off, never committed, or in a damaged block that provenance repair dropped"
    return f"no provenance event {event_id} in {where}: {held}"


@dataclass(frozen=True)
class ReplayResult:
    event_id: int            # the event replayed
    replay_event_id: int     # the REPLAY event recorded
    original_uuid: str
    flowfile_uuid: str       # the new FlowFile
    queue_id: str            # the connection it waits in
    size: int
    restored_from_archive: bool


def replay_event(event: ProvenanceEvent, content: FileSystemContentRepository, *, connections: Iterable[str] | None,
            requested_by: str | None, reserve_id: Callable[[], int],
            commit: Callable[[FlowFile, str], None], remove: Callable[[str], None],
            register: Callable[[list[ProvenanceEvent]], int],
            offer: Callable[[str, FlowFile], Any] | None = None) -> ReplayResult:
    """Check, commit the new FlowFile, make its claim live, record REPLAY, offer: in that order."""
    what = f"event {event.event_id} ({event.event_type} by {event.component_name or event.component_id or '?'})"
    queue = event.source_queue_id
    if queue is None:
        raise ReplayError(
            f"cannot replay {what}: it has no input connection (the FlowFile was created or received "
            f"there, not taken from a queue). Replay an event of a later component of its lineage")
    if connections is not None and queue not in set(connections):
        raise ReplayError(f"cannot replay {what}: it came from connection '{queue}', which the flow no longer has")
    claim = event.previous_claim
    if claim is None and event.previous_size:
        raise ReplayError(f"cannot replay {what}: it records {event.previous_size} bytes of input but no content claim")
    if claim is not None and claim_state(content, claim) == "gone":
        raise ReplayError(_gone(what, claim))
    now = now_millis()
    uuid = new_flowfile_uuid()
    flowfile = FlowFile(reserve_id(), uuid, {**event.previous_attributes, "uuid": uuid}, claim, now,
                        event.lineage_start_date or now, queue_date=now)
    commit(flowfile, queue)             # one more claimant: from here the claim is not released
    try:
        restored = _make_live(content, claim, what)
    except BaseException:
        remove(uuid)
        raise
    user = requested_by or requester()
    replay = ProvenanceEvent(
        event_type=ProvenanceEventType.REPLAY, timestamp=now, flowfile_uuid=event.flowfile_uuid,
        parent_uuids=[event.flowfile_uuid], child_uuids=[uuid], component_id=event.component_id,
        component_name=event.component_name, component_type=event.component_type,
        previous_attributes=dict(event.previous_attributes), updated_attributes=dict(flowfile.attributes),
        previous_claim=claim, updated_claim=claim, previous_size=flowfile.size, updated_size=flowfile.size,
        details=f"Replay of event {event.event_id} ({event.event_type}) requested by {user}",
        lineage_start_date=flowfile.lineage_start_date, source_queue_id=queue)
    replay_id = register([replay])
    if offer is not None:
        offer(queue, flowfile)
    return ReplayResult(event.event_id, replay_id, event.flowfile_uuid, uuid, queue, flowfile.size, restored)


def _make_live(content: FileSystemContentRepository, claim: ContentClaim | None, what: str) -> bool:
    """Move an archived claim back to its live place; True if it was archived."""
    if claim is None:
        return False
    live = content.path_of(claim.resource)
    if live.exists():
        return False
    try:
        os.rename(content.archive_path_of(claim.resource), live)
    except FileNotFoundError:
        if live.exists():
            return False
        raise ReplayError(_gone(what, claim)) from None
    if content.always_sync:
        fsync_dir(live.parent)
        fsync_dir(content.archive_path_of(claim.resource).parent)
    return True


def _gone(what: str, claim: ContentClaim) -> str:
    return (f"cannot replay {what}: its input content ({claim.length} bytes in resource claim "
            f"{claim.resource.container}/{claim.resource.section}/{claim.resource.id}) was aged off the "
            f"content repository's archive (archive_max_retention, archive_max_usage_percent)")
