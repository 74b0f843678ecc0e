"""ExecuteStateless: a flow run on the stateless engine from inside a flow (seed 004).

Each task holds a ``StatelessFlow`` of the flow definition it names, built when scheduled. Every
incoming FlowFile (or every batch) is one trigger of that flow: the FlowFile goes in at its input
port, and the trigger's outcome decides where the FlowFile goes. The inner trigger is acknowledged
(its state kept, its ``commit_async`` callbacks run) only once this processor's own session is
durable, and abandoned if that commit fails: the inner flow's sources never acknowledge data the
outer flow could lose.
"""

from __future__ import annotations

import importlib
from functools import partial
from pathlib import Path
from typing import Sequence

from flowactors.sdk.flow import Flow
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, failure_attributes

PER_FLOWFILE, PER_BATCH = "FlowFile", "Batch"
#: attributes of an output FlowFile: the output port (or ``processor.relationship``) it reached
PORT_ATTRIBUTE = "flowactors.stateless.port"


def load_flow(definition: str) -> Flow:
    """A flow definition: a JSON file's path, or ``package.module:name`` naming a ``Flow`` or a
    function without arguments that returns one."""
    if ":" in definition and not Path(definition).exists():
        module_name, _, name = definition.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot load flow {definition!r}: {err}") from None
        flow = target() if callable(target) and not isinstance(target, Flow) else target
        if not isinstance(flow, Flow):
            raise ValueError(f"{definition!r} is not a Flow nor a function returning one")
        return flow
    try:
        return Flow.from_json(Path(definition).read_bytes())
    except OSError as err:
        raise ValueError(f"cannot read flow definition {definition!r}: {err}") from None


def _abandon(result, err: BaseException) -> None:
    """The outer commit failed: the inner trigger is not kept, and the failure goes on to the
    engine (an error it reports, the input back in its queue), not swallowed."""
    result.abandon(f"the outer commit failed: {err}")
    raise err


def _definition_problem(value: str) -> str | None:
    if ":" not in value and not value.endswith(".json"):
        return "name a JSON flow definition (.json) or a Python flow as package.module:name"
    return None


class ExecuteStateless(Processor):
    """Runs a flow on the stateless engine for each incoming FlowFile (or batch of them).

    The FlowFile's content and attributes enter the flow at its input port (``Input Port``, or
    its only one). On success every FlowFile that reached an output port becomes a child of the
    input on ``output`` (its attributes and content, and ``flowactors.stateless.port``), and the
    input goes to ``original``. A trigger that fails (a processor raised, a FlowFile reached one of
    the ``Failure Ports``, FlowFiles were left over) sends the input to ``failure`` with
    ``flowactors.failure.reason`` and ``flowactors.failure.processor``; one over the ``Dataflow
    Timeout`` sends it to ``timeout``. Nothing of a failed trigger is kept. Inner processor state
    lives in memory for the task's life. Provenance: the session's events for the children (FORK)
    and the routed inputs.
    """

    description = "Runs a flow on the stateless engine, one transaction per FlowFile or batch"
    properties = (
        PropertyDescriptor("Flow Definition", "A JSON flow definition's path, or package.module:name of a Python "
                           "Flow (or of a function returning one)", required=True, validator=_definition_problem),
        PropertyDescriptor("Input Port", "The input port the FlowFiles enter (needed when the flow has several)"),
        PropertyDescriptor("Failure Ports", "Output ports, comma-separated, whose FlowFiles fail the trigger"),
        PropertyDescriptor("Dataflow Timeout", "The longest one trigger may take", required=True, default="60 sec",
                           validator=validators.DURATION),
        PropertyDescriptor("Trigger Per", "One trigger for each FlowFile, or for each batch taken", required=True,
                           default=PER_FLOWFILE, allowable_values=(PER_FLOWFILE, PER_BATCH)),
    )
    OUTPUT = Relationship("output", "What reached the stateless flow's output ports")
    ORIGINAL = Relationship("original", "The input of a trigger that succeeded")
    TIMEOUT = Relationship("timeout", "The input of a trigger that took longer than the Dataflow Timeout")
    relationships = (OUTPUT, ORIGINAL, FAILURE, TIMEOUT)

    def on_scheduled(self, context: ProcessContext) -> None:
        if context.stateless_engine is None:
            raise RuntimeError("ExecuteStateless needs the stateless engine, which the engine running it does "
                               "not offer (ProcessContext.stateless_engine)")
        failure_ports = [p.strip() for p in (context.property("Failure Ports").evaluate() or "").split(",") if p.strip()]
        self._flow = context.stateless_engine.dataflow(
            load_flow(context.property("Flow Definition").evaluate()), failure_ports=failure_ports,
            timeout=context.property("Dataflow Timeout").as_duration())
        self._port = context.property("Input Port").evaluate()
        self._per_batch = context.property("Trigger Per").evaluate() == PER_BATCH

    def on_stopped(self, context: ProcessContext) -> None:
        self._flow.close()

    def on_trigger(self, context: ProcessContext, session) -> None:
        inputs = session.get_batch() if self._per_batch else [f for f in [session.get()] if f is not None]
        if not inputs:
            return
        items = [(session.read_bytes(f), dict(f.attributes)) for f in inputs]
        result = self._flow.trigger({self._port: items} if self._port else items, acknowledge=False)
        if not result.success:
            failure = result.failure
            relationship = self.TIMEOUT if failure.kind == "timeout" else FAILURE
            attributes = failure_attributes(failure.processor or "", failure.reason)
            session.transfer_batch(session.put_attributes_batch(inputs, attributes), relationship)
            return
        try:
            self._emit(session, inputs, result.outputs)
        except BaseException:
            result.abandon("the outer session failed before its commit")
            raise
        session.commit_async(on_success=result.acknowledge, on_failure=partial(_abandon, result))

    def _emit(self, session, inputs: Sequence, outputs: dict) -> None:
        for port, flowfiles in outputs.items():
            for output in flowfiles:
                child = session.create(inputs[0]) if len(inputs) == 1 else session.create(parents=inputs)
                attributes = {k: v for k, v in output.attributes.items() if k != "uuid"}
                child = session.put_all_attributes(child, {**attributes, PORT_ATTRIBUTE: port})
                session.transfer(session.write_bytes(child, output.content), self.OUTPUT)
        session.transfer_batch(inputs, self.ORIGINAL)
