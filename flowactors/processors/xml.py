"""XML processors on lxml: EvaluateXPath (XPath 1.0) and SplitXml (streamed); TransformXml (XSLT
1.0) lives in ``xml_transform``. What they share: a parser that never resolves an external entity
nor reaches the network (XXE protection, as NiFi's), and one-line errors."""

from __future__ import annotations

import re
import uuid as uuid_module
from typing import Any, BinaryIO, Iterator, Mapping

from lxml import etree

from flowactors.processors._common import TO_ATTRIBUTE, TO_CONTENT, boolean_property, path_count_problems
from flowactors.processors._common import route_failure
from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, reason

_STANDARD = "org.apache.nifi.processors.standard."
XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>'
#: FlowFiles EvaluateXPath and TransformXml take per trigger (NiFi's EvaluateXPath takes 50): each
#: document is read whole, and a smaller batch keeps a trigger's work short
DOCUMENTS_PER_TRIGGER = 50


class XmlError(ValueError):
    """Content that is not XML flowactors reads (the message is one line saying why)."""


def xml_parser(allow_dtd: bool = False) -> etree.XMLParser:
    """A parser that loads no external DTD, resolves no external entity and reaches no network.

    With ``allow_dtd`` the entities an internal DTD subset declares are expanded (an external one
    is an error: "Entity 'x' not defined"); without it a DOCTYPE is refused by ``check_doctype``."""
    return etree.XMLParser(resolve_entities="internal" if allow_dtd else False, no_network=True, load_dtd=False,
                           huge_tree=False)


def check_doctype(tree: etree._ElementTree, allow_dtd: bool) -> None:
    """``XmlError`` when the document has a DOCTYPE and ``allow_dtd`` is false (NiFi refuses them
    unless allowed: entity expansion attacks)."""
    if not allow_dtd and (tree.docinfo.doctype or tree.docinfo.internalDTD is not None):
        raise XmlError("the document has a DOCTYPE declaration, which is not allowed: set Allow DTD to true "
                       "to read it (external entities are never resolved)")


def parse_document(session, flowfile: FlowFile, allow_dtd: bool) -> etree._ElementTree:
    """The FlowFile's content as an XML tree (read whole: XPath and XSLT need the whole document);
    ``XmlError`` when it is not XML or cannot be read. A full content repository is raised as it is."""
    try:
        with session.read(flowfile) as stream:
            tree = etree.parse(stream, xml_parser(allow_dtd))
    except ContentRepositoryFullError:
        raise
    except (ContentRepositoryError, OSError) as err:
        raise XmlError(f"the content cannot be read: {reason(err)}") from None
    except etree.XMLSyntaxError as err:
        raise XmlError(f"the content is not valid XML: {reason(err)}") from None
    check_doctype(tree, allow_dtd)
    return tree


# ---------------------------------------------------------------------------------- EvaluateXPath
AUTO, NODESET, STRING = "auto-detect", "nodeset", "string"
#: XPath 2's any-namespace name test (``*:bundle``) outside string literals
_ANY_NAMESPACE = re.compile(r"\*:([A-Za-z_][\w.\-]*)")
_LITERALS = re.compile(r"('[^']*'|\"[^\"]*\")")


def xpath_1(text: str) -> str:
    """``text`` with XPath 2's ``*:name`` (any namespace), which NiFi's Saxon accepts, written as
    XPath 1.0's ``*[local-name()='name']``; string literals are left as they are."""
    parts = _LITERALS.split(text)
    return "".join(part if index % 2 else _ANY_NAMESPACE.sub(r"*[local-name()='\1']", part)
                   for index, part in enumerate(parts))


def compile_xpath(text: str, as_string: bool = False) -> etree.XPath:
    """The compiled XPath 1.0 expression (``xpath_1`` first); with ``as_string`` its value
    converted by XPath's ``string()``. ``XmlError``, one line, when it is not XPath 1.0."""
    source = xpath_1(text)
    try:
        return etree.XPath(f"string({source})" if as_string else source, smart_strings=False)
    except etree.XPathError as err:
        raise XmlError(f"{text!r} is not an XPath 1.0 expression: {reason(err)}") from None


