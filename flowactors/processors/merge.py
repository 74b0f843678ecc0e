"""MergeContent: bins FlowFiles across triggers and joins each bin into one FlowFile.

The bin becomes one content in the Merge Format: the contents concatenated, or a package NiFi
reads back (FlowFile Stream v3 with every FlowFile's attributes, TAR, ZIP; the formats themselves
are in ``packaging``).
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Mapping, Sequence

from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile, now_millis
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE
from flowactors.processors._common import boolean_property, charset_property
from flowactors.sdk.binning import Bin, BinPacker, bin_limit_problems
from flowactors.processors.packaging import (
    FLOWFILE_V3_MIME_TYPE, TAR_MIME_TYPE, ZIP_MIME_TYPE, TarPackager, ZipPackager, entry_name, tar_mode,
    write_flowfile,
)

log = logging.getLogger(__name__)

BIN_PACKING = "Bin-Packing Algorithm"
CONCATENATION = "Binary Concatenation"
TAR, ZIP, FLOWFILE_V3 = "TAR", "ZIP", "FlowFile Stream, v3"
#: the merged FlowFile's mime.type and the extension added to its filename, per package format
PACKAGES = {TAR: (TAR_MIME_TYPE, ".tar"), ZIP: (ZIP_MIME_TYPE, ".zip"),
            FLOWFILE_V3: (FLOWFILE_V3_MIME_TYPE, ".pkg")}
COMMON = "Keep Only Common Attributes"
UNIQUE = "Keep All Unique Attributes"
#: the properties MergeContent and MergeRecord share
ATTRIBUTE_STRATEGY = PropertyDescriptor("Attribute Strategy", "Which attributes the merged FlowFile gets",
                                        required=True, default=COMMON, allowable_values=(COMMON, UNIQUE))
MAX_BIN_AGE = PropertyDescriptor("Max Bin Age", "A bin this old is merged whatever it holds, e.g. '30 sec'",
                                 validator=validators.DURATION)
NO_DELIMITERS, TEXT, FILENAME = "Do Not Use Delimiters", "Text", "Filename"


class MergeContent(Processor):
    """Merges groups of FlowFiles into one: contents concatenated, or packaged (Bin-Packing).

    FlowFiles are put in bins - per value of Correlation Attribute Name when it is set - and are
    held across triggers by a second session (``session.new_session()`` + ``session.migrate``), so
    a bin can collect more than one trigger's batch. A bin is merged when it is full (Maximum
    Number of Entries or Maximum Group Size reached), when it holds at least Minimum Number of
    Entries and Minimum Group Size, when it is older than Max Bin Age (the processor is triggered
    even without input, so old bins are flushed), or, oldest first, when a new bin is needed and
    Maximum number of Bins are open. A FlowFile that does not fit the room left in a bin starts a
    new one. With Binary Concatenation the merged FlowFile gets Header + contents joined by
    Demarcator + Footer (Delimiter Strategy Text: the values themselves, evaluated against the
    bin's first FlowFile; Filename: the contents of the files they name). The other formats
    package the bin as NiFi does: "FlowFile Stream, v3" (each content with all its attributes),
    TAR or ZIP (an entry a FlowFile, named by its filename, behind its path with Keep Path; TAR
    takes each mode from tar.permissions and time from Tar Modified Time); they set mime.type and
    name the merged FlowFile after its single source, else the first's segment.original.filename,
    else its own uuid, plus .pkg, .tar or .zip. The merged FlowFile gets the attributes all the
    originals share (or, with Keep All Unique Attributes, every attribute no two originals
    disagree on), merge.count, merge.bin.age (ms) and merge.reason; it goes to merged and the
    originals to original, in the same commit. When the processor stops, open bins are rolled
    back: their FlowFiles return to the queue, unchanged, and nothing has been emitted for them.
    If a content cannot be read, the bin's FlowFiles go to failure. Provenance: a JOIN event
    (parents = the bin) per merge.
    """

    description = "Merges groups of FlowFiles into one (concatenated, FlowFile Stream v3, TAR or ZIP)"
    trigger_when_empty = True
    properties = (
        PropertyDescriptor("Merge Strategy", "How FlowFiles are grouped", required=True, default=BIN_PACKING,
                           allowable_values=(BIN_PACKING,)),
        PropertyDescriptor("Merge Format", "How the contents are combined", required=True, default=CONCATENATION,
                           allowable_values=(TAR, ZIP, FLOWFILE_V3, CONCATENATION)),
        ATTRIBUTE_STRATEGY,
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
        MAX_BIN_AGE,
        PropertyDescriptor("Maximum number of Bins", "The most bins open at once; the oldest is merged to make "
                           "room", required=True, default="5", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Delimiter Strategy", "Whether Header, Footer and Demarcator are text or file names "
                           "(Binary Concatenation only)",
                           required=True, default=NO_DELIMITERS, allowable_values=(NO_DELIMITERS, TEXT, FILENAME)),
        PropertyDescriptor("Header", "Put before the merged contents", expression_language=True),
        PropertyDescriptor("Footer", "Put after the merged contents", expression_language=True),
        PropertyDescriptor("Demarcator", "Put between every two contents", expression_language=True),
        charset_property("The character set Header, Footer and Demarcator text is encoded with"),
        PropertyDescriptor("Compression Level", "The DEFLATE level of ZIP entries (ZIP only)", required=True,
                           default="1", allowable_values=tuple(str(i) for i in range(10))),
        boolean_property("Keep Path", False, "Whether TAR and ZIP entry names start with the FlowFile's path"),
        PropertyDescriptor("Tar Modified Time", "The time of each TAR entry, ISO 8601 with a zone, e.g. "
                           "2024-05-01T12:00:00Z (TAR only; an entry gets the current time when it is empty or "
                           "not such a time)", default="${file.lastModifiedTime}", expression_language=True),
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
        self._unique = p(ATTRIBUTE_STRATEGY.name).evaluate() == UNIQUE
        self._delimiters = p("Delimiter Strategy").evaluate()
        self._charset = p("Character Set").evaluate()
        self._format = p("Merge Format").evaluate()
        self._level = p("Compression Level").as_int()
        self._keep_path = p("Keep Path").as_bool()

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


    def _package(self, context: ProcessContext, session, sources: Sequence[FlowFile], out: BinaryIO) -> None:
        """Write the bin as a package: every FlowFile with its attributes (v3), or an archive entry each."""
        if self._format == FLOWFILE_V3:
            for source in sources:
                with session.read(source) as stream:
                    write_flowfile(out, source.attributes, stream, source.size)
            return
        modified = context.property("Tar Modified Time")
        with TarPackager(out) if self._format == TAR else ZipPackager(out, self._level) as archive:
            for source in sources:
                name = entry_name(source.attributes, self._keep_path)
                with session.read(source) as stream:
                    if self._format == TAR:
                        archive.add(name, stream, source.size, tar_mode(source.attributes.get("tar.permissions")),
                                    _epoch_seconds(modified.evaluate(source)))
                    else:
                        archive.add(name, stream, source.size)

    def _merge(self, context: ProcessContext, session, bin: Bin, reason: str) -> None:
        sources = bin.flowfiles
        merged = None
        try:
            size = None
            if self._format == CONCATENATION:
                first = sources[0]
                write, size = session.concatenation(
                    sources, header=self._delimiter(context, "Header", first),
                    footer=self._delimiter(context, "Footer", first),
                    demarcator=self._delimiter(context, "Demarcator", first))
            else:
                write = functools.partial(self._package, context, session, sources)
            merged = session.create(parents=sources)
            merged = session.write(merged, write, size_hint=size)
        except ContentRepositoryFullError:
            raise  # the whole trigger rolls back; nothing is wrong with the FlowFiles
        except (ContentRepositoryError, OSError, ValueError) as err:
            log.warning("%s: cannot merge %d FlowFiles: %s", context.name, len(sources), err)
            if merged is not None:
                session.remove(merged)
            for source in sources:
                session.transfer(source, FAILURE)
            return
        attributes = unique_attributes(sources) if self._unique else {}
        if self._format in PACKAGES:
            mime_type, extension = PACKAGES[self._format]
            attributes.update({"mime.type": mime_type, "filename": _package_name(sources, merged) + extension})
        attributes.update({"merge.count": str(len(sources)),
                           "merge.bin.age": str(max(0, now_millis() - bin.created_ms)),
                           "merge.reason": reason})
        merged = session.put_all_attributes(merged, attributes)
        session.provenance.join(sources, merged, details=reason)
        session.transfer(merged, self.MERGED)
        for source in sources:
            session.transfer(source, self.ORIGINAL)


def unique_attributes(sources: Sequence[FlowFile]) -> dict[str, str]:
    """Keep All Unique Attributes (NiFi's): every attribute of ``sources`` that no two of them
    give different values, whether or not all have it; never ``uuid`` or ``filename`` (the merged
    FlowFile has its own). Keep Only Common Attributes needs nothing: a child created of several
    parents gets the attributes they all share."""
    values: dict[str, str] = {}
    conflicts: set[str] = set()
    for flowfile in sources:
        for key, value in flowfile.attributes.items():
            if values.setdefault(key, value) != value:
                conflicts.add(key)
    return {k: v for k, v in values.items() if k not in conflicts and k not in ("uuid", "filename")}


def _package_name(sources: Sequence[FlowFile], merged: FlowFile) -> str:
    """NiFi's name for a package: its one source's filename, else the first source's
    segment.original.filename, else (where NiFi reads a clock) the merged FlowFile's uuid."""
    if len(sources) == 1:
        return sources[0].attributes.get("filename", merged.uuid)
    return sources[0].attributes.get("segment.original.filename") or merged.uuid


def _epoch_seconds(value: str | None) -> float | None:
    """An ISO 8601 time with a zone in epoch seconds; None for anything else."""
    try:
        moment = datetime.fromisoformat(value.strip()) if value else None
    except ValueError:
        return None
    return moment.timestamp() if moment is not None and moment.tzinfo is not None else None
