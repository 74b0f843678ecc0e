"""The function library, one module a family of NiFi's RecordPath functions; importing a module
registers its functions in ``registry.FUNCTIONS`` (the filter functions are in
``flowactors.sdk.record_path.filters``)."""

from flowactors.sdk.record_path.functions import dates, encoding, math, strings, structures

__all__ = ["dates", "encoding", "math", "strings", "structures"]
