"""A NiFi 2 Python processor as a flowactors processor type.

``python_processor_type`` reads a processor file (``flowactors.nifi.inspection``) and makes a
``NiFiPythonProcessor`` subclass for it: what flows, validation and the engines ask of a
processor type (properties, relationships for a configuration, problems, the ``runtime_env`` its
dependencies need) answered for that NiFi processor. Answers come from the processor itself where
it can be imported here (its ``getPropertyDescriptors``, ``getRelationships`` after
``customValidate``, ``getDynamicPropertyDescriptor``, ``customValidate``), and from its source
where it cannot (its dependencies are installed only in its own ``runtime_env``; no
``customValidate`` then, and relationships are every ``Relationship(...)`` its class names).

A task of it (``NiFiPythonProcessor`` instance) imports and constructs the NiFi processor in its
own process and drives it as NiFi's Java side does (docs/nifi-python-processors.md):

* FlowFileTransform: one ``transform`` a FlowFile; ``failure`` takes the FlowFile unchanged but for
  the result's attributes (an exception: unchanged, the reason logged); otherwise attributes and
  contents are applied and the FlowFile goes to the named relationship, a copy of the input to
  ``original`` when that is connected;
* FlowFileSource: ``create`` makes one FlowFile; None (or an exception) yields;
* RecordTransform: ``flowactors.nifi.record_transform``.

A type is named in a flow definition as ``nifi-python:<Class>@<file or extensions folder>``.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from flowactors.nifi import extensions, loader
from flowactors.nifi.flowfile import InputFlowFile
from flowactors.nifi.host import ComponentLog, FlowactorsHost
from flowactors.nifi.inspection import ProcessorInfo
from flowactors.nifi.record_transform import READER, WRITER, record_descriptors, transform_records
from flowactors.nifi.validation import custom_problems, property_problems
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship
from flowactors.sdk.records.api import RecordReaderFactory, RecordSetWriterFactory, SchemaRegistry
from flowactors.sdk.services import LookupService, ServiceAPI, SSLContextService, StringLookupService
from nifiapi import properties as nifi_properties
from nifiapi.properties import ExpressionLanguageScope, PropertyDependency, StandardValidators
from nifiapi.relationship import Relationship as NiFiRelationship

#: how a flow definition names a NiFi Python processor type: ``nifi-python:<Class>@<where>``
PREFIX = "nifi-python:"
#: NiFi's default schedule of a Python source (``@DefaultSchedule``)
SOURCE_SCHEDULE = "1 min"
SUCCESS = NiFiRelationship("success", "What the processor produced")
ORIGINAL = NiFiRelationship("original", "The input FlowFile, as it was, once a transform succeeded", True)
FAILURE = NiFiRelationship("failure", "The input FlowFile when the transform failed")


class ProcessorNotValid(RuntimeError):
    """The NiFi processor's configuration is not valid where it runs (its task does not start)."""


# ---------------------------------------------------------------------------------- the model
class Model:
    """What a NiFi processor offers with one configuration."""

    def __init__(self, descriptors: list, relationships: list, problems: list[str], processor: Any):
        self.descriptors = descriptors          # nifiapi PropertyDescriptors, dynamic ones included
        self.relationships = relationships      # nifiapi Relationships, implicit ones included
        self.problems = problems
        self.processor = processor              # the instance asked, or None (read from the source)


def source_descriptors(info: ProcessorInfo) -> list:
    """``nifiapi`` descriptors made from the ``PropertyDescriptor(...)`` calls in the source."""
    made: dict[str, Any] = {}
    for prop in info.properties:
        if prop.name is None or prop.variable in made:
            continue
        scope = ExpressionLanguageScope.__members__.get(prop.expression_language_scope, ExpressionLanguageScope.NONE)
        made[prop.variable] = nifi_properties.PropertyDescriptor(
            prop.name, prop.description or "", required=prop.required, sensitive=prop.sensitive,
            display_name=prop.display_name, default_value=prop.default_value, allowable_values=prop.allowable_values,
            expression_language_scope=scope, dynamic=prop.dynamic,
            validators=[getattr(StandardValidators, v) for v in prop.validators if hasattr(StandardValidators, v)],
            controller_service_definition=prop.controller_service_definition)
    for prop in info.properties:
        if prop.variable in made and prop.dependencies:
            made[prop.variable].dependencies = [PropertyDependency(made[variable], *values)
                                                for variable, values in prop.dependencies if variable in made]
    unique: dict[str, Any] = {}
    for descriptor in made.values():
        unique.setdefault(descriptor.name, descriptor)
    return list(unique.values())


