"""HandleHttpRequest and HandleHttpResponse: a flow as an HTTP service (NiFi's; docs/http.md).

HandleHttpRequest asks its HTTP Context Map (``flowactors.sdk.services.HttpContextMap``, a
shared service) to serve its port, takes the requests the map queued, copies each body into a
FlowFile a chunk at a time and transfers it to success with the request's attributes
(``http.context.identifier`` naming the waiting request). HandleHttpResponse answers that request
with the FlowFile's content as the body: status and headers are staged in the map, the body
written to it in chunks, and the map sends the response only once HandleHttpResponse's session
committed (the FlowFile is in success, with a SEND event). A request nobody answers within the
map's Request Expiration gets 503.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Mapping

from flowactors.processors._common import CHUNK, REGEX_VALIDATOR, boolean_property
from flowactors.processors.http.listen import port_validator
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE
from flowactors.sdk.services import HttpContextMap, SSLContextService

log = logging.getLogger(__name__)

CONTEXT_ID = "http.context.identifier"
#: seconds a trigger waits for the first request when none is waiting: none (a trigger that waited
#: would be busy, not idle, to the engine, and a flow run until idle would never end)
POLL_WAIT = 0.0
#: requests one trigger takes
REQUESTS_PER_TRIGGER = 50
CLIENT_NONE, CLIENT_WANT, CLIENT_NEED = "No Authentication", "Want Authentication", "Need Authentication"
_CLIENT_AUTH = {CLIENT_NONE: "NONE", CLIENT_WANT: "WANT", CLIENT_NEED: "REQUIRED"}
_METHODS = (("GET", True), ("POST", True), ("PUT", True), ("DELETE", True), ("HEAD", False), ("OPTIONS", False))


def uri_of(attributes: Mapping[str, str]) -> str:
    """The transit URI NiFi records for a request: scheme, client@server:port and the path."""
    scheme = "https" if attributes.get("http.subject.dn") is not None else "http"
    return (f"{scheme}://{attributes.get('http.remote.host')}@{attributes.get('http.local.name')}:"
            f"{attributes.get('http.server.port')}{attributes.get('http.request.uri')}")


class HandleHttpRequest(Processor):
    """Serves HTTP on Listening Port through its HTTP Context Map and makes a FlowFile of each
    request (a FlowFile per part of a multipart/form-data one), for HandleHttpResponse to answer.
    Provenance: RECEIVE, transit URI the request's URL."""

    description = "Starts an HTTP server and makes a FlowFile of each request, which HandleHttpResponse answers"
    input_required = False
    trigger_when_empty = True
    properties = (
        PropertyDescriptor("Listening Port", "The port to serve (0: any free port)", required=True, default="80",
                           validator=port_validator),
        PropertyDescriptor("Hostname", "The address to bind (none: every address)", validator=validators.NON_EMPTY),
        PropertyDescriptor("SSL Context Service", "Serves HTTPS with this service's key and trust",
                           service=SSLContextService),
        PropertyDescriptor("HTTP Protocols", "Application protocols over TLS: HTTP/1.1 only here", required=True,
                           default="HTTP_1_1", allowable_values=("HTTP_1_1", "H2_HTTP_1_1", "H2")),
        PropertyDescriptor("HTTP Context Map", "The service holding the requests until they are answered",
                           required=True, service=HttpContextMap),
        PropertyDescriptor("Allowed Paths", "A request whose path this regular expression does not match (whole) "
                           "is answered 404", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Default URL Character Set", "Decodes the query when the request names no charset",
                           required=True, default="UTF-8", validator=validators.CHARSET),
        *(boolean_property(f"Allow {method}", default, f"Take HTTP {method} requests (else 405)")
          for method, default in _METHODS),
        PropertyDescriptor("Maximum Threads", "Accepted for NiFi's sake: the server is one event loop",
                           required=True, default="200", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Request Header Maximum Size", "The longest request line or header taken", required=True,
                           default="8 KB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Additional HTTP Methods", "More methods to take, comma-separated",
                           validator=validators.NON_EMPTY),
        PropertyDescriptor("Client Authentication", "Whether TLS clients must show a certificate", required=True,
                           default=CLIENT_NONE, allowable_values=tuple(_CLIENT_AUTH)),
        PropertyDescriptor("Container Queue Size", "Requests waiting to be taken at most; one more is answered 503",
                           required=True, default="50", validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Multipart Request Max Size", "The largest multipart/form-data request taken (else 413)",
                           required=True, default="1 MB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Multipart Read Buffer Size", "Accepted for NiFi's sake: parts are spooled to disk past "
                           "1 MB", required=True, default="512 KB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Parameters to Attributes", "Query parameters (comma-separated names) also written as "
                           "http.param.<name>", validator=validators.NON_EMPTY),
    )
    SUCCESS = Relationship("success", "A FlowFile for each request (each part of a multipart one)")
    relationships = (SUCCESS,)
    NIFI_TYPE = "org.apache.nifi.processors.standard.HandleHttpRequest"
    NIFI_PROPERTY_NAMES = {"parameters-to-attributes": "Parameters to Attributes",
                           "container-queue-size": "Container Queue Size",
                           "multipart-request-max-size": "Multipart Request Max Size",
                           "multipart-read-buffer-size": "Multipart Read Buffer Size"}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get("HTTP Protocols", "HTTP_1_1") != "HTTP_1_1" and values.get("SSL Context Service"):
            return ["property 'HTTP Protocols' must be HTTP_1_1: HTTP/2 is not served here"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._map: HttpContextMap = context.service("HTTP Context Map", HttpContextMap)
        self._owner = context.name
        methods = [m for m, _ in _METHODS if context.property(f"Allow {m}").as_bool()]
        extra = context.property("Additional HTTP Methods").evaluate() or ""
        methods += [m.strip().upper() for m in extra.split(",") if m.strip()]
        parameters = context.property("Parameters to Attributes").evaluate() or ""
        settings: dict[str, Any] = {
            "port": int(context.property("Listening Port").evaluate() or 80),
            "host": context.property("Hostname").evaluate(), "methods": methods,
            "paths": context.property("Allowed Paths").evaluate(),
            "charset": context.property("Default URL Character Set").evaluate(),
            "header_size": context.property("Request Header Maximum Size").as_data_size(),
            "queue_size": context.property("Container Queue Size").as_int(),
            "multipart_max": context.property("Multipart Request Max Size").as_data_size(),
            "parameters": [p.strip() for p in parameters.split(",") if p.strip()],
        }
        if context.property("SSL Context Service").is_set:
            # the service itself goes to the map (its loaded key and trust; it pickles), which makes the context
            settings["ssl"] = context.service("SSL Context Service", SSLContextService)
            settings["client_auth"] = _CLIENT_AUTH[context.property("Client Authentication").evaluate() or CLIENT_NONE]
        self.port = self._map.listen(self._owner, settings)

    def on_stopped(self, context: ProcessContext) -> None:
        if getattr(self, "port", None) is not None:
            self._map.unlisten(self._owner)
            self.port = None

    def on_trigger(self, context: ProcessContext, session) -> None:
        room = bool(session.available_relationships())
        requests = self._map.take(self._owner, REQUESTS_PER_TRIGGER, POLL_WAIT, room)
        if not room:
            context.yield_()
            return
        taken: list[str] = []
        try:
            for request in requests:
                started = time.monotonic()
                taken.append(request["id"])
                for index, (size, part_attributes) in enumerate(request["parts"]):
                    flowfile = session.write(session.create(), lambda out: self._copy(request["id"], index, size, out))
                    attributes = {**part_attributes, **request["attributes"], CONTEXT_ID: request["id"]}
                    flowfile = session.put_all_attributes(flowfile, attributes)
                    subject = attributes.get("http.subject.dn")
                    session.provenance.receive(
                        flowfile, uri_of(attributes), duration=int((time.monotonic() - started) * 1000),
                        details=f"Received from {attributes.get('http.remote.addr')}"
                                + (f" with DN={subject}" if subject else ""))
                    session.transfer(flowfile, self.SUCCESS)
                self._map.release(request["id"])
        except BaseException:
            self._fail_all([r["id"] for r in requests], 503)
            raise
        if taken:
            session.commit_async(on_failure=lambda err: self._fail_all(taken, 503))

    def _copy(self, identifier: str, part: int, size: int, out) -> None:
        offset = 0
        while offset < size:
            chunk = self._map.read(identifier, part, offset, min(CHUNK, size - offset))
            if not chunk:
                raise IOError(f"the body of HTTP request {identifier} ended after {offset} of its {size} bytes")
            out.write(chunk)
            offset += len(chunk)

    def _fail_all(self, identifiers: list[str], status: int) -> None:
        for identifier in identifiers:
            try:
                self._map.fail(identifier, status)
            except Exception as err:   # the map out of reach: the request expires there
                log.warning("could not answer HTTP request %s: %s", identifier, err)


class HandleHttpResponse(Processor):
    """Answers the request a FlowFile came from (its http.context.identifier) with HTTP Status
    Code, the headers of its dynamic properties and of the attributes Attributes for HTTP Response
    matches, and its content as the body, once its session committed. Provenance: SEND, transit
    URI the request's URL."""

    description = "Answers the HTTP request a FlowFile of HandleHttpRequest came from, its content the body"
    dynamic_properties = True
    properties = (
        PropertyDescriptor("HTTP Status Code", "The status to answer", required=True, expression_language=True),
        PropertyDescriptor("HTTP Context Map", "The service holding the request", required=True,
                           service=HttpContextMap),
        PropertyDescriptor("Attributes for HTTP Response", "Attributes whose name this regular expression matches "
                           "(whole) are sent as headers", validator=REGEX_VALIDATOR),
    )
    SUCCESS = Relationship("success", "The FlowFiles whose request was answered")
    relationships = (SUCCESS, FAILURE)
    NIFI_TYPE = "org.apache.nifi.processors.standard.HandleHttpResponse"
    NIFI_PROPERTY_NAMES = {"Attributes to add to the HTTP Response (Regex)": "Attributes for HTTP Response"}

    def on_scheduled(self, context: ProcessContext) -> None:
        self._map: HttpContextMap = context.service("HTTP Context Map", HttpContextMap)
        pattern = context.property("Attributes for HTTP Response").evaluate()
        self._attributes = re.compile(pattern) if pattern else None

    def on_trigger(self, context: ProcessContext, session) -> None:
        staged: dict[str, None] = {}   # the requests this batch answers, in order
        for flowfile in session.get_batch():
            started = time.monotonic()
            identifier = flowfile.attributes.get(CONTEXT_ID)
            if not identifier:
                problem: str | None = f"it has no '{CONTEXT_ID}' attribute"
            elif identifier in staged:   # as NiFi: the first FlowFile answers, a later one finds it answered
                problem = f"its request {identifier} is answered by an earlier FlowFile"
            else:
                problem = self._stage(context, session, flowfile, identifier)
            if problem is not None:
                log.warning("%s: cannot answer the HTTP request of %s: %s", context.name, flowfile.uuid, problem)
                session.transfer(flowfile, FAILURE)
                continue
            assert identifier is not None
            staged[identifier] = None
            session.provenance.send(flowfile, uri_of(flowfile.attributes),
                                    duration=int((time.monotonic() - started) * 1000))
            session.transfer(flowfile, self.SUCCESS)
        if staged:
            session.commit_async(on_success=lambda: self._complete(context, list(staged)),
                                 on_failure=lambda err: [self._map.discard(i) for i in staged])

    def _stage(self, context: ProcessContext, session, flowfile, identifier: str) -> str | None:
        """Stage the response in the map (status, headers, body); the problem, or None."""
        status = (context.property("HTTP Status Code").evaluate(flowfile) or "").strip()
        if not (status.isascii() and status.isdigit()):
            return f"HTTP Status Code is {status!r}, not a number"
        headers = {name: value for name in context.dynamic_properties
                   if (value := context.property(name).evaluate(flowfile) or "").strip()}
        if self._attributes is not None:
            headers.update({k: v for k, v in flowfile.attributes.items() if self._attributes.fullmatch(k) and v.strip()})
        if not self._map.respond(identifier, int(status), headers):
            return f"its request {identifier} is no longer waiting (answered, expired, or the flow restarted)"
        try:
            with session.read(flowfile) as stream:
                while chunk := stream.read(CHUNK):
                    self._map.write(identifier, chunk)
        except LookupError as err:
            return str(err)
        return None

    def _complete(self, context: ProcessContext, identifiers: list[str]) -> None:
        for identifier in identifiers:
            if not self._map.complete(identifier):
                log.warning("%s: the request %s expired after its response was committed; its client got 503",
                            context.name, identifier)
