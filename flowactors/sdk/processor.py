"""The processor API: what a processor declares and the context it runs with.

A processor is a plain Python class. It declares its ``properties`` and ``relationships`` as class
attributes and implements ``on_trigger(context, session)``; the runtime creates one instance per
concurrent task inside a Ray actor. The session (``flowactors.sdk.session``) is its only door to data.
"""

from __future__ import annotations

import codecs
import importlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from flowactors.sdk.expression import ExpressionError, compile_value
from flowactors.sdk.suggest import closest
from flowactors.sdk.units import parse_data_size, parse_duration
from repositories.model import FlowFile

if TYPE_CHECKING:  # annotations only: the stateless API names the flow, which names processors
    from flowactors.sdk.flow_service import FlowService
    from flowactors.sdk.stateless_api import StatelessEngine

#: A validator returns None when the value is fine, or a sentence saying what is wrong.
Validator = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Relationship:
    """A named outlet of a processor; every relationship must be connected or auto-terminated."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class PropertyDescriptor:
    """A configurable property, validated when the flow is validated (not when it first runs)."""

    name: str
    description: str = ""
    required: bool = False
    default: str | None = None
    allowable_values: tuple[str, ...] | None = None
    validator: Validator | None = None
    sensitive: bool = False
    #: whether the value may hold ``${...}`` expressions evaluated against each FlowFile
    expression_language: bool = False
    #: the API a controller service named by the value must provide (NiFi's
    #: ``identifiesControllerService``): a class of ``flowactors.sdk.services`` such as
    #: ``RecordReaderFactory``; the value is then a service's name, checked when the flow validates
    service: type | None = None


@dataclass(frozen=True)
class ValidationResult:
    subject: str
    problem: str


def _checks(convert: Callable[[str], Any]) -> Validator:
    def validate(value: str) -> str | None:
        try:
            convert(value)
        except (ValueError, re.error) as err:
            return str(err)
        return None

    return validate


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"{value!r} must be zero or more")
    return number


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError(f"{value!r} must be a positive whole number")
    return number


def _charset_problem(value: str) -> str | None:
    try:
        codecs.lookup(value)
    except (LookupError, ValueError):   # ValueError: a NUL in the name
        return f"{value!r} is not a character set Python knows (e.g. UTF-8, ISO-8859-1, US-ASCII, cp932)"
    return None


class validators:
    """Ready-made validators for common property kinds."""

    NON_EMPTY: Validator = staticmethod(lambda v: None if v.strip() else "must not be empty")
    INTEGER: Validator = staticmethod(_checks(int))
    NON_NEGATIVE_INTEGER: Validator = staticmethod(_checks(_non_negative_int))
    POSITIVE_INTEGER: Validator = staticmethod(_checks(_positive_int))
    DURATION: Validator = staticmethod(_checks(parse_duration))
    DATA_SIZE: Validator = staticmethod(_checks(parse_data_size))
    REGEX: Validator = staticmethod(_checks(re.compile))
    #: a character set name Python's codecs know (Python's names: Java's Windows-31J is cp932)
    CHARSET: Validator = staticmethod(_charset_problem)
    BOOLEAN: Validator = staticmethod(
        lambda v: None if v.lower() in ("true", "false") else "must be true or false"
    )


class PropertyValue:
    """A configured property value, with conversions and expression evaluation."""

    __slots__ = ("raw", "_compiled")

    def __init__(self, raw: str | None):
        self.raw = raw
        self._compiled = compile_value(raw) if raw is not None else None

    @property
    def is_set(self) -> bool:
        return self.raw is not None

    def evaluate(self, flowfile: FlowFile | None = None, attributes: Mapping[str, str] | None = None) -> str | None:
        """The value with its ``${...}`` expressions evaluated against a FlowFile's attributes."""
        if self._compiled is None:
            return None
        return self._compiled.evaluate(attributes, flowfile=flowfile)  # fast for literals; turns $${ into ${

    def as_str(self, flowfile: FlowFile | None = None) -> str | None:
        return self.evaluate(flowfile)

    def as_int(self, flowfile: FlowFile | None = None) -> int | None:
        value = self.evaluate(flowfile)
        return None if value in (None, "") else int(value)

    def as_bool(self, flowfile: FlowFile | None = None) -> bool:
        return (self.evaluate(flowfile) or "").lower() == "true"

    def as_duration(self, flowfile: FlowFile | None = None) -> float | None:
        value = self.evaluate(flowfile)
        return None if value in (None, "") else parse_duration(value)

    def as_data_size(self, flowfile: FlowFile | None = None) -> int | None:
        value = self.evaluate(flowfile)
        return None if value in (None, "") else parse_data_size(value)

    def __repr__(self) -> str:
        return f"PropertyValue({self.raw!r})"


