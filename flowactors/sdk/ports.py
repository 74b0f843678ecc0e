"""Ports and funnels: the components of a flow that are not processors (as in NiFi), though they
run as processors do. A funnel merges connections; an input or output port is where a flow meant to
run as one transaction takes its input and gives its results (NiFi's ports of a process group run
statelessly).

The stateless engine (``flowactors.engine.stateless_engine``) feeds a trigger's inputs to an input port
and collects what reaches each output port; a port named as a failure port fails the trigger.
Placed in a flow run on a durable engine, an input port receives nothing and an output port ends
the FlowFiles that reach it (a DROP event saying so), so one definition runs on every engine.
"""

from __future__ import annotations

from flowactors.sdk.processor import ProcessContext, Processor
from flowactors.sdk.relationships import SUCCESS


class InputPort(Processor):
    """Where a stateless trigger's inputs enter the flow (connect its ``success``).

    Provenance: nothing beyond what the session emits (the engine makes the inputs).
    """

    description = "A flow's entry for the inputs of a stateless trigger"
    input_required = False
    relationships = (SUCCESS,)

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()  # the stateless engine's inputs; nothing on the other engines
        if not flowfiles:
            context.yield_()
            return
        session.transfer_batch(flowfiles, SUCCESS)


class OutputPort(Processor):
    """Where a flow's results leave it: collected by the stateless engine, which never triggers
    the port; on the other engines the FlowFiles end here.

    Provenance: DROP per FlowFile *(session)* on the engines that trigger it.
    """

    description = "A flow's exit: the results of a stateless trigger"
    relationships = ()

    def on_trigger(self, context: ProcessContext, session) -> None:
        session.remove_batch(session.get_batch())


class Funnel(Processor):
    """Passes every FlowFile to success unchanged, in batches: a meeting point for connections.

    Provenance: nothing beyond what the session emits (no event for an unchanged FlowFile).
    """

    description = "Passes FlowFiles through unchanged"
    relationships = (SUCCESS,)

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            session.transfer(flowfile, SUCCESS)
