"""InvokeHTTP: an HTTP client processor, as NiFi 2's (docs/http.md, "InvokeHTTP").

**The client library: aiohttp.** It is already a dependency (the flow page's server), and its
client streams both ways (a request body from an async iterator, a response body read a chunk at
a time), has connect and read timeouts, redirects, HTTP proxies with Basic credentials, Basic and
Digest authentication, cookie jars and ``ssl.SSLContext`` objects; being asynchronous, it lets one
trigger keep several of its FlowFiles' requests in flight at once over one keep-alive connection
pool. httpx was the alternative (a synchronous API, HTTP/2), but would be a new dependency and
needs a thread a request to overlap them. aiohttp speaks HTTP/1.1 only: HTTP/2 Disabled is
accepted and changes nothing.

**How a trigger runs.** Each task owns an event loop and an aiohttp ``ClientSession`` on it (made
in ``on_scheduled``, closed in ``on_stopped``). The loop has no thread of its own: it runs in the
trigger's thread while the trigger waits on it (a second thread would hand every request and
reply across threads and contend with the trigger for the GIL; docs/http.md, "Performance"). The
trigger takes a batch, prepares each request (URL, method and headers evaluated against the
FlowFile; properties without expressions evaluated once, when scheduled) and starts it as a task
of the loop, keeping up to twice ``Socket Idle Connections`` started ahead; at most ``Socket Idle
Connections`` are in flight (a permit each, held until the response body is read). Each exchange
reads its response's first 64 KiB with its headers: a body that ends there gives its connection
and permit back at once. A trigger first runs one pass of the loop, so that keep-alive
connections the server closed since the last trigger leave the pool. The trigger handles the replies in the batch's order, running the loop
only when the next reply has not come yet (the later requests proceed meanwhile), and streams the
rest of a longer body into its Response FlowFile's content a chunk at a time (64 KiB), running
the loop for each. A request body is read from the FlowFile's content claim as it is sent: no
body is ever whole in memory.

**Routing** is NiFi's: 2xx -> the request FlowFile to Original and a Response FlowFile (the body)
to Response; 5xx -> Retry, penalized; 1xx, 3xx (redirects not followed) and 4xx -> No Retry
(penalized with Request Failure Penalization Enabled), the body in ``invokehttp.response.body``
cut to 256 bytes (or in the Response Body Attribute Name, cut to Response Body Attribute Size);
Response Generation Required sends a Response FlowFile whatever the status. A request that gets no response (refused,
unreachable, a timeout, a TLS failure, a URL that is not http(s)) goes to Failure, penalized,
with ``invokehttp.java.exception.class`` (here the Python exception's class, e.g.
``aiohttp.client_exceptions.ClientConnectorError``) and ``invokehttp.java.exception.message``,
and flowactors' ``flowactors.failure.reason`` and ``flowactors.failure.processor``.

Without an incoming connection the processor is a source: each trigger sends one request with no
FlowFile (not for POST, PUT and PATCH, which need one), as NiFi's.
"""

from __future__ import annotations

import base64
import concurrent.futures
import email.utils
import functools
import logging
import re
import time
import uuid
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Mapping

from flowactors.processors._common import boolean_property
from flowactors.sdk.expression import compile_value
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import failure_attributes, reason
from flowactors.sdk.services import SSLContextService

if TYPE_CHECKING:   # asyncio is imported where a scheduled task uses it: ``import flowactors.processors`` without it
    import asyncio

log = logging.getLogger(__name__)

ORIGINAL = Relationship("Original", "Request FlowFiles whose response had a 2xx status")
RESPONSE = Relationship("Response", "The response bodies of 2xx statuses (of every status with Response "
                                    "Generation Required)")
RETRY = Relationship("Retry", "Request FlowFiles whose response had a 5xx status (penalized)")
NO_RETRY = Relationship("No Retry", "Request FlowFiles whose response had a 1xx, 3xx or 4xx status")
FAILURE = Relationship("Failure", "Request FlowFiles that got no response: connection errors, timeouts (penalized)")

STATUS_CODE, STATUS_MESSAGE = "invokehttp.status.code", "invokehttp.status.message"
RESPONSE_BODY, REQUEST_URL = "invokehttp.response.body", "invokehttp.request.url"
REQUEST_DURATION, RESPONSE_URL = "invokehttp.request.duration", "invokehttp.response.url"
TRANSACTION_ID, REMOTE_DN = "invokehttp.tx.id", "invokehttp.remote.dn"
EXCEPTION_CLASS, EXCEPTION_MESSAGE = "invokehttp.java.exception.class", "invokehttp.java.exception.message"
#: attributes never sent as headers by Request Header Attributes Pattern (NiFi's list)
_NOT_SENT = {STATUS_CODE, STATUS_MESSAGE, RESPONSE_BODY, REQUEST_URL, RESPONSE_URL, TRANSACTION_ID, REMOTE_DN,
             EXCEPTION_CLASS, EXCEPTION_MESSAGE, "path"}
