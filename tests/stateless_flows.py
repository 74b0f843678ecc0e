"""The seed's example for the stateless engine (tests/test_stateless.py), and its child process.

A source reads numbered records from a records file starting at the offset kept in an offsets
file, and moves the offset in its ``commit_async`` callback (as ConsumeKafka commits Kafka
offsets): a transform -> a sink that writes each record to ``<out>/<number>`` (idempotent: the
same record written twice is one file) and raises on the record named in a fault file while that
file exists. Run as a script it triggers the flow until the source has nothing left and prints
one JSON line per trigger; the parent SIGKILLs it mid-trigger.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from flowactors import Flow, Processor, PropertyDescriptor, Relationship
from flowactors.engine.stateless_engine import StatelessFlow
from flowactors.processors import UpdateAttribute

SUCCESS = Relationship("success")


def write_records(path: Path, count: int) -> None:
    path.write_text("".join(f"{i} record-{i}\n" for i in range(count)))


def read_offset(path: Path) -> int:
    return int(path.read_text()) if path.exists() else 0


class OffsetSource(Processor):
    """Records ``[offset, offset + Records per Trigger)`` as FlowFiles; the offset moves only in
    ``on_success`` (atomically: a temporary file, fsync, rename)."""

    input_required = False
    properties = (PropertyDescriptor("Records File", required=True), PropertyDescriptor("Offsets File", required=True),
                  PropertyDescriptor("Records per Trigger", default="10"))
    relationships = (SUCCESS,)

    def on_trigger(self, context, session):
        offsets = Path(context.property("Offsets File").raw)
        offset = read_offset(offsets)
        lines = Path(context.property("Records File").raw).read_text().splitlines()
        taken = lines[offset:offset + int(context.property("Records per Trigger").raw)]
        if not taken:
            context.yield_()
            return
        for line in taken:
            number, payload = line.split(" ", 1)
            flowfile = session.write_bytes(session.create(), payload.encode())
            session.transfer(session.put_attribute(flowfile, "record.number", number), SUCCESS)

        def commit_offset() -> None:
            partial = offsets.with_suffix(".partial")
            with open(partial, "w") as out:
                out.write(str(offset + len(taken)))
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, offsets)

        session.commit_async(on_success=commit_offset)


class IdempotentSink(Processor):
    """Writes each record to ``<Directory>/<record.number>``; raises on the record number written
    in the Fault File while it exists; sleeps ``Delay`` seconds a record (for the kill test)."""

    properties = (PropertyDescriptor("Directory", required=True), PropertyDescriptor("Fault File", required=True),
                  PropertyDescriptor("Delay", default="0"))
    relationships = (SUCCESS,)

    def on_trigger(self, context, session):
        directory = Path(context.property("Directory").raw)
        fault = Path(context.property("Fault File").raw)
        delay = float(context.property("Delay").raw)
        for flowfile in session.get_batch():
            number = flowfile.attributes["record.number"]
            if fault.exists() and fault.read_text().strip() == number:
                raise RuntimeError(f"the sink refuses record {number}")
            (directory / number).write_bytes(session.read_bytes(flowfile) + b" " +
                                             flowfile.attributes["stage"].encode())
            time.sleep(delay)
            session.transfer(flowfile, SUCCESS)


def offsets_flow(root: Path, per_trigger: int = 10, delay: float = 0.0) -> Flow:
    """source -> transform (an attribute) -> sink, over the files under ``root``."""
    (root / "out").mkdir(parents=True, exist_ok=True)
    flow = Flow("offsets")
    source = flow.add(OffsetSource, "source", properties={
        "Records File": str(root / "records.txt"), "Offsets File": str(root / "offset"),
        "Records per Trigger": per_trigger})
    transform = flow.add(UpdateAttribute, "transform", properties={"stage": "transformed-${record.number}"})
    sink = flow.add(IdempotentSink, "sink", properties={
        "Directory": str(root / "out"), "Fault File": str(root / "fault"), "Delay": delay},
        auto_terminate=["success"])
    flow.connect(source, transform)
    flow.connect(transform, sink)
    return flow


def main(root: str, per_trigger: int, delay: float) -> None:
    """Trigger until a trigger finds no work; a JSON line per trigger."""
    with StatelessFlow(offsets_flow(Path(root), per_trigger, delay)) as flow:
        while True:
            result = flow.trigger()
            print(json.dumps({"success": result.success, "commits": result.commits, "reason": result.reason,
                              "offset": read_offset(Path(root) / "offset")}), flush=True)
            if result.success and result.commits == 0:
                return


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))


def checking_flow() -> Flow:
    """For ExecuteStateless: input -> tag (attribute ``checked``) -> route on content: "reject"
    somewhere in it goes to the output port ``bad``, the rest to ``out`` (after ``sign``, which
    appends " [checked]" to the content)."""
    from flowactors.processors import ReplaceText, RouteOnContent

    flow = Flow("checking")
    tag = flow.add(UpdateAttribute, "tag", properties={"checked": "yes"})
    route = flow.add(RouteOnContent, "route", properties={"Match Requirement": "content must contain match",
                                                          "reject": "reject"})
    sign = flow.add(ReplaceText, "sign", properties={"Replacement Strategy": "Append",
                                                     "Replacement Value": " [checked]"}, auto_terminate=["failure"])
    flow.connect(flow.add_input_port("in"), tag)
    flow.connect(tag, route)
    flow.connect(route, sign, "unmatched")
    flow.connect(sign, flow.add_output_port("out"))
    flow.connect(route, flow.add_output_port("bad"), "reject")
    return flow


#: what Recorder's commit_async callbacks said, in order
CALLS: list[str] = []


class Recorder(Processor):
    """Passes FlowFiles on, and says in ``CALLS`` whether its commit was kept."""

    relationships = (SUCCESS,)

    def on_trigger(self, context, session):
        flowfiles = session.get_batch()
        session.transfer_batch(flowfiles, SUCCESS)
        count = len(flowfiles)
        session.commit_async(on_success=lambda: CALLS.append(f"kept {count}"),
                             on_failure=lambda err: CALLS.append(f"dropped {count}: {err.kind}"))


def recording_flow() -> Flow:
    """input -> Recorder -> the output port ``out``."""
    flow = Flow("recording")
    recorder = flow.add(Recorder, "recorder")
    flow.connect(flow.add_input_port("in"), recorder)
    flow.connect(recorder, flow.add_output_port("out"))
    return flow
