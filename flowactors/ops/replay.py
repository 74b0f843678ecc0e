"""Replay: put a past FlowFile version back into the connection it was taken from.

As in NiFi, replaying event *E* makes a new FlowFile with *E*'s **input**: the attributes and the
content the component had received (the event's previous attributes and previous claim, so a SEND
is sent again with the same bytes, a CONTENT_MODIFIED is modified again from the same input), and
queues it in the connection *E* took the FlowFile from (``source_queue_id``). Events with no input
queue (a CREATE or RECEIVE at a source, the JOIN that made a merged FlowFile) cannot be replayed.
A REPLAY event records it: the original FlowFile as parent, the new one as child, so lineage
links them.

The new FlowFile shares the content claim (no bytes copied): its write-ahead-log record adds one
claimant like any commit. A claim released meanwhile was moved to the archive; replay moves it
back, so the archive's age-off cannot delete bytes a queued FlowFile references. Content already
aged off cannot be replayed.

Two ways in, one procedure (``_replay``):

* ``replay_stopped`` - the flow is stopped: the record goes straight into the write-ahead log, and
  the next ``flowactors run`` restores it into its queue like every other queued FlowFile;
* ``replay_running`` - called by ``FlowController.replay`` while the flow runs: through the
  repository actors, then the record is offered to the queue actor. The controller holds its
  claims lock meanwhile, so a checkpoint cannot release the claim between the commit that adds the
  claimant and the move back out of the archive.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from flowactors.ops.provenance_tools import (StoppedRepository, claim_state, missing_event_message,
                                         NoSuchEventError)
from flowactors.engine.transport import call_now
from flowactors.sdk.settings import Settings
from repositories.content import FileSystemContentRepository
from repositories.fsutil import fsync_dir
from repositories.model import ContentClaim, FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis
from repositories.provenance import ProvenanceEvent, ProvenanceEventType


class ReplayError(RuntimeError):
    """The event cannot be replayed; the message says why. Nothing was changed."""


@dataclass(frozen=True)
class ReplayResult:
    event_id: int            # the event replayed
    replay_event_id: int     # the REPLAY event recorded
    original_uuid: str
    flowfile_uuid: str       # the new FlowFile
    queue_id: str            # the connection it waits in
    size: int
    restored_from_archive: bool


def replay_stopped(repository: str | os.PathLike, event_id: int, settings: Settings | None = None, *,
                   connections: Iterable[str] | None = None, requested_by: str | None = None) -> ReplayResult:
    """Replay into the write-ahead log of a stopped flow's repository (picked up at the next run).

    ``connections``, when known (the flow's connection ids), are checked so a replay into a
    connection the flow no longer has is refused now rather than at the next start.
    """
    with StoppedRepository(repository, settings, purpose="flowactors replay", writable=True) as repo:
        event = repo.event(event_id)
        wal = repo.flowfile
        return _replay(
            event, repo.content, connections=connections, requested_by=requested_by,
            reserve_id=lambda: wal.reserve_ids(1),
            commit=lambda flowfile, queue: wal.commit([QueuedFlowFile(flowfile, queue)], []),
            remove=lambda uuid: wal.commit([], [uuid]),
            register=lambda events: repo.provenance.register(events)[0])


def replay_running(controller: Any, event_id: int, requested_by: str | None = None) -> ReplayResult:
    """Replay through a running ``FlowController``'s components (call it via ``FlowController.replay``)."""
    if not controller.started:
        raise ReplayError(f"flow '{controller.flow.name}' is not running: replay into its stopped repository "
                          f"with flowactors replay (replay_stopped)")
    provenance = controller.provenance_repository
    if provenance is None:
        raise ReplayError("provenance is disabled for this flow (provenance_enabled): there is nothing to replay")
    event = call_now(provenance, "get", event_id)
    if event is None:
        raise NoSuchEventError(missing_event_message(event_id, call_now(provenance, "stats"),
                                                     f"flow '{controller.flow.name}'"))
    flowfiles = controller.flowfile_repository
    content = FileSystemContentRepository.from_settings(controller.root, controller.settings)
    return _replay(
        event, content, connections=controller.queues, requested_by=requested_by,
        reserve_id=lambda: call_now(flowfiles, "reserve_ids", 1),
        commit=lambda flowfile, queue: call_now(flowfiles, "commit", [QueuedFlowFile(flowfile, queue)], []),
        remove=lambda uuid: call_now(flowfiles, "commit", [], [uuid]),
        register=controller.record_events,
        offer=lambda queue, flowfile: call_now(controller.queues[queue], "offer", [flowfile]))


def _replay(event: ProvenanceEvent, content: FileSystemContentRepository, *, connections: Iterable[str] | None,
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
    if claim_state(content, claim) == "gone":
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
    user = requested_by or _user()
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


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown user"
