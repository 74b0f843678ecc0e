"""NiFi's HTTP processors (docs/http.md)."""

from flowactors.processors.http.handle import HandleHttpRequest, HandleHttpResponse
from flowactors.processors.http.invoke import InvokeHTTP
from flowactors.processors.http.listen import ListenHTTP

__all__ = ["HandleHttpRequest", "HandleHttpResponse", "InvokeHTTP", "ListenHTTP"]