class PropertyLookup:
    """What a processor's and a service's contexts share: their property values, as configured
    (``values``, by name) or by default (``descriptors``), and the services they reach
    (``services``, by the names properties give them); ``_properties`` caches each value."""

    values: Mapping[str, str]
    descriptors: Mapping[str, PropertyDescriptor]
    services: Mapping[str, Any]
    _properties: dict[str, PropertyValue]

    # defined before ``property`` below, whose name would otherwise shadow the decorator
    @property
    def dynamic_properties(self) -> dict[str, str]:
        """Properties the user set that the component does not declare (UpdateAttribute's, a
        registry's schemas)."""
        return {k: v for k, v in self.values.items() if k not in self.descriptors}

    def property(self, name: str) -> PropertyValue:
        """The value of a declared or dynamic property (the default when not set)."""
        return property_value(self._properties, self.values, self.descriptors, name)

    def service(self, name: str, api: type | None = None) -> Any:
        """The enabled controller service the property ``name`` names (NiFi's
        ``asControllerService``); ``api``, when given, is the API it must provide.
        ``ServiceNotFound`` says what is missing (the flow's validation catches it before a run)."""
        return find_service(self.services, self.property(name).raw, f"property '{name}'", api)


@dataclass
class ProcessContext(PropertyLookup):
    """What a processor knows about its configuration and where it runs."""

    name: str
    processor_type: str
    descriptors: Mapping[str, PropertyDescriptor]
    values: Mapping[str, str]
    #: the relationships connected downstream or auto-terminated (all, once a flow validates)
    relationships: Sequence[Relationship] = ()
    #: which of the processor's concurrent tasks this context belongs to (0 to concurrent_tasks - 1)
    instance: int = 0
    concurrent_tasks: int = 1
    batch_size: int = 1000
    #: whether a connection brings FlowFiles to the processor (NiFi's ``hasIncomingConnection``),
    #: set by the engine: a processor that allows input without needing it (``input_allowed``) is
    #: a source without one, and with one does nothing on a trigger that finds its queues empty
    has_incoming_connection: bool = False
    #: the processor's state (``flowactors.sdk.state.ProcessorState``), set by the engine
    state: Any = field(default=None, repr=False)
    #: on a flow across several nodes (each with its own repositories and so its own ``state``):
    #: the processor's state every node shares (NiFi's cluster scope;
    #: ``flowactors.engine.cluster.cluster_state.ClusterState``), set by the engine; None on one node
    cluster_state: Any = field(default=None, repr=False)
    #: the stateless engine, for a processor that runs a flow inside it (ExecuteStateless), set by
    #: the engine running the processor (``flowactors.sdk.stateless_api``); None where none is offered
    stateless_engine: "StatelessEngine | None" = field(default=None, repr=False)
    #: the enabled controller services the processor may use, by the names its properties give
    #: them (``flowactors.sdk.services.visible_services``), set by the engine; read with ``service``
    services: Mapping[str, Any] = field(default_factory=dict, repr=False)
    _properties: dict[str, PropertyValue] = field(default_factory=dict, repr=False)
    _yield_requested: bool = field(default=False, repr=False)

    def yield_(self) -> None:
        """Ask the runtime not to trigger this processor again until its yield duration passed."""
        self._yield_requested = True

    def take_yield_request(self) -> bool:
        """Whether the processor asked to yield (``yield_``) since the engine last asked; the
        request is cleared (the engine asks once after each trigger)."""
        requested, self._yield_requested = self._yield_requested, False
        return requested


