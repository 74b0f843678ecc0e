"""Property descriptors, validators, property values and the contexts a processor reads them from.

Names and signatures are those of NiFi 2's ``nifiapi.properties``. The validators, which are Java
objects in NiFi, are Python objects here that check a value the way the Java ones do; the
contexts read from a host (``nifiapi._host.Host``) instead of a Java context.
"""

from __future__ import annotations

import io
import datetime
import math
import os
import re
import urllib.parse
import urllib.request
from decimal import Decimal
from enum import Enum
from typing import Any, Callable

from nifiapi.componentstate import StateManager


class ExpressionLanguageScope(Enum):
    """Where a property's expressions may look: nowhere, the environment, or also the FlowFile."""

    NONE = 1
    ENVIRONMENT = 2
    FLOWFILE_ATTRIBUTES = 3


# ---------------------------------------------------------------------------------- validators
class Validator:
    """One of ``StandardValidators``: checks a configured value as NiFi's Java validator does.

    ``check(value)`` returns None when the value is fine, else why not. Unless ``el_exempt`` is
    False, a value holding an expression counts as valid where the property supports expressions
    (it is known only when evaluated), as in NiFi.
    """

    def __init__(self, name: str, check: Callable[[str], str | None], el_exempt: bool = True):
        self.name = name
        self._check = check
        self.el_exempt = el_exempt

    def problem(self, value: str | None, expression_applies: bool = False) -> str | None:
        """Why ``value`` is not valid, or None. ``expression_applies``: the property supports
        expressions and the value holds one."""
        if expression_applies and self.el_exempt:
            return None
        if value is None:
            return "a value is required"
        return self._check(value)

    def validate(self, subject: str, input: str | None, context: Any = None) -> "ValidationResult":  # noqa: A002
        """The Java ``Validator.validate`` call, for processors that call a validator themselves."""
        applies = False
        if context is not None and input is not None:
            supported = getattr(context, "isExpressionLanguageSupported", None)
            present = getattr(context, "isExpressionLanguagePresent", None)
            applies = bool(supported and present and supported(subject) and present(input))
        explanation = self.problem(input, applies)
        return ValidationResult(subject=subject, explanation=explanation or "", valid=explanation is None, input=input)

    def __repr__(self) -> str:
        return f"StandardValidators.{self.name}"


_JAVA_INT = (-(2 ** 31), 2 ** 31 - 1)
_JAVA_LONG = (-(2 ** 63), 2 ** 63 - 1)
_WHOLE = re.compile(r"[+-]?\d+")


def _whole(value: str, bounds: tuple[int, int], low: int | None = None, high: int | None = None,
           what: str = "an integer") -> str | None:
    if not _WHOLE.fullmatch(value):
        return f"{value!r} is not {what}"
    number = int(value)
    if not bounds[0] <= number <= bounds[1]:
        return f"{value!r} is out of range for {what}"
    if low is not None and number < low:
        return f"{value!r} must be at least {low}"
    if high is not None and number > high:
        return f"{value!r} must be at most {high}"
    return None


def _non_empty(value: str) -> str | None:
    return None if value else "the value may not be empty"


def _number(value: str) -> str | None:
    # Java's NumberFormat parses a leading number and ignores what follows it
    return None if re.match(r"-?(\d|\.\d)", value) else f"{value!r} is not a number"


def _boolean(value: str) -> str | None:
    return None if value.lower() in ("true", "false") else f"{value!r} is not 'true' or 'false'"


def _hostname_port_list(value: str) -> str | None:
    for entry in value.split(","):
        entry = entry.strip()
        host, colon, port = entry.rpartition(":")
        if not colon or not host or "://" in entry:
            return f"{entry!r} is not 'host:port'"
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            return f"{entry!r} does not name a port from 1 to 65535"
    return None


_URL_SCHEMES = ("http", "https", "ftp", "file", "jar")


