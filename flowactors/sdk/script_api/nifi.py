"""The NiFi API classes published scripts import, for Python 3: the stream callbacks, the builders
of relationships, property descriptors and validation results, the validators they name, the
``Processor`` interface a scripted processor implements and ``ExecuteScript``'s relationships.

A relationship a script builds is a flowactors ``Relationship`` (the session takes it as it is);
a property descriptor keeps what flowactors checks (name, required, default, allowable values,
validators). ``MODULES`` maps each NiFi package to the names it offers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from flowactors.sdk.processor import Relationship as _Relationship
from flowactors.sdk.processor import validators as _validators


class StreamCallback:
    """``session.write(flowFile, callback)``: ``process(self, inputStream, outputStream)``."""

    def process(self, inputStream, outputStream) -> None:  # noqa: N803 (Java's names)
        raise NotImplementedError


class InputStreamCallback:
    """``session.read(flowFile, callback)``: ``process(self, inputStream)``."""

    def process(self, inputStream) -> None:  # noqa: N803
        raise NotImplementedError


class OutputStreamCallback:
    """``session.write(flowFile, callback)`` (the content replaced): ``process(self, outputStream)``."""

    def process(self, outputStream) -> None:  # noqa: N803
        raise NotImplementedError


class _Builder:
    """A Java-style builder: each setter returns the builder; ``build`` makes the object."""

    def __init__(self, **defaults: Any):
        self._fields = dict(defaults)

    def _set(self, name: str, value: Any) -> "_Builder":
        self._fields[name] = value
        return self


@dataclass(frozen=True)
class Relationship(_Relationship):
    """``org.apache.nifi.processor.Relationship``: a flowactors relationship with Java's getters."""

    def getName(self) -> str:
        return self.name

    def getDescription(self) -> str:
        return self.description

    class Builder(_Builder):
        def __init__(self) -> None:
            super().__init__(name=None, description="")

        def name(self, name: str) -> "Relationship.Builder":
            return self._set("name", name)

        def description(self, text: str) -> "Relationship.Builder":
            return self._set("description", text)

        def autoTerminateDefault(self, value: bool) -> "Relationship.Builder":
            return self

        def build(self) -> "Relationship":
            if not self._fields["name"]:
                raise ValueError("Relationship.Builder: name(...) is required")
            return Relationship(self._fields["name"], self._fields["description"])


class Validator:
    """A validator a script names: ``validate(subject, value, context)`` -> ``ValidationResult``."""

    def __init__(self, check: Callable[[str], "str | None"]):
        self._check = check

    def validate(self, subject: str, value: str, context: Any = None) -> "ValidationResult":
        problem = self._check(value)
        return ValidationResult(subject, value, problem is None, problem or "")


class StandardValidators:
    """``org.apache.nifi.processor.util.StandardValidators``: the ones scripts commonly name."""

    NON_EMPTY_VALIDATOR = Validator(_validators.NON_EMPTY)
    NON_BLANK_VALIDATOR = Validator(_validators.NON_EMPTY)
    INTEGER_VALIDATOR = Validator(_validators.INTEGER)
    LONG_VALIDATOR = Validator(_validators.INTEGER)
    POSITIVE_INTEGER_VALIDATOR = Validator(_validators.POSITIVE_INTEGER)
    POSITIVE_LONG_VALIDATOR = Validator(_validators.POSITIVE_INTEGER)
    NON_NEGATIVE_INTEGER_VALIDATOR = Validator(_validators.NON_NEGATIVE_INTEGER)
    BOOLEAN_VALIDATOR = Validator(_validators.BOOLEAN)
    TIME_PERIOD_VALIDATOR = Validator(_validators.DURATION)
    DATA_SIZE_VALIDATOR = Validator(_validators.DATA_SIZE)
    REGULAR_EXPRESSION_VALIDATOR = Validator(_validators.REGEX)
    CHARACTER_SET_VALIDATOR = Validator(_validators.CHARSET)
    ATTRIBUTE_KEY_VALIDATOR = Validator(_validators.NON_EMPTY)


class ExpressionLanguageScope:
    """``org.apache.nifi.expression.ExpressionLanguageScope``."""

    NONE, ENVIRONMENT, FLOWFILE_ATTRIBUTES = "NONE", "ENVIRONMENT", "FLOWFILE_ATTRIBUTES"
    VARIABLE_REGISTRY = ENVIRONMENT


