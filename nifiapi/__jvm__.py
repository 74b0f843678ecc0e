"""Where NiFi's package keeps its py4j handles; here there is no JVM.

``JvmHolder.jvm`` and ``JvmHolder.gateway`` are stand-ins that explain, on first use, that no
Java is reachable: a processor that only stores them (``def __init__(self, jvm)``) works, one that
calls into Java fails with a sentence saying why.
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