def _url(value: str) -> str | None:
    scheme = urllib.parse.urlsplit(value).scheme.lower()
    return None if scheme in _URL_SCHEMES else f"{value!r} is not a URL (it needs one of {', '.join(_URL_SCHEMES)})"


_URI_FORBIDDEN = re.compile(r"[\s\"<>\\^`{|}]|%(?![0-9A-Fa-f]{2})")


def _uri(value: str) -> str | None:
    bad = _URI_FORBIDDEN.search(value)
    return None if bad is None else f"{value!r} is not a URI (character {bad.group()!r} at {bad.start()})"


def _regex(value: str) -> str | None:
    try:
        re.compile(value)
    except re.error as err:
        return f"{value!r} is not a regular expression: {err}"
    return None


_NANOS_PER = {}
for _names, _nanos in (
        (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
        (("ms", "milli", "millis", "millisecond", "milliseconds"), 10 ** 6),
        (("s", "sec", "secs", "second", "seconds"), 10 ** 9),
        (("m", "min", "mins", "minute", "minutes"), 60 * 10 ** 9),
        (("h", "hr", "hrs", "hour", "hours"), 3600 * 10 ** 9),
        (("d", "day", "days"), 86400 * 10 ** 9),
        (("w", "wk", "wks", "week", "weeks"), 7 * 86400 * 10 ** 9)):
    _NANOS_PER.update(dict.fromkeys(_names, _nanos))
_TIME_PERIOD = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")
_DATA_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB)\s*", re.IGNORECASE)
_BYTES_PER = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}


def _time_period(value: str) -> str | None:
    match = _TIME_PERIOD.fullmatch(value)
    if match is None or match.group(2).lower() not in _NANOS_PER:
        return f"{value!r} is not a time period such as '30 sec' or '5 mins'"
    return None


def _data_size(value: str) -> str | None:
    return None if _DATA_SIZE.fullmatch(value) else f"{value!r} is not a data size such as '10 MB'"


def _file_exists(value: str) -> str | None:
    return None if os.path.exists(value) else f"the file {value!r} does not exist"


class StandardValidators:
    """NiFi's standard validators (the 18 its Python API offers)."""

    ALWAYS_VALID = Validator("ALWAYS_VALID", lambda value: None, el_exempt=False)
    NON_EMPTY_VALIDATOR = Validator("NON_EMPTY_VALIDATOR", _non_empty, el_exempt=False)
    INTEGER_VALIDATOR = Validator("INTEGER_VALIDATOR", lambda v: _whole(v, _JAVA_INT))
    POSITIVE_INTEGER_VALIDATOR = Validator("POSITIVE_INTEGER_VALIDATOR",
                                           lambda v: _whole(v, _JAVA_INT, low=1, what="a positive integer"))
    POSITIVE_LONG_VALIDATOR = Validator("POSITIVE_LONG_VALIDATOR",
                                        lambda v: _whole(v, _JAVA_LONG, low=1, what="a positive long"))
    NON_NEGATIVE_INTEGER_VALIDATOR = Validator("NON_NEGATIVE_INTEGER_VALIDATOR",
                                               lambda v: _whole(v, _JAVA_INT, low=0, what="a non-negative integer"))
    NUMBER_VALIDATOR = Validator("NUMBER_VALIDATOR", _number)
    LONG_VALIDATOR = Validator("LONG_VALIDATOR", lambda v: _whole(v, _JAVA_LONG, what="a long"))
    PORT_VALIDATOR = Validator("PORT_VALIDATOR", lambda v: _whole(v, _JAVA_INT, 0, 65535, what="a port"))
    NON_EMPTY_EL_VALIDATOR = Validator("NON_EMPTY_EL_VALIDATOR", _non_empty)
    HOSTNAME_PORT_LIST_VALIDATOR = Validator("HOSTNAME_PORT_LIST_VALIDATOR", _hostname_port_list)
    BOOLEAN_VALIDATOR = Validator("BOOLEAN_VALIDATOR", _boolean)
    URL_VALIDATOR = Validator("URL_VALIDATOR", _url)
    URI_VALIDATOR = Validator("URI_VALIDATOR", _uri)
    REGULAR_EXPRESSION_VALIDATOR = Validator("REGULAR_EXPRESSION_VALIDATOR", _regex, el_exempt=False)
    REGULAR_EXPRESSION_WITH_EL_VALIDATOR = Validator("REGULAR_EXPRESSION_WITH_EL_VALIDATOR", _regex)
    TIME_PERIOD_VALIDATOR = Validator("TIME_PERIOD_VALIDATOR", _time_period)
    DATA_SIZE_VALIDATOR = Validator("DATA_SIZE_VALIDATOR", _data_size)
    FILE_EXISTS_VALIDATOR = Validator("FILE_EXISTS_VALIDATOR", _file_exists)