#: the methods that send the FlowFile's content; every other (custom ones too) sends no body
BODY_METHODS = ("POST", "PUT", "PATCH")
DEFAULT_CONTENT_TYPE = "application/octet-stream"
FORM_PREFIX = "post:form:"
CHUNK = 64 * 1024
_TRUE_FALSE = ("True", "False")


_PROPERTIES = (
    PropertyDescriptor("HTTP Method", "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS or any other; only POST, PUT "
                       "and PATCH send a body", required=True, default="GET", expression_language=True),
    PropertyDescriptor("HTTP URL", "The http:// or https:// URL (encoded by the user)", required=True,
                       expression_language=True, validator=validators.NON_EMPTY),
    PropertyDescriptor("HTTP/2 Disabled", "Accepted; aiohttp speaks HTTP/1.1 only", default="False",
                       allowable_values=_TRUE_FALSE),
    PropertyDescriptor("SSL Context Service", "The TLS settings for https URLs (the truststore, and a client "
                       "certificate)", service=SSLContextService),
    PropertyDescriptor("Connection Timeout", "The longest wait for a connection", required=True, default="5 secs",
                       validator=validators.DURATION),
    PropertyDescriptor("Socket Read Timeout", "The longest wait for the response's next bytes", required=True,
                       default="15 secs", validator=validators.DURATION),
    PropertyDescriptor("Socket Write Timeout", "Accepted, not applied (aiohttp has no write timeout)",
                       default="15 secs", validator=validators.DURATION),
    PropertyDescriptor("Socket Idle Timeout", "How long an idle connection is kept open", required=True,
                       default="5 mins", validator=validators.DURATION),
    PropertyDescriptor("Socket Idle Connections", "The most connections kept open, and the most requests of a task in "
                       "flight at once", required=True, default="5", validator=validators.POSITIVE_INTEGER),
    PropertyDescriptor("Proxy Host", "An HTTP proxy's host name (NiFi 1's property)"),
    PropertyDescriptor("Proxy Port", "The proxy's port", validator=validators.POSITIVE_INTEGER),
    PropertyDescriptor("Proxy Type", "The proxy's protocol", default="http", allowable_values=("http", "https")),
    PropertyDescriptor("Proxy Username", "A user name for the proxy's Basic authentication"),
    PropertyDescriptor("Proxy Password", "The proxy user's password", sensitive=True),
    PropertyDescriptor("Request Username", "The user name of Basic (or Digest) authentication"),
    PropertyDescriptor("Request Password", "The password of Basic (or Digest) authentication", sensitive=True),
    boolean_property("Request Digest Authentication Enabled", False, "Digest authentication instead of Basic"),
    boolean_property("Request Failure Penalization Enabled", False, "Penalize FlowFiles sent to No Retry"),
    boolean_property("Request Body Enabled", True, "Send the content as the body of POST, PUT and PATCH"),
    PropertyDescriptor("Request Multipart Form-Data Name", "Send the content as this part of a multipart/form-data "
                       "body", expression_language=True),
    boolean_property("Request Multipart Form-Data Filename Enabled", True,
                     "Name the content's part with the FlowFile's filename"),
    boolean_property("Request Chunked Transfer-Encoding Enabled", False,
                     "Send the body chunked, without Content-Length"),
    PropertyDescriptor("Request Content-Encoding", "GZIP: compress the body (Content-Encoding: gzip)", required=True,
                       default="DISABLED", allowable_values=("DISABLED", "GZIP")),
    PropertyDescriptor("Request Content-Type", "The body's Content-Type (blank: application/octet-stream)",
                       required=True, default="${mime.type}", expression_language=True),
    PropertyDescriptor("Request Date Header Enabled", "Send a Date header", required=True, default="True",
                       allowable_values=_TRUE_FALSE),
    PropertyDescriptor("Request Header Attributes Pattern", "A regular expression: the attributes whose whole name "
                       "matches are sent as headers", validator=validators.REGEX),
    PropertyDescriptor("Request User-Agent", "The User-Agent header (unset: none sent)", expression_language=True),
    PropertyDescriptor("Response Body Attribute Name", "Put the response body in this attribute of the request "
                       "FlowFile (and send no Response FlowFile, unless Response Generation Required)",
                       expression_language=True),
    PropertyDescriptor("Response Body Attribute Size", "The most bytes of the body put in an attribute", required=True,
                       default="256", validator=validators.POSITIVE_INTEGER),
    boolean_property("Response Body Ignored", False, "Read no response body"),
    PropertyDescriptor("Response Cookie Strategy", "ACCEPT_ALL: keep cookies across requests", required=True,
                       default="DISABLED", allowable_values=("DISABLED", "ACCEPT_ALL")),
    boolean_property("Response Generation Required", False, "A Response FlowFile whatever the status"),
    PropertyDescriptor("Response FlowFile Naming Strategy", "URL_PATH: a GET's Response FlowFile is named after "
                       "the URL's last path segment", required=True, default="RANDOM",
                       allowable_values=("RANDOM", "URL_PATH")),
    boolean_property("Response Header Request Attributes Enabled", False,
                     "Put the response headers in attributes of the request FlowFile too"),
    PropertyDescriptor("Response Header Request Attributes Prefix", "The prefix of those attributes",
                       expression_language=True),
    PropertyDescriptor("Response Redirects Enabled", "Follow redirects", required=True, default="True",
                       allowable_values=_TRUE_FALSE),
)


