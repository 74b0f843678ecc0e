"""Importing a NiFi flow definition: the JSON NiFi writes with "Download flow definition".

``flow_from_nifi(data)`` turns it into a ``Flow`` that runs on any flowactors engine, or raises
one ``NiFiImportError`` listing every component and property that flowactors cannot run as NiFi
would (never a partial flow, never a silently changed one), the NiFi types flowactors lacks
summed up first. ``flowactors.driver.loading`` (so ``flowactors run nifi-flow.json``) calls it
when the file is NiFi's (the other shapes NiFi and NiFi Registry write: ``nifi_formats``).

How NiFi's parts map (docs/nifi-flows.md has the table):

* **Process groups** are flattened: a processor of group ``Ingest`` inside ``Main`` is named
  ``Main/Ingest/<name>``; components of the definition's own (root) group keep their names.
  Each processor reads its group's **parameter context** (NiFi binds contexts to groups).
* **Input and output ports** of an inner group, and **funnels**, become ``Funnel`` processors
  that pass FlowFiles on unchanged, so every NiFi connection stays a queue of its own (with its
  back pressure, expiration and prioritizers); a funnel nothing leaves is placed disabled (NiFi
  never moves what reaches it: it waits in the connection). Ports of the root group are the
  flow's own ports: ``InputPort`` and ``OutputPort`` (docs/stateless.md).
* **Processors** of ``flowactors.driver.nifi_standard_processors.STANDARD_PROCESSORS`` carry their
  scheduling (timer or cron driven, concurrent tasks, penalty and yield durations, auto-terminated
  and retried relationships with their retry count and backoff, primary node only, disabled) and
  their properties as that table says, after NiFi's own renames of older property names
  (``migrated``: what NiFi does when it loads a flow). **NiFi 2 Python
  processors** (bundle ``python-extensions``) are found by class name in the extensions folders
  given (or ``FLOWACTORS_PYTHON_EXTENSIONS``) and placed as ``flowactors.nifi.add_python_processor`` does.
* **Controller services** of ``flowactors.driver.nifi_standard_services.STANDARD_SERVICES`` are
  placed in the group they belong to (``Flow.add_service(..., group=<path>)``, disabled when NiFi
  has them disabled), their properties renamed as that table says; a property whose value is a
  service's identifier (a processor's or a service's) names the service by its path instead
  (``<group>/<name>``; NiFi's scoping holds).
* Not supported, and reported: other processor and service types, remote process groups,
  event-driven scheduling, reporting tasks and connectors, groups run by NiFi's stateless engine or with a
  FlowFile concurrency other than unbounded.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, Container, Mapping, Sequence

from flowactors.nifi import add_python_processor
from flowactors.nifi.extensions import ProcessorNotFound
from flowactors.nifi.inspection import InspectionError
from flowactors.nifi.loader import ProcessorLoadError
from flowactors.driver.nifi_standard_processors import ANY, STANDARD_PROCESSORS
from flowactors.driver.nifi_standard_services import STANDARD_SERVICES
from flowactors.sdk.ports import Funnel, InputPort, OutputPort
from flowactors.sdk.processor import Component
from flowactors.sdk.flow import Flow, FlowValidationError
from flowactors.sdk.parameters import ParameterContext, ParameterError

#: NiFi's prioritizer classes and flowactors' names for them
PRIORITIZERS = {
    "org.apache.nifi.prioritizer.FirstInFirstOutPrioritizer": "FIFO",
    "org.apache.nifi.prioritizer.OldestFlowFileFirstPrioritizer": "OldestFlowFileFirst",
    "org.apache.nifi.prioritizer.NewestFlowFileFirstPrioritizer": "NewestFlowFileFirst",
    "org.apache.nifi.prioritizer.PriorityAttributePrioritizer": "PriorityAttribute",
}
#: a port's or funnel's only relationship (NiFi connections from them select none)
_PASS = ("success",)
#: where Python processors are looked for when the caller names no folder (NiFi's
#: nifi.python.extensions.source.directory): folders separated by os.pathsep
EXTENSIONS_VARIABLE = "FLOWACTORS_PYTHON_EXTENSIONS"
#: the bundle artifact NiFi gives its Python processors
PYTHON_ARTIFACT = "python-extensions"


def environment_extensions() -> list[str]:
    """The extensions folders ``FLOWACTORS_PYTHON_EXTENSIONS`` names (separated by ``os.pathsep``)."""
    return [folder for folder in os.environ.get(EXTENSIONS_VARIABLE, "").split(os.pathsep) if folder]


#: where the message of an import refused for missing types sends the user, once, at its end
SUPPORTED = "the NiFi processors and controller services flowactors has: docs/nifi-flows.md"


class NiFiImportError(FlowValidationError):
    """The definition holds what flowactors cannot run as NiFi would; ``problems`` lists it all,
    one line each. ``missing`` counts the components of each NiFi type flowactors does not have
    (``processor ListSFTP``: 3); the message begins with them, each type once, so the user sees
    what to replace before the details, and ends with where the supported types are listed."""

    def __init__(self, flow_name: str, problems: Sequence[str], missing: Mapping[str, int] | None = None):
        super().__init__(flow_name, problems)
        self.missing = dict(missing or {})
        if self.missing:
            kinds = ", ".join(f"{kind} ({count} component{'s' if count > 1 else ''})" for kind, count in
                              sorted(self.missing.items(), key=lambda item: (-item[1], item[0])))
            self.args = (f"flow '{flow_name}' uses NiFi types flowactors does not have: {kinds}\n{self.args[0]}\n"
                         f"({SUPPORTED})",)


def flow_from_nifi(data: Mapping[str, Any], name: str | None = None, *,
                   extensions: Sequence[str | Path] | None = None, command: str | None = None) -> Flow:
    """The ``Flow`` of a NiFi flow definition (see the module docstring); its Python processors
    are looked for in ``extensions`` (default: the folders of ``FLOWACTORS_PYTHON_EXTENSIONS``),
    and a problem finding them names ``command``'s option (the CLI command loading the flow)."""
    if extensions is None:
        extensions = environment_extensions()
    problems = shape_problems(data, "definition", "the definition")
    if problems:
        root = data.get("flowContents") if isinstance(data, dict) else None
        given = root.get("name") if isinstance(root, dict) else None
        raise NiFiImportError(name or (given if isinstance(given, str) and given else "nifi-flow"), problems)
    return _Importer(data, name, [str(f) for f in extensions], command).build()