# ---------------------------------------------------------------------------------- descriptors
class PropertyDependency:
    """The property is shown and used only while ``property_descriptor`` has a value (one of
    ``dependent_values`` when any are given)."""

    def __init__(self, property_descriptor, *dependent_values):
        self.property_descriptor = property_descriptor
        self.dependent_values = dependent_values

    @staticmethod
    def from_java_dependency(java_dependencies):
        """NiFi converts Java dependencies here; outside Java they already are these objects."""
        if not java_dependencies:
            return None
        return list(java_dependencies)


class ResourceType(Enum):
    """What a resource property may reference."""

    FILE = "FILE"
    DIRECTORY = "DIRECTORY"
    TEXT = "TEXT"
    URL = "URL"


class ResourceDefinition:
    """What kinds of resources a property references, and whether several."""

    def __init__(self, allow_multiple=False, allow_file=True, allow_url=False, allow_directory=False,
                 allow_text=False):
        self.allow_multiple = allow_multiple
        self.allow_file = allow_file
        self.allow_url = allow_url
        self.allow_directory = allow_directory
        self.allow_text = allow_text

    def resource_types(self) -> list[ResourceType]:
        """The allowed types, in NiFi's order."""
        return [t for t, allowed in ((ResourceType.FILE, self.allow_file), (ResourceType.DIRECTORY, self.allow_directory),
                                     (ResourceType.URL, self.allow_url), (ResourceType.TEXT, self.allow_text)) if allowed]

    @staticmethod
    def from_java_definition(java_definition):
        return java_definition if isinstance(java_definition, ResourceDefinition) else None


class PropertyDescriptor:
    """A property a processor supports. ``name`` is the key the value is stored under."""

    def __init__(self, name, description, required=False, sensitive=False,
                 display_name=None, default_value=None, allowable_values=None,
                 dependencies=None, expression_language_scope=ExpressionLanguageScope.NONE,
                 dynamic=False, validators=None,
                 resource_definition=None, controller_service_definition=None):
        self.name = name
        self.description = description
        self.required = required
        self.sensitive = sensitive
        self.displayName = display_name
        self.defaultValue = None if default_value is None else str(default_value)
        self.allowableValues = allowable_values
        self.dependencies = dependencies
        self.expressionLanguageScope = expression_language_scope
        self.dynamic = dynamic
        self.validators = [StandardValidators.ALWAYS_VALID] if validators is None else validators
        self.resourceDefinition = resource_definition
        self.controllerServiceDefinition = controller_service_definition

    @staticmethod
    def from_java_descriptor(java_descriptor):
        """NiFi converts a Java descriptor here; outside Java it already is one of these."""
        return java_descriptor

    def __repr__(self) -> str:
        return f"PropertyDescriptor({self.name!r})"


class ValidationResult:
    """One outcome of ``customValidate``: only those with ``valid=False`` count."""

    def __init__(self, subject="", explanation="", valid=False, input=None):  # noqa: A002
        self.subject = subject
        self.explanation = explanation
        self.valid = valid
        self.input = input

    def __repr__(self) -> str:
        return f"ValidationResult(subject={self.subject!r}, valid={self.valid}, explanation={self.explanation!r})"