@dataclass
class _Prepared:
    """A request ready to go: what the trigger evaluated for one FlowFile (or none)."""

    flowfile: Any
    method: str
    url: str
    #: ``url`` parsed
    target: Any
    headers: dict[str, str]
    body: Any = None
    #: headers aiohttp must not add of its own (besides User-Agent, skipped for every request)
    skip_headers: tuple[str, ...] = ()
    tx_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    stack: ExitStack = field(default_factory=ExitStack)
    #: the Response FlowFile once made (removed again when the body breaks off)
    response: Any = None


@dataclass
class _Reply:
    """A response whose headers arrived, with its body's first bytes; the rest is read when the
    trigger handles it. ``complete``: the whole body is in ``first``, and the connection and the
    permit were given back already (a small body is written in one call, without running the loop)."""

    response: Any
    elapsed_ms: int
    remote_dn: str | None
    headers: dict[str, str]
    first: bytes = b""
    complete: bool = False


class _EventLoop:
    """One task's asyncio loop, run by the thread that waits on it (the trigger's) for as long as
    it waits: no second thread, so no hand-off between threads and no contention for the GIL
    between an I/O thread and the trigger's thread. Used by one thread at a time (a task's
    callbacks never overlap). A caller whose thread runs an event loop of its own already (a
    stateless flow triggered from async code) has this loop run in a helper thread meanwhile."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._running_loop = asyncio.events._get_running_loop
        self._helper: concurrent.futures.ThreadPoolExecutor | None = None

    def start(self, coroutine) -> asyncio.Task:
        """The coroutine as a task of the loop: it starts when the loop next runs."""
        return self.loop.create_task(coroutine)

    def run(self, awaitable) -> Any:
        """Runs the loop until ``awaitable`` is done (the loop's other tasks progress meanwhile)."""
        if self._running_loop() is None:
            return self.loop.run_until_complete(awaitable)
        if self._helper is None:
            self._helper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="InvokeHTTP")
        return self._helper.submit(self.loop.run_until_complete, awaitable).result()

    def close(self) -> None:
        self.run(self.loop.shutdown_asyncgens())
        self.loop.close()
        if self._helper is not None:
            self._helper.shutdown()


def _per_flowfile(value: Any) -> Callable[[Any], str | None]:
    """A property's value for a FlowFile: evaluated once if it holds no expression."""
    if value.raw is None or compile_value(value.raw).is_literal:
        constant = value.evaluate()
        return lambda flowfile: constant
    return value.evaluate


class _Settings:
    """The properties a trigger reads for each request and response, looked up once when the
    processor is scheduled (they do not change while it runs); those holding expressions are
    evaluated against each FlowFile."""

    def __init__(self, context: ProcessContext) -> None:
        prop = context.property
        self.method, self.url = _per_flowfile(prop("HTTP Method")), _per_flowfile(prop("HTTP URL"))
        self.agent = _per_flowfile(prop("Request User-Agent"))
        user = (prop("Request Username").raw or "").strip()
        self.authorization = {"Authorization": basic_credentials(user, (prop("Request Password").raw or "").strip())} \
            if user and not prop("Request Digest Authentication Enabled").as_bool() else {}
        self.date = prop("Request Date Header Enabled").as_bool()
        #: (name, value) of the dynamic properties sent as headers, in their order
        self.headers = [(name, _per_flowfile(prop(name))) for name in context.dynamic_properties
                        if not name.startswith(FORM_PREFIX)]
        pattern = (prop("Request Header Attributes Pattern").raw or "").strip()
        self.attributes_pattern = re.compile(pattern) if pattern else None
        self.body_attribute = _per_flowfile(prop("Response Body Attribute Name")) \
            if prop("Response Body Attribute Name").is_set else None
        self.always_respond = prop("Response Generation Required").as_bool()
        self.read_body = not prop("Response Body Ignored").as_bool()
        #: as NiFi: the size applies to Response Body Attribute Name's attribute only; an error
        #: body in invokehttp.response.body is cut to 256 bytes
        self.attribute_size = (prop("Response Body Attribute Size").as_int() or 256) \
            if self.body_attribute is not None else 256
        self.url_path_names = prop("Response FlowFile Naming Strategy").raw == "URL_PATH"
        self.headers_to_request = prop("Response Header Request Attributes Enabled").as_bool()
        # the body of a POST, PUT or PATCH
        self.send_body = prop("Request Body Enabled").as_bool()
        self.content_type = _per_flowfile(prop("Request Content-Type"))
        self.gzip = prop("Request Content-Encoding").raw == "GZIP"
        self.chunked = prop("Request Chunked Transfer-Encoding Enabled").as_bool() or self.gzip
        self.form_name = _per_flowfile(prop("Request Multipart Form-Data Name"))
        #: (field name, value) of the post:form:* dynamic properties, in their order
        self.form_fields = [(name[len(FORM_PREFIX):], _per_flowfile(prop(name))) for name in context.dynamic_properties
                            if name.startswith(FORM_PREFIX)]
        self.form_filename = prop("Request Multipart Form-Data Filename Enabled").as_bool()


