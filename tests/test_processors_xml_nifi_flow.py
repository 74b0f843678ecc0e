"""A NiFi flow of the content and XML processors, as NiFi's "Download flow definition" writes it
(internal and NiFi 1.x property names, defaults included), imported and run on the in-process
engine: GetFile -> IdentifyMimeType -> SplitXml -> EvaluateXPath -> TransformXml -> ModifyBytes
-> SegmentContent -> UpdateAttribute -> PutFile, the failures into a second folder."""

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.testing import ProcessorRunner
from flowactors.processors import (EvaluateXPath, IdentifyMimeType, ModifyBytes, SegmentContent, SplitXml,
                                   TransformXml)
from nifi_flows import STANDARD, connection, group, processor, snapshot

ORDERS = b"""<?xml version="1.0" encoding="UTF-8"?>
<orders xmlns:o="urn:orders">
  <o:order id="7"><customer>Ann</customer><item price="2.5"/><item price="4"/></o:order>
  <o:order id="8"><customer>Bob &amp; Co</customer><item price="10"/></o:order>
</orders>"""
TO_CSV = """<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform" xmlns:o="urn:orders">
  <xsl:output method="text"/>
  <xsl:param name="currency"/>
  <xsl:template match="/o:order"><xsl:value-of select="concat(@id, ',', customer, ',', sum(item/@price), ' ',
    $currency)"/><xsl:text>&#10;</xsl:text></xsl:template>
</xsl:stylesheet>"""


def definition(source, out, refused) -> dict:
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    identify = processor(root, "identify", STANDARD + "IdentifyMimeType", {
        "use-filename-in-detection": "true", "config-strategy": "Preset", "Custom MIME Configuration": None})
    split = processor(root, "split", STANDARD + "SplitXml", {"Split Depth": "1"}, auto_terminate=("original",))
    evaluate = processor(root, "evaluate", STANDARD + "EvaluateXPath", {
        "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Validate DTD": "false",
        "order.id": "/*:order/@id", "order.items": "count(/*:order/item)"})
    transform = processor(root, "transform", STANDARD + "TransformXml", {
        "XSLT file name": TO_CSV, "xslt-controller": None, "xslt-controller-key": None, "indent-output": "true",
        "secure-processing": "true", "cache-size": "10", "cache-ttl-after-last-access": "60 secs",
        "currency": "${filename:substringBefore('.'):toUpper()}"})
    trim = processor(root, "trim", STANDARD + "ModifyBytes", {
        "Start Offset": "0 B", "End Offset": "1 B", "Remove All Content": "false"})
    segment = processor(root, "segment", STANDARD + "SegmentContent", {"Segment Size": "8 B"},
                        auto_terminate=("original",))
    rename = processor(root, "rename", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Delete Attributes Expression": None, "Store State": "Do not store state",
        "Stateful Variables Initial Value": None, "Cache Value Lookup Cache Size": "100",
        "filename": "order-${order.id}-${order.items}-${fragment.index}.part"})
    store = processor(root, "store", STANDARD + "PutFile", {"Directory": str(out)},
                      auto_terminate=("success", "failure"))
    fail = processor(root, "refused", STANDARD + "PutFile", {"Directory": str(refused)},
                     auto_terminate=("success", "failure"))
    steps = [(get, identify, "success"), (identify, split, "success"), (split, evaluate, "split"),
             (evaluate, transform, "matched"), (transform, trim, "success"), (trim, segment, "success"),
             (segment, rename, "segments"), (rename, store, "success")]
    links = [connection(root, a, b, (r,)) for a, b, r in steps]
    links += [connection(root, split, fail, ("failure",)), connection(root, evaluate, fail, ("unmatched", "failure")),
              connection(root, transform, fail, ("failure",))]
    processors = [get, identify, split, evaluate, transform, trim, segment, rename, store, fail]
    return snapshot(group(root, "xml", None, None, processors=processors, connections=links), {})


def test_a_nifi_content_and_xml_flow_imports_with_nifi_names_and_runs(tmp_path, monkeypatch):
    source, out, refused = (tmp_path / name for name in ("in", "out", "refused"))
    for folder in (source, out, refused):
        folder.mkdir()
    (source / "orders.xml").write_bytes(ORDERS)
    (source / "broken.xml").write_bytes(b"<orders><o:order>")
    flow = flow_from_nifi(definition(source, out, refused))
    kinds = {name: node.type for name, node in flow.processors.items()}
    assert [kinds[n] for n in ("identify", "split", "evaluate", "transform", "trim", "segment")] == \
        [IdentifyMimeType, SplitXml, EvaluateXPath, TransformXml, ModifyBytes, SegmentContent]
    assert flow.processors["evaluate"].properties["Allow DTD"] == "false"
    assert flow.processors["transform"].properties["XSLT Document"] == TO_CSV
    assert flow.processors["identify"].properties["Config Strategy"] == "Preset"
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"] in ("store", "refused")) >= 6
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=120, until=stored)
    assert not final.get("timed_out"), final
    parts = {path.name: path.read_bytes() for path in out.iterdir()}
    # "7,Ann,6.5 ORDERS" and "8,Bob & Co,10 ORDERS", the newline trimmed, in segments of 8 bytes
    assert parts == {"order-7-2-1.part": b"7,Ann,6.", "order-7-2-2.part": b"5 ORDERS",
                     "order-8-1-1.part": b"8,Bob & ", "order-8-1-2.part": b"Co,10 OR", "order-8-1-3.part": b"DERS"}
    # content that is not XML: unchanged, nothing lost
    assert {path.name: path.read_bytes() for path in refused.iterdir()} == {"broken.xml": b"<orders><o:order>"}


def test_a_nifi_1_custom_mime_configuration_without_a_strategy_is_used_as_replace_not_ignored(tmp_path):
    """NiFi sets Config Strategy Replace when it loads a flow from before NiFi 2 with config-body;
    flowactors reads it so too (it refused it before), never silently using the preset."""
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(tmp_path)})
    identify = processor(root, "identify", STANDARD + "IdentifyMimeType", {
        "use-filename-in-detection": "true", "config-file": None,
        "config-body": "<mime-info><mime-type type='a/b'><glob pattern='*.ab'/></mime-type></mime-info>"},
        auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group(root, "mime", None, None, processors=[get, identify],
                                         connections=[connection(root, get, identify, ("success",))]), {}))
    assert flow.processors["identify"].properties["Custom MIME Configuration"].startswith("<mime-info>")
    assert [p for p in flow.problems() if "identify" in p] == []
    runner = ProcessorRunner(IdentifyMimeType, flow.processors["identify"].properties)
    runner.enqueue(b"\x89PNG\x0d\x0a\x1a\x0a", {"filename": "x.ab"})
    runner.run()
    [out] = runner.output("success")
    assert out.attributes["mime.type"] == "a/b"   # the custom table alone: the preset's PNG magic is not there
