"""ListenHTTP: an HTTP server whose POSTed bodies become FlowFiles (NiFi's ListenHTTP; docs/http.md).

**Where things run.** ``on_scheduled`` starts an aiohttp server (``flowactors.sdk.http_server``)
on an event loop in a thread of the processor's own process; ``on_stopped`` closes it (the port
is free when it returns). A request's body is read on the server's thread: as bytes when its
Content-Length says it fits in 1 MB, else a chunk at a time into a spooled temporary file (memory
up to 1 MB, the rest on disk); it is then handed to ``on_trigger`` through an in-memory inbox.
``on_trigger`` takes every request waiting (``_take``: while requests flow it waits briefly for
the clients its last commit answered, so one commit carries them all), writes each body into the
session's content (bytes in one call, a spooled file a chunk at a time), transfers the FlowFiles
to success and calls ``session.commit_async``, whose ``on_success`` answers them all with one
call into the server's loop. Concurrent tasks of one ListenHTTP in one process share the first
one's server and inbox (``_SERVING``). Where the time goes: docs/performance.md, "ListenHTTP".

**Delivery.** The client gets Return Code only from the commit's ``on_success``, that is once the
FlowFiles are durable; a commit that fails answers 500 and keeps nothing (the session rolls
back). While success is under back pressure (``session.available_relationships()`` empty, looked
at each trigger) requests are answered 503 at once. A request no trigger takes within
``HANDOVER_WAIT`` seconds (the processor stopped) is answered 503. Nothing acknowledged is lost by
a kill; a request cut off before its answer may have been committed and is sent again by a client
that retries (at least once).
"""

from __future__ import annotations

import io
import logging
import re
import shutil
import threading
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, Mapping

from flowactors.processors._common import CHUNK, REGEX_VALIDATOR
from flowactors.processors.packaging import FLOWFILE_V3_MIME_TYPE, FlowFileStreamReader, PackageError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory
from flowactors.sdk.services import SSLContextService

if TYPE_CHECKING:   # annotations: aiohttp is imported when a ListenHTTP starts (below)
    from aiohttp import web

    from flowactors.sdk.http_server import HttpListener

log = logging.getLogger(__name__)

#: seconds a request waits for a trigger to take it before it is answered 503
HANDOVER_WAIT = 30.0
_NO_ROOM = "no room downstream: success is under back pressure"
#: requests one trigger takes (one commit answers them all)
REQUESTS_PER_TRIGGER = 100
#: seconds a trigger waits for a first request when the task's last trigger took some (requests
#: are flowing: the clients just answered send their next ones); a trigger after one that took
#: none waits for nothing (a task inside a trigger is busy, not idle, to the engine: a flow run
#: until idle would never end), and the engine pauses a source that found nothing (10 ms) before
#: triggering it again
FLOWING_WAIT = 0.01
#: seconds a trigger then waits, once the first came, for as many requests as the last trigger
#: took: the clients that commit answered come back together, and one commit for all of them
#: costs less than two (a commit's cost is mostly its own, not its FlowFiles')
GATHER_WAIT = 0.005
#: the servers the concurrent tasks of a processor share in this process, by (name, Listening Port)
_SERVING: dict[tuple[str, str | None], "ListenHTTP"] = {}
_SERVING_LOCK = threading.Lock()
CLIENT_AUTH_VALUES = ("AUTO", "WANT", "REQUIRED", "NONE")
HTTP_1_1, H2_HTTP_1_1, H2 = "HTTP_1_1", "H2_HTTP_1_1", "H2"
#: what a HEAD on the base path tells a NiFi sender (the FlowFile formats and transfer protocol taken)
HEAD_HEADERS = {"Accept": f"{FLOWFILE_V3_MIME_TYPE},*/*;q=0.8", "Accept-Encoding": "gzip",
                "x-nifi-transfer-protocol-version": "3"}


def port_validator(value: str) -> str | None:
    """A Listening Port's validator (HandleHttpRequest's too)."""
    text = value.strip()
    return None if text.isascii() and text.isdigit() and 0 <= int(text) <= 65535 else "must be a port number (0 to 65535)"


