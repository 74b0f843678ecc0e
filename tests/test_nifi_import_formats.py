"""What NiFi accepts when it loads a flow, the import accepts too: NiFi 1.x property names (NiFi
renames them itself), the other files NiFi and NiFi Registry write a flow in (a Registry version,
a NiFi instance's flow.json.gz), ports and funnels whose connections select [""], "" as unset."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from flowactors import run_flow
from flowactors.driver.loading import load_definition, load_flow
from flowactors.driver.nifi_export import NiFiImportError, flow_from_nifi
from flowactors.processors import FetchFile, ListFile, MergeContent, ReplaceText
from flowactors.sdk.parameters import environment_variable
from nifi_flows import (STANDARD, connection, funnel, group, instance_flow, nifi1_files_flow, orders_flow, processor,
                        registry_stored, snapshot)

CONTENTS = {"a.txt": b"apple", "b.txt": b"pear", "c.txt": b"fig"}


@pytest.fixture
def files(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    for name, data in CONTENTS.items():
        (inbox / name).write_bytes(data)
    return inbox, tmp_path / "out"


def test_a_nifi_1_export_loads_under_the_names_nifi_2_gives_its_properties(files):
    inbox, out = files
    flow = flow_from_nifi(nifi1_files_flow(str(inbox), str(out)))
    nodes = flow.processors
    assert nodes["List"].type is ListFile and nodes["List"].properties["Listing Strategy"] == "Tracking Timestamps"
    assert nodes["Fetch"].type is FetchFile
    assert nodes["Wrap"].type is ReplaceText and nodes["Wrap"].properties["Search Value"] == "(?s)(^.*$)"
    merge = nodes["Merge"]
    assert merge.type is MergeContent
    assert {k: merge.properties[k] for k in ("Header", "Footer", "Demarcator", "Maximum number of Bins")} == {
        "Header": "<", "Footer": ">", "Demarcator": ",", "Maximum number of Bins": "5"}
    # the funnel's connections selected [""]: a funnel's only relationship
    assert next(c for c in flow.connections if c.source == "funnel-1").relationships == ("success",)
    flow.validate()


def test_a_nifi_1_export_runs_as_nifi_runs_it(files, tmp_path):
    inbox, out = files
    flow = flow_from_nifi(nifi1_files_flow(str(inbox), str(out)))
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60)
    assert not final.get("timed_out")
    [merged] = list(out.iterdir())
    text = merged.read_bytes()
    assert text.startswith(b"<") and text.endswith(b">")    # header and footer, once
    assert sorted(text[1:-1].split(b",")) == sorted(b"[" + c + b"]" for c in CONTENTS.values())


def test_a_property_nifi_removes_is_accepted_and_a_renamed_one_cannot_also_hide_a_bad_value(files):
    inbox, out = files
    definition = nifi1_files_flow(str(inbox), str(out))
    listing, _, wrap = definition["flowContents"]["processors"][:3]
    listing["properties"]["Distributed Cache Service"] = "some-cache"   # NiFi 2 drops it
    flow_from_nifi(definition)
    wrap["properties"]["Line-by-Line Evaluation Mode"] = "First-Line"
    with pytest.raises(NiFiImportError, match="'Line-by-Line Evaluation Mode' = 'First-Line' is not supported"):
        flow_from_nifi(definition)


def test_an_empty_value_is_unset_as_nifi_takes_it():
    tag = processor("root", "tag", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Store State": "Do not store state", "Stateful Variables Initial Value": "", "colour": "red"},
        auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group("root", "g", None, None, processors=[tag]), {}))
    assert flow.processors["tag"].properties == {"colour": "red"}
    tag["properties"]["Stateful Variables Initial Value"] = "0"
    with pytest.raises(NiFiImportError, match="'Stateful Variables Initial Value' = '0' is not supported"):
        flow_from_nifi(snapshot(group("root", "g", None, None, processors=[tag]), {}))


def test_a_version_as_nifi_registry_stores_it_loads(files):
    inbox, out = files
    definition = nifi1_files_flow(str(inbox), str(out))
    expected = flow_from_nifi(definition).to_dict()
    assert load_definition(orjson.dumps(registry_stored(definition))).to_dict() == expected
    # data model 2: the process group alone
    older = {"header": {"dataModelVersion": "2"}, "content": definition["flowContents"]}
    assert load_definition(older).to_dict() == expected
    # as NiFi's REST API wraps a snapshot (VersionedFlowSnapshotEntity)
    entity = {"versionedFlowSnapshot": definition, "processGroupRevision": {"version": 0}, "registryId": "r"}
    assert load_definition(entity).to_dict() == expected


def test_a_nifi_instances_flow_json_gz_loads(tmp_path, monkeypatch):
    definition = orders_flow(str(tmp_path / "in"), str(tmp_path / "out"), 3)
    store = definition["flowContents"]["processGroups"][1]["processors"][2]
    store["properties"]["Permissions"] = "enc{0a1b2c}"   # a sensitive value, encrypted by the instance
    path = tmp_path / "flow.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(instance_flow(definition, encrypted=("region",)))))
    monkeypatch.setenv(environment_variable("token"), "t0ken")
    monkeypatch.setenv(environment_variable("region"), "apac")
    flow = load_flow(path)
    assert "Permissions" not in flow.processors["Archive/Store"].properties   # left out, as a download leaves it
    assert flow.parameter_contexts["enrich-params"].parameters["region"].sensitive
    flow.validate()
    assert flow.processors["Enrich/Tag"].property_values["region"] == "apac"   # from the environment


def test_a_reporting_task_or_connector_in_flow_json_is_reported(tmp_path):
    dataflow = instance_flow(orders_flow("in", "out", 3))
    dataflow["reportingTasks"] = [{"identifier": "r1", "name": "Metrics",
                                   "type": "org.apache.nifi.reporting.prometheus.PrometheusReportingTask"}]
    dataflow["connectors"] = [{"identifier": "k1", "name": "Sync", "type": "org.example.SyncConnector"}]   # NiFi 2's
    with pytest.raises(NiFiImportError) as caught:
        load_definition(dataflow)
    assert caught.value.problems == [
        "reporting task 'Metrics' (PrometheusReportingTask): reporting tasks are not supported",
        "connector 'Sync' (SyncConnector): connectors are not supported"]


def test_missing_types_are_summed_up_once_before_the_details():
    root = group("root", "Legacy", None, None, processors=[
        processor("root", f"pull {n}", STANDARD + "ListSFTP", {}) for n in range(3)])
    root["controllerServices"] = [{"identifier": "db", "name": "Database", "type": "org.apache.nifi.dbcp.HikariCPConnectionPool"}]
    with pytest.raises(NiFiImportError) as caught:
        flow_from_nifi(snapshot(root, {}))
    lines = str(caught.value).splitlines()
    assert lines[0] == ("flow 'Legacy' uses NiFi types flowactors does not have: processor ListSFTP (3 components), "
                        "controller service HikariCPConnectionPool (1 component)")
    assert lines[1] == "flow 'Legacy' is not valid (4 problem(s)):"
    assert lines[3] == "  - processor 'pull 0': org.apache.nifi.processors.standard.ListSFTP is not a processor flowactors has"
    assert lines[-1] == "(the NiFi processors and controller services flowactors has: docs/nifi-flows.md)"
    assert len(lines) == 7 and caught.value.missing == {"processor ListSFTP": 3, "controller service HikariCPConnectionPool": 1}


def test_retry_cron_and_disabled_components_carry_over():
    root = group("root", "g", None, None)
    nightly = processor("root", "nightly", STANDARD + "GenerateFlowFile", {"File Size": "0B"},
                        strategy="CRON_DRIVEN", schedule="0 0 2 * * ?")
    log = processor("root", "log", STANDARD + "LogAttribute", {}, auto_terminate=("success",),
                    retriedRelationships=["success"], retryCount=3, backoffMechanism="YIELD_PROCESSOR",
                    maxBackoffPeriod="1 min", scheduledState="DISABLED")
    root["processors"] = [nightly, log]
    root["connections"] = [connection("root", nightly, log, ("success",))]
    root["controllerServices"] = [{"identifier": "s", "name": "lookup", "scheduledState": "DISABLED",
                                   "type": "org.apache.nifi.lookup.SimpleKeyValueLookupService"}]
    flow = flow_from_nifi(snapshot(root, {}))
    night, logged = flow.processors["nightly"], flow.processors["log"]
    assert (night.scheduling_strategy, night.run_schedule, night.disabled) == ("CRON_DRIVEN", "0 0 2 * * ?", False)
    assert (logged.retried_relationships, logged.retry_count, logged.backoff_mechanism, logged.max_backoff_period,
            logged.disabled) == (("success",), 3, "YIELD_PROCESSOR", "1 min", True)
    assert flow.disabled_services == {"lookup"}
    flow.validate()


def test_what_reaches_a_funnel_nothing_leaves_waits_before_it(tmp_path):
    """NiFi accepts a funnel without an outgoing connection and never moves what reaches it."""
    generate = processor("root", "generate", STANDARD + "GenerateFlowFile", {"Max FlowFiles": "2"})
    sink = funnel("root")
    root = group("root", "g", None, None, processors=[generate], funnels=[sink],
                 connections=[connection("root", generate, sink, ("success",))])
    flow = flow_from_nifi(snapshot(root, {}))
    assert flow.processors["funnel-1"].disabled
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=30)
    [queue] = [q for q in final["queues"] if q["destination"] == "funnel-1"]
    assert (queue["queued"], queue["total_out"]) == (2, 0)


def test_a_json_reader_keeps_nifis_strict_parsing_at_its_defaults():
    reader = {"identifier": "r", "name": "reader", "type": "org.apache.nifi.json.JsonTreeReader",
              "properties": {"schema-access-strategy": "infer-schema", "Allow Comments": "false",
                             "Max String Length": "20 MB"}}
    root = group("root", "g", None, None, controllerServices=[reader])
    assert flow_from_nifi(snapshot(root, {})).services["reader"].type.__name__ == "JsonTreeReader"
    reader["properties"]["Allow Comments"] = "true"   # NiFi 2: Parsing Strategy LENIENT
    with pytest.raises(NiFiImportError, match="'Allow Comments' = 'true' is not supported"):
        flow_from_nifi(snapshot(root, {}))


def test_a_groups_services_and_processors_share_its_path_when_names_repeat():
    """NiFi allows a group named as a processor beside it, and two groups of one name: each group
    keeps one path, its services' and its processors' alike (they once parted: the services at
    'Convert', the processors at 'Convert (2)', out of the services' scope)."""
    def convert_group(identifier: str) -> dict:
        services = [{"identifier": f"{identifier}-{kind}", "name": kind, "type": f"org.apache.nifi.json.{java}",
                     "properties": {"schema-access-strategy": strategy}}
                    for kind, java, strategy in (("reader", "JsonTreeReader", "infer-schema"),
                                                 ("writer", "JsonRecordSetWriter", "inherit-record-schema"))]
        convert = processor(identifier, "convert", STANDARD + "ConvertRecord", {
            "record-reader": f"{identifier}-reader", "record-writer": f"{identifier}-writer"},
            auto_terminate=("success", "failure"))
        for key in ("record-reader", "record-writer"):
            convert["propertyDescriptors"][key]["identifiesControllerService"] = True
        source = processor(identifier, "generate", STANDARD + "GenerateFlowFile", {})
        return group(identifier, "Convert", "root", None, processors=[source, convert], controllerServices=services,
                     connections=[connection(identifier, source, convert, ("success",))])

    beside = processor("root", "Convert", STANDARD + "GenerateFlowFile", {}, auto_terminate=("success",))
    root = group("root", "g", None, None, processors=[beside], processGroups=[convert_group("a"), convert_group("b")])
    flow = flow_from_nifi(snapshot(root, {}))
    assert sorted(flow.processors) == ["Convert", "Convert (2)/convert", "Convert (2)/generate", "Convert/convert",
                                       "Convert/generate"]
    assert flow.processors["Convert (2)/convert"].properties["Record Reader"] == "Convert (2)/reader"
    assert sorted(s.path for s in flow.services.values()) == [
        "Convert (2)/reader", "Convert (2)/writer", "Convert/reader", "Convert/writer"]
    flow.validate()


def test_a_python_processors_bundle_version_must_be_text():
    """A Python processor's bundle version chooses among the versions of its class (NiFi writes it
    as a string): another kind is reported with its place, not compared with the versions found."""
    write = processor("root", "write", "WriteMessage", {}, auto_terminate=("success",),
                      bundle={"group": "org.apache.nifi", "artifact": "python-extensions", "version": 2})
    with pytest.raises(NiFiImportError) as caught:
        flow_from_nifi(snapshot(group("root", "g", None, None, processors=[write]), {}), extensions=["."])
    assert caught.value.problems == [
        "the definition.flowContents.processors[0].bundle.version must be a string, not 2"]


def test_a_python_processors_bundle_version_chooses_among_the_versions_of_its_class(tmp_path):
    """NiFi names a Python processor's version as its bundle version: with WriteMessage 0.0.1 and
    0.0.2 in the extensions folder (NiFi's PythonControllerInteractionIT.testMultipleVersions), a
    definition naming 0.0.2 gets 0.0.2, whichever file is found first."""
    body = ("from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult\n"
            "class WriteMessage(FlowFileTransform):\n"
            "    class Java:\n        implements = ['org.apache.nifi.python.processor.FlowFileTransform']\n"
            "    class ProcessorDetails:\n        version = '{version}'\n"
            "    def transform(self, context, flowFile):\n        return FlowFileTransformResult('success')\n")
    for file, version in (("WriteMessage.py", "0.0.1-SNAPSHOT"), ("WriteMessageV2.py", "0.0.2-SNAPSHOT")):
        (tmp_path / file).write_text(body.format(version=version))
    write = processor("root", "write", "WriteMessage", {}, auto_terminate=("success", "original", "failure"),
                      bundle={"group": "org.apache.nifi", "artifact": "python-extensions", "version": "0.0.2-SNAPSHOT"})
    source = processor("root", "generate", STANDARD + "GenerateFlowFile", {})
    root = group("root", "g", None, None, processors=[source, write],
                 connections=[connection("root", source, write, ("success",))])
    flow = flow_from_nifi(snapshot(root, {}), extensions=[str(tmp_path)])
    kind = flow.processors["write"].type
    assert (kind.info.version, Path(kind.info.path).name) == ("0.0.2-SNAPSHOT", "WriteMessageV2.py")
    assert kind.type_name() == f"nifi-python:WriteMessage:0.0.2-SNAPSHOT@{tmp_path}"
    flow.validate()
