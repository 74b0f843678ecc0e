"""TransformXml: an XSLT 1.0 stylesheet (lxml's libxslt) applied to XML content."""

from __future__ import annotations

import logging
import os
import re
import time
from collections import OrderedDict
from typing import Callable, Mapping

from lxml import etree

from flowactors.processors._common import boolean_property
from flowactors.processors._common import route_failure
from flowactors.processors.xml import DOCUMENTS_PER_TRIGGER, XmlError, parse_document, xml_parser
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, ServiceNotFound, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS, reason
from flowactors.sdk.services import StringLookupService

log = logging.getLogger(__name__)

XSL = "http://www.w3.org/1999/XSL/Transform"
#: an XSLT parameter's name (an XML name without a prefix: libxslt cannot take a prefixed one here)
_PARAMETER_NAME = re.compile(r"^[^\W\d][\w.\-]*$")


def stylesheet_source(value: str) -> tuple[str, str]:
    """(kind, text) of an XSLT Document value: ("file", path) when it names a file, ("text", xslt)
    when it is a stylesheet itself (it starts with ``<``); ``XmlError`` otherwise."""
    if value.lstrip().startswith("<"):
        return "text", value
    if os.path.isfile(value):
        return "file", value
    raise XmlError(f"XSLT Document {value[:200]!r} is neither a readable file nor a stylesheet (XSLT text starting "
                   f"with '<')")


def compile_stylesheet(text: bytes, indent: bool, secure: bool, base_url: str | None = None) -> etree.XSLT:
    """The stylesheet ``text`` compiled, its ``xsl:output`` indent set by Indent (as NiFi's
    Transformer output property) and its encoding UTF-8 unless it says otherwise. ``XmlError`` (one line) when it is not XSLT or declares a version
    other than 1.0: lxml runs XSLT 1.0 only, and a 2.0 or 3.0 stylesheet can run with other results
    (``xsl:value-of`` of several nodes, for one) where it does not fail, so it is refused. Secure:
    the stylesheet's DTD and entities are not read, and the transform may read and write no file
    and reach no network (``document()`` fails); ``xsl:include``/``xsl:import``, part of the
    configuration, are read in both modes, relative to ``base_url`` (a stylesheet file's path)."""
    try:
        document = etree.fromstring(text, xml_parser(False) if secure else etree.XMLParser(), base_url=base_url)
    except etree.XMLSyntaxError as err:
        raise XmlError(f"the stylesheet is not valid XML: {reason(err)}") from None
    version = document.get("version") if document.tag in (f"{{{XSL}}}stylesheet", f"{{{XSL}}}transform") \
        else document.get(f"{{{XSL}}}version")
    if version is None:
        raise XmlError("the document is not an XSLT stylesheet (no xsl:stylesheet with a version)")
    if version.strip() not in ("1.0", "1"):
        raise XmlError(f"the stylesheet declares XSLT version {version}: flowactors runs XSLT 1.0 (lxml), NiFi "
                       f"Saxon's XSLT 3.0; a stylesheet that uses only XSLT 1.0 runs once its version says 1.0")
    if document.tag in (f"{{{XSL}}}stylesheet", f"{{{XSL}}}transform"):
        outputs = document.findall(f"{{{XSL}}}output")
        if not outputs:
            outputs = [etree.SubElement(document, f"{{{XSL}}}output")]
            document.insert(0, outputs[0])
        for output in outputs:
            output.set("indent", "yes" if indent else "no")
            if output.get("encoding") is None:
                output.set("encoding", "UTF-8")   # Java's default, written in the XML declaration
    access = etree.XSLTAccessControl.DENY_ALL if secure else etree.XSLTAccessControl()
    try:
        return etree.XSLT(document, access_control=access)
    except etree.XSLTParseError as err:
        raise XmlError(f"the stylesheet cannot be compiled: {reason(err)}") from None


