"""What a script's bindings are: NiFi's Java API (``session``, ``context``, ``log``, FlowFiles and
property values) over flowactors' session and context.

Each object offers NiFi's method names; a Java bean property reads as Jython lets it
(``context.name`` is ``context.getName()``), and a method NiFi has that is not offered here raises
``AttributeError`` naming it. A FlowFile a script holds is a flowactors ``FlowFile`` with NiFi's
getters (``getAttribute``, ``getAttributes``, ``getSize``...); every session call that changes one
returns the new version, as NiFi's do.
"""

from __future__ import annotations

import inspect
import logging
import re
from contextlib import ExitStack
from typing import Any, Iterable, Mapping

from flowactors.sdk.script_api.java import InputStream, OutputStream, TimeUnit
from flowactors.sdk.script_api.nifi import OutputStreamCallback, PropertyDescriptor, StreamCallback
from flowactors.sdk import FlowFile
from flowactors.sdk.processor import PropertyValue
from flowactors.sdk.units import parse_duration


class _Bean:
    """Jython's bean properties (``x.name`` -> ``x.getName()`` / ``x.isName()``) and a clear error
    for what is not offered."""

    #: what the object is called in that error
    _shown = "object"

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            for prefix in ("get", "is"):
                getter = type(self).__dict__.get(prefix + name[:1].upper() + name[1:])
                if getter is not None:
                    return getter(self)
        raise AttributeError(f"{self._shown}.{name} is not offered to Python scripts in "
                             f"flowactors (docs/scripting.md lists what is)")


class ScriptFlowFile(FlowFile):
    """A FlowFile as NiFi's API shows it to a script."""

    __slots__ = ()

    def getAttribute(self, key: str) -> str | None:
        return self.attributes.get(key)

    def getAttributes(self) -> dict[str, str]:
        return dict(self.attributes)

    def getSize(self) -> int:
        return self.size

    def getId(self) -> int:
        return self.id

    def getEntryDate(self) -> int:
        return self.entry_date

    def getLineageStartDate(self) -> int:
        return self.lineage_start_date

    def getLastQueueDate(self) -> int:
        return self.queue_date

    def isPenalized(self) -> bool:
        return self.is_penalized()

    def __str__(self) -> str:
        return f"FlowFile[uuid={self.uuid},size={self.size}]"


def as_script(flowfile: FlowFile | None) -> ScriptFlowFile | None:
    return None if flowfile is None else ScriptFlowFile._make(flowfile)


class ScriptPropertyValue(_Bean):
    """A property's value (NiFi's ``PropertyValue``): ``getValue()``,
    ``evaluateAttributeExpressions(flowFile)`` and the conversions."""

    _shown = "PropertyValue"

    def __init__(self, value: PropertyValue | str | None):
        self._value = value

    def evaluateAttributeExpressions(self, flowfile: Any = None) -> "ScriptPropertyValue":
        """The value with its ``${...}`` evaluated against a FlowFile's attributes (or a map)."""
        if not isinstance(self._value, PropertyValue):
            return self
        if isinstance(flowfile, Mapping):
            return ScriptPropertyValue(self._value.evaluate(attributes=flowfile))
        return ScriptPropertyValue(self._value.evaluate(flowfile))

    def getValue(self) -> str | None:
        value = self._value
        return value.raw if isinstance(value, PropertyValue) else value

    def isSet(self) -> bool:
        return self.getValue() is not None

    def asInteger(self) -> int | None:
        value = self.getValue()
        return None if value in (None, "") else int(value)

    asLong = asInteger

    def asFloat(self) -> float | None:
        value = self.getValue()
        return None if value in (None, "") else float(value)

    asDouble = asFloat

    def asBoolean(self) -> bool | None:
        value = self.getValue()
        return None if value is None else value.strip().lower() == "true"

    def asTimePeriod(self, unit: "TimeUnit") -> int | None:
        value = self.getValue()
        return None if value in (None, "") else int(parse_duration(value) / unit.seconds)

    def __str__(self) -> str:
        return str(self.getValue())

    toString = __str__


