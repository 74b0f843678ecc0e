"""A NiFi flow definition, shaped as NiFi exports it, that uses every standard controller service
and every record processor flowactors has (tests/test_records_end_to_end.py runs it).

Orders arrive as CSV (spaces after the commas, as people write it), and go:
CSV -> Avro (ConvertRecord) -> JSON (ConvertRecord) -> validated against a registry's schema
(ValidateRecord) -> the country's name (LookupRecord, a key-value lookup) -> the customer's tier
(LookupRecord, a CSV file lookup) -> the country's region as a record (LookupRecord, a CSV record
lookup) -> a currency (UpdateRecord; the JSON readers take the schema the JSON writer before them kept in a
VolatileSchemaCache instead of inferring it) -> the big orders as Parquet (QueryRecord) -> one XML
document an order (SplitRecord) -> merged again into CSV (MergeRecord) -> one text file a
country (PartitionRecord, FreeFormText) -> PutFile. Property names and values are NiFi's internal
ones, as an export holds them; services are referenced by identifier, and the writers the inner
group 'Deliver' uses belong to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nifi_flows import STANDARD, connection, group, port, processor, snapshot

ORDERS = """id, customer, amount, country
1, ada, 12.50, GB
2, bob, 3.25, FR
3, cy, 40.00, GB
4, dee, 7.75, DE
"""
ORDER_SCHEMA = ('{"type": "record", "name": "order", "fields": [{"name": "id", "type": "long"}, '
                '{"name": "customer", "type": "string"}, {"name": "amount", "type": "double"}, '
                '{"name": "country", "type": "string"}]}')
TIERS = "customer,tier\nada,gold\nbob,silver\ncy,silver\ndee,gold\n"
REGIONS = "code,region,zone\nGB,Europe,west\nFR,Europe,west\nDE,Europe,central\n"


def service(identifier: str, name: str, java_type: str, properties: dict[str, Any], group_id: str) -> dict:
    return {"identifier": identifier, "instanceIdentifier": f"i-{identifier}", "name": name, "comments": "",
            "type": java_type, "bundle": {"group": "org.apache.nifi", "artifact": "nifi-record-serialization-services-nar",
                                          "version": "2.6.0"},
            "properties": properties, "propertyDescriptors": {}, "controllerServiceApis": [],
            "scheduledState": "ENABLED", "bulletinLevel": "WARN", "componentType": "CONTROLLER_SERVICE",
            "groupIdentifier": group_id}


def record_processor(group_id: str, name: str, java_type: str, properties: dict[str, Any], services: tuple[str, ...],
                     **kwargs: Any) -> dict:
    """A processor whose ``services`` properties name controller services (NiFi marks them so)."""
    made = processor(group_id, name, STANDARD + java_type, properties, **kwargs)
    for key in services:
        made["propertyDescriptors"][key]["identifiesControllerService"] = True
    return made


def _services(root: str, inner: str, files: Path) -> tuple[list[dict], list[dict]]:
    json_type, csv_type = "org.apache.nifi.json.", "org.apache.nifi.csv."
    outer = [
        service("csv-in", "CSVReader", csv_type + "CSVReader", {
            "schema-access-strategy": "infer-schema", "csv-reader-csv-parser": "commons-csv", "CSV Format": "custom",
            "Value Separator": ",", "Skip Header Line": "true", "Trim Fields": "true"}, root),
        service("avro-out", "AvroRecordSetWriter", "org.apache.nifi.avro.AvroRecordSetWriter", {
            "Schema Write Strategy": "avro-embedded", "schema-access-strategy": "inherit-record-schema",
            "compression-format": "NONE"}, root),
        service("avro-in", "AvroReader", "org.apache.nifi.avro.AvroReader", {
            "schema-access-strategy": "embedded-avro-schema"}, root),
        service("json-out", "JsonRecordSetWriter", json_type + "JsonRecordSetWriter", {
            "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
            "output-grouping": "output-array", "Pretty Print JSON": "false", "suppress-nulls": "never-suppress",
            "schema-cache": "schemas"}, root),
        service("schemas", "VolatileSchemaCache", "org.apache.nifi.schema.inference.VolatileSchemaCache", {
            "max-cache-size": "100"}, root),
        service("json-in", "JsonTreeReader", json_type + "JsonTreeReader", {
            "schema-access-strategy": "infer-schema", "starting-field-strategy": "ROOT_NODE",
            "schema-inference-cache": "schemas"}, root),
        service("registry", "AvroSchemaRegistry", "org.apache.nifi.schemaregistry.services.AvroSchemaRegistry", {
            "avro-reg-validated-field-names": "true", "order": ORDER_SCHEMA}, root),
        service("json-order", "JsonTreeReader (order)", json_type + "JsonTreeReader", {
            "schema-access-strategy": "schema-name", "schema-registry": "registry", "schema-name": "order"}, root),
        service("countries", "SimpleKeyValueLookupService", "org.apache.nifi.lookup.SimpleKeyValueLookupService", {
            "GB": "United Kingdom", "FR": "France", "DE": "Germany"}, root),
        service("tiers", "SimpleCsvFileLookupService", "org.apache.nifi.lookup.SimpleCsvFileLookupService", {
            "csv-file": str(files / "tiers.csv"), "csv-format": "default", "lookup-key-column": "customer",
            "lookup-value-column": "tier", "ignore-duplicates": "true"}, root),
        service("regions", "CSVRecordLookupService", "org.apache.nifi.lookup.CSVRecordLookupService", {
            "csv-file": str(files / "regions.csv"), "csv-format": "default", "lookup-key-column": "code",
            "ignore-duplicates": "true"}, root),
        service("parquet-out", "ParquetRecordSetWriter", "org.apache.nifi.parquet.ParquetRecordSetWriter", {
            "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
            "compression-type": "UNCOMPRESSED"}, root),
        service("parquet-in", "ParquetReader", "org.apache.nifi.parquet.ParquetReader", {}, root),
        service("xml-out", "XMLRecordSetWriter", "org.apache.nifi.xml.XMLRecordSetWriter", {
            "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
            "root_tag_name": "orders", "record_tag_name": "order", "pretty_print_xml": "false"}, root),
    ]
    deliver = [
        service("xml-in", "XMLReader", "org.apache.nifi.xml.XMLReader", {
            "schema-access-strategy": "infer-schema", "record_format": "true"}, inner),
        service("csv-out", "CSVRecordSetWriter", csv_type + "CSVRecordSetWriter", {
            "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
            "CSV Format": "custom", "Include Header Line": "true", "Quote Mode": "MINIMAL"}, inner),
        service("text-out", "FreeFormTextRecordSetWriter", "org.apache.nifi.text.FreeFormTextRecordSetWriter", {
            "Text": "${customer} (${tier}, ${zone}): ${amount} ${currency}", "Character Set": "UTF-8"}, inner),
    ]
    return outer, deliver


def record_flow(files: Path, out: Path) -> dict:
    """The definition; ``files`` gets the lookup files, ``out`` the text files PutFile writes."""
    (files / "tiers.csv").write_text(TIERS)
    (files / "regions.csv").write_text(REGIONS)
    root, inner = "root", "deliver"
    rw = ("record-reader", "record-writer")
    outer_services, inner_services = _services(root, inner, files)
    steps = [
        processor(root, "orders", STANDARD + "GenerateFlowFile", {"Custom Text": ORDERS, "Batch Size": "1"},
                  schedule="10 min"),
        record_processor(root, "to avro", "ConvertRecord", {"record-reader": "csv-in", "record-writer": "avro-out"},
                         rw, auto_terminate=("failure",)),
        record_processor(root, "to json", "ConvertRecord", {"record-reader": "avro-in", "record-writer": "json-out"},
                         rw, auto_terminate=("failure",)),
        record_processor(root, "validate", "ValidateRecord", {
            "record-reader": "json-order", "record-writer": "json-out", "schema-access-strategy": "reader-schema",
            "allow-extra-fields": "false", "strict-type-checking": "false"}, rw,
            auto_terminate=("invalid", "failure")),
        record_processor(root, "country name", "LookupRecord", {
            "record-reader": "json-in", "record-writer": "json-out", "lookup-service": "countries",
            "result-record-path": "/country_name", "routing-strategy": "route-to-success", "key": "/country"},
            (*rw, "lookup-service"), auto_terminate=("failure",)),
        record_processor(root, "tier", "LookupRecord", {
            "record-reader": "json-in", "record-writer": "json-out", "lookup-service": "tiers",
            "result-record-path": "/tier", "routing-strategy": "route-to-success", "key": "/customer"},
            (*rw, "lookup-service"), auto_terminate=("failure",)),
        record_processor(root, "region", "LookupRecord", {
            "record-reader": "json-in", "record-writer": "json-out", "lookup-service": "regions",
            "result-record-path": "/", "result-contents": "record-fields", "routing-strategy": "route-to-success",
            "key": "/country"}, (*rw, "lookup-service"), auto_terminate=("failure",)),
        record_processor(root, "currency", "UpdateRecord", {
            "record-reader": "json-in", "record-writer": "json-out", "replacement-value-strategy": "literal-value",
            "/currency": "EUR"}, rw, auto_terminate=("failure",)),
        record_processor(root, "big orders", "QueryRecord", {
            "record-reader": "json-in", "record-writer": "parquet-out", "include-zero-record-flowfiles": "false",
            "big": "SELECT * FROM FLOWFILE WHERE amount > 5 ORDER BY id"}, rw,
            auto_terminate=("original", "failure")),
        record_processor(root, "one each", "SplitRecord", {
            "Record Reader": "parquet-in", "Record Writer": "xml-out", "Records Per Split": "1"},
            ("Record Reader", "Record Writer"), auto_terminate=("original", "failure")),
    ]
    entry = port(inner, "orders", "INPUT_PORT")
    delivering = [
        record_processor(inner, "together", "MergeRecord", {
            "record-reader": "xml-in", "record-writer": "csv-out", "merge-strategy": "Bin-Packing Algorithm",
            "min-records": "3", "max-records": "100", "max-bin-age": "30 sec"}, rw,
            auto_terminate=("original", "failure")),
        record_processor(inner, "by country", "PartitionRecord", {
            "record-reader": "csv-in", "record-writer": "text-out", "country": "/country"}, rw,
            auto_terminate=("original", "failure")),
        processor(inner, "name", "org.apache.nifi.processors.attributes.UpdateAttribute", {"filename": "${country}.txt"}),
        processor(inner, "store", STANDARD + "PutFile", {"Directory": str(out), "Conflict Resolution Strategy": "fail"},
                  auto_terminate=("success", "failure")),
    ]
    inner_links = [connection(inner, entry, delivering[0])] + [
        connection(inner, a, b, (rel,)) for a, b, rel in zip(delivering, delivering[1:], ("merged", "success", "success"))]
    deliver = group(inner, "Deliver", root, None, processors=delivering, inputPorts=[entry],
                    controllerServices=inner_services, connections=inner_links)
    relationships = ("success", "success", "success", "valid", "success", "success", "success", "success", "big")
    links = [connection(root, a, b, (rel,)) for a, b, rel in zip(steps, steps[1:], relationships)]
    links.append(connection(root, steps[-1], entry, ("splits",)))
    return snapshot(group(root, "orders", None, None, processors=steps, processGroups=[deliver],
                          controllerServices=outer_services, connections=links), {})