#: What the import reads of each part of a NiFi definition, the part's fields and their JSON kind:
#: a Python type (``int`` is a whole number, not true or false), or the name of a part in
#: ``[part]`` (a list of them), ``{part}`` (an object of them by name) or alone (one); the part
#: ``text`` is a string or null, ``name`` a string. Every field may be null or left out but those
#: of ``_REQUIRED``; fields not named are not read.
_SHAPES: dict[str, dict[str, type | str]] = {
    "definition": {"flowContents": "group", "parameterContexts": "{context}", "reportingTasks": "[item]",
                   "connectors": "[item]"},
    "group": {"identifier": str, "name": str, "parameterContextName": str, "executionEngine": str,
              "flowFileConcurrency": str, "processGroups": "[group]", "processors": "[processor]",
              "funnels": "[component]", "inputPorts": "[component]", "outputPorts": "[component]",
              "connections": "[connection]", "controllerServices": "[service]", "remoteProcessGroups": "[item]"},
    "item": {"identifier": str, "name": str, "type": str},
    "service": {"identifier": str, "name": str, "type": str, "scheduledState": str, "properties": "{text}",
                "propertyDescriptors": "{descriptor}"},
    "component": {"identifier": str, "name": str, "scheduledState": str, "allowRemoteAccess": bool},
    "processor": {"identifier": str, "name": str, "type": str, "scheduledState": str, "bundle": "bundle",
                  "properties": "{text}", "propertyDescriptors": "{descriptor}", "schedulingStrategy": str,
                  "schedulingPeriod": str, "executionNode": str, "concurrentlySchedulableTaskCount": int,
                  "penaltyDuration": str, "yieldDuration": str, "autoTerminatedRelationships": "[name]",
                  "retriedRelationships": "[name]", "retryCount": int, "backoffMechanism": str,
                  "maxBackoffPeriod": str},
    "bundle": {"artifact": str, "version": str},
    "descriptor": {"identifiesControllerService": bool},
    "connection": {"name": str, "source": "end", "destination": "end", "selectedRelationships": "[name]",
                   "prioritizers": "[name]", "backPressureObjectThreshold": int,
                   "backPressureDataSizeThreshold": str, "flowFileExpiration": str, "loadBalanceStrategy": str,
                   "loadBalanceCompression": str, "partitioningAttribute": str},
    "end": {"id": str, "type": str, "groupId": str, "name": str},
    "context": {"name": str, "parameters": "[parameter]", "inheritedParameterContexts": "[name]"},
    "parameter": {"name": str, "value": str, "sensitive": bool, "description": str},
}
_REQUIRED = {"definition": ("flowContents",), "processor": ("identifier", "type"), "component": ("identifier",),
             "service": ("identifier", "type"),
             "connection": ("source", "destination"), "end": ("id",)}
