"""A flow's metrics through ``ray.util.metrics``: defined once here, tagged by flow and component.

Every worker hands its metrics to its node's metrics agent, which serves them as Prometheus text
on ``ray start --metrics-export-port`` (names get Ray's ``ray_`` prefix, counters a ``_total``
suffix) and feeds the dashboard's metrics view. Each series also carries Ray's own labels
(``WorkerId``, ``NodeAddress``, ...): a processor with several concurrent tasks has one series per
task actor, so sum them by ``flow, component``. The catalogue is in docs/cluster.md.

Recording a value is a local call (~3 us here), so the actors record per session or per change,
never per FlowFile, and queues throttle their gauges to a few updates a second (always sending
the last value). Gauges are set only on change, so each process re-sends its gauges' last values
(``_Keeper``). ``FLOWACTORS_METRICS=off`` in the environment turns every update into a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable

from ray.util import metrics


from flowactors.engine.periodic import Periodic

log = logging.getLogger(__name__)

TAG_KEYS = ("flow", "component")
ENABLED = os.environ.get("FLOWACTORS_METRICS", "on").strip().lower() not in ("0", "off", "false", "no")

#: processor counters: field of ``flowactors.engine.session_backend.Counters`` -> (metric name, description)
PROCESSOR_COUNTERS = {
    "flowfiles_in": ("flowactors_processor_flowfiles_in", "FlowFiles a processor took from its input queues"),
    "flowfiles_out": ("flowactors_processor_flowfiles_out", "FlowFiles a processor's sessions committed out"),
    "bytes_read": ("flowactors_processor_bytes_read", "content bytes a processor read"),
    "bytes_written": ("flowactors_processor_bytes_written", "content bytes a processor wrote"),
    "tasks": ("flowactors_processor_tasks", "on_trigger calls of a processor"),
    "task_seconds": ("flowactors_processor_task_seconds", "seconds a processor spent in on_trigger and commit"),
    "errors": ("flowactors_processor_errors", "errors a processor reported (each rolled its session back)"),
}
#: queue gauges: key of ``ConnectionQueue.status()`` -> (metric name, description)
QUEUE_GAUGES = {
    "count": ("flowactors_queue_flowfiles", "FlowFiles queued in a connection (in flight included)"),
    "bytes": ("flowactors_queue_bytes", "content bytes of the FlowFiles queued in a connection"),
    "swapped": ("flowactors_queue_swapped_flowfiles", "FlowFiles of a connection swapped out to disk"),
    "back_pressure": ("flowactors_queue_back_pressure", "1 while a connection is at its back pressure threshold"),
}
CHECKPOINT_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]

_metrics: dict[str, Any] = {}


def _get(kind: str, name: str, description: str, **options: Any):
    """The process's one instance of a metric (Ray wants each defined once per process)."""
    metric = _metrics.get(name)
    if metric is None:
        metric = _metrics[name] = getattr(metrics, kind)(name, description=description, tag_keys=TAG_KEYS,
                                                         **options)
    return metric


class _Keeper:
    """Keeps this process's metrics current between changes, on one thread (``Periodic``):

    * gauges: a Ray 2.60 worker sends a gauge's value to its metrics agent once after each set,
      and the agent drops a series not sent again within two report intervals
      (``RAY_metrics_report_interval_ms``, 10 s by default): a gauge set only on change (an idle
      queue, content measured every 10 s) vanished from Prometheus between changes. Every gauge's
      last value is set again twice a report interval, so a series lasts as long as the process
      that sets it (an actor's gauges still end with the actor);
    * counts a throttled counter holds back (``FlowFileRepositoryMetrics``) are sent once its
      ``min_interval`` has passed, also when no commit follows (a quiet flow's rate would read 0)."""

    #: seconds between two looks at the held counts
    TICK = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple, tuple[Any, float, dict[str, str]]] = {}
        self._held: weakref.WeakSet = weakref.WeakSet()
        self._resent_at = time.monotonic()
        self._resend_every: float | None = None  # half Ray's report interval, read at the first tick
        self._thread: Periodic | None = None

    def set(self, gauge: Any, value: float, tags: dict[str, str]) -> None:
        gauge.set(value, tags)
        with self._lock:
            self._last[(id(gauge), *sorted(tags.items()))] = (gauge, value, tags)
            self._start()

    def hold(self, counter: "FlowFileRepositoryMetrics") -> None:
        """Look after ``counter``'s held counts while it lives."""
        with self._lock:
            self._held.add(counter)
            self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = Periodic("flowactors-metrics", self.TICK, self._tick, self._failed, each_error_once=True)
            self._thread.start()

    def _tick(self) -> None:
        if self._resend_every is None:   # here, not in ``_start``: an error goes to ``_failed``
            self._resend_every = _resend_period()
        kept = []
        with self._lock:
            held = list(self._held)
            now = time.monotonic()
            if self._last and now - self._resent_at >= self._resend_every:
                kept, self._resent_at = list(self._last.values()), now
        for counter in held:
            counter.send_due()
        for gauge, value, tags in kept:
            gauge.set(value, tags)

    @staticmethod
    def _failed(err: Exception) -> None:
        log.warning("flowactors could not send its metrics to Ray's metrics agent (tried again): %s", err)


