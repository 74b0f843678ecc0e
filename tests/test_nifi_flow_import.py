"""Importing NiFi flow definitions (flowactors/driver/nifi_export.py): two process groups with
ports, a funnel, parameter contexts and nine standard processors run end to end, on Ray and
from the CLI; what flowactors cannot run is listed in one error."""

from __future__ import annotations

import copy
import gzip
import io
from pathlib import Path

import orjson
import pytest

from flowactors import run_flow
from flowactors.driver.loading import load_definition
from flowactors import Flow
from flowactors.cli.main import main
from flowactors.driver.nifi_export import NiFiImportError, flow_from_nifi
from flowactors.processors import Funnel, HashContent, InputPort, MergeContent, OutputPort, UpdateAttribute
from flowactors.processors.packaging import FlowFileStreamReader
from flowactors.sdk.parameters import environment_variable
from nifi_flows import STANDARD, connection, group, orders_flow, port, processor, snapshot

FILES = {"a.csv": b"1,apple", "b.csv": b"2,pear", "c.csv": b"3,fig", "d.csv": b"4,kiwi", "e.txt": b"five",
         "f.txt": b"six"}


@pytest.fixture
def orders(tmp_path, monkeypatch):
    """The definition as NiFi would download it, its input files, and the sensitive value."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    for name, data in FILES.items():
        (inbox / name).write_bytes(data)
    monkeypatch.setenv(environment_variable("token"), "t0ken")
    definition = orders_flow(str(inbox), str(out), len(FILES))
    path = tmp_path / "Orders.json"
    path.write_bytes(orjson.dumps(definition))
    return path, out, definition


def test_every_part_maps(orders):
    _, _, definition = orders
    flow = flow_from_nifi(definition)
    assert flow.name == "Orders" and flow.parameter_context == "orders-params"
    nodes = flow.processors
    assert nodes["Enrich/Tag"].type is UpdateAttribute and nodes["Enrich/Tag"].parameter_context == "enrich-params"
    assert nodes["Archive/Bundle"].type is MergeContent and nodes["Archive/Bundle"].parameter_context == "orders-params"
    for port_or_funnel in ("Enrich/in", "Enrich/out", "Enrich/funnel-1", "Archive/in"):
        assert nodes[port_or_funnel].type is Funnel      # an inner group's ports pass FlowFiles on
    assert nodes["List orders"].run_schedule == "1 sec"
    assert nodes["List orders"].properties["Listing Strategy"] == "Tracking Timestamps"
    assert "Record Writer" not in nodes["List orders"].properties
    fetch_to_enrich = next(c for c in flow.connections if c.source == "Fetch")
    assert fetch_to_enrich.destination == "Enrich/in" and fetch_to_enrich.prioritizers == ("OldestFlowFileFirst",)
    between_groups = next(c for c in flow.connections if c.source == "Enrich/out")
    assert between_groups.relationships == ("success",) and between_groups.back_pressure_object_threshold == 500
    flow.validate()
    assert nodes["Enrich/Tag"].property_values["auth"] == "t0ken"   # sensitive, from the environment
    assert nodes["Enrich/Tag"].property_values["region"] == "emea"
    assert nodes["Archive/Store"].property_values["Directory"].endswith("out")   # inherited by enrich, own here
    saved = flow.to_json()
    assert "t0ken" not in saved and Flow.from_json(saved).to_dict() == flow.to_dict()


def unpacked(out) -> dict[str, tuple[dict, bytes]]:
    """What the flow stored: one gzip of a FlowFile Stream v3 bundle, opened."""
    stored = list(out.iterdir())
    assert len(stored) == 1 and stored[0].name.endswith(".gz"), stored
    reader = FlowFileStreamReader(io.BytesIO(gzip.decompress(stored[0].read_bytes())))
    return {p.attributes["filename"]: (p.attributes, reader.read()) for p in reader}


def check_output(out) -> None:
    files = unpacked(out)
    assert set(files) == set(FILES)
    for name, (attributes, content) in files.items():
        assert attributes["region"] == "emea" and attributes["auth"] == "t0ken"
        expected = b"ORDER," + FILES[name] if name.endswith(".csv") else FILES[name]
        assert content == expected, name


@pytest.mark.ray
def test_a_nifi_definition_runs_end_to_end_on_ray(orders, ray_session, tmp_path):
    path, out, _ = orders
    final = run_flow(load_definition(path.read_bytes()), tmp_path / "repo", timeout=120)
    assert not final.get("timed_out") and not final.get("stalled")
    check_output(out)
    totals = {p["name"]: p for p in final["processors"]}
    assert totals["Archive/Log"]["flowfiles_in"] == len(FILES)   # the originals, logged and dropped


def test_flowactors_run_takes_a_nifi_definition(orders, tmp_path):
    path, out, _ = orders
    assert main(["run", "--engine", "in-process", "--quiet", str(path), "--repository", str(tmp_path / "r")]) == 0
    check_output(out)


def test_everything_unsupported_is_listed_in_one_error(orders):
    _, _, definition = orders
    broken = copy.deepcopy(definition)
    root = broken["flowContents"]
    root_id = root["identifier"]
    sftp = processor(root_id, "Pull", STANDARD + "ListSFTP", {"Hostname": "h"})
    events = processor(root_id, "Events", STANDARD + "GenerateFlowFile", {"File Size": "0B"}, strategy="EVENT_DRIVEN",
                       auto_terminate=("success",))
    root["processors"] += [sftp, events]
    root["connections"].append(connection(root_id, sftp, root["processors"][1], ("success",)))
    tag = root["processGroups"][0]["processors"][0]
    tag["properties"]["Store State"] = "Store state locally"
    tag["propertyDescriptors"]["Record Reader"] = {"name": "Record Reader", "identifiesControllerService": True}
    tag["properties"]["Record Reader"] = "abc-service"
    root["processGroups"][1]["processors"][2]["properties"]["Owner"] = "nifi"
    root["controllerServices"] = [{"identifier": "abc-service", "name": "JSON reader",
                                   "type": "org.apache.nifi.json.JsonTreeReader"},
                                  {"identifier": "pool", "name": "Database", "type": "org.apache.nifi.dbcp.HikariCPConnectionPool"}]
    tag["propertyDescriptors"]["Connection Pool"] = {"name": "Connection Pool", "identifiesControllerService": True}
    tag["properties"]["Connection Pool"] = "pool"
    root["processGroups"][1]["executionEngine"] = "STATELESS"
    with pytest.raises(NiFiImportError) as caught:
        flow_from_nifi(broken)
    expected = [
        "processor 'Pull': org.apache.nifi.processors.standard.ListSFTP is not a processor flowactors has",
        "processor 'Events' (GenerateFlowFile): EVENT_DRIVEN scheduling is not supported",
        "processor 'Enrich/Tag' (UpdateAttribute): property 'Store State' = 'Store state locally' is not supported",
        "processor 'Enrich/Tag' (UpdateAttribute): property 'Record Reader' names a controller service, and "
        "flowactors' UpdateAttribute has no such property",
        "processor 'Archive/Store' (PutFile): property 'Owner' = 'nifi' is not supported",
        "controller service 'Database' (HikariCPConnectionPool): org.apache.nifi.dbcp.HikariCPConnectionPool is not a "
        "controller service flowactors has",
        "process group 'Archive': executionEngine STATELESS is not supported",
    ]
    problems = caught.value.problems
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert len(problems) == len(expected)   # the connection from the unsupported processor is not a second one


def test_a_definition_without_groups_keeps_plain_names_and_root_ports():
    root_id = "root"
    generate = processor(root_id, "gen", STANDARD + "GenerateFlowFile", {
        "File Size": "1 KB", "Batch Size": "1", "Data Format": "Text", "Unique FlowFiles": "false",
        "Custom Text": None, "Character Set": "UTF-8", "Mime Type": None})
    hashing = processor(root_id, "hash", STANDARD + "CryptographicHashContent", {
        "Fail When Content Empty": "false", "Hash Algorithm": "SHA-256"}, auto_terminate=("failure",))
    requests, results = port(root_id, "requests", "INPUT_PORT"), port(root_id, "results", "OUTPUT_PORT")
    root = group(root_id, "single", None, None, processors=[generate, hashing], inputPorts=[requests],
                 outputPorts=[results], connections=[connection(root_id, generate, hashing, ("success",)),
                                                    connection(root_id, requests, hashing),
                                                    connection(root_id, hashing, results, ("success",))])
    flow = flow_from_nifi(snapshot(root, {}))
    assert flow.processors["hash"].type is HashContent
    assert flow.processors["hash"].properties["Hash Attribute Name"] == "content_SHA-256"   # NiFi's attribute
    assert flow.processors["requests"].type is InputPort     # the definition's own ports are the flow's
    assert flow.processors["results"].type is OutputPort
    flow.validate()


EXTENSIONS = Path(__file__).resolve().parent.parent / "examples" / "nifi_python"


def python_flow(out: str) -> dict:
    """A root group whose source and transform are NiFi 2 Python processors (bundle
    python-extensions, type: the class name), into PutFile; the names come from a parameter."""
    root_id = "root"
    python = {"group": "org.apache.nifi", "artifact": "python-extensions", "version": "1.0.0"}
    greet = processor(root_id, "Greet", "EmitGreetings", {"Greeting": "Hello", "Names": "#{names}"},
                      bundle=python, schedule="0 sec")
    number = processor(root_id, "Number", "NumberLines", {"Prefix": "${greeting.name}:", "Start": None},
                       bundle=python, auto_terminate=("failure",))
    store = processor(root_id, "Store", STANDARD + "PutFile", {"Directory": out},
                      auto_terminate=("success", "failure"))
    root = group(root_id, "greetings", None, "people", processors=[greet, number, store],
                 connections=[connection(root_id, greet, number, ("success",)),
                              connection(root_id, number, store, ("success",))])
    return snapshot(root, {"people": {"name": "people", "parameters": [
        {"name": "names", "sensitive": False, "value": "ann, bob"}], "inheritedParameterContexts": []}})


def test_nifi_python_processors_in_a_definition_are_found_in_the_extensions_folders(tmp_path, monkeypatch):
    definition = python_flow(str(tmp_path / "out"))
    with pytest.raises(NiFiImportError, match="name the folder holding it"):
        flow_from_nifi(definition, extensions=[])
    monkeypatch.setenv("FLOWACTORS_PYTHON_EXTENSIONS", str(tmp_path / "empty"))
    with pytest.raises(NiFiImportError, match="Python processor EmitGreetings"):
        flow_from_nifi(definition)
    path = tmp_path / "greetings.json"
    path.write_bytes(orjson.dumps(definition))
    assert main(["run", "--engine", "in-process", "--quiet", str(path), "--repository", str(tmp_path / "r"),
                 "--extensions", str(EXTENSIONS)]) == 0
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert written == {"ann": "ann:1 Hello\nann:2 ann\n", "bob": "bob:1 Hello\nbob:2 bob\n"}


def test_controller_services_come_with_their_groups_and_processors_name_them_by_path(tmp_path):
    """A NiFi record flow: a JSON reader in the root group, an Avro writer inside 'Convert', and
    ConvertRecord there naming both by identifier; it runs, and the Avro it writes holds the records."""
    import fastavro

    root_id, inner_id = "root", "convert-group"
    reader = {"identifier": "svc-reader", "name": "JsonTreeReader", "type": "org.apache.nifi.json.JsonTreeReader",
              "scheduledState": "ENABLED", "properties": {"schema-access-strategy": "infer-schema",
                                                          "schema-cache": None}}
    writer = {"identifier": "svc-writer", "name": "AvroRecordSetWriter", "type": "org.apache.nifi.avro.AvroRecordSetWriter",
              "scheduledState": "ENABLED", "properties": {"Schema Write Strategy": "avro-embedded",
                                                          "schema-access-strategy": "inherit-record-schema"}}
    generate = processor(root_id, "orders", STANDARD + "GenerateFlowFile", {
        "Custom Text": '[{"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}]', "Batch Size": "1"},
        schedule="10 min")
    convert = processor(inner_id, "to avro", STANDARD + "ConvertRecord", {
        "record-reader": "svc-reader", "record-writer": "svc-writer", "include-zero-record-flowfiles": "true"},
        auto_terminate=("failure",))
    for key in ("record-reader", "record-writer"):
        convert["propertyDescriptors"][key]["identifiesControllerService"] = True
    put = processor(inner_id, "store", STANDARD + "PutFile", {"Directory": str(tmp_path / "out")},
                    auto_terminate=("success", "failure"))
    entry = port(inner_id, "in", "INPUT_PORT")
    inner = group(inner_id, "Convert", root_id, None, processors=[convert, put], inputPorts=[entry],
                  controllerServices=[writer],
                  connections=[connection(inner_id, entry, convert), connection(inner_id, convert, put, ("success",))])
    root = group(root_id, "records", None, None, processors=[generate], processGroups=[inner],
                 controllerServices=[reader], connections=[connection(root_id, generate, entry, ("success",))])
    flow = flow_from_nifi(snapshot(root, {}))
    assert {s.path: s.type.__name__ for s in flow.services.values()} == {
        "JsonTreeReader": "JsonTreeReader", "Convert/AvroRecordSetWriter": "AvroRecordSetWriter"}
    assert flow.processors["Convert/to avro"].properties["Record Writer"] == "Convert/AvroRecordSetWriter"
    run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60,
             until=lambda s: any(p["name"] == "Convert/store" and p["flowfiles_in"] for p in s["processors"]))
    [written] = list((tmp_path / "out").iterdir())
    with written.open("rb") as avro:
        assert list(fastavro.reader(avro)) == [{"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}]


def test_a_reference_to_a_service_nifi_left_out_of_the_export_says_what_to_export():
    root_id = "root"
    convert = processor(root_id, "convert", STANDARD + "ConvertRecord", {
        "record-reader": "outside-reader", "record-writer": "outside-reader"}, auto_terminate=("success", "failure"))
    for key in ("record-reader", "record-writer"):
        convert["propertyDescriptors"][key]["identifiesControllerService"] = True
    definition = snapshot(group(root_id, "records", None, None, processors=[convert]), {})
    definition["externalControllerServices"] = {"outside-reader": {"identifier": "outside-reader", "name": "Shared JSON"}}
    with pytest.raises(NiFiImportError) as caught:
        flow_from_nifi(definition)
    assert caught.value.problems[0] == (
        "processor 'convert' (ConvertRecord): property 'record-reader' names controller service 'Shared JSON', which "
        "NiFi left out of this export (it belongs to a group around the one exported: externalControllerServices); "
        "export that group instead, or add the service to the flow")
