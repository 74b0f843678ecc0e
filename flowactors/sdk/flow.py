"""The Flow SDK: what a flow author writes.

A ``Flow`` is a graph of processors and connections. It validates as a whole (``validate`` raises one
``FlowValidationError`` listing every problem) and round-trips to a JSON definition
(docs/flow-definition.md). It runs with ``flowactors.run_flow`` (``flowactors.driver.running``), on an
engine of ``flowactors.engine``; ``flowactors.driver.loading`` loads it from files and NiFi exports.
"""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import orjson

from flowactors.sdk import cron
from flowactors.sdk import parameters as params
from flowactors.sdk.ports import InputPort, OutputPort
from flowactors.sdk.processor import Processor, resolve_component
from flowactors.sdk.runtime_env import pip_conflicts
from flowactors.sdk import services as svc
from flowactors.sdk.services import ControllerService, ServiceNode
from flowactors.sdk.settings import Settings, SettingsError
from flowactors.sdk.definition_entries import (entries, json_fields, json_kind, properties_of, property_texts,
                                               unknown_key)
from flowactors.sdk.units import parse_data_size, parse_duration

DEFINITION_VERSION = 2
#: definition versions this flowactors reads (1: before parameter contexts)
READABLE_VERSIONS = (1, 2)
#: how a processor is scheduled (NiFi's names): ``run_schedule`` a duration between triggers, or
#: a cron expression (``flowactors.sdk.cron``) whose fire times trigger it
SCHEDULING_STRATEGIES = ("TIMER_DRIVEN", "CRON_DRIVEN")
#: how a retried FlowFile waits (``ProcessorNode.retried_relationships``): its penalty, or the processor's yield
BACKOFF_MECHANISMS = ("PENALIZE_FLOWFILE", "YIELD_PROCESSOR")
PRIORITIZERS = ("FIFO", "OldestFlowFileFirst", "NewestFlowFileFirst", "PriorityAttribute")
#: a connection's load-balance strategies across a cluster's nodes (seed 002; docs/cluster.md)
LOAD_BALANCE_STRATEGIES = ("none", "round-robin", "single-node", "partition-by-attribute")
#: what a load-balanced transfer compresses
LOAD_BALANCE_COMPRESSION = ("none", "attributes", "attributes-and-content")
#: what a default connection name replaces (``default_connection_name``)
_NOT_SHELL_SAFE = re.compile(r"[^\w-]+")   # letters of any script are one shell word too
#: NiFi's names of the same (flow definitions exported from NiFi spell them so)
_NIFI_NAMES = {"DO_NOT_LOAD_BALANCE": "none", "ROUND_ROBIN": "round-robin", "SINGLE_NODE": "single-node",
               "PARTITION_BY_ATTRIBUTE": "partition-by-attribute", "DO_NOT_COMPRESS": "none",
               "COMPRESS_ATTRIBUTES_ONLY": "attributes", "COMPRESS_ATTRIBUTES_AND_CONTENT": "attributes-and-content"}


class FlowValidationError(ValueError):
    """A flow definition is wrong; ``problems`` lists every problem found, one sentence each."""

    def __init__(self, flow_name: str, problems: Sequence[str]):
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"flow '{flow_name}' is not valid ({len(self.problems)} problem(s)):\n{listing}")


