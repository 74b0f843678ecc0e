"""NiFi's expression language functions, one module a section of NiFi's Expression Language Guide.

Importing this package registers every function with the parser (``language.register_function``).
"""

from flowactors.sdk.expression.functions import (
    arithmetic, coercion, dates, encoding, logic, multiple, searching, strings, subjectless)

__all__ = ["arithmetic", "coercion", "dates", "encoding", "logic", "multiple", "searching", "strings", "subjectless"]