@functools.lru_cache(maxsize=4)
def _http_date(second: int) -> str:
    """The Date header's value for a second (RFC 1123, GMT): formatted once a second."""
    return email.utils.formatdate(second, usegmt=True)


def basic_credentials(user: str, password: str) -> str:
    """An Authorization (or Proxy-Authorization) value of Basic authentication (RFC 7617; the
    user and password in ISO-8859-1, as NiFi's OkHttp encodes them, UTF-8 beyond it)."""
    text = f"{user}:{password}"
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raw = text.encode()
    return "Basic " + base64.b64encode(raw).decode()


@functools.lru_cache(maxsize=64)
def _target(url: str) -> Any:
    """The URL a request goes to, parsed (yarl's URL); ``ValueError`` for one it cannot send to."""
    from yarl import URL

    try:
        parsed = URL(url)
    except (ValueError, TypeError) as err:
        raise ValueError(f"the HTTP URL {url!r} is not a URL: {err}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"the HTTP URL {url!r} must start with http:// or https:// and name a host")
    return parsed


@functools.cache
def _response_class() -> type:
    """aiohttp's response, keeping the server's certificate (DER) as the connection starts it:
    a response whose body came whole with its headers gives its connection back at once."""
    import aiohttp

    class PeerResponse(aiohttp.ClientResponse):
        peer_der: bytes | None = None

        async def start(self, connection):
            transport = connection.transport
            ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
            self.peer_der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            return await super().start(connection)

    return PeerResponse


def _remote_dn(response: Any) -> str | None:
    """The server certificate's subject (RFC 4514, as Java's X500Principal names it), when TLS."""
    if not response.peer_der:
        return None
    from cryptography.x509 import load_der_x509_certificate

    return load_der_x509_certificate(response.peer_der).subject.rfc4514_string()


def _header_attributes(response: Any) -> dict[str, str]:
    """The response headers as attributes: the name as sent, several values joined with ', '."""
    values: dict[str, list[str]] = {}
    for raw_name, raw_value in response.raw_headers:
        name = raw_name.decode("latin-1").strip()
        if name:
            values.setdefault(name, []).append(raw_value.decode("latin-1"))
    return {name: ", ".join(found) for name, found in values.items()}


async def _body_chunks(stream: BinaryIO, gzip: bool):
    """The content, a chunk at a time (gzip-compressed when asked): a request body aiohttp streams."""
    compressor = zlib.compressobj(wbits=31) if gzip else None
    while chunk := stream.read(CHUNK):   # a local claim file: a short blocking read
        yield compressor.compress(chunk) if compressor else chunk
    if compressor is not None:
        yield compressor.flush()


class _Client:
    """One task's aiohttp session and the loop it runs on (see the module docstring)."""

    def __init__(self, context: ProcessContext) -> None:
        import aiohttp

        prop = context.property
        self.in_flight = prop("Socket Idle Connections").as_int() or 5
        self.redirects = prop("Response Redirects Enabled").as_bool()
        self.proxy, self.proxy_headers = None, {}
        if prop("Proxy Host").raw:
            port = prop("Proxy Port").as_int()
            self.proxy = f"{prop('Proxy Type').raw or 'http'}://{prop('Proxy Host').raw}" + (f":{port}" if port else "")
            if prop("Proxy Username").raw:
                self.proxy_headers = {"Proxy-Authorization": basic_credentials(prop("Proxy Username").raw,
                                                                               prop("Proxy Password").raw or "")}
        ssl_service = context.service("SSL Context Service", SSLContextService) if prop("SSL Context Service").raw \
            else None
        self.ssl = ssl_service.create_context() if ssl_service is not None else True
        user = (prop("Request Username").raw or "").strip()
        middlewares = ()
        if user and prop("Request Digest Authentication Enabled").as_bool():
            middlewares = (aiohttp.DigestAuthMiddleware(user, (prop("Request Password").raw or "").strip()),)
        self.loop = _EventLoop()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=prop("Connection Timeout").as_duration(),
                                        sock_read=prop("Socket Read Timeout").as_duration())
        cookies = prop("Response Cookie Strategy").raw == "ACCEPT_ALL"

        async def start() -> Any:
            connector = aiohttp.TCPConnector(limit=self.in_flight, ssl=self.ssl,
                                             keepalive_timeout=prop("Socket Idle Timeout").as_duration())
            jar = aiohttp.CookieJar(unsafe=True) if cookies else aiohttp.DummyCookieJar()
            return aiohttp.ClientSession(connector=connector, timeout=timeout, cookie_jar=jar, middlewares=middlewares,
                                         skip_auto_headers=("User-Agent",), response_class=_response_class())

        self.session = self.loop.run(start())
        self.permits = self.loop.run(self._semaphore())

    async def _semaphore(self) -> asyncio.Semaphore:
        import asyncio

        return asyncio.Semaphore(self.in_flight)

    async def exchange(self, request: _Prepared) -> _Reply:
        """Sends the request; returns once the response's headers arrived (its body still to read)."""
        await self.permits.acquire()
        try:
            started = time.monotonic()
            headers = request.headers
            if self.proxy_headers and request.url.startswith("http:"):   # no tunnel: the proxy reads the request
                headers = {**headers, **self.proxy_headers}
            response = await self.session.request(request.method, request.target, headers=headers,
                                                  data=request.body, allow_redirects=self.redirects,
                                                  skip_auto_headers=request.skip_headers or None,
                                                  proxy=self.proxy, proxy_headers=self.proxy_headers or None)
            elapsed = int((time.monotonic() - started) * 1000)
            reply = _Reply(response, elapsed, _remote_dn(response), _header_attributes(response))
            reply.first = await response.content.read(CHUNK)
        except BaseException:
            self.permits.release()
            raise
        if response.content.at_eof():
            reply.complete = True
            self._give_back(reply)
        return reply

    def _give_back(self, reply: _Reply) -> None:
        """(On the loop) the connection back to the pool, or closed when its body was left unread,
        and the permit back."""
        reply.response.release()
        self.permits.release()

    def finish(self, reply: _Reply) -> None:
        """The trigger is done with ``reply``: what it holds is given back."""
        if not reply.complete:
            reply.complete = True
            self._give_back(reply)

    def abandon(self, exchanges: list[asyncio.Task]) -> None:
        """Cancels exchanges whose replies will not be handled, giving back the connections of
        those whose reply came, and lets the cancelled ones end (their permits given back)."""
        for exchange in exchanges:
            if not exchange.cancel() and not exchange.cancelled() and exchange.exception() is None:
                self.finish(exchange.result())
        import asyncio

        self.loop.run(asyncio.gather(*exchanges, return_exceptions=True))

    def catch_up(self) -> None:
        """One pass of the loop over what happened since it last ran: a keep-alive connection the
        server closed meanwhile leaves the pool before a request is sent on it (a POST sent on it
        would fail, aiohttp resending only idempotent methods)."""
        import asyncio

        self.loop.run(asyncio.sleep(0))

    def read(self, reply: _Reply, size: int = CHUNK) -> bytes:
        """The response body's next bytes, at most ``size`` (b"" at its end): those read with the
        headers first, then read by running the loop."""
        if reply.first:
            chunk, reply.first = reply.first[:size], reply.first[size:]
            return chunk
        if reply.complete:
            return b""
        return self.loop.run(reply.response.content.read(size))

    def close(self) -> None:
        self.loop.run(self.session.close())
        self.loop.close()