@dataclass
class ProcessorNode:
    """A processor placed in a flow, with its properties and scheduling."""

    name: str
    type: type[Processor]
    properties: dict[str, str] = field(default_factory=dict)
    run_schedule: str = "0 sec"
    concurrent_tasks: int = 1
    batch_size: int | None = None
    penalty_duration: str = "30 sec"
    yield_duration: str = "1 sec"
    auto_terminate: tuple[str, ...] = ()
    #: Ray CPUs each task asks for; asking for any gives each task an actor of its own (tasks in a
    #: shared executor are its threads and ask Ray for nothing)
    num_cpus: float = 0.0
    #: run each task in an actor of its own instead of a shared executor (heavy native code, a
    #: crash risk, a CPU request of its own); see ``flowactors.engine.placement``
    isolated: bool = False
    #: a Ray ``runtime_env`` of its own (pip packages, env_vars, working_dir, ...): gives each task
    #: an actor of its own, started in that environment
    runtime_env: dict[str, Any] | None = None
    #: on a flow that runs on several nodes, run only on the primary node (NiFi's "Execution:
    #: Primary node", for List* sources); another node takes over when the primary leaves
    primary_node_only: bool = False
    #: the parameter context its ``#{...}`` references read (None: the flow's)
    parameter_context: str | None = None
    #: ``SCHEDULING_STRATEGIES``: TIMER_DRIVEN runs it every ``run_schedule`` (a duration);
    #: CRON_DRIVEN once at each fire time of ``run_schedule``, a cron expression (as NiFi's
    #: schedulingPeriod holds it): ``flowactors.sdk.cron``
    scheduling_strategy: str = "TIMER_DRIVEN"
    #: relationships whose FlowFiles a commit sends back to their input queue, up to
    #: ``retry_count`` times each, before letting them through (NiFi 1.16+'s retry;
    #: ``flowactors.engine.retry`` says what is retried and how)
    retried_relationships: tuple[str, ...] = ()
    retry_count: int = 10
    #: ``BACKOFF_MECHANISMS``: each retry penalizes the FlowFile (``penalty_duration``, doubled
    #: each retry) or yields the processor (``yield_duration``, doubled), never past this
    backoff_mechanism: str = "PENALIZE_FLOWFILE"
    max_backoff_period: str = "10 mins"
    #: a disabled processor (or port) is loaded and kept, validated loosely (its properties and
    #: wiring are not checked, as NiFi does not validate a disabled component), never started:
    #: FlowFiles queue up before it
    disabled: bool = False
    #: the property values with parameters resolved, set when the flow validates (never saved)
    resolved: dict[str, str] | None = field(default=None, compare=False, repr=False)

    @property
    def property_values(self) -> dict[str, str]:
        """The values the processor runs with: parameters resolved once the flow validated."""
        return self.properties if self.resolved is None else self.resolved

    def to_dict(self, type_name: str | None = None) -> dict[str, Any]:
        """The node's object in a definition, its processor named ``type_name`` (``Flow.to_json``
        passes ``saved_type_name``'s), else by its ``type_name()``: see ``Flow.to_dict``."""
        return {
            "name": self.name, "type": type_name or self.type.type_name(), "properties": dict(self.properties),
            "run_schedule": self.run_schedule, "concurrent_tasks": self.concurrent_tasks,
            "batch_size": self.batch_size, "penalty_duration": self.penalty_duration,
            "yield_duration": self.yield_duration, "auto_terminate": list(self.auto_terminate),
            "num_cpus": self.num_cpus, "isolated": self.isolated, "runtime_env": self.runtime_env,
            "primary_node_only": self.primary_node_only, "parameter_context": self.parameter_context,
            "scheduling_strategy": self.scheduling_strategy, "retried_relationships": list(self.retried_relationships),
            "retry_count": self.retry_count, "backoff_mechanism": self.backoff_mechanism,
            "max_backoff_period": self.max_backoff_period, "disabled": self.disabled,
        }


#: what ``Flow.add`` takes besides the type, name and properties (a definition's processor keys)
PROCESSOR_FIELDS = tuple(f for f in ProcessorNode.__dataclass_fields__ if f not in ("name", "type", "properties",
                                                                                   "resolved"))


@dataclass
class Connection:
    """A queue between a source's relationships and a destination processor."""

    source: str
    destination: str
    relationships: tuple[str, ...]
    name: str
    back_pressure_object_threshold: int | None = None
    back_pressure_data_size_threshold: str | None = None
    flowfile_expiration: str = "0 sec"
    prioritizers: tuple[str, ...] = ()
    #: how the connection spreads its FlowFiles over a cluster's nodes (``LOAD_BALANCE_STRATEGIES``;
    #: a flow on one node ignores it)
    load_balance: str = "none"
    #: the attribute whose value picks the node (``partition-by-attribute``)
    partition_attribute: str | None = None
    #: what a transfer to another node compresses (``LOAD_BALANCE_COMPRESSION``)
    load_balance_compression: str = "none"

    @property
    def load_balanced(self) -> bool:
        return self.load_balance != "none"

    @property
    def id(self) -> str:
        """The connection's identity in the repositories: stable across runs of the same flow."""
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "source": self.source, "destination": self.destination,
            "relationships": list(self.relationships),
            "back_pressure_object_threshold": self.back_pressure_object_threshold,
            "back_pressure_data_size_threshold": self.back_pressure_data_size_threshold,
            "flowfile_expiration": self.flowfile_expiration, "prioritizers": list(self.prioritizers),
            "load_balance": self.load_balance, "partition_attribute": self.partition_attribute,
            "load_balance_compression": self.load_balance_compression,
        }


#: what ``Flow.connect`` takes besides the ends and relationships (a definition's connection keys)
CONNECTION_FIELDS = tuple(f for f in Connection.__dataclass_fields__
                          if f not in ("source", "destination", "relationships"))
#: the keys of a definition's object (``Flow.to_dict``)
DEFINITION_KEYS = ("flowactors_flow", "name", "settings", "parameter_context", "parameter_contexts",
                   "controller_services", "processors", "connections")