def _base_path(value: str) -> str | None:
    return "must not begin or end with '/'" if value.startswith("/") or value.endswith("/") else None


class _Received:
    """One request's FlowFiles-to-be, handed from the server's thread to a trigger: their contents
    (rewound spooled files, or a small plain body's bytes) with their own attributes, the
    request's attributes, and the future the server awaits for the status to answer."""

    def __init__(self, parts: list[tuple[Any, dict[str, str]]], attributes: dict[str, str], uri: str,
                 details: str, packaged: bool):
        self.parts = parts
        self.attributes = attributes
        self.uri = uri
        self.details = details
        self.packaged = packaged
        self.started = time.monotonic()
        self.future: Any = None
        #: the DELETE confirming a hold: answered 200, not Return Code (NiFi's ContentAcknowledgmentServlet)
        self.confirms_hold = False
        self.state = "waiting"   # -> "taken" by a trigger, or "abandoned" by the server (guarded by the inbox lock)

    def close(self) -> None:
        for content, _ in self.parts:
            if not isinstance(content, bytes):
                content.close()


class ListenHTTP(Processor):
    """Listens for HTTP POSTs on Listening Port under Base Path and turns each body into a FlowFile
    (a FlowFile Stream v3 body into the FlowFiles it packages, a multipart/form-data body into a
    FlowFile per part), answering Return Code once they are committed; see the module docstring
    and docs/http.md for the delivery rules and what differs from NiFi. Provenance: RECEIVE of
    each FlowFile, transit URI the request's URL."""

    description = "Starts an HTTP server and makes a FlowFile of each body POSTed under its Base Path"
    input_required = False
    trigger_when_empty = True
    properties = (
        PropertyDescriptor("Base Path", "The path the server takes POSTs on (no leading or trailing /)", required=True,
                           default="contentListener", validator=_base_path),
        PropertyDescriptor("Listening Port", "The port to listen on (0: any free port)", required=True,
                           validator=port_validator),
        PropertyDescriptor("Listening Port for Health Check Requests", "A second port answering only GET and HEAD "
                           "on <Base Path>/healthcheck (one-way TLS when the main port uses TLS)", validator=port_validator),
        PropertyDescriptor("SSL Context Service", "Serves HTTPS with this service's key and trust",
                           service=SSLContextService),
        PropertyDescriptor("HTTP Protocols", "Application protocols over TLS: HTTP/1.1 only here", required=True,
                           default=HTTP_1_1, allowable_values=(HTTP_1_1, H2_HTTP_1_1, H2)),
        PropertyDescriptor("Client Authentication", "Whether TLS clients must show a certificate (AUTO: required "
                           "when the SSL Context Service trusts some authority)", default="AUTO",
                           allowable_values=CLIENT_AUTH_VALUES),
        PropertyDescriptor("Authorized Subject DN Pattern", "A client certificate's subject must match this (else 403)",
                           required=True, default=".*", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Authorized Issuer DN Pattern", "A client certificate's issuer must match this (else 403)",
                           default=".*", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Max Unconfirmed Flowfile Time", "How long a held request (x-prefer-acknowledge-uri) "
                           "waits for its DELETE before it is dropped", required=True, default="60 secs",
                           validator=validators.DURATION),
        PropertyDescriptor("HTTP Headers for Attributes", "Request headers whose name this regular expression "
                           "matches (whole) become attributes of that name", validator=REGEX_VALIDATOR),
        PropertyDescriptor("Request Header Maximum Size", "The longest request line or header taken", required=True,
                           default="8 KB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Return Code", "The status answered once the FlowFiles are committed", default="200",
                           validator=validators.NON_NEGATIVE_INTEGER),
        PropertyDescriptor("Multipart Request Max Size", "The largest multipart/form-data request taken (else 413)",
                           required=True, default="1 MB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Multipart Read Buffer Size", "Accepted for NiFi's sake: parts are spooled to disk past "
                           "1 MB", required=True, default="512 KB", validator=validators.DATA_SIZE),
        PropertyDescriptor("Record Reader", "Reads a plain body's records (not a multipart or FlowFile Stream v3 "
                           "body), which Record Writer writes as the FlowFile's content", service=RecordReaderFactory),
        PropertyDescriptor("Record Writer", "Writes the records Record Reader read (required with it)",
                           service=RecordSetWriterFactory),
    )
    SUCCESS = Relationship("success", "The FlowFiles received")
    relationships = (SUCCESS,)
    NIFI_TYPE = "org.apache.nifi.processors.standard.ListenHTTP"
    NIFI_PROPERTY_NAMES = {
        "health-check-port": "Listening Port for Health Check Requests",
        "Authorized DN Pattern": "Authorized Subject DN Pattern",
        "authorized-issuer-dn-pattern": "Authorized Issuer DN Pattern",
        "multipart-request-max-size": "Multipart Request Max Size",
        "multipart-read-buffer-size": "Multipart Read Buffer Size",
        "client-authentication": "Client Authentication",
        "HTTP Headers to receive as Attributes (Regex)": "HTTP Headers for Attributes",
        "record-reader": "Record Reader", "record-writer": "Record Writer",
    }
    #: NiFi 2 drops Max Data to Receive per Second when it loads a flow; the thread pool is Jetty's
    NIFI_IGNORED = ("Max Data to Receive per Second", "max-thread-pool-size", "Maximum Thread Pool Size")

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        if values.get("HTTP Protocols", HTTP_1_1) != HTTP_1_1 and values.get("SSL Context Service"):
            problems.append("property 'HTTP Protocols' must be HTTP_1_1: HTTP/2 is not served here")
        if values.get("Record Reader") and not values.get("Record Writer"):
            problems.append("property 'Record Writer' is required when 'Record Reader' is set")
        health = values.get("Listening Port for Health Check Requests")
        if health and health.strip() == values.get("Listening Port", "").strip() and health.strip() != "0":
            problems.append("property 'Listening Port for Health Check Requests' must differ from 'Listening Port'")
        return problems

    # ------------------------------------------------------------------ lifecycle
    def on_scheduled(self, context: ProcessContext) -> None:
        self._name = context.name
        self._flowing = 0   # how many requests this task's last trigger took
        self._base = "/" + (context.property("Base Path").evaluate() or "")
        self._base = self._base.rstrip("/") or ""
        self._subject = re.compile(context.property("Authorized Subject DN Pattern").evaluate() or ".*")
        self._issuer = re.compile(context.property("Authorized Issuer DN Pattern").evaluate() or ".*")
        headers = context.property("HTTP Headers for Attributes").evaluate()
        self._headers = re.compile(headers) if headers else None
        self._return_code = context.property("Return Code").as_int() or 200
        self._multipart_max = context.property("Multipart Request Max Size").as_data_size() or 1024 * 1024
        self._hold_time = context.property("Max Unconfirmed Flowfile Time").as_duration() or 60.0
        self._records = None
        if context.property("Record Reader").is_set:
            self._records = (context.service("Record Reader", RecordReaderFactory),
                             context.service("Record Writer", RecordSetWriterFactory))
        key = (context.name, context.property("Listening Port").evaluate())
        with _SERVING_LOCK:
            owner = _SERVING.get(key) if context.concurrent_tasks > 1 else None
            if owner is not None:   # another task of this processor in this process serves the port
                owner._users += 1
                self._server, self._key = owner, key
                return
            self._start_server(context)
            self._server, self._key, self._users = self, key, 1
            if context.concurrent_tasks > 1:
                _SERVING[key] = self

    def _start_server(self, context: ProcessContext) -> None:
        # aiohttp (and the TLS helpers) load only for flows that listen: every executor imports this module
        from flowactors.sdk import http_server

        self._inbox: deque[_Received] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)   # notified once ``_wanted`` requests wait
        self._wanted = 1
        self._room = True
        self._holds: dict[str, _Received] = {}
        tls = None
        if context.property("SSL Context Service").is_set:
            service = context.service("SSL Context Service", SSLContextService)
            tls = http_server.server_tls(service, context.property("Client Authentication").evaluate() or "AUTO")
        sites = [http_server.Site(None, int(context.property("Listening Port").evaluate() or 0), tls)]
        health = context.property("Listening Port for Health Check Requests").evaluate()
        if health:
            health_tls = None
            if tls is not None:   # one-way TLS on the health port, as NiFi
                health_tls = http_server.server_tls(service, "NONE")
            sites.append(http_server.Site(None, int(health), health_tls))
        header_size = context.property("Request Header Maximum Size").as_data_size() or 8192
        self.listener: HttpListener = http_server.HttpListener(context.name, self._app, sites, header_size).start()

    @property
    def port(self) -> int:
        """The port the server listens on (the one chosen when Listening Port is 0)."""
        return self._server.listener.sites[0].bound

    @property
    def health_port(self) -> int | None:
        sites = self._server.listener.sites
        return sites[1].bound if len(sites) > 1 else None

    def on_stopped(self, context: ProcessContext) -> None:
        server = getattr(self, "_server", None)
        if server is None:
            return
        del self._server
        with _SERVING_LOCK:
            server._users -= 1
            last = server._users == 0
            if last:
                _SERVING.pop(server._key, None)
        if last:   # else the other tasks of the processor go on taking requests
            server._stop_server()

    def _stop_server(self) -> None:
        """Answer 503 to what waits, close the sockets, drop what was held."""
        listener = self.listener
        with self._lock:
            self._room = False   # nothing more is taken in
            waiting = self._drain()
        for received in waiting:
            self._answer(received, 503, "ListenHTTP is stopping")
        listener.stop()
        for held in self._holds.values():   # the loop that held them has ended
            held.close()
        self._holds.clear()
        del self.listener

    # ------------------------------------------------------------------ the server's side
    def _app(self) -> "web.Application":
        from aiohttp import web

        app = web.Application(client_max_size=0)
        app.router.add_route("*", self._base or "/", self._on_base)
        app.router.add_route("*", f"{self._base}/healthcheck", self._on_health)
        app.router.add_route("*", f"{self._base}/holds/{{hold}}", self._on_hold)
        return app

    def _is_main_port(self, request: "web.Request") -> bool:
        sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
        return bool(sockname) and sockname[1] == self.listener.sites[0].bound

    async def _on_health(self, request: "web.Request") -> "web.StreamResponse":
        from aiohttp import web

        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="Method Not Allowed")
        return web.Response(status=200, text="OK")

    async def _on_base(self, request: "web.Request") -> "web.StreamResponse":
        from aiohttp import web

        if not self._is_main_port(request):
            return web.Response(status=404, text="Not Found")
        if request.method == "HEAD":
            return web.Response(status=200, headers=HEAD_HEADERS)
        if request.method == "CONNECT":
            return web.Response(status=400, text="Bad Request")
        if request.method != "POST":
            return web.Response(status=405, text="Method Not Allowed")
        names, refused = self._authorized(request)
        if refused is not None:
            return refused
        if not self._room:
            return web.Response(status=503, text=_NO_ROOM)
        started = time.monotonic()
        try:
            received = await self._read(request, names)
        except Exception as err:
            return web.Response(status=_status_of(err), text=f"the request could not be read: {err}")
        received.started = started
        if request.headers.get("x-prefer-acknowledge-uri", "").lower() == "true":
            return self._hold(received)
        status, text = await self._hand_over(received)
        return web.Response(status=status, text=text)

    def _authorized(self, request: "web.Request") -> tuple[tuple[str, str], "web.Response | None"]:
        """The client's (subject, issuer) names, and a 403 answer when the patterns refuse them."""
        from aiohttp import web

        from flowactors.sdk.http_server import NO_CERTIFICATE, certificate_names

        names = certificate_names(request)
        if names is None:
            return NO_CERTIFICATE, None
        if not self._subject.fullmatch(names[0]):
            log.warning("%s: refused %s: subject %r not authorized", self._name, request.remote, names[0])
            return names, web.Response(status=403, text="not allowed based on subject dn")
        if not self._issuer.fullmatch(names[1]):
            log.warning("%s: refused %s: issuer %r not authorized", self._name, request.remote, names[1])
            return names, web.Response(status=403, text="not allowed based on issuer dn")
        return names, None

    async def _read(self, request: "web.Request", names: tuple[str, str]) -> _Received:
        """The request's body as FlowFile contents: multipart parts, a v3 stream, or the body whole."""
        import asyncio

        from flowactors.sdk.http_server import read_parts, small_body, spool_body

        content_type = request.headers.get("Content-Type", "")
        attributes = self._request_attributes(request, names)
        details = f"Remote DN={names[0]}, Issuer DN={names[1]}"
        if "multipart/form-data" in content_type:
            parts = await read_parts(request, self._multipart_max)
            return _Received([(p.content, p.attributes(i, len(parts))) for i, p in enumerate(parts)], attributes,
                             str(request.url), details, packaged=False)
        media_type = content_type.split(";")[0].strip().lower()
        if media_type.startswith("application/flowfile") and media_type != FLOWFILE_V3_MIME_TYPE:
            raise _Refused(415, f"{content_type} (a FlowFile package older than v3) is not read here")
        packaged = media_type == FLOWFILE_V3_MIME_TYPE
        gzipped = request.headers.get("flowfile-gzipped", "").lower() == "true"
        body = await small_body(request)   # bytes: a small plain body is written to the session in one call
        if body is None:
            body = await spool_body(request)
        elif packaged or gzipped:   # read as a stream
            body = io.BytesIO(body)
        if gzipped:
            body = await asyncio.to_thread(_gunzip, body)
        return _Received([(body, {})], attributes, str(request.url), details, packaged=packaged)

    def _request_attributes(self, request: "web.Request", names: tuple[str, str]) -> dict[str, str]:
        from flowactors.sdk.http_server import headers_as_sent, plain_address

        attributes = {}
        if self._headers is not None:
            attributes = {k: v for k, v in headers_as_sent(request).items() if self._headers.fullmatch(k)}
        attributes.update({"restlistener.remote.source.host": plain_address(request.remote),
                           "restlistener.request.uri": request.path, "restlistener.remote.user.dn": names[0],
                           "restlistener.remote.issuer.dn": names[1]})
        if request.headers.get("filename"):
            attributes["filename"] = request.headers["filename"]
        if request.headers.get("uuid"):
            attributes["uuid"] = request.headers["uuid"]   # the sender's id, for provenance (never the FlowFile's)
        return attributes

    async def _hand_over(self, received: _Received) -> tuple[int, str]:
        """Put the request in the inbox and wait for the (status, text) its trigger gives (its
        commit's); 503 when there is no room, or no trigger takes it within ``HANDOVER_WAIT``."""
        import asyncio

        loop = asyncio.get_running_loop()
        received.future = loop.create_future()
        with self._lock:
            if not self._room:
                received.close()
                return 503, _NO_ROOM
            self._inbox.append(received)
            if len(self._inbox) >= self._wanted:
                self._arrived.notify_all()
        timer = loop.call_later(HANDOVER_WAIT, self._abandon, received)
        try:
            return await received.future
        finally:
            timer.cancel()

    def _abandon(self, received: _Received) -> None:
        """``HANDOVER_WAIT`` passed: a request no trigger took is answered 503 (one taken meanwhile
        is its commit's to answer)."""
        from flowactors.sdk.http_server import settle

        with self._lock:
            if received.state != "waiting":
                return
            received.state = "abandoned"
            received.close()
        settle(received.future, (503, "no trigger took the request in time (is ListenHTTP running?)"))

    def _hold(self, received: _Received) -> "web.Response":
        """Keep the request's FlowFiles-to-be until the client DELETEs the hold (old PostHTTP's
        two-phase protocol); nothing is committed until then."""
        from aiohttp import web

        self._expire_holds()
        hold = str(uuid.uuid4())
        self._holds[hold] = received
        location = f"{self._base}/holds/{hold}"
        return web.Response(status=303, text=location,
                            headers={"Location": location, "x-location-uri-intent": "flowfile-hold"})

    def _expire_holds(self) -> None:
        cutoff = time.monotonic() - self._hold_time
        for hold in [h for h, r in self._holds.items() if r.started < cutoff]:
            log.warning("%s: hold %s was never confirmed; dropping what it held", self._name, hold)
            self._holds.pop(hold).close()

    async def _on_hold(self, request: "web.Request") -> "web.StreamResponse":
        from aiohttp import web

        if not self._is_main_port(request):
            return web.Response(status=404, text="Not Found")
        if request.method != "DELETE":
            return web.Response(status=405, text="Method Not Allowed")
        names, refused = self._authorized(request)
        if refused is not None:
            return refused
        self._expire_holds()
        received = self._holds.pop(request.match_info["hold"], None)
        if received is None:
            return web.Response(status=404, text="no such hold")
        received.confirms_hold = True
        status, text = await self._hand_over(received)
        return web.Response(status=status, text=text)

    # ------------------------------------------------------------------ the trigger's side
    def on_trigger(self, context: ProcessContext, session) -> None:
        server = self._server   # this instance, or the task of this processor whose server is shared
        if not server._set_room(bool(session.available_relationships())):
            context.yield_()
            return
        taken = server._take(REQUESTS_PER_TRIGGER, self._flowing)
        self._flowing = len(taken)
        if not taken:
            return
        accepted: list[_Received] = []
        try:
            for received in taken:
                if self._into_session(context, session, received):
                    accepted.append(received)
        except BaseException:
            for received in taken:
                server._answer(received, 500, "the request could not be taken in (see the processor's log)")
            raise
        finally:
            for received in taken:
                received.close()
        session.commit_async(on_success=lambda: server._answer_all(accepted, self._return_code),
                             on_failure=lambda err: server._commit_failed(accepted, err))
        server._set_room(bool(session.available_relationships()))

    def _set_room(self, room: bool) -> bool:
        """Note whether success has room; without, every request waiting is answered 503."""
        with self._lock:
            self._room = room
            waiting = [] if room else self._drain()
        for received in waiting:
            self._answer(received, 503, _NO_ROOM)
        return room

    def _drain(self) -> list[_Received]:
        """Every request still in the inbox, marked abandoned (call with the lock held)."""
        drained = []
        while self._inbox:
            received = self._inbox.popleft()
            if received.state == "waiting":
                received.state = "abandoned"
                received.close()
                drained.append(received)
        return drained

    def _take(self, most: int, hoped: int) -> list[_Received]:
        """Up to ``most`` waiting requests, marked taken. ``hoped``: how many the task's last
        trigger took (0: none); with some, it waits up to ``FLOWING_WAIT`` for a first request and
        then up to ``GATHER_WAIT`` for ``hoped`` of them (see both)."""
        inbox = self._inbox
        with self._lock:
            if hoped:
                self._wanted = 1
                if self._arrived.wait_for(lambda: inbox, FLOWING_WAIT) and len(inbox) < hoped:
                    self._wanted = min(hoped, most)
                    self._arrived.wait_for(lambda: len(inbox) >= self._wanted, GATHER_WAIT)
                self._wanted = 1
            taken: list[_Received] = []
            while inbox and len(taken) < most:
                received = inbox.popleft()
                if received.state == "waiting":
                    received.state = "taken"
                    taken.append(received)
        return taken

    def _into_session(self, context: ProcessContext, session, received: _Received) -> bool:
        """Make the request's FlowFiles and transfer them to success; a body that is not what its
        Content-Type says is answered 400 and leaves nothing in the session (False)."""
        made: list[tuple[Any, str | None]] = []   # each FlowFile, and the sender's id of it
        header_id = received.attributes.get("uuid")
        try:
            for content, own in received.parts:
                if received.packaged:
                    for packaged in (reader := FlowFileStreamReader(content)):
                        made.append((self._flowfile(session, received, packaged.attributes,
                                                    lambda out: _copy_reader(reader, out)),
                                     header_id or packaged.attributes.get("uuid")))
                else:
                    made.append((self._flowfile(session, received, own, content), header_id))
                    if self._records is not None and not own:   # a plain body (not a part) of records
                        made[-1] = (self._convert(session, made[-1][0]), header_id)
        except (PackageError, _BadRecords) as err:
            log.warning("%s: a body from %s could not be read: %s", context.name,
                        received.attributes.get("restlistener.remote.source.host"), err)
            for flowfile, _ in made:
                session.remove(flowfile)
            self._server._answer(received, getattr(err, "status", 400), str(err))
            return False
        duration = int((time.monotonic() - received.started) * 1000)
        for flowfile, sender in made:
            session.provenance.receive(flowfile, received.uri, details=received.details, duration=duration,
                                       source_system_flowfile_id=f"urn:nifi:{sender}" if sender else None)
            session.transfer(flowfile, self.SUCCESS)
        return True

    def _convert(self, session, flowfile) -> Any:
        """``flowfile``'s records written by Record Writer; ``_BadRecords`` when they cannot be read
        or written (the request's problem: 400)."""
        # the record machinery (Arrow) loads only for a ListenHTTP given a Record Reader
        from flowactors.processors.records._io import is_flowfile_error
        from flowactors.processors.records.convert import convert
        from flowactors.sdk.records import SchemaNotFoundError

        try:
            return convert(session, flowfile, *self._records)[0]
        except Exception as err:
            if not is_flowfile_error(err):
                raise
            bad = _BadRecords(f"its records could not be read: {err}")
            bad.status = 500 if isinstance(err, SchemaNotFoundError) else 400   # as NiFi: the schema is ours to find
            raise bad from err

    @staticmethod
    def _flowfile(session, received: _Received, own: Mapping[str, str], content) -> Any:
        """A FlowFile with ``content`` (bytes, a file read to its end, or what a function
        ``write(out)`` writes): the packaged (or part's) attributes, then the request's (a packaged
        filename wins over the request's filename header)."""
        if isinstance(content, bytes):
            flowfile = session.write_bytes(session.create(), content)
        else:
            flowfile = session.write(session.create(), content if callable(content)
                                     else lambda out: shutil.copyfileobj(content, out, CHUNK))
        request = {k: v for k, v in received.attributes.items() if k != "uuid"}
        if own.get("filename"):
            request.pop("filename", None)
        return session.put_all_attributes(flowfile, {**{k: v for k, v in own.items() if k != "uuid"}, **request})

    def _answer(self, received: _Received, status: int, text: str = "") -> None:
        from flowactors.sdk.http_server import settle

        if received.future is not None:
            self.listener.call_soon(settle, received.future, (status, text))

    def _answer_all(self, accepted: list[_Received], status: int) -> None:
        """Answer ``status`` to every request of a commit (200 to a hold's DELETE): one call into
        the server's loop."""
        from flowactors.sdk.http_server import settle_all

        futures = [received.future for received in accepted
                   if received.future is not None and not received.confirms_hold]
        confirmed = [received.future for received in accepted if received.confirms_hold]
        if confirmed:   # rare: a legacy PostHTTP's holds
            self.listener.call_soon(settle_all, confirmed, (200, ""))
        if futures:
            self.listener.call_soon(settle_all, futures, (status, ""))

    def _commit_failed(self, accepted: list[_Received], err: BaseException) -> None:
        log.error("%s: the commit failed, answering 500 to %d request(s): %s", self._name, len(accepted), err)
        for received in accepted:
            self._answer(received, 500, f"the FlowFiles could not be committed: {err}")


class _BadRecords(ValueError):
    """A body whose records the Record Reader could not read (or the writer write); ``status``
    the one to answer."""

    status = 400


class _Refused(Exception):
    """A request this processor does not take, with the status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _status_of(err: Exception) -> int:
    from flowactors.sdk.http_server import BodyTooLarge

    if isinstance(err, _Refused):
        return err.status
    if isinstance(err, BodyTooLarge):
        return 413
    return 400


def _copy_reader(reader: FlowFileStreamReader, out) -> None:
    while chunk := reader.read(CHUNK):
        out.write(chunk)


def _gunzip(body) -> Any:
    """``body`` (a gzip stream) gunzipped into a second spool a chunk at a time; ``body`` closed."""
    import gzip

    from flowactors.sdk.http_server import spool

    plain = spool()
    try:
        with body, gzip.GzipFile(fileobj=body, mode="rb") as unzipped:
            shutil.copyfileobj(unzipped, plain, CHUNK)
    except BaseException:
        plain.close()
        raise
    plain.seek(0)
    return plain
