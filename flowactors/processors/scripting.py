"""ExecuteScript and InvokeScriptedProcessor: NiFi's scripted processors, for Python scripts.

Both take the script from Script File or Script Body (exactly one), compiled once, and run it
with NiFi's Java API around it (``flowactors.sdk.script_api``: ``session``, ``context``,
``log``, FlowFiles, property values, and the Java classes published scripts import). Script
Engine ``python`` is NiFi 1.x's name of its Jython engine; here the script runs on Python 3, in
the executor's process with the flow's rights, as in NiFi. Any other engine fails validation.
Both allow input without needing it (NiFi's ``INPUT_ALLOWED``): with an incoming connection they
are triggered when FlowFiles wait; without, on their schedule, as a source whose script creates
FlowFiles (``session.create()``).

**ExecuteScript** runs the whole script at each trigger, its globals NiFi's bindings:
``session``, ``context``, ``log``, ``REL_SUCCESS``, ``REL_FAILURE`` and each dynamic property
by its name (a property value: ``getValue()``, ``evaluateAttributeExpressions(flowFile)``). The
session is committed when the script ends. A script that raises, or leaves a FlowFile it took
neither transferred nor removed, rolls the session back with the FlowFiles it took penalized in
their queue, yields, and the trigger fails with one line (``ScriptError``: what and at which line
of the script), as NiFi's ProcessException; the traceback goes to the debug log only.

**InvokeScriptedProcessor** runs the script once when the processor is scheduled (and when a
flow is validated): it assigns ``processor``, an object implementing NiFi's ``Processor``
(``initialize``, ``getRelationships``, ``getPropertyDescriptors``, ``validate``,
``onTrigger(context, sessionFactory)``, and ``onScheduled(context)`` / ``onStopped(context)``
when it has them). Its relationships are the processor's; its properties are the script
properties and the processor's descriptors (given as dynamic properties), whose required,
default, allowable values and validators are checked with the processor's own ``validate``.
The session factory's first session is the trigger's (committed after ``onTrigger`` unless the
script did); a failure rolls back as ExecuteScript's does.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from flowactors.sdk.script_api import nifi
from flowactors.sdk.script_api.loader import ModuleCache
from flowactors.sdk.script_api.script import (NIFI_PROPERTY_NAMES, SCRIPT_PROPERTIES, Script, ScriptError,
                                                     script_from, script_problems)
from flowactors.sdk.script_api.session import (ComponentLog, ScriptContext, ScriptPropertyValue,
                                                      ScriptSession, SessionFactory, _Bean)
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, PropertyLookup, PropertyValue
from flowactors.sdk.processor import Relationship
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.sdk.session import FlowFileHandlingError

log = logging.getLogger(__name__)


def _failed(context: ProcessContext, sessions: list[ScriptSession], err: BaseException) -> ScriptError:
    """Roll the sessions back (what they took penalized), yield: the error to raise, logged."""
    for session in sessions:
        session.rollback(True)
    context.yield_()
    error = err if isinstance(err, ScriptError) else ScriptError(str(err))
    log.debug("%s: %s", context.name, error, exc_info=err)
    return error


class ExecuteScript(Processor):
    """Runs a Python script at each trigger, with NiFi's bindings (see the module docstring).

    Provenance: the events of the script's session calls (the session's own: CREATE,
    FORK, CLONE, CONTENT_MODIFIED, ATTRIBUTES_MODIFIED, DROP); a script gets no provenance reporter.
    """

    description = "Runs a Python script (written against NiFi's ExecuteScript API) at each trigger"
    properties = SCRIPT_PROPERTIES
    dynamic_properties = True
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.script.ExecuteScript"
    NIFI_PROPERTY_NAMES = NIFI_PROPERTY_NAMES
    input_required = False
    input_allowed = True

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        return script_problems(values)

    def on_scheduled(self, context: ProcessContext) -> None:
        self._script = script_from(context.values)
        self._log = ComponentLog(context.name)

    def on_trigger(self, context: ProcessContext, session) -> None:
        script_session = ScriptSession(session)
        bindings = {name: ScriptPropertyValue(context.property(name)) for name in context.dynamic_properties}
        bindings.update(session=script_session, context=ScriptContext(context), log=self._log,
                        REL_SUCCESS=nifi.REL_SUCCESS, REL_FAILURE=nifi.REL_FAILURE)
        try:
            self._script.run(bindings)
            script_session.close_streams()
            session.commit()
        except ScriptError as err:
            raise _failed(context, [script_session], err) from None
        except FlowFileHandlingError as err:   # a FlowFile left unrouted: the commit refused
            raise _failed(context, [script_session], ScriptError(f"the script ended with {err}")) from None


@dataclass
class _Described:
    """What a scripted processor says about itself: made once per script for validation."""

    script: Script
    processor: Any
    descriptors: dict[str, nifi.PropertyDescriptor]
    relationships: tuple[Relationship, ...]


@dataclass
class _Values(PropertyLookup):
    """Property values being validated, as a context (NiFi's ``ValidationContext``)."""

    name: str
    values: Mapping[str, str]
    descriptors: Mapping[str, PropertyDescriptor]
    services: Mapping[str, Any] = field(default_factory=dict)
    _properties: dict[str, PropertyValue] = field(default_factory=dict)


class _Initialization(_Bean):
    """NiFi's ``ProcessorInitializationContext`` given to ``initialize``."""

    _shown = "initializationContext"

    def __init__(self, name: str, logger: ComponentLog):
        self._name, self._logger = name, logger

    def getIdentifier(self) -> str:
        return self._name

    def getLogger(self) -> ComponentLog:
        return self._logger


def _load(script: Script, name: str) -> _Described:
    """Run the script, take its ``processor``, initialize it and ask what it declares."""
    logger = ComponentLog(name)
    processor = script.run({"log": logger}).get("processor")
    if processor is None:
        raise ScriptError(f"the script ({script.name}) assigns no 'processor' (e.g. processor = MyProcessor())")
    if hasattr(processor, "initialize"):
        script.call(processor.initialize, _Initialization(name, logger))
    descriptors = {d.getName(): d for d in script.call(processor.getPropertyDescriptors) or ()}
    relationships = sorted(script.call(processor.getRelationships) or (), key=lambda r: r.getName())
    return _Described(script, processor, descriptors,
                      tuple(Relationship(r.getName(), r.getDescription()) for r in relationships))


@functools.lru_cache(maxsize=32)
def _described(text: str, name: str, directories: tuple[str, ...]) -> _Described:
    return _load(Script(text, name, ModuleCache(directories)), "validation")


def _description(values: Mapping[str, str]) -> _Described:
    script = script_from(values)
    return _described(script.text, script.name, tuple(script.modules.directories))


class InvokeScriptedProcessor(Processor):
    """Runs a processor a Python script defines (see the module docstring).

    Provenance: as ExecuteScript's, the events of the script's session calls.
    """

    description = "Runs a processor defined by a Python script (NiFi's Processor interface)"
    properties = SCRIPT_PROPERTIES
    dynamic_properties = True
    relationships = ()
    NIFI_TYPE = "org.apache.nifi.processors.script.InvokeScriptedProcessor"
    NIFI_PROPERTY_NAMES = NIFI_PROPERTY_NAMES
    input_required = False
    input_allowed = True

    @classmethod
    def relationships_for(cls, values: Mapping[str, str]) -> tuple[Relationship, ...]:
        try:
            return _description(values).relationships
        except ScriptError:
            return ()   # validation says why

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = script_problems(values)
        if problems:
            return problems
        try:
            described = _description(values)
            problems = [p for d in described.descriptors.values() for p in d.problems(values.get(d.getName()))]
            context = ScriptContext(_Values("validation", values, self.descriptor_map()), described.descriptors)
            results = described.script.call(described.processor.validate, context) or ()
        except ScriptError as err:
            return [str(err)]
        return problems + [f"{r.getSubject()}: {r.getExplanation()}" for r in results if not r.isValid()]

    def on_scheduled(self, context: ProcessContext) -> None:
        self._described = _load(script_from(context.values), context.name)
        self._context = ScriptContext(context, self._described.descriptors)
        if hasattr(self._described.processor, "onScheduled"):
            self._described.script.call(self._described.processor.onScheduled, self._context)

    def on_trigger(self, context: ProcessContext, session) -> None:
        factory = SessionFactory(session)
        described = self._described
        try:
            described.script.call(described.processor.onTrigger, self._context, factory)
        except ScriptError as err:
            raise _failed(context, factory.sessions, err) from None
        for index, made in enumerate(factory.sessions):
            made.close_streams()
            if index:   # a session of its own the script did not commit
                made.rollback()

    def on_stopped(self, context: ProcessContext) -> None:
        described = getattr(self, "_described", None)
        if described is not None and hasattr(described.processor, "onStopped"):
            described.script.call(described.processor.onStopped, self._context)
