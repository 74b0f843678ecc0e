"""A pure-Python ``nifiapi``: NiFi 2's Python processor API without a JVM.

Processors written for Apache NiFi 2 import their base classes and helpers from the submodules of
this package (``nifiapi.flowfiletransform``, ``nifiapi.properties``, ...). NiFi's own package
reaches into a JVM through py4j as soon as it is imported; this one has the same modules, classes
and signatures in plain Python, so the same processor files load and run unchanged outside NiFi.

What a JVM gave NiFi's package (property values, expression evaluation, state, yielding) comes
from a *host* object the runtime passes in where NiFi passed its Java context (``nifiapi._host``).
flowactors supplies it (``flowactors.nifi``); nothing in this package imports flowactors or Ray.
docs/nifi-python-processors.md describes the mapping and every difference from NiFi.
"""
