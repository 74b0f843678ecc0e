"""Processors of your own and a small flow that uses them: the example of docs/processors.md,
"Writing a processor" (the guide shows this file's processors; tests/test_processor_guide.py
checks it shows them as they are here).

* ``NumberedMessages``, a source: the batch calls that make FlowFiles, an expression evaluated
  over a batch, and processor state that keeps its count across restarts;
* ``MaskDigits``, one FlowFile at a time: ``get``, ``read``, ``write``, ``put_attribute``,
  ``transfer``, ``penalize``, ``remove``, and an explicit provenance event;
* ``ClassifyMessages``, a batch at a time: ``get_batch``, ``read_bytes_batch``,
  ``put_attributes_batch``, ``transfer_batch``, ``remove_batch``, ``provenance.route_batch``;
  relationships made from dynamic properties, a sensitive property, an error left to the engine.

The flow: NumberedMessages -> MaskDigits -> ClassifyMessages -> PutFile, a folder a category.
Run it with ``python examples/custom_processor.py`` (on Ray; ``--engine in-process`` without Ray).
It also saves the flow's JSON definition, which ``flowactors run`` runs again with ``examples/``
on ``PYTHONPATH`` (the definition names each processor class by its module path).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import logging
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

from flowactors import Flow, run_flow
from flowactors.processors import PutFile
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators

log = logging.getLogger(__name__)


# -- NumberedMessages --------------------------------------------------------------------------
class NumberedMessages(Processor):
    """Makes Total FlowFiles in all, Batch Size a trigger, numbered from 1. The count made so far
    is the processor's state, committed with the FlowFiles it counts: a restart goes on where
    the last commit left off, and no number is made twice."""

    description = "Makes numbered text FlowFiles"
    input_required = False   # a source: no incoming connection
    properties = (
        PropertyDescriptor("Total", "How many FlowFiles to make in all", required=True, default="10",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Batch Size", "How many FlowFiles a trigger makes", required=True, default="4",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Text", "Each FlowFile's content, evaluated against its own attributes",
                           required=True, default="message ${message.number}", expression_language=True),
    )
    relationships = (Relationship("success", "Every FlowFile made"),)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._total = context.property("Total").as_int()
        self._batch = context.property("Batch Size").as_int()
        self._text = compile_value(context.property("Text").raw)   # parsed once, evaluated per batch

    def on_trigger(self, context: ProcessContext, session) -> None:
        state = context.state.get()
        made = int(state.get("made", "0"))
        count = min(self._batch, self._total - made)
        if count <= 0:
            context.yield_()   # all made: no trigger again before the yield duration
            return
        flowfiles = session.create_batch(count)
        numbers = [str(n) for n in range(made + 1, made + count + 1)]
        flowfiles = session.put_attributes_batch(
            flowfiles, [{"message.number": n, "filename": f"message-{n}.txt"} for n in numbers])
        texts = self._text.evaluate_each(flowfiles)   # once per distinct input, not once a FlowFile
        flowfiles = session.write_bytes_batch(flowfiles, [text.encode() for text in texts])
        session.transfer_batch(flowfiles, "success")
        if not context.state.replace(state, {"made": str(made + count)}):
            session.rollback()   # another task made some meanwhile: count again at the next trigger


# -- MaskDigits --------------------------------------------------------------------------------
DIGIT = re.compile(rb"[0-9]")


def _one_character(value: str) -> str | None:
    """A validator: None when the value is fine, else what is wrong with it."""
    return None if len(value) == 1 else "must be exactly one character"


class MaskDigits(Processor):
    """Replaces every ASCII digit of the content with Mask Character, one FlowFile a trigger.
    Empty FlowFiles are removed; one larger than Maximum Size is penalized and sent to
    too.large unread."""

    description = "Masks the digits of a content"
    properties = (
        PropertyDescriptor("Mask Character", "What each digit becomes", required=True, default="#",
                           validator=_one_character),
        PropertyDescriptor("Maximum Size", "The largest content read; larger ones go to too.large",
                           required=True, default="1 MB", validator=validators.DATA_SIZE,
                           expression_language=True),
    )
    SUCCESS = Relationship("success", "FlowFiles with their digits masked")
    TOO_LARGE = Relationship("too.large", "FlowFiles larger than Maximum Size, unchanged and penalized")
    relationships = (SUCCESS, TOO_LARGE)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._mask = context.property("Mask Character").evaluate().encode()

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfile = session.get()
        if flowfile is None:
            return
        if flowfile.size == 0:
            session.remove(flowfile)   # gone for good: the session records a DROP event
            return
        limit = context.property("Maximum Size").as_data_size(flowfile)   # may read its attributes
        if flowfile.size > limit:
            flowfile = session.put_attribute(flowfile, "mask.skipped", f"{flowfile.size} bytes, over {limit}")
            session.transfer(session.penalize(flowfile), self.TOO_LARGE)
            return
        with session.read(flowfile) as stream:
            masked, count = DIGIT.subn(self._mask, stream.read())
        if count:
            flowfile = session.write(flowfile, lambda out: out.write(masked))
            session.provenance.modify_content(flowfile, details=f"{count} digits masked")
        flowfile = session.put_attribute(flowfile, "mask.count", str(count))
        session.transfer(flowfile, self.SUCCESS)


# -- ClassifyMessages --------------------------------------------------------------------------
UNMATCHED = Relationship("unmatched", "Text that no dynamic property's expression finds")
FAILURE = Relationship("failure", "Content that does not decode (routed there by the engine)")


class ClassifyMessages(Processor):
    """Routes text by regular expressions, a batch a trigger: each dynamic property (relationship
    name -> regular expression) is a relationship of its own, and a FlowFile goes to the first
    whose expression it contains, else to unmatched. Writes ``category`` (the relationship) and,
    with a Signing Key, ``signature`` (HMAC-SHA256 of the content, hex)."""

    description = "Routes text by regular expressions"
    dynamic_properties = True   # undeclared properties are accepted: here, the categories
    properties = (
        PropertyDescriptor("Character Set", "How the content is decoded", required=True, default="UTF-8",
                           allowable_values=("UTF-8", "ASCII", "ISO-8859-1")),
        PropertyDescriptor("Signing Key", "The key of the signature attribute; none: no signature",
                           sensitive=True),
        PropertyDescriptor("Drop Empty", "Remove empty FlowFiles instead of classifying them",
                           required=True, default="true", validator=validators.BOOLEAN),
    )
    relationships = (UNMATCHED, FAILURE)

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        """A relationship a dynamic property, then the declared ones (the flow checks that every
        one is connected or auto-terminated)."""
        declared = cls.descriptor_map()
        categories = [Relationship(name, f"Text containing a match of {pattern!r}")
                      for name, pattern in values.items() if name not in declared]
        return (*categories, *cls.relationships)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        declared = self.descriptor_map()
        categories = {name: pattern for name, pattern in values.items() if name not in declared}
        if not categories:
            return ["ClassifyMessages needs a dynamic property: a relationship name -> a regular expression"]
        problems = []
        for name, pattern in categories.items():
            if name in {r.name for r in self.relationships}:
                problems.append(f"a dynamic property cannot be named '{name}' (that relationship always exists)")
            problem = validators.REGEX(pattern)
            if problem:
                problems.append(f"property '{name}': {problem}")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        self._charset = context.property("Character Set").evaluate()
        key = context.property("Signing Key").evaluate()
        self._key = key.encode() if key else None
        self._drop_empty = context.property("Drop Empty").as_bool()
        self._patterns = {name: re.compile(p) for name, p in context.dynamic_properties.items()}
        self._counts: Counter[str] = Counter()

    def on_stopped(self, context: ProcessContext) -> None:
        log.info("%s (task %d) classified %s", context.name, context.instance, dict(self._counts))

    def on_trigger(self, context: ProcessContext, session) -> None:
        flowfiles = session.get_batch()   # up to the processor's batch size
        if not flowfiles:
            return
        if self._drop_empty and any(f.size == 0 for f in flowfiles):
            session.remove_batch([f for f in flowfiles if f.size == 0])
            flowfiles = [f for f in flowfiles if f.size > 0]
        contents = session.read_bytes_batch(flowfiles)
        # bytes that do not decode raise UnicodeDecodeError: the engine rolls the batch back and
        # narrows it down to the FlowFile at fault, which it sends to failure
        categories = [self._category(data.decode(self._charset)) for data in contents]
        values = [{"category": category} for category in categories]
        if self._key is not None:
            values = [{**v, "signature": hmac.new(self._key, data, hashlib.sha256).hexdigest()}
                      for v, data in zip(values, contents)]
        flowfiles = session.put_attributes_batch(flowfiles, values)
        session.provenance.route_batch(flowfiles, categories)
        session.transfer_batch(flowfiles, categories)
        # commit here rather than after on_trigger returns, to count only what is durable
        session.commit_async(on_success=lambda: self._counts.update(categories))

    def _category(self, text: str) -> str:
        for name, pattern in self._patterns.items():
            if pattern.search(text):
                return name
        return UNMATCHED.name


# -- the flow ----------------------------------------------------------------------------------
def build_flow(out: Path) -> Flow:
    """Numbered messages, their digits masked, classified into out/<category>/message-<n>.txt."""
    flow = Flow("custom-processor")
    # the signing key is a sensitive parameter: never written to the definition, given at run
    # time by the environment variable FLOWACTORS_PARAMETER_SIGNING_KEY
    flow.add_parameter_context("secrets", {"signing key": None}, sensitive=["signing key"])
    messages = flow.add(NumberedMessages, "messages", properties={
        "Total": 12, "Batch Size": 5,
        "Text": "${message.number:mod(4):equals(0):ifElse('ERROR', 'INFO')} order ${message.number} "
                "paid with card 4111-1111-1111-${message.number:padLeft(4, '0')}"})
    mask = flow.add(MaskDigits, "mask digits", auto_terminate=["too.large"])
    classify = flow.add(ClassifyMessages, "classify", properties={
        "Signing Key": "#{signing key}", "errors": "^ERROR"})
    put = flow.add(PutFile, "write", properties={
        "Directory": f"{out.resolve()}/${{category:replaceNull('failed')}}"},
        auto_terminate=["success", "failure"])
    flow.connect(messages, mask)
    flow.connect(mask, classify)
    flow.connect(classify, put, ["errors", "unmatched", "failure"])
    return flow


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the example flow of docs/processors.md.")
    parser.add_argument("--engine", choices=("ray", "in-process"), default="ray")
    parser.add_argument("--out", type=Path, default=Path("out/custom_processor"))
    parser.add_argument("--repository", type=Path, default=Path("repository/custom_processor"))
    args = parser.parse_args(argv)
    # an example's key; a real flow's comes from its environment
    os.environ.setdefault("FLOWACTORS_PARAMETER_SIGNING_KEY", "example key")
    for folder in (args.out, args.repository):
        shutil.rmtree(folder, ignore_errors=True)
    flow = build_flow(args.out)
    args.out.mkdir(parents=True)
    definition = args.out / "flow.json"
    flow.save(definition)
    final = run_flow(flow, repository=args.repository, engine=args.engine, timeout=300)
    for category in sorted(p.name for p in args.out.iterdir() if p.is_dir()):
        files = sorted((args.out / category).iterdir())
        print(f"{category}: {len(files)} file(s), e.g. {files[0].name}: {files[0].read_text()!r}")
    errors = [f"{p['name']}: {e['error']}" for p in final["processors"] for e in p["recent_errors"]]
    print("\n".join(["errors:", *errors]) if errors else "no errors")
    print(f"definition saved to {definition}; run it again with: FLOWACTORS_PARAMETER_SIGNING_KEY=... "
          f"PYTHONPATH=examples flowactors run {definition} --repository {args.repository}")
    return 1 if final.get("timed_out") or errors else 0


if __name__ == "__main__":
    # Build the flow from this file imported as the module ``custom_processor`` (examples/ is on
    # sys.path when it runs as a script), not from ``__main__``: a saved definition names each
    # processor class by its module path, and ``__main__`` is no path another process can import.
    import custom_processor

    sys.exit(custom_processor.main())