def _ask(processor: Any, method: str, problems: list[str], default: Any, *args: Any) -> Any:
    """``processor.method(*args)``, or ``default`` when it has no such method or it raises (which
    is a problem of the configuration, as NiFi makes it one)."""
    call = getattr(processor, method, None)
    if not callable(call):
        return default
    try:
        return call(*args)
    except Exception as err:
        problems.append(f"{method} failed: {type(err).__name__}: {err}")
        return default


def describe(info: ProcessorInfo, values: Mapping[str, str], processor: Any = None) -> Model:
    """The processor's descriptors, relationships and problems for ``values``, asked of
    ``processor`` (an instance) or, when None, read from the source."""
    problems: list[str] = []
    if processor is None:
        own = source_descriptors(info)
    else:
        own = list(_ask(processor, "getPropertyDescriptors", problems, None) or [])
    descriptors = (record_descriptors() if info.interface == "RecordTransform" else []) + own
    names = {d.name for d in descriptors}
    for name in (n for n in values if n not in names):
        if processor is not None and callable(getattr(processor, "getDynamicPropertyDescriptor", None)):
            descriptor = _ask(processor, "getDynamicPropertyDescriptor", problems, None, name)
        elif processor is None and info.defines("getDynamicPropertyDescriptor"):
            descriptor = nifi_properties.PropertyDescriptor(
                name, "", expression_language_scope=ExpressionLanguageScope.FLOWFILE_ATTRIBUTES)
        else:
            descriptor = None
        if descriptor is None:
            problems.append(f"'{name}' is not a property of {info.class_name} "
                            f"(its properties: {', '.join(sorted(names)) or 'none'})")
            continue
        descriptor.dynamic = True
        descriptors.append(descriptor)
    problems.extend(property_problems(descriptors, values))
    if not problems and processor is not None and callable(getattr(processor, "customValidate", None)):
        problems.extend(custom_problems(processor, FlowactorsHost(info.class_name, descriptors, values)))
    return Model(descriptors, _relationships(info, processor, problems), problems, processor)


def _relationships(info: ProcessorInfo, processor: Any, problems: list[str]) -> list:
    """NiFi's implicit relationships, then the processor's (``success`` when it names none)."""
    source = info.interface == "FlowFileSource"
    implicit = [SUCCESS] if source else [ORIGINAL, FAILURE]
    default = [] if source else [SUCCESS]
    if processor is not None:
        custom = list(_ask(processor, "getRelationships", problems, default) or [])
    elif info.defines("getRelationships"):
        custom = [NiFiRelationship(name, description, auto) for name, description, auto in info.relationships]
    else:
        custom = default
    merged: dict[str, Any] = {}
    for relationship in [*implicit, *custom]:
        merged.setdefault(relationship.name, relationship)
    return list(merged.values())


_probes: dict[tuple, Any] = {}
_models: dict[tuple, Model] = {}
_lock = threading.RLock()


def cached_model(info: ProcessorInfo, values: Mapping[str, str]) -> Model:
    """``describe`` with one instance of the processor per process and file version (imported
    here when its imports are found here), remembered per configuration."""
    values = {k: v for k, v in values.items() if v is not None}
    key = (info.path, info.class_name, _mtime(info.path))
    configuration = (key, tuple(sorted(values.items())))
    with _lock:
        model = _models.get(configuration)
        if model is not None:
            return model
        problems: list[str] = []
        processor = None
        if not loader.missing_imports(info):
            try:
                processor = _probes.get(key)
                if processor is None:
                    processor = _probes[key] = loader.instantiate(loader.load_class(info),
                                                                  logger=ComponentLog(info.class_name))
            except loader.ProcessorLoadError as err:
                problems.append(str(err))
        model = describe(info, values, processor)
        model.problems[:0] = problems
        _models[configuration] = model
        return model


def _mtime(path: str) -> int:
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return 0


def _flowactors_descriptor(descriptor: Any) -> PropertyDescriptor:
    return PropertyDescriptor(
        descriptor.name, descriptor.description or "", required=bool(descriptor.required),
        default=descriptor.defaultValue,
        allowable_values=tuple(map(str, descriptor.allowableValues)) if descriptor.allowableValues else None,
        sensitive=bool(descriptor.sensitive),
        expression_language=nifi_properties.expression_scope(descriptor) != ExpressionLanguageScope.NONE,
        service=service_api(getattr(descriptor, "controllerServiceDefinition", None)))


