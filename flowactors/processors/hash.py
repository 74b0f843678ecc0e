"""HashContent: a cryptographic hash of the content, streamed, into an attribute."""

from __future__ import annotations

import hashlib
import logging

from flowactors.sdk import ContentRepositoryError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.processors._common import boolean_property, iter_chunks
log = logging.getLogger(__name__)

ALGORITHMS = {
    "MD5": lambda: hashlib.md5(usedforsecurity=False),
    "SHA-1": lambda: hashlib.sha1(usedforsecurity=False),
    "SHA-256": hashlib.sha256,
    "SHA-512": hashlib.sha512,
    "BLAKE2b": hashlib.blake2b,  # 512-bit digest (NiFi calls it BLAKE2-512)
}


class HashContent(Processor):
    """Computes a hash of each FlowFile's content, reading it in chunks, into Hash Attribute Name.

    The value is the lowercase hexadecimal digest (MD5, SHA-1, SHA-256 - the default -, SHA-512
    or BLAKE2b with a 512-bit digest). With Fail if the content is empty, a FlowFile without
    content goes to failure; so does one whose content cannot be read. Provenance:
    ATTRIBUTES_MODIFIED (from the session).
    """

    description = "Puts a hash of the content into an attribute"
    properties = (
        PropertyDescriptor("Hash Attribute Name", "The attribute that receives the hash", required=True,
                           default="hash.value", validator=validators.NON_EMPTY),
        PropertyDescriptor("Hash Algorithm", "The hash function", required=True, default="SHA-256",
                           allowable_values=tuple(ALGORITHMS)),
        boolean_property("Fail if the content is empty", False, "Whether a FlowFile without content goes to failure"),
    )
    relationships = (SUCCESS, FAILURE)

    def on_trigger(self, context: ProcessContext, session) -> None:
        attribute = context.property("Hash Attribute Name").evaluate()
        make = ALGORITHMS[context.property("Hash Algorithm").evaluate()]
        fail_empty = context.property("Fail if the content is empty").as_bool()
        for flowfile in session.get_batch():
            if fail_empty and flowfile.size == 0:
                log.warning("%s: %s has no content; routing to failure", context.name, flowfile.uuid)
                session.transfer(flowfile, FAILURE)
                continue
            digest = make()
            try:
                with session.read(flowfile) as stream:
                    for chunk in iter_chunks(stream):
                        digest.update(chunk)
            except (ContentRepositoryError, OSError) as err:
                log.warning("%s: cannot read %s: %s", context.name, flowfile.uuid, err)
                session.transfer(flowfile, FAILURE)
                continue
            session.transfer(session.put_attribute(flowfile, attribute, digest.hexdigest()), SUCCESS)
