"""EvaluateXPath, SplitXml and TransformXml: NiFi's TestEvaluateXPath, TestSplitXml and
TestTransformXml cases (on documents written here, shaped as NiFi's), on the in-process and
stateless engines."""

from __future__ import annotations

import io

import pytest
from lxml import etree

from flowactors.processors import EvaluateXPath, SplitXml, TransformXml
from flowactors.processors.xml import split_elements, xpath_1
from flowactors.processors.xml_transform import StylesheetCache
from flowactors.services.lookup import SimpleKeyValueLookupService
from flowactors.testing import ProcessorRunner
from repositories.provenance.event import ProvenanceEventType as T

#: NiFi's xml-snippet.xml: a bundle (in a namespace, read with *:bundle) of two subNodes
SNIPPET = b"""<?xml version="1.0" encoding="UTF-8"?>
<bundle xmlns="http://example.com/bundle">
    <node>
        <subNode>
            <value>Hello</value>
        </subNode>
        <subNode>
            <value>World!</value>
        </subNode>
    </node>
</bundle>"""
EMBEDDED_DOCTYPE = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE bundle [<!ELEMENT bundle (node)><!ENTITY greeting "Hello">]>
<bundle><node><subNode><value>&greeting;</value></subNode></node></bundle>"""
EXTERNAL_DOCTYPE = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE bundle SYSTEM "non-existent-doctype.dtd">
<bundle><node><subNode><value>Hello</value></subNode></node></bundle>"""
XXE = b"""<!DOCTYPE doc [<!ENTITY secret SYSTEM "file:///etc/passwd">]><bundle><node><subNode><value>&secret;</value>
</subNode></node></bundle>"""


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def evaluate(content: bytes, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(EvaluateXPath, properties)
    runner.enqueue(content)
    runner.run()
    assert runner.input_count == 0
    return runner


# ---------------------------------------------------------------------------------- EvaluateXPath
def test_strings_into_attributes():                                                  # testAsAttribute
    runner = evaluate(SNIPPET, **{"Destination": "flowfile-attribute", "xpath.result1": "/",
                                  "xpath.result2": "/*:bundle/*:node/*:subNode/*:value/text()"})
    [out] = runner.output("matched")
    assert out.attributes["xpath.result2"] == "Hello"
    assert "Hello" in out.attributes["xpath.result1"] and "World!" in out.attributes["xpath.result1"]


def test_booleans_say_whether_an_element_exists():                                  # testCheckIfElementExists
    runner = evaluate(SNIPPET, **{"Destination": "flowfile-attribute", "exist.1": "boolean(/*:bundle/*:node)",
                                  "exist.2": "boolean(/*:bundle/*:node2)", "count": "count(//*:subNode)"})
    [out] = runner.output("matched")
    assert (out.attributes["exist.1"], out.attributes["exist.2"], out.attributes["count"]) == ("true", "false", "2")


def test_a_nodeset_that_finds_nothing_is_unmatched_and_unchanged():                 # testUnmatched
    runner = evaluate(SNIPPET, **{"exist.2": "/*:bundle/*:node2"})
    assert runner.contents("unmatched") == [SNIPPET]


def test_only_one_xpath_may_write_the_content():                                   # testMultipleXPathForContent
    problems = EvaluateXPath.validate_properties({"a": "/*:bundle/*:node/*:subNode[1]",
                                                  "b": "/*:bundle/*:node/*:subNode[2]"})
    assert problems == ["exactly one XPath (dynamic property) must be set with Destination flowfile-content, not 2"]


def test_an_invalid_xpath_is_refused_with_one_line():
    [problem] = EvaluateXPath.validate_properties({"Destination": "flowfile-attribute", "bad": "/a[["})
    assert problem.startswith("property 'bad': '/a[[' is not an XPath 1.0 expression") and "\n" not in problem


def test_a_node_replaces_the_content_as_xml():                                      # testWriteToContent
    runner = evaluate(SNIPPET, **{"some.property": "/*:bundle/*:node/*:subNode[1]"})
    [out] = runner.contents("matched")
    assert out.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    element = etree.fromstring(out)
    assert etree.QName(element).localname == "subNode" and "".join(element.itertext()).strip() == "Hello"
    runner = evaluate(b"<a><b x='1'>t<c/></b><b/></a>", **{"p": "/a/b[1]"})
    assert runner.contents("matched") == [b'<?xml version="1.0" encoding="UTF-8"?><b x="1">t<c/></b>']


def test_several_nodes_for_a_nodeset_is_a_failure():                                # testFailureIfContentMatchesMultipleNodes
    runner = evaluate(SNIPPET, **{"some.property": "/*:bundle/*:node/*:subNode"})
    [out] = runner.output("failure")
    assert "found 2 nodes, not one" in out.attributes["flowactors.failure.reason"]
    assert runner.read(out) == SNIPPET


def test_a_string_replaces_the_content():                                           # testWriteStringToContent
    runner = evaluate(SNIPPET, **{"Return Type": "string", "p": "/*:bundle/*:node/*:subNode[1]/*:value/text()"})
    assert runner.contents("matched") == [b"Hello"]


def test_a_node_into_an_attribute():                                                # testWriteNodeSetToAttribute
    runner = evaluate(SNIPPET, **{"Destination": "flowfile-attribute", "Return Type": "nodeset",
                                  "p": "/*:bundle/*:node/*:subNode[1]"})
    [out] = runner.output("matched")
    assert "subNode" in out.attributes["p"] and "Hello" in out.attributes["p"]


def test_a_number_is_no_node_set():
    runner = evaluate(SNIPPET, **{"Return Type": "nodeset", "p": "count(//*:subNode)"})
    [out] = runner.output("failure")
    assert "not a node set: set Return Type to string" in out.attributes["flowactors.failure.reason"]


@pytest.mark.parametrize("allow, content, relationship", [
    ("true", EMBEDDED_DOCTYPE, "matched"),          # testSuccessForEmbeddedDocTypeValidation (entity expanded)
    ("false", EMBEDDED_DOCTYPE, "failure"),         # testFailureForEmbeddedDocTypeValidationDisabled
    ("false", EXTERNAL_DOCTYPE, "failure"),         # testFailureForExternalDocTypeWithDocTypeValidationDisabled
    ("true", XXE, "failure"),                       # an external entity is never resolved
])
def test_allow_dtd(allow, content, relationship):
    runner = evaluate(content, **{"Return Type": "string", "Allow DTD": allow,
                                  "p": "/*:bundle/*:node/*:subNode[1]/*:value/text()"})
    [out] = runner.output(relationship)
    if relationship == "matched":
        assert runner.read(out) == b"Hello"
    else:
        assert runner.read(out) == content and out.attributes["flowactors.failure.reason"]


def test_content_that_is_not_xml_goes_to_failure_with_a_reason():
    runner = evaluate(b"not xml", **{"p": "/a"})
    [out] = runner.output("failure")
    assert out.attributes["flowactors.failure.reason"].startswith("the content is not valid XML")


def test_xpath_2_any_namespace_is_rewritten_outside_literals():
    assert xpath_1("/*:a/b[@c='*:d']//*:e") == "/*[local-name()='a']/b[@c='*:d']//*[local-name()='e']"


# ---------------------------------------------------------------------------------- SplitXml
def bundle(nodes: int = 6) -> bytes:
    """Shaped as NiFi's xml-bundle-1: nodes at depth 1, two subNodes each, a value in each."""
    body = "".join(f"<node id='{n}'><!-- c --><subNode><value>{n}a</value></subNode>"
                   f"<subNode><value>{n}b &amp; more</value></subNode></node>" for n in range(nodes))
    return f'<?xml version="1.0"?>\n<bundle>{body}</bundle>'.encode()


def split(content: bytes, depth: str = "1", filename: str = "test.xml") -> ProcessorRunner:
    runner = ProcessorRunner(SplitXml, {"Split Depth": depth})
    runner.enqueue(content, {"filename": filename})
    runner.run()
    return runner


@pytest.mark.parametrize("depth, count", [("1", 6), ("2", 12), ("3", 12)])  # testDepthOf1/2/3
def test_split_depth_and_fragment_attributes(depth, count):
    runner = split(bundle(), depth)
    [original] = runner.output("original")
    assert original.attributes["fragment.count"] == str(count)
    splits = runner.output("split")
    assert len(splits) == count
    for index, flowfile in enumerate(splits):
        a = flowfile.attributes
        assert a["fragment.index"] == str(index) and a["fragment.count"] == str(count)   # 0-based, as NiFi
        assert a["fragment.identifier"] == original.attributes["fragment.identifier"]
        assert a["segment.original.filename"] == "test.xml"
        etree.fromstring(runner.read(flowfile))   # each split is a document
    [fork] = [e for e in runner.events() if e.event_type == T.FORK]
    assert sorted(fork.child_uuids) == sorted(f.uuid for f in splits)


def test_a_split_is_written_as_nifi_writes_it():
    runner = split(bundle(1), "1")
    assert runner.contents("split") == [
        b'<?xml version="1.0" encoding="UTF-8"?><node id="0"><subNode><value>0a</value></subNode>'
        b'<subNode><value>0b &amp; more</value></subNode></node>']


def test_namespaces_in_scope_are_declared_on_each_split():                          # testNamespaceDeclarations
    document = b"""<bundle xmlns:foo="http://namespace/1">
    <node>
        <foo:subNode1 attribute="d&amp;b">
            <value>Hello &amp; Goodbye</value>
        </foo:subNode1>
        <foo:subNode2 xmlns:goo="http://namespace/2">
            <goo:value>World</goo:value>
        </foo:subNode2>
    </node>
</bundle>"""
    runner = split(document, "3")
    assert runner.contents("split") == [   # byte for byte NiFi's namespaceSplit1.xml and namespaceSplit2.xml
        b'<?xml version="1.0" encoding="UTF-8"?><value xmlns:foo="http://namespace/1">Hello &amp; Goodbye</value>',
        b'<?xml version="1.0" encoding="UTF-8"?><goo:value xmlns:foo="http://namespace/1" '
        b'xmlns:goo="http://namespace/2">World</goo:value>']


def test_a_namespace_declared_inside_a_split_stays_where_it_was_declared():
    runner = split(b'<r><a x="1"><p:b xmlns:p="urn:p" p:c="2"/></a></r>', "1")
    [data] = runner.contents("split")
    assert data == b'<?xml version="1.0" encoding="UTF-8"?><a x="1"><p:b p:c="2" xmlns:p="urn:p"></p:b></a>'
    assert etree.fromstring(data)[0].get("{urn:p}c") == "2"


@pytest.mark.parametrize("content, message", [
    (b"<a><b></a>", "the content is not valid XML"),
    (b'<!DOCTYPE a [<!ENTITY x "y">]><a><b>&x;</b></a>', "DOCTYPE"),
])
def test_split_failure_keeps_no_split(content, message):
    runner = split(content)
    [out] = runner.output("failure")
    assert message in out.attributes["flowactors.failure.reason"] and runner.read(out) == content
    assert runner.output("split") == [] and runner.output("original") == []


def test_split_depth_must_be_positive():                                            # testDepthOf0
    [problem] = SplitXml.validate_properties({"Split Depth": "0"})
    assert "Split Depth" in problem


def test_splits_are_streamed_dropped_once_written():
    """When a split is read, the tree iterparse built holds at most one emptied element before it and
    before each element above it: the earlier splits are gone (what follows it is the parser's
    read-ahead)."""
    seen = 0
    for element in split_elements(io.BytesIO(bundle(200)), 2):
        for current in (element, element.getparent()):
            siblings = list(current.getparent())
            before = siblings[:siblings.index(current)]
            assert len(before) <= 1 and all(len(e) == 0 and not e.text and not e.attrib for e in before)
        seen += 1
    assert seen == 400


# ---------------------------------------------------------------------------------- TransformXml
MATH_XSL = """<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
    <xsl:output method="html"/>
    <xsl:param name="header"/>
    <xsl:template match="doc">
        <HTML><H1><xsl:value-of select="$header"/></H1><HR/>
            <P>Should say "1": <xsl:value-of select="5 mod 2"/></P>
            <P>Should say "1": <xsl:value-of select="n1 mod n2"/></P>
            <P>Should say "-1": <xsl:value-of select="div mod mod"/></P>
            <P><xsl:value-of select="div or ((mod)) | or"/></P>
        </HTML>
    </xsl:template>
</xsl:stylesheet>"""
MATH_XML = b"<doc><n1>5</n1><n2>2</n2><div>-5</div><mod>2</mod></doc>"


def transform(content: bytes = MATH_XML, services=None, attributes=None, **properties) -> ProcessorRunner:
    runner = ProcessorRunner(TransformXml, properties, services=services)
    runner.enqueue(content, attributes)
    runner.run()
    return runner


def check_math(data: bytes) -> None:
    text = data.decode()
    assert "<H1>Test for mod</H1>" in text and 'Should say "-1": -1' in text and "<P>true</P>" in text
    assert text.count('Should say "1": 1') == 2


def test_transform_a_file_with_a_parameter(tmp_path):                               # testTransformMath
    path = tmp_path / "math.xsl"
    path.write_text(MATH_XSL)
    runner = transform(**{"XSLT Document": str(path), "header": "Test for mod"})
    [out] = runner.contents("success")
    check_math(out)


def test_the_document_is_an_expression_and_may_be_the_xslt_itself(tmp_path):        # testTransformExpressionLanguage
    path = tmp_path / "math.xsl"
    path.write_text(MATH_XSL)
    runner = transform(attributes={"xslt.path": str(path)}, **{"XSLT Document": "${xslt.path}", "header": "Test for mod",
                                                               "Cache Size": "0"})   # testTransformNoCache
    check_math(runner.contents("success")[0])
    check_math(transform(**{"XSLT Document": MATH_XSL, "header": "Test for mod"}).contents("success")[0])


@pytest.mark.parametrize("cache_size", ["10", "0"])                      # testTransformWithController(NoCache)
def test_the_stylesheet_from_a_lookup(cache_size):
    services = {"lookup": (SimpleKeyValueLookupService, {"math": MATH_XSL})}
    properties = {"XSLT Lookup": "lookup", "XSLT Lookup Key": "${xslt}", "header": "Test for mod",
                  "Cache Size": cache_size}
    runner = transform(services=services, attributes={"xslt": "math"}, **properties)
    check_math(runner.contents("success")[0])
    runner = transform(services=services, attributes={"xslt": "nothing"}, **properties)   # ...XsltNotFoundInController
    [out] = runner.output("failure")
    assert "no stylesheet under key 'nothing'" in out.attributes["flowactors.failure.reason"]


@pytest.mark.parametrize("properties, problem", [
    ({"XSLT Document": MATH_XSL, "XSLT Lookup": "lookup", "XSLT Lookup Key": "k"},   # ...BothControllerFileNotValid
     "exactly one of XSLT Document and XSLT Lookup must be set"),
    ({"Cache Size": "0"}, "exactly one of XSLT Document and XSLT Lookup must be set"),  # ...NoneControllerFile
    ({"XSLT Lookup": "lookup"}, "XSLT Lookup Key must be set with XSLT Lookup"),        # testTransformControllerNoKey
    ({"XSLT Document": MATH_XSL.replace('version="1.0"', 'version="2.0"')},
     "the stylesheet declares XSLT version 2.0: flowactors runs XSLT 1.0"),
    ({"XSLT Document": MATH_XSL.replace("</xsl:template>", "</xsl:templat>")}, "the stylesheet is not valid XML"),
    ({"XSLT Document": "no/such/file.xsl"}, "is neither a readable file nor a stylesheet"),
    ({"XSLT Document": MATH_XSL, "a:b": "x"}, "dynamic property 'a:b' is not an XSLT parameter name"),
])
def test_configuration_problems(properties, problem):
    problems = TransformXml.validate_properties(properties)
    assert len(problems) == 1 and problem in problems[0]


def test_content_that_is_not_xml_goes_to_failure_unchanged():                       # testNonXmlContent
    runner = transform(b"not xml", **{"XSLT Document": MATH_XSL})
    [out] = runner.output("failure")
    assert runner.read(out) == b"not xml" and "not valid XML" in out.attributes["flowactors.failure.reason"]


DOC_NODE = """<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"
    xmlns:xs="http://www.w3.org/2001/XMLSchema"><xsl:template match="doc"><doc><xsl:value-of select="node()"/></doc>
    </xsl:template></xsl:stylesheet>"""


def test_secure_processing_reads_a_doctype_but_no_external_entity():
    runner = transform(b'<!DOCTYPE doc SYSTEM "doc.dtd"><doc></doc>', **{"XSLT Document": DOC_NODE, "Indent": "false"})
    assert runner.contents("success") == [b'<?xml version="1.0" encoding="UTF-8"?>\n'
                                          b'<doc xmlns:xs="http://www.w3.org/2001/XMLSchema"/>']
    runner = transform(b'<!DOCTYPE doc [<!ENTITY uri SYSTEM "http://127.0.0.1" >]><doc>&uri;</doc>',
                       **{"XSLT Document": DOC_NODE, "Indent": "false"})                 # ...XmlWithEntity
    assert len(runner.output("failure")) == 1


def test_a_stylesheet_entity_is_never_fetched():                                    # ...XslWithEntity
    xsl = ("<!DOCTYPE stylesheet [<!ENTITY % uri SYSTEM 'http://127.0.0.1'> %uri;]>"
           '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"/>')
    runner = transform(b"<doc>text</doc>", **{"XSLT Document": xsl, "Indent": "false"})
    # the built-in templates copy the text
    assert runner.contents("success") == [b'<?xml version="1.0" encoding="UTF-8"?>\ntext']


def test_message_terminate_fails_and_a_message_alone_does_not():                    # testMessageTerminate / NonTerminate
    template = ('<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
                '<xsl:template match="/"><xsl:message terminate="{0}">stop here</xsl:message><r/></xsl:template>'
                '</xsl:stylesheet>')
    runner = transform(**{"XSLT Document": template.format("yes")})
    [out] = runner.output("failure")
    assert "stop here" in out.attributes["flowactors.failure.reason"]
    assert transform(**{"XSLT Document": template.format("no")}).contents("success") == [
        b'<?xml version="1.0" encoding="UTF-8"?>\n<r/>\n']


def test_parameters_declared_or_not():                                 # testParameterDeclaredAndSet / SetButNotDeclared
    xsl = ('<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
           "<xsl:param name=\"customParam\" select=\"'From XSLT'\"/><xsl:template match=\"/\">"
           '<root><message>Value Selected: <xsl:value-of select="$customParam"/></message></root>'
           "</xsl:template></xsl:stylesheet>")
    runner = transform(b"<data/>", **{"XSLT Document": xsl, "customParam": "it's \"NiFi\""})
    assert runner.contents("success") == [b'<?xml version="1.0" encoding="UTF-8"?>\n<root>\n  <message>'
                                          b"Value Selected: it's \"NiFi\"</message>\n</root>\n"]
    runner = transform(b"<data/>", **{"XSLT Document": xsl, "undeclared": "x"})
    assert b"Value Selected: From XSLT" in runner.contents("success")[0]


def test_a_parameter_used_but_not_declared():                                   # testParameterNotDeclaredButUsedInXslt
    """NiFi's Saxon refuses the stylesheet (failure); libxslt takes the dynamic property as a global
    variable (a documented difference), and without one the undefined variable is a failure."""
    xsl = ('<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"><xsl:template match="/">'
           '<root><message>Value Selected: <xsl:value-of select="$customParam"/></message></root>'
           "</xsl:template></xsl:stylesheet>")
    runner = transform(b"<data/>", **{"XSLT Document": xsl, "customParam": "From NIFI"})
    assert b"Value Selected: From NIFI" in runner.contents("success")[0]
    [out] = transform(b"<data/>", **{"XSLT Document": xsl}).output("failure")
    failure = out.attributes["flowactors.failure.reason"]   # the cause, not only libxslt's last line
    assert failure.startswith("XSLT transform failed") and "Variable 'customParam' has not been declared" in failure


def test_the_cache_keeps_stylesheets_for_their_duration_after_last_use():
    now = [0.0]
    cache = StylesheetCache(2, 60, clock=lambda: now[0])
    build = object
    first = cache.get(("text", "a"), build)
    now[0] = 59
    assert cache.get(("text", "a"), build) is first and cache.compiled == 1
    now[0] = 118
    assert cache.get(("text", "a"), build) is first          # 60 s after its last use, not its first
    now[0] = 180
    assert cache.get(("text", "a"), build) is not first and cache.compiled == 2
    cache.get(("text", "b"), build)
    cache.get(("text", "c"), build)                           # size 2: "a", the least recently used, goes
    cache.get(("text", "a"), build)
    assert cache.compiled == 5
    uncached = StylesheetCache(0, 60, clock=lambda: now[0])
    uncached.get(("text", "a"), build)
    uncached.get(("text", "a"), build)
    assert uncached.compiled == 2


def test_includes_are_read_beside_the_file_and_document_only_without_secure_processing(tmp_path):
    (tmp_path / "part.xsl").write_text('<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
                                       '<xsl:template match="/"><included><xsl:value-of select="document(\'data.xml\')"/>'
                                       '</included></xsl:template></xsl:stylesheet>')
    (tmp_path / "data.xml").write_text("<secret>42</secret>")
    main = tmp_path / "main.xsl"
    main.write_text('<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
                    '<xsl:include href="part.xsl"/></xsl:stylesheet>')
    runner = transform(b"<doc/>", **{"XSLT Document": str(main), "Secure Processing": "false", "Indent": "false"})
    assert runner.contents("success") == [b'<?xml version="1.0" encoding="UTF-8"?>\n<included>42</included>']
    runner = transform(b"<doc/>", **{"XSLT Document": str(main), "Indent": "false"})
    [out] = runner.output("failure")   # the include is read (the flow's own file), document() is refused
    assert out.attributes["flowactors.failure.reason"].startswith("XSLT transform failed")