class Flow:
    def __init__(self, name: str, settings: dict[str, Any] | None = None, *, parameter_context: str | None = None):
        self.name = name
        self.processors: dict[str, ProcessorNode] = {}
        self.connections: list[Connection] = []
        #: controller services by their path (``flowactors.sdk.services``: ``<group>/<name>``)
        self.services: dict[str, ServiceNode] = {}
        #: overrides of ``flowactors.sdk.settings.Settings`` for this flow
        self.settings: dict[str, Any] = dict(settings or {})
        #: parameter contexts by name (``flowactors.sdk.parameters``), and the one processors use
        #: unless they name their own
        self.parameter_contexts: dict[str, params.ParameterContext] = {}
        self.parameter_context = parameter_context
        self._problems: list[str] = []

    # ------------------------------------------------------------------ building
    def add(self, processor_type: type[Processor], name: str | None = None, *,
            properties: dict[str, Any] | None = None, **scheduling: Any) -> ProcessorNode:
        """Place a processor; ``scheduling`` takes the ``ProcessorNode`` fields (run_schedule, ...)."""
        if not (isinstance(processor_type, type) and issubclass(processor_type, Processor)):
            raise TypeError(f"{processor_type!r} is not a Processor subclass")
        name = name or processor_type.__name__
        if name in self.processors:
            self._problems.append(f"two processors are named '{name}'; names must be unique")
            name = f"{name}#{len(self.processors)}"
        unknown = sorted(set(scheduling) - set(PROCESSOR_FIELDS))
        if unknown:
            raise TypeError("; ".join(f"processor '{name}': {unknown_key(k, PROCESSOR_FIELDS, 'a processor field')}"
                                      for k in unknown))
        for listed in ("auto_terminate", "retried_relationships"):
            if listed in scheduling:
                scheduling[listed] = _names(scheduling[listed])
        texts, problems = property_texts(processor_type, properties or {})
        self._problems.extend(f"processor '{name}': {p}" for p in problems)
        node = ProcessorNode(name, processor_type, texts, **scheduling)
        self.processors[name] = node
        return node

    def add_service(self, service_type: type[ControllerService], name: str | None = None, *,
                    properties: dict[str, Any] | None = None, group: str = "", disabled: bool = False) -> ServiceNode:
        """Place a controller service (``flowactors.sdk.services``) in the process group ``group``
        (``""``: the flow's own); processors name it in their properties by ``name``. A
        ``disabled`` one is never enabled (``ServiceNode.disabled``)."""
        if not (isinstance(service_type, type) and issubclass(service_type, ControllerService)):
            raise TypeError(f"{service_type!r} is not a ControllerService subclass")
        texts, problems = property_texts(service_type, properties or {})
        node = ServiceNode(name or service_type.__name__, service_type, texts, group.strip("/"), disabled=disabled)
        self._problems.extend(f"controller service '{node.path}': {p}" for p in problems)
        if node.path in self.services:
            self._problems.append(f"two controller services are named '{node.path}'; names must be unique "
                                  f"in a group")
        self.services[node.path] = node
        if disabled is not False and disabled is not True:
            self._problems.append(f"controller service '{node.path}': disabled must be true or false, not {disabled!r}")
        return node

    @property
    def disabled_services(self) -> set[str]:
        """The paths of the services that are disabled (``ServiceNode.disabled``)."""
        return {path for path, node in self.services.items() if node.disabled is True}

    def enabled_processors(self) -> list[str]:
        """The processors that run: every one but the disabled (``ProcessorNode.disabled``)."""
        return [name for name, node in self.processors.items() if node.disabled is not True]

    def services_used_by(self, processors: Iterable[str]) -> list[ServiceNode]:
        """The services the named processors use, and those these use, in the order to enable
        them: the disabled ones left out (never enabled; a processor using one does not validate)."""
        return [s for s in self._services_used(processors) if s.path not in self.disabled_services]

    def _services_used(self, processors: Iterable[str]) -> list[ServiceNode]:
        """``services_used_by``, the disabled services included."""
        nodes = list(self.services.values())
        wanted = []
        for name in processors:
            node = self.processors[name]
            visible = svc.visible_services(nodes, svc.group_of(name))
            wanted.extend(visible[r] for r in svc.references(node.type, node.property_values).values()
                          if r in visible)
        return svc.dependency_order(wanted, nodes)

    def add_parameter_context(self, name: str, values: dict[str, Any] | None = None, *,
                              sensitive: Iterable[str] = (), inherits: Iterable[str] = (),
                              description: str = "") -> params.ParameterContext:
        """Define a parameter context: ``values`` maps parameter names to values (a sensitive one
        given as None is read from ``FLOWACTORS_PARAMETER_<NAME>`` when the flow runs). The
        first context defined becomes the flow's unless it names one."""
        if name in self.parameter_contexts:
            self._problems.append(f"two parameter contexts are named '{name}'; names must be unique")
        context = params.context_from_values(name, values or {}, sensitive, inherits, description)
        self.parameter_contexts[name] = context
        if self.parameter_context is None:
            self.parameter_context = name
        return context

    def add_input_port(self, name: str = "input", *, disabled: bool = False) -> ProcessorNode:
        """An input port (``flowactors.sdk.ports``): where a stateless trigger's inputs enter;
        a ``disabled`` one is kept but never started (``ProcessorNode.disabled``)."""
        return self.add(InputPort, name, disabled=disabled)

    def add_output_port(self, name: str = "output", *, disabled: bool = False) -> ProcessorNode:
        """An output port: what reaches it is a stateless trigger's result (a failure port, when
        the run names it one, fails the trigger); a ``disabled`` one is never started."""
        return self.add(OutputPort, name, disabled=disabled)

    def connect(self, source: ProcessorNode | str, destination: ProcessorNode | str,
                relationships: str | Iterable[str] = "success", *, name: str | None = None,
                **queue_settings: Any) -> Connection:
        source_name = source if isinstance(source, str) else source.name
        destination_name = destination if isinstance(destination, str) else destination.name
        rels = _names(relationships)
        name = name or default_connection_name(source_name, rels, destination_name)
        unknown = sorted(set(queue_settings) - set(CONNECTION_FIELDS))
        if unknown:
            raise TypeError("; ".join(f"connection '{name}': {unknown_key(k, CONNECTION_FIELDS, 'a connection field')}"
                                      for k in unknown))
        connection = Connection(source_name, destination_name, rels, name, **queue_settings)
        connection.prioritizers = tuple(connection.prioritizers)
        for attribute in ("load_balance", "load_balance_compression"):  # NiFi's spelling accepted
            value = getattr(connection, attribute)
            setattr(connection, attribute, _NIFI_NAMES.get(value, value))
        self.connections.append(connection)
        return connection

    # ------------------------------------------------------------------ checking
    def problems(self) -> list[str]:
        """Every problem with the flow, one sentence each (empty when the flow is valid)."""
        problems = list(self._problems)
        try:
            Settings.from_dict(self.settings)
        except SettingsError as err:
            problems.extend(err.problems)
        if not self.processors:
            problems.append("the flow has no processors")
        resolving, secrets = self._resolve_parameters()
        problems.extend(resolving)
        enabled = [self.processors[name] for name in self.enabled_processors()]
        for node in enabled:
            problems.extend(params.redact(f"processor '{node.name}': {p}", secrets.get(node.name, ()))
                            for p in node.type.validate_properties(node.property_values))
        for node in self.processors.values():
            problems.extend(f"processor '{node.name}': {p}" for p in _scheduling_problems(node))
        problems.extend(svc.flow_problems(self.services, ((n.name, n.type, n.property_values) for n in enabled)))
        problems.extend(self._disabled_service_problems(enabled))
        connected: dict[str, set[str]] = {name: set() for name in self.processors}
        incoming: set[str] = set()
        names_seen: set[str] = set()
        for c in self.connections:
            if c.name in names_seen:
                problems.append(f"two connections are named '{c.name}'; names must be unique")
            names_seen.add(c.name)
            for end, label in ((c.source, "source"), (c.destination, "destination")):
                if end not in self.processors:
                    problems.append(f"connection '{c.name}': its {label} '{end}' is not a processor of this flow")
            if c.source in self.processors:
                source_node = self.processors[c.source]
                declared = set(source_node.type.relationship_names(source_node.property_values))
                for rel in c.relationships:
                    if rel not in declared:
                        problems.append(f"connection '{c.name}': '{c.source}' has no relationship '{rel}' "
                                        f"(it has: {', '.join(sorted(declared)) or 'none'})")
                connected[c.source].update(c.relationships)
            incoming.add(c.destination)
            problems.extend(f"connection '{c.name}': {p}" for p in _queue_problems(c))
        for node in self.processors.values():
            declared = set(node.type.relationship_names(node.property_values))
            for rel in node.auto_terminate:
                if rel not in declared:
                    problems.append(f"processor '{node.name}': cannot auto-terminate unknown relationship '{rel}'")
            for rel in node.retried_relationships:
                if rel not in declared:
                    problems.append(f"processor '{node.name}': cannot retry unknown relationship '{rel}' "
                                    f"(it has: {', '.join(sorted(declared)) or 'none'})")
            if node.disabled is True:   # loaded, never started: its wiring is not checked (as NiFi)
                continue
            for rel in sorted(declared - connected[node.name] - set(node.auto_terminate)):
                problems.append(f"processor '{node.name}': relationship '{rel}' is neither connected "
                                f"nor auto-terminated")
            if node.type.input_required and node.name not in incoming:
                problems.append(f"processor '{node.name}' needs an incoming connection")
            if not node.type.input_required and not node.type.input_allowed and node.name in incoming:
                problems.append(f"processor '{node.name}' is a source and accepts no incoming connection")
        return problems

    def _disabled_service_problems(self, enabled: list[ProcessorNode]) -> list[str]:
        """A problem for each processor that is not disabled and uses a disabled service (itself
        or through the services it uses), as NiFi keeps such a processor invalid."""
        if not self.disabled_services:
            return []
        problems = []
        for node in enabled:
            try:
                used = self._services_used([node.name])
            except svc.ServiceEnableError:   # a cycle of services: said by flow_problems
                continue
            for service in used:
                if service.path in self.disabled_services:
                    problems.append(f"processor '{node.name}' uses controller service '{service.path}', which is "
                                    f"disabled: enable the service, or disable the processor too")
        return problems

    def _resolve_parameters(self) -> tuple[list[str], dict[str, list[str]]]:
        """Resolve every processor's ``#{...}`` references into ``node.resolved``: the problems,
        and each processor's sensitive values (which no problem may show)."""
        problems = []
        offered: dict[str | None, dict] = {None: {}}   # what each context offers, looked up once
        for name in self.parameter_contexts:
            try:
                offered[name] = params.lookup(self.parameter_contexts, name)
            except params.ParameterError as err:   # said once here, not again for each processor
                problems.append(str(err))
                offered[name] = {}
        secrets = {}
        for node in self.processors.values():
            context = node.parameter_context or self.parameter_context
            if context not in offered:   # named, but not defined
                problems.append(f"processor '{node.name}': parameter context '{context}' is not defined")
            available = offered.get(context, {})
            resolved, unresolved = params.resolve(node.properties, available)
            if unresolved and context is None:
                unresolved = [f"{p} (the processor has no parameter context: Flow.add_parameter_context)"
                              for p in unresolved]
            if node.disabled is not True:   # a disabled one's references are not checked (as NiFi)
                problems.extend(f"processor '{node.name}': {p}" for p in unresolved)
            node.resolved = resolved
            sensitive = _sensitive_names(node)
            secrets[node.name] = params.sensitive_values(node.properties, available) + [
                value for name, value in resolved.items() if value and name in sensitive]
        for service in self.services.values():
            resolved, unresolved = params.resolve(service.properties, offered.get(self.parameter_context, {}))
            problems.extend(f"controller service '{service.path}': {p}" for p in unresolved)
            service.resolved = resolved
        return problems, secrets

    def validate(self) -> "Flow":
        problems = self.problems()
        if problems:
            raise FlowValidationError(self.name, problems)
        return self

    # ------------------------------------------------------------------ JSON definition
    def to_dict(self, type_names: dict[str, str] | None = None) -> dict[str, Any]:
        """The definition as a dict, each processor's class named by ``type_names`` (processor name
        -> name; ``to_json`` passes the names other processes import, ``saved_type_name``), else by
        its ``type_name()``: the same for every class but one defined in the script being run,
        named ``__main__.<Class>`` then, which only this process resolves (``to_json`` is what
        saves, and refuses a class no other process can import)."""
        type_names = type_names or {}
        return {
            "flowactors_flow": DEFINITION_VERSION, "name": self.name, "settings": dict(self.settings),
            "parameter_context": self.parameter_context,
            "parameter_contexts": [c.to_dict() for c in self.parameter_contexts.values()],
            "controller_services": [s.to_dict() for s in self.services.values()],
            "processors": [n.to_dict(type_names.get(n.name)) for n in self.processors.values()],
            "connections": [c.to_dict() for c in self.connections],
        }

    def to_json(self) -> str:
        """The definition as JSON text; ``FlowValidationError`` when a processor class could not
        be imported by whoever loads it (``saved_type_name`` says why and what to do)."""
        problems, type_names = [], {}
        for node in self.processors.values():
            try:
                type_names[node.name] = saved_type_name(node.type)
            except ValueError as err:
                problems.append(f"processor '{node.name}': {err}")
            problems.extend(_sensitive_value_problems(f"processor '{node.name}'", node))
        for service in self.services.values():
            problems.extend(_sensitive_value_problems(f"controller service '{service.path}'", service))
        if problems:
            raise FlowValidationError(self.name, problems)
        return orjson.dumps(self.to_dict(type_names), option=orjson.OPT_INDENT_2).decode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Flow":
        """A flow from its flowactors definition, each processor's type named as
        ``resolve_processor_type`` resolves it. A definition exported from NiFi is refused with
        what to use instead: ``flowactors.driver.loading.load_definition`` reads both kinds."""
        if isinstance(data.get("flowContents"), dict):
            raise FlowValidationError(str(data.get("flowContents", {}).get("name", "?")), [
                "this is a flow definition exported from NiFi: load it with "
                "flowactors.driver.loading.load_definition (flowactors run and validate do)"])
        problems: list[str] = [unknown_key(k, DEFINITION_KEYS, "a field of the flow definition")
                               for k in data if k not in DEFINITION_KEYS]
        version = data.get("flowactors_flow")
        if version not in READABLE_VERSIONS:
            raise FlowValidationError(str(data.get("name", "?")), [
                f"'flowactors_flow' is {version!r}; this flowactors reads definition versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}"])
        settings = data.get("settings") or {}
        if not isinstance(settings, dict):
            problems.append(f"'settings' must be an object of setting names and values, not {json_kind(settings)}")
            settings = {}
        texts = {}
        for key in ("name", "parameter_context"):
            texts[key] = data.get(key)
            if not isinstance(texts[key], (str, type(None))):
                problems.append(f"'{key}' must be a string, not {json_kind(texts[key])}")
                texts[key] = None
        contexts = data.get("parameter_contexts") or []
        if not isinstance(contexts, list):
            problems.append(f"'parameter_contexts' must be a list of objects, not {json_kind(contexts)}")
            contexts = []
        flow = cls(texts["name"] or "flow", settings, parameter_context=texts["parameter_context"])
        for entry in contexts:
            try:
                context = params.ParameterContext.from_dict(entry)
            except (params.ParameterError, AttributeError, TypeError) as err:
                problems.append(f"parameter context {entry.get('name', '?') if isinstance(entry, dict) else '?'}: {err}")
                continue
            flow.parameter_contexts[context.name] = context
        for label, entry, fields in entries(data.get("controller_services"), "controller service",
                                             ("type", "properties"), _SERVICE_TABLE, problems):
            try:
                service_type = svc.resolve_service_type(entry.get("type"))
            except (ImportError, AttributeError, TypeError, ValueError) as err:
                problems.append(f"{label}: {err}")
                continue
            if fields is not None:
                flow.add_service(service_type, fields.pop("name", None), properties=properties_of(entry, label, problems),
                                 **fields)
        for label, entry, fields in entries(data.get("processors"), "processor", ("type", "properties"),
                                             _PROCESSOR_TABLE, problems):
            try:
                processor_type = resolve_processor_type(entry.get("type"))
            except (ImportError, AttributeError, TypeError, ValueError) as err:
                problems.append(f"{label}: {err}")
                continue
            if fields is not None:
                flow.add(processor_type, fields.pop("name", None), properties=properties_of(entry, label, problems),
                         **fields)
        for _label, _entry, fields in entries(data.get("connections"), "connection", (), _CONNECTION_TABLE,
                                               problems):
            if fields is not None:
                flow.connect(fields.pop("source"), fields.pop("destination"), fields.pop("relationships"), **fields)
        problems.extend(flow._problems)   # building problems (a null property value, a name used twice)
        if problems:
            raise FlowValidationError(flow.name, problems)
        return flow

    @classmethod
    def from_json(cls, text: str | bytes) -> "Flow":
        """``from_dict`` of a definition's JSON text."""
        return cls.from_dict(read_definition(text))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    def connections_from(self, processor: str) -> list[Connection]:
        return [c for c in self.connections if c.source == processor]

    def connections_to(self, processor: str) -> list[Connection]:
        return [c for c in self.connections if c.destination == processor]

    def renamed_queues(self) -> dict[str, str]:
        """The queue id each connection named by default had before default names became
        shell-safe (``former_default_name``) -> its id now: what was queued under the former is
        recovered under the latter when the flow starts (``FlowController.start``)."""
        return {former_default_name(c.source, c.relationships, c.destination): c.id for c in self.connections
                if c.name == default_connection_name(c.source, c.relationships, c.destination)}

    def destinations(self, processor: str) -> dict[str, list[str]]:
        """Each relationship of ``processor`` -> the ids of the connections it feeds (none when
        auto-terminated)."""
        node = self.processors[processor]
        return {rel: [c.id for c in self.connections_from(processor) if rel in c.relationships]
                for rel in node.type.relationship_names(node.property_values)}