class InvokeHTTP(Processor):
    """Sends an HTTP request a FlowFile and routes by the response (see the module docstring).
    Provenance: SEND of the request FlowFile (transit URI the URL) once a response came; FETCH of
    the Response FlowFile (RECEIVE for a source's request without a FlowFile); ATTRIBUTES_MODIFIED
    when the body goes into an attribute."""

    description = "Sends an HTTP request for each FlowFile (its content as the body of POST, PUT, PATCH) and " \
                  "routes it, and the response, by the status"
    NIFI_TYPE = "org.apache.nifi.processors.standard.InvokeHTTP"
    NIFI_PROPERTY_NAMES = {
        "Read Timeout": "Socket Read Timeout", "Remote URL": "HTTP URL", "disable-http2": "HTTP/2 Disabled",
        "idle-timeout": "Socket Idle Timeout", "max-idle-connections": "Socket Idle Connections",
        "Basic Authentication Username": "Request Username", "Basic Authentication Password": "Request Password",
        "Digest Authentication": "Request Digest Authentication Enabled",
        'Penalize on "No Retry"': "Request Failure Penalization Enabled", "send-message-body": "Request Body Enabled",
        "form-body-form-name": "Request Multipart Form-Data Name",
        "set-form-filename": "Request Multipart Form-Data Filename Enabled",
        "Use Chunked Encoding": "Request Chunked Transfer-Encoding Enabled",
        "Content-Encoding": "Request Content-Encoding", "Content-Type": "Request Content-Type",
        "Include Date Header": "Request Date Header Enabled", "Attributes to Send": "Request Header Attributes Pattern",
        "Useragent": "Request User-Agent", "Put Response Body In Attribute": "Response Body Attribute Name",
        "Max Length To Put In Attribute": "Response Body Attribute Size",
        "ignore-response-content": "Response Body Ignored", "cookie-strategy": "Response Cookie Strategy",
        "Always Output Response": "Response Generation Required",
        "flow-file-naming-strategy": "Response FlowFile Naming Strategy",
        "Add Response Headers to Request": "Response Header Request Attributes Enabled",
        "Follow Redirects": "Response Redirects Enabled",
        "invokehttp-proxy-user": "Proxy Username", "invokehttp-proxy-password": "Proxy Password"}
    NIFI_VALUES = {name: {"true": "True", "false": "False"} for name in (
        "HTTP/2 Disabled", "Request Date Header Enabled", "Response Redirects Enabled")}
    #: the response cache (OkHttp's) is not offered: accepted off; an OAuth2 token provider or a
    #: proxy service (NiFi 2's form of the proxy properties) is not supported: accepted unset
    NIFI_FIXED = {"Response Cache Enabled": "false", "use-etag": "false",
                  "Request OAuth2 Access Token Provider": None, "oauth2-access-token-provider": None,
                  "Proxy Configuration Service": None, "proxy-configuration-service": None}
    NIFI_IGNORED = ("Response Cache Size", "etag-max-cache-size", "OAuth2 Access Token Refresh Strategy")
    properties = _PROPERTIES
    relationships = (ORIGINAL, RESPONSE, RETRY, NO_RETRY, FAILURE)
    input_required = False
    input_allowed = True
    dynamic_properties = True

    def __init__(self) -> None:
        self._client: _Client | None = None
        self._settings: _Settings | None = None

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        has_form = any(name.startswith(FORM_PREFIX) for name in values)
        body = values.get("Request Body Enabled", "true").lower() == "true"
        if has_form and body and not values.get("Request Multipart Form-Data Name"):
            problems.append("Request Multipart Form-Data Name is required when form data properties (post:form:*) "
                            "are set and Request Body Enabled is true")
        if values.get("Request Multipart Form-Data Name") and not body:
            problems.append("Request Body Enabled must be true when Request Multipart Form-Data Name is set")
        if values.get("Proxy Host") and not values.get("Proxy Port"):
            problems.append("Proxy Port must be set when Proxy Host is")
        return problems

    def on_scheduled(self, context: ProcessContext) -> None:
        self._settings = _Settings(context)
        self._client = _Client(context)

    def on_stopped(self, context: ProcessContext) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def on_trigger(self, context: ProcessContext, session) -> None:
        client = self._client
        assert client is not None, "on_scheduled makes the client"
        flowfiles: list[Any] = session.get_batch()
        if not flowfiles:   # a source: one request without a FlowFile (NiFi's INPUT_ALLOWED with no input)
            if context.has_incoming_connection:
                return   # connected: another task took the FlowFiles; only a source sends without one
            method = (context.property("HTTP Method").evaluate() or "").strip().upper()
            if method in BODY_METHODS:
                return
            flowfiles = [session.create() if context.property("Response Body Attribute Name").is_set else None]
        client.catch_up()
        window: list[tuple[_Prepared, asyncio.Task]] = []
        try:
            for flowfile in flowfiles:
                try:
                    request = self._prepare(session, flowfile)
                except ValueError as err:
                    self._failed(context, session, flowfile, err)
                    continue
                window.append((request, client.loop.start(client.exchange(request))))
                if len(window) >= 2 * client.in_flight:   # replies read whole give their permit back early
                    self._handle(context, session, *window.pop(0))
            while window:
                self._handle(context, session, *window.pop(0))
        finally:
            if window:   # an error left these unhandled: the session rolls back
                client.abandon([exchange for _, exchange in window])
                for request, _ in window:
                    request.stack.close()

    # ------------------------------------------------------------------ the request
    def _prepare(self, session, flowfile: Any) -> _Prepared:
        """The request for ``flowfile`` (None: a source's): ``ValueError`` for a URL it cannot send to."""
        settings = self._settings
        assert settings is not None, "on_scheduled reads the settings"
        url = (settings.url(flowfile) or "").strip()
        target = _target(url)
        method = (settings.method(flowfile) or "").strip().upper()
        request = _Prepared(flowfile, method, url, target, self._headers(settings, flowfile))
        if method in BODY_METHODS:
            self._attach_body(session, request)
        return request

    @staticmethod
    def _headers(settings: _Settings, flowfile: Any) -> dict[str, str]:
        headers = dict(settings.authorization)
        agent = (settings.agent(flowfile) or "").strip()
        if agent:
            headers["User-Agent"] = agent
        if settings.date:
            headers["Date"] = _http_date(int(time.time()))
        for name, header in settings.headers:
            value = header(flowfile)
            if value is not None:
                headers[name] = value
        pattern = settings.attributes_pattern
        if pattern is not None and flowfile is not None:
            for name, value in flowfile.attributes.items():
                name = name.strip()
                if name not in _NOT_SENT and pattern.fullmatch(name):
                    headers[name] = value.strip()
        return headers

    def _attach_body(self, session, request: _Prepared) -> None:
        """The body of a POST, PUT or PATCH: the content streamed from its claim (gzip-compressed,
        chunked, or in a multipart form as configured), or an empty one."""
        import aiohttp

        settings, flowfile = self._settings, request.flowfile
        assert settings is not None, "on_scheduled reads the settings"
        content_type = (settings.content_type(flowfile) or "").strip() or DEFAULT_CONTENT_TYPE
        form_name = settings.form_name(flowfile)
        content = None
        if settings.send_body and flowfile is not None:
            stream = request.stack.enter_context(session.read(flowfile))
            content = aiohttp.payload.AsyncIterablePayload(_body_chunks(stream, settings.gzip),
                                                           content_type=content_type)
            if settings.gzip:
                request.headers["Content-Encoding"] = "gzip"
        if settings.form_fields or form_name:
            form = aiohttp.MultipartWriter("form-data")
            for name, value in settings.form_fields:
                form.append(value(flowfile) or "").set_content_disposition("form-data", name=name)
            if content is not None:
                filename = flowfile.attributes.get("filename") if settings.form_filename else None
                form.append_payload(content).set_content_disposition("form-data", name=form_name or "",
                                                                     **({"filename": filename} if filename else {}))
            request.body = form
            return
        if content is None:   # as NiFi's empty body: no media type (aiohttp would add its default)
            request.body, request.skip_headers = b"", ("Content-Type",)
            return
        request.headers["Content-Type"] = content_type
        request.body = content
        if not settings.chunked:
            request.headers["Content-Length"] = str(flowfile.size)

    # ------------------------------------------------------------------ the response
    def _handle(self, context: ProcessContext, session, request: _Prepared,
                exchange: asyncio.Task) -> None:
        """Waits for the request's reply and routes its FlowFiles (NiFi's rules: the module docstring)."""
        client = self._client
        assert client is not None
        flowfile = request.flowfile
        try:
            reply = exchange.result() if exchange.done() else client.loop.run(exchange)
        except Exception as err:
            request.stack.close()
            self._failed(context, session, flowfile, err)
            return
        try:
            request.stack.close()   # the body was sent: its content stream is done with
            if flowfile is not None and request.method in BODY_METHODS:
                session.provenance.send(flowfile, request.url, duration=reply.elapsed_ms)
            flowfile, response_flowfile = self._outputs(context, session, request, reply)
        except Exception as err:   # the body broke off (a read timeout, a reset connection)
            if request.response is not None:
                session.remove(request.response)
            self._failed(context, session, flowfile, err)
            return
        finally:
            client.finish(reply)
        self._route(context, session, flowfile, response_flowfile, reply.response.status)

    def _outputs(self, context: ProcessContext, session, request: _Prepared, reply: _Reply) -> tuple[Any, Any]:
        """The request FlowFile with the status attributes (and the body, or its start, in an
        attribute), and the Response FlowFile when one is made: its body streamed into its content."""
        settings, response, flowfile = self._settings, reply.response, request.flowfile
        assert settings is not None, "on_scheduled reads the settings"
        status = {STATUS_CODE: str(response.status), STATUS_MESSAGE: response.reason or "", REQUEST_URL: request.url,
                  REQUEST_DURATION: str(reply.elapsed_ms), RESPONSE_URL: str(response.url),
                  TRANSACTION_ID: request.tx_id}
        if flowfile is not None:
            flowfile = session.put_all_attributes(flowfile, status)
        to_attribute_name = settings.body_attribute(flowfile) if settings.body_attribute is not None else None
        success = 200 <= response.status < 300
        to_attribute = (not success or to_attribute_name is not None) and flowfile is not None
        to_content = (success and to_attribute_name is None) or settings.always_respond
        body, limit = settings.read_body, settings.attribute_size
        kept = bytearray()
        response_flowfile = None
        if to_content:
            response_flowfile = session.create(flowfile) if flowfile is not None else session.create()
            request.response = response_flowfile
            response_flowfile = session.put_all_attributes(response_flowfile,
                                                           self._response_attributes(request, reply, status))
            if body:
                keep = limit if to_attribute else 0
                if reply.complete:   # the whole body came with the headers: one write
                    data, reply.first = reply.first, b""
                    kept.extend(data[:keep])
                    response_flowfile = session.write_bytes(response_flowfile, data)
                else:
                    response_flowfile = session.write(response_flowfile,
                                                      lambda out: self._copy_body(reply, out, kept, keep))
                millis = reply.elapsed_ms
                if flowfile is not None:
                    session.provenance.fetch(response_flowfile, request.url, duration=millis)
                else:
                    session.provenance.receive(response_flowfile, request.url, duration=millis)
        if to_attribute and body:
            if not to_content:
                while len(kept) < limit and (chunk := self._client.read(reply, limit - len(kept))):
                    kept.extend(chunk)
            name = to_attribute_name or RESPONSE_BODY
            flowfile = session.put_attribute(flowfile, name, bytes(kept[:limit]).decode(response.charset or "utf-8",
                                                                                         errors="replace"))
            session.provenance.modify_attributes(flowfile, f"Response Body Attribute Added [{name}] Processing "
                                                           f"Duration [{reply.elapsed_ms} ms]")
        if settings.headers_to_request and flowfile is not None:
            prefix = (context.property("Response Header Request Attributes Prefix").evaluate(flowfile) or "").strip()
            extra = {REMOTE_DN: reply.remote_dn} if reply.remote_dn else {}
            flowfile = session.put_all_attributes(flowfile, {prefix + k: v for k, v in reply.headers.items()} | extra)
        return flowfile, response_flowfile

    def _response_attributes(self, request: _Prepared, reply: _Reply, status: dict[str, str]) -> dict[str, str]:
        """The Response FlowFile's attributes: the status, the response headers, the server's DN,
        the name from the URL's path (URL_PATH naming of a GET) and ``mime.type`` (in that order:
        a later one wins over a header of the same name)."""
        assert self._settings is not None
        response = reply.response
        values = {**status, **reply.headers}
        if reply.remote_dn:
            values[REMOTE_DN] = reply.remote_dn
        if self._settings.url_path_names and request.method == "GET":
            name = request.target.path.rstrip("/").rpartition("/")[2]   # the URL asked for (NiFi's), not a redirect's
            if name:
                values["filename"] = name
        if self._settings.read_body and response.headers.get("Content-Type"):
            values["mime.type"] = response.headers["Content-Type"]
        return values

    def _copy_body(self, reply: _Reply, out: BinaryIO, kept: bytearray, keep: int) -> None:
        """Streams the response body into ``out``, keeping its first ``keep`` bytes in ``kept``."""
        assert self._client is not None
        while chunk := self._client.read(reply):
            out.write(chunk)
            if len(kept) < keep:
                kept.extend(chunk[:keep - len(kept)])

    def _route(self, context: ProcessContext, session, flowfile: Any, response_flowfile: Any, status: int) -> None:
        if not 200 <= status < 300 and flowfile is None:
            context.yield_()
        if response_flowfile is not None:
            session.transfer(response_flowfile, RESPONSE)
        if flowfile is None:
            return
        if 200 <= status < 300:
            session.transfer(flowfile, ORIGINAL)
        elif status // 100 == 5:
            session.transfer(session.penalize(flowfile), RETRY)
        else:
            if context.property("Request Failure Penalization Enabled").as_bool():
                flowfile = session.penalize(flowfile)
            session.transfer(flowfile, NO_RETRY)

    def _failed(self, context: ProcessContext, session, flowfile: Any, err: BaseException) -> None:
        """No response: the request FlowFile to Failure, penalized, with the error (a source's: yield)."""
        message = _message(err, context)
        kind = type(err)
        log.error("%s: %s request failed: %s", context.name, flowfile.uuid if flowfile is not None else "a", message)
        if flowfile is None:
            context.yield_()
            return
        flowfile = session.put_all_attributes(flowfile, {
            EXCEPTION_CLASS: f"{kind.__module__}.{kind.__qualname__}", EXCEPTION_MESSAGE: message,
            **failure_attributes(context.name, f"{kind.__name__}: {message}")})
        session.transfer(session.penalize(flowfile), FAILURE)


def _message(err: BaseException, context: ProcessContext) -> str:
    """One line saying why a request got no response."""
    import asyncio

    import aiohttp

    if isinstance(err, aiohttp.ConnectionTimeoutError):
        return f"no connection within the Connection Timeout ({context.property('Connection Timeout').raw})"
    if isinstance(err, (aiohttp.SocketTimeoutError, asyncio.TimeoutError)):
        return f"no response bytes within the Socket Read Timeout ({context.property('Socket Read Timeout').raw})"
    return reason(err)


__all__ = ["InvokeHTTP"]
