"""Every processor and service of the JSON, Jolt, flow-control, map-cache, scripting, content and XML
families in one flow shaped as NiFi exports it, imported and run on real Ray (their behaviour is
tested on the in-process and stateless engines in their own modules; this is the one run where
they share executors, the map cache server is an actor of its own and the services reach it).

Three branches, each from a GetFile:

* JSON: ValidateJson -> EvaluateJsonPath (the customer into an attribute) -> SplitJson; each
  order -> JoltTransformJSON -> FlattenJson -> AttributesToJSON -> AttributesToCSV -> LogMessage ->
  DuplicateFlowFile -> DetectDuplicate (the copy is a duplicate) -> Notify -> PutFile; the whole
  document -> Wait, released once both orders notified -> PutFile.
* content and XML: IdentifyMimeType -> EvaluateXPath -> SplitXml -> TransformXml ->
  ExecuteStreamCommand (tr) -> ExecuteScript -> InvokeScriptedProcessor -> ModifyBytes ->
  SegmentContent -> RetryFlowFile -> ControlRate -> MonitorActivity -> UpdateAttribute ->
  DistributeLoad -> two PutFiles.
* records: LookupRecord through a ScriptedLookupService -> PutFile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.driver.running import run_flow
from nifi_flows import STANDARD, connection, group, processor, service, snapshot, uses

pytestmark = pytest.mark.ray

ROOT = "root"
UPDATE_ATTRIBUTE = "org.apache.nifi.processors.attributes.UpdateAttribute"
SCRIPT = "org.apache.nifi.processors.script."
ORDERS = {"customer": "ada", "orders": [{"id": 1, "item": "pen", "qty": 2}, {"id": 2, "item": "ink", "qty": 5}]}
SCHEMA = {"type": "object", "required": ["customer", "orders"],
          "properties": {"customer": {"type": "string"}, "orders": {"type": "array"}}}
SHIFT = [{"operation": "shift", "spec": {"id": "order.id", "item": "order.product", "qty": "order.quantity"}}]
CATALOG = '<catalog name="books"><book id="1"><title>Dune</title></book><book id="2"><title>Emma</title></book></catalog>'
TITLES = """<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output method="text"/>
  <xsl:template match="/"><xsl:value-of select="//title"/></xsl:template>
</xsl:stylesheet>"""
MARK = """
flowFile = session.get()
if flowFile is not None:
    flowFile = session.putAttribute(flowFile, "scripted", "yes")
    session.transfer(flowFile, REL_SUCCESS)
"""
INVOKED = """
from org.apache.nifi.processor import Processor, Relationship

class Stamp(Processor):
    success = Relationship.Builder().name("success").description("stamped").build()

    def initialize(self, context):
        pass

    def getRelationships(self):
        return set([self.success])

    def getPropertyDescriptors(self):
        return []

    def onTrigger(self, context, sessionFactory):
        session = sessionFactory.createSession()
        flowFile = session.get()
        if flowFile is None:
            return
        session.transfer(session.putAttribute(flowFile, "invoked", "yes"), self.success)
        session.commitAsync()

processor = Stamp()
"""
LOOKUP = """
class Answers(object):
    def lookup(self, coordinates):
        return {"Hello": "Hi"}.get(coordinates["key"])

    def getRequiredKeys(self):
        return set(["key"])