def _node_text(node: Any) -> bytes:
    """A node-set's one node as NiFi writes it: an element as XML (with an XML declaration), a text
    or attribute node as its text."""
    if isinstance(node, etree._Element):
        return XML_DECLARATION + etree.tostring(node, encoding="UTF-8", with_tail=False)
    return str(node).encode("utf-8")


class EvaluateXPath(Processor):
    """Evaluates each dynamic property's XPath (its value; the property name is the attribute)
    against the FlowFile's XML content, read whole.

    Return Type string (auto-detect's choice for attributes) converts each result with XPath's
    ``string()``: always a result, so the FlowFile goes to matched. Return Type nodeset
    (auto-detect's choice for the content) wants one node: none sends the FlowFile to unmatched,
    several or a result that is not a node-set to failure; an element is written as XML after an
    XML declaration, a text or attribute node as its text. Destination flowfile-content takes
    exactly one XPath, whose result replaces the content; flowfile-attribute puts each result in
    its attribute. XPath is 1.0 (lxml), where NiFi's Saxon runs XPath 3.1; XPath 2's ``*:name``
    is read as any namespace (``xpath_1``). Allow DTD false (the default) refuses a document with
    a DOCTYPE; true reads it and expands its internal entities; an external entity or DTD is never
    fetched. Content that is not XML goes to failure unchanged, with ``flowactors.failure.reason``.
    Provenance: CONTENT_MODIFIED / ATTRIBUTES_MODIFIED (from the session).
    """

    description = "Evaluates XPath expressions against XML content, into attributes or the content"
    dynamic_properties = True
    properties = (
        PropertyDescriptor("Destination", "Whether the results go to attributes (one per dynamic property) or "
                           "replace the content (exactly one dynamic property)", required=True,
                           default=TO_CONTENT, allowable_values=(TO_CONTENT, TO_ATTRIBUTE)),
        PropertyDescriptor("Return Type", "nodeset: one node, written as XML; string: XPath's string() of the "
                           "result; auto-detect: nodeset for the content, string for attributes", required=True,
                           default=AUTO, allowable_values=(AUTO, NODESET, STRING)),
        boolean_property("Allow DTD", False, "Allow a Document Type Declaration in the content (its internal "
                         "entities expanded; external ones never resolved)"),
    )
    MATCHED = Relationship("matched", "The XPaths were evaluated and the FlowFile changed by their results")
    UNMATCHED = Relationship("unmatched", "A nodeset XPath found no node")
    relationships = (MATCHED, UNMATCHED, FAILURE)
    NIFI_TYPE = _STANDARD + "EvaluateXPath"
    NIFI_PROPERTY_NAMES = {"Validate DTD": "Allow DTD"}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        declared = self.descriptor_map()
        paths = {name: value for name, value in values.items() if name not in declared}
        problems = []
        for name, text in paths.items():
            try:
                compile_xpath(text)
            except XmlError as err:
                problems.append(f"property '{name}': {err}")
        return problems + path_count_problems(paths, values.get("Destination", TO_CONTENT), "XPath")

    def on_scheduled(self, context: ProcessContext) -> None:
        self._to_attributes = context.property("Destination").raw == TO_ATTRIBUTE
        kind = context.property("Return Type").raw
        self._as_string = kind == STRING or (kind == AUTO and self._to_attributes)
        self._allow_dtd = context.property("Allow DTD").as_bool()
        self._paths = {name: compile_xpath(text, self._as_string) for name, text in context.dynamic_properties.items()}

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch(min(context.batch_size, DOCUMENTS_PER_TRIGGER)):
            try:
                tree = parse_document(session, flowfile, self._allow_dtd)
                results = self._evaluate(tree)
            except XmlError as err:
                route_failure(context, session, flowfile, str(err))
                continue
            if results is None:
                session.transfer(flowfile, self.UNMATCHED)
            elif self._to_attributes:
                texts = {name: value.decode("utf-8") for name, value in results.items()}
                session.transfer(session.put_all_attributes(flowfile, texts), self.MATCHED)
            else:
                [content] = results.values()
                session.transfer(session.write_bytes(flowfile, content), self.MATCHED)

    def _evaluate(self, tree: etree._ElementTree) -> dict[str, bytes] | None:
        """Each property's result; None when a nodeset XPath found no node."""
        results: dict[str, bytes] = {}
        for name, path in self._paths.items():
            try:
                value = path(tree)
            except etree.XPathError as err:
                raise XmlError(f"XPath {path.path!r} (property '{name}') cannot be evaluated: {reason(err)}") from None
            if self._as_string:
                results[name] = str(value).encode("utf-8")
                continue
            if not isinstance(value, list):
                raise XmlError(f"XPath {path.path!r} (property '{name}') gives a {type(value).__name__}, not a node "
                               f"set: set Return Type to string")
            if not value:
                return None
            if len(value) > 1:
                raise XmlError(f"XPath {path.path!r} (property '{name}') found {len(value)} nodes, not one")
            results[name] = _node_text(value[0])
        return results