def read_definition(text: str | bytes) -> dict[str, Any]:
    """A definition's JSON text as its object; ``FlowValidationError`` when it is not JSON, or not
    an object (a flowactors definition and a NiFi export alike)."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise FlowValidationError("?", [f"the definition is not valid JSON: {err}"]) from None
    if not isinstance(data, dict):
        raise FlowValidationError("?", ["the definition must be a JSON object"])
    return data


def default_connection_name(source: str, relationships: Sequence[str], destination: str) -> str:
    """A connection's name unless it is given one: ``<source>.<relationships>.<destination>``
    (``generate.success.put``), relationships joined by ``-``, every character but letters,
    digits, ``_`` and ``-`` written as ``-`` within each part: safe to type in a shell command
    (``flowactors queue list generate.success.put``) without quotes."""
    parts = (source, "-".join(relationships), destination)
    return ".".join(_NOT_SHELL_SAFE.sub("-", part).strip("-") or "_" for part in parts)


def former_default_name(source: str, relationships: Sequence[str], destination: str) -> str:
    """The default name flowactors gave a connection before ``default_connection_name``
    (``generate:success->put``), which the shell reads as a redirection; FlowFiles queued under it
    are moved to the new name (``Flow.renamed_queues``)."""
    return f"{source}:{'+'.join(relationships)}->{destination}"


def saved_type_name(processor_type: type[Processor]) -> str:
    """The name a definition stores for ``processor_type``: its ``type_name()``, except for a class
    defined in the script being run (``__main__``), which no other process can import by that
    name: then the name of the script's module as it is importable from ``sys.path`` (its
    ``__spec__`` under ``python -m``, else its file's path below an entry of ``sys.path``).
    ``ValueError`` says why there is none and what to do."""
    if processor_type.__module__ != "__main__":
        return processor_type.type_name()
    qualname = processor_type.__qualname__
    move = (f"move class {qualname} to a module of its own (e.g. processors.py beside the flow) and import "
            f"it from there")
    if "<locals>" in qualname:
        raise ValueError(f"its class {qualname} is defined inside a function, which nothing can import; {move}")
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and not spec.name.endswith("__main__"):
        return f"{spec.name}.{qualname}"   # run as ``python -m package.module``
    path = getattr(main, "__file__", None)
    if path is None:
        raise ValueError(f"its class {qualname} is defined in an interactive session, which no other process "
                         f"can import; {move}")
    path = Path(path).resolve()
    module, problem = _module_of_file(path)
    if module is None:
        raise ValueError(f"its class {qualname} is defined in the script being run ({path.name}), and {problem}; "
                         f"or {move}")
    return f"{module}.{qualname}"


def _module_of_file(path: Path) -> tuple[str | None, str]:
    """The module name ``path`` is imported under from ``sys.path`` (the shortest, when several
    entries hold it), or None and why not."""
    names = []
    for entry in sys.path:
        try:
            relative = path.with_suffix("").relative_to(Path(entry or os.getcwd()).resolve())
        except (ValueError, OSError):
            continue
        names.append(relative.parts)
    if not names:
        return None, "its folder is not on sys.path (add it to PYTHONPATH)"
    parts = min(names, key=len)
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        return None, (f"its path {'/'.join(parts)}.py is not a module name (letters, digits and _ only: "
                      f"rename it, e.g. {'_'.join(re.findall(r'[A-Za-z0-9]+', parts[-1])) or 'flow'}.py)")
    name = ".".join(parts)
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None or Path(found.origin).resolve() != path:
        where = f" ({found.origin})" if found is not None and found.origin else ""
        return None, f"importing '{name}' finds another module{where}: rename the script"
    return name, ""


#: the types that moved, by the name definitions saved before still give them -> their name now
MOVED_TYPES = {"flowactors.processors.ports.InputPort": "flowactors.sdk.ports.InputPort",
               "flowactors.processors.ports.OutputPort": "flowactors.sdk.ports.OutputPort",
               "flowactors.processors.routing.Funnel": "flowactors.sdk.ports.Funnel",
               "flowactors.processors.stateless.ExecuteStateless":
                   "flowactors.processors.execute_stateless.ExecuteStateless"}
#: type names with a scheme of their own -> the module and function that resolve them, imported
#: by name when a definition names one (a NiFi 2 Python processor: docs/flow-definition.md)
TYPE_SCHEMES = {"nifi-python:": ("flowactors.nifi", "resolve_type_name")}


def resolve_processor_type(type_name: Any) -> type[Processor]:
    """The Processor class named ``package.module.Class``; a standard processor, port or funnel
    may be named alone (``GenerateFlowFile``: looked up in ``flowactors.processors``, by name at
    run time as a definition names it), a moved type by its former name (``MOVED_TYPES``), a
    type with a scheme by its scheme's resolver (``TYPE_SCHEMES``: ``nifi-python:<Class>@<place>``)."""
    if isinstance(type_name, str):
        for scheme, (module_name, function) in TYPE_SCHEMES.items():
            if type_name.startswith(scheme):
                resolved: type[Processor] = getattr(importlib.import_module(module_name), function)(type_name)
                return resolved
        type_name = MOVED_TYPES.get(type_name, type_name)
    found: type[Processor] = resolve_component(type_name, Processor, "flowactors.processors", "processor")
    return found


