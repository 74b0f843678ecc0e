"""MergeContent: bins FlowFiles across triggers and joins each bin into one FlowFile."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import BinaryIO, Mapping, Sequence

from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.processors._common import CHUNK, FAILURE, charset_property
from flowactors.processors.binning import Bin, BinPacker, bin_limit_problems
from repositories.content.errors import ContentRepositoryError, ContentRepositoryFullError
from repositories.model import FlowFile, now_millis

log = logging.getLogger(__name__)

BIN_PACKING = "Bin-Packing Algorithm"
CONCATENATION = "Binary Concatenation"
COMMON = "Keep Only Common Attributes"
UNIQUE = "Keep All Unique Attributes"
NO_DELIMITERS, TEXT, FILENAME = "Do Not Use Delimiters", "Text", "Filename"


class MergeContent(Processor):
    """Merges groups of FlowFiles into one by concatenating their contents (Bin-Packing).

    FlowFiles are put in bins - per value of Correlation Attribute Name when it is set - and are
    held across triggers by a second session (``session.new_session()`` + ``session.migrate``), so
    a bin can collect more than one trigger's batch. A bin is merged when it is full (Maximum
    Number of Entries or Maximum Group Size reached), when it holds at least Minimum Number of
    Entries and Minimum Group Size, when it is older than Max Bin Age (the processor is triggered
    even without input, so old bins are flushed), or, oldest first, when a new bin is needed and
    Maximum number of Bins are open. A FlowFile that does not fit the room left in a bin starts a
    new one. The merged FlowFile gets Header + contents joined by Demarcator + Footer (Delimiter
    Strategy Text: the values themselves, evaluated against the bin's first FlowFile; Filename:
    the contents of the files they name), the attributes all the originals share (or, with Keep
    All Unique Attributes, every attribute no two originals disagree on), merge.count,
    merge.bin.age (ms) and merge.reason; it goes to merged and the originals to original, in the
    same commit. When the processor stops, open bins are rolled back: their FlowFiles return to the
    queue, unchanged, and nothing has been emitted for them. If a content cannot be read, the
    bin's FlowFiles go to failure. Provenance: a JOIN event (parents = the bin) per merge.
    """

    description = "Merges groups of FlowFiles into one (binary concatenation)"
    trigger_when_empty = True
    properties = (
        PropertyDescriptor("Merge Strategy", "How FlowFiles are grouped", required=True, default=BIN_PACKING,
                           allowable_values=(BIN_PACKING,)),
        PropertyDescriptor("Merge Format", "How the contents are combined", required=True, default=CONCATENATION,
                           allowable_values=(CONCATENATION,)),
        PropertyDescriptor("Attribute Strategy", "Which attributes the merged FlowFile gets", required=True,
                           default=COMMON, allowable_values=(COMMON, UNIQUE)),
        PropertyDescriptor("Correlation Attribute Name", "Only FlowFiles with the same value of this attribute "
                           "are merged together"),
        PropertyDescriptor("Minimum Number of Entries", "The fewest FlowFiles a bin is merged with (unless it "
                           "is older than Max Bin Age)", required=True, default="1",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Maximum Number of Entries", "The most FlowFiles in a bin", required=True,
                           default="1000", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Minimum Group Size", "The smallest total content a bin is merged with (unless it "
                           "is older than Max Bin Age)", required=True, default="0 B",
                           validator=validators.DATA_SIZE),
        PropertyDescriptor("Maximum Group Size", "The largest total content of a bin (a single larger FlowFile "
                           "gets a bin of its own)", validator=validators.DATA_SIZE),
        PropertyDescriptor("Max Bin Age", "A bin this old is merged whatever it holds, e.g. '30 sec'",
                           validator=validators.DURATION),
        PropertyDescriptor("Maximum number of Bins", "The most bins open at once; the oldest is merged to make "
                           "room", required=True, default="5", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Delimiter Strategy", "Whether Header, Footer and Demarcator are text or file names",
                           required=True, default=NO_DELIMITERS, allowable_values=(NO_DELIMITERS, TEXT, FILENAME)),
        PropertyDescriptor("Header", "Put before the merged contents", expression_language=True),
        PropertyDescriptor("Footer", "Put after the merged contents", expression_language=True),
        PropertyDescriptor("Demarcator", "Put between every two contents", expression_language=True),
        charset_property("The character set Header, Footer and Demarcator text is encoded with"),
    )
    MERGED = Relationship("merged", "The merged FlowFiles")
    ORIGINAL = Relationship("original", "The FlowFiles that were merged")
    relationships = (MERGED, ORIGINAL, FAILURE)

    def __init__(self) -> None:
        self._packer = BinPacker()

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return bin_limit_problems(values)

    def on_scheduled(self, context: ProcessContext) -> None:
        p = context.property
        self._packer.configure(context)
        self._unique = p("Attribute Strategy").evaluate() == UNIQUE
        self._delimiters = p("Delimiter Strategy").evaluate()
        self._charset = p("Character Set").evaluate()

    def on_stopped(self, context: ProcessContext) -> None:
        """Give every binned FlowFile back to its queue, unchanged."""
        self._packer.release()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for bin, reason in self._packer.take_ready(session):
            self._merge(context, session, bin, reason)

    # ------------------------------------------------------------------ merging
    def _delimiter(self, context: ProcessContext, name: str, first: FlowFile) -> bytes:
        if self._delimiters == NO_DELIMITERS:
            return b""
        value = context.property(name).evaluate(first)
        if not value:
            return b""
        if self._delimiters == FILENAME:
            return Path(value).read_bytes()
        return value.encode(self._charset)

    def _merge(self, context: ProcessContext, session, bin: Bin, reason: str) -> None:
        sources = bin.flowfiles
        merged = None
        try:
            header = self._delimiter(context, "Header", sources[0])
            footer = self._delimiter(context, "Footer", sources[0])
            demarcator = self._delimiter(context, "Demarcator", sources[0])

            def write_all(out: BinaryIO) -> None:
                out.write(header)
                for index, source in enumerate(sources):
                    if index and demarcator:
                        out.write(demarcator)
                    with session.read(source) as stream:
                        while chunk := stream.read(CHUNK):
                            out.write(chunk)
                out.write(footer)

            merged = session.create(parents=sources)
            merged = session.write(merged, write_all)
        except ContentRepositoryFullError:
            raise  # the whole trigger rolls back; nothing is wrong with the FlowFiles
        except (ContentRepositoryError, OSError, ValueError) as err:
            log.warning("%s: cannot merge %d FlowFiles: %s", context.name, len(sources), err)
            if merged is not None:
                session.remove(merged)
            for source in sources:
                session.transfer(source, FAILURE)
            return
        attributes = self._unique_attributes(sources) if self._unique else {}
        attributes.update({"merge.count": str(len(sources)),
                           "merge.bin.age": str(max(0, now_millis() - bin.created_ms)),
                           "merge.reason": reason})
        merged = session.put_all_attributes(merged, attributes)
        session.provenance.join(sources, merged, details=reason)
        session.transfer(merged, self.MERGED)
        for source in sources:
            session.transfer(source, self.ORIGINAL)

    @staticmethod
    def _unique_attributes(sources: Sequence[FlowFile]) -> dict[str, str]:
        values: dict[str, str] = {}
        conflicts: set[str] = set()
        for flowfile in sources:
            for key, value in flowfile.attributes.items():
                if values.setdefault(key, value) != value:
                    conflicts.add(key)
        return {k: v for k, v in values.items() if k not in conflicts and k not in ("uuid", "filename")}