def expression_scope(descriptor) -> ExpressionLanguageScope:
    """A descriptor's scope as the enum (NiFi's own contexts sometimes hold its name)."""
    scope = getattr(descriptor, "expressionLanguageScope", ExpressionLanguageScope.NONE)
    if isinstance(scope, str):
        return ExpressionLanguageScope[scope]
    return scope or ExpressionLanguageScope.NONE


def dependencies_satisfied(descriptor, descriptors: dict, values: dict, _visiting: frozenset = frozenset()) -> bool:
    """Whether every dependency of ``descriptor`` is met (NiFi 2.7's rule): the property depended
    on is known, itself satisfied (a cycle is not), and has a value - one of the dependent values
    when any are named. ``descriptors``/``values``: by property name (values with defaults applied)."""
    for dependency in descriptor.dependencies or ():
        target = dependency.property_descriptor
        target_name = getattr(target, "name", target)
        other = descriptors.get(target_name)
        if other is None or target_name in _visiting:
            return False
        if not dependencies_satisfied(other, descriptors, values, _visiting | {descriptor.name}):
            return False
        value = values.get(target_name)
        if value is None:
            return False
        wanted = [str(v) for v in dependency.dependent_values]
        if wanted and value not in wanted:
            return False
    return True


# ---------------------------------------------------------------------------------- contexts
class PropertyContext:
    """What ``ProcessContext`` and ``ValidationContext`` share: the properties whose dependencies
    are met, each with its value (the configured one, else the default)."""

    def _read(self, host) -> None:
        self.java_context = host
        descriptors = {d.name: d for d in host.getPropertyDescriptors()}
        configured = host.getConfiguredValues()
        values = {name: configured.get(name) if configured.get(name) is not None else d.defaultValue
                  for name, d in descriptors.items()}
        self.descriptor_value_map = {}
        self.property_values = {}
        for name, descriptor in descriptors.items():
            if not dependencies_satisfied(descriptor, descriptors, values):
                continue
            value = values[name]
            self.descriptor_value_map[descriptor] = value
            self.property_values[name] = self._value(descriptor, value)

    def _value(self, descriptor, value: str | None) -> "PythonPropertyValue":
        scope = expression_scope(descriptor)
        supported = scope != ExpressionLanguageScope.NONE
        present = value is not None and supported and self.java_context.isExpressionLanguagePresent(value)
        return PythonPropertyValue(self.java_context, value, supported, present, None, scope=scope,
                                   descriptor=descriptor)

    def create_python_property_value(self, el_supported, java_property_value, string_value):
        scope = ExpressionLanguageScope.FLOWFILE_ATTRIBUTES if el_supported else ExpressionLanguageScope.NONE
        present = bool(el_supported and string_value is not None
                       and self.java_context.isExpressionLanguagePresent(string_value))
        return PythonPropertyValue(self.java_context, string_value, el_supported, present, None, scope=scope)

    def getProperty(self, descriptor):
        """The value of a property (a ``PropertyDescriptor`` or its name), or None when the
        processor has no such property or its dependencies are not met."""
        name = descriptor.name if isinstance(descriptor, PropertyDescriptor) else getattr(descriptor, "name", descriptor)
        return self.property_values.get(name)

    def getProperties(self):
        """Every property in the context -> its value as a string (or None)."""
        return dict(self.descriptor_value_map)

    def newPropertyValue(self, value):
        """``value`` as a property value whose expressions may be evaluated."""
        return self.create_python_property_value(True, None, value)


class ProcessContext(PropertyContext):
    """The context ``transform``, ``create``, ``onScheduled`` and ``onStopped`` receive."""

    def __init__(self, java_context):
        self._read(java_context)
        self.name = java_context.getName()

    def getName(self):
        return self.name

    def yield_resources(self):
        """Do not trigger this processor again for its yield duration."""
        self.java_context.yieldResources()

    def getStateManager(self):
        return StateManager(self.java_context.getStateManager())