def property_value(cache: dict[str, PropertyValue], values: Mapping[str, str],
                   descriptors: Mapping[str, PropertyDescriptor], name: str) -> PropertyValue:
    """A context's value of the property ``name`` (the default when not set), kept in ``cache``."""
    value = cache.get(name)
    if value is None:
        raw = values.get(name)
        if raw is None and name in descriptors:
            raw = descriptors[name].default
        value = cache[name] = PropertyValue(raw)
    return value


def takes_input(kind: type[Processor], has_incoming: bool) -> bool:
    """Whether a processor of ``kind`` waits for FlowFiles to be triggered: it needs input, or it
    allows input and has an incoming connection (``Processor.input_allowed``)."""
    return kind.input_required or (kind.input_allowed and has_incoming)


def resolve_component(type_name: Any, base: type, standard: str, kind: str) -> type:
    """The ``base`` subclass a definition names ``package.module.Class``, or by its name alone
    when it is one of the standard ones (looked up in the module ``standard``, by name at run
    time). ``kind`` names what it is in messages ("processor", "controller service")."""
    if not isinstance(type_name, str) or not type_name:
        raise ValueError(f"'type' must name a {kind} class, not {type_name!r}")
    named = type_name
    if "." not in type_name:
        type_name = f"{standard}.{type_name}"
    module_name, _, class_name = type_name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(f"cannot import '{module_name}' for {kind} type '{type_name}': {err}") from None
    found = getattr(module, class_name, None)
    if isinstance(found, type) and issubclass(found, base):
        return found
    if module_name == standard:
        match = closest(class_name, getattr(module, "__all__", ()))
        hint = f"did you mean '{match}'?" if match else "the docs list them"
        raise TypeError(f"'{named}' is not a {kind} flowactors has ({hint})")
    what = "is a class, but not a" if isinstance(found, type) else "names no"
    raise TypeError(f"'{type_name}' {what} {kind} (a subclass of {base.__module__}.{base.__name__})")


class ServiceNotFound(LookupError):
    """A property names a controller service the component cannot reach (none of that name is
    enabled where it runs, or it provides another API)."""


def find_service(services: Mapping[str, Any], reference: str | None, where: str, api: type | None) -> Any:
    """The service ``reference`` names among ``services`` (a context's), checked to provide ``api``."""
    if reference is None:
        raise ServiceNotFound(f"{where} names no controller service")
    found = services.get(reference)
    if found is None:
        known = ", ".join(sorted(services)) or "none"
        raise ServiceNotFound(f"{where} names controller service '{reference}', which is not enabled here "
                              f"(enabled: {known})")
    if api is not None and not isinstance(found, api):
        raise ServiceNotFound(f"{where} names controller service '{reference}' ({type(found).__name__}), "
                              f"which is not a {api.__name__}")
    return found


class Component:
    """What processors and controller services share: declared properties and their validation.

    Subclasses set ``properties``; ``dynamic_properties = True`` accepts properties that are not
    declared (their values are validated as expressions).
    """

    properties: ClassVar[Sequence[PropertyDescriptor]] = ()
    dynamic_properties: ClassVar[bool] = False
    #: what the component does, in a sentence (shown with its type; purely informative)
    description: ClassVar[str] = ""

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        """Extra checks over the whole configuration; return one sentence per problem."""
        return []

    @classmethod
    def type_name(cls) -> str:
        return f"{cls.__module__}.{cls.__qualname__}"

    @classmethod
    def descriptor_map(cls) -> dict[str, PropertyDescriptor]:
        return {d.name: d for d in cls.properties}

    @classmethod
    def validate_properties(cls, values: Mapping[str, str]) -> list[str]:
        """Every problem with the given property values, one sentence each (a property naming a
        controller service is checked by the flow, which knows its services)."""
        problems: list[str] = []
        descriptors = cls.descriptor_map()
        for name, descriptor in descriptors.items():
            value = values.get(name, descriptor.default)
            if value is None:
                if descriptor.required:
                    problems.append(f"property '{name}' is required")
                continue
            problems.extend(_validate_value(descriptor, value))
        for name, value in values.items():
            if name in descriptors:
                continue
            if not cls.dynamic_properties:
                match = closest(name, descriptors)
                problems.append(
                    f"'{name}' is not a property of {cls.__name__}; did you mean '{match}'?" if match else
                    f"'{name}' is not a property of {cls.__name__} "
                    f"(its properties: {', '.join(sorted(descriptors)) or 'none'})"
                )
                continue
            problems.extend(_expression_problems(name, value))
        if not problems:
            problems.extend(cls().custom_validate(values))
        return problems


