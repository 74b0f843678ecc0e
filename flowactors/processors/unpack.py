"""UnpackContent: opens packages (FlowFile Stream v3, TAR, ZIP) into a FlowFile per packaged file.

The counterpart of MergeContent's package formats and of NiFi's UnpackContent: a bundle made on a
NiFi node opens here with the same children and attributes. A package is unpacked whole or not at
all: when it is corrupt, cut short or holds nothing to unpack, the original goes to failure and no
child is kept. v3 contents and plain TAR entries are byte ranges of the package's content, so no
byte is copied; ZIP entries are decompressed a chunk at a time.
"""

from __future__ import annotations

import logging
import re
import uuid as uuid_module
from typing import BinaryIO, Iterable

from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.relationships import FAILURE
from flowactors.processors._common import REGEX_VALIDATOR
from flowactors.processors.packaging import (
    FLOWFILE_V3_MIME_TYPE, TAR_MIME_TYPE, ZIP_MIME_TYPE, ArchiveEntry, FlowFileStreamReader, PackageError,
    read_tar, read_zip,
)

log = logging.getLogger(__name__)

USE_MIME_TYPE = "use mime.type attribute"
TAR, ZIP, FLOWFILE_V3 = "tar", "zip", "flowfile-stream-v3"
#: mime.type values (lower case, without parameters) that name a format
MIME_TYPES = {TAR_MIME_TYPE: TAR, "application/x-tar": TAR, ZIP_MIME_TYPE: ZIP, FLOWFILE_V3_MIME_TYPE: FLOWFILE_V3}
#: NiFi's older formats, which this processor does not read: their FlowFiles go to failure
NOT_READ = {"application/flowfile-v2": "flowfile-stream-v2", "application/flowfile-v1": "flowfile-tar-v1"}
OCTET_STREAM = "application/octet-stream"
#: packages taken per trigger: each may fan out to very many children in one session
PACKAGES_PER_TRIGGER = 100