_KIND_WORDS = {str: "a string", int: "a whole number", bool: "true or false"}


def shape_problems(value: Any, part: str, where: str) -> list[str]:
    """What in ``value``, a ``part`` of a NiFi definition (``_SHAPES``) found at ``where``, is not
    of the kind the import reads: each problem names the field's place."""
    if part in ("text", "name"):   # a text may be null, a name may not
        if isinstance(value, str) or (value is None and part == "text"):
            return []
        return [f"{where} must be a string, not {value!r}"]
    if not isinstance(value, dict):
        return [f"{where} must be an object, not {type(value).__name__}"]
    problems = [f"{where} lacks '{key}'" for key in _REQUIRED.get(part, ()) if value.get(key) is None]
    for key, kind in _SHAPES[part].items():
        field, place = value.get(key), f"{where}.{key}"
        if field is None:
            continue
        if isinstance(kind, type):
            if not isinstance(field, kind) or (kind is int and isinstance(field, bool)):
                problems.append(f"{place} must be {_KIND_WORDS[kind]}, not {field!r}")
        elif kind.startswith("["):
            if not isinstance(field, list):
                problems.append(f"{place} must be a list, not {type(field).__name__}")
                continue
            for index, item in enumerate(field):
                problems += shape_problems(item, kind[1:-1], f"{place}[{index}]")
        elif kind.startswith("{"):
            if not isinstance(field, dict):
                problems.append(f"{place} must be an object, not {type(field).__name__}")
                continue
            for name, item in field.items():
                problems += shape_problems(item, kind[1:-1], f"{place}[{name!r}]")
        else:
            problems += shape_problems(field, kind, place)
    return problems


