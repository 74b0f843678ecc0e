"""NiFi's HTTP processors (docs/http.md)."""

from flowactors.processors.http.invoke import InvokeHTTP

__all__ = ["InvokeHTTP"]