def _apply_reason(err: Exception) -> str:
    """One line: an XSLT run's error log (libxslt's exception names only its last entry, "XPath
    evaluation returned no result.", where the cause, "Variable 'x' has not been declared.", is
    earlier), each message once; other errors' own message."""
    if not isinstance(err, etree.XSLTApplyError):
        return reason(err)
    messages = dict.fromkeys(entry.message.strip() for entry in err.error_log if entry.message.strip())
    return reason("; ".join(messages) or str(err))


class StylesheetCache:
    """Compiled stylesheets by source, at most ``size`` (the least recently used dropped first), each
    dropped ``ttl`` seconds after its last use (0: never); ``size`` 0 keeps none. ``clock`` gives
    the time in seconds (injectable for tests)."""

    def __init__(self, size: int, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl, self.clock = size, ttl, clock
        self._entries: OrderedDict[tuple, tuple[etree.XSLT, float]] = OrderedDict()
        self.compiled = 0   # how many stylesheets were compiled (a miss each)

    def get(self, key: tuple, build: Callable[[], etree.XSLT]) -> etree.XSLT:
        now = self.clock()
        entry = self._entries.pop(key, None)
        if entry is not None and (not self.ttl or now - entry[1] < self.ttl):
            stylesheet = entry[0]
        else:
            stylesheet = build()
            self.compiled += 1
        if self.size:
            self._entries[key] = (stylesheet, now)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return stylesheet


class TransformXml(Processor):
    """Applies an XSLT stylesheet to the XML content; the result replaces it.

    The stylesheet is XSLT Document (a file's path, or the stylesheet itself; an expression,
    evaluated per FlowFile) or, exactly one of the two, the value XSLT Lookup (a
    StringLookupService) gives for XSLT Lookup Key (an expression), looked up under the service's
    one required key. Dynamic properties are XSLT parameters (expressions, evaluated per FlowFile;
    one the stylesheet neither declares nor refers to is ignored; one it refers to without declaring
    it is used, where NiFi's Saxon fails). Indent sets ``xsl:output``'s indent. Secure
    Processing (default true): the stylesheet's DTD and entities are not read and the transform has
    no file, network or ``document()`` access; false allows them (includes are read either way). The input may have a DOCTYPE (an
    internal entity is expanded) but an external entity is an error whatever Secure Processing
    says (NiFi's resolves them when it is false). Compiled stylesheets are cached (Cache
    Size, each dropped Cache Duration after its last use). XSLT is 1.0 (lxml's libxslt): NiFi runs
    Saxon's XSLT 3.0, and a stylesheet declaring another version is refused with one message.
    Content that is not XML, a stylesheet that cannot be found, compiled or run (``xsl:message``
    with terminate="yes" included) sends the FlowFile to failure unchanged, with
    ``flowactors.failure.reason``. Provenance: CONTENT_MODIFIED (from the session).
    """

    description = "Applies an XSLT 1.0 stylesheet to XML content"
    dynamic_properties = True
    properties = (
        PropertyDescriptor("XSLT Document", "The path of the XSLT file, or the XSLT itself (one of XSLT Document and "
                           "XSLT Lookup must be set)", expression_language=True),
        PropertyDescriptor("XSLT Lookup", "A StringLookupService holding stylesheets (one of XSLT Document and XSLT "
                           "Lookup must be set)", service=StringLookupService),
        PropertyDescriptor("XSLT Lookup Key", "The key of the stylesheet in XSLT Lookup", expression_language=True),
        boolean_property("Indent", True, "Whether to indent the output"),
        boolean_property("Secure Processing", True, "Whether to refuse external entities, DTDs, file and network "
                         "access (XXE protection)"),
        PropertyDescriptor("Cache Size", "The most stylesheets kept compiled; 0 disables the cache", required=True,
                           default="10", validator=validators.NON_NEGATIVE_INTEGER),
        PropertyDescriptor("Cache Duration", "How long a stylesheet stays cached after its last use", required=True,
                           default="60 secs", validator=validators.DURATION),
    )
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.TransformXml"
    NIFI_PROPERTY_NAMES = {"XSLT file name": "XSLT Document", "XSLT File Name": "XSLT Document",
                           "xslt-controller": "XSLT Lookup", "xslt-controller-key": "XSLT Lookup Key",
                           "XSLT Lookup key": "XSLT Lookup Key", "indent-output": "Indent",
                           "secure-processing": "Secure Processing", "cache-size": "Cache Size",
                           "cache-ttl-after-last-access": "Cache Duration"}
    #: the clock the stylesheet cache reads (seconds; replaced in tests)
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        declared = self.descriptor_map()
        names = [f"dynamic property {name!r} is not an XSLT parameter name (letters, digits, '_', '-', '.'; no prefix)"
                 for name in values if name not in declared and not _PARAMETER_NAME.match(name)]
        if names:
            return names
        document, lookup = values.get("XSLT Document"), values.get("XSLT Lookup")
        if (document is None) == (lookup is None):
            return ["exactly one of XSLT Document and XSLT Lookup must be set"]
        if lookup is not None and not values.get("XSLT Lookup Key"):
            return ["XSLT Lookup Key must be set with XSLT Lookup"]
        if document is not None and "${" not in document:
            try:
                kind, text = stylesheet_source(document)
                compile_stylesheet(self._text(kind, text), True, values.get("Secure Processing", "true") == "true",
                                   text if kind == "file" else None)
            except (XmlError, OSError) as err:
                return [f"property 'XSLT Document': {reason(err)}"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._indent = context.property("Indent").as_bool()
        self._secure = context.property("Secure Processing").as_bool()
        self._cache = StylesheetCache(context.property("Cache Size").as_int(),
                                      context.property("Cache Duration").as_duration(), self.clock)
        self._parameters = {name: context.property(name) for name in context.dynamic_properties}
        self._lookup = None
        if context.property("XSLT Lookup").is_set:
            self._lookup = context.service("XSLT Lookup", StringLookupService)
            keys = self._lookup.required_keys()
            if len(keys) != 1:
                raise ServiceNotFound(f"XSLT Lookup must have exactly one required key, not {len(keys)}")
            [self._lookup_key] = keys

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch(min(context.batch_size, DOCUMENTS_PER_TRIGGER)):
            try:
                stylesheet = self._stylesheet(context, flowfile)
                tree = parse_document(session, flowfile, allow_dtd=True)
                parameters = {name: etree.XSLT.strparam(value.evaluate(flowfile) or "")
                              for name, value in self._parameters.items()}
                result = stylesheet(tree, **parameters)
                output = bytes(result)
            except (XmlError, OSError, etree.XSLTApplyError) as err:
                route_failure(context, session, flowfile, f"XSLT transform failed: {_apply_reason(err)}")
                continue
            for entry in stylesheet.error_log:   # xsl:message without terminate
                log.info("%s: %s: %s", context.name, flowfile.uuid, entry.message)
            session.transfer(session.write_bytes(flowfile, output), SUCCESS)

    def _stylesheet(self, context: ProcessContext, flowfile) -> etree.XSLT:
        if self._lookup is None:
            kind, text = stylesheet_source(context.property("XSLT Document").evaluate(flowfile) or "")
        else:
            key = context.property("XSLT Lookup Key").evaluate(flowfile) or ""
            found = self._lookup.lookup({self._lookup_key: key})
            if found is None or not str(found).strip():
                raise XmlError(f"no stylesheet under key {key!r} in XSLT Lookup")
            kind, text = "text", str(found)
        return self._cache.get((kind, text), lambda: compile_stylesheet(
            self._text(kind, text), self._indent, self._secure, text if kind == "file" else None))

    @staticmethod
    def _text(kind: str, text: str) -> bytes:
        if kind == "file":
            with open(text, "rb") as stream:
                return stream.read()
        return text.strip().encode("utf-8")