def service_api(definition: str | None) -> type | None:
    """The flowactors service API a NiFi descriptor's ``controller_service_definition`` names
    (its Java interface's simple or full name); ``ServiceAPI`` (any service) for one flowactors
    has no such API for; None when the property names no service."""
    if not definition:
        return None
    return SERVICE_APIS.get(str(definition).rsplit(".", 1)[-1], ServiceAPI)


#: NiFi's service interfaces a Python processor's property may name -> flowactors' APIs
SERVICE_APIS: dict[str, type] = {
    "LookupService": LookupService, "StringLookupService": StringLookupService,
    "RecordReaderFactory": RecordReaderFactory, "RecordSetWriterFactory": RecordSetWriterFactory,
    "SchemaRegistry": SchemaRegistry, "SSLContextService": SSLContextService,
}


# ---------------------------------------------------------------------------------- the processor type
class NiFiPythonProcessor(Processor):
    """Runs one NiFi 2 Python processor; ``python_processor_type`` makes a subclass per processor."""

    #: the processor as its source describes it
    info: ClassVar[ProcessorInfo]
    #: where it was found: its file, or the extensions folder(s) it was looked up in by name
    locator: ClassVar[str]
    #: the version it was looked up by (None: the first found of its class name)
    version: ClassVar[str | None] = None

    @classmethod
    def type_name(cls) -> str:
        chosen = f":{cls.version}" if cls.version is not None else ""
        return f"{PREFIX}{cls.info.class_name}{chosen}@{cls.locator}"

    @classmethod
    def model(cls, values: Mapping[str, str] | None = None) -> Model:
        return cached_model(cls.info, values or {})

    @classmethod
    def descriptor_map(cls) -> dict[str, PropertyDescriptor]:
        return {d.name: _flowactors_descriptor(d) for d in cls.model().descriptors}

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        return [Relationship(r.name, r.description or "") for r in cls.model(values).relationships]

    @classmethod
    def validate_properties(cls, values: Mapping[str, str]) -> list[str]:
        return list(cls.model(values).problems)

    @classmethod
    def scheduling_defaults(cls, properties: Mapping[str, Any], scheduling: dict[str, Any]) -> dict[str, Any]:
        """``scheduling`` with NiFi's defaults added: relationships auto-terminated by default
        (``original``) auto-terminated, and a source's schedule of one minute."""
        values = {k: "true" if v is True else "false" if v is False else str(v) for k, v in properties.items()}
        auto = [r.name for r in cls.model(values).relationships if getattr(r, "auto_terminated", False)]
        given = scheduling.get("auto_terminate", ())
        given = [given] if isinstance(given, str) else list(given)
        out = dict(scheduling, auto_terminate=list(dict.fromkeys([*given, *auto])))
        if not cls.input_required:
            out.setdefault("run_schedule", SOURCE_SCHEDULE)
        return out

    # ------------------------------------------------------------------ a task
    def __init__(self) -> None:
        self.processor: Any = None
        self.logger: ComponentLog | None = None
        self.host: FlowactorsHost | None = None
        self.process_context: Any = None

    def on_scheduled(self, context: ProcessContext) -> None:
        info = type(self).info
        component = getattr(context.state, "component_id", None) or context.name
        identifier = str(uuid.uuid5(uuid.NAMESPACE_URL, f"flowactors:{component}"))
        self.logger = ComponentLog(context.name, identifier)
        self.processor = loader.instantiate(loader.load_class(info), logger=self.logger, identifier=identifier)
        model = describe(info, context.values, self.processor)
        if model.problems:
            raise ProcessorNotValid(f"{context.name} is not valid: {'; '.join(model.problems)}")
        self.host = FlowactorsHost(context.name, model.descriptors, context.values, state=context.state,
                                   on_yield=context.yield_, cluster_state=context.cluster_state,
                                   services=context.services)
        scheduled = getattr(self.processor, "onScheduled", None)
        if callable(scheduled):
            scheduled(nifi_properties.ProcessContext(self.host))
        self.processor.setContext(self.host)
        self.process_context = getattr(self.processor, "process_context", None) or nifi_properties.ProcessContext(
            self.host)

    def on_stopped(self, context: ProcessContext) -> None:
        stopped = getattr(self.processor, "onStopped", None)
        if self.host is not None and callable(stopped):
            stopped(nifi_properties.ProcessContext(self.host))

    def on_trigger(self, context: ProcessContext, session) -> None:
        interface = type(self).info.interface
        if interface == "FlowFileSource":
            self._create(context, session)
        elif interface == "RecordTransform":
            reader, writer = context.values.get(READER), context.values.get(WRITER)
            for flowfile in session.get_batch():
                transform_records(self.processor, self.process_context, session, flowfile, reader, writer, self.logger)
        else:
            self._transform(session)

    def _transform(self, session) -> None:
        keep_original = bool(session.backend.destinations(ORIGINAL.name))
        for flowfile in session.get_batch():
            given = InputFlowFile(session, flowfile)
            try:
                result = self.processor.transformFlowFile(given)
                if result is None:
                    raise TypeError("transform returned None; it must return a FlowFileTransformResult")
                relationship = result.getRelationship()
                attributes = result.getAttributes()
                contents = result.getContents()
            except Exception as err:
                self.logger.error("Failed to transform {}: {}", given, err, err)
                session.transfer(flowfile, FAILURE.name)
                continue
            finally:
                given.close()
            if relationship == FAILURE.name:
                if attributes:
                    flowfile = session.put_all_attributes(flowfile, attributes)
                session.transfer(flowfile, FAILURE.name)
                continue
            original = session.clone(flowfile) if keep_original else None
            if attributes:
                flowfile = session.put_all_attributes(flowfile, attributes)
            if contents is not None:
                flowfile = session.write_bytes(flowfile, bytes(contents))
            session.transfer(flowfile, relationship)
            if original is not None:
                session.transfer(original, ORIGINAL.name)

    def _create(self, context: ProcessContext, session) -> None:
        try:
            result = self.processor.createFlowFile()
        except Exception as err:
            self.logger.error("Failed to create a FlowFile: {}", err, err)
            result = None
        if result is None:
            context.yield_()
            return
        flowfile = session.create()
        attributes = result.getAttributes()
        if attributes:
            flowfile = session.put_all_attributes(flowfile, attributes)
        contents = result.getContents()
        if contents is not None:
            flowfile = session.write_bytes(flowfile, bytes(contents))
        session.transfer(flowfile, result.getRelationship())