def _sensitive_names(node: ProcessorNode | ServiceNode) -> set[str]:
    """The properties ``node``'s processor or service declares sensitive: their values are never
    written to a definition nor shown in a problem (NiFi's sensitive properties)."""
    return {name for name, descriptor in node.type.descriptor_map().items() if descriptor.sensitive}


def _sensitive_value_problems(label: str, node: ProcessorNode | ServiceNode) -> list[str]:
    """A problem for each sensitive property of ``node`` given a value rather than a parameter."""
    sensitive = _sensitive_names(node)
    return [f"{label}: property '{name}' is sensitive, and a definition never holds a sensitive value; give it "
            f"as a sensitive parameter instead (\"{name}\": \"#{{name}}\" with flow.add_parameter_context(..., "
            f"sensitive=[...]); its value then comes from code or FLOWACTORS_PARAMETER_<NAME>)"
            for name, value in node.properties.items()
            if name in sensitive and params.substitute(value, {p: "" for p in params.references(value)})]


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


_PROCESSOR_TABLE = json_fields(ProcessorNode, ("type", "properties", "resolved"))
_SERVICE_TABLE = json_fields(ServiceNode, ("type", "properties", "resolved"))
_CONNECTION_TABLE = json_fields(Connection, ())


def _scheduling_problems(node: ProcessorNode) -> list[str]:
    problems = []
    durations = [("penalty_duration", node.penalty_duration), ("yield_duration", node.yield_duration),
                 ("max_backoff_period", node.max_backoff_period)]
    if node.scheduling_strategy == "CRON_DRIVEN":
        try:
            cron.parse(node.run_schedule)
        except cron.CronError as err:
            problems.append(f"run_schedule (CRON_DRIVEN): {err}")
    elif node.scheduling_strategy == "TIMER_DRIVEN":
        durations.insert(0, ("run_schedule", node.run_schedule))
    else:
        problems.append(f"scheduling_strategy must be one of {', '.join(SCHEDULING_STRATEGIES)}, "
                        f"not {node.scheduling_strategy!r}")
    for label, value in durations:
        try:
            parse_duration(value)
        except ValueError as err:
            problems.append(f"{label}: {err}")
    if node.backoff_mechanism not in BACKOFF_MECHANISMS:
        problems.append(f"backoff_mechanism must be one of {', '.join(BACKOFF_MECHANISMS)}, "
                        f"not {node.backoff_mechanism!r}")
    if not isinstance(node.retry_count, int) or isinstance(node.retry_count, bool) or node.retry_count < 0:
        problems.append(f"retry_count must be a whole number of 0 or more, not {node.retry_count!r}")
    if not isinstance(node.disabled, bool):
        problems.append(f"disabled must be true or false, not {node.disabled!r}")
    if not isinstance(node.concurrent_tasks, int) or node.concurrent_tasks < 1:
        problems.append(f"concurrent_tasks must be a whole number of at least 1, not {node.concurrent_tasks!r}")
    if node.batch_size is not None and (not isinstance(node.batch_size, int) or node.batch_size < 1):
        problems.append(f"batch_size must be a whole number of at least 1, not {node.batch_size!r}")
    if not isinstance(node.isolated, bool):
        problems.append(f"isolated must be true or false, not {node.isolated!r}")
    if node.runtime_env is not None and not isinstance(node.runtime_env, dict):
        problems.append(f"runtime_env must be a mapping (Ray's runtime_env), not {node.runtime_env!r}")
    else:
        problems.extend(pip_conflicts(node.type.runtime_env) + pip_conflicts(node.runtime_env))
    if not isinstance(node.primary_node_only, bool):
        problems.append(f"primary_node_only must be true or false, not {node.primary_node_only!r}")
    return problems