class ScriptContext(_Bean):
    """NiFi's ``ProcessContext`` (or a ``ValidationContext`` / ``ConfigurationContext``) over a
    flowactors context: ``getProperty(name or descriptor)``, ``getProperties()``, ``getName()``,
    ``yield()`` (spelt ``yield_`` or ``getattr(context, 'yield')`` in Python 3).
    ``descriptors``: the script's own property descriptors (their defaults apply)."""

    _shown = "context"

    def __init__(self, context: Any, descriptors: Mapping[str, PropertyDescriptor] | None = None):
        self._context = context
        self._descriptors = dict(descriptors or {})

    def getProperty(self, descriptor: Any) -> ScriptPropertyValue:
        name = descriptor.getName() if isinstance(descriptor, PropertyDescriptor) else str(descriptor)
        value = self._context.property(name)
        if value.raw is None and name in self._descriptors and self._descriptors[name].defaultValue is not None:
            value = PropertyValue(self._descriptors[name].defaultValue)
        return ScriptPropertyValue(value)

    def getProperties(self) -> dict[PropertyDescriptor, str | None]:
        values = self._context.values
        names = [*self._context.descriptors, *self._descriptors, *(n for n in values if n not in self._descriptors)]
        return {self._descriptors.get(name) or PropertyDescriptor(name, dynamic=name not in self._context.descriptors):
                self.getProperty(name).getValue() for name in dict.fromkeys(names)}

    def getAllProperties(self) -> dict[str, str | None]:
        return {d.getName(): v for d, v in self.getProperties().items()}

    def getName(self) -> str:
        return self._context.name

    def getIdentifier(self) -> str:
        return self._context.name

    def getMaxConcurrentTasks(self) -> int:
        return getattr(self._context, "concurrent_tasks", 1)

    def getAvailableRelationships(self) -> set:
        return set(getattr(self._context, "relationships", ()))

    def yield_(self) -> None:
        self._context.yield_()

    def __getattr__(self, name: str) -> Any:
        if name == "yield":
            return self.yield_
        return super().__getattr__(name)


class ComponentLog(_Bean):
    """NiFi's ``ComponentLog``: ``log.info("x {}", value)`` (arguments as a list too), to
    Python's logging as ``flowactors.script.<processor>``."""

    _shown = "log"

    def __init__(self, name: str):
        self._log = logging.getLogger(f"flowactors.script.{name}")
        self._name = name

    def _emit(self, level: int, message: Any, *args: Any) -> None:
        if not self._log.isEnabledFor(level):
            return
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        text = str(message)
        placeholders = text.count("{}")
        for arg in args[:placeholders]:
            text = text.replace("{}", str(arg), 1)
        if len(args) > placeholders and isinstance(args[-1], BaseException):
            text = f"{text}: {type(args[-1]).__name__}: {args[-1]}"
        self._log.log(level, "%s: %s", self._name, text)

    def trace(self, message: Any, *args: Any) -> None:
        self._emit(logging.DEBUG - 5, message, *args)

    def debug(self, message: Any, *args: Any) -> None:
        self._emit(logging.DEBUG, message, *args)

    def info(self, message: Any, *args: Any) -> None:
        self._emit(logging.INFO, message, *args)

    def warn(self, message: Any, *args: Any) -> None:
        self._emit(logging.WARNING, message, *args)

    def error(self, message: Any, *args: Any) -> None:
        self._emit(logging.ERROR, message, *args)

    def isDebugEnabled(self) -> bool:
        return self._log.isEnabledFor(logging.DEBUG)

    def isInfoEnabled(self) -> bool:
        return self._log.isEnabledFor(logging.INFO)

    def isWarnEnabled(self) -> bool:
        return self._log.isEnabledFor(logging.WARNING)