class UnpackContent(Processor):
    """Unpacks each package into a FlowFile per packaged file: FlowFile Stream v3, TAR or ZIP.

    Packaging Format names the format, or with "use mime.type attribute" the FlowFile's mime.type
    does (application/flowfile-v3, application/tar or application/x-tar, application/zip): a
    FlowFile without mime.type goes to failure, one whose type names no package to success
    unchanged (as NiFi), one of NiFi's older formats (flowfile-stream-v2, flowfile-tar-v1, not read
    here) to failure. A v3 child gets the attributes it was packaged with (all but uuid; mime.type
    application/octet-stream when it had none) over the package's own. TAR and ZIP entries whose
    name File Filter finds (folders never) become children with filename and path (TAR's ending in
    /, ZIP's not, as NiFi), mime.type application/octet-stream, TAR's file.permissions, file.owner,
    file.group, file.lastModifiedTime and file.creationTime, ZIP's file.encryptionMethod, and
    fragment.identifier, fragment.index (1-based), fragment.count and segment.original.filename
    (the package's filename less .tar, .zip or .pkg). The original goes to original with
    fragment.count and the first child's fragment.identifier. A corrupt, truncated or empty
    package goes to failure and no child is kept. Provenance: a FORK from the package to its
    children.
    """

    description = "Unpacks FlowFile Stream v3, TAR and ZIP packages into a FlowFile per packaged file"
    properties = (
        PropertyDescriptor("Packaging Format", "The format of the packages", required=True, default=USE_MIME_TYPE,
                           allowable_values=(USE_MIME_TYPE, TAR, ZIP, FLOWFILE_V3)),
        PropertyDescriptor("File Filter", "Only the TAR and ZIP entries whose name (with its folders) this regular "
                           "expression finds are unpacked", required=True, default=".*", validator=REGEX_VALIDATOR),
    )
    SUCCESS = Relationship("success", "The unpacked FlowFiles (and FlowFiles whose mime.type names no package)")
    ORIGINAL = Relationship("original", "The package, once unpacked")
    relationships = (SUCCESS, FAILURE, ORIGINAL)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._format = context.property("Packaging Format").evaluate()
        self._filter = re.compile(context.property("File Filter").evaluate())

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch(min(context.batch_size, PACKAGES_PER_TRIGGER)):
            fmt = self._format if self._format != USE_MIME_TYPE else self._named_format(context, session, flowfile)
            if fmt is None:
                continue
            children: list[FlowFile] = []
            try:
                with session.read(flowfile) as stream:
                    if fmt == FLOWFILE_V3:
                        self._unpack_v3(session, flowfile, stream, children)
                    else:
                        self._unpack_archive(session, flowfile, read_tar(stream) if fmt == TAR else read_zip(stream),
                                             children)
                if not children:
                    raise PackageError("the package holds nothing to unpack"
                                       + ("" if fmt == FLOWFILE_V3 else " that File Filter matches"))
            except ContentRepositoryFullError:
                raise  # the whole trigger rolls back; nothing is wrong with the package
            except (PackageError, ContentRepositoryError, OSError) as err:
                log.warning("%s: cannot unpack %s; routing it to failure: %s", context.name, flowfile.uuid, err)
                for child in children:
                    session.remove(child)
                session.transfer(flowfile, FAILURE)
                continue
            self._finish(session, flowfile, fmt, children)

    def _named_format(self, context: ProcessContext, session, flowfile: FlowFile) -> str | None:
        """The format the FlowFile's mime.type names, or None once the FlowFile has been routed."""
        mime_type = flowfile.attributes.get("mime.type")
        if mime_type is None:
            log.warning("%s: %s has no mime.type attribute; routing to failure", context.name, flowfile.uuid)
            session.transfer(flowfile, FAILURE)
            return None
        key = mime_type.split(";")[0].strip().lower()
        if key in NOT_READ:
            log.warning("%s: %s is a %s package, a format this processor does not read; routing to failure",
                        context.name, flowfile.uuid, NOT_READ[key])
            session.transfer(flowfile, FAILURE)
            return None
        fmt = MIME_TYPES.get(key)
        if fmt is None:
            session.transfer(flowfile, self.SUCCESS)  # not a package: nothing to do
        return fmt

    @staticmethod
    def _unpack_v3(session, flowfile: FlowFile, stream: BinaryIO, children: list[FlowFile]) -> None:
        for packaged in FlowFileStreamReader(stream):
            children.append(session.clone(flowfile, packaged.offset, packaged.size))
            # the packaged uuid is not taken: the session never lets an attribute change a uuid (NiFi drops it too)
            attributes = {"mime.type": OCTET_STREAM, **packaged.attributes}
            children[-1] = session.put_all_attributes(children[-1], attributes)

    def _unpack_archive(self, session, flowfile: FlowFile, entries: Iterable[ArchiveEntry],
                        children: list[FlowFile]) -> None:
        for entry in entries:
            if not self._filter.search(entry.name):
                continue
            if entry.offset is not None:
                children.append(session.clone(flowfile, entry.offset, entry.size))
            else:
                children.append(session.create(parent=flowfile))
                children[-1] = session.write(children[-1], entry.copy_to)
            children[-1] = session.put_all_attributes(children[-1], {**entry.attributes, "mime.type": OCTET_STREAM})

    def _finish(self, session, flowfile: FlowFile, fmt: str, children: list[FlowFile]) -> None:
        if fmt != FLOWFILE_V3:  # v3 children keep the attributes they were packaged with
            identifier = str(uuid_module.uuid4())
            original_name = flowfile.attributes.get("filename", "")
            if original_name.endswith((".tar", ".zip", ".pkg")):
                original_name = original_name[:-4]
            count = str(len(children))
            children = [session.put_all_attributes(child, {
                "fragment.identifier": identifier, "fragment.index": str(index), "fragment.count": count,
                "segment.original.filename": original_name}) for index, child in enumerate(children, start=1)]
        for child in children:
            session.transfer(child, self.SUCCESS)
        changes = {"fragment.count": str(len(children))}
        identifier = children[0].attributes.get("fragment.identifier")  # as NiFi: the first child's, if any
        if identifier:
            changes["fragment.identifier"] = identifier
        flowfile = session.put_all_attributes(flowfile, changes)
        session.transfer(flowfile, self.ORIGINAL)
        session.provenance.fork(flowfile, children)