class ValidationContext(PropertyContext):
    """The context ``customValidate`` receives."""

    def __init__(self, java_context):
        self._read(java_context)

    def isExpressionLanguageSupported(self, name) -> bool:
        value = self.property_values.get(name)
        return bool(value is not None and value.el_supported)

    def isExpressionLanguagePresent(self, value) -> bool:
        return value is not None and self.java_context.isExpressionLanguagePresent(value)


class TimeUnit(Enum):
    """The unit ``asTimePeriod`` converts to."""

    NANOSECONDS = "NANOSECONDS"
    MICROSECONDS = "MICROSECONDS"
    MILLISECONDS = "MILLISECONDS"
    SECONDS = "SECONDS"
    MINUTES = "MINUTES"
    HOURS = "HOURS"
    DAYS = "DAYS"


_UNIT_NANOS = {"NANOSECONDS": 1, "MICROSECONDS": 10 ** 3, "MILLISECONDS": 10 ** 6, "SECONDS": 10 ** 9,
               "MINUTES": 60 * 10 ** 9, "HOURS": 3600 * 10 ** 9, "DAYS": 86400 * 10 ** 9}


class DataUnit(Enum):
    """The unit ``asDataSize`` converts to (each 1024 times the one before)."""

    B = "B"
    KB = "KB"
    MB = "MB"
    GB = "GB"
    TB = "TB"


def _java_round(value: Decimal) -> int:
    return math.floor(value + Decimal("0.5"))


def time_period_nanos(value: str) -> Decimal:
    """Nanoseconds in a NiFi time period ('30 sec', '1.5 hours', '2 weeks'); ValueError if it is not one."""
    match = _TIME_PERIOD.fullmatch(value)
    unit = match.group(2).lower() if match else None
    if unit not in _NANOS_PER:
        raise ValueError(f"{value!r} is not a time period such as '30 sec' or '5 mins'")
    return Decimal(match.group(1)) * _NANOS_PER[unit]


class PythonPropertyValue:
    """A property's value, with NiFi's conversions and expression evaluation."""

    def __init__(self, property_value, string_value, el_supported, el_present, referenced_attribute, *,
                 scope=None, descriptor=None):
        self.value = string_value
        self.property_value = property_value
        self.el_supported = el_supported
        self.el_present = el_present
        self.referenced_attribute = referenced_attribute
        self.scope = scope or (ExpressionLanguageScope.FLOWFILE_ATTRIBUTES if el_supported
                               else ExpressionLanguageScope.NONE)
        self.descriptor = descriptor

    def getValue(self):
        return self.value

    def isSet(self):
        return self.value is not None

    def isExpressionLanguagePresent(self):
        return self.el_present

    def asInteger(self):
        return None if self.value is None else int(self.value)

    def asLong(self):
        return self.asInteger()

    def asBoolean(self):
        return None if self.value is None else self.value.lower() == "true"

    def asFloat(self):
        return None if self.value is None else float(self.value)

    def asDouble(self):
        return self.asFloat()

    def asTimePeriod(self, time_unit):
        """The time period in ``time_unit`` (a ``TimeUnit``), rounded to a whole number as NiFi does."""
        if self.value is None:
            return None
        return _java_round(time_period_nanos(self.value) / _UNIT_NANOS[time_unit.name])

    def asDuration(self):
        """The time period as a ``datetime.timedelta``."""
        if self.value is None:
            return None
        return datetime.timedelta(microseconds=float(time_period_nanos(self.value) / 1000))

    def asDataSize(self, data_unit):
        """The data size in ``data_unit`` (a ``DataUnit``), as a float."""
        if self.value is None:
            return None
        match = _DATA_SIZE.fullmatch(self.value)
        if match is None:
            raise ValueError(f"{self.value!r} is not a data size such as '10 MB'")
        size = float(match.group(1)) * _BYTES_PER[match.group(2).upper()]
        return size / _BYTES_PER[data_unit.name]

    def asControllerService(self):
        """The controller service the value names, enabled by the runtime (NiFi: a Java proxy)."""
        if not self.value:
            return None
        return self.property_value.getControllerService(self.value)

    def asResource(self):
        """The referenced file, directory, URL or text (a ``ResourceReference``), or None."""
        if self.value is None:
            return None
        definition = getattr(self.descriptor, "resourceDefinition", None)
        return ResourceReference.of(self.value.strip(), definition)

    def asResources(self):
        """Every comma-separated reference (``ResourceReferences``)."""
        definition = getattr(self.descriptor, "resourceDefinition", None)
        if self.value is None:
            return ResourceReferences([])
        if definition is not None and definition.allow_text and not definition.allow_multiple:
            return ResourceReferences([ResourceReference.of(self.value, definition)])
        return ResourceReferences([ResourceReference.of(part.strip(), definition)
                                   for part in self.value.split(",") if part.strip()])

    def evaluateAttributeExpressions(self, attributeMap=None):
        """A value with the expressions evaluated against ``attributeMap`` (a FlowFile, an
        attribute map, a dict or None); this value itself when the property does not support
        expressions or the value holds none."""
        if not self.el_supported or not self.el_present:
            return self
        flowfile_scope = self.scope == ExpressionLanguageScope.FLOWFILE_ATTRIBUTES
        evaluated = self.property_value.evaluateExpressions(self.value, attributeMap, flowfile_scope)
        return PythonPropertyValue(self.property_value, evaluated, self.el_supported, False, None, scope=self.scope,
                                   descriptor=self.descriptor)

    def __repr__(self) -> str:
        return f"PythonPropertyValue({self.value!r})"


