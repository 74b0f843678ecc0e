"""NiFi flow definitions built the way NiFi's "Download flow definition" writes them (every
property with its value, defaults included; the keys and shapes of docs/nifi-flows.md): the
inputs of the import tests."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count(1)
STANDARD = "org.apache.nifi.processors.standard."


def _id(prefix: str) -> str:
    return f"{prefix}-{next(_ids):04d}-0000-0000-000000000000"


def _descriptors(properties: dict[str, Any]) -> dict[str, Any]:
    return {key: {"name": key, "displayName": key, "identifiesControllerService": False, "sensitive": False,
                  "dynamic": False} for key in properties}


def processor(group: str, name: str, java_type: str, properties: dict[str, Any], *,
              auto_terminate: tuple[str, ...] = (), schedule: str = "0 sec", tasks: int = 1,
              strategy: str = "TIMER_DRIVEN", **extra: Any) -> dict[str, Any]:
    return {
        "identifier": _id("p"), "instanceIdentifier": _id("i"), "name": name, "comments": "",
        "position": {"x": 0.0, "y": 0.0}, "type": java_type,
        "bundle": {"group": "org.apache.nifi", "artifact": "nifi-standard-nar", "version": "2.6.0"},
        "properties": properties, "propertyDescriptors": _descriptors(properties),
        "style": {}, "schedulingPeriod": schedule, "schedulingStrategy": strategy, "executionNode": "ALL",
        "penaltyDuration": "30 sec", "yieldDuration": "1 sec", "bulletinLevel": "WARN", "runDurationMillis": 0,
        "concurrentlySchedulableTaskCount": tasks, "autoTerminatedRelationships": list(auto_terminate),
        "scheduledState": "ENABLED", "retryCount": 10, "retriedRelationships": [],
        "backoffMechanism": "PENALIZE_FLOWFILE", "maxBackoffPeriod": "10 mins", "componentType": "PROCESSOR",
        "groupIdentifier": group, **extra,
    }


def port(group: str, name: str, kind: str) -> dict[str, Any]:
    return {"identifier": _id("port"), "instanceIdentifier": _id("i"), "name": name, "comments": "",
            "position": {"x": 0.0, "y": 0.0}, "type": kind, "concurrentlySchedulableTaskCount": 1,
            "scheduledState": "ENABLED", "allowRemoteAccess": False, "portFunction": "STANDARD",
            "componentType": kind, "groupIdentifier": group}


def funnel(group: str) -> dict[str, Any]:
    return {"identifier": _id("f"), "instanceIdentifier": _id("i"), "position": {"x": 0.0, "y": 0.0},
            "componentType": "FUNNEL", "groupIdentifier": group}


def _end(component: dict[str, Any], group: str) -> dict[str, Any]:
    kind = component.get("componentType")
    return {"id": component["identifier"], "type": kind, "groupId": group,
            "name": component.get("name", "Funnel"), "comments": ""}


def connection(group: str, source: dict, destination: dict, relationships: tuple[str, ...] = (), *,
               source_group: str | None = None, destination_group: str | None = None, **settings: Any) -> dict:
    return {
        "identifier": _id("c"), "instanceIdentifier": _id("i"), "name": settings.pop("name", ""),
        "source": _end(source, source_group or group), "destination": _end(destination, destination_group or group),
        "labelIndex": 1, "zIndex": 0, "selectedRelationships": list(relationships),
        "backPressureObjectThreshold": settings.pop("back_pressure", 10000),
        "backPressureDataSizeThreshold": "1 GB", "flowFileExpiration": "0 sec",
        "prioritizers": settings.pop("prioritizers", []), "bends": [],
        "loadBalanceStrategy": "DO_NOT_LOAD_BALANCE", "partitioningAttribute": "",
        "loadBalanceCompression": "DO_NOT_COMPRESS", "componentType": "CONNECTION", "groupIdentifier": group,
    }


def group(identifier: str, name: str, parent: str | None, context: str | None, **contents: list) -> dict:
    body = {"identifier": identifier, "instanceIdentifier": _id("i"), "name": name, "comments": "",
            "position": {"x": 0.0, "y": 0.0}}
    for key in ("processGroups", "remoteProcessGroups", "processors", "inputPorts", "outputPorts", "connections",
                "labels", "funnels", "controllerServices"):
        body[key] = contents.get(key, [])
    if context:
        body["parameterContextName"] = context
    body.update({"defaultFlowFileExpiration": "0 sec", "defaultBackPressureObjectThreshold": 10000,
                 "defaultBackPressureDataSizeThreshold": "1 GB", "scheduledState": "ENABLED",
                 "executionEngine": "INHERITED", "maxConcurrentTasks": 1, "statelessFlowTimeout": "1 min",
                 "flowFileConcurrency": "UNBOUNDED", "flowFileOutboundPolicy": "STREAM_WHEN_AVAILABLE",
                 "componentType": "PROCESS_GROUP"})
    if parent:
        body["groupIdentifier"] = parent
    return body


def service(identifier: str, java_type: str, properties: dict[str, Any], group: str = "root") -> dict[str, Any]:
    """A controller service as a NiFi download lists it (named by its identifier; the keys of
    VersionedControllerService, as in NiFi's own flows/Kafka_to_S3.json)."""
    return {"identifier": identifier, "instanceIdentifier": _id("i"), "name": identifier, "comments": "",
            "type": java_type, "bundle": {"group": "org.apache.nifi", "artifact": "nifi-standard-services-nar",
                                          "version": "2.6.0"},
            "properties": properties, "propertyDescriptors": _descriptors(properties), "controllerServiceApis": [],
            "scheduledState": "ENABLED", "bulletinLevel": "WARN", "componentType": "CONTROLLER_SERVICE",
            "groupIdentifier": group}


def uses(component: dict[str, Any], *names: str) -> dict[str, Any]:
    """``component`` with its properties ``names`` marked as naming controller services, as NiFi marks them."""
    for name in names:
        component["propertyDescriptors"][name]["identifiesControllerService"] = True
    return component


def map_cache_services(nifi2_names: bool) -> list[dict[str, Any]]:
    """A DistributedMapCacheServer ('svc-server', Port 4557) and a client of it ('svc-client'),
    every property as NiFi exports it, under NiFi 2's class names or NiFi 1's."""
    package = "org.apache.nifi.distributed.cache."
    server, client = (("MapCacheServer", "MapCacheClientService") if nifi2_names else
                      ("DistributedMapCacheServer", "DistributedMapCacheClientService"))
    return [{"identifier": "svc-server", "name": "server", "scheduledState": "ENABLED",
             "type": package + "server.map." + server,
             "properties": {"Port": "4557", "Maximum Cache Entries": "10000",
                            "Eviction Strategy": "Least Frequently Used", "Persistence Directory": None,
                            "SSL Context Service": None, "maximum-read-size": "1 MB"}},
            {"identifier": "svc-client", "name": "client", "scheduledState": "ENABLED",
             "type": package + "client." + client,
             "properties": {"Server Hostname": "localhost", "Server Port": "4557", "SSL Context Service": None,
                            "Communications Timeout": "30 secs"}}]


def snapshot(root: dict, contexts: dict[str, dict]) -> dict:
    return {"flowContents": root, "externalControllerServices": {}, "parameterContexts": contexts,
            "flowEncodingVersion": "1.0", "parameterProviders": {}, "latest": False}


def context(name: str, parameters: dict[str, str | None], sensitive: tuple[str, ...] = (),
            inherits: tuple[str, ...] = ()) -> dict:
    entries = []
    for key, value in parameters.items():
        entry = {"name": key, "description": "", "sensitive": key in sensitive, "provided": False}
        if key not in sensitive:   # NiFi leaves sensitive values out of a download
            entry["value"] = value
        entries.append(entry)
    return {"name": name, "parameters": entries, "inheritedParameterContexts": list(inherits),
            "componentType": "PARAMETER_CONTEXT"}


def orders_flow(in_dir: str, out_dir: str, files: int) -> dict:
    """Two process groups with ports, a funnel, a parameter context inheriting another (with a
    sensitive parameter), and nine standard processors:

    root "Orders": ListFile -> FetchFile -> [Enrich] -> [Archive]
    "Enrich": in -> UpdateAttribute -> RouteOnAttribute -(csv)-> ReplaceText -> funnel -> out
                                                       -(unmatched)---------> funnel
    "Archive": in -> MergeContent (FlowFile Stream v3) -> CompressContent -> PutFile
                                  -(original)-> LogAttribute
    """
    root_id, enrich_id, archive_id = _id("g"), _id("g"), _id("g")
    listing = processor(root_id, "List orders", STANDARD + "ListFile", {
        "Input Directory": "#{in}", "Recurse Subdirectories": "true", "Input Directory Location": "Local",
        "File Filter": "[^\\.].*", "Path Filter": None, "Include File Attributes": "true",
        "Minimum File Age": "0 sec", "Maximum File Age": None, "Minimum File Size": "0 B",
        "Maximum File Size": None, "Ignore Hidden Files": "true", "Listing Strategy": "timestamps",
        "Record Writer": None, "Target System Timestamp Precision": "auto-detect", "Track Performance": "false",
        "Maximum Number of Files to Track": "100000", "Max Disk Operation Time": "10 secs",
        "Max Directory Listing Time": "3 mins", "Entity Tracking State Cache": None,
        "Entity Tracking Time Window": "3 hours", "Entity Tracking Initial Listing Target": "all"},
        schedule="1 sec")
    fetch = processor(root_id, "Fetch", STANDARD + "FetchFile", {
        "File to Fetch": "${absolute.path}/${filename}", "Completion Strategy": "None",
        "Move Destination Directory": None, "Move Conflict Strategy": "Rename",
        "File not Found Log Level": "ERROR", "Permission Denied Log Level": "ERROR"},
        auto_terminate=("not.found", "permission.denied", "failure"))

    enrich_in, enrich_out = port(enrich_id, "in", "INPUT_PORT"), port(enrich_id, "out", "OUTPUT_PORT")
    tag = processor(enrich_id, "Tag", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Delete Attributes Expression": None, "Store State": "Do not store state",
        "Stateful Variables Initial Value": None, "Cache Value Lookup Cache Size": "100",
        "region": "#{region}", "kind": "${filename:substringAfterLast('.')}", "auth": "#{token}"})
    route = processor(enrich_id, "Route", STANDARD + "RouteOnAttribute", {
        "Routing Strategy": "Route to Property name", "csv": "${kind:equals('csv')}"})
    header = processor(enrich_id, "Header", STANDARD + "ReplaceText", {
        "Replacement Strategy": "Prepend", "Search Value": "(?s)(^.*$)", "Replacement Value": "#{header},",
        "Text to Prepend": None, "Text to Append": None, "Character Set": "UTF-8", "Maximum Buffer Size": "1 MB",
        "Evaluation Mode": "Entire text", "Line-by-Line Evaluation Mode": "All"},
        auto_terminate=("failure",))
    join = funnel(enrich_id)
    enrich = group(enrich_id, "Enrich", root_id, "enrich-params",
                   processors=[tag, route, header], inputPorts=[enrich_in], outputPorts=[enrich_out], funnels=[join],
                   connections=[connection(enrich_id, enrich_in, tag), connection(enrich_id, tag, route, ("success",)),
                                connection(enrich_id, route, header, ("csv",)),
                                connection(enrich_id, route, join, ("unmatched",)),
                                connection(enrich_id, header, join, ("success",)),
                                connection(enrich_id, join, enrich_out)])

    archive_in = port(archive_id, "in", "INPUT_PORT")
    bundle = processor(archive_id, "Bundle", STANDARD + "MergeContent", {
        "Merge Strategy": "Bin-Packing Algorithm", "Merge Format": "FlowFile Stream, v3",
        "Attribute Strategy": "Keep Only Common Attributes", "Correlation Attribute Name": None,
        "Metadata Strategy": "Do Not Merge Uncommon Metadata", "Minimum Number of Entries": "#{count}",
        "Maximum Number of Entries": "#{count}", "Minimum Group Size": "0 B", "Maximum Group Size": None,
        "Max Bin Age": "30 sec", "Maximum number of Bins": "5", "Delimiter Strategy": "Do Not Use Delimiters",
        "Header": None, "Footer": None, "Demarcator": None, "Compression Level": "1", "Keep Path": "false",
        "Tar Modified Time": "${file.lastModifiedTime}", "Bin Termination Check": None,
        "FlowFile Insertion Strategy": "Last in Bin"}, auto_terminate=("failure",))
    compress = processor(archive_id, "Compress", STANDARD + "CompressContent", {
        "Mode": "compress", "Compression Format": "gzip", "Compression Level": "1", "Update Filename": "true"},
        auto_terminate=("failure",))
    store = processor(archive_id, "Store", STANDARD + "PutFile", {
        "Directory": "#{out}", "Conflict Resolution Strategy": "replace", "Create Missing Directories": "true",
        "Maximum File Count": None, "Last Modified Time": None, "Permissions": None, "Owner": None,
        "Group": None}, auto_terminate=("success", "failure"))
    log = processor(archive_id, "Log", STANDARD + "LogAttribute", {
        "Log Level": "info", "Log Payload": "false", "Attributes to Log": None,
        "Attributes to Log Regular Expression": ".*", "Attributes to Ignore": None,
        "Attributes to Ignore Regular Expression": None, "Log FlowFile Properties": "true",
        "Output Format": "Line per Attribute", "Log Prefix": None, "Character Set": "UTF-8"},
        auto_terminate=("success",))
    archive = group(archive_id, "Archive", root_id, "orders-params",
                    processors=[bundle, compress, store, log], inputPorts=[archive_in],
                    connections=[connection(archive_id, archive_in, bundle),
                                 connection(archive_id, bundle, compress, ("merged",)),
                                 connection(archive_id, bundle, log, ("original",)),
                                 connection(archive_id, compress, store, ("success",))])

    root = group(root_id, "Orders", None, "orders-params", processors=[listing, fetch],
                 processGroups=[enrich, archive],
                 connections=[connection(root_id, listing, fetch, ("success",)),
                              connection(root_id, fetch, enrich_in, ("success",), destination_group=enrich_id,
                                         prioritizers=["org.apache.nifi.prioritizer.OldestFlowFileFirstPrioritizer"]),
                              connection(root_id, enrich_out, archive_in, (), source_group=enrich_id,
                                         destination_group=archive_id, back_pressure=500)])
    return snapshot(root, {
        "orders-params": context("orders-params", {"in": in_dir, "out": out_dir, "count": str(files),
                                                   "token": None}, sensitive=("token",)),
        "enrich-params": context("enrich-params", {"region": "emea", "header": "ORDER"}, inherits=("orders-params",)),
    })


