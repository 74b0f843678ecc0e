"""MonitorActivity: says when a flow stops carrying FlowFiles and when it starts again, as NiFi's.

The other flow-control processors are in ``flow_control.py`` and ``rate.py``; docs/flow-control.md
describes them.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import SUCCESS
from flowactors.processors._common import boolean_property

log = logging.getLogger(__name__)

#: NiFi's state keys: local (the last activity, kept while the flow is inactive) and cluster (the
#: last transfer on any node, with the copied attributes beside it)
LOCAL_KEY = "LocalFlowActivityInfo.lastSuccessfulTransfer"
CLUSTER_KEY = "CommonFlowActivityInfo.lastSuccessfulTransfer"
START = "inactivityStartMillis"
DURATION = "inactivityDurationMillis"
#: FlowFiles taken a trigger (NiFi's)
BATCH = 50
#: the cluster state is compared with this node's this many times a threshold
SYNCS_PER_THRESHOLD = 3


class _Activity:
    """What one node knows of the flow's activity (NiFi's LocalFlowActivityInfo): when it started
    watching, when a FlowFile last went to success (0: never) and that FlowFile's attributes (with
    Copy Attributes), and when it next compares notes with the other nodes."""

    def __init__(self, started: int, threshold: int, copy_attributes: bool, last_transfer: int = 0):
        self.started = started
        self.threshold = threshold
        self.copy_attributes = copy_attributes
        self.sync_period = threshold // SYNCS_PER_THRESHOLD
        self.next_sync = 0
        self.last_transfer = last_transfer
        self.attributes: dict[str, str] = {}

    def active(self, now: int) -> bool:
        return now < self.last_activity + self.threshold

    @property
    def has_transfer(self) -> bool:
        return self.last_transfer != 0

    @property
    def last_activity(self) -> int:
        return self.last_transfer if self.has_transfer else self.started

    def transferred(self, attributes: Mapping[str, str], now: int) -> None:
        if now - self.last_activity > self.sync_period:
            self.next_sync = now   # FlowFiles are rare: tell the other nodes at once
        self.last_transfer = now
        if self.copy_attributes:
            self.attributes = {k: v for k, v in attributes.items() if k != "uuid"}


class MonitorActivity(Processor):
    """Passes FlowFiles on to success and watches that some come: after Threshold Duration without
    one it sends an inactivity message to inactive (again every Threshold Duration with Continually
    Send Messages), and when one comes again a restored message to activity.restored.

    A message is a new FlowFile whose content is Inactivity Message or Activity Restored Message
    (expressions, evaluated against the new FlowFile), with ``inactivityStartMillis`` (the last
    activity, epoch milliseconds) and ``inactivityDurationMillis``; with Copy Attributes the
    restored one also carries the attributes of the last FlowFile that went to success. The
    processor is triggered when its queue is empty too (to notice inactivity), and yields then.
    With Wait for Activity, nothing is reported before the first FlowFile. State (local): while the
    flow is inactive, the last activity; with Reset State on Restart false, a restart starts from
    it (inactive, if that long ago). Monitoring Scope cluster (on a flow across nodes, whose
    processors have cluster state) counts activity on any node, kept in the cluster state;
    elsewhere it acts as node, with a warning. Reporting Node primary acts as all (a processor
    here cannot tell whether its node is the primary). One task watches (the others yield, as
    NiFi runs it serially). The clock is ``clock`` (seconds, ``time.time``), which a test may
    replace. Provenance: CREATE for each message (from the session).
    """

    description = "Sends a message when no FlowFile came for a while, and when they come again"
    input_required = True
    trigger_when_empty = True
    properties = (
        PropertyDescriptor("Threshold Duration", "How long without FlowFiles makes the flow inactive", required=True,
                           default="5 min", validator=validators.DURATION, expression_language=True),
        boolean_property("Continually Send Messages", False, "Whether the inactivity message is sent again every "
                         "Threshold Duration until activity is restored"),
        PropertyDescriptor("Inactivity Message", "The content of the FlowFiles sent to inactive", required=True,
                           default="Lacking activity as of time: ${now():format('yyyy/MM/dd HH:mm:ss')}; flow has "
                                   "been inactive for ${inactivityDurationMillis:toNumber():divide(60000)} minutes",
                           validator=validators.NON_EMPTY, expression_language=True),
        PropertyDescriptor("Activity Restored Message", "The content of the FlowFiles sent to activity.restored",
                           required=True,
                           default="Activity restored at time: ${now():format('yyyy/MM/dd HH:mm:ss')} after being "
                                   "inactive for ${inactivityDurationMillis:toNumber():divide(60000)} minutes",
                           validator=validators.NON_EMPTY, expression_language=True),
        boolean_property("Wait for Activity", False, "Whether inactivity is reported only after a first FlowFile"),
        boolean_property("Reset State on Restart", True, "Whether a restart starts active, or from the stored state"),
        boolean_property("Copy Attributes", False, "Whether the restored message carries the attributes of the "
                         "FlowFile that restored activity"),
        PropertyDescriptor("Monitoring Scope", "node: each node on its own; cluster: active while any node is",
                           required=True, default="node", allowable_values=("node", "cluster")),
        PropertyDescriptor("Reporting Node", "Which nodes send the messages in cluster scope (primary acts as all)",
                           required=True, default="all", allowable_values=("all", "primary")),
    )
    INACTIVE = Relationship("inactive", "The inactivity messages")
    RESTORED = Relationship("activity.restored", "The activity restored messages")
    relationships = (SUCCESS, INACTIVE, RESTORED)
    NIFI_TYPE = "org.apache.nifi.processors.standard.MonitorActivity"
    #: the clock, in seconds (a test replaces it instead of waiting)
    clock: Callable[[], float] = staticmethod(time.time)

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._cluster = context.property("Monitoring Scope").evaluate() == "cluster"
        if self._cluster and context.cluster_state is None:
            log.warning("%s: Monitoring Scope is cluster, but the flow runs on one node; it acts as node",
                        context.name)
            self._cluster = False
        seconds = context.property("Threshold Duration").as_duration()
        if not seconds:
            raise ValueError(f"Threshold Duration {context.property('Threshold Duration').raw!r} evaluates to no "
                             f"time (its expressions see no FlowFile)")
        threshold = int(seconds * 1000)
        self._continually = context.property("Continually Send Messages").as_bool()
        self._wait = context.property("Wait for Activity").as_bool()
        copy_attributes = context.property("Copy Attributes").as_bool()
        stored = None
        if not context.property("Reset State on Restart").as_bool():
            stored = context.state.get().get(LOCAL_KEY)
        now = self._now()
        if stored is not None and stored.isdigit():
            self._activity = _Activity(now, threshold, copy_attributes, int(stored))
            self._was_active = self._activity.active(now)
        else:
            self._activity = _Activity(now, threshold, copy_attributes)
            self._was_active = True
        self._last_message = 0

    def on_stopped(self, context: ProcessContext) -> None:
        """In cluster scope, forget the shared activity (as NiFi's, which clears its cluster state)."""
        if self._cluster:
            context.cluster_state.clear()

    def on_trigger(self, context: ProcessContext, session) -> None:
        if context.instance != 0:   # one task watches (NiFi triggers MonitorActivity serially)
            context.yield_()
            return
        activity, was_active = self._activity, self._was_active
        since = activity.last_activity   # before this trigger's FlowFiles and news from other nodes
        flowfiles = session.get_batch(BATCH)
        now = self._now()
        if flowfiles:
            must_become_active = not was_active or not activity.has_transfer
            activity.transferred(flowfiles[0].attributes, now)
            if self._cluster and must_become_active:
                activity.next_sync = now
            session.transfer_batch(flowfiles, SUCCESS)
        else:
            context.yield_()
        if self._cluster:
            if not was_active or not activity.active(now):
                activity.next_sync = now
            self._synchronize(context, now)
        if self._wait and not activity.has_transfer:
            return
        active = activity.active(now) or bool(flowfiles)
        if active and not was_active:
            self._send(context, session, self.RESTORED, "Activity Restored Message", since, now,
                       activity.attributes)
            context.state.clear()
        elif not active and (was_active or (self._continually and self._last_message + activity.threshold <= now)):
            self._send(context, session, self.INACTIVE, "Inactivity Message", activity.last_activity, now, {})
            self._last_message = now
            context.state.set({LOCAL_KEY: str(activity.last_activity)})
        self._was_active = active

    def _send(self, context: ProcessContext, session, relationship: Relationship, message: str, since: int,
              now: int, attributes: Mapping[str, str]) -> None:
        """A message FlowFile to ``relationship``: ``message``'s expression over its attributes."""
        flowfile = session.create()
        flowfile = session.put_all_attributes(flowfile, {**attributes, START: str(since), DURATION: str(now - since)})
        text = context.property(message).evaluate(flowfile) or ""
        flowfile = session.write_bytes(flowfile, text.encode("utf-8"))
        session.transfer(flowfile, relationship)

    def _synchronize(self, context: ProcessContext, now: int) -> None:
        """Compare notes with the other nodes through the cluster state, when due: take a later
        transfer from it, or put this node's there (a compare-and-set; a lost race waits for the
        next time, as NiFi's)."""
        activity = self._activity
        if activity.next_sync > now:
            return
        shared = context.cluster_state.get()
        stored = shared.get(CLUSTER_KEY)
        if stored is not None and int(stored) > activity.last_transfer:
            activity.last_transfer = int(stored)
            if activity.copy_attributes:
                activity.attributes = {k: v for k, v in shared.values.items() if k != CLUSTER_KEY}
        elif activity.has_transfer and (stored is None or activity.last_transfer > int(stored)):
            values = {**activity.attributes, CLUSTER_KEY: str(activity.last_transfer)}
            if not context.cluster_state.replace(shared, values):
                log.debug("%s: another node changed the shared activity first", context.name)
                return
        activity.next_sync = now + activity.sync_period