def _queue_problems(c: Connection) -> list[str]:
    problems = []
    if not c.relationships:
        problems.append("it carries no relationship")
    if c.back_pressure_object_threshold is not None and (
            not isinstance(c.back_pressure_object_threshold, int) or c.back_pressure_object_threshold < 0):
        problems.append("back_pressure_object_threshold must be a whole number of 0 or more")
    if c.back_pressure_data_size_threshold is not None:
        try:
            parse_data_size(c.back_pressure_data_size_threshold)
        except ValueError as err:
            problems.append(f"back_pressure_data_size_threshold: {err}")
    try:
        parse_duration(c.flowfile_expiration)
    except ValueError as err:
        problems.append(f"flowfile_expiration: {err}")
    for p in c.prioritizers:
        if p not in PRIORITIZERS:
            problems.append(f"unknown prioritizer '{p}' (known: {', '.join(PRIORITIZERS)})")
    if c.load_balance not in LOAD_BALANCE_STRATEGIES:
        problems.append(f"load_balance must be one of {', '.join(LOAD_BALANCE_STRATEGIES)}, not {c.load_balance!r}")
    elif c.load_balance == "partition-by-attribute" and not c.partition_attribute:
        problems.append("load_balance 'partition-by-attribute' needs partition_attribute (the attribute "
                        "whose value picks the node)")
    if c.load_balance_compression not in LOAD_BALANCE_COMPRESSION:
        problems.append(f"load_balance_compression must be one of {', '.join(LOAD_BALANCE_COMPRESSION)}, "
                        f"not {c.load_balance_compression!r}")
    if "@" in c.name and c.load_balanced:
        problems.append("a load-balanced connection's name may not contain '@' (its partitions are named "
                        "'<connection>@<node>')")
    return problems