class _Importer:
    def __init__(self, data: Mapping[str, Any], name: str | None, extensions: list[str], command: str | None):
        self.extensions = extensions
        self.command = command
        self.root = data["flowContents"]
        self.flow = Flow(name or self.root.get("name") or "nifi-flow")
        self.data = data
        self.problems: list[str] = []
        self.names: dict[str, str] = {}          # NiFi identifier -> flowactors processor name
        self.reported: set[str] = set()          # identifiers of components reported as not supported
        self.services: dict[str, str] = {}       # NiFi identifier of a controller service -> its path
        self.missing: Counter[str] = Counter()   # "processor ListSFTP" -> how many components have that type
        self.group_paths: dict[int, str] = {}    # id() of a process group's object -> its path

    def build(self) -> Flow:
        # a port's connections live in the group around it: look at every group's
        connections = [c for g in _groups(self.root) for c in g.get("connections") or []]
        self.fed = {c["destination"]["id"] for c in connections}
        self.feeding = {c["source"]["id"] for c in connections}
        self._parameter_contexts()
        placed = self._name_services(self.root, path="")
        for service, path in placed:
            self._service(service, path)
        self._group(self.root, path="", root=True)
        for key, what in (("reportingTasks", "reporting task"), ("connectors", "connector")):   # flow.json.gz's
            for item in self.data.get(key) or []:
                self.problems.append(f"{what} '{item.get('name') or item.get('identifier')}' "
                                     f"({(item.get('type') or '?').rsplit('.', 1)[-1]}): {what}s are not supported")
        if self.problems:
            raise NiFiImportError(self.flow.name, self.problems, self.missing)
        return self.flow

    # ------------------------------------------------------------------ parameters
    def _parameter_contexts(self) -> None:
        for key, context in (self.data.get("parameterContexts") or {}).items():
            if context.get("parameterProvider"):
                self.problems.append(f"parameter context '{key}': parameter providers are not supported")
            try:   # NiFi's entry, read as a flowactors definition's (its "inherits" spelt NiFi's way)
                parsed = ParameterContext.from_dict({**context, "name": context.get("name") or key,
                                                     "inherits": context.get("inheritedParameterContexts")})
            except ParameterError as err:
                self.problems.append(str(err))
                continue
            self.flow.parameter_contexts[parsed.name] = parsed

    # ------------------------------------------------------------------ groups
    def _group(self, group: Mapping[str, Any], path: str, root: bool) -> None:
        where = f"process group '{path or group.get('name') or 'root'}'"
        context = group.get("parameterContextName")
        if root:
            self.flow.parameter_context = context
        for key, value, accepted in (("executionEngine", group.get("executionEngine"), (None, "STANDARD", "INHERITED")),
                                     ("flowFileConcurrency", group.get("flowFileConcurrency"), (None, "UNBOUNDED"))):
            if value not in accepted:
                self.problems.append(f"{where}: {key} {value} is not supported (flowactors runs every group "
                                     f"as NiFi's standard engine with unbounded concurrency)")
        for item in group.get("remoteProcessGroups") or []:
            self.reported.add(item.get("identifier"))
            self.problems.append(f"{where}: remote process group '{item.get('name') or item.get('identifier')}' "
                                 f"is not supported")
        for processor in group.get("processors") or []:
            self._processor(processor, path, context)
        for index, funnel in enumerate(group.get("funnels") or [], 1):
            self._component(funnel, Funnel, self._name(path, f"funnel-{index}"), where)
        for port in group.get("inputPorts") or []:
            # the definition's own ports are the flow's; an inner group's input port passes data on
            self._port(port, InputPort if root or port["identifier"] not in self.fed else Funnel, path, where)
        for port in group.get("outputPorts") or []:
            self._port(port, OutputPort if root or port["identifier"] not in self.feeding else Funnel, path, where)
        for child in group.get("processGroups") or []:
            self._group(child, self.group_paths[id(child)], root=False)
        for connection in group.get("connections") or []:
            self._connection(connection, where)

    def _name(self, path: str, name: str) -> str:
        """A unique processor name: the group path, then the NiFi name (NiFi allows repeats)."""
        return _unique(f"{path}/{name}" if path else name, self.flow.processors)

    def _component(self, item: Mapping[str, Any], kind: type, name: str, where: str) -> None:
        """A port or funnel. One that nothing leaves (a funnel NiFi accepts without an outgoing
        connection) is placed disabled: NiFi never moves what reaches it, so it waits in the
        connection before it, as in NiFi."""
        disabled = _disabled(item) or (kind is Funnel and item["identifier"] not in self.feeding)
        self.names[item["identifier"]] = self.flow.add(kind, name, disabled=disabled).name

    def _port(self, port: Mapping[str, Any], kind: type, path: str, where: str) -> None:
        name = self._name(path, port.get("name") or port["identifier"])
        if port.get("allowRemoteAccess"):
            self.problems.append(f"{where}: port '{name}' accepts site-to-site transfers, which flowactors does "
                                 f"not support")
        self._component(port, kind, name, where)

    # ------------------------------------------------------------------ controller services
    def _name_services(self, group: Mapping[str, Any], path: str) -> list[tuple[Mapping[str, Any], str]]:
        """Every controller service of ``group`` and the groups inside it, with the group path it
        goes in; each named (``self.services``) before any is placed, since a property may name
        a service of a group read later."""
        placed = []
        names: set[str] = set()
        for service in group.get("controllerServices") or []:
            name = _unique(service.get("name") or service["identifier"], names)   # NiFi allows repeats
            names.add(name)
            self.services[service["identifier"]] = f"{path}/{name}" if path else name
            placed.append((service, path))
        for child in group.get("processGroups") or []:
            placed.extend(self._name_services(child, self._group_path(path, child)))
        return placed

    def _group_path(self, parent: str, group: Mapping[str, Any]) -> str:
        """The path of ``group``, inside the group at ``parent``: its name, numbered when another
        group has that path already (NiFi allows repeated names). Made once for each group, as its
        services are named, so that they and its processors share it."""
        name = group.get("name") or group.get("identifier") or "group"
        unique = _unique(f"{parent}/{name}" if parent else name, set(self.group_paths.values()))
        self.group_paths[id(group)] = unique
        return unique

    def _missing_service(self, identifier: str) -> str:
        """What to say of a reference to a service the definition does not hold."""
        external = (self.data.get("externalControllerServices") or {}).get(identifier)
        if isinstance(external, dict):
            return (f"names controller service '{external.get('name') or identifier}', which NiFi left out of this "
                    f"export (it belongs to a group around the one exported: externalControllerServices); export "
                    f"that group instead, or add the service to the flow")
        return f"names controller service '{identifier}', which is not in the definition"

    def _service(self, service: Mapping[str, Any], group: str) -> None:
        path = self.services[service["identifier"]]
        java_type = service.get("type", "?")
        where = f"controller service '{path}' ({java_type.rsplit('.', 1)[-1]})"
        mapping = STANDARD_SERVICES.get(java_type)
        if mapping is None:
            self.reported.add(service["identifier"])
            self.missing[f"controller service {java_type.rsplit('.', 1)[-1]}"] += 1
            self.problems.append(f"{where}: {java_type} is not a controller service flowactors has")
            return
        try:
            kind = mapping.service()
        except (ImportError, TypeError) as err:   # an optional library the service needs is missing
            self.reported.add(service["identifier"])
            self.problems.append(f"{where}: {err}")
            return
        properties = self._mapped(service, kind, mapping.renamed(), mapping.values(), mapping.ignored(), where)
        name = path.rpartition("/")[2]
        self.flow.add_service(kind, name, properties=properties, group=group, disabled=_disabled(service))

    # ------------------------------------------------------------------ processors
    def _processor(self, processor: Mapping[str, Any], path: str, context: str | None) -> None:
        name = self._name(path, processor.get("name") or processor["identifier"])
        java_type = processor.get("type", "?")
        if (processor.get("bundle") or {}).get("artifact") == PYTHON_ARTIFACT:
            self._python_processor(processor, name, context)
            return
        mapping = STANDARD_PROCESSORS.get(java_type)
        if mapping is None:
            self.reported.add(processor["identifier"])
            self.missing[f"processor {java_type.rsplit('.', 1)[-1]}"] += 1
            self.problems.append(f"processor '{name}': {java_type} is not a processor flowactors has")
            return
        where = f"processor '{name}' ({java_type.rsplit('.', 1)[1]})"
        properties = self._properties(processor, mapping, where)
        scheduling = self._scheduling(processor, where)
        node = self.flow.add(mapping.processor, name, properties=properties, parameter_context=context, **scheduling)
        self.names[processor["identifier"]] = node.name

    def _python_processor(self, processor: Mapping[str, Any], name: str, context: str | None) -> None:
        """A NiFi 2 Python processor (its type is its class name): found in the extensions folders
        and placed as ``flowactors.nifi.add_python_processor`` does (docs/nifi-python-processors.md)."""
        class_name = processor["type"]
        where = f"processor '{name}' (Python processor {class_name})"
        if not self.extensions:
            self.reported.add(processor["identifier"])
            option = f"flowactors {self.command} --extensions DIR" if self.command else "extensions=[DIR]"
            self.problems.append(f"{where}: name the folder holding it ({option}, or {EXTENSIONS_VARIABLE})")
            return
        properties = {k: self.services.get(v, v) for k, v in (processor.get("properties") or {}).items()
                      if v is not None}
        scheduling = self._scheduling(processor, where)
        try:
            version = (processor.get("bundle") or {}).get("version")   # a Python processor's bundle is its version
            node = add_python_processor(self.flow, class_name, name, extensions=self.extensions, properties=properties,
                                        version=version, parameter_context=context, **scheduling)
        except (ProcessorNotFound, InspectionError, ProcessorLoadError, ValueError) as err:
            self.reported.add(processor["identifier"])
            self.problems.append(f"{where}: {err}")
            return
        self.names[processor["identifier"]] = node.name

    def _properties(self, processor: Mapping[str, Any], mapping, where: str) -> dict[str, str]:
        processor = migrated(processor, mapping.migrated)
        properties = self._mapped(processor, mapping.processor, mapping.renamed, mapping.values, mapping.fixed, where)
        if mapping.derived is not None:
            properties.update(mapping.derived({k: v for k, v in (processor.get("properties") or {}).items()
                                               if v is not None}))
        return properties

    def _mapped(self, item: Mapping[str, Any], component: type[Component], renamed: Mapping[str, str],
                values: Mapping[str, Mapping[str, str]], fixed: Mapping[str, object], where: str) -> dict[str, str]:
        """A processor's or service's NiFi properties as ``component`` takes them: renamed, their
        values mapped, the ``fixed`` ones accepted at the value flowactors behaves as, a service's
        identifier turned into its path; every other property a problem."""
        descriptors = item.get("propertyDescriptors") or {}
        declared = component.descriptor_map()
        properties: dict[str, str] = {}
        for key, value in ((k, v) for k, v in (item.get("properties") or {}).items() if v is not None):
            target = renamed.get(key, key)
            if fixed.get(key) is ANY and target not in declared:
                continue   # tuning that changes nothing here, or a property NiFi removes when it loads a flow
            if (descriptors.get(key) or {}).get("identifiesControllerService") or (
                    key not in descriptors and value in self.services):
                if value in self.reported:
                    pass   # the service was reported already
                elif not (target in declared and declared[target].service is not None):
                    self.problems.append(f"{where}: property '{key}' names a controller service, and flowactors' "
                                         f"{component.__name__} has no such property")
                elif value not in self.services:
                    self.problems.append(f"{where}: property '{key}' {self._missing_service(value)}")
                else:
                    properties[target] = self.services[value]   # the service, by its path
            elif target in declared or (component.dynamic_properties and key not in fixed):
                properties[target] = values.get(target, {}).get(value, value)
            elif key in fixed:
                accepted = fixed[key]
                if value != accepted and not (accepted is None and value == ""):   # NiFi: "" is unset
                    runs_as = "unset" if accepted is None else f"'{accepted}'"
                    self.problems.append(f"{where}: property '{key}' = '{value}' is not supported (flowactors "
                                         f"works as NiFi does with it {runs_as})")
            else:
                self.problems.append(f"{where}: property '{key}' is not supported")
        return properties

    def _scheduling(self, processor: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A processor's scheduling, retry and enabled state as ``Flow.add`` takes them."""
        scheduling: dict[str, Any] = {"disabled": _disabled(processor)}
        strategy = processor.get("schedulingStrategy") or "TIMER_DRIVEN"
        if strategy in ("TIMER_DRIVEN", "PRIMARY_NODE_ONLY", "CRON_DRIVEN"):
            # PRIMARY_NODE_ONLY: NiFi 1.x's timer on the primary node; CRON_DRIVEN: schedulingPeriod is the cron expression
            scheduling["scheduling_strategy"] = "CRON_DRIVEN" if strategy == "CRON_DRIVEN" else "TIMER_DRIVEN"
            scheduling["run_schedule"] = processor.get("schedulingPeriod") or "0 sec"
        else:
            self.problems.append(f"{where}: {strategy} scheduling is not supported (timer or cron driven only)")
        if strategy == "PRIMARY_NODE_ONLY" or processor.get("executionNode") == "PRIMARY":
            scheduling["primary_node_only"] = True
        for key, field in (("concurrentlySchedulableTaskCount", "concurrent_tasks"),
                           ("penaltyDuration", "penalty_duration"), ("yieldDuration", "yield_duration"),
                           ("retryCount", "retry_count"), ("backoffMechanism", "backoff_mechanism"),
                           ("maxBackoffPeriod", "max_backoff_period")):
            if processor.get(key) is not None:
                scheduling[field] = processor[key]
        scheduling["auto_terminate"] = tuple(processor.get("autoTerminatedRelationships") or ())
        scheduling["retried_relationships"] = tuple(processor.get("retriedRelationships") or ())
        return scheduling

    # ------------------------------------------------------------------ connections
    def _connection(self, connection: Mapping[str, Any], where: str) -> None:
        ends = []
        for end in (connection["source"], connection["destination"]):
            if (end.get("type") or "").startswith("REMOTE_"):
                if end.get("groupId") not in self.reported:
                    self.problems.append(f"{where}: a connection to the remote port '{end.get('name')}' is not "
                                         f"supported")
                return
            name = self.names.get(end["id"])
            if name is None:
                if end["id"] not in self.reported:   # its component was reported already
                    self.problems.append(f"{where}: a connection ends at '{end.get('name') or end['id']}', which "
                                         f"is not in the definition")
                return
            ends.append(name)
        # a port's or funnel's connection selects none: NiFi writes [] or [""]
        relationships = tuple(r for r in connection.get("selectedRelationships") or () if r) or _PASS
        prioritizers = []
        for prioritizer in connection.get("prioritizers") or []:
            if prioritizer not in PRIORITIZERS:
                self.problems.append(f"{where}: prioritizer {prioritizer} is not supported")
            else:
                prioritizers.append(PRIORITIZERS[prioritizer])
        settings: dict[str, Any] = {"prioritizers": tuple(prioritizers)}
        if connection.get("backPressureObjectThreshold") is not None:
            settings["back_pressure_object_threshold"] = int(connection["backPressureObjectThreshold"])
        for key, field in (("backPressureDataSizeThreshold", "back_pressure_data_size_threshold"),
                           ("flowFileExpiration", "flowfile_expiration"),
                           ("loadBalanceStrategy", "load_balance"), ("loadBalanceCompression", "load_balance_compression")):
            if connection.get(key):
                settings[field] = connection[key]
        if connection.get("partitioningAttribute"):
            settings["partition_attribute"] = connection["partitioningAttribute"]
        name = connection.get("name") or None
        if name is not None and any(c.name == name for c in self.flow.connections):
            name = None   # NiFi allows repeated connection names; flowactors names it after its ends
        self.flow.connect(ends[0], ends[1], relationships, name=name, **settings)


def _unique(base: str, taken: Container[str]) -> str:
    """``base``, or numbered (``base (2)``, ...) when it is ``taken``: NiFi allows repeated names."""
    unique, n = base, 1
    while unique in taken:
        n += 1
        unique = f"{base} ({n})"
    return unique


def _disabled(component: Mapping[str, Any]) -> bool:
    """Whether NiFi has the component disabled (kept in the flow, never started)."""
    return component.get("scheduledState") == "DISABLED"


def migrated(component: Mapping[str, Any], renames: Mapping[str, str | None]) -> Mapping[str, Any]:
    """``component`` with its properties (and their descriptors) renamed as NiFi renames them when
    it loads a flow: each old name present takes NiFi's current name (its value replacing the
    current name's, as NiFi's ``renameProperty`` does), or is dropped where ``renames`` gives None
    (``removeProperty``). A copy when anything changes; ``component`` is not changed."""
    properties = component.get("properties") or {}
    if not any(old in properties for old in renames):
        return component
    descriptors = dict(component.get("propertyDescriptors") or {})
    properties = dict(properties)
    for old, new in renames.items():
        if old not in properties:
            continue
        value, descriptor = properties.pop(old), descriptors.pop(old, None)
        if new is not None:
            properties[new] = value
            if descriptor is not None:
                descriptors[new] = descriptor
    return {**component, "properties": properties, "propertyDescriptors": descriptors}


def _groups(group: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A group and every group inside it."""
    return [group, *(g for child in group.get("processGroups") or [] for g in _groups(child))]