# ---------------------------------------------------------------------------------- SplitXml
#: parents SplitXml takes per trigger: each may fan out to very many children in one session
SPLIT_PARENTS_PER_TRIGGER = 100
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&apos;", '"': "&quot;"})


def _escape(text: str | None) -> str:
    return text.translate(_ESCAPES) if text else ""


def _attribute_name(name: str, nsmap: Mapping[str | None, str]) -> str:
    """``prefix:local`` of an attribute's Clark name (``{uri}local``) under ``nsmap``."""
    if not name.startswith("{"):
        return name
    uri, local = name[1:].split("}", 1)
    prefix = next((p for p, u in nsmap.items() if u == uri and p is not None), None)
    return f"{prefix}:{local}" if prefix else local


def _declarations(nsmap: Mapping[str | None, str]) -> list[str]:
    """``xmlns``/``xmlns:p`` declarations, ordered by their attribute name (as NiFi's TreeMap)."""
    named = sorted((("xmlns" if p is None else f"xmlns:{p}"), u) for p, u in nsmap.items())
    return [f' {name}="{_escape(uri)}"' for name, uri in named]


def serialize_split(element: etree._Element) -> bytes:
    """One split as NiFi's SplitXml writes it: an XML declaration, then the element with every
    namespace in scope declared on it; no comment nor processing instruction; text escaped with
    ``&apos;``/``&quot;`` too; an empty element as a start and an end tag."""
    parts: list[str] = []
    _write_element(element, element.nsmap, {}, parts)
    return XML_DECLARATION + "".join(parts).encode("utf-8")


def _write_element(element: etree._Element, nsmap: Mapping[str | None, str], declared: Mapping[str | None, str],
                   parts: list[str]) -> None:
    local = etree.QName(element).localname
    name = f"{element.prefix}:{local}" if element.prefix else local
    own = {p: u for p, u in element.nsmap.items() if declared.get(p) != u}
    parts.append("<" + name)
    for key, value in element.attrib.items():
        parts.append(f' {_attribute_name(key, nsmap)}="{_escape(value)}"')
    parts.extend(_declarations(own))
    parts.append(">" + _escape(element.text))
    for child in element:
        if isinstance(child.tag, str):
            _write_element(child, child.nsmap, element.nsmap, parts)
        parts.append(_escape(child.tail))   # a comment's or processing instruction's tail text stays
    parts.append(f"</{name}>")


def iter_splits(stream: BinaryIO, depth: int) -> Iterator[bytes]:
    """The serialized elements at ``depth`` + 1 (1: the root's children), streamed
    (``split_elements``). ``XmlError`` (one line) for content that is not XML or has a DOCTYPE
    (never allowed here, as NiFi's SplitXml)."""
    return (serialize_split(element) for element in split_elements(stream, depth))