# ---------------------------------------------------------------------------------- making types
_types: dict[tuple, type[NiFiPythonProcessor]] = {}


def python_processor_type(source: str | Path, *, extensions: str | Path | Sequence[str | Path] | None = None,
                          version: str | None = None) -> type[NiFiPythonProcessor]:
    """The processor type of a NiFi Python processor: ``source`` is its file (the processor class
    in it: the first by name, as NiFi picks it), or, with ``extensions`` (a folder or several),
    its class name, found as NiFi finds it, of ``version`` when given (``flowactors.nifi.extensions``)."""
    source = str(source)
    names_file = source.endswith(".py") or "/" in source or os.sep in source or Path(source).is_file()
    if extensions is not None and not names_file:
        folders = [extensions] if isinstance(extensions, (str, Path)) else list(extensions)
        return _type_for(source, os.pathsep.join(map(str, folders)), version)
    if version is not None:
        raise ValueError(f"a version ({version}) chooses among the processors of an extensions folder: name the "
                         f"processor's class and its folder (extensions=...), not a file")
    return _type_for(None, source)


def resolve_type_name(type_name: str) -> type[NiFiPythonProcessor]:
    """The type a flow definition names ``nifi-python:<Class>[:<version>]@<file or extensions folders>``."""
    named, at, locator = type_name[len(PREFIX):].partition("@")
    class_name, colon, version = named.partition(":")
    if not (class_name and at and locator) or (colon and not version):
        raise ValueError(f"'{type_name}' does not name a NiFi Python processor as "
                         f"'{PREFIX}<Class>[:<version>]@<file or extensions folder>'")
    return _type_for(class_name, locator, version or None)


def _type_for(class_name: str | None, locator: str, version: str | None = None) -> type[NiFiPythonProcessor]:
    folders = locator.split(os.pathsep)
    if len(folders) == 1 and not Path(locator).is_dir():
        info = extensions.processor_in_file(locator, class_name)
    elif class_name is None:
        raise extensions.ProcessorNotFound(f"{locator} is a folder: name the processor's class, with the folder as "
                                           f"its extensions folder")
    else:
        info = extensions.find_processor(class_name, folders, version)
    key = (info.class_name, info.path, _mtime(info.path), locator, version)
    made = _types.get(key)
    if made is None:
        made = _types[key] = type(info.class_name, (NiFiPythonProcessor,), {
            "__module__": __name__, "__qualname__": info.class_name, "__doc__": info.description,
            "info": info, "locator": locator, "version": version, "description": info.description or "",
            "input_required": info.interface != "FlowFileSource",
            "dynamic_properties": info.defines("getDynamicPropertyDescriptor"),
            "runtime_env": extensions.runtime_env(info),
        })
    return made