@dataclass(frozen=True)
class PropertyDescriptor:
    """``org.apache.nifi.components.PropertyDescriptor``, built with ``PropertyDescriptor.Builder``."""

    name: str
    displayName: str | None = None
    description: str = ""
    required: bool = False
    defaultValue: str | None = None
    allowableValues: tuple[str, ...] | None = None
    validators: tuple[Validator, ...] = field(default=())
    sensitive: bool = False
    dynamic: bool = False
    expressionLanguage: bool = False

    def getName(self) -> str:
        return self.name

    def getDisplayName(self) -> str:
        return self.displayName or self.name

    def getDefaultValue(self) -> str | None:
        return self.defaultValue

    def isRequired(self) -> bool:
        return self.required

    def isDynamic(self) -> bool:
        return self.dynamic

    def isSensitive(self) -> bool:
        return self.sensitive

    def problems(self, value: str | None) -> list[str]:
        """What is wrong with ``value`` (None: not set) for this property, one sentence each."""
        shown = self.getDisplayName()
        if value is None:
            return [f"property '{shown}' is required"] if self.required else []
        if self.allowableValues is not None and value not in self.allowableValues:
            return [f"property '{shown}' is {value!r}; allowed: {', '.join(self.allowableValues)}"]
        if self.expressionLanguage and "${" in value:
            return []   # known per FlowFile
        return [f"property '{shown}': {r.getExplanation()}" for v in self.validators
                if not (r := v.validate(shown, value)).isValid()]

    class Builder(_Builder):
        def __init__(self) -> None:
            super().__init__(name=None, validators=())

        def name(self, name: str) -> "PropertyDescriptor.Builder":
            return self._set("name", name)

        def displayName(self, name: str) -> "PropertyDescriptor.Builder":
            return self._set("displayName", name)

        def description(self, text: str) -> "PropertyDescriptor.Builder":
            return self._set("description", text)

        def required(self, value: bool) -> "PropertyDescriptor.Builder":
            return self._set("required", bool(value))

        def defaultValue(self, value: str) -> "PropertyDescriptor.Builder":
            return self._set("defaultValue", value)

        def allowableValues(self, *values: Any) -> "PropertyDescriptor.Builder":
            if len(values) == 1 and isinstance(values[0], (list, tuple, set, frozenset)):
                values = tuple(values[0])
            return self._set("allowableValues", tuple(str(v) for v in values))

        def addValidator(self, validator: Validator) -> "PropertyDescriptor.Builder":
            return self._set("validators", (*self._fields["validators"], validator))

        def sensitive(self, value: bool) -> "PropertyDescriptor.Builder":
            return self._set("sensitive", bool(value))

        def dynamic(self, value: bool) -> "PropertyDescriptor.Builder":
            return self._set("dynamic", bool(value))

        def expressionLanguageSupported(self, scope: Any) -> "PropertyDescriptor.Builder":
            return self._set("expressionLanguage", scope not in (False, None, ExpressionLanguageScope.NONE))

        def build(self) -> "PropertyDescriptor":
            if not self._fields["name"]:
                raise ValueError("PropertyDescriptor.Builder: name(...) is required")
            return PropertyDescriptor(**self._fields)


@dataclass(frozen=True)
class ValidationResult:
    """``org.apache.nifi.components.ValidationResult``, built with ``ValidationResult.Builder``."""

    subject: str = ""
    input: str | None = None
    valid: bool = False
    explanation: str = ""

    def isValid(self) -> bool:
        return self.valid

    def getExplanation(self) -> str:
        return self.explanation

    def getSubject(self) -> str:
        return self.subject

    def getInput(self) -> str | None:
        return self.input

    class Builder(_Builder):
        def __init__(self) -> None:
            super().__init__()

        def subject(self, text: str) -> "ValidationResult.Builder":
            return self._set("subject", text)

        def input(self, text: str) -> "ValidationResult.Builder":  # noqa: A003 (Java's name)
            return self._set("input", text)

        def valid(self, value: bool) -> "ValidationResult.Builder":
            return self._set("valid", bool(value))

        def explanation(self, text: str) -> "ValidationResult.Builder":
            return self._set("explanation", text)

        def build(self) -> "ValidationResult":
            return ValidationResult(**self._fields)


class Processor:
    """``org.apache.nifi.processor.Processor``: what InvokeScriptedProcessor's script implements
    (``initialize``, ``getRelationships``, ``getPropertyDescriptors``, ``validate``,
    ``onTrigger(context, sessionFactory)``; ``onScheduled``/``onStopped`` when present)."""

    def initialize(self, context) -> None:
        """Called once, before anything else."""

    def getRelationships(self):
        return set()

    def getPropertyDescriptors(self):
        return []

    def validate(self, context):
        return []

    def onPropertyModified(self, descriptor, oldValue, newValue) -> None:  # noqa: N803
        """Not called by flowactors (a flow's properties do not change while it runs)."""

    def onTrigger(self, context, sessionFactory) -> None:  # noqa: N803
        raise NotImplementedError


class _Key:
    def __init__(self, key: str):
        self._key = key

    def key(self) -> str:
        return self._key


class CoreAttributes:
    """``org.apache.nifi.flowfile.attributes.CoreAttributes``: ``CoreAttributes.FILENAME.key()``."""

    FILENAME, PATH, ABSOLUTE_PATH, UUID = _Key("filename"), _Key("path"), _Key("absolute.path"), _Key("uuid")
    MIME_TYPE, PRIORITY, DISCARD_REASON, ALTERNATE_IDENTIFIER = (
        _Key("mime.type"), _Key("priority"), _Key("discard.reason"), _Key("alternate.identifier"))


REL_SUCCESS = Relationship("success", "FlowFiles that were successfully processed")
REL_FAILURE = Relationship("failure", "FlowFiles that failed to be processed")


class ExecuteScript:
    """``org.apache.nifi.processors.script.ExecuteScript``: scripts name its relationships."""

    REL_SUCCESS, REL_FAILURE = REL_SUCCESS, REL_FAILURE


#: each NiFi package -> its classes offered to scripts
MODULES: dict[str, dict[str, Any]] = {
    "org.apache.nifi.processor.io": {"StreamCallback": StreamCallback, "InputStreamCallback": InputStreamCallback,
                                     "OutputStreamCallback": OutputStreamCallback},
    "org.apache.nifi.processor": {"Processor": Processor, "Relationship": Relationship},
    "org.apache.nifi.processor.util": {"StandardValidators": StandardValidators},
    "org.apache.nifi.components": {"PropertyDescriptor": PropertyDescriptor, "ValidationResult": ValidationResult},
    "org.apache.nifi.expression": {"ExpressionLanguageScope": ExpressionLanguageScope},
    "org.apache.nifi.flowfile.attributes": {"CoreAttributes": CoreAttributes},
    "org.apache.nifi.processors.script": {"ExecuteScript": ExecuteScript},
}
