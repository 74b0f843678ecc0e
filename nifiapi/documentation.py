"""Use-case decorators and the documentation objects built from a processor's source.

The decorators change nothing at run time: the runtime reads their arguments from the source
(``flowactors.nifi.inspection``), as NiFi does.
"""

from __future__ import annotations


class ProcessorConfiguration:
    """One processor's part of a multi-processor use case."""

    class Java:
        implements = ['org.apache.nifi.python.processor.documentation.ProcessorConfigurationDetails']

    def __init__(self, processor_type: str, configuration: str):
        self.processor_type = processor_type
        self.configuration = configuration

    def getProcessorType(self):
        return self.processor_type

    def getConfiguration(self):
        return self.configuration


def use_case(description: str, configuration: str = None, notes: str = None, keywords: list[str] = None):
    """Documents a use case of the decorated processor class (read from the source)."""
    def decorator(cls):
        return cls
    return decorator


def multi_processor_use_case(description: str, configurations: list[ProcessorConfiguration], notes: str = None,
                             keywords: list[str] = None):
    """Documents a use case spanning several processors (read from the source)."""
    def decorator(cls):
        return cls
    return decorator


class _UseCase:
    def __init__(self, description: str, notes: str, keywords: list[str]):
        self.description = description
        self.notes = notes
        self.keywords = keywords

    def getDescription(self):
        return self.description

    def getNotes(self):
        return self.notes

    def getKeywords(self):
        return self.keywords

    def __str__(self):
        return f"{type(self).__name__}[description={self.description}]"


class UseCaseDetails(_UseCase):
    class Java:
        implements = ['org.apache.nifi.python.processor.documentation.UseCaseDetails']

    def __init__(self, description: str, notes: str, keywords: list[str], configuration: str):
        super().__init__(description, notes, keywords)
        self.configuration = configuration

    def getConfiguration(self):
        return self.configuration


class MultiProcessorUseCaseDetails(_UseCase):
    class Java:
        implements = ['org.apache.nifi.python.processor.documentation.MultiProcessorUseCaseDetails']

    def __init__(self, description: str, notes: str, keywords: list[str], configurations: list[ProcessorConfiguration]):
        super().__init__(description, notes, keywords)
        self.configurations = configurations

    def getConfigurations(self):
        return self.configurations


class PropertyDependency:
    """A documented dependency: the property ``name`` must have one of ``dependent_values``."""

    class Java:
        implements = ['org.apache.nifi.python.processor.documentation.PropertyDependency']

    def __init__(self, name: str, display_name: str, dependent_values: list[str]):
        self.name = name
        self.display_name = display_name
        self.dependent_values = dependent_values

    def getName(self):
        return self.name

    def getDisplayName(self):
        return self.display_name

    def getDependentValues(self):
        return self.dependent_values


class PropertyDescription:
    """A documented property, as read from a processor's source."""

    class Java:
        implements = ['org.apache.nifi.python.processor.documentation.PropertyDescription']

    def __init__(self, name: str, description: str, display_name: str = None, required: bool = False,
                 sensitive: bool = True, default_value: str = None, expression_language_scope: str = None,
                 controller_service_definition: str = None, allowable_values: list[str] = None,
                 dependencies: list[PropertyDependency] = None):
        self.name = name
        self.description = description
        self.display_name = display_name
        self.required = required
        self.sensitive = sensitive
        self.default_value = default_value
        self.expression_language_scope = expression_language_scope
        self.controller_service_definition = controller_service_definition
        self.allowable_values = allowable_values
        self.dependencies = dependencies

    def getName(self):
        return self.name

    def getDescription(self):
        return self.description

    def getDisplayName(self):
        return self.display_name

    def isRequired(self):
        return self.required

    def isSensitive(self):
        return self.sensitive

    def getDefaultValue(self):
        return self.default_value

    def getExpressionLanguageScope(self):
        return self.expression_language_scope

    def getControllerServiceDefinition(self):
        return self.controller_service_definition

    def getAllowableValues(self):
        return self.allowable_values

    def getDependencies(self):
        return self.dependencies