def nifi1_files_flow(in_dir: str, out_dir: str) -> dict:
    """A NiFi 1.x download, every property under the name NiFi 1.x gives it (NiFi 2 renames them
    when it loads the flow: ListFile's ``listing-strategy``, ``et-*``, FetchFile's ``Log level when
    ...``, ReplaceText's ``Regular Expression``, MergeContent's ``mergecontent-metadata-strategy``,
    ``Header File``, ``Maximum number of Bins``), and a funnel whose connections select ``[""]``:

    ListFile -> FetchFile -> ReplaceText (wraps each content in [ ]) -> funnel -> MergeContent
    (three at a time, header '<', demarcator ',', footer '>') -> PutFile
    """
    root_id = _id("g")
    v1 = {"group": "org.apache.nifi", "artifact": "nifi-standard-nar", "version": "1.28.1"}
    listing = processor(root_id, "List", STANDARD + "ListFile", {
        "Input Directory": in_dir, "Recurse Subdirectories": "true", "Input Directory Location": "Local",
        "File Filter": "[^\\.].*", "Path Filter": None, "Include File Attributes": "true", "Minimum File Age": "0 sec",
        "Maximum File Age": None, "Minimum File Size": "0 B", "Maximum File Size": None, "Ignore Hidden Files": "true",
        "track-performance": "false", "max-performance-metrics": "100000", "max-operation-time": "10 secs",
        "max-listing-time": "3 mins", "Distributed Cache Service": None,
        "target-system-timestamp-precision": "auto-detect", "listing-strategy": "timestamps", "record-writer": None,
        "et-state-cache": None, "et-time-window": "3 hours", "et-initial-listing-target": "all",
        "et-node-identifier": "${hostname()}"}, bundle=v1, schedule="1 sec")
    fetch = processor(root_id, "Fetch", STANDARD + "FetchFile", {
        "File to Fetch": "${absolute.path}/${filename}", "Completion Strategy": "None",
        "Move Destination Directory": None, "Move Conflict Strategy": "Rename",
        "Log level when file not found": "ERROR", "Log level when permission denied": "ERROR"},
        bundle=v1, auto_terminate=("not.found", "permission.denied", "failure"))
    wrap = processor(root_id, "Wrap", STANDARD + "ReplaceText", {
        "Regular Expression": "(?s)(^.*$)", "Replacement Value": "[$1]", "Character Set": "UTF-8",
        "Maximum Buffer Size": "1 MB", "Replacement Strategy": "Regex Replace", "Evaluation Mode": "Entire text",
        "Line-by-Line Evaluation Mode": "All"}, bundle=v1, auto_terminate=("failure",))
    join = funnel(root_id)
    merge = processor(root_id, "Merge", STANDARD + "MergeContent", {
        "Merge Strategy": "Bin-Packing Algorithm", "Merge Format": "Binary Concatenation",
        "Attribute Strategy": "Keep Only Common Attributes", "Correlation Attribute Name": None,
        "mergecontent-metadata-strategy": "Do Not Merge Uncommon Metadata", "Minimum Number of Entries": "3",
        "Maximum Number of Entries": "3", "Minimum Group Size": "0 B", "Maximum Group Size": None,
        "Max Bin Age": None, "Maximum number of Bins": "5", "Delimiter Strategy": "Text", "Header File": "<",
        "Footer File": ">", "Demarcator File": ",", "Compression Level": "1", "Keep Path": "false",
        "Tar Modified Time": "${file.lastModifiedTime}"}, bundle=v1, auto_terminate=("failure", "original"))
    store = processor(root_id, "Store", STANDARD + "PutFile", {
        "Directory": out_dir, "Conflict Resolution Strategy": "fail", "Create Missing Directories": "true",
        "Maximum File Count": None, "Last Modified Time": None, "Permissions": None, "Owner": None, "Group": None},
        bundle=v1, auto_terminate=("success", "failure"))
    root = group(root_id, "Files", None, None, processors=[listing, fetch, wrap, merge, store], funnels=[join],
                 connections=[connection(root_id, listing, fetch, ("success",)),
                              connection(root_id, fetch, wrap, ("success",)),
                              connection(root_id, wrap, join, ("success",)),
                              connection(root_id, join, merge, ("",)),
                              connection(root_id, merge, store, ("merged",))])
    return {**snapshot(root, {}), "flowEncodingVersion": "1.0"}