class Processor(Component):
    """Base class of every processor.

    Subclasses set ``properties`` and ``relationships`` and implement ``on_trigger``. Set
    ``dynamic_properties = True`` to accept properties that are not declared (their values are
    validated as expressions). ``input_required`` says whether the processor needs an incoming
    connection (False for sources such as GenerateFlowFile); a source that sets ``input_allowed``
    may have incoming connections too (NiFi's ``INPUT_ALLOWED``, ExecuteScript's): with them it is
    triggered when FlowFiles wait, as a processor that needs input, without them on its schedule,
    as a source (``takes_input``).
    """

    relationships: ClassVar[Sequence[Relationship]] = ()
    input_required: ClassVar[bool] = True
    input_allowed: ClassVar[bool] = False
    #: trigger even when the input queues are empty (e.g. to flush bins that reached their max age)
    trigger_when_empty: ClassVar[bool] = False
    #: trigger while any destination has room, not only when none is full (NiFi's
    #: ``@TriggerWhenAnyDestinationAvailable``): the processor routes by
    #: ``session.available_relationships()``
    trigger_when_any_destination_available: ClassVar[bool] = False
    #: a Ray ``runtime_env`` every use of this processor type needs (a NiFi Python processor's
    #: dependencies): merged with the node's own, it gives each task an actor of its own
    runtime_env: ClassVar[dict | None] = None
    #: the flow services this processor may use (``flowactors.sdk.flow_service``): the engine starts
    #: each one the flow needs before the processors and stops it after them
    flow_services: ClassVar["Sequence[FlowService]"] = ()

    def on_scheduled(self, context: ProcessContext) -> None:
        """Called once in each task's actor before the first trigger."""

    def on_stopped(self, context: ProcessContext) -> None:
        """Called once in each task's actor when the flow stops."""

    def on_trigger(self, context: ProcessContext, session) -> None:
        raise NotImplementedError

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> Sequence[Relationship]:
        """The relationships given these property values (RouteOnAttribute adds one per property)."""
        return cls.relationships

    @classmethod
    def relationship_names(cls, values: Mapping[str, str] | None = None) -> list[str]:
        return [r.name for r in cls.relationships_for(values or {})]


def _expression_problems(name: str, value: str) -> list[str]:
    try:
        compile_value(value)
    except ExpressionError as err:
        return [f"property '{name}': {err}"]
    return []


def _validate_value(descriptor: PropertyDescriptor, value: str) -> list[str]:
    name = descriptor.name
    if not isinstance(value, str):
        return [f"property '{name}' must be a string, not {type(value).__name__}"]
    if descriptor.expression_language:
        problems = _expression_problems(name, value)
        if problems or "${" in value:
            return problems  # the value is known only per FlowFile
    elif "${" in value and "$${" not in value:
        return [f"property '{name}' does not support expressions, but its value contains '${{'"]
    if descriptor.allowable_values is not None and value not in descriptor.allowable_values:
        return [f"property '{name}' is {value!r}; allowed: {', '.join(descriptor.allowable_values)}"]
    if descriptor.validator is not None:
        problem = descriptor.validator(value)
        if problem:
            return [f"property '{name}': {problem}"]
    return []