#: Ray's default ``metrics_report_interval_ms`` (ray/_private/ray_config_def.h)
RAY_METRICS_REPORT_INTERVAL_MS = 10_000


def _resend_period() -> float:
    """Seconds between two re-sends of the gauges: half Ray's report interval (floored at 1 s), as
    Ray reads it: ``RAY_metrics_report_interval_ms``, else its default of 10 s."""
    interval = int(os.environ.get("RAY_metrics_report_interval_ms", RAY_METRICS_REPORT_INTERVAL_MS))
    return max(interval, 1000) / 2000


_keeper = _Keeper()


def tags(flow: str, component: str) -> dict[str, str]:
    return {"flow": flow, "component": component}


class ProcessorMetrics:
    """One processor task's counters, sent as deltas of its ``Counters`` after each trigger."""

    def __init__(self, flow: str, component: str):
        self.tags = tags(flow, component)
        self._last = dict.fromkeys(PROCESSOR_COUNTERS, 0)
        self._counters = ({field: _get("Counter", name, text) for field, (name, text) in PROCESSOR_COUNTERS.items()}
                          if ENABLED else {})

    def publish(self, counters: Any) -> None:
        for field, metric in self._counters.items():
            value = getattr(counters, field)
            delta = value - self._last[field]
            if delta > 0:
                metric.inc(delta, self.tags)
                self._last[field] = value