def registry_stored(definition: dict) -> dict:
    """``definition`` as NiFi Registry keeps a version in its flow storage (data model 3)."""
    flow_snapshot = {"snapshotMetadata": {"bucketIdentifier": "b", "flowIdentifier": "f", "version": 1,
                                          "timestamp": 0, "author": "anonymous", "comments": ""},
                     **definition, "flow": {"identifier": "f", "name": "flow"}, "bucket": {"identifier": "b"}}
    return {"header": {"dataModelVersion": "3"}, "content": {"flowSnapshot": flow_snapshot}}


def instance_flow(definition: dict, encrypted: tuple[str, ...] = ()) -> dict:
    """``definition``'s group as a NiFi 2 instance's flow.json (``VersionedDataflow``): its root
    group, its parameter contexts as a list, the parameters named in ``encrypted`` encrypted with
    the instance's key (``enc{...}``) as NiFi keeps a sensitive value."""
    contexts = []
    for name, context in definition["parameterContexts"].items():
        parameters = [{**p, "value": f"enc{{{p['name']}-cipher}}", "sensitive": True}
                      if p["name"] in encrypted else p for p in context["parameters"]]
        contexts.append({**context, "identifier": _id("ctx"), "name": name, "parameters": parameters})
    return {"encodingVersion": {"majorVersion": 2, "minorVersion": 0}, "maxTimerDrivenThreadCount": 10,
            "registries": [], "parameterContexts": contexts, "parameterProviders": [], "controllerServices": [],
            "reportingTasks": [], "flowAnalysisRules": [], "rootGroup": definition["flowContents"]}
