"""Replay into a stopped flow's repository: the record goes straight into the write-ahead log, and
the next ``flowactors run`` restores it into its queue like every other queued FlowFile. What replay
means, and the procedure a running flow shares, are ``flowactors.engine.flow_operations``'s.
"""

from __future__ import annotations

import os
from typing import Iterable

from flowactors.engine.flow_operations import ReplayResult, replay_event
from flowactors.ops.provenance_tools import StoppedRepository
from flowactors.sdk.settings import Settings
from repositories.model import QueuedFlowFile


def replay_stopped(repository: str | os.PathLike, event_id: int, settings: Settings | None = None, *,
                   connections: Iterable[str] | None = None, requested_by: str | None = None) -> ReplayResult:
    """Replay into the write-ahead log of a stopped flow's repository (picked up at the next run).

    ``connections``, when known (the flow's connection ids), are checked so a replay into a
    connection the flow no longer has is refused now rather than at the next start.
    """
    with StoppedRepository(repository, settings, purpose="flowactors replay", writable=True) as repo:
        event = repo.event(event_id)
        wal = repo.flowfile
        return replay_event(
            event, repo.content, connections=connections, requested_by=requested_by,
            reserve_id=lambda: wal.reserve_ids(1),
            commit=lambda flowfile, queue: wal.commit([QueuedFlowFile(flowfile, queue)], []),
            remove=lambda uuid: wal.commit([], [uuid]),
            register=lambda events: repo.provenance.register(events)[0])