def _arity(function: Any) -> int:
    try:
        return len(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return 1


class ScriptSession(_Bean):
    """NiFi's ``ProcessSession`` over a flowactors session (see the module docstring); streams a
    script opens with ``read(flowFile)`` close when it closes them or when the trigger ends."""

    _shown = "session"

    def __init__(self, session: Any):
        self._session = session
        self._streams = ExitStack()

    # ------------------------------------------------------------------ FlowFiles
    def get(self, count: int | None = None) -> Any:
        """The next FlowFile (None when none), or a list of up to ``count``."""
        if count is None:
            return as_script(self._session.get())
        return [as_script(f) for f in self._session.get_batch(int(count))]

    def create(self, parent: Any = None) -> ScriptFlowFile:
        if parent is not None and not isinstance(parent, FlowFile):   # a collection of parents
            return as_script(self._session.create(parents=list(parent)))
        return as_script(self._session.create(parent=parent))

    def clone(self, flowfile: FlowFile, offset: int = 0, size: int | None = None) -> ScriptFlowFile:
        return as_script(self._session.clone(flowfile, offset, size))

    def putAttribute(self, flowfile: FlowFile, key: str, value: Any) -> ScriptFlowFile:
        return as_script(self._session.put_attribute(flowfile, key, value))

    def putAllAttributes(self, flowfile: FlowFile, values: Mapping[str, Any]) -> ScriptFlowFile:
        return as_script(self._session.put_all_attributes(flowfile, dict(values)))

    def removeAttribute(self, flowfile: FlowFile, key: str) -> ScriptFlowFile:
        return as_script(self._session.remove_attribute(flowfile, key))

    def removeAllAttributes(self, flowfile: FlowFile, keys: Iterable[str] | re.Pattern) -> ScriptFlowFile:
        """The attributes named (a collection), or those whose whole name matches (a pattern)."""
        if isinstance(keys, re.Pattern):
            keys = [k for k in flowfile.attributes if keys.fullmatch(k)]
        return as_script(self._session.remove_all_attributes(flowfile, list(keys)))

    def penalize(self, flowfile: FlowFile) -> ScriptFlowFile:
        return as_script(self._session.penalize(flowfile))

    def transfer(self, flowfiles: Any, relationship: Any) -> None:
        for flowfile in _each(flowfiles):
            self._session.transfer(flowfile, relationship)

    def remove(self, flowfiles: Any) -> None:
        for flowfile in _each(flowfiles):
            self._session.remove(flowfile)

    # ------------------------------------------------------------------ content
    def read(self, flowfile: FlowFile, callback: Any = None) -> Any:
        """``callback.process(inputStream)`` over the content; without a callback, the stream."""
        if callback is None:
            return InputStream(self._streams.enter_context(self._session.read(flowfile)))
        with self._session.read(flowfile) as stream:
            _callable(callback)(InputStream(stream))
        return None

    def write(self, flowfile: FlowFile, callback: Any) -> ScriptFlowFile:
        """A ``StreamCallback`` (``process(inputStream, outputStream)``) rewrites the content; an
        ``OutputStreamCallback`` (``process(outputStream)``) replaces it."""
        process = _callable(callback)
        streaming = isinstance(callback, StreamCallback) or (
            not isinstance(callback, OutputStreamCallback) and _arity(process) == 2)
        if streaming:
            return as_script(self._session.rewrite(
                flowfile, lambda source, out: process(InputStream(source), OutputStream(out))))
        return as_script(self._session.write(flowfile, lambda out: process(OutputStream(out))))

    def append(self, flowfile: FlowFile, callback: Any) -> ScriptFlowFile:
        process = _callable(callback)
        return as_script(self._session.append(flowfile, lambda out: process(OutputStream(out))))

    def importFrom(self, source: Any, flowfile: FlowFile) -> ScriptFlowFile:
        if isinstance(source, InputStream):
            return as_script(self._session.write(flowfile, lambda out: source.transferTo(OutputStream(out))))
        return as_script(self._session.import_from(str(source), flowfile))

    def exportTo(self, flowfile: FlowFile, target: Any, append: bool = False) -> None:
        if isinstance(target, OutputStream):
            with self._session.read(flowfile) as stream:
                InputStream(stream).transferTo(target)
            return
        self._session.export_to(flowfile, str(target), append)

    # ------------------------------------------------------------------ the session
    def commit(self) -> None:
        self.close_streams()
        self._session.commit()

    def commitAsync(self, on_success: Any = None, on_failure: Any = None) -> None:
        self.close_streams()
        self._session.commit_async(on_success, on_failure)

    def rollback(self, penalize: bool = False) -> None:
        self.close_streams()
        self._session.rollback(penalize=bool(penalize))

    def close_streams(self) -> None:
        """Close the streams ``read(flowFile)`` gave out."""
        self._streams.close()
        self._streams = ExitStack()


class SessionFactory(_Bean):
    """NiFi's ``ProcessSessionFactory`` for InvokeScriptedProcessor: the first session is the
    trigger's own (committed after ``onTrigger`` when the script did not); each later one a new
    session, rolled back after ``onTrigger`` if the script left it uncommitted."""

    _shown = "sessionFactory"

    def __init__(self, session: Any):
        self._session = session
        self.sessions: list[ScriptSession] = []

    def createSession(self) -> ScriptSession:
        made = ScriptSession(self._session if not self.sessions else self._session.new_session())
        self.sessions.append(made)
        return made


def _each(flowfiles: Any) -> list:
    """A FlowFile, or each of a collection of them (a FlowFile is a tuple, so it is looked at first)."""
    return [flowfiles] if isinstance(flowfiles, FlowFile) else list(flowfiles)


def _callable(callback: Any) -> Any:
    """A callback's ``process`` method, or the callback when it is a plain function."""
    process = getattr(callback, "process", None)
    if process is not None:
        return process
    if callable(callback):
        return callback
    raise TypeError(f"a stream callback must have a process method or be a function, not {type(callback).__name__}")