lookupService = Answers()
"""


def put(name: str, folder: Path) -> dict:
    return processor(ROOT, name, STANDARD + "PutFile", {"Directory": str(folder)}, auto_terminate=("success", "failure"))


def definition(inputs: Path, out: Path, stylesheet: Path) -> dict:
    get = {kind: processor(ROOT, f"get {kind}", STANDARD + "GetFile", {
        "Input Directory": str(inputs / kind), "Keep Source File": "false", "Minimum File Age": "0 sec"})
        for kind in ("json", "xml", "csv")}
    services = [
        service("cache-server", "org.apache.nifi.distributed.cache.server.map.DistributedMapCacheServer",
                {"Port": "4557", "Maximum Cache Entries": "100", "Eviction Strategy": "Least Recently Used"}),
        service("cache", "org.apache.nifi.distributed.cache.client.DistributedMapCacheClientService",
                {"Server Hostname": "localhost", "Server Port": "4557"}),
        service("answers", "org.apache.nifi.lookup.script.ScriptedLookupService",
                {"Script Engine": "python", "Script Body": LOOKUP}),
        service("csv", "org.apache.nifi.csv.CSVReader", {"Treat First Line as Header": "true"}),
        service("json", "org.apache.nifi.json.JsonRecordSetWriter", {}),
    ]
    p = {
        "validate": processor(ROOT, "validate", STANDARD + "ValidateJson", {"JSON Schema": json.dumps(SCHEMA)},
                              auto_terminate=("invalid", "failure")),
        "customer": processor(ROOT, "customer", STANDARD + "EvaluateJsonPath", {
            "Destination": "flowfile-attribute", "customer": "$.customer"}, auto_terminate=("unmatched", "failure")),
        "split": processor(ROOT, "split", STANDARD + "SplitJson", {"JsonPath Expression": "$.orders"},
                           auto_terminate=("failure",)),
        "reshape": processor(ROOT, "reshape", "org.apache.nifi.processors.jolt.JoltTransformJSON", {
            "Jolt Transform": "jolt-transform-chain", "Jolt Specification": json.dumps(SHIFT)},
            auto_terminate=("failure",)),
        "flatten": processor(ROOT, "flatten", STANDARD + "FlattenJson", {"Flatten Mode": "normal"},
                             auto_terminate=("failure",)),
        "as json": processor(ROOT, "as json", STANDARD + "AttributesToJSON", {
            "Attributes List": "customer,fragment.index", "Include Core Attributes": "false"},
            auto_terminate=("failure",)),
        "as csv": processor(ROOT, "as csv", STANDARD + "AttributesToCSV", {
            "Attribute List": "customer", "Include Core Attributes": "false"}, auto_terminate=("failure",)),
        "log": processor(ROOT, "log", STANDARD + "LogMessage", {"Log Message": "order ${fragment.index}"}),
        "copy": processor(ROOT, "copy", STANDARD + "DuplicateFlowFile", {"Number of Copies": "1"}),
        "dedupe": uses(processor(ROOT, "dedupe", STANDARD + "DetectDuplicate", {
            "Cache Entry Identifier": "${customer}-${fragment.index}", "Distributed Cache Service": "cache"},
            auto_terminate=("duplicate", "failure")), "Distributed Cache Service"),
        "notify": uses(processor(ROOT, "notify", STANDARD + "Notify", {
            "Release Signal Identifier": "${customer}", "Distributed Cache Service": "cache"},
            auto_terminate=("failure",)), "Distributed Cache Service"),
        "name order": processor(ROOT, "name order", UPDATE_ATTRIBUTE, {"filename": "order-${fragment.index}.json"}),
        "wait": uses(processor(ROOT, "wait", STANDARD + "Wait", {
            "Release Signal Identifier": "${customer}", "Target Signal Count": "2", "Distributed Cache Service": "cache"},
            auto_terminate=("expired", "failure")), "Distributed Cache Service"),
        "mime": processor(ROOT, "mime", STANDARD + "IdentifyMimeType", {}),
        "xpath": processor(ROOT, "xpath", STANDARD + "EvaluateXPath", {
            "Destination": "flowfile-attribute", "Return Type": "string", "catalog": "/catalog/@name"},
            auto_terminate=("unmatched", "failure")),
        "split xml": processor(ROOT, "split xml", STANDARD + "SplitXml", {"Split Depth": "1"},
                               auto_terminate=("original", "failure")),
        "xslt": processor(ROOT, "xslt", STANDARD + "TransformXml", {"XSLT file name": str(stylesheet)},
                          auto_terminate=("failure",)),
        "upper": processor(ROOT, "upper", STANDARD + "ExecuteStreamCommand", {
            "Command Path": "tr", "Command Arguments": "a-z;A-Z"}, auto_terminate=("original", "nonzero status")),
        "script": processor(ROOT, "script", SCRIPT + "ExecuteScript", {"Script Engine": "python", "Script Body": MARK},
                            auto_terminate=("failure",)),
        "invoke": processor(ROOT, "invoke", SCRIPT + "InvokeScriptedProcessor", {
            "Script Engine": "python", "Script Body": INVOKED}),
        "trim": processor(ROOT, "trim", STANDARD + "ModifyBytes", {"Start Offset": "1 B"}),
        "segment": processor(ROOT, "segment", STANDARD + "SegmentContent", {"Segment Size": "2 B"},
                             auto_terminate=("original",)),
        "retry": processor(ROOT, "retry", STANDARD + "RetryFlowFile", {"Maximum Retries": "3", "Penalize Retries": "false"},
                           auto_terminate=("retries_exceeded", "failure")),
        "rate": processor(ROOT, "rate", STANDARD + "ControlRate", {
            "Rate Control Criteria": "flowfile count", "Maximum Rate": "1000", "Time Duration": "1 min"},
            auto_terminate=("failure",)),
        "monitor": processor(ROOT, "monitor", STANDARD + "MonitorActivity", {"Threshold Duration": "1 hour"},
                             auto_terminate=("inactive", "activity.restored")),
        "name segment": processor(ROOT, "name segment", UPDATE_ATTRIBUTE,
                                  {"filename": "${catalog}-${segment.original.filename}-${uuid}"}),
        "spread": processor(ROOT, "spread", STANDARD + "DistributeLoad", {"Number of Relationships": "2"}),
        "lookup": uses(processor(ROOT, "lookup", STANDARD + "LookupRecord", {
            "Record Reader": "csv", "Record Writer": "json", "Lookup Service": "answers",
            "Result RecordPath": "/answer", "key": "/word"}, auto_terminate=("failure",)),
            "Record Reader", "Record Writer", "Lookup Service"),
        "put orders": put("put orders", out / "orders"), "put released": put("put released", out / "released"),
        "put one": put("put one", out / "segments"), "put two": put("put two", out / "segments"),
        "put answers": put("put answers", out / "answers"),
    }
    links = [(get["json"], p["validate"], "success"), (p["validate"], p["customer"], "valid"),
             (p["customer"], p["split"], "matched"), (p["split"], p["reshape"], "split"),
             (p["split"], p["wait"], "original"), (p["wait"], p["wait"], "wait"), (p["wait"], p["put released"], "success"),
             (p["reshape"], p["flatten"], "success"), (p["flatten"], p["as json"], "success"),
             (p["as json"], p["as csv"], "success"), (p["as csv"], p["log"], "success"), (p["log"], p["copy"], "success"),
             (p["copy"], p["dedupe"], "success"), (p["dedupe"], p["notify"], "non-duplicate"),
             (p["notify"], p["name order"], "success"), (p["name order"], p["put orders"], "success"),
             (get["xml"], p["mime"], "success"), (p["mime"], p["xpath"], "success"), (p["xpath"], p["split xml"], "matched"),
             (p["split xml"], p["xslt"], "split"), (p["xslt"], p["upper"], "success"),
             (p["upper"], p["script"], "output stream"), (p["script"], p["invoke"], "success"),
             (p["invoke"], p["trim"], "success"), (p["trim"], p["segment"], "success"),
             (p["segment"], p["retry"], "segments"), (p["retry"], p["rate"], "retry"), (p["rate"], p["monitor"], "success"),
             (p["monitor"], p["name segment"], "success"), (p["name segment"], p["spread"], "success"),
             (p["spread"], p["put one"], "1"), (p["spread"], p["put two"], "2"),
             (get["csv"], p["lookup"], "success"), (p["lookup"], p["put answers"], "success")]
    root = group(ROOT, "nifi-components", None, None, processors=[*get.values(), *p.values()],
                 controllerServices=services,
                 connections=[connection(ROOT, source, target, (relationship,)) for source, target, relationship in links])
    return snapshot(root, {})


def test_every_new_component_in_one_nifi_flow_runs_on_ray(tmp_path, ray_session):
    inputs, out = tmp_path / "in", tmp_path / "out"
    for kind, name, text in (("json", "orders.json", json.dumps(ORDERS)), ("xml", "catalog.xml", CATALOG),
                             ("csv", "words.csv", "word\nHello\nBye\n")):
        (inputs / kind).mkdir(parents=True)
        (inputs / kind / name).write_text(text)
    stylesheet = tmp_path / "titles.xsl"
    stylesheet.write_text(TITLES)
    flow = flow_from_nifi(definition(inputs, out, stylesheet))

    def files(folder: str) -> list[Path]:
        return sorted((out / folder).glob("*")) if (out / folder).is_dir() else []

    def done(_status: dict) -> bool:
        return (len(files("orders")) == 2 and len(files("released")) == 1 and len(files("segments")) == 4
                and len(files("answers")) == 1)

    final = run_flow(flow, tmp_path / "repository", engine="ray", address=ray_session, timeout=120, until=done,
                     until_idle=False)
    assert done(final), final["processors"]
    orders = {path.name: json.loads(path.read_text()) for path in files("orders")}
    assert orders == {"order-0.json": {"order.id": 1, "order.product": "pen", "order.quantity": 2},
                      "order-1.json": {"order.id": 2, "order.product": "ink", "order.quantity": 5}}
    assert json.loads(files("released")[0].read_text()) == ORDERS   # released by the two notifications
    # "DUNE" and "EMMA" less their first byte, in segments of 2 bytes: "UN", "E", "MM", "A"
    assert sorted(path.read_bytes() for path in files("segments")) == [b"A", b"E", b"MM", b"UN"]
    assert all(path.name.startswith("books-") for path in files("segments"))   # the XPath's attribute went along
    assert json.loads(files("answers")[0].read_text()) == [{"word": "Hello", "answer": "Hi"},
                                                           {"word": "Bye", "answer": None}]
    totals = {p["name"]: p for p in final["processors"]}
    assert totals["dedupe"]["flowfiles_in"] == 4 and totals["put one"]["flowfiles_in"] == 2   # the copies; round robin