def split_elements(stream: BinaryIO, depth: int) -> Iterator[etree._Element]:
    """The elements at ``depth`` + 1, each yielded when it ends, then cleared; an element's elder
    siblings are deleted when it ends: the tree lxml's iterparse builds holds the split being read,
    the elements above it and at most one emptied element before each, never the whole document."""
    level = 0
    events = etree.iterparse(stream, events=("start", "end"), resolve_entities=False, no_network=True,
                             load_dtd=False, remove_comments=True, remove_pis=True)
    try:
        for event, element in events:
            if event == "start":
                if level == 0:
                    check_doctype(element.getroottree(), False)
                level += 1
                continue
            level -= 1
            if level > depth:
                continue   # inside a split: kept until the split is written
            if level == depth:
                yield element
            element.clear(keep_tail=False)   # written, or above the splits: drop it and its elder siblings
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]
    except etree.XMLSyntaxError as err:
        raise XmlError(f"the content is not valid XML: {reason(err)}") from None


class SplitXml(Processor):
    """Splits an XML document into one FlowFile per element at Split Depth (1: the root's children,
    2: their children...), **streamed** with lxml's iterparse: an element is written and dropped
    as soon as it ends, so a large document is never whole in memory.

    Each split is an XML declaration then the element (``serialize_split``): the namespaces in
    scope declared on it, as NiFi's; a namespace declared inside the split stays where it was
    declared (NiFi's writes those only when they are in scope at the split element, leaving a
    prefix declared deeper unbound); comments and processing instructions are left out, as
    NiFi's. Splits get fragment.identifier, fragment.index (0-based, as NiFi's SplitXml),
    fragment.count and segment.original.filename; the original goes to original with
    fragment.identifier and fragment.count. Content that is not XML or has a DOCTYPE goes to
    failure unchanged (no split is kept), with ``flowactors.failure.reason``. Provenance: a FORK
    event from the original to its splits.
    """

    description = "Splits XML into one FlowFile per element at a depth (streamed)"
    properties = (
        PropertyDescriptor("Split Depth", "The depth of the elements split out: 1 the root's children, 2 their "
                           "children, and so on", required=True, default="1", validator=validators.POSITIVE_INTEGER),
    )
    ORIGINAL = Relationship("original", "The original FlowFile, once split")
    SPLIT = Relationship("split", "The split FlowFiles")
    relationships = (ORIGINAL, SPLIT, FAILURE)
    NIFI_TYPE = _STANDARD + "SplitXml"

    def on_trigger(self, context: ProcessContext, session) -> None:
        depth = context.property("Split Depth").as_int()
        for flowfile in session.get_batch(min(context.batch_size, SPLIT_PARENTS_PER_TRIGGER)):
            children: list[FlowFile] = []
            try:
                with session.read(flowfile) as stream:
                    for data in iter_splits(stream, depth):
                        children.append(session.write_bytes(session.create(parent=flowfile), data))
            except ContentRepositoryFullError:
                raise
            except (XmlError, ContentRepositoryError, OSError) as err:
                for child in children:
                    session.remove(child)
                route_failure(context, session, flowfile, reason(err))
                continue
            self._route(session, flowfile, children)

    def _route(self, session, flowfile: FlowFile, children: list[FlowFile]) -> None:
        identifier = str(uuid_module.uuid4())
        count = str(len(children))
        shared = {"fragment.identifier": identifier, "fragment.count": count,
                  "segment.original.filename": flowfile.attributes.get("filename", "")}
        for index, child in enumerate(children):
            session.transfer(session.put_all_attributes(child, {**shared, "fragment.index": str(index)}), self.SPLIT)
        if children:
            session.provenance.fork(flowfile, children)
        session.transfer(session.put_all_attributes(flowfile, {"fragment.identifier": identifier,
                                                               "fragment.count": count}), self.ORIGINAL)