class QueueMetrics:
    """A connection's gauges. ``changed`` is called on every change from the queue actor's event loop;
    it sends at most one update per ``min_interval`` and always the latest state."""

    def __init__(self, flow: str, component: str, min_interval: float = 0.25):
        self.tags = tags(flow, component)
        self.min_interval = min_interval
        self._gauges = {key: _get("Gauge", name, text) for key, (name, text) in QUEUE_GAUGES.items()} if ENABLED else {}
        self._last = 0.0
        self._scheduled = False
        self._status: Callable[[], dict] = dict

    def publish(self, status: dict) -> None:
        self._last = time.monotonic()
        for key, gauge in self._gauges.items():
            _keeper.set(gauge, float(status.get(key) or 0), self.tags)

    def changed(self, status: Callable[[], dict]) -> None:
        self._status = status  # read when the update is sent, so it is the latest state
        if not self._gauges or self._scheduled:
            return
        self._scheduled = True
        delay = max(0.0, self._last + self.min_interval - time.monotonic())
        asyncio.get_running_loop().call_later(delay, self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        self.publish(self._status())


class RestartMetrics:
    """Restarts of a flow's components (a counter tagged by kind: executor, queue, each
    repository, controller): a rising rate means actors die in a loop (docs/architecture.md)."""

    def __init__(self, flow: str):
        self.flow = flow
        self._restarts = None
        if ENABLED:
            self._restarts = _get("Counter", "flowactors_component_restarts",
                                  "restarts of a flow's components after their process died")

    def restarted(self, kind: str, count: int = 1) -> None:
        if self._restarts is not None:
            self._restarts.inc(count, tags(self.flow, kind))


class FlowFileRepositoryMetrics:
    """Write-ahead log commits (a counter: its rate is commits/s) and checkpoint durations.
    Commits are sent at most every ``min_interval`` seconds (a Ray metric update costs about as
    much as a small commit's transaction: py-spy put 2-3 % of the busiest executor's samples in
    them at batch 1,000, when every group of commits sent one), at ``flush``, and by the process's
    ``_Keeper`` once ``min_interval`` has passed without a commit."""

    def __init__(self, flow: str, component: str = "flowfile-repository", min_interval: float = 0.5):
        self.tags = tags(flow, component)
        self.min_interval = min_interval
        self._held = 0
        self._sent_at = float("-inf")
        self._lock = threading.Lock()  # the tasks of an executor count at once
        self._commits = self._checkpoints = None
        if ENABLED:
            self._commits = _get("Counter", "flowactors_flowfile_repository_commits",
                                 "session commits written to the FlowFile write-ahead log")
            self._checkpoints = _get("Histogram", "flowactors_flowfile_repository_checkpoint_seconds",
                                     "seconds a write-ahead log checkpoint took", boundaries=CHECKPOINT_BOUNDARIES)
            _keeper.hold(self)

    def committed(self, count: int = 1) -> None:
        """Count commits (from any thread), sending them if ``min_interval`` has passed."""
        if self._commits is None:
            return
        with self._lock:
            self._held += count
        self.send_due()

    def send_due(self) -> None:
        """Send the commits counted since the last update if ``min_interval`` has passed since it
        (also what the ``_Keeper`` calls, so held counts do not wait for the next commit)."""
        if self._commits is not None and time.monotonic() - self._sent_at >= self.min_interval:
            self.flush()

    def flush(self) -> None:
        """Send the commits counted since the last update, now."""
        if self._commits is None:
            return
        with self._lock:
            held, self._held = self._held, 0
            self._sent_at = time.monotonic()
        if held:
            self._commits.inc(held, self.tags)

    def checkpointed(self, seconds: float) -> None:
        if self._checkpoints is not None:
            self._checkpoints.observe(seconds, self.tags)


class ContentRepositoryMetrics:
    """Live and archived content bytes and the fullest container's disk use. Measuring walks the
    claim files, so it runs at most every ``min_interval`` seconds, off the commit path."""

    def __init__(self, flow: str, component: str = "content-repository", min_interval: float = 10.0):
        self.tags = tags(flow, component)
        self.min_interval = min_interval
        self._last = float("-inf")
        self._gauges = {}
        if ENABLED:
            self._gauges = {
                "live_bytes": _get("Gauge", "flowactors_content_live_bytes",
                                   "bytes of content claims still referenced or not yet released"),
                "archive_bytes": _get("Gauge", "flowactors_content_archive_bytes", "bytes of archived content claims"),
                "disk_percent": _get("Gauge", "flowactors_content_disk_used_percent",
                                     "percent used of the fullest content container's file system"),
            }

    def maybe_publish(self, usage: Callable[[], dict], force: bool = False) -> None:
        if not self._gauges or (not force and time.monotonic() - self._last < self.min_interval):
            return
        self._last = time.monotonic()
        try:
            containers = usage().values()
        except OSError:  # a container being created or removed: the next pass measures again
            return
        values = {"live_bytes": sum(c["live_bytes"] for c in containers),
                  "archive_bytes": sum(c["archive_bytes"] for c in containers),
                  "disk_percent": max((c.get("disk_percent", 0.0) for c in containers), default=0.0)}
        for key, gauge in self._gauges.items():
            _keeper.set(gauge, float(values[key]), self.tags)


class ProvenanceMetrics:
    """Events registered (a counter: its rate is events/s) and the index lag: events journaled but
    not yet merged into event files and indexed, so not yet found by a search."""

    def __init__(self, flow: str, component: str = "provenance-repository", min_interval: float = 2.0):
        self.tags = tags(flow, component)
        self.min_interval = min_interval
        self._last = float("-inf")
        self._events = self._lag = None
        if ENABLED:
            self._events = _get("Counter", "flowactors_provenance_events", "provenance events registered")
            self._lag = _get("Gauge", "flowactors_provenance_index_lag", "provenance events not yet indexed")

    def registered(self, count: int) -> None:
        if self._events is not None and count > 0:
            self._events.inc(count, self.tags)

    def maybe_publish_lag(self, stats: Callable[[], dict], force: bool = False) -> None:
        if self._lag is None or (not force and time.monotonic() - self._last < self.min_interval):
            return
        self._last = time.monotonic()
        try:
            lag = stats().get("index_lag", 0)
        except Exception:  # closed meanwhile: nothing to report, and never fail a rollover for it
            return
        _keeper.set(self._lag, float(lag), self.tags)