class ResourceReference:
    """A file, directory, URL or text a resource property references."""

    def __init__(self, location: str, resource_type: ResourceType):
        self.location = location
        self.resource_type = resource_type

    @classmethod
    def of(cls, location: str, definition: ResourceDefinition | None) -> "ResourceReference":
        allowed = definition.resource_types() if definition is not None else list(ResourceType)
        scheme = urllib.parse.urlsplit(location).scheme.lower()
        if ResourceType.URL in allowed and scheme in _URL_SCHEMES and scheme != "file":
            return cls(location, ResourceType.URL)
        if ResourceType.DIRECTORY in allowed and os.path.isdir(location):
            return cls(location, ResourceType.DIRECTORY)
        if ResourceType.FILE in allowed and (os.path.isfile(location) or ResourceType.TEXT not in allowed):
            return cls(location, ResourceType.FILE)
        return cls(location, ResourceType.TEXT if ResourceType.TEXT in allowed else allowed[0])

    def getResourceType(self):
        return self.resource_type

    def getLocation(self):
        return self.location

    def asFile(self):
        return self.location if self.resource_type in (ResourceType.FILE, ResourceType.DIRECTORY) else None

    def asURL(self):
        if self.resource_type == ResourceType.URL:
            return self.location
        if self.resource_type in (ResourceType.FILE, ResourceType.DIRECTORY):
            return "file://" + os.path.abspath(self.location)
        return None

    def isAccessible(self):
        if self.resource_type in (ResourceType.FILE, ResourceType.DIRECTORY):
            return os.access(self.location, os.R_OK)
        return True

    def read(self):
        """A binary stream over the resource."""
        if self.resource_type == ResourceType.TEXT:
            return io.BytesIO(self.location.encode())
        if self.resource_type == ResourceType.URL:
            return urllib.request.urlopen(self.location)  # noqa: S310 - the processor's configured URL
        return open(self.location, "rb")

    def __repr__(self) -> str:
        return f"ResourceReference({self.resource_type.name}: {self.location!r})"


class ResourceReferences:
    """Several resource references."""

    def __init__(self, references: list[ResourceReference]):
        self._references = list(references)

    def asList(self):
        return list(self._references)

    def asLocations(self):
        return [r.getLocation() for r in self._references]

    def getCount(self):
        return len(self._references)

    def __iter__(self):
        return iter(self._references)
