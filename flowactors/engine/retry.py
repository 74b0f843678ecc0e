"""Retried relationships (NiFi 1.16+): what a commit does with a FlowFile routed to a relationship
the processor retries (``ProcessorNode.retried_relationships``), decided before the commit's
write-ahead-log transaction, so nothing committed is ever requeued.

A FlowFile routed to a retried relationship that has been retried fewer than ``retry_count``
times (its ``retryCount.<processor>`` attribute, NiFi's ``retryCount.<component id>``) is not
transferred. It and every FlowFile linked to it in the session (the children it gave, the parents
it came from, theirs in turn) leave the session: the FlowFiles taken from a queue go back to it
as they were taken, their retry attribute one higher; the FlowFiles the session made are dropped;
every provenance event about them is forgotten. Then, by ``backoff_mechanism``, each returned
FlowFile is penalized for ``penalty_duration`` × 2^(its retries so far), or the processor yields
for ``yield_duration`` × 2^(retries so far), either at most ``max_backoff_period``. A FlowFile the
session created from nothing (a source's) is never retried: there is nothing to roll back. Every
FlowFile that leaves through a relationship has the retry attribute removed. The session's other
FlowFiles commit as usual.

On an engine where nothing waits (the stateless engine: NiFi's stateless queues ignore
penalization) the returned FlowFiles are not penalized and the processor does not yield: they are
retried at once, within the same trigger.

The session does the taking out (``ProcessSession.routed`` and ``give_back``); this module decides
what is retried and how long it waits.
"""

from __future__ import annotations

from repositories.model import FlowFile, now_millis

from flowactors.sdk.flow import ProcessorNode
from flowactors.sdk.session import ProcessSession
from flowactors.sdk.units import parse_duration

ATTRIBUTE_PREFIX = "retryCount."


def retry_attribute(processor: str) -> str:
    """The attribute counting a FlowFile's retries by ``processor`` (NiFi names it after the
    processor's id; a flowactors processor is identified by its name)."""
    return ATTRIBUTE_PREFIX + processor


class RetryPolicy:
    """A processor's retry settings, applied to each of its sessions before the commit (``apply``)."""

    def __init__(self, node: ProcessorNode, penalty: float, yield_duration: float):
        self.relationships = frozenset(node.retried_relationships)
        self.count = node.retry_count
        self.penalize = node.backoff_mechanism == "PENALIZE_FLOWFILE"
        self.base = penalty if self.penalize else yield_duration
        self.max_backoff = parse_duration(node.max_backoff_period)
        self.attribute = retry_attribute(node.name)

    def backoff(self, retries: int) -> float:
        """Seconds a FlowFile retried ``retries`` times before waits now (NiFi's doubling)."""
        return min(self.max_backoff, self.base * 2 ** retries)

    def retries(self, flowfile: FlowFile) -> int:
        """How many times ``flowfile`` was retried here (0 when its attribute is absent or not a number)."""
        value = flowfile.attributes.get(self.attribute, "")
        return int(value) if value.isdigit() else 0

    def apply(self, session: ProcessSession, waits: bool = True) -> float:
        """Take the FlowFiles to retry out of ``session`` (see the module docstring) and remove the
        retry attribute from those it transfers. ``waits``: False on an engine where nothing
        waits. Returns the seconds the processor should yield (0: none). Called after
        ``on_trigger`` and before ``session.commit``."""
        if not self.relationships:
            return 0.0
        to_retry = [flowfile.uuid for flowfile, relationship, derived in session.routed()
                    if relationship in self.relationships and derived and self.retries(flowfile) < self.count]
        yield_for = 0.0
        now = now_millis()

        def returned(taken: FlowFile, current: FlowFile) -> FlowFile:
            nonlocal yield_for
            retries = self.retries(current)
            flowfile = taken.with_attributes({**taken.attributes, self.attribute: str(retries + 1)})
            if waits and self.penalize:
                return flowfile._replace(penalized_until=now + int(self.backoff(retries) * 1000))
            if waits:
                yield_for = max(yield_for, self.backoff(retries))
            return flowfile

        if to_retry:
            session.give_back(to_retry, returned)
        for flowfile, _, _ in session.routed():
            if self.attribute in flowfile.attributes:
                session.remove_attribute(flowfile, self.attribute)
        return yield_for
