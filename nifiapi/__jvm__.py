"""Where NiFi's package keeps its py4j handles; here there is no JVM.

``JvmHolder.jvm`` and ``JvmHolder.gateway`` are stand-ins that explain, on first use, that no
Java is reachable: a processor that only stores them (``def __init__(self, jvm)``) works, one that
calls into Java fails with a sentence saying why. The few Java classes processors make to talk to
a controller service are given as Python ones (``JAVA_CLASSES``: ``jvm.java.util.HashMap()``
for a lookup's coordinates), with the Java methods processors call on them.
"""

from __future__ import annotations


class NoJvmError(RuntimeError):
    """A processor reached for a Java object, which does not exist outside NiFi."""


class _NoJvm:
    """Answers every attribute with an error naming what the processor tried to reach."""

    def __init__(self, path: str = "jvm"):
        self._path = path

    def __getattr__(self, name: str) -> "_NoJvm":
        if name.startswith("__"):
            raise AttributeError(name)
        return _NoJvm(f"{self._path}.{name}")

    def __call__(self, *args, **kwargs):
        made = JAVA_CLASSES.get(self._path.partition(".")[2])
        if made is not None:
            return made(*args, **kwargs)
        raise NoJvmError(f"{self._path} is a Java object; this processor runs without a JVM (flowactors' "
                         f"nifiapi), so only the Python API of nifiapi is available")

    def __repr__(self) -> str:
        return f"<no JVM: {self._path}>"


class JvmHolder:
    """Process-wide handles; ``jvm`` and ``gateway`` are stand-ins (see the module docstring)."""

    jvm = _NoJvm("jvm")
    gateway = _NoJvm("gateway")
    java_gateway = None


def ArrayList(list: list) -> list:  # noqa: A002 - NiFi's parameter name
    """NiFi turns a Python list into a Java ArrayList here; without Java it stays a list."""
    return [item for item in list]


class HashMap(dict):
    """``java.util.HashMap`` as processors use it: a dict with Java's method names."""

    def put(self, key, value):
        previous = self.get(key)
        self[key] = value
        return previous

    def containsKey(self, key) -> bool:
        return key in self

    def remove(self, key):
        return self.pop(key, None)

    def size(self) -> int:
        return len(self)

    def isEmpty(self) -> bool:
        return not self

    def keySet(self) -> set:
        return set(self)


class Optional:
    """``java.util.Optional``: what a lookup service answers."""

    def __init__(self, value=None):
        self._value = value

    @classmethod
    def ofNullable(cls, value) -> "Optional":
        return cls(value)

    @classmethod
    def empty(cls) -> "Optional":
        return cls(None)

    def isPresent(self) -> bool:
        return self._value is not None

    def isEmpty(self) -> bool:
        return self._value is None

    def get(self):
        if self._value is None:
            raise LookupError("No value present")
        return self._value

    def orElse(self, other):
        return other if self._value is None else self._value


#: the Java classes a processor may make through ``jvm`` (by their name under ``jvm.``)
JAVA_CLASSES = {"java.util.HashMap": HashMap, "java.util.Optional.ofNullable": Optional.ofNullable,
                "java.util.Optional.empty": Optional.empty}
